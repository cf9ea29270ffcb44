//! The state transitions of DESIGN section 3, each one transaction, each written once.
//!
//! The worker, the API server and the CLI's direct-SQLite path all call these functions;
//! nothing else writes to a store. Every function takes `now` from the caller's clock so
//! tests can move time past a lease.

use crate::model::{Channel, ProviderOutcome, Status, kind};
use rusqlite::{Connection, OptionalExtension, Transaction, TransactionBehavior, params};
use serde_json::{Map, Value, json};
use std::sync::atomic::{AtomicU64, Ordering};

/// The exact message of DESIGN section 3 step 7.
pub const RECOVERY_EXHAUSTED: &str =
    "Provider outcome unknown: recovery exhausted the attempt budget";

#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    #[error("notification {0} not found")]
    NotFound(String),
    #[error("{0}")]
    Conflict(Conflict),
    #[error("{0}")]
    Invalid(String),
    #[error(transparent)]
    Sqlite(#[from] rusqlite::Error),
    #[error(transparent)]
    WriterGone(#[from] crate::runtime::db::WriterGone),
}

/// Someone else changed the row first: what it is now, and since when.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
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
            crate::render::time::rfc3339(self.since)
        )
    }
}

pub type Result<T> = std::result::Result<T, EngineError>;

static COMMITS: AtomicU64 = AtomicU64::new(0);

/// Write transactions this process has committed through the engine (for benchmarks).
pub fn commits() -> u64 {
    COMMITS.load(Ordering::Relaxed)
}

/// Runs `work` inside `BEGIN IMMEDIATE`, so a writer never has to upgrade a read lock.
pub fn write_tx<T>(conn: &Connection, work: impl FnOnce(&Transaction) -> Result<T>) -> Result<T> {
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
    event_kind: &str,
    payload: &Value,
) -> Result<i64> {
    let mut stmt = conn.prepare_cached(
        "INSERT INTO uns_events (notification_id, at, kind, payload) VALUES (?1, ?2, ?3, ?4)",
    )?;
    stmt.execute(params![
        notification_id,
        at,
        event_kind,
        payload.to_string()
    ])?;
    Ok(conn.last_insert_rowid())
}

/// A new notification.
#[derive(Debug, Clone)]
pub struct NewNotification {
    pub channels: Vec<Channel>,
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
    let mut channels = new.channels.clone();
    channels.sort();
    channels.dedup();
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
        let channels_json = serde_json::to_string(&channels).unwrap_or_else(|_| "[]".into());
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
            kind::SUBMITTED,
            &json!({
                "attempt": 0,
                "cycle": 1,
                "cycle_attempt": 0,
                "channels": channels,
                "idempotency_key": new.idempotency_key,
            }),
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
    pub owed: Vec<Channel>,
    pub payload: Value,
}

impl Lease {
    /// The keys every event under this lease carries.
    fn event_payload(&self, extra: Value) -> Value {
        let mut map = Map::new();
        map.insert("attempt".into(), json!(self.attempt));
        map.insert("cycle".into(), json!(self.cycle));
        map.insert("cycle_attempt".into(), json!(self.cycle_attempt));
        map.insert("lease_token".into(), json!(self.token));
        if let Value::Object(extra) = extra {
            map.extend(extra);
        }
        Value::Object(map)
    }
}

#[derive(Debug, Clone, PartialEq)]
pub enum ClaimOutcome {
    /// Nothing is due.
    Idle,
    Claimed(Lease),
    /// An expired lease was found with no budget left; the row is now in the DLQ.
    RecoveryExhausted {
        notification_id: String,
    },
}

struct Candidate {
    id: String,
    status: String,
    cycle: i64,
    cycle_attempts: i64,
    attempts: i64,
    max_attempts: i64,
    channels: String,
    payload: String,
    lease_token: Option<String>,
}

/// Claims one due row (PENDING and due, or LEASED with an expired lease) for `worker_id`.
pub fn claim(
    conn: &Connection,
    now: f64,
    worker_id: &str,
    lease_seconds: f64,
) -> Result<ClaimOutcome> {
    write_tx(conn, |tx| {
        let columns = "id, status, cycle, cycle_attempts, attempts, max_attempts, channels, payload, lease_token";
        let read = |row: &rusqlite::Row| {
            Ok(Candidate {
                id: row.get(0)?,
                status: row.get(1)?,
                cycle: row.get(2)?,
                cycle_attempts: row.get(3)?,
                attempts: row.get(4)?,
                max_attempts: row.get(5)?,
                channels: row.get(6)?,
                payload: row.get(7)?,
                lease_token: row.get(8)?,
            })
        };
        let expired = tx
            .prepare_cached(&format!(
                "SELECT {columns} FROM uns_notifications
                 WHERE status = 'LEASED' AND lease_until <= ?1 ORDER BY lease_until LIMIT 1"
            ))?
            .query_row([now], read)
            .optional()?;
        let candidate = match expired {
            Some(candidate) => candidate,
            None => match tx
                .prepare_cached(&format!(
                    "SELECT {columns} FROM uns_notifications
                     WHERE status = 'PENDING' AND next_attempt_at <= ?1
                     ORDER BY next_attempt_at LIMIT 1"
                ))?
                .query_row([now], read)
                .optional()?
            {
                Some(candidate) => candidate,
                None => return Ok(ClaimOutcome::Idle),
            },
        };
        let reclaimed = candidate.status == Status::Leased.as_str();
        if reclaimed && candidate.cycle_attempts >= candidate.max_attempts {
            dead_letter_exhausted(tx, now, &candidate)?;
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
            return Ok(ClaimOutcome::Idle);
        }
        let row_channels = parse_channels(&candidate.channels);
        let first_try = candidate.cycle == 1 && candidate.cycle_attempts == 0;
        let owed = if first_try {
            row_channels
        } else {
            owed_channels(tx, &candidate.id, candidate.cycle, &row_channels)?
        };
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
            payload: serde_json::from_str(&candidate.payload).unwrap_or(Value::Null),
        };
        let mut extra = json!({
            "worker_id": worker_id,
            "reclaimed": reclaimed,
            "lease_until": lease_until,
        });
        if reclaimed {
            extra["previous_lease_token"] = json!(candidate.lease_token);
        }
        append_event(
            tx,
            &lease.notification_id,
            now,
            kind::ATTEMPT_STARTED,
            &lease.event_payload(extra),
        )?;
        Ok(ClaimOutcome::Claimed(lease))
    })
}

fn dead_letter_exhausted(tx: &Connection, now: f64, candidate: &Candidate) -> Result<()> {
    tx.prepare_cached(
        "UPDATE uns_notifications
         SET status = 'DEAD', dead_letter = 1, lease_token = NULL, lease_until = NULL,
             error_message = ?1, updated_at = ?2
         WHERE id = ?3 AND status = 'LEASED' AND lease_token IS ?4",
    )?
    .execute(params![
        RECOVERY_EXHAUSTED,
        now,
        candidate.id,
        candidate.lease_token
    ])?;
    append_event(
        tx,
        &candidate.id,
        now,
        kind::DEAD_LETTERED,
        &json!({
            "attempt": candidate.attempts,
            "cycle": candidate.cycle,
            "cycle_attempt": candidate.cycle_attempts,
            "lease_token": candidate.lease_token,
            "error_message": RECOVERY_EXHAUSTED,
        }),
    )?;
    Ok(())
}

fn parse_channels(text: &str) -> Vec<Channel> {
    let names: Vec<String> = serde_json::from_str(text).unwrap_or_default();
    names.iter().filter_map(|name| name.parse().ok()).collect()
}

/// The channels still owed in `cycle`: the cycle's channels (the row's, or those a replay
/// named) less those with an accepted result in this cycle.
fn owed_channels(
    conn: &Connection,
    id: &str,
    cycle: i64,
    row_channels: &[Channel],
) -> Result<Vec<Channel>> {
    let mut stmt = conn.prepare_cached(
        "SELECT kind, payload FROM uns_events
         WHERE notification_id = ?1 AND kind IN ('REPLAYED', 'CHANNEL_ATTEMPT_RESULT')
         ORDER BY id",
    )?;
    let mut rows = stmt.query([id])?;
    let mut cycle_channels = row_channels.to_vec();
    let mut accepted = Vec::new();
    while let Some(row) = rows.next()? {
        let event_kind: String = row.get(0)?;
        let payload: Value = serde_json::from_str(&row.get::<_, String>(1)?).unwrap_or(Value::Null);
        if payload["cycle"].as_i64() != Some(cycle) {
            continue;
        }
        if event_kind == kind::REPLAYED {
            if let Ok(names) = serde_json::from_value::<Vec<Channel>>(payload["channels"].clone()) {
                cycle_channels = names;
            }
        } else if payload["success"].as_bool() == Some(true)
            && let Some(channel) = payload["channel"].as_str().and_then(|c| c.parse().ok())
        {
            accepted.push(channel);
        }
    }
    cycle_channels.retain(|channel| !accepted.contains(channel));
    Ok(cycle_channels)
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
pub fn start_channel(
    conn: &Connection,
    now: f64,
    lease: &Lease,
    channel: Channel,
) -> Result<Fence> {
    write_tx(conn, |tx| {
        if !lease_held(tx, now, lease)? {
            append_lease_lost(tx, now, lease)?;
            return Ok(Fence::Lost);
        }
        let event_id = append_event(
            tx,
            &lease.notification_id,
            now,
            kind::CHANNEL_ATTEMPT_STARTED,
            &lease.event_payload(json!({
                "channel": channel,
                "provider_effect_may_have_occurred": true,
            })),
        )?;
        Ok(Fence::Held { event_id })
    })
}

fn append_lease_lost(tx: &Connection, now: f64, lease: &Lease) -> Result<i64> {
    let started: bool = tx
        .prepare_cached(
            "SELECT EXISTS (SELECT 1 FROM uns_events
             WHERE notification_id = ?1 AND kind = 'CHANNEL_ATTEMPT_STARTED'
               AND json_extract(payload, '$.lease_token') = ?2)",
        )?
        .query_row(params![lease.notification_id, lease.token], |row| {
            row.get(0)
        })?;
    append_event(
        tx,
        &lease.notification_id,
        now,
        kind::LEASE_LOST,
        &lease.event_payload(json!({ "provider_effect_may_have_occurred": started })),
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
    let payload = lease.event_payload(json!({
        "channel": channel,
        "success": result.success(),
        "message_id": result.message_id,
        "error": result.error,
        "metadata": metadata,
    }));
    write_tx(conn, |tx| {
        append_event(
            tx,
            &lease.notification_id,
            now,
            kind::CHANNEL_ATTEMPT_RESULT,
            &payload,
        )
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

/// How an attempt ended.
#[derive(Debug, Clone, PartialEq)]
pub enum Settlement {
    Delivered,
    RetryScheduled {
        next_attempt_at: f64,
        channels: Vec<Channel>,
    },
    DeadLettered {
        error_message: String,
    },
    /// The fenced write found the lease gone; the replacement owns the row.
    LeaseLost,
}

/// Decides the outcome of an attempt from its channel results (pure).
pub fn decide(
    lease: &Lease,
    results: &[(Channel, DeliveryResult)],
    now: f64,
    backoff: &Backoff,
) -> Settlement {
    let still_owed: Vec<Channel> = lease
        .owed
        .iter()
        .copied()
        .filter(|channel| {
            !results
                .iter()
                .any(|(c, result)| c == channel && result.success())
        })
        .collect();
    if still_owed.is_empty() {
        return Settlement::Delivered;
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
        return Settlement::DeadLettered {
            error_message: format!("Provider outcome unknown: {}", detail(unknown)),
        };
    }
    let failures: Vec<&(Channel, DeliveryResult)> = results
        .iter()
        .filter(|(_, result)| result.outcome == ProviderOutcome::Rejected)
        .collect();
    if let Some(permanent) = failures.iter().find(|(_, result)| !result.retryable) {
        return Settlement::DeadLettered {
            error_message: format!("Provider rejected (not retryable): {}", detail(permanent)),
        };
    }
    if lease.cycle_attempt < lease.max_attempts {
        return Settlement::RetryScheduled {
            next_attempt_at: now + backoff.delay(lease.cycle_attempt),
            channels: still_owed,
        };
    }
    let last = failures
        .last()
        .map(|failure| detail(failure))
        .unwrap_or_else(|| format!("{} not delivered", join_channels(&still_owed)));
    Settlement::DeadLettered {
        error_message: format!(
            "Attempt budget exhausted ({} of {}): {last}",
            lease.cycle_attempt, lease.max_attempts
        ),
    }
}

fn join_channels(channels: &[Channel]) -> String {
    channels
        .iter()
        .map(|channel| channel.as_str())
        .collect::<Vec<_>>()
        .join(",")
}

/// Settles an attempt with one fenced UPDATE; zero rows means the lease was lost.
pub fn settle(
    conn: &Connection,
    now: f64,
    lease: &Lease,
    results: &[(Channel, DeliveryResult)],
    backoff: &Backoff,
) -> Result<Settlement> {
    let settlement = decide(lease, results, now, backoff);
    write_tx(conn, |tx| {
        let (status, dead_letter, next_attempt_at, error_message, event_kind, extra) =
            match &settlement {
                Settlement::Delivered => ("DELIVERED", 0, None, None, kind::DELIVERED, json!({})),
                Settlement::RetryScheduled {
                    next_attempt_at,
                    channels,
                } => (
                    "PENDING",
                    0,
                    Some(*next_attempt_at),
                    None,
                    kind::RETRY_SCHEDULED,
                    json!({ "next_attempt_at": next_attempt_at, "channels": channels }),
                ),
                Settlement::DeadLettered { error_message } => (
                    "DEAD",
                    1,
                    None,
                    Some(error_message.as_str()),
                    kind::DEAD_LETTERED,
                    json!({ "error_message": error_message }),
                ),
                Settlement::LeaseLost => ("LEASED", 0, None, None, kind::LEASE_LOST, json!({})),
            };
        let changed = if settlement == Settlement::LeaseLost {
            0
        } else {
            tx.prepare_cached(
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
            ])?
        };
        if changed == 0 {
            append_lease_lost(tx, now, lease)?;
            return Ok(Settlement::LeaseLost);
        }
        append_event(
            tx,
            &lease.notification_id,
            now,
            event_kind,
            &lease.event_payload(extra),
        )?;
        Ok(settlement.clone())
    })
}

/// Who acted on a DLQ entry, why, and on what evidence. Recorded in the audit event.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Audit {
    pub operator: String,
    pub reason: Option<String>,
    pub ticket: Option<String>,
    pub attestation: Option<String>,
    pub forced: bool,
    /// The triage verdict the action was based on.
    pub triage: Value,
    /// When set, the action is refused as stale unless this is still the newest event.
    pub expected_last_event_id: Option<i64>,
}

/// The row's state, for a conflict message.
fn conflict(tx: &Connection, id: &str, reason: &str) -> Result<EngineError> {
    let row: Option<(String, bool, f64)> = tx
        .query_row(
            "SELECT status, dead_letter, updated_at FROM uns_notifications WHERE id = ?1",
            [id],
            |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)),
        )
        .optional()?;
    Ok(match row {
        None => EngineError::NotFound(id.to_string()),
        Some((status, dead_letter, since)) => EngineError::Conflict(Conflict {
            id: id.to_string(),
            status,
            dead_letter,
            since,
            reason: reason.to_string(),
        }),
    })
}

fn check_not_stale(tx: &Connection, id: &str, audit: &Audit) -> Result<()> {
    let Some(expected) = audit.expected_last_event_id else {
        return Ok(());
    };
    let newest: Option<i64> = tx
        .prepare_cached("SELECT MAX(id) FROM uns_events WHERE notification_id = ?1")?
        .query_row([id], |row| row.get(0))?;
    if newest == Some(expected) {
        return Ok(());
    }
    Err(conflict(
        tx,
        id,
        &format!(
            "history moved since it was triaged (newest event {}, triage saw {expected})",
            newest
                .map(|n| n.to_string())
                .unwrap_or_else(|| "none".into())
        ),
    )?)
}

fn audit_payload(audit: &Audit, extra: Value) -> Value {
    let mut payload = json!({
        "operator": audit.operator,
        "reason": audit.reason,
        "ticket": audit.ticket,
        "attestation": audit.attestation,
        "forced": audit.forced,
        "triage": audit.triage,
    });
    if let (Value::Object(map), Value::Object(extra)) = (&mut payload, extra) {
        map.extend(extra);
    }
    payload
}

/// Resolves a DLQ entry: it leaves the DLQ as RESOLVED and keeps all of its history.
pub fn resolve(conn: &Connection, now: f64, id: &str, audit: &Audit) -> Result<i64> {
    write_tx(conn, |tx| {
        check_not_stale(tx, id, audit)?;
        let cycle: Option<i64> = tx
            .prepare_cached(
                "UPDATE uns_notifications SET status = 'RESOLVED', dead_letter = 0, updated_at = ?2
                 WHERE id = ?1 AND dead_letter = 1 RETURNING cycle",
            )?
            .query_row(params![id, now], |row| row.get(0))
            .optional()?;
        let Some(cycle) = cycle else {
            return Err(conflict(tx, id, "not in the DLQ")?);
        };
        append_event(
            tx,
            id,
            now,
            kind::DLQ_RESOLVED,
            &audit_payload(audit, json!({ "cycle": cycle })),
        )
    })
}

/// Replays a DLQ entry for `channels` in a new cycle, due now.
pub fn replay(
    conn: &Connection,
    now: f64,
    id: &str,
    channels: &[Channel],
    audit: &Audit,
) -> Result<i64> {
    if channels.is_empty() {
        return Err(EngineError::Invalid(format!(
            "{id}: no channel to replay (every channel was delivered?)"
        )));
    }
    write_tx(conn, |tx| {
        check_not_stale(tx, id, audit)?;
        let cycle: Option<i64> = tx
            .prepare_cached(
                "UPDATE uns_notifications
                 SET status = 'PENDING', dead_letter = 0, cycle = cycle + 1, cycle_attempts = 0,
                     next_attempt_at = ?2, lease_token = NULL, lease_until = NULL,
                     error_message = NULL, updated_at = ?2
                 WHERE id = ?1 AND dead_letter = 1 RETURNING cycle",
            )?
            .query_row(params![id, now], |row| row.get(0))
            .optional()?;
        let Some(cycle) = cycle else {
            return Err(conflict(tx, id, "not in the DLQ")?);
        };
        append_event(
            tx,
            id,
            now,
            kind::REPLAYED,
            &audit_payload(
                audit,
                json!({
                    "cycle": cycle,
                    "previous_cycle": cycle - 1,
                    "cycle_attempt": 0,
                    "channels": channels,
                }),
            ),
        )
    })
}
