//! `unsctl events`: the runbook's cross-notification query, newest first.

use crate::cli::args::SelectArgs;
use crate::cli::backend;
use crate::cli::backend::Invocation;
use crate::cli::error::{CliError, CliResult};
use crate::model::Kind;
use crate::render::output::{Output, View, status};
use crate::render::table::{Column, Text, Tone, toned};
use crate::render::views;
use crate::store::EventQuery;

/// Find events of some kinds across all notifications, newest first
///
/// Example: unsctl events --kind LEASE_LOST --kind CHANNEL_ATTEMPT_RESULT --limit 25
/// Example: unsctl events --kind channel-attempt-result --channel email --since 1h
/// Example: unsctl events --follow
#[derive(Debug, clap::Args)]
#[command(verbatim_doc_comment)]
pub struct Args {
    /// Event kinds to show, in any case (repeat; default LEASE_LOST and CHANNEL_ATTEMPT_RESULT)
    #[arg(long = "kind", value_name = "KIND", value_parser = crate::cli::values::Listed::new(parse_kind, || Kind::ALL.iter().map(|k| k.as_str()).collect()))]
    pub kinds: Vec<Kind>,
    #[command(flatten)]
    pub select: SelectArgs,
    /// Then keep printing new events as they are written, oldest first, until Ctrl-C
    /// (JSON: one event per line)
    #[arg(long, short = 'f')]
    pub follow: bool,
    /// Seconds between looks at the store, with --follow
    #[arg(long, default_value_t = 1.0, requires = "follow")]
    pub interval: f64,
}

/// A kind as typed: any case, surrounding space ignored.
fn parse_kind(text: &str) -> Result<Kind, String> {
    text.trim().to_ascii_uppercase().parse()
}

/// The longest answer asked for at once.
pub const MAX_LIMIT: usize = 10_000;

const COLUMNS: &[Column] = &[
    Column::new("EVENT", 0),
    Column::new("UTC", 1),
    Column::new("KIND", 0).whole(),
    Column::new("NOTIFICATION", 0).whole(),
    Column::new("CHANNEL", 2),
    Column::new("OUTCOME", 0).whole(),
    Column::new("DETAIL", 3).max(80),
    Column::new("STATUS", 4),
    Column::new("DLQ", 5),
    Column::new("ATTEMPTS", 6),
    Column::new("CYCLE", 7),
];

pub fn run(global: &Invocation, args: Args) -> CliResult {
    let out = global.output();
    if !args.select.error_code.is_empty() {
        return Err(CliError::usage(
            "--error-code selects DLQ entries by their triage; events have none: use --error TEXT",
        ));
    }
    let limit = args.select.limit.unwrap_or(25);
    if limit == 0 || limit > MAX_LIMIT {
        return Err(CliError::usage(format!(
            "--limit must be between 1 and {MAX_LIMIT}"
        )));
    }
    let kinds: Vec<Kind> = if args.kinds.is_empty() {
        vec![Kind::LeaseLost, Kind::ChannelAttemptResult]
    } else {
        // A set, in the order first named.
        let mut kinds = args.kinds.clone();
        let mut seen = std::collections::HashSet::new();
        kinds.retain(|kind| seen.insert(*kind));
        kinds
    };
    if global.all_contexts {
        if args.follow {
            return Err(CliError::usage(
                "--follow works in one context: pass --context NAME",
            ));
        }
        return run_fleet(global, &args, kinds, limit, &out);
    }
    let store = backend::reader(global)?;
    let query = EventQuery {
        kinds: kinds.clone(),
        selection: args.select.resolved(store.as_ref(), false)?,
        limit,
        after: None,
    };
    if args.follow {
        let every = crate::cli::follow::interval(args.interval)?;
        return crate::cli::follow::follow_events(store.as_ref(), query, limit, every, &out);
    }
    let response = store.events(&query)?;
    let nothing = format!(
        "no {} events in {}{}",
        kinds
            .iter()
            .map(|k| k.as_str())
            .collect::<Vec<_>>()
            .join(" or "),
        views::shown(&store.describe()),
        if query.selection.is_empty() {
            ""
        } else {
            " that match the selection"
        }
    );
    // Ids as the shortest prefix that names each in the store, so a row fits 80 columns
    // and its id still pastes into any command.
    let short = crate::session::ids::short_ids(
        store.as_ref(),
        response.events.iter().map(|e| e.notification_id.as_str()),
        &out,
    );
    out.emit(&Found {
        response: &response,
        nothing,
        short,
    })?;
    Ok(())
}

/// `events`: the events found, or what was looked for when there are none.
#[derive(serde::Serialize)]
#[serde(transparent)]
struct Found<'a> {
    response: &'a crate::api::EventsResponse,
    #[serde(skip)]
    nothing: String,
    /// Each notification id as the table shows it.
    #[serde(skip)]
    short: std::collections::HashMap<String, String>,
}

impl View for Found<'_> {
    fn show(&self, out: &Output) -> std::io::Result<()> {
        if self.response.events.is_empty() {
            status(&self.nothing);
            return Ok(());
        }
        let rows: Vec<Vec<Text>> = self
            .response
            .events
            .iter()
            .map(|row| event_row(row, &self.short, out))
            .collect();
        crate::render::table::print_all(COLUMNS, rows, out)
    }
}

fn event_row(
    row: &crate::api::EventRow,
    short: &std::collections::HashMap<String, String>,
    out: &Output,
) -> Vec<Text> {
    // Parsed once, without copying the row: a payload may be megabytes.
    let payload = crate::model::payload_tree(row.payload.get());
    let now = crate::clock::Clock::now(&crate::clock::SystemClock);
    let time = match out.fit_width() {
        Some(_) => views::clock_time(row.at, now),
        None => out.time(row.at),
    };
    let outcome = views::outcome_word(&row.kind, &payload);
    let tone = match outcome {
        "ACCEPTED" | "DELIVERED" => Tone::Good,
        "UNKNOWN" | "LOST" => Tone::Bad,
        "REJECTED" | "DEAD" => Tone::Warn,
        _ => Tone::Plain,
    };
    vec![
        row.id.to_string().into(),
        time.into(),
        views::shown(&row.kind).into(),
        views::shown(
            short
                .get(&row.notification_id)
                .unwrap_or(&row.notification_id),
        )
        .into(),
        views::shown(payload["channel"].as_str().unwrap_or("")).into(),
        toned(outcome, tone),
        views::detail_of(&row.kind, &payload, out).into(),
        views::shown(&row.status).into(),
        if row.dead_letter { "yes" } else { "no" }.into(),
        row.attempts.to_string().into(),
        row.cycle.to_string().into(),
    ]
}

/// `events --all-contexts -o json`: `{"contexts": [...], "events": [...]}`, each event
/// tagged with its context.
#[derive(serde::Serialize)]
struct FleetEvents<'a> {
    contexts: Vec<crate::cli::fleet::ContextStatus>,
    events: Vec<crate::cli::fleet::Tagged<'a, crate::api::EventRow>>,
}

impl View for FleetEvents<'_> {
    const SORTED: bool = true;

    fn show(&self, out: &Output) -> std::io::Result<()> {
        crate::cli::fleet::print_table(
            COLUMNS,
            self.events.iter().map(|tagged| {
                (
                    tagged.context,
                    event_row(tagged.value, &Default::default(), out),
                )
            }),
            out,
        )
    }
}

/// `events --all-contexts`: the newest events of every context, merged in the runbook
/// query's order, each tagged with its context.
fn run_fleet(
    global: &Invocation,
    args: &Args,
    kinds: Vec<Kind>,
    limit: usize,
    out: &Output,
) -> CliResult {
    use crate::cli::fleet;
    let _ = global;
    let query = EventQuery {
        kinds,
        selection: args.select.selection()?,
        limit,
        after: None,
    };
    let mut readings = fleet::read_each(global, &|store| {
        let here = EventQuery {
            selection: crate::session::ids::with_exclusions_here(
                store,
                query.selection.clone(),
                false,
            )?,
            ..query.clone()
        };
        Ok(store.events(&here)?.events)
    })?;
    let contexts = fleet::statuses(&readings);
    let mut rows: Vec<(String, crate::api::EventRow)> = Vec::new();
    for reading in &mut readings {
        if let Ok(events) = reading.result.as_mut() {
            rows.extend(
                std::mem::take(events)
                    .into_iter()
                    .map(|e| (reading.context.clone(), e)),
            );
        }
    }
    rows.sort_by(|(ca, a), (cb, b)| {
        b.at.total_cmp(&a.at)
            .then_with(|| a.kind.cmp(&b.kind))
            .then_with(|| ca.cmp(cb))
            .then_with(|| a.id.cmp(&b.id))
    });
    rows.truncate(limit);
    out.emit(&FleetEvents {
        contexts,
        events: rows
            .iter()
            .map(|(context, value)| fleet::Tagged { context, value })
            .collect(),
    })?;
    fleet::conclude(&readings)
}
