//! `unsctl inspect <ID>`: summary, timeline, and the verdict when the row is in the DLQ.

use crate::cli::backend;
use crate::cli::backend::Invocation;
use crate::cli::error::CliResult;
use crate::render::notification::{settled_block, show, view};

/// Show one notification: its state, every event, and the triage verdict
///
/// Example: unsctl --db uns.db inspect n-0192c3d4e5f6
/// Example: unsctl inspect n-0192c3d4e5f6 --follow
#[derive(Debug, clap::Args)]
#[command(verbatim_doc_comment)]
pub struct Args {
    /// The notification id (the DLQ entry id is the same)
    #[arg(value_parser = crate::cli::values::parse_id)]
    pub id: String,
    /// Then print its new events as they are written, until it settles (delivered,
    /// dead-lettered or resolved); JSON: one event per line, then the final document
    #[arg(long, short = 'f')]
    pub follow: bool,
    /// Seconds between looks at the store, with --follow
    #[arg(long, default_value_t = 1.0, requires = "follow")]
    pub interval: f64,
}

pub fn run(global: &Invocation, args: Args) -> CliResult {
    let out = global.output();
    let store = backend::reader(global)?;
    let id = crate::session::ids::expand_id(store.as_ref(), &args.id)?;
    let mut doc = store.notification(&id)?;
    if args.follow {
        let every = crate::cli::follow::interval(args.interval)?;
        out.progress(|| show(&view(doc.clone()), &out))?;
        doc = crate::cli::follow::follow_notification(store.as_ref(), doc, every, &out)?;
        let status = doc.row.status.clone();
        let view = view(doc);
        out.record(&view, || {
            crate::render::output::fit_lines(&settled_block(&view, &out), &out)
        })?;
        // A script waiting on it learns how it ended: 0 only when it was delivered.
        if status.known() != Some(crate::model::Status::Delivered) {
            return Err(crate::cli::error::CliError::error(format!(
                "{} settled {status}, not DELIVERED",
                crate::render::sanitize::clean(&id)
            )));
        }
        return Ok(());
    }
    out.emit(&view(doc))?;
    Ok(())
}
