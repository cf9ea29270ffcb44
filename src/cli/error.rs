//! The command line's errors: the library's one error type and exit table
//! ([`crate::exit`]), under the names the commands use.

pub use crate::exit::{
    ExitKind, Failure as CliError, Interrupted, Result as CliResult, exit_kind, most_serious,
};
pub use crate::session::outcome::{exit_for, outcome_exit};
