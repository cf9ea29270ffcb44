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
use std::io::Read;
use std::path::Path;

/// The most of one log line kept: Postfix's are a few hundred bytes; the rest of a longer
/// one (a damaged or hostile file, a line that never ends) is skipped, not held.
pub(super) const MAX_LINE: usize = 64 << 10;

/// How a search reads its files.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reading {
    /// Threads that take blocks apart, the caller's among them (1: all of it on the
    /// caller's thread, which also follows what they find).
    pub threads: usize,
    /// The bytes of a block, about: a block ends at a line end.
    pub block: usize,
}

impl Default for Reading {
    fn default() -> Self {
        Self {
            threads: std::thread::available_parallelism().map_or(1, |n| n.get()),
            // Blocks in flight between the reader, the parsers and the pass that follows
            // them hold their lines and records: on the 1 GB benchmark log, 256 KB reads
            // as fast as 2 MB did and holds about 45 MB less.
            block: 256 << 10,
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

/// Cuts a byte stream into blocks of whole lines. Bytes are read straight into the
/// block that hands them on; only the start of a line cut by a read is copied, into the
/// next block.
pub(super) struct Splitter<R> {
    source: R,
    size: usize,
    /// The start of a line the last read cut, when short enough to keep whole.
    carry: Vec<u8>,
    /// A line longer than any kept, being read to its end.
    pending: Pending,
    buffer: Vec<u8>,
    done: bool,
}

impl<R: Read> Splitter<R> {
    pub fn new(source: R, size: usize) -> Self {
        Self {
            source,
            size: size.max(1),
            carry: Vec::new(),
            pending: Pending::default(),
            buffer: Vec::new(),
            done: false,
        }
    }

    /// Reads up to a block's bytes onto the end of `into`; how many.
    fn fill(&mut self, into: &mut Vec<u8>) -> std::io::Result<usize> {
        let start = into.len();
        into.resize(start + self.size, 0);
        let mut filled = 0;
        let result = loop {
            if filled == self.size {
                break Ok(filled);
            }
            match self.source.read(&mut into[start + filled..]) {
                Ok(0) => break Ok(filled),
                Ok(n) => filled += n,
                Err(err) if err.kind() == std::io::ErrorKind::Interrupted => {}
                Err(err) => break Err(err),
            }
        };
        into.truncate(start + filled);
        result
    }

    /// The next block, None at the end. The file's last line, without its line end,
    /// ends the last block.
    pub fn next_block(&mut self) -> std::io::Result<Option<Block>> {
        while !self.done {
            if self.pending.active {
                if let Some(block) = self.past_long_line()? {
                    return Ok(Some(block));
                }
                continue;
            }
            let mut data = std::mem::take(&mut self.carry);
            if self.fill(&mut data)? == 0 {
                self.done = true;
                // The file's last line, without its end (if any).
                return Ok((!data.is_empty()).then(|| Block {
                    data,
                    long: Vec::new(),
                }));
            }
            match memchr::memrchr(b'\n', &data) {
                Some(end) => {
                    let tail = &data[end + 1..];
                    if tail.len() > MAX_LINE {
                        self.pending.push(tail);
                    } else {
                        self.carry.extend_from_slice(tail);
                    }
                    data.truncate(end + 1);
                    return Ok(Some(Block {
                        data,
                        long: Vec::new(),
                    }));
                }
                None if data.len() > MAX_LINE => self.pending.push(&data),
                None => self.carry = data,
            }
        }
        Ok(None)
    }

    /// Reads on through a line longer than any kept: a block that starts with what is
    /// kept of it, once its end is read (or the file's).
    fn past_long_line(&mut self) -> std::io::Result<Option<Block>> {
        let mut buffer = std::mem::take(&mut self.buffer);
        buffer.clear();
        let filled = self.fill(&mut buffer);
        self.buffer = buffer;
        let mut block = Block {
            data: Vec::new(),
            long: Vec::new(),
        };
        if filled? == 0 {
            self.done = true;
            self.pending.emit(&mut block);
            return Ok(Some(block));
        }
        let Some(end) = memchr::memchr(b'\n', &self.buffer) else {
            let buffer = std::mem::take(&mut self.buffer);
            self.pending.push(&buffer);
            self.buffer = buffer;
            return Ok(None);
        };
        let buffer = std::mem::take(&mut self.buffer);
        self.pending.push(&buffer[..=end]);
        self.pending.emit(&mut block);
        // The rest: whole lines, and the start of one the read cut.
        let rest = &buffer[end + 1..];
        match memchr::memrchr(b'\n', rest) {
            Some(last) => {
                block.data.extend_from_slice(&rest[..=last]);
                let tail = &rest[last + 1..];
                if tail.len() > MAX_LINE {
                    self.pending.push(tail);
                } else {
                    self.carry.extend_from_slice(tail);
                }
            }
            None if rest.len() > MAX_LINE => self.pending.push(rest),
            None => self.carry.extend_from_slice(rest),
        }
        self.buffer = buffer;
        Ok(Some(block))
    }
}

/// The compressor whose magic bytes `start` begins with, among those a relay log is not
/// read in (rotation's `compresscmd` set to another), and the command that undoes it.
fn other_compression(start: &[u8]) -> Option<(&'static str, &'static str)> {
    match start {
        [0xfd, b'7', b'z', b'X', b'Z', 0, ..] => Some(("xz", "xz -dk")),
        [0x28, 0xb5, 0x2f, 0xfd, ..] => Some(("zstd", "zstd -d")),
        // `BZh` and the block size, 1 to 9: a line of text may begin `BZh` too.
        [b'B', b'Z', b'h', b'1'..=b'9', ..] => Some(("bzip2", "bzip2 -dk")),
        [0x04, 0x22, 0x4d, 0x18, ..] => Some(("lz4", "lz4 -d")),
        _ => None,
    }
}

/// A file opened for reading, decompressed when it is gzip (told by its first bytes).
/// One compressed otherwise is refused by name: read as text, its bytes would only be
/// damaged lines.
pub(super) fn open(path: &Path) -> std::io::Result<Box<dyn Read + Send>> {
    let mut magic = Vec::with_capacity(6);
    std::fs::File::open(path)?.take(6).read_to_end(&mut magic)?;
    if let Some((name, command)) = other_compression(&magic) {
        // The path as one word of the command, when it can be one.
        let how = path
            .to_str()
            .and_then(|text| crate::model::command::word("the path", text).ok())
            .map(|word| format!(" ({command} -- {word})"))
            .unwrap_or_default();
        return Err(std::io::Error::other(format!(
            "compressed with {name}, which unsctl does not read (a relay log is plain or gzip): decompress it first{how}"
        )));
    }
    let gzip = magic.starts_with(&[0x1f, 0x8b]);
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

/// A queue id or a `program[pid]` of a line, with the hash of it and its host's name that
/// the one pass keys it by: hashed here, on every core, so that pass does not.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Name {
    pub span: Span,
    pub hash: u64,
}

/// What a line of cleanup or a milter says became of a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Settled {
    Held,
    Rejected,
    Discarded,
}

/// What the Message-ID of cleanup's `message-id=` line says of its message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Names {
    /// One asked about.
    Wanted,
    /// Another, the message was sent with.
    Other,
    /// One cleanup made up ([`made_by_relay`]): what it was sent with is not known.
    Unknown,
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
        queue_id: Name,
    },
    SmtpdSettle {
        queue_id: Name,
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
        queue_id: Name,
        value: Span,
        names: Names,
    },
    CleanupSettle {
        queue_id: Name,
        fate: Settled,
        sender: SenderSpan,
    },
    QmgrRemoved {
        queue_id: Name,
    },
    QmgrActive {
        queue_id: Name,
        sender: Span,
    },
    /// The relay's Postfix starting: postfix-script's `starting the Postfix mail system`,
    /// or master's `daemon started`.
    Starting {
        master: bool,
    },
    /// The relay's Postfix stopping as it was told to: postfix-script's `stopping the
    /// Postfix mail system` (or `aborting`), or master's `terminating on signal`.
    Stopping,
}

/// One of the relay's own lines.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Relay {
    pub host: Option<Span>,
    /// `program[pid]`.
    pub tag: Name,
    pub op: Op,
}

/// What one line is.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Kind {
    /// Not text, or not whole: read as nothing.
    Damaged { why: &'static str },
    Read {
        stamp: Option<Stamp>,
        /// It says the log lost lines, or marks where it may have.
        loss: Option<super::Lost>,
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
    wanted: &'w super::Wanted,
    clock: Clock,
    names: SyslogNames,
    mentions: line::Mentions,
    hasher: foldhash::fast::RandomState,
    /// The loss rule's needles, searched for in a whole block at once.
    loss_needles: [memchr::memmem::Finder<'static>; 3],
    /// The block being read, lowered.
    lowered: std::cell::RefCell<Vec<u8>>,
    /// The relay's own prefixes read so far (`host program[pid]: `), each with what it
    /// was read as.
    prefixes: std::cell::RefCell<Prefixes>,
}

/// The most prefixes a parser remembers before it starts again.
const PREFIXES_KEPT: usize = 4096;

type Prefixes = std::collections::HashMap<Box<[u8]>, Prefix, foldhash::fast::RandomState>;

/// One of the relay's prefixes, `host program[pid]: ` as a line's bytes after its stamp
/// start, and what [`line::relay_line`] read in it: where each part stands from the
/// prefix's start, and the hash of its host and `program[pid]`. That reading looks at no
/// byte past the prefix, so a line that starts with the same bytes reads the same.
struct Prefix {
    host: Option<(u32, u32)>,
    tag: (u32, u32),
    daemon: (u32, u32),
    tag_hash: u64,
}

/// Where a block's lines may say something, found by searching the whole block once:
/// the loss rule's needles in the lowered block, and Message-IDs of the shape unsctl
/// writes.
struct Hits {
    /// Starts of the loss needles' matches, in order, each with which needle it is.
    loss: Vec<(usize, usize)>,
    mention: Vec<usize>,
    /// The block is text with no NUL byte: no line of it is damaged but by its end.
    clean: bool,
}

impl<'w> Parser<'w> {
    /// `hasher` is the one pass's: every parser of a search hashes names alike.
    pub fn new(
        wanted: &'w super::Wanted,
        zone: &Zone,
        near: f64,
        names: SyslogNames,
        hasher: foldhash::fast::RandomState,
    ) -> Self {
        Self {
            wanted,
            clock: Clock::new(zone, near),
            names,
            mentions: line::Mentions::new(),
            hasher,
            loss_needles: line::LOSS_NEEDLES
                .map(|needle| memchr::memmem::Finder::new(needle).into_owned()),
            lowered: std::cell::RefCell::new(Vec::new()),
            prefixes: std::cell::RefCell::new(Prefixes::default()),
        }
    }

    /// The hits of `data`, searched once.
    fn hits(&self, data: &[u8]) -> Hits {
        let mut lowered = self.lowered.borrow_mut();
        lowered.clear();
        lowered.extend_from_slice(data);
        lowered.make_ascii_lowercase();
        let mut loss: Vec<(usize, usize)> = Vec::new();
        for (which, needle) in self.loss_needles.iter().enumerate() {
            // Overlapping matches too: a match that runs from a line cut short into the
            // next must not hide one that starts in the next ("essag" + "essage").
            let mut at = 0;
            while let Some(found) = needle.find(&lowered[at..]) {
                loss.push((at + found, which));
                at += found + 1;
            }
        }
        loss.sort_unstable();
        Hits {
            loss,
            mention: self.mentions.positions(data).collect(),
            clean: memchr::memchr(0, data).is_none() && std::str::from_utf8(data).is_ok(),
        }
    }

    /// `name` of a line of `host` (empty: a line that names none), with its hash.
    fn name(&self, data: &[u8], host: &[u8], name: &[u8]) -> Name {
        use std::hash::BuildHasher;
        Name {
            span: Span::of(data, name),
            hash: self.hasher.hash_one((host, name)),
        }
    }

    /// The hash of a relay line's `program[pid]` and host, as [`Parser::name`] makes it.
    fn tag_hash(&self, relay: &line::RelayLine<'_>) -> u64 {
        use std::hash::BuildHasher;
        self.hasher.hash_one((relay.host_key(), relay.tag))
    }

    /// Every line of `block`, in order.
    pub fn parse(&self, block: &Block) -> Vec<Record> {
        let data = &block.data[..];
        let hits = self.hits(data);
        let mut loss = hits.loss.iter().peekable();
        let mut mention = hits.mention.iter().peekable();
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
            let (from, to) = (start, start + kept.len());
            let mentions = within(&mut mention, from, to) && self.mentions_wanted(kept);
            let whole = consumed == kept.len() as u64 && kept.ends_with(b"\n");
            let damaged = if hits.clean && whole {
                None
            } else {
                damage(kept, consumed)
            };
            let kind = match damaged {
                Some(why) => Kind::Damaged { why },
                None => {
                    let said = match needles_within(&mut loss, from, to) {
                        Some(held) => {
                            line::loss_words_holding(&self.lowered.borrow()[from..to], held)
                        }
                        None => false,
                    };
                    let loss = if said {
                        Some(super::Lost::Said)
                    } else if line::marks_a_reboot(kept) {
                        Some(super::Lost::Reboot)
                    } else {
                        None
                    };
                    self.read(data, kept, loss)
                }
            };
            records.push(Record {
                line: Span::of(data, kept),
                consumed,
                mentions,
                kind,
            });
            start = end;
        }
        records
    }

    fn read(&self, data: &[u8], line: &[u8], loss: Option<super::Lost>) -> Kind {
        let stamped = line::stamped(line, &self.clock);
        let relay = stamped.as_ref().and_then(|s| {
            let (relay, tag_hash) = if s.rfc5424 {
                let relay = s.relay_line(&self.names)?;
                let tag_hash = self.tag_hash(&relay);
                (relay, tag_hash)
            } else {
                self.relay_line(s.rest)?
            };
            Some(Relay {
                host: relay.host.map(|h| Span::of(data, h)),
                tag: Name {
                    span: Span::of(data, relay.tag),
                    hash: tag_hash,
                },
                op: self.op(data, &relay),
            })
        });
        Kind::Read {
            stamp: stamped.map(|s| s.stamp),
            loss,
            relay,
        }
    }

    /// [`line::relay_line`] of `rest`, with the hash of its host and `program[pid]`:
    /// remembered by the bytes it read, so the lines of a process read it once.
    fn relay_line<'l>(&self, rest: &'l [u8]) -> Option<(line::RelayLine<'l>, u64)> {
        let part = |(from, to): (u32, u32)| &rest[from as usize..to as usize];
        // A prefix remembered is exactly the bytes a reading looked at: one that ends at
        // this line's first "]: " and is the line's start reads as it did.
        if let Some(end) = line::find(rest, b"]: ")
            && let Some(seen) = self.prefixes.borrow().get(&rest[..end + 3])
        {
            let relay = line::RelayLine {
                host: seen.host.map(part),
                tag: part(seen.tag),
                daemon: part(seen.daemon),
                text: &rest[end + 3..],
            };
            return Some((relay, seen.tag_hash));
        }
        let relay = line::relay_line(rest, &self.names)?;
        let tag_hash = self.tag_hash(&relay);
        let at = |bytes: &[u8]| {
            let from = bytes.as_ptr() as usize - rest.as_ptr() as usize;
            (from as u32, (from + bytes.len()) as u32)
        };
        let length = relay.text.as_ptr() as usize - rest.as_ptr() as usize;
        let mut prefixes = self.prefixes.borrow_mut();
        if prefixes.len() >= PREFIXES_KEPT {
            prefixes.clear();
        }
        prefixes.insert(
            rest[..length].into(),
            Prefix {
                host: relay.host.map(at),
                tag: at(relay.tag),
                daemon: at(relay.daemon),
                tag_hash,
            },
        );
        Some((relay, tag_hash))
    }

    /// Whether `line` names a wanted Message-ID anywhere.
    fn mentions_wanted(&self, line: &[u8]) -> bool {
        self.mentions
            .in_line(line)
            .any(|id| std::str::from_utf8(id).is_ok_and(|id| self.wanted.contains(id)))
    }

    fn op(&self, data: &[u8], line: &line::RelayLine<'_>) -> Op {
        let name = |id: &[u8]| self.name(data, line.host_key(), id);
        match line.daemon {
            b"smtpd" => smtpd(data, line.text, name),
            b"cleanup" => self.cleanup(data, line.text, name),
            b"qmgr" => qmgr(data, line.text, name),
            b"master" => master(line.text),
            b"postfix-script" => postfix_script(line.text),
            _ => Op::Nothing,
        }
    }

    fn cleanup(&self, data: &[u8], text: &[u8], name: impl Fn(&[u8]) -> Name) -> Op {
        let Some((queue_id_bytes, after)) = queue_id(text) else {
            return Op::Nothing;
        };
        let queue_id = name(queue_id_bytes);
        if let Some(value) = after.strip_prefix(b"message-id=") {
            let value = trim_end(value);
            let names = if std::str::from_utf8(value).is_ok_and(|v| self.wanted.contains(v)) {
                Names::Wanted
            } else if made_by_relay(value, queue_id_bytes) {
                Names::Unknown
            } else {
                Names::Other
            };
            return Op::CleanupMessageId {
                queue_id,
                value: Span::of(data, value),
                names,
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

/// Whether a hit of `hits` starts in `from..to`, passing the hits before it.
fn within(
    hits: &mut std::iter::Peekable<std::slice::Iter<'_, usize>>,
    from: usize,
    to: usize,
) -> bool {
    while hits.next_if(|at| **at < from).is_some() {}
    hits.peek().is_some_and(|at| **at < to)
}

/// Which of the loss needles stand whole in `from..to`, passing the hits that start
/// before its end; None when none does. A match that runs on past `to` (into the next
/// line) is not the line's.
fn needles_within(
    hits: &mut std::iter::Peekable<std::slice::Iter<'_, (usize, usize)>>,
    from: usize,
    to: usize,
) -> Option<[bool; 3]> {
    let mut held = [false; 3];
    let mut any = false;
    while let Some((at, which)) = hits.next_if(|(at, _)| *at < to) {
        if *at >= from && at + line::LOSS_NEEDLES[*which].len() <= to {
            held[*which] = true;
            any = true;
        }
    }
    any.then_some(held)
}

/// A line's bytes without the whitespace at its end, as `str::trim_end` takes it.
fn trim_end(bytes: &[u8]) -> &[u8] {
    match std::str::from_utf8(bytes) {
        Ok(text) => text.trim_end().as_bytes(),
        Err(_) => bytes,
    }
}

fn smtpd(data: &[u8], text: &[u8], name: impl Fn(&[u8]) -> Name) -> Op {
    if text.starts_with(b"connect from ") {
        return Op::SmtpdConnect;
    }
    if let Some((queue_id, after)) = queue_id(text) {
        let queue_id = name(queue_id);
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

fn qmgr(data: &[u8], text: &[u8], name: impl Fn(&[u8]) -> Name) -> Op {
    let Some((queue_id, after)) = queue_id(text) else {
        return Op::Nothing;
    };
    let queue_id = name(queue_id);
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

/// master's start (`daemon started -- version ...`) and its end when told
/// (`terminating on signal 15`).
fn master(text: &[u8]) -> Op {
    if text.starts_with(b"daemon started") {
        Op::Starting { master: true }
    } else if text.starts_with(b"terminating on signal ") {
        Op::Stopping
    } else {
        Op::Nothing
    }
}

/// What `postfix start` writes before it starts master, and `postfix stop` (or `drain`,
/// or `abort`) before it stops it.
fn postfix_script(text: &[u8]) -> Op {
    match text {
        b"starting the Postfix mail system" => Op::Starting { master: false },
        b"stopping the Postfix mail system" | b"aborting the Postfix mail system" => Op::Stopping,
        _ => Op::Nothing,
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
    let end = line::find(text, b": ")?;
    let id = &text[..end];
    is_queue_id(id).then(|| (id, &text[end + 2..]))
}

/// Whether `value` is the Message-ID cleanup makes for a message that has none (when a
/// header check removed it, too): `<YYYYMMDDhhmmss.QUEUEID@myhostname>`, with the queue
/// id of the message's own line. What the message was sent with is not known.
pub(super) fn made_by_relay(value: &[u8], queue_id: &[u8]) -> bool {
    let Some(rest) = value.strip_prefix(b"<") else {
        return false;
    };
    rest.len() > 15
        && rest[..14].iter().all(u8::is_ascii_digit)
        && rest[14] == b'.'
        && rest[15..]
            .strip_prefix(queue_id)
            .is_some_and(|after| after.starts_with(b"@") && after.ends_with(b">"))
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
pub(super) fn messages_taken(text: &[u8]) -> Option<usize> {
    // One pass over the tokens, where the rule was first written with two.
    let mut counts = false;
    let mut taken: usize = 0;
    for token in text.split(|b| *b == b' ') {
        if token.starts_with(b"commands=") {
            counts = true;
        }
        let Some(count) = token
            .strip_prefix(b"data=")
            .or_else(|| token.strip_prefix(b"bdat="))
        else {
            continue;
        };
        let succeeded = count.split(|b| *b == b'/').next().unwrap_or(count);
        let succeeded = std::str::from_utf8(succeeded)
            .ok()
            .and_then(|n| n.parse::<usize>().ok())
            .unwrap_or(usize::MAX);
        taken = taken.saturating_add(succeeded);
    }
    counts.then_some(taken)
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
    let at = line::rfind(text, name)?;
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
