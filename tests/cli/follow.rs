//! Following a live runtime: `events --follow`, `inspect --follow`, `replay --wait` and
//! `dlq triage --watch`, over both backends, against a real server whose in-process
//! worker delivers to the provider fakes. Each run is stopped by a real SIGINT or ends by
//! itself, and what it printed is read as it streams.

use crate::support;

use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{Receiver, channel};
use std::time::{Duration, Instant};
use unsctl::lab::fakes::Behavior;
use unsctl::runtime::schema::{self, OpenMode};

const WAIT: Duration = Duration::from_secs(30);

use support::runtime::Runtime;

/// A running unsctl whose stdout lines arrive on a channel as they are printed.
struct Streaming {
    child: Child,
    lines: Receiver<String>,
    seen: Vec<String>,
    stderr: PathBuf,
}

impl Streaming {
    fn spawn(mut command: Command, dir: &Path) -> Self {
        let stderr = dir.join(format!("stderr-{}", uuid_like()));
        let mut child = command
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&stderr).expect("stderr file"))
            .spawn()
            .expect("spawn");
        let stdout = child.stdout.take().expect("stdout");
        let (send, lines) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if send.send(line).is_err() {
                    break;
                }
            }
        });
        Streaming {
            child,
            lines,
            seen: Vec::new(),
            stderr,
        }
    }

    /// Waits for a line that `wanted` accepts, keeping every line seen.
    fn expect(&mut self, what: &str, wanted: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + WAIT;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => {
                    self.seen.push(line.clone());
                    if wanted(&line) {
                        return line;
                    }
                }
                Err(_) => panic!(
                    "never printed {what}; stdout so far:\n{}\nstderr:\n{}",
                    self.seen.join("\n"),
                    self.stderr_text()
                ),
            }
        }
    }

    fn stderr_text(&self) -> String {
        std::fs::read_to_string(&self.stderr).unwrap_or_default()
    }

    /// Waits for a line on stderr (the status lines).
    fn expect_stderr(&self, text: &str) {
        let said = support::wait_for(WAIT, || self.stderr_text().contains(text));
        assert!(said, "stderr never said {text:?}: {}", self.stderr_text());
    }

    fn interrupt(&mut self) -> (Option<i32>, String) {
        let pid = self.child.id().to_string();
        let sent = Command::new("kill")
            .args(["-INT", &pid])
            .status()
            .expect("kill");
        assert!(sent.success());
        self.finish()
    }

    fn finish(&mut self) -> (Option<i32>, String) {
        let mut ended = None;
        let child = &mut self.child;
        support::wait_for(WAIT, || {
            ended = child.try_wait().expect("wait");
            ended.is_some()
        });
        let Some(status) = ended else {
            panic!("did not end: {}", self.stderr_text());
        };
        while let Ok(line) = self.lines.recv_timeout(Duration::from_millis(200)) {
            self.seen.push(line);
        }
        (status.code(), self.stderr_text())
    }
}

impl Drop for Streaming {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn uuid_like() -> String {
    use std::sync::atomic::{AtomicUsize, Ordering};
    static N: AtomicUsize = AtomicUsize::new(0);
    format!(
        "{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::SeqCst)
    )
}

#[test]
fn events_follow_streams_new_events_then_stops_on_ctrl_c_with_an_account() {
    let runtime = Runtime::start(30.0);
    let scratch = tempfile::tempdir().expect("dir");
    for backend in runtime.backends() {
        let mut follow = Streaming::spawn(
            runtime.unsctl(
                &backend,
                &[
                    "-o",
                    "json",
                    "events",
                    "--follow",
                    "--kind",
                    "delivered",
                    "--interval",
                    "0.1",
                ],
            ),
            scratch.path(),
        );
        follow.expect_stderr("following");
        let id = runtime.submit("follow me");
        let line = follow.expect("the DELIVERED event", |l| l.contains(&id));
        let event: Value = serde_json::from_str(&line).expect("one JSON event per line");
        assert_eq!(event["kind"], "DELIVERED", "{backend:?}: {event}");
        assert_eq!(event["notification_id"], id.as_str());
        let (code, stderr) = follow.interrupt();
        assert_eq!(code, Some(0), "{backend:?}: {stderr}");
        assert!(
            stderr.contains("stopped (Ctrl-C)") && stderr.contains("events shown"),
            "{stderr}"
        );
        // Only the kind asked for, and nothing twice.
        let kinds: Vec<Value> = follow
            .seen
            .iter()
            .map(|l| serde_json::from_str::<Value>(l).expect("json")["kind"].clone())
            .collect();
        assert!(kinds.iter().all(|k| k == "DELIVERED"), "{kinds:?}");
        let mut ids: Vec<String> = follow.seen.clone();
        ids.sort();
        ids.dedup();
        assert_eq!(ids.len(), follow.seen.len(), "an event printed twice");
    }
}

#[test]
fn inspect_follow_runs_until_the_notification_settles() {
    let scratch = tempfile::tempdir().expect("dir");
    // A fresh runtime per backend: a released hold stays released.
    for which in 0..2 {
        let runtime = Runtime::start(30.0);
        let backend = runtime.backends()[which].clone();
        // The provider holds the message until released: the follow starts mid-flight.
        runtime.fakes.control.set_default(Behavior::Hold);
        let id = runtime.submit("slow one");
        support::wait_until("the worker to call the provider", WAIT, || {
            runtime
                .fakes
                .control
                .ledger()
                .iter()
                .any(|a| a.notification_id.as_deref() == Some(&id))
        });
        let mut follow = Streaming::spawn(
            runtime.unsctl(
                &backend,
                &[
                    "--color",
                    "never",
                    "inspect",
                    &id,
                    "--follow",
                    "--interval",
                    "0.1",
                ],
            ),
            scratch.path(),
        );
        follow.expect_stderr("until it settles");
        assert!(
            follow.child.try_wait().expect("wait").is_none(),
            "it ended before the notification settled"
        );
        runtime.fakes.control.set_default(Behavior::Accept);
        runtime.fakes.control.release();
        let (code, stderr) = follow.finish();
        assert_eq!(code, Some(0), "{backend:?}: {stderr}");
        let text = follow.seen.join("\n");
        assert!(text.contains("Settled: DELIVERED"), "{backend:?}: {text}");
        // The result and the settlement arrived while following, after the first view.
        let first_view_end = follow
            .seen
            .iter()
            .position(|l| l.starts_with("Not in the DLQ"))
            .expect("the first view");
        let after: String = follow.seen[first_view_end..].join("\n");
        assert!(
            after.contains("CHANNEL_ATTEMPT_RESULT") && after.contains("DELIVERED"),
            "{after}"
        );
        // Settled anywhere but DELIVERED, the follow says so by its exit code too.
        runtime.fakes.control.set_default(Behavior::Reject(400));
        let refused = runtime.submit("refused one");
        let mut follow = Streaming::spawn(
            runtime.unsctl(
                &backend,
                &[
                    "--color",
                    "never",
                    "inspect",
                    &refused,
                    "--follow",
                    "--interval",
                    "0.1",
                ],
            ),
            scratch.path(),
        );
        let (code, stderr) = follow.finish();
        assert_eq!(code, Some(1), "{backend:?}: {stderr}");
        assert!(stderr.contains("not DELIVERED"), "{backend:?}: {stderr}");
        follow.seen.clear();
    }
}

#[test]
fn replay_wait_reports_each_notification_and_exits_0_only_when_all_were_delivered() {
    let runtime = Runtime::start(30.0);
    for backend in runtime.backends() {
        runtime.fakes.control.set_default(Behavior::Reject(400));
        let id = runtime.submit("refused");
        runtime.wait_dead(&id);
        // Fixed: the provider accepts now.
        runtime.fakes.control.set_default(Behavior::Accept);
        let out = runtime
            .unsctl(
                &backend,
                &[
                    "--color",
                    "never",
                    "replay",
                    &id,
                    "--reason",
                    "webhook fixed",
                    "--confirm",
                    "--yes",
                    "--wait",
                    "--interval",
                    "0.1",
                ],
            )
            .output()
            .expect("replay");
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{backend:?}: {stdout}{stderr}");
        assert!(
            stdout
                .lines()
                .any(|l| l.starts_with(&id) && l.contains("DELIVERED after")),
            "{stdout}"
        );
        assert!(stderr.contains("1 of 1 delivered"), "{stderr}");
        assert_eq!(runtime.status(&id), ("DELIVERED".to_string(), false));

        // Not fixed: the replay dead-letters again, and the wait says so with exit 1.
        runtime.fakes.control.set_default(Behavior::Reject(400));
        let id = runtime.submit("still refused");
        runtime.wait_dead(&id);
        let out = runtime
            .unsctl(
                &backend,
                &[
                    "-o",
                    "json",
                    "replay",
                    &id,
                    "--reason",
                    "webhook fixed",
                    "--confirm",
                    "--yes",
                    "--wait",
                    "--interval",
                    "0.1",
                ],
            )
            .output()
            .expect("replay");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert_eq!(out.status.code(), Some(1), "{backend:?}: {stdout}");
        let waited: Value = stdout
            .lines()
            .rev()
            .find_map(|l| serde_json::from_str(l).ok())
            .expect("the wait's JSON line");
        assert_eq!(waited["delivered"], 0, "{waited}");
        assert_eq!(waited["not_delivered"], 1, "{waited}");
        assert_eq!(waited["waited"][0]["id"], id.as_str());
        assert_eq!(waited["waited"][0]["status"], "DEAD");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains("0 of 1 delivered"), "{stderr}");
        assert!(!stderr.contains("claimed"), "a worker took it: {stderr}");
    }
    // --wait without --confirm is a usage error: a dry run has nothing to wait for.
    let out = runtime
        .unsctl(&runtime.backends()[0], &["replay", "n-x", "--wait"])
        .output()
        .expect("replay");
    assert_eq!(out.status.code(), Some(2));
}

/// With no worker running against the store, a replay is never claimed: the wait says
/// so while it waits and when it ends, which a slow provider never looks like.
#[test]
fn replay_wait_says_when_no_worker_claims_the_replay() {
    let dir = tempfile::tempdir().expect("dir");
    let (db, id) = support::store_with_replay_entry(dir.path(), "idle.db", support::wall_clock());
    let out = support::unsctl()
        .args(["--color", "never", "--db"])
        .arg(&db)
        .args([
            "replay",
            &id,
            "--reason",
            "webhook fixed",
            "--confirm",
            "--yes",
        ])
        .args(["--wait", "--interval", "0.2", "--timeout", "6"])
        .output()
        .expect("replay");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stdout}{stderr}");
    assert!(
        stdout
            .lines()
            .any(|l| l.starts_with(&id) && l.ends_with("still PENDING, never claimed by a worker")),
        "{stdout}"
    );
    assert!(
        stderr.contains("1 replay due and not claimed by any worker for 5.0 s or more: is a worker running against this store, with an adapter for the channel? (`unsctl doctor` says)"),
        "{stderr}"
    );
    assert!(
        stderr.contains("0 of 1 delivered, 1 not settled within 6.0 s; 1 of them due and never claimed by a worker"),
        "{stderr}"
    );
}

#[test]
fn apply_wait_follows_the_plans_replays_and_exits_0_only_when_all_were_delivered() {
    let runtime = Runtime::start(30.0);
    let scratch = tempfile::tempdir().expect("dir");
    for (n, backend) in runtime.backends().into_iter().enumerate() {
        runtime.fakes.control.set_default(Behavior::Reject(400));
        let ids = [
            runtime.submit(&format!("plan-a-{n}")),
            runtime.submit(&format!("plan-b-{n}")),
        ];
        for id in &ids {
            runtime.wait_dead(id);
        }
        let plan = runtime
            .unsctl(
                &backend,
                &["-o", "json", "dlq", "triage", "--branch", "replay"],
            )
            .output()
            .expect("triage");
        let path = scratch.path().join(format!("plan-{n}.json"));
        std::fs::write(&path, &plan.stdout).expect("plan");
        let planned = serde_json::from_slice::<Value>(&plan.stdout).expect("plan")["entries"]
            .as_array()
            .map_or(0, Vec::len);
        assert!(planned >= 2, "{}", String::from_utf8_lossy(&plan.stdout));
        let apply = |fixed: bool, path: &std::path::Path| {
            runtime.fakes.control.set_default(if fixed {
                Behavior::Accept
            } else {
                Behavior::Reject(400)
            });
            runtime
                .unsctl(
                    &backend,
                    &[
                        "--color",
                        "never",
                        "apply",
                        &path.display().to_string(),
                        "--confirm",
                        "--yes",
                        "--reason",
                        "webhook fixed",
                        "--wait",
                        "--interval",
                        "0.1",
                    ],
                )
                .output()
                .expect("apply")
        };
        let out = apply(true, &path);
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{backend:?}: {stdout}{stderr}");
        for id in &ids {
            assert!(
                stdout
                    .lines()
                    .any(|l| l.starts_with(id.as_str()) && l.contains("DELIVERED after")),
                "{stdout}"
            );
            assert_eq!(runtime.status(id), ("DELIVERED".to_string(), false));
        }
        assert!(
            stderr.contains(&format!("{planned} of {planned} delivered")),
            "{stderr}"
        );
        // Not fixed: the plan's replays dead-letter again, and the wait says so, exit 1.
        runtime.fakes.control.set_default(Behavior::Reject(400));
        let again = runtime.submit(&format!("plan-c-{n}"));
        runtime.wait_dead(&again);
        let plan = runtime
            .unsctl(
                &backend,
                &["-o", "json", "dlq", "triage", "--branch", "replay"],
            )
            .output()
            .expect("triage");
        let path = scratch.path().join(format!("plan-again-{n}.json"));
        std::fs::write(&path, &plan.stdout).expect("plan");
        let out = apply(false, &path);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{backend:?}: {stderr}");
        assert!(stderr.contains("0 of 1 delivered"), "{stderr}");
        assert_eq!(runtime.status(&again), ("DEAD".to_string(), true));
    }
    // --wait without --confirm is a usage error: a dry run has nothing to wait for.
    let out = runtime
        .unsctl(&runtime.backends()[0], &["apply", "plan.json", "--wait"])
        .output()
        .expect("apply");
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn dlq_triage_watch_prints_entries_entering_and_leaving() {
    let runtime = Runtime::start(30.0);
    let scratch = tempfile::tempdir().expect("dir");
    for backend in runtime.backends() {
        let mut watch = Streaming::spawn(
            runtime.unsctl(
                &backend,
                &[
                    "-o",
                    "json",
                    "dlq",
                    "triage",
                    "--watch",
                    "--interval",
                    "0.1",
                ],
            ),
            scratch.path(),
        );
        watch.expect_stderr("watching the DLQ");
        runtime.fakes.control.set_default(Behavior::Reject(400));
        let id = runtime.submit("watched");
        let entered = watch.expect("the entry entering", |l| {
            l.contains(&id) && l.contains("entered")
        });
        let entered: Value = serde_json::from_str(&entered).expect("json");
        assert_eq!(entered["branch"], "REPLAY", "{entered}");
        runtime.fakes.control.set_default(Behavior::Accept);
        let replay = runtime
            .unsctl(
                &backend,
                &[
                    "replay",
                    &id,
                    "--reason",
                    "webhook fixed",
                    "--confirm",
                    "--yes",
                ],
            )
            .output()
            .expect("replay");
        support::succeeded(&replay);
        let left = watch.expect("the entry leaving", |l| {
            l.contains(&id) && l.contains("\"left\"")
        });
        let left: Value = serde_json::from_str(&left).expect("json");
        assert_eq!(left["was"], "REPLAY", "{left}");
        let (code, stderr) = watch.interrupt();
        assert_eq!(code, Some(0), "{backend:?}: {stderr}");
        assert!(
            stderr.contains("1 entered, 1 left, 0 changed branch"),
            "{stderr}"
        );
    }
}

/// `events --follow` through an API whose server comes back on an older copy of the store:
/// it says so, and the events the copy writes next are shown, not skipped for having ids
/// below the last one seen.
#[test]
fn events_follow_notices_a_store_replaced_by_an_older_copy() {
    use unsctl::clock::{Clock, SystemClock};
    let dir = tempfile::tempdir().expect("dir");
    let db = dir.path().join("uns.db");
    let old = dir.path().join("old.db");
    {
        let conn = schema::open(&db, OpenMode::Create).expect("store");
        support::replay_entry(&conn, SystemClock.now());
    }
    std::fs::copy(&db, &old).expect("copy");
    {
        let conn = schema::open(&db, OpenMode::Create).expect("store");
        for _ in 0..3 {
            support::replay_entry(&conn, SystemClock.now());
        }
    }
    let addr: std::net::SocketAddr = format!("127.0.0.1:{}", support::free_port())
        .parse()
        .expect("addr");
    let serve = |path: &Path| {
        unsctl::server::start(unsctl::server::ServerConfig {
            listen: addr,
            ..unsctl::server::ServerConfig::api_only(
                path.to_path_buf(),
                Some(unsctl::server::Keys::single(support::KEY).expect("key")),
            )
        })
        .expect("server")
    };
    let first = serve(&db);
    let mut command = support::unsctl();
    command
        .args([
            "--api",
            &format!("http://{addr}"),
            "-o",
            "json",
            "events",
            "--follow",
            "--interval",
            "0.1",
        ])
        .env("UNS_API_KEY", support::KEY)
        .env("UNSCTL_CONFIG", dir.path().join("none.toml"))
        .stdin(Stdio::null());
    let mut follow = Streaming::spawn(command, dir.path());
    follow.expect_stderr("following");
    first.stop();
    let _second = serve(&old);
    let written = {
        let conn = schema::open(&old, OpenMode::Create).expect("store");
        support::replay_entry(&conn, SystemClock.now())
    };
    follow.expect_stderr("older copy");
    follow.expect("an event of the copy", |line| line.contains(&written));
    let (code, stderr) = follow.interrupt();
    assert_eq!(code, Some(0), "{stderr}");
}

/// A store file replaced under a follow (a restore moved into place) is not followed in
/// its old file for ever: the connection kept reading the old inode, so nothing written
/// to the new store was ever shown, and the follow looked live. It stops, saying so.
#[test]
fn a_follow_stops_when_its_file_is_replaced_rather_than_read_the_old_one_for_ever() {
    use unsctl::clock::{Clock, SystemClock};
    let dir = tempfile::tempdir().expect("dir");
    let db = dir.path().join("uns.db");
    {
        let conn = schema::open(&db, OpenMode::Create).expect("store");
        support::replay_entry(&conn, SystemClock.now());
    }
    let mut command = support::unsctl();
    command
        .arg("--db")
        .arg(&db)
        .args(["events", "--follow", "--interval", "0.05"])
        .env("UNSCTL_CONFIG", dir.path().join("none.toml"))
        .stdin(Stdio::null());
    let mut follow = Streaming::spawn(command, dir.path());
    follow.expect_stderr("following");
    let restored = dir.path().join("restored.db");
    std::fs::copy(&db, &restored).expect("copy");
    std::fs::rename(&restored, &db).expect("move the restore into place");
    let (code, stderr) = follow.finish();
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("is another file now"), "{stderr}");
}

#[test]
fn a_paced_replay_is_followed_against_its_pace_by_wait_and_by_the_watch() {
    let runtime = Runtime::start(30.0);
    let scratch = tempfile::tempdir().expect("dir");
    let backend = runtime.backends()[0].clone();
    runtime.fakes.control.set_default(Behavior::Reject(400));
    let ids: Vec<String> = (0..3)
        .map(|n| runtime.submit(&format!("paced-{n}")))
        .collect();
    for id in &ids {
        runtime.wait_dead(id);
    }
    runtime.fakes.control.set_default(Behavior::Accept);
    // The watch sees what waits its turn while the pace runs.
    let watch = Streaming::spawn(
        runtime.unsctl(&backend, &["dlq", "triage", "--watch", "--interval", "0.2"]),
        scratch.path(),
    );
    let mut replay = Streaming::spawn(
        runtime.unsctl(
            &backend,
            &[
                "replay",
                "--branch",
                "replay",
                "--spread",
                "6s",
                "--confirm",
                "--yes",
                "--reason",
                "relay back",
                "--wait",
                "--interval",
                "0.2",
            ],
        ),
        scratch.path(),
    );
    replay.expect_stderr("paced at evenly over 6");
    // Every ten looks (--interval 0.2: 2 s), where it stands against the pace; the last
    // due still ahead.
    replay.expect_stderr("settled (");
    assert!(
        replay.stderr_text().contains("the last is due in"),
        "{}",
        replay.stderr_text()
    );
    watch.expect_stderr("waiting their turn (paced replays, retries), the last due in");
    let (code, stderr) = replay.finish();
    assert_eq!(code, Some(0), "{stderr}");
    assert!(stderr.contains("3 of 3 delivered"), "{stderr}");
    for id in &ids {
        assert_eq!(runtime.status(id), ("DELIVERED".to_string(), false));
    }
}

/// Slack entries dead-lettered by three causes (HTTP 400, 404 and 403), two of each,
/// oldest cause first.
fn three_causes(runtime: &Runtime, tag: &str) -> Vec<(u16, Vec<String>)> {
    [400u16, 404, 403]
        .into_iter()
        .map(|code| {
            runtime.fakes.control.set_default(Behavior::Reject(code));
            let ids: Vec<String> = (0..2)
                .map(|n| runtime.submit(&format!("{tag}-{code}-{n}")))
                .collect();
            for id in &ids {
                runtime.wait_dead(id);
            }
            (code, ids)
        })
        .collect()
}

fn replays_of(db: &Path, id: &str) -> i64 {
    rusqlite::Connection::open(db)
        .expect("open")
        .query_row(
            "SELECT count(*) FROM uns_events WHERE notification_id = ?1 AND kind = 'REPLAYED'",
            [id],
            |r| r.get(0),
        )
        .expect("count")
}

#[test]
fn a_canary_stops_the_run_while_one_cause_still_refuses_and_carries_on_once_none_does() {
    let runtime = Runtime::start(30.0);
    for (round, backend) in runtime.backends().iter().enumerate() {
        let causes = three_causes(&runtime, &format!("canary-{round}"));
        let every: Vec<&str> = causes
            .iter()
            .flat_map(|(_, ids)| ids.iter().map(String::as_str))
            .collect();
        // Two causes are fixed; 403 still refuses every entry it had.
        runtime.fakes.control.set_default(Behavior::Accept);
        for id in &causes[2].1 {
            runtime
                .fakes
                .control
                .script(id, &[Behavior::Reject(403), Behavior::Reject(403)]);
        }
        let mut args = vec!["-o", "json", "replay"];
        args.extend(&every);
        args.extend([
            "--canary",
            "3",
            "--reason",
            "provider fixed",
            "--confirm",
            "--yes",
            "--interval",
            "0.05",
        ]);
        let out = runtime.unsctl(backend, &args).output().expect("replay");
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{backend:?}: {stdout}{stderr}");
        // One canary per cause, and nothing else replayed.
        let replayed: Vec<&str> = every
            .iter()
            .copied()
            .filter(|id| replays_of(&runtime.db, id) > 0)
            .collect();
        assert_eq!(replayed.len(), 3, "{replayed:?}\n{stderr}");
        for (code, ids) in &causes {
            let sent: Vec<&String> = ids
                .iter()
                .filter(|id| replayed.contains(&id.as_str()))
                .collect();
            assert_eq!(sent.len(), 1, "one canary for HTTP {code}: {replayed:?}");
            let (status, dead) = runtime.status(sent[0]);
            if *code == 403 {
                assert_eq!((status.as_str(), dead), ("DEAD", true), "{stderr}");
                assert!(stderr.contains(sent[0].as_str()), "{stderr}");
            } else {
                assert_eq!((status.as_str(), dead), ("DELIVERED", false), "{stderr}");
            }
        }
        for id in every.iter().filter(|id| !replayed.contains(id)) {
            assert_eq!(runtime.status(id), ("DEAD".to_string(), true));
        }
        assert!(stderr.contains("stopped after the canary"), "{stderr}");
        let documents: Vec<Value> = serde_json::Deserializer::from_str(&stdout)
            .into_iter::<Value>()
            .collect::<Result<_, _>>()
            .expect("JSON documents");
        let canary = documents
            .iter()
            .find_map(|d| d.get("canary"))
            .expect("the canary's document");
        assert_eq!(canary["delivered"], 2, "{canary}");
        assert_eq!(canary["not_delivered"], 1, "{canary}");
        let results = documents
            .iter()
            .find_map(|d| d.get("summary"))
            .expect("the results");
        assert_eq!(results["done"], 3, "{results}");
        assert_eq!(results["skipped"], 3, "{results}");

        // Fixed: a canary over what is left is delivered and the rest follows at its pace.
        runtime.fakes.control.clear_scripts();
        let left: Vec<&str> = every
            .iter()
            .copied()
            .filter(|id| runtime.status(id).1)
            .collect();
        assert_eq!(left.len(), 4);
        let mut args = vec!["--color", "never", "replay"];
        args.extend(&left);
        args.extend([
            "--canary",
            "2",
            "--rate",
            "50/s",
            "--reason",
            "provider fixed",
            "--confirm",
            "--yes",
            "--wait",
            "--interval",
            "0.05",
        ]);
        let out = runtime.unsctl(backend, &args).output().expect("replay");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{backend:?}: {stderr}");
        assert!(
            stderr.contains("Canary: 2 of 2 delivered; carrying on with the other 2 entries"),
            "{stderr}"
        );
        assert!(stderr.contains("2 of 2 delivered"), "{stderr}");
        for id in &left {
            assert_eq!(
                runtime.status(id),
                ("DELIVERED".to_string(), false),
                "{stderr}"
            );
        }
    }
}
