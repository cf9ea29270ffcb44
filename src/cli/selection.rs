//! Which DLQ entries a command reads or acts on, and streaming them: the store is read
//! and triaged on this thread while another renders, so the two cores share the work
//! and only a few entries are in memory at a time.

use super::error::CliResult;
use crate::store::{Selection, Store};
use crate::triage::{Branch, Verdict};

pub use crate::session::stream::stream;

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
