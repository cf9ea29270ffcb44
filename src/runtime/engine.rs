//! The worker's state transitions of DESIGN section 3, each one transaction, each
//! written once: submit, claim, fence and start, record a result, settle.
//!
//! Resolve and replay are in `remediation`, which builds them on [`write_tx`] and
//! [`append_event`]. Every function takes `now` from the caller's clock so tests can move
//! time past a lease.

use crate::model::payload;
use crate::model::{Channel, ChannelSet, Kind, ProviderOutcome, Status};
use crate::runtime::queries::Cells;
use rusqlite::{Connection, OptionalExtension, Transaction, TransactionBehavior, params};
use serde_json::{Map, Value, json};
use std::sync::atomic::{AtomicU64, Ordering};

/// The exact message of DESIGN section 3 step 7.
pub const RECOVERY_EXHAUSTED: &str =
    "Provider outcome unknown: recovery exhausted the attempt budget";

#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    #[error("{0}")]
    Invalid(String),
    #[error(transparent)]
    Sqlite(#[from] rusqlite::Error),
    #[error(transparent)]
    WriterGone(#[from] crate::runtime::writer::WriterGone),
}

pub type Result<T> = std::result::Result<T, EngineError>;

static COMMITS: AtomicU64 = AtomicU64::new(0);

/// Write transactions this process has committed through the engine (for benchmarks).
pub fn commits() -> u64 {
    COMMITS.load(Ordering::Relaxed)
}

/// Runs `work` inside `BEGIN IMMEDIATE`, so a writer never has to upgrade a read lock.
/// An error from `work` rolls the transaction back.
pub fn write_tx<T, E: From<rusqlite::Error>>(
    conn: &Connection,
    work: impl FnOnce(&Transaction) -> std::result::Result<T, E>,
) -> std::result::Result<T, E> {
    let tx = Transaction::new_unchecked(conn, TransactionBehavior::Immediate)?;
    let value = work(&tx)?;
    tx.commit()?;
    COMMITS.fetch_add(1, Ordering::Relaxed);
    Ok(value)
}

/// Appends one event and returns its id. The only INSERT into `uns_events`.
pub fn append_event(
    conn: &Connection,
    notification_id: &str,
    at: f64,
    event_kind: Kind,
    payload: &impl serde::Serialize,
) -> rusqlite::Result<i64> {
    append_text(
        conn,
        notification_id,
        at,
        event_kind,
        &payload::to_text(payload),
    )
}

/// As [`append_event`], for a payload already in its stored text.
fn append_text(
    conn: &Connection,
    notification_id: &str,
    at: f64,
    event_kind: Kind,
    text: &str,
) -> rusqlite::Result<i64> {
    let mut stmt = conn.prepare_cached(
        "INSERT INTO uns_events (notification_id, at, kind, payload) VALUES (?1, ?2, ?3, ?4)",
    )?;
    stmt.execute(params![notification_id, at, event_kind.as_str(), text])?;
    Ok(conn.last_insert_rowid())
}

/// A new notification.
#[derive(Debug, Clone)]
pub struct NewNotification {
    pub channels: ChannelSet,
    pub payload: Value,
    pub idempotency_key: Option<String>,
    pub max_attempts: i64,
}

#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Submitted {
    pub id: String,
    /// False when the idempotency key matched an earlier submission.
    pub created: bool,
    pub status: String,
}

/// Accepts a notification, or returns the row an earlier submission with the same
/// idempotency key created.
pub fn submit(conn: &Connection, now: f64, new: &NewNotification) -> Result<Submitted> {
    if new.channels.is_empty() {
        return Err(EngineError::Invalid(
            "at least one channel is required".into(),
        ));
    }
    if new.max_attempts < 1 {
        return Err(EngineError::Invalid(
            "max_attempts must be at least 1".into(),
        ));
    }
    let channels = &new.channels;
    write_tx(conn, |tx| {
        if let Some(key) = &new.idempotency_key {
            let existing: Option<(String, String)> = tx
                .query_row(
                    "SELECT id, status FROM uns_notifications WHERE idempotency_key = ?1",
                    [key],
                    |row| Ok((row.get(0)?, row.get(1)?)),
                )
                .optional()?;
            if let Some((id, status)) = existing {
                return Ok(Submitted {
                    id,
                    created: false,
                    status,
                });
            }
        }
        let id = format!("n-{}", uuid::Uuid::now_v7().simple());
        let channels_json = serde_json::to_string(channels).unwrap_or_else(|_| "[]".into());
        tx.prepare_cached(
            "INSERT INTO uns_notifications (id, status, dead_letter, attempts, cycle, cycle_attempts,
                 max_attempts, channels, payload, idempotency_key, next_attempt_at, created_at, updated_at)
             VALUES (?1, 'PENDING', 0, 0, 1, 0, ?2, ?3, ?4, ?5, ?6, ?6, ?6)",
        )?
        .execute(params![
            id,
            new.max_attempts,
            channels_json,
            new.payload.to_string(),
            new.idempotency_key,
            now
        ])?;
        append_event(
            tx,
            &id,
            now,
            Kind::Submitted,
            &payload::Submitted {
                attempt: 0,
                cycle: 1,
                cycle_attempt: 0,
                channels: channels.clone(),
                idempotency_key: new.idempotency_key.clone(),
            },
        )?;
        Ok(Submitted {
            id,
            created: true,
            status: Status::Pending.to_string(),
        })
    })
}

/// A worker's hold on one row for one attempt.
#[derive(Debug, Clone, PartialEq)]
pub struct Lease {
    pub notification_id: String,
    pub token: String,
    pub lease_until: f64,
    pub attempt: i64,
    pub cycle: i64,
    pub cycle_attempt: i64,
    pub max_attempts: i64,
    pub reclaimed: bool,
    /// Channels this attempt must send: the cycle's channels without those already accepted.
    pub owed: ChannelSet,
    pub payload: Value,
}

impl Lease {
    /// The keys every event under this lease carries.
    fn keys(&self) -> payload::LeaseKeys {
        payload::LeaseKeys {
            attempt: Some(self.attempt),
            cycle: Some(self.cycle),
            cycle_attempt: Some(self.cycle_attempt),
            lease_token: Some(self.token.clone()),
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub enum ClaimOutcome {
    /// Nothing is due that this worker can deliver; `declined` due rows need a channel it
    /// has no adapter for and were left untouched.
    Idle {
        declined: u64,
    },
    Claimed(Lease),
    /// An expired lease was found with no budget left; the row is now in the DLQ.
    RecoveryExhausted {
        notification_id: String,
    },
    /// The row cannot be delivered as stored (its channels, or its cycle's REPLAYED
    /// channels, cannot be read); it is now in the DLQ, with the column named.
    Undeliverable {
        notification_id: String,
        error_message: String,
    },
}

struct Candidate {
    id: String,
    status: String,
    cycle: i64,
    cycle_attempts: i64,
    attempts: i64,
    max_attempts: i64,
    channels: Option<String>,
    payload: Value,
    lease_token: Option<String>,
    /// Columns that could not be read.
    problems: Vec<String>,
}

/// Due rows only when every channel they name has an adapter here (`?2`, a JSON array of
/// names; NULL for every channel). A row whose channels cannot be read passes, so the
/// claim dead-letters it with the column named.
const SUPPORTED: &str = "(?2 IS NULL OR NOT EXISTS (
        SELECT 1 FROM json_each(CASE WHEN json_valid(channels) AND json_type(channels) = 'array'
                                     THEN channels ELSE '[]' END) j
        WHERE j.type = 'text' AND upper(trim(j.value)) NOT IN (SELECT value FROM json_each(?2))))";

fn read_candidate(row: &rusqlite::Row) -> Candidate {
    let mut cells = Cells::new(row);
    let candidate = Candidate {
        id: cells.required_text(0, "id"),
        status: cells.required_text(1, "status"),
        cycle: cells.integer(2, "cycle"),
        cycle_attempts: cells.integer(3, "cycle_attempts"),
        attempts: cells.integer(4, "attempts"),
        max_attempts: cells.integer(5, "max_attempts"),
        channels: cells.text(6, "channels"),
        payload: cells.json(7, "payload"),
        lease_token: cells.text(8, "lease_token"),
        problems: Vec::new(),
    };
    Candidate {
        problems: cells.problems,
        ..candidate
    }
}

/// Claims one due row (PENDING and due, or LEASED with an expired lease) for `worker_id`.
pub fn claim(
    conn: &Connection,
    now: f64,
    worker_id: &str,
    lease_seconds: f64,
) -> Result<ClaimOutcome> {
    claim_for(
        conn,
        now,
        worker_id,
        lease_seconds,
        &Channel::ALL.into_iter().collect(),
    )
}

/// The row to claim next: the longest-expired lease first, else the longest-due row,
/// among those whose channels `filter` (a JSON list) allows.
fn next_candidate(tx: &Connection, now: f64, filter: Option<&str>) -> Result<Option<Candidate>> {
    let columns =
        "id, status, cycle, cycle_attempts, attempts, max_attempts, channels, payload, lease_token";
    let expired = tx
        .prepare_cached(&format!(
            "SELECT {columns} FROM uns_notifications
             WHERE status = 'LEASED' AND lease_until <= ?1 AND id IS NOT NULL AND {SUPPORTED}
             ORDER BY lease_until LIMIT 1"
        ))?
        .query_row(params![now, filter], |row| Ok(read_candidate(row)))
        .optional()?;
    if expired.is_some() {
        return Ok(expired);
    }
    Ok(tx
        .prepare_cached(&format!(
            "SELECT {columns} FROM uns_notifications
             WHERE status = 'PENDING' AND next_attempt_at <= ?1 AND id IS NOT NULL AND {SUPPORTED}
             ORDER BY next_attempt_at LIMIT 1"
        ))?
        .query_row(params![now, filter], |row| Ok(read_candidate(row)))
        .optional()?)
}

/// Like [`claim`], for a worker that has adapters for `supported` only: rows that need
/// another channel are left untouched, never dead-lettered for want of an adapter.
pub fn claim_for(
    conn: &Connection,
    now: f64,
    worker_id: &str,
    lease_seconds: f64,
    supported: &ChannelSet,
) -> Result<ClaimOutcome> {
    let filter = (supported.len() < Channel::ALL.len())
        .then(|| serde_json::to_string(supported).unwrap_or_else(|_| "[]".into()));
    write_tx(conn, |tx| {
        let Some(candidate) = next_candidate(tx, now, filter.as_deref())? else {
            let declined = match &filter {
                Some(filter) => declined(tx, now, filter)?,
                None => 0,
            };
            return Ok(ClaimOutcome::Idle { declined });
        };
        let reclaimed = candidate.status == Status::Leased.as_str();
        let owed = match owed_by(tx, &candidate) {
            Ok(owed) => owed,
            Err(why) => {
                let error_message = format!("Cannot deliver as stored: {why}");
                dead_letter(tx, now, &candidate, &error_message)?;
                return Ok(ClaimOutcome::Undeliverable {
                    notification_id: candidate.id,
                    error_message,
                });
            }
        };
        if reclaimed && candidate.cycle_attempts >= candidate.max_attempts {
            dead_letter(tx, now, &candidate, RECOVERY_EXHAUSTED)?;
            return Ok(ClaimOutcome::RecoveryExhausted {
                notification_id: candidate.id,
            });
        }
        let token = uuid::Uuid::new_v4().to_string();
        let lease_until = now + lease_seconds;
        let changed = tx
            .prepare_cached(
                "UPDATE uns_notifications
                 SET status = 'LEASED', lease_token = ?1, lease_until = ?2,
                     attempts = attempts + 1, cycle_attempts = cycle_attempts + 1, updated_at = ?3
                 WHERE id = ?4 AND status = ?5 AND lease_token IS ?6",
            )?
            .execute(params![
                token,
                lease_until,
                now,
                candidate.id,
                candidate.status,
                candidate.lease_token
            ])?;
        if changed != 1 {
            return Ok(ClaimOutcome::Idle { declined: 0 });
        }
        let lease = Lease {
            notification_id: candidate.id,
            token,
            lease_until,
            attempt: candidate.attempts + 1,
            cycle: candidate.cycle,
            cycle_attempt: candidate.cycle_attempts + 1,
            max_attempts: candidate.max_attempts,
            reclaimed,
            owed,
            payload: candidate.payload,
        };
        let started = payload::AttemptStarted {
            lease: lease.keys(),
            worker_id: worker_id.to_string(),
            reclaimed,
            lease_until,
            previous_lease_token: reclaimed.then(|| candidate.lease_token.clone()),
        };
        append_event(
            tx,
            &lease.notification_id,
            now,
            Kind::AttemptStarted,
            &started,
        )?;
        Ok(ClaimOutcome::Claimed(lease))
    })
}

/// How many due rows the filter left for a worker with other adapters.
fn declined(tx: &Connection, now: f64, filter: &str) -> Result<u64> {
    let count: i64 = tx
        .prepare_cached(&format!(
            "SELECT COUNT(*) FROM uns_notifications
             WHERE ((status = 'PENDING' AND next_attempt_at <= ?1) OR (status = 'LEASED' AND lease_until <= ?1))
               AND id IS NOT NULL AND NOT {SUPPORTED}"
        ))?
        .query_row(params![now, filter], |row| row.get(0))?;
    Ok(u64::try_from(count).unwrap_or(0))
}

/// The row's channels, or why the row cannot be delivered as stored.
/// The channels a claim of `candidate` owes: every one it names on its first try, else
/// those its cycle has not delivered; why none can be, when the row cannot be delivered
/// as stored.
fn owed_by(tx: &Connection, candidate: &Candidate) -> std::result::Result<ChannelSet, String> {
    let first_try = candidate.cycle == 1 && candidate.cycle_attempts == 0;
    deliverable(candidate).and_then(|channels| {
        if first_try {
            Ok(channels)
        } else {
            owed_channels(tx, &candidate.id, candidate.cycle, &channels)
        }
    })
}

fn deliverable(candidate: &Candidate) -> std::result::Result<ChannelSet, String> {
    if let Some(problem) = candidate.problems.first() {
        return Err(format!("column {problem}"));
    }
    let text = candidate.channels.as_deref().unwrap_or("NULL");
    let names: Vec<String> = serde_json::from_str(text)
        .map_err(|_| format!("column channels: {text:?} is not a JSON array of channel names"))?;
    let channels = ChannelSet::parse(&names).map_err(|err| format!("column channels: {err}"))?;
    if channels.is_empty() {
        return Err("column channels: the list is empty".into());
    }
    Ok(channels)
}

fn dead_letter(
    tx: &Connection,
    now: f64,
    candidate: &Candidate,
    error_message: &str,
) -> Result<()> {
    tx.prepare_cached(
        "UPDATE uns_notifications
         SET status = 'DEAD', dead_letter = 1, lease_token = NULL, lease_until = NULL,
             error_message = ?1, updated_at = ?2
         WHERE id = ?3 AND status = ?4 AND lease_token IS ?5",
    )?
    .execute(params![
        error_message,
        now,
        candidate.id,
        candidate.status,
        candidate.lease_token
    ])?;
    append_event(
        tx,
        &candidate.id,
        now,
        Kind::DeadLettered,
        &payload::DeadLettered {
            lease: payload::LeaseKeys {
                attempt: Some(candidate.attempts),
                cycle: Some(candidate.cycle),
                cycle_attempt: Some(candidate.cycle_attempts),
                lease_token: candidate.lease_token.clone(),
            },
            error_message: error_message.to_string(),
        },
    )?;
    Ok(())
}

/// The channels still owed in `cycle`: the channels its REPLAYED event named (the row's
/// for the first cycle), less those with an accepted result in this cycle. Anything it
/// cannot read is an error, never a guess: a replay is never widened to every channel,
/// and an unreadable result is never taken for a refusal.
fn owed_channels(
    conn: &Connection,
    id: &str,
    cycle: i64,
    row_channels: &ChannelSet,
) -> std::result::Result<ChannelSet, String> {
    let read = || -> rusqlite::Result<Vec<(i64, String, Option<String>)>> {
        let mut stmt = conn.prepare_cached(
            "SELECT id, kind, CAST(payload AS TEXT) FROM uns_events
             WHERE notification_id = ?1 AND kind IN ('REPLAYED', 'CHANNEL_ATTEMPT_RESULT')
             ORDER BY id",
        )?;
        stmt.query_map([id], |row| {
            Ok((row.get(0)?, row.get(1)?, row.get(2).ok().flatten()))
        })?
        .collect()
    };
    let events = read().map_err(|err| format!("its events cannot be read: {err}"))?;
    let mut cycle_channels = (cycle == 1).then(|| row_channels.clone());
    let mut accepted = ChannelSet::new();
    for (event_id, event_kind, text) in events {
        let unreadable = || format!("event {event_id} ({event_kind}): payload cannot be read");
        let text = text.ok_or_else(unreadable)?;
        let no_cycle = || format!("event {event_id} ({event_kind}): no cycle in the payload");
        if event_kind == Kind::Replayed.as_str() {
            let replayed: payload::NewCycle =
                serde_json::from_str(&text).map_err(|_| unreadable())?;
            if replayed.cycle.ok_or_else(no_cycle)? != cycle {
                continue;
            }
            let names = replayed.channels.unwrap_or_default();
            let named = ChannelSet::parse(&names)
                .map_err(|err| format!("event {event_id} (REPLAYED): {err}"))?;
            let foreign = named.without(row_channels);
            if !foreign.is_empty() {
                return Err(format!(
                    "event {event_id} (REPLAYED) names {}, which the notification does not have",
                    foreign.joined(", ")
                ));
            }
            cycle_channels = Some(named);
            continue;
        }
        let result: payload::ChannelAttemptResult =
            serde_json::from_str(&text).map_err(|_| unreadable())?;
        if result.lease.cycle.ok_or_else(no_cycle)? != cycle {
            continue;
        }
        if result.success == Some(true) {
            let channel = result
                .channel
                .as_deref()
                .and_then(|c| c.parse::<Channel>().ok())
                .ok_or_else(|| format!("event {event_id}: accepted, for no readable channel"))?;
            accepted.insert(channel);
        }
    }
    let cycle_channels = cycle_channels
        .ok_or_else(|| format!("cycle {cycle} has no REPLAYED event naming its channels"))?;
    Ok(cycle_channels.without(&accepted))
}

/// Whether `lease` still holds the row at `now`. Reads only.
pub fn lease_held(conn: &Connection, now: f64, lease: &Lease) -> Result<bool> {
    let held = conn
        .prepare_cached(
            "SELECT EXISTS (SELECT 1 FROM uns_notifications
             WHERE id = ?1 AND lease_token = ?2 AND lease_until > ?3)",
        )?
        .query_row(params![lease.notification_id, lease.token, now], |row| {
            row.get(0)
        })?;
    Ok(held)
}

/// The result of a fence check.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fence {
    /// The lease holds; the CHANNEL_ATTEMPT_STARTED event has this id.
    Held { event_id: i64 },
    /// The lease is gone; LEASE_LOST was appended.
    Lost,
}

/// Fence check, then commits CHANNEL_ATTEMPT_STARTED: from here the provider may act.
/// `details` are the adapter's (EMAIL: `smtp_from`).
pub fn start_channel(
    conn: &Connection,
    now: f64,
    lease: &Lease,
    channel: Channel,
    details: &Map<String, Value>,
) -> Result<Fence> {
    write_tx(conn, |tx| {
        if !lease_held(tx, now, lease)? {
            append_lease_lost(tx, now, lease)?;
            return Ok(Fence::Lost);
        }
        let started = payload::ChannelAttemptStarted {
            lease: lease.keys(),
            details: details.clone(),
            channel,
            provider_effect_may_have_occurred: true,
        };
        let event_id = append_event(
            tx,
            &lease.notification_id,
            now,
            Kind::ChannelAttemptStarted,
            &started,
        )?;
        Ok(Fence::Held { event_id })
    })
}

fn append_lease_lost(tx: &Connection, now: f64, lease: &Lease) -> rusqlite::Result<i64> {
    let started: bool = tx
        .prepare_cached(
            "SELECT EXISTS (SELECT 1 FROM uns_events
             WHERE notification_id = ?1 AND kind = 'CHANNEL_ATTEMPT_STARTED'
               AND CASE WHEN json_valid(payload) THEN json_extract(payload, '$.lease_token') END = ?2)",
        )?
        .query_row(params![lease.notification_id, lease.token], |row| {
            row.get(0)
        })?;
    append_event(
        tx,
        &lease.notification_id,
        now,
        Kind::LeaseLost,
        &payload::LeaseLost {
            lease: lease.keys(),
            provider_effect_may_have_occurred: started,
        },
    )
}

/// What an adapter reports about one channel call.
#[derive(Debug, Clone, PartialEq)]
pub struct DeliveryResult {
    pub outcome: ProviderOutcome,
    pub message_id: Option<String>,
    pub error: Option<String>,
    /// Whether another attempt could succeed (a rejection only).
    pub retryable: bool,
    /// Adapter details (smtp_code, http_status, ...); `provider_outcome` is added on record.
    pub metadata: Map<String, Value>,
}

impl DeliveryResult {
    pub fn accepted(message_id: Option<String>) -> Self {
        Self {
            outcome: ProviderOutcome::Accepted,
            message_id,
            error: None,
            retryable: false,
            metadata: Map::new(),
        }
    }

    pub fn rejected(error: impl Into<String>, retryable: bool) -> Self {
        Self {
            outcome: ProviderOutcome::Rejected,
            message_id: None,
            error: Some(error.into()),
            retryable,
            metadata: Map::new(),
        }
    }

    pub fn unknown(error: impl Into<String>) -> Self {
        Self {
            outcome: ProviderOutcome::Unknown,
            message_id: None,
            error: Some(error.into()),
            retryable: false,
            metadata: Map::new(),
        }
    }

    pub fn with(mut self, key: &str, value: impl Into<Value>) -> Self {
        self.metadata.insert(key.to_string(), value.into());
        self
    }

    pub fn success(&self) -> bool {
        self.outcome == ProviderOutcome::Accepted
    }

    /// The result with `secrets` hidden in its error and every text of its metadata.
    pub fn redacted(mut self, secrets: &crate::redact::Secrets) -> Self {
        self.error = self.error.map(|error| secrets.redact(&error));
        for value in self.metadata.values_mut() {
            if let Value::String(text) = value {
                *text = secrets.redact(text);
            }
        }
        self
    }
}

/// Appends CHANNEL_ATTEMPT_RESULT. Not fenced: a late observation is evidence too, and it
/// never touches the aggregate row, which a replacement worker may own by now.
pub fn record_result(
    conn: &Connection,
    now: f64,
    lease: &Lease,
    channel: Channel,
    result: &DeliveryResult,
) -> Result<i64> {
    let mut metadata = result.metadata.clone();
    metadata.insert("provider_outcome".into(), json!(result.outcome.as_str()));
    metadata.insert("retryable".into(), json!(result.retryable));
    let payload = payload::ChannelAttemptResult {
        lease: lease.keys(),
        channel: Some(channel.as_str().to_string()),
        success: Some(result.success()),
        message_id: result.message_id.clone(),
        error: result.error.clone(),
        metadata: Some(metadata),
    };
    write_tx(conn, |tx| {
        Ok(append_event(
            tx,
            &lease.notification_id,
            now,
            Kind::ChannelAttemptResult,
            &payload,
        )?)
    })
}

/// Retry delays: `base * 2^(n-1)`, capped.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Backoff {
    pub base_seconds: f64,
    pub max_seconds: f64,
}

impl Default for Backoff {
    fn default() -> Self {
        Self {
            base_seconds: 5.0,
            max_seconds: 300.0,
        }
    }
}

impl Backoff {
    pub fn delay(&self, cycle_attempt: i64) -> f64 {
        let exponent = (cycle_attempt.max(1) - 1).min(30) as i32;
        (self.base_seconds * 2f64.powi(exponent)).min(self.max_seconds)
    }
}

/// Why a row went to the DLQ, in a word (the `reason` label of the dead-letter metric).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DeadReason {
    /// A provider's outcome is unknown: nobody can say whether it acted.
    UnknownOutcome,
    /// A provider refused in a way another try cannot fix.
    Rejected,
    /// The cycle's attempt budget ran out on retryable failures.
    BudgetExhausted,
    /// An expired lease was found with no budget left.
    RecoveryExhausted,
    /// The row cannot be delivered as stored.
    Undeliverable,
    /// The cycle's channels were delivered, and a channel a replay left out is still owed:
    /// it is replayed or given up on purpose, never dropped by a settlement.
    Outstanding,
}

impl DeadReason {
    pub const ALL: [DeadReason; 6] = [
        DeadReason::UnknownOutcome,
        DeadReason::Rejected,
        DeadReason::BudgetExhausted,
        DeadReason::RecoveryExhausted,
        DeadReason::Undeliverable,
        DeadReason::Outstanding,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            DeadReason::UnknownOutcome => "unknown_outcome",
            DeadReason::Rejected => "rejected",
            DeadReason::BudgetExhausted => "budget_exhausted",
            DeadReason::RecoveryExhausted => "recovery_exhausted",
            DeadReason::Undeliverable => "undeliverable",
            DeadReason::Outstanding => "outstanding",
        }
    }
}

/// What the channel results of an attempt call for (pure).
#[derive(Debug, Clone, PartialEq)]
pub enum Decision {
    Delivered,
    RetryScheduled {
        next_attempt_at: f64,
        channels: ChannelSet,
    },
    DeadLettered {
        reason: DeadReason,
        error_message: String,
    },
}

/// How an attempt ended: its decision written under the lease, or the lease gone.
#[derive(Debug, Clone, PartialEq)]
pub enum Ended {
    Decided(Decision),
    /// The fenced write found the lease gone; the replacement owns the row.
    LeaseLost,
}

/// Decides the outcome of an attempt from its channel results (pure).
pub fn decide(
    lease: &Lease,
    results: &[(Channel, DeliveryResult)],
    now: f64,
    backoff: &Backoff,
) -> Decision {
    let still_owed: ChannelSet = lease
        .owed
        .iter()
        .filter(|channel| {
            !results
                .iter()
                .any(|(c, result)| c == channel && result.success())
        })
        .collect();
    if still_owed.is_empty() {
        return Decision::Delivered;
    }
    let detail = |(channel, result): &(Channel, DeliveryResult)| {
        format!(
            "{channel} {}",
            result.error.as_deref().unwrap_or("no detail recorded")
        )
    };
    if let Some(unknown) = results
        .iter()
        .find(|(_, result)| result.outcome == ProviderOutcome::Unknown)
    {
        return Decision::DeadLettered {
            reason: DeadReason::UnknownOutcome,
            error_message: format!("Provider outcome unknown: {}", detail(unknown)),
        };
    }
    let failures: Vec<&(Channel, DeliveryResult)> = results
        .iter()
        .filter(|(_, result)| result.outcome == ProviderOutcome::Rejected)
        .collect();
    if let Some(permanent) = failures.iter().find(|(_, result)| !result.retryable) {
        return Decision::DeadLettered {
            reason: DeadReason::Rejected,
            error_message: format!("Provider rejected (not retryable): {}", detail(permanent)),
        };
    }
    if lease.cycle_attempt < lease.max_attempts {
        return Decision::RetryScheduled {
            next_attempt_at: now + backoff.delay(lease.cycle_attempt),
            channels: still_owed,
        };
    }
    let last = failures
        .last()
        .map(|failure| detail(failure))
        .unwrap_or_else(|| format!("{} not delivered", still_owed.joined(",")));
    Decision::DeadLettered {
        reason: DeadReason::BudgetExhausted,
        error_message: format!(
            "Attempt budget exhausted ({} of {}): {last}",
            lease.cycle_attempt, lease.max_attempts
        ),
    }
}

/// Settles an attempt with one fenced UPDATE; zero rows means the lease was lost. A
/// notification is DELIVERED only when every one of its channels was delivered in some
/// cycle: checked here against the store, whatever the lease says it owed, so no caller
/// can settle DELIVERED past a channel a partial replay left outstanding.
pub fn settle(
    conn: &Connection,
    now: f64,
    lease: &Lease,
    results: &[(Channel, DeliveryResult)],
    backoff: &Backoff,
) -> Result<Ended> {
    let decision = decide(lease, results, now, backoff);
    write_tx(conn, |tx| {
        let decision = match decision {
            Decision::Delivered => match outstanding(tx, &lease.notification_id)? {
                left if left.is_empty() => Decision::Delivered,
                left => Decision::DeadLettered {
                    reason: DeadReason::Outstanding,
                    error_message: format!(
                        "Replayed channels delivered; still outstanding: {} (replay it, or give it up on purpose with --force --reason)",
                        left.joined(",")
                    ),
                },
            },
            other => other,
        };
        let (status, dead_letter, next_attempt_at, error_message, event_kind, event) =
            match &decision {
                Decision::Delivered => (
                    "DELIVERED",
                    0,
                    None,
                    None,
                    Kind::Delivered,
                    payload::to_text(&payload::Delivered {
                        lease: lease.keys(),
                    }),
                ),
                Decision::RetryScheduled {
                    next_attempt_at,
                    channels,
                } => (
                    "PENDING",
                    0,
                    Some(*next_attempt_at),
                    None,
                    Kind::RetryScheduled,
                    payload::to_text(&payload::RetryScheduled {
                        lease: lease.keys(),
                        next_attempt_at: *next_attempt_at,
                        channels: channels.clone(),
                    }),
                ),
                Decision::DeadLettered { error_message, .. } => (
                    "DEAD",
                    1,
                    None,
                    Some(error_message.as_str()),
                    Kind::DeadLettered,
                    payload::to_text(&payload::DeadLettered {
                        lease: lease.keys(),
                        error_message: error_message.clone(),
                    }),
                ),
            };
        let changed = tx
            .prepare_cached(
                "UPDATE uns_notifications
                 SET status = ?4, dead_letter = ?5, lease_token = NULL, lease_until = NULL,
                     next_attempt_at = COALESCE(?6, next_attempt_at), error_message = ?7, updated_at = ?3
                 WHERE id = ?1 AND lease_token = ?2 AND lease_until > ?3",
            )?
            .execute(params![
                lease.notification_id,
                lease.token,
                now,
                status,
                dead_letter,
                next_attempt_at,
                error_message
            ])?;
        if changed == 0 {
            append_lease_lost(tx, now, lease)?;
            return Ok(Ended::LeaseLost);
        }
        append_text(tx, &lease.notification_id, now, event_kind, &event)?;
        Ok(Ended::Decided(decision.clone()))
    })
}

/// The notification's channels that no cycle delivered: no accepted result, and no
/// VERIFIED DELIVERED for it. A row or event that cannot be read counts its channels as
/// outstanding, never as delivered.
fn outstanding(tx: &Connection, id: &str) -> Result<ChannelSet> {
    let channels: Option<String> = tx
        .prepare_cached("SELECT channels FROM uns_notifications WHERE id = ?1")?
        .query_row([id], |row| row.get::<_, Option<String>>(0).or(Ok(None)))
        .optional()?
        .flatten();
    let names: Vec<String> = channels
        .as_deref()
        .and_then(|text| serde_json::from_str(text).ok())
        .unwrap_or_default();
    let Ok(channels) = ChannelSet::parse(&names) else {
        return Ok(Channel::ALL.into_iter().collect());
    };
    let mut stmt = tx.prepare_cached(
        "SELECT kind, CAST(payload AS TEXT) FROM uns_events
         WHERE notification_id = ?1 AND kind IN ('CHANNEL_ATTEMPT_RESULT', 'VERIFIED')",
    )?;
    let rows = stmt.query_map([id], |row| {
        Ok((row.get::<_, String>(0)?, row.get::<_, Option<String>>(1)?))
    })?;
    let mut delivered = ChannelSet::new();
    for row in rows {
        let (kind, text) = row?;
        let payload: Value = text
            .as_deref()
            .and_then(|t| serde_json::from_str(t).ok())
            .unwrap_or_default();
        let done = match kind.as_str() {
            "VERIFIED" => payload["outcome"] == "DELIVERED",
            _ => payload["success"] == true,
        };
        if let Some(channel) = payload["channel"].as_str().and_then(|c| c.parse().ok())
            && done
        {
            delivered.insert(channel);
        }
    }
    Ok(channels.without(&delivered))
}
