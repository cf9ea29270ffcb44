//! `unsctl inspect <ID>`: summary, timeline, and the verdict when the row is in the DLQ.

use super::error::CliResult;
use super::{GlobalArgs, backend};
use crate::api::NotificationDoc;
use crate::render::output::print;
use crate::render::views;
use crate::triage::{self, Verdict};
use serde::Serialize;

/// Show one notification: its state, every event, and the triage verdict
///
/// Example: unsctl --db uns.db inspect n-0192c3d4e5f6
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The notification id (the DLQ entry id is the same)
    #[arg(value_parser = super::values::parse_id)]
    pub id: String,
}

/// The API's notification document plus the verdict when in the DLQ.
#[derive(Debug, Serialize)]
pub struct InspectView {
    #[serde(flatten)]
    pub doc: NotificationDoc,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub triage: Option<Verdict>,
}

pub fn view(doc: NotificationDoc) -> InspectView {
    let triage = doc
        .row
        .dead_letter
        .then(|| triage::triage_events(&doc.row, &doc.events));
    InspectView { doc, triage }
}

pub fn run(global: &GlobalArgs, args: Args) -> CliResult {
    let out = global.output();
    let store = backend::reader(global)?;
    let view = view(store.notification(&args.id)?);
    if out.json() {
        crate::render::output::print_json(&view)?;
        return Ok(());
    }
    let mut text = vec![views::summary_block(&view.doc.row, &out), String::new()];
    text.push(format!(
        "Timeline ({} events; ! marks what this incident turns on)",
        view.doc.events.len()
    ));
    text.push(views::timeline(&view.doc.events, &out));
    let verified = views::verification_lines(&view.doc.events);
    if !verified.is_empty() {
        text.push(String::new());
        text.push("Verified out of band (the providers' own records):".into());
        text.extend(verified.into_iter().map(|line| format!("  {line}")));
    }
    if let Some(verdict) = &view.triage {
        text.push(String::new());
        text.push(views::verdict_block(verdict, &out));
    } else {
        text.push(String::new());
        text.push(format!(
            "Not in the DLQ (status {}): nothing to triage.",
            view.doc.row.status
        ));
    }
    print(&text.join("\n"))?;
    Ok(())
}
