//! Reading a Postfix relay's log for Message-IDs, in one pass over every file given.
//!
//! What counts is whether the relay *committed* a message, not whether its Message-ID
//! appears: the cleanup daemon logs `message-id=<...>` while the data is still arriving,
//! and that line stays behind when the connection drops before the final dot and
//! nothing is queued. So a sighting counts as committed only once its queue id reaches
//! the queue manager (`qmgr: ID: from=<...> (queue active)`) or a delivery agent logs a
//! `status=` for it. Which stretch of time each file covers is recorded too, since a
//! message can only be said to be missing from a log that covers its whole window.
//!
//! Files may be plain or gzip (detected by content, not name), rotated or not, and
//! stamped the syslog way (`Nov 29 22:15:57`, no year, local time) or RFC 3339.

use std::collections::{HashMap, HashSet};
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use time::{Date, Month, OffsetDateTime, PrimitiveDateTime, Time, UtcOffset};

/// When a line was written: some instant in `[lo, hi)` (a syslog stamp says only the
/// second), in unix seconds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Stamp {
    pub lo: f64,
    pub hi: f64,
}

/// How to read syslog stamps, which carry no zone.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Zone {
    /// This machine's local time (at each file's last change).
    #[default]
    Local,
    /// A fixed offset from UTC, in seconds.
    Fixed(i32),
}

/// The stretch of time one file's lines cover.
#[derive(Debug, Clone, PartialEq)]
pub struct Span {
    pub path: PathBuf,
    pub first: Stamp,
    pub last: Stamp,
}

/// One line saying a wanted Message-ID went through the relay's cleanup daemon.
#[derive(Debug, Clone, PartialEq)]
pub struct Sighting {
    pub queue_id: String,
    pub at: Stamp,
    pub line: String,
    pub path: PathBuf,
    /// The line proving the relay queued it, when one was found.
    pub committed: Option<String>,
}

/// What a search found.
#[derive(Debug, Default)]
pub struct Findings {
    /// By Message-ID (with its angle brackets), in log order.
    pub sightings: HashMap<String, Vec<Sighting>>,
    /// One per readable file, oldest first.
    pub spans: Vec<Span>,
    /// Files that could not be read, and why.
    pub problems: Vec<String>,
    pub lines: u64,
    pub bytes: u64,
}

impl Findings {
    /// Whether the logs cover `[from, to]`: one run of files, with gaps no longer than
    /// `gap`, has a line before `from` and a line after `to`.
    pub fn covers(&self, from: f64, to: f64, gap: f64) -> bool {
        self.runs(gap)
            .iter()
            .any(|(first, last)| first.hi <= from && last.lo >= to)
    }

    /// The files' spans joined where one starts within `gap` of the previous one's end.
    pub fn runs(&self, gap: f64) -> Vec<(Stamp, Stamp)> {
        let mut spans: Vec<&Span> = self.spans.iter().collect();
        spans.sort_by(|a, b| a.first.lo.total_cmp(&b.first.lo));
        let mut runs: Vec<(Stamp, Stamp)> = Vec::new();
        for span in spans {
            match runs.last_mut() {
                Some((_, last)) if span.first.lo <= last.hi + gap => {
                    if span.last.lo > last.lo {
                        *last = span.last;
                    }
                }
                _ => runs.push((span.first, span.last)),
            }
        }
        runs
    }
}

/// Reads every file once, oldest first, looking for the `wanted` Message-IDs.
pub fn search(paths: &[PathBuf], wanted: &HashSet<String>, zone: Zone) -> Findings {
    let mut files: Vec<(PathBuf, f64)> = Vec::new();
    let mut findings = Findings::default();
    for path in paths {
        match std::fs::metadata(path) {
            Ok(meta) if meta.is_file() => {
                let changed = meta
                    .modified()
                    .ok()
                    .and_then(|m| m.duration_since(std::time::UNIX_EPOCH).ok())
                    .map_or(0.0, |d| d.as_secs_f64());
                files.push((path.clone(), changed));
            }
            Ok(_) => findings
                .problems
                .push(format!("{}: not a file", path.display())),
            Err(err) => findings.problems.push(format!("{}: {err}", path.display())),
        }
    }
    // Rotated files keep the time of their last line: oldest first, so a message queued
    // just before a rotation is followed across it.
    files.sort_by(|a, b| a.1.total_cmp(&b.1));
    let mut scan = Scan {
        wanted,
        pending: HashMap::new(),
        findings,
    };
    for (path, changed) in files {
        if let Err(err) = scan.file(&path, changed, zone) {
            scan.findings
                .problems
                .push(format!("{}: {err}", path.display()));
        }
    }
    scan.findings
}

/// The state of one pass: sightings whose queue id has not yet been seen queued.
struct Scan<'w> {
    wanted: &'w HashSet<String>,
    /// Queue id to (Message-ID, index of its sighting).
    pending: HashMap<String, (String, usize)>,
    findings: Findings,
}

/// The most of one log line kept: Postfix's are a few hundred bytes; the rest of a longer
/// one (a damaged or hostile file, a line that never ends) is skipped, not held.
const MAX_LINE: usize = 64 << 10;

/// Reads one line into `line`, keeping at most `max` bytes of it; returns the bytes
/// consumed, 0 at the end.
fn read_line_at_most(
    reader: &mut impl BufRead,
    line: &mut Vec<u8>,
    max: usize,
) -> std::io::Result<usize> {
    let mut consumed = 0;
    loop {
        let available = match reader.fill_buf() {
            Ok(available) => available,
            Err(err) if err.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(err) => return Err(err),
        };
        if available.is_empty() {
            return Ok(consumed);
        }
        let (used, ended) = match memchr::memchr(b'\n', available) {
            Some(at) => (at + 1, true),
            None => (available.len(), false),
        };
        let room = max.saturating_sub(line.len());
        line.extend_from_slice(&available[..used.min(room)]);
        reader.consume(used);
        consumed += used;
        if ended {
            return Ok(consumed);
        }
    }
}

impl Scan<'_> {
    fn file(&mut self, path: &Path, changed: f64, zone: Zone) -> std::io::Result<()> {
        let mut raw = std::fs::File::open(path)?;
        let mut magic = [0u8; 2];
        let gzip = raw.read(&mut magic)? == 2 && magic == [0x1f, 0x8b];
        let raw = std::fs::File::open(path)?;
        let reader: Box<dyn Read> = if gzip {
            Box::new(flate2::read::MultiGzDecoder::new(raw))
        } else {
            Box::new(raw)
        };
        let mut reader = BufReader::with_capacity(1 << 18, reader);
        let clock = Stamps::new(changed, zone);
        let mut line = Vec::with_capacity(512);
        let mut last = Vec::with_capacity(512);
        let mut first: Option<Stamp> = None;
        loop {
            line.clear();
            let read = read_line_at_most(&mut reader, &mut line, MAX_LINE)?;
            if read == 0 {
                break;
            }
            self.findings.bytes += read as u64;
            self.findings.lines += 1;
            let Some((stamp_end, rest)) = split_stamp(&line) else {
                continue;
            };
            if first.is_none() {
                first = clock.parse(&line[..stamp_end]);
            }
            self.line(path, &clock, &line[..stamp_end], rest);
            std::mem::swap(&mut line, &mut last);
        }
        let last = split_stamp(&last).and_then(|(end, _)| clock.parse(&last[..end]));
        if let (Some(first), Some(last)) = (first, last) {
            self.findings.spans.push(Span {
                path: path.to_path_buf(),
                first,
                last,
            });
        }
        Ok(())
    }

    /// One line, its stamp split off: ` host program[pid]: QUEUEID: text`.
    fn line(&mut self, path: &Path, clock: &Stamps, stamp: &[u8], rest: &[u8]) {
        let Some(colon) = memchr::memmem::find(rest, b": ") else {
            return;
        };
        let program = &rest[..colon];
        let message = &rest[colon + 2..];
        let Some(qid_end) = memchr::memmem::find(message, b": ") else {
            return;
        };
        let Ok(queue_id) = std::str::from_utf8(&message[..qid_end]) else {
            return;
        };
        if !is_queue_id(queue_id) {
            return;
        }
        let text = &message[qid_end + 2..];
        if let Some(value) = text.strip_prefix(b"message-id=") {
            let value = std::str::from_utf8(value).unwrap_or("").trim_end();
            if !self.wanted.contains(value) {
                return;
            }
            let sightings = self
                .findings
                .sightings
                .entry(value.to_string())
                .or_default();
            sightings.push(Sighting {
                queue_id: queue_id.to_string(),
                at: clock.parse(stamp).unwrap_or(Stamp { lo: 0.0, hi: 0.0 }),
                line: whole(stamp, rest),
                path: path.to_path_buf(),
                committed: None,
            });
            self.pending.insert(
                queue_id.to_string(),
                (value.to_string(), sightings.len() - 1),
            );
            return;
        }
        let Some((message_id, index)) = self.pending.get(queue_id).cloned() else {
            return;
        };
        let daemon = daemon(program);
        let queued = (daemon == b"qmgr" && text.starts_with(b"from=<"))
            || memchr::memmem::find(text, b"status=").is_some();
        if queued {
            if let Some(sighting) = self
                .findings
                .sightings
                .get_mut(&message_id)
                .and_then(|s| s.get_mut(index))
                && sighting.committed.is_none()
            {
                sighting.committed = Some(whole(stamp, rest));
            }
        } else if text.starts_with(b"removed") || text.starts_with(b"client=") {
            // Done with, or the id taken by a new message: later lines are not this one's.
            self.pending.remove(queue_id);
        }
    }
}

/// The line as text again, trimmed, for evidence.
fn whole(stamp: &[u8], rest: &[u8]) -> String {
    let mut text = String::from_utf8_lossy(stamp).into_owned();
    text.push_str(&String::from_utf8_lossy(rest));
    text.trim_end().to_string()
}

/// `postfix/qmgr[123]` gives `qmgr`.
fn daemon(program: &[u8]) -> &[u8] {
    let token = program.rsplit(|b| *b == b' ').next().unwrap_or(program);
    let token = token.split(|b| *b == b'[').next().unwrap_or(token);
    token.rsplit(|b| *b == b'/').next().unwrap_or(token)
}

/// Postfix queue ids: short (upper-case hex) or long (letters and digits); never a word
/// such as `warning` or the `NOQUEUE` of a rejected session.
fn is_queue_id(text: &str) -> bool {
    (6..=20).contains(&text.len())
        && text.bytes().all(|b| b.is_ascii_alphanumeric())
        && text != "NOQUEUE"
        && !text.bytes().all(|b| b.is_ascii_lowercase())
}

/// Where the stamp ends, and the rest of the line. Syslog (`Nov 29 22:15:57`, or with a
/// space-padded day) or RFC 3339 up to the first space.
fn split_stamp(line: &[u8]) -> Option<(usize, &[u8])> {
    let first = *line.first()?;
    let end = if first.is_ascii_digit() {
        memchr::memchr(b' ', line)?
    } else if first.is_ascii_uppercase() && line.len() > 15 && line[3] == b' ' {
        15
    } else {
        return None;
    };
    Some((end, &line[end..]))
}

/// Turns stamps into instants for one file.
struct Stamps {
    /// When the file last changed (no line is later), and its year there.
    changed: f64,
    year: i32,
    offset: UtcOffset,
}

impl Stamps {
    fn new(changed: f64, zone: Zone) -> Self {
        let seconds = match zone {
            Zone::Fixed(seconds) => seconds,
            Zone::Local => local_offset(changed as i64),
        };
        let offset = UtcOffset::from_whole_seconds(seconds).unwrap_or(UtcOffset::UTC);
        let year = OffsetDateTime::from_unix_timestamp(changed as i64)
            .map(|t| t.to_offset(offset).year())
            .unwrap_or(1970);
        Self {
            changed,
            year,
            offset,
        }
    }

    fn parse(&self, stamp: &[u8]) -> Option<Stamp> {
        let text = std::str::from_utf8(stamp).ok()?;
        if text.as_bytes().first()?.is_ascii_digit() {
            let at =
                OffsetDateTime::parse(text, &time::format_description::well_known::Rfc3339).ok()?;
            let lo = at.unix_timestamp() as f64 + f64::from(at.nanosecond()) / 1e9;
            // The stamp says the instant to its last digit.
            let digits = text
                .split_once('.')
                .map_or(0, |(_, f)| f.bytes().take_while(u8::is_ascii_digit).count());
            return Some(Stamp {
                lo,
                hi: lo + 10f64.powi(-(digits as i32)),
            });
        }
        let month = match &text[..3] {
            "Jan" => Month::January,
            "Feb" => Month::February,
            "Mar" => Month::March,
            "Apr" => Month::April,
            "May" => Month::May,
            "Jun" => Month::June,
            "Jul" => Month::July,
            "Aug" => Month::August,
            "Sep" => Month::September,
            "Oct" => Month::October,
            "Nov" => Month::November,
            "Dec" => Month::December,
            _ => return None,
        };
        let day: u8 = text.get(4..6)?.trim().parse().ok()?;
        let clock = text.get(7..15)?;
        let hour: u8 = clock.get(0..2)?.parse().ok()?;
        let minute: u8 = clock.get(3..5)?.parse().ok()?;
        let second: u8 = clock.get(6..8)?.parse().ok()?;
        let time = Time::from_hms(hour, minute, second).ok()?;
        // No year: the latest one that does not put the line after the file's last change
        // (a day's grace for clocks), so a file spanning New Year reads right.
        for year in [self.year, self.year - 1] {
            let Ok(date) = Date::from_calendar_date(year, month, day) else {
                continue;
            };
            let lo = PrimitiveDateTime::new(date, time)
                .assume_offset(self.offset)
                .unix_timestamp() as f64;
            if lo <= self.changed + 86_400.0 {
                return Some(Stamp { lo, hi: lo + 1.0 });
            }
        }
        None
    }
}

/// This machine's offset from UTC at `at`, in seconds.
fn local_offset(at: i64) -> i32 {
    let time = at as libc::time_t;
    let mut tm: libc::tm = unsafe { std::mem::zeroed() };
    // SAFETY: both pointers are valid for the call; localtime_r is the thread-safe form.
    let converted = unsafe { libc::localtime_r(&time, &mut tm) };
    if converted.is_null() {
        0
    } else {
        tm.tm_gmtoff as i32
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    /// Lines as the real relay wrote them (tests/verify.rs runs one): a message queued and
    /// sent, then one whose connection was lost before the final dot.
    const REAL: &str = "\
Nov 29 22:15:54 relay postfix/master[23874]: daemon started -- version 3.7.11, configuration /tmp/relay1/conf
Nov 29 22:15:57 relay postfix/smtpd[23879]: connect from localhost[127.0.0.1]
Nov 29 22:15:57 relay postfix/smtpd[23879]: 7E4029C0029: client=localhost[127.0.0.1]
Nov 29 22:15:57 relay postfix/cleanup[23938]: 7E4029C0029: message-id=<n-1.1.1@uns.local>
Nov 29 22:15:57 relay postfix/qmgr[23876]: 7E4029C0029: from=<uns@uns.local>, size=280, nrcpt=1 (queue active)
Nov 29 22:15:57 relay postfix/smtpd[23879]: 7EB8E9C0053: client=localhost[127.0.0.1]
Nov 29 22:15:57 relay postfix/smtp[23939]: 7E4029C0029: to=<a@b.test>, relay=127.0.0.1[127.0.0.1]:2625, delay=0.02, delays=0.01/0.01/0/0, dsn=2.0.0, status=sent (250 2.0.0 Ok)
Nov 29 22:15:57 relay postfix/qmgr[23876]: 7E4029C0029: removed
Nov 29 22:15:58 relay postfix/smtpd[23879]: lost connection after DATA (58 bytes) from localhost[127.0.0.1]
Nov 29 22:15:58 relay postfix/cleanup[23938]: 7EB8E9C0053: message-id=<n-2.1.1@uns.local>
Nov 29 22:16:30 relay postfix/anvil[23877]: statistics: max connection rate 2/60s for (smtp:127.0.0.1) at Nov 29 22:15:57
";

    fn wanted(ids: &[&str]) -> HashSet<String> {
        ids.iter().map(|s| s.to_string()).collect()
    }

    fn write(dir: &Path, name: &str, text: &str, gzip: bool, changed: i64) -> PathBuf {
        let path = dir.join(name);
        let file = std::fs::File::create(&path).expect("file");
        if gzip {
            let mut encoder = flate2::write::GzEncoder::new(file, flate2::Compression::fast());
            encoder.write_all(text.as_bytes()).expect("write");
            encoder.finish().expect("finish");
        } else {
            let mut file = file;
            file.write_all(text.as_bytes()).expect("write");
        }
        let when = std::time::UNIX_EPOCH + std::time::Duration::from_secs(changed as u64);
        std::fs::File::options()
            .write(true)
            .open(&path)
            .and_then(|f| f.set_modified(when))
            .expect("mtime");
        path
    }

    /// 2026-11-29T22:20:00Z, a few minutes after the lines above.
    const CHANGED: i64 = 1_795_990_800;

    #[test]
    fn only_a_queued_message_counts_as_committed() {
        let dir = tempfile::tempdir().expect("dir");
        let log = write(dir.path(), "maillog", REAL, false, CHANGED);
        let found = search(
            &[log],
            &wanted(&[
                "<n-1.1.1@uns.local>",
                "<n-2.1.1@uns.local>",
                "<n-3.1.1@uns.local>",
            ]),
            Zone::Fixed(0),
        );
        let queued = &found.sightings["<n-1.1.1@uns.local>"][0];
        assert_eq!(queued.queue_id, "7E4029C0029");
        assert!(
            queued
                .committed
                .as_deref()
                .is_some_and(|l| l.contains("qmgr") && l.contains("queue active")),
            "{queued:?}"
        );
        let lost = &found.sightings["<n-2.1.1@uns.local>"][0];
        assert_eq!(lost.committed, None, "a lost connection queues nothing");
        assert!(!found.sightings.contains_key("<n-3.1.1@uns.local>"));
        // 22:15:57 on 29 November of the year the file last changed, in UTC.
        let expected = 1_795_990_557.0;
        assert_eq!(
            queued.at,
            Stamp {
                lo: expected,
                hi: expected + 1.0
            }
        );
        assert_eq!(found.spans.len(), 1);
        assert_eq!(found.spans[0].first.lo, 1_795_990_554.0);
        assert_eq!(found.spans[0].last.lo, 1_795_990_590.0);
        assert_eq!(found.lines, 11);
    }

    #[test]
    fn rotated_gzip_and_rfc3339_files_read_as_one_log() {
        let dir = tempfile::tempdir().expect("dir");
        // The message-id line in the older, compressed file; its queueing in the newer.
        let old = "\
Nov 29 21:00:00 relay postfix/master[1]: daemon started
Nov 29 22:00:00 relay postfix/cleanup[2]: ABCDEF123: message-id=<n-9.2.3@uns.local>
";
        let new = "\
2026-11-29T22:00:00.250000+00:00 relay postfix/qmgr[3]: ABCDEF123: from=<uns@uns.local>, size=1, nrcpt=1 (queue active)
2026-11-29T23:00:00.000000+00:00 relay postfix/anvil[4]: statistics: max cache size 1 at Nov 29 22:00:00
";
        let older = write(dir.path(), "maillog.1.gz", old, true, CHANGED - 1200);
        let newer = write(dir.path(), "maillog", new, false, CHANGED + 3000);
        // Given newest first: the files are still read oldest first.
        let found = search(
            &[newer, older],
            &wanted(&["<n-9.2.3@uns.local>"]),
            Zone::Fixed(0),
        );
        assert!(found.problems.is_empty(), "{:?}", found.problems);
        let sighting = &found.sightings["<n-9.2.3@uns.local>"][0];
        assert!(sighting.committed.is_some(), "{sighting:?}");
        assert!(sighting.path.ends_with("maillog.1.gz"));
        // Covered from 21:00 to 23:00, the files joined across the rotation.
        let at = |h: f64| 1_795_986_000.0 + (h - 21.0) * 3600.0;
        assert!(found.covers(at(21.5), at(22.5), 120.0));
        assert!(
            !found.covers(at(20.5), at(22.5), 120.0),
            "nothing before 21:00"
        );
        assert!(
            !found.covers(at(21.5), at(23.5), 120.0),
            "nothing after 23:00"
        );
        let stamp = found
            .spans
            .iter()
            .find(|s| s.path.ends_with("maillog"))
            .map(|s| s.first)
            .expect("span");
        // Six digits after the second: the line was written within that microsecond.
        assert_eq!(stamp.lo, at(22.0) + 0.25);
        assert!((stamp.hi - stamp.lo - 1e-6).abs() < 1e-7, "{stamp:?}");
    }

    #[test]
    fn a_syslog_stamp_without_a_year_is_read_in_the_files_year() {
        // The file changed on 2 January 2027: December lines belong to 2026.
        let january = 1_798_848_000; // 2027-01-02T00:00:00Z
        let clock = Stamps::new(january as f64, Zone::Fixed(0));
        let december = clock.parse(b"Dec 31 23:59:59").expect("stamp");
        assert_eq!(december.lo, 1_798_761_599.0);
        let new_year = clock.parse(b"Jan  1 00:00:01").expect("stamp");
        assert_eq!(new_year.lo, 1_798_761_601.0);
        // An offset moves the instant, not the date.
        let east = Stamps::new(january as f64, Zone::Fixed(3600));
        assert_eq!(
            east.parse(b"Jan  1 00:00:01").map(|s| s.lo),
            Some(1_798_758_001.0)
        );
        assert_eq!(clock.parse(b"Foo  1 00:00:01"), None);
        assert_eq!(clock.parse(b"Feb 30 00:00:01"), None);
    }

    #[test]
    fn words_and_noqueue_are_not_queue_ids() {
        for id in ["7E4029C0029", "4Kz5bC0sN8z1y2W", "ABCDEF"] {
            assert!(is_queue_id(id), "{id}");
        }
        for word in ["warning", "NOQUEUE", "error", "statistics", "AB", "x-y-z-w"] {
            assert!(!is_queue_id(word), "{word}");
        }
        assert_eq!(daemon(b" relay postfix/qmgr[23876]"), b"qmgr");
        assert_eq!(daemon(b" relay postfix-out/smtp[1]"), b"smtp");
    }

    #[test]
    fn a_reused_queue_id_does_not_commit_an_earlier_message() {
        let dir = tempfile::tempdir().expect("dir");
        let text = "\
Nov 29 22:00:00 relay postfix/cleanup[2]: AAAAAA1: message-id=<n-1.1.1@uns.local>
Nov 29 22:00:01 relay postfix/smtpd[3]: AAAAAA1: client=localhost[127.0.0.1]
Nov 29 22:00:02 relay postfix/qmgr[4]: AAAAAA1: from=<x@y>, size=1, nrcpt=1 (queue active)
";
        let log = write(dir.path(), "maillog", text, false, CHANGED);
        let found = search(&[log], &wanted(&["<n-1.1.1@uns.local>"]), Zone::Fixed(0));
        assert_eq!(found.sightings["<n-1.1.1@uns.local>"][0].committed, None);
    }

    #[test]
    fn a_line_that_never_ends_is_kept_only_up_to_the_bound() {
        let endless =
            std::io::Read::chain(&b"short line\n"[..], std::io::repeat(b'x').take(1 << 20));
        let mut reader = BufReader::with_capacity(4096, endless);
        let mut line = Vec::new();
        assert_eq!(
            read_line_at_most(&mut reader, &mut line, 100).expect("read"),
            11
        );
        assert_eq!(line, b"short line\n");
        line.clear();
        let read = read_line_at_most(&mut reader, &mut line, 100).expect("read");
        assert_eq!(read, 1 << 20, "the whole line is consumed");
        assert_eq!(line.len(), 100, "only the bound is kept");
        line.clear();
        assert_eq!(
            read_line_at_most(&mut reader, &mut line, 100).expect("read"),
            0
        );
    }

    #[test]
    fn unreadable_files_are_named_and_the_rest_still_read() {
        let dir = tempfile::tempdir().expect("dir");
        let log = write(dir.path(), "maillog", REAL, false, CHANGED);
        let broken = dir.path().join("broken.gz");
        std::fs::write(&broken, [0x1f, 0x8b, 0, 1, 2, 3]).expect("write");
        let missing = dir.path().join("missing");
        let found = search(
            &[missing, broken, log],
            &wanted(&["<n-1.1.1@uns.local>"]),
            Zone::Fixed(0),
        );
        assert_eq!(found.problems.len(), 2, "{:?}", found.problems);
        assert!(
            found.sightings["<n-1.1.1@uns.local>"][0]
                .committed
                .is_some()
        );
    }
}
