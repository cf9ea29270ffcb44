//! Workers sharing one store while a provider stalls past a short lease: the fencing
//! invariants, checked from the history they leave.

use crate::support;
use unsctl::db::Db;

use serde_json::{Value, json};
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use unsctl::clock::{Clock, ManualClock, SystemClock};
use unsctl::lab::fakes::{Behavior, Fakes};
use unsctl::lab::repro;
use unsctl::model::Channel;
use unsctl::runtime::engine::{self, Backoff, NewNotification, RECOVERY_EXHAUSTED};
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

/// Waits (bounded) for `condition`, polling the store.
fn wait_until(what: &str, condition: impl FnMut() -> bool) {
    support::wait_until(what, Duration::from_secs(60), condition);
}

fn count(conn: &rusqlite::Connection, sql: &str, now: f64) -> i64 {
    conn.query_row(sql, [now], |r| r.get(0)).expect("count")
}

#[test]
fn workers_sharing_a_store_never_settle_under_a_stale_lease() {
    let dir = tempfile::tempdir().expect("dir");
    let db = dir.path().join("uns.db");
    let conn = schema::open(&db, OpenMode::Create).expect("store");
    let fakes = Fakes::start().expect("fakes");
    // Time moves only when the test says so: leases run out on cue, never by chance.
    let clock = ManualClock::new(1_000_000.0);
    let total = 60;
    let mut ids = Vec::new();
    let mut held = 0;
    for n in 0..total {
        let recipient = format!("user{n}@example.com");
        let channels = if n % 3 == 0 {
            vec![Channel::Email, Channel::Slack]
        } else {
            vec![Channel::Email]
        };
        let id = engine::submit(
            &Db::Sqlite(&conn),
            clock.now(),
            &NewNotification {
                channels: channels.into_iter().collect(),
                payload: json!({"recipient": recipient, "subject": "load", "body": "load"}),
                idempotency_key: None,
                max_attempts: 3,
            },
        )
        .expect("submit")
        .id;
        // Every tenth first send is held by the provider past its lease; some Slack
        // calls are refused once.
        if n % 10 == 0 {
            fakes.control.script(&recipient, &[Behavior::Hold]);
            held += 1;
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
            lease_seconds: 60.0,
            concurrency: 3,
            poll_interval: Duration::from_millis(5),
            backoff: Backoff {
                base_seconds: 5.0,
                max_seconds: 5.0,
            },
            min_io_timeout: Duration::from_secs(30),
        };
        let worker = Worker::new(
            unsctl::runtime::writer::Database::open(&db).expect("worker connection"),
            Arc::new(clock.clone()),
            repro::fake_adapters(&fakes).expect("adapters"),
            config,
        );
        threads.extend(worker.spawn(stop.clone()));
    }

    // 1. Everything that can move now has: the held sends are with the provider, every
    //    other row is delivered or waiting for its retry.
    wait_until("the first round", || {
        let with_provider = fakes.control.ledger().len();
        let due = count(
            &conn,
            "SELECT COUNT(*) FROM uns_notifications WHERE status = 'PENDING' AND next_attempt_at <= ?1",
            clock.now(),
        );
        let leased = count(
            &conn,
            "SELECT COUNT(*) FROM uns_notifications WHERE status = 'LEASED' AND ?1 > 0",
            clock.now(),
        );
        due == 0 && leased == held && with_provider >= held as usize
    });
    let early = snapshot(&conn);
    // 2. The held leases run out and the retries fall due: other threads reclaim and send.
    //    Whenever nothing is left to do at the current time, time moves on, until every
    //    row is delivered.
    clock.advance(61.0);
    wait_until("every row delivered", || {
        let now = clock.now();
        let open = count(
            &conn,
            "SELECT COUNT(*) FROM uns_notifications WHERE status != 'DELIVERED' AND ?1 > 0",
            now,
        );
        let busy = count(
            &conn,
            "SELECT COUNT(*) FROM uns_notifications WHERE status = 'LEASED' OR (status = 'PENDING' AND next_attempt_at <= ?1)",
            now,
        );
        if open > 0 && busy == 0 {
            clock.advance(10.0);
        }
        open == 0
    });
    // 3. The slow provider answers the first sends at last: each late result is kept,
    //    and each first worker finds its lease gone.
    fakes.control.release();
    wait_until("the late results", || {
        count(
            &conn,
            "SELECT COUNT(*) FROM uns_events WHERE kind = 'LEASE_LOST' AND ?1 > 0",
            clock.now(),
        ) == held
    });
    stop.store(true, Ordering::SeqCst);
    for thread in threads {
        thread.join().expect("worker thread");
    }

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
        assert_eq!(
            statuses.get(id).map(String::as_str),
            Some("DELIVERED"),
            "{id}"
        );
    }

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
    assert_eq!(
        lease_lost, held,
        "each held send cost its lease, and nothing else did"
    );
}

/// The lines a child writes to `stderr`, as they come, read on a thread of their own.
fn lines_of(
    stderr: std::process::ChildStderr,
) -> (
    std::sync::mpsc::Receiver<String>,
    std::thread::JoinHandle<()>,
) {
    let (lines, log) = std::sync::mpsc::channel::<String>();
    let reader = std::thread::spawn(move || {
        use std::io::BufRead;
        for line in std::io::BufReader::new(stderr)
            .lines()
            .map_while(Result::ok)
        {
            let _ = lines.send(line);
        }
    });
    (log, reader)
}

/// `unsctl --db DB runtime worker` as `id`, two threads polling every 20 ms, its log
/// uncoloured on a pipe.
fn worker_process(db: &std::path::Path, id: &str) -> std::process::Command {
    let mut command = support::unsctl();
    command
        .arg("--db")
        .arg(db)
        .args(["runtime", "worker", "--concurrency", "2", "--poll-ms", "20"])
        .args(["--worker-id", id])
        .env("NO_COLOR", "1")
        .stderr(std::process::Stdio::piped());
    command
}

#[test]
fn the_worker_process_logs_a_named_outcome_and_stops_on_sigterm() {
    let dir = tempfile::tempdir().expect("dir");
    let db = dir.path().join("uns.db");
    let conn = schema::open(&db, OpenMode::Create).expect("store");
    let fakes = Fakes::start().expect("fakes");
    fakes.control.script("slow@example.com", &[Behavior::Hold]);
    for recipient in ["fast@example.com", "slow@example.com"] {
        engine::submit(
            &Db::Sqlite(&conn),
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
    let child = worker_process(&db, "logger")
        .env("UNS_SMTP_HOST", fakes.smtp.to_string())
        .spawn()
        .expect("worker");
    // Stop while the slow send is in flight: it must still record its result.
    let mut child = child;
    let stderr = child.stderr.take().expect("stderr");
    let (log, reader) = lines_of(stderr);
    wait_until("both sends with the provider", || {
        fakes.control.ledger().len() == 2
    });
    std::process::Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .expect("kill");
    let mut seen = Vec::new();
    loop {
        let line = log
            .recv_timeout(Duration::from_secs(30))
            .expect("the worker acknowledges the signal");
        let acknowledged = line.contains("signal received");
        seen.push(line);
        if acknowledged {
            break;
        }
    }
    fakes.control.release();
    let status = child.wait().expect("wait");
    let _ = reader.join();
    seen.extend(log.try_iter());
    let output = std::process::Output {
        status,
        stdout: Vec::new(),
        stderr: seen.join("\n").into_bytes(),
    };
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

/// A worker whose log reader went away (a closed pipe, a log shipper that died) still
/// stops on SIGTERM: a line it cannot write is dropped, never the thread that wrote it.
/// The library's own report of such a failure panicked, and took the signal watcher
/// with it.
#[test]
fn a_worker_whose_log_reader_went_away_still_stops_on_sigterm() {
    use std::io::BufRead;
    let dir = tempfile::tempdir().expect("dir");
    let db = dir.path().join("uns.db");
    drop(schema::open(&db, OpenMode::Create).expect("store"));
    let mut child = worker_process(&db, "unread").spawn().expect("worker");
    let stderr = child.stderr.take().expect("stderr");
    // Each thread says once that nothing is due; then the reader goes away.
    let idle = std::io::BufReader::new(stderr)
        .lines()
        .map_while(Result::ok)
        .filter(|line| line.contains("nothing due"))
        .take(2)
        .count();
    assert_eq!(idle, 2, "both threads said they were idle");
    std::process::Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .expect("kill");
    let stopped = support::wait_for(Duration::from_secs(30), || {
        matches!(child.try_wait(), Ok(Some(_)))
    });
    if !stopped {
        let _ = child.kill();
    }
    assert!(
        stopped,
        "the worker ignored SIGTERM once its log's reader had gone"
    );
    assert!(child.wait().expect("status").success());
}

/// A worker stopped the moment it says it is starting (a supervisor, a deploy that
/// changed its mind) stops as asked and exits 0: it watched for the signal before it
/// said so. It watched only from a thread started after, so such a TERM killed it by
/// the signal's default, whatever its calls in flight.
#[test]
fn a_worker_stopped_as_it_starts_stops_as_asked() {
    let dir = tempfile::tempdir().expect("dir");
    let db = dir.path().join("uns.db");
    drop(schema::open(&db, OpenMode::Create).expect("store"));
    for _ in 0..5 {
        let (status, said) =
            support::terminated_once_it_says(worker_process(&db, "brief"), "worker starting");
        assert!(status.success(), "{status}: {said}");
        // Both threads, each as it stopped (the signal's own line may come after them).
        let stopped = said
            .lines()
            .filter(|line| line.contains("worker thread stopped") && line.contains("\"stopped\""))
            .count();
        assert_eq!(stopped, 2, "{said}");
    }
}

/// Another process holds the store's write lock past the worker's busy timeout (an
/// operator's VACUUM, a copy that writes) just as the provider answers: the worker tries
/// the answer's write again until the lock is let go, rather than leave its lease to run
/// out and a reclaim to send the email again.
#[test]
fn a_providers_answer_waits_out_another_process_holding_the_store() {
    let dir = tempfile::tempdir().expect("dir");
    let db = dir.path().join("uns.db");
    let conn = schema::open(&db, OpenMode::Create).expect("store");
    let fakes = Fakes::start().expect("fakes");
    fakes.control.script("held@example.com", &[Behavior::Hold]);
    engine::submit(
        &Db::Sqlite(&conn),
        unsctl::clock::Clock::now(&SystemClock),
        &NewNotification {
            channels: [Channel::Email].into_iter().collect(),
            payload: json!({"recipient": "held@example.com"}),
            idempotency_key: None,
            max_attempts: 3,
        },
    )
    .expect("submit");
    // One thread, so every failure its log names is the answer's write; a lease no wait
    // here comes near.
    let mut child = support::Reaped(
        support::unsctl()
            .arg("--db")
            .arg(&db)
            .args(["runtime", "worker", "--concurrency", "1", "--poll-ms", "20"])
            .args(["--worker-id", "patient", "--lease-seconds", "300"])
            .env("NO_COLOR", "1")
            .env("UNS_SMTP_HOST", fakes.smtp.to_string())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("worker"),
    );
    let stderr = child.0.stderr.take().expect("stderr");
    let (log, reader) = lines_of(stderr);
    wait_until("the send to be with the provider", || {
        fakes.control.ledger().len() == 1
    });
    let locker = rusqlite::Connection::open(&db).expect("another process's connection");
    locker.execute_batch("BEGIN EXCLUSIVE").expect("the lock");
    fakes.control.release();
    let mut seen = Vec::new();
    while !seen
        .iter()
        .any(|line: &String| line.contains("could not record") || line.contains("store error"))
    {
        let line = log
            .recv_timeout(Duration::from_secs(60))
            .expect("the worker's write fails while the lock is held");
        seen.push(line);
    }
    locker.execute_batch("COMMIT").expect("the lock let go");
    // Without the answer written, the row would wait out its lease.
    wait_until(
        "the notification to be delivered before its lease runs out",
        || {
            count(
                &conn,
                "SELECT COUNT(*) FROM uns_notifications WHERE status = 'DELIVERED' AND ?1 > 0",
                1.0,
            ) == 1
        },
    );
    let _ = std::process::Command::new("kill")
        .args(["-TERM", &child.0.id().to_string()])
        .status();
    let _ = child.0.wait();
    let _ = reader.join();
    seen.extend(log.try_iter());
    let kinds = |kind: &str| {
        count(
            &conn,
            &format!("SELECT COUNT(*) FROM uns_events WHERE kind = '{kind}' AND ?1 > 0"),
            1.0,
        )
    };
    assert_eq!(kinds("ATTEMPT_STARTED"), 1, "no reclaim");
    assert_eq!(kinds("CHANNEL_ATTEMPT_RESULT"), 1, "the answer, once");
    assert_eq!(fakes.control.ledger().len(), 1, "one send");
    assert!(
        seen.iter()
            .any(|line| line.contains("could not record the provider's answer; trying again")),
        "{seen:?}"
    );
}
