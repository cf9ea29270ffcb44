//! The incident over time (DESIGN §10): per step of a window, how many lease losses,
//! reclaims, UNKNOWN outcomes, new dead letters, replays, resolves and deliveries the
//! events record, and when the last of each was; and from that, whether the incident is
//! still happening. Read from the events' `(kind, at)` index, the same query on the store
//! and behind the API, so both backends give the same document for the same window.

use crate::args;
use crate::db::value::Cells;
use crate::db::{Db, DbResult, Dialect};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The most steps one pulse has: a day by the minute.
pub const MAX_STEPS: usize = 1_440;

/// The default window: the last hour, by the minute.
pub const DEFAULT_SPAN: f64 = 3_600.0;
pub const DEFAULT_STEP: f64 = 60.0;

/// How long after the last lease loss or reclaim an incident is still called happening:
/// five minutes (`--quiet-after`).
pub const DEFAULT_QUIET_AFTER: f64 = 300.0;

/// What a pulse counts, each from its own events.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Series {
    /// LEASE_LOST: a worker lost its lease, maybe mid-call.
    LeaseLost,
    /// ATTEMPT_STARTED with `reclaimed`: a row taken over after a lease expired.
    Reclaimed,
    /// CHANNEL_ATTEMPT_RESULT whose provider outcome is UNKNOWN.
    Unknown,
    /// DEAD_LETTERED: a new DLQ entry.
    DeadLettered,
    /// REPLAYED: an operator's replay.
    Replayed,
    /// DLQ_RESOLVED: an operator's resolve.
    DlqResolved,
    /// DELIVERED: every channel accepted.
    Delivered,
    /// DELIVERED in a cycle a replay started (a cycle past the first): a replay that
    /// worked.
    ReplayDelivered,
}

impl Series {
    pub const ALL: [Series; 8] = [
        Series::LeaseLost,
        Series::Reclaimed,
        Series::Unknown,
        Series::DeadLettered,
        Series::Replayed,
        Series::DlqResolved,
        Series::Delivered,
        Series::ReplayDelivered,
    ];

    /// The event kind it counts.
    pub fn kind(self) -> &'static str {
        match self {
            Series::LeaseLost => "LEASE_LOST",
            Series::Reclaimed => "ATTEMPT_STARTED",
            Series::Unknown => "CHANNEL_ATTEMPT_RESULT",
            Series::DeadLettered => "DEAD_LETTERED",
            Series::Replayed => "REPLAYED",
            Series::DlqResolved => "DLQ_RESOLVED",
            Series::Delivered | Series::ReplayDelivered => "DELIVERED",
        }
    }

    /// Its name in the JSON document.
    pub fn as_str(self) -> &'static str {
        match self {
            Series::LeaseLost => "LEASE_LOST",
            Series::Reclaimed => "RECLAIMED",
            Series::Unknown => "UNKNOWN",
            Series::DeadLettered => "DEAD_LETTERED",
            Series::Replayed => "REPLAYED",
            Series::DlqResolved => "DLQ_RESOLVED",
            Series::Delivered => "DELIVERED",
            Series::ReplayDelivered => "REPLAY_DELIVERED",
        }
    }

    /// A short heading for a narrow table.
    pub fn heading(self) -> &'static str {
        match self {
            Series::LeaseLost => "LOST",
            Series::Reclaimed => "RECLAIM",
            Series::Unknown => "UNKNOWN",
            Series::DeadLettered => "DEAD",
            Series::Replayed => "REPLAY",
            Series::DlqResolved => "RESOLVE",
            Series::Delivered => "DELIVER",
            Series::ReplayDelivered => "REPLAY OK",
        }
    }

    /// A column's title in a document's table: "Lease losses", "Reclaims".
    pub fn title(self) -> &'static str {
        match self {
            Series::LeaseLost => "Lease losses",
            Series::Reclaimed => "Reclaims",
            Series::Unknown => "Unknown",
            Series::DeadLettered => "Dead letters",
            Series::Replayed => "Replays",
            Series::DlqResolved => "Resolves",
            Series::Delivered => "Deliveries",
            Series::ReplayDelivered => "Replays delivered",
        }
    }

    /// In words, for a sentence: "lease loss", "reclaim".
    pub fn noun(self) -> &'static str {
        match self {
            Series::LeaseLost => "lease loss",
            Series::Reclaimed => "reclaim",
            Series::Unknown => "UNKNOWN outcome",
            Series::DeadLettered => "dead letter",
            Series::Replayed => "replay",
            Series::DlqResolved => "resolve",
            Series::Delivered => "delivery",
            Series::ReplayDelivered => "replay delivered",
        }
    }

    /// The SQL condition on a row of `uns_events` (kind already matched) that makes it
    /// one of this series, and that `at` is a time; a payload that is not JSON is none.
    fn condition(self, dialect: Dialect) -> String {
        let at = match dialect {
            // A damaged SQLite store may hold text where a time belongs.
            Dialect::Sqlite => "typeof(at) IN ('real', 'integer')",
            Dialect::Postgres => "at IS NOT NULL",
        };
        let series = match self {
            Series::Reclaimed => format!("{} = 1", dialect.json_number("payload", "$.reclaimed")),
            Series::Unknown => format!(
                "{} = 'UNKNOWN'",
                dialect.json_text("payload", "$.metadata.provider_outcome")
            ),
            Series::ReplayDelivered => format!(
                "{} = 'integer' AND {} > 1",
                dialect.json_type("payload", "$.cycle"),
                dialect.json_number("payload", "$.cycle")
            ),
            _ => return at.to_string(),
        };
        format!("{at} AND {series}")
    }
}

/// An absolute window cut into steps.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Window {
    pub since: f64,
    pub until: f64,
    /// Seconds a step.
    pub step: f64,
}

impl Window {
    /// A window that can be cut: since before until, a step of at least a second, and
    /// at most [`MAX_STEPS`] of them. Otherwise why not.
    pub fn new(since: f64, until: f64, step: f64) -> Result<Self, String> {
        if !(since.is_finite() && until.is_finite() && step.is_finite()) {
            return Err("the window and its step must be finite times".into());
        }
        if !(crate::clock::in_calendar(since) && crate::clock::in_calendar(until)) {
            return Err("the window must lie between the years 1 and 9999".into());
        }
        crate::clock::ordered(since, until)?;
        if step < 1.0 {
            return Err("a step is at least 1s".into());
        }
        let window = Self { since, until, step };
        let steps = window.steps();
        if steps > MAX_STEPS {
            let needed = (until - since) / MAX_STEPS as f64;
            let fits = [
                1.0, 5.0, 10.0, 15.0, 30.0, 60.0, 120.0, 300.0, 600.0, 900.0, 1800.0, 3600.0,
                7200.0, 21_600.0, 43_200.0, 86_400.0,
            ]
            .into_iter()
            .find(|step| *step >= needed)
            // Past a day a step, whole days: a step a person would type.
            .unwrap_or((needed / 86_400.0).ceil() * 86_400.0);
            return Err(format!(
                "{steps} steps: at most {MAX_STEPS} in one pulse; take a step of {} or more",
                crate::clock::seconds_flag(fits)
            ));
        }
        Ok(window)
    }

    pub fn steps(&self) -> usize {
        ((self.until - self.since) / self.step).ceil().max(1.0) as usize
    }

    /// When step `n` starts.
    pub fn start_of(&self, n: usize) -> f64 {
        self.since + n as f64 * self.step
    }
}

/// `pulse -o json` and `GET /api/v1/runtime/pulse`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Pulse {
    pub window: Span,
    /// Seconds a step.
    pub step: f64,
    /// Per series, one count per step, oldest first.
    pub series: BTreeMap<Series, Vec<u64>>,
    /// Per series, when the last one was at or before the window's end (unix seconds),
    /// however long before the window it was.
    pub last: BTreeMap<Series, Option<f64>>,
}

/// A window's ends, as the document carries them.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Span {
    pub since: f64,
    pub until: f64,
}

impl Pulse {
    pub fn window(&self) -> Window {
        Window {
            since: self.window.since,
            until: self.window.until,
            step: self.step,
        }
    }

    pub fn total(&self, series: Series) -> u64 {
        self.series
            .get(&series)
            .map_or(0, |counts| counts.iter().sum())
    }

    pub fn last(&self, series: Series) -> Option<f64> {
        self.last.get(&series).copied().flatten()
    }
}

/// Counts every series over `window`, and finds the last of each.
pub fn read(db: &Db<'_>, window: Window) -> DbResult<Pulse> {
    let steps = window.steps();
    let mut series: BTreeMap<Series, Vec<u64>> =
        Series::ALL.iter().map(|s| (*s, vec![0; steps])).collect();
    let mut last = BTreeMap::new();
    // The step a time falls in: past the window's start, truncation is the floor.
    let bucket = match db.dialect() {
        Dialect::Sqlite => "CAST((at - ?1) / ?3 AS INTEGER)",
        Dialect::Postgres => "CAST(floor((at - ?1) / ?3) AS BIGINT)",
    };
    for kind in Series::ALL {
        // One index range per series: the kind, then the window's span of `at`.
        let sql = format!(
            "SELECT {bucket}, COUNT(*) FROM uns_events
             WHERE kind = ?4 AND at >= ?1 AND at < ?2 AND {}
             GROUP BY 1",
            kind.condition(db.dialect())
        );
        let counts = series.entry(kind).or_default();
        db.each(
            &sql,
            args![window.since, window.until, window.step, kind.kind()],
            &mut |row| {
                let mut cells = Cells::new(row);
                let (bucket, count) = (cells.integer(0, "step"), cells.integer(1, "count"));
                if let Some(slot) = usize::try_from(bucket).ok().and_then(|b| counts.get_mut(b)) {
                    *slot += count.max(0) as u64;
                }
                Ok(())
            },
        )?;
        last.insert(kind, newest(db, kind, window.until)?);
    }
    Ok(Pulse {
        window: Span {
            since: window.since,
            until: window.until,
        },
        step: window.step,
        series,
        last,
    })
}

/// The newest event of `series` before `until`.
fn newest(db: &Db<'_>, series: Series, until: f64) -> DbResult<Option<f64>> {
    let sql = format!(
        "SELECT at FROM uns_events WHERE kind = ?1 AND at < ?2 AND {}
         ORDER BY at DESC LIMIT 1",
        series.condition(db.dialect())
    );
    Ok(db
        .row(&sql, args![series.kind(), until], |row| {
            Ok(Cells::new(row).real(0, "at"))
        })?
        .flatten()
        .filter(|at| at.is_finite()))
}

/// Whether the incident is still happening at `now`: a lease loss or a reclaim within
/// `quiet_after` seconds. Named by the last of each, never by a count over a longer span.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Stillness {
    pub still_happening: bool,
    pub last_lease_lost: Option<f64>,
    pub last_reclaim: Option<f64>,
    pub quiet_after: f64,
}

impl Stillness {
    pub fn of(
        last_lease_lost: Option<f64>,
        last_reclaim: Option<f64>,
        now: f64,
        quiet_after: f64,
    ) -> Self {
        let recent = |at: Option<f64>| at.is_some_and(|at| now - at <= quiet_after);
        Self {
            still_happening: recent(last_lease_lost) || recent(last_reclaim),
            last_lease_lost,
            last_reclaim,
            quiet_after,
        }
    }

    /// From a pulse read up to `now`.
    pub fn from_pulse(pulse: &Pulse, now: f64, quiet_after: f64) -> Self {
        Self::of(
            pulse.last(Series::LeaseLost),
            pulse.last(Series::Reclaimed),
            now,
            quiet_after,
        )
    }
}

/// The last lease loss and reclaim up to `until`, from the index alone: what "still
/// happening" is told by.
pub fn last_losses(db: &Db<'_>, until: f64) -> DbResult<(Option<f64>, Option<f64>)> {
    Ok((
        newest(db, Series::LeaseLost, until)?,
        newest(db, Series::Reclaimed, until)?,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_window_is_cut_into_at_most_a_day_of_minutes() {
        assert_eq!(Window::new(0.0, 3600.0, 60.0).map(|w| w.steps()), Ok(60));
        assert_eq!(
            Window::new(0.0, 86_400.0, 60.0).map(|w| w.steps()),
            Ok(1440)
        );
        let too_many = Window::new(0.0, 86_401.0, 60.0).expect_err("too many");
        assert!(too_many.contains("2m"), "{too_many}");
        assert!(Window::new(10.0, 10.0, 60.0).is_err());
        assert!(Window::new(0.0, 60.0, 0.5).is_err());
        assert_eq!(Window::new(0.0, 90.0, 60.0).map(|w| w.steps()), Ok(2));
        // A window of years asks for a step in whole days, never a count of seconds.
        let years = Window::new(0.0, 86_400_000_000.0, 60.0).expect_err("too many");
        assert!(years.ends_with("take a step of 695d or more"), "{years}");
        // Past a calendar's years: refused as such, not cut into a count of steps.
        let far = Window::new(100.0, 1e301, 60.0).expect_err("out of range");
        assert!(far.contains("between the years 1 and 9999"), "{far}");
    }

    #[test]
    fn still_happening_is_told_by_the_last_one_not_by_a_count() {
        let quiet = Stillness::of(Some(1000.0), Some(900.0), 1000.0 + 20.0 * 60.0, 300.0);
        assert!(!quiet.still_happening);
        let now = Stillness::of(Some(1000.0), None, 1060.0, 300.0);
        assert!(now.still_happening);
        let reclaim = Stillness::of(None, Some(1000.0), 1200.0, 300.0);
        assert!(reclaim.still_happening);
        assert!(!Stillness::of(None, None, 1.0, 300.0).still_happening);
    }
}
