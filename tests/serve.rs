//! `unsctl runtime serve` and `runtime submit` as processes: the key requirement,
//! submissions from the command line, and a graceful stop with a call in flight.

mod support;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use unsctl::runtime::fakes::{Behavior, Fakes};
use unsctl::runtime::schema::{self, OpenMode};

fn unsctl() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_unsctl"));
    for name in [
        "UNS_DB_FILE",
        "UNS_BASE_URL",
        "UNS_API_KEY",
        "UNS_SMTP_HOST",
    ] {
        command.env_remove(name);
    }
    command.stdin(Stdio::null());
    command
}

#[test]
fn serve_refuses_to_start_without_a_key() {
    let dir = tempfile::tempdir().expect("dir");
    let db = dir.path().join("uns.db");
    let out = unsctl()
        .arg("--db")
        .arg(&db)
        .args(["runtime", "serve", "--listen", "127.0.0.1:0"])
        .output()
        .expect("serve");
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("UNS_API_KEY is not set"), "{stderr}");
    let out = unsctl()
        .arg("--db")
        .arg(&db)
        .args([
            "runtime",
            "serve",
            "--listen",
            "0.0.0.0:0",
            "--insecure-no-auth",
        ])
        .output()
        .expect("serve");
    assert_eq!(
        out.status.code(),
        Some(2),
        "no open server on a public address"
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("loopback"));
}

#[test]
fn serve_delivers_submissions_and_stops_gracefully_on_sigterm() {
    let dir = tempfile::tempdir().expect("dir");
    let db = dir.path().join("uns.db");
    let fakes = Fakes::start().expect("fakes");
    fakes.control.script(
        "slow@example.com",
        &[Behavior::DelayAccept(Duration::from_millis(1000))],
    );
    let port = support::free_port();
    let url = format!("http://127.0.0.1:{port}");
    let mut server = unsctl()
        .arg("--db")
        .arg(&db)
        .args([
            "runtime",
            "serve",
            "--listen",
            &format!("127.0.0.1:{port}"),
            "--poll-ms",
            "20",
        ])
        .env("UNS_API_KEY", support::KEY)
        .env("UNS_SMTP_HOST", fakes.smtp.to_string())
        .env("UNS_SLACK_WEBHOOK_URL", fakes.slack_url())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("serve");
    support::wait_for_port(format!("127.0.0.1:{port}").parse().expect("addr"));

    // Through the API, from the command line.
    let submit = |args: &[&str]| {
        unsctl()
            .args(["--api", &url, "runtime", "submit"])
            .args(args)
            .env("UNS_API_KEY", support::KEY)
            .output()
            .expect("submit")
    };
    let fast = submit(&["--channel", "slack", "--subject", "fast", "--body", "hello"]);
    assert!(
        fast.status.success(),
        "{}",
        String::from_utf8_lossy(&fast.stderr)
    );
    let slow = submit(&[
        "--channel",
        "email",
        "--recipient",
        "slow@example.com",
        "--subject",
        "slow",
        "--idempotency-key",
        "k-1",
    ]);
    let slow_id = String::from_utf8_lossy(&slow.stdout).trim().to_string();
    assert!(slow_id.starts_with("n-"), "{slow_id}");
    let again = submit(&[
        "--channel",
        "email",
        "--recipient",
        "slow@example.com",
        "--idempotency-key",
        "k-1",
    ]);
    assert_eq!(
        String::from_utf8_lossy(&again.stdout).trim(),
        slow_id,
        "the key coalesces"
    );
    let bad = submit(&["--channel", "fax"]);
    assert_eq!(
        bad.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&bad.stderr)
    );

    // Stop while the slow email is in flight.
    let start = Instant::now();
    while fakes
        .control
        .accepted_count(unsctl::model::Channel::Email, &slow_id)
        == 0
        && start.elapsed() < Duration::from_secs(10)
    {
        std::thread::sleep(Duration::from_millis(20));
    }
    Command::new("kill")
        .args(["-TERM", &server.id().to_string()])
        .status()
        .expect("kill");
    let stopping = Instant::now();
    let status = server.wait().expect("wait");
    assert!(status.success(), "{status:?}");
    assert!(stopping.elapsed() < Duration::from_secs(10));
    let mut log = String::new();
    if let Some(mut stderr) = server.stderr.take() {
        use std::io::Read;
        let _ = stderr.read_to_string(&mut log);
    }
    assert!(log.contains("shutting down"), "{log}");
    assert!(!log.contains(support::KEY), "the key is never logged");

    let conn = schema::open(&db, OpenMode::ReadOnly).expect("store");
    let statuses: Vec<(String, String)> = {
        let mut stmt = conn
            .prepare("SELECT id, status FROM uns_notifications ORDER BY id")
            .expect("prepare");
        stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
            .expect("query")
            .map(|r| r.expect("row"))
            .collect()
    };
    assert_eq!(statuses.len(), 2);
    assert!(
        statuses.iter().all(|(_, s)| s == "DELIVERED"),
        "the in-flight call finished and settled: {statuses:?}"
    );

    // Directly into a store, without a server.
    let direct = unsctl()
        .arg("--db")
        .arg(&db)
        .args([
            "runtime",
            "submit",
            "--channel",
            "pagerduty",
            "--subject",
            "db",
        ])
        .output()
        .expect("submit");
    assert!(
        direct.status.success(),
        "{}",
        String::from_utf8_lossy(&direct.stderr)
    );
}
