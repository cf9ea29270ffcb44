//! `unsctl doctor` against a healthy setup, a slow relay, two workers on one store, no
//! worker at all, a store after lost leases, a dead API and a wrong API key.

use crate::support;
use unsctl::db::Db;

use serde_json::{Value, json};
use std::process::{Output, Stdio};
use std::time::Duration;
use support::SmtpSink;
use unsctl::clock::{Clock, SystemClock};
use unsctl::lab::fakes::{Behavior, Fakes};
use unsctl::model::Channel;
use unsctl::runtime::engine::{self, NewNotification};
use unsctl::runtime::schema::{self, OpenMode};

fn doctor(
    db: &std::path::Path,
    url: &str,
    key: &str,
    smtp: &str,
    extra: &[&str],
) -> (Output, Vec<Value>) {
    let out = support::unsctl()
        .arg("--db")
        .arg(db)
        .args(["--api", url, "-o", "json", "doctor"])
        .args(extra)
        .env("UNS_API_KEY", key)
        .env("UNS_SMTP_HOST", smtp)
        .stdin(Stdio::null())
        .output()
        .expect("doctor");
    let checks: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap_or_default();
    (out, checks)
}

fn level<'a>(checks: &'a [Value], name: &str) -> &'a str {
    checks
        .iter()
        .find(|c| c["name"] == name)
        .and_then(|c| c["level"].as_str())
        .unwrap_or("missing")
}

fn store_with_one_delivery() -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().expect("dir");
    let db = dir.path().join("uns.db");
    let conn = schema::open(&db, OpenMode::Create).expect("store");
    support::play(
        &conn,
        SystemClock.now(),
        &[Channel::Slack],
        &[engine::DeliveryResult::accepted(Some("k".into()))],
        3,
    );
    (dir, db)
}

#[test]
fn a_healthy_setup_passes_every_check() {
    let (_dir, db) = store_with_one_delivery();
    let server = support::server(&db);
    let sink = SmtpSink::start(&[]);
    let (out, checks) = doctor(
        &db,
        &format!("http://{}", server.addr),
        support::KEY,
        &sink.addr.to_string(),
        &[],
    );
    assert_eq!(out.status.code(), Some(0), "{checks:#?}");
    for name in [
        "store",
        "api",
        "api key",
        "smtp relay",
        "worker",
        "backlog",
        "dlq",
        "provider calls",
        "lease losses",
    ] {
        assert_eq!(level(&checks, name), "ok", "{name}: {checks:#?}");
    }
}

#[test]
fn a_relay_is_judged_against_the_lease_in_use() {
    let (_dir, db) = store_with_one_delivery();
    let server = support::server(&db);
    let sink = SmtpSink::start(&["-W", "EHLO:2"]);
    let (out, checks) = doctor(
        &db,
        &format!("http://{}", server.addr),
        support::KEY,
        &sink.addr.to_string(),
        &["--lease-seconds", "10"],
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "a warning is not a failure: {checks:#?}"
    );
    // One lease speaks: the one the store's events show in use (60 s here), with the
    // one given named beside it; 2 s of 60 is no warning.
    assert_eq!(level(&checks, "smtp relay"), "ok", "{checks:#?}");
    let detail = checks
        .iter()
        .find(|c| c["name"] == "smtp relay")
        .map(|c| c["detail"].to_string())
        .unwrap_or_default();
    assert!(detail.contains("% of the 1m lease"), "{detail}");
    assert!(detail.contains("--lease-seconds says 10 s"), "{detail}");
    let calls = checks
        .iter()
        .find(|c| c["name"] == "provider calls")
        .map(|c| c["detail"].to_string())
        .unwrap_or_default();
    assert!(
        !calls.contains("10 s lease"),
        "the same lease everywhere: {calls}"
    );
}

#[test]
fn two_worker_processes_on_one_store_are_flagged() {
    let dir = tempfile::tempdir().expect("dir");
    let db = dir.path().join("uns.db");
    let conn = schema::open(&db, OpenMode::Create).expect("store");
    let fakes = Fakes::start().expect("fakes");
    fakes
        .control
        .set_default(Behavior::DelayAccept(Duration::from_millis(150)));
    for n in 0..8 {
        engine::submit(
            &Db::Sqlite(&conn),
            SystemClock.now(),
            &NewNotification {
                channels: [Channel::Slack].into_iter().collect(),
                payload: json!({"subject": format!("n{n}")}),
                idempotency_key: None,
                max_attempts: 3,
            },
        )
        .expect("submit");
    }
    let workers: Vec<_> = ["proc-a", "proc-b"]
        .iter()
        .map(|id| {
            support::unsctl()
                .arg("--db")
                .arg(&db)
                .args([
                    "runtime",
                    "worker",
                    "--concurrency",
                    "1",
                    "--poll-ms",
                    "10",
                    "--worker-id",
                    id,
                ])
                .env("UNS_SLACK_WEBHOOK_URL", fakes.slack_url())
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("worker")
        })
        .collect();
    let busy = support::wait_for(Duration::from_secs(60), || {
        fakes.control.ledger().len() >= 8
    });
    for mut worker in workers {
        let _ = worker.kill();
        let _ = worker.wait();
    }
    assert!(
        busy,
        "the workers sent {} in a minute",
        fakes.control.ledger().len()
    );
    let server = support::server(&db);
    let sink = SmtpSink::start(&[]);
    let (out, checks) = doctor(
        &db,
        &format!("http://{}", server.addr),
        support::KEY,
        &sink.addr.to_string(),
        &[],
    );
    assert_eq!(out.status.code(), Some(0), "{checks:#?}");
    assert_eq!(level(&checks, "worker"), "warn", "{checks:#?}");
    let detail = checks
        .iter()
        .find(|c| c["name"] == "worker")
        .map(|c| c["detail"].to_string())
        .unwrap_or_default();
    assert!(
        detail.contains("proc-a") && detail.contains("proc-b"),
        "{detail}"
    );
}

#[test]
fn a_wrong_api_key_fails_with_exit_1() {
    let (_dir, db) = store_with_one_delivery();
    let server = support::server(&db);
    let sink = SmtpSink::start(&[]);
    let (out, checks) = doctor(
        &db,
        &format!("http://{}", server.addr),
        "not-the-key",
        &sink.addr.to_string(),
        &[],
    );
    assert_eq!(out.status.code(), Some(1), "{checks:#?}");
    assert_eq!(level(&checks, "api"), "ok");
    assert_eq!(level(&checks, "api key"), "fail");
    assert!(
        !String::from_utf8_lossy(&out.stdout).contains("not-the-key"),
        "the key is never printed"
    );
    let human = support::unsctl()
        .args(["--api", &format!("http://{}", server.addr), "doctor"])
        .env("UNS_API_KEY", "not-the-key")
        .env("UNS_SMTP_HOST", sink.addr.to_string())
        .output()
        .expect("doctor");
    let text = String::from_utf8_lossy(&human.stdout);
    assert!(
        text.lines()
            .any(|l| l.starts_with("fail") && l.contains("api key")),
        "{text}"
    );
    assert!(text.contains("hint: UNS_API_KEY"), "{text}");
}

/// `text` with each "(… ago)" taken out: how long ago moves between two readings.
fn without_ages(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(open) = rest.find(" (") {
        let Some(close) = rest[open..].find(')') else {
            break;
        };
        let inside = &rest[open..open + close + 1];
        out.push_str(&rest[..open]);
        if !inside.ends_with(" ago)") {
            out.push_str(inside);
        }
        rest = &rest[open + close + 1..];
    }
    out.push_str(rest);
    out
}

fn detail<'a>(checks: &'a [Value], name: &str) -> &'a str {
    field(checks, name, "detail")
}

fn field<'a>(checks: &'a [Value], name: &str, field: &str) -> &'a str {
    checks
        .iter()
        .find(|c| c["name"] == name)
        .and_then(|c| c[field].as_str())
        .unwrap_or("missing")
}

/// An EMAIL notification submitted at `at` and never claimed: due since then.
fn submit_due(conn: &rusqlite::Connection, at: f64) -> String {
    engine::submit(
        &Db::Sqlite(conn),
        at,
        &NewNotification {
            channels: [Channel::Email].into_iter().collect(),
            payload: json!({"to": "a@b.c", "subject": "due"}),
            idempotency_key: None,
            max_attempts: 3,
        },
    )
    .expect("submit")
    .id
}

fn doctor_on(backend: &[&str], extra_env: &[(&str, &str)]) -> (Output, Vec<Value>) {
    let mut command = support::unsctl();
    command
        .args(backend)
        .args(["-o", "json", "doctor"])
        .stdin(Stdio::null());
    for (name, value) in extra_env {
        command.env(name, value);
    }
    let out = command.output().expect("doctor");
    let checks: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap_or_default();
    (out, checks)
}

#[test]
fn rows_due_with_no_worker_claiming_fail_the_worker_check_on_both_backends() {
    let dir = tempfile::tempdir().expect("dir");
    let db = dir.path().join("uns.db");
    let conn = schema::open(&db, OpenMode::Create).expect("store");
    // Claimed once, long ago; then two rows became due and nobody took them.
    support::play(
        &conn,
        SystemClock.now() - 3600.0,
        &[Channel::Slack],
        &[engine::DeliveryResult::accepted(Some("k".into()))],
        3,
    );
    for n in 0..2 {
        submit_due(&conn, SystemClock.now() - 600.0 + f64::from(n));
    }
    let server = support::server(&db);
    let db_arg = db.to_string_lossy().to_string();
    let url = format!("http://{}", server.addr);
    for backend in [vec!["--db", db_arg.as_str()], vec!["--api", url.as_str()]] {
        let (out, checks) = doctor_on(&backend, &[("UNS_API_KEY", support::KEY)]);
        assert_eq!(out.status.code(), Some(1), "{backend:?}: {checks:#?}");
        assert_eq!(level(&checks, "worker"), "fail", "{checks:#?}");
        assert!(
            detail(&checks, "worker").starts_with("2 rows due, none claimed: last claim 1h"),
            "{checks:#?}"
        );
        assert_eq!(level(&checks, "backlog"), "warn", "{checks:#?}");
        assert!(
            detail(&checks, "backlog").contains("the oldest waiting 10m"),
            "{checks:#?}"
        );
        // The claim an hour ago is outside the 15 min window: no live worker is claimed.
        assert!(
            detail(&checks, "lease losses").contains("0 LEASE_LOST and 0 reclaims in 0 claims")
        );
    }
}

/// A worker runs, yet claims nothing: the rows owe a channel it has no adapter for. The
/// store cannot tell that from no worker at all; the server that runs it can, and says so.
#[test]
fn a_server_whose_worker_has_no_adapter_for_the_rows_due_says_so() {
    let dir = tempfile::tempdir().expect("dir");
    let db = dir.path().join("uns.db");
    let conn = schema::open(&db, OpenMode::Create).expect("store");
    let id = submit_due(&conn, SystemClock.now() - 600.0);
    let mut config = unsctl::server::ServerConfig::api_only(
        db.clone(),
        Some(unsctl::server::Keys::single(support::KEY).expect("key")),
    );
    config.worker = Some((
        unsctl::runtime::worker::WorkerConfig::default(),
        unsctl::runtime::worker::Adapters::new(),
    ));
    let server = unsctl::server::start(config).expect("server starts");
    let url = format!("http://{}", server.addr);
    let (out, checks) = doctor_on(&["--api", &url], &[("UNS_API_KEY", support::KEY)]);
    assert_eq!(out.status.code(), Some(1), "{checks:#?}");
    assert_eq!(level(&checks, "worker"), "fail", "{checks:#?}");
    assert!(
        detail(&checks, "worker")
            .ends_with("no claim ever recorded; this server's worker runs, with no adapter at all"),
        "{checks:#?}"
    );
    assert!(
        field(&checks, "worker", "hint").contains("UNS_SMTP_HOST"),
        "{checks:#?}"
    );
    // Read from the store, the same rows say nothing of a worker.
    let db_arg = db.to_string_lossy().to_string();
    let (_, checks) = doctor_on(&["--db", &db_arg], &[]);
    assert_eq!(
        detail(&checks, "worker"),
        "1 row due, none claimed: no claim ever recorded",
        "{checks:#?}"
    );
    // The worker left the row as it was.
    assert_eq!(support::status(&db, &id), ("PENDING".to_string(), false));
}

#[test]
fn after_lost_leases_the_dlq_calls_and_losses_are_reported_the_same_on_both_backends() {
    let dir = tempfile::tempdir().expect("dir");
    let db = dir.path().join("uns.db");
    let repro = support::unsctl()
        .arg("--db")
        .arg(&db)
        .args(["repro", "lease-lost-delivered"])
        .stdin(Stdio::null())
        .output()
        .expect("repro");
    support::succeeded(&repro);
    let server = support::server(&db);
    let db_arg = db.to_string_lossy().to_string();
    let url = format!("http://{}", server.addr);
    let mut seen = Vec::new();
    for backend in [vec!["--db", db_arg.as_str()], vec!["--api", url.as_str()]] {
        let (out, checks) = doctor_on(&backend, &[("UNS_API_KEY", support::KEY)]);
        // No UNS_SMTP_HOST here, as in the runbook's environment: doctor measures the
        // relay the runtime's newest email went to, the repro's fake, gone since: a fail,
        // and the only one.
        assert_eq!(out.status.code(), Some(1), "{checks:#?}");
        assert_eq!(level(&checks, "smtp relay"), "fail", "{checks:#?}");
        assert!(
            detail(&checks, "smtp relay")
                .contains("(the relay the newest email attempt used; greeted only)"),
            "{checks:#?}"
        );
        let failing: Vec<&Value> = checks.iter().filter(|c| c["level"] == "fail").collect();
        assert_eq!(failing.len(), 1, "{checks:#?}");
        assert_eq!(level(&checks, "dlq"), "warn", "{checks:#?}");
        assert!(detail(&checks, "dlq").starts_with("1 entry, the oldest there"));
        assert_eq!(level(&checks, "provider calls"), "warn", "{checks:#?}");
        // The relay answered 1.5 s into a 1 s lease.
        let calls = detail(&checks, "provider calls");
        assert!(
            calls.starts_with("EMAIL p99 1.") && calls.contains("of the 1.0 s lease"),
            "{calls}"
        );
        assert_eq!(level(&checks, "lease losses"), "warn", "{checks:#?}");
        assert!(
            detail(&checks, "lease losses")
                .starts_with("still happening: 1 LEASE_LOST and 0 reclaims in 1 claim")
                && detail(&checks, "lease losses").contains("last lease loss 20")
        );
        // Who got a duplicate is reconcile's question: the hint says so.
        let hint = checks
            .iter()
            .find(|c| c["name"] == "lease losses")
            .and_then(|c| c["hint"].as_str())
            .unwrap_or_default();
        assert!(hint.contains("unsctl reconcile --since 1h"), "{hint}");
        assert_eq!(level(&checks, "worker"), "ok", "{checks:#?}");
        seen.push(
            ["dlq", "provider calls", "lease losses", "backlog"].map(|name| {
                (
                    level(&checks, name).to_string(),
                    without_ages(detail(&checks, name)),
                )
            }),
        );
    }
    assert_eq!(
        seen[0][1..],
        seen[1][1..],
        "both backends read the same numbers"
    );
}

#[test]
fn a_dead_or_misplaced_api_is_explained_by_its_cause() {
    let port = support::free_port();
    let (out, checks) = doctor_on(&["--api", &format!("http://127.0.0.1:{port}")], &[]);
    assert_eq!(out.status.code(), Some(1), "{checks:#?}");
    assert_eq!(level(&checks, "api"), "fail");
    let text = detail(&checks, "api");
    assert!(text.contains("connection refused"), "{text}");
    assert!(!text.contains("error sending request"), "{text}");
    for name in ["worker", "dlq", "lease losses"] {
        assert_eq!(level(&checks, name), "skip", "{checks:#?}");
    }
    // Something answers, but not the runtime's API at that path.
    let (_dir, db) = store_with_one_delivery();
    let server = support::server(&db);
    let (out, checks) = doctor_on(
        &["--api", &format!("http://{}/uns", server.addr)],
        &[("UNS_API_KEY", support::KEY)],
    );
    assert_eq!(out.status.code(), Some(1), "{checks:#?}");
    let text = detail(&checks, "api");
    assert!(
        !text.contains("error sending request") && !text.contains("not found"),
        "{text}"
    );
}

/// A relay a store or an API names is data: doctor greets it to time it, never logs in
/// to it, and says so, however the operator's own login is set. The relay the operator
/// named gets the login the worker would use.
#[test]
fn a_relay_named_by_data_gets_no_credentials() {
    use unsctl::runtime::adapters::Adapter;
    use unsctl::runtime::adapters::email::{EmailAdapter, EmailConfig};
    let stand_in = support::RecordingRelay::start();
    let dir = tempfile::tempdir().expect("dir");
    let db = dir.path().join("uns.db");
    let conn = schema::open(&db, OpenMode::Create).expect("store");
    engine::submit(
        &Db::Sqlite(&conn),
        SystemClock.now(),
        &NewNotification {
            channels: [Channel::Email].into_iter().collect(),
            payload: json!({"recipient": "a@example.test"}),
            idempotency_key: None,
            max_attempts: 1,
        },
    )
    .expect("submit");
    let engine::ClaimOutcome::Claimed(lease) =
        engine::claim(&Db::Sqlite(&conn), SystemClock.now(), "doctor-test", 60.0).expect("claim")
    else {
        panic!("nothing due");
    };
    // The attempt records the relay it went to: here, the stand-in.
    let adapter = EmailAdapter::new(EmailConfig::new(stand_in.addr.to_string()));
    engine::start_channel(
        &Db::Sqlite(&conn),
        SystemClock.now(),
        &lease,
        Channel::Email,
        &adapter.started(),
    )
    .expect("start");
    let server = support::server(&db);
    let login = [
        ("UNS_SMTP_USER", "ops"),
        ("UNS_SMTP_PASSWORD", "hunter2-secret"),
    ];
    for backend in [
        vec!["--db".to_string(), db.display().to_string()],
        vec!["--api".to_string(), format!("http://{}", server.addr)],
    ] {
        let flags: Vec<&str> = backend.iter().map(String::as_str).collect();
        let mut env = login.to_vec();
        env.push(("UNS_API_KEY", support::KEY));
        let (_, checks) = doctor_on(&flags, &env);
        let said = detail(&checks, "smtp relay");
        assert!(
            said.contains("greeted only, never logged in to") && said.contains("UNS_SMTP_HOST"),
            "{flags:?}: {checks:#?}"
        );
    }
    let heard = stand_in.heard();
    assert!(
        heard.iter().any(|l| l.starts_with("EHLO")),
        "it was greeted: {heard:?}"
    );
    assert!(
        !heard
            .iter()
            .any(|l| l.to_ascii_uppercase().starts_with("AUTH")),
        "no credentials went to a relay data named: {heard:?}"
    );
    // Named by the operator, it is measured as the worker would use it, login included.
    let mut env = login.to_vec();
    let addr = stand_in.addr.to_string();
    env.push(("UNS_SMTP_HOST", addr.as_str()));
    let (_, checks) = doctor_on(&["--db", &db.display().to_string()], &env);
    assert!(
        detail(&checks, "smtp relay").contains("login"),
        "{checks:#?}"
    );
    assert!(
        stand_in
            .heard()
            .iter()
            .any(|l| l.to_ascii_uppercase().starts_with("AUTH")),
        "the operator's own relay gets the login"
    );
    // Across a network (127.1 is not written as this machine) and without STARTTLS, the
    // login is not sent, and doctor says why.
    let logins = |relay: &support::RecordingRelay| {
        relay
            .heard()
            .iter()
            .filter(|l| l.to_ascii_uppercase().starts_with("AUTH"))
            .count()
    };
    let before = logins(&stand_in);
    let mut env = login.to_vec();
    let remote = format!("127.1:{}", stand_in.addr.port());
    env.push(("UNS_SMTP_HOST", remote.as_str()));
    let (_, checks) = doctor_on(&["--db", &db.display().to_string()], &env);
    assert!(
        detail(&checks, "smtp relay").contains("no login in clear text"),
        "{checks:#?}"
    );
    assert_eq!(logins(&stand_in), before, "{:?}", stand_in.heard());
}

/// A relay slow only at the final dot passes a greeting in a millisecond: with a sink
/// address configured, doctor sends a real probe message and times it to the final dot's
/// reply; without one it says it timed the greeting only.
#[test]
fn a_relay_slow_at_the_final_dot_is_caught_by_a_probe_message() {
    let (_dir, db) = store_with_one_delivery();
    let server = support::server(&db);
    let sink = SmtpSink::start(&["-W", ".:2"]);
    let url = format!("http://{}", server.addr);
    let smtp = sink.addr.to_string();
    let (_, checks) = doctor(&db, &url, support::KEY, &smtp, &[]);
    assert_eq!(level(&checks, "smtp relay"), "ok", "{checks:#?}");
    let said = checks
        .iter()
        .find(|c| c["name"] == "smtp relay")
        .map(|c| c["detail"].to_string())
        .unwrap_or_default();
    assert!(said.contains("the greeting only"), "{said}");
    assert!(
        sink.received().is_empty(),
        "no message without a sink address"
    );

    let (_, checks) = doctor(
        &db,
        &url,
        support::KEY,
        &smtp,
        &["--probe-to", "sink@example.test", "--lease-seconds", "10"],
    );
    let relay = checks
        .iter()
        .find(|c| c["name"] == "smtp relay")
        .cloned()
        .expect("relay check");
    let said = relay["detail"].as_str().unwrap_or_default();
    assert!(said.contains("a probe message to the final dot"), "{said}");
    let ms: f64 = said
        .split(" took ")
        .nth(1)
        .and_then(|rest| rest.split(" ms").next())
        .and_then(|n| n.parse().ok())
        .expect("the time taken");
    assert!(ms >= 2000.0, "the final dot's wait is measured: {said}");
    // 2 s of the 1 m lease the store's events show: measured, and named.
    assert!(said.contains("% of the 1m lease"), "{said}");
    let received = sink.received();
    assert_eq!(received.len(), 1, "{received:?}");
    assert!(
        received[0].contains("unsctl doctor: relay probe"),
        "{}",
        received[0]
    );
}
