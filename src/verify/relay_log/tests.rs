//! The relay-log reader on lines as Postfix writes them, and on lines written to fool it.

use super::*;
use std::io::Write;

/// Lines as the real relay wrote them (tests/peers/verify.rs runs one): a message queued and
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
Nov 29 22:15:58 relay postfix/smtpd[23879]: disconnect from localhost[127.0.0.1] ehlo=1 mail=2 rcpt=2 data=1/2 commands=6/7
Nov 29 22:16:30 relay postfix/anvil[23877]: statistics: max connection rate 2/60s for (smtp:127.0.0.1) at Nov 29 22:15:57
";

/// 2026-11-29T22:20:00Z, a few minutes after the lines above.
const NEAR: f64 = 1_795_990_800.0;
/// 2026-11-29T22:15:57Z.
const AT: f64 = 1_795_990_557.0;

fn wanted(ids: &[&str]) -> HashSet<String> {
    ids.iter().map(|s| s.to_string()).collect()
}

fn options() -> Options {
    Options {
        zone: Zone::Fixed(0),
        near: NEAR,
        max_gap: 300.0,
        names: SyslogNames::default(),
    }
}

/// Whether the relay host `relay`'s own lines cover `[from, to]`.
fn covers(found: &Findings, from: f64, to: f64) -> bool {
    found.host_covers("relay", from, to)
}

fn write(dir: &Path, name: &str, text: &str, gzip: bool) -> PathBuf {
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
    path
}

fn search_text(text: &str, ids: &[&str]) -> Findings {
    let dir = tempfile::tempdir().expect("dir");
    let log = write(dir.path(), "maillog", text, false);
    search(&[log], &wanted(ids), options())
}

fn only<'a>(found: &'a Findings, id: &str) -> &'a Message {
    let seen = found.seen(id);
    assert_eq!(seen.len(), 1, "{id}: {seen:?}");
    &seen[0]
}

#[test]
fn a_queued_message_is_committed_and_a_lost_one_is_refused() {
    let found = search_text(
        REAL,
        &[
            "<n-1.1.1@uns.local>",
            "<n-2.1.1@uns.local>",
            "<n-3.1.1@uns.local>",
        ],
    );
    let queued = only(&found, "<n-1.1.1@uns.local>");
    assert_eq!(queued.queue_id, "7E4029C0029");
    assert_eq!(queued.fate, Fate::Queued);
    assert_eq!(queued.sender, Sender::Known("uns@uns.local".into()));
    assert!(
        queued
            .fate_line
            .as_deref()
            .is_some_and(|l| l.contains("qmgr") && l.contains("queue active"))
    );
    assert_eq!(
        queued.at,
        Stamp {
            lo: AT,
            hi: AT + 1.0,
            ambiguous: false,
        }
    );
    // The lost connection came before cleanup's line about the same queue id.
    let lost = only(&found, "<n-2.1.1@uns.local>");
    assert_eq!(lost.fate, Fate::Lost, "{lost:?}");
    assert_eq!(lost.sender, Sender::Unknown);
    assert!(found.seen("<n-3.1.1@uns.local>").is_empty());
    assert_eq!(
        found.covered["relay"]
            .iter()
            .map(|run| run.inner)
            .collect::<Vec<_>>(),
        vec![(AT - 3.0 + 1.0, AT + 33.0)]
    );
    assert_eq!(found.lines, 12);
}

#[test]
fn a_status_quoted_in_a_warning_commits_nothing() {
    // header_checks WARN quotes the Subject, which the submitter wrote.
    let text = "\
Nov 29 22:15:57 relay postfix/smtpd[10]: connect from localhost[127.0.0.1]
Nov 29 22:15:57 relay postfix/smtpd[10]: ABCDEF0001: client=localhost[127.0.0.1]
Nov 29 22:15:57 relay postfix/cleanup[11]: ABCDEF0001: message-id=<n-1.1.1@uns.local>
Nov 29 22:15:57 relay postfix/cleanup[11]: ABCDEF0001: warning: header Subject: x status=sent (250 ok) ABCDEF0001: from=<uns@uns.local>, size=1, nrcpt=1 (queue active) from localhost[127.0.0.1]; from=<uns@uns.local> to=<a@b.test> proto=ESMTP helo=<uns.local>
Nov 29 22:15:58 relay postfix/qmgr[12]: ABCDEF0001: warning: from=<uns@uns.local>, size=1, nrcpt=1 (queue active)
Nov 29 22:15:58 relay postfix/smtp[13]: ABCDEF0001: to=<a@b.test>, status=sent (250 2.0.0 Ok)
Nov 29 22:15:58 relay postfix/pickup[14]: ABCDEF0001: from=<uns@uns.local>, size=1, nrcpt=1 (queue active)
Nov 29 22:15:58 relay evil/qmgr[15]: ABCDEF0001: from=<uns@uns.local>, size=1, nrcpt=1 (queue active)
Nov 29 22:15:58 relay postfix/qmgr[x]: ABCDEF0001: from=<uns@uns.local>, size=1, nrcpt=1 (queue active)
";
    let found = search_text(text, &["<n-1.1.1@uns.local>"]);
    assert_eq!(only(&found, "<n-1.1.1@uns.local>").fate, Fate::Open);
}

fn queue_active_sender(text: &[u8]) -> Option<String> {
    read::queue_active_sender(text).map(|s| String::from_utf8_lossy(s).into_owned())
}

fn check_sender(text: &[u8]) -> Sender {
    match read::check_sender(text, text) {
        read::SenderSpan::Known(span) => {
            Sender::Known(String::from_utf8_lossy(span.in_(text)).into_owned())
        }
        read::SenderSpan::Ambiguous => Sender::Ambiguous,
    }
}

#[test]
fn a_sender_that_quotes_the_shape_cannot_move_it() {
    assert_eq!(
        queue_active_sender(b"from=<uns@uns.local>, size=280, nrcpt=1 (queue active)"),
        Some("uns@uns.local".into())
    );
    // Read from the end: the sender is everything up to the real fields.
    assert_eq!(
        queue_active_sender(
            b"from=<\"uns@uns.local>, size=1, nrcpt=1 (queue active)\"@evil.test>, size=9, nrcpt=1 (queue active)"
        ),
        Some("\"uns@uns.local>, size=1, nrcpt=1 (queue active)\"@evil.test".into())
    );
    assert_eq!(
        queue_active_sender(b"from=<>, size=9, nrcpt=1 (queue active)"),
        Some(String::new())
    );
    assert_eq!(
        queue_active_sender(b"from=<a@b>, size=x, nrcpt=1 (queue active)"),
        None
    );
    assert_eq!(
        queue_active_sender(b"from=<a@b>, status=expired, returned to sender"),
        None
    );
    // A hold line whose quoted header repeats the shape names no sender.
    assert_eq!(
        check_sender(b"hold: header Subject: HOLDME from localhost[127.0.0.1]; from=<uns@uns.local> to=<a@b.test> proto=ESMTP helo=<uns.local>: held"),
        Sender::Known("uns@uns.local".into())
    );
    assert_eq!(
        check_sender(b"hold: header Subject: x; from=<uns@uns.local> to=<a> proto=ESMTP from localhost[127.0.0.1]; from=<evil@evil.test> to=<a@b.test> proto=ESMTP helo=<x>"),
        Sender::Ambiguous
    );
}

#[test]
fn hold_reject_discard_and_data_zero_are_read_with_their_senders() {
    let text = "\
Nov 29 22:15:57 relay postfix/smtpd[10]: connect from localhost[127.0.0.1]
Nov 29 22:15:57 relay postfix/smtpd[10]: AAAAAA0001: client=localhost[127.0.0.1]
Nov 29 22:15:57 relay postfix/cleanup[11]: AAAAAA0001: message-id=<n-1.1.1@uns.local>
Nov 29 22:15:57 relay postfix/cleanup[11]: AAAAAA0001: hold: header Subject: HOLDME from localhost[127.0.0.1]; from=<uns@uns.local> to=<a@b.test> proto=ESMTP helo=<uns.local>: held for review
Nov 29 22:15:57 relay postfix/smtpd[10]: disconnect from localhost[127.0.0.1] ehlo=1 mail=1 rcpt=1 data=1 quit=1 commands=5
Nov 29 22:15:58 relay postfix/smtpd[10]: connect from localhost[127.0.0.1]
Nov 29 22:15:58 relay postfix/smtpd[10]: AAAAAA0002: client=localhost[127.0.0.1]
Nov 29 22:15:58 relay postfix/cleanup[11]: AAAAAA0002: message-id=<n-2.1.1@uns.local>
Nov 29 22:15:58 relay postfix/cleanup[11]: AAAAAA0002: reject: header Subject: NOPE from localhost[127.0.0.1]; from=<uns@uns.local> to=<a@b.test> proto=ESMTP helo=<uns.local>: 5.7.1 refused
Nov 29 22:15:58 relay postfix/smtpd[10]: disconnect from localhost[127.0.0.1] ehlo=1 mail=1 rcpt=1 data=0/1 quit=1 commands=4/5
Nov 29 22:15:59 relay postfix/smtpd[10]: connect from localhost[127.0.0.1]
Nov 29 22:15:59 relay postfix/smtpd[10]: AAAAAA0003: client=localhost[127.0.0.1]
Nov 29 22:15:59 relay postfix/cleanup[11]: AAAAAA0003: message-id=<n-3.1.1@uns.local>
Nov 29 22:16:00 relay postfix/smtpd[10]: timeout after DATA (100 bytes) from localhost[127.0.0.1]
Nov 29 22:16:00 relay postfix/smtpd[10]: disconnect from localhost[127.0.0.1] ehlo=1 mail=1 rcpt=1 data=0/1 commands=3/4
Nov 29 22:16:01 relay postfix/smtpd[20]: connect from localhost[127.0.0.1]
Nov 29 22:16:01 relay postfix/smtpd[20]: AAAAAA0004: client=localhost[127.0.0.1]
Nov 29 22:16:01 relay postfix/cleanup[11]: AAAAAA0004: message-id=<n-4.1.1@uns.local>
Nov 29 22:16:01 relay postfix/smtpd[20]: disconnect from localhost[127.0.0.1] ehlo=1 mail=1 rcpt=1 data=0/1 commands=3/4
Nov 29 22:16:02 relay postfix/smtpd[21]: connect from localhost[127.0.0.1]
Nov 29 22:16:02 relay postfix/smtpd[21]: AAAAAA0005: client=localhost[127.0.0.1]
Nov 29 22:16:02 relay postfix/cleanup[11]: AAAAAA0005: message-id=<n-5.1.1@uns.local>
Nov 29 22:16:02 relay postfix/smtpd[21]: lost connection after END-OF-MESSAGE from localhost[127.0.0.1]
";
    let found = search_text(
        text,
        &[
            "<n-1.1.1@uns.local>",
            "<n-2.1.1@uns.local>",
            "<n-3.1.1@uns.local>",
            "<n-4.1.1@uns.local>",
            "<n-5.1.1@uns.local>",
        ],
    );
    let held = only(&found, "<n-1.1.1@uns.local>");
    assert_eq!(
        (held.fate, held.sender.clone()),
        (Fate::Held, Sender::Known("uns@uns.local".into()))
    );
    let rejected = only(&found, "<n-2.1.1@uns.local>");
    assert_eq!(rejected.fate, Fate::Rejected);
    assert_eq!(
        only(&found, "<n-3.1.1@uns.local>").fate,
        Fate::Lost,
        "timeout during DATA"
    );
    assert_eq!(
        only(&found, "<n-4.1.1@uns.local>").fate,
        Fate::Lost,
        "data=0/1"
    );
    // After the final dot the relay may have committed it: nothing is said.
    assert_eq!(only(&found, "<n-5.1.1@uns.local>").fate, Fate::Open);
}

#[test]
fn a_reused_queue_id_does_not_commit_an_earlier_message() {
    let text = "\
Nov 29 22:00:00 relay postfix/smtpd[1]: AAAAAA1: client=localhost[127.0.0.1]
Nov 29 22:00:00 relay postfix/cleanup[2]: AAAAAA1: message-id=<n-1.1.1@uns.local>
Nov 29 22:00:01 relay postfix/smtpd[3]: AAAAAA1: client=localhost[127.0.0.1]
Nov 29 22:00:02 relay postfix/qmgr[4]: AAAAAA1: from=<uns@uns.local>, size=1, nrcpt=1 (queue active)
";
    let found = search_text(text, &["<n-1.1.1@uns.local>"]);
    assert_eq!(only(&found, "<n-1.1.1@uns.local>").fate, Fate::Open);
}

#[test]
fn coverage_breaks_at_every_hole_and_at_a_stray_line() {
    let lines = |stamps: &[&str]| -> String {
        stamps
            .iter()
            .map(|s| format!("{s} relay postfix/anvil[1]: statistics: nothing\n"))
            .collect()
    };
    // Two lines three hours apart cover neither the hours between nor the window.
    let found = search_text(&lines(&["Nov 29 19:00:00", "Nov 29 22:00:00"]), &["<x@y>"]);
    let at = |h: f64| 1_795_986_000.0 + (h - 21.0) * 3600.0;
    assert!(!covers(&found, at(20.0), at(20.01)), "{:?}", found.covered);
    // A stray early line, then lines from after the window on.
    let found = search_text(
        &lines(&[
            "Nov 29 08:00:00",
            "Nov 29 22:00:00",
            "Nov 29 22:04:00",
            "Nov 29 22:08:00",
        ]),
        &["<x@y>"],
    );
    assert!(!covers(&found, at(21.0), at(21.01)));
    assert!(covers(&found, at(22.0) + 1.0, at(22.0) + 400.0));
    // Lines every four minutes cover the stretch; one jump of six does not.
    let found = search_text(
        &lines(&[
            "Nov 29 22:00:00",
            "Nov 29 22:04:00",
            "Nov 29 22:10:00",
            "Nov 29 22:14:00",
        ]),
        &["<x@y>"],
    );
    assert!(covers(&found, at(22.0) + 1.0, at(22.0) + 240.0));
    assert!(!covers(&found, at(22.0) + 1.0, at(22.0) + 700.0));
    // Lines out of order cover what the same lines in order cover, no more.
    let shuffled = search_text(
        &lines(&["Nov 29 22:00:00", "Nov 29 22:08:00", "Nov 29 22:04:00"]),
        &["<x@y>"],
    );
    assert!(
        covers(&shuffled, at(22.0) + 1.0, at(22.0) + 480.0),
        "{:?}",
        shuffled.covered
    );
    let shuffled = search_text(
        &lines(&["Nov 29 22:00:00", "Nov 29 22:12:00", "Nov 29 22:06:00"]),
        &["<x@y>"],
    );
    assert!(
        !covers(&shuffled, at(22.0) + 1.0, at(22.0) + 700.0),
        "{:?}",
        shuffled.covered
    );
}

#[test]
fn rotated_gzip_and_rfc3339_files_read_as_one_log_in_the_order_of_their_lines() {
    let dir = tempfile::tempdir().expect("dir");
    let old = "\
Nov 29 21:00:00 relay postfix/master[1]: daemon started
Nov 29 21:04:00 relay postfix/smtpd[5]: ABCDEF123: client=localhost[127.0.0.1]
Nov 29 21:58:00 relay postfix/anvil[5]: statistics
Nov 29 22:00:00 relay postfix/cleanup[2]: ABCDEF123: message-id=<n-9.2.3@uns.local>
";
    let new = "\
2026-11-29T22:00:00.250000+00:00 relay postfix/qmgr[3]: ABCDEF123: from=<uns@uns.local>, size=1, nrcpt=1 (queue active)
2026-11-29T22:03:00.000000+00:00 relay postfix/anvil[4]: statistics
2026-11-29T22:07:00.000000Z relay postfix/anvil[4]: statistics
";
    let older = write(dir.path(), "maillog.1.gz", old, true);
    let newer = write(dir.path(), "maillog", new, false);
    // Given newest first, and with mtimes that say the opposite: read oldest line first.
    let touch = |path: &Path, at: u64| {
        std::fs::File::options()
            .write(true)
            .open(path)
            .and_then(|f| {
                f.set_modified(std::time::UNIX_EPOCH + std::time::Duration::from_secs(at))
            })
            .expect("mtime");
    };
    touch(&older, 2_000_000_000);
    touch(&newer, 1_000_000_000);
    let found = search(
        &[newer, older],
        &wanted(&["<n-9.2.3@uns.local>"]),
        options(),
    );
    assert!(found.problems.is_empty(), "{:?}", found.problems);
    let message = only(&found, "<n-9.2.3@uns.local>");
    assert_eq!(message.fate, Fate::Queued);
    assert!(message.path.ends_with("maillog.1.gz"));
    let at = |h: f64| 1_795_986_000.0 + (h - 21.0) * 3600.0;
    // 21:04 to 21:58 is a hole; 21:58 across the rotation to 22:07 is not.
    assert!(!covers(&found, at(21.0) + 10.0, at(21.5)));
    assert!(covers(&found, at(21.97), at(22.1)));
}

#[test]
fn unreadable_and_truncated_files_are_named_and_the_rest_still_read() {
    let dir = tempfile::tempdir().expect("dir");
    let log = write(dir.path(), "maillog", REAL, false);
    let broken = dir.path().join("broken.gz");
    std::fs::write(&broken, [0x1f, 0x8b, 0, 1, 2, 3]).expect("write");
    // A gzip file cut short: its lines up to the cut are read, the cut is named.
    let whole = write(dir.path(), "whole.gz", REAL, true);
    let bytes = std::fs::read(&whole).expect("read");
    let cut = dir.path().join("cut.gz");
    std::fs::write(&cut, &bytes[..bytes.len() - 12]).expect("write");
    let garbage = write(dir.path(), "garbage", "not\na log\n", false);
    let missing = dir.path().join("missing");
    let found = search(
        &[missing, broken, cut, garbage, log],
        &wanted(&["<n-1.1.1@uns.local>"]),
        options(),
    );
    assert_eq!(found.problems.len(), 4, "{:?}", found.problems);
    for name in ["missing", "broken.gz", "cut.gz", "garbage"] {
        assert!(
            found.problems.iter().any(|p| p.contains(name)),
            "{name}: {:?}",
            found.problems
        );
    }
    assert!(
        found
            .seen("<n-1.1.1@uns.local>")
            .iter()
            .any(|m| m.fate == Fate::Queued)
    );
}

#[test]
fn a_syslog_year_is_the_one_nearest_the_attempt() {
    let clock = clock::Clock::new(&Zone::Fixed(0), 1_798_761_000.0); // 2026-12-31T23:50:00Z
    assert_eq!(
        clock.stamp_of(b"Dec 31 23:59:59").map(|s| s.lo),
        Some(1_798_761_599.0)
    );
    // Just after New Year, the next year is nearer.
    assert_eq!(
        clock.stamp_of(b"Jan  1 00:00:01").map(|s| s.lo),
        Some(1_798_761_601.0)
    );
    // In March, a December line is last year's.
    let march = clock::Clock::new(&Zone::Fixed(0), 1_772_323_200.0); // 2026-03-01T00:00:00Z
    assert_eq!(
        march.stamp_of(b"Dec 31 23:59:59").map(|s| s.lo),
        Some(1_767_225_599.0)
    );
    // An offset moves the instant, not the date.
    let east = clock::Clock::new(&Zone::Fixed(3600), 1_798_761_000.0);
    assert_eq!(
        east.stamp_of(b"Jan  1 00:00:01").map(|s| s.lo),
        Some(1_798_758_001.0)
    );
    assert_eq!(clock.stamp_of(b"Foo  1 00:00:01"), None);
    assert_eq!(clock.stamp_of(b"Feb 30 00:00:01"), None);
    assert_eq!(clock.stamp_of(b"Nov 29 25:00:00"), None);
    // Leap days only where the year has one.
    let leap = clock::Clock::new(&Zone::Fixed(0), 1_835_000_000.0); // 2028-02-24
    assert!(leap.stamp_of(b"Feb 29 12:00:00").is_some());
    assert!(
        clock.stamp_of(b"Feb 29 12:00:00").is_none(),
        "2026 has none"
    );
}

#[test]
fn rfc3339_stamps_keep_their_precision_and_refuse_other_shapes() {
    let clock = clock::Clock::new(&Zone::Fixed(0), NEAR);
    let parse_rfc3339 = |text: &[u8]| clock.stamp_of(text);
    let stamp = parse_rfc3339(b"2026-11-29T22:00:00.250000+00:00").expect("stamp");
    assert_eq!(stamp.lo, 1_795_989_600.25);
    assert!((stamp.hi - stamp.lo - 1e-6).abs() < 1e-7);
    assert_eq!(
        parse_rfc3339(b"2026-11-29T23:00:00+01:00").map(|s| s.lo),
        Some(1_795_989_600.0)
    );
    for bad in [
        &b"2026-11-29 22:00:00Z"[..],
        b"2026-13-29T22:00:00Z",
        b"2026-11-29T22:00:00",
        b"2026-11-29T22:00:00+1:00",
        b"1s",
    ] {
        assert_eq!(parse_rfc3339(bad), None, "{}", String::from_utf8_lossy(bad));
    }
}

/// A stamp read after another of the same second (the one the clock remembers) reads as
/// it does on a clock of its own, whatever its fraction, zone or shape.
#[test]
fn an_rfc3339_stamp_reads_the_same_after_any_other() {
    let stamps: Vec<&[u8]> = vec![
        b"2026-11-29T22:00:00.250000+00:00",
        b"2026-11-29T22:00:00.7+00:00",
        b"2026-11-29T22:00:00+00:00",
        b"2026-11-29T22:00:00.123456789+00:00",
        b"2026-11-29T22:00:00.1234567891+00:00",
        b"2026-11-29T22:00:00.+00:00",
        b"2026-11-29T22:00:00.5Z",
        b"2026-11-29T22:00:00.5+0000",
        b"2026-11-29T22:00:00.5+01:00",
        b"2026-11-29T22:00:00.5+1:00",
        b"2026-11-29T22:00:00.5",
        b"2026-11-29t22:00:00.5z",
        b"2026-11-29T22:00:01.5+00:00",
        b"2026-11-29T22:00:00.5+00:00junk",
    ];
    let shared = clock::Clock::new(&Zone::Fixed(0), NEAR);
    for before in &stamps {
        for stamp in &stamps {
            let fresh = clock::Clock::new(&Zone::Fixed(0), NEAR);
            let _ = shared.stamp_of(before);
            assert_eq!(
                shared.stamp_of(stamp),
                fresh.stamp_of(stamp),
                "{} after {}",
                String::from_utf8_lossy(stamp),
                String::from_utf8_lossy(before)
            );
        }
    }
}

/// Each of `heads` followed by each of `tails`, and `end`.
fn every_join(heads: &[&str], tails: &[&str], end: &str) -> Vec<String> {
    heads
        .iter()
        .flat_map(|head| tails.iter().map(move |tail| format!("{head}{tail}{end}")))
        .collect()
}

/// A syslog stamp read after another (the one the clock remembers, byte for byte) reads
/// as it does on a clock of its own, whatever follows it, its padding or its fraction.
#[test]
fn a_syslog_stamp_reads_the_same_after_any_other() {
    let stamps = [
        "Nov 29 22:15:57",
        "Nov 29 22:15:57.5",
        "Nov 29 22:15:57.25",
        "Nov 29 22:15:57.",
        "Nov 29 22:15:5",
        "Nov 29 22:15:58",
        "Mar  7 02:09:33",
        "Mar 7 02:09:33",
        "Mar  7 02:09:3",
        "Mar 07 02:09:33",
        "Dec 31 23:59:60",
        "Nov 29 22:15:57.1234567891",
        "Nov 29 22:15:57.123456789012345678901234",
        "Nov 29 22:15:57x",
        "Nov 29 22:15:577",
    ];
    let tails = [
        "",
        " relay postfix/smtpd[1]: x",
        "  two spaces",
        ".5 fraction",
        "5",
        "\t",
    ];
    let lines = every_join(&stamps, &tails, "");
    let shared = clock::Clock::new(&Zone::Fixed(0), NEAR);
    for before in &lines {
        for line in &lines {
            let fresh = clock::Clock::new(&Zone::Fixed(0), NEAR);
            let _ = shared.stamp(before.as_bytes());
            assert_eq!(
                shared.stamp(line.as_bytes()),
                fresh.stamp(line.as_bytes()),
                "{line:?} after {before:?}"
            );
        }
    }
}

#[test]
fn words_and_noqueue_are_not_queue_ids_and_programs_must_be_postfix() {
    for id in ["7E4029C0029", "4Kz5bC0sN8z1y2W", "ABCDEF"] {
        assert!(read::is_queue_id(id.as_bytes()), "{id}");
    }
    for word in ["warning", "NOQUEUE", "error", "statistics", "AB", "x-y-z-w"] {
        assert!(!read::is_queue_id(word.as_bytes()), "{word}");
    }
    let names = SyslogNames::default();
    let daemon = |rest: &[u8]| {
        let rest = rest.strip_prefix(b" ").unwrap_or(rest);
        line::relay_line(rest, &names).map(|l| l.daemon.to_vec())
    };
    assert_eq!(
        daemon(b" relay postfix/qmgr[23876]: x"),
        Some(b"qmgr".to_vec())
    );
    assert_eq!(
        daemon(b" relay postfix-out/smtpd[1]: x"),
        Some(b"smtpd".to_vec())
    );
    assert_eq!(
        daemon(b" relay postfix/submission/smtpd[1]: x"),
        Some(b"smtpd".to_vec())
    );
    assert_eq!(daemon(b" relay evil/qmgr[1]: x"), None);
    assert_eq!(daemon(b" relay postfix/qmgr: x"), None);
    assert_eq!(daemon(b" relay postfix/unknownd[1]: x"), None);
    assert_eq!(daemon(b" relay CRON[1]: x"), None);
    // A level word where the host would be, or no host at all.
    for line in [&b"INFO    postfix/qmgr[1]: x"[..], b"postfix/qmgr[1]: x"] {
        let read = line::relay_line(line, &names).expect("read");
        assert_eq!((read.host, read.daemon), (None, &b"qmgr"[..]));
    }
    // Under another syslog name only when it is given.
    let named = SyslogNames::new(["mailrelay".to_string()]);
    assert!(line::relay_line(b"relay mailrelay/qmgr[1]: x", &names).is_none());
    assert!(line::relay_line(b"relay mailrelay/qmgr[1]: x", &named).is_some());
    assert!(line::relay_line(b"relay postfix/qmgr[1]: x", &named).is_none());
}

#[test]
fn a_line_that_never_ends_is_kept_only_up_to_the_bound() {
    // However the reads cut it: a block of 4 KiB, and one larger than the line.
    for size in [4096, 2 << 20] {
        let endless =
            std::io::Read::chain(&b"short line\n"[..], std::io::repeat(b'x').take(1 << 20));
        let mut splitter = read::Splitter::new(endless, size);
        let mut lines = Vec::new();
        let none = super::Wanted::default();
        while let Some(block) = splitter.next_block().expect("read") {
            let parser = read::Parser::new(
                &none,
                &Zone::Fixed(0),
                NEAR,
                SyslogNames::default(),
                Default::default(),
            );
            for record in parser.parse(&block) {
                lines.push((record.line.in_(&block.data).to_vec(), record.consumed));
            }
        }
        assert_eq!(lines.len(), 2, "block {size}");
        assert_eq!(lines[0], (b"short line\n".to_vec(), 11));
        assert_eq!(lines[1].0.len(), read::MAX_LINE, "only the bound is kept");
        assert_eq!(lines[1].1, 1 << 20, "the whole line is consumed");
    }
}

/// Lines a real Postfix 3.7 relay wrote through `maillog_file` with `syslog_name =
/// mailrelay` and `sender_canonical_maps` rewriting the runtime's sender (a zero-padded
/// day, the short host name): read under the name given, and only then.
const REWRITTEN: &str = "\
Dec 01 19:08:50 relay mailrelay/master[21407]: daemon started -- version 3.7.11, configuration /tmp/pr/r/conf
Dec 01 19:08:50 relay mailrelay/smtpd[21412]: connect from localhost[127.0.0.1]
Dec 01 19:08:50 relay mailrelay/smtpd[21412]: 38FAD98C07C: client=localhost[127.0.0.1]
Dec 01 19:08:50 relay mailrelay/cleanup[21456]: 38FAD98C07C: message-id=<n-1.1.1@uns.local>
Dec 01 19:08:50 relay mailrelay/qmgr[21409]: 38FAD98C07C: from=<noreply@example.com>, size=286, nrcpt=1 (queue active)
Dec 01 19:08:50 relay mailrelay/smtpd[21412]: disconnect from localhost[127.0.0.1] ehlo=1 mail=1 rcpt=1 data=1 quit=1 commands=5
";

#[test]
fn a_relay_under_another_syslog_name_is_read_only_when_named() {
    let dir = tempfile::tempdir().expect("dir");
    let log = write(dir.path(), "maillog", REWRITTEN, false);
    let wanted = wanted(&["<n-1.1.1@uns.local>"]);
    let near = Options {
        near: 1_796_152_130.0, // 2026-12-01T19:08:50Z
        ..options()
    };
    let unnamed = search(std::slice::from_ref(&log), &wanted, near.clone());
    assert!(unnamed.seen("<n-1.1.1@uns.local>").is_empty());
    assert_eq!(unnamed.mentioned("<n-1.1.1@uns.local>").len(), 1);
    assert!(unnamed.covered.is_empty(), "{:?}", unnamed.covered);
    assert_eq!(unnamed.problems.len(), 1, "not a relay log unsctl can read");
    let named = search(
        &[log],
        &wanted,
        Options {
            names: SyslogNames::new(["mailrelay".to_string()]),
            ..near
        },
    );
    let message = only(&named, "<n-1.1.1@uns.local>");
    assert_eq!(message.fate, Fate::Queued);
    assert_eq!(message.host.as_deref(), Some("relay"));
    // The relay wrote the rewritten sender: the reader reports it, verify weighs it.
    assert_eq!(message.sender, Sender::Known("noreply@example.com".into()));
    assert!(named.mentioned("<n-1.1.1@uns.local>").is_empty());
}

/// The same session in every layout a journal, a syslog daemon or a container runtime
/// writes, each read to the same message and the same stretch of coverage.
#[test]
fn every_layout_reads_to_the_same_message_and_coverage() {
    let layouts: &[(&str, &str)] = &[
        ("syslog", "Nov 29 22:15:5# relay "),
        ("unpadded", "Nov 29 22:15:5# relay "),
        ("short-precise", "Nov 29 22:15:5#.250000 relay "),
        ("short-iso", "2026-11-29T22:15:5#+0000 relay "),
        (
            "short-iso-precise",
            "2026-11-29T22:15:5#.250000+00:00 relay ",
        ),
        ("short-full", "Sun 2026-11-29 22:15:5# UTC relay "),
        ("short-unix", "179599055#.250000 relay "),
        ("rfc3339", "2026-11-29T23:15:5#.250000+01:00 relay "),
        (
            "docker logs -t",
            "2026-11-29T22:15:5#.250000000Z Nov 29 22:15:5# relay ",
        ),
        (
            "kubectl --timestamps",
            "2026-11-29T22:15:5#.250000Z 2026-11-29T22:15:5#+00:00 relay ",
        ),
        ("compose", "postfix-1  | Nov 29 22:15:5# relay "),
        (
            "compose -t",
            "postfix-1  | 2026-11-29T22:15:5#.250000000Z Nov 29 22:15:5# relay ",
        ),
    ];
    let session = [
        (4, "postfix/smtpd[10]: connect from app[10.0.0.5]"),
        (5, "postfix/smtpd[10]: ABCDEF0001: client=app[10.0.0.5]"),
        (
            6,
            "postfix/cleanup[11]: ABCDEF0001: message-id=<n-1.1.1@uns.local>",
        ),
        (
            7,
            "postfix/qmgr[12]: ABCDEF0001: from=<uns@uns.local>, size=1, nrcpt=1 (queue active)",
        ),
        (
            8,
            "postfix/smtpd[10]: disconnect from app[10.0.0.5] ehlo=1 mail=1 rcpt=1 data=1 commands=4",
        ),
    ];
    for (name, stamp) in layouts {
        let text: String = session
            .iter()
            .map(|(second, line)| format!("{}{line}\n", stamp.replace('#', &second.to_string())))
            .collect();
        let found = search_text(&text, &["<n-1.1.1@uns.local>"]);
        assert_eq!(
            found.seen("<n-1.1.1@uns.local>").len(),
            1,
            "{name}: {:?}",
            found.unread
        );
        let message = only(&found, "<n-1.1.1@uns.local>");
        assert_eq!(message.fate, Fate::Queued, "{name}");
        assert_eq!(message.host.as_deref(), Some("relay"), "{name}");
        assert!(
            (message.at.lo - (AT - 1.0)).abs() < 1.0,
            "{name}: {}",
            message.at.lo
        );
        assert!(
            found.unread.is_empty() && found.problems.is_empty(),
            "{name}: {:?} {:?}",
            found.unread,
            found.problems
        );
        assert!(
            found.host_covers("relay", AT - 1.0, AT + 1.0),
            "{name}: {:?}",
            found.covered
        );
    }
}

#[test]
fn a_container_layout_writes_a_level_word_where_the_host_would_be() {
    let text = "\
2026-11-29T22:15:54.000000+00:00 INFO    postfix/smtpd[10]: connect from app[10.0.0.5]
2026-11-29T22:15:55.000000+00:00 INFO    postfix/smtpd[10]: ABCDEF0001: client=app[10.0.0.5]
2026-11-29T22:15:56.000000+00:00 INFO    postfix/cleanup[11]: ABCDEF0001: message-id=<n-1.1.1@uns.local>
2026-11-29T22:15:57.000000+00:00 INFO    postfix/qmgr[12]: ABCDEF0001: from=<uns@uns.local>, size=1, nrcpt=1 (queue active)
";
    let found = search_text(text, &["<n-1.1.1@uns.local>"]);
    let message = only(&found, "<n-1.1.1@uns.local>");
    assert_eq!((message.fate, message.host.clone()), (Fate::Queued, None));
    assert!(found.host_covers("", AT - 2.0, AT - 1.0));
}

#[test]
fn lines_of_other_programs_and_unknown_shapes_cover_nothing() {
    let lines: String = (0..40)
        .map(|n| {
            format!(
                "Nov 29 22:{:02}:00 relay CRON[{n}]: (root) CMD (run-parts /etc/cron.hourly)\n",
                n
            )
        })
        .collect();
    let found = search_text(&lines, &["<n-1.1.1@uns.local>"]);
    assert!(found.covered.is_empty(), "{:?}", found.covered);
    assert_eq!(found.problems.len(), 1, "{:?}", found.problems);
    assert!(
        found.unread[0].contains("40 of 40 lines"),
        "{:?}",
        found.unread
    );
    // Lines whose stamp cannot be read are named, never taken as the relay's.
    let found = search_text(
        &format!("{REAL}Nov 29 22:16:31 relay postfix/smtpd 10: no pid brackets\n"),
        &[],
    );
    assert!(
        found.unread.iter().any(|u| u.contains("1 of 13 lines")),
        "{:?}",
        found.unread
    );
}

#[test]
fn a_log_that_says_it_lost_lines_is_kept_with_when() {
    for loss in [
        "Nov 29 22:15:58 relay rsyslogd[1]: imuxsock begins to drop messages from pid 23879 due to rate-limiting",
        "Nov 29 22:15:58 relay rsyslogd[1]: imuxsock lost 1523 messages from pid 23879 due to rate-limiting",
        "Nov 29 22:15:58 relay rsyslogd[1]: imjournal: 1523 messages lost due to rate-limiting (rate-limiting interval 600 s)",
        "Nov 29 22:15:58 relay systemd-journald[384]: Suppressed 1523 messages from postfix@-.service",
        "Nov 29 22:15:58 relay systemd-journald[384]: postfix@-.service: Suppressed 1523 messages",
        "Nov 29 22:15:58 relay systemd-journald[384]: Forwarding to syslog missed 12 messages.",
        "Nov 29 22:15:58 relay logger: 12 messages lost",
        "Nov 29 22:15:58 relay rsyslogd[1]: action 'action-8-builtin:omfile' suspended (module 'builtin:omfile'), retry 0. There should be messages before this one giving the reason for suspension.",
        "Nov 29 22:15:58 relay rsyslogd[1]: main Q: queue full - discarding message",
        "Nov 29 22:15:58 relay rsyslogd[1]: action-1-builtin:omfwd queue: queue full - discarding newest message",
    ] {
        assert!(line::reports_loss(loss.as_bytes()), "{loss}");
        let found = search_text(&format!("{REAL}{loss}\n"), &[]);
        assert_eq!(found.losses.len(), 1, "{loss}");
        assert!(found.loss_near(AT, AT + 60.0).is_some(), "{loss}");
        assert!(
            found.loss_near(AT + 3600.0, AT + 3660.0).is_none(),
            "{loss}"
        );
    }
    for ordinary in [
        "Nov 29 22:15:58 relay postfix/smtpd[1]: lost connection after DATA (58 bytes) from localhost[127.0.0.1]",
        "Nov 29 22:15:58 relay postfix/qmgr[1]: ABCDEF: from=<a@b>, size=1, nrcpt=1 (queue active)",
        "Nov 29 22:15:58 relay postfix/smtp[1]: ABCDEF: to=<a@b>, status=sent (250 2.0.0 Ok: queued as 1234, 3 messages)",
    ] {
        assert!(!line::reports_loss(ordinary.as_bytes()), "{ordinary}");
    }
}

/// journalctl's mark between two boots takes absence away near it, placed at the last
/// line before it: a crash can take the relay's last minutes of lines, a queued message's
/// message-id line among them. A line quoting the mark, or another of journalctl's own
/// lines, is no mark.
#[test]
fn a_journal_mark_between_boots_is_read_as_lines_maybe_lost_before_it() {
    for mark in [
        "-- Boot 5c4f0e8e2a9f4b2a8a3d1e7b6c5d4e3f --",
        "-- Boot 5C4F0E8E2A9F4B2A8A3D1E7B6C5D4E3F --\r",
        "-- Reboot --",
    ] {
        assert!(line::marks_a_reboot(mark.as_bytes()), "{mark}");
        let after = "Nov 29 22:25:00 relay postfix/anvil[23877]: statistics: after the boot\n";
        let found = search_text(&format!("{REAL}{mark}\n{after}"), &[]);
        assert_eq!(found.losses.len(), 1, "{mark}");
        let loss = &found.losses[0];
        assert_eq!(loss.why, super::Lost::Reboot, "{mark}");
        // At the last line before it (22:16:30), not at the first after.
        assert_eq!(loss.at, AT + 33.0, "{mark}");
        assert!(found.loss_near(AT, AT + 60.0).is_some(), "{mark}");
        assert!(found.loss_near(AT + 3600.0, AT + 3660.0).is_none());
        // A mark before any stamped line stands at the first after it.
        let first = search_text(&format!("{mark}\n{REAL}"), &[]);
        assert_eq!(first.losses.len(), 1);
        assert_eq!(first.losses[0].at, AT - 3.0, "{mark}");
    }
    for other in [
        "-- Boot 5c4f0e8e --",
        "-- Boot 5c4f0e8e2a9f4b2a8a3d1e7b6c5d4e3g --",
        "-- Logs begin at Sun 2026-11-29 20:00:00 UTC, end at Sun 2026-11-29 23:00:00 UTC. --",
        "-- No entries --",
        "Nov 29 22:15:59 relay postfix/cleanup[23938]: 7EB8E9C0054: warning: header Subject: -- Reboot --",
        " -- Reboot --",
    ] {
        assert!(!line::marks_a_reboot(other.as_bytes()), "{other}");
        let found = search_text(&format!("{REAL}{other}\n"), &[]);
        assert!(found.losses.is_empty(), "{other}: {:?}", found.losses);
    }
}

/// What the real relay wrote when tests' tool stopped it and started it again (in
/// `maillog_file` mode master writes no `terminating` line).
const RESTARTED: &str = "\
Dec 07 04:48:58 relay postfix/postfix-script[6334]: starting the Postfix mail system
Dec 07 04:48:58 relay postfix/master[6335]: daemon started -- version 3.7.11, configuration /tmp/pr/r/conf
Dec 07 04:48:58 relay postfix/smtpd[6340]: connect from localhost[127.0.0.1]
Dec 07 04:48:58 relay postfix/smtpd[6340]: disconnect from localhost[127.0.0.1] commands=0/0
Dec 07 04:48:59 relay postfix/postfix-script[6350]: stopping the Postfix mail system
Terminated
Dec 07 04:49:04 relay postfix/postfix-script[6810]: starting the Postfix mail system
Dec 07 04:49:04 relay postfix/master[6811]: daemon started -- version 3.7.11, configuration /tmp/pr/r/conf
Dec 07 04:49:04 relay postfix/smtpd[6816]: connect from localhost[127.0.0.1]
";

#[test]
fn a_start_no_stop_came_before_is_read_as_a_crash_that_may_have_lost_lines() {
    // A log's first start, and a start after a stop, lose nothing.
    assert!(search_text(REAL, &[]).losses.is_empty());
    assert!(search_text(RESTARTED, &[]).losses.is_empty());
    let starts = "\
Nov 29 22:17:10 relay postfix/postfix-script[30001]: starting the Postfix mail system
Nov 29 22:17:11 relay postfix/master[30003]: daemon started -- version 3.7.11, configuration /etc/postfix
";
    let master_only = "\
Nov 29 22:17:11 relay postfix/master[30003]: daemon started -- version 3.7.11, configuration /etc/postfix
";
    for (what, after, at) in [
        ("postfix start", starts, AT + 73.0),
        ("master alone", master_only, AT + 74.0),
    ] {
        let found = search_text(&format!("{REAL}{after}"), &[]);
        // One start, however many lines say it: the first of them.
        assert_eq!(found.losses.len(), 1, "{what}: {:?}", found.losses);
        assert_eq!(found.losses[0].why, super::Lost::Restart, "{what}");
        assert_eq!(found.losses[0].at, at, "{what}");
        assert!(found.losses[0].line.contains("start"), "{what}");
        assert!(found.loss_near(AT, AT + 60.0).is_some(), "{what}");
        // A stop said first, by either program (a straggler may follow it): no crash.
        for stop in [
            "Nov 29 22:17:00 relay postfix/postfix-script[30000]: stopping the Postfix mail system\n",
            "Nov 29 22:17:00 relay postfix/master[23874]: terminating on signal 15\n",
            "Nov 29 22:17:00 relay postfix/postfix-script[30000]: aborting the Postfix mail system\n",
        ] {
            let straggler = "Nov 29 22:17:01 relay postfix/smtpd[23879]: disconnect from localhost[127.0.0.1] ehlo=1 commands=1\n";
            let found = search_text(&format!("{REAL}{stop}{straggler}{after}"), &[]);
            assert!(
                found.losses.is_empty(),
                "{what}, {stop}: {:?}",
                found.losses
            );
        }
        // Another host's stop says nothing of this one.
        let other =
            "Nov 29 22:17:00 other postfix/postfix-script[9]: stopping the Postfix mail system\n";
        let found = search_text(&format!("{REAL}{other}{after}"), &[]);
        assert_eq!(found.losses.len(), 1, "{what}: {:?}", found.losses);
        // A crash between two files of a rotation is seen across them.
        let dir = tempfile::tempdir().expect("dir");
        let older = write(dir.path(), "maillog.1", REAL, false);
        let newer = write(dir.path(), "maillog", after, false);
        let found = search(&[newer, older], &wanted(&[]), options());
        assert_eq!(found.losses.len(), 1, "{what}, rotated: {:?}", found.losses);
    }
    // The words elsewhere, or from a program that is not the relay's, start nothing.
    for other in [
        "Nov 29 22:17:11 relay postfix/smtpd[30003]: daemon started -- version 3.7.11",
        "Nov 29 22:17:11 relay postfix/cleanup[23938]: 7EB8E9C0054: warning: header Subject: daemon started",
        "Nov 29 22:17:11 relay othermail/master[30003]: daemon started -- version 3.7.11",
        "Nov 29 22:17:11 relay postfix/postfix-script[30001]: starting the Postfix mail system now",
        "Nov 29 22:17:11 relay postfix/master[30003]: reload -- version 3.7.11, configuration /etc/postfix",
    ] {
        let found = search_text(&format!("{REAL}{other}\n"), &[]);
        assert!(found.losses.is_empty(), "{other}: {:?}", found.losses);
    }
}

/// What a real Postfix 3.7 relay wrote with `header_checks` of `/^Message-ID:/ IGNORE`:
/// the header is gone without a word, and cleanup logs the Message-ID it made instead.
const ID_REMOVED: &str = "\
Dec 07 05:57:30 relay postfix/smtpd[12113]: connect from localhost[127.0.0.1]
Dec 07 05:57:30 relay postfix/smtpd[12113]: A3C08B122F1: client=localhost[127.0.0.1]
Dec 07 05:57:30 relay postfix/cleanup[12157]: A3C08B122F1: message-id=<20261207055730.A3C08B122F1@relay.test>
Dec 07 05:57:30 relay postfix/qmgr[12110]: A3C08B122F1: from=<uns@uns.local>, size=300, nrcpt=1 (queue active)
Dec 07 05:57:30 relay postfix/smtpd[12113]: disconnect from localhost[127.0.0.1] ehlo=1 mail=1 rcpt=1 data=1 quit=1 commands=5
Dec 07 05:57:31 relay postfix/qmgr[12110]: A3C08B122F1: removed
";

#[test]
fn a_message_id_the_relay_made_names_no_message() {
    let made =
        |value: &str, queue_id: &str| read::made_by_relay(value.as_bytes(), queue_id.as_bytes());
    assert!(made(
        "<20261207055730.A3C08B122F1@relay.test>",
        "A3C08B122F1"
    ));
    assert!(made(
        "<20261207055730.4dQ3Yx1Lw9z8Kpm@relay.test>",
        "4dQ3Yx1Lw9z8Kpm"
    ));
    for (value, queue_id) in [
        // Another queue id's, a sender's own, or a shape close to it.
        ("<20261207055730.A3C08B122F1@relay.test>", "B3C08B122F1"),
        ("<20261207055730.A3C08B122F1X@relay.test>", "A3C08B122F1"),
        ("<2026120705573.A3C08B122F1@relay.test>", "A3C08B122F1"),
        ("<20261207055730.A3C08B122F1>", "A3C08B122F1"),
        ("<n-1.1.1@uns.local>", "A3C08B122F1"),
        ("20261207055730.A3C08B122F1@relay.test", "A3C08B122F1"),
    ] {
        assert!(!made(value, queue_id), "{value} {queue_id}");
    }
    // The message it names is one no message-id line names: queued from the runtime's
    // sender inside the window, it may be the attempt's.
    let at = 1_796_623_050.0; // 2026-12-07T05:57:30Z
    let dir = tempfile::tempdir().expect("dir");
    let log = write(dir.path(), "maillog", ID_REMOVED, false);
    let found = search(
        &[log],
        &wanted(&["<n-1.1.1@uns.local>"]),
        Options {
            near: at,
            ..options()
        },
    );
    assert!(found.seen("<n-1.1.1@uns.local>").is_empty());
    assert_eq!(found.orphans.len(), 1, "{:?}", found.orphans);
    let orphan = &found.orphans[0];
    // Its stamp says the second: it may have been taken at any time in it, so a
    // window inside that second holds it.
    assert_eq!((orphan.at, orphan.until), (at, at + 1.0));
    assert!(found.orphan_within(at + 0.5, at + 0.9, &[]).is_some());
    assert!(found.orphan_within(at + 1.5, at + 2.0, &[]).is_none());
    assert_eq!(orphan.sender.as_deref(), Some("uns@uns.local"));
    assert!(
        orphan
            .what
            .starts_with("A3C08B122F1 (the relay gave it a Message-ID of its own"),
        "{}",
        orphan.what
    );
    assert_eq!(
        found.orphan_within(at - 1.0, at + 1.0, &["uns@uns.local".into()]),
        Some(orphan.what.as_str())
    );
}

#[test]
fn a_stamp_in_a_repeated_hour_reads_as_either_and_covers_nothing() {
    // Europe/Berlin fell back on 2026-10-25: 02:00 to 03:00 happened twice.
    let berlin = Zone::parse("Europe/Berlin").expect("zone");
    let near = 1_792_886_400.0; // 2026-10-25T00:00:00Z
    let clock = clock::Clock::new(&berlin, near);
    let first = 1_792_888_200.0; // 00:30Z, 02:30 CEST
    let twice = clock.stamp_of(b"Oct 25 02:30:00").expect("stamp");
    assert!(twice.ambiguous);
    assert_eq!((twice.lo, twice.hi), (first, first + 3600.0 + 1.0));
    // short-full's abbreviation says which pass it was.
    let summer = clock
        .stamp_of(b"Sun 2026-10-25 02:30:00 CEST")
        .expect("stamp");
    let winter = clock
        .stamp_of(b"Sun 2026-10-25 02:30:00 CET")
        .expect("stamp");
    assert_eq!((summer.lo, summer.ambiguous), (first, false));
    assert_eq!((winter.lo, winter.ambiguous), (first + 3600.0, false));
    assert!(clock.stamp_of(b"Sun 2026-10-25 02:30:00 EST").is_none());
    // The hour the spring change skipped never happened.
    let spring = clock::Clock::new(&berlin, 1_774_742_400.0); // 2026-03-29
    assert!(spring.stamp_of(b"Mar 29 02:30:00").is_none());
    // Lines every minute through the repeated hour: the hour proves no coverage.
    let lines: String = (0..=59)
        .map(|m| format!("Oct 25 02:{m:02}:00 relay postfix/anvil[1]: statistics\n"))
        .chain(
            (0..=20).map(|m| format!("Oct 25 03:{m:02}:00 relay postfix/anvil[1]: statistics\n")),
        )
        .collect();
    let dir = tempfile::tempdir().expect("dir");
    let log = write(dir.path(), "maillog", &lines, false);
    let found = search(
        &[log],
        &wanted(&[]),
        Options {
            zone: berlin,
            near,
            ..options()
        },
    );
    assert!(!found.host_covers("relay", first + 600.0, first + 900.0));
    assert!(!found.host_covers("relay", first + 3600.0 + 600.0, first + 3600.0 + 900.0));
}

#[test]
fn milter_and_smtpd_holds_commit_and_milter_rejects_refuse() {
    let text = "\
Nov 29 22:15:57 relay postfix/smtpd[10]: connect from app[10.0.0.5]
Nov 29 22:15:57 relay postfix/smtpd[10]: AAAAAA0001: client=app[10.0.0.5]
Nov 29 22:15:57 relay postfix/smtpd[10]: AAAAAA0001: hold: RCPT from app[10.0.0.5]: <a@b.test>: Recipient address triggers HOLD action; from=<uns@uns.local> to=<a@b.test> proto=ESMTP helo=<uns.local>
Nov 29 22:15:57 relay postfix/cleanup[11]: AAAAAA0001: message-id=<n-1.1.1@uns.local>
Nov 29 22:15:57 relay postfix/smtpd[10]: disconnect from app[10.0.0.5] ehlo=1 mail=1 rcpt=1 data=1 quit=1 commands=5
Nov 29 22:15:58 relay postfix/smtpd[10]: connect from app[10.0.0.5]
Nov 29 22:15:58 relay postfix/smtpd[10]: AAAAAA0002: client=app[10.0.0.5]
Nov 29 22:15:58 relay postfix/cleanup[11]: AAAAAA0002: message-id=<n-2.1.1@uns.local>
Nov 29 22:15:58 relay postfix/cleanup[11]: AAAAAA0002: milter-hold: END-OF-MESSAGE from app[10.0.0.5]: milter triggers HOLD action; from=<uns@uns.local> to=<a@b.test> proto=ESMTP helo=<uns.local>
Nov 29 22:15:58 relay postfix/smtpd[10]: disconnect from app[10.0.0.5] ehlo=1 mail=1 rcpt=1 data=1 quit=1 commands=5
Nov 29 22:15:59 relay postfix/smtpd[10]: connect from app[10.0.0.5]
Nov 29 22:15:59 relay postfix/smtpd[10]: AAAAAA0003: client=app[10.0.0.5]
Nov 29 22:15:59 relay postfix/cleanup[11]: AAAAAA0003: message-id=<n-3.1.1@uns.local>
Nov 29 22:15:59 relay postfix/cleanup[11]: AAAAAA0003: milter-reject: END-OF-MESSAGE from app[10.0.0.5]: 5.7.1 Spam; from=<uns@uns.local> to=<a@b.test> proto=ESMTP helo=<uns.local>
Nov 29 22:15:59 relay postfix/smtpd[10]: disconnect from app[10.0.0.5] ehlo=1 mail=1 rcpt=1 data=0/1 quit=1 commands=4/5
";
    let ids = [
        "<n-1.1.1@uns.local>",
        "<n-2.1.1@uns.local>",
        "<n-3.1.1@uns.local>",
    ];
    let found = search_text(text, &ids);
    let fates: Vec<Fate> = ids.iter().map(|id| only(&found, id).fate).collect();
    assert_eq!(fates, [Fate::Held, Fate::Held, Fate::Rejected]);
}

#[test]
fn a_disconnect_without_counts_says_nothing_about_data() {
    // Postfix before 3.0: a message held by a milter, with no hold line of cleanup's.
    let text = "\
Nov 29 22:15:57 relay postfix/smtpd[10]: connect from app[10.0.0.5]
Nov 29 22:15:57 relay postfix/smtpd[10]: AAAAAA0001: client=app[10.0.0.5]
Nov 29 22:15:57 relay postfix/cleanup[11]: AAAAAA0001: message-id=<n-1.1.1@uns.local>
Nov 29 22:15:57 relay postfix/smtpd[10]: disconnect from app[10.0.0.5]
";
    let found = search_text(text, &["<n-1.1.1@uns.local>"]);
    assert_eq!(only(&found, "<n-1.1.1@uns.local>").fate, Fate::Open);
    // A session whose start was not read is not known to be the one that ended.
    let text = "\
Nov 29 22:15:57 relay postfix/smtpd[10]: AAAAAA0001: client=app[10.0.0.5]
Nov 29 22:15:57 relay postfix/cleanup[11]: AAAAAA0001: message-id=<n-1.1.1@uns.local>
Nov 29 22:15:58 relay postfix/smtpd[10]: lost connection after DATA (9 bytes) from app[10.0.0.5]
";
    let found = search_text(text, &["<n-1.1.1@uns.local>"]);
    assert_eq!(only(&found, "<n-1.1.1@uns.local>").fate, Fate::Open);
}

#[test]
fn two_hosts_keep_their_queue_ids_and_their_coverage_apart() {
    let text = "\
Nov 29 22:15:50 relay postfix/anvil[1]: statistics
Nov 29 22:15:50 other postfix/anvil[1]: statistics
Nov 29 22:15:57 relay postfix/smtpd[10]: connect from app[10.0.0.5]
Nov 29 22:15:57 relay postfix/smtpd[10]: AAAAAA0001: client=app[10.0.0.5]
Nov 29 22:15:57 relay postfix/cleanup[11]: AAAAAA0001: message-id=<n-1.1.1@uns.local>
Nov 29 22:15:58 other postfix/qmgr[12]: AAAAAA0001: from=<uns@uns.local>, size=1, nrcpt=1 (queue active)
Nov 29 22:16:40 relay postfix/anvil[1]: statistics
";
    let found = search_text(text, &["<n-1.1.1@uns.local>"]);
    // The other host's queue manager took its own AAAAAA0001, not this one.
    assert_eq!(only(&found, "<n-1.1.1@uns.local>").fate, Fate::Open);
    assert!(found.host_covers("relay", AT, AT + 30.0));
    assert!(!found.host_covers("other", AT, AT + 30.0));
    assert!(found.relay_host(AT, AT + 30.0, None, &[]).is_err());
    assert_eq!(
        found.relay_host(AT, AT + 30.0, Some("relay.test"), &[]),
        Ok("relay")
    );
    assert!(
        found
            .relay_host(AT, AT + 30.0, Some("third.test"), &[])
            .is_err()
    );
}

/// RFC 5424, as a central syslog server writes it: the same session reads as its RFC 3339
/// twin, whatever the structured data holds (spaces and a bracket inside quoted values, or
/// nothing), and a byte-order mark before the message is not part of it.
#[test]
fn rfc5424_lines_read_as_their_rfc3339_twins() {
    let twin: String = REAL
        .lines()
        .map(|line| {
            let (stamp, rest) = line.split_at(15);
            let at = clock::Clock::new(&Zone::Fixed(0), NEAR)
                .stamp(stamp.as_bytes())
                .expect("stamp")
                .0
                .lo;
            let rest = rest.trim_start();
            let (host, rest) = rest.split_once(' ').expect("host");
            let (tag, text) = rest.split_once(": ").expect("tag");
            let (app, pid) = tag
                .strip_suffix(']')
                .and_then(|t| t.split_once('['))
                .expect("pid");
            let stamp = jiff::Timestamp::from_second(at as i64)
                .expect("time")
                .strftime("%Y-%m-%dT%H:%M:%S%:z");
            let sd = if pid.ends_with('9') {
                r#"[meta sequenceId="1" note="a \"quoted\" ] bracket"]"#
            } else {
                "-"
            };
            format!("<22>1 {stamp} {host} {app} {pid} - {sd} \u{feff}{text}\n")
        })
        .collect();
    let ids = ["<n-1.1.1@uns.local>", "<n-2.1.1@uns.local>"];
    let classic = search_text(REAL, &ids);
    let rfc5424 = search_text(&twin, &ids);
    assert!(rfc5424.unread.is_empty(), "{:?}", rfc5424.unread);
    for id in ids {
        let (a, b) = (only(&classic, id), only(&rfc5424, id));
        assert_eq!(
            (&a.queue_id, a.fate, &a.sender),
            (&b.queue_id, b.fate, &b.sender),
            "{id}"
        );
    }
    assert_eq!(classic.covered, rfc5424.covered);
    // A NILVALUE stamp says nothing of when: the line is not read.
    let nil = search_text(
        "<22>1 - relay postfix/anvil 9 - - statistics: max connection rate 1/60s\n",
        &[],
    );
    assert!(nil.covered.is_empty());
}

/// The loss rule as first written, word for word on an allocated copy: the oracle the
/// allocation-free reading is held to.
fn reports_loss_as_written(line: &[u8]) -> bool {
    let lower = line.to_ascii_lowercase();
    let words: Vec<&[u8]> = lower
        .split(|b| !b.is_ascii_alphanumeric())
        .filter(|w| !w.is_empty())
        .collect();
    let has = |word: &[u8]| words.contains(&word);
    if (has(b"action") && has(b"suspended"))
        || (has(b"queue") && has(b"full") && words.iter().any(|w| w.starts_with(b"discard")))
    {
        return true;
    }
    if memchr::memmem::find(&lower, b"essage").is_none() {
        return false;
    }
    let messages = |w: &[u8]| w == b"messages" || w == b"message";
    let number = |w: &[u8]| w.iter().all(u8::is_ascii_digit);
    words.windows(2).any(|pair| {
        messages(pair[0]) && matches!(pair[1], b"lost" | b"dropped" | b"suppressed" | b"missed")
            || matches!(pair[0], b"drop" | b"dropping") && messages(pair[1])
    }) || words.windows(3).any(|three| {
        matches!(
            three[0],
            b"lost" | b"suppressed" | b"missed" | b"dropped" | b"dropping"
        ) && number(three[1])
            && (messages(three[2])
                || matches!(three[2], b"kernel" | b"log" | b"syslog" | b"journal"))
    })
}

#[test]
fn the_loss_rule_reads_every_line_as_it_was_written() {
    let phrases = [
        "imuxsock begins to drop messages from pid 4242 due to rate-limiting",
        "imuxsock lost 1523 messages from pid 4242 due to rate-limiting",
        "imjournal: 1523 messages lost due to rate-limiting",
        "Suppressed 1523 messages from postfix@-.service",
        "Forwarding to syslog missed 12 messages.",
        "action 'action-1-builtin:omfile' suspended (module 'builtin:omfile')",
        "main Q: queue full - discarding message",
        "messages dropped",
        "Dropped 3 log messages",
        "lost 5 kernel messages",
        "7E4029C0029: message-id=<n-1.1.1@uns.local>",
        "statistics: max connection rate 2/60s for (smtp:127.0.0.1)",
        "MESSAGES LOST",
        "a full moon",
        "the queue is full, nothing discarded? discarding!",
        "message",
        "",
    ];
    let mut lines: Vec<Vec<u8>> = phrases.iter().map(|p| p.as_bytes().to_vec()).collect();
    // Each phrase with its words' letters in other cases, and cut at every byte.
    for phrase in phrases {
        let upper: Vec<u8> = phrase
            .bytes()
            .enumerate()
            .map(|(n, b)| {
                if n % 2 == 0 {
                    b.to_ascii_uppercase()
                } else {
                    b
                }
            })
            .collect();
        lines.push(upper);
        for cut in 0..phrase.len() {
            lines.push(phrase.as_bytes()[..cut].to_vec());
            lines.push(phrase.as_bytes()[cut..].to_vec());
        }
    }
    for line in &lines {
        assert_eq!(
            line::reports_loss(line),
            reports_loss_as_written(line),
            "{:?}",
            String::from_utf8_lossy(line)
        );
    }
    assert_a_block_reads_loss_as_written(&lines);
}

/// The loss rule as a parser reads it, each line in one block of them all (where the
/// needles are searched for once, and a match may run from one line into the next),
/// held to the oracle line by line.
fn assert_a_block_reads_loss_as_written(lines: &[Vec<u8>]) {
    let mut text = Vec::new();
    for line in lines {
        text.extend_from_slice(line);
        text.push(b'\n');
    }
    let said = lines_reporting_loss(&text, &options());
    assert_eq!(said.len(), lines.len());
    for (line, said) in lines.iter().zip(said) {
        assert_eq!(
            said,
            reports_loss_as_written(line),
            "{:?}",
            String::from_utf8_lossy(line)
        );
    }
}

/// Lines of words the loss rule reads, in every order and every case: the oracle's
/// answer and the allocation-free reading's are the same for each.
#[test]
fn the_loss_rule_reads_every_mix_of_its_words_as_it_was_written() {
    let words = [
        "message",
        "Messages",
        "message-id=<x>",
        "lost",
        "LOST",
        "dropped",
        "drop",
        "dropping",
        "suppressed",
        "missed",
        "12",
        "kernel",
        "journal",
        "queue",
        "full",
        "discarding",
        "action",
        "suspended",
        "-",
    ];
    let mut lines = Vec::new();
    let checked = each_triple(&words, |a, b, c| {
        let line = format!("relay rsyslogd[1]: {a} {b} {c}");
        assert_eq!(
            line::reports_loss(line.as_bytes()),
            reports_loss_as_written(line.as_bytes()),
            "{line}"
        );
        lines.push(line.into_bytes());
    });
    assert_eq!(checked, words.len().pow(3));
    assert_a_block_reads_loss_as_written(&lines);
}

/// Calls `check` with every ordered triple of `words`, repeats included; how many.
fn each_triple(words: &[&str], mut check: impl FnMut(&str, &str, &str)) -> usize {
    let mut checked = 0;
    for a in words {
        for b in words {
            for c in words {
                check(a, b, c);
                checked += 1;
            }
        }
    }
    checked
}

/// `disconnect from`'s counts: what the session took, by its `data=` and `bdat=`
/// tokens, only where it writes counts at all.
#[test]
fn a_disconnect_lines_counts_say_what_the_session_took() {
    let taken = |text: &str| read::messages_taken(text.as_bytes());
    let from = "disconnect from app[10.0.0.5]";
    assert_eq!(
        taken(&format!(
            "{from} ehlo=1 mail=1 rcpt=1 data=1 quit=1 commands=5"
        )),
        Some(1)
    );
    assert_eq!(
        taken(&format!(
            "{from} ehlo=1 mail=1 rcpt=1 data=0/1 commands=3/4"
        )),
        Some(0)
    );
    assert_eq!(
        taken(&format!(
            "{from} ehlo=1 mail=2 rcpt=2 data=1/2 bdat=2/3 commands=6/7"
        )),
        Some(3)
    );
    // Postfix before 3.0 writes no counts: nothing is said about DATA.
    assert_eq!(taken(from), None);
    assert_eq!(taken(&format!("{from} data=0/1 xcommands=3")), None);
    // Only a token that starts with the name counts.
    assert_eq!(
        taken(&format!("{from} xdata=9 data=0/1 commands=3/4")),
        Some(0)
    );
    // A count that cannot be read is taken as many, never as "nothing taken".
    assert_eq!(
        taken(&format!("{from} data=x commands=3")),
        Some(usize::MAX)
    );
    assert_eq!(
        taken(&format!("{from} data=data=0 commands=3")),
        Some(usize::MAX)
    );
    assert_eq!(
        taken(&format!(
            "{from} data=18446744073709551615 bdat=1 commands=3"
        )),
        Some(usize::MAX)
    );
}

/// `disconnect from`'s counts as first read, token by token on the split text: the
/// oracle the one-pass reading is held to.
fn messages_taken_as_written(text: &[u8]) -> Option<usize> {
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

/// Every mix of a disconnect line's tokens, spaces doubled and at either end, reads as
/// the oracle reads it.
#[test]
fn a_disconnect_lines_counts_read_as_first_written() {
    let tokens = [
        "data=1",
        "data=0/1",
        "bdat=2/3",
        "commands=5",
        "commands=",
        "xdata=9",
        "data=x",
        "data=data=0",
        "bdat=",
        "data=18446744073709551615",
        "",
        "quit=1",
        "data=1/",
        "commands=3/4data=2",
    ];
    let checked = each_triple(&tokens, |a, b, c| {
        let text = format!("disconnect from app[10.0.0.5] {a} {b}  {c}");
        for line in [text, format!("{a} {b} {c} "), format!(" {c}")] {
            assert_eq!(
                read::messages_taken(line.as_bytes()),
                messages_taken_as_written(line.as_bytes()),
                "{line:?}"
            );
        }
    });
    assert_eq!(checked, tokens.len().pow(3));
}

/// Lines longer than any kept, between others and at the file's end, read the same
/// however the reads cut them.
#[test]
fn long_lines_read_the_same_whatever_the_block() {
    let mut stream = b"a\n".to_vec();
    stream.extend(std::iter::repeat_n(b'x', 70_000));
    stream.extend(b"\nb\n");
    stream.extend(std::iter::repeat_n(b'y', read::MAX_LINE - 1));
    stream.extend(b"\nc\n");
    stream.extend(std::iter::repeat_n(b'z', 70_000));
    let none = super::Wanted::default();
    let mut seen: Option<Vec<(Vec<u8>, u64)>> = None;
    for size in [1, 7, 4096, 65_537, 100_000, 2 << 20] {
        let mut splitter = read::Splitter::new(&stream[..], size);
        let parser = read::Parser::new(
            &none,
            &Zone::Fixed(0),
            NEAR,
            SyslogNames::default(),
            Default::default(),
        );
        let mut lines = Vec::new();
        while let Some(block) = splitter.next_block().expect("read") {
            for record in parser.parse(&block) {
                lines.push((record.line.in_(&block.data).to_vec(), record.consumed));
            }
        }
        let shape: Vec<(usize, u64)> = lines.iter().map(|(l, c)| (l.len(), *c)).collect();
        assert_eq!(
            shape,
            [
                (2, 2),
                (read::MAX_LINE, 70_001),
                (2, 2),
                (read::MAX_LINE, read::MAX_LINE as u64),
                (2, 2),
                (read::MAX_LINE, 70_000)
            ],
            "block {size}"
        );
        match &seen {
            Some(first) => assert_eq!(&lines, first, "block {size}"),
            None => seen = Some(lines),
        }
    }
}

#[test]
fn a_queue_id_reused_an_hour_later_is_followed_as_the_new_message() {
    // The first message of AAAAAA1 is forgotten an hour after it began. The relay's next
    // message under that queue id begins just then: it is a message of its own, with its
    // own lines, never one "no message-id line names".
    let text = "\
Nov 29 21:00:00 relay postfix/smtpd[1]: connect from localhost[127.0.0.1]
Nov 29 21:00:00 relay postfix/smtpd[1]: AAAAAA1: client=localhost[127.0.0.1]
Nov 29 21:00:00 relay postfix/cleanup[2]: AAAAAA1: message-id=<other@example.com>
Nov 29 21:00:01 relay postfix/qmgr[3]: AAAAAA1: from=<x@example.com>, size=1, nrcpt=1 (queue active)
Nov 29 21:00:01 relay postfix/qmgr[3]: AAAAAA1: removed
Nov 29 21:00:01 relay postfix/smtpd[1]: disconnect from localhost[127.0.0.1] ehlo=1 mail=1 rcpt=1 data=1 quit=1 commands=5
Nov 29 22:00:05 relay postfix/smtpd[1]: connect from localhost[127.0.0.1]
Nov 29 22:00:05 relay postfix/smtpd[1]: AAAAAA1: client=localhost[127.0.0.1]
Nov 29 22:00:05 relay postfix/cleanup[2]: AAAAAA1: message-id=<n-1.1.1@uns.local>
Nov 29 22:00:06 relay postfix/qmgr[3]: AAAAAA1: from=<uns@uns.local>, size=1, nrcpt=1 (queue active)
Nov 29 22:00:06 relay postfix/qmgr[3]: AAAAAA1: removed
Nov 29 22:00:06 relay postfix/smtpd[1]: disconnect from localhost[127.0.0.1] ehlo=1 mail=1 rcpt=1 data=1 quit=1 commands=5
";
    let found = search_text(text, &["<n-1.1.1@uns.local>"]);
    let message = only(&found, "<n-1.1.1@uns.local>");
    assert_eq!(message.fate, Fate::Queued);
    // Its lines began with its session's, at 22:00:05.
    assert_eq!(message.span.0, AT - 952.0);
    assert!(found.orphans.is_empty(), "{:?}", found.orphans);
}

#[test]
fn a_queue_id_identified_again_is_remembered_from_its_new_message() {
    // BBBBBB1 named another Message-ID at 22:00:00 and, reused, again at 22:09:59. What
    // forgets the first (600 s on, at 22:10:00) must not forget the second, or the queue
    // manager's line about it reads as a message no message-id line names.
    let text = "\
Nov 29 22:00:00 relay postfix/smtpd[1]: BBBBBB1: client=localhost[127.0.0.1]
Nov 29 22:00:00 relay postfix/cleanup[2]: BBBBBB1: message-id=<a@example.com>
Nov 29 22:00:01 relay postfix/qmgr[3]: BBBBBB1: from=<x@example.com>, size=1, nrcpt=1 (queue active)
Nov 29 22:00:01 relay postfix/qmgr[3]: BBBBBB1: removed
Nov 29 22:09:59 relay postfix/smtpd[1]: BBBBBB1: client=localhost[127.0.0.1]
Nov 29 22:09:59 relay postfix/cleanup[2]: BBBBBB1: message-id=<b@example.com>
Nov 29 22:10:00 relay postfix/smtpd[4]: CCCCCC1: client=localhost[127.0.0.1]
Nov 29 22:10:00 relay postfix/cleanup[2]: CCCCCC1: message-id=<c@example.com>
Nov 29 22:10:01 relay postfix/qmgr[3]: BBBBBB1: from=<x@example.com>, size=1, nrcpt=1 (queue active)
Nov 29 22:10:01 relay postfix/qmgr[3]: CCCCCC1: from=<x@example.com>, size=1, nrcpt=1 (queue active)
Nov 29 22:10:02 relay postfix/smtpd[1]: disconnect from localhost[127.0.0.1]
Nov 29 22:10:02 relay postfix/smtpd[4]: disconnect from localhost[127.0.0.1]
";
    let found = search_text(text, &["<n-1.1.1@uns.local>"]);
    assert!(found.orphans.is_empty(), "{:?}", found.orphans);
    // Past its own 600 s, a retry of it is one again.
    let later = format!(
        "{text}Nov 29 22:20:00 relay postfix/smtpd[5]: DDDDDD1: client=localhost[127.0.0.1]\n\
         Nov 29 22:20:00 relay postfix/cleanup[2]: DDDDDD1: message-id=<d@example.com>\n\
         Nov 29 22:20:00 relay postfix/smtpd[5]: disconnect from localhost[127.0.0.1]\n\
         Nov 29 22:20:01 relay postfix/qmgr[3]: BBBBBB1: from=<x@example.com>, size=1, nrcpt=1 (queue active)\n"
    );
    let found = search_text(&later, &["<n-1.1.1@uns.local>"]);
    let orphans: Vec<&str> = found.orphans.iter().map(|o| o.what.as_str()).collect();
    assert_eq!(orphans, ["BBBBBB1"]);
}

/// Thousands of queue ids identified a second apart, so the ones past their 600 s are
/// swept from memory in bulk: one identified 601 s before the last client line is
/// forgotten, and one identified 599 s before is still known, however many were swept.
#[test]
fn identified_queue_ids_are_forgotten_on_time_among_thousands() {
    let start = 21 * 3600;
    let stamp = |second: u32| {
        let second = start + second;
        format!(
            "Nov 29 {:02}:{:02}:{:02}",
            second / 3600,
            second / 60 % 60,
            second % 60
        )
    };
    let mut text = String::new();
    let count = 4000;
    for n in 0..count {
        let at = stamp(n);
        let queue_id = format!("Q{n:08X}");
        text.push_str(&format!(
            "{at} relay postfix/smtpd[1]: {queue_id}: client=localhost[127.0.0.1]\n\
             {at} relay postfix/cleanup[2]: {queue_id}: message-id=<{n}@example.com>\n\
             {at} relay postfix/qmgr[3]: {queue_id}: from=<x@example.com>, size=1, nrcpt=1 (queue active)\n\
             {at} relay postfix/qmgr[3]: {queue_id}: removed\n"
        ));
    }
    // The last client line was at `count - 1`: the queue id identified 601 s before it
    // is forgotten, the one identified 599 s before is not.
    let after = stamp(count);
    for n in [count - 1 - 601, count - 1 - 599] {
        text.push_str(&format!(
            "{after} relay postfix/qmgr[3]: Q{n:08X}: from=<x@example.com>, size=1, nrcpt=1 (queue active)\n"
        ));
    }
    let found = search_text(&text, &["<n-1.1.1@uns.local>"]);
    let orphans: Vec<&str> = found
        .orphans
        .iter()
        .map(|o| o.what.as_str())
        .filter(|what| what.starts_with('Q'))
        .collect();
    assert_eq!(orphans, [format!("Q{:08X}", count - 1 - 601)]);
}

/// The level words a container image writes where the host would be: each of the list in
/// any case, and nothing else, however near (cut, extended, another case of a letter).
#[test]
fn level_words_are_exactly_the_list() {
    let mut words: Vec<String> = Vec::new();
    for level in line::LEVELS {
        words.push(level.to_string());
        words.push(level.to_uppercase());
        words.push(format!("{}{}", level[..1].to_uppercase(), &level[1..]));
        words.push(format!("{level}s"));
        words.push(format!("x{level}"));
        for cut in 1..level.len() {
            words.push(level[..cut].to_string());
            words.push(level[cut..].to_string());
        }
    }
    words.extend(["relay", "mail", "localhost", "", "informational", "é"].map(String::from));
    for word in &words {
        let lowered = word.to_ascii_lowercase();
        assert_eq!(
            line::is_level(word.as_bytes()),
            line::LEVELS.contains(&lowered.as_str()),
            "{word:?}"
        );
    }
}

/// A line read after any other (whose prefix the parser remembers) is read as a parser
/// of its own reads it: hosts, level words, programs, pids and `]: ` where a prefix
/// could be mistaken for another's.
#[test]
fn a_line_reads_the_same_after_any_other() {
    let rests = [
        "relay postfix/smtpd[2001]: connect from app[10.0.0.5]",
        "relay postfix/smtpd[2001]: 4ABCDEF1: client=app[10.0.0.5]",
        "relay postfix/smtpd[200]: 4ABCDEF1: client=app[10.0.0.5]",
        "relay postfix/smtpd[20011]: 4ABCDEF1: client=app[10.0.0.5]",
        "relay2 postfix/smtpd[2001]: 4ABCDEF1: client=app[10.0.0.5]",
        "relay  postfix/smtpd[2001]: 4ABCDEF1: client=app[10.0.0.5]",
        "relay postfix/cleanup[2002]: 4ABCDEF1: message-id=<n-1.1.1@uns.local>",
        "relay postfix-out/cleanup[2002]: 4ABCDEF1: message-id=<n-1.1.1@uns.local>",
        "relay postfix/cleanupx[2002]: 4ABCDEF1: message-id=<n-1.1.1@uns.local>",
        "relay other/cleanup[2002]: 4ABCDEF1: message-id=<n-1.1.1@uns.local>",
        "relay postfix/qmgr[2003]: 4ABCDEF1: removed",
        "relay postfix/qmgr[2003]: 4ABCDEF1: from=<a@b>, size=1, nrcpt=1 (queue active)",
        "INFO postfix/qmgr[2003]: 4ABCDEF1: removed",
        "info  postfix/qmgr[2003]: 4ABCDEF1: removed",
        "postfix/qmgr[2003]: 4ABCDEF1: removed",
        "postfix/qmgr[2003]:  4ABCDEF1: removed",
        "a]: b postfix/qmgr[2003]: 4ABCDEF1: removed",
        "relay]: postfix/qmgr[2003]: 4ABCDEF1: removed",
        "relay postfix/qmgr[2003]: x]: 4ABCDEF1: removed",
        "relay postfix/qmgr[20a3]: 4ABCDEF1: removed",
        "relay postfix/qmgr[]: 4ABCDEF1: removed",
        "relay post fix/qmgr[2003]: 4ABCDEF1: removed",
        "relay postfix/smtpd[2001]:",
        "relay postfix/smtpd[2001]: ",
        "relay",
        "",
    ];
    let stamps = [
        "Nov 29 22:15:57 ",
        "Nov 29 22:15:58 ",
        "2026-11-29T22:15:57+00:00 ",
    ];
    let lines = every_join(&stamps, &rests, "\n");
    let none = super::Wanted::default();
    // One seed for every parser, as in a search: their names' hashes compare.
    let hasher = foldhash::fast::RandomState::default();
    let parser = || {
        read::Parser::new(
            &none,
            &Zone::Fixed(0),
            NEAR,
            SyslogNames::default(),
            hasher.clone(),
        )
    };
    let block = |line: &str| read::Block {
        data: line.as_bytes().to_vec(),
        long: Vec::new(),
    };
    let shared = parser();
    let mut relay = 0;
    for before in &lines {
        for line in &lines {
            let _ = shared.parse(&block(before));
            let read = shared.parse(&block(line));
            let alone = parser().parse(&block(line));
            relay += usize::from(matches!(
                read[0].kind,
                read::Kind::Read { relay: Some(_), .. }
            ));
            assert_eq!(read, alone, "{line:?} after {before:?}");
        }
    }
    assert!(relay > 0);
}

/// A name kept as a key holds exactly its bytes at every length, inline or not, and two
/// made of equal bytes are equal wherever the bytes came from.
#[test]
fn a_short_key_keeps_exactly_its_bytes() {
    let source: Vec<u8> = (0..64u8).map(|n| b'A' + n % 26).collect();
    for length in 0..=40 {
        for start in [0, 3, 11] {
            let bytes = &source[start..start + length];
            let short = super::Short::new(bytes);
            assert_eq!(short.bytes(), bytes, "length {length} from {start}");
            let copy: Vec<u8> = bytes.to_vec();
            assert!(super::Short::new(&copy) == short, "length {length}");
            if length > 0 {
                let mut other = copy.clone();
                other[length - 1] ^= 1;
                assert!(super::Short::new(&other) != short, "length {length}");
                other = copy.clone();
                other[0] ^= 1;
                assert!(super::Short::new(&other) != short, "length {length}");
            }
        }
    }
}

/// A rotated log compressed by another compressor than gzip (logrotate's `compresscmd`)
/// is refused by name, with the command that reads it, and nothing of it is taken for
/// lines: even plain lines after its first bytes prove nothing.
#[test]
fn a_log_compressed_otherwise_than_gzip_is_named_not_read() {
    let dir = tempfile::tempdir().expect("dir");
    let cases: [(&[u8], &str, &str); 4] = [
        (&[0xfd, b'7', b'z', b'X', b'Z', 0], "xz", "xz -dk"),
        (&[0x28, 0xb5, 0x2f, 0xfd], "zstd", "zstd -d"),
        (b"BZh9", "bzip2", "bzip2 -dk"),
        (&[0x04, 0x22, 0x4d, 0x18], "lz4", "lz4 -d"),
    ];
    for (magic, name, command) in cases {
        let path = dir.path().join(format!("mail log.1.{name}"));
        let mut bytes = magic.to_vec();
        bytes.extend_from_slice(b"\n");
        bytes.extend_from_slice(REAL.as_bytes());
        std::fs::write(&path, bytes).expect("write");
        let found = search(
            std::slice::from_ref(&path),
            &wanted(&["<n-1.1.1@uns.local>"]),
            options(),
        );
        assert!(found.seen("<n-1.1.1@uns.local>").is_empty(), "{name}");
        assert!(found.covered.is_empty(), "{name}: {:?}", found.covered);
        assert_eq!(found.problems.len(), 1, "{name}: {:?}", found.problems);
        let quoted = format!("'{}'", path.display());
        assert!(
            found.problems[0].contains(&format!(
                "compressed with {name}, which unsctl does not read"
            )) && found.problems[0].contains(&format!("({command} -- {quoted})")),
            "{}",
            found.problems[0]
        );
    }
    // A log whose first line begins as bzip2's magic does, but is text, is read.
    let text = format!("BZh relay\n{REAL}");
    let found = search_text(&text, &["<n-1.1.1@uns.local>"]);
    assert!(found.problems.is_empty(), "{:?}", found.problems);
    assert_eq!(found.seen("<n-1.1.1@uns.local>").len(), 1);
}

/// A pipe (a shell's `<(...)`), a directory and a device are named for what they are,
/// and a pipe is never opened: its writer may never come.
#[test]
fn a_pipe_a_directory_and_a_device_are_named_not_read() {
    let dir = tempfile::tempdir().expect("dir");
    let pipe = dir.path().join("a-pipe");
    assert!(
        std::process::Command::new("mkfifo")
            .arg(&pipe)
            .status()
            .expect("mkfifo")
            .success()
    );
    let cases = [
        (pipe, "a pipe, not a file"),
        (dir.path().to_path_buf(), "a directory, not a file"),
        (PathBuf::from("/dev/null"), "a device or socket, not a file"),
    ];
    for (path, said) in cases {
        let found = search(
            std::slice::from_ref(&path),
            &wanted(&["<n-1.1.1@uns.local>"]),
            options(),
        );
        assert_eq!(found.problems.len(), 1, "{}", path.display());
        assert!(found.problems[0].contains(said), "{}", found.problems[0]);
    }
}

/// A log named twice, by its path and by a link to it, is read once: each message in it
/// is seen once.
#[test]
fn a_log_named_twice_is_read_once() {
    let dir = tempfile::tempdir().expect("dir");
    let log = write(dir.path(), "maillog", REAL, false);
    let link = dir.path().join("mail.log");
    std::os::unix::fs::symlink(&log, &link).expect("link");
    let found = search(
        &[log.clone(), link, log],
        &wanted(&["<n-1.1.1@uns.local>"]),
        options(),
    );
    assert!(found.problems.is_empty(), "{:?}", found.problems);
    assert_eq!(only(&found, "<n-1.1.1@uns.local>").queue_id, "7E4029C0029");
    assert_eq!(found.lines, REAL.lines().count() as u64);
}
