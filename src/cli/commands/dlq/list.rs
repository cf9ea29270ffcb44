//! `unsctl dlq list`: every DLQ entry's state, error, branch and next command, streamed.

use crate::cli::args::SelectArgs;
use crate::cli::backend;
use crate::cli::backend::Invocation;
use crate::cli::error::CliResult;
use crate::cli::fleet;
use crate::cli::selection;
use crate::model::Notification;
use crate::render::output::{Output, Streamed, counted, status};
use crate::render::table::Grid;
use crate::render::table::{Column, Text, toned};
use crate::render::views;
use crate::store::Triaged;
use crate::triage::Verdict;
use crate::triage::{self, Branch};
use serde::Serialize;
use std::collections::BTreeMap;
use std::io::Write;
use std::sync::mpsc::Receiver;

/// List the DLQ: each entry's state, error, branch and next command
///
/// Example: unsctl dlq list
/// Example: unsctl dlq list --error timeout --since 2h
#[derive(Debug, clap::Args)]
#[command(verbatim_doc_comment)]
pub struct Args {
    #[command(flatten)]
    pub select: SelectArgs,
}

/// One row of `dlq list -o json`.
#[derive(Debug, Serialize)]
pub struct ListEntry<'a> {
    id: &'a str,
    status: &'a str,
    attempts: i64,
    cycle: i64,
    channels: &'a [String],
    error_message: Option<&'a str>,
    updated_at: f64,
    branch: Branch,
    next_step: &'a crate::model::command::Step,
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    unreadable: &'a [String],
}

impl<'a> From<&'a Triaged> for ListEntry<'a> {
    fn from(t: &'a Triaged) -> Self {
        ListEntry {
            id: &t.row.id,
            status: t.row.status.as_str(),
            attempts: t.row.attempts,
            cycle: t.row.cycle,
            channels: &t.row.channels,
            error_message: t.row.error_message.as_deref(),
            updated_at: t.row.updated_at,
            branch: t.verdict.branch,
            next_step: &t.verdict.next_step,
            unreadable: &t.unreadable,
        }
    }
}

#[derive(Default)]
struct Listed {
    counts: BTreeMap<Branch, usize>,
    unreadable: usize,
}

pub fn run(global: &Invocation, args: Args) -> CliResult {
    if global.all_contexts {
        return run_fleet(global, &args);
    }
    let out = global.output();
    let store = backend::reader(global)?;
    let selection = args.select.resolved(store.as_ref(), true)?;
    let listed = selection::stream(
        store.as_ref(),
        &selection,
        &|_| true,
        args.select.limit,
        |arriving| out.stream(Listing(arriving)),
    )?;
    let total: usize = listed.counts.values().sum();
    if total == 0 {
        status(&views::nothing_selected(
            &store.describe(),
            args.select.narrows(),
        ));
        return Ok(());
    }
    if out.for_people() {
        status(&views::summary_counts(&listed.counts));
    }
    if listed.unreadable > 0 {
        status(&format!(
            "{} {} unreadable values (marked; `unsctl inspect <ID>` names them)",
            counted(listed.unreadable as i64, "entry"),
            if listed.unreadable == 1 {
                "has"
            } else {
                "have"
            }
        ));
    }
    Ok(())
}

fn count(listed: &mut Listed, t: &Triaged) {
    *listed.counts.entry(t.verdict.branch).or_default() += 1;
    if !t.unreadable.is_empty() {
        listed.unreadable += 1;
    }
}

impl fleet::Entry for Triaged {
    type Json<'a> = ListEntry<'a>;
    fn columns() -> Vec<Column> {
        LIST_COLUMNS.to_vec()
    }

    fn json(&self) -> ListEntry<'_> {
        ListEntry::from(self)
    }

    fn row(&self, out: &Output) -> Vec<Text> {
        list_row(&self.row, &self.verdict, !self.unreadable.is_empty(), out)
    }
}

/// The entries as they arrive from the walk.
struct Listing(Receiver<Vec<Triaged>>);

impl Streamed for Listing {
    type Done = CliResult<Listed>;

    fn json(self) -> Self::Done {
        write_json(self.0)
    }

    fn show(self, out: &Output) -> Self::Done {
        write_table(self.0, out)
    }
}

fn write_json(arriving: Receiver<Vec<Triaged>>) -> CliResult<Listed> {
    let stdout = std::io::stdout();
    let mut writer = std::io::BufWriter::with_capacity(1 << 16, stdout.lock());
    let mut listed = Listed {
        counts: triage::empty_summary(),
        ..Listed::default()
    };
    let mut first = true;
    writer.write_all(b"{\n  \"entries\": [")?;
    for triaged in arriving.into_iter().flatten() {
        count(&mut listed, &triaged);
        writer.write_all(if first { b"\n    " } else { b",\n    " })?;
        first = false;
        // serde_json hands a write's own error back as it was: a closed pipe stays one.
        serde_json::to_writer(&mut writer, &ListEntry::from(&triaged))
            .map_err(std::io::Error::from)?;
    }
    writer.write_all(if first { b"],\n" } else { b"\n  ],\n" })?;
    let summary = serde_json::to_string(&listed.counts).map_err(std::io::Error::other)?;
    writer.write_all(format!("  \"summary\": {summary}\n}}\n").as_bytes())?;
    writer.flush()?;
    Ok(listed)
}

fn write_table(arriving: Receiver<Vec<Triaged>>, out: &Output) -> CliResult<Listed> {
    let stdout = std::io::stdout();
    let mut writer = std::io::BufWriter::new(stdout.lock());
    let mut grid = Grid::new(LIST_COLUMNS, out);
    let mut listed = Listed::default();
    for triaged in arriving.into_iter().flatten() {
        count(&mut listed, &triaged);
        grid.row(
            list_row(
                &triaged.row,
                &triaged.verdict,
                !triaged.unreadable.is_empty(),
                out,
            ),
            &mut writer,
        )?;
    }
    grid.finish(&mut writer)?;
    writer.flush()?;
    Ok(listed)
}

/// `dlq list --all-contexts`: every context's entries, tagged.
fn run_fleet(global: &Invocation, args: &Args) -> CliResult {
    let out = global.output();
    let selection = args.select.selection()?;
    let limit = args.select.limit;
    let mut readings = fleet::read_each(global, &|store| {
        let here = crate::session::ids::with_exclusions_here(store, selection.clone(), true)?;
        selection::stream(store, &here, &|_| true, limit, |arriving| {
            Ok(arriving.into_iter().flatten().collect::<Vec<Triaged>>())
        })
    })?;
    let contexts = fleet::statuses(&readings);
    let mut entries: Vec<(String, Triaged)> = Vec::new();
    for reading in &mut readings {
        if let Ok(listed) = reading.result.as_mut() {
            for mut triaged in std::mem::take(listed) {
                triaged.verdict.next_step = triaged.verdict.next_step.in_context(&reading.context);
                entries.push((reading.context.clone(), triaged));
            }
        }
    }
    let mut listed = Listed {
        counts: triage::empty_summary(),
        ..Listed::default()
    };
    for (_, triaged) in &entries {
        count(&mut listed, triaged);
    }
    out.stream(fleet::Across {
        entries: &entries,
        summary: Some((
            "summary",
            serde_json::to_value(&listed.counts).map_err(std::io::Error::other)?,
        )),
        contexts,
    })?;
    if out.for_people() {
        status(&views::summary_counts(&listed.counts));
    }
    fleet::conclude(&readings)
}

/// The DLQ list's columns.
const LIST_COLUMNS: &[Column] = &[
    Column::new("ID", 0),
    Column::new("BRANCH", 0),
    Column::new("STATUS", 4),
    Column::new("CHANNELS", 2).max(28),
    Column::new("ERROR", 1).max(60),
    Column::new("UPDATED", 3),
    Column::new("ATTEMPTS", 5),
    Column::new("CYCLE", 6),
    Column::new("NEXT STEP", 3),
];

/// One row of the DLQ list.
fn list_row(row: &Notification, verdict: &Verdict, unreadable: bool, out: &Output) -> Vec<Text> {
    let marked = if unreadable { " (unreadable)" } else { "" };
    vec![
        format!("{}{marked}", views::shown(&row.id)).into(),
        toned(verdict.branch.as_str(), views::branch_tone(verdict.branch)),
        views::shown(row.status.as_str()).into(),
        views::shown(&row.channels.join(",")).into(),
        row.error_message
            .as_deref()
            .map(views::said)
            .unwrap_or_default()
            .into(),
        out.time(row.updated_at).into(),
        row.attempts.to_string().into(),
        row.cycle.to_string().into(),
        views::shown(&verdict.next_step.command_text()).into(),
    ]
}
