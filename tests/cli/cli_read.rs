//! The read path through the real binary, on a real store and through the real server
//! over the same store: both backends must print the same bytes.

use crate::support;

use std::path::{Path, PathBuf};
use std::process::Output;
use std::sync::OnceLock;
use unsctl::lab::fakes::Fakes;
use unsctl::lab::repro::{self, Scenario};
use unsctl::runtime::schema::{self, OpenMode};

fn unsctl(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut command = support::unsctl();
    command
        .args(args)
        .envs(env.iter().copied())
        .output()
        .expect("run unsctl")
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// A store the real runtime wrote with every scenario, and the API over it.
struct Shared {
    _dir: tempfile::TempDir,
    db: PathBuf,
    url: String,
    _server: unsctl::server::RunningServer,
    reports: Vec<repro::ScenarioReport>,
}

fn shared() -> &'static Shared {
    static SHARED: OnceLock<Shared> = OnceLock::new();
    SHARED.get_or_init(|| {
        let dir = tempfile::tempdir().expect("dir");
        let db = dir.path().join("uns.db");
        let fakes = Fakes::start().expect("fakes");
        let binary = PathBuf::from(env!("CARGO_BIN_EXE_unsctl"));
        let reports = repro::run(&db, &Scenario::ALL, Some(&binary), &fakes).expect("repro");
        let server = support::server(&db);
        Shared {
            url: format!("http://{}", server.addr),
            _dir: dir,
            db,
            _server: server,
            reports,
        }
    })
}

fn both(shared: &Shared, args: &[&str]) -> (Output, Output) {
    let db = shared.db.display().to_string();
    let mut direct = vec!["--db", db.as_str()];
    direct.extend_from_slice(args);
    let mut remote = vec!["--api", shared.url.as_str()];
    remote.extend_from_slice(args);
    (
        unsctl(&direct, &[]),
        unsctl(&remote, &[("UNS_API_KEY", support::KEY)]),
    )
}

#[test]
fn every_read_command_prints_the_same_json_over_sqlite_and_http() {
    let shared = shared();
    let mut commands: Vec<Vec<String>> = vec![
        vec!["dlq".into(), "triage".into()],
        vec![
            "dlq".into(),
            "triage".into(),
            "--branch".into(),
            "verify".into(),
        ],
        vec!["dlq".into(), "list".into()],
        vec![
            "events".into(),
            "--kind".into(),
            "LEASE_LOST".into(),
            "--kind".into(),
            "CHANNEL_ATTEMPT_RESULT".into(),
            "--limit".into(),
            "25".into(),
        ],
        vec![
            "events".into(),
            "--kind".into(),
            "DEAD_LETTERED".into(),
            "--limit".into(),
            "3".into(),
        ],
    ];
    for report in &shared.reports {
        commands.push(vec!["inspect".into(), report.notification_id.clone()]);
    }
    for command in commands {
        let mut args: Vec<&str> = command.iter().map(String::as_str).collect();
        args.extend(["-o", "json"]);
        let (direct, remote) = both(shared, &args);
        assert!(direct.status.success(), "{args:?}: {}", stderr(&direct));
        assert_eq!(
            direct.status.code(),
            remote.status.code(),
            "{args:?}: {}",
            stderr(&remote)
        );
        assert_eq!(
            stdout(&direct),
            stdout(&remote),
            "{args:?} differs between --db and --api"
        );
        let parsed: serde_json::Value = serde_json::from_slice(&direct.stdout).expect("valid JSON");
        assert!(parsed.is_object());
    }
}

#[test]
fn triage_json_follows_the_contract_and_matches_each_scenario() {
    let shared = shared();
    let (direct, _) = both(shared, &["dlq", "triage", "-o", "json"]);
    let plan: serde_json::Value = serde_json::from_slice(&direct.stdout).expect("json");
    let entries = plan["entries"].as_array().expect("entries");
    let ids: Vec<&str> = entries.iter().filter_map(|e| e["id"].as_str()).collect();
    let mut sorted = ids.clone();
    sorted.sort();
    assert_eq!(ids, sorted, "entries are ordered by id");
    for entry in entries {
        for key in [
            "id",
            "branch",
            "lease_lost",
            "status",
            "cycle",
            "attempts",
            "error_message",
            "last_event_id",
            "channels",
            "next_step",
        ] {
            assert!(entry.get(key).is_some(), "{key} missing: {entry}");
        }
        for channel in entry["channels"].as_array().expect("channels") {
            for key in ["channel", "state", "evidence", "message_ids"] {
                assert!(channel.get(key).is_some(), "{key} missing: {channel}");
            }
        }
    }
    for report in &shared.reports {
        let entry = entries
            .iter()
            .find(|e| e["id"] == report.notification_id.as_str());
        match report.scenario.expected_branch() {
            Some(branch) => {
                let entry = entry.unwrap_or_else(|| panic!("{:?} not in the DLQ", report.scenario));
                assert_eq!(entry["branch"], branch.as_str(), "{:?}", report.scenario);
            }
            None => assert!(
                entry.is_none(),
                "{:?} should not be in the DLQ",
                report.scenario
            ),
        }
    }
    assert_eq!(
        plan["summary"],
        serde_json::json!({"RESOLVE": 1, "VERIFY": 2, "REPLAY": 2})
    );
}

#[test]
fn inspect_shows_the_timeline_and_the_verdict_with_evidence() {
    let shared = shared();
    let report = shared
        .reports
        .iter()
        .find(|r| r.scenario == Scenario::LeaseLostDelivered)
        .expect("ran");
    let (direct, remote) = both(shared, &["inspect", &report.notification_id]);
    let text = stdout(&direct);
    assert_eq!(text, stdout(&remote));
    for expected in [
        "CHANNEL_ATTEMPT_STARTED",
        "CHANNEL_ATTEMPT_RESULT",
        "LEASE_LOST",
        "Triage: RESOLVE",
        "DELIVERED",
        "unsctl dlq resolve",
    ] {
        assert!(text.contains(expected), "{expected} missing:\n{text}");
    }
    // The evidence the verdict rests on is marked: the start and the late result.
    assert!(
        text.lines()
            .any(|l| l.starts_with('*') && l.contains("CHANNEL_ATTEMPT_RESULT")),
        "the evidence is marked:\n{text}"
    );
    // Timing is shown: the late result fell after the lease ran out.
    assert!(text.contains("after it ran out"), "{text}");
    assert!(!text.contains('\u{1b}'), "no colour off a terminal");
}

#[test]
fn a_read_never_writes_the_store() {
    let shared = shared();
    let read = |path: &Path| std::fs::read(path).unwrap_or_default();
    let wal = PathBuf::from(format!("{}-wal", shared.db.display()));
    let db = shared.db.display().to_string();
    // The main file and its WAL, byte for byte.
    let (before, before_wal) = (read(&shared.db), read(&wal));
    for args in [
        vec!["dlq", "triage"],
        vec!["dlq", "list"],
        vec!["events"],
        vec!["dlq", "triage", "-o", "json"],
    ] {
        let mut full = vec!["--db", db.as_str()];
        full.extend(args);
        assert!(unsctl(&full, &[]).status.success());
    }
    assert!(
        read(&shared.db) == before && read(&wal) == before_wal,
        "a read command changed the store"
    );
}

/// A number no run can use (NaN, infinite, zero where a count is needed, more than the
/// machine holds) is a usage error naming its flag: never a panic, an allocation that
/// cannot succeed, a silent clamp, or a check that can no longer fire.
#[test]
fn numbers_no_run_can_use_are_refused_by_their_flag() {
    let shared = shared();
    let db = shared.db.display().to_string();
    let dir = tempfile::tempdir().expect("dir");
    let copy = dir.path().join("copy.db");
    std::fs::copy(&shared.db, &copy).expect("copy");
    let copy = copy.display().to_string();
    for (args, flag) in [
        (vec!["sweep", "--schedules", "999999999999"], "--schedules"),
        (vec!["sweep", "--schedules", "0"], "--schedules"),
        (vec!["sweep", "--concurrency", "100000"], "--concurrency"),
        (
            vec!["--db", &db, "doctor", "--stall-seconds", "NaN"],
            "--stall-seconds",
        ),
        (
            vec!["--db", &db, "doctor", "--lease-seconds", "inf"],
            "--lease-seconds",
        ),
        (
            vec!["--db", &db, "doctor", "--interval-minutes", "0"],
            "--interval-minutes",
        ),
        (
            vec![
                "--db",
                &copy,
                "runtime",
                "worker",
                "--min-io-timeout",
                "NaN",
            ],
            "--min-io-timeout",
        ),
        (
            vec!["--db", &copy, "runtime", "worker", "--backoff-base", "NaN"],
            "--backoff-base",
        ),
    ]
    .into_iter()
    // Quiet after nothing: a lease lost a second ago would be an incident over.
    .chain(
        [("doctor", "0"), ("pulse", "0s"), ("reconcile", "0.5")].map(|(command, quiet)| {
            (
                vec!["--db", &db, command, "--quiet-after", quiet],
                "--quiet-after",
            )
        }),
    ) {
        let out = unsctl(&args, &[]);
        let said = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {said}");
        assert!(said.contains(flag), "{args:?}: {said}");
        assert!(!said.contains("panicked"), "{args:?}: {said}");
    }
}

/// A STARTTLS setting unsctl cannot read (a typo of "required") is a usage error, in
/// `doctor` as in the worker: never read as "never", which would send in clear text.
#[test]
fn a_starttls_setting_that_cannot_be_read_is_refused() {
    let shared = shared();
    let db = shared.db.display().to_string();
    // The worker is refused before it opens a store: it is given one of its own all
    // the same, so a worker that did start would not write to the shared one.
    let dir = tempfile::tempdir().expect("dir");
    let own = dir.path().join("own.db").display().to_string();
    for (args, env) in [
        (
            vec!["--db", &db, "doctor", "--smtp-starttls", "requierd"],
            vec![],
        ),
        (
            vec!["--db", &db, "doctor"],
            vec![("UNS_SMTP_STARTTLS", "yes")],
        ),
        (
            vec![
                "--db",
                &own,
                "runtime",
                "worker",
                "--smtp-starttls",
                "requierd",
            ],
            vec![],
        ),
    ] {
        let out = unsctl(&args, &env);
        let said = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{args:?} {env:?}: {said}");
        assert!(
            said.contains("expected never, opportunistic or required"),
            "{args:?} {env:?}: {said}"
        );
    }
}

#[test]
fn errors_have_distinct_exit_codes_and_clear_messages() {
    let shared = shared();
    let db = shared.db.display().to_string();
    let dir = tempfile::tempdir().expect("dir");

    let missing = unsctl(&["--db", &db, "inspect", "n-nope"], &[]);
    assert_eq!(missing.status.code(), Some(3), "{}", stderr(&missing));
    let missing = unsctl(
        &["--api", &shared.url, "inspect", "n-nope"],
        &[("UNS_API_KEY", support::KEY)],
    );
    assert_eq!(missing.status.code(), Some(3), "{}", stderr(&missing));

    let text_file = dir.path().join("notes.txt");
    std::fs::write(&text_file, "not a database at all, just words\n".repeat(50)).expect("write");
    let foreign = dir.path().join("other.db");
    rusqlite::Connection::open(&foreign)
        .expect("db")
        .execute_batch("CREATE TABLE t (x)")
        .expect("table");
    let newer = dir.path().join("newer.db");
    drop(schema::open(&newer, OpenMode::Create).expect("store"));
    rusqlite::Connection::open(&newer)
        .expect("db")
        .pragma_update(None, "user_version", 9)
        .expect("version");
    for (path, needle) in [
        (&text_file, "not a SQLite database"),
        (&foreign, "not a UNS store"),
        (&newer, "newer than this unsctl"),
    ] {
        let before = std::fs::read(path).expect("read");
        let out = unsctl(&["--db", &path.display().to_string(), "dlq", "triage"], &[]);
        assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
        assert!(stderr(&out).contains(needle), "{}", stderr(&out));
        assert!(!stderr(&out).contains("panicked"));
        assert_eq!(
            std::fs::read(path).expect("read"),
            before,
            "the file was changed"
        );
    }

    let port = support::free_port();
    let unreachable = format!("http://127.0.0.1:{port}");
    let out = unsctl(&["--api", &unreachable, "dlq", "triage"], &[]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains(&format!(
            "cannot connect to 127.0.0.1:{port}: connection refused"
        )),
        "{}",
        stderr(&out)
    );
    assert!(
        !stderr(&out).contains("error sending request"),
        "{}",
        stderr(&out)
    );

    // A wrong base path is not a missing notification.
    let wrong = format!("{}/uns", shared.url);
    let out = unsctl(
        &["--api", &wrong, "inspect", "n-nope"],
        &[("UNS_API_KEY", support::KEY)],
    );
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains(&format!("no UNS API at {wrong}")),
        "{}",
        stderr(&out)
    );
    // https to a plain-HTTP port says so.
    let https = shared.url.replace("http://", "https://");
    let out = unsctl(
        &["--api", &https, "dlq", "list"],
        &[("UNS_API_KEY", support::KEY)],
    );
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("use http:// instead of https://"),
        "{}",
        stderr(&out)
    );
    // Credentials in the URL are ignored, and never printed.
    let with_userinfo = wrong.replace("http://", "http://ops:hunter2@");
    let out = unsctl(
        &["--api", &with_userinfo, "dlq", "list"],
        &[("UNS_API_KEY", support::KEY)],
    );
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        !stderr(&out).contains("hunter2") && !stderr(&out).contains("ops:"),
        "{}",
        stderr(&out)
    );
    // A read that failed prints no table, not even an empty header.
    assert!(
        out.stdout.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );

    let out = unsctl(
        &["--api", &shared.url, "dlq", "triage"],
        &[("UNS_API_KEY", "wrong-secret-value")],
    );
    assert_eq!(out.status.code(), Some(6), "{}", stderr(&out));
    assert!(stderr(&out).contains("UNS_API_KEY"));
    assert!(
        !stderr(&out).contains("wrong-secret-value"),
        "the key is never printed"
    );

    let (not_uns, garbage) = (garbage_server(false), garbage_server(true));
    let out = unsctl(&["--api", &not_uns, "dlq", "triage"], &[]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(stderr(&out).contains("no UNS API at"), "{}", stderr(&out));
    let out = unsctl(&["--api", &garbage, "dlq", "triage"], &[]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("malformed answer"),
        "{}",
        stderr(&out)
    );
    // A server that answers without end is read up to a bound, not until memory runs
    // out or the request times out.
    let out = unsctl(&["--api", &endless_server(), "dlq", "triage"], &[]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(stderr(&out).contains("no UNS API at"), "{}", stderr(&out));
    // A URL that cannot be an API is a usage error, whatever the command.
    for url in ["not a url", "ftp://127.0.0.1/uns", "http://[::1"] {
        let out = unsctl(&["--api", url, "dlq", "list"], &[]);
        assert_eq!(out.status.code(), Some(2), "{url}: {}", stderr(&out));
        assert!(stderr(&out).contains("invalid API URL"), "{}", stderr(&out));
    }
    // One that hands back a cursor it gave before would be paged forever.
    let out = unsctl(&["--api", &looping_server(), "dlq", "triage"], &[]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("page cursor it had given before"),
        "{}",
        stderr(&out)
    );

    let out = unsctl(&["--db", &db, "--api", &shared.url, "dlq", "list"], &[]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("--db and --api"));
    let out = unsctl(&["dlq", "list"], &[]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("no store named"));
    let out = unsctl(&["dlq", "list"], &[("UNS_DB_FILE", &db)]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "UNS_DB_FILE alone names the store"
    );
    let out = unsctl(&["--db", &db, "events", "--kind", "NOT_A_KIND"], &[]);
    assert_eq!(out.status.code(), Some(2));
}

/// The health document of a UNS API.
const HEALTHY: &str = r#"{"service":"uns-runtime","status":"ok"}"#;

/// A loopback server that answers each request with 200 and the extra header lines and
/// body that `answer` picks for the request's first bytes.
fn canned_server(answer: fn(&str) -> (&'static str, &'static str)) -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("addr");
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            use std::io::{Read, Write};
            let mut stream = stream;
            let mut buffer = [0u8; 4096];
            let n = stream.read(&mut buffer).unwrap_or(0);
            let (headers, body) = answer(&String::from_utf8_lossy(&buffer[..n]));
            let _ = write!(
                stream,
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n{headers}content-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    format!("http://{addr}")
}

/// Answers every request with a body that is not JSON; when `healthy`, it answers
/// `/healthz` as a UNS API would.
fn garbage_server(healthy: bool) -> String {
    if healthy {
        canned_server(|request| match request.starts_with("GET /healthz") {
            true => ("", HEALTHY),
            false => ("", "hello there"),
        })
    } else {
        canned_server(|_| ("", "hello there"))
    }
}

/// A UNS health answer, then DLQ pages that are empty and always point to the same next.
fn looping_server() -> String {
    canned_server(|request| match request.starts_with("GET /healthz") {
        true => ("", HEALTHY),
        false => (
            "uns-next-cursor: again\r\n",
            r#"{"entries": [], "next_cursor": "again"}"#,
        ),
    })
}

/// Answers every request with a body that never ends.
fn endless_server() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("addr");
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            std::thread::spawn(move || {
                use std::io::{Read, Write};
                let mut stream = stream;
                let mut buffer = [0u8; 4096];
                let _ = stream.read(&mut buffer);
                let _ = stream.write_all(
                    b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nconnection: close\r\n\r\n",
                );
                let chunk = [b' '; 65536];
                while stream.write_all(&chunk).is_ok() {}
            });
        }
    });
    format!("http://{addr}")
}

#[test]
fn an_empty_dlq_says_there_is_nothing_to_do() {
    let dir = tempfile::tempdir().expect("dir");
    let db = dir.path().join("empty.db");
    drop(schema::open(&db, OpenMode::Create).expect("store"));
    let db = db.display().to_string();
    for args in [vec!["dlq", "triage"], vec!["dlq", "list"]] {
        let mut full = vec!["--db", db.as_str()];
        full.extend(args);
        let out = unsctl(&full, &[]);
        assert_eq!(out.status.code(), Some(0));
        assert!(stderr(&out).contains("nothing to do"), "{}", stderr(&out));
    }
    let out = unsctl(&["--db", &db, "dlq", "triage", "-o", "json"], &[]);
    let plan: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(plan["entries"], serde_json::json!([]));
    assert_eq!(plan["summary"]["VERIFY"], 0);
}

#[test]
fn colour_follows_the_flag_and_no_color() {
    let shared = shared();
    let db = shared.db.display().to_string();
    let always = unsctl(&["--db", &db, "--color", "always", "dlq", "triage"], &[]);
    assert!(stdout(&always).contains('\u{1b}'), "--color always colours");
    let never = unsctl(&["--db", &db, "--color", "never", "dlq", "triage"], &[]);
    assert!(!stdout(&never).contains('\u{1b}'));
    let auto = unsctl(&["--db", &db, "dlq", "triage"], &[("NO_COLOR", "1")]);
    assert!(!stdout(&auto).contains('\u{1b}'));
    let json = unsctl(
        &[
            "--db", &db, "--color", "always", "dlq", "triage", "-o", "json",
        ],
        &[],
    );
    assert!(
        !stdout(&json).contains('\u{1b}'),
        "JSON never carries colour"
    );
}

/// A loopback server that answers 503 to the first request of each method, then a real
/// answer; it counts what it saw.
fn flaky_server() -> (String, std::sync::Arc<std::sync::Mutex<Vec<String>>>) {
    use std::io::{BufRead, BufReader, Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("addr");
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let log = seen.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let mut reader = BufReader::new(stream.try_clone().expect("clone"));
            let mut request_line = String::new();
            let _ = reader.read_line(&mut request_line);
            let mut length = 0;
            let mut line = String::new();
            while reader.read_line(&mut line).map(|n| n > 2).unwrap_or(false) {
                if let Some(value) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                    length = value.trim().parse().unwrap_or(0);
                }
                line.clear();
            }
            let mut body = vec![0; length];
            let _ = reader.read_exact(&mut body);
            let method = request_line
                .split_whitespace()
                .next()
                .unwrap_or("")
                .to_string();
            let health = request_line.starts_with("GET /healthz");
            let first = !health && {
                let mut seen = log.lock().expect("log");
                seen.push(method.clone());
                seen.iter().filter(|m| **m == method).count() == 1
            };
            let path = request_line
                .split_whitespace()
                .nth(1)
                .unwrap_or("")
                .to_string();
            let (status, body) = if health {
                ("200 OK", HEALTHY.to_string())
            } else if method == "GET" && path.starts_with("/api/v1/runtime/notifications/") {
                ("200 OK", notification_doc())
            } else if first {
                (
                    "503 Service Unavailable",
                    "{\"error\":\"warming up\"}".to_string(),
                )
            } else {
                (
                    "200 OK",
                    "{\"entries\":[],\"next_cursor\":null}".to_string(),
                )
            };
            let mut stream = stream;
            let _ = write!(
                stream,
                "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    (format!("http://{addr}"), seen)
}

/// A REPLAY entry: SLACK refused at events 4 and 5.
fn notification_doc() -> String {
    serde_json::json!({
        "id": "n-1", "status": "DEAD", "dead_letter": true, "attempts": 1, "cycle": 1,
        "cycle_attempts": 1, "max_attempts": 1, "channels": ["SLACK"], "payload": {},
        "idempotency_key": null, "lease_token": null, "lease_until": null,
        "next_attempt_at": 0.0, "error_message": "rejected", "created_at": 0.0, "updated_at": 0.0,
        "events": [
            {"id": 4, "at": 1.0, "kind": "CHANNEL_ATTEMPT_STARTED", "payload": {"cycle": 1, "attempt": 1, "channel": "SLACK", "lease_token": "t"}},
            {"id": 5, "at": 2.0, "kind": "CHANNEL_ATTEMPT_RESULT", "payload": {"cycle": 1, "attempt": 1, "channel": "SLACK", "lease_token": "t", "success": false, "metadata": {"provider_outcome": "REJECTED"}}}
        ]
    })
    .to_string()
}

#[test]
fn gets_are_retried_and_mutations_are_not() {
    let (url, seen) = flaky_server();
    let out = unsctl(&["--api", &url, "dlq", "triage"], &[]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stderr(&out).contains("nothing to do"));
    assert_eq!(
        seen.lock()
            .expect("log")
            .iter()
            .filter(|m| *m == "GET")
            .count(),
        2,
        "one retry"
    );

    let plan = tempfile::NamedTempFile::new().expect("plan");
    let entry = serde_json::json!({"entries": [{
        "id": "n-1", "branch": "REPLAY", "lease_lost": false, "status": "DEAD", "cycle": 1,
        "attempts": 1, "error_message": null, "last_event_id": 5,
        "channels": [{"channel": "SLACK", "state": "FAILED", "evidence": [4, 5], "message_ids": []}],
        "next_step": "unsctl replay n-1 --confirm", "action": "replay", "notes": []}]});
    std::fs::write(plan.path(), entry.to_string()).expect("write");
    let out = unsctl(
        &[
            "--api",
            &url,
            "apply",
            &plan.path().display().to_string(),
            "--confirm",
            "--yes",
        ],
        &[],
    );
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(stdout(&out).contains("failed"), "{}", stdout(&out));
    assert_eq!(
        seen.lock()
            .expect("log")
            .iter()
            .filter(|m| *m == "POST")
            .count(),
        1,
        "a mutation is never retried"
    );
}

/// A UNS health answer, then a 307 for every other request: to `to` when given (another
/// origin), else to the same path with `/moved` in front (the same origin).
fn redirecting_server(to: Option<String>) -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("addr");
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            use std::io::{Read, Write};
            let mut stream = stream;
            let mut buffer = [0u8; 4096];
            let n = stream.read(&mut buffer).unwrap_or(0);
            let request = String::from_utf8_lossy(&buffer[..n]).into_owned();
            let path = request.split_whitespace().nth(1).unwrap_or("/").to_string();
            let reply = if request.starts_with("GET /healthz") {
                format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{HEALTHY}",
                    HEALTHY.len()
                )
            } else if path.starts_with("/moved") {
                let body = r#"{"entries": [], "next_cursor": null}"#;
                format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                )
            } else {
                let location = match &to {
                    Some(other) => format!("{other}{path}"),
                    None => format!("/moved{path}"),
                };
                format!(
                    "HTTP/1.1 307 Temporary Redirect\r\nlocation: {location}\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
                )
            };
            let _ = stream.write_all(reply.as_bytes());
        }
    });
    format!("http://{addr}")
}

/// A redirect to another origin is never followed, so another store's entries are never
/// shown as this one's; one within the origin is followed and named; a key in the URL is
/// refused before any request.
#[test]
fn redirects_and_keys_in_the_url_are_refused_or_named() {
    let other = redirecting_server(None);
    let cross = redirecting_server(Some(other.clone()));
    let out = unsctl(&["--api", &cross, "dlq", "list"], &[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_ne!(out.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("redirected to another origin"), "{stderr}");
    assert!(out.stdout.is_empty());
    let same = redirecting_server(None);
    let out = unsctl(&["--api", &same, "dlq", "list"], &[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("redirected to /moved/api/v1/dlq on the same origin"),
        "{stderr}"
    );
    for url in [
        format!("{same}/?api_key=planted-key-0123"),
        format!("{same}/#planted-key-0123"),
    ] {
        let out = unsctl(&["--api", &url, "dlq", "list"], &[]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{stderr}");
        assert!(stderr.contains("query or fragment"), "{stderr}");
        assert!(!stderr.contains("planted-key"), "{stderr}");
    }
}

/// An error says what failed, then why, then what to do: `error:`, `Caused by:`, `hint:`,
/// each on its own line, with the exit code of its kind.
#[test]
fn an_error_names_its_cause_under_it() {
    let dir = tempfile::tempdir().expect("dir");
    let db = dir.path().join("uns.db");
    unsctl::runtime::schema::open(&db, OpenMode::Create).expect("store");
    let missing = dir.path().join("no-such-plan.json");
    let out = unsctl(
        &[
            "--db",
            &db.display().to_string(),
            "apply",
            &missing.display().to_string(),
        ],
        &[],
    );
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let lines: Vec<String> = stderr(&out).lines().map(str::to_string).collect();
    assert_eq!(
        lines.first().map(String::as_str),
        Some(format!("error: cannot open the plan {}", missing.display()).as_str()),
        "{lines:?}"
    );
    assert!(
        lines
            .get(1)
            .is_some_and(|l| l.starts_with("  Caused by: No such file or directory")),
        "{lines:?}"
    );
    let garbled = dir.path().join("garbled.json");
    std::fs::write(&garbled, "{\"entries\": 7}").expect("write");
    let out = unsctl(
        &[
            "--db",
            &db.display().to_string(),
            "apply",
            &garbled.display().to_string(),
        ],
        &[],
    );
    let text = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{text}");
    let error = text.find("error: ").expect("error line");
    let cause = text.find("  Caused by: invalid type").expect("cause line");
    let hint = text.find("hint: write one with").expect("hint line");
    assert!(error < cause && cause < hint, "{text}");
}

/// A hostile API's answer to a submission: its id and status carry terminal escapes
/// (a clipboard write, a screen clear). Neither reaches the terminal raw.
#[test]
fn a_submissions_answer_never_reaches_the_terminal_raw() {
    let url = canned_server(|request| match request.starts_with("GET /healthz") {
        true => ("", HEALTHY),
        false => (
            "",
            r#"{"id": "n-1\u001b]52;c;cm0gLXJmIH4=\u0007", "created": true, "status": "PENDING\u001b[2J"}"#,
        ),
    });
    let out = unsctl(
        &[
            "--api",
            &url,
            "runtime",
            "submit",
            "--channel",
            "slack",
            "--body",
            "hello",
        ],
        &[("UNS_API_KEY", "test-key-0123456789")],
    );
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(stdout.starts_with("n-1"), "{stdout}");
    for (name, stream) in [("stdout", &stdout), ("stderr", &stderr)] {
        assert!(
            !stream.bytes().any(|b| b == 0x1b || b == 0x07),
            "{name} has a raw control byte: {stream:?}"
        );
    }
}
