//! `unsctl reconcile`: who got duplicates and what never arrived. A store seeded through
//! the engine at fixed times with each case (two accepted copies after a reclaim, an
//! UNKNOWN result then an accepted reclaim, one copy, every attempt refused, a call with
//! no result), read on both backends; a relay log in Postfix's format that turns doubt
//! into a count, and hostile lines that must not; the fleet with one context down.

use crate::support;
use unsctl::db::Db;

use serde_json::{Value, json};
use std::path::PathBuf;
use unsctl::model::{Channel, MessageId};
use unsctl::runtime::engine::{
    self, Backoff, ClaimOutcome, DeliveryResult, Lease, NewNotification,
};
use unsctl::runtime::schema::{self, OpenMode};

const T0: f64 = 1_764_590_400.0; // 2025-12-01T12:00:00Z
const SENDER: &str = "uns@uns.local";
const BACKOFF: Backoff = Backoff {
    base_seconds: 1.0,
    max_seconds: 1.0,
};

struct Seeded {
    _dir: tempfile::TempDir,
    db: PathBuf,
    dir: PathBuf,
    /// Two copies: the first attempt's late acceptance and the reclaim's.
    twice: String,
    /// The first attempt UNKNOWN (the relay took it, as the log will show), the reclaim
    /// accepted.
    doubt: String,
    once: String,
    refused: String,
    no_result: String,
}

fn submit(conn: &rusqlite::Connection, at: f64, channel: Channel, recipient: &str) -> String {
    engine::submit(
        &Db::Sqlite(conn),
        at,
        &NewNotification {
            channels: [channel].into_iter().collect(),
            payload: json!({"recipient": recipient, "subject": "reconcile"}),
            idempotency_key: None,
            max_attempts: 3,
        },
    )
    .expect("submit")
    .id
}

fn claim(conn: &rusqlite::Connection, at: f64, worker: &str) -> Lease {
    match engine::claim(&Db::Sqlite(conn), at, worker, 60.0).expect("claim") {
        ClaimOutcome::Claimed(lease) => lease,
        other => panic!("nothing to claim: {other:?}"),
    }
}

fn start(conn: &rusqlite::Connection, at: f64, lease: &Lease) {
    let mut details = serde_json::Map::new();
    details.insert("smtp_from".into(), json!(SENDER));
    engine::start_channel(&Db::Sqlite(conn), at, lease, Channel::Email, &details).expect("start");
}

fn message_id(id: &str, attempt: i64) -> String {
    MessageId::new(id, 1, attempt).to_string()
}

/// A first attempt whose call outlives its lease, a reclaim that is accepted, and then
/// the first call's own late `first` result.
fn reclaimed(
    conn: &rusqlite::Connection,
    at: f64,
    recipient: &str,
    first: DeliveryResult,
) -> String {
    let id = submit(conn, at, Channel::Email, recipient);
    let slow = claim(conn, at, "worker-a");
    start(conn, at + 1.0, &slow);
    let reclaim = claim(conn, at + 61.0, "worker-b");
    start(conn, at + 61.5, &reclaim);
    let accepted = DeliveryResult::accepted(Some(message_id(&id, 2)));
    engine::record_result(
        &Db::Sqlite(conn),
        at + 62.0,
        &reclaim,
        Channel::Email,
        &accepted,
    )
    .expect("result");
    engine::settle(
        &Db::Sqlite(conn),
        at + 62.0,
        &reclaim,
        &[(Channel::Email, accepted)],
        &BACKOFF,
    )
    .expect("settle");
    engine::record_result(&Db::Sqlite(conn), at + 70.0, &slow, Channel::Email, &first)
        .expect("late result");
    engine::settle(
        &Db::Sqlite(conn),
        at + 70.0,
        &slow,
        &[(Channel::Email, first)],
        &BACKOFF,
    )
    .expect("lease lost");
    id
}

fn seed() -> Seeded {
    let dir = tempfile::tempdir().expect("dir");
    let db = dir.path().join("uns.db");
    let conn = schema::open(&db, OpenMode::Create).expect("store");
    let twice = reclaimed(
        &conn,
        T0,
        "twice@example.com",
        DeliveryResult::accepted(None),
    );
    let doubt = reclaimed(
        &conn,
        T0 + 200.0,
        "doubt@example.com",
        DeliveryResult::unknown("no reply after the message data was sent"),
    );
    let once = support::play(
        &conn,
        T0 + 400.0,
        &[Channel::Email],
        &[DeliveryResult::accepted(None)],
        3,
    );
    let refused = support::play(
        &conn,
        T0 + 500.0,
        &[Channel::Slack],
        &[DeliveryResult::rejected("HTTP 400: invalid_payload", false)],
        3,
    );
    let no_result = submit(&conn, T0 + 600.0, Channel::Email, "lost@example.com");
    let lease = claim(&conn, T0 + 600.0, "worker-dies");
    start(&conn, T0 + 600.5, &lease);
    Seeded {
        dir: dir.path().to_path_buf(),
        _dir: dir,
        db,
        twice,
        doubt,
        once,
        refused,
        no_result,
    }
}

fn json_of(output: &std::process::Output) -> Value {
    support::succeeded(output);
    serde_json::from_slice(&output.stdout).expect("json")
}

fn class_of(document: &Value, id: &str) -> (String, u64, u64) {
    let item = document["notifications"]
        .as_array()
        .expect("notifications")
        .iter()
        .find(|n| n["id"] == id)
        .unwrap_or_else(|| panic!("{id} not reconciled: {document:#}"));
    (
        item["class"].as_str().unwrap_or_default().to_string(),
        item["copies"].as_u64().unwrap_or(99),
        item["unknown_attempts"].as_u64().unwrap_or(99),
    )
}

/// A Postfix `maillog_file` line at `at`.
fn line(at: f64, program: &str, text: &str) -> String {
    format!(
        "{} relay postfix/{program}: {text}\n",
        unsctl::clock::rfc3339(at).replace('Z', "+00:00")
    )
}

/// A relay log covering the whole seeded span, in which the relay committed the
/// doubtful attempt's message and the reclaim's, and in which hostile lines name the
/// doubtful and the lost notifications' Message-IDs without being their messages.
fn relay_log(seeded: &Seeded) -> PathBuf {
    let mut log = String::new();
    let mut at = T0 - 300.0;
    // A line a minute: a log that is seen to run through every window.
    while at < T0 + 900.0 {
        log.push_str(&line(
            at,
            "anvil[90]",
            "statistics: max connection rate 1/60s for (smtp:127.0.0.1)",
        ));
        at += 60.0;
    }
    let committed =
        |log: &mut String, at: f64, queue: &str, id: &str, attempt: i64, sender: &str| {
            log.push_str(&line(at, "smtpd[100]", "connect from uns[127.0.0.1]"));
            log.push_str(&line(
                at,
                "smtpd[100]",
                &format!("{queue}: client=uns[127.0.0.1]"),
            ));
            log.push_str(&line(
                at,
                "cleanup[101]",
                &format!("{queue}: message-id={}", message_id(id, attempt)),
            ));
            log.push_str(&line(
                at,
                "qmgr[102]",
                &format!("{queue}: from=<{sender}>, size=400, nrcpt=1 (queue active)"),
            ));
        };
    committed(&mut log, T0 + 201.2, "4A1B2C3D4E", &seeded.doubt, 1, SENDER);
    committed(&mut log, T0 + 261.6, "5B2C3D4E5F", &seeded.doubt, 2, SENDER);
    // Another sender's message carrying the lost notification's Message-ID: not ours.
    committed(
        &mut log,
        T0 + 600.8,
        "6C3D4E5F60",
        &seeded.no_result,
        1,
        "forger@evil.example",
    );
    // A Subject quoting it, logged by a header check: text inside a line is no record.
    log.push_str(&line(
        T0 + 600.9,
        "cleanup[101]",
        &format!(
            "7D4E5F6071: warning: header Subject: message-id={} from uns[127.0.0.1]; from=<{SENDER}>",
            message_id(&seeded.no_result, 1)
        ),
    ));
    let mut sorted: Vec<&str> = log.lines().collect();
    sorted.sort();
    let path = seeded.dir.join("maillog");
    std::fs::write(&path, sorted.join("\n") + "\n").expect("log");
    path
}

#[test]
fn each_case_reconciles_to_its_class_on_both_backends_byte_for_byte() {
    let seeded = seed();
    let server = support::server(&seeded.db);
    let mut documents = Vec::new();
    for backend in support::BACKENDS {
        let output = backend
            .command(&seeded.db, &server)
            .args(["reconcile", "-o", "json"])
            .output()
            .expect("reconcile");
        documents.push(output.stdout.clone());
        let document = json_of(&output);
        let name = backend.name();
        assert_eq!(
            class_of(&document, &seeded.twice),
            ("DUPLICATED".into(), 2, 0),
            "{name}"
        );
        assert_eq!(
            class_of(&document, &seeded.doubt),
            ("MAYBE_DUPLICATED".into(), 1, 1),
            "{name}"
        );
        assert_eq!(
            class_of(&document, &seeded.once),
            ("ONCE".into(), 1, 0),
            "{name}"
        );
        assert_eq!(
            class_of(&document, &seeded.refused),
            ("MISSING".into(), 0, 0),
            "{name}"
        );
        assert_eq!(
            class_of(&document, &seeded.no_result),
            ("UNSETTLED".into(), 0, 1),
            "{name}"
        );
        assert_eq!(document["summary"]["EMAIL"]["DUPLICATED"], 1, "{name}");
        assert_eq!(document["summary"]["SLACK"]["MISSING"], 1, "{name}");
        assert_eq!(document["summary"]["PAGERDUTY"]["ONCE"], 0, "{name}");
        // Ordered by id, then channel.
        let ids: Vec<&str> = document["notifications"]
            .as_array()
            .expect("notifications")
            .iter()
            .filter_map(|n| n["id"].as_str())
            .collect();
        let mut sorted = ids.clone();
        sorted.sort_unstable();
        assert_eq!(ids, sorted, "{name}");
        // Each copy carries its evidence: the events that prove it and its time.
        let twice = document["notifications"]
            .as_array()
            .expect("notifications")
            .iter()
            .find(|n| n["id"] == seeded.twice.as_str())
            .expect("twice");
        let copies: Vec<&Value> = twice["evidence"]
            .as_array()
            .expect("evidence")
            .iter()
            .filter(|e| e["what"] == "copy")
            .collect();
        assert_eq!(copies.len(), 2, "{twice:#}");
        for copy in copies {
            assert_eq!(copy["sources"], json!(["history"]), "{copy}");
            assert!(
                !copy["event_ids"].as_array().expect("ids").is_empty(),
                "{copy}"
            );
            assert!(copy["at"].as_f64().is_some(), "{copy}");
        }
        assert_eq!(twice["recipient"], "twice@example.com");
    }
    assert_eq!(
        String::from_utf8_lossy(&documents[0]),
        String::from_utf8_lossy(&documents[1]),
        "the two backends print the same bytes"
    );
}

#[test]
fn the_relay_log_settles_doubt_by_the_rules_of_evidence_and_hostile_lines_count_for_nothing() {
    let seeded = seed();
    let log = relay_log(&seeded);
    let server = support::server(&seeded.db);
    let mut documents = Vec::new();
    for backend in support::BACKENDS {
        let output = backend
            .command(&seeded.db, &server)
            .args([
                "reconcile",
                "-o",
                "json",
                "--relay-log-zone",
                "+00:00",
                "--relay-log",
            ])
            .arg(&log)
            .output()
            .expect("reconcile");
        documents.push(output.stdout.clone());
        let document = json_of(&output);
        // The UNKNOWN attempt's message was committed: a second copy, with both queue ids.
        assert_eq!(
            class_of(&document, &seeded.doubt),
            ("DUPLICATED".into(), 2, 0)
        );
        let doubt = document["notifications"]
            .as_array()
            .expect("notifications")
            .iter()
            .find(|n| n["id"] == seeded.doubt.as_str())
            .expect("doubt");
        let queue_ids: Vec<&Value> = doubt["evidence"]
            .as_array()
            .expect("evidence")
            .iter()
            .filter(|e| e["what"] == "copy")
            .map(|e| &e["queue_ids"])
            .collect();
        assert_eq!(
            queue_ids,
            [&json!(["4A1B2C3D4E"]), &json!(["5B2C3D4E5F"])],
            "{doubt:#}"
        );
        // The forged message and the quoted Subject do not make the lost one ONCE; the
        // log covers its window, but a committed message from another sender is not
        // proof that ours was never sent.
        let (class, copies, _) = class_of(&document, &seeded.no_result);
        assert_eq!((class.as_str(), copies), ("UNSETTLED", 0), "{document:#}");
        // The reclaim that was accepted but is in no log line of ours: the log says the
        // relay never had it, which contradicts the relay's own 250, and is named.
        let (class, copies, _) = class_of(&document, &seeded.twice);
        assert_eq!((class.as_str(), copies), ("DUPLICATED", 2));
    }
    assert_eq!(
        documents[0], documents[1],
        "the two backends print the same bytes"
    );
}

/// A log named that cannot be read (a mistyped path, a directory) is said up front, on
/// stderr, whatever the output and on both backends, besides in the evidence of each row
/// that rests on it: cut short in a table, that alone let a typo pass for a log read.
/// Nothing is counted from it.
#[test]
fn a_log_that_cannot_be_read_is_said_up_front_and_counts_for_nothing() {
    let seeded = seed();
    let missing = seeded.db.with_file_name("mail.log.typo");
    let directory = seeded.db.parent().expect("a directory").to_path_buf();
    let server = support::server(&seeded.db);
    for backend in support::BACKENDS {
        let alone = backend
            .command(&seeded.db, &server)
            .args(["reconcile", "-o", "json"])
            .output()
            .expect("reconcile");
        for format in ["json", "table", "csv"] {
            let output = backend
                .command(&seeded.db, &server)
                .args(["reconcile", "-o", format, "--relay-log"])
                .arg(&missing)
                .arg("--relay-log")
                .arg(&directory)
                .output()
                .expect("reconcile");
            let said = String::from_utf8_lossy(&output.stderr);
            assert!(output.status.success(), "{said}");
            for (path, why) in [
                (&missing, "No such file or directory"),
                (&directory, "a directory, not a file"),
            ] {
                let line = format!(
                    "Not read, so no answer rests on it: {}: {why}",
                    path.display()
                );
                assert!(said.contains(&line), "{format}: {said}");
            }
            if format == "json" {
                let document = json_of(&output);
                let without = json_of(&alone);
                assert_eq!(document["summary"], without["summary"], "{document:#}");
                assert_eq!(
                    class_of(&document, &seeded.doubt),
                    class_of(&without, &seeded.doubt)
                );
            }
        }
    }
    // verify says it the same way, before its answers, each of which cannot tell.
    let dir = tempfile::tempdir().expect("dir");
    let db = dir.path().join("verify.db");
    let conn = schema::open(&db, OpenMode::Create).expect("store");
    let id = support::verify_entry(&conn, 1_000_000.0);
    drop(conn);
    let server = support::server(&db);
    for backend in support::BACKENDS {
        let output = backend
            .command(&db, &server)
            .args(["verify", &id, "-o", "json", "--relay-log"])
            .arg(&missing)
            .output()
            .expect("verify");
        let said = String::from_utf8_lossy(&output.stderr);
        assert!(output.status.success(), "{said}");
        let line = format!(
            "Not read, so no answer rests on it: {}: No such file or directory",
            missing.display()
        );
        assert!(said.contains(&line), "{said}");
        let answers = json_of(&output)["answers"].clone();
        let answers = answers.as_array().expect("answers");
        assert!(
            !answers.is_empty() && answers.iter().all(|a| a["answer"] == "CANNOT_TELL"),
            "{answers:#?}"
        );
    }
}

/// Debian's rsyslog writes the relay's lines to /var/log/syslog as well as to
/// /var/log/mail.log: both named, every count and every queue id is as with one.
#[test]
fn a_second_log_holding_the_same_lines_counts_nothing_twice() {
    let seeded = seed();
    let log = relay_log(&seeded);
    let syslog = log.with_file_name("syslog");
    std::fs::copy(&log, &syslog).expect("copy");
    let reconciled = |logs: &[&PathBuf]| -> Value {
        let mut command = support::unsctl();
        command.args(["--db"]).arg(&seeded.db).args([
            "reconcile",
            "-o",
            "json",
            "--relay-log-zone",
            "+00:00",
        ]);
        for log in logs {
            command.arg("--relay-log").arg(log);
        }
        json_of(&command.output().expect("reconcile"))
    };
    let counted = |document: &Value| -> Vec<(Value, Value, Value)> {
        document["notifications"]
            .as_array()
            .expect("notifications")
            .iter()
            .map(|n| {
                let queue_ids: Vec<&Value> = n["evidence"]
                    .as_array()
                    .expect("evidence")
                    .iter()
                    .map(|e| &e["queue_ids"])
                    .collect();
                (n["id"].clone(), n["class"].clone(), json!(queue_ids))
            })
            .collect()
    };
    let one = reconciled(&[&log]);
    let both = reconciled(&[&log, &syslog]);
    assert_eq!(counted(&one), counted(&both), "{both:#}");
    assert_eq!(one["summary"], both["summary"]);
    assert_eq!(
        class_of(&both, &seeded.doubt),
        ("DUPLICATED".into(), 2, 0),
        "{both:#}"
    );
}

#[test]
fn the_table_leads_with_what_needs_a_person_and_says_whether_it_goes_on() {
    let seeded = seed();
    let output = support::unsctl()
        .arg("--db")
        .arg(&seeded.db)
        .args(["--color", "never", "reconcile"])
        .env("COLUMNS", "200")
        .output()
        .expect("reconcile");
    support::succeeded(&output);
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    let needs = stdout.find("Needs a person").expect("needs a person");
    let doubt = stdout.find("In doubt").expect("in doubt");
    let summary = stdout.find("CHANNEL    ONCE").expect("summary");
    assert!(needs < doubt && doubt < summary, "{stdout}");
    let duplicated = stdout.find(&seeded.twice).expect("twice");
    let missing = stdout.find(&seeded.refused).expect("refused");
    assert!(duplicated < missing, "DUPLICATED first: {stdout}");
    assert!(
        stdout[needs..doubt].contains("twice@example.com"),
        "{stdout}"
    );
    assert!(
        !stdout.contains(&seeded.once),
        "ONCE is only counted: {stdout}"
    );
    assert!(
        stderr.contains(
            "5 notifications reconciled at any time: duplicated: 1 proven, 1 may be; 1 missing; 2 in doubt"
        ),
        "{stderr}"
    );
    // Seeded long ago: nothing lost or reclaimed in the last 15 minutes.
    assert!(stderr.contains("Not happening now"), "{stderr}");
}

#[test]
fn one_notification_is_explained_copy_by_copy() {
    let seeded = seed();
    let output = support::unsctl()
        .arg("--db")
        .arg(&seeded.db)
        .args(["--color", "never", "reconcile", &seeded.twice])
        .env("COLUMNS", "200")
        .output()
        .expect("reconcile");
    support::succeeded(&output);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        stdout.contains("EMAIL  DUPLICATED  2 copies  to twice@example.com"),
        "{stdout}"
    );
    assert!(
        stdout.contains("copy 1") && stdout.contains("copy 2"),
        "{stdout}"
    );
    assert!(stdout.contains(&message_id(&seeded.twice, 1)), "{stdout}");
    assert!(stdout.contains(&message_id(&seeded.twice, 2)), "{stdout}");
    // A prefix names it too, as everywhere.
    let output = support::unsctl()
        .arg("--db")
        .arg(&seeded.db)
        .args([
            "reconcile",
            "-o",
            "json",
            &seeded.twice[..seeded.twice.len() - 4],
        ])
        .output()
        .expect("reconcile");
    let document = json_of(&output);
    assert_eq!(document["notifications"].as_array().map(Vec::len), Some(1));
}

#[test]
fn the_window_and_the_selection_narrow_what_is_counted() {
    let seeded = seed();
    let run = |args: &[&str]| {
        json_of(
            &support::unsctl()
                .arg("--db")
                .arg(&seeded.db)
                .args(["reconcile", "-o", "json"])
                .args(args)
                .output()
                .expect("reconcile"),
        )
    };
    let ids = |document: &Value| -> Vec<String> {
        document["notifications"]
            .as_array()
            .expect("notifications")
            .iter()
            .filter_map(|n| n["id"].as_str().map(str::to_string))
            .collect()
    };
    let since = (T0 + 350.0).to_string();
    let until = (T0 + 550.0).to_string();
    let windowed = run(&["--since", &since, "--until", &until]);
    let mut expected = vec![seeded.once.clone(), seeded.refused.clone()];
    expected.sort();
    assert_eq!(ids(&windowed), expected);
    assert_eq!(windowed["window"]["since"], json!(T0 + 350.0));
    let slack = run(&["--channel", "SLACK"]);
    assert_eq!(ids(&slack), vec![seeded.refused.clone()]);
    assert!(slack["summary"].get("EMAIL").is_none(), "{slack:#}");
    let limited = run(&["--limit", "2"]);
    assert_eq!(ids(&limited).len(), 2);
    // Nonsense is a usage error, never a guess.
    for args in [
        vec!["--since", "1h", "--until", "2h"],
        vec!["--limit", "0"],
        vec![seeded.once.as_str(), "--since", "1h"],
        // A gap or a deadline of nothing: every second a hole, every lookup late.
        vec!["--max-log-gap", "0s"],
        vec!["--provider-timeout", "0"],
    ] {
        let output = support::unsctl()
            .arg("--db")
            .arg(&seeded.db)
            .arg("reconcile")
            .args(&args)
            .output()
            .expect("reconcile");
        assert_eq!(output.status.code(), Some(2), "{args:?}");
    }
}

#[test]
fn every_context_is_reconciled_and_one_that_is_down_makes_a_partial_answer() {
    let seeded = seed();
    let config = seeded.dir.join("config.toml");
    std::fs::write(
        &config,
        format!(
            "[contexts.eu]\ndb = \"{}\"\n\n[contexts.down]\napi = \"http://127.0.0.1:{}/\"\napi_key_env = \"UNS_KEY_DOWN\"\n",
            seeded.db.display(),
            support::free_port()
        ),
    )
    .expect("config");
    let output = support::unsctl()
        .env("UNSCTL_CONFIG", &config)
        .env("UNS_KEY_DOWN", "key-of-down-0123456789")
        .args(["--all-contexts", "reconcile", "-o", "json", "--relay-log"])
        .arg(seeded.dir.join("mail.log.typo"))
        .output()
        .expect("reconcile");
    assert_eq!(
        output.status.code(),
        Some(1),
        "a partial answer is not the whole"
    );
    let document: Value = serde_json::from_slice(&output.stdout).expect("json");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("partial answer: read 1 of 2 contexts"),
        "{stderr}"
    );
    // A log named that could not be read is said up front, once.
    assert_eq!(
        stderr
            .matches("Not read, so no answer rests on it: ")
            .count(),
        1,
        "{stderr}"
    );
    let notifications = document["notifications"].as_array().expect("notifications");
    assert_eq!(notifications.len(), 5, "{document:#}");
    assert!(
        notifications.iter().all(|n| n["context"] == "eu"),
        "{document:#}"
    );
    assert_eq!(document["summary"]["EMAIL"]["DUPLICATED"], 1);
    let contexts = document["contexts"].as_array().expect("contexts");
    assert!(
        contexts
            .iter()
            .any(|c| c["context"] == "down" && c["error"].is_string()),
        "{document:#}"
    );
}

/// Every document piped into a reader that stops early ends quietly, as a command's
/// output does: exit 0 and nothing on stderr. Each is far larger than a pipe holds, so
/// the writing meets the closed pipe.
#[test]
fn every_document_piped_into_a_reader_that_stops_ends_quietly() {
    let dir = tempfile::tempdir().expect("dir");
    let db = dir.path().join("uns.db");
    let conn = schema::open(&db, OpenMode::Create).expect("store");
    conn.execute_batch("PRAGMA synchronous = OFF")
        .expect("pragma");
    // Refused for good, each is a dead letter and MISSING: a line of every document.
    let refused = DeliveryResult::rejected("HTTP 400: invalid_payload", true);
    for n in 0..1000 {
        support::play(
            &conn,
            T0 + f64::from(n),
            &[Channel::Slack],
            std::slice::from_ref(&refused),
            1,
        );
    }
    for (command, at_least) in [
        ("reconcile -o json", 400_000),
        ("reconcile -o csv", 100_000),
        ("reconcile", 100_000),
        ("dlq list -o json", 100_000),
        ("dlq list", 100_000),
        ("dlq triage -o json", 100_000),
    ] {
        let whole = support::launch(env!("CARGO_BIN_EXE_unsctl"))
            .args(["--color", "never", "--db", &db.to_string_lossy()])
            .args(command.split(' '))
            .output()
            .expect("unsctl");
        assert!(whole.status.success(), "{command}");
        assert!(
            whole.stdout.len() > at_least,
            "{command}: {}",
            whole.stdout.len()
        );
        let cut = support::launch("bash")
            .arg("-c")
            .arg(format!(
                "set -o pipefail; {} --color never --db '{}' {command} | head -c 100 >/dev/null",
                env!("CARGO_BIN_EXE_unsctl"),
                db.display()
            ))
            .output()
            .expect("bash");
        let stderr = String::from_utf8_lossy(&cut.stderr);
        assert_eq!(cut.status.code(), Some(0), "{command}: {stderr}");
        assert!(!stderr.contains("error"), "{command}: {stderr}");
    }
}

/// "Still happening" and "how long ago" are told by the clock the events were stamped
/// by: over the API, the server's. The client's clock here stands a year after the
/// seeded lease losses; the server's a minute after the last, then an hour.
#[test]
fn still_happening_is_told_by_the_clock_that_stamped_the_events() {
    let seeded = seed();
    let last_lease_lost = T0 + 270.0;
    for (after, happening) in [(60.0, true), (3600.0, false)] {
        let server = support::server_at(&seeded.db, last_lease_lost + after);
        let reconcile = |args: &[&str]| {
            support::unsctl()
                .args(["--api", &format!("http://{}", server.addr), "reconcile"])
                .args(args)
                .env("UNS_API_KEY", support::KEY)
                .output()
                .expect("reconcile")
        };
        let document = json_of(&reconcile(&["-o", "json"]));
        assert_eq!(document["recent"]["last_lease_lost"], last_lease_lost);
        assert_eq!(
            document["recent"]["still_happening"], happening,
            "{after} s after: {:#}",
            document["recent"]
        );
        let text = reconcile(&[]);
        let shown = format!(
            "{}{}",
            String::from_utf8_lossy(&text.stdout),
            String::from_utf8_lossy(&text.stderr)
        );
        let ago = format!(
            "{} ({} ago)",
            unsctl::render::time::rfc3339(last_lease_lost),
            unsctl::render::time::duration(after)
        );
        assert!(
            shown.contains(&ago),
            "{after} s after, no {ago:?} in:\n{shown}"
        );
        let head = if happening {
            "Still happening"
        } else {
            "Not happening now"
        };
        assert!(
            shown.contains(head),
            "{after} s after, no {head:?} in:\n{shown}"
        );
    }
}

/// Across contexts, PagerDuty's lookups that failed alike are said once, counted over
/// every context: the token is the operator's, the same for all, and one line per
/// context would read as several failures.
#[test]
fn across_contexts_failed_lookups_are_said_once_counted_over_all() {
    let dir = tempfile::tempdir().expect("dir");
    let store = |name: &str, pages: usize| {
        let db = dir.path().join(name);
        let conn = schema::open(&db, OpenMode::Create).expect("store");
        for n in 0..pages {
            support::play(
                &conn,
                T0 + n as f64 * 10.0,
                &[Channel::Pagerduty],
                &[DeliveryResult::accepted(None)],
                3,
            );
        }
        db
    };
    let (eu, us) = (store("eu.db", 1), store("us.db", 2));
    let config = dir.path().join("config.toml");
    std::fs::write(
        &config,
        format!(
            "[contexts.eu]\ndb = \"{}\"\n\n[contexts.us]\ndb = \"{}\"\n",
            eu.display(),
            us.display()
        ),
    )
    .expect("config");
    let output = support::unsctl()
        .env("UNSCTL_CONFIG", &config)
        .env(
            "UNS_PAGERDUTY_API_URL",
            format!("http://127.0.0.1:{}", support::free_port()),
        )
        .env("UNS_PAGERDUTY_API_TOKEN", "pd-token-of-the-operator")
        .args(["--all-contexts", "reconcile", "-o", "json"])
        .output()
        .expect("reconcile");
    let document: Value = serde_json::from_slice(&output.stdout).expect("json");
    assert_eq!(
        document["notifications"].as_array().map(Vec::len),
        Some(3),
        "{document:#}"
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    let unread: Vec<&str> = stderr
        .lines()
        .filter_map(|l| l.strip_prefix("Not read, so no answer rests on it: "))
        .collect();
    assert_eq!(unread.len(), 1, "{stderr}");
    assert!(
        unread[0].starts_with("PagerDuty") && unread[0].ends_with("(3 of 3 lookups)"),
        "{stderr}"
    );
    assert!(!stderr.contains("pd-token-of-the-operator"), "{stderr}");
    // The fleet's document says it once as well.
    assert_eq!(
        document["unread"],
        serde_json::json!(unread),
        "{document:#}"
    );
}
