//! The worker's state transitions of DESIGN section 3, each one transaction, each
//! written once: submit, claim, fence and start, record a result, settle.
//!
//! Resolve and replay are in `remediation`, which builds them on [`write_tx`] and
//! [`append_event`]. Every function takes `now` from the caller's clock so tests can move
//! time past a lease.

use crate::args;
use crate::db::{Db, DbError, Dialect};
use crate::model::payload;
use crate::model::{Channel, ChannelSet, Kind, ProviderOutcome, Status};
use crate::runtime::queries::{Cells, Source};
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
    Db(#[from] DbError),
    #[error(transparent)]
    WriterGone(#[from] crate::runtime::writer::WriterGone),
}

pub type Result<T> = std::result::Result<T, EngineError>;

impl EngineError {
    /// Whether the same write may well succeed when tried again in a moment: the store
    /// failed for a while ([`DbError::passing`]), or no connection to it could be had
    /// (never a file's writer thread that ended).
    pub fn passing(&self) -> bool {
        match self {
            EngineError::Db(err) => err.passing(),
            EngineError::WriterGone(gone) => {
                matches!(gone, crate::runtime::writer::WriterGone::Unreachable(_))
            }
            EngineError::Invalid(_) => false,
        }
    }

    /// Whether the write may have been kept all the same ([`DbError::may_have_committed`]).
    pub fn may_have_committed(&self) -> bool {
        matches!(self, EngineError::Db(err) if err.may_have_committed())
    }
}

static COMMITS: AtomicU64 = AtomicU64::new(0);

/// Write transactions this process has committed through the engine (for benchmarks).
pub fn commits() -> u64 {
    COMMITS.load(Ordering::Relaxed)
}

/// Runs `work` in one write transaction ([`Db::write_tx`]). An error from `work` rolls
/// it back.
pub fn write_tx<'c, T, E: From<DbError>>(
    db: &Db<'c>,
    work: impl FnOnce(&Db<'c>) -> std::result::Result<T, E>,
) -> std::result::Result<T, E> {
    let value = db.write_tx(work)?;
    COMMITS.fetch_add(1, Ordering::Relaxed);
    Ok(value)
}

/// Appends one event and returns its id. Every INSERT into `uns_events` is made by
/// [`append_text`], under this and [`append_prepared`].
pub fn append_event(
    db: &Db<'_>,
    notification_id: &str,
    at: f64,
    event_kind: Kind,
    payload: &impl serde::Serialize,
) -> std::result::Result<i64, DbError> {
    append_text(
        db,
        notification_id,
        at,
        event_kind,
        &payload::to_text(payload),
    )
}

/// As [`append_event`], returning the event as the store now holds it (its text is
/// stored as written), for a caller that goes on to judge the history in the same
/// transaction without reading it again.
pub fn append(
    db: &Db<'_>,
    notification_id: &str,
    at: f64,
    event_kind: Kind,
    payload: &impl serde::Serialize,
) -> std::result::Result<crate::model::Event, DbError> {
    append_prepared(db, notification_id, at, Prepared::of(event_kind, payload))
}

/// An event made ready to append: its stored text, and the event it reads back as. The
/// work needs no store, so a caller may do it on another thread while the store is
/// read.
#[derive(Debug)]
pub struct Prepared {
    kind: Kind,
    text: String,
    payload: crate::model::Payload,
    unreadable: Vec<String>,
}

impl Prepared {
    pub fn of(kind: Kind, payload: &impl serde::Serialize) -> Self {
        let text = payload::to_text(payload);
        let (payload, problem) = crate::model::payload_of(&text);
        Self {
            kind,
            text,
            payload,
            unreadable: problem.into_iter().collect(),
        }
    }
}

/// Appends an event [`Prepared`] before, as [`append`] does.
pub fn append_prepared(
    db: &Db<'_>,
    notification_id: &str,
    at: f64,
    prepared: Prepared,
) -> std::result::Result<crate::model::Event, DbError> {
    let id = append_text(db, notification_id, at, prepared.kind, &prepared.text)?;
    Ok(crate::model::Event {
        id,
        at,
        kind: crate::model::Stored::Known(prepared.kind),
        payload: prepared.payload,
        unreadable: prepared.unreadable,
    })
}

/// As [`append_event`], for a payload already in its stored text.
fn append_text(
    db: &Db<'_>,
    notification_id: &str,
    at: f64,
    event_kind: Kind,
    text: &str,
) -> std::result::Result<i64, DbError> {
    db.insert(
        "INSERT INTO uns_events (notification_id, at, kind, payload) VALUES (?1, ?2, ?3, ?4) RETURNING id",
        args![notification_id, at, event_kind.as_str(), text],
    )
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
pub fn submit(db: &Db<'_>, now: f64, new: &NewNotification) -> Result<Submitted> {
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
    write_tx(db, |tx| {
        let now = tx.now(now)?;
        if let Some(key) = &new.idempotency_key {
            if tx.dialect() == Dialect::Postgres {
                // Two submissions with one key: the second waits for the first, and finds it.
                tx.execute(
                    "SELECT pg_advisory_xact_lock(hashtext(?1))",
                    args![key.as_str()],
                )?;
            }
            let existing: Option<(String, String)> = tx.row(
                "SELECT id, status FROM uns_notifications WHERE idempotency_key = ?1",
                args![key.as_str()],
                |row| {
                    let mut cells = Cells::new(row);
                    Ok((
                        cells.required_text(0, "id"),
                        cells.required_text(1, "status"),
                    ))
                },
            )?;
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
        tx.execute(
            "INSERT INTO uns_notifications (id, status, dead_letter, attempts, cycle, cycle_attempts,
                 max_attempts, channels, payload, idempotency_key, next_attempt_at, created_at, updated_at)
             VALUES (?1, 'PENDING', 0, 0, 1, 0, ?2, ?3, ?4, ?5, ?6, ?6, ?6)",
            args![
                id.as_str(),
                new.max_attempts,
                channels_json,
                new.payload.to_string(),
                new.idempotency_key.clone(),
                now
            ],
        )?;
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
    /// When the lease began, on the clock it was taken by (the store's, on PostgreSQL).
    pub claimed_at: f64,
    /// When the worker holding it took it, on its own monotonic clock.
    pub claimed: Option<std::time::Instant>,
}

impl Lease {
    /// The seconds left of the lease: its length, less what the worker's monotonic clock
    /// says has passed since it took it. No wall clock is read, so a machine whose clock
    /// disagrees with the store's neither overruns the lease nor gives up early.
    pub fn remaining(&self) -> f64 {
        let length = self.lease_until - self.claimed_at;
        length - self.claimed.map_or(0.0, |at| at.elapsed().as_secs_f64())
    }

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
fn supported(dialect: Dialect) -> &'static str {
    match dialect {
        Dialect::Sqlite => {
            "(?2 IS NULL OR NOT EXISTS (
        SELECT 1 FROM json_each(CASE WHEN json_valid(channels) AND json_type(channels) = 'array'
                                     THEN channels ELSE '[]' END) j
        WHERE j.type = 'text' AND upper(trim(j.value)) NOT IN (SELECT value FROM json_each(?2))))"
        }
        Dialect::Postgres => {
            "(CAST(?2 AS TEXT) IS NULL OR NOT EXISTS (
        SELECT 1 FROM jsonb_array_elements(CASE WHEN jsonb_typeof(channels_json) = 'array'
                                     THEN channels_json ELSE '[]'::jsonb END) j(value)
        WHERE jsonb_typeof(j.value) = 'string'
          AND upper(trim(j.value #>> '{}')) NOT IN (SELECT jsonb_array_elements_text(CAST(?2 AS TEXT)::jsonb))))"
        }
    }
}

/// What a claim's read of a row adds to hold it (PostgreSQL: the row is this worker's
/// until its transaction ends, and another worker's claim passes it by).
fn claim_lock(dialect: Dialect) -> &'static str {
    match dialect {
        Dialect::Sqlite => "",
        Dialect::Postgres => " FOR UPDATE SKIP LOCKED",
    }
}

fn read_candidate(row: &dyn Source) -> Candidate {
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
pub fn claim(db: &Db<'_>, now: f64, worker_id: &str, lease_seconds: f64) -> Result<ClaimOutcome> {
    claim_for(
        db,
        now,
        worker_id,
        lease_seconds,
        &Channel::ALL.into_iter().collect(),
    )
}

/// The row to claim next: the longest-expired lease first, else the longest-due row,
/// among those whose channels `filter` (a JSON list) allows.
fn next_candidate(tx: &Db<'_>, now: f64, filter: Option<&str>) -> Result<Option<Candidate>> {
    let columns =
        "id, status, cycle, cycle_attempts, attempts, max_attempts, channels, payload, lease_token";
    let (supported, lock) = (supported(tx.dialect()), claim_lock(tx.dialect()));
    let expired = tx.row(
        &format!(
            "SELECT {columns} FROM uns_notifications
             WHERE status = 'LEASED' AND lease_until <= ?1 AND id IS NOT NULL AND {supported}
             ORDER BY lease_until LIMIT 1{lock}"
        ),
        args![now, filter],
        |row| Ok(read_candidate(row)),
    )?;
    if expired.is_some() {
        return Ok(expired);
    }
    Ok(tx.row(
        &format!(
            "SELECT {columns} FROM uns_notifications
             WHERE status = 'PENDING' AND next_attempt_at <= ?1 AND id IS NOT NULL AND {supported}
             ORDER BY next_attempt_at LIMIT 1{lock}"
        ),
        args![now, filter],
        |row| Ok(read_candidate(row)),
    )?)
}

/// Like [`claim`], for a worker that has adapters for `supported` only: rows that need
/// another channel are left untouched, never dead-lettered for want of an adapter.
pub fn claim_for(
    db: &Db<'_>,
    now: f64,
    worker_id: &str,
    lease_seconds: f64,
    supported: &ChannelSet,
) -> Result<ClaimOutcome> {
    let filter = (supported.len() < Channel::ALL.len())
        .then(|| serde_json::to_string(supported).unwrap_or_else(|_| "[]".into()));
    write_tx(db, |tx| {
        let now = tx.now(now)?;
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
        let changed = tx.execute(
            "UPDATE uns_notifications
             SET status = 'LEASED', lease_token = ?1, lease_until = ?2,
                 attempts = attempts + 1, cycle_attempts = cycle_attempts + 1, updated_at = ?3
             WHERE id = ?4 AND status = ?5 AND lease_token IS NOT DISTINCT FROM ?6",
            args![
                token.as_str(),
                lease_until,
                now,
                candidate.id.as_str(),
                candidate.status.as_str(),
                candidate.lease_token.clone()
            ],
        )?;
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
            claimed_at: now,
            claimed: None,
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
fn declined(tx: &Db<'_>, now: f64, filter: &str) -> Result<u64> {
    let supported = supported(tx.dialect());
    let count = tx
        .row(
            &format!(
                "SELECT COUNT(*) FROM uns_notifications
                 WHERE ((status = 'PENDING' AND next_attempt_at <= ?1) OR (status = 'LEASED' AND lease_until <= ?1))
                   AND id IS NOT NULL AND NOT {supported}"
            ),
            args![now, filter],
            |row| Ok(Cells::new(row).integer(0, "count")),
        )?
        .unwrap_or(0);
    Ok(u64::try_from(count).unwrap_or(0))
}

/// The row's channels, or why the row cannot be delivered as stored.
/// The channels a claim of `candidate` owes: every one it names on its first try, else
/// those its cycle has not delivered; why none can be, when the row cannot be delivered
/// as stored.
fn owed_by(tx: &Db<'_>, candidate: &Candidate) -> std::result::Result<ChannelSet, String> {
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

fn dead_letter(tx: &Db<'_>, now: f64, candidate: &Candidate, error_message: &str) -> Result<()> {
    tx.execute(
        "UPDATE uns_notifications
         SET status = 'DEAD', dead_letter = 1, lease_token = NULL, lease_until = NULL,
             error_message = ?1, updated_at = ?2
         WHERE id = ?3 AND status = ?4 AND lease_token IS NOT DISTINCT FROM ?5",
        args![
            error_message,
            now,
            candidate.id.as_str(),
            candidate.status.as_str(),
            candidate.lease_token.clone()
        ],
    )?;
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
    db: &Db<'_>,
    id: &str,
    cycle: i64,
    row_channels: &ChannelSet,
) -> std::result::Result<ChannelSet, String> {
    let read = || -> std::result::Result<Vec<(i64, String, Option<String>)>, DbError> {
        db.rows(
            "SELECT id, kind, CAST(payload AS TEXT) FROM uns_events
             WHERE notification_id = ?1 AND kind IN ('REPLAYED', 'CHANNEL_ATTEMPT_RESULT')
             ORDER BY id",
            args![id],
            |row| {
                let mut cells = Cells::new(row);
                let text = cells
                    .text(2, "payload")
                    .filter(|_| cells.problems.is_empty());
                Ok((cells.integer(0, "id"), cells.required_text(1, "kind"), text))
            },
        )
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
pub fn lease_held(db: &Db<'_>, now: f64, lease: &Lease) -> Result<bool> {
    let now = db.now(now)?;
    let held = db
        .row(
            "SELECT EXISTS (SELECT 1 FROM uns_notifications
             WHERE id = ?1 AND lease_token = ?2 AND lease_until > ?3)",
            args![lease.notification_id.as_str(), lease.token.as_str(), now],
            |row| Ok(Cells::new(row).integer(0, "held") != 0),
        )?
        .unwrap_or(false);
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
    db: &Db<'_>,
    now: f64,
    lease: &Lease,
    channel: Channel,
    details: &Map<String, Value>,
) -> Result<Fence> {
    start_channel_tried(db, now, lease, channel, details, false)
}

/// [`start_channel`], tried `again` after a try that failed: one whose COMMIT failed
/// uncertainly may have kept its start, which is then taken as written, never written
/// twice.
pub fn start_channel_tried(
    db: &Db<'_>,
    now: f64,
    lease: &Lease,
    channel: Channel,
    details: &Map<String, Value>,
    again: bool,
) -> Result<Fence> {
    write_tx(db, |tx| {
        let now = tx.now(now)?;
        // The row is this lease's while the transaction lasts (PostgreSQL): the start is
        // written under the lease it checked.
        tx.lock(&lease.notification_id)?;
        if !lease_held(tx, now, lease)? {
            append_lease_lost(tx, now, lease)?;
            return Ok(Fence::Lost);
        }
        if again
            && let Some(event_id) = written_under(tx, lease, Kind::ChannelAttemptStarted, channel)?
        {
            return Ok(Fence::Held { event_id });
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

fn append_lease_lost(tx: &Db<'_>, now: f64, lease: &Lease) -> std::result::Result<i64, DbError> {
    let token = tx.dialect().json_text("payload", "$.lease_token");
    let started = tx
        .row(
            &format!(
                "SELECT EXISTS (SELECT 1 FROM uns_events
                 WHERE notification_id = ?1 AND kind = 'CHANNEL_ATTEMPT_STARTED' AND {token} = ?2)"
            ),
            args![lease.notification_id.as_str(), lease.token.as_str()],
            |row| Ok(Cells::new(row).integer(0, "started") != 0),
        )?
        .unwrap_or(false);
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
    db: &Db<'_>,
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
    write_tx(db, |tx| {
        let now = tx.now(now)?;
        Ok(append_event(
            tx,
            &lease.notification_id,
            now,
            Kind::ChannelAttemptResult,
            &payload,
        )?)
    })
}

/// Whether `lease`'s result for `channel` is written already: a try of
/// [`record_result`] whose COMMIT failed uncertainly may have kept it, and a second must
/// not write it twice.
pub fn result_recorded(db: &Db<'_>, lease: &Lease, channel: Channel) -> Result<bool> {
    Ok(written_under(db, lease, Kind::ChannelAttemptResult, channel)?.is_some())
}

/// The first event of `kind` that `lease` wrote for `channel`, by its id.
fn written_under(
    db: &Db<'_>,
    lease: &Lease,
    kind: Kind,
    channel: Channel,
) -> std::result::Result<Option<i64>, DbError> {
    let token = db.dialect().json_text("payload", "$.lease_token");
    let of = db.dialect().json_text("payload", "$.channel");
    db.row(
        &format!(
            "SELECT id FROM uns_events
             WHERE notification_id = ?1 AND kind = ?2 AND {token} = ?3 AND {of} = ?4
             ORDER BY id LIMIT 1"
        ),
        args![
            lease.notification_id.as_str(),
            kind.as_str(),
            lease.token.as_str(),
            channel.as_str()
        ],
        |row| Ok(Cells::new(row).integer(0, "id")),
    )
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
    db: &Db<'_>,
    now: f64,
    lease: &Lease,
    results: &[(Channel, DeliveryResult)],
    backoff: &Backoff,
) -> Result<Ended> {
    write_tx(db, |tx| {
        let now = tx.now(now)?;
        let decision = decide(lease, results, now, backoff);
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
        let changed = tx.execute(
            "UPDATE uns_notifications
             SET status = ?4, dead_letter = ?5, lease_token = NULL, lease_until = NULL,
                 next_attempt_at = COALESCE(?6, next_attempt_at), error_message = ?7, updated_at = ?3
             WHERE id = ?1 AND lease_token = ?2 AND lease_until > ?3",
            args![
                lease.notification_id.as_str(),
                lease.token.as_str(),
                now,
                status,
                dead_letter as i64,
                next_attempt_at,
                error_message
            ],
        )?;
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
fn outstanding(tx: &Db<'_>, id: &str) -> Result<ChannelSet> {
    let channels: Option<String> = tx
        .row(
            "SELECT channels FROM uns_notifications WHERE id = ?1",
            args![id],
            |row| {
                let mut cells = Cells::new(row);
                let text = cells.text(0, "channels");
                Ok(text.filter(|_| cells.problems.is_empty()))
            },
        )?
        .flatten();
    let names: Vec<String> = channels
        .as_deref()
        .and_then(|text| serde_json::from_str(text).ok())
        .unwrap_or_default();
    let Ok(channels) = ChannelSet::parse(&names) else {
        return Ok(Channel::ALL.into_iter().collect());
    };
    let rows = tx.rows(
        "SELECT kind, CAST(payload AS TEXT) FROM uns_events
         WHERE notification_id = ?1 AND kind IN ('CHANNEL_ATTEMPT_RESULT', 'VERIFIED')",
        args![id],
        |row| {
            let mut cells = Cells::new(row);
            let kind = cells.required_text(0, "kind");
            let text = cells.text(1, "payload");
            // A payload that cannot be read delivers nothing.
            Ok((kind, text.filter(|_| cells.problems.is_empty())))
        },
    )?;
    let mut delivered = ChannelSet::new();
    for (kind, text) in rows {
        // Read as the history reads it: a payload naming a key twice delivers nothing.
        let payload: Value = text
            .as_deref()
            .map(crate::model::payload_tree)
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
