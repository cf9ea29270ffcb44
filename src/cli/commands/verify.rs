//! `unsctl verify`: ask each provider's own record about VERIFY entries, and with
//! `--record` write the answers down so triage can move them to RESOLVE or REPLAY.

use crate::cli::args::{ConfirmArgs, SelectArgs, SourceArgs};
use crate::cli::backend::Invocation;
use crate::cli::error::{CliError, CliResult, ExitKind};
use crate::cli::selection;
use crate::cli::{backend, prompt};
use crate::remediation::verified::Written;
use crate::render::output::{Output, counted, print, status};
use crate::render::table::{Column, Grid, Text, Tone, toned};
use crate::store::{Store, StoreError};
use crate::triage::Branch;
use crate::verify::{self, Answer, Asked, Delivery, Sources};
use serde::Serialize;

/// Ask each provider's own record whether VERIFY entries' uncertain attempts arrived
///
/// EMAIL is looked up in the relay's log by Message-ID (DELIVERED only if the relay queued
/// it), PAGERDUTY in the incident list by dedup key, SLACK in the channel's history by the
/// message metadata. Without proof either way the answer is CANNOT_TELL: check by hand.
///
/// Example: unsctl verify --relay-log /var/log/mail.log --relay-log /var/log/mail.log.1.gz
/// Example: unsctl verify n-0192... -o json
/// Example: unsctl verify --relay-log /var/log/mail.log --record --confirm --reason "INC-42"
#[derive(Debug, clap::Args)]
#[command(verbatim_doc_comment)]
pub struct Args {
    /// Entries to verify (default: every VERIFY entry the selection picks)
    #[arg(value_parser = crate::cli::values::parse_id)]
    pub ids: Vec<String>,
    #[command(flatten)]
    pub select: SelectArgs,
    #[command(flatten)]
    pub sources: SourceArgs,
    #[command(flatten)]
    pub senders: crate::cli::args::SenderArgs,
    /// Write each answer other than CANNOT_TELL down as a VERIFIED event (a change: a dry
    /// run unless --confirm)
    #[arg(long)]
    pub record: bool,
    #[command(flatten)]
    pub confirm: ConfirmArgs,
    /// Why, recorded with each answer
    #[arg(long, value_parser = crate::cli::values::parse_said)]
    pub reason: Option<String>,
    /// Incident or ticket reference, recorded with each answer
    #[arg(long, value_parser = crate::cli::values::parse_said)]
    pub ticket: Option<String>,
    /// Who is acting (default: UNS_OPERATOR, then the account name)
    #[arg(long, value_parser = crate::cli::values::parse_said)]
    pub operator: Option<String>,
}

const COLUMNS: &[Column] = &[
    Column::new("ID", 0).whole(),
    Column::new("CHANNEL", 0),
    Column::new("ATTEMPT", 0),
    Column::new("ANSWER", 0).whole(),
    Column::new("REASON", 1).max(40),
    Column::new("SOURCE", 4),
    Column::new("EVIDENCE", 5).max(100),
];

pub fn run(global: &Invocation, args: Args) -> CliResult {
    if args.confirm.confirm && !args.record {
        return Err(CliError::usage(
            "--confirm goes with --record: verify alone changes nothing",
        ));
    }
    if !args.ids.is_empty() && args.select.narrows() {
        return Err(CliError::usage(
            "name entries by id, or select them with the selection flags, not both",
        ));
    }
    let out = global.output();
    let writing = args.record && args.confirm.confirm;
    let store = backend::for_action(global, writing)?;
    let ids = if args.ids.is_empty() {
        selection::verdicts(
            store.as_ref(),
            &args.select.resolved(store.as_ref(), true)?,
            &selection::of_branch(Some(Branch::Verify)),
            args.select.limit,
        )?
        .into_iter()
        .map(|v| v.id)
        .collect()
    } else {
        crate::session::ids::expand_ids(store.as_ref(), &args.ids)?
    };
    if ids.is_empty() {
        out.closing(&report(&Asked::default(), None))?;
        status(&format!(
            "Nothing to verify: no VERIFY entries in {}.",
            store.describe()
        ));
        return Ok(());
    }
    let sources = args.senders.apply(args.sources.sources());
    let asked = store.verify(&ids, &sources)?;
    say_unread(&asked.unread);
    let recordable = asked
        .answers
        .iter()
        .filter(|a| a.answer.finding().is_some())
        .count();
    out.progress(|| print_answers(store.as_ref(), &asked, &out))?;
    let recorded = if args.record {
        Some(record(
            store.as_ref(),
            &asked,
            &args,
            &global.operator(args.operator.as_deref())?,
            recordable,
            &out,
        )?)
    } else {
        None
    };
    out.closing(&report(&asked, recorded.as_ref()))?;
    if out.for_people() {
        advise(&asked, recorded.as_ref(), args.record, &sources);
    }
    ending(&asked, recorded.as_ref())
}

/// How a run ends once everything is said: as the most serious of the answers that could
/// not be recorded, else as not found when an id named is not in the store (it was
/// skipped and the rest were asked about, as a bulk resolve carries on), else done.
fn ending(asked: &Asked, recorded: Option<&Recording>) -> CliResult {
    let failed = recorded
        .iter()
        .flat_map(|r| &r.failed)
        .map(|(_, err)| crate::cli::error::exit_kind(err));
    if let Some(kind) = crate::cli::error::most_serious(failed) {
        return Err(CliError::new(
            kind,
            "not every answer was recorded (see above)",
        ));
    }
    match asked.not_found().count() {
        0 => Ok(()),
        missing => Err(CliError::new(
            ExitKind::NotFound,
            format!(
                "{missing} of the ids named {} not found in the store (see above)",
                if missing == 1 { "was" } else { "were" }
            ),
        )),
    }
}

/// What `--record` did.
struct Recording {
    dry_run: bool,
    planned: usize,
    done: Vec<Written>,
    failed: Vec<(String, StoreError)>,
}

fn record(
    store: &dyn Store,
    asked: &Asked,
    args: &Args,
    operator: &str,
    recordable: usize,
    out: &Output,
) -> CliResult<Recording> {
    let mut recording = Recording {
        dry_run: !args.confirm.confirm,
        planned: recordable,
        done: Vec::new(),
        failed: Vec::new(),
    };
    if recordable == 0 {
        status("Nothing to record: every answer is CANNOT_TELL.");
        return Ok(recording);
    }
    let entries: Vec<&str> = {
        let mut ids: Vec<&str> = asked
            .answers
            .iter()
            .filter(|a| a.answer.finding().is_some())
            .map(|a| a.id.as_str())
            .collect();
        ids.dedup();
        ids
    };
    if recording.dry_run {
        status(&format!(
            "(dry run) Would record {} as VERIFIED events on {}. Add --confirm to record.",
            counted(recordable as i64, "answer"),
            counted(entries.len() as i64, "entry"),
        ));
        return Ok(recording);
    }
    if !confirmed(store, &entries, operator, &args.confirm)? {
        status("Declined: nothing was recorded.");
        recording.dry_run = true;
        return Ok(recording);
    }
    for result in store.record_verified(
        asked,
        operator,
        crate::remediation::verified::Why {
            reason: args.reason.as_deref(),
            ticket: args.ticket.as_deref(),
            via: None,
        },
    ) {
        match result {
            Ok(done) => {
                out.progress(|| print(&recorded_line(&done, out)))?;
                recording.done.push(done);
            }
            Err((id, err)) => {
                out.progress(|| {
                    print(&format!(
                        "{}  not recorded: {}",
                        out.clean(&id),
                        out.clean(&err.to_string())
                    ))
                })?;
                recording.failed.push((id, err));
            }
        }
    }
    Ok(recording)
}

fn confirmed(
    store: &dyn Store,
    entries: &[&str],
    operator: &str,
    confirm: &ConfirmArgs,
) -> CliResult<bool> {
    let count = entries.len();
    if confirm.yes {
        return Ok(true);
    }
    if !prompt::interactive() {
        return Err(CliError::new(
            ExitKind::Refused,
            format!(
                "refusing to record answers on {count} entries without a terminal to confirm on"
            ),
        )
        .hint("pass --yes to confirm from automation"));
    }
    let clean = crate::render::sanitize::clean;
    let listed: Vec<String> = entries
        .iter()
        .take(10)
        .map(|id| clean(id).into_owned())
        .collect();
    let head = format!(
        "Record the answers above as VERIFIED events on {} in {} as {}",
        counted(count as i64, "entry"),
        clean(&store.describe()),
        clean(&store.operator(operator)?),
    );
    Ok(prompt::confirm_listed(
        &[],
        &format!("{head}?"),
        &listed,
        count,
    )?)
}

fn tone(outcome: Delivery) -> Tone {
    match outcome {
        Delivery::Delivered => Tone::Good,
        Delivery::NotDelivered => Tone::Bad,
        Delivery::CannotTell => Tone::Warn,
    }
}

fn print_answers(store: &dyn Store, asked: &Asked, out: &Output) -> CliResult {
    let stdout = std::io::stdout();
    let mut to = stdout.lock();
    if !asked.answers.is_empty() {
        let short =
            crate::session::ids::short_ids(store, asked.answers.iter().map(|a| a.id.as_str()), out);
        let mut grid = Grid::new(COLUMNS, out);
        for answer in &asked.answers {
            let id = short.get(&answer.id).unwrap_or(&answer.id);
            grid.row(row(answer, id, out), &mut to)?;
        }
        grid.finish(&mut to)?;
    }
    for (id, why) in &asked.skipped {
        status(&format!("{}  skipped: {}", out.clean(id), out.clean(why)));
    }
    Ok(())
}

fn row(answer: &Answer, id: &str, out: &Output) -> Vec<Text> {
    vec![
        out.clean(id).into_owned().into(),
        answer.channel.as_str().into(),
        format!("{}/{}", answer.cycle, answer.attempt).into(),
        toned(answer.answer.as_str(), tone(answer.answer)),
        out.clean(&verify::brief(&answer.evidence))
            .into_owned()
            .into(),
        answer.source.as_str().into(),
        out.clean(&answer.evidence).into_owned().into(),
    ]
}

fn recorded_line(done: &Written, out: &Output) -> String {
    let id = out.clean(&done.id);
    let next = format!("next: {}", out.clean(&done.next_step));
    let mut line = format!(
        "{id}  recorded {} VERIFIED event{} ({})  now {}  {next}",
        done.event_ids.len(),
        if done.event_ids.len() == 1 { "" } else { "s" },
        done.event_ids
            .iter()
            .map(i64::to_string)
            .collect::<Vec<_>>()
            .join(","),
        done.branch
    );
    for skipped in &done.skipped {
        line.push_str(&format!("\n    skipped: {}", out.clean(skipped)));
    }
    line
}

/// The records named that could not be read ([`verify::unread_line`]), on stderr before
/// the answers, whatever the output.
pub(super) fn say_unread(unread: &[String]) {
    for what in unread {
        status(&verify::unread_line(what));
    }
}

/// What to do next, on stderr.
fn advise(asked: &Asked, recorded: Option<&Recording>, recording: bool, sources: &Sources) {
    let counts = verify::summary(&asked.answers);
    status(&format!(
        "{} attempt{} checked: {} DELIVERED, {} NOT_DELIVERED, {} CANNOT_TELL",
        asked.answers.len(),
        if asked.answers.len() == 1 { "" } else { "s" },
        counts[&Delivery::Delivered],
        counts[&Delivery::NotDelivered],
        counts[&Delivery::CannotTell],
    ));
    if counts[&Delivery::CannotTell] > 0 {
        status(
            "CANNOT_TELL: no record proves it either way; check those by hand (TSG-02, branch 2).",
        );
    }
    if !recording {
        for (id, step) in verify::next_steps(&asked.answers, sources) {
            status(&format!(
                "{}  next: {}",
                crate::render::sanitize::clean(&id),
                crate::render::sanitize::clean(&step)
            ));
        }
    }
    let answered = counts[&Delivery::Delivered] + counts[&Delivery::NotDelivered];
    if answered > 0 && !recording {
        status(
            "Write the answers down with --record --confirm; triage then moves those entries to RESOLVE or REPLAY.",
        );
    }
    if let Some(recorded) = recorded
        && !recorded.dry_run
        && !recorded.done.is_empty()
    {
        status(
            "Recorded. `unsctl dlq triage` shows the new branches; `unsctl apply` or the next steps above carry them out.",
        );
    }
}

/// `verify -o json`: `{"answers": [...], "summary": {...}, "unread": [...]}`, the entries
/// skipped and why, and with `--record` what was (or would be) written.
#[derive(Serialize)]
struct Report<'a> {
    answers: &'a [Answer],
    summary: std::collections::BTreeMap<Delivery, usize>,
    /// The records named that could not be read, as said on stderr: no answer rests on
    /// them, and a script reading the document alone must see that too.
    unread: &'a [String],
    #[serde(skip_serializing_if = "Vec::is_empty")]
    skipped: Vec<Skipped<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    record: Option<RecordReport<'a>>,
}

#[derive(Serialize)]
struct Skipped<'a> {
    id: &'a str,
    reason: &'a str,
}

#[derive(Serialize)]
struct RecordReport<'a> {
    dry_run: bool,
    planned: usize,
    recorded: &'a [Written],
    failed: Vec<Failed>,
}

#[derive(Serialize)]
struct Failed {
    id: String,
    error: String,
}

fn report<'a>(asked: &'a Asked, recorded: Option<&'a Recording>) -> Report<'a> {
    Report {
        answers: &asked.answers,
        summary: verify::summary(&asked.answers),
        unread: &asked.unread,
        skipped: asked
            .skipped
            .iter()
            .map(|(id, reason)| Skipped { id, reason })
            .collect(),
        record: recorded.map(|recorded| RecordReport {
            dry_run: recorded.dry_run,
            planned: recorded.planned,
            recorded: &recorded.done,
            failed: recorded
                .failed
                .iter()
                .map(|(id, err)| Failed {
                    id: id.clone(),
                    error: err.to_string(),
                })
                .collect(),
        }),
    }
}
