//! The command line's errors: the library's one error type and exit table
//! ([`crate::exit`]), under the names the commands use.

pub use crate::exit::{
    ExitKind, Failure as CliError, Interrupted, Result as CliResult, exit_kind, most_serious,
};
pub use crate::session::outcome::{exit_for, outcome_exit};

/// How a lab run (repro, sweep) failed, as the command line says it: a store the lab
/// must not touch is a refusal (exit 4), a store's error is the store's.
pub fn lab_failure(err: crate::lab::repro::ReproError) -> CliError {
    use crate::lab::repro::ReproError;
    match err {
        ReproError::Store(store) => store.into(),
        ReproError::NotOurs { .. } => CliError::new(ExitKind::Refused, err.to_string())
            .hint("leave --db out for a scratch store, or name one that holds nothing yet"),
        other => CliError::error(other.to_string()),
    }
}
