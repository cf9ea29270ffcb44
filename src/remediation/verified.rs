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

/// One answer to record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
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

/// [`record`] for many entries, each checked and written exactly as [`record`] does it,
/// in transactions of up to [`BATCH`] entries. An entry that is refused writes nothing
/// (its findings are all checked before one is written), so the others of its batch are
/// still written. One transaction per entry cost a commit each, a third of the time it
/// took to record ten thousand.
///
/// When a batch fails as a whole (the store refuses a write, is busy, or goes away),
/// nothing of it was kept, and its entries are tried again one transaction each, so
/// every entry gets its own answer, as it would have without batches.
pub fn record_each(
    db: &Db<'_>,
    now: f64,
    entries: &[(String, Vec<Verified>)],
    actor: &Actor,
    why: Why<'_>,
    read_on: ReadOn,
) -> Vec<Result<Written, (String, Rejection)>> {
    let one = |(id, findings): &(String, Vec<Verified>)| {
        record(db, now, id, findings, actor, why, read_on).map_err(|err| (id.clone(), err))
    };
    let mut results = Vec::with_capacity(entries.len());
    for batch in entries.chunks(BATCH) {
        if batch.len() == 1 {
            results.push(one(&batch[0]));
            continue;
        }
        let batched = engine::write_tx(db, |tx| {
            let now = tx.now(now).map_err(EngineError::from)?;
            let mut done = Vec::with_capacity(batch.len());
            for (id, findings) in batch {
                match record_in(tx, now, id, findings, actor, why, read_on) {
                    Ok(written) => done.push(Ok(written)),
                    Err(Rejection::Store(err)) => return Err(Rejection::Store(err)),
                    Err(refused) => done.push(Err((id.clone(), refused))),
                }
            }
            Ok(done)
        });
        match batched {
            Ok(done) => results.extend(done),
            Err(_) => results.extend(batch.iter().map(one)),
        }
    }
    results
}

/// [`record`]'s work inside a write transaction that is already open, at `now`, the
/// transaction's time.
fn record_in(
    tx: &Db<'_>,
    now: f64,
    id: &str,
    findings: &[Verified],
    actor: &Actor,
    why: Why<'_>,
    read_on: ReadOn,
) -> Result<Written, Rejection> {
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
    let mut events = queries::read_events(tx, id)?;
    let history = History::read(&row, events.iter().map(Observed::from_event));
    let verdict = triage::judge(&row, &history);
    // Every finding is checked before any is written, against the history as read
    // above: a refused entry leaves nothing behind, alone or inside a batch.
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
        check(id, &row, &history, &verdict, finding)?;
        settling.push(finding);
    }
    let text = |t: Option<&str>| {
        t.map(str::trim)
            .filter(|t| !t.is_empty())
            .map(str::to_string)
    };
    let triage = audit_summary(&verdict);
    let mut written = Vec::with_capacity(settling.len());
    for finding in settling {
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
        written.push(engine::append(tx, id, now, Kind::Verified, &payload)?);
    }
    // The history now is the one read above and the events just written after it: the
    // notification is locked, so no other writer added one in between.
    let event_ids = written.iter().map(|event| event.id).collect();
    events.append(&mut written);
    let after = triage::triage_events(&row, &events);
    Ok(Written {
        id: id.to_string(),
        event_ids,
        skipped,
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
