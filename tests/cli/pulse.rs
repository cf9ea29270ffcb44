//! `unsctl pulse` and "still happening": each series as `sqlite3` counts the same events
//! per minute, the same bytes over both backends, and an incident called over only once
//! its last lease loss and reclaim are minutes past, on every command that says so.

use crate::support;
use unsctl::db::Db;

use serde_json::Value;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use unsctl::clock::{Clock, SystemClock};
use unsctl::model::Channel;
use unsctl::runtime::engine::{self, NewNotification};
use unsctl::runtime::schema::{self, OpenMode};

fn json(out: &Output, what: &str) -> Value {
    assert!(
        out.status.success(),
        "{what}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap_or_else(|err| panic!("{what}: {err}"))
}

/// What `sqlite3` counts per step for one series: the runbook's tool, not ours.
fn counted_by_sqlite3(db: &Path, kind: &str, condition: &str, since: f64, until: f64) -> Vec<u64> {
    let steps = ((until - since) / 60.0).ceil() as usize;
    let sql = format!(
        "SELECT CAST((at - {since}) / 60 AS INTEGER), COUNT(*) FROM uns_events \
         WHERE kind = '{kind}' AND at >= {since} AND at < {until} AND {condition} GROUP BY 1;"
    );
    let out = Command::new("sqlite3")
        .arg("-readonly")
        .arg(db)
        .arg(&sql)
        .output()
        .expect("sqlite3");
    support::succeeded(&out);
    let mut counts = vec![0u64; steps];
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let (bucket, count) = line.split_once('|').expect("bucket|count");
        counts[bucket.parse::<usize>().expect("bucket")] = count.parse().expect("count");
    }
    counts
}

#[test]
fn each_series_is_what_sqlite3_counts_and_both_backends_agree() {
    let dir = tempfile::tempdir().expect("dir");
    let db = dir.path().join("uns.db");
    let repro = support::unsctl()
        .arg("--db")
        .arg(&db)
        .args(["repro", "all"])
        .stdin(Stdio::null())
        .output()
        .expect("repro");
    support::succeeded(&repro);
    let conn = rusqlite::Connection::open(&db).expect("db");
    let (first, last): (f64, f64) = conn
        .query_row("SELECT MIN(at), MAX(at) FROM uns_events", [], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })
        .expect("span");
    // An absolute window on whole minutes around every event.
    let since = (first / 60.0).floor() * 60.0 - 120.0;
    let until = (last / 60.0).ceil() * 60.0 + 120.0;
    let (since_text, until_text) = (unsctl::clock::rfc3339(since), unsctl::clock::rfc3339(until));
    let server = support::server(&db);
    let mut documents = Vec::new();
    for backend in support::BACKENDS {
        let out = backend
            .command(&db, &server)
            .args([
                "pulse",
                "--since",
                &since_text,
                "--until",
                &until_text,
                "-o",
                "json",
            ])
            .output()
            .expect("pulse");
        documents.push(out.stdout.clone());
        let pulse = json(&out, "pulse");
        for (name, kind, condition) in [
            ("LEASE_LOST", "LEASE_LOST", "1"),
            (
                "RECLAIMED",
                "ATTEMPT_STARTED",
                "json_extract(payload, '$.reclaimed') = 1",
            ),
            (
                "UNKNOWN",
                "CHANNEL_ATTEMPT_RESULT",
                "json_extract(payload, '$.metadata.provider_outcome') = 'UNKNOWN'",
            ),
            ("DEAD_LETTERED", "DEAD_LETTERED", "1"),
            ("REPLAYED", "REPLAYED", "1"),
            ("DLQ_RESOLVED", "DLQ_RESOLVED", "1"),
            ("DELIVERED", "DELIVERED", "1"),
        ] {
            let ours: Vec<u64> = serde_json::from_value(pulse["series"][name].clone())
                .unwrap_or_else(|err| panic!("{name}: {err}: {pulse:#}"));
            assert_eq!(
                ours,
                counted_by_sqlite3(&db, kind, condition, since, until),
                "{backend:?} {name}"
            );
        }
        assert!(
            pulse["series"]["LEASE_LOST"]
                .as_array()
                .is_some_and(|s| s.iter().any(|n| n.as_u64() > Some(0)))
        );
        let last = pulse["last"]["LEASE_LOST"]
            .as_f64()
            .expect("a last lease loss");
        assert!(last >= first && last <= until, "{pulse:#}");
    }
    assert_eq!(
        documents[0], documents[1],
        "the same bytes over both backends"
    );
    // The route is bounded: more than 1,440 steps is refused, with the step that fits.
    let refused = support::unsctl()
        .arg("--db")
        .arg(&db)
        .args(["pulse", "--since", "2d", "--step", "1m"])
        .output()
        .expect("pulse");
    assert_eq!(refused.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&refused.stderr).contains("at most 1440"));
}

/// A store with a lease loss and a reclaim `ago` seconds back.
fn store_with_losses(dir: &Path, ago: f64) -> std::path::PathBuf {
    let db = dir.join(format!("losses-{}.db", ago as i64));
    let conn = schema::open(&db, OpenMode::Create).expect("store");
    let now = SystemClock.now();
    let id = engine::submit(
        &Db::Sqlite(&conn),
        now - ago - 100.0,
        &NewNotification {
            channels: [Channel::Email].into_iter().collect(),
            payload: serde_json::json!({"recipient": "a@example.test"}),
            idempotency_key: None,
            max_attempts: 3,
        },
    )
    .expect("submit")
    .id;
    // The events a lost lease and its reclaim leave, at the times this test needs.
    conn.execute(
        "INSERT INTO uns_events (notification_id, at, kind, payload) VALUES
         (?1, ?2, 'LEASE_LOST', '{\"attempt\":1,\"cycle\":1,\"cycle_attempt\":1,\"lease_token\":\"t1\",\"provider_effect_may_have_occurred\":true}'),
         (?1, ?3, 'ATTEMPT_STARTED', '{\"attempt\":2,\"cycle\":1,\"cycle_attempt\":2,\"lease_token\":\"t2\",\"lease_until\":0,\"reclaimed\":true,\"worker_id\":\"w\"}')",
        rusqlite::params![id, now - ago, now - ago + 1.0],
    )
    .expect("events");
    db
}

#[test]
fn an_incident_is_still_happening_only_while_its_last_loss_is_recent() {
    let dir = tempfile::tempdir().expect("dir");
    for (ago, still) in [(20.0 * 60.0, false), (60.0, true)] {
        let db = store_with_losses(dir.path(), ago);
        let server = support::server(&db);
        for backend in support::BACKENDS {
            let run = |args: &[&str]| {
                backend
                    .command(&db, &server)
                    .args(args)
                    .output()
                    .expect("unsctl")
            };
            let reconciled = run(&["reconcile", "--since", "1h", "-o", "json"]);
            let document = json(&reconciled, "reconcile");
            assert_eq!(
                document["recent"]["still_happening"], still,
                "{backend:?}, {ago}s ago: {document:#}"
            );
            let said =
                String::from_utf8_lossy(&run(&["reconcile", "--since", "1h"]).stderr).to_string();
            let minutes = if still { "1m" } else { "20m" };
            assert!(
                said.contains("Last lease loss") && said.contains(&format!("({minutes}")),
                "{backend:?}, {ago}s ago: {said}"
            );
            assert_eq!(
                said.contains("Still happening"),
                still,
                "{backend:?}, {ago}s ago: {said}"
            );
        }
        // The watch says it when it starts, on the store.
        let said = dir.path().join(format!("watch-{}.err", ago as i64));
        let mut watch = support::unsctl()
            .arg("--db")
            .arg(&db)
            .args(["dlq", "triage", "--watch"])
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&said).expect("stderr"))
            .spawn()
            .expect("watch");
        let text = || std::fs::read_to_string(&said).unwrap_or_default();
        let told = support::wait_for(std::time::Duration::from_secs(60), || {
            text().contains("Last lease loss")
        });
        let _ = watch.kill();
        let _ = watch.wait();
        assert!(told, "{}", text());
        assert_eq!(text().contains("Still happening"), still, "{}", text());
        // doctor, on the store and through the API, with no relay to measure.
        for flags in [
            vec!["--db".to_string(), db.display().to_string()],
            vec!["--api".to_string(), format!("http://{}", server.addr)],
        ] {
            let out = support::unsctl()
                .args(&flags)
                .args(["-o", "json", "doctor"])
                .env("UNS_API_KEY", support::KEY)
                .output()
                .expect("doctor");
            let checks: Vec<Value> = serde_json::from_slice(&out.stdout).expect("json");
            let lease = checks
                .iter()
                .find(|c| c["name"] == "lease losses")
                .cloned()
                .expect("lease check");
            let detail = lease["detail"].as_str().unwrap_or_default();
            assert_eq!(
                lease["level"],
                if still { "warn" } else { "ok" },
                "{lease:#}"
            );
            assert!(detail.contains("last lease loss"), "{detail}");
            assert_eq!(detail.starts_with("still happening"), still, "{detail}");
        }
        server.stop();
    }
}

/// A step under a second is a usage error that says so, never a count of steps it did
/// not take; a window of years asks for a step a person would type.
#[test]
fn a_step_that_cannot_be_taken_is_refused_in_words() {
    let dir = tempfile::tempdir().expect("dir");
    let db = store_with_losses(dir.path(), 60.0);
    for (args, says) in [
        (&["--step", "0s"][..], "a step is at least 1s"),
        (
            &["--since", "30000d", "--step", "1m"][..],
            "take a step of 21d or more",
        ),
    ] {
        let out = support::unsctl()
            .arg("--db")
            .arg(&db)
            .arg("pulse")
            .args(args)
            .output()
            .expect("pulse");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(says), "{args:?}: {stderr}");
        assert!(!stderr.contains("3601 steps"), "{stderr}");
    }
}

/// "The last hour" is the store's, by the clock that stamped its events: over the API,
/// the server's. Its clock here stands a minute after a loss the operator's clock puts
/// a year back; the pulse still shows it, and says it is still happening.
#[test]
fn the_last_hour_is_the_stores_by_its_own_clock() {
    let dir = tempfile::tempdir().expect("dir");
    let year = 365.0 * 86_400.0;
    let db = store_with_losses(dir.path(), year);
    let loss: f64 = rusqlite::Connection::open(&db)
        .expect("db")
        .query_row(
            "SELECT at FROM uns_events WHERE kind = 'LEASE_LOST'",
            [],
            |r| r.get(0),
        )
        .expect("the loss");
    let server_now = loss + 60.0;
    let server = support::server_at(&db, server_now);
    let pulse = |args: &[&str]| {
        support::unsctl()
            .args(["--api", &format!("http://{}", server.addr), "pulse"])
            .args(args)
            .env("UNS_API_KEY", support::KEY)
            .output()
            .expect("pulse")
    };
    let document = json(&pulse(&["-o", "json"]), "pulse");
    assert_eq!(
        document["window"]["until"].as_f64(),
        Some((server_now / 60.0).ceil() * 60.0),
        "{document:#}"
    );
    let lost: u64 = document["series"]["LEASE_LOST"]
        .as_array()
        .expect("series")
        .iter()
        .filter_map(Value::as_u64)
        .sum();
    assert_eq!(lost, 1, "{document:#}");
    let said = String::from_utf8_lossy(&pulse(&[]).stderr).to_string();
    assert!(said.contains("Still happening"), "{said}");
    assert!(said.contains("(1m ago)"), "{said}");
}
