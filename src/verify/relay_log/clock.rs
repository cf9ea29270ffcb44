//! Turning a log line's stamp into an instant, in every layout DESIGN §7 lists, with the
//! calendar and the time zones from jiff. A stamp that names no zone is read in the zone
//! the operator gave; one that falls in an hour a clock change repeats is marked
//! ambiguous (it is read, but proves no coverage), and one in an hour a clock change
//! skips is no stamp at all.

use jiff::Timestamp;
use jiff::civil::DateTime;
use jiff::tz::{AmbiguousOffset, Offset, TimeZone};
use std::cell::RefCell;

/// When a line was written: some instant in `[lo, hi)`, in unix seconds. A stamp says
/// the instant only to its last digit; an ambiguous one (a repeated hour) spans both
/// readings.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Stamp {
    pub lo: f64,
    pub hi: f64,
    /// The stamp names a local time that occurred twice (a clock change's repeated
    /// hour): `lo` is the first reading, `hi` the end of the second.
    pub ambiguous: bool,
}

impl Stamp {
    fn exact(lo: f64, precision: f64) -> Self {
        Self {
            lo,
            hi: lo + precision,
            ambiguous: false,
        }
    }
}

/// How to read stamps that carry no zone (syslog's, journald's `short` and
/// `short-precise`), and which zone `short-full`'s abbreviations must agree with.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Zone {
    /// This machine's zone (`TZ`, else `/etc/localtime`).
    #[default]
    Local,
    /// A fixed offset from UTC, in seconds.
    Fixed(i32),
    /// A zone of the tz database, by name (`Europe/Berlin`).
    Named(String),
}

impl Zone {
    /// Reads `local`, `UTC`, an offset such as `+02:00`, or a tz database name.
    pub fn parse(text: &str) -> Result<Self, String> {
        let text = text.trim();
        if text.eq_ignore_ascii_case("local") {
            return Ok(Zone::Local);
        }
        if text.eq_ignore_ascii_case("utc") || text == "Z" {
            return Ok(Zone::Fixed(0));
        }
        if let Some(rest) = text.strip_prefix(['+', '-']) {
            let sign = if text.starts_with('-') { -1 } else { 1 };
            let (hours, minutes) = rest.split_once(':').unwrap_or((rest, "0"));
            return match (hours.parse::<i32>(), minutes.parse::<i32>()) {
                (Ok(h), Ok(m)) if h <= 14 && (0..60).contains(&m) => {
                    Ok(Zone::Fixed(sign * (h * 3600 + m * 60)))
                }
                _ => Err(format!("{text:?}: expected an offset such as +02:00")),
            };
        }
        match TimeZone::get(text) {
            Ok(_) => Ok(Zone::Named(text.to_string())),
            Err(_) => Err(format!(
                "{text:?}: expected local, UTC, an offset such as +02:00 or a zone such as Europe/Berlin"
            )),
        }
    }

    /// The zone as `--relay-log-zone` takes it back.
    pub fn flag_value(&self) -> String {
        match self {
            Zone::Local => "local".into(),
            Zone::Fixed(0) => "UTC".into(),
            Zone::Fixed(seconds) => {
                let sign = if *seconds < 0 { '-' } else { '+' };
                let seconds = seconds.unsigned_abs();
                format!("{sign}{:02}:{:02}", seconds / 3600, seconds % 3600 / 60)
            }
            Zone::Named(name) => name.clone(),
        }
    }

    fn time_zone(&self) -> TimeZone {
        match self {
            Zone::Local => TimeZone::system(),
            Zone::Fixed(seconds) => Offset::from_seconds(*seconds)
                .map(TimeZone::fixed)
                .unwrap_or(TimeZone::UTC),
            // Checked when parsed; a zone gone since then reads as UTC, and the lines'
            // abbreviations (short-full) then fail to agree rather than pass.
            Zone::Named(name) => TimeZone::get(name).unwrap_or(TimeZone::UTC),
        }
    }
}

/// Reads stamps, remembering the last second read: most lines share one with the line
/// before.
pub struct Clock {
    zone: TimeZone,
    /// A yearless stamp takes the year that puts it nearest this instant.
    near: f64,
    near_year: i16,
    /// The last civil second converted, and what it became.
    last: RefCell<Option<(Civil, Option<Stamp>)>>,
    /// The last RFC 3339 second read: its text to the second, its zone's, and the unix
    /// second it is. Most lines share one with the line before.
    last_rfc3339: RefCell<Option<RfcSecond>>,
    /// The last syslog stamp read: its bytes and what they were read as. Most lines
    /// start with the very bytes of the line before.
    last_syslog: RefCell<Option<SyslogSecond>>,
}

/// One syslog stamp, as [`Clock::syslog`] remembers it.
#[derive(Clone, Copy)]
struct SyslogSecond {
    text: [u8; SYSLOG_KEPT],
    len: u8,
    stamp: Stamp,
}

/// Whether `line` starts with the first `len` bytes of `kept` (zeros past them): two
/// words compared, where a line holds 32 bytes, instead of a call per line.
fn starts_with_kept(line: &[u8], kept: &[u8; SYSLOG_KEPT], len: usize) -> bool {
    match line.get(..SYSLOG_KEPT) {
        Some(head) => {
            let word = |bytes: &[u8]| u128::from_le_bytes(bytes.try_into().unwrap_or([0; 16]));
            let mask = |from: usize| match len.saturating_sub(from) {
                0 => 0,
                n if n >= 16 => u128::MAX,
                n => (1u128 << (8 * n)) - 1,
            };
            (word(&head[..16]) ^ word(&kept[..16])) & mask(0) == 0
                && (word(&head[16..]) ^ word(&kept[16..])) & mask(16) == 0
        }
        None => line.get(..len) == Some(&kept[..len]),
    }
}

/// The longest syslog stamp remembered: `Nov 29 22:15:57.123456789` and room to spare.
const SYSLOG_KEPT: usize = 32;

/// One RFC 3339 second, as [`Clock::rfc3339`] remembers it.
#[derive(Clone, Copy)]
struct RfcSecond {
    head: [u8; 19],
    zone: [u8; 6],
    zone_len: u8,
    second: i64,
}

/// A local date and time to the second, as a stamp wrote it; `year` 0 when it gave none.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Civil {
    year: i16,
    month: i8,
    day: i8,
    seconds: i32,
}

const MONTHS: [&[u8]; 12] = [
    b"Jan", b"Feb", b"Mar", b"Apr", b"May", b"Jun", b"Jul", b"Aug", b"Sep", b"Oct", b"Nov", b"Dec",
];
const WEEKDAYS: [&[u8]; 7] = [b"Mon", b"Tue", b"Wed", b"Thu", b"Fri", b"Sat", b"Sun"];

impl Clock {
    pub fn new(zone: &Zone, near: f64) -> Self {
        let zone = zone.time_zone();
        let near = if near.is_finite() { near } else { 0.0 };
        let near_year = Timestamp::from_second(near as i64)
            .map(|at| at.to_zoned(zone.clone()).year())
            .unwrap_or(1970);
        Self {
            zone,
            near,
            near_year,
            last: RefCell::new(None),
            last_rfc3339: RefCell::new(None),
            last_syslog: RefCell::new(None),
        }
    }

    /// The stamp at the start of `line` and where it ends, in any layout read: RFC 3339
    /// (rsyslog, journald's `short-iso`, a container runtime's prefix), `short-full`,
    /// syslog's `Nov 29 22:15:57` (padded or not, with a fraction for
    /// `short-precise`) and `short-unix`.
    pub fn stamp(&self, line: &[u8]) -> Option<(Stamp, usize)> {
        // The last syslog stamp's bytes start with a month's name, neither a digit nor a
        // weekday: a line that starts with them is read by `syslog` below.
        if let Some(seen) = self.syslog_seen(line) {
            return Some(seen);
        }
        let first = *line.first()?;
        if first.is_ascii_digit() {
            let end = memchr::memchr(b' ', line).unwrap_or(line.len());
            let token = &line[..end];
            let stamp = if token.get(4) == Some(&b'-') {
                self.rfc3339(token)
            } else {
                unix(token)
            };
            return stamp.map(|s| (s, end));
        }
        if WEEKDAYS.iter().any(|day| line.starts_with(day)) && line.get(3) == Some(&b' ') {
            return self.short_full(line);
        }
        self.syslog(line)
    }

    /// The stamp `text` is, whole (tests).
    #[cfg(test)]
    pub fn stamp_of(&self, text: &[u8]) -> Option<Stamp> {
        self.stamp(text)
            .filter(|(_, end)| *end == text.len())
            .map(|(stamp, _)| stamp)
    }

    /// `Nov 29 22:15:57`, `Mar  7 02:09:33`, `Mar 7 02:09:33`, `Dec 01 19:08:50`, each
    /// perhaps with `.123456`. [`Clock::stamp`] asked [`Clock::syslog_seen`] first: this
    /// reads the stamp, and remembers it.
    fn syslog(&self, line: &[u8]) -> Option<(Stamp, usize)> {
        let (stamp, end) = self.syslog_read(line)?;
        if end <= SYSLOG_KEPT {
            let mut text = [0u8; SYSLOG_KEPT];
            text[..end].copy_from_slice(&line[..end]);
            *self.last_syslog.borrow_mut() = Some(SyslogSecond {
                text,
                len: end as u8,
                stamp,
            });
        }
        Some((stamp, end))
    }

    /// The last syslog stamp read, when `line` starts with its very bytes. The reading
    /// looks at no byte past a stamp but the one that ends it (a space, or the line's
    /// end): the same bytes so ended read the same.
    fn syslog_seen(&self, line: &[u8]) -> Option<(Stamp, usize)> {
        let last = (*self.last_syslog.borrow())?;
        let len = usize::from(last.len);
        (starts_with_kept(line, &last.text, len) && matches!(line.get(len), None | Some(b' ')))
            .then_some((last.stamp, len))
    }

    fn syslog_read(&self, line: &[u8]) -> Option<(Stamp, usize)> {
        let month = MONTHS.iter().position(|m| line.starts_with(m))? as i8 + 1;
        let mut at = 3;
        if line.get(at) != Some(&b' ') {
            return None;
        }
        at += 1;
        if line.get(at) == Some(&b' ') {
            at += 1;
        }
        let digits_end = at + line[at..].iter().take_while(|b| b.is_ascii_digit()).count();
        if !(1..=2).contains(&(digits_end - at)) || line.get(digits_end) != Some(&b' ') {
            return None;
        }
        let day = number(&line[at..digits_end])? as i8;
        at = digits_end + 1;
        let seconds = clock_seconds(line.get(at..at + 8)?)?;
        at += 8;
        let (fraction, precision, end) = fraction(line, at)?;
        let civil = Civil {
            year: 0,
            month,
            day,
            seconds,
        };
        let stamp = self.local(civil)?;
        Some((
            Stamp {
                lo: stamp.lo + fraction,
                hi: stamp.hi - 1.0 + fraction + precision,
                ambiguous: stamp.ambiguous,
            },
            end,
        ))
    }

    /// journald's `short-full`: `Sun 2026-11-29 22:15:57 UTC`. The abbreviation must be
    /// UTC's or agree with the zone given at that instant; it also tells which reading of
    /// a repeated hour is meant.
    fn short_full(&self, line: &[u8]) -> Option<(Stamp, usize)> {
        let date = line.get(4..14)?;
        if line.get(14) != Some(&b' ') || date[4] != b'-' || date[7] != b'-' {
            return None;
        }
        let seconds = clock_seconds(line.get(15..23)?)?;
        if line.get(23) != Some(&b' ') {
            return None;
        }
        let zone_end = 24
            + line[24..]
                .iter()
                .take_while(|b| !b.is_ascii_whitespace())
                .count();
        let abbreviation = std::str::from_utf8(&line[24..zone_end]).ok()?;
        let civil = Civil {
            year: number(&date[..4])? as i16,
            month: number(&date[5..7])? as i8,
            day: number(&date[8..10])? as i8,
            seconds,
        };
        let datetime = civil.datetime(civil.year)?;
        let lo = if matches!(abbreviation, "UTC" | "GMT" | "Z") {
            Offset::UTC.to_timestamp(datetime).ok()?
        } else {
            let candidates = match self.zone.to_ambiguous_timestamp(datetime).offset() {
                AmbiguousOffset::Unambiguous { offset } => vec![offset],
                AmbiguousOffset::Fold { before, after } => vec![before, after],
                AmbiguousOffset::Gap { .. } => return None,
            };
            candidates
                .into_iter()
                .filter_map(|offset| offset.to_timestamp(datetime).ok())
                .find(|at| self.zone.to_offset_info(*at).abbreviation() == abbreviation)?
        };
        Some((Stamp::exact(lo.as_second() as f64, 1.0), zone_end))
    }

    /// A civil time in the zone given; a yearless one in the year nearest `near`.
    fn local(&self, civil: Civil) -> Option<Stamp> {
        if let Some((seen, stamp)) = *self.last.borrow()
            && seen == civil
        {
            return stamp;
        }
        let stamp = if civil.year == 0 {
            // The year is chosen by the date alone, so a time the nearest year's clock
            // skipped is no stamp, not a stamp of another year.
            let as_utc = |dt: DateTime| Offset::UTC.to_timestamp(dt).ok();
            [self.near_year - 1, self.near_year, self.near_year + 1]
                .into_iter()
                .filter_map(|year| civil.datetime(year))
                .min_by_key(|dt| {
                    as_utc(*dt).map_or(i64::MAX, |at| (at.as_second() - self.near as i64).abs())
                })
                .and_then(|dt| self.in_zone(dt))
        } else {
            civil.datetime(civil.year).and_then(|dt| self.in_zone(dt))
        };
        *self.last.borrow_mut() = Some((civil, stamp));
        stamp
    }

    fn in_zone(&self, datetime: DateTime) -> Option<Stamp> {
        let second = |offset: Offset| {
            offset
                .to_timestamp(datetime)
                .ok()
                .map(|at| at.as_second() as f64)
        };
        match self.zone.to_ambiguous_timestamp(datetime).offset() {
            AmbiguousOffset::Unambiguous { offset } => Some(Stamp::exact(second(offset)?, 1.0)),
            AmbiguousOffset::Fold { before, after } => {
                let (first, second) = (second(before)?, second(after)?);
                Some(Stamp {
                    lo: first.min(second),
                    hi: first.max(second) + 1.0,
                    ambiguous: true,
                })
            }
            // A time the clock skipped: no line can truly carry it.
            AmbiguousOffset::Gap { .. } => None,
        }
    }
}

impl Civil {
    fn datetime(self, year: i16) -> Option<DateTime> {
        let (hour, rest) = (self.seconds / 3600, self.seconds % 3600);
        DateTime::new(
            year,
            self.month,
            self.day,
            hour as i8,
            (rest / 60) as i8,
            (rest % 60) as i8,
            0,
        )
        .ok()
    }
}

impl Clock {
    /// RFC 3339 with a zone: `2026-11-29T22:15:57[.ffffff](Z|+hh:mm|+hhmm)`. A stamp whose
    /// second and zone are the last one's, written alike, differs from it only in its
    /// fraction: that is read here, and the rest is jiff's reading of the last one.
    fn rfc3339(&self, token: &[u8]) -> Option<Stamp> {
        if !matches!(token.get(10), Some(b'T' | b't')) || token.len() < 20 {
            return None;
        }
        let (digits, zone) = match token[19] {
            b'.' => {
                let count = token[20..]
                    .iter()
                    .take_while(|b| b.is_ascii_digit())
                    .count();
                (&token[20..20 + count], &token[20 + count..])
            }
            _ => (&token[..0], &token[19..]),
        };
        let kept = (token[19] != b'.' || (1..=9).contains(&digits.len())) && zone.len() <= 6;
        if kept
            && let Some(last) = *self.last_rfc3339.borrow()
            && last.head == token[..19]
            && last.zone[..last.zone_len as usize] == *zone
        {
            let (fraction, precision) = match digits {
                [] => (0.0, 1.0),
                digits => {
                    let scale = 10f64.powi(digits.len() as i32);
                    (number(digits)? as f64 / scale, 1.0 / scale)
                }
            };
            return Some(Stamp::exact(last.second as f64 + fraction, precision));
        }
        let text = std::str::from_utf8(token).ok()?;
        let at: Timestamp = text.parse().ok()?;
        let precision = match token.get(19) {
            Some(b'.') => 10f64.powi(-(digits.len().min(9) as i32)),
            _ => 1.0,
        };
        if kept && at.as_second() >= 0 {
            let mut head = [0u8; 19];
            head.copy_from_slice(&token[..19]);
            let mut kept_zone = [0u8; 6];
            kept_zone[..zone.len()].copy_from_slice(zone);
            *self.last_rfc3339.borrow_mut() = Some(RfcSecond {
                head,
                zone: kept_zone,
                zone_len: zone.len() as u8,
                second: at.as_second(),
            });
        }
        let seconds = at.as_second() as f64 + f64::from(at.subsec_nanosecond()) / 1e9;
        Some(Stamp::exact(seconds, precision))
    }
}

/// journald's `short-unix`: `1795990557.123456`.
fn unix(token: &[u8]) -> Option<Stamp> {
    let (whole, fraction) = match memchr::memchr(b'.', token) {
        Some(dot) => (&token[..dot], &token[dot + 1..]),
        None => (token, &b""[..]),
    };
    if whole.len() < 9 || whole.len() > 12 || fraction.len() > 9 {
        return None;
    }
    let seconds = number(whole)? as f64;
    let (fraction, precision) = match fraction {
        [] => (0.0, 1.0),
        digits => {
            let scale = 10f64.powi(digits.len() as i32);
            (number(digits)? as f64 / scale, 1.0 / scale)
        }
    };
    Some(Stamp::exact(seconds + fraction, precision))
}

/// An optional `.ffffff` at `at`: its value, the precision it gives, and where the stamp
/// ends (which must be a space or the line's end).
fn fraction(line: &[u8], at: usize) -> Option<(f64, f64, usize)> {
    let (value, precision, end) = match line.get(at) {
        Some(b'.') => {
            let count = line[at + 1..]
                .iter()
                .take_while(|b| b.is_ascii_digit())
                .count();
            if count == 0 || count > 9 {
                return None;
            }
            let scale = 10f64.powi(count as i32);
            (
                number(&line[at + 1..at + 1 + count])? as f64 / scale,
                1.0 / scale,
                at + 1 + count,
            )
        }
        _ => (0.0, 1.0, at),
    };
    match line.get(end) {
        None | Some(b' ') => Some((value, precision, end)),
        _ => None,
    }
}

fn number(digits: &[u8]) -> Option<i64> {
    if digits.is_empty() || digits.len() > 18 || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    Some(
        digits
            .iter()
            .fold(0i64, |n, d| n * 10 + i64::from(d - b'0')),
    )
}

/// `HH:MM:SS` as seconds into the day.
fn clock_seconds(text: &[u8]) -> Option<i32> {
    if text.len() != 8 || text[2] != b':' || text[5] != b':' {
        return None;
    }
    let (hour, minute, second) = (
        number(&text[0..2])?,
        number(&text[3..5])?,
        number(&text[6..8])?,
    );
    // A leap second is read as the last second of its minute.
    (hour < 24 && minute < 60 && second < 61)
        .then_some((hour * 3600 + minute * 60 + second.min(59)) as i32)
}
