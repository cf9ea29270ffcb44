//! The `unsctl` binary: parse, run, map the outcome to an exit code.

use clap::Parser;
use std::process::ExitCode;
use unsctl::cli::{self, error::ExitKind};
use unsctl::render::output::status;
use unsctl::render::sanitize::clean;

fn main() -> ExitCode {
    let parsed = match cli::Cli::try_parse() {
        Ok(parsed) => parsed,
        Err(err) => {
            let code = if err.use_stderr() {
                ExitKind::Usage.code()
            } else {
                0
            };
            let _ = err.print();
            return ExitCode::from(code as u8);
        }
    };
    match cli::run(parsed) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) if err.kind == ExitKind::Closed => ExitCode::SUCCESS,
        Err(err) => {
            // Messages can quote store or server text: never let it reach the terminal raw.
            status(&format!("error: {}", clean(&err.message)));
            for hint in &err.hints {
                status(&format!("hint: {}", clean(hint)));
            }
            ExitCode::from(err.kind.code() as u8)
        }
    }
}
