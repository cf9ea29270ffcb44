//! A log's bytes taken apart at the speed of reading them: a file (decompressed on a
//! thread of its own when it is gzip) is cut into blocks of whole lines, each block is
//! read on every core into [`Record`]s (what each line is: damaged, stamped, the relay's
//! own, which of the few shapes that count), and the records are handed on in the file's
//! order to the one pass that follows messages and coverage ([`super::Scan`]).
//!
//! Nothing here decides what a line proves: it only finds what a line is, the same for a
//! line whatever block it falls in, so the records of a file read in one thread and read
//! on every core are the same.

use super::clock::{Clock, Stamp, Zone};
use super::line::{self, SyslogNames};
use std::collections::HashSet;
use std::io::Read;
use std::path::Path;

/// The most of one log line kept: Postfix's are a few hundred bytes; the rest of a longer
/// one (a damaged or hostile file, a line that never ends) is skipped, not held.
pub(super) const MAX_LINE: usize = 64 << 10;

/// How a search reads its files.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reading {
    /// Threads that take blocks apart (1: all of it on the caller's thread).
    pub threads: usize,
    /// The bytes of a block, about: a block ends at a line end.
    pub block: usize,
}

impl Default for Reading {
    fn default() -> Self {
        Self {
            threads: std::thread::available_parallelism().map_or(1, |n| n.get()),
            block: 2 << 20,
        }
    }
}

/// Whole lines of a file, as read.
pub(super) struct Block {
    pub data: Vec<u8>,
    /// Lines that took more bytes of the file than are kept of them (a line longer than
    /// [`MAX_LINE`], cut before its end): where each starts in `data`, how many bytes of
    /// it are kept there, and how many it took in all.
    pub long: Vec<(usize, usize, u64)>,
}

/// A line cut in two by a read, carried over to the next.
#[derive(Default)]
struct Pending {
    kept: Vec<u8>,
    consumed: u64,
    active: bool,
}

impl Pending {
    fn push(&mut self, bytes: &[u8]) {
        self.active = true;
        let room = MAX_LINE.saturating_sub(self.kept.len());
        self.kept.extend_from_slice(&bytes[..bytes.len().min(room)]);
        self.consumed += bytes.len() as u64;
    }

    /// Appends the line to `block` and forgets it.
    fn emit(&mut self, block: &mut Block) {
        if self.consumed > self.kept.len() as u64 {
            block
                .long
                .push((block.data.len(), self.kept.len(), self.consumed));
        }
        block.data.extend_from_slice(&self.kept);
        self.kept.clear();
        self.consumed = 0;
        self.active = false;
    }
}

/// Cuts a byte stream into blocks of whole lines.
pub(super) struct Splitter<R> {
    source: R,
    size: usize,
    pending: Pending,
    buffer: Vec<u8>,
    done: bool,
}

impl<R: Read> Splitter<R> {
    pub fn new(source: R, size: usize) -> Self {
        Self {
            source,
            size: size.max(1),
            pending: Pending::default(),
            buffer: Vec::new(),
            done: false,
        }
    }

    /// Fills the buffer with up to a block's bytes; false at the end of the stream.
    fn fill(&mut self) -> std::io::Result<bool> {
        self.buffer.resize(self.size, 0);
        let mut filled = 0;
        while filled < self.size {
            match self.source.read(&mut self.buffer[filled..]) {
                Ok(0) => break,
                Ok(n) => filled += n,
                Err(err) if err.kind() == std::io::ErrorKind::Interrupted => {}
                Err(err) => {
                    self.buffer.truncate(filled);
                    return Err(err);
                }
            }
        }
        self.buffer.truncate(filled);
        Ok(filled > 0)
    }

    /// The next block, None at the end. The file's last line, without its line end,
    /// ends the last block.
    pub fn next_block(&mut self) -> std::io::Result<Option<Block>> {
        while !self.done {
            let more = self.fill()?;
            let mut block = Block {
                data: Vec::with_capacity(self.buffer.len() + self.pending.kept.len()),
                long: Vec::new(),
            };
            if !more {
                self.done = true;
                if self.pending.active {
                    self.pending.emit(&mut block);
                    return Ok(Some(block));
                }
                return Ok(None);
            }
            let mut rest = &self.buffer[..];
            if self.pending.active {
                match memchr::memchr(b'\n', rest) {
                    Some(end) => {
                        self.pending.push(&rest[..=end]);
                        self.pending.emit(&mut block);
                        rest = &rest[end + 1..];
                    }
                    None => {
                        self.pending.push(rest);
                        continue;
                    }
                }
            }
            match memchr::memrchr(b'\n', rest) {
                Some(end) => {
                    block.data.extend_from_slice(&rest[..=end]);
                    let tail = &rest[end + 1..];
                    if !tail.is_empty() {
                        self.pending.push(tail);
                    }
                }
                None if !rest.is_empty() => self.pending.push(rest),
                None => {}
            }
            if !block.data.is_empty() {
                return Ok(Some(block));
            }
        }
        Ok(None)
    }
}

/// A file opened for reading, decompressed when it is gzip (told by its first bytes).
pub(super) fn open(path: &Path) -> std::io::Result<Box<dyn Read + Send>> {
    let mut raw = std::fs::File::open(path)?;
    let mut magic = [0u8; 2];
    let gzip = raw.read(&mut magic)? == 2 && magic == [0x1f, 0x8b];
    let raw = std::fs::File::open(path)?;
    Ok(if gzip {
        Box::new(flate2::read::MultiGzDecoder::new(
            std::io::BufReader::with_capacity(1 << 16, raw),
        ))
    } else {
        Box::new(raw)
    })
}

/// Bytes `from..to` of a block.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(super) struct Span {
    pub from: u32,
    pub to: u32,
}

impl Span {
    fn of(data: &[u8], part: &[u8]) -> Self {
        let from = part.as_ptr() as usize - data.as_ptr() as usize;
        Span {
            from: from as u32,
            to: (from + part.len()) as u32,
        }
    }

    pub fn in_<'d>(&self, data: &'d [u8]) -> &'d [u8] {
        &data[self.from as usize..self.to as usize]
    }
}

/// What a line of cleanup or a milter says became of a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Settled {
    Held,
    Rejected,
    Discarded,
}

/// The envelope sender a line names, where its shape names one once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum SenderSpan {
    Known(Span),
    Ambiguous,
}

/// What one of the relay's lines says, in the shapes that count (DESIGN §7).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Op {
    /// Another line of the relay's: it covers time and says nothing else.
    Nothing,
    SmtpdConnect,
    SmtpdClient {
        queue_id: Span,
    },
    SmtpdSettle {
        queue_id: Span,
        fate: Settled,
        sender: SenderSpan,
    },
    /// Lost connection or timeout during DATA or BDAT.
    SmtpdLost,
    /// `disconnect from`: how many messages it says the session took, when it says.
    SmtpdDisconnect {
        taken: Option<usize>,
    },
    CleanupMessageId {
        queue_id: Span,
        value: Span,
        wanted: bool,
    },
    CleanupSettle {
        queue_id: Span,
        fate: Settled,
        sender: SenderSpan,
    },
    QmgrRemoved {
        queue_id: Span,
    },
    QmgrActive {
        queue_id: Span,
        sender: Span,
    },
}

/// One of the relay's own lines.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Relay {
    pub host: Option<Span>,
    /// `program[pid]`.
    pub tag: Span,
    pub op: Op,
}

/// What one line is.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Kind {
    /// Not text, or not whole: read as nothing.
    Damaged { why: &'static str },
    Read {
        stamp: Option<Stamp>,
        /// It says the log lost lines.
        loss: bool,
        relay: Option<Relay>,
    },
}

/// One line of a block and what it is.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Record {
    /// The bytes kept of it (with its line end, when it has one and fits).
    pub line: Span,
    /// The bytes of the file it took.
    pub consumed: u64,
    /// It names a wanted Message-ID somewhere in its bytes.
    pub mentions: bool,
    pub kind: Kind,
}

/// What taking lines apart needs: the same for every block of a search.
pub(super) struct Parser<'w> {
    wanted: &'w HashSet<String>,
    clock: Clock,
    names: SyslogNames,
    mentions: line::Mentions,
}

impl<'w> Parser<'w> {
    pub fn new(wanted: &'w HashSet<String>, zone: &Zone, near: f64, names: SyslogNames) -> Self {
        Self {
            wanted,
            clock: Clock::new(zone, near),
            names,
            mentions: line::Mentions::new(),
        }
    }

    /// Every line of `block`, in order.
    pub fn parse(&self, block: &Block) -> Vec<Record> {
        let data = &block.data[..];
        let mut records = Vec::with_capacity(data.len() / 96 + 1);
        let mut long = block.long.iter().peekable();
        let mut start = 0;
        while start < data.len() {
            let (kept, consumed, end) = match long.peek() {
                // Cut by the reader: exactly its kept bytes, which may end without a line end.
                Some((at, kept, consumed)) if *at == start => {
                    long.next();
                    (&data[start..start + kept], *consumed, start + kept)
                }
                _ => {
                    let end = memchr::memchr(b'\n', &data[start..])
                        .map_or(data.len(), |at| start + at + 1);
                    let whole = end - start;
                    (&data[start..start + whole.min(MAX_LINE)], whole as u64, end)
                }
            };
            records.push(self.record(data, kept, consumed));
            start = end;
        }
        records
    }

    fn record(&self, data: &[u8], line: &[u8], consumed: u64) -> Record {
        let mentions = self.mentions_wanted(line);
        let kind = match damage(line, consumed) {
            Some(why) => Kind::Damaged { why },
            None => self.read(data, line),
        };
        Record {
            line: Span::of(data, line),
            consumed,
            mentions,
            kind,
        }
    }

    fn read(&self, data: &[u8], line: &[u8]) -> Kind {
        let stamped = line::stamped(line, &self.clock);
        let relay = stamped.as_ref().and_then(|s| {
            let relay = s.relay_line(&self.names)?;
            Some(Relay {
                host: relay.host.map(|h| Span::of(data, h)),
                tag: Span::of(data, relay.tag),
                op: self.op(data, &relay),
            })
        });
        Kind::Read {
            stamp: stamped.map(|s| s.stamp),
            loss: line::reports_loss(line),
            relay,
        }
    }

    /// Whether `line` names a wanted Message-ID anywhere.
    fn mentions_wanted(&self, line: &[u8]) -> bool {
        self.mentions
            .in_line(line)
            .any(|id| std::str::from_utf8(id).is_ok_and(|id| self.wanted.contains(id)))
    }

    fn op(&self, data: &[u8], line: &line::RelayLine<'_>) -> Op {
        match line.daemon {
            b"smtpd" => smtpd(data, line.text),
            b"cleanup" => self.cleanup(data, line.text),
            b"qmgr" => qmgr(data, line.text),
            _ => Op::Nothing,
        }
    }

    fn cleanup(&self, data: &[u8], text: &[u8]) -> Op {
        let Some((queue_id, after)) = queue_id(text) else {
            return Op::Nothing;
        };
        let queue_id = Span::of(data, queue_id);
        if let Some(value) = after.strip_prefix(b"message-id=") {
            let value = trim_end(value);
            let wanted = std::str::from_utf8(value).is_ok_and(|v| self.wanted.contains(v));
            return Op::CleanupMessageId {
                queue_id,
                value: Span::of(data, value),
                wanted,
            };
        }
        let fate = if after.starts_with(b"hold: ") || after.starts_with(b"milter-hold: ") {
            Settled::Held
        } else if after.starts_with(b"reject: ") || after.starts_with(b"milter-reject: ") {
            Settled::Rejected
        } else if after.starts_with(b"discard: ") || after.starts_with(b"milter-discard: ") {
            Settled::Discarded
        } else {
            return Op::Nothing;
        };
        Op::CleanupSettle {
            queue_id,
            fate,
            sender: check_sender(data, after),
        }
    }
}

/// A line's bytes without the whitespace at its end, as `str::trim_end` takes it.
fn trim_end(bytes: &[u8]) -> &[u8] {
    match std::str::from_utf8(bytes) {
        Ok(text) => text.trim_end().as_bytes(),
        Err(_) => bytes,
    }
}

fn smtpd(data: &[u8], text: &[u8]) -> Op {
    if text.starts_with(b"connect from ") {
        return Op::SmtpdConnect;
    }
    if let Some((queue_id, after)) = queue_id(text) {
        let queue_id = Span::of(data, queue_id);
        return if after.starts_with(b"client=") {
            Op::SmtpdClient { queue_id }
        } else if after.starts_with(b"hold: ") || after.starts_with(b"milter-hold: ") {
            Op::SmtpdSettle {
                queue_id,
                fate: Settled::Held,
                sender: check_sender(data, after),
            }
        } else if after.starts_with(b"milter-reject: ") {
            Op::SmtpdSettle {
                queue_id,
                fate: Settled::Rejected,
                sender: check_sender(data, after),
            }
        } else {
            Op::Nothing
        };
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
        return Op::SmtpdLost;
    }
    if text.starts_with(b"disconnect from ") {
        return Op::SmtpdDisconnect {
            taken: messages_taken(text),
        };
    }
    Op::Nothing
}

fn qmgr(data: &[u8], text: &[u8]) -> Op {
    let Some((queue_id, after)) = queue_id(text) else {
        return Op::Nothing;
    };
    let queue_id = Span::of(data, queue_id);
    if after == b"removed" {
        return Op::QmgrRemoved { queue_id };
    }
    match queue_active_sender(after) {
        Some(sender) => Op::QmgrActive {
            queue_id,
            sender: Span::of(data, sender),
        },
        None => Op::Nothing,
    }
}

/// Why a line cannot be read at all, whatever it says: it is not text, or not whole.
pub(super) fn damage(line: &[u8], consumed: u64) -> Option<&'static str> {
    if consumed > line.len() as u64 {
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

/// `QID: rest`, where QID has the shape of a Postfix queue id.
pub(super) fn queue_id(text: &[u8]) -> Option<(&[u8], &[u8])> {
    let end = memchr::memmem::find(text, b": ")?;
    let id = &text[..end];
    is_queue_id(id).then(|| (id, &text[end + 2..]))
}

/// Postfix queue ids: short (upper-case hex) or long (letters and digits); never a word
/// such as `warning` or the `NOQUEUE` of a rejected session.
pub(super) fn is_queue_id(id: &[u8]) -> bool {
    (6..=20).contains(&id.len())
        && id.iter().all(u8::is_ascii_alphanumeric)
        && id != b"NOQUEUE"
        && !id.iter().all(u8::is_ascii_lowercase)
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
pub(super) fn queue_active_sender(text: &[u8]) -> Option<&[u8]> {
    let rest = text.strip_suffix(b" (queue active)")?;
    let rest = strip_number_field(rest, b", nrcpt=")?;
    let rest = strip_number_field(rest, b", size=")?;
    let sender = rest.strip_prefix(b"from=<")?.strip_suffix(b">")?;
    std::str::from_utf8(sender).ok().map(str::as_bytes)
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
pub(super) fn check_sender(data: &[u8], text: &[u8]) -> SenderSpan {
    let mut found = memchr::memmem::find_iter(text, b"; from=<");
    let (Some(at), None) = (found.next(), found.next()) else {
        return SenderSpan::Ambiguous;
    };
    let tail = &text[at + b"; from=<".len()..];
    let mut ends = memchr::memmem::find_iter(tail, b"> to=<");
    let (Some(end), None) = (ends.next(), ends.next()) else {
        return SenderSpan::Ambiguous;
    };
    match std::str::from_utf8(&tail[..end]) {
        Ok(_) => SenderSpan::Known(Span::of(data, &tail[..end])),
        Err(_) => SenderSpan::Ambiguous,
    }
}
