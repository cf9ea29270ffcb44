//! Resolve and replay: the guarded transitions, each one transaction, each written once.
//!
//! Inside the transaction the entry is read and triaged afresh, and the guardrails of
//! [`policy`] are checked against that verdict. The API server and the CLI's direct-SQLite
//! path both call [`apply`]; there is no other way to resolve or replay, so no caller can
//! skip a guardrail or have a verdict of its own recorded.

pub mod note;
pub mod policy;
pub mod verified;

pub use policy::{Action, Approved, Claim, Refusal, Request};

use crate::args;
use crate::clock;
use crate::db::{Db, DbError};
use crate::model::payload::{self, Audit};
use crate::model::{ChannelSet, Kind};
use crate::runtime::engine::{self, EngineError};
use crate::runtime::queries;
use crate::triage::{self, Verdict};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// Who acts: the operator recorded, and who the client claimed to be when that differs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Actor {
    pub operator: String,
    pub claimed_operator: Option<String>,
}

impl Actor {
    /// An operator acting on the store directly, who is who they say.
    pub fn local(operator: &str) -> Self {
        Self {
            operator: operator.to_string(),
            claimed_operator: None,
        }
    }
}

/// The row's state when someone else changed it first.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Conflict {
    pub id: String,
    pub status: String,
    pub dead_letter: bool,
    pub since: f64,
    pub reason: String,
}

impl std::fmt::Display for Conflict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}: {} (status {}{}, since {})",
            self.id,
            self.reason,
            self.status,
            if self.dead_letter { ", in the DLQ" } else { "" },
            clock::rfc3339(self.since)
        )
    }
}

/// Why an action did not happen. Each maps to one exit code and one HTTP status.
#[derive(Debug, thiserror::Error)]
pub enum Rejection {
    #[error("notification {0} not found")]
    NotFound(String),
    /// The row is not in the DLQ (someone resolved or replayed it first).
    #[error("{0}")]
    NotInDlq(Conflict),
    /// The history moved since the verdict the caller acted on.
    #[error("{0}")]
    Stale(Conflict),
    #[error("refused: {0}")]
    Refused(Refusal),
    #[error(transparent)]
    Store(#[from] EngineError),
}

impl From<DbError> for Rejection {
    fn from(err: DbError) -> Self {
        Rejection::Store(EngineError::Db(err))
    }
}

/// What an action did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Performed {
    Resolved,
    Replayed,
}

/// The answer to a resolve or replay: the audit event written and where the row is now.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Done {
    pub id: String,
    pub action: Performed,
    /// The DLQ_RESOLVED or REPLAYED event.
    pub event_id: i64,
    pub status: String,
    pub cycle: i64,
    #[serde(default, skip_serializing_if = "ChannelSet::is_empty")]
    pub channels: ChannelSet,
}

/// What an audit event keeps of a verdict: branch, channel states, evidence, last event.
pub fn audit_summary(verdict: &Verdict) -> Value {
    json!({
        "branch": verdict.branch,
        "lease_lost": verdict.lease_lost,
        "last_event_id": verdict.last_event_id,
        "channels": verdict.channels.iter().map(|c| json!({
            "channel": c.channel, "state": c.state, "evidence": c.evidence,
        })).collect::<Vec<_>>(),
    })
}

fn conflict(id: &str, row: &crate::model::Notification, reason: String) -> Conflict {
    Conflict {
        id: id.to_string(),
        status: row.status.to_string(),
        dead_letter: row.dead_letter,
        since: row.updated_at,
        reason,
    }
}

/// Resolves or replays one DLQ entry: reads and triages it, checks the guardrails, and
/// writes the change with its audit event, all in one transaction.
pub fn apply(
    db: &Db<'_>,
    now: f64,
    id: &str,
    action: Action,
    request: &Request,
    actor: &Actor,
) -> Result<Done, Rejection> {
    engine::write_tx(db, |tx| {
        let now = tx.now(now)?;
        // The row is this change's until it commits (PostgreSQL): a second resolve or
        // replay waits, then finds it out of the DLQ.
        tx.lock(id)?;
        let row = queries::read_notification(tx, id)?
            .ok_or_else(|| Rejection::NotFound(id.to_string()))?;
        let events = queries::read_events(tx, id)?;
        let newest = events.iter().map(|e| e.id).max();
        if let Some(expected) = request.expected_last_event_id
            && newest != Some(expected)
        {
            let seen = newest.map_or_else(|| "none".to_string(), |n| n.to_string());
            return Err(Rejection::Stale(conflict(
                id,
                &row,
                format!(
                    "history moved since it was triaged (newest event {seen}, the plan saw {expected})"
                ),
            )));
        }
        if !row.dead_letter {
            return Err(Rejection::NotInDlq(conflict(
                id,
                &row,
                "not in the DLQ".into(),
            )));
        }
        let verdict = triage::triage_events(&row, &events);
        let approved = policy::check(&verdict, &row.channel_set(), action, request)
            .map_err(Rejection::Refused)?;
        let due = due(request, action, now)?;
        let mut audit = audit(&verdict, &approved, request, actor);
        match action {
            Action::Resolve => {
                // Resolving past a channel nobody received gives it up: each is named.
                audit.given_up = verdict.unsent().iter().collect();
                resolve(tx, now, id, audit)
            }
            Action::Replay => replay(tx, now, id, &approved.channels, audit, due),
        }
    })
}

/// How far ahead a paced replay may be made due: a week.
pub const MAX_DUE_AHEAD: f64 = 7.0 * 86_400.0;

/// When a replay's new cycle is due, and the pace it keeps: now unless the request
/// says later (earlier than now is now). A resolve takes no time.
fn due(
    request: &Request,
    action: Action,
    now: f64,
) -> Result<Option<(f64, Option<String>)>, Rejection> {
    let Some(at) = request.due_at else {
        return Ok(None);
    };
    let invalid = |why: String| Rejection::Store(EngineError::Invalid(why));
    if action == Action::Resolve {
        return Err(invalid(
            "due_at is for a replay; a resolve happens now".into(),
        ));
    }
    if !at.is_finite() {
        return Err(invalid("due_at must be a time in unix seconds".into()));
    }
    if at > now + MAX_DUE_AHEAD {
        return Err(invalid(format!(
            "due_at is more than {} days ahead",
            MAX_DUE_AHEAD / 86_400.0
        )));
    }
    let pace = request
        .pace
        .as_deref()
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .map(|p| p.chars().take(200).collect());
    Ok(Some((at.max(now), pace)))
}

fn audit(verdict: &Verdict, approved: &Approved, request: &Request, actor: &Actor) -> Audit {
    Audit {
        via: request.via,
        operator: actor.operator.clone(),
        reason: request.reason().map(str::to_string),
        ticket: request
            .ticket
            .as_deref()
            .map(str::trim)
            .filter(|t| !t.is_empty())
            .map(str::to_string),
        attestation: request.attestation().map(str::to_string),
        verified: request.verified,
        forced: request.force,
        overridden: approved.overridden.clone(),
        triage: audit_summary(verdict),
        claimed_operator: actor.claimed_operator.clone(),
        given_up: Vec::new(),
    }
}

/// The entry leaves the DLQ as RESOLVED and keeps its row and all of its history.
fn resolve(tx: &Db<'_>, now: f64, id: &str, audit: Audit) -> Result<Done, Rejection> {
    let cycle = tx.insert(
        "UPDATE uns_notifications SET status = 'RESOLVED', dead_letter = 0, updated_at = ?2
             WHERE id = ?1 AND dead_letter = 1 RETURNING cycle",
        args![id, now],
    )?;
    let event_id = engine::append_event(
        tx,
        id,
        now,
        Kind::DlqResolved,
        &payload::DlqResolved { audit, cycle },
    )?;
    Ok(Done {
        id: id.to_string(),
        action: Performed::Resolved,
        event_id,
        status: "RESOLVED".into(),
        cycle,
        channels: ChannelSet::new(),
    })
}

/// The entry starts a new cycle for `channels`, due now, or at the time a pace gave it.
fn replay(
    tx: &Db<'_>,
    now: f64,
    id: &str,
    channels: &ChannelSet,
    audit: Audit,
    due: Option<(f64, Option<String>)>,
) -> Result<Done, Rejection> {
    let (due_at, pace) = match due {
        Some((at, pace)) => (Some(at), pace),
        None => (None, None),
    };
    let cycle = tx.insert(
        "UPDATE uns_notifications
         SET status = 'PENDING', dead_letter = 0, cycle = cycle + 1, cycle_attempts = 0,
             next_attempt_at = ?3, lease_token = NULL, lease_until = NULL,
             error_message = NULL, updated_at = ?2
         WHERE id = ?1 AND dead_letter = 1 RETURNING cycle",
        args![id, now, due_at.unwrap_or(now)],
    )?;
    let event_id = engine::append_event(
        tx,
        id,
        now,
        Kind::Replayed,
        &payload::Replayed {
            audit,
            cycle: payload::NewCycle {
                cycle: Some(cycle),
                previous_cycle: Some(cycle - 1),
                cycle_attempt: Some(0),
                channels: Some(channels.iter().map(|c| c.as_str().to_string()).collect()),
            },
            due_at,
            pace,
        },
    )?;
    Ok(Done {
        id: id.to_string(),
        action: Performed::Replayed,
        event_id,
        status: "PENDING".into(),
        cycle,
        channels: channels.clone(),
    })
}
