//! Reading rows back, tolerantly: a value that cannot be read (a BLOB where text belongs,
//! invalid UTF-8, text in a number column, a NULL) is named on its own row, never fatal,
//! so one bad row cannot hide the others.

use crate::args;
use crate::db::{Db, DbResult};
use crate::model::{Event, Notification, Stored};
use rusqlite::types::{Value, ValueRef};

/// The columns of `uns_notifications` as [`notification`] reads them, from alias `n`.
pub const NOTIFICATION_COLUMNS: &str = "n.rowid, n.id, n.status, n.dead_letter, n.attempts, \
    n.cycle, n.cycle_attempts, n.max_attempts, n.channels, n.payload, n.idempotency_key, \
    n.lease_token, n.lease_until, n.next_attempt_at, n.error_message, n.created_at, n.updated_at";
/// How many columns [`NOTIFICATION_COLUMNS`] holds.
pub const NOTIFICATION_WIDTH: usize = 17;
/// The columns of `uns_events` as [`event`] reads them, from alias `e`.
pub const EVENT_COLUMNS: &str = "e.id, e.at, e.kind, e.payload";

pub use crate::db::Source;
pub use crate::db::value::{Cells, quote};

/// Rows copied out of a statement into one buffer, so that another thread can decode
/// them while the statement steps on. Cleared and refilled, the buffer is reused.
#[derive(Debug, Default)]
pub struct Copies {
    bytes: Vec<u8>,
    cells: Vec<Copied>,
}

#[derive(Debug, Clone, Copy)]
enum Copied {
    Null,
    Integer(i64),
    Real(f64),
    Text(usize, usize),
    Blob(usize, usize),
}

impl Copies {
    /// Appends `columns` of `row`; returns where the copy starts, for [`Copies::row`].
    pub fn push(
        &mut self,
        row: &(impl Source + ?Sized),
        columns: std::ops::Range<usize>,
    ) -> rusqlite::Result<usize> {
        let start = self.cells.len();
        for index in columns {
            let cell = match row.cell(index)? {
                ValueRef::Null => Copied::Null,
                ValueRef::Integer(n) => Copied::Integer(n),
                ValueRef::Real(x) => Copied::Real(x),
                ValueRef::Text(bytes) => {
                    self.bytes.extend_from_slice(bytes);
                    Copied::Text(self.bytes.len() - bytes.len(), self.bytes.len())
                }
                ValueRef::Blob(bytes) => {
                    self.bytes.extend_from_slice(bytes);
                    Copied::Blob(self.bytes.len() - bytes.len(), self.bytes.len())
                }
            };
            self.cells.push(cell);
        }
        Ok(start)
    }

    /// The copy that starts at `start`, its first column at index 0.
    pub fn row(&self, start: usize) -> CopiedRow<'_> {
        CopiedRow {
            copies: self,
            start,
        }
    }

    pub fn clear(&mut self) {
        self.bytes.clear();
        self.cells.clear();
    }

    /// Bytes held, to bound a batch.
    pub fn size(&self) -> usize {
        self.bytes.len() + self.cells.len() * std::mem::size_of::<Copied>()
    }
}

/// One copied row, read through [`Cells`] like the statement's own.
#[derive(Clone, Copy)]
pub struct CopiedRow<'a> {
    copies: &'a Copies,
    start: usize,
}

impl Source for CopiedRow<'_> {
    fn cell(&self, index: usize) -> rusqlite::Result<ValueRef<'_>> {
        let cell = self
            .copies
            .cells
            .get(self.start + index)
            .ok_or_else(|| rusqlite::Error::InvalidColumnIndex(index))?;
        let bytes = |from: usize, to: usize| self.copies.bytes.get(from..to).unwrap_or_default();
        Ok(match *cell {
            Copied::Null => ValueRef::Null,
            Copied::Integer(n) => ValueRef::Integer(n),
            Copied::Real(x) => ValueRef::Real(x),
            Copied::Text(from, to) => ValueRef::Text(bytes(from, to)),
            Copied::Blob(from, to) => ValueRef::Blob(bytes(from, to)),
        })
    }
}

/// Decodes a notification from [`NOTIFICATION_COLUMNS`] starting at column `first`.
pub fn notification(row: &(impl Source + ?Sized), first: usize) -> Notification {
    let mut cells = Cells::new(row);
    let rowid = cells.integer(first, "rowid");
    let id = cells.text(first + 1, "id").unwrap_or_else(|| {
        cells.problems.push("id: NULL".into());
        format!("(no id: rowid {rowid})")
    });
    let channels_text = cells.required_text(first + 8, "channels");
    let channels = match serde_json::from_str::<Vec<String>>(&channels_text) {
        Ok(names) => names,
        Err(_) => {
            cells.problems.push(format!(
                "channels: {} is not a JSON array of channel names",
                quote(&channels_text)
            ));
            Vec::new()
        }
    };
    let notification = Notification {
        status: Stored::read(&cells.required_text(first + 2, "status")),
        dead_letter: cells.integer(first + 3, "dead_letter") != 0,
        attempts: cells.integer(first + 4, "attempts"),
        cycle: cells.integer(first + 5, "cycle"),
        cycle_attempts: cells.integer(first + 6, "cycle_attempts"),
        max_attempts: cells.integer(first + 7, "max_attempts"),
        channels,
        payload: cells.json(first + 9, "payload"),
        idempotency_key: cells.text(first + 10, "idempotency_key"),
        lease_token: cells.text(first + 11, "lease_token"),
        lease_until: cells.real(first + 12, "lease_until"),
        next_attempt_at: cells.required_real(first + 13, "next_attempt_at"),
        error_message: cells.text(first + 14, "error_message"),
        created_at: cells.required_real(first + 15, "created_at"),
        updated_at: cells.required_real(first + 16, "updated_at"),
        id,
        unreadable: Vec::new(),
    };
    Notification {
        unreadable: cells.problems,
        ..notification
    }
}

/// Decodes an event from [`EVENT_COLUMNS`] starting at column `first`.
pub fn event(row: &(impl Source + ?Sized), first: usize) -> Event {
    let mut cells = Cells::new(row);
    let event = Event {
        id: cells.integer(first, "id"),
        at: cells.required_real(first + 1, "at"),
        kind: Stored::read(&cells.required_text(first + 2, "kind")),
        payload: cells.payload(first + 3, "payload"),
        unreadable: Vec::new(),
    };
    Event {
        unreadable: cells.problems,
        ..event
    }
}

pub fn read_notification(db: &Db<'_>, id: &str) -> DbResult<Option<Notification>> {
    db.row(
        &format!("SELECT {NOTIFICATION_COLUMNS} FROM uns_notifications n WHERE n.id = ?1"),
        args![id],
        |row| Ok(notification(row, 0)),
    )
}

/// Every event of one notification, oldest first.
pub fn read_events(db: &Db<'_>, id: &str) -> DbResult<Vec<Event>> {
    db.rows(
        &format!(
            "SELECT {EVENT_COLUMNS} FROM uns_events e WHERE e.notification_id = ?1 ORDER BY e.id"
        ),
        args![id],
        |row| Ok(event(row, 0)),
    )
}

/// Whether the store has a place for notes (schema version 3 on).
pub fn has_notes(db: &Db<'_>) -> DbResult<bool> {
    let sql = db.dialect().has_table("uns_notes");
    Ok(db
        .row(&sql, &[], |row| {
            Ok(Cells::new(row).integer(0, "exists") != 0)
        })?
        .unwrap_or(false))
}

/// The notes written in `[since, until)` (either end open), oldest first; none in a store
/// without a place for them.
pub fn read_notes(
    db: &Db<'_>,
    since: Option<f64>,
    until: Option<f64>,
) -> DbResult<Vec<crate::model::NoteRow>> {
    if !has_notes(db)? {
        return Ok(Vec::new());
    }
    db.rows(
        "SELECT id, at, kind, payload FROM uns_notes
         WHERE at >= coalesce(?1, at) AND at < coalesce(?2, at + 1) ORDER BY id",
        args![since, until],
        |row| {
            let mut cells = Cells::new(row);
            let note = crate::model::NoteRow {
                id: cells.integer(0, "id"),
                at: cells.required_real(1, "at"),
                kind: cells.required_text(2, "kind"),
                payload: cells.payload(3, "payload"),
                unreadable: Vec::new(),
            };
            Ok(crate::model::NoteRow {
                unreadable: cells.problems,
                ..note
            })
        },
    )
}

/// The id of a notification's newest event.
pub fn newest_event_id(db: &Db<'_>, id: &str) -> DbResult<Option<i64>> {
    Ok(db
        .row(
            "SELECT MAX(id) FROM uns_events WHERE notification_id = ?1",
            args![id],
            |row| Ok(Cells::new(row).optional_integer(0, "id")),
        )?
        .flatten())
}

/// The runtime's state in a few numbers: what `/metrics`, `doctor` and the API's stats
/// show. Each is read from an index where one serves it, so it stays cheap on a large
/// store.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Stats {
    /// When these were read (unix seconds).
    pub at: f64,
    /// Rows by status, as stored.
    pub by_status: std::collections::BTreeMap<String, i64>,
    pub dlq_entries: i64,
    /// When the longest-waiting DLQ entry got there.
    pub oldest_dlq_at: Option<f64>,
    /// Rows waiting to be claimed now: PENDING and due, or LEASED with the lease run out.
    pub due: i64,
    /// Since when the longest-waiting of them has been due.
    pub oldest_due_at: Option<f64>,
    /// The newest claim (ATTEMPT_STARTED) by any worker.
    pub last_claim_at: Option<f64>,
    /// Rows PENDING and due later: retries backing off, and paced replays waiting their
    /// turn.
    #[serde(default)]
    pub scheduled: i64,
    /// When the last of them is due.
    #[serde(default)]
    pub last_scheduled_at: Option<f64>,
}

/// The numbers as of the store's own clock: `clock` on SQLite, the database's on
/// PostgreSQL ([`Db::now`]), the clock every event and due time there was written by, so a
/// reader whose clock is off counts the same rows due and the same ages.
pub fn stats(db: &Db<'_>, clock: f64) -> DbResult<Stats> {
    stats_at(db, db.now(clock)?)
}

fn stats_at(db: &Db<'_>, now: f64) -> DbResult<Stats> {
    let mut stats = Stats {
        at: now,
        ..Stats::default()
    };
    db.each(
        "SELECT status, COUNT(*) FROM uns_notifications GROUP BY status",
        &[],
        &mut |row| {
            let mut cells = Cells::new(row);
            let status = cells.text(0, "status").unwrap_or_else(|| "NULL".into());
            stats.by_status.insert(status, cells.integer(1, "count"));
            Ok(())
        },
    )?;
    let count_and = |sql: &str, at: Option<f64>| -> DbResult<(i64, Option<f64>)> {
        let params = match at {
            Some(at) => vec![Value::Real(at)],
            None => Vec::new(),
        };
        Ok(db
            .row(sql, &params, |row| {
                let mut cells = Cells::new(row);
                Ok((cells.integer(0, "count"), cells.real(1, "at")))
            })?
            .unwrap_or((0, None)))
    };
    let (entries, oldest) = count_and(
        "SELECT COUNT(*), MIN(updated_at) FROM uns_notifications WHERE dead_letter = 1",
        None,
    )?;
    stats.dlq_entries = entries;
    stats.oldest_dlq_at = oldest;
    for (status, column) in [("PENDING", "next_attempt_at"), ("LEASED", "lease_until")] {
        let (due, oldest) = count_and(
            &format!(
                "SELECT COUNT(*), MIN({column}) FROM uns_notifications
                 WHERE status = '{status}' AND {column} <= ?1"
            ),
            Some(now),
        )?;
        stats.due += due;
        stats.oldest_due_at = match (stats.oldest_due_at, oldest) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
    }
    stats.last_claim_at = db
        .row(
            "SELECT MAX(at) FROM uns_events WHERE kind = 'ATTEMPT_STARTED'",
            &[],
            |row| Ok(Cells::new(row).real(0, "at")),
        )?
        .flatten();
    let (scheduled, last) = count_and(
        "SELECT COUNT(*), MAX(next_attempt_at) FROM uns_notifications
         WHERE status = 'PENDING' AND next_attempt_at > ?1",
        Some(now),
    )?;
    stats.scheduled = scheduled;
    stats.last_scheduled_at = last;
    Ok(stats)
}

/// How the runtime has been doing over a recent window: what `doctor` judges it by.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Health {
    #[serde(flatten)]
    pub stats: Stats,
    /// The window the counts below cover, in seconds back from `at`.
    pub window_seconds: f64,
    /// Claims (ATTEMPT_STARTED) in the window.
    pub claims: i64,
    /// LEASE_LOST events in the window.
    pub lease_lost: i64,
    /// Claims of a row whose lease had run out (ATTEMPT_STARTED reclaimed) in the window:
    /// each may send a copy a lost lease already sent.
    #[serde(default)]
    pub reclaims: i64,
    /// The workers that claimed rows in the window, by id.
    pub workers: Vec<String>,
    /// The lease the newest claim was given, in seconds.
    pub lease_seconds: Option<f64>,
    /// Provider calls that ended in the window, by channel.
    pub calls: Vec<ChannelCalls>,
    /// The SMTP relay (`host:port`) the newest email attempt went to, as the adapter
    /// recorded it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub smtp_relay: Option<String>,
    /// The last LEASE_LOST and the last reclaim at or before the window's end, however
    /// long ago (unix seconds): what "still happening" is told by (DESIGN §10).
    #[serde(default)]
    pub last_lease_lost: Option<f64>,
    #[serde(default)]
    pub last_reclaim: Option<f64>,
    /// The channels the worker of the server that answered has adapters for: what the
    /// store cannot say (None read from it, and from a server without a worker). A worker
    /// leaves a row that owes another channel to one that has its adapter.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_worker: Option<crate::model::ChannelSet>,
}

/// How long one channel's provider calls took (CHANNEL_ATTEMPT_STARTED to its result),
/// and how many the provider refused or left unknown.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ChannelCalls {
    pub channel: String,
    pub calls: usize,
    pub p99_seconds: f64,
    pub max_seconds: f64,
    #[serde(default)]
    pub refused: usize,
    #[serde(default)]
    pub unknown: usize,
}

/// The most call results one health reading pairs with their starts.
const CALLS_READ: i64 = 50_000;

/// The workers that claimed a row since `since`, by name.
fn workers_since(db: &Db<'_>, since: f64) -> DbResult<Vec<String>> {
    let worker = db.dialect().json_text("payload", "$.worker_id");
    let mut workers: Vec<String> = db
        .rows(
            &format!(
                "SELECT DISTINCT {worker} FROM uns_events WHERE kind = 'ATTEMPT_STARTED' AND at >= ?1"
            ),
            args![since],
            |row| Ok(Cells::new(row).text(0, "worker_id")),
        )?
        .into_iter()
        .flatten()
        .collect();
    workers.sort();
    Ok(workers)
}

/// The lease the newest claim took, in seconds.
fn newest_lease_seconds(db: &Db<'_>) -> DbResult<Option<f64>> {
    let until = db.dialect().json_number("payload", "$.lease_until");
    Ok(db
        .row(
            &format!(
                "SELECT {until} - at FROM uns_events
                 WHERE kind = 'ATTEMPT_STARTED' AND {valid}
                 ORDER BY at DESC LIMIT 1",
                valid = db.dialect().json_valid("payload")
            ),
            &[],
            |row| Ok(Cells::new(row).real(0, "lease")),
        )?
        .flatten()
        .filter(|s| s.is_finite() && *s > 0.0))
}

/// The runtime's health over the `window_seconds` before `until` (default: the store's
/// now, as [`stats`] reads it).
pub fn health(
    db: &Db<'_>,
    clock: f64,
    window_seconds: f64,
    until: Option<f64>,
) -> DbResult<Health> {
    let now = db.now(clock)?;
    let end = until.unwrap_or(f64::MAX);
    let since = until.unwrap_or(now) - window_seconds;
    let reclaimed = db.dialect().json_number("payload", "$.reclaimed");
    let count = |kind: &str, reclaims: bool| -> DbResult<i64> {
        let sql = if reclaims {
            format!(
                "SELECT COUNT(*) FROM uns_events WHERE kind = ?1 AND at >= ?2 AND at < ?3
                 AND {reclaimed} = 1"
            )
        } else {
            "SELECT COUNT(*) FROM uns_events WHERE kind = ?1 AND at >= ?2 AND at < ?3".to_string()
        };
        Ok(db
            .row(&sql, args![kind, since, end], |row| {
                Ok(Cells::new(row).integer(0, "count"))
            })?
            .unwrap_or(0))
    };
    let (last_lease_lost, last_reclaim) = crate::pulse::last_losses(db, until.unwrap_or(f64::MAX))?;
    let mut health = Health {
        stats: stats_at(db, now)?,
        window_seconds,
        claims: count("ATTEMPT_STARTED", false)?,
        lease_lost: count("LEASE_LOST", false)?,
        reclaims: count("ATTEMPT_STARTED", true)?,
        last_lease_lost,
        last_reclaim,
        ..Health::default()
    };
    health.workers = workers_since(db, since)?;
    health.lease_seconds = newest_lease_seconds(db)?;
    health.calls = channel_calls(db, since)?;
    health.smtp_relay = newest_relay(db)?;
    Ok(health)
}

/// Each channel's calls since `since`: how long they took, how many were refused and how
/// many ended unknown.
fn channel_calls(db: &Db<'_>, since: f64) -> DbResult<Vec<ChannelCalls>> {
    // Each result is paired with the newest start of the same channel under the same
    // lease before it: a late result is never paired with a reclaiming worker's start.
    let d = db.dialect();
    let sql = format!(
        "SELECT {r_channel}, {r_success}, {r_outcome},
                r.at - (SELECT s.at FROM uns_events s
                        WHERE s.notification_id = r.notification_id AND s.id < r.id
                          AND s.kind = 'CHANNEL_ATTEMPT_STARTED'
                          AND {s_channel} = {r_channel}
                          AND {s_token} IS NOT DISTINCT FROM {r_token}
                        ORDER BY s.id DESC LIMIT 1)
         FROM uns_events r
         WHERE r.kind = 'CHANNEL_ATTEMPT_RESULT' AND r.at >= ?1 AND {r_valid}
         ORDER BY r.at DESC LIMIT ?2",
        r_channel = d.json_text("r.payload", "$.channel"),
        r_success = d.json_number("r.payload", "$.success"),
        r_outcome = d.json_text("r.payload", "$.metadata.provider_outcome"),
        s_channel = d.json_text("s.payload", "$.channel"),
        s_token = d.json_text("s.payload", "$.lease_token"),
        r_token = d.json_text("r.payload", "$.lease_token"),
        r_valid = d.json_valid("r.payload"),
    );
    let mut by_channel: std::collections::BTreeMap<String, (Vec<f64>, usize, usize)> =
        Default::default();
    db.each(&sql, args![since, CALLS_READ], &mut |row| {
        let mut cells = Cells::new(row);
        let channel = cells.text(0, "channel");
        let success = cells.optional_integer(1, "success").map(|s| s != 0);
        let said = cells.text(2, "provider_outcome");
        let took = cells.real(3, "took");
        if let (Some(channel), Some(took)) = (channel, took)
            && took.is_finite()
            && took >= 0.0
        {
            let entry = by_channel.entry(channel).or_default();
            entry.0.push(took);
            match crate::model::ProviderOutcome::of_result(success, said.as_deref()) {
                crate::model::ProviderOutcome::Rejected => entry.1 += 1,
                crate::model::ProviderOutcome::Unknown => entry.2 += 1,
                crate::model::ProviderOutcome::Accepted => {}
            }
        }
        Ok(())
    })?;
    let mut out = Vec::new();
    for (channel, (mut took, refused, unknown)) in by_channel {
        took.sort_by(f64::total_cmp);
        let rank = ((took.len() as f64) * 0.99).ceil() as usize;
        out.push(ChannelCalls {
            channel,
            calls: took.len(),
            p99_seconds: took[rank.clamp(1, took.len()) - 1],
            max_seconds: took[took.len() - 1],
            refused,
            unknown,
        });
    }
    Ok(out)
}

/// The relay the newest email attempt named, when it names one as `host:port`.
///
/// Only the newest [`RELAY_STARTS_READ`] starts are looked at: a store whose starts name
/// no relay (Slack and PagerDuty alone, or an older runtime) is not read to its first
/// event each time its health is asked for.
fn newest_relay(db: &Db<'_>) -> DbResult<Option<String>> {
    let relay = db.dialect().json_text("payload", "$.smtp_relay");
    Ok(db
        .row(
            &format!(
                "SELECT relay FROM (
                     SELECT at, {relay} AS relay FROM uns_events
                     WHERE kind = 'CHANNEL_ATTEMPT_STARTED' ORDER BY at DESC LIMIT ?1
                 ) AS newest
                 WHERE relay IS NOT NULL ORDER BY at DESC LIMIT 1"
            ),
            args![RELAY_STARTS_READ],
            |row| Ok(Cells::new(row).text(0, "smtp_relay")),
        )?
        .flatten()
        .filter(|relay| is_relay_address(relay)))
}

/// The most channel starts read for the relay the newest email attempt named.
pub const RELAY_STARTS_READ: i64 = 1000;

/// `host:port` and nothing else: what a store names as its relay is probed only then.
pub fn is_relay_address(text: &str) -> bool {
    let Some((host, port)) = text.rsplit_once(':') else {
        return false;
    };
    !host.is_empty()
        && host.len() <= 253
        && host
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '[' | ']' | ':'))
        && port.parse::<u16>().is_ok_and(|p| p > 0)
}

/// The ids that start with `prefix`, in order, at most `limit` (DLQ entries only when
/// `dlq_only`): one walk of the id index from the prefix on.
pub fn ids_with_prefix(
    db: &Db<'_>,
    prefix: &str,
    dlq_only: bool,
    limit: usize,
) -> DbResult<Vec<String>> {
    // Every id that starts with the prefix sorts before prefix + the last code point.
    let upper = format!("{prefix}\u{10FFFF}");
    let sql = if dlq_only {
        "SELECT id FROM uns_notifications WHERE dead_letter = 1 AND id >= ?1 AND id < ?2 ORDER BY id LIMIT ?3"
    } else {
        "SELECT id FROM uns_notifications WHERE id >= ?1 AND id < ?2 ORDER BY id LIMIT ?3"
    };
    Ok(db
        .rows(sql, args![prefix, upper, limit], |row| {
            Ok(Cells::new(row).text(0, "id"))
        })?
        .into_iter()
        .flatten()
        .collect())
}

/// Which store this is, the same however it is reached (directly or through its API): a
/// hash of where it lives (the file's real path, or the database's host, port and name)
/// and its first event, which never changes. A copy of the store elsewhere, or another
/// store at the same place, has another. None when the store has no event yet.
pub fn store_identity(db: &Db<'_>, place: &str) -> DbResult<Option<String>> {
    let first = db.row(
        "SELECT id, CAST(at AS DOUBLE PRECISION), CAST(notification_id AS TEXT) FROM uns_events ORDER BY id LIMIT 1",
        &[],
        |row| {
            let mut cells = Cells::new(row);
            Ok((
                cells.integer(0, "id"),
                cells.required_real(1, "at"),
                cells.text(2, "notification_id"),
            ))
        },
    )?;
    let Some((id, at, notification)) = first else {
        return Ok(None);
    };
    let text = format!("{place}|{id}|{at:.6}|{}", notification.unwrap_or_default());
    // FNV-1a, 64 bits: an identity to compare, not a secret to keep.
    let hash = text.bytes().fold(0xcbf2_9ce4_8422_2325u64, |hash, byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x0000_0100_0000_01b3)
    });
    Ok(Some(format!("{hash:016x}")))
}

/// Where the SQLite store at `path` lives, for its identity: its real path.
pub fn file_place(path: &std::path::Path) -> String {
    std::fs::canonicalize(path)
        .unwrap_or_else(|_| path.to_path_buf())
        .display()
        .to_string()
}
