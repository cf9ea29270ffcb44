//! Which DLQ entries a command reads or acts on, triaged one at a time as they stream.

use super::error::{CliError, CliResult};
use crate::store::{Store, StoreError};
use crate::triage::{self, Verdict};

/// Calls `visit` with the verdict of every DLQ entry, in id order, one at a time.
pub fn each_verdict(store: &dyn Store, visit: &mut dyn FnMut(Verdict) -> CliResult) -> CliResult {
    let mut failure: Option<CliError> = None;
    let streamed = store.each_dlq_entry(&mut |(row, events)| {
        visit(triage::triage_events(&row, &events)).map_err(|err| {
            failure = Some(err);
            StoreError::Other("stopped".into())
        })
    });
    match failure {
        Some(err) => Err(err),
        None => streamed.map_err(CliError::from),
    }
}

/// Every DLQ entry `keep` accepts, triaged.
pub fn verdicts(store: &dyn Store, keep: &dyn Fn(&Verdict) -> bool) -> CliResult<Vec<Verdict>> {
    let mut verdicts = Vec::new();
    each_verdict(store, &mut |verdict| {
        if keep(&verdict) {
            verdicts.push(verdict);
        }
        Ok(())
    })?;
    Ok(verdicts)
}
