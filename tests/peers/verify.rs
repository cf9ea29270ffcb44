//! `unsctl verify` against a real Postfix relay, with a fault-injecting proxy between the
//! email adapter and it, and against the fakes' PagerDuty and Slack lookups; STARTTLS
//! against the same real relay with a private CA.
//!
//! Each relay case goes the whole way: the attempt is UNKNOWN, verify answers from the
//! relay's own log, the answer is recorded, triage moves (or does not), `apply` acts, and
//! the relay's log and the sink's dumps show what was really sent.

use crate::support;
use unsctl::db::Db;

use serde_json::{Value, json};
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::Duration;
use support::relay::{Ca, Fault, PATIENCE, Proxy, Relay};
use unsctl::clock::{Clock, SystemClock};
use unsctl::model::Channel;
use unsctl::runtime::adapters::email::{EmailAdapter, EmailConfig, StartTls};
use unsctl::runtime::adapters::webhook::SLACK_EVENT_TYPE;
use unsctl::runtime::adapters::{Adapter, DeliveryRequest};
use unsctl::runtime::engine::{self, Backoff, ClaimOutcome, DeliveryResult, NewNotification};
use unsctl::runtime::schema::{self, OpenMode};

/// The lease of an attempt a fault makes outlive it (the proxy holds or cuts, the fake
/// hangs or loses the message): short, so its window closes soon.
const LEASE: f64 = 1.0;
/// The lease of an attempt that must succeed: far longer than a relay slowed by a
/// loaded machine takes, so it is never lost by luck.
const LONG_LEASE: f64 = 60.0;
/// No socket step gives up before this, so only a fault the test injects makes a call
/// UNKNOWN or REJECTED; a peer that never answers is waited for this long.
const MIN_IO: Duration = Duration::from_secs(5);
const BACKOFF: Backoff = Backoff {
    base_seconds: 0.0,
    max_seconds: 0.0,
};

/// When the last lease of an attempt in doubt runs out: every window verify may be asked
/// about has closed once the clock is past it. An attempt whose result was a success
/// (under a long lease) is never asked about.
fn leases_end(db: &Path) -> f64 {
    let conn = rusqlite::Connection::open(db).expect("store");
    conn.query_row(
        "SELECT MAX(json_extract(s.payload, '$.lease_until')) FROM uns_events s
         WHERE s.kind = 'ATTEMPT_STARTED' AND NOT EXISTS (
             SELECT 1 FROM uns_events r
             WHERE r.kind = 'CHANNEL_ATTEMPT_RESULT' AND json_extract(r.payload, '$.success')
               AND json_extract(r.payload, '$.lease_token') = json_extract(s.payload, '$.lease_token'))",
        [],
        |row| row.get::<_, Option<f64>>(0),
    )
    .expect("leases")
    .expect("a claim")
}

fn now() -> f64 {
    SystemClock.now()
}

fn adapter(relay: SocketAddr, starttls: StartTls, ca: Option<&Path>) -> EmailAdapter {
    let mut config = EmailConfig::new(relay.to_string());
    config.starttls = starttls;
    config.ca_pem = ca.map(|path| std::fs::read(path).expect("ca"));
    EmailAdapter::new(config)
}

/// Claims the due row with a lease of `seconds` and starts its EMAIL call through
/// `adapter`, as the worker does: the store, and the lease.
fn start_email(
    db: &Path,
    adapter: &EmailAdapter,
    seconds: f64,
) -> (rusqlite::Connection, engine::Lease) {
    let conn = schema::open(db, OpenMode::Create).expect("store");
    let lease = support::claim_and_start(
        &conn,
        "verify-test",
        seconds,
        Channel::Email,
        &adapter.started(),
    );
    (conn, lease)
}

/// Claims the due row with a lease of `seconds` and makes one attempt through `adapter`,
/// recorded as the worker records it; a lost lease is recovered, so a budget of one ends
/// in the DLQ.
fn deliver_due(db: &Path, adapter: &EmailAdapter, seconds: f64) -> DeliveryResult {
    let (conn, lease) = start_email(db, adapter, seconds);
    let request = DeliveryRequest::for_lease(&lease, Channel::Email, seconds, MIN_IO);
    let result = adapter.deliver(&request, &|| true);
    engine::record_result(&Db::Sqlite(&conn), now(), &lease, Channel::Email, &result)
        .expect("result");
    let _ = engine::settle(
        &Db::Sqlite(&conn),
        now(),
        &lease,
        &[(Channel::Email, result.clone())],
        &BACKOFF,
    );
    let status: String = conn
        .query_row(
            "SELECT status FROM uns_notifications WHERE id = ?1",
            [&lease.notification_id],
            |r| r.get(0),
        )
        .expect("row");
    if status == "LEASED" {
        // The lease ran out mid-call: the next claim finds the budget gone.
        let later = lease.lease_until + 0.01;
        let outcome = engine::claim(
            &Db::Sqlite(&conn),
            later.max(now()),
            "verify-test-2",
            seconds,
        )
        .expect("reclaim");
        assert!(
            matches!(outcome, ClaimOutcome::RecoveryExhausted { .. }),
            "{outcome:?}"
        );
    }
    result
}

/// A PagerDuty and a Slack notification, each claimed, its channel started, and its
/// lease taken over once it ran out: a call in doubt on each provider.
fn lost_mid_call(conn: &rusqlite::Connection) -> Vec<String> {
    let mut ids = Vec::new();
    for channel in [Channel::Pagerduty, Channel::Slack] {
        let id = submit_on(conn, channel);
        let lease =
            support::claim_and_start(conn, "verify-test", LEASE, channel, &Default::default());
        let _ = engine::claim(
            &Db::Sqlite(conn),
            lease.lease_until + 0.01,
            "verify-test-2",
            LEASE,
        );
        ids.push(id);
    }
    ids
}

/// A notification on `channel` alone, with a budget of one attempt.
fn submit_on(conn: &rusqlite::Connection, channel: Channel) -> String {
    engine::submit(
        &Db::Sqlite(conn),
        now(),
        &NewNotification {
            channels: [channel].into_iter().collect(),
            payload: json!({"subject": "verify", "body": "hello"}),
            idempotency_key: None,
            max_attempts: 1,
        },
    )
    .expect("submit")
    .id
}

fn submit(db: &Path, recipient: &str) -> String {
    submit_with(db, recipient, "verify")
}

fn submit_with(db: &Path, recipient: &str, subject: &str) -> String {
    let conn = schema::open(db, OpenMode::Create).expect("store");
    engine::submit(
        &Db::Sqlite(&conn),
        now(),
        &NewNotification {
            channels: [Channel::Email].into_iter().collect(),
            payload: json!({"recipient": recipient, "subject": subject, "body": "hello"}),
            idempotency_key: None,
            max_attempts: 1,
        },
    )
    .expect("submit")
    .id
}

fn unsctl(db: &Path, args: &[&str]) -> Output {
    let mut command = support::unsctl();
    command
        .arg("--db")
        .arg(db)
        .args(args)
        .env("USER", "verify-test")
        .stdin(Stdio::null())
        .output()
        .expect("unsctl")
}

fn json(out: &Output, what: &str) -> Value {
    assert_eq!(
        out.status.code(),
        Some(0),
        "{what}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap_or_else(|err| panic!("{what}: {err}"))
}

fn verify(db: &Path, id: &str, logs: &[&Path], record: bool) -> Value {
    verify_with(db, id, logs, record, &["--clock-skew", "0s"])
}

fn verify_with(db: &Path, id: &str, logs: &[&Path], record: bool, extra: &[&str]) -> Value {
    let mut args = vec!["verify", id, "-o", "json"];
    args.extend(extra);
    let logs: Vec<String> = logs.iter().map(|l| l.display().to_string()).collect();
    for log in &logs {
        args.extend(["--relay-log", log.as_str()]);
    }
    if record {
        args.extend([
            "--record",
            "--confirm",
            "--yes",
            "--reason",
            "relay log read",
        ]);
    }
    json(&unsctl(db, &args), "verify")
}

fn branch(db: &Path, id: &str) -> String {
    let triage = json(&unsctl(db, &["dlq", "triage", "-o", "json"]), "triage");
    triage["entries"]
        .as_array()
        .and_then(|entries| entries.iter().find(|e| e["id"] == id))
        .map(|e| e["branch"].as_str().unwrap_or_default().to_string())
        .unwrap_or_else(|| "(not in the DLQ)".into())
}

/// `dlq triage -o json > plan.json`, then `apply plan.json --confirm --yes`.
fn apply(db: &Path, dir: &Path) -> Value {
    let plan = unsctl(db, &["dlq", "triage", "-o", "json"]);
    let path = dir.join("plan.json");
    std::fs::write(&path, &plan.stdout).expect("plan");
    let out = unsctl(
        db,
        &[
            "apply",
            &path.display().to_string(),
            "--confirm",
            "--yes",
            "-o",
            "json",
        ],
    );
    serde_json::from_slice(&out.stdout).unwrap_or(Value::Null)
}

fn message_id(id: &str, cycle: i64, attempt: i64) -> String {
    format!("<{id}.{cycle}.{attempt}@uns.local>")
}

/// The log lines naming `queue_id`s of the message with `message_id`.
fn queued(log: &str, message_id: &str) -> bool {
    let queue_ids: Vec<&str> = log
        .lines()
        .filter(|l| l.ends_with(&format!("message-id={message_id}")))
        .filter_map(|l| l.split(": ").nth(1))
        .collect();
    log.lines().any(|l| {
        l.contains("postfix/qmgr[")
            && l.contains("(queue active)")
            && queue_ids.iter().any(|q| l.contains(&format!(": {q}: ")))
    })
}

#[test]
fn the_relays_own_log_settles_what_the_adapter_could_not_tell() {
    let work = tempfile::tempdir().expect("dir");
    let db = work.path().join("uns.db");
    let relay = Relay::start(None);
    let proxy = Proxy::start(relay.addr, Fault::HoldReplyToDot);
    let via_proxy = adapter(proxy.addr, StartTls::Never, None);
    relay.mark_then_next_second();

    // 1. The relay queues the message; its reply to the final dot is held past the lease.
    let held = submit(&db, "held@example.test");
    let result = deliver_due(&db, &via_proxy, LEASE);
    assert_eq!(result.outcome.as_str(), "UNKNOWN", "{result:?}");
    // 2. The connection is cut before the final dot: nothing is queued.
    proxy.set(Fault::CutBeforeDot);
    let cut = submit(&db, "cut@example.test");
    let result = deliver_due(&db, &via_proxy, LEASE);
    assert_eq!(result.outcome.as_str(), "UNKNOWN", "{result:?}");
    // 3. The same fault, but the log that held it is rotated away before anyone looks.
    let lost = submit(&db, "lost@example.test");
    let result = deliver_due(&db, &via_proxy, LEASE);
    assert_eq!(result.outcome.as_str(), "UNKNOWN", "{result:?}");
    // Wait for the relay to log all of the session, so the rotation keeps none of it.
    // Postfix's cleanup logs the Message-ID after smtpd logged the session's end.
    let lost_ended = |log: &str| log.contains(&format!("message-id={}", message_id(&lost, 1, 1)));
    support::wait_for(PATIENCE, || lost_ended(&relay.log()));
    assert!(lost_ended(&relay.log()), "{}", relay.log());
    let rotated_at = std::fs::metadata(&relay.maillog).expect("log").len();
    for id in [&held, &cut, &lost] {
        assert_eq!(branch(&db, id), "VERIFY");
    }
    // The log runs on past every attempt's lease.
    relay.log_past(now() + LEASE);
    let log = relay.log();
    assert!(queued(&log, &message_id(&held, 1, 1)), "{log}");
    assert!(!queued(&log, &message_id(&cut, 1, 1)), "{log}");
    assert!(
        log.contains(&format!("message-id={}", message_id(&cut, 1, 1))),
        "{log}"
    );

    let answer = |value: &Value| {
        value["answers"][0]["answer"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    };
    let current = relay.maillog.as_path();
    assert_eq!(answer(&verify(&db, &held, &[current], false)), "DELIVERED");
    assert_eq!(
        answer(&verify(&db, &cut, &[current], false)),
        "NOT_DELIVERED"
    );
    // The same log damaged as a crash or a broken writer leaves it: a NUL inside the held
    // message's Message-ID, a line that is not UTF-8 inside the cut one's window. Neither
    // may become NOT_DELIVERED, and each answer names the damaged line.
    let text = std::fs::read(current).expect("log");
    let held_id = message_id(&held, 1, 1);
    let damaged = work.path().join("maillog.damaged");
    let mut bytes = Vec::new();
    for line in text.split_inclusive(|b| *b == b'\n') {
        let line_text = String::from_utf8_lossy(line);
        if line_text.contains(&format!("message-id={held_id}")) {
            bytes.extend_from_slice(line_text.replace("@uns.local>", "\0@uns.local>").as_bytes());
            continue;
        }
        bytes.extend_from_slice(line);
        if line_text.contains(&format!("message-id={}", message_id(&cut, 1, 1))) {
            bytes.extend_from_slice(b"\xff\xfe a line that is not text\n");
        }
    }
    std::fs::write(&damaged, &bytes).expect("damaged log");
    for id in [&held, &cut] {
        let (answer, evidence) = answer_of(&verify(&db, id, &[&damaged], false));
        assert_eq!(answer, "CANNOT_TELL", "{evidence}");
        assert!(evidence.contains("maillog.damaged"), "{evidence}");
    }
    // The relay's log rewritten as a central syslog server writes it (RFC 5424) answers as
    // the relay's own does.
    let rfc5424 = work.path().join("maillog.rfc5424");
    std::fs::write(&rfc5424, as_rfc5424(&String::from_utf8_lossy(&text))).expect("rfc5424");
    assert_eq!(answer(&verify(&db, &held, &[&rfc5424], false)), "DELIVERED");
    assert_eq!(
        answer(&verify(&db, &cut, &[&rfc5424], false)),
        "NOT_DELIVERED"
    );
    // Rotated: only what was written after case 3 is left, which cannot cover it.
    let rest = std::fs::read(current).expect("log");
    let after_rotation = work.path().join("maillog");
    std::fs::write(&after_rotation, &rest[rotated_at as usize..]).expect("rotated log");
    let cannot = verify(&db, &lost, &[&after_rotation], false);
    assert_eq!(answer(&cannot), "CANNOT_TELL", "{cannot:#}");
    assert!(
        cannot["answers"][0]["evidence"]
            .as_str()
            .is_some_and(|e| e.contains("not all of the attempt's window")),
        "{cannot:#}"
    );

    // Recorded, triage follows: RESOLVE, REPLAY, and VERIFY left alone.
    let recorded = verify(&db, &held, &[current], true);
    assert_eq!(
        recorded["record"]["recorded"][0]["branch"], "RESOLVE",
        "{recorded:#}"
    );
    verify(&db, &cut, &[current], true);
    let nothing = verify(&db, &lost, &[&after_rotation], true);
    assert_eq!(
        nothing["record"]["planned"], 0,
        "CANNOT_TELL records nothing"
    );
    assert_eq!(branch(&db, &held), "RESOLVE");
    assert_eq!(branch(&db, &cut), "REPLAY");
    assert_eq!(branch(&db, &lost), "VERIFY");
    let conn = rusqlite::Connection::open(&db).expect("db");
    let verified: i64 = conn
        .query_row(
            "SELECT COUNT(*) FROM uns_events WHERE kind = 'VERIFIED'",
            [],
            |r| r.get(0),
        )
        .expect("count");
    assert_eq!(verified, 2);

    // apply: the held one is resolved and never sent again; the cut one is replayed and
    // sent once; the lost one is left for a person.
    let applied = apply(&db, work.path());
    assert!(applied["results"].is_array(), "{applied:#}");
    proxy.set(Fault::None);
    let replayed = deliver_due(&db, &via_proxy, LONG_LEASE);
    assert_eq!(replayed.outcome.as_str(), "ACCEPTED", "{replayed:?}");
    assert_eq!(branch(&db, &held), "(not in the DLQ)");
    assert_eq!(branch(&db, &lost), "VERIFY");
    relay.send_marker();
    let copies = |id: &str| {
        relay
            .sink
            .received()
            .iter()
            .filter(|m| m.contains(&format!("{id}.")))
            .count()
    };
    support::wait_for(PATIENCE, || copies(&cut) > 0);
    let log = relay.log();
    assert_eq!(
        copies(&held),
        1,
        "the held message reached the sink once: {log}"
    );
    assert_eq!(copies(&cut), 1, "the replay reached the sink once");
    assert_eq!(copies(&lost), 0, "the lost message never reached the sink");
    assert!(
        queued(&log, &message_id(&cut, 2, 2)),
        "the replay was queued: {log}"
    );
    assert!(!queued(&log, &message_id(&cut, 1, 1)));
}

/// A call that started and never reached the relay: it stays in doubt (a reclaim with no
/// budget left ends it), and no line of the relay's is about it.
fn never_sent(db: &Path, recipient: &str, adapter: &EmailAdapter) -> String {
    let id = submit_with(db, recipient, "hello");
    let (conn, lease) = start_email(db, adapter, LEASE);
    let _ = engine::claim(
        &Db::Sqlite(&conn),
        lease.lease_until + 0.01,
        "verify-test-2",
        LEASE,
    );
    id
}

/// The one answer of a verify document, and its evidence.
fn answer_of(value: &Value) -> (String, String) {
    let answer = &value["answers"][0];
    (
        answer["answer"].as_str().unwrap_or_default().to_string(),
        answer["evidence"].as_str().unwrap_or_default().to_string(),
    )
}

#[test]
fn the_rules_of_evidence_hold_against_a_real_relay() {
    let work = tempfile::tempdir().expect("dir");
    let db = work.path().join("uns.db");
    let relay = Relay::start_with(
        None,
        Some("/^Subject:.*HOLDME/ HOLD held for review\n/^Subject:.*WARNME/ WARN\n"),
    );
    let proxy = Proxy::start(relay.addr, Fault::HoldReplyToDot);
    let via_proxy = adapter(proxy.addr, StartTls::Never, None);
    relay.mark_then_next_second();
    let unknown = |recipient: &str, subject: &str| {
        let id = submit_with(&db, recipient, subject);
        let result = deliver_due(&db, &via_proxy, LEASE);
        assert_eq!(
            result.outcome.as_str(),
            "UNKNOWN",
            "{recipient}: {result:?}"
        );
        id
    };

    // 1. The relay holds it (header_checks HOLD) and answers 250; the answer is held back.
    let held = unknown("held@example.test", "HOLDME please");
    // 2. A WARN line quotes a Subject that says status=sent, and the session is cut
    //    before the final dot.
    proxy.set(Fault::CutBeforeDot);
    let warned = unknown(
        "warned@example.test",
        "WARNME status=sent (250 2.0.0 Ok: queued as 7E4029C0029)",
    );
    // 3. Cut before the dot too, and a forger sends its Message-ID: once at once, inside
    //    the window, and once after the window.
    let forged = unknown("forged@example.test", "hello");
    let forgery = format!(
        "Message-ID: {}\r\nSubject: x\r\n\r\nforged\r\n",
        message_id(&forged, 1, 1)
    );
    relay.submit("attacker@evil.test", &forgery, true);
    relay.log_past(now() + LEASE + 2.5);
    relay.submit("attacker@evil.test", &forgery, true);
    let second_forgery = support::wall_clock();
    // 4. A session cut before the dot whose lines sit in a rotated file that goes missing:
    //    begun once the second forgery is beyond its window's reach (the 2 s skew).
    support::wait_past(
        "the second forgery out of the next window's skew",
        second_forgery + 2.5,
    );
    relay.mark_and_wait();
    // The rotation falls between sessions: a session still open where the first file
    // ends, met again by its smtpd's next one, may have carried anything, and would
    // take absence away before the missing file is looked at.
    relay.wait_for_sessions_to_end();
    let before_gone = std::fs::metadata(&relay.maillog).expect("log").len() as usize;
    let gone = unknown("gone@example.test", "hello");
    relay.wait_for_log(&format!("message-id={}", message_id(&gone, 1, 1)));
    // Everything its window and the skew could reach is in the part that goes missing.
    support::wait_past(
        "the gone attempt's window and skew to pass",
        leases_end(&db) + 2.5,
    );
    let after_gone = std::fs::metadata(&relay.maillog).expect("log").len() as usize;
    relay.log_past(now() + LEASE + 2.5);
    relay.wait_for_log(&format!("message-id={}", message_id(&forged, 1, 1)));
    // 5. A call that started and never reached the relay, which stays quiet for a while.
    let quiet = never_sent(&db, "quiet@example.test", &via_proxy);
    // The relay stays quiet past the call's window and the skew, then logs a line.
    support::wait_past(
        "the quiet attempt's window and skew to pass",
        leases_end(&db) + 2.0,
    );
    relay.send_marker();
    relay.log_past(now() + 0.5);

    let log = relay.log();
    assert!(log.contains("hold: header Subject: HOLDME"), "{log}");
    assert!(
        log.contains("warning: header Subject: WARNME status=sent"),
        "{log}"
    );
    let current = relay.maillog.as_path();
    let skew = ["--clock-skew", "2s"];

    let (answer, evidence) = answer_of(&verify_with(&db, &held, &[current], false, &skew));
    assert_eq!(answer, "DELIVERED", "{evidence}");
    assert!(evidence.contains("held by the relay"), "{evidence}");

    let (answer, evidence) = answer_of(&verify_with(&db, &warned, &[current], false, &skew));
    assert_eq!(
        answer, "NOT_DELIVERED",
        "a quoted status= is no commitment: {evidence}"
    );
    assert!(
        evidence.contains("lost connection after DATA"),
        "{evidence}"
    );

    // Another sender's committed message with the attempt's Message-ID is what a relay
    // that rewrites senders logs for the runtime's own: it forbids NOT_DELIVERED, though
    // the relay's record of the attempt's own session says it was cut.
    let (answer, evidence) = answer_of(&verify_with(&db, &forged, &[current], false, &skew));
    assert_eq!(answer, "CANNOT_TELL", "{evidence}");
    assert!(
        evidence.contains("<attacker@evil.test>, not the runtime's <uns@uns.local>")
            && evidence.contains("--smtp-from attacker@evil.test"),
        "{evidence}"
    );
    assert!(
        evidence.contains("outside the attempt's window"),
        "{evidence}"
    );

    // The rotation: the files before and after, without the one between.
    let bytes = std::fs::read(current).expect("log");
    let first = work.path().join("maillog.2");
    let last = work.path().join("maillog");
    std::fs::write(&first, &bytes[..before_gone]).expect("first");
    std::fs::write(&last, &bytes[after_gone..]).expect("last");
    let tight = ["--clock-skew", "0s", "--max-log-gap", "2s"];
    let (answer, evidence) = answer_of(&verify_with(&db, &gone, &[&first, &last], false, &tight));
    assert_eq!(answer, "CANNOT_TELL", "{evidence}");
    assert!(
        evidence.contains("not all of the attempt's window"),
        "{evidence}"
    );
    let (answer, evidence) = answer_of(&verify_with(&db, &gone, &[current], false, &tight));
    assert_eq!(
        answer, "NOT_DELIVERED",
        "the whole log holds the relay's record: {evidence}"
    );
    // A file that cannot be read beside one that covers: named, and no absence is proof.
    let broken = work.path().join("maillog.1.gz");
    std::fs::write(&broken, [0x1f, 0x8b, 8, 0, 1, 2, 3]).expect("broken");
    let (answer, evidence) =
        answer_of(&verify_with(&db, &gone, &[current, &broken], false, &tight));
    assert_eq!(answer, "CANNOT_TELL", "{evidence}");
    assert!(evidence.contains("maillog.1.gz"), "{evidence}");
    // A relay quiet for longer than the allowed gap proves no absence; a shorter quiet does.
    let (answer, evidence) = answer_of(&verify_with(&db, &quiet, &[current], false, &tight));
    assert_eq!(answer, "CANNOT_TELL", "{evidence}");
    assert!(evidence.contains("gaps over 2s"), "{evidence}");
    let patient = ["--clock-skew", "0s", "--max-log-gap", "1m"];
    let (answer, evidence) = answer_of(&verify_with(&db, &quiet, &[current], false, &patient));
    assert_eq!(answer, "NOT_DELIVERED", "{evidence}");
    // Copied elsewhere with a new mtime, the log answers as before.
    let copy = work.path().join("copied-maillog");
    std::fs::copy(current, &copy).expect("copy");
    let (answer, _) = answer_of(&verify_with(&db, &held, &[&copy], false, &skew));
    assert_eq!(answer, "DELIVERED");

    // Recorded, triage follows the answers.
    for id in [&held, &warned, &forged] {
        verify_with(&db, id, &[current], true, &skew);
    }
    assert_eq!(branch(&db, &held), "RESOLVE");
    assert_eq!(branch(&db, &warned), "REPLAY");
    assert_eq!(
        branch(&db, &forged),
        "VERIFY",
        "no answer to record while another sender's commit stands"
    );
    assert_eq!(branch(&db, &gone), "VERIFY");
    // Released, the held message goes on to the sink: a replay would have been a copy.
    let released = Command::new("postsuper")
        .arg("-c")
        .arg(relay.dir().join("conf"))
        .args(["-H", "ALL"])
        .output()
        .expect("postsuper");
    assert!(released.status.success(), "{released:?}");
    let arrived = || {
        relay
            .sink
            .received()
            .iter()
            .any(|m| m.contains(&message_id(&held, 1, 1)))
    };
    // Each look asks the queue manager to try again rather than wait out its backoff.
    support::wait_for(PATIENCE, || {
        let _ = Command::new("postqueue")
            .arg("-c")
            .arg(relay.dir().join("conf"))
            .arg("-f")
            .output();
        arrived()
    });
    assert!(
        arrived(),
        "the held message reached the sink once released: {}",
        relay.log()
    );
}

/// A real relay stopped and started again logs that it stopped, and its log still proves
/// an absence across the restart; one killed at once, as a crash of its host ends it,
/// logs a start with no stop before it, and its log proves no absence near that start
/// (lines written just before a crash may never have reached the disk).
#[test]
fn a_relay_restarted_proves_absence_across_a_stop_it_logged_and_none_across_a_crash() {
    let work = tempfile::tempdir().expect("dir");
    let db = work.path().join("uns.db");
    let relay = Relay::start(None);
    let direct = adapter(relay.addr, StartTls::Never, None);
    relay.mark_then_next_second();
    let answer = |id: &str| {
        let patient = ["--clock-skew", "0s", "--max-log-gap", "1m"];
        answer_of(&verify_with(
            &db,
            id,
            &[relay.maillog.as_path()],
            false,
            &patient,
        ))
    };

    let before_a_stop = never_sent(&db, "stopped@example.test", &direct);
    support::wait_past("the attempt's window to pass", leases_end(&db) + 1.0);
    relay.restart();
    relay.mark_and_wait();
    let log = relay.log();
    assert!(log.contains("stopping the Postfix mail system"), "{log}");
    let (said, evidence) = answer(&before_a_stop);
    assert_eq!(said, "NOT_DELIVERED", "{evidence}\n{log}");

    let before_a_crash = never_sent(&db, "crashed@example.test", &direct);
    support::wait_past("the attempt's window to pass", leases_end(&db) + 1.0);
    relay.kill_and_start();
    relay.mark_and_wait();
    let log = relay.log();
    assert_eq!(
        log.matches("stopping the Postfix mail system").count(),
        1,
        "{log}"
    );
    let (said, evidence) = answer(&before_a_crash);
    assert_eq!(said, "CANNOT_TELL", "{evidence}\n{log}");
    assert!(
        evidence.contains("started again") && evidence.contains("starting the Postfix mail system"),
        "{evidence}"
    );
}

/// A relay whose header checks remove the Message-ID (`/^Message-ID:/ IGNORE`) commits
/// the attempt's message under one it makes itself: its log never names the attempt's,
/// and verify never calls the attempt NOT_DELIVERED, though the relay took its message.
#[test]
fn a_relay_that_removes_the_message_id_never_proves_absence() {
    let work = tempfile::tempdir().expect("dir");
    let db = work.path().join("uns.db");
    let relay = Relay::start_with(None, Some("/^Message-ID:/ IGNORE\n"));
    let proxy = Proxy::start(relay.addr, Fault::HoldReplyToDot);
    let via_proxy = adapter(proxy.addr, StartTls::Never, None);
    relay.mark_then_next_second();
    let id = submit_with(&db, "stripped@example.test", "hello");
    let result = deliver_due(&db, &via_proxy, LEASE);
    assert_eq!(result.outcome.as_str(), "UNKNOWN", "{result:?}");
    support::wait_past("the attempt's window to pass", leases_end(&db) + 1.0);
    relay.mark_and_wait();
    let log = relay.log();
    assert!(log.contains("message-id=<"), "{log}");
    assert!(!log.contains(&message_id(&id, 1, 1)), "{log}");
    // No margin: the window is the attempt's own, a part of the second its lines name.
    let tight = ["--clock-skew", "0s", "--max-log-gap", "1m"];
    let (answer, evidence) = answer_of(&verify_with(
        &db,
        &id,
        &[relay.maillog.as_path()],
        false,
        &tight,
    ));
    assert_eq!(answer, "CANNOT_TELL", "{evidence}\n{log}");
    assert!(
        evidence.contains("the relay gave it a Message-ID of its own"),
        "{evidence}"
    );
}

/// Real sites rewrite the envelope sender (`sender_canonical_maps`) and rename the relay's
/// syslog name; and two relays can stand behind one name. A real Postfix relay commits the
/// attempt's message under the rewritten sender: neither verify nor reconcile may call it
/// NOT_DELIVERED or MISSING, and the operator who names the rewritten address gets
/// DELIVERED. The log of a second relay, which never saw the message, proves no absence
/// for an attempt the first one answered.
#[test]
fn a_rewritten_sender_or_another_relays_log_never_proves_absence() {
    let work = tempfile::tempdir().expect("dir");
    let db = work.path().join("uns.db");
    let rewriting = Relay::start_as(
        "sender_canonical_maps = regexp:{dir}/canonical\nsyslog_name = mailrelay\n",
    );
    std::fs::write(
        rewriting.dir().join("canonical"),
        "/^uns@uns\\.local$/ noreply@example.com\n",
    )
    .expect("canonical map");
    let other = Relay::start_as("myhostname = relay2.test\n");
    let proxy = Proxy::start(rewriting.addr, Fault::HoldReplyToDot);
    let via_proxy = adapter(proxy.addr, StartTls::Never, None);
    rewriting.send_marker();
    other.send_marker();
    let id = submit_with(&db, "rewritten@example.test", "hello");
    let result = deliver_due(&db, &via_proxy, LEASE);
    assert_eq!(result.outcome.as_str(), "UNKNOWN", "{result:?}");
    assert_eq!(
        result.metadata["smtp_greeting"], "relay.test",
        "the relay that answered is recorded"
    );
    let message = message_id(&id, 1, 1);
    rewriting.wait_for_log(&format!("message-id={message}"));
    rewriting.wait_for_log("from=<noreply@example.com>, size=");
    // Both logs run past the window, so only the rules below can keep an absence away.
    rewriting.log_past(now() + LEASE + 2.5);
    other.log_past(now() + LEASE + 2.5);
    let log = rewriting.maillog.as_path();
    let named = ["--clock-skew", "2s", "--relay-syslog-name", "mailrelay"];

    let (answer, evidence) = answer_of(&verify_with(&db, &id, &[log], false, &named));
    assert_eq!(answer, "CANNOT_TELL", "{evidence}");
    assert!(
        evidence.contains("from <noreply@example.com>")
            && evidence.contains("--smtp-from noreply@example.com"),
        "the sender seen and the flag that vouches for it: {evidence}"
    );
    let vouched = [&named[..], &["--smtp-from", "noreply@example.com"]].concat();
    let (answer, evidence) = answer_of(&verify_with(&db, &id, &[log], false, &vouched));
    assert_eq!(answer, "DELIVERED", "{evidence}");
    // Under a syslog name not given, none of its lines is the relay's: no answer.
    let (answer, evidence) = answer_of(&verify_with(&db, &id, &[log], false, &named[..2]));
    assert_eq!(answer, "CANNOT_TELL", "{evidence}");
    // The second relay's log covers the window and never saw the message.
    let (answer, evidence) = answer_of(&verify_with(
        &db,
        &id,
        &[other.maillog.as_path()],
        false,
        &named[..2],
    ));
    assert_eq!(answer, "CANNOT_TELL", "{evidence}");
    assert!(evidence.contains("another relay's log"), "{evidence}");

    // reconcile reads the same rules: in doubt, never MISSING.
    for (what, logs, flags) in [
        ("the rewriting relay", log, &named[..]),
        ("the other relay", other.maillog.as_path(), &named[..2]),
    ] {
        let mut args = vec!["reconcile", "--since", "1h", "-o", "json", "--relay-log"];
        let path = logs.display().to_string();
        args.push(&path);
        args.extend(flags);
        let report = json(&unsctl(&db, &args), "reconcile");
        let class = report["notifications"][0]["class"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        assert_ne!(class, "MISSING", "{what}: {report:#}");
        assert_eq!(class, "UNSETTLED", "{what}: {report:#}");
    }
    // And it really went out: the sink took one copy.
    support::wait_until("the sink to take the message", PATIENCE, || {
        rewriting
            .sink
            .received()
            .iter()
            .any(|m| m.contains(&message))
    });
}

/// A relay log line the verifier reads, with what varies (stamps, hosts, pids, queue ids,
/// addresses, numbers) taken out; None for the lines it does not read.
fn shape(line: &str) -> Option<String> {
    let (_, rest) = line.split_once(" postfix/")?;
    let (program, text) = rest.split_once(": ")?;
    let daemon = program.split('[').next()?.rsplit('/').next()?;
    if !matches!(daemon, "smtpd" | "cleanup" | "qmgr") {
        return None;
    }
    let text = match text.split_once(": ") {
        Some((id, after))
            if id.len() >= 6
                && id.bytes().all(|b| b.is_ascii_alphanumeric())
                && id.bytes().any(|b| b.is_ascii_uppercase()) =>
        {
            format!("QID: {after}")
        }
        _ => text.to_string(),
    };
    let mut shaped = String::new();
    let mut in_angle = false;
    for c in text.chars() {
        match c {
            '<' => {
                in_angle = true;
                shaped.push_str("<X");
            }
            '>' => {
                in_angle = false;
                shaped.push('>');
            }
            _ if in_angle => {}
            c if c.is_ascii_digit() => {
                if !shaped.ends_with('N') {
                    shaped.push('N');
                }
            }
            c => shaped.push(c),
        }
    }
    (!shaped.starts_with("warning:") && !shaped.starts_with("error:") && shaped != "QID: removed")
        .then(|| format!("{daemon}: {}", shaped.replace("N.N.N.N", "IP")))
}

/// The fake relay writes each SMTP session as the real Postfix does: the same lines, in
/// the shapes the verifier reads, and the verifier answers both logs alike.
#[test]
fn the_fake_relay_logs_sessions_as_postfix_does() {
    use unsctl::lab::fakes::{Behavior, Fakes};
    let work = tempfile::tempdir().expect("dir");
    // The real relay: one message queued, one cut before the final dot.
    let real_db = work.path().join("real.db");
    let relay = Relay::start(None);
    let proxy = Proxy::start(relay.addr, Fault::CutBeforeDot);
    relay.send_marker();
    submit(&real_db, "sent@example.test");
    let result = deliver_due(
        &real_db,
        &adapter(relay.addr, StartTls::Never, None),
        LONG_LEASE,
    );
    assert_eq!(result.outcome.as_str(), "ACCEPTED", "{result:?}");
    let real_lost = submit(&real_db, "lost@example.test");
    let result = deliver_due(&real_db, &adapter(proxy.addr, StartTls::Never, None), LEASE);
    assert_eq!(result.outcome.as_str(), "UNKNOWN", "{result:?}");
    relay.wait_for_log(&format!("message-id={}", message_id(&real_lost, 1, 1)));
    relay.log_past(now() + LEASE);
    // The fake: the same two.
    let fake_db = work.path().join("fake.db");
    let fakes = Fakes::start().expect("fakes");
    fakes.control.script("lost@example.test", &[Behavior::Lose]);
    submit(&fake_db, "sent@example.test");
    let result = deliver_due(
        &fake_db,
        &adapter(fakes.smtp, StartTls::Never, None),
        LONG_LEASE,
    );
    assert_eq!(result.outcome.as_str(), "ACCEPTED", "{result:?}");
    let fake_lost = submit(&fake_db, "lost@example.test");
    let result = deliver_due(&fake_db, &adapter(fakes.smtp, StartTls::Never, None), LEASE);
    assert_eq!(result.outcome.as_str(), "UNKNOWN", "{result:?}");
    support::wait_past(
        "the fake's attempts' windows to close",
        leases_end(&fake_db),
    );
    fakes.control.mark_log();

    let real_log = relay.log();
    let fake_log = std::fs::read_to_string(&fakes.maillog).expect("fake log");
    let real: std::collections::BTreeSet<String> = real_log.lines().filter_map(shape).collect();
    let fake: Vec<String> = fake_log.lines().filter_map(shape).collect();
    for expected in [
        "smtpd: connect from localhost[IP]",
        "smtpd: QID: client=localhost[IP]",
        "cleanup: QID: message-id=<X>",
        "qmgr: QID: from=<X>, size=N, nrcpt=N (queue active)",
        "smtpd: lost connection after DATA (N bytes) from localhost[IP]",
        "smtpd: disconnect from localhost[IP] ehlo=N mail=N rcpt=N data=N/N commands=N/N",
    ] {
        assert!(
            real.contains(expected),
            "real relay: {expected}\n{real_log}"
        );
        assert!(
            fake.iter().any(|l| l == expected),
            "fake relay: {expected}\n{fake_log}"
        );
    }
    for line in &fake {
        assert!(
            real.contains(line),
            "the fake wrote {line:?}, which Postfix does not:\n{real_log}"
        );
    }
    // The lost messages are the ones in the DLQ: both logs answer for them alike.
    let answer = |db: &Path, id: &str, log: &Path| {
        answer_of(&verify_with(db, id, &[log], false, &["--clock-skew", "0s"])).0
    };
    let real_answer = answer(&real_db, &real_lost, &relay.maillog);
    let fake_answer = answer(&fake_db, &fake_lost, &fakes.maillog);
    assert_eq!(real_answer, "NOT_DELIVERED");
    assert_eq!(fake_answer, real_answer);
}

#[test]
fn starttls_against_the_real_relay_trusts_only_the_given_ca() {
    let ca = Ca::new("relay");
    let other = Ca::new("stranger");
    let relay = Relay::start(Some((&ca.server_cert, &ca.server_key)));
    let work = tempfile::tempdir().expect("dir");
    let db = work.path().join("uns.db");
    let cases = [
        (
            "required@example.test",
            StartTls::Required,
            &ca.ca_cert,
            "ACCEPTED",
        ),
        (
            "opportunistic@example.test",
            StartTls::Opportunistic,
            &ca.ca_cert,
            "ACCEPTED",
        ),
        (
            "wrong-ca@example.test",
            StartTls::Required,
            &other.ca_cert,
            "REJECTED",
        ),
    ];
    for (recipient, mode, trusted, expected) in cases {
        let id = submit(&db, recipient);
        let result = deliver_due(&db, &adapter(relay.addr, mode, Some(trusted)), LONG_LEASE);
        assert_eq!(result.outcome.as_str(), expected, "{recipient}: {result:?}");
        if expected == "REJECTED" {
            assert_eq!(result.metadata["stage"], "starttls", "{result:?}");
            assert!(
                !relay.log().contains(&message_id(&id, 1, 1)),
                "no data went out before the handshake failed"
            );
        }
    }
    relay.send_marker();
    let delivered = |to: &str| relay.sink.received().iter().any(|m| m.contains(to));
    support::wait_for(PATIENCE, || {
        delivered("required@") && delivered("opportunistic@")
    });
    let log = relay.log();
    assert!(delivered("required@example.test"), "{log}");
    assert!(delivered("opportunistic@example.test"), "{log}");
    assert!(
        !delivered("wrong-ca@example.test"),
        "nothing reached the sink"
    );
    assert!(
        log.matches("TLS connection established from").count() >= 2,
        "both accepted sends were encrypted: {log}"
    );
}

/// Without tokens verify cannot answer, and names what to search each provider for by
/// hand: searched for exactly what it printed, each stand-in finds the record the worker's
/// call left (PagerDuty's incident by its dedup key, Slack's message by its metadata).
fn by_hand_keys_find_the_records(
    db: &Path,
    fakes: &unsctl::lab::fakes::Fakes,
    ids: &[(String, Channel, unsctl::lab::fakes::Behavior)],
) {
    use unsctl::lab::fakes::{Behavior, PAGERDUTY_TOKEN, SLACK_CHANNEL, SLACK_TOKEN};
    let out = unsctl(db, &["verify"]);
    let said = String::from_utf8_lossy(&out.stderr).to_string();
    let client = reqwest::blocking::Client::new();
    for (id, channel, _) in ids.iter().filter(|(_, _, b)| *b == Behavior::Hang) {
        let line = said
            .lines()
            .find(|l| l.contains(id.as_str()) && l.contains("search the provider for"))
            .unwrap_or_else(|| panic!("a by-hand step for {id}: {said}"));
        let printed = line
            .split("search the provider for ")
            .nth(1)
            .unwrap_or_default()
            .trim();
        let key = printed.rsplit(' ').next().unwrap_or_default();
        let found = match channel {
            Channel::Pagerduty => {
                assert!(printed.starts_with("PAGERDUTY incident_key"), "{printed}");
                assert_eq!(key, id.as_str(), "the dedup key is the bare id");
                let listed: Value = client
                    .get(format!("{}/incidents", fakes.pagerduty_api_url()))
                    .query(&[("incident_key", key)])
                    .header("Authorization", format!("Token token={PAGERDUTY_TOKEN}"))
                    .send()
                    .and_then(|r| r.json())
                    .expect("incidents");
                listed["incidents"].as_array().is_some_and(|i| i.len() == 1)
            }
            _ => {
                assert!(
                    printed.starts_with("SLACK metadata idempotency_key"),
                    "{printed}"
                );
                let history: Value = client
                    .get(format!("{}/conversations.history", fakes.slack_api_url()))
                    .query(&[
                        ("channel", SLACK_CHANNEL),
                        ("include_all_metadata", "true"),
                        ("limit", "999"),
                    ])
                    .bearer_auth(SLACK_TOKEN)
                    .send()
                    .and_then(|r| r.json())
                    .expect("history");
                history["messages"].as_array().is_some_and(|m| {
                    m.iter()
                        .filter(|m| m["metadata"]["event_payload"]["idempotency_key"] == key)
                        .count()
                        == 1
                })
            }
        };
        assert!(
            found,
            "{channel}: searching for {key:?} as printed finds the record"
        );
    }
}

/// The PagerDuty and Slack lookups, against the fakes' APIs over HTTP: DELIVERED where
/// the fake took the message, NOT_DELIVERED where it dropped the connection unread.
#[test]
fn pagerduty_and_slack_are_asked_by_key_with_their_own_auth() {
    use unsctl::lab::fakes::{Behavior, Fakes, PAGERDUTY_TOKEN, SLACK_CHANNEL, SLACK_TOKEN};
    let fakes = Fakes::start().expect("fakes");
    let work = tempfile::tempdir().expect("dir");
    let db = work.path().join("uns.db");
    let conn = schema::open(&db, OpenMode::Create).expect("store");
    let adapters = unsctl::lab::repro::fake_adapters(&fakes).expect("adapters");
    // Each notification: one channel, one attempt; `hang` answers nothing but takes it,
    // `drop` closes the connection without taking it. Both are UNKNOWN to the worker.
    let mut ids = Vec::new();
    for (channel, behavior) in [
        (Channel::Pagerduty, Behavior::Hang),
        (Channel::Pagerduty, Behavior::Drop),
        (Channel::Slack, Behavior::Hang),
        (Channel::Slack, Behavior::Drop),
    ] {
        let id = submit_on(&conn, channel);
        fakes
            .control
            .script(&format!("{id}:{channel}"), &[behavior]);
        let lease =
            support::claim_and_start(&conn, "verify-test", LEASE, channel, &Default::default());
        let request = DeliveryRequest::for_lease(&lease, channel, LEASE, MIN_IO);
        let result = adapters[&channel].deliver(&request, &|| true);
        assert_eq!(
            result.outcome.as_str(),
            "UNKNOWN",
            "{channel} {behavior:?}: {result:?}"
        );
        engine::record_result(&Db::Sqlite(&conn), now(), &lease, channel, &result).expect("result");
        let _ = engine::settle(
            &Db::Sqlite(&conn),
            now(),
            &lease,
            &[(channel, result)],
            &BACKOFF,
        );
        let _ = engine::claim(
            &Db::Sqlite(&conn),
            lease.lease_until + 0.01,
            "verify-test-2",
            LEASE,
        );
        ids.push((id, channel, behavior));
    }
    // Other traffic in the channel: the history runs to several pages of 200.
    let client = reqwest::blocking::Client::new();
    for n in 0..450 {
        let sent = client
            .post(fakes.slack_url())
            .json(&json!({"text": format!("other {n}"), "metadata": {
                "event_type": "uns_notification",
                "event_payload": {"idempotency_key": format!("other-{n}:SLACK:1")}}}))
            .send()
            .expect("post");
        assert!(sent.status().is_success());
    }
    let base = format!("http://{}", fakes.http);
    // `command` with the providers' records named, and these tokens for them.
    let with_tokens = |command: &[&str], token_pd: &str, token_slack: &str| {
        support::unsctl()
            .arg("--db")
            .arg(&db)
            .args(command)
            .args(["--clock-skew", "0s", "-o", "json"])
            .env("UNS_PAGERDUTY_API_URL", &base)
            .env("UNS_PAGERDUTY_API_TOKEN", token_pd)
            .env("UNS_SLACK_API_URL", format!("{base}/api"))
            .env("UNS_SLACK_BOT_TOKEN", token_slack)
            .env("UNS_SLACK_CHANNEL", SLACK_CHANNEL)
            .stdin(Stdio::null())
            .output()
            .expect("unsctl")
    };
    let run = |token_pd: &str, token_slack: &str| with_tokens(&["verify"], token_pd, token_slack);
    support::wait_past("every attempt's window to close", leases_end(&db));
    let answered = run(PAGERDUTY_TOKEN, SLACK_TOKEN);
    let report = json(&answered, "verify");
    assert!(
        !String::from_utf8_lossy(&answered.stderr).contains("Not read"),
        "every record was read: {}",
        String::from_utf8_lossy(&answered.stderr)
    );
    assert_eq!(report["unread"], json!([]), "{report:#}");
    for (id, channel, behavior) in &ids {
        let answer = report["answers"]
            .as_array()
            .and_then(|a| a.iter().find(|x| x["id"] == id.as_str()))
            .cloned()
            .unwrap_or_default();
        let expected = if *behavior == Behavior::Hang {
            "DELIVERED"
        } else {
            "NOT_DELIVERED"
        };
        assert_eq!(
            answer["answer"], expected,
            "{channel} {behavior:?}: {answer:#}"
        );
        assert_eq!(answer["source"], channel.as_str().to_ascii_lowercase());
    }
    // A record listed twice (offset paging repeats one) is still one record: the same
    // answers, and reconcile counts one copy, never a duplicate.
    fakes.control.repeat_listings(true);
    let twice = json(
        &run(PAGERDUTY_TOKEN, SLACK_TOKEN),
        "verify, records listed twice",
    );
    assert_eq!(twice["answers"], report["answers"], "{twice:#}");
    let reconcile = |token_pd: &str, token_slack: &str| {
        with_tokens(&["reconcile", "--since", "1h"], token_pd, token_slack)
    };
    let reconciled = json(
        &reconcile(PAGERDUTY_TOKEN, SLACK_TOKEN),
        "reconcile, records listed twice",
    );
    for (id, channel, behavior) in ids.iter().filter(|(_, _, b)| *b == Behavior::Hang) {
        let line = reconciled["notifications"]
            .as_array()
            .and_then(|n| {
                n.iter()
                    .find(|x| x["id"] == id.as_str() && x["channel"] == channel.as_str())
            })
            .cloned()
            .unwrap_or_default();
        assert_eq!(line["copies"], 1, "{channel} {behavior:?}: {line:#}");
        assert_ne!(line["class"], "DUPLICATED", "{line:#}");
    }
    fakes.control.repeat_listings(false);
    by_hand_keys_find_the_records(&db, &fakes, &ids);

    // Wrong tokens: the providers refuse, and nothing is guessed.
    let out = run("wrong-pd-token", "xoxb-wrong");
    let refused = json(&out, "verify with bad tokens");
    assert_eq!(refused["summary"]["CANNOT_TELL"], 4, "{refused:#}");
    let evidence = refused["answers"].to_string();
    assert!(
        evidence.contains("401") && evidence.contains("invalid_auth"),
        "{evidence}"
    );
    assert!(
        !evidence.contains("wrong"),
        "a token never appears: {evidence}"
    );
    // Said once per record up front, with how many lookups it stopped, before the answers:
    // a revoked token is not left to be read in each answer's evidence. reconcile reads the
    // same records once for the window (Slack's history in one lookup), and says the same.
    let reconciled = reconcile("wrong-pd-token", "xoxb-wrong");
    let reconciled_document = json(&reconciled, "reconcile with bad tokens");
    for (what, out, document, slack) in [
        ("verify", &out, &refused, "invalid_auth (2 of 2 lookups)"),
        (
            "reconcile",
            &reconciled,
            &reconciled_document,
            "invalid_auth",
        ),
    ] {
        let said = String::from_utf8_lossy(&out.stderr).into_owned();
        let unread: Vec<&str> = said
            .lines()
            .filter_map(|l| l.strip_prefix("Not read, so no answer rests on it: "))
            .collect();
        assert_eq!(unread.len(), 2, "{what}: {said}");
        // The document says it too, line for line: a script that reads only the JSON
        // is not left to take a revoked token for doubt about each record.
        assert_eq!(document["unread"], json!(unread), "{what}: {document:#}");
        assert!(
            unread
                .iter()
                .any(|l| l.starts_with("Slack") && l.ends_with(slack)),
            "{what}: {said}"
        );
        assert!(
            unread
                .iter()
                .any(|l| l.starts_with("PagerDuty answered HTTP 401")
                    && l.ends_with("(2 of 2 lookups)")),
            "{what}: {said}"
        );
        assert!(
            !said.contains("wrong-pd-token") && !said.contains("xoxb-wrong"),
            "{what}: {said}"
        );
    }
}

/// A loopback server that answers every request with 200 and what `answer` makes of the
/// request line.
fn lying_server(answer: impl Fn(&str) -> String + Send + Sync + 'static) -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("addr");
    let answer = std::sync::Arc::new(answer);
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            use std::io::{Read, Write};
            let mut stream = stream;
            let mut buffer = [0u8; 8192];
            let n = stream.read(&mut buffer).unwrap_or(0);
            let request = String::from_utf8_lossy(&buffer[..n]);
            let body = answer(request.lines().next().unwrap_or_default());
            // An answer that starts "401 " is sent as a refusal with the rest as its body.
            let (status, body) = match body.strip_prefix("401 ") {
                Some(rest) => ("401 Unauthorized", rest.to_string()),
                None => ("200 OK", body),
            };
            let _ = write!(
                stream,
                "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    format!("http://{addr}")
}

/// PagerDuty and Slack stand-ins that lie: each lie is CANNOT_TELL, with the reason.
#[test]
fn providers_that_lie_are_never_taken_at_their_word() {
    let work = tempfile::tempdir().expect("dir");
    let db = work.path().join("uns.db");
    let conn = schema::open(&db, OpenMode::Create).expect("store");
    // One PAGERDUTY and one SLACK attempt whose calls started and never answered.
    let ids = lost_mid_call(&conn);
    assert_eq!(branch(&db, &ids[0]), "VERIFY");
    support::wait_past("every attempt's window to close", leases_end(&db));
    let (pd, slack) = (ids[0].clone(), ids[1].clone());
    let inside = unsctl::clock::rfc3339(now() - LEASE / 2.0);
    let ts_inside = format!("{:.6}", now() - LEASE / 2.0);
    let incident = |key: serde_json::Value, created: &str| {
        json!({"incidents": [{"id": "PLIE", "incident_number": 9, "incident_key": key,
            "status": "triggered", "created_at": created}], "more": false})
        .to_string()
    };
    let message = |key: &str, ts: &str, bot: &str| {
        json!({"ok": true, "has_more": false, "messages": [{"type": "message", "ts": ts,
            "bot_id": bot, "metadata": {"event_type": "uns_notification",
            "event_payload": {"idempotency_key": key}}}]})
        .to_string()
    };
    let our_key = format!("{slack}:SLACK:1");
    let cases: Vec<(&str, String, &str)> = vec![
        ("pagerduty: no key", incident(Value::Null, &inside), "no incident_key"),
        ("pagerduty: another key", incident(json!("n-someone-else"), &inside), "the answer is not about this key"),
        ("pagerduty: created in 2099", incident(json!(pd), "2099-01-01T00:00:00Z"), "future"),
        ("pagerduty: created_at 1s", incident(json!(pd), "1s"), "not an RFC 3339 time"),
        ("pagerduty: a day before, resolved", json!({"incidents": [{"id": "PLIE", "incident_key": pd,
            "status": "resolved", "created_at": unsctl::clock::rfc3339(now() - 86_400.0),
            "last_status_change_at": unsctl::clock::rfc3339(now() - 80_000.0)}], "more": false}).to_string(),
            "not shown open through it"),
        ("pagerduty: pages that never end", json!({"incidents": [{"id": "PX", "incident_key": "other",
            "created_at": inside}], "more": true}).to_string(), "not all were read"),
        ("slack: another bot", message(&our_key, &ts_inside, "B666"), "not the webhook's bot"),
        ("slack: outside the window", message(&our_key, &format!("{:.6}", now() - 86_400.0), "B0UNSFAKE"), "outside the attempt's window"),
        ("slack: pages that never end", json!({"ok": true, "has_more": true, "messages": [{"type": "message", "ts": ts_inside}],
            "response_metadata": {"next_cursor": "more"}}).to_string(), "not all were read"),
        // An answer that is not the API's and quotes the tokens it was sent.
        ("pagerduty: echoes the token", "401 {\"error\": \"bad token pd-token-for-the-liar\"}".into(), "answered HTTP 401"),
    ];
    for (what, body, reason) in cases {
        let base = lying_server(move |_| body.clone());
        let out = support::unsctl()
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("UNSCTL_CONFIG", work.path().join("no-config.toml"))
            .arg("--db")
            .arg(&db)
            .args(["verify", "--clock-skew", "0s", "-o", "json"])
            .args(["--slack-bot-id", "B0UNSFAKE", "--slack-channel", "C0LIE"])
            .env("UNS_PAGERDUTY_API_URL", &base)
            .env("UNS_PAGERDUTY_API_TOKEN", "pd-token-for-the-liar")
            .env("UNS_SLACK_API_URL", &base)
            .env("UNS_SLACK_BOT_TOKEN", "xoxb-token-for-the-liar")
            .stdin(Stdio::null())
            .output()
            .expect("unsctl");
        let report = json(&out, what);
        let channel = if what.starts_with("pagerduty") {
            &pd
        } else {
            &slack
        };
        let answer = report["answers"]
            .as_array()
            .and_then(|a| a.iter().find(|x| x["id"] == channel.as_str()))
            .cloned()
            .unwrap_or_default();
        assert_eq!(answer["answer"], "CANNOT_TELL", "{what}: {answer:#}");
        let evidence = answer["evidence"].as_str().unwrap_or_default();
        assert!(evidence.contains(reason), "{what}: {evidence}");
        assert!(!report.to_string().contains("token-for-the-liar"), "{what}");
        let said = String::from_utf8_lossy(&out.stderr);
        assert!(!said.contains("token-for-the-liar"), "{what}: {said}");
    }
}

/// Over the API the records are read where unsctl runs, as with the store: the server
/// supplies the history and has no log or token of its own. `--record` posts each answer
/// with its evidence to a keyed route, whose transition checks it against the history as
/// it stands, records it under the key's name and says it was read on the client.
#[test]
fn over_the_api_the_client_reads_the_records_and_the_server_checks_what_it_records() {
    use unsctl::lab::fakes::{Behavior, Fakes};
    let fakes = Fakes::start().expect("fakes");
    let work = tempfile::tempdir().expect("dir");
    let db = work.path().join("uns.db");
    fakes.control.script("hung@example.test", &[Behavior::Hang]);
    let id = submit(&db, "hung@example.test");
    let result = deliver_due(&db, &adapter(fakes.smtp, StartTls::Never, None), LEASE);
    assert_eq!(result.outcome.as_str(), "UNKNOWN");
    fakes.control.mark_log();
    // The server is given no source at all.
    let server = unsctl::server::start(unsctl::server::ServerConfig::api_only(
        db.clone(),
        Some(unsctl::server::Keys::single(support::KEY).expect("key")),
    ))
    .expect("server");
    let log = fakes.maillog.display().to_string();
    let api = |args: &[&str]| {
        let mut command = support::unsctl();
        command
            .args(["--api", &format!("http://{}", server.addr)])
            .args(args)
            .env("UNS_API_KEY", support::KEY)
            .stdin(Stdio::null())
            .output()
            .expect("unsctl")
    };
    let asked = json(
        &api(&[
            "verify",
            "--relay-log",
            &log,
            "--relay-log-zone",
            "UTC",
            "-o",
            "json",
        ]),
        "verify over the API",
    );
    assert_eq!(asked["answers"][0]["id"], id.as_str());
    assert_eq!(asked["answers"][0]["answer"], "DELIVERED", "{asked:#}");
    assert_eq!(branch(&db, &id), "VERIFY", "asking changes nothing");
    // The runbook's environment: both stores named, the log only in the client's. The
    // printed next step carries the sources and runs as printed.
    let in_runbook = |args: &[&str]| {
        support::unsctl()
            .args(args)
            .env("UNS_DB_FILE", &db)
            .env("UNS_BASE_URL", format!("http://{}", server.addr))
            .env("UNS_API_KEY", support::KEY)
            .env("UNS_RELAY_LOG", &log)
            .stdin(Stdio::null())
            .output()
            .expect("unsctl")
    };
    let out = in_runbook(&["verify", &id, "--relay-log-zone", "UTC"]);
    let said = String::from_utf8_lossy(&out.stderr).to_string();
    let step = said
        .lines()
        .find_map(|line| line.split_once("next: ").map(|(_, s)| s.to_string()))
        .unwrap_or_else(|| panic!("a next step: {said}"));
    assert!(
        step.starts_with(&format!("unsctl verify {id} --relay-log "))
            && step.contains("--relay-log-zone UTC"),
        "{step}"
    );
    let words: Vec<String> = step
        .split_whitespace()
        .skip(1)
        .map(|w| w.trim_matches('\'').to_string())
        .chain([
            "--yes".to_string(),
            "--reason".into(),
            "relay log".into(),
            "--ticket".into(),
            "INC-7".into(),
            "-o".into(),
            "json".into(),
        ])
        .collect();
    let words: Vec<&str> = words.iter().map(String::as_str).collect();
    let done = json(
        &in_runbook(&words),
        "the printed step, recorded over the API",
    );
    assert_eq!(done["answers"][0]["answer"], "DELIVERED", "{done:#}");
    assert_eq!(
        done["record"]["recorded"][0]["branch"], "RESOLVE",
        "{done:#}"
    );
    let conn = rusqlite::Connection::open(&db).expect("db");
    let (operator, ticket, client): (String, String, i64) = conn
        .query_row(
            "SELECT json_extract(payload, '$.operator'), json_extract(payload, '$.ticket'), json_extract(payload, '$.read_on_client') FROM uns_events WHERE kind = 'VERIFIED'",
            [],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )
        .expect("VERIFIED");
    assert_eq!(
        (operator.as_str(), ticket.as_str(), client),
        ("default", "INC-7", 1),
        "under the key's name, with the ticket, read on the client"
    );
    server.stop();
}

/// Over the API, verify asks the server for the entries' histories several at once, and
/// `--record` sends several entries' answers at once: each costs a round trip, which to a
/// server across a network is most of what a long list costs. A gate in front of the
/// server holds each answer until a second connection asks, so a client that asks one at
/// a time is seen. The answers are the store's, in the same order, whether the entries
/// are named or selected, and each entry's answers are recorded once, as the store
/// records them.
#[test]
fn over_the_api_verify_asks_and_records_at_once_and_answers_as_the_store_does() {
    let work = tempfile::tempdir().expect("dir");
    let db = work.path().join("uns.db");
    let conn = schema::open(&db, OpenMode::Create).expect("store");
    // Long past, so every window has closed and no answer turns while the test runs.
    let then = (now() - 3600.0).floor();
    let ids: Vec<String> = (0..40)
        .map(|n| support::verify_entry(&conn, then + f64::from(n)))
        .collect();
    drop(conn);
    // The relay's record of each: queued, or lost before the final dot, in turn.
    let mut log = String::new();
    for (n, id) in ids.iter().enumerate() {
        let stamp = jiff::Timestamp::from_second(then as i64 + n as i64)
            .expect("time")
            .strftime("%b %e %H:%M:%S");
        let queue = 0x1000 + n;
        let relay = format!("{stamp} relay postfix");
        log.push_str(&format!(
            "{relay}/smtpd[7]: connect from uns.internal[10.0.0.7]\n\
             {relay}/smtpd[7]: {queue:X}AB: client=uns.internal[10.0.0.7]\n\
             {relay}/cleanup[8]: {queue:X}AB: message-id=<{id}.1.1@uns.local>\n"
        ));
        log.push_str(&if n % 2 == 0 {
            format!(
                "{relay}/qmgr[9]: {queue:X}AB: from=<uns@uns.local>, size=812, nrcpt=1 (queue active)\n\
                 {relay}/smtpd[7]: disconnect from uns.internal[10.0.0.7] ehlo=1 mail=1 rcpt=1 data=1 commands=4\n"
            )
        } else {
            format!(
                "{relay}/smtpd[7]: lost connection after DATA (512 bytes) from uns.internal[10.0.0.7]\n\
                 {relay}/smtpd[7]: disconnect from uns.internal[10.0.0.7] ehlo=1 mail=1 rcpt=1 data=0/1 commands=3/4\n"
            )
        });
    }
    let log_path = work.path().join("mail.log");
    std::fs::write(&log_path, log).expect("log");
    // The same store, to record on directly.
    let here = work.path().join("here.db");
    std::fs::copy(&db, &here).expect("copy");
    let server = support::server(&db);
    // Over the API through `gate`, else from the store `store`.
    let run = |to: Result<&support::gate::Gate, &Path>, args: &[&str]| {
        let mut command = match to {
            Ok(gate) => support::over_the_api(gate.addr),
            Err(store) => {
                let mut command = support::unsctl();
                command.arg("--db").arg(store);
                command
            }
        };
        let out = command
            .arg("verify")
            .args(args)
            .args(["--smtp-from", "uns@uns.local", "--relay-log"])
            .arg(&log_path)
            .args(["--relay-log-zone", "UTC", "-o", "json"])
            .output()
            .expect("unsctl");
        json(
            &out,
            &format!("verify {args:?}, over the API: {}", to.is_ok()),
        )
    };
    // One field of each answer.
    let each = |answers: &Value, field: &str| -> Vec<String> {
        answers
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|answer| answer[field].as_str().map(str::to_string))
            .collect()
    };
    let asks = support::gate::Gate::start(server.addr, support::gate::DOCUMENT);
    let selected = run(Ok(&asks), &[])["answers"].clone();
    asks.saw_two_at_once("the histories");
    let outcomes = each(&selected, "answer");
    assert_eq!(outcomes.len(), ids.len(), "{selected:#}");
    assert!(
        outcomes.iter().step_by(2).all(|a| *a == "DELIVERED")
            && outcomes
                .iter()
                .skip(1)
                .step_by(2)
                .all(|a| *a == "NOT_DELIVERED"),
        "{selected:#}"
    );
    assert_eq!(
        selected,
        run(Err(&db), &[])["answers"],
        "selected: as the store answers"
    );
    let reversed: Vec<&str> = ids.iter().rev().map(String::as_str).collect();
    let named = run(Ok(&asks), &reversed)["answers"].clone();
    assert_eq!(
        named,
        run(Err(&db), &reversed)["answers"],
        "named: as the store answers"
    );
    assert_eq!(each(&named, "id"), reversed, "in the order named");

    let records = support::gate::Gate::start(server.addr, support::gate::RECORDING);
    let record = ["--record", "--confirm", "--yes", "--reason", "relay log"];
    let sent = run(Ok(&records), &record);
    records.saw_two_at_once("the answers recorded");
    let written = run(Err(&here), &record);
    let recorded = |report: &Value| -> Vec<(String, String, usize)> {
        let mut rows: Vec<(String, String, usize)> = report["record"]["recorded"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|done| {
                (
                    done["id"].as_str().unwrap_or_default().to_string(),
                    done["branch"].as_str().unwrap_or_default().to_string(),
                    done["event_ids"].as_array().map_or(0, Vec::len),
                )
            })
            .collect();
        rows.sort();
        rows
    };
    assert_eq!(recorded(&sent).len(), ids.len(), "{sent:#}");
    assert_eq!(
        recorded(&sent),
        recorded(&written),
        "as the store records them"
    );
    let verified = |db: &Path| -> Vec<(String, i64)> {
        let conn = rusqlite::Connection::open(db).expect("db");
        let mut stmt = conn
            .prepare(
                "SELECT notification_id, COUNT(*) FROM uns_events WHERE kind = 'VERIFIED'
                 GROUP BY notification_id ORDER BY notification_id",
            )
            .expect("query");
        stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
            .expect("rows")
            .map(|row| row.expect("row"))
            .collect()
    };
    let once: Vec<(String, i64)> = {
        let mut each: Vec<(String, i64)> = ids.iter().map(|id| (id.clone(), 1)).collect();
        each.sort();
        each
    };
    assert_eq!(verified(&db), once, "each entry's answer recorded once");
    assert_eq!(verified(&here), once);
    server.stop();
}

/// The recording route takes an answer only for an attempt in doubt as the history
/// stands: a refused attempt, another cycle, a source verify does not read or an answer
/// without evidence is a conflict or a refusal, and nothing is written.
#[test]
fn the_recording_route_checks_each_answer_against_the_history() {
    use unsctl::lab::fakes::{Behavior, Fakes};
    let fakes = Fakes::start().expect("fakes");
    let work = tempfile::tempdir().expect("dir");
    let db = work.path().join("uns.db");
    fakes.control.script("hung@example.test", &[Behavior::Hang]);
    let id = submit(&db, "hung@example.test");
    let _ = deliver_due(&db, &adapter(fakes.smtp, StartTls::Never, None), LEASE);
    let server = unsctl::server::start(unsctl::server::ServerConfig::api_only(
        db.clone(),
        Some(unsctl::server::Keys::single(support::KEY).expect("key")),
    ))
    .expect("server");
    let client = reqwest::blocking::Client::new();
    let post = |body: serde_json::Value| {
        client
            .post(format!(
                "http://{}/api/v1/runtime/notifications/{id}/verified",
                server.addr
            ))
            .bearer_auth(support::KEY)
            .json(&body)
            .send()
            .expect("post")
    };
    let finding = |attempts: serde_json::Value, cycle: i64, source: &str, evidence: &str| {
        json!({"findings": [{"channel": "EMAIL", "cycle": cycle, "attempts": attempts,
            "outcome": "NOT_DELIVERED", "source": source, "evidence": evidence}]})
    };
    for (body, status, what) in [
        (
            finding(json!([2]), 1, "relay-log", "absent"),
            409,
            "an attempt never made",
        ),
        (
            finding(json!([1]), 2, "relay-log", "absent"),
            409,
            "another cycle",
        ),
        (
            finding(json!([1]), 1, "a friend", "absent"),
            409,
            "a source verify does not read",
        ),
        (finding(json!([1]), 1, "relay-log", " "), 409, "no evidence"),
        (
            finding(json!([]), 1, "relay-log", "absent"),
            409,
            "no attempt",
        ),
        (json!({"findings": []}), 400, "nothing to record"),
        (
            json!({"findings": [], "answers": []}),
            400,
            "an unknown field",
        ),
        (
            json!({"findings": [{"channel": "EMAIL", "cycle": 1, "attempts": [1],
                "outcome": "NOT_DELIVERED", "source": "relay-log", "evidence": "absent",
                "attempt": 2}]}),
            400,
            "an unknown field in a finding",
        ),
    ] {
        let response = post(body);
        assert_eq!(response.status().as_u16(), status, "{what}");
    }
    let conn = rusqlite::Connection::open(&db).expect("db");
    let written: i64 = conn
        .query_row(
            "SELECT COUNT(*) FROM uns_events WHERE kind = 'VERIFIED'",
            [],
            |r| r.get(0),
        )
        .expect("count");
    assert_eq!(written, 0, "nothing was written");
    let response = post(finding(
        json!([1]),
        1,
        "relay-log",
        "checked by hand in the relay's log",
    ));
    assert_eq!(response.status().as_u16(), 200);
    assert_eq!(
        branch(&db, &id),
        "REPLAY",
        "the recorded answer settles the attempt"
    );
    // The same answer again: the channel is no longer in doubt, so it is skipped.
    let again: serde_json::Value = post(finding(json!([1]), 1, "relay-log", "again"))
        .json()
        .expect("json");
    assert!(
        again["skipped"][0]
            .as_str()
            .is_some_and(|s| s.contains("nothing to settle")),
        "{again:#}"
    );
    server.stop();
}

/// How a stand-in provider answers one request.
#[derive(Clone)]
enum Reply {
    /// `200 OK` with this JSON body.
    Body(String),
    /// A redirect to this URL.
    Redirect(String),
    /// `200 OK`, the body one byte a second.
    Trickle(String),
    /// `429` asking to wait this many seconds.
    RetryAfter(u64),
    /// `429` saying, as PagerDuty does, how many seconds until its limit resets.
    RateLimitReset(u64),
}

/// A stand-in provider on loopback that answers every request with `reply`, counting the
/// requests it is sent.
fn stand_in(reply: Reply) -> (String, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
    use std::io::{Read, Write};
    use std::sync::atomic::{AtomicUsize, Ordering};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("addr");
    let count = std::sync::Arc::new(AtomicUsize::new(0));
    let counted = count.clone();
    std::thread::spawn(move || {
        for mut stream in listener.incoming().flatten() {
            let reply = reply.clone();
            counted.fetch_add(1, Ordering::SeqCst);
            std::thread::spawn(move || {
                let mut buffer = [0u8; 8192];
                let _ = stream.read(&mut buffer);
                let head = |status: &str, extra: &str, length: usize| {
                    format!(
                        "HTTP/1.1 {status}\r\ncontent-type: application/json\r\n{extra}content-length: {length}\r\nconnection: close\r\n\r\n"
                    )
                };
                let _ = match reply {
                    Reply::Body(body) => {
                        write!(stream, "{}{body}", head("200 OK", "", body.len()))
                    }
                    Reply::Redirect(to) => {
                        write!(
                            stream,
                            "{}",
                            head("302 Found", &format!("location: {to}\r\n"), 0)
                        )
                    }
                    Reply::RetryAfter(seconds) => write!(
                        stream,
                        "{}",
                        head(
                            "429 Too Many Requests",
                            &format!("retry-after: {seconds}\r\n"),
                            0
                        )
                    ),
                    Reply::RateLimitReset(seconds) => write!(
                        stream,
                        "{}",
                        head(
                            "429 Too Many Requests",
                            &format!(
                                "ratelimit-limit: 960\r\nratelimit-remaining: 0\r\nratelimit-reset: {seconds}\r\n"
                            ),
                            0
                        )
                    ),
                    Reply::Trickle(body) => {
                        let _ = write!(stream, "{}", head("200 OK", "", body.len()));
                        for byte in body.bytes() {
                            if stream.write_all(&[byte]).is_err() {
                                break;
                            }
                            std::thread::sleep(Duration::from_secs(1));
                        }
                        Ok(())
                    }
                };
            });
        }
    });
    (format!("http://{addr}"), count)
}

/// Answers that are not answers (a wrong shape, a redirect, a body that trickles in, a
/// wait longer than the lookup may take) prove nothing: every one is CANNOT_TELL naming
/// what was wrong, `--record` writes nothing, reconcile never calls the channel MISSING,
/// the redirect's target is never asked, and the trickle ends within the deadline. Both
/// providers, both backends.
#[test]
fn answers_that_are_not_answers_prove_nothing() {
    let work = tempfile::tempdir().expect("dir");
    let db = work.path().join("uns.db");
    let conn = schema::open(&db, OpenMode::Create).expect("store");
    let ids = lost_mid_call(&conn);
    drop(conn);
    support::wait_past("every attempt's window to close", leases_end(&db));
    let (pd, slack) = (ids[0].clone(), ids[1].clone());
    let (elsewhere, strangers_asked) = stand_in(Reply::Body(
        json!({"incidents": [], "more": false, "ok": true, "messages": [], "has_more": false})
            .to_string(),
    ));
    let dump = || support::dump(&db);
    let before = dump();
    let server = support::server(&db);
    let backends = [
        vec!["--db".to_string(), db.display().to_string()],
        vec!["--api".to_string(), format!("http://{}", server.addr)],
    ];
    let body = |value: Value| Reply::Body(value.to_string());
    let cases: Vec<(&str, Reply, &str)> = vec![
        ("pagerduty", body(json!({})), "missing field `incidents`"),
        ("pagerduty", body(json!([])), "a list, not an object"),
        (
            "pagerduty",
            body(json!({"error": {"message": "Not Found", "code": 2100}})),
            "an error object",
        ),
        (
            "pagerduty",
            body(json!({"ok": true})),
            "missing field `incidents`",
        ),
        (
            "pagerduty",
            body(json!({"incidents": []})),
            "missing field `more`",
        ),
        (
            "pagerduty",
            body(json!({"incidents": null, "more": false})),
            "invalid type: null",
        ),
        (
            "pagerduty",
            Reply::Redirect(format!("{elsewhere}/incidents")),
            "a redirect is not followed",
        ),
        ("pagerduty", Reply::RetryAfter(3600), "Retry-After"),
        (
            "pagerduty",
            Reply::RateLimitReset(3600),
            "wait 3600 s before asking again (ratelimit-reset)",
        ),
        (
            "pagerduty",
            Reply::Trickle(json!({"incidents": [], "more": false}).to_string()),
            "--provider-timeout",
        ),
        (
            "pagerduty",
            Reply::Body(r#"{"incidents": [], "more": true, "more": false}"#.into()),
            "the key \"more\" is given twice",
        ),
        (
            "pagerduty",
            Reply::Body(
                r#"{"incidents": [{"id": "P1", "incident_key": "x"}], "incidents": [], "more": false}"#
                    .into(),
            ),
            "the key \"incidents\" is given twice",
        ),
        (
            "slack",
            Reply::Body(
                r#"{"ok": true, "messages": [], "has_more": true, "has_more": false}"#.into(),
            ),
            "the key \"has_more\" is given twice",
        ),
        (
            "slack",
            body(json!({"ok": true, "messages": [1], "has_more": false})),
            "not a message",
        ),
        (
            "slack",
            body(json!({"ok": true, "has_more": false, "messages": [
                {"text": "a post", "metadata": {"event_type": SLACK_EVENT_TYPE,
                    "event_payload": {"idempotency_key": 7}}},
            ]})),
            "carries unsctl's metadata but no Idempotency-Key",
        ),
        ("slack", body(json!({})), "missing field `ok`"),
        ("slack", body(json!([])), "a list, not an object"),
        (
            "slack",
            body(json!({"ok": false, "error": "not_authed"})),
            "not_authed",
        ),
        (
            "slack",
            body(json!({"ok": true})),
            "missing field `messages`",
        ),
        (
            "slack",
            body(json!({"ok": true, "messages": null, "has_more": false})),
            "invalid type: null",
        ),
        (
            "slack",
            body(json!({"ok": true, "messages": []})),
            "missing field `has_more`",
        ),
        (
            "slack",
            Reply::Redirect(format!("{elsewhere}/api/conversations.history")),
            "a redirect is not followed",
        ),
        ("slack", Reply::RetryAfter(3600), "Retry-After"),
        (
            "slack",
            Reply::Trickle(json!({"ok": true, "messages": [], "has_more": false}).to_string()),
            "--provider-timeout",
        ),
    ];
    const TIMEOUT: f64 = 3.0;
    // Every case at once: each has its own stand-in, and none may write anything.
    std::thread::scope(|scope| {
        for target in &backends {
            for (provider, reply, reason) in &cases {
                let (pd, slack, before, dump) = (&pd, &slack, &before, &dump);
                scope.spawn(move || {
                    let what = format!("{} {provider} {reason}", target[0]);
                    let (base, _) = stand_in(reply.clone());
                    let run = |args: &[&str]| {
                        let started = std::time::Instant::now();
                        let out = support::unsctl()
                            .args(target)
                            .args(args)
                            .args([
                                "--clock-skew",
                                "0s",
                                "--provider-timeout",
                                "3s",
                                "-o",
                                "json",
                            ])
                            .args(["--slack-bot-id", "B0UNSFAKE", "--slack-channel", "C0STAND"])
                            .env("UNS_API_KEY", support::KEY)
                            .env("UNS_PAGERDUTY_API_URL", &base)
                            .env("UNS_PAGERDUTY_API_TOKEN", "pd-token")
                            .env("UNS_SLACK_API_URL", format!("{base}/api"))
                            .env("UNS_SLACK_BOT_TOKEN", "xoxb-token")
                            .env("USER", "answer-test")
                            .stdin(Stdio::null())
                            .output()
                            .expect("unsctl");
                        (out, started.elapsed())
                    };
                    let id = if *provider == "pagerduty" { pd } else { slack };
                    let (out, took) = run(&["verify", id]);
                    // Every case runs at once on two cores; a lookup that ignored its
                    // deadline would sit through the trickle's second a byte (over 40 s).
                    assert!(
                        took.as_secs_f64() < TIMEOUT + 15.0,
                        "{what}: verify took {took:?}"
                    );
                    let report = json(&out, &what);
                    let answer = &report["answers"][0];
                    assert_eq!(answer["answer"], "CANNOT_TELL", "{what}: {report:#}");
                    let evidence = answer["evidence"].as_str().unwrap_or_default();
                    assert!(evidence.contains(reason), "{what}: {evidence}");
                    let (out, _) = run(&["verify", id, "--record", "--confirm", "--yes"]);
                    assert!(
                        out.status.success(),
                        "{what}: {}",
                        String::from_utf8_lossy(&out.stderr)
                    );
                    let after = dump();
                    let changed: Vec<&str> = after
                        .lines()
                        .filter(|l| !before.lines().any(|b| b == *l))
                        .chain(before.lines().filter(|b| !after.lines().any(|l| l == *b)))
                        .collect();
                    assert!(changed.is_empty(), "{what}: --record wrote {changed:#?}");
                    let (out, _) = run(&["reconcile", "--since", "1h"]);
                    let reconciled = json(&out, &what);
                    for item in reconciled["notifications"]
                        .as_array()
                        .expect("notifications")
                    {
                        assert_ne!(item["class"], "MISSING", "{what}: {item:#}");
                    }
                });
            }
        }
    });
    assert_eq!(
        strangers_asked.load(std::sync::atomic::Ordering::SeqCst),
        0,
        "a redirect was followed"
    );
}

/// A Postfix `maillog_file` log (`Nov 29 22:15:57 host program[pid]: text`, in this
/// machine's zone) as an RFC 5424 server writes the same lines.
fn as_rfc5424(log: &str) -> String {
    let year = jiff::Timestamp::now().strftime("%Y").to_string();
    log.lines()
        .filter_map(|line| {
            let (stamp, rest) = (line.get(..15)?, line.get(16..)?);
            let at: jiff::civil::DateTime =
                jiff::fmt::strtime::parse("%Y %b %d %H:%M:%S", format!("{year} {stamp}"))
                    .ok()?
                    .to_datetime()
                    .ok()?;
            let (host, rest) = rest.split_once(' ')?;
            let (tag, text) = rest.split_once(": ")?;
            let (app, pid) = tag.strip_suffix(']')?.split_once('[')?;
            // The relay stamps in this machine's zone, as verify reads it by default.
            let at = at.to_zoned(jiff::tz::TimeZone::system()).ok()?;
            Some(format!(
                "<22>1 {} {host} {app} {pid} - - {text}\n",
                at.strftime("%Y-%m-%dT%H:%M:%S%:z")
            ))
        })
        .collect()
}

/// Postfix with `enable_long_queue_ids = yes` (the default of many sites since 2.9):
/// queue ids like `4Xk2Wq0Bz4z9sRr` rather than hex. The attempt the adapter could not
/// tell about is DELIVERED by the real relay's own lines, its long queue id in the
/// evidence, and reconcile counts the one copy.
#[test]
fn a_relay_with_long_queue_ids_is_read_as_any_other() {
    let work = tempfile::tempdir().expect("dir");
    let db = work.path().join("uns.db");
    let relay = Relay::start_as("enable_long_queue_ids = yes\n");
    let proxy = Proxy::start(relay.addr, Fault::HoldReplyToDot);
    let via_proxy = adapter(proxy.addr, StartTls::Never, None);
    relay.send_marker();
    let id = submit_with(&db, "long@example.test", "hello");
    let result = deliver_due(&db, &via_proxy, LEASE);
    assert_eq!(result.outcome.as_str(), "UNKNOWN", "{result:?}");
    let message = message_id(&id, 1, 1);
    relay.wait_for_log(&format!("message-id={message}"));
    relay.log_past(now() + LEASE + 2.5);
    let log = relay.log();
    let queue_id = log
        .lines()
        .find(|line| line.contains(&format!("message-id={message}")))
        .and_then(|line| line.split(": ").nth(1))
        .expect("the cleanup line")
        .to_string();
    assert!(
        queue_id.len() > 11 && queue_id.bytes().any(|b| b.is_ascii_lowercase()),
        "a long queue id: {queue_id}"
    );
    let logs = [relay.maillog.as_path()];
    let (answer, evidence) = answer_of(&verify_with(
        &db,
        &id,
        &logs,
        false,
        &["--clock-skew", "2s"],
    ));
    assert_eq!(answer, "DELIVERED", "{evidence}");
    assert!(evidence.contains(&queue_id), "{evidence}");
    let path = relay.maillog.display().to_string();
    let report = json(
        &unsctl(
            &db,
            &[
                "reconcile",
                "--since",
                "1h",
                "-o",
                "json",
                "--clock-skew",
                "2s",
                "--relay-log",
                &path,
            ],
        ),
        "reconcile",
    );
    assert_eq!(report["notifications"][0]["class"], "ONCE", "{report:#}");
}
