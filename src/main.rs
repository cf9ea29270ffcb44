//! The `unsctl` binary: parse, run, map the outcome to an exit code.

// Functions stay short enough to read at once, and no user path can panic on a
// missing value: every `unwrap` or `expect` outside the tests is a bug.
#![warn(clippy::too_many_lines)]
#![cfg_attr(not(test), warn(clippy::unwrap_used, clippy::expect_used))]

use clap::Parser;
use std::io::{IsTerminal, Write};
use std::process::ExitCode;
use unsctl::cli::{self, error::ExitKind};
use unsctl::render::output::status;
use unsctl::render::sanitize::{clean, clip};

/// The most characters of one line of a usage error that are shown.
const MAX_USAGE_LINE: usize = 400;

fn main() -> ExitCode {
    let parsed = match cli::Cli::try_parse() {
        Ok(parsed) => parsed,
        Err(err) if !err.use_stderr() => {
            // --help, --version: our own text, printed as clap styles it.
            let _ = err.print();
            return ExitCode::SUCCESS;
        }
        Err(err) => {
            // A usage error quotes the argument as typed, which may hold control bytes
            // pasted from anywhere, or be huge: shown escaped and clipped, without style.
            let mut stderr = std::io::stderr().lock();
            for line in err.render().to_string().lines() {
                let _ = writeln!(stderr, "{}", clip(line, MAX_USAGE_LINE));
            }
            return ExitCode::from(ExitKind::Usage.code() as u8);
        }
    };
    let ran = match cli::run(parsed) {
        Ok(cli::Next::Screen(settings)) => unsctl::tui::run(*settings),
        Ok(cli::Next::Done) => Ok(()),
        Err(err) => Err(err),
    };
    match ran {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) if err.kind == ExitKind::Closed => ExitCode::SUCCESS,
        Err(err) if err.kind == ExitKind::Interrupted => {
            // The account of what was done; the cursor shown again, in case a progress
            // bar had hidden it.
            if std::io::stderr().is_terminal() {
                let _ = std::io::stderr().write_all(b"\x1b[?25h");
            }
            if !err.message.is_empty() {
                let _ = writeln!(std::io::stderr(), "\n{}", clean(&err.message));
            }
            let _ = std::io::stdout().flush();
            ExitCode::from(ExitKind::Interrupted.code() as u8)
        }
        Err(err) => {
            // Messages can quote store or server text: never let it reach the terminal raw.
            status(&format!("error: {}", clean(&err.message)));
            for detail in &err.details {
                status(&format!("  {}", clean(detail)));
            }
            for cause in &err.causes {
                status(&format!("  Caused by: {}", clean(cause)));
            }
            for hint in &err.hints {
                status(&format!("hint: {}", clean(hint)));
            }
            ExitCode::from(err.kind.code() as u8)
        }
    }
}
