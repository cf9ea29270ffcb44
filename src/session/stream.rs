//! Streaming the selected DLQ entries: the store is read and triaged on this thread
//! while another renders, so the two cores share the work and only a few entries are in
//! memory at a time.

use crate::exit::{Failure, Result};
use crate::store::{Selection, Store, StoreError, Triaged};
use std::sync::mpsc::{Receiver, sync_channel};

/// Entries handed to the renderer at a time.
const BATCH: usize = 64;

/// Streams the selected entries that `keep` accepts (at most `limit`) to `render`, which
/// runs on a second thread and receives them in batches, in id order.
pub fn stream<R: Send>(
    store: &dyn Store,
    selection: &Selection,
    keep: &(dyn Fn(&Triaged) -> bool + Sync),
    limit: Option<usize>,
    render: impl FnOnce(Receiver<Vec<Triaged>>) -> Result<R> + Send,
) -> Result<R> {
    std::thread::scope(|scope| {
        let (batches, arriving) = sync_channel::<Vec<Triaged>>(4);
        let renderer = std::thread::Builder::new()
            .name("render".into())
            .spawn_scoped(scope, move || render(arriving))
            .map_err(|err| Failure::error(format!("cannot start the output thread: {err}")))?;
        let mut batch = Vec::with_capacity(BATCH);
        let mut kept = 0usize;
        let read = store.each_triaged(selection, &mut |entry| {
            if !keep(&entry) {
                return Ok(());
            }
            batch.push(entry);
            kept += 1;
            let full = limit.is_some_and(|limit| kept >= limit);
            if batch.len() >= BATCH || full {
                let sent = batches.send(std::mem::replace(&mut batch, Vec::with_capacity(BATCH)));
                if sent.is_err() || full {
                    return Err(StoreError::Stopped);
                }
            }
            Ok(())
        });
        if !batch.is_empty() {
            let _ = batches.send(batch);
        }
        drop(batches);
        let rendered = renderer
            .join()
            .unwrap_or_else(|_| Err(Failure::error("the output thread failed")));
        match read {
            Ok(()) | Err(StoreError::Stopped) => rendered,
            Err(err) => {
                rendered?;
                Err(err.into())
            }
        }
    })
}
