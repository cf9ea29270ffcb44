//! Times for people: RFC 3339 always, plus "3m ago" on a terminal.

pub use crate::clock::rfc3339;

/// How a document writes its times: whole (RFC 3339), or, in a document whose times all
/// fall on one UTC day that it names once, the time of day alone (`07:49:11.852`), so a
/// table of times fits a printed page.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Times {
    #[default]
    Whole,
    OfDay,
}

impl Times {
    /// The style for a document of the window `[since, until)`: the time of day when it
    /// lies within one UTC day.
    pub fn within(since: f64, until: f64) -> Self {
        let day = |at: f64| (at / 86_400.0).floor();
        if since.is_finite() && until > since && day(since) == day(until - 1e-3) {
            Times::OfDay
        } else {
            Times::Whole
        }
    }

    pub fn of(self, at: f64) -> String {
        let whole = rfc3339(at);
        match self {
            Times::Whole => whole,
            // The whole time's clock: to the millisecond in three digits, as it is written.
            Times::OfDay => match (whole.find('T'), whole.strip_suffix('Z')) {
                (Some(t), Some(time)) => time[t + 1..].to_string(),
                _ => whole,
            },
        }
    }
}

/// "42s ago", "3m ago", "5h ago", "2d ago" (or "in 10s" for the future).
pub fn relative(seconds: f64, now: f64) -> String {
    let delta = now - seconds;
    let magnitude = delta.abs();
    let text = if magnitude < 60.0 {
        format!("{}s", magnitude.round() as i64)
    } else if magnitude < 3600.0 {
        format!("{}m", (magnitude / 60.0).floor() as i64)
    } else if magnitude < 86_400.0 {
        format!("{}h", (magnitude / 3600.0).floor() as i64)
    } else {
        format!("{}d", (magnitude / 86_400.0).floor() as i64)
    };
    if delta >= 0.0 {
        format!("{text} ago")
    } else {
        format!("in {text}")
    }
}

/// A span for people: "850 ms", "1.6 s", "4m 12s", "2h 5m", "3d 4h".
pub fn duration(seconds: f64) -> String {
    let seconds = if seconds.is_finite() {
        seconds.max(0.0)
    } else {
        0.0
    };
    if seconds < 1.0 {
        return format!("{} ms", (seconds * 1e3).round() as i64);
    }
    if seconds < 60.0 {
        return format!("{seconds:.1} s");
    }
    let whole = seconds.round() as i64;
    let (big, small, units) = if whole < 3600 {
        (whole / 60, whole % 60, ("m", "s"))
    } else if whole < 86_400 {
        (whole / 3600, whole % 3600 / 60, ("h", "m"))
    } else {
        (whole / 86_400, whole % 86_400 / 3600, ("d", "h"))
    };
    if small == 0 {
        format!("{big}{}", units.0)
    } else {
        format!("{big}{} {small}{}", units.0, units.1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_day_of_times_is_written_by_the_time_of_day_to_the_millisecond() {
        let day = 1_796_342_400.0; // 2026-12-04T00:00:00Z
        assert_eq!(Times::within(day + 60.0, day + 3600.0), Times::OfDay);
        assert_eq!(Times::within(day + 60.0, day + 86_400.0), Times::OfDay);
        assert_eq!(Times::within(day - 60.0, day + 60.0), Times::Whole);
        assert_eq!(Times::OfDay.of(day + 7.0 * 3600.0 + 57.1), "07:00:57.100");
        assert_eq!(Times::OfDay.of(day + 3.0), "00:00:03.000");
        assert_eq!(Times::OfDay.of(day + 12.6859), "00:00:12.685");
        assert_eq!(Times::Whole.of(day + 3.0), rfc3339(day + 3.0));
    }

    #[test]
    fn spans_read_at_their_own_scale() {
        assert_eq!(duration(0.0123), "12 ms");
        assert_eq!(duration(1.62), "1.6 s");
        assert_eq!(duration(252.0), "4m 12s");
        assert_eq!(duration(7500.0), "2h 5m");
        assert_eq!(duration(900.0), "15m");
        assert_eq!(duration(3.0 * 86_400.0 + 4.0 * 3600.0), "3d 4h");
        assert_eq!(duration(f64::NAN), "0 ms");
    }

    #[test]
    fn formats_unix_seconds() {
        assert_eq!(relative(100.0, 142.0), "42s ago");
        assert_eq!(relative(100.0, 100.0 + 7200.0), "2h ago");
        assert_eq!(relative(200.0, 190.0), "in 10s");
    }
}
