//! `unsctl note`: an operator's note about the incident, kept in the store beside the
//! events and audited as every act is; one that says it is the fix gives the report its
//! fix time.

use crate::api::{NoteRequest, NoteRow};
use crate::cli::backend::{self, Invocation};
use crate::cli::error::{CliError, CliResult};
use crate::render::output::{Output, View};
use serde::Serialize;

/// Write down what happened, for the record and the report
///
/// A note changes no entry: it is kept, with who wrote it and when, in the store's
/// notes (append-only, as the events are), and listed in the report's key moments and
/// the screen's audit. With --fixed (now) or --fixed-at TIME it records when the fix
/// went in, which the report's summary then names.
///
/// Example: unsctl note "relay restarted with a 120s data timeout" --fixed --ticket INC-42
/// Example: unsctl note "the fix went in" --fixed-at 2026-11-29T04:12:00Z
#[derive(Debug, clap::Args)]
#[command(verbatim_doc_comment)]
pub struct Args {
    /// What to keep (at most 2,000 characters)
    pub text: String,
    /// The note records the fix, which went in now
    #[arg(long, conflicts_with = "fixed_at")]
    pub fixed: bool,
    /// The note records the fix, which went in at TIME (RFC 3339 or a duration back
    /// from now, such as 10m)
    #[arg(long, value_name = "TIME")]
    pub fixed_at: Option<String>,
    /// Incident or ticket reference
    #[arg(long, value_parser = crate::cli::values::parse_said)]
    pub ticket: Option<String>,
    /// Who is writing (default: UNS_OPERATOR, then the account name)
    #[arg(long, value_parser = crate::cli::values::parse_said)]
    pub operator: Option<String>,
}

pub fn run(global: &Invocation, args: Args) -> CliResult {
    crate::remediation::note::text(&args.text).map_err(CliError::usage)?;
    let now = crate::clock::Clock::now(&crate::clock::SystemClock);
    let fixed_at = match args.fixed_at.as_deref() {
        Some(text) => {
            let at = crate::clock::parse_instant(text, now)
                .map_err(|err| CliError::usage(format!("--fixed-at: {err}")))?;
            if at > now {
                return Err(CliError::usage(format!(
                    "--fixed-at {}: that is still to come; a fix is noted once it went in",
                    crate::render::sanitize::clean(text)
                )));
            }
            Some(at)
        }
        None => None,
    };
    let request = NoteRequest {
        operator: Some(global.operator(args.operator.as_deref())?),
        text: args.text,
        ticket: args.ticket,
        fixed: args.fixed,
        fixed_at,
        via: None,
    };
    let store = backend::writer(global)?;
    let row = store.note(&request)?;
    let out = global.output();
    out.emit(&Written {
        row: &row,
        place: store.describe(),
    })?;
    Ok(())
}

/// The note as kept; its JSON is the stored note.
struct Written<'r> {
    row: &'r NoteRow,
    place: String,
}

impl Serialize for Written<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.row.serialize(serializer)
    }
}

impl View for Written<'_> {
    fn show(&self, _out: &Output) -> std::io::Result<()> {
        crate::render::output::print(&crate::render::views::note_written(self.row, &self.place))
    }
}
