//! `unsctl runtime serve` and `runtime submit` as processes: the key requirement,
//! submissions from the command line, and a graceful stop with a call in flight.

use crate::support;
use unsctl::db::Db;

use std::process::{Command, Stdio};
use std::time::Duration;
use unsctl::lab::fakes::{Behavior, Fakes};
use unsctl::runtime::schema::{self, OpenMode};

fn unsctl() -> Command {
    let mut command = support::unsctl();
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
    assert!(stderr.contains("no API key"), "{stderr}");
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
    // A keys file others may read holds every operator's key where they can take it:
    // warned of, naming its mode and the fix, never its keys. (The store's folder is
    // missing, so the server ends at once, after the warning.)
    let db = dir.path().join("missing").join("uns.db");
    let keys = dir.path().join("keys");
    std::fs::write(&keys, "alice aaaaaaaaaaaaaaaaaaaaaaaa\n").expect("keys");
    std::fs::set_permissions(
        &keys,
        <std::fs::Permissions as std::os::unix::fs::PermissionsExt>::from_mode(0o644),
    )
    .expect("mode");
    let out = unsctl()
        .arg("--db")
        .arg(&db)
        .args(["runtime", "serve", "--listen", "127.0.0.1:0"])
        .arg("--api-keys-file")
        .arg(&keys)
        .env_remove("UNS_API_KEY")
        .output()
        .expect("serve");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("WARN"), "{stderr}");
    assert!(stderr.contains("others may read it (mode 644)"), "{stderr}");
    assert!(stderr.contains("missing does not exist"), "{stderr}");
    assert!(!stderr.contains("aaaaaaaaaaaaaaaa"), "{stderr}");
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
    support::succeeded(&fast);
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
    // An unknown channel is a usage error that names the valid ones.
    let bad = submit(&["--channel", "fax"]);
    assert_eq!(
        bad.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&bad.stderr)
    );
    assert!(String::from_utf8_lossy(&bad.stderr).contains("EMAIL, SLACK and PAGERDUTY"));

    // Stop while the slow email is in flight.
    let in_flight = support::wait_for(Duration::from_secs(60), || {
        fakes
            .control
            .accepted_count(unsctl::model::Channel::Email, &slow_id)
            > 0
    });
    assert!(in_flight, "the slow email never reached the fake relay");
    Command::new("kill")
        .args(["-TERM", &server.id().to_string()])
        .status()
        .expect("kill");
    let status = server.wait().expect("wait");
    assert!(status.success(), "{status:?}");
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
    support::succeeded(&direct);
}

/// A store holding one PENDING SLACK notification, due now.
fn store_with_pending_slack() -> (tempfile::TempDir, std::path::PathBuf, String) {
    let dir = tempfile::tempdir().expect("dir");
    let db = dir.path().join("uns.db");
    let conn = schema::open(&db, OpenMode::Create).expect("store");
    let id = unsctl::runtime::engine::submit(
        &Db::Sqlite(&conn),
        unsctl::clock::Clock::now(&unsctl::clock::SystemClock),
        &unsctl::runtime::engine::NewNotification {
            channels: [unsctl::model::Channel::Slack].into_iter().collect(),
            payload: serde_json::json!({"subject": "live"}),
            idempotency_key: None,
            max_attempts: 3,
        },
    )
    .expect("submit")
    .id;
    (dir, db, id)
}

fn untouched(db: &std::path::Path, id: &str) {
    let conn = schema::open(db, OpenMode::ReadOnly).expect("store");
    let (status, attempts, events): (String, i64, i64) = conn
        .query_row(
            "SELECT status, attempts, (SELECT COUNT(*) FROM uns_events WHERE notification_id = n.id)
             FROM uns_notifications n WHERE id = ?1",
            [id],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )
        .expect("row");
    assert_eq!(
        (status.as_str(), attempts, events),
        ("PENDING", 0, 1),
        "the row was touched"
    );
}

#[test]
fn serve_on_a_busy_port_exits_before_its_worker_touches_a_row() {
    let (_dir, db, id) = store_with_pending_slack();
    let busy = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = busy.local_addr().expect("addr").port();
    let out = unsctl()
        .arg("--db")
        .arg(&db)
        .args([
            "runtime",
            "serve",
            "--listen",
            &format!("127.0.0.1:{port}"),
            "--poll-ms",
            "5",
        ])
        .env("UNS_API_KEY", support::KEY)
        .output()
        .expect("serve");
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot listen"));
    untouched(&db, &id);
}

#[test]
fn a_worker_without_the_rows_adapter_leaves_it_and_says_so() {
    let (_dir, db, id) = store_with_pending_slack();
    let port = support::free_port();
    let mut server = unsctl()
        .arg("--db")
        .arg(&db)
        .args([
            "runtime",
            "serve",
            "--listen",
            &format!("127.0.0.1:{port}"),
            "--poll-ms",
            "5",
        ])
        .env("UNS_API_KEY", support::KEY)
        .env("NO_COLOR", "1")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("serve");
    // Wait for the warning itself, read line by line as the server writes it.
    let stderr = server.stderr.take().expect("stderr");
    let (found, lines) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        use std::io::BufRead;
        for line in std::io::BufReader::new(stderr)
            .lines()
            .map_while(Result::ok)
        {
            if line.contains("no adapter") {
                let _ = found.send(line);
                return;
            }
        }
    });
    let warning = lines.recv_timeout(Duration::from_secs(20));
    let _ = Command::new("kill")
        .args(["-TERM", &server.id().to_string()])
        .status();
    let _ = server.wait();
    let warning = warning.expect("a warning about the row the worker cannot deliver");
    assert!(
        warning.contains("WARN") && warning.contains("declined=1"),
        "{warning}"
    );
    untouched(&db, &id);
}

/// A loopback server that answers every request with HTTP 400 and the request it got, as
/// a provider that echoes what it was sent in its error.
fn echoing_server() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("addr");
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            use std::io::{Read, Write};
            let mut stream = stream;
            let mut buffer = [0u8; 16 << 10];
            let n = stream.read(&mut buffer).unwrap_or(0);
            let body = String::from_utf8_lossy(&buffer[..n]).into_owned();
            let _ = write!(
                stream,
                "HTTP/1.1 400 Bad Request\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    format!("http://{addr}")
}

/// Known secrets planted in every place the runtime holds one (webhook URL, routing key,
/// SMTP password, API key) never reach the store, any command's output or the server's
/// log, though every call fails in a way that makes the libraries quote what they sent.
#[test]
fn planted_secrets_reach_no_store_output_or_log() {
    let dir = tempfile::tempdir().expect("dir");
    let db = dir.path().join("uns.db");
    let closed = support::free_port();
    let webhook_secret = "Slack-Webhook-Planted-Secret-9f2c";
    let routing_secret = "PagerDuty-Routing-Planted-Secret-77ab";
    let password_secret = "Smtp-Password-Planted-Secret-41d0";
    let key = "Api-Key-Planted-Secret-0123456789abcdef";
    let secrets = [webhook_secret, routing_secret, password_secret, key];
    let port = support::free_port();
    let url = format!("http://127.0.0.1:{port}");
    let log = dir.path().join("serve.log");
    let server = unsctl()
        .arg("--db")
        .arg(&db)
        .args(["runtime", "serve", "--listen", &format!("127.0.0.1:{port}")])
        .args(["--poll-ms", "20", "--max-attempts", "1"])
        .env("UNS_API_KEY", key)
        .env("UNS_SMTP_HOST", format!("127.0.0.1:{closed}"))
        .env("UNS_SMTP_USER", "uns")
        .env("UNS_SMTP_PASSWORD", password_secret)
        .env(
            "UNS_SLACK_WEBHOOK_URL",
            format!("http://127.0.0.1:{closed}/services/T0/B0/{webhook_secret}"),
        )
        .env(
            "UNS_PAGERDUTY_EVENTS_URL",
            format!("{}/v2/enqueue", echoing_server()),
        )
        .env("UNS_PAGERDUTY_ROUTING_KEY", routing_secret)
        .stdout(std::fs::File::create(&log).expect("log"))
        .stderr(
            std::fs::File::options()
                .append(true)
                .open(&log)
                .expect("log"),
        )
        .spawn()
        .expect("serve");
    let pid = server.id().to_string();
    support::wait_for_port(format!("127.0.0.1:{port}").parse().expect("addr"));
    let submitted = unsctl()
        .args(["--api", &url, "runtime", "submit"])
        .args([
            "--channel",
            "email",
            "--channel",
            "slack",
            "--channel",
            "pagerduty",
        ])
        .args(["--recipient", "a@example.test", "--subject", "planted"])
        .env("UNS_API_KEY", key)
        .output()
        .expect("submit");
    support::succeeded(&submitted);
    let id = String::from_utf8_lossy(&submitted.stdout)
        .trim()
        .to_string();
    // Every channel fails: refused connections for EMAIL and SLACK, a 400 for PAGERDUTY.
    let mut status = String::new();
    let dead = support::wait_for(Duration::from_secs(20), || {
        let conn = schema::open(&db, OpenMode::ReadOnly).expect("store");
        status = conn
            .query_row(
                "SELECT status FROM uns_notifications WHERE id = ?1",
                [&id],
                |r| r.get(0),
            )
            .expect("row");
        status == "DEAD"
    });
    assert!(dead, "never dead-lettered: {status}");
    let mut seen: Vec<(String, String)> = Vec::new();
    for name in ["uns.db", "uns.db-wal"] {
        let bytes = std::fs::read(dir.path().join(name)).unwrap_or_default();
        seen.push((name.into(), String::from_utf8_lossy(&bytes).into_owned()));
    }
    let errors: String = {
        let conn = schema::open(&db, OpenMode::ReadOnly).expect("store");
        let mut stmt = conn
            .prepare("SELECT payload FROM uns_events WHERE kind = 'CHANNEL_ATTEMPT_RESULT'")
            .expect("query");
        let rows = stmt.query_map([], |r| r.get::<_, String>(0)).expect("rows");
        rows.flatten().collect::<Vec<_>>().join("\n")
    };
    assert!(
        errors.contains("connect"),
        "the failures were recorded: {errors}"
    );
    assert!(
        errors.contains("HTTP 400"),
        "the echo was recorded: {errors}"
    );
    for backend in [
        vec!["--db".to_string(), db.display().to_string()],
        vec!["--api".into(), url.clone()],
    ] {
        for command in [
            vec!["inspect", id.as_str()],
            vec!["inspect", id.as_str(), "-o", "json"],
            vec!["events", "--kind", "CHANNEL_ATTEMPT_RESULT"],
            vec!["dlq", "list", "-o", "json"],
            vec!["dlq", "triage"],
            vec!["dlq", "triage", "-o", "json"],
        ] {
            let out = unsctl()
                .args(&backend)
                .args(&command)
                .env("UNS_API_KEY", key)
                .output()
                .expect("unsctl");
            let text = format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
            seen.push((format!("{} {}", backend[0], command.join(" ")), text));
        }
    }
    Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .expect("kill");
    let mut server = server;
    let _ = server.wait();
    let served = std::fs::read_to_string(&log).unwrap_or_default();
    // A dead letter is a warning in the log, for alerting that reads logs.
    assert!(
        served
            .lines()
            .any(|l| l.contains("WARN") && l.contains("dead-lettered")),
        "{served}"
    );
    seen.push(("serve log".into(), served));
    for (place, text) in &seen {
        for secret in secrets {
            assert!(!text.contains(secret), "{secret} in {place}");
        }
    }
}

/// A server stopped the moment it says it serves stops as asked, says so and exits 0:
/// it watched for the signal before it started. It watched only once it served, so such
/// a TERM killed it by the signal's default, with its worker's calls in flight.
#[test]
fn a_server_stopped_as_it_starts_stops_as_asked() {
    let dir = tempfile::tempdir().expect("dir");
    let db = dir.path().join("uns.db");
    schema::open(&db, OpenMode::Create).expect("store");
    for _ in 0..5 {
        let mut command = unsctl();
        command
            .arg("--db")
            .arg(&db)
            .args(["runtime", "serve", "--insecure-no-auth", "--listen"])
            .arg(format!("127.0.0.1:{}", support::free_port()))
            .env_remove("UNS_LOG")
            .stdout(Stdio::null());
        let (status, said) = support::terminated_once_it_says(command, "serving the UNS API");
        assert!(status.success(), "{status}: {said}");
        assert!(said.contains("stopped"), "{said}");
    }
}

/// UNS_LOG sets what reaches stderr: the server's own info lines by default, none of
/// them at `warn`, and per module with a default.
#[test]
fn uns_log_sets_what_the_server_logs() {
    let dir = tempfile::tempdir().expect("dir");
    let db = dir.path().join("uns.db");
    schema::open(&db, OpenMode::Create).expect("store");
    let logged = |level: Option<&str>| {
        let port = support::free_port();
        let mut command = unsctl();
        command
            .arg("--db")
            .arg(&db)
            .args(["runtime", "serve", "--insecure-no-auth", "--listen"])
            .arg(format!("127.0.0.1:{port}"))
            .env_remove("UNS_LOG")
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        if let Some(level) = level {
            command.env("UNS_LOG", level);
        }
        let server = command.spawn().expect("serve");
        // Stopped once it answers: what it logs before serving is written by then.
        support::wait_for_answer(format!("127.0.0.1:{port}").parse().expect("addr"));
        Command::new("kill")
            .args(["-TERM", &server.id().to_string()])
            .status()
            .expect("kill");
        let out = server.wait_with_output().expect("wait");
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let serving = "serving the UNS API";
    for (level, shown) in [
        (None, true),
        (Some("info"), true),
        (Some("warn"), false),
        (Some("unsctl::server=warn,info"), false),
        (Some("unsctl::server=info,warn"), true),
        // A level that is none: the default, as for no UNS_LOG at all.
        (Some("unsctl::server=loud"), true),
    ] {
        let stderr = logged(level);
        assert_eq!(
            stderr.contains(serving),
            shown,
            "UNS_LOG={level:?}: {stderr}"
        );
        // The line names the store it serves: one of several an operator looks after.
        if shown {
            let line = stderr
                .lines()
                .find(|l| l.contains(serving))
                .unwrap_or_default();
            assert!(line.contains(&format!("store={}", db.display())), "{line}");
        }
    }
}
