//! One log line taken apart: a container runtime's prefix (`docker compose logs`'
//! `service | `, `docker logs -t`'s or `kubectl logs --timestamps`' RFC 3339 stamp), the
//! line's stamp, then `host program[pid]: text`, where a container image may write a
//! level word in place of the host. Only a line whose program is one of the relay's
//! Postfix daemons, under its syslog name, is the relay's own; everything else is read
//! for two things only: whether it says the log lost lines, and whether it mentions a
//! Message-ID asked about.

use super::clock::{Clock, Stamp};

/// The syslog names the relay logs under: `postfix` (and its multi-instance names such
/// as `postfix-out`) unless the operator named others with `--relay-syslog-name`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SyslogNames(Vec<String>);

impl SyslogNames {
    pub fn new(names: impl IntoIterator<Item = String>) -> Self {
        Self(
            names
                .into_iter()
                .map(|n| n.trim().to_string())
                .filter(|n| !n.is_empty())
                .collect(),
        )
    }

    /// The names given, empty for Postfix's own.
    pub fn given(&self) -> &[String] {
        &self.0
    }

    fn accepts(&self, name: &[u8]) -> bool {
        if self.0.is_empty() {
            return name == b"postfix"
                || name
                    .strip_prefix(b"postfix-")
                    .is_some_and(|instance| !instance.is_empty());
        }
        self.0.iter().any(|n| n.as_bytes() == name)
    }
}

/// Postfix's programs, as they name themselves in a log: a line from any other program
/// under the relay's syslog name is not one unsctl can read.
const DAEMONS: &[&[u8]] = &[
    b"anvil",
    b"bounce",
    b"cleanup",
    b"defer",
    b"discard",
    b"dnsblog",
    b"error",
    b"flush",
    b"lmtp",
    b"local",
    b"master",
    b"oqmgr",
    b"pickup",
    b"pipe",
    b"postdrop",
    b"postfix-script",
    b"postlogd",
    b"postqueue",
    b"postscreen",
    b"postsuper",
    b"proxymap",
    b"qmgr",
    b"qmqpd",
    b"scache",
    b"sendmail",
    b"showq",
    b"smtp",
    b"smtpd",
    b"spawn",
    b"tlsmgr",
    b"tlsproxy",
    b"trace",
    b"trivial-rewrite",
    b"verify",
    b"virtual",
];

/// Where `needle` first stands in `haystack`: found by its first byte, for the short
/// needles of a line's shape, with no searcher to build for each line.
pub fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    let (first, rest) = needle.split_first()?;
    memchr::memchr_iter(*first, haystack).find(|&at| haystack[at + 1..].starts_with(rest))
}

/// Where `needle` last stands in `haystack`, as [`find`].
pub fn rfind(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    let (first, rest) = needle.split_first()?;
    memchr::memrchr_iter(*first, haystack).find(|&at| haystack[at + 1..].starts_with(rest))
}

/// Whether `name` is one of Postfix's programs; the busy ones are asked first.
fn is_daemon(name: &[u8]) -> bool {
    matches!(name, b"smtpd" | b"cleanup" | b"qmgr" | b"smtp") || DAEMONS.contains(&name)
}

/// Whether `word` is one of [`LEVELS`], in any case.
pub(super) fn is_level(word: &[u8]) -> bool {
    if !(3..=8).contains(&word.len()) {
        return false;
    }
    let mut lower = [0u8; 8];
    for (to, from) in lower.iter_mut().zip(word) {
        *to = from.to_ascii_lowercase();
    }
    let lower = &lower[..word.len()];
    LEVELS.iter().any(|level| level.as_bytes() == lower)
}

/// Words container images write where syslog writes the host.
pub(super) const LEVELS: &[&str] = &[
    "emerg", "alert", "crit", "critical", "err", "error", "warn", "warning", "notice", "info",
    "debug", "trace", "fatal",
];

/// A line with its stamp read.
pub struct Stamped<'a> {
    pub stamp: Stamp,
    /// After the stamp (and any stamp a container runtime put before it), from the first
    /// character that is not a space.
    pub rest: &'a [u8],
    /// The line is RFC 5424's (`<PRI>1 TIMESTAMP HOST APP PROCID MSGID SD MSG`): `rest`
    /// starts at HOST.
    pub rfc5424: bool,
}

impl<'a> Stamped<'a> {
    /// The line as one of the relay's own, if it is one.
    pub fn relay_line(&self, names: &SyslogNames) -> Option<RelayLine<'a>> {
        if self.rfc5424 {
            relay_line_5424(self.rest, names)
        } else {
            relay_line(self.rest, names)
        }
    }
}

/// The stamp of `line` and what follows it; None for a line with no stamp read.
pub fn stamped<'a>(line: &'a [u8], clock: &Clock) -> Option<Stamped<'a>> {
    let line = trim_end(line);
    let line = without_compose_prefix(line);
    if let Some(after) = rfc5424_header(without_runtime_stamp(line)) {
        let end = memchr::memchr(b' ', after).unwrap_or(after.len());
        // A NILVALUE stamp (`-`) says nothing of when.
        let (stamp, _) = clock.stamp(&after[..end])?;
        return Some(Stamped {
            stamp,
            rest: after_space(&after[end..])?,
            rfc5424: true,
        });
    }
    let (stamp, end) = clock.stamp(line)?;
    let mut rest = after_space(&line[end..])?;
    // `docker logs -t` and `kubectl logs --timestamps` put their own RFC 3339 stamp before
    // the line's: the runtime's, which carries its year and zone, is the one kept.
    if line.first().is_some_and(u8::is_ascii_digit)
        && line.get(4) == Some(&b'-')
        && let Some((_, inner)) = clock.stamp(rest)
    {
        rest = after_space(&rest[inner..])?;
    }
    Some(Stamped {
        stamp,
        rest,
        rfc5424: false,
    })
}

/// `line` after a container runtime's RFC 3339 stamp and its space, where one stands
/// before an RFC 5424 line (`docker logs -t`, `kubectl logs --timestamps`).
fn without_runtime_stamp(line: &[u8]) -> &[u8] {
    if !line.first().is_some_and(u8::is_ascii_digit) || line.get(4) != Some(&b'-') {
        return line;
    }
    match memchr::memchr(b' ', line) {
        Some(end) if line.get(end + 1) == Some(&b'<') => &line[end + 1..],
        _ => line,
    }
}

/// What follows RFC 5424's `<PRI>1 `: `PRI` one to three digits, version 1.
fn rfc5424_header(line: &[u8]) -> Option<&[u8]> {
    let rest = line.strip_prefix(b"<")?;
    let digits = rest.iter().take_while(|b| b.is_ascii_digit()).count();
    if !(1..=3).contains(&digits) {
        return None;
    }
    rest[digits..].strip_prefix(b">1 ")
}

/// `HOST APP PROCID MSGID SD MSG` of an RFC 5424 line, read as one of the relay's own:
/// APP is the program (`postfix/smtpd`), PROCID its pid, MSG its text after the
/// structured data (`-`, or `[...]` elements, whose quoted values may hold spaces and
/// escaped brackets) and any byte-order mark.
fn relay_line_5424<'a>(rest: &'a [u8], names: &SyslogNames) -> Option<RelayLine<'a>> {
    let mut fields = rest.splitn(4, |b| *b == b' ');
    let host = fields.next()?;
    let app = fields.next()?;
    let pid = fields.next()?;
    let after_pid = fields.next()?;
    let (_msgid, sd_and_text) = after_pid.split_at(memchr::memchr(b' ', after_pid)?);
    let text = after_structured_data(&sd_and_text[1..])?;
    let text = text.strip_prefix(b"\xef\xbb\xbf").unwrap_or(text);
    if pid.is_empty() || !pid.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let slash = memchr::memchr(b'/', app)?;
    let daemon = &app[memchr::memrchr(b'/', app)? + 1..];
    if !names.accepts(&app[..slash]) || !is_daemon(daemon) {
        return None;
    }
    // APP and PROCID side by side: one process, as `program[pid]` is.
    let tag_start = host.len() + 1;
    let tag = &rest[tag_start..tag_start + app.len() + 1 + pid.len()];
    Some(RelayLine {
        host: (host != b"-").then_some(host),
        tag,
        daemon,
        text,
    })
}

/// What follows the structured data: after `-`, or after the last `[...]` element, a
/// space and the message (or nothing).
fn after_structured_data(sd: &[u8]) -> Option<&[u8]> {
    let mut at = 0;
    if sd.first() == Some(&b'-') {
        at = 1;
    } else {
        while sd.get(at) == Some(&b'[') {
            let mut quoted = false;
            at += 1;
            loop {
                match sd.get(at)? {
                    b'\\' if quoted => at += 1,
                    b'"' => quoted = !quoted,
                    b']' if !quoted => break,
                    _ => {}
                }
                at += 1;
            }
            at += 1;
        }
        if at == 0 {
            return None;
        }
    }
    match sd.get(at) {
        None => Some(&[]),
        Some(b' ') => Some(&sd[at + 1..]),
        Some(_) => None,
    }
}

/// `service  | ` at the start of a line, as `docker compose logs` writes it.
fn without_compose_prefix(line: &[u8]) -> &[u8] {
    let name = line
        .iter()
        .take_while(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'))
        .count();
    if name == 0 {
        return line;
    }
    let spaces = line[name..].iter().take_while(|b| **b == b' ').count();
    if spaces == 0 {
        return line;
    }
    match line[name + spaces..].strip_prefix(b"| ") {
        Some(rest) => rest,
        None if &line[name + spaces..] == b"|" => &[],
        None => line,
    }
}

fn trim_end(line: &[u8]) -> &[u8] {
    let end = line
        .iter()
        .rposition(|b| !matches!(b, b'\n' | b'\r'))
        .map_or(0, |at| at + 1);
    &line[..end]
}

/// What follows a stamp: nothing, or a space and then the line.
fn after_space(rest: &[u8]) -> Option<&[u8]> {
    if rest.is_empty() {
        return Some(rest);
    }
    if rest[0] != b' ' {
        return None;
    }
    let spaces = rest.iter().take_while(|b| **b == b' ').count();
    Some(&rest[spaces..])
}

/// One of the relay's own lines.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RelayLine<'a> {
    /// The host that wrote it; None where a container image wrote a level word there.
    pub host: Option<&'a [u8]>,
    /// `program[pid]`: with the host, one process.
    pub tag: &'a [u8],
    /// The daemon: `smtpd`, `cleanup`, `qmgr`...
    pub daemon: &'a [u8],
    pub text: &'a [u8],
}

impl RelayLine<'_> {
    /// The host as a key: empty where the line names none.
    pub fn host_key(&self) -> &[u8] {
        self.host.unwrap_or_default()
    }
}

/// `rest` read as `host program[pid]: text` (or `LEVEL program[pid]: text`, or a line
/// with neither) from one of the relay's Postfix daemons; None for anything else.
pub fn relay_line<'a>(rest: &'a [u8], names: &SyslogNames) -> Option<RelayLine<'a>> {
    let first_end = memchr::memchr(b' ', rest)?;
    let first = &rest[..first_end];
    let (host, after) = if first.ends_with(b":") && first.contains(&b'[') {
        (None, rest)
    } else {
        let after = &rest[first_end + 1..];
        let after = &after[after.iter().take_while(|b| **b == b' ').count()..];
        let level = is_level(first);
        (if level { None } else { Some(first) }, after)
    };
    let tag_end = find(after, b"]: ")?;
    let tag = &after[..=tag_end];
    let open = memchr::memrchr(b'[', tag)?;
    let (program, pid) = (&tag[..open], &tag[open + 1..tag.len() - 1]);
    if pid.is_empty() || !pid.iter().all(u8::is_ascii_digit) || program.contains(&b' ') {
        return None;
    }
    let slash = memchr::memchr(b'/', program)?;
    let daemon = &program[memchr::memrchr(b'/', program)? + 1..];
    if !names.accepts(&program[..slash]) || !is_daemon(daemon) {
        return None;
    }
    Some(RelayLine {
        host,
        tag,
        daemon,
        text: &after[tag_end + 3..],
    })
}

/// Whether a line says the log itself lost lines: rsyslog's suspended action and full
/// queue, its rate-limiting ("imuxsock
/// begins to drop messages", "imuxsock lost 1523 messages", "imjournal: 1523 messages
/// lost"), journald's ("Suppressed 1523 messages from postfix@-.service", "Forwarding to
/// syslog missed 12 messages"), a logger's "messages lost" or "dropped". Anyone who can
/// make the relay write such words only takes absence away as proof, so any line counts.
///
/// Read on every line of a log, so it takes no allocation: the line is lowered into a
/// buffer of the thread's, and only a line holding one of the few needles is read word
/// by word.
pub fn reports_loss(line: &[u8]) -> bool {
    thread_local! {
        static LOWER: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
    }
    LOWER.with(|lower| {
        let mut lower = lower.borrow_mut();
        lower.clear();
        lower.extend(line.iter().map(u8::to_ascii_lowercase));
        loss_words(&lower)
    })
}

/// Whether `line` is the mark `journalctl` prints between two boots of the host
/// (`-- Boot 5c4f0e8e2a9f4b2a8a3d1e7b6c5d4e3f --`, or `-- Reboot --` from older
/// systemd). The host went down there, and what the relay logged in its last minutes may
/// never have reached the disk (journald syncs every 5 minutes unless told otherwise): a
/// crash can take the message-id line of a message the relay had already queued, which
/// it then delivers after the boot. So the mark is read as a report of lost lines.
pub fn marks_a_reboot(line: &[u8]) -> bool {
    let line = trim_end(line);
    if line == b"-- Reboot --" {
        return true;
    }
    line.strip_prefix(b"-- Boot ")
        .and_then(|rest| rest.strip_suffix(b" --"))
        .is_some_and(|id| id.len() == 32 && id.iter().all(u8::is_ascii_hexdigit))
}

/// Every word the loss rule needs holds one of these: a line (lowered) with none of them
/// reports no loss, so a block can be searched for them once.
pub const LOSS_NEEDLES: [&[u8]; 3] = [b"essage", b"suspended", b"full"];

/// [`reports_loss`] on a line already lowered.
pub fn loss_words(lower: &[u8]) -> bool {
    let held = LOSS_NEEDLES.map(|needle| find(lower, needle).is_some());
    loss_words_holding(lower, held)
}

/// [`loss_words`] where which of [`LOSS_NEEDLES`] the line holds is known already (a
/// search of its whole block found them): each is looked for once, not again per line.
pub fn loss_words_holding(lower: &[u8], held: [bool; 3]) -> bool {
    let [messaging, suspended, full] = held;
    if !messaging && !suspended && !full {
        return false;
    }
    let words = || {
        lower
            .split(|b| !b.is_ascii_alphanumeric())
            .filter(|w| !w.is_empty())
    };
    let has = |word: &[u8]| words().any(|w| w == word);
    // rsyslog's "action 'action-1-builtin:omfile' suspended (...)" (what it did not write
    // while suspended is gone) and "... queue full - discarding message". Each needs its
    // word, which needs its needle.
    if (suspended && has(b"action") && has(b"suspended"))
        || (full && has(b"queue") && has(b"full") && words().any(|w| w.starts_with(b"discard")))
    {
        return true;
    }
    // Every reading below needs one of these words as well: cleanup's `message-id=`,
    // the commonest line with the needle, goes no further.
    if !messaging || !names_a_loss(lower) {
        return false;
    }
    let messages = |w: &[u8]| w == b"messages" || w == b"message";
    let number = |w: &[u8]| w.iter().all(u8::is_ascii_digit);
    let (mut before, mut last): (&[u8], &[u8]) = (b"", b"");
    for word in words() {
        if messages(last) && matches!(word, b"lost" | b"dropped" | b"suppressed" | b"missed")
            || matches!(last, b"drop" | b"dropping") && messages(word)
            || matches!(
                before,
                b"lost" | b"suppressed" | b"missed" | b"dropped" | b"dropping"
            ) && !last.is_empty()
                && number(last)
                && (messages(word) || matches!(word, b"kernel" | b"log" | b"syslog" | b"journal"))
        {
            return true;
        }
        (before, last) = (last, word);
    }
    false
}

/// Whether `lower` holds `lost`, `drop`, `suppressed` or `missed` anywhere: one pass
/// over its bytes, where a search for each word took four (cleanup's `message-id=` line,
/// a seventh of a relay's, asks this of every line it writes).
fn names_a_loss(lower: &[u8]) -> bool {
    (0..lower.len()).any(|at| {
        let rest = &lower[at..];
        match rest[0] {
            b'l' => rest.starts_with(b"lost"),
            b'd' => rest.starts_with(b"drop"),
            b's' => rest.starts_with(b"suppressed"),
            b'm' => rest.starts_with(b"missed"),
            _ => false,
        }
    })
}

/// Finds the Message-IDs of the shape unsctl writes (`<...@uns.local>`) wherever they
/// stand in a line.
pub struct Mentions(memchr::memmem::Finder<'static>);

impl Default for Mentions {
    fn default() -> Self {
        Self::new()
    }
}

impl Mentions {
    pub fn new() -> Self {
        let suffix = format!("@{}>", crate::model::MessageId::DOMAIN);
        Self(memchr::memmem::Finder::new(suffix.as_bytes()).into_owned())
    }

    /// Where the shape's end stands in `data`, each time.
    pub fn positions<'d>(&'d self, data: &'d [u8]) -> impl Iterator<Item = usize> + 'd {
        self.0.find_iter(data)
    }

    pub fn in_line<'l>(&'l self, line: &'l [u8]) -> impl Iterator<Item = &'l [u8]> + 'l {
        let length = self.0.needle().len();
        self.0.find_iter(line).filter_map(move |at| {
            let start = memchr::memrchr(b'<', &line[..at])?;
            Some(&line[start..at + length])
        })
    }
}
