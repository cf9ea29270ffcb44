//! Reading a Postfix relay's log by the rules of evidence (DESIGN §7), in one pass over
//! every file given.
//!
//! Anyone who can send through the relay controls a Subject and can put any Message-ID in
//! a header, so a line counts only as what its program and its exact shape say it is:
//! cleanup's `QID: message-id=`, `QID: hold:`, `QID: reject:` and `QID: discard:`; qmgr's
//! `QID: from=<...>, size=N, nrcpt=N (queue active)`; smtpd's `connect from`, `QID:
//! client=`, `lost connection after DATA`, `timeout after DATA` and `disconnect ...
//! data=0/N`. A `status=` quoted in a header warning, or any other line, says nothing.
//!
//! What is kept, for each wanted Message-ID, is every message that carried it: its queue
//! id, when cleanup saw it, the envelope sender where a line names it, and its fate
//! (queued, held, rejected, discarded, lost with its session, or nothing said). Which
//! stretches of time the files cover is kept too, split wherever no line was written for
//! longer than the allowed gap, so a hole, a missing rotation or a stray early line can
//! never pass for coverage.
//!
//! Files may be plain or gzip (detected by content, not name), rotated or not, and
//! stamped the syslog way (`Nov 29 22:15:57`, no year) or RFC 3339. A syslog stamp's year
//! is the one that puts the line nearest the attempts asked about, never one taken from a
//! file's mtime, so a copied log answers as the original does.

use std::collections::{HashMap, HashSet, VecDeque};
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};

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
    /// This machine's local time.
    #[default]
    Local,
    /// A fixed offset from UTC, in seconds.
    Fixed(i32),
}

/// How to read the files.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Options {
    pub zone: Zone,
    /// The instant the attempts asked about ran near: a syslog stamp takes the year that
    /// puts it nearest this.
    pub near: f64,
    /// The longest stretch without a line that still counts as covered.
    pub max_gap: f64,
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
    /// Cleanup put it on hold: committed, and delivered once released.
    Held,
    /// Cleanup rejected it: nothing committed.
    Rejected,
    /// Cleanup discarded it: nothing committed.
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
    /// When cleanup logged the Message-ID.
    pub at: Stamp,
    /// From the first to the last of the lines about it: a message is inside a window
    /// when any of them is, so one line stamped elsewhere cannot move it out.
    pub span: (f64, f64),
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

/// What a search found.
#[derive(Debug, Default)]
pub struct Findings {
    /// By Message-ID (with its angle brackets), in log order.
    pub messages: HashMap<String, Vec<Message>>,
    /// The stretches the files cover without a gap longer than the allowed one, merged
    /// across files, oldest first.
    pub covered: Vec<(f64, f64)>,
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

impl Findings {
    /// Whether one stretch covers all of `[from, to]`.
    pub fn covers(&self, from: f64, to: f64) -> bool {
        self.covered
            .iter()
            .any(|(start, end)| *start <= from && *end >= to)
    }

    /// A message inside `[from, to]` that no message-id line names and that could be
    /// from `sender` (any, when the sender is not known), if there is one.
    pub fn orphan_within(&self, from: f64, to: f64, sender: Option<&str>) -> Option<&str> {
        if self.orphans_overflow {
            return Some("(too many to keep)");
        }
        self.orphans
            .iter()
            .find(|orphan| {
                orphan.at >= from
                    && orphan.at <= to
                    && match (&orphan.sender, sender) {
                        (Some(seen), Some(ours)) => seen == ours,
                        _ => true,
                    }
            })
            .map(|orphan| orphan.what.as_str())
    }

    /// Every message seen with `message_id`.
    pub fn seen(&self, message_id: &str) -> &[Message] {
        self.messages
            .get(message_id)
            .map(Vec::as_slice)
            .unwrap_or_default()
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
fn first_stamp(path: &Path, clock: &Clock) -> std::io::Result<Option<f64>> {
    let mut reader = open(path)?;
    let mut line = Vec::new();
    for _ in 0..4096 {
        line.clear();
        if read_line_at_most(&mut reader, &mut line, MAX_LINE)? == 0 {
            break;
        }
        if let Some((end, _)) = split_stamp(&line)
            && let Some(stamp) = clock.parse(&line[..end])
        {
            return Ok(Some(stamp.lo));
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
    /// Index into `Scan::found` once its message-id line named a wanted Message-ID.
    message: Option<usize>,
    sender: Sender,
    fate: Fate,
    fate_line: Option<String>,
}

impl Track {
    fn new(since: f64) -> Self {
        Self {
            since,
            span: (since, since),
            message: None,
            sender: Sender::Unknown,
            fate: Fate::Open,
            fate_line: None,
        }
    }
}

/// The state of one pass.
struct Scan<'w> {
    wanted: &'w HashSet<String>,
    clock: Clock,
    max_gap: f64,
    /// Queue ids being followed.
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
    /// Stretches without a long gap, as each file's lines gave them.
    runs: Vec<(f64, f64)>,
    problems: Vec<String>,
    lines: u64,
    bytes: u64,
}

/// One smtpd session under way: when it connected, and the queue ids it carried.
#[derive(Debug, Default)]
struct Session {
    since: f64,
    queue_ids: Vec<String>,
}

/// One line taken apart: ` host program[pid]: text`.
struct Line<'a> {
    /// `host program[pid]`, which names one process.
    process: &'a [u8],
    daemon: &'a [u8],
    text: &'a [u8],
}

impl<'w> Scan<'w> {
    fn new(wanted: &'w HashSet<String>, options: Options) -> Self {
        Self {
            wanted,
            clock: Clock::new(options.zone, options.near),
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
        let mut run: Option<(Stamp, Stamp)> = None;
        let mut stamped = 0u64;
        let mut read_any = false;
        let result = loop {
            line.clear();
            let read = match read_line_at_most(&mut reader, &mut line, MAX_LINE) {
                Ok(0) => break Ok(()),
                Ok(read) => read,
                Err(err) => break Err(err),
            };
            read_any = true;
            self.bytes += read as u64;
            self.lines += 1;
            let Some((stamp_end, rest)) = split_stamp(&line) else {
                continue;
            };
            let Some(stamp) = self.clock.parse(&line[..stamp_end]) else {
                continue;
            };
            stamped += 1;
            run = Some(match run {
                None => (stamp, stamp),
                Some((first, last))
                    if stamp.hi - last.lo > self.max_gap || stamp.lo < last.lo - BACKWARDS =>
                {
                    self.runs.push((first.hi, last.lo));
                    (stamp, stamp)
                }
                Some((first, last)) => (first, if stamp.lo > last.lo { stamp } else { last }),
            });
            if let Some(parsed) = parse_line(rest) {
                self.line(path, stamp, &line[..stamp_end], rest, &parsed);
            }
        };
        if let Some((first, last)) = run {
            self.runs.push((first.hi, last.lo));
        }
        result?;
        if read_any && stamped == 0 {
            self.problem(path, "no stamped line in it: not a relay log");
        }
        Ok(())
    }

    fn line(&mut self, path: &Path, stamp: Stamp, raw_stamp: &[u8], rest: &[u8], line: &Line) {
        let whole = || whole(raw_stamp, rest);
        match line.daemon {
            b"smtpd" => self.smtpd(stamp, line, whole),
            b"cleanup" => self.cleanup(path, stamp, line, whole),
            b"qmgr" => self.qmgr(stamp, line, whole),
            _ => {}
        }
    }

    fn smtpd(&mut self, stamp: Stamp, line: &Line, whole: impl Fn() -> String) {
        let process = String::from_utf8_lossy(line.process).into_owned();
        let text = line.text;
        if text.starts_with(b"connect from ") {
            let session = Session {
                since: stamp.lo,
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
            if after.starts_with(b"client=") {
                let session = self.sessions.entry(process).or_insert_with(|| Session {
                    since: stamp.lo,
                    queue_ids: Vec::new(),
                });
                session.queue_ids.push(queue_id.to_string());
                // The session's lines are the message's too: one of them stamped elsewhere
                // cannot move the message out of the session's time.
                let mut track = Track::new(stamp.lo);
                track.span = (stamp.lo.min(session.since), stamp.hi.max(session.since));
                // A queue id seen again is a new message: the old one's lines are done.
                if let Some(old) = self.tracks.insert(queue_id.to_string(), track) {
                    self.orphan_if_unnamed(queue_id, &old);
                }
                self.identified.remove(queue_id);
                self.pending.push_back((stamp.lo, queue_id.to_string()));
                self.forget_pending(stamp.lo);
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
            // The message in transfer when the session ended is its last one.
            let last = self
                .sessions
                .get(&process)
                .and_then(|s| s.queue_ids.last())
                .cloned();
            if let Some(queue_id) = last {
                self.settle(&queue_id, Fate::Lost, None, whole(), stamp);
            }
            return;
        }
        if text.starts_with(b"disconnect from ") {
            let session = self.sessions.remove(&process).unwrap_or_default();
            for queue_id in &session.queue_ids {
                self.touch(queue_id, stamp);
            }
            let taken = messages_taken(text);
            if taken == 0 {
                for queue_id in &session.queue_ids {
                    self.settle(queue_id, Fate::Lost, None, whole(), stamp);
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
    }

    fn cleanup(&mut self, path: &Path, stamp: Stamp, line: &Line, whole: impl Fn() -> String) {
        let Some((queue_id, after)) = queue_id(line.text) else {
            return;
        };
        if let Some(value) = after.strip_prefix(b"message-id=") {
            let value = String::from_utf8_lossy(value);
            let value = value.trim_end();
            if self
                .tracks
                .get(queue_id)
                .is_some_and(|t| t.message.is_some())
            {
                return;
            }
            if !self.wanted.contains(value) {
                self.tracks.remove(queue_id);
                self.identified.insert(queue_id.to_string());
                self.identified_order
                    .push_back((stamp.lo, queue_id.to_string()));
                return;
            }
            let index = self.found.len();
            let track = self
                .tracks
                .entry(queue_id.to_string())
                .or_insert_with(|| Track::new(stamp.lo));
            track.message = Some(index);
            let message = Message {
                queue_id: queue_id.to_string(),
                at: stamp,
                span: (track.span.0.min(stamp.lo), track.span.1.max(stamp.hi)),
                path: path.to_path_buf(),
                line: whole(),
                sender: track.sender.clone(),
                fate: track.fate,
                fate_line: track.fate_line.clone(),
            };
            self.found.push((value.to_string(), message));
            return;
        }
        let fate = if after.starts_with(b"hold: ") {
            Fate::Held
        } else if after.starts_with(b"reject: ") {
            Fate::Rejected
        } else if after.starts_with(b"discard: ") {
            Fate::Discarded
        } else {
            return;
        };
        let sender = check_sender(after);
        self.settle(queue_id, fate, Some(sender), whole(), stamp);
    }

    fn qmgr(&mut self, stamp: Stamp, line: &Line, whole: impl Fn() -> String) {
        let Some((queue_id, after)) = queue_id(line.text) else {
            return;
        };
        if after == b"removed" {
            if let Some(old) = self.tracks.remove(queue_id) {
                self.orphan_if_unnamed(queue_id, &old);
            }
            return;
        }
        if let Some(sender) = queue_active_sender(after) {
            if !self.tracks.contains_key(queue_id) && !self.identified.contains(queue_id) {
                // Queued, and no line ever said what it carried.
                self.orphan(stamp.lo, queue_id, Some(sender));
                return;
            }
            self.settle(
                queue_id,
                Fate::Queued,
                Some(Sender::Known(sender)),
                whole(),
                stamp,
            );
        }
    }

    /// A message that may have been committed though no message-id line names it.
    fn orphan_if_unnamed(&mut self, queue_id: &str, track: &Track) {
        if track.message.is_none() && !track.fate.refused() {
            let sender = match &track.sender {
                Sender::Known(sender) => Some(sender.clone()),
                _ => None,
            };
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

    /// Widens what `queue_id`'s lines span to `stamp`.
    fn touch(&mut self, queue_id: &str, stamp: Stamp) {
        let Some(track) = self.tracks.get_mut(queue_id) else {
            return;
        };
        let span = match track.message {
            Some(index) => &mut self.found[index].1.span,
            None => &mut track.span,
        };
        *span = (span.0.min(stamp.lo), span.1.max(stamp.hi));
    }

    /// Records what a line says became of `queue_id`: a commitment always stands; a
    /// refusal only where nothing was said before.
    fn settle(
        &mut self,
        queue_id: &str,
        fate: Fate,
        sender: Option<Sender>,
        line: String,
        stamp: Stamp,
    ) {
        let Some(track) = self.tracks.get_mut(queue_id) else {
            return;
        };
        let (current, current_sender, current_line, span) = match track.message {
            Some(index) => {
                let message = &mut self.found[index].1;
                (
                    &mut message.fate,
                    &mut message.sender,
                    &mut message.fate_line,
                    &mut message.span,
                )
            }
            None => (
                &mut track.fate,
                &mut track.sender,
                &mut track.fate_line,
                &mut track.span,
            ),
        };
        *span = (span.0.min(stamp.lo), span.1.max(stamp.hi));
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
            if let Some((_, queue_id)) = self.pending.pop_front()
                && let Some(track) = self.tracks.get(&queue_id)
                && track.message.is_none()
                && let Some(old) = self.tracks.remove(&queue_id)
            {
                self.orphan_if_unnamed(&queue_id, &old);
            }
        }
        while let Some((born, _)) = self.identified_order.front() {
            if now - born < IDENTIFIED_FOR {
                break;
            }
            if let Some((_, queue_id)) = self.identified_order.pop_front() {
                self.identified.remove(&queue_id);
            }
        }
    }

    fn finish(mut self) -> Findings {
        let unnamed: Vec<(String, Track)> = self
            .tracks
            .drain()
            .filter(|(_, track)| track.message.is_none())
            .collect();
        for (queue_id, track) in unnamed {
            self.orphan_if_unnamed(&queue_id, &track);
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
        Findings {
            messages,
            covered: merge_runs(self.runs, self.max_gap),
            problems: self.problems,
            orphans: self.orphans,
            orphans_overflow: self.orphans_overflow,
            lines: self.lines,
            bytes: self.bytes,
        }
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

/// Runs from every file, merged where they overlap or meet within `gap`.
fn merge_runs(mut runs: Vec<(f64, f64)>, gap: f64) -> Vec<(f64, f64)> {
    runs.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut merged: Vec<(f64, f64)> = Vec::new();
    for (start, end) in runs {
        match merged.last_mut() {
            Some((_, last_end)) if start <= *last_end + gap => {
                *last_end = last_end.max(end);
            }
            _ => merged.push((start, end)),
        }
    }
    merged
}

/// The line as text again, trimmed, for evidence.
fn whole(stamp: &[u8], rest: &[u8]) -> String {
    let mut text = String::from_utf8_lossy(stamp).into_owned();
    text.push_str(&String::from_utf8_lossy(rest));
    text.trim_end().to_string()
}

/// ` host program[pid]: text` taken apart; None for any other shape, or a program that is
/// not one of Postfix's (`postfix/qmgr`, `postfix-out/smtpd`, `postfix/submission/smtpd`).
fn parse_line(rest: &[u8]) -> Option<Line<'_>> {
    let rest = rest.strip_prefix(b" ")?;
    let host_end = memchr::memchr(b' ', rest)?;
    let after_host = &rest[host_end + 1..];
    let tag_end = memchr::memmem::find(after_host, b"]: ")?;
    let tag = &after_host[..tag_end];
    let open = memchr::memrchr(b'[', tag)?;
    let (program, pid) = (&tag[..open], &tag[open + 1..]);
    if pid.is_empty() || !pid.iter().all(u8::is_ascii_digit) {
        return None;
    }
    if program.contains(&b' ') || !program.starts_with(b"postfix") {
        return None;
    }
    let daemon = &program[memchr::memrchr(b'/', program)? + 1..];
    let text = &after_host[tag_end + 3..];
    let text = text.strip_suffix(b"\n").unwrap_or(text);
    let text = text.strip_suffix(b"\r").unwrap_or(text);
    Some(Line {
        process: &rest[..host_end + 1 + tag_end + 1],
        daemon,
        text,
    })
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

/// How many messages smtpd's `disconnect from ... data=K[/N] ...` says the session took:
/// 0 when it never sent DATA (or BDAT) or none succeeded. A count that cannot be read is
/// taken as many, so it never stands for "nothing taken".
fn messages_taken(text: &[u8]) -> usize {
    text.split(|b| *b == b' ')
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
        .fold(0, usize::saturating_add)
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

/// The sender of cleanup's `hold:`, `reject:` or `discard:` line: `...; from=<S> to=<R>
/// proto=...`. The text before it quotes a header the submitter wrote, so a line where
/// the shape occurs more than once cannot be read and names no sender.
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

/// Turns stamps into instants.
struct Clock {
    zone: Zone,
    /// The year of `near`, and `near` itself.
    year: i64,
    near: f64,
    /// The last stamp read and what it was, since many lines share a second.
    last: std::cell::RefCell<(Vec<u8>, Option<Stamp>)>,
}

impl Clock {
    fn new(zone: Zone, near: f64) -> Self {
        let near = if near.is_finite() { near } else { 0.0 };
        let (year, _, _) = civil_from_days((near / 86_400.0).floor() as i64);
        Self {
            zone,
            year,
            near,
            last: std::cell::RefCell::new((Vec::new(), None)),
        }
    }

    fn parse(&self, stamp: &[u8]) -> Option<Stamp> {
        let mut last = self.last.borrow_mut();
        if last.0 == stamp {
            return last.1;
        }
        let parsed = if stamp.first()?.is_ascii_digit() {
            parse_rfc3339(stamp)
        } else {
            self.parse_syslog(stamp)
        };
        last.0.clear();
        last.0.extend_from_slice(stamp);
        last.1 = parsed;
        parsed
    }

    /// `Nov 29 22:15:57` in the year that puts it nearest `near`.
    fn parse_syslog(&self, stamp: &[u8]) -> Option<Stamp> {
        if stamp.len() != 15 || stamp[3] != b' ' || stamp[6] != b' ' {
            return None;
        }
        let month = MONTHS.iter().position(|m| *m == &stamp[..3])? as i64 + 1;
        let day = match stamp[4] {
            b' ' => digits(&stamp[5..6])?,
            _ => digits(&stamp[4..6])?,
        };
        let seconds = clock_seconds(&stamp[7..15])?;
        let mut best: Option<f64> = None;
        for year in [self.year - 1, self.year, self.year + 1] {
            if day < 1 || day > days_in_month(year, month) {
                continue;
            }
            let naive = (days_from_civil(year, month, day) * 86_400 + seconds) as f64;
            let at = naive - f64::from(self.offset(naive));
            if best.is_none_or(|b| (at - self.near).abs() < (b - self.near).abs()) {
                best = Some(at);
            }
        }
        best.map(|lo| Stamp { lo, hi: lo + 1.0 })
    }

    /// Seconds east of UTC for a local time `naive` (seconds as if it were UTC).
    fn offset(&self, naive: f64) -> i32 {
        match self.zone {
            Zone::Fixed(seconds) => seconds,
            Zone::Local => {
                let guess = local_offset(naive as i64);
                local_offset(naive as i64 - i64::from(guess))
            }
        }
    }
}

const MONTHS: [&[u8]; 12] = [
    b"Jan", b"Feb", b"Mar", b"Apr", b"May", b"Jun", b"Jul", b"Aug", b"Sep", b"Oct", b"Nov", b"Dec",
];

fn digits(text: &[u8]) -> Option<i64> {
    if text.is_empty() || !text.iter().all(u8::is_ascii_digit) {
        return None;
    }
    Some(text.iter().fold(0i64, |n, d| n * 10 + i64::from(d - b'0')))
}

/// `HH:MM:SS` as seconds into the day.
fn clock_seconds(text: &[u8]) -> Option<i64> {
    if text.len() != 8 || text[2] != b':' || text[5] != b':' {
        return None;
    }
    let (hour, minute, second) = (
        digits(&text[0..2])?,
        digits(&text[3..5])?,
        digits(&text[6..8])?,
    );
    (hour < 24 && minute < 60 && second < 61).then_some(hour * 3600 + minute * 60 + second)
}

/// `2026-11-29T22:15:57[.ffffff](Z|+hh:mm|-hh:mm)`; the stamp says the instant to its
/// last digit.
fn parse_rfc3339(text: &[u8]) -> Option<Stamp> {
    if text.len() < 20 || text[4] != b'-' || text[7] != b'-' || !matches!(text[10], b'T' | b't') {
        return None;
    }
    let (year, month, day) = (
        digits(&text[0..4])?,
        digits(&text[5..7])?,
        digits(&text[8..10])?,
    );
    if !(1..=12).contains(&month) || day < 1 || day > days_in_month(year, month) {
        return None;
    }
    let seconds = clock_seconds(&text[11..19])?;
    let mut rest = &text[19..];
    let mut fraction = 0.0;
    let mut precision = 1.0;
    if let Some(after) = rest.strip_prefix(b".") {
        let count = after.iter().take_while(|b| b.is_ascii_digit()).count();
        if count == 0 || count > 9 {
            return None;
        }
        fraction = digits(&after[..count])? as f64 / 10f64.powi(count as i32);
        precision = 10f64.powi(-(count as i32));
        rest = &after[count..];
    }
    let offset = match rest {
        b"Z" | b"z" => 0,
        [sign @ (b'+' | b'-'), h1, h2, b':', m1, m2] => {
            let hours = digits(&[*h1, *h2])?;
            let minutes = digits(&[*m1, *m2])?;
            if hours > 23 || minutes > 59 {
                return None;
            }
            let value = hours * 3600 + minutes * 60;
            if *sign == b'-' { -value } else { value }
        }
        _ => return None,
    };
    let lo = (days_from_civil(year, month, day) * 86_400 + seconds - offset) as f64 + fraction;
    Some(Stamp {
        lo,
        hi: lo + precision,
    })
}

fn is_leap(year: i64) -> bool {
    (year % 4 == 0 && year % 100 != 0) || year % 400 == 0
}

fn days_in_month(year: i64, month: i64) -> i64 {
    match month {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if is_leap(year) => 29,
        2 => 28,
        _ => 0,
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let year_of_era = year - era * 400;
    let day_of_year = (153 * (if month > 2 { month - 3 } else { month + 9 }) + 2) / 5 + day - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}

/// The date of a day since 1970-01-01.
fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let days = days + 719_468;
    let era = days.div_euclid(146_097);
    let day_of_era = days - era * 146_097;
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let mp = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    (year, month, day)
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
mod tests;
