//! `unsctl reconcile`: who got duplicates and what never arrived, per notification and
//! channel, counted from the history and the providers' own records (DESIGN §9).

use crate::cli::args::SourceArgs;
use crate::cli::backend::{self, Invocation};
use crate::cli::error::{CliError, CliResult};
use crate::cli::fleet;
use crate::cli::values;
use crate::documents::{Document, write_csv, write_reconcile};
use crate::model::Channel;
use crate::reconcile::{
    Asked, Class, Evidence, Recent, Reconciled, Reconciliation, Summary, What, summary,
};
use crate::render::columns;
use crate::render::output::{Output, Streamed, counted, status};
use crate::render::table::{Column, Grid, Text, Tone, toned};
use crate::store::{Selection, Store, Window};
use serde::Serialize;
use std::collections::BTreeMap;
use std::io::Write;

/// Count who got duplicates and what never arrived, from the history and the providers' records
///
/// Looks at every notification with a channel attempt started in the window, in the DLQ
/// or not, and counts per channel the copies each provider took: from the history
/// (ACCEPTED results, VERIFIED DELIVERED) and from the providers' own records (the relay
/// log by Message-ID, PagerDuty's incidents by dedup key, Slack's history by
/// Idempotency-Key), a copy seen by both counted once. Each channel is ONCE, DUPLICATED,
/// MAYBE_DUPLICATED, MISSING or UNSETTLED. The records are read where unsctl runs, over
/// either backend.
///
/// Example: unsctl reconcile --since 2h --relay-log /var/log/mail.log
/// Example: unsctl reconcile n-0192... (one notification, copy by copy)
/// Example: unsctl reconcile --since 1d --channel EMAIL -o json
#[derive(Debug, clap::Args)]
#[command(verbatim_doc_comment)]
pub struct Args {
    /// One notification to explain copy by copy, whenever its attempts were made
    #[arg(value_parser = values::parse_id)]
    pub id: Option<String>,
    /// Attempts started at or after TIME: RFC 3339, or a duration back from now (2h, 30m, 1d)
    #[arg(long, value_name = "TIME")]
    pub since: Option<String>,
    /// Attempts started before TIME
    #[arg(long, value_name = "TIME")]
    pub until: Option<String>,
    /// Only this channel
    #[arg(long, value_parser = values::channel())]
    pub channel: Option<Channel>,
    /// Only notifications whose error message contains TEXT, in any letter case (repeat:
    /// any of them)
    #[arg(long, value_name = "TEXT", value_parser = crate::cli::values::parse_text)]
    pub error: Vec<String>,
    /// At most N notifications (the first by id)
    #[arg(long, value_name = "N")]
    pub limit: Option<usize>,
    #[command(flatten)]
    pub sources: SourceArgs,
    #[command(flatten)]
    pub senders: crate::cli::args::SenderArgs,
    /// How long after the last lease loss or reclaim the incident is no longer called
    /// still happening (1s to 24h)
    #[arg(long, value_name = "DURATION", default_value = "5m", value_parser = crate::cli::values::parse_some_span)]
    pub quiet_after: f64,
}

impl Args {
    fn asked(&self) -> CliResult<Asked> {
        let window = crate::cli::args::window(self.since.as_deref(), self.until.as_deref())?;
        window.check().map_err(CliError::usage)?;
        let selection = Selection::of_channel_and_error(self.channel, &self.error);
        selection.check().map_err(CliError::usage)?;
        if self.limit == Some(0) {
            return Err(CliError::usage("--limit must be at least 1"));
        }
        if self.id.is_some()
            && (self.since.is_some()
                || self.until.is_some()
                || !self.error.is_empty()
                || self.limit.is_some())
        {
            return Err(CliError::usage(
                "name one notification, or a window with --since/--until, not both",
            ));
        }
        Ok(Asked {
            selection,
            window,
            ids: None,
            limit: self.limit,
        })
    }

    fn sources(&self) -> crate::verify::Sources {
        self.senders.apply(self.sources.sources())
    }
}

pub fn run(global: &Invocation, args: Args) -> CliResult {
    let mut asked = args.asked()?;
    if global.all_contexts {
        return run_fleet(global, &args, &asked);
    }
    let out = global.output();
    let store = backend::reader(global)?;
    if let Some(id) = &args.id {
        asked.ids = Some(crate::session::ids::expand_ids(
            store.as_ref(),
            std::slice::from_ref(id),
        )?);
    }
    let now = crate::clock::Clock::now(&crate::clock::SystemClock);
    let reconciliation = Reconciliation::read(store.as_ref(), &asked, args.sources(), now)?;
    super::verify::say_unread(&reconciliation.records.unread());
    let recent = Recent::read(store.as_ref(), asked.window.until, args.quiet_after)?;
    out.stream(OneStore {
        reconciliation: &reconciliation,
        store: store.as_ref(),
        recent: &recent,
        explain: args.id.is_some(),
    })
}

/// One store's reconciliation, each notification written as it is read.
struct OneStore<'a> {
    reconciliation: &'a Reconciliation,
    store: &'a dyn Store,
    recent: &'a Recent,
    /// One notification asked about: its evidence, not the table.
    explain: bool,
}

impl Streamed for OneStore<'_> {
    type Done = CliResult;

    fn json(self) -> CliResult {
        write_json(self.reconciliation, self.store, self.recent)
    }

    fn show(self, out: &Output) -> CliResult {
        if self.explain {
            return explain(self.reconciliation, self.store, out);
        }
        let tally = write_table(self.reconciliation, self.store, out)?;
        report(&tally, self.reconciliation, self.recent, self.store, out);
        Ok(())
    }

    fn csv(self, _: &Output) -> CliResult {
        write_csv(self.reconciliation, self.store, std::io::stdout())
    }
}

/// `{"window", "notifications", "summary", "recent"}`, each notification written as it
/// is reconciled.
fn write_json(reconciliation: &Reconciliation, store: &dyn Store, recent: &Recent) -> CliResult {
    write_reconcile(reconciliation, store, recent, std::io::stdout())
}

const SUMMARY_COLUMNS: &[Column] = &[
    Column::new("CHANNEL", 0),
    Column::new("ONCE", 0),
    Column::new("DUPLICATED", 0),
    Column::new("MAYBE_DUPLICATED", 0),
    Column::new("MISSING", 0),
    Column::new("UNSETTLED", 0),
];

/// What the table found, for the lines after it.
#[derive(Default)]
struct Tally {
    summary: Summary,
    notifications: usize,
    duplicated: usize,
    missing: usize,
    in_doubt: usize,
    /// The channels of the attempts in doubt.
    doubt_channels: crate::model::ChannelSet,
    /// Of those in doubt, the ones with a copy proven and another attempt in doubt.
    maybe_duplicated: usize,
    newest_copy: Option<f64>,
}

/// What needs a person first (DUPLICATED, MISSING), then what is in doubt, then the
/// counts per channel.
fn write_table(
    reconciliation: &Reconciliation,
    store: &dyn Store,
    out: &Output,
) -> CliResult<Tally> {
    let mut needs = Vec::new();
    let mut doubt = Vec::new();
    let mut classes = Vec::new();
    let mut tally = Tally::default();
    tally.notifications = reconciliation.each(store, &mut |item| {
        classes.push((item.channel, item.class));
        match item.class {
            Class::Duplicated => {
                tally.duplicated += 1;
                let newest = item
                    .evidence
                    .iter()
                    .filter(|e| e.what == What::Copy)
                    .filter_map(|e| e.at)
                    .reduce(f64::max);
                tally.newest_copy = tally.newest_copy.into_iter().chain(newest).reduce(f64::max);
                needs.push(item);
            }
            Class::Missing => {
                tally.missing += 1;
                needs.push(item);
            }
            Class::MaybeDuplicated | Class::Unsettled => {
                tally.in_doubt += 1;
                tally.doubt_channels.insert(item.channel);
                if item.class == Class::MaybeDuplicated {
                    tally.maybe_duplicated += 1;
                }
                doubt.push(item);
            }
            Class::Once => {}
        }
        Ok(())
    })?;
    tally.summary = summary(&reconciliation.channels(), classes);
    let stdout = std::io::stdout();
    let mut to = stdout.lock();
    needs.sort_by(crate::reconcile::person_order);
    doubt.sort_by(crate::reconcile::person_order);
    if out.for_people() && !(needs.is_empty() && doubt.is_empty()) {
        status("`unsctl reconcile ID` shows one notification's evidence, copy by copy.");
    }
    for (title, items) in [("Needs a person", &needs), ("In doubt", &doubt)] {
        if items.is_empty() {
            continue;
        }
        writeln!(to, "{}", out.bold(title))?;
        let short =
            crate::session::ids::short_ids(store, items.iter().map(|item| item.id.as_str()), out);
        let mut grid = Grid::new(&columns::columns(columns::NEEDS), out);
        for item in items {
            let id = short.get(&item.id).unwrap_or(&item.id);
            grid.row(columns::cells(columns::NEEDS, &item.row(id)), &mut to)?;
        }
        grid.finish(&mut to)?;
        writeln!(to)?;
    }
    let mut grid = Grid::new(SUMMARY_COLUMNS, out);
    for (channel, counts) in &tally.summary {
        let mut cells: Vec<Text> = vec![channel.as_str().into()];
        for class in Class::ALL {
            let n = counts.get(&class).copied().unwrap_or(0);
            cells.push(if n > 0 && class != Class::Once {
                toned(n.to_string(), class.tone())
            } else {
                n.to_string().into()
            });
        }
        grid.row(cells, &mut to)?;
    }
    grid.finish(&mut to)?;
    Ok(tally)
}

/// The lines on stderr after the tables: what needs doing, and whether it goes on.
fn report(
    tally: &Tally,
    reconciliation: &Reconciliation,
    recent: &Recent,
    store: &dyn Store,
    out: &Output,
) {
    if tally.notifications == 0 {
        status(&format!(
            "Nothing to reconcile: no channel attempt {} in {}.",
            window_words(&reconciliation.window),
            store.describe()
        ));
    } else {
        // Never "0 duplicated" while attempts are in doubt: how many are proven, and how
        // many may be.
        let duplicated = if tally.in_doubt > 0 {
            format!(
                "duplicated: {} proven, {} may be",
                tally.duplicated, tally.maybe_duplicated
            )
        } else {
            format!("{} duplicated", tally.duplicated)
        };
        status(&format!(
            "{} reconciled {}: {duplicated}; {} missing; {} in doubt.",
            counted(tally.notifications as i64, "notification"),
            window_words(&reconciliation.window),
            tally.missing,
            tally.in_doubt
        ));
    }
    if tally.in_doubt > 0 {
        // Only what was not given: asking for a log already read sends a person in circles.
        let missing = reconciliation.records.not_given(&tally.doubt_channels);
        status(&if missing.is_empty() {
            "In doubt: the providers' records given do not settle them (each row says why); check out of band.".to_string()
        } else {
            format!(
                "In doubt: give {} to settle them, or check out of band.",
                missing.join(", ")
            )
        });
    }
    status(&still_happening(recent, tally.newest_copy, out));
}

fn window_words(window: &Window) -> String {
    let t = crate::render::time::rfc3339;
    match (window.since, window.until) {
        (None, None) => "at any time".into(),
        (Some(since), None) => format!("since {}", t(since)),
        (None, Some(until)) => format!("before {}", t(until)),
        (Some(since), Some(until)) => format!("from {} to {}", t(since), t(until)),
    }
}

/// Whether duplicates are still being made, in words: told by the last lease loss and
/// the last reclaim, and how long ago they were.
fn still_happening(recent: &Recent, newest_copy: Option<f64>, out: &Output) -> String {
    let end = recent.until.unwrap_or(recent.at);
    let stillness = crate::pulse::Stillness::of(
        recent.last_lease_lost,
        recent.last_reclaim,
        end,
        recent.quiet_after_seconds,
    );
    let lasts = crate::render::views::still_words(&stillness, end, recent.at);
    let newest = newest_copy
        .map(|at| {
            format!(
                " Newest duplicate copy {}.",
                crate::render::time::rfc3339(at)
            )
        })
        .unwrap_or_default();
    let counts = format!(
        " In the 15 minutes before: {} ({}/min), {} ({}/min), {}.",
        counted(recent.lease_lost, "lost lease"),
        recent.lease_lost_per_minute,
        counted(recent.reclaims, "reclaim"),
        recent.reclaims_per_minute,
        counted(recent.claims, "claim"),
    );
    if recent.still_happening {
        out.red(&format!(
            "{lasts}{counts} Each reclaim after a lost lease may send another copy.{newest} See TSG-02."
        ))
    } else {
        format!("{lasts}{counts}{newest}")
    }
}

/// `reconcile ID`: each channel, copy by copy.
fn explain(reconciliation: &Reconciliation, store: &dyn Store, out: &Output) -> CliResult {
    let stdout = std::io::stdout();
    let mut to = stdout.lock();
    let mut any = false;
    for item in reconciliation.all(store)? {
        any = true;
        writeln!(
            to,
            "{}  {}  {}  {}  to {}",
            out.clean(&item.id),
            item.channel,
            toned_text(item.class, out),
            counted(item.copies as i64, "copy"),
            out.clean(&item.row(&item.id).recipient)
        )?;
        let mut grid = Grid::new(EXPLAIN_COLUMNS, out);
        let mut copy = 0;
        for evidence in &item.evidence {
            let label = match evidence.what {
                What::Copy => {
                    copy += 1;
                    format!("copy {copy}")
                }
                What::Unknown => "in doubt".into(),
                What::NotTaken => "not taken".into(),
                What::Settled => "settled".into(),
                What::Note => "note".into(),
            };
            grid.row(explain_row(&label, evidence, out), &mut to)?;
        }
        grid.finish(&mut to)?;
        writeln!(to)?;
    }
    if !any {
        status("Nothing to reconcile: the notification has no channel.");
    }
    Ok(())
}

fn toned_text(class: Class, out: &Output) -> String {
    match class.tone() {
        Tone::Bad => out.red(class.as_str()),
        Tone::Warn => out.yellow(class.as_str()),
        _ => out.green(class.as_str()),
    }
}

const EXPLAIN_COLUMNS: &[Column] = &[
    Column::new("", 0),
    Column::new("AT", 1),
    Column::new("CYCLE", 3),
    Column::new("ATTEMPT", 3),
    Column::new("SOURCES", 2),
    Column::new("EVENTS", 4),
    Column::new("DETAIL", 0).own_line(),
];

fn explain_row(label: &str, evidence: &Evidence, out: &Output) -> Vec<Text> {
    let number = |n: Option<i64>| n.map(|n| n.to_string()).unwrap_or_default();
    let mut detail = Vec::new();
    if let Some(message_id) = &evidence.message_id {
        detail.push(format!("Message-ID {message_id}"));
    }
    if !evidence.queue_ids.is_empty() {
        detail.push(format!("queue id {}", evidence.queue_ids.join(", ")));
    }
    if let Some(incident) = &evidence.incident {
        detail.push(format!("incident {incident}"));
    }
    if let Some(ts) = &evidence.message_ts {
        detail.push(format!("message ts {ts}"));
    }
    detail.push(evidence.text.clone());
    vec![
        label.to_string().into(),
        evidence
            .at
            .map(crate::render::time::rfc3339)
            .unwrap_or_default()
            .into(),
        number(evidence.cycle).into(),
        number(evidence.attempt).into(),
        evidence.sources.join(",").into(),
        evidence
            .event_ids
            .iter()
            .map(i64::to_string)
            .collect::<Vec<_>>()
            .join(",")
            .into(),
        out.clean(&detail.join("; ")).into_owned().into(),
    ]
}

/// One reconciled channel with its context, as the fleet's JSON shows it.
#[derive(Serialize)]
struct InContext<'a> {
    context: &'a str,
    #[serde(flatten)]
    item: &'a Reconciled,
}

/// `--all-contexts`: each context reconciled with the same window and sources; a context
/// that cannot be read is named and the whole exits 1.
fn run_fleet(global: &Invocation, args: &Args, asked: &Asked) -> CliResult {
    if args.id.is_some() {
        return Err(CliError::usage(
            "one notification lives in one context: pass --context NAME",
        ));
    }
    let out = global.output();
    let now = crate::clock::Clock::now(&crate::clock::SystemClock);
    // Every context reads the same records, the operator's: what could not be read is
    // said once, and PagerDuty's lookups of every context are counted as one.
    let unread = std::sync::Mutex::new((Vec::<String>::new(), crate::verify::Lookups::default()));
    let readings = fleet::read_each(global, &|store| {
        let reconciliation = Reconciliation::read(store, asked, args.sources(), now)?;
        if let Ok(mut said) = unread.lock() {
            for what in reconciliation.records.unread_whole() {
                if !said.0.contains(&what) {
                    said.0.push(what);
                }
            }
            said.1.add(reconciliation.records.pagerduty_lookups());
        }
        let recent = Recent::read(store, asked.window.until, args.quiet_after)?;
        Ok((reconciliation.all(store)?, recent))
    })?;
    let (mut said, lookups) = unread.into_inner().unwrap_or_default();
    said.extend(lookups.unread());
    super::verify::say_unread(&said);
    let contexts: Vec<fleet::ContextStatus> = readings
        .iter()
        .map(|r| fleet::ContextStatus {
            context: r.context.clone(),
            entries: r.result.as_ref().ok().map(|(items, _)| items.len()),
            error: r.result.as_ref().err().map(|e| e.message.clone()),
            store: None,
        })
        .collect();
    let items: Vec<(&str, &Reconciled)> = readings
        .iter()
        .filter_map(|r| Some((r.context.as_str(), r.result.as_ref().ok()?)))
        .flat_map(|(context, (items, _))| items.iter().map(move |i| (context, i)))
        .collect();
    let summary = summary(
        &asked.channels(),
        items.iter().map(|(_, i)| (i.channel, i.class)),
    );
    out.stream(Fleet {
        readings: &readings,
        items: &items,
        summary: &summary,
        window: &asked.window,
        contexts: &contexts,
        unread: &said,
    })?;
    fleet::conclude(&readings)
}

/// Every context's reconciliation: one document, or one table of what needs a person.
struct Fleet<'a> {
    readings: &'a [fleet::Reading<(Vec<Reconciled>, Recent)>],
    items: &'a [(&'a str, &'a Reconciled)],
    summary: &'a Summary,
    window: &'a Window,
    contexts: &'a [fleet::ContextStatus],
    /// What every context's records could not read, said once.
    unread: &'a [String],
}

impl Streamed for Fleet<'_> {
    type Done = CliResult;

    fn json(self) -> CliResult {
        let recent: BTreeMap<&str, &Recent> = self
            .readings
            .iter()
            .filter_map(|r| Some((r.context.as_str(), &r.result.as_ref().ok()?.1)))
            .collect();
        let mut document = Document::start(self.window, std::io::stdout())?;
        for (context, item) in self.items {
            document.item(&InContext { context, item })?;
        }
        document.finish(self.summary, &recent, self.unread, Some(self.contexts))?;
        Ok(())
    }

    fn show(self, out: &Output) -> CliResult {
        let mut needing: Vec<&(&str, &Reconciled)> = self
            .items
            .iter()
            .filter(|(_, i)| i.class != Class::Once)
            .collect();
        needing.sort_by(|a, b| crate::reconcile::person_order(a.1, b.1));
        let rows = needing.into_iter().map(|(context, item)| {
            (
                *context,
                columns::cells(columns::NEEDS, &item.row(&item.id)),
            )
        });
        fleet::print_table(&columns::columns(columns::NEEDS), rows, out)?;
        for reading in self.readings {
            if let Ok((_, recent)) = &reading.result {
                status(&format!(
                    "context {}: {}",
                    out.clean(&reading.context),
                    still_happening(recent, None, out)
                ));
            }
        }
        let totals: Vec<String> = self
            .summary
            .iter()
            .map(|(channel, counts)| {
                format!(
                    "{channel}: {} duplicated, {} missing",
                    counts.get(&Class::Duplicated).copied().unwrap_or(0),
                    counts.get(&Class::Missing).copied().unwrap_or(0)
                )
            })
            .collect();
        status(&totals.join("; "));
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The summary's cells are made in the order of `Class::ALL`: its headings must be
    /// the same classes in the same order, or a count stands under another's name.
    #[test]
    fn the_summarys_headings_are_the_classes_in_the_order_their_counts_are_written() {
        let headings: Vec<&str> = SUMMARY_COLUMNS[1..].iter().map(|c| c.header).collect();
        let classes: Vec<&str> = Class::ALL.iter().map(|c| c.as_str()).collect();
        assert_eq!(headings, classes);
    }
}
