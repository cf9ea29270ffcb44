//! `unsctl dlq list|triage`: every DLQ entry with its branch and next command.

use super::error::{CliError, CliResult};
use super::{GlobalArgs, backend};
use crate::render::output::{Output, print, status, table, table_text};
use crate::render::views;
use crate::store::Store;
use crate::triage::{self, Branch, Verdict};
use serde::Serialize;
use std::collections::BTreeMap;
use std::io::Write;

#[derive(Debug, clap::Subcommand)]
pub enum Command {
    List(ListArgs),
    Triage(TriageArgs),
    Resolve(ResolveArgs),
}

/// Resolve DLQ entries: they leave the DLQ and keep their history (dry run unless --confirm)
///
/// Example: unsctl --db uns.db dlq resolve n-0192c3d4 --confirm
#[derive(Debug, clap::Args)]
pub struct ResolveArgs {
    /// The entries to resolve
    #[arg(required = true)]
    pub ids: Vec<String>,
    /// Attest that you checked out of band and the message arrived (VERIFY entries)
    #[arg(long)]
    pub verified_delivered: bool,
    #[command(flatten)]
    pub audit: super::remediate::AuditArgs,
    #[command(flatten)]
    pub confirm: super::remediate::ConfirmArgs,
}

fn resolve(global: &GlobalArgs, args: ResolveArgs) -> CliResult {
    use super::remediate::{self, Intent};
    remediate::check_force(&args.audit)?;
    let out = global.output();
    let store = backend::for_action(global, args.confirm.confirm)?;
    let attestation = args
        .verified_delivered
        .then_some("verified out of band: delivered");
    let request = remediate::base_request(&args.audit, attestation);
    let intents = args
        .ids
        .iter()
        .map(|id| {
            remediate::verdict(store.as_ref(), id).map(|verdict| {
                Intent::new(
                    crate::store::sqlite::Action::Resolve,
                    verdict,
                    request.clone(),
                )
            })
        })
        .collect::<CliResult<Vec<_>>>()?;
    remediate::carry_out(store.as_ref(), intents, &args.confirm, &out, "resolve")
}

/// List the DLQ: each entry's state, error, branch and next command
///
/// Example: unsctl --db uns.db dlq list
#[derive(Debug, clap::Args)]
pub struct ListArgs {}

/// Triage every DLQ entry: RESOLVE, VERIFY or REPLAY, with the events that prove it
///
/// Example: unsctl --db uns.db dlq triage --branch verify
/// Example: unsctl --db uns.db dlq triage -o json > plan.json
#[derive(Debug, clap::Args)]
pub struct TriageArgs {
    /// Only entries of this branch
    #[arg(long, value_parser = parse_branch)]
    pub branch: Option<Branch>,
    /// Walk the entries one by one and decide each (needs a terminal)
    #[arg(long)]
    pub interactive: bool,
    #[command(flatten)]
    pub audit: super::remediate::AuditArgs,
}

fn parse_branch(text: &str) -> Result<Branch, String> {
    text.parse()
}

pub fn run(global: &GlobalArgs, command: Command) -> CliResult {
    match command {
        Command::List(_) => list(global),
        Command::Triage(args) if args.interactive => super::interactive::run(global, args),
        Command::Triage(args) => triage_entries(global, args),
        Command::Resolve(args) => resolve(global, args),
    }
}

/// Calls `visit` with the verdict of every DLQ entry, in id order, one at a time.
pub fn each_verdict(store: &dyn Store, visit: &mut dyn FnMut(Verdict) -> CliResult) -> CliResult {
    let mut failure: Option<CliError> = None;
    let streamed = store.each_dlq_entry(&mut |(row, events)| {
        visit(triage::triage(&row, &events)).map_err(|err| {
            failure = Some(err);
            crate::store::StoreError::Other("stopped".into())
        })
    });
    match failure {
        Some(err) => Err(err),
        None => streamed.map_err(CliError::from),
    }
}

fn empty_message(store: &dyn Store) -> String {
    format!("The DLQ in {} is empty: nothing to do.", store.describe())
}

/// Streams `{"entries": [...], "summary": {...}}` so a large DLQ is never held at once.
fn triage_json(store: &dyn Store, branch: Option<Branch>) -> CliResult {
    let stdout = std::io::stdout();
    let mut writer = std::io::BufWriter::with_capacity(1 << 16, stdout.lock());
    let mut counts: BTreeMap<Branch, usize> = Branch::ALL.iter().map(|b| (*b, 0)).collect();
    writer.write_all(b"{\n  \"entries\": [")?;
    let mut first = true;
    each_verdict(store, &mut |verdict| {
        if branch.is_some_and(|b| b != verdict.branch) {
            return Ok(());
        }
        *counts.entry(verdict.branch).or_default() += 1;
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
        status(&empty_message(store));
    }
    Ok(())
}

fn triage_entries(global: &GlobalArgs, args: TriageArgs) -> CliResult {
    let out = global.output();
    let store = backend::reader(global)?;
    if out.json() {
        return triage_json(store.as_ref(), args.branch);
    }
    let mut verdicts = Vec::new();
    each_verdict(store.as_ref(), &mut |verdict| {
        if args.branch.is_none_or(|b| b == verdict.branch) {
            verdicts.push(verdict);
        }
        Ok(())
    })?;
    print_triage(store.as_ref(), &verdicts, &out)
}

pub fn print_triage(store: &dyn Store, verdicts: &[Verdict], out: &Output) -> CliResult {
    if verdicts.is_empty() {
        status(&empty_message(store));
        return Ok(());
    }
    print(&views::triage_table(verdicts, out))?;
    status(&views::summary_line(verdicts));
    if verdicts.iter().any(|v| v.branch == Branch::Verify) {
        status(
            "VERIFY entries need an out-of-band check first: `unsctl inspect <ID>` shows what to look for.",
        );
    }
    Ok(())
}

/// One row of `dlq list -o json`.
#[derive(Debug, Serialize)]
struct ListEntry {
    id: String,
    status: String,
    attempts: i64,
    cycle: i64,
    channels: Vec<String>,
    error_message: Option<String>,
    updated_at: f64,
    branch: Branch,
    next_step: String,
}

#[derive(Debug, Serialize)]
struct ListView {
    entries: Vec<ListEntry>,
    summary: BTreeMap<Branch, usize>,
}

fn list(global: &GlobalArgs) -> CliResult {
    let out = global.output();
    let store = backend::reader(global)?;
    let mut entries = Vec::new();
    let mut verdicts = Vec::new();
    store.each_dlq_entry(&mut |(row, events)| {
        let verdict = triage::triage(&row, &events);
        entries.push(ListEntry {
            id: row.id,
            status: row.status,
            attempts: row.attempts,
            cycle: row.cycle,
            channels: row.channels,
            error_message: row.error_message,
            updated_at: row.updated_at,
            branch: verdict.branch,
            next_step: verdict.next_step.clone(),
        });
        verdicts.push(verdict);
        Ok(())
    })?;
    if out.json() {
        let summary = triage::summary(&verdicts);
        crate::render::output::print_json(&ListView { entries, summary })?;
        if verdicts.is_empty() {
            status(&empty_message(store.as_ref()));
        }
        return Ok(());
    }
    if entries.is_empty() {
        status(&empty_message(store.as_ref()));
        return Ok(());
    }
    let mut rows = table(&[
        "ID",
        "STATUS",
        "ATTEMPTS",
        "CYCLE",
        "CHANNELS",
        "UPDATED",
        "BRANCH",
        "ERROR",
        "NEXT STEP",
    ]);
    for entry in &entries {
        rows.add_row(vec![
            entry.id.clone(),
            entry.status.clone(),
            entry.attempts.to_string(),
            entry.cycle.to_string(),
            entry.channels.join(","),
            out.time(entry.updated_at),
            views::branch_text(entry.branch, &out),
            entry.error_message.clone().unwrap_or_default(),
            entry.next_step.clone(),
        ]);
    }
    print(&table_text(&rows))?;
    status(&views::summary_line(&verdicts));
    Ok(())
}
