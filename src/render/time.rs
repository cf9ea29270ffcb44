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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_unix_seconds() {
        assert_eq!(relative(100.0, 142.0), "42s ago");
        assert_eq!(relative(100.0, 100.0 + 7200.0), "2h ago");
        assert_eq!(relative(200.0, 190.0), "in 10s");
    }
}
