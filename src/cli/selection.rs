//! Which DLQ entries a command reads or acts on, and streaming them: the store is read
//! and triaged on this thread while another renders, so the two cores share the work
//! and only a few entries are in memory at a time.

use super::error::{CliError, CliResult};
use crate::store::{Selection, Store, StoreError, Triaged};
use crate::triage::{Branch, Verdict};
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
    render: impl FnOnce(Receiver<Vec<Triaged>>) -> CliResult<R> + Send,
) -> CliResult<R> {
    std::thread::scope(|scope| {
        let (batches, arriving) = sync_channel::<Vec<Triaged>>(4);
        let renderer = std::thread::Builder::new()
            .name("render".into())
            .spawn_scoped(scope, move || render(arriving))
            .map_err(|err| CliError::error(format!("cannot start the output thread: {err}")))?;
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
            .unwrap_or_else(|_| Err(CliError::error("the output thread failed")));
        match read {
            Ok(()) | Err(StoreError::Stopped) => rendered,
            Err(err) => {
                rendered?;
                Err(err.into())
            }
        }
    })
}

/// Every selected DLQ entry `keep` accepts, triaged, in memory (the walk, the bulk
/// mutations: they act on the exact list they print).
pub fn verdicts(
    store: &dyn Store,
    selection: &Selection,
    keep: &(dyn Fn(&Verdict) -> bool + Sync),
    limit: Option<usize>,
) -> CliResult<Vec<Verdict>> {
    stream(store, selection, &|t| keep(&t.verdict), limit, |arriving| {
        Ok(arriving.into_iter().flatten().map(|t| t.verdict).collect())
    })
}

/// [`verdicts`], each with what its message was, for the DLQ's columns.
pub fn listed(
    store: &dyn Store,
    selection: &Selection,
    keep: &(dyn Fn(&Verdict) -> bool + Sync),
    limit: Option<usize>,
) -> CliResult<Vec<Listed>> {
    stream(store, selection, &|t| keep(&t.verdict), limit, |arriving| {
        Ok(arriving
            .into_iter()
            .flatten()
            .map(|t| Listed {
                message: t.message(),
                verdict: t.verdict,
            })
            .collect())
    })
}

/// An entry as the DLQ lists it: its verdict and what its message was.
#[derive(Debug, Clone)]
pub struct Listed {
    pub verdict: Verdict,
    pub message: crate::model::payload::Message,
}

impl Listed {
    /// Its row of the DLQ's columns, the id shown as `id`.
    pub fn cells(&self, id: &str) -> Vec<crate::render::table::Text> {
        crate::render::columns::cells(
            &crate::render::columns::dlq(),
            &crate::render::columns::DlqRow {
                verdict: &self.verdict,
                id,
                message: &self.message,
            },
        )
    }
}

/// Keeps entries of `branch` (all when None).
pub fn of_branch(branch: Option<Branch>) -> impl Fn(&Verdict) -> bool {
    move |verdict| branch.is_none_or(|b| b == verdict.branch)
}
