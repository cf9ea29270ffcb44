//! `unsctl dlq triage`: every DLQ entry's branch, the events that prove it, and the next
//! command. Its JSON is also a plan for `unsctl apply`. Both outputs stream.

use crate::cli::args::{AuditArgs, SelectArgs};
use crate::cli::backend;
use crate::cli::backend::Invocation;
use crate::cli::error::CliResult;
use crate::cli::fleet;
use crate::cli::selection::{self, Listed};
use crate::documents::{Tally, write_triage_json};
use crate::render::columns;
use crate::render::output::{Output, Streamed, status};
use crate::render::table::Grid;
use crate::render::views;
use crate::store::Triaged;
use crate::triage::{self, Branch, Verdict};
use std::io::Write;
use std::sync::mpsc::Receiver;

/// Triage every DLQ entry: RESOLVE, VERIFY or REPLAY, with the events that prove it
///
/// Example: unsctl dlq triage --branch verify
/// Example: unsctl dlq triage --channel slack --since 1h
/// Example: unsctl dlq triage -o json > plan.json
/// Example: unsctl dlq triage --interactive
/// Example: unsctl dlq triage --watch
#[derive(Debug, clap::Args)]
#[command(verbatim_doc_comment)]
pub struct Args {
    /// Only entries of this branch
    #[arg(long, value_parser = crate::cli::values::Listed::new(crate::cli::values::parse_branch, || vec!["resolve", "verify", "replay"]))]
    pub branch: Option<Branch>,
    #[command(flatten)]
    pub select: SelectArgs,
    /// Walk the entries one by one and decide each (needs a terminal)
    #[arg(long, conflicts_with = "watch")]
    pub interactive: bool,
    /// Then print a line whenever an entry enters, leaves or changes branch, until
    /// Ctrl-C (JSON: one change per line)
    #[arg(long, short = 'w')]
    pub watch: bool,
    /// Seconds between looks at the store, with --watch
    #[arg(long, default_value_t = 1.0, requires = "watch")]
    pub interval: f64,
    #[command(flatten)]
    pub audit: AuditArgs,
    /// Where `verify` looks, in the interactive walk
    #[command(flatten, next_help_heading = "Verify in the walk (with --interactive)")]
    pub verify: crate::cli::args::SourceArgs,
}

pub fn run(global: &Invocation, args: Args) -> CliResult {
    if global.all_contexts {
        return run_fleet(global, &args);
    }
    let out = global.output();
    let store = backend::reader(global)?;
    let selection = args.select.resolved(store.as_ref(), true)?;
    let keep = selection::of_branch(args.branch);
    // Where watching starts: taken before the first reading, so nothing written while
    // it runs is missed.
    let cursor = match args.watch {
        true => Some((
            crate::cli::follow::interval(args.interval)?,
            crate::cli::follow::event_cursor(store.as_ref())?,
        )),
        false => None,
    };
    // Which store the plan is made on, so `apply` never acts on another: only the JSON
    // plan carries it.
    let identity = match out.for_people() {
        true => None,
        false => store.identity()?,
    };
    let excluded = crate::cli::plan::Excluded::of(&selection);
    let mut tally = selection::stream(
        store.as_ref(),
        &selection,
        &|t: &Triaged| keep(&t.verdict),
        args.select.limit,
        |arriving| {
            out.stream(Entries {
                arriving,
                tally: Tally::watching(args.watch),
                identity: identity.as_deref(),
                excluded: excluded.as_ref(),
                shorten: !args.select.narrows() && args.branch.is_none(),
            })
        },
    )?;
    if let Some((every, cursor)) = cursor {
        report(&tally, &store.describe(), &args, &out);
        return crate::cli::follow::watch_dlq(
            store.as_ref(),
            &selection,
            &keep,
            args.select.limit,
            tally.seen.take().unwrap_or_default(),
            cursor,
            every,
            &out,
        );
    }
    report(&tally, &store.describe(), &args, &out);
    Ok(())
}

/// The entries as they arrive from the walk: the plan document, or the table.
struct Entries<'a> {
    arriving: Receiver<Vec<Triaged>>,
    tally: Tally,
    identity: Option<&'a str>,
    excluded: Option<&'a crate::cli::plan::Excluded>,
    /// Ids may be cut to their shortest unique prefix (every entry is shown).
    shorten: bool,
}

impl Streamed for Entries<'_> {
    type Done = CliResult<Tally>;

    fn json(self) -> Self::Done {
        let excluded = self
            .excluded
            .map(serde_json::to_value)
            .transpose()
            .map_err(std::io::Error::other)?;
        write_triage_json(
            std::io::stdout().lock(),
            self.arriving,
            self.tally,
            self.identity,
            excluded.as_ref(),
        )
    }

    fn show(self, out: &Output) -> Self::Done {
        let shorten = self.shorten && out.fit_width().is_some();
        write_table(self.arriving, out, self.tally, shorten)
    }
}

impl fleet::Entry for Listed {
    type Json<'a> = &'a Verdict;

    fn columns() -> Vec<crate::render::table::Column> {
        columns::columns(&columns::dlq())
    }

    fn json(&self) -> &Verdict {
        &self.verdict
    }

    fn row(&self, _: &Output) -> Vec<crate::render::table::Text> {
        self.cells(&self.verdict.id)
    }
}

/// The lines on stderr after the entries.
fn report(tally: &Tally, place: &str, args: &Args, out: &Output) {
    if tally.total() == 0 {
        status(&views::nothing_selected(
            place,
            args.select.narrows() || args.branch.is_some(),
        ));
        return;
    }
    if out.for_people() {
        status(&views::summary_counts(&tally.counts));
    }
    if tally.with_notes > 0 {
        status(&format!(
            "{} {} notes on evidence that could not be read (VERIFY; see `notes`)",
            crate::render::output::counted(tally.with_notes as i64, "entry"),
            if tally.with_notes == 1 { "has" } else { "have" }
        ));
    }
    if out.for_people() && tally.counts.get(&Branch::Verify).is_some_and(|n| *n > 0) {
        status(
            "VERIFY entries need an out-of-band check first: `unsctl verify` asks the providers' own records.",
        );
    }
}

/// The triage table, printed a chunk at a time.
/// The triage table, printed a chunk at a time. With `shorten` (the rows are the whole
/// DLQ), ids show as unique prefixes, which every command accepts.
fn write_table(
    arriving: Receiver<Vec<Triaged>>,
    out: &Output,
    tally: Tally,
    shorten: bool,
) -> CliResult<Tally> {
    let stdout = std::io::stdout();
    let mut writer = std::io::BufWriter::new(stdout.lock());
    let mut grid = Grid::new(&columns::columns(&columns::dlq()), out);
    let mut tally = tally;
    let mut short = views::ShortIds::default();
    let mut held: Option<Listed> = None;
    let mut footer = Footer::default();
    for triaged in arriving.into_iter().flatten() {
        tally.add(&triaged.verdict);
        footer.add(&triaged.verdict);
        let listed = Listed {
            message: triaged.message(),
            verdict: triaged.verdict,
        };
        if !shorten {
            grid.row(listed.cells(&listed.verdict.id), &mut writer)?;
            continue;
        }
        if let Some(before) = held.take() {
            let id = short.next(&before.verdict.id, Some(&listed.verdict.id));
            grid.row(before.cells(&id), &mut writer)?;
        }
        held = Some(listed);
    }
    if let Some(last) = held {
        let id = short.next(&last.verdict.id, None);
        grid.row(last.cells(&id), &mut writer)?;
    }
    grid.finish(&mut writer)?;
    footer.print(&mut writer, out)?;
    writer.flush()?;
    Ok(tally)
}

/// What the table's footer says: what a replay would do at PagerDuty, and the REPLAY
/// entries whose failed channels were all refused permanently, by code (each cause is
/// fixed once, then its entries are replayed together).
#[derive(Default)]
struct Footer {
    by_code: std::collections::BTreeMap<String, Refused>,
    /// Entries whose PAGERDUTY channel is not delivered (the first few, and how many in
    /// all): what a replay would do there.
    paging: Vec<String>,
    paging_total: usize,
}

/// The entries refused permanently with one code, and the distinct replies they got.
#[derive(Default)]
struct Refused {
    ids: Vec<String>,
    texts: std::collections::BTreeMap<String, usize>,
}

/// Distinct reply texts shown under one code.
const TEXTS_SHOWN: usize = 3;

impl Footer {
    fn add(&mut self, verdict: &Verdict) {
        if verdict.channels.iter().any(|c| {
            c.channel == crate::model::Channel::Pagerduty
                && c.state != crate::triage::ChannelState::Delivered
        }) {
            self.paging_total += 1;
            if self.paging.len() < 5 {
                self.paging.push(verdict.id.clone());
            }
        }
        let failed: Vec<&crate::triage::ChannelVerdict> = verdict
            .channels
            .iter()
            .filter(|c| c.state == crate::triage::ChannelState::Failed)
            .collect();
        if verdict.branch != Branch::Replay
            || failed.is_empty()
            || !failed.iter().all(|c| c.permanent)
        {
            return;
        }
        // One decision per code (the enhanced status code or HTTP status): five
        // `550 5.1.1 <address>` replies are one group, their texts counted under it.
        let code = failed
            .iter()
            .map(|c| format!("{} {}", c.channel, c.code_group().unwrap_or("(no code)")))
            .collect::<Vec<_>>()
            .join("; ");
        let group = self.by_code.entry(code).or_default();
        group.ids.push(verdict.id.clone());
        for channel in failed {
            let text = crate::triage::short_cause(channel.cause.as_deref().unwrap_or("refused"));
            *group.texts.entry(text).or_default() += 1;
        }
    }

    fn print(&self, to: &mut dyn Write, out: &Output) -> std::io::Result<()> {
        // Prose within the terminal's width, as every line a command prints.
        let mut text = String::new();
        self.write(&mut text, out);
        if !text.is_empty() {
            let _ = writeln!(
                to,
                "{}",
                crate::render::output::fit_lines(text.trim_end(), out)
            );
        }
        Ok(())
    }

    fn write(&self, to: &mut String, out: &Output) {
        use std::fmt::Write as _;
        if !self.paging.is_empty() {
            let ids: Vec<&str> = self.paging.iter().map(String::as_str).collect();
            let pagerduty = crate::cli::args::pagerduty_api();
            let looked_up = pagerduty.is_some();
            if looked_up {
                let _ = writeln!(to, "\nPagerDuty, were these replayed:");
            } else {
                let _ = writeln!(
                    to,
                    "\nPagerDuty: {} not delivered; nothing was looked up (UNS_PAGERDUTY_API_TOKEN is not set), so a replay of each:",
                    crate::render::output::counted(self.paging_total as i64, "entry")
                );
            }
            for line in crate::session::pagerduty_statements(&ids, pagerduty.as_ref()) {
                let _ = writeln!(to, "  {}", out.clean(&line));
            }
            if looked_up && self.paging_total > self.paging.len() {
                let _ = writeln!(
                    to,
                    "  and {} more PagerDuty entries, not looked up",
                    self.paging_total - self.paging.len()
                );
            }
        }
        if self.by_code.is_empty() {
            return;
        }
        let _ = writeln!(
            to,
            "\nRefused permanently, by code (a replay unchanged is refused again: fix each cause first):"
        );
        for (code, group) in &self.by_code {
            let shown: Vec<String> = group
                .ids
                .iter()
                .take(3)
                .map(|id| out.clean(id).into_owned())
                .collect();
            let more = group.ids.len().saturating_sub(shown.len());
            let _ = writeln!(
                to,
                "  {}  {}: {}{}",
                out.clean(code),
                crate::render::output::counted(group.ids.len() as i64, "entry"),
                shown.join(" "),
                if more > 0 {
                    format!(" and {more} more")
                } else {
                    String::new()
                }
            );
            for (text, count) in group.texts.iter().take(TEXTS_SHOWN) {
                let _ = writeln!(to, "    {} ×{count}", crate::render::sanitize::quoted(text));
            }
            if group.texts.len() > TEXTS_SHOWN {
                let _ = writeln!(
                    to,
                    "    and {} more distinct replies",
                    group.texts.len() - TEXTS_SHOWN
                );
            }
        }
    }
}

/// `dlq triage --all-contexts`: every context's entries, tagged, with next steps that
/// name their context. A plan written this way carries each entry's context for `apply`.
fn run_fleet(global: &Invocation, args: &Args) -> CliResult {
    if args.interactive || args.watch {
        return Err(crate::cli::error::CliError::usage(
            "--interactive and --watch work in one context: pass --context NAME",
        ));
    }
    let out = global.output();
    let selection = args.select.selection()?;
    let keep = selection::of_branch(args.branch);
    let limit = args.select.limit;
    // Each context's store identity with its verdicts, so `apply` acts on no other.
    let mut readings = fleet::read_each(global, &|store| {
        let identity = store.identity()?;
        let here = crate::session::ids::with_exclusions_here(store, selection.clone(), true)?;
        Ok((identity, selection::listed(store, &here, &keep, limit)?))
    })?;
    let mut contexts: Vec<fleet::ContextStatus> = Vec::new();
    for reading in &readings {
        contexts.push(fleet::ContextStatus {
            context: reading.context.clone(),
            entries: reading.result.as_ref().ok().map(|(_, v)| v.len()),
            error: reading.result.as_ref().err().map(|e| e.message.clone()),
            store: reading
                .result
                .as_ref()
                .ok()
                .and_then(|(identity, _)| identity.clone()),
        });
    }
    let mut entries: Vec<(String, Listed)> = Vec::new();
    for reading in &mut readings {
        if let Ok((_, verdicts)) = reading.result.as_mut() {
            for mut listed in std::mem::take(verdicts) {
                listed.verdict.next_step = listed.verdict.next_step.in_context(&reading.context);
                entries.push((reading.context.clone(), listed));
            }
        }
    }
    let mut counts = triage::empty_summary();
    for (_, Listed { verdict, .. }) in &entries {
        *counts.entry(verdict.branch).or_default() += 1;
    }
    out.stream(fleet::Across {
        entries: &entries,
        summary: Some((
            "summary",
            serde_json::to_value(&counts).map_err(std::io::Error::other)?,
        )),
        contexts,
    })?;
    if out.for_people() {
        status(&views::summary_counts(&counts));
    }
    fleet::conclude(&readings)
}
