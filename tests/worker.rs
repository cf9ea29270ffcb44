//! Workers sharing one store while a provider stalls past a short lease: the fencing
//! invariants, checked from the history they leave.

mod support;

use serde_json::{Value, json};
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};
use unsctl::clock::SystemClock;
use unsctl::engine::{self, Backoff, NewNotification, RECOVERY_EXHAUSTED};
use unsctl::model::Channel;
use unsctl::repro;
use unsctl::runtime::fakes::{Behavior, Fakes};
use unsctl::runtime::schema::{self, OpenMode};
use unsctl::runtime::worker::{Worker, WorkerConfig};

type Snapshot = BTreeMap<i64, (String, String, String)>;

fn snapshot(conn: &rusqlite::Connection) -> Snapshot {
    let mut stmt = conn
        .prepare("SELECT id, notification_id, kind, payload FROM uns_events")
        .expect("prepare");
    stmt.query_map([], |row| {
        Ok((row.get(0)?, (row.get(1)?, row.get(2)?, row.get(3)?)))
    })
    .expect("query")
    .map(|row| row.expect("row"))
    .collect()
}

#[test]
fn workers_sharing_a_store_never_settle_under_a_stale_lease() {
    let dir = tempfile::tempdir().expect("dir");
    let db = dir.path().join("uns.db");
    let conn = schema::open(&db, OpenMode::Create).expect("store");
    let fakes = Fakes::start().expect("fakes");
    let total = 60;
    let mut ids = Vec::new();
    for n in 0..total {
        let recipient = format!("user{n}@example.com");
        let channels = if n % 3 == 0 {
            vec![Channel::Email, Channel::Slack]
        } else {
            vec![Channel::Email]
        };
        let id = engine::submit(
            &conn,
            unsctl::clock::Clock::now(&SystemClock),
            &NewNotification {
                channels: channels.into_iter().collect(),
                payload: json!({"recipient": recipient, "subject": "load", "body": "load"}),
                idempotency_key: None,
                max_attempts: 3,
            },
        )
        .expect("submit")
        .id;
        // Every fourth first send stalls past the lease; some Slack calls are refused once.
        if n % 4 == 0 {
            fakes.control.script(
                &recipient,
                &[Behavior::DelayAccept(Duration::from_millis(500))],
            );
        }
        if n % 6 == 0 {
            fakes.control.script(&id, &[Behavior::Reject(503)]);
        }
        ids.push(id);
    }

    let stop = Arc::new(AtomicBool::new(false));
    let mut threads = Vec::new();
    for w in 0..3 {
        let config = WorkerConfig {
            worker_id: format!("w{w}"),
            lease_seconds: 0.3,
            concurrency: 3,
            poll_interval: Duration::from_millis(10),
            backoff: Backoff {
                base_seconds: 0.05,
                max_seconds: 0.2,
            },
            min_io_timeout: Duration::from_millis(800),
        };
        let worker = Worker::new(
            unsctl::runtime::db::Database::open(&db).expect("worker connection"),
            Arc::new(SystemClock),
            repro::fake_adapters(&fakes).expect("adapters"),
            config,
        );
        threads.extend(worker.spawn(stop.clone()));
    }

    std::thread::sleep(Duration::from_millis(700));
    let early = snapshot(&conn);
    let start = Instant::now();
    loop {
        let open: i64 = conn
            .query_row(
                "SELECT COUNT(*) FROM uns_notifications WHERE status IN ('PENDING', 'LEASED')",
                [],
                |r| r.get(0),
            )
            .expect("count");
        if open == 0 || start.elapsed() > Duration::from_secs(30) {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    // Let late results from lost leases land.
    std::thread::sleep(Duration::from_millis(900));
    stop.store(true, Ordering::SeqCst);
    for thread in threads {
        thread.join().expect("worker thread");
    }

    // No submitted notification is lost: each row exists and is terminal or in progress.
    let statuses: HashMap<String, String> = {
        let mut stmt = conn
            .prepare("SELECT id, status FROM uns_notifications")
            .expect("prepare");
        stmt.query_map([], |row| Ok((row.get(0)?, row.get(1)?)))
            .expect("query")
            .map(|r| r.expect("row"))
            .collect()
    };
    assert_eq!(statuses.len(), total);
    for id in &ids {
        let status = statuses.get(id).map(String::as_str);
        assert!(
            matches!(status, Some("DELIVERED" | "DEAD" | "PENDING" | "LEASED")),
            "{id}: {status:?}"
        );
    }
    let delivered = statuses.values().filter(|s| *s == "DELIVERED").count();
    assert!(
        delivered > total / 2,
        "most notifications get through: {delivered}/{total}"
    );

    let events = snapshot(&conn);
    // No event was rewritten or removed.
    for (id, before) in &early {
        assert_eq!(events.get(id), Some(before), "event {id} changed");
    }

    let mut by_notification: BTreeMap<&str, Vec<(i64, &str, Value)>> = BTreeMap::new();
    for (id, (notification, kind, payload)) in &events {
        let payload: Value = serde_json::from_str(payload).expect("payload");
        by_notification
            .entry(notification.as_str())
            .or_default()
            .push((*id, kind.as_str(), payload));
    }
    let mut lease_lost = 0;
    for (notification, history) in &by_notification {
        let mut current: Option<(String, f64)> = None;
        let mut at_of: HashMap<i64, f64> = HashMap::new();
        let at: HashMap<i64, f64> = {
            let mut stmt = conn
                .prepare("SELECT id, at FROM uns_events WHERE notification_id = ?1")
                .expect("prepare");
            stmt.query_map([notification], |row| Ok((row.get(0)?, row.get(1)?)))
                .expect("query")
                .map(|r| r.expect("row"))
                .collect()
        };
        at_of.extend(at);
        for (id, kind, payload) in history {
            match *kind {
                "ATTEMPT_STARTED" => {
                    current = Some((
                        payload["lease_token"]
                            .as_str()
                            .unwrap_or_default()
                            .to_string(),
                        payload["lease_until"].as_f64().unwrap_or_default(),
                    ))
                }
                "LEASE_LOST" => lease_lost += 1,
                "DELIVERED" | "RETRY_SCHEDULED" | "DEAD_LETTERED" => {
                    if payload["error_message"] == RECOVERY_EXHAUSTED {
                        continue;
                    }
                    let (token, until) = current.clone().expect("a settlement follows a claim");
                    assert_eq!(
                        payload["lease_token"].as_str(),
                        Some(token.as_str()),
                        "{notification}: event {id} settled under a stale token"
                    );
                    assert!(
                        at_of[id] < until,
                        "{notification}: event {id} settled after its lease ran out"
                    );
                }
                _ => {}
            }
        }
        // Every channel start has its result (no worker was killed here).
        let starts = history
            .iter()
            .filter(|(_, k, _)| *k == "CHANNEL_ATTEMPT_STARTED");
        for (id, _, start) in starts {
            let matched = history.iter().any(|(_, k, p)| {
                *k == "CHANNEL_ATTEMPT_RESULT"
                    && p["lease_token"] == start["lease_token"]
                    && p["channel"] == start["channel"]
            });
            assert!(matched, "{notification}: start {id} has no result");
        }
    }
    assert!(lease_lost > 0, "the stalls really did cost leases");
}

#[test]
fn the_worker_process_logs_a_named_outcome_and_stops_on_sigterm() {
    let dir = tempfile::tempdir().expect("dir");
    let db = dir.path().join("uns.db");
    let conn = schema::open(&db, OpenMode::Create).expect("store");
    let fakes = Fakes::start().expect("fakes");
    fakes.control.script(
        "slow@example.com",
        &[Behavior::DelayAccept(Duration::from_millis(800))],
    );
    for recipient in ["fast@example.com", "slow@example.com"] {
        engine::submit(
            &conn,
            unsctl::clock::Clock::now(&SystemClock),
            &NewNotification {
                channels: [Channel::Email].into_iter().collect(),
                payload: json!({"recipient": recipient}),
                idempotency_key: None,
                max_attempts: 1,
            },
        )
        .expect("submit");
    }
    let child = std::process::Command::new(env!("CARGO_BIN_EXE_unsctl"))
        .arg("--db")
        .arg(&db)
        .args([
            "runtime",
            "worker",
            "--concurrency",
            "2",
            "--poll-ms",
            "20",
            "--worker-id",
            "logger",
        ])
        .env("UNS_SMTP_HOST", fakes.smtp.to_string())
        .env("NO_COLOR", "1")
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("worker");
    // Stop while the slow send is in flight: it must still record its result.
    let start = Instant::now();
    while fakes.control.ledger().len() < 2 && start.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(20));
    }
    let pid = child.id().to_string();
    std::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .expect("kill");
    let output = child.wait_with_output().expect("wait");
    assert!(output.status.success(), "{:?}", output.status);
    let log = String::from_utf8_lossy(&output.stderr);
    assert!(log.contains("outcome=\"delivered\""), "{log}");
    assert!(log.contains("outcome=\"stopped\""), "{log}");
    let results: i64 = conn
        .query_row(
            "SELECT COUNT(*) FROM uns_events WHERE kind = 'CHANNEL_ATTEMPT_RESULT'",
            [],
            |r| r.get(0),
        )
        .expect("count");
    assert_eq!(
        results, 2,
        "the in-flight call recorded its result before exit"
    );
    let delivered: i64 = conn
        .query_row(
            "SELECT COUNT(*) FROM uns_notifications WHERE status = 'DELIVERED'",
            [],
            |r| r.get(0),
        )
        .expect("count");
    assert_eq!(delivered, 2);
}
