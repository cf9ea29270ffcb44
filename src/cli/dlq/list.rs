//! `unsctl dlq list`: every DLQ entry's state, error, branch and next command.

use crate::cli::error::CliResult;
use crate::cli::{GlobalArgs, backend};
use crate::model::Channel;
use crate::render::output::{print, print_json, status, table, table_text};
use crate::render::views;
use crate::triage::{self, Branch};
use serde::Serialize;
use std::collections::BTreeMap;

/// List the DLQ: each entry's state, error, branch and next command
///
/// Example: unsctl dlq list
#[derive(Debug, clap::Args)]
pub struct Args {}

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
    #[serde(skip_serializing_if = "Vec::is_empty")]
    unreadable: Vec<String>,
}

#[derive(Debug, Serialize)]
struct ListView {
    entries: Vec<ListEntry>,
    summary: BTreeMap<Branch, usize>,
}

pub fn run(global: &GlobalArgs, _args: Args) -> CliResult {
    let out = global.output();
    let store = backend::reader(global)?;
    let mut entries = Vec::new();
    let mut verdicts = Vec::new();
    store.each_dlq_entry(&mut |(row, events)| {
        let verdict = triage::triage_events(&row, &events);
        let mut unreadable = row.unreadable.clone();
        unreadable.extend(events.iter().flat_map(|e| {
            e.unreadable
                .iter()
                .map(move |u| format!("event {}: {u}", e.id))
        }));
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
            unreadable,
        });
        verdicts.push(verdict);
        Ok(())
    })?;
    let unreadable = entries.iter().filter(|e| !e.unreadable.is_empty()).count();
    let empty = entries.is_empty();
    if out.json() {
        let summary = triage::summary(&verdicts);
        print_json(&ListView { entries, summary })?;
    } else if !entries.is_empty() {
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
            let marked = if entry.unreadable.is_empty() {
                ""
            } else {
                " (unreadable)"
            };
            rows.add_row(vec![
                format!("{}{marked}", views::shown(&entry.id)),
                views::shown(&entry.status),
                entry.attempts.to_string(),
                entry.cycle.to_string(),
                entry
                    .channels
                    .iter()
                    .map(|c| {
                        c.parse::<Channel>()
                            .map(|c| c.to_string())
                            .unwrap_or_else(|_| views::shown(c))
                    })
                    .collect::<Vec<_>>()
                    .join(","),
                out.time(entry.updated_at),
                views::branch_text(entry.branch, &out),
                views::shown(entry.error_message.as_deref().unwrap_or_default()),
                views::shown(&entry.next_step),
            ]);
        }
        print(&table_text(&rows))?;
    }
    if empty {
        status(&views::empty_dlq(&store.describe()));
        return Ok(());
    }
    status(&views::summary_line(&verdicts));
    if unreadable > 0 {
        status(&format!(
            "{unreadable} entr{} with unreadable values (marked; `unsctl inspect <ID>` names them)",
            if unreadable == 1 { "y has" } else { "ies have" }
        ));
    }
    Ok(())
}
