//! Recording what a provider's own record said (DESIGN §7): one VERIFIED event per
//! answer, appended in one transaction after the entry is read and triaged again.
//!
//! Only the verifier makes findings, on the machine whose logs and tokens it used (the
//! CLI on its store, the server for the API); none is ever taken from a client. A
//! finding about a channel that is no longer UNCERTAIN is skipped and says so: the
//! doubt it would have settled is gone, so recording it again can only add noise.

use super::{Actor, Rejection, audit_summary, conflict};
use crate::db::Db;
use crate::history::{History, Observed};
use crate::model::payload;
use crate::model::{Channel, Kind};
use crate::runtime::engine::{self, EngineError};
use crate::runtime::queries;
use crate::triage::{self, Branch, ChannelState};
use serde::{Deserialize, Serialize};

/// Longest evidence text kept in an event.
pub const EVIDENCE_CHARS: usize = 2_000;

/// What a provider's record proved about a channel's attempts: the same two answers an
/// operator can attest.
pub type Finding = crate::model::payload::Claim;

/// One answer to record; a key it does not know is refused, as in the body around it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Verified {
    pub channel: Channel,
    pub cycle: i64,
    /// The attempts the answer covers: one Message-ID's for EMAIL; the cycle's for the
    /// channels whose key the cycle shares.
    pub attempts: Vec<i64>,
    pub outcome: Finding,
    /// relay-log, pagerduty or slack.
    pub source: String,
    pub evidence: String,
}

/// Where the provider's record was read: by whoever makes the change (the CLI on its
/// store, the server's own verify route), or by a client that posted the answer with its
/// evidence, which the audit then says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadOn {
    Here,
    Client,
}

/// The sources a finding may name.
pub const SOURCES: [&str; 3] = ["relay-log", "pagerduty", "slack"];

/// Why the answers are recorded: kept with each VERIFIED event, as with every change.
#[derive(Debug, Clone, Copy, Default)]
pub struct Why<'a> {
    pub reason: Option<&'a str>,
    pub ticket: Option<&'a str>,
    /// The front end recording, when not the command line.
    pub via: Option<crate::model::payload::Via>,
}

/// What recording did for one entry.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Written {
    pub id: String,
    /// The VERIFIED events written.
    pub event_ids: Vec<i64>,
    /// Findings not recorded, and why.
    pub skipped: Vec<String>,
    /// The entry's branch with them.
    pub branch: Branch,
    /// What to do now, by [`next_step`].
    #[serde(default)]
    pub next_step: String,
}

/// The next step once answers are recorded, one rule per branch: RESOLVE resolves,
/// REPLAY replays what was not delivered (the VERIFIED events are its attestation), and
/// VERIFY is left for the out-of-band check.
pub fn next_step(verdict: &triage::Verdict) -> String {
    use crate::model::command::{CommandLine, Step};
    match verdict.branch {
        Branch::Resolve | Branch::Replay => verdict.next_step.to_string(),
        Branch::Verify => Step::after(
            "check out of band (TSG-02 branch 2): see what to search for".into(),
            CommandLine::unsctl(&["inspect"]).operand(crate::model::command::THE_ID, &verdict.id),
        )
        .to_string(),
    }
}

/// Appends `findings` about DLQ entry `id` as VERIFIED events, after checking, as the
/// history stands, that each names attempts of its channel that are in doubt: a finding
/// about an attempt that was refused, accepted or never made is a conflict, whoever sent
/// it. A finding about a channel no longer UNCERTAIN is skipped and says so.
pub fn record(
    db: &Db<'_>,
    now: f64,
    id: &str,
    findings: &[Verified],
    actor: &Actor,
    why: Why<'_>,
    read_on: ReadOn,
) -> Result<Written, Rejection> {
    engine::write_tx(db, |tx| {
        let now = tx.now(now).map_err(EngineError::from)?;
        record_in(tx, now, id, findings, actor, why, read_on)
    })
}

/// Entries recorded in one write transaction by [`record_each`]. Short enough that the
/// store is held for milliseconds, so a worker renewing its lease on the same store
/// waits no longer than it does for one of its own commits.
pub const BATCH: usize = 64;

/// One entry to record: its id and its findings.
type Entry = (String, Vec<Verified>);

/// What recording one entry gave: what was written, or why nothing was.
type Recorded = Result<Written, (String, Rejection)>;

/// [`record`] for many entries, each checked and written exactly as [`record`] does it,
/// in transactions of up to [`BATCH`] entries. An entry that is refused writes nothing
/// (its findings are all checked before one is written), so the others of its batch are
/// still written. One transaction per entry cost a commit each, a third of the time it
/// took to record ten thousand.
///
/// Inside a transaction the entries are read first, then written in order; each one's
/// history is judged on a thread of its own meanwhile (see [`record_batch`]).
///
/// When a batch fails as a whole (the store refuses a write, is busy, or goes away),
/// nothing of it was kept, and its entries are tried again one transaction each, so
/// every entry gets its own answer, as it would have without batches.
pub fn record_each(
    db: &Db<'_>,
    now: f64,
    entries: &[Entry],
    actor: &Actor,
    why: Why<'_>,
    read_on: ReadOn,
) -> Vec<Recorded> {
    let one = |(id, findings): &Entry| {
        record(db, now, id, findings, actor, why, read_on).map_err(|err| (id.clone(), err))
    };
    let judge = |read: &Read, (id, findings): &Entry| plan(read, id, findings, actor, why, read_on);
    let mut results = Vec::with_capacity(entries.len());
    for batch in entries.chunks(BATCH) {
        if batch.len() == 1 {
            results.push(one(&batch[0]));
            continue;
        }
        let batched = engine::write_tx(db, |tx| {
            let now = tx.now(now).map_err(EngineError::from)?;
            let mut done = Vec::with_capacity(batch.len());
            for part in distinct_runs(batch) {
                done.extend(record_batch(tx, now, part, &judge)?);
            }
            Ok::<_, Rejection>(done)
        });
        match batched {
            Ok(done) => results.extend(done),
            Err(_) => results.extend(batch.iter().map(one)),
        }
    }
    results
}

/// `batch` cut where an id comes again: an entry named twice is read the second time
/// after its first findings are written, as it would be alone.
fn distinct_runs(batch: &[Entry]) -> Vec<&[Entry]> {
    let mut runs = Vec::new();
    let mut seen = std::collections::HashSet::new();
    let mut start = 0;
    for (at, (id, _)) in batch.iter().enumerate() {
        if !seen.insert(id.as_str()) {
            runs.push(&batch[start..at]);
            seen.clear();
            seen.insert(id.as_str());
            start = at;
        }
    }
    runs.push(&batch[start..]);
    runs
}

/// Records entries of distinct ids inside the open transaction `tx`, as [`record_in`]
/// would one after another. Every entry is read first, each handed to `judge` on a
/// second thread as it is read; the plans come back in order and are written on this
/// one. Reading all before writing any reads the same: each entry is locked and no
/// entry's writes touch another's rows. A store error ends the batch (Err); a refused
/// entry writes nothing and the others go on.
fn record_batch(
    tx: &Db<'_>,
    now: f64,
    batch: &[Entry],
    judge: &(dyn Fn(&Read, &Entry) -> Result<Plan, Rejection> + Sync),
) -> Result<Vec<Recorded>, Rejection> {
    use std::sync::mpsc;
    let refused = |at: usize, why: Rejection| Err((batch[at].0.clone(), why));
    let mut outcomes: Vec<Option<Recorded>> =
        std::iter::repeat_with(|| None).take(batch.len()).collect();
    std::thread::scope(|scope| {
        let (to_judge, reads) = mpsc::channel::<(usize, Read)>();
        let (to_write, judged) = mpsc::channel::<Judged>();
        std::thread::Builder::new()
            .name("judge".into())
            .spawn_scoped(scope, move || {
                for (at, read) in reads {
                    let plan = judge(&read, &batch[at]).map(|plan| (read, plan));
                    if to_write.send((at, plan)).is_err() {
                        return;
                    }
                }
            })
            .map_err(|err| {
                EngineError::Invalid(format!("cannot start a thread to judge entries: {err}"))
            })?;
        let mut write = |(at, judged): Judged| {
            match judged.and_then(|(read, plan)| write_in(tx, now, &batch[at].0, read, plan)) {
                Ok(written) => outcomes[at] = Some(Ok(written)),
                Err(Rejection::Store(err)) => return Err(Rejection::Store(err)),
                Err(why) => outcomes[at] = Some(refused(at, why)),
            }
            Ok(())
        };
        for (at, (id, _)) in batch.iter().enumerate() {
            match read_in(tx, id) {
                Ok(read) => {
                    if to_judge.send((at, read)).is_err() {
                        break;
                    }
                }
                Err(Rejection::Store(err)) => return Err(Rejection::Store(err)),
                Err(why) => write((at, Err(why)))?,
            }
            // Whatever is judged already is written between reads, so neither thread
            // waits for the other to finish the batch.
            while let Ok(done) = judged.try_recv() {
                write(done)?;
            }
        }
        drop(to_judge);
        for done in judged {
            write(done)?;
        }
        Ok(())
    })?;
    // An entry without an outcome was never judged: the judging thread stopped.
    outcomes
        .into_iter()
        .map(|outcome| {
            outcome.ok_or_else(|| {
                Rejection::Store(EngineError::Invalid(
                    "the thread judging entries stopped".into(),
                ))
            })
        })
        .collect()
}

/// [`record`]'s work inside a write transaction that is already open, at `now`, the
/// transaction's time: read, judge, write.
fn record_in(
    tx: &Db<'_>,
    now: f64,
    id: &str,
    findings: &[Verified],
    actor: &Actor,
    why: Why<'_>,
    read_on: ReadOn,
) -> Result<Written, Rejection> {
    let read = read_in(tx, id)?;
    let plan = plan(&read, id, findings, actor, why, read_on)?;
    write_in(tx, now, id, read, plan)
}

/// An entry of a batch (by its place), as read, and what recording it will write.
type Judged = (usize, Result<(Read, Plan), Rejection>);

/// An entry as its transaction read it, before anything is written.
struct Read {
    row: crate::model::Notification,
    events: Vec<crate::model::Event>,
}

/// What recording an entry writes, judged from its [`Read`] without the store.
struct Plan {
    events: Vec<engine::Prepared>,
    skipped: Vec<String>,
}

/// Locks and reads entry `id`, which must be in the DLQ.
fn read_in(tx: &Db<'_>, id: &str) -> Result<Read, Rejection> {
    tx.lock(id).map_err(EngineError::from)?;
    let row =
        queries::read_notification(tx, id)?.ok_or_else(|| Rejection::NotFound(id.to_string()))?;
    if !row.dead_letter {
        return Err(Rejection::NotInDlq(conflict(
            id,
            &row,
            "not in the DLQ".into(),
        )));
    }
    let events = queries::read_events(tx, id)?;
    Ok(Read { row, events })
}

/// The VERIFIED events `findings` make of entry `id` as read: every finding is checked
/// before any is planned, so a refused entry leaves nothing behind, alone or inside a
/// batch.
fn plan(
    read: &Read,
    id: &str,
    findings: &[Verified],
    actor: &Actor,
    why: Why<'_>,
    read_on: ReadOn,
) -> Result<Plan, Rejection> {
    let history = History::read(&read.row, read.events.iter().map(Observed::from_event));
    let verdict = triage::judge(&read.row, &history);
    let mut settling = Vec::new();
    let mut skipped = Vec::new();
    for finding in findings {
        let state = verdict.channel(finding.channel).map(|c| c.state);
        if state != Some(ChannelState::Uncertain) {
            skipped.push(format!(
                "{}: {} is {} now; nothing to settle",
                id,
                finding.channel,
                state.map_or("not a channel of this notification", |s| s.as_str())
            ));
            continue;
        }
        check(id, &read.row, &history, &verdict, finding)?;
        settling.push(finding);
    }
    let text = |t: Option<&str>| {
        t.map(str::trim)
            .filter(|t| !t.is_empty())
            .map(str::to_string)
    };
    let triage = audit_summary(&verdict);
    let events = settling
        .into_iter()
        .map(|finding| {
            let payload = payload::Verified {
                channel: finding.channel,
                cycle: finding.cycle,
                attempts: finding.attempts.clone(),
                outcome: finding.outcome,
                source: finding.source.clone(),
                evidence: finding.evidence.chars().take(EVIDENCE_CHARS).collect(),
                operator: actor.operator.clone(),
                reason: text(why.reason),
                ticket: text(why.ticket),
                triage: triage.clone(),
                claimed_operator: actor.claimed_operator.clone(),
                read_on_client: read_on == ReadOn::Client,
                via: why.via,
            };
            engine::Prepared::of(Kind::Verified, &payload)
        })
        .collect();
    Ok(Plan { events, skipped })
}

/// Writes what `plan` holds for entry `id`, and triages the entry with it.
fn write_in(tx: &Db<'_>, now: f64, id: &str, read: Read, plan: Plan) -> Result<Written, Rejection> {
    let Read { row, mut events } = read;
    let mut event_ids = Vec::with_capacity(plan.events.len());
    for prepared in plan.events {
        let event = engine::append_prepared(tx, id, now, prepared)?;
        event_ids.push(event.id);
        events.push(event);
    }
    // The history now is the one read and the events just written after it: the
    // notification is locked, so no other writer added one in between.
    let after = triage::triage_events(&row, &events);
    Ok(Written {
        id: id.to_string(),
        event_ids,
        skipped: plan.skipped,
        branch: after.branch,
        next_step: next_step(&after),
    })
}

/// Whether `finding` names what is in doubt for `id` as its history stands: the cycle's
/// attempts of an UNCERTAIN channel that were not refused, at least one of them unknown,
/// from a source verify reads, with its evidence.
fn check(
    id: &str,
    row: &crate::model::Notification,
    history: &History,
    verdict: &triage::Verdict,
    finding: &Verified,
) -> Result<(), Rejection> {
    let stale = |reason: String| Rejection::Stale(conflict(id, row, reason));
    let channel = finding.channel;
    if !SOURCES.contains(&finding.source.as_str()) || finding.evidence.trim().is_empty() {
        return Err(stale(format!(
            "a {channel} answer must name its source ({}) and carry its evidence",
            SOURCES.join(", ")
        )));
    }
    let evidence = verdict
        .channel(channel)
        .map(|c| c.evidence.as_slice())
        .unwrap_or_default();
    let questions = crate::history::questions(history, &[(channel, evidence)]);
    let Some(question) = questions.iter().find(|q| q.cycle == finding.cycle) else {
        return Err(stale(format!(
            "no {channel} attempt of cycle {} is in doubt",
            finding.cycle
        )));
    };
    if finding.attempts.is_empty() {
        return Err(stale(format!("the {channel} answer names no attempt")));
    }
    if let Some(other) = finding
        .attempts
        .iter()
        .find(|n| !question.cycle_attempts.contains(n))
    {
        return Err(stale(format!(
            "{channel} attempt {other} of cycle {} was refused by the provider or never made: no record can settle it",
            finding.cycle
        )));
    }
    if !finding
        .attempts
        .iter()
        .any(|n| question.attempts.iter().any(|a| a.attempt == *n))
    {
        return Err(stale(format!(
            "none of {channel} attempts {:?} of cycle {} is in doubt",
            finding.attempts, finding.cycle
        )));
    }
    Ok(())
}
