//! Times for people: RFC 3339 always, plus "3m ago" on a terminal.

pub use crate::clock::rfc3339;

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
