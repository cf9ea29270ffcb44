//! Paced replay: `--rate N/s` and `--spread DURATION` make each replayed entry due at its
//! place in the pace, in the replay transition itself, audited in its REPLAYED event, on
//! both backends and through `apply`; the dry run and the prompt say the pace.

use crate::support;

use serde_json::{Value, json};
use std::path::Path;
use unsctl::runtime::schema::{self, OpenMode};

const T0: f64 = 1_761_192_000.0;

fn seed(db: &Path, entries: usize) -> Vec<String> {
    let conn = schema::open(db, OpenMode::Create).expect("store");
    let mut ids: Vec<String> = (0..entries)
        .map(|n| support::replay_entry(&conn, T0 + n as f64))
        .collect();
    ids.sort();
    ids
}

/// Each entry's next_attempt_at and its REPLAYED event's payload, in id order.
fn replayed(db: &Path, ids: &[String]) -> Vec<(f64, Value)> {
    let conn = rusqlite::Connection::open(db).expect("db");
    ids.iter()
        .map(|id| {
            let due: f64 = conn
                .query_row(
                    "SELECT next_attempt_at FROM uns_notifications WHERE id = ?1",
                    [id],
                    |r| r.get(0),
                )
                .expect("row");
            let payload: String = conn
                .query_row(
                    "SELECT payload FROM uns_events WHERE notification_id = ?1 AND kind = 'REPLAYED'",
                    [id],
                    |r| r.get(0),
                )
                .expect("replayed");
            (due, serde_json::from_str(&payload).expect("json"))
        })
        .collect()
}

#[test]
fn a_paced_replay_makes_each_entry_due_at_its_place_on_both_backends() {
    let dir = tempfile::tempdir().expect("dir");
    for backend in support::BACKENDS {
        let db = dir.path().join(format!("{}.db", backend.name()));
        let ids = seed(&db, 20);
        let server = support::server(&db);
        let run = |args: &[&str]| {
            backend
                .command(&db, &server)
                .args(["replay", "--branch", "replay"])
                .args(args)
                .output()
                .expect("replay")
        };
        // The dry run says the pace and changes nothing.
        let dry = run(&["--rate", "10/s"]);
        let stderr = String::from_utf8_lossy(&dry.stderr);
        assert!(
            stderr.contains("paced at 10/s: 20 replays, the last due 1.9 s after the first"),
            "{stderr}"
        );
        let before = unsctl::clock::Clock::now(&unsctl::clock::SystemClock);
        let done = run(&[
            "--rate",
            "10/s",
            "--confirm",
            "--yes",
            "--reason",
            "relay back",
        ]);
        support::succeeded(&done);
        let after = unsctl::clock::Clock::now(&unsctl::clock::SystemClock);
        let rows = replayed(&db, &ids);
        let first = rows[0].0;
        assert!(
            first >= before - 1.0 && first <= after + 1.0,
            "{first} {before}"
        );
        for (k, (due, payload)) in rows.iter().enumerate() {
            // Entry k is due k tenths of a second after the first, give or take the
            // clocks of the client and the server.
            let expected = first + k as f64 / 10.0;
            assert!(
                (due - expected).abs() < 0.05,
                "{}: entry {k} due {due}, expected {expected}",
                backend.name()
            );
            assert_eq!(payload["pace"], "10/s", "{payload}");
            assert_eq!(payload["due_at"].as_f64(), Some(*due), "{payload}");
        }
        server.stop();
    }
}

#[test]
fn a_spread_puts_the_last_entry_at_its_end_and_apply_takes_the_same_pace() {
    let dir = tempfile::tempdir().expect("dir");
    let db = dir.path().join("uns.db");
    let ids = seed(&db, 5);
    let plan = support::unsctl()
        .arg("--db")
        .arg(&db)
        .args(["-o", "json", "dlq", "triage"])
        .output()
        .expect("triage");
    let path = dir.path().join("plan.json");
    std::fs::write(&path, &plan.stdout).expect("plan");
    let out = support::unsctl()
        .arg("--db")
        .arg(&db)
        .args(["apply", &path.display().to_string(), "--spread", "2m"])
        .args(["--confirm", "--yes", "--reason", "relay back"])
        .output()
        .expect("apply");
    support::succeeded(&out);
    let rows = replayed(&db, &ids);
    let (first, last) = (rows[0].0, rows[4].0);
    assert!((last - first - 120.0).abs() < 0.05, "{first} {last}");
    assert!((rows[2].0 - first - 60.0).abs() < 0.05);
    assert_eq!(rows[4].1["pace"], "evenly over 2m");
    // Doctor sees the pace's backlog waiting its turn, beside what is due now.
    let doctor = support::unsctl()
        .arg("--db")
        .arg(&db)
        .args(["-o", "json", "doctor"])
        .output()
        .expect("doctor");
    let text = String::from_utf8_lossy(&doctor.stdout);
    assert!(
        text.contains("1 row due, the oldest waiting")
            && text.contains("; 4 rows due later, the last in "),
        "{text}"
    );
    // Nonsense is a usage error; a pace past a week is refused before anything changes.
    for args in [
        vec!["--rate", "0/s"],
        vec!["--rate", "fast"],
        vec!["--rate", "1/s", "--spread", "1m"],
    ] {
        let out = support::unsctl()
            .arg("--db")
            .arg(&db)
            .args(["replay", "--branch", "replay"])
            .args(&args)
            .output()
            .expect("replay");
        assert_eq!(out.status.code(), Some(2), "{args:?}");
    }
}

#[test]
fn the_api_bounds_due_at_and_never_makes_a_replay_due_in_the_past() {
    let dir = tempfile::tempdir().expect("dir");
    let db = dir.path().join("uns.db");
    let ids = seed(&db, 2);
    let server = support::server(&db);
    unsctl::runtime::adapters::init_tls();
    let client = reqwest::blocking::Client::new();
    let replay = |id: &str, body: Value| {
        client
            .post(format!(
                "http://{}/api/v1/runtime/notifications/{id}/replay",
                server.addr
            ))
            .bearer_auth(support::KEY)
            .json(&body)
            .send()
            .expect("post")
            .status()
    };
    let now = unsctl::clock::Clock::now(&unsctl::clock::SystemClock);
    assert_eq!(
        replay(
            &ids[0],
            json!({"due_at": now + 8.0 * 86_400.0, "reason": "x"})
        )
        .as_u16(),
        400
    );
    assert_eq!(replay(&ids[0], json!({"due_at": "soon"})).as_u16(), 400);
    // An hour ago is now.
    assert!(replay(&ids[1], json!({"due_at": now - 3600.0, "reason": "x"})).is_success());
    let rows = replayed(&db, &ids[1..]);
    assert!(rows[0].0 >= now - 1.0, "{rows:?}");
}

/// A PAGERDUTY dead letter, and an earlier trigger under its dedup key that PagerDuty
/// took (its incident open), sent straight to the fake.
fn paged_before(db: &Path, fakes: &unsctl::lab::fakes::Fakes) -> String {
    let conn = schema::open(db, OpenMode::Create).expect("store");
    let id = support::play(
        &conn,
        T0,
        &[unsctl::model::Channel::Pagerduty],
        &[unsctl::runtime::engine::DeliveryResult::rejected(
            "HTTP 400: bad",
            false,
        )],
        1,
    );
    unsctl::runtime::adapters::init_tls();
    let status = reqwest::blocking::Client::new()
        .post(fakes.pagerduty_url())
        .json(&json!({"routing_key": "r", "event_action": "trigger", "dedup_key": id,
                      "payload": {"summary": "checkout down", "source": "uns", "severity": "error"}}))
        .send()
        .expect("trigger")
        .status();
    assert!(status.is_success(), "{status}");
    id
}

#[test]
fn the_replay_says_what_each_receiver_does_with_a_second_copy() {
    let dir = tempfile::tempdir().expect("dir");
    let db = dir.path().join("uns.db");
    let fakes = unsctl::lab::fakes::Fakes::start().expect("fakes");
    let id = paged_before(&db, &fakes);
    let slack = support::replay_entry(
        &schema::open(&db, OpenMode::Create).expect("store"),
        T0 + 10.0,
    );
    let dry_run = |with_token: bool| {
        let mut command = support::unsctl();
        command.arg("--db").arg(&db).args(["replay", &id, &slack]);
        if with_token {
            command
                .env(
                    "UNS_PAGERDUTY_API_TOKEN",
                    unsctl::lab::fakes::PAGERDUTY_TOKEN,
                )
                .env("UNS_PAGERDUTY_API_URL", fakes.pagerduty_api_url());
        }
        let out = command.output().expect("replay");
        support::succeeded(&out);
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    // Open: the trigger merges. Slack drops no second copy either way.
    let said = dry_run(true);
    assert!(
        said.contains(&format!(
            "PAGERDUTY {id}: merged into open incident PFAKE0000 (#1): no new page"
        )),
        "{said}"
    );
    assert!(
        said.contains("SLACK: the receiver does not drop a second copy"),
        "{said}"
    );
    // Triage says it too, under the table.
    let triage = support::unsctl()
        .arg("--db")
        .arg(&db)
        .args(["--color", "never", "dlq", "triage"])
        .env(
            "UNS_PAGERDUTY_API_TOKEN",
            unsctl::lab::fakes::PAGERDUTY_TOKEN,
        )
        .env("UNS_PAGERDUTY_API_URL", fakes.pagerduty_api_url())
        .output()
        .expect("triage");
    let table = String::from_utf8_lossy(&triage.stdout);
    assert!(
        table.contains("PagerDuty, were these replayed:")
            && table.contains(&format!(
                "PAGERDUTY {id}: merged into open incident PFAKE0000 (#1)"
            )),
        "{table}"
    );
    // Resolved by a responder: the replay pages again.
    fakes.control.resolve_incident(&id);
    let said = dry_run(true);
    assert!(
        said.contains(&format!(
            "PAGERDUTY {id}: opens a new incident (a new page): its incident was resolved"
        )),
        "{said}"
    );
    // Without a token, the rule, not a guess.
    let said = dry_run(false);
    assert!(
        said.contains("set UNS_PAGERDUTY_API_TOKEN to say which"),
        "{said}"
    );
    assert!(!said.contains("merged into open incident"), "{said}");
    // The fake keeps PagerDuty's rule: a trigger after the resolution is a second incident.
    let _ = paged_again(&fakes, &id);
    assert_eq!(
        fakes.control.copies(unsctl::model::Channel::Pagerduty, &id),
        2
    );
    let incidents = fakes.control.incidents();
    assert_eq!(incidents.len(), 2);
    assert!(incidents[0].resolved.is_some() && incidents[1].resolved.is_none());
}

fn paged_again(fakes: &unsctl::lab::fakes::Fakes, id: &str) -> reqwest::StatusCode {
    reqwest::blocking::Client::new()
        .post(fakes.pagerduty_url())
        .json(&json!({"routing_key": "r", "event_action": "trigger", "dedup_key": id,
                      "payload": {"summary": "checkout down again", "source": "uns", "severity": "error"}}))
        .send()
        .expect("trigger")
        .status()
}

/// A pace is bounded to what it can mean (at least one a day, at most 10,000 a second)
/// and described as written, in the dry run and in the audit: `1/h` is `1/h`.
#[test]
fn a_pace_reads_as_written_and_nonsense_is_refused() {
    let dir = tempfile::tempdir().expect("dir");
    let db = dir.path().join("uns.db");
    let ids = seed(&db, 3);
    let run = |args: &[&str]| {
        support::unsctl()
            .arg("--db")
            .arg(&db)
            .args(["replay", "--branch", "replay", "--reason", "relay fixed"])
            .args(args)
            .output()
            .expect("replay")
    };
    for bad in ["1e-300", "0.5/d", "1/w", "20000/s"] {
        let out = run(&["--rate", bad]);
        assert_eq!(out.status.code(), Some(2), "--rate {bad}: {out:?}");
    }
    let out = run(&["--spread", "8d"]);
    assert_eq!(out.status.code(), Some(2), "a spread past a week: {out:?}");
    let dry = run(&["--rate", "1/h"]);
    let said = String::from_utf8_lossy(&dry.stderr);
    assert!(said.contains("1/h") && !said.contains("0.02/m"), "{said}");
    let done = run(&["--spread", "2d", "--confirm", "--yes"]);
    assert!(done.status.success(), "{done:?}");
    let paces: Vec<String> = replayed(&db, &ids)
        .into_iter()
        .map(|(_, p)| p["pace"].as_str().unwrap_or_default().to_string())
        .collect();
    assert!(paces.iter().all(|p| p == "evenly over 2d"), "{paces:?}");
}
