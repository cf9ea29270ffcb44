//! Reading a Postfix relay's log by the rules of evidence (DESIGN §7), in one pass over
//! every file given.
//!
//! Anyone who can send through the relay controls a Subject and can put any Message-ID in
//! a header, so a line counts only as what its program and its exact shape say it is:
//! cleanup's `QID: message-id=`, `QID: hold:`, `QID: reject:`, `QID: discard:` and the
//! milter's `QID: milter-reject:`, `milter-hold:` and `milter-discard:`; qmgr's `QID:
//! from=<...>, size=N, nrcpt=N (queue active)`; smtpd's `connect from`, `QID: client=`,
//! `QID: hold:`, `QID: milter-reject:`, `lost connection after DATA`, `timeout after DATA`
//! and `disconnect ... data=0/N commands=...`. A `status=` quoted in a header warning, or
//! any other line, says nothing.
//!
//! What is kept, for each wanted Message-ID, is every message that carried it: its host
//! and queue id, when cleanup saw it, the envelope sender where a line names it, and its
//! fate (queued, held, rejected, discarded, lost with its session, or nothing said).
//!
//! Absence is the weakest evidence there is, so what proves it is kept apart: which
//! stretches of time each host's own relay lines cover (split wherever none was written
//! for longer than the allowed gap, and never extended by a stamp that a repeated hour
//! makes ambiguous), every line in which the log admits it lost lines, every line that
//! mentions a wanted Message-ID without being the relay's record of it, and how many
//! lines could not be read as the relay's at all. A line unsctl cannot read proves
//! nothing, whatever its stamp.
//!
//! Files may be plain or gzip (detected by content, not name), rotated or not, and
//! written by syslog, rsyslog, journald, Postfix's `maillog_file` or a container runtime
//! ([`line`] and [`clock`] list the layouts). A yearless stamp's year is the one that
//! puts the line nearest the attempts asked about, never one taken from a file's mtime,
//! so a copied log answers as the original does.

pub mod clock;
pub mod layouts;
pub mod line;

pub use clock::{Stamp, Zone};
pub use line::SyslogNames;

use crate::render::sanitize::cleaned;
use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};

/// How to read the files.
#[derive(Debug, Clone, PartialEq)]
pub struct Options {
    pub zone: Zone,
    /// The instant the attempts asked about ran near: a syslog stamp takes the year that
    /// puts it nearest this.
    pub near: f64,
    /// The longest stretch without a line that still counts as covered.
    pub max_gap: f64,
    /// The relay's syslog names.
    pub names: SyslogNames,
}

/// The envelope sender of a message, as far as a line of the right shape names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Sender {
    /// No line names it (a session lost during DATA names none).
    Unknown,
    Known(String),
    /// Lines name different senders, or a line could be read more than one way.
    Ambiguous,
}

/// What became of a message, by the relay's own lines.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fate {
    /// The queue manager took it: committed.
    Queued,
    /// Cleanup, smtpd or a milter put it on hold: committed, and delivered once released.
    Held,
    /// Cleanup or a milter rejected it: nothing committed.
    Rejected,
    /// Cleanup or a milter discarded it: nothing committed.
    Discarded,
    /// Its session ended during DATA (lost connection, timeout, `data=0/N`).
    Lost,
    /// No line says.
    Open,
}

impl Fate {
    pub fn committed(self) -> bool {
        matches!(self, Fate::Queued | Fate::Held)
    }

    /// The relay's own word that nothing was committed.
    pub fn refused(self) -> bool {
        matches!(self, Fate::Rejected | Fate::Discarded | Fate::Lost)
    }
}

/// One message whose cleanup line carried a wanted Message-ID.
#[derive(Debug, Clone, PartialEq)]
pub struct Message {
    pub queue_id: String,
    /// The host whose relay logged it; None where the lines name no host.
    pub host: Option<String>,
    /// When cleanup logged the Message-ID.
    pub at: Stamp,
    /// From the first to the last of the lines about it: a message is inside a window
    /// when any of them is, so one line stamped elsewhere cannot move it out.
    pub span: (f64, f64),
    /// A line about it carries a stamp a repeated hour makes ambiguous.
    pub ambiguous: bool,
    pub path: PathBuf,
    /// The cleanup line, for evidence.
    pub line: String,
    pub sender: Sender,
    pub fate: Fate,
    /// The line that settled its fate.
    pub fate_line: Option<String>,
}

/// A message no message-id line names.
#[derive(Debug, Clone, PartialEq)]
pub struct Orphan {
    pub at: f64,
    /// Its queue id, or what else stands for it.
    pub what: String,
    /// Its envelope sender, where a line names it.
    pub sender: Option<String>,
}

/// One stretch of a host's lines without a gap longer than allowed.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Covered {
    /// From the latest its first line can have been written to the earliest its last
    /// can: what it proves was logged without a hole.
    pub inner: (f64, f64),
    /// From the earliest its first line can have been written to the latest its last
    /// can: what its lines span.
    pub outer: (f64, f64),
}

/// The stretch of time around a damaged line: from the earliest the readable line before
/// it can have been written to the latest the one after can (unbounded at a file's start
/// or end).
#[derive(Debug, Clone, PartialEq)]
pub struct Hole {
    pub from: f64,
    pub to: f64,
    /// Which line, of which file, and what was wrong with it.
    pub line: String,
}

impl Hole {
    pub fn overlaps(&self, from: f64, to: f64) -> bool {
        self.from < to && self.to > from
    }
}

/// A line in which the log says it lost lines.
#[derive(Debug, Clone, PartialEq)]
pub struct Loss {
    pub at: f64,
    pub line: String,
}

/// How far from a loss report the lines it lost may lie: rsyslog's imjournal counts its
/// rate-limited lines over 600 s by default, journald over 30 s, imuxsock over 5 s, and
/// the report comes at the end of that stretch (or, "begins to drop", at its start).
pub const LOSS_REACH: f64 = 600.0;

/// What a search found.
#[derive(Debug, Default)]
pub struct Findings {
    /// By Message-ID (with its angle brackets), in log order.
    pub messages: HashMap<String, Vec<Message>>,
    /// By host (empty where the lines name none): the stretches its relay lines cover
    /// without a gap longer than the allowed one, merged across files, oldest first.
    pub covered: BTreeMap<String, Vec<Covered>>,
    /// Lines in which the log says it lost lines.
    pub losses: Vec<Loss>,
    /// Lines that mention a wanted Message-ID without being the relay's record of a
    /// message carrying it, by Message-ID (a few of each).
    pub mentions: HashMap<String, Vec<String>>,
    /// Per file, the lines that could not be read as the relay's own.
    pub unread: Vec<String>,
    /// Stretches of time no absence can be proven in: each lies between the readable
    /// lines around a damaged one (a NUL byte, invalid UTF-8, a line cut short), which may
    /// have been any line at all.
    pub holes: Vec<Hole>,
    /// By Message-ID, damaged lines whose bytes name it: it cannot be told what they say
    /// of it, so they forbid an absence answer.
    pub damaged_mentions: HashMap<String, Vec<String>>,
    /// Files that could not be read to their end, and why.
    pub problems: Vec<String>,
    /// Messages the relay took or may have committed that no message-id line names: a
    /// log with lines missing. Any of them could be an attempt's, unless a line names
    /// another sender.
    pub orphans: Vec<Orphan>,
    /// More orphans than are kept: every window counts as having one.
    pub orphans_overflow: bool,
    pub lines: u64,
    pub bytes: u64,
}

/// Whether a host named in a log is the relay that greeted an attempt: the same name,
/// or the one's short name for the other (syslog writes `relay`, the greeting
/// `relay.example.com`).
pub fn same_host(logged: &str, greeted: &str) -> bool {
    let short = |name: &str| name.split('.').next().unwrap_or(name).to_string();
    logged.eq_ignore_ascii_case(greeted)
        || (!logged.contains('.') && logged.eq_ignore_ascii_case(&short(greeted)))
        || (!greeted.contains('.') && greeted.eq_ignore_ascii_case(&short(logged)))
}

impl Findings {
    /// Every message seen with `message_id`.
    pub fn seen(&self, message_id: &str) -> &[Message] {
        self.messages
            .get(message_id)
            .map(Vec::as_slice)
            .unwrap_or_default()
    }

    /// The lines that mention `message_id` without being the relay's record of it.
    pub fn mentioned(&self, message_id: &str) -> &[String] {
        self.mentions
            .get(message_id)
            .map(Vec::as_slice)
            .unwrap_or_default()
    }

    /// A loss report near enough `[from, to]` that the lines it lost may lie inside;
    /// one that no stamp places is near every window.
    pub fn loss_near(&self, from: f64, to: f64) -> Option<&Loss> {
        self.losses.iter().find(|loss| {
            loss.at.is_nan() || (loss.at >= from - LOSS_REACH && loss.at <= to + LOSS_REACH)
        })
    }

    /// Whether `host`'s lines alone cover all of `[from, to]`: a log proven to have
    /// been written through it, with no damaged line inside.
    pub fn host_covers(&self, host: &str, from: f64, to: f64) -> bool {
        self.hole_within(from, to).is_none()
            && self.covered.get(host).is_some_and(|runs| {
                runs.iter()
                    .any(|run| run.inner.0 <= from && run.inner.1 >= to)
            })
    }

    /// Whether `host`'s lines run from `from` to `to` without a gap longer than allowed
    /// or a damaged line: no line of a session between them can have been lost unseen.
    pub fn host_continuous(&self, host: &str, from: f64, to: f64) -> bool {
        self.hole_within(from, to).is_none()
            && self.covered.get(host).is_some_and(|runs| {
                runs.iter()
                    .any(|run| run.outer.0 <= from && run.outer.1 >= to)
            })
    }

    /// A damaged line that may lie inside `[from, to]`.
    pub fn hole_within(&self, from: f64, to: f64) -> Option<&Hole> {
        self.holes.iter().find(|hole| hole.overlaps(from, to))
    }

    /// The damaged lines whose bytes name `message_id`.
    pub fn damaged_naming(&self, message_id: &str) -> &[String] {
        self.damaged_mentions
            .get(message_id)
            .map(Vec::as_slice)
            .unwrap_or_default()
    }

    /// Which host's lines are the relay's for an attempt in `[from, to]`: the one the
    /// attempt's greeting named (`relay`), or one the operator says is the relay's under
    /// another name (`also`, `--relay-host`), or else the only host whose relay lines fall
    /// in the window. Otherwise why no host's can be.
    pub fn relay_host(
        &self,
        from: f64,
        to: f64,
        relay: Option<&str>,
        also: &[String],
    ) -> Result<&str, String> {
        let named_by_operator =
            |host: &str| also.iter().any(|name| name.eq_ignore_ascii_case(host));
        let hosts: Vec<&str> = self.covered.keys().map(String::as_str).collect();
        let named = |hosts: &[&str]| -> String {
            hosts
                .iter()
                .map(|h| {
                    if h.is_empty() {
                        "(lines that name no host)".to_string()
                    } else {
                        cleaned(h)
                    }
                })
                .collect::<Vec<_>>()
                .join(", ")
        };
        if let Some(relay) = relay {
            let matching: Vec<&str> = hosts
                .iter()
                .copied()
                .filter(|h| !h.is_empty() && (same_host(h, relay) || named_by_operator(h)))
                .collect();
            return match matching.as_slice() {
                [host] => Ok(host),
                [] if hosts.is_empty() => Err("no line of the log is the relay's own".into()),
                [] => Err(format!(
                    "the attempt was answered by relay {}, and the log's relay lines are from {}: another relay's log proves no absence; if {} is that relay's own name in its log (a container's id, a short name), say so with --relay-host",
                    cleaned(relay),
                    named(&hosts),
                    named(&hosts)
                )),
                _ => Err(format!(
                    "more than one host of the log could be relay {} ({})",
                    cleaned(relay),
                    named(&matching)
                )),
            };
        }
        let inside: Vec<&str> = self
            .covered
            .iter()
            .filter(|(host, _)| also.is_empty() || named_by_operator(host))
            .filter(|(_, runs)| {
                runs.iter()
                    .any(|run| run.outer.1 >= from && run.outer.0 <= to)
            })
            .map(|(host, _)| host.as_str())
            .collect();
        match inside.as_slice() {
            [host] => Ok(host),
            [] => Err("no line of the log inside the attempt's window is the relay's own".into()),
            _ => Err(format!(
                "the log holds relay lines from {} in the attempt's window, and nothing recorded which relay answered it: no one log proves absence",
                named(&inside)
            )),
        }
    }

    /// A message inside `[from, to]` that no message-id line names and that could be
    /// from one of `senders` (any, when none is known), if there is one.
    pub fn orphan_within(&self, from: f64, to: f64, senders: &[String]) -> Option<&str> {
        if self.orphans_overflow {
            return Some("(too many to keep)");
        }
        self.orphans
            .iter()
            .find(|orphan| {
                orphan.at >= from
                    && orphan.at <= to
                    && match &orphan.sender {
                        Some(seen) if !senders.is_empty() => senders.contains(seen),
                        _ => true,
                    }
            })
            .map(|orphan| orphan.what.as_str())
    }
}

/// Reads every file once, in the order of their first lines, looking for the `wanted`
/// Message-IDs.
pub fn search(paths: &[PathBuf], wanted: &HashSet<String>, options: Options) -> Findings {
    let mut scan = Scan::new(wanted, options);
    let mut files: Vec<(f64, &PathBuf)> = Vec::new();
    for path in paths {
        match std::fs::metadata(path) {
            Ok(meta) if meta.is_file() => match first_stamp(path, &scan.clock) {
                Ok(first) => files.push((first.unwrap_or(f64::NEG_INFINITY), path)),
                Err(err) => scan.problem(path, &err.to_string()),
            },
            Ok(_) => scan.problem(path, "not a file"),
            Err(err) => scan.problem(path, &err.to_string()),
        }
    }
    // Oldest first, so a message whose lines straddle a rotation is followed across it.
    files.sort_by(|a, b| a.0.total_cmp(&b.0));
    for (_, path) in files {
        if let Err(err) = scan.file(path) {
            scan.problem(path, &err.to_string());
        }
    }
    scan.finish()
}

/// The most of one log line kept: Postfix's are a few hundred bytes; the rest of a longer
/// one (a damaged or hostile file, a line that never ends) is skipped, not held.
const MAX_LINE: usize = 64 << 10;

/// How far back in time a line may step before the run of lines is taken as broken:
/// Postfix's daemons write to one log, a little out of order at most.
const BACKWARDS: f64 = 1.0;

/// A queue id whose message-id line has not come yet is forgotten after this long.
const PENDING_FOR: f64 = 3600.0;

/// A queue id whose message-id line named another Message-ID is remembered this long, so
/// the queue manager's first line about it, which comes within seconds, is not taken for
/// a message without one. A deferred message's later retries are, and only a window
/// with such a retry from the runtime's own sender is kept from an absence answer.
const IDENTIFIED_FOR: f64 = 600.0;

/// The most orphans kept; past it, no absence is taken as proof.
const MAX_ORPHANS: usize = 100_000;

/// The most lines kept per Message-ID that mention it without being its record.
const MAX_MENTIONS: usize = 3;

/// The most of a line quoted in evidence.
const QUOTED: usize = 300;

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

/// A file opened for reading, decompressed when it is gzip.
fn open(path: &Path) -> std::io::Result<BufReader<Box<dyn Read>>> {
    let mut raw = std::fs::File::open(path)?;
    let mut magic = [0u8; 2];
    let gzip = raw.read(&mut magic)? == 2 && magic == [0x1f, 0x8b];
    let raw = std::fs::File::open(path)?;
    let reader: Box<dyn Read> = if gzip {
        Box::new(flate2::read::MultiGzDecoder::new(raw))
    } else {
        Box::new(raw)
    };
    Ok(BufReader::with_capacity(1 << 18, reader))
}

/// The stamp of a file's first stamped line among its first few thousand.
fn first_stamp(path: &Path, clock: &clock::Clock) -> std::io::Result<Option<f64>> {
    let mut reader = open(path)?;
    let mut line = Vec::new();
    for _ in 0..4096 {
        line.clear();
        if read_line_at_most(&mut reader, &mut line, MAX_LINE)? == 0 {
            break;
        }
        if let Some(stamped) = line::stamped(&line, clock) {
            return Ok(Some(stamped.stamp.lo));
        }
    }
    Ok(None)
}

/// What is known of a queue id while its lines come in.
#[derive(Debug)]
struct Track {
    /// When its first line was written.
    since: f64,
    /// From its first line to its last.
    span: (f64, f64),
    ambiguous: bool,
    /// Index into `Scan::found` once its message-id line named a wanted Message-ID.
    message: Option<usize>,
    sender: Sender,
    fate: Fate,
    fate_line: Option<String>,
}

impl Track {
    fn new(stamp: Stamp) -> Self {
        Self {
            since: stamp.lo,
            span: (stamp.lo, stamp.hi),
            ambiguous: stamp.ambiguous,
            message: None,
            sender: Sender::Unknown,
            fate: Fate::Open,
            fate_line: None,
        }
    }
}

/// One smtpd session under way: when it connected, and the queue ids it carried.
#[derive(Debug, Default)]
struct Session {
    since: f64,
    /// Its `connect from` line was read: only then is a line about its end known to be
    /// about the messages it carried, not a later session's whose start was lost.
    connected: bool,
    queue_ids: Vec<String>,
}

/// The run of one host's lines in the file being read: its first and last stamps.
type Run = (Stamp, Stamp);

/// What one file held, for its line in [`Findings::unread`].
#[derive(Default)]
struct FileCount {
    lines: u64,
    relay: u64,
    unread: u64,
    first_unread: Option<String>,
    damaged: u64,
}

/// What is known of the file being read.
#[derive(Default)]
struct FileState {
    runs: HashMap<Vec<u8>, Run>,
    count: FileCount,
    /// The last stamp read: a loss report on a line without one is placed there.
    last_stamp: Option<f64>,
    loss_unplaced: Option<String>,
    /// A damaged line read, and no readable stamped line since: from when, and which.
    hole: Option<(f64, String)>,
}

/// Why a line cannot be read at all, whatever it says: it is not text, or not whole.
fn damage(line: &[u8], consumed: usize) -> Option<&'static str> {
    if consumed > line.len() {
        return Some("longer than any line a relay writes, so cut short");
    }
    // Without its line end, the read stopped at the end of the file.
    if !line.ends_with(b"\n") {
        return Some("the file's last line, cut without its end");
    }
    if memchr::memchr(0, line).is_some() {
        return Some("a NUL byte");
    }
    if std::str::from_utf8(line).is_err() {
        return Some("bytes that are not UTF-8");
    }
    None
}

/// The state of one pass.
struct Scan<'w> {
    wanted: &'w HashSet<String>,
    clock: clock::Clock,
    names: SyslogNames,
    mentions_finder: line::Mentions,
    max_gap: f64,
    /// Queue ids being followed, by `host queue_id`.
    tracks: HashMap<String, Track>,
    /// Queue ids with no message-id line yet, by when they appeared, to forget them.
    pending: VecDeque<(f64, String)>,
    /// Queue ids whose message-id line named another Message-ID, for a while.
    identified: HashSet<String>,
    identified_order: VecDeque<(f64, String)>,
    orphans: Vec<Orphan>,
    orphans_overflow: bool,
    /// smtpd sessions (host and process) under way.
    sessions: HashMap<String, Session>,
    /// Messages with a wanted Message-ID, in log order.
    found: Vec<(String, Message)>,
    /// Stretches without a long gap, by host, as each file's lines gave them.
    runs: Vec<(String, Covered)>,
    losses: Vec<Loss>,
    mentions: HashMap<String, Vec<String>>,
    unread: Vec<String>,
    holes: Vec<Hole>,
    damaged_mentions: HashMap<String, Vec<String>>,
    problems: Vec<String>,
    lines: u64,
    bytes: u64,
}

impl<'w> Scan<'w> {
    fn new(wanted: &'w HashSet<String>, options: Options) -> Self {
        Self {
            wanted,
            clock: clock::Clock::new(&options.zone, options.near),
            names: options.names,
            mentions_finder: line::Mentions::new(),
            max_gap: options.max_gap,
            tracks: HashMap::new(),
            pending: VecDeque::new(),
            identified: HashSet::new(),
            identified_order: VecDeque::new(),
            orphans: Vec::new(),
            orphans_overflow: false,
            sessions: HashMap::new(),
            found: Vec::new(),
            runs: Vec::new(),
            losses: Vec::new(),
            mentions: HashMap::new(),
            unread: Vec::new(),
            holes: Vec::new(),
            damaged_mentions: HashMap::new(),
            problems: Vec::new(),
            lines: 0,
            bytes: 0,
        }
    }

    fn problem(&mut self, path: &Path, why: &str) {
        self.problems.push(format!("{}: {why}", path.display()));
    }

    fn file(&mut self, path: &Path) -> std::io::Result<()> {
        let mut reader = open(path)?;
        let mut line = Vec::with_capacity(512);
        let mut file = FileState::default();
        let result = loop {
            line.clear();
            let read = match read_line_at_most(&mut reader, &mut line, MAX_LINE) {
                Ok(0) => break Ok(()),
                Ok(read) => read,
                Err(err) => break Err(err),
            };
            self.bytes += read as u64;
            self.lines += 1;
            file.count.lines += 1;
            self.read_line(path, &mut file, &line, read);
        };
        self.close_runs(&mut file.runs);
        if let Some((from, what)) = file.hole {
            self.holes.push(Hole {
                from,
                to: f64::INFINITY,
                line: what,
            });
        }
        if let Some(text) = file.loss_unplaced {
            // A report with no stamp anywhere in its file: it may be about any time.
            self.losses.push(Loss {
                at: f64::NAN,
                line: text,
            });
        }
        result?;
        self.count_file(path, &file.count);
        Ok(())
    }

    /// One line of `path`, `read` bytes of it consumed.
    fn read_line(&mut self, path: &Path, file: &mut FileState, line: &[u8], read: usize) {
        if let Some(why) = damage(line, read) {
            file.count.damaged += 1;
            let what = format!("line {} of {} ({why})", file.count.lines, path.display());
            self.damaged_mention(line, &what);
            file.hole
                .get_or_insert((file.last_stamp.unwrap_or(f64::NEG_INFINITY), what));
            // No run of lines reaches across it.
            self.close_runs(&mut file.runs);
            return;
        }
        let stamped = line::stamped(line, &self.clock);
        if let Some(stamped) = &stamped
            && let Some((from, what)) = file.hole.take()
        {
            self.holes.push(Hole {
                from,
                to: stamped.stamp.hi,
                line: what,
            });
        }
        self.losses_in(file, line, stamped.as_ref().map(|s| s.stamp.lo));
        let relay = stamped
            .as_ref()
            .and_then(|s| Some((s.stamp, s.relay_line(&self.names)?)));
        let Some((stamp, relay)) = relay else {
            file.count.unread += 1;
            if file.count.first_unread.is_none() {
                file.count.first_unread = Some(quoted(line));
            }
            self.mention(line);
            return;
        };
        file.count.relay += 1;
        if !stamp.ambiguous {
            self.extend_run(&mut file.runs, relay.host_key(), stamp);
        }
        if !self.line(path, stamp, line, &relay) {
            self.mention(line);
        }
    }

    /// A loss report in `line`, placed at its stamp, else at the nearest stamp read.
    fn losses_in(&mut self, file: &mut FileState, line: &[u8], stamp: Option<f64>) {
        let at = stamp.or(file.last_stamp);
        if line::reports_loss(line) {
            match at {
                Some(at) => self.losses.push(Loss {
                    at,
                    line: quoted(line),
                }),
                None => file.loss_unplaced = Some(quoted(line)),
            }
        }
        if let Some(stamp) = stamp {
            file.last_stamp = Some(stamp);
            if let Some(text) = file.loss_unplaced.take() {
                self.losses.push(Loss {
                    at: stamp,
                    line: text,
                });
            }
        }
    }

    /// Ends every host's run of lines in the file being read.
    fn close_runs(&mut self, runs: &mut HashMap<Vec<u8>, Run>) {
        for (host, run) in runs.drain() {
            self.runs
                .push((String::from_utf8_lossy(&host).into_owned(), covered(run)));
        }
    }

    /// Keeps a damaged line whose bytes name a wanted Message-ID.
    fn damaged_mention(&mut self, line: &[u8], what: &str) {
        let ids: Vec<String> = self
            .mentions_finder
            .in_line(line)
            .filter_map(|id| std::str::from_utf8(id).ok())
            .filter(|id| self.wanted.contains(*id))
            .map(str::to_string)
            .collect();
        for id in ids {
            let kept = self.damaged_mentions.entry(id).or_default();
            if kept.len() < MAX_MENTIONS {
                kept.push(format!("{what}: {:?}", quoted(line)));
            }
        }
    }

    fn count_file(&mut self, path: &Path, count: &FileCount) {
        if count.lines > 0 && count.relay == 0 {
            self.problem(
                path,
                "no line in it is the relay's own (a Postfix program under the relay's syslog name, in a layout unsctl reads): not a relay log unsctl can read",
            );
        }
        if count.unread > 0 {
            self.unread.push(format!(
                "{}: {} of {} lines not read as the relay's (the first: {:?})",
                path.display(),
                count.unread,
                count.lines,
                count.first_unread.as_deref().unwrap_or_default()
            ));
        }
        if count.damaged > 0 {
            self.unread.push(format!(
                "{}: {} of {} lines damaged and not read at all",
                path.display(),
                count.damaged,
                count.lines
            ));
        }
    }

    /// Extends `host`'s run of lines in this file to `stamp`, closing it at a gap longer
    /// than allowed or a step back in time.
    fn extend_run(&mut self, runs: &mut HashMap<Vec<u8>, Run>, host: &[u8], stamp: Stamp) {
        let Some((first, last)) = runs.get(host).copied() else {
            runs.insert(host.to_vec(), (stamp, stamp));
            return;
        };
        let run = if stamp.hi - last.lo > self.max_gap || stamp.lo < last.lo - BACKWARDS {
            self.runs.push((
                String::from_utf8_lossy(host).into_owned(),
                covered((first, last)),
            ));
            (stamp, stamp)
        } else {
            (first, if stamp.lo > last.lo { stamp } else { last })
        };
        runs.insert(host.to_vec(), run);
    }

    /// Keeps a line that mentions a wanted Message-ID without being its record.
    fn mention(&mut self, line: &[u8]) {
        let ids: Vec<String> = self
            .mentions_finder
            .in_line(line)
            .filter_map(|id| std::str::from_utf8(id).ok())
            .filter(|id| self.wanted.contains(*id))
            .map(str::to_string)
            .collect();
        for id in ids {
            let kept = self.mentions.entry(id).or_default();
            if kept.len() < MAX_MENTIONS {
                kept.push(quoted(line));
            }
        }
    }

    /// Reads one of the relay's lines; true when it was the record of a message carrying
    /// a wanted Message-ID.
    fn line(&mut self, path: &Path, stamp: Stamp, whole: &[u8], line: &line::RelayLine) -> bool {
        let whole = || quoted(whole);
        match line.daemon {
            b"smtpd" => {
                self.smtpd(stamp, line, whole);
                false
            }
            b"cleanup" => self.cleanup(path, stamp, line, whole),
            b"qmgr" => {
                self.qmgr(stamp, line, whole);
                false
            }
            _ => false,
        }
    }

    fn smtpd(&mut self, stamp: Stamp, line: &line::RelayLine, whole: impl Fn() -> String) {
        let mut process = String::from_utf8_lossy(line.host_key()).into_owned();
        process.push(' ');
        process.push_str(&String::from_utf8_lossy(line.tag));
        let text = line.text;
        if text.starts_with(b"connect from ") {
            let session = Session {
                since: stamp.lo,
                connected: true,
                queue_ids: Vec::new(),
            };
            // A session that never ended may have carried anything.
            if let Some(open) = self.sessions.insert(process.clone(), session) {
                self.orphan(
                    open.since,
                    &format!("(a session of {process} with no end)"),
                    None,
                );
            }
            return;
        }
        if let Some((queue_id, after)) = queue_id(text) {
            let key = track_key(line, queue_id);
            if after.starts_with(b"client=") {
                self.client(process, key, stamp);
            } else if after.starts_with(b"hold: ") || after.starts_with(b"milter-hold: ") {
                self.settle(&key, Fate::Held, Some(check_sender(after)), whole(), stamp);
            } else if after.starts_with(b"milter-reject: ") {
                self.settle(
                    &key,
                    Fate::Rejected,
                    Some(check_sender(after)),
                    whole(),
                    stamp,
                );
            }
            return;
        }
        let during_data = [
            &b"lost connection after DATA"[..],
            b"timeout after DATA",
            b"lost connection after BDAT",
            b"timeout after BDAT",
        ]
        .iter()
        .any(|prefix| text.starts_with(prefix));
        if during_data {
            // The message in transfer when the session ended is its last one, if the
            // session's own start was read.
            let last = self
                .sessions
                .get(&process)
                .filter(|s| s.connected)
                .and_then(|s| s.queue_ids.last())
                .cloned();
            if let Some(key) = last {
                self.settle(&key, Fate::Lost, None, whole(), stamp);
            }
            return;
        }
        if text.starts_with(b"disconnect from ") {
            self.disconnect(&process, text, stamp, whole);
        }
    }

    fn client(&mut self, process: String, key: String, stamp: Stamp) {
        let session = self.sessions.entry(process).or_insert_with(|| Session {
            since: stamp.lo,
            connected: false,
            queue_ids: Vec::new(),
        });
        session.queue_ids.push(key.clone());
        // The session's lines are the message's too: one of them stamped elsewhere
        // cannot move the message out of the session's time.
        let mut track = Track::new(stamp);
        track.span = (stamp.lo.min(session.since), stamp.hi.max(session.since));
        // A queue id seen again is a new message: the old one's lines are done.
        if let Some(old) = self.tracks.insert(key.clone(), track) {
            self.orphan_if_unnamed(&key, &old);
        }
        self.identified.remove(&key);
        self.pending.push_back((stamp.lo, key));
        self.forget_pending(stamp.lo);
    }

    fn disconnect(&mut self, process: &str, text: &[u8], stamp: Stamp, whole: impl Fn() -> String) {
        let session = self.sessions.remove(process).unwrap_or_default();
        for key in &session.queue_ids {
            self.touch(key, stamp);
        }
        // Postfix before 3.0 writes no counts: such a line says nothing about DATA.
        let Some(taken) = messages_taken(text) else {
            return;
        };
        if taken == 0 && session.connected {
            for key in &session.queue_ids {
                self.settle(key, Fate::Lost, None, whole(), stamp);
            }
        } else if taken > session.queue_ids.len() {
            // It took a message whose queue id no line names.
            self.orphan(
                stamp.lo,
                &format!("(a message of {process} with no queue id)"),
                None,
            );
        }
    }

    /// Returns true when the line was the message-id record of a wanted Message-ID.
    fn cleanup(
        &mut self,
        path: &Path,
        stamp: Stamp,
        line: &line::RelayLine,
        whole: impl Fn() -> String,
    ) -> bool {
        let Some((queue_id, after)) = queue_id(line.text) else {
            return false;
        };
        let key = track_key(line, queue_id);
        if let Some(value) = after.strip_prefix(b"message-id=") {
            let value = String::from_utf8_lossy(value);
            let value = value.trim_end();
            if self.tracks.get(&key).is_some_and(|t| t.message.is_some()) {
                return false;
            }
            if !self.wanted.contains(value) {
                self.tracks.remove(&key);
                self.identified.insert(key.clone());
                self.identified_order.push_back((stamp.lo, key));
                return false;
            }
            let index = self.found.len();
            let track = self.tracks.entry(key).or_insert_with(|| Track::new(stamp));
            track.message = Some(index);
            let message = Message {
                queue_id: queue_id.to_string(),
                host: line.host.map(|h| String::from_utf8_lossy(h).into_owned()),
                at: stamp,
                span: (track.span.0.min(stamp.lo), track.span.1.max(stamp.hi)),
                ambiguous: track.ambiguous || stamp.ambiguous,
                path: path.to_path_buf(),
                line: whole(),
                sender: track.sender.clone(),
                fate: track.fate,
                fate_line: track.fate_line.clone(),
            };
            self.found.push((value.to_string(), message));
            return true;
        }
        let fate = if after.starts_with(b"hold: ") || after.starts_with(b"milter-hold: ") {
            Fate::Held
        } else if after.starts_with(b"reject: ") || after.starts_with(b"milter-reject: ") {
            Fate::Rejected
        } else if after.starts_with(b"discard: ") || after.starts_with(b"milter-discard: ") {
            Fate::Discarded
        } else {
            return false;
        };
        let sender = check_sender(after);
        self.settle(&key, fate, Some(sender), whole(), stamp);
        false
    }

    fn qmgr(&mut self, stamp: Stamp, line: &line::RelayLine, whole: impl Fn() -> String) {
        let Some((queue_id, after)) = queue_id(line.text) else {
            return;
        };
        let key = track_key(line, queue_id);
        if after == b"removed" {
            if let Some(old) = self.tracks.remove(&key) {
                self.orphan_if_unnamed(&key, &old);
            }
            return;
        }
        if let Some(sender) = queue_active_sender(after) {
            if !self.tracks.contains_key(&key) && !self.identified.contains(&key) {
                // Queued, and no line ever said what it carried.
                self.orphan(stamp.lo, queue_id, Some(sender));
                return;
            }
            self.settle(
                &key,
                Fate::Queued,
                Some(Sender::Known(sender)),
                whole(),
                stamp,
            );
        }
    }

    /// A message that may have been committed though no message-id line names it.
    fn orphan_if_unnamed(&mut self, key: &str, track: &Track) {
        if track.message.is_none() && !track.fate.refused() {
            let sender = match &track.sender {
                Sender::Known(sender) => Some(sender.clone()),
                _ => None,
            };
            let queue_id = key.rsplit(' ').next().unwrap_or(key);
            self.orphan(track.since, queue_id, sender);
        }
    }

    fn orphan(&mut self, at: f64, what: &str, sender: Option<String>) {
        if self.orphans.len() < MAX_ORPHANS {
            self.orphans.push(Orphan {
                at,
                what: what.to_string(),
                sender,
            });
        } else {
            self.orphans_overflow = true;
        }
    }

    /// Widens what `key`'s lines span to `stamp`.
    fn touch(&mut self, key: &str, stamp: Stamp) {
        let Some(track) = self.tracks.get_mut(key) else {
            return;
        };
        let (span, ambiguous) = match track.message {
            Some(index) => {
                let message = &mut self.found[index].1;
                (&mut message.span, &mut message.ambiguous)
            }
            None => (&mut track.span, &mut track.ambiguous),
        };
        *span = (span.0.min(stamp.lo), span.1.max(stamp.hi));
        *ambiguous |= stamp.ambiguous;
    }

    /// Records what a line says became of `key`: a commitment always stands; a refusal
    /// only where nothing was said before.
    fn settle(
        &mut self,
        key: &str,
        fate: Fate,
        sender: Option<Sender>,
        line: String,
        stamp: Stamp,
    ) {
        self.touch(key, stamp);
        let Some(track) = self.tracks.get_mut(key) else {
            return;
        };
        let (current, current_sender, current_line) = match track.message {
            Some(index) => {
                let message = &mut self.found[index].1;
                (
                    &mut message.fate,
                    &mut message.sender,
                    &mut message.fate_line,
                )
            }
            None => (&mut track.fate, &mut track.sender, &mut track.fate_line),
        };
        if let Some(sender) = sender {
            *current_sender = merge(current_sender, sender);
        }
        let takes = match (*current, fate) {
            (now, _) if now.committed() => false,
            (_, new) if new.committed() => true,
            (Fate::Open, _) => true,
            _ => false,
        };
        if takes {
            *current = fate;
            *current_line = Some(line);
        }
    }

    /// Drops queue ids that never got a message-id line within [`PENDING_FOR`], and
    /// forgets the identified ones as old.
    fn forget_pending(&mut self, now: f64) {
        while let Some((born, _)) = self.pending.front() {
            if now - born < PENDING_FOR {
                break;
            }
            if let Some((_, key)) = self.pending.pop_front()
                && let Some(track) = self.tracks.get(&key)
                && track.message.is_none()
                && let Some(old) = self.tracks.remove(&key)
            {
                self.orphan_if_unnamed(&key, &old);
            }
        }
        while let Some((born, _)) = self.identified_order.front() {
            if now - born < IDENTIFIED_FOR {
                break;
            }
            if let Some((_, key)) = self.identified_order.pop_front() {
                self.identified.remove(&key);
            }
        }
    }

    fn finish(mut self) -> Findings {
        let unnamed: Vec<(String, Track)> = self
            .tracks
            .drain()
            .filter(|(_, track)| track.message.is_none())
            .collect();
        for (key, track) in unnamed {
            self.orphan_if_unnamed(&key, &track);
        }
        let open: Vec<(String, Session)> = self.sessions.drain().collect();
        for (process, session) in open {
            self.orphan(
                session.since,
                &format!("(a session of {process} with no end)"),
                None,
            );
        }
        let mut messages: HashMap<String, Vec<Message>> = HashMap::new();
        for (message_id, message) in self.found {
            messages.entry(message_id).or_default().push(message);
        }
        let mut by_host: BTreeMap<String, Vec<Covered>> = BTreeMap::new();
        for (host, run) in self.runs {
            by_host.entry(host).or_default().push(run);
        }
        let max_gap = self.max_gap;
        Findings {
            messages,
            covered: by_host
                .into_iter()
                .map(|(host, runs)| (host, merge_runs(runs, max_gap)))
                .collect(),
            losses: self.losses,
            mentions: self.mentions,
            unread: self.unread,
            holes: self.holes,
            damaged_mentions: self.damaged_mentions,
            problems: self.problems,
            orphans: self.orphans,
            orphans_overflow: self.orphans_overflow,
            lines: self.lines,
            bytes: self.bytes,
        }
    }
}

/// A queue id's key: the host's relay assigns it, so two hosts' may meet.
fn track_key(line: &line::RelayLine, queue_id: &str) -> String {
    let mut key = String::from_utf8_lossy(line.host_key()).into_owned();
    key.push(' ');
    key.push_str(queue_id);
    key
}

/// A line as evidence: escaped later where shown, cut to a readable length here.
fn quoted(line: &[u8]) -> String {
    let text = String::from_utf8_lossy(line);
    let text = text.trim_end();
    match text.char_indices().nth(QUOTED) {
        Some((end, _)) => format!("{}…", &text[..end]),
        None => text.to_string(),
    }
}

fn merge(current: &Sender, new: Sender) -> Sender {
    match (current, new) {
        (Sender::Unknown, new) => new,
        (Sender::Known(a), Sender::Known(b)) if *a == b => Sender::Known(b),
        (_, Sender::Unknown) => current.clone(),
        _ => Sender::Ambiguous,
    }
}

fn covered((first, last): Run) -> Covered {
    Covered {
        inner: (first.hi, last.lo),
        outer: (first.lo, last.hi),
    }
}

/// Runs from every file, merged where they overlap or meet within `gap`.
fn merge_runs(mut runs: Vec<Covered>, gap: f64) -> Vec<Covered> {
    runs.sort_by(|a, b| a.outer.0.total_cmp(&b.outer.0));
    let mut merged: Vec<Covered> = Vec::new();
    for run in runs {
        match merged.last_mut() {
            Some(last) if run.inner.0 <= last.inner.1 + gap => {
                last.inner.1 = last.inner.1.max(run.inner.1);
                last.outer.1 = last.outer.1.max(run.outer.1);
            }
            _ => merged.push(run),
        }
    }
    merged
}

/// `QID: rest`, where QID has the shape of a Postfix queue id.
fn queue_id(text: &[u8]) -> Option<(&str, &[u8])> {
    let end = memchr::memmem::find(text, b": ")?;
    let id = std::str::from_utf8(&text[..end]).ok()?;
    is_queue_id(id).then(|| (id, &text[end + 2..]))
}

/// Postfix queue ids: short (upper-case hex) or long (letters and digits); never a word
/// such as `warning` or the `NOQUEUE` of a rejected session.
fn is_queue_id(text: &str) -> bool {
    (6..=20).contains(&text.len())
        && text.bytes().all(|b| b.is_ascii_alphanumeric())
        && text != "NOQUEUE"
        && !text.bytes().all(|b| b.is_ascii_lowercase())
}

/// How many messages smtpd's `disconnect from ... data=K[/N] ... commands=...` says the
/// session took: 0 when it never sent DATA (or BDAT) or none succeeded. None when the
/// line carries no counts at all (Postfix before 3.0). A count that cannot be read is
/// taken as many, so it never stands for "nothing taken".
fn messages_taken(text: &[u8]) -> Option<usize> {
    let tokens = || text.split(|b| *b == b' ');
    if !tokens().any(|token| token.starts_with(b"commands=")) {
        return None;
    }
    Some(
        tokens()
            .filter_map(|token| {
                [&b"data="[..], b"bdat="]
                    .iter()
                    .find_map(|name| token.strip_prefix(*name))
            })
            .map(|count| {
                let succeeded = count.split(|b| *b == b'/').next().unwrap_or(count);
                std::str::from_utf8(succeeded)
                    .ok()
                    .and_then(|n| n.parse::<usize>().ok())
                    .unwrap_or(usize::MAX)
            })
            .fold(0, usize::saturating_add),
    )
}

/// qmgr's `from=<S>, size=N, nrcpt=N (queue active)`, read from its end so a sender
/// that quotes the shape cannot move it; the sender, or None for any other line.
fn queue_active_sender(text: &[u8]) -> Option<String> {
    let rest = text.strip_suffix(b" (queue active)")?;
    let rest = strip_number_field(rest, b", nrcpt=")?;
    let rest = strip_number_field(rest, b", size=")?;
    let sender = rest.strip_prefix(b"from=<")?.strip_suffix(b">")?;
    String::from_utf8(sender.to_vec()).ok()
}

/// `rest` without a trailing `<name>DIGITS`.
fn strip_number_field<'a>(text: &'a [u8], name: &[u8]) -> Option<&'a [u8]> {
    let at = memchr::memmem::rfind(text, name)?;
    let digits = &text[at + name.len()..];
    (!digits.is_empty() && digits.iter().all(u8::is_ascii_digit)).then(|| &text[..at])
}

/// The sender of a `hold:`, `reject:`, `discard:` or milter line: `...; from=<S> to=<R>
/// proto=...`. The text before it quotes a header or a reply the submitter wrote, so a
/// line where the shape occurs more than once cannot be read and names no sender.
fn check_sender(text: &[u8]) -> Sender {
    let mut found = memchr::memmem::find_iter(text, b"; from=<");
    let (Some(at), None) = (found.next(), found.next()) else {
        return Sender::Ambiguous;
    };
    let tail = &text[at + b"; from=<".len()..];
    let mut ends = memchr::memmem::find_iter(tail, b"> to=<");
    let (Some(end), None) = (ends.next(), ends.next()) else {
        return Sender::Ambiguous;
    };
    match std::str::from_utf8(&tail[..end]) {
        Ok(sender) => Sender::Known(sender.to_string()),
        Err(_) => Sender::Ambiguous,
    }
}

#[cfg(test)]
mod tests;
