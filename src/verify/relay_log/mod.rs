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
mod read;

pub use clock::{Stamp, Zone};
pub use line::SyslogNames;
pub use read::Reading;

use crate::render::sanitize::cleaned;
use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::io::Read;
use std::os::unix::fs::MetadataExt;
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
    /// The earliest the line that places it can have been written.
    pub at: f64,
    /// The latest that line can have been written: its stamp says a second, or either
    /// pass of an hour a clock change repeats.
    pub until: f64,
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

/// A line in which the log says it lost lines, or marks where it may have.
#[derive(Debug, Clone, PartialEq)]
pub struct Loss {
    pub at: f64,
    pub line: String,
    pub why: Lost,
}

/// Why a line takes absence away near it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lost {
    /// The log says it lost lines: rate-limiting, a suspended action, a full queue.
    Said,
    /// journald's mark between two boots ([`line::marks_a_reboot`]).
    Reboot,
    /// The relay's Postfix started again with no line of its host saying it had been
    /// stopped: the host may have crashed, and what the relay logged in its last moments
    /// may never have reached the disk (a crash-reboot quicker than `--max-log-gap`
    /// leaves no gap to see).
    Restart,
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
                orphan.until >= from
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
/// Message-IDs, with the blocks of each file taken apart on every core.
pub fn search(paths: &[PathBuf], wanted: impl Into<Wanted>, options: Options) -> Findings {
    search_with(paths, wanted, options, Reading::default())
}

/// The first line of `text` that one parser, having read the lines before it (and so
/// remembering their stamps and prefixes), reads otherwise than a parser of its own
/// (tests: what a parser remembers never changes what a line is).
#[cfg(test)]
pub(crate) fn first_line_read_otherwise_after_the_others(
    text: &[u8],
    options: &Options,
) -> Option<String> {
    let wanted = Wanted::default();
    let hasher = foldhash::fast::RandomState::default();
    let parser = || {
        read::Parser::new(
            &wanted,
            &options.zone,
            options.near,
            options.names.clone(),
            hasher.clone(),
        )
    };
    let shared = parser();
    text.split_inclusive(|b| *b == b'\n').find_map(|line| {
        let block = read::Block {
            data: line.to_vec(),
            long: Vec::new(),
        };
        (shared.parse(&block) != parser().parse(&block))
            .then(|| String::from_utf8_lossy(line).into_owned())
    })
}

/// Whether each line of `text`, taken apart in one block, reports lost lines in its
/// words (tests: the block's search for the loss needles finds what a line's own would).
#[cfg(test)]
pub(crate) fn lines_reporting_loss(text: &[u8], options: &Options) -> Vec<bool> {
    let wanted = Wanted::default();
    let parser = read::Parser::new(
        &wanted,
        &options.zone,
        options.near,
        options.names.clone(),
        foldhash::fast::RandomState::default(),
    );
    let block = read::Block {
        data: text.to_vec(),
        long: Vec::new(),
    };
    parser
        .parse(&block)
        .iter()
        .map(|record| {
            matches!(
                record.kind,
                read::Kind::Read {
                    loss: Some(Lost::Said),
                    ..
                }
            )
        })
        .collect()
}

/// As [`search`], read as `reading` says (one thread, the size of a block): the answer is
/// the same however the reading is cut.
pub fn search_with(
    paths: &[PathBuf],
    wanted: impl Into<Wanted>,
    options: Options,
    reading: Reading,
) -> Findings {
    search_in(paths, &wanted.into(), options, reading)
}

/// [`search`] for `wanted` as it is, with no copy of it made: what a caller that keeps
/// it to look up by afterwards searches with.
pub(crate) fn search_for(paths: &[PathBuf], wanted: &Wanted, options: Options) -> Findings {
    search_in(paths, wanted, options, Reading::default())
}

fn search_in(paths: &[PathBuf], wanted: &Wanted, options: Options, reading: Reading) -> Findings {
    let mut scan = Scan::new(wanted, options, reading);
    let clock = clock::Clock::new(&scan.zone, scan.near);
    let mut files: Vec<(f64, &PathBuf)> = Vec::new();
    // A file named twice (the same path, or a link to it) is read once: read again, each
    // of its messages would be seen twice.
    let mut named = HashSet::new();
    for path in paths {
        match std::fs::metadata(path) {
            Ok(meta) if meta.is_file() && !named.insert((meta.dev(), meta.ino())) => {}
            Ok(meta) if meta.is_file() => match first_stamp(path, &clock) {
                Ok(first) => files.push((first.unwrap_or(f64::NEG_INFINITY), path)),
                Err(err) => scan.problem(path, &err.to_string()),
            },
            Ok(meta) => scan.problem(path, not_a_file(&meta.file_type())),
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

/// Why a path given as a relay log that is not a file is not read, and what to give.
fn not_a_file(kind: &std::fs::FileType) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    if kind.is_dir() {
        "a directory, not a file: name each log in it (--relay-log DIR/mail.log --relay-log DIR/mail.log.1 ...)"
    } else if kind.is_fifo() {
        "a pipe, not a file: a relay log is read twice (its first lines put rotated files in order), so write what the pipe gives to a file and name that"
    } else {
        "a device or socket, not a file"
    }
}

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

/// The stamp of a file's first stamped line among its first few thousand.
fn first_stamp(path: &Path, clock: &clock::Clock) -> std::io::Result<Option<f64>> {
    let mut splitter = read::Splitter::new(read::open(path)?, 256 << 10);
    let mut seen = 0;
    while let Some(block) = splitter.next_block()? {
        for line in block.data.split_inclusive(|b| *b == b'\n') {
            if seen == 4096 {
                return Ok(None);
            }
            seen += 1;
            let line = &line[..line.len().min(read::MAX_LINE)];
            if let Some(stamped) = line::stamped(line, clock) {
                return Ok(Some(stamped.stamp.lo));
            }
        }
    }
    Ok(None)
}

/// The Message-IDs a pass looks for. Asked once per message-id line and per mention:
/// hashed the fast way, with a seed of its own.
#[derive(Debug, Clone)]
pub enum Wanted {
    /// These, exactly.
    Ids(HashSet<String, foldhash::fast::RandomState>),
    /// Every one unsctl writes for an attempt of these notifications, whatever its cycle
    /// and number ([`crate::model::MessageId::notification_of`]): what a reconciliation
    /// asks before it has read their histories.
    Notifications(std::sync::Arc<HashSet<String, foldhash::fast::RandomState>>),
}

impl Default for Wanted {
    fn default() -> Self {
        Self::Ids(HashSet::default())
    }
}

impl Wanted {
    pub fn contains(&self, message_id: &str) -> bool {
        match self {
            Self::Ids(ids) => ids.contains(message_id),
            Self::Notifications(ids) => crate::model::MessageId::notification_of(message_id)
                .is_some_and(|id| ids.contains(id)),
        }
    }
}

impl<S> From<&HashSet<String, S>> for Wanted {
    fn from(ids: &HashSet<String, S>) -> Self {
        Self::Ids(ids.iter().cloned().collect())
    }
}

/// The maps of a pass, keyed by [`Key`]s whose hash the parsers made (with a seed of
/// the search's own, so bytes from the log cannot be chosen to collide).
type Map<K, V> = HashMap<K, V, std::hash::BuildHasherDefault<Made>>;

/// The hasher of a key whose hash was made already: it takes that hash as it is.
#[derive(Default)]
struct Made(u64);

impl std::hash::Hasher for Made {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        // Only `write_u64` is called by `Key`; anything else is folded in all the same.
        for byte in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(*byte);
        }
    }

    fn write_u64(&mut self, hash: u64) {
        self.0 = hash;
    }
}

/// Bytes of a line kept as a key without a heap allocation when short (a queue id, a
/// `program[pid]`).
#[derive(Clone)]
enum Short {
    Inline(u8, [u8; 30]),
    Heap(Box<[u8]>),
}

impl Short {
    fn new(bytes: &[u8]) -> Self {
        if bytes.len() <= 30 {
            let mut inline = [0u8; 30];
            inline[..bytes.len()].copy_from_slice(bytes);
            Short::Inline(bytes.len() as u8, inline)
        } else {
            Short::Heap(bytes.into())
        }
    }

    fn bytes(&self) -> &[u8] {
        match self {
            Short::Inline(len, bytes) => &bytes[..*len as usize],
            Short::Heap(bytes) => bytes,
        }
    }

    fn text(&self) -> String {
        String::from_utf8_lossy(self.bytes()).into_owned()
    }
}

impl PartialEq for Short {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            // Padded with zeros past their length: the whole arrays compare.
            (Short::Inline(a, x), Short::Inline(b, y)) => a == b && x == y,
            _ => self.bytes() == other.bytes(),
        }
    }
}

impl Eq for Short {}

impl std::hash::Hash for Short {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.bytes().hash(state);
    }
}

/// A queue id, or a process, of one host's relay: two hosts' may meet.
#[derive(Clone)]
struct Key {
    /// Made by the parser of the line, from the host's name and `name`.
    hash: u64,
    host: u32,
    name: Short,
}

impl Key {
    fn of(host: u32, name: read::Name, data: &[u8]) -> Self {
        Key {
            hash: name.hash,
            host,
            name: Short::new(name.span.in_(data)),
        }
    }
}

impl PartialEq for Key {
    fn eq(&self, other: &Self) -> bool {
        self.hash == other.hash && self.host == other.host && self.name == other.name
    }
}

impl Eq for Key {}

impl std::hash::Hash for Key {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        state.write_u64(self.hash);
    }
}

/// A queue id waiting for its message-id line.
struct Pending {
    born: f64,
    /// The number of the message it was taken up for.
    number: u64,
    key: Key,
    /// Its track may still be there: false once that track is known gone.
    alive: bool,
}

/// What is known of a queue id while its lines come in.
#[derive(Debug)]
struct Track {
    /// When its first line was written: the earliest and the latest its stamp allows.
    since: (f64, f64),
    /// From its first line to its last.
    span: (f64, f64),
    ambiguous: bool,
    /// Index into `Scan::found` once its message-id line named a wanted Message-ID.
    message: Option<usize>,
    /// Its number among the messages of the search.
    number: u64,
    /// Its entry in `Scan::pending`, by the count of entries ever pushed there.
    pending: Option<u64>,
    sender: Sender,
    fate: Fate,
    fate_line: Option<String>,
    /// Its only message-id line names a Message-ID the relay made up ([`read::made_by_relay`]).
    named_by_relay: bool,
}

impl Track {
    fn new(stamp: Stamp, number: u64) -> Self {
        Self {
            since: (stamp.lo, stamp.hi),
            span: (stamp.lo, stamp.hi),
            ambiguous: stamp.ambiguous,
            message: None,
            number,
            pending: None,
            sender: Sender::Unknown,
            fate: Fate::Open,
            fate_line: None,
            named_by_relay: false,
        }
    }
}

/// One smtpd session under way: when it connected, and the queue ids it carried.
#[derive(Default)]
struct Session {
    /// When it began: the earliest and the latest its first line's stamp allows.
    since: (f64, f64),
    /// Its `connect from` line was read: only then is a line about its end known to be
    /// about the messages it carried, not a later session's whose start was lost.
    connected: bool,
    queue_ids: Carried,
}

/// The queue ids a session carried, in order: most carry one, kept without a heap
/// allocation.
#[derive(Default)]
enum Carried {
    #[default]
    None,
    One(Key),
    Many(Vec<Key>),
}

impl Carried {
    fn push(&mut self, key: Key) {
        *self = match std::mem::take(self) {
            Carried::None => Carried::One(key),
            Carried::One(first) => Carried::Many(vec![first, key]),
            Carried::Many(mut keys) => {
                keys.push(key);
                Carried::Many(keys)
            }
        };
    }

    fn as_slice(&self) -> &[Key] {
        match self {
            Carried::None => &[],
            Carried::One(key) => std::slice::from_ref(key),
            Carried::Many(keys) => keys,
        }
    }
}

/// The run of one host's lines in the file being read: its first and last stamps.
type Run = (Stamp, Stamp);

/// Where a host's Postfix stands, by its own lines: a start that no stop came before is
/// read as a crash ([`Lost::Restart`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Life {
    /// No start or stop read yet; the host's first line was the search's line `first`.
    Unsaid {
        first: u64,
    },
    /// postfix-script said it is starting master.
    Starting,
    Running,
    /// Told to stop, and said so.
    Stopped,
}

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
    /// Each host's run, in the order the hosts were first seen.
    runs: Vec<(u32, Run)>,
    count: FileCount,
    /// The last stamp read: a loss report on a line without one is placed there.
    last_stamp: Option<f64>,
    loss_unplaced: Option<(String, Lost)>,
    /// A damaged line read, and no readable stamped line since: from when, and which.
    hole: Option<(f64, String)>,
}

/// A line's words as evidence, and the line it came from, made only when kept.
struct Said<'l> {
    data: &'l [u8],
    line: &'l [u8],
}

impl Said<'_> {
    fn line(&self) -> String {
        quoted(self.line)
    }

    fn sender(&self, sender: read::SenderSpan) -> Sender {
        match sender {
            read::SenderSpan::Known(span) => {
                Sender::Known(String::from_utf8_lossy(span.in_(self.data)).into_owned())
            }
            read::SenderSpan::Ambiguous => Sender::Ambiguous,
        }
    }
}

/// The state of one pass.
struct Scan<'w> {
    wanted: &'w Wanted,
    zone: Zone,
    near: f64,
    reading: Reading,
    names: SyslogNames,
    mentions_finder: line::Mentions,
    max_gap: f64,
    /// The hosts lines name, by the number keys carry ("" for lines that name none).
    hosts: Vec<String>,
    /// Where each host's Postfix stands, by the same number.
    lives: Vec<Life>,
    host_numbers: HashMap<Vec<u8>, u32>,
    /// The last host looked up: most lines name the host of the line before.
    last_host: Option<u32>,
    /// Hashes names alike in every parser of the search.
    hasher: foldhash::fast::RandomState,
    /// Queue ids being followed.
    tracks: Map<Key, Track>,
    /// Queue ids with no message-id line yet, by when they appeared, to forget them;
    /// each with the number of its message, so a queue id the relay reused is not
    /// forgotten by an entry about its earlier message.
    /// An entry whose queue id's track is known gone is marked so, and forgotten
    /// without looking the queue id up.
    pending: VecDeque<Pending>,
    /// Entries popped from `pending` so far.
    pending_popped: u64,
    /// Queue ids whose message-id line named another Message-ID, for a while: each with
    /// its entry in `identified_order`, by the count of entries ever pushed there. A
    /// queue id is identified while that entry has not been popped; entries popped are
    /// swept from the map now and then, never looked up one by one.
    identified: Map<Key, u64>,
    /// When each identified entry was made, in order.
    identified_order: VecDeque<f64>,
    /// Entries popped from `identified_order` so far.
    identified_popped: u64,
    /// Messages numbered so far.
    numbered: u64,
    orphans: Vec<Orphan>,
    orphans_overflow: bool,
    /// smtpd sessions (host and process) under way.
    sessions: Map<Key, Session>,
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
    fn new(wanted: &'w Wanted, options: Options, reading: Reading) -> Self {
        Self {
            wanted,
            zone: options.zone,
            near: options.near,
            reading,
            names: options.names,
            mentions_finder: line::Mentions::new(),
            max_gap: options.max_gap,
            hosts: Vec::new(),
            lives: Vec::new(),
            host_numbers: HashMap::new(),
            last_host: None,
            hasher: foldhash::fast::RandomState::default(),
            tracks: Map::default(),
            pending: VecDeque::new(),
            pending_popped: 0,
            identified: Map::default(),
            identified_order: VecDeque::new(),
            identified_popped: 0,
            numbered: 0,
            orphans: Vec::new(),
            orphans_overflow: false,
            sessions: Map::default(),
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

    fn parser(&self) -> read::Parser<'w> {
        read::Parser::new(
            self.wanted,
            &self.zone,
            self.near,
            self.names.clone(),
            self.hasher.clone(),
        )
    }

    fn file(&mut self, path: &Path) -> std::io::Result<()> {
        let source = read::open(path)?;
        let mut file = FileState::default();
        let result = if self.reading.threads <= 1 {
            self.read_here(path, source, &mut file)
        } else {
            self.read_on_every_core(path, source, &mut file)
        };
        self.close_runs(&mut file.runs);
        if let Some((from, what)) = file.hole {
            self.holes.push(Hole {
                from,
                to: f64::INFINITY,
                line: what,
            });
        }
        if let Some((text, why)) = file.loss_unplaced {
            // A report with no stamp anywhere in its file: it may be about any time.
            self.losses.push(Loss {
                at: f64::NAN,
                line: text,
                why,
            });
        }
        result?;
        self.count_file(path, &file.count);
        Ok(())
    }

    /// Every block read, taken apart and followed on this thread.
    fn read_here(
        &mut self,
        path: &Path,
        source: Box<dyn Read + Send>,
        file: &mut FileState,
    ) -> std::io::Result<()> {
        let parser = self.parser();
        let mut splitter = read::Splitter::new(source, self.reading.block);
        while let Some(block) = splitter.next_block()? {
            for record in parser.parse(&block) {
                self.apply(path, file, &block.data, &record);
            }
        }
        Ok(())
    }

    /// Blocks read (and decompressed) on one thread, taken apart on every core, and
    /// followed here in the file's order. While the next block in that order is still
    /// being taken apart, this thread takes apart one waiting its turn instead of sitting
    /// idle: a core left idle here was a fifth of the log's time on two cores.
    ///
    /// This thread is one of the `threads` that take blocks apart, so one fewer is
    /// started: a parser for every core beside it had the cores take turns between three
    /// busy threads, and the 1 GB benchmark log read in a median 2.3 s against 1.75 s.
    fn read_on_every_core(
        &mut self,
        path: &Path,
        source: Box<dyn Read + Send>,
        file: &mut FileState,
    ) -> std::io::Result<()> {
        use std::sync::{Mutex, mpsc};
        let threads = self.reading.threads;
        let (to_parse, blocks) = mpsc::sync_channel::<(usize, read::Block)>(threads);
        let blocks = Mutex::new(blocks);
        let (to_follow, parsed) = mpsc::sync_channel::<Parsed>(threads * 2);
        let size = self.reading.block;
        let parsers: Vec<read::Parser<'w>> = (1..threads).map(|_| self.parser()).collect();
        let mine = self.parser();
        std::thread::scope(|scope| {
            let reader_out = to_follow.clone();
            scope.spawn(move || read_blocks(source, size, &to_parse, &reader_out));
            for parser in parsers {
                let (blocks, out) = (&blocks, to_follow.clone());
                scope.spawn(move || {
                    loop {
                        let next = blocks.lock().map(|queue| queue.recv());
                        let Ok(Ok((seq, block))) = next else {
                            return;
                        };
                        let records = parser.parse(&block);
                        if out.send((seq, Ok(Some((block, records))))).is_err() {
                            return;
                        }
                    }
                });
            }
            drop(to_follow);
            let mut waiting: BTreeMap<usize, Item> = BTreeMap::new();
            let mut next = 0;
            let outcome = 'follow: loop {
                while let Some(item) = waiting.remove(&next) {
                    match item {
                        Ok(Some((block, records))) => {
                            for record in &records {
                                self.apply(path, file, &block.data, record);
                            }
                            next += 1;
                        }
                        Ok(None) => break 'follow Ok(()),
                        Err(err) => break 'follow Err(err),
                    }
                }
                if let Ok((seq, item)) = parsed.try_recv() {
                    waiting.insert(seq, item);
                    continue;
                }
                // The next block is still being taken apart: take apart one waiting its
                // turn here rather than sit idle, while few are held ahead of it (a parser
                // held up by a busy machine must not make the rest pile up here).
                let stolen = (waiting.len() < threads * 8)
                    .then(|| blocks.try_lock().ok()?.try_recv().ok())
                    .flatten();
                if let Some((seq, block)) = stolen {
                    let records = mine.parse(&block);
                    waiting.insert(seq, Ok(Some((block, records))));
                    continue;
                }
                match parsed.recv() {
                    Ok((seq, item)) => {
                        waiting.insert(seq, item);
                    }
                    Err(_) => break Err(std::io::Error::other("the log's reader stopped")),
                }
            };
            // Ends the reader and the parsers when the file stopped early.
            drop(parsed);
            outcome
        })
    }

    /// The number `host` (empty: a line that names none) is known by.
    fn host(&mut self, host: &[u8]) -> u32 {
        if let Some(last) = self.last_host
            && self.hosts[last as usize].as_bytes() == host
        {
            return last;
        }
        let number = match self.host_numbers.get(host) {
            Some(number) => *number,
            None => {
                let number = self.hosts.len() as u32;
                self.hosts.push(String::from_utf8_lossy(host).into_owned());
                self.lives.push(Life::Unsaid { first: self.lines });
                self.host_numbers.insert(host.to_vec(), number);
                number
            }
        };
        self.last_host = Some(number);
        number
    }

    /// One line of `path`, as its record says.
    fn apply(&mut self, path: &Path, file: &mut FileState, data: &[u8], record: &read::Record) {
        let line = record.line.in_(data);
        self.bytes += record.consumed;
        self.lines += 1;
        file.count.lines += 1;
        let (stamp, loss, relay) = match &record.kind {
            read::Kind::Damaged { why } => {
                file.count.damaged += 1;
                let what = format!("line {} of {} ({why})", file.count.lines, path.display());
                if record.mentions {
                    self.damaged_mention(line, &what);
                }
                file.hole
                    .get_or_insert((file.last_stamp.unwrap_or(f64::NEG_INFINITY), what));
                // No run of lines reaches across it.
                self.close_runs(&mut file.runs);
                return;
            }
            read::Kind::Read { stamp, loss, relay } => (*stamp, *loss, *relay),
        };
        if let Some(stamp) = &stamp
            && let Some((from, what)) = file.hole.take()
        {
            self.holes.push(Hole {
                from,
                to: stamp.hi,
                line: what,
            });
        }
        self.losses_in(file, line, loss, stamp.map(|s| s.lo));
        let (Some(stamp), Some(relay)) = (stamp, relay) else {
            file.count.unread += 1;
            if file.count.first_unread.is_none() {
                file.count.first_unread = Some(quoted(line));
            }
            if record.mentions {
                self.mention(line);
            }
            return;
        };
        file.count.relay += 1;
        let host = self.host(relay.host.map_or(&b""[..], |h| h.in_(data)));
        if !stamp.ambiguous {
            self.extend_run(&mut file.runs, host, stamp);
        }
        let said = Said { data, line };
        if !self.line(path, stamp, host, &relay, &said) && record.mentions {
            self.mention(line);
        }
    }

    /// A loss report in `line` (`loss`), placed at its stamp, else at the nearest stamp
    /// read: a reboot's mark has none, and stands at the last line before it.
    fn losses_in(
        &mut self,
        file: &mut FileState,
        line: &[u8],
        loss: Option<Lost>,
        stamp: Option<f64>,
    ) {
        let at = stamp.or(file.last_stamp);
        if let Some(why) = loss {
            match at {
                Some(at) => self.losses.push(Loss {
                    at,
                    line: quoted(line),
                    why,
                }),
                None => file.loss_unplaced = Some((quoted(line), why)),
            }
        }
        if let Some(stamp) = stamp {
            file.last_stamp = Some(stamp);
            if let Some((text, why)) = file.loss_unplaced.take() {
                self.losses.push(Loss {
                    at: stamp,
                    line: text,
                    why,
                });
            }
        }
    }

    /// Ends every host's run of lines in the file being read.
    fn close_runs(&mut self, runs: &mut Vec<(u32, Run)>) {
        for (host, run) in runs.drain(..) {
            self.runs
                .push((self.hosts[host as usize].clone(), covered(run)));
        }
    }

    /// The wanted Message-IDs named in `line`'s bytes, in the order they stand.
    fn wanted_in(&self, line: &[u8]) -> Vec<String> {
        self.mentions_finder
            .in_line(line)
            .filter_map(|id| std::str::from_utf8(id).ok())
            .filter(|id| self.wanted.contains(id))
            .map(str::to_string)
            .collect()
    }

    /// Keeps a damaged line whose bytes name a wanted Message-ID.
    fn damaged_mention(&mut self, line: &[u8], what: &str) {
        for id in self.wanted_in(line) {
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
    fn extend_run(&mut self, runs: &mut Vec<(u32, Run)>, host: u32, stamp: Stamp) {
        let Some(at) = runs.iter().position(|(h, _)| *h == host) else {
            runs.push((host, (stamp, stamp)));
            return;
        };
        let (first, last) = runs[at].1;
        runs[at].1 = if stamp.hi - last.lo > self.max_gap || stamp.lo < last.lo - BACKWARDS {
            self.runs
                .push((self.hosts[host as usize].clone(), covered((first, last))));
            (stamp, stamp)
        } else {
            (first, if stamp.lo > last.lo { stamp } else { last })
        };
    }

    /// Keeps a line that mentions a wanted Message-ID without being its record.
    fn mention(&mut self, line: &[u8]) {
        for id in self.wanted_in(line) {
            let kept = self.mentions.entry(id).or_default();
            if kept.len() < MAX_MENTIONS {
                kept.push(quoted(line));
            }
        }
    }

    /// Reads one of the relay's lines; true when it was the record of a message carrying
    /// a wanted Message-ID.
    fn line(
        &mut self,
        path: &Path,
        stamp: Stamp,
        host: u32,
        relay: &read::Relay,
        said: &Said<'_>,
    ) -> bool {
        use read::Op;
        let key = |name: read::Name| Key::of(host, name, said.data);
        let process = || Key::of(host, relay.tag, said.data);
        match relay.op {
            Op::Nothing => {}
            Op::SmtpdConnect => self.connect(process(), stamp),
            Op::SmtpdClient { queue_id } => self.client(process(), key(queue_id), stamp),
            Op::SmtpdSettle {
                queue_id,
                fate,
                sender,
            }
            | Op::CleanupSettle {
                queue_id,
                fate,
                sender,
            } => {
                let fate = match fate {
                    read::Settled::Held => Fate::Held,
                    read::Settled::Rejected => Fate::Rejected,
                    read::Settled::Discarded => Fate::Discarded,
                };
                self.settle(&key(queue_id), fate, Some(sender), said, stamp);
            }
            Op::SmtpdLost => {
                // The message in transfer when the session ended is its last one, if the
                // session's own start was read.
                let last = self
                    .sessions
                    .get(&process())
                    .filter(|s| s.connected)
                    .and_then(|s| s.queue_ids.as_slice().last())
                    .cloned();
                if let Some(key) = last {
                    self.settle(&key, Fate::Lost, None, said, stamp);
                }
            }
            Op::SmtpdDisconnect { taken } => self.disconnect(&process(), taken, stamp, said),
            Op::CleanupMessageId {
                queue_id,
                value,
                names,
            } => {
                return self.message_id(path, stamp, key(queue_id), value, names, relay, said);
            }
            Op::Starting { master } => self.starting(host, master, stamp, said),
            Op::Stopping => self.lives[host as usize] = Life::Stopped,
            Op::QmgrRemoved { queue_id } => {
                let key = key(queue_id);
                if let Some(old) = self.tracks.remove(&key) {
                    self.track_gone(&old);
                    self.orphan_if_unnamed(&key, &old);
                }
            }
            Op::QmgrActive { queue_id, sender } => {
                let key = key(queue_id);
                let known = Some(read::SenderSpan::Known(sender));
                // Settling a queue id with no track changes nothing.
                if !self.settle(&key, Fate::Queued, known, said, stamp) && !self.is_identified(&key)
                {
                    // Queued, and no line ever said what it carried.
                    self.orphan(
                        (stamp.lo, stamp.hi),
                        &key.name.text(),
                        Some(String::from_utf8_lossy(sender.in_(said.data)).into_owned()),
                    );
                }
            }
        }
        false
    }

    /// The relay's Postfix on `host` starting: a crash before it, unless a line said it
    /// was stopped (or this host's lines begin here).
    fn starting(&mut self, host: u32, master: bool, stamp: Stamp, said: &Said<'_>) {
        let life = &mut self.lives[host as usize];
        let crashed = match *life {
            Life::Running => true,
            Life::Unsaid { first } => first != self.lines,
            // postfix-script's line, then master's: one start.
            Life::Starting | Life::Stopped => false,
        };
        *life = if master {
            Life::Running
        } else {
            Life::Starting
        };
        if crashed {
            self.losses.push(Loss {
                at: stamp.lo,
                line: said.line(),
                why: Lost::Restart,
            });
        }
    }

    fn connect(&mut self, process: Key, stamp: Stamp) {
        let session = Session {
            since: (stamp.lo, stamp.hi),
            connected: true,
            queue_ids: Carried::None,
        };
        // A session that never ended may have carried anything.
        if let Some(open) = self.sessions.insert(process.clone(), session) {
            let what = self.session_with_no_end(&process);
            self.orphan(open.since, &what, None);
        }
    }

    /// `(a session of HOST PROGRAM[PID] with no end)`.
    fn session_with_no_end(&self, process: &Key) -> String {
        format!(
            "(a session of {} {} with no end)",
            self.hosts[process.host as usize],
            process.name.text()
        )
    }

    fn client(&mut self, process: Key, key: Key, stamp: Stamp) {
        let number = self.number();
        let session = self.sessions.entry(process).or_insert_with(|| Session {
            since: (stamp.lo, stamp.hi),
            connected: false,
            queue_ids: Carried::None,
        });
        session.queue_ids.push(key.clone());
        // The session's lines are the message's too: one of them stamped elsewhere
        // cannot move the message out of the session's time.
        let mut track = Track::new(stamp, number);
        track.span = (stamp.lo.min(session.since.0), stamp.hi.max(session.since.0));
        track.pending = Some(self.pending_popped + self.pending.len() as u64);
        // A queue id seen again is a new message: the old one's lines are done.
        if let Some(old) = self.tracks.insert(key.clone(), track) {
            self.track_gone(&old);
            self.orphan_if_unnamed(&key, &old);
        }
        self.identified.remove(&key);
        self.pending.push_back(Pending {
            born: stamp.lo,
            number,
            key,
            alive: true,
        });
        self.forget_pending(stamp.lo);
    }

    fn disconnect(&mut self, process: &Key, taken: Option<usize>, stamp: Stamp, said: &Said<'_>) {
        let session = self.sessions.remove(process).unwrap_or_default();
        for key in session.queue_ids.as_slice() {
            self.touch(key, stamp);
        }
        // Postfix before 3.0 writes no counts: such a line says nothing about DATA.
        let Some(taken) = taken else {
            return;
        };
        if taken == 0 && session.connected {
            for key in session.queue_ids.as_slice() {
                self.settle(key, Fate::Lost, None, said, stamp);
            }
        } else if taken > session.queue_ids.as_slice().len() {
            // It took a message whose queue id no line names.
            let what = format!(
                "(a message of {} {} with no queue id)",
                self.hosts[process.host as usize],
                process.name.text()
            );
            self.orphan((stamp.lo, stamp.hi), &what, None);
        }
    }

    /// cleanup's `QID: message-id=VALUE`; true when it was the record of a message
    /// carrying a wanted Message-ID.
    #[allow(clippy::too_many_arguments)]
    fn message_id(
        &mut self,
        path: &Path,
        stamp: Stamp,
        key: Key,
        value: read::Span,
        names: read::Names,
        relay: &read::Relay,
        said: &Said<'_>,
    ) -> bool {
        if names == read::Names::Unknown {
            // The message came with no Message-ID, or a header check took it away: what
            // it was sent with is not known, so it is no more named than one without a
            // message-id line, and may be the attempt's.
            if let Some(track) = self.tracks.get_mut(&key) {
                track.named_by_relay = true;
            }
            return false;
        }
        if names == read::Names::Other {
            // One lookup: a track whose message was named already goes back untouched.
            match self.tracks.remove(&key) {
                Some(track) if track.message.is_some() => {
                    self.tracks.insert(key, track);
                    return false;
                }
                Some(track) => self.track_gone(&track),
                // Numbered as any message is, though only its entry is kept.
                None => _ = self.number(),
            }
            let entry = self.identified_popped + self.identified_order.len() as u64;
            self.identified.insert(key, entry);
            self.identified_order.push_back(stamp.lo);
            return false;
        }
        if self.tracks.get(&key).is_some_and(|t| t.message.is_some()) {
            return false;
        }
        let index = self.found.len();
        let queue_id = key.name.text();
        let number = self.number();
        let track = self
            .tracks
            .entry(key)
            .or_insert_with(|| Track::new(stamp, number));
        track.message = Some(index);
        let message = Message {
            queue_id,
            host: relay
                .host
                .map(|h| String::from_utf8_lossy(h.in_(said.data)).into_owned()),
            at: stamp,
            span: (track.span.0.min(stamp.lo), track.span.1.max(stamp.hi)),
            ambiguous: track.ambiguous || stamp.ambiguous,
            path: path.to_path_buf(),
            line: said.line(),
            sender: track.sender.clone(),
            fate: track.fate,
            fate_line: track.fate_line.clone(),
        };
        let value = String::from_utf8_lossy(value.in_(said.data)).into_owned();
        self.found.push((value, message));
        true
    }

    /// A message that may have been committed though no message-id line names it.
    fn orphan_if_unnamed(&mut self, key: &Key, track: &Track) {
        if track.message.is_none() && !track.fate.refused() {
            let sender = match &track.sender {
                Sender::Known(sender) => Some(sender.clone()),
                _ => None,
            };
            let what = if track.named_by_relay {
                format!(
                    "{} (the relay gave it a Message-ID of its own: the one it was sent with was missing, or a header check removed it)",
                    key.name.text()
                )
            } else {
                key.name.text()
            };
            self.orphan(track.since, &what, sender);
        }
    }

    fn orphan(&mut self, (at, until): (f64, f64), what: &str, sender: Option<String>) {
        if self.orphans.len() < MAX_ORPHANS {
            self.orphans.push(Orphan {
                at,
                until,
                what: what.to_string(),
                sender,
            });
        } else {
            self.orphans_overflow = true;
        }
    }

    /// Widens what `key`'s lines span to `stamp`.
    fn touch(&mut self, key: &Key, stamp: Stamp) {
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
    /// only where nothing was said before. False when no track of `key` is kept.
    fn settle(
        &mut self,
        key: &Key,
        fate: Fate,
        sender: Option<read::SenderSpan>,
        said: &Said<'_>,
        stamp: Stamp,
    ) -> bool {
        // What `touch` does, on the one lookup.
        let Some(track) = self.tracks.get_mut(key) else {
            return false;
        };
        let (span, ambiguous, current, current_sender, current_line) = match track.message {
            Some(index) => {
                let message = &mut self.found[index].1;
                (
                    &mut message.span,
                    &mut message.ambiguous,
                    &mut message.fate,
                    &mut message.sender,
                    &mut message.fate_line,
                )
            }
            None => (
                &mut track.span,
                &mut track.ambiguous,
                &mut track.fate,
                &mut track.sender,
                &mut track.fate_line,
            ),
        };
        *span = (span.0.min(stamp.lo), span.1.max(stamp.hi));
        *ambiguous |= stamp.ambiguous;
        if let Some(sender) = sender {
            *current_sender = merge(current_sender, said.sender(sender));
        }
        let takes = match (*current, fate) {
            (now, _) if now.committed() => false,
            (_, new) if new.committed() => true,
            (Fate::Open, _) => true,
            _ => false,
        };
        if takes {
            *current = fate;
            *current_line = Some(said.line());
        }
        true
    }

    /// The next message's number.
    fn number(&mut self) -> u64 {
        self.numbered += 1;
        self.numbered
    }

    /// Drops queue ids that never got a message-id line within [`PENDING_FOR`], and
    /// forgets the identified ones as old: each entry only the message it was made for,
    /// never a later one the relay gave the same queue id.
    fn forget_pending(&mut self, now: f64) {
        while let Some(entry) = self.pending.front() {
            if now - entry.born < PENDING_FOR {
                break;
            }
            self.pending_popped += 1;
            if let Some(entry) = self.pending.pop_front()
                && entry.alive
                && let Some(track) = self.tracks.get(&entry.key)
                && track.number == entry.number
                && track.message.is_none()
                && let Some(old) = self.tracks.remove(&entry.key)
            {
                self.orphan_if_unnamed(&entry.key, &old);
            }
        }
        while let Some(born) = self.identified_order.front() {
            if now - born < IDENTIFIED_FOR {
                break;
            }
            self.identified_order.pop_front();
            self.identified_popped += 1;
        }
        // Entries popped stay in the map until swept: it holds at most about four times the
        // identified queue ids.
        if self.identified.len() > 4 * self.identified_order.len() + 4096 {
            let popped = self.identified_popped;
            self.identified.retain(|_, entry| *entry >= popped);
        }
    }

    /// Whether `key`'s message-id line named another Message-ID, not long ago.
    fn is_identified(&self, key: &Key) -> bool {
        self.identified
            .get(key)
            .is_some_and(|entry| *entry >= self.identified_popped)
    }

    /// Marks the entry in `pending` of a track just removed: it is forgotten without
    /// looking its queue id up.
    fn track_gone(&mut self, track: &Track) {
        if let Some(entry) = track.pending
            && let Some(at) = entry.checked_sub(self.pending_popped)
            && let Some(pending) = self.pending.get_mut(at as usize)
        {
            pending.alive = false;
        }
    }

    fn finish(mut self) -> Findings {
        let unnamed: Vec<(Key, Track)> = self
            .tracks
            .drain()
            .filter(|(_, track)| track.message.is_none())
            .collect();
        for (key, track) in unnamed {
            self.orphan_if_unnamed(&key, &track);
        }
        let open: Vec<(Key, Session)> = self.sessions.drain().collect();
        for (process, session) in open {
            let what = self.session_with_no_end(&process);
            self.orphan(session.since, &what, None);
        }
        // The maps drained above hold no order of their own: the orphans are put in one,
        // so a search reads the same however often it is made.
        self.orphans.sort_by(|a, b| {
            a.at.total_cmp(&b.at)
                .then_with(|| a.until.total_cmp(&b.until))
                .then_with(|| a.what.cmp(&b.what))
                .then_with(|| a.sender.cmp(&b.sender))
        });
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

/// A block taken apart, the file's end (None), or why it could not be read.
type Item = std::io::Result<Option<(read::Block, Vec<read::Record>)>>;
/// An [`Item`] and its place in the file's order.
type Parsed = (usize, Item);

/// Reads `source` into blocks numbered in the file's order, for the parsers; its end, or
/// why it could not be read, goes straight to the follower, numbered after the last.
fn read_blocks(
    source: Box<dyn Read + Send>,
    size: usize,
    to_parse: &std::sync::mpsc::SyncSender<(usize, read::Block)>,
    to_follow: &std::sync::mpsc::SyncSender<Parsed>,
) {
    let mut splitter = read::Splitter::new(source, size);
    let mut seq = 0;
    loop {
        match splitter.next_block() {
            Ok(Some(block)) => {
                if to_parse.send((seq, block)).is_err() {
                    return;
                }
            }
            Ok(None) => {
                let _ = to_follow.send((seq, Ok(None)));
                return;
            }
            Err(err) => {
                let _ = to_follow.send((seq, Err(err)));
                return;
            }
        }
        seq += 1;
    }
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

#[cfg(test)]
mod tests;
