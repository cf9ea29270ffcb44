//! Streaming the selected DLQ entries: the store is read and triaged on this thread
//! while another renders, so the two cores share the work and only a few entries are in
//! memory at a time.

use crate::exit::{Failure, Result};
use crate::store::{Selection, Store, StoreError, Triaged};
use std::sync::mpsc::Receiver;

/// Streams the selected entries that `keep` accepts (at most `limit`) to `render`, which
/// runs on a second thread and receives them in batches, in id order.
pub fn stream<R: Send>(
    store: &dyn Store,
    selection: &Selection,
    keep: &(dyn Fn(&Triaged) -> bool + Sync),
    limit: Option<usize>,
    render: impl FnOnce(Receiver<Vec<Triaged>>) -> Result<R> + Send,
) -> Result<R> {
    let mut kept = 0usize;
    let (read, rendered) = crate::handoff::beside("render", render, |emit| {
        store.each_triaged(selection, &mut |entry| {
            if !keep(&entry) {
                return Ok(());
            }
            kept += 1;
            if !emit(entry) || limit.is_some_and(|limit| kept >= limit) {
                return Err(StoreError::Stopped);
            }
            Ok(())
        })
    })
    .map_err(|lost| Failure::error(lost.to_string()))?;
    match read {
        Ok(()) | Err(StoreError::Stopped) => rendered,
        Err(err) => {
            rendered?;
            Err(err.into())
        }
    }
}
