//! Time as the runtime sees it: unix seconds as `f64`, injectable so tests can move it.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

/// `2025-10-23T04:00:00.100Z` for unix seconds, to the millisecond and always with its
/// three digits, so a column of them aligns and their text sorts as their time does (a
/// spreadsheet sorting the CSV by time); a value no calendar holds (a damaged row) is
/// shown short, as `unix 1e300 (out of range)`.
pub fn rfc3339(seconds: f64) -> String {
    let nanos = (seconds * 1e9).round() as i128;
    // Cut to the millisecond (toward the past), as the stamp has always been shown.
    let millis = nanos.div_euclid(1_000_000) * 1_000_000;
    jiff::Timestamp::from_nanosecond(millis)
        .map(|t| format!("{t:.3}"))
        .unwrap_or_else(|_| format!("unix {seconds:e} (out of range)"))
}

/// Whether unix seconds `at` fall in a calendar's years (1 to 9999), as every instant a
/// person gives, and every window cut into steps, must.
pub fn in_calendar(at: f64) -> bool {
    let held =
        (jiff::Timestamp::MIN.as_second() as f64)..=(jiff::Timestamp::MAX.as_second() as f64);
    held.contains(&at)
}

/// The rule every window keeps, whoever asks for it (a selection, reconcile, pulse, a
/// report): it starts before it ends. One wording for all of them.
pub fn ordered(since: f64, until: f64) -> Result<(), String> {
    if since < until {
        Ok(())
    } else {
        Err("since must come before until".into())
    }
}

/// An instant as a person gives it: RFC 3339 (`2026-11-29T03:00:00Z`), unix seconds, or
/// a duration back from `now` (`90s`, `30m`, `2h`, `1d`, `1h30m`).
///
/// An instant no calendar holds (unix seconds past year 9999, a duration back past year
/// 1) is refused rather than read as a window no store could have.
pub fn parse_instant(text: &str, now: f64) -> Result<f64, String> {
    let text = text.trim();
    if let Ok(at) = text.parse::<jiff::Timestamp>() {
        return Ok(at.as_nanosecond() as f64 / 1e9);
    }
    if let Some(why) = not_an_instant(text) {
        return Err(format!("{text:?} {why}"));
    }
    let at = match text.parse::<f64>() {
        Ok(seconds) if seconds.is_finite() => seconds,
        _ => parse_duration(text).map(|ago| now - ago).ok_or_else(|| {
            format!("{text:?} is not a time: give RFC 3339 (2026-11-29T03:00:00Z) or a duration such as 2h, 30m, 1d")
        })?,
    };
    if !in_calendar(at) {
        return Err(format!(
            "{text:?} is out of range: give a time between the years 1 and 9999"
        ));
    }
    Ok(at)
}

/// Why `text`, a date and time RFC 3339 does not take as an instant, is none: no UTC
/// offset (a clock time with no zone could be any of 26 hours; the commonest slip at
/// 3 a.m.), or past the last instant a calendar holds. None for text that is no date.
fn not_an_instant(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    if bytes.len() < 10 || bytes[4] != b'-' || !bytes[..4].iter().all(u8::is_ascii_digit) {
        return None;
    }
    let (civil, zone) = match text.strip_suffix(['Z', 'z']) {
        Some(civil) => (civil, true),
        // An offset stands after the time of day: `+01:00` or `-05:00`.
        None => (text, text.get(10..).is_some_and(|t| t.contains(['+', '-']))),
    };
    let at = civil.parse::<jiff::civil::DateTime>().ok()?;
    Some(if zone {
        "is out of range: give a time between the years 1 and 9999".to_string()
    } else {
        let example = at.strftime("%Y-%m-%dT%H:%M:%S");
        format!(
            "has no UTC offset, so it could be any of a day's hours: write {example}Z for UTC, or its offset ({example}+01:00)"
        )
    })
}

/// `1h30m` as seconds: the one duration grammar every flag reads (s, m, h, d, w).
pub fn parse_duration(text: &str) -> Option<f64> {
    let mut total = 0.0;
    let mut number = String::new();
    let mut any = false;
    for c in text.chars() {
        if c.is_ascii_digit() || c == '.' {
            number.push(c);
            continue;
        }
        let unit = match c {
            's' => 1.0,
            'm' => 60.0,
            'h' => 3600.0,
            'd' => 86_400.0,
            'w' => 604_800.0,
            _ => return None,
        };
        total += number.parse::<f64>().ok()? * unit;
        number.clear();
        any = true;
    }
    (any && number.is_empty() && total.is_finite()).then_some(total)
}

/// A length of time as a duration flag takes it back: `120s` as `2m`, `90s` as `90s`,
/// `0.5s` as `0.5s`.
pub fn seconds_flag(seconds: f64) -> String {
    for (unit, size) in [("d", 86_400.0), ("h", 3600.0), ("m", 60.0)] {
        if seconds >= size && (seconds / size).fract() == 0.0 {
            return format!("{}{unit}", seconds / size);
        }
    }
    format!("{seconds}s")
}

/// A request deadline: a duration such as `30s` or `2m` (or plain seconds), between 1 s
/// and 1 h.
pub fn parse_deadline(text: &str) -> Result<std::time::Duration, String> {
    let seconds = parse_duration(text.trim())
        .or_else(|| text.trim().parse::<f64>().ok())
        .ok_or_else(|| format!("{text:?}: expected a duration such as 30s or 2m"))?;
    if !(1.0..=3600.0).contains(&seconds) {
        return Err(format!("{text:?}: between 1s and 1h"));
    }
    Ok(std::time::Duration::from_secs_f64(seconds))
}

/// A source of the current time in unix seconds.
pub trait Clock: Send + Sync {
    fn now(&self) -> f64;
}

/// The wall clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> f64 {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|elapsed| elapsed.as_secs_f64())
            .unwrap_or(0.0)
    }
}

/// The wall clock moved by a fixed offset: a process whose clock disagrees with the
/// others' (the tests of clock skew run a worker an hour ahead).
#[derive(Debug, Clone, Copy, Default)]
pub struct OffsetClock(pub f64);

impl Clock for OffsetClock {
    fn now(&self) -> f64 {
        SystemClock.now() + self.0
    }
}

/// A clock that only moves when told to; clones share the same time.
#[derive(Debug, Clone)]
pub struct ManualClock {
    bits: Arc<AtomicU64>,
}

impl ManualClock {
    pub fn new(start: f64) -> Self {
        Self {
            bits: Arc::new(AtomicU64::new(start.to_bits())),
        }
    }

    pub fn set(&self, now: f64) {
        self.bits.store(now.to_bits(), Ordering::SeqCst);
    }

    pub fn advance(&self, seconds: f64) {
        let mut current = self.bits.load(Ordering::SeqCst);
        loop {
            let next = (f64::from_bits(current) + seconds).to_bits();
            match self
                .bits
                .compare_exchange(current, next, Ordering::SeqCst, Ordering::SeqCst)
            {
                Ok(_) => return,
                Err(actual) => current = actual,
            }
        }
    }
}

impl Clock for ManualClock {
    fn now(&self) -> f64 {
        f64::from_bits(self.bits.load(Ordering::SeqCst))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_no_calendar_holds_are_shown_short() {
        assert_eq!(rfc3339(1_761_192_000.1), "2025-10-23T04:00:00.100Z");
        assert_eq!(rfc3339(1e300), "unix 1e300 (out of range)");
        assert_eq!(rfc3339(-9e18), "unix -9e18 (out of range)");
        assert!(rfc3339(f64::INFINITY).len() < 40);
    }

    #[test]
    fn instants_parse_as_people_write_them() {
        let now = 1_761_192_000.0;
        assert_eq!(parse_instant("2h", now), Ok(now - 7200.0));
        assert_eq!(parse_instant("1h30m", now), Ok(now - 5400.0));
        assert_eq!(parse_instant("90s", now), Ok(now - 90.0));
        assert_eq!(
            parse_instant("2025-10-23T04:00:00Z", now),
            Ok(1_761_192_000.0)
        );
        assert_eq!(parse_instant("1761192000.5", now), Ok(1_761_192_000.5));
        for bad in ["", "yesterday", "2x", "h", "2h3"] {
            assert!(parse_instant(bad, now).is_err(), "{bad:?}");
        }
        // A clock time without its offset is named as such, with how to write it.
        for (bare, shown) in [
            ("2026-11-29T03:00:00", "2026-11-29T03:00:00"),
            ("2026-11-29 03:00", "2026-11-29T03:00:00"),
            ("2026-11-29", "2026-11-29T00:00:00"),
        ] {
            let err = parse_instant(bare, now).expect_err(bare);
            assert!(err.contains("no UTC offset"), "{bare}: {err}");
            assert!(err.contains(&format!("write {shown}Z")), "{bare}: {err}");
        }
        assert_eq!(
            parse_instant("2026-11-29T03:00:00+01:00", now),
            parse_instant("2026-11-29T02:00:00Z", now)
        );
        // Past what a calendar holds, either way.
        for far in [
            "99999999999d",
            "1e300",
            "-1e300",
            "1e18",
            "9999-12-31T23:59:59Z",
            "9999-12-31T23:59:59+01:00",
        ] {
            let err = parse_instant(far, now).expect_err(far);
            assert!(err.contains("out of range"), "{far}: {err}");
        }
    }

    #[test]
    fn formats_unix_seconds_to_the_millisecond_in_three_digits() {
        assert_eq!(rfc3339(1761192000.1), "2025-10-23T04:00:00.100Z");
        assert_eq!(rfc3339(1761192000.0), "2025-10-23T04:00:00.000Z");
        assert_eq!(rfc3339(1761192000.0125), "2025-10-23T04:00:00.012Z");
        // One width, so their text sorts as their times do: a whole second's `00Z` once
        // sorted after `00.5Z`, and a column of them did not align.
        let times = [
            1761192000.0,
            1761192000.05,
            1761192000.5,
            1761192000.71,
            1761192001.0,
        ];
        let shown: Vec<String> = times.iter().map(|t| rfc3339(*t)).collect();
        let mut sorted = shown.clone();
        sorted.sort();
        assert_eq!(shown, sorted);
        assert!(shown.iter().all(|s| s.len() == shown[0].len()), "{shown:?}");
        // Each reads back as the millisecond it falls in.
        for (time, text) in times.iter().zip(&shown) {
            let read = parse_instant(text, 0.0).expect(text);
            assert!(read <= *time && *time - read < 0.001, "{time} {text}");
        }
    }

    #[test]
    fn manual_clock_clones_share_time() {
        let clock = ManualClock::new(100.0);
        let other = clock.clone();
        clock.advance(1.5);
        assert_eq!(other.now(), 101.5);
        other.set(7.0);
        assert_eq!(clock.now(), 7.0);
    }
}
