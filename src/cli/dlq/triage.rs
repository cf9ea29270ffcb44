//! `unsctl dlq triage`: every DLQ entry's branch, the events that prove it, and the next
//! command. Its JSON is also a plan for `unsctl apply`.

use crate::cli::error::CliResult;
use crate::cli::remediate::AuditArgs;
use crate::cli::selection;
use crate::cli::{GlobalArgs, backend};
use crate::render::output::{Output, print, status};
use crate::render::views;
use crate::store::Store;
use crate::triage::{self, Branch, Verdict};
use std::io::Write;

/// Triage every DLQ entry: RESOLVE, VERIFY or REPLAY, with the events that prove it
///
/// Example: unsctl dlq triage --branch verify
/// Example: unsctl dlq triage -o json > plan.json
/// Example: unsctl dlq triage --interactive
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Only entries of this branch
    #[arg(long, value_parser = parse_branch)]
    pub branch: Option<Branch>,
    /// Walk the entries one by one and decide each (needs a terminal)
    #[arg(long)]
    pub interactive: bool,
    #[command(flatten)]
    pub audit: AuditArgs,
}

fn parse_branch(text: &str) -> Result<Branch, String> {
    text.parse()
}

pub fn run(global: &GlobalArgs, args: Args) -> CliResult {
    let out = global.output();
    let store = backend::reader(global)?;
    if out.json() {
        return triage_json(store.as_ref(), args.branch);
    }
    let verdicts = selection::verdicts(store.as_ref(), &|v| {
        args.branch.is_none_or(|b| b == v.branch)
    })?;
    print_triage(store.as_ref(), &verdicts, &out)
}

/// Streams `{"entries": [...], "summary": {...}}` so a large DLQ is never held at once.
fn triage_json(store: &dyn Store, branch: Option<Branch>) -> CliResult {
    let stdout = std::io::stdout();
    let mut writer = std::io::BufWriter::with_capacity(1 << 16, stdout.lock());
    let mut counts = triage::empty_summary();
    let mut unreadable = 0usize;
    writer.write_all(b"{\n  \"entries\": [")?;
    let mut first = true;
    selection::each_verdict(store, &mut |verdict| {
        if branch.is_some_and(|b| b != verdict.branch) {
            return Ok(());
        }
        *counts.entry(verdict.branch).or_default() += 1;
        if !verdict.notes.is_empty() {
            unreadable += 1;
        }
        writer.write_all(if first { b"\n    " } else { b",\n    " })?;
        first = false;
        let text = serde_json::to_string_pretty(&verdict).map_err(std::io::Error::other)?;
        writer.write_all(text.replace('\n', "\n    ").as_bytes())?;
        Ok(())
    })?;
    writer.write_all(if first { b"],\n" } else { b"\n  ],\n" })?;
    let summary = serde_json::to_string(&counts).map_err(std::io::Error::other)?;
    writer.write_all(format!("  \"summary\": {summary}\n}}\n").as_bytes())?;
    writer.flush()?;
    if first {
        status(&views::empty_dlq(&store.describe()));
    }
    notes_line(unreadable);
    Ok(())
}

fn notes_line(with_notes: usize) {
    if with_notes > 0 {
        status(&format!(
            "{with_notes} entr{} notes on evidence that could not be read (VERIFY; see `notes`)",
            if with_notes == 1 { "y has" } else { "ies have" }
        ));
    }
}

pub fn print_triage(store: &dyn Store, verdicts: &[Verdict], out: &Output) -> CliResult {
    if verdicts.is_empty() {
        status(&views::empty_dlq(&store.describe()));
        return Ok(());
    }
    print(&views::triage_table(verdicts, out))?;
    status(&views::summary_line(verdicts));
    notes_line(verdicts.iter().filter(|v| !v.notes.is_empty()).count());
    if verdicts.iter().any(|v| v.branch == Branch::Verify) {
        status(
            "VERIFY entries need an out-of-band check first: `unsctl inspect <ID>` shows what to look for.",
        );
    }
    Ok(())
}
