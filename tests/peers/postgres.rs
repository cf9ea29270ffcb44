//! The runtime and every command on a real PostgreSQL (DESIGN §12), against a private
//! cluster of the distribution's: the same bytes as over the SQLite file and over the
//! API, fenced leases across processes whose workers pause and whose clocks disagree,
//! the lab's remediation sweep, and bad input refused with its exit code and nothing
//! written.

use crate::support::{self, postgres};

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use unsctl::db::Place;
use unsctl::lab::fakes::{Fakes, PAGERDUTY_TOKEN, SLACK_BOT_ID, SLACK_CHANNEL, SLACK_TOKEN};
use unsctl::lab::repro::{self, Scenario};
use unsctl::server::{Keys, RunningServer, ServerConfig};

#[path = "../../benches/support.rs"]
mod generated;

/// One way of reaching a store: the file, the database, or the API over either.
#[derive(Clone)]
enum Way {
    File(PathBuf),
    Database(String),
    Api(String),
}

impl Way {
    fn key(&self) -> String {
        match self {
            Way::File(path) => path.display().to_string(),
            Way::Database(url) | Way::Api(url) => url.clone(),
        }
    }

    fn name(&self) -> String {
        match self {
            Way::File(_) => "sqlite".into(),
            Way::Database(_) => "postgres".into(),
            Way::Api(url) => format!("api {url}"),
        }
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut command = support::unsctl();
        match self {
            Way::File(path) => {
                command.arg("--db").arg(path);
            }
            Way::Database(url) => {
                command
                    .args(["--db", url])
                    .env("PGPASSWORD", postgres::PASSWORD);
            }
            Way::Api(url) => {
                command
                    .args(["--api", url])
                    .env("UNS_API_KEY", support::KEY);
            }
        }
        command.args(args);
        command
    }
}

/// `unsctl runtime submit` of one email, for a test that expects it refused.
const SUBMIT_ONE: &[&str] = &[
    "runtime",
    "submit",
    "--channel",
    "email",
    "--recipient",
    "a@example.com",
    "--subject",
    "x",
];

/// The lease of the tests' `runtime serve` processes: long beside a call to a fake that
/// answers at once on a loaded machine, short enough that a held call's reclaim comes
/// soon. Only a call a test holds on purpose outlives it.
const LEASE: &str = "5";

/// An API server over `place` that asks `fakes`' records, as `runtime serve` with
/// their sources would.
fn serve(place: Place, fakes: Option<&Fakes>) -> RunningServer {
    let mut config = ServerConfig::api_only(place, Some(Keys::single(support::KEY).expect("key")));
    if let Some(fakes) = fakes {
        config.verify = repro::fake_sources(fakes, 1.0);
    }
    unsctl::server::start(config).expect("the API server starts")
}

fn run(command: &mut Command) -> Output {
    command.output().expect("unsctl runs")
}

/// Runs `command` with nothing on its stdin, and stops it if it is still running a minute
/// on, far past any limit a test gives it: whether it stopped by itself, and its output.
fn run_or_stop(command: &mut Command) -> (bool, Output) {
    let mut child = command
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("unsctl");
    let stopped = support::wait_for(std::time::Duration::from_secs(60), || {
        matches!(child.try_wait(), Ok(Some(_)))
    });
    if !stopped {
        let _ = child.kill();
    }
    (stopped, child.wait_with_output().expect("output"))
}

fn succeeded(out: &Output) {
    support::succeeded(out);
}

/// The store's identity names where it lives, so a plan made on the file is never
/// applied to its copy in the database: the one thing that differs, by design. Each
/// way's own (as its plan names it) reads as `[STORE]`.
fn without_store_identity(bytes: &[u8], identity: &str) -> Vec<u8> {
    if identity.is_empty() {
        return bytes.to_vec();
    }
    String::from_utf8_lossy(bytes)
        .replace(identity, "[STORE]")
        .into_bytes()
}

/// Each way's store identity, as its plan names it (asked once per way).
fn identities(ways: &[Way]) -> Vec<String> {
    static KNOWN: std::sync::Mutex<Vec<(String, String)>> = std::sync::Mutex::new(Vec::new());
    ways.iter()
        .map(|way| {
            let key = way.key();
            if let Some((_, known)) = KNOWN.lock().expect("known").iter().find(|(k, _)| *k == key) {
                return known.clone();
            }
            let out = run(&mut way.command(&["dlq", "triage", "-o", "json"]));
            let plan: Value = serde_json::from_slice(&out.stdout).expect("a plan");
            let identity = plan["store"].as_str().unwrap_or_default().to_string();
            assert_eq!(identity.len(), 16, "{}: {plan}", way.name());
            KNOWN.lock().expect("known").push((key, identity.clone()));
            identity
        })
        .collect()
}

/// Runs `args` every way and holds each output to the file's, byte for byte (the plan's
/// store identity aside); returns the file's output.
fn same_everywhere(ways: &[Way], args: &[&str], env: &[(&str, String)]) -> Vec<u8> {
    let stores = identities(ways);
    let mut first: Option<(String, Output, &str)> = None;
    for (way, store) in ways.iter().zip(&stores) {
        let mut command = way.command(args);
        for (name, value) in env {
            command.env(name, value);
        }
        let out = run(&mut command);
        match &first {
            None => {
                assert!(
                    out.status.code().is_some_and(|code| code == 0 || code == 4),
                    "{} {args:?} failed: {}",
                    way.name(),
                    String::from_utf8_lossy(&out.stderr)
                );
                first = Some((way.name(), out, store));
            }
            Some((name, expected, expected_store)) => {
                assert_eq!(
                    out.status.code(),
                    expected.status.code(),
                    "{args:?}: {} and {name} end differently: {}",
                    way.name(),
                    String::from_utf8_lossy(&out.stderr)
                );
                let (got, want) = (
                    without_store_identity(&out.stdout, store),
                    without_store_identity(&expected.stdout, expected_store),
                );
                if got != want {
                    let got = String::from_utf8_lossy(&got);
                    let want = String::from_utf8_lossy(&want);
                    let line = got
                        .lines()
                        .zip(want.lines())
                        .position(|(a, b)| a != b)
                        .unwrap_or(0);
                    panic!(
                        "{args:?}: {} prints other bytes than {name}, first at line {}:\n  {}\n  {}",
                        way.name(),
                        line + 1,
                        want.lines().nth(line).unwrap_or_default(),
                        got.lines().nth(line).unwrap_or_default(),
                    );
                }
            }
        }
    }
    first.map(|(_, out, _)| out.stdout).unwrap_or_default()
}

/// The store at `file` copied into a database of its own, and the four ways of reading
/// it: the file, the database, and an API server over each (asking `fakes`' records
/// when given). The servers serve while the returned handles live.
fn four_ways(
    file: &std::path::Path,
    fakes: Option<&Fakes>,
) -> ([Way; 4], postgres::Database, [RunningServer; 2]) {
    let database = postgres::cluster().database_from(file);
    let on_file = serve(Place::File(file.to_path_buf()), fakes);
    let on_database = serve(Place::Postgres(database.target()), fakes);
    let ways = [
        Way::File(file.to_path_buf()),
        Way::Database(database.url.clone()),
        Way::Api(format!("http://{}", on_file.addr)),
        Way::Api(format!("http://{}", on_database.addr)),
    ];
    (ways, database, [on_file, on_database])
}

/// An instant as the commands take it.
fn rfc3339(at: f64) -> String {
    jiff::Timestamp::from_microsecond((at * 1e6) as i64)
        .expect("time")
        .to_string()
}

fn provider_env(fakes: &Fakes) -> Vec<(&'static str, String)> {
    vec![
        ("UNS_PAGERDUTY_API_URL", fakes.pagerduty_api_url()),
        ("UNS_PAGERDUTY_API_TOKEN", PAGERDUTY_TOKEN.into()),
        ("UNS_SLACK_API_URL", fakes.slack_api_url()),
        ("UNS_SLACK_BOT_TOKEN", SLACK_TOKEN.into()),
        ("UNS_SLACK_CHANNEL", SLACK_CHANNEL.into()),
        ("UNS_SLACK_BOT_ID", SLACK_BOT_ID.into()),
    ]
}

#[test]
fn every_runbook_case_reads_the_same_bytes_from_the_file_the_database_and_either_api() {
    let dir = tempfile::tempdir().expect("dir");
    let file = dir.path().join("uns.db");
    let fakes = Fakes::start().expect("fakes");
    let binary = PathBuf::from(env!("CARGO_BIN_EXE_unsctl"));
    repro::run(&file, &Scenario::ALL, Some(&binary), &fakes).expect("repro all");
    fakes.control.mark_log();
    let (ways, _database, _servers) = four_ways(&file, Some(&fakes));
    // A closed window (its end already past), so no way reads it as still filling.
    let until = rfc3339(support::wall_clock());
    let since = rfc3339(support::wall_clock() - 3600.0);
    let window = ["--since", since.as_str(), "--until", until.as_str()];
    let env = provider_env(&fakes);
    let log = fakes.maillog.display().to_string();
    let records = [
        "--relay-log",
        log.as_str(),
        "--relay-log-zone",
        "UTC",
        "--clock-skew",
        "1s",
    ];

    let plan = same_everywhere(&ways, &["dlq", "triage", "-o", "json"], &[]);
    let plan: Value = serde_json::from_slice(&plan).expect("plan");
    let ids: Vec<String> = plan["entries"]
        .as_array()
        .expect("entries")
        .iter()
        .filter_map(|e| e["id"].as_str().map(str::to_string))
        .collect();
    assert!(ids.len() >= 5, "every case dead-lettered: {ids:?}");
    same_everywhere(&ways, &["dlq", "triage"], &[]);
    same_everywhere(&ways, &["dlq", "triage", "-o", "wide"], &[]);
    same_everywhere(&ways, &["events", "--limit", "200", "-o", "json"], &[]);
    same_everywhere(&ways, &["events", "--kind", "LEASE_LOST"], &[]);
    for id in &ids {
        same_everywhere(&ways, &["inspect", id], &[]);
        same_everywhere(&ways, &["inspect", id, "-o", "json"], &[]);
    }
    let mut verify = vec!["verify", "-o", "json"];
    verify.extend(records);
    let answers = same_everywhere(&ways, &verify, &env);
    let answers: Value = serde_json::from_slice(&answers).expect("answers");
    assert!(
        answers.to_string().contains("DELIVERED"),
        "verify found answers: {answers}"
    );
    for args in [
        vec!["reconcile", "-o", "json"],
        vec!["reconcile"],
        vec!["pulse", "-o", "json"],
        vec!["pulse"],
        vec!["report", "-o", "markdown"],
        vec!["report", "-o", "json"],
        vec!["report", "-o", "html"],
    ] {
        let mut args = args.clone();
        args.extend(window);
        if args[0] != "pulse" {
            args.extend(records);
        }
        same_everywhere(&ways, &args, &env);
    }
    // The relay log alone: the file and the database search it for the window's starts
    // before a history is read, each API after a first walk over the histories; all four
    // print the same bytes, the relay log's own word among them.
    let mut alone = vec!["reconcile", "-o", "json"];
    alone.extend(window);
    alone.extend(records);
    let alone: Value = serde_json::from_slice(&same_everywhere(&ways, &alone, &[])).expect("json");
    let by_log = alone["notifications"]
        .as_array()
        .expect("notifications")
        .iter()
        .flat_map(|n| n["evidence"].as_array().cloned().unwrap_or_default())
        .filter(|e| e["sources"].to_string().contains("relay-log"))
        .count();
    assert!(by_log >= 1, "{alone:#}");
    // The database's copy is the file's history, unchanged: every event id and time.
    let dump = |way: &Way| {
        let out = run(&mut way.command(&["events", "--limit", "1000", "-o", "json"]));
        serde_json::from_slice::<Value>(&out.stdout).expect("events")["events"]
            .as_array()
            .map(|events| {
                events
                    .iter()
                    .map(|e| (e["id"].as_i64(), e["at"].as_f64(), e["kind"].clone()))
                    .collect::<Vec<_>>()
            })
            .unwrap_or_default()
    };
    assert_eq!(dump(&ways[0]), dump(&ways[1]));
}

#[test]
fn ten_thousand_notifications_read_the_same_bytes_on_both_engines_and_their_apis() {
    let dir = tempfile::tempdir().expect("dir");
    let file = dir.path().join("uns.db");
    // Dead an hour ago and before: every attempt's window is past, whenever it is read.
    let hour_ago = support::wall_clock() - 3600.0;
    generated::generate_until(&file, 10_000, &[0, 1, 2], hour_ago)
        .expect("a store of 10,000 notifications");
    // A relay log that saw some of the post-data timeouts' messages and not others.
    let conn = rusqlite::Connection::open(&file).expect("store");
    let mut wanted = Vec::new();
    {
        let mut rows = conn
            .prepare(
                "SELECT n.id, MIN(e.at) FROM uns_notifications n JOIN uns_events e ON e.notification_id = n.id
                 WHERE e.kind = 'CHANNEL_ATTEMPT_STARTED' AND n.error_message LIKE '%no reply after%'
                 GROUP BY n.id ORDER BY 2",
            )
            .expect("query");
        let found = rows
            .query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, f64>(1)?)))
            .expect("rows");
        for (n, row) in found.enumerate() {
            let (id, at) = row.expect("row");
            if n % 3 != 2 {
                wanted.push((at as i64 + 1, format!("<{id}.1.1@uns.local>"), n % 3 == 0));
            }
        }
    }
    drop(conn);
    let log = dir.path().join("mail.log");
    let now = support::wall_clock() as i64;
    generated::write_log(&log, 4, wanted[0].0 - 3600, now, &wanted).expect("relay log");
    let (ways, _database, _servers) = four_ways(&file, None);
    // A closed window (its end already past), so no way reads it as still filling.
    let until = rfc3339(support::wall_clock());
    let since = rfc3339(support::wall_clock() - 5000.0);
    let log = log.display().to_string();
    let records = [
        "--relay-log",
        log.as_str(),
        "--relay-log-zone",
        "UTC",
        "--smtp-from",
        "uns@uns.local",
    ];
    let plan = same_everywhere(&ways, &["dlq", "triage", "-o", "json"], &[]);
    let plan: Value = serde_json::from_slice(&plan).expect("plan");
    assert_eq!(plan["entries"].as_array().map(Vec::len), Some(10_000));
    same_everywhere(&ways, &["dlq", "triage"], &[]);
    same_everywhere(
        &ways,
        &[
            "dlq",
            "triage",
            "--since",
            &since,
            "--until",
            &until,
            "--channel",
            "EMAIL",
            "-o",
            "json",
        ],
        &[],
    );
    same_everywhere(&ways, &["events", "--limit", "500", "-o", "json"], &[]);
    same_everywhere(&ways, &["inspect", "n-000000004242", "-o", "json"], &[]);
    let mut verify = vec!["verify", "-o", "json"];
    verify.extend(records);
    let answers = same_everywhere(&ways[..2], &verify, &[]);
    let answers: Value = serde_json::from_slice(&answers).expect("answers");
    let delivered = answers.to_string().matches("\"DELIVERED\"").count();
    assert!(
        delivered > 100,
        "the log's queued messages were found: {delivered}"
    );
    for args in [
        vec!["reconcile", "-o", "json"],
        vec!["pulse", "-o", "json"],
        vec!["report", "-o", "markdown"],
    ] {
        let mut args = args.clone();
        args.extend(["--since", since.as_str(), "--until", until.as_str()]);
        if args[0] != "pulse" {
            args.extend(records);
        }
        same_everywhere(&ways[..2], &args, &[]);
    }
}
/// Every hostile store of `fixtures/hostile` that PostgreSQL can hold, with a DLQ entry
/// that has no events at all and ids whose byte order is not their letters' order,
/// reads the same bytes from its copy as from the file: the walk's two reads of the
/// database meet as one join of the file does, and one bad row hides no other.
#[test]
fn hostile_stores_read_the_same_bytes_from_their_copy_in_the_database() {
    let dir = tempfile::tempdir().expect("dir");
    let fixtures = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/hostile");
    let mut patches: Vec<String> = std::fs::read_dir(&fixtures)
        .expect("fixtures")
        .flatten()
        .filter_map(|entry| {
            let name = entry.file_name().to_string_lossy().into_owned();
            let patch = name.strip_suffix(".sql")?.to_string();
            (patch != "base").then_some(patch)
        })
        .collect();
    patches.sort();
    let until = rfc3339(support::wall_clock());
    let window = ["--since", "2000-01-01T00:00:00Z", "--until", until.as_str()];
    let (mut copied, mut refused) = (Vec::new(), Vec::new());
    for patch in &patches {
        let file = support::hostile_store(dir.path(), patch);
        let conn = rusqlite::Connection::open(&file).expect("store");
        for id in ["Z-no-events", "a-no-events", "\u{e9}-no-events"] {
            conn.execute(
                "INSERT INTO uns_notifications (id, status, dead_letter, attempts, cycle,
                     cycle_attempts, max_attempts, channels, payload, error_message,
                     next_attempt_at, created_at, updated_at)
                 VALUES (?1, 'DEAD', 1, 3, 1, 3, 3, '[\"EMAIL\"]',
                     '{\"recipient\": \"nobody@uns.local\"}', 'gave up', 1.0, 1.0, 2.0)",
                [id],
            )
            .expect("an entry with no events");
        }
        drop(conn);
        let database = postgres::cluster().database();
        let out = run(support::unsctl()
            .env("PGPASSWORD", postgres::PASSWORD)
            .args(["store", "copy", "--from"])
            .arg(&file)
            .args(["--to", &database.url]));
        if !out.status.success() {
            let said = String::from_utf8_lossy(&out.stderr);
            assert!(
                said.contains("cannot hold unchanged"),
                "{patch}: a copy is refused only for a value it cannot keep: {said}"
            );
            // Each value on a line of its own under the error, not run together with
            // escaped line breaks.
            let mut lines = said
                .lines()
                .skip_while(|l| !l.contains("cannot hold unchanged"));
            lines.next();
            assert!(
                !said.contains("\\n") && lines.next().is_some_and(|l| l.starts_with("  uns_")),
                "{patch}: each value named on a line of its own: {said}"
            );
            refused.push(patch.clone());
            continue;
        }
        copied.push(patch.clone());
        let ways = [Way::File(file), Way::Database(database.url.clone())];
        let plan = same_everywhere(&ways, &["dlq", "triage", "-o", "json"], &[]);
        let plan = String::from_utf8_lossy(&plan);
        for id in ["Z-no-events", "a-no-events", "\u{e9}-no-events"] {
            assert!(plan.contains(id), "{patch}: {id} is in the plan");
        }
        same_everywhere(&ways, &["dlq", "triage"], &[]);
        same_everywhere(
            &ways,
            &["dlq", "triage", "--channel", "EMAIL", "-o", "wide"],
            &[],
        );
        let mut reconcile = vec!["reconcile", "-o", "json"];
        reconcile.extend(window);
        same_everywhere(&ways, &reconcile, &[]);
    }
    // The copy refuses exactly the stores whose values PostgreSQL's typed columns
    // cannot hold unchanged (a time or a count that is text, a NULL id, a BLOB, bytes
    // that are not UTF-8); every other one is read.
    assert_eq!(
        refused,
        [
            "at-text",
            "null-id",
            "payload-blob",
            "payload-invalid-utf8",
            "wrong-types"
        ],
        "copied {copied:?}"
    );
    assert_eq!(copied.len(), patches.len() - refused.len());
}

/// `n` notifications submitted to the database with `runtime submit`.
fn submit(database: &postgres::Database, n: usize, channels: &str) -> Vec<String> {
    (0..n)
        .map(|i| {
            let out = run(&mut database.unsctl(&[
                "runtime",
                "submit",
                "--channel",
                channels,
                "--recipient",
                &format!("r{i}@example.com"),
                "--subject",
                "pg",
                "-o",
                "json",
            ]));
            assert!(
                out.status.success(),
                "submit: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            serde_json::from_slice::<Value>(&out.stdout).expect("submitted")["id"]
                .as_str()
                .expect("id")
                .to_string()
        })
        .collect()
}

/// `runtime serve` with no worker, open on a port of the kernel's choosing: a start that
/// must be refused before it serves anything.
const SERVE_ON_ANY_PORT: &[&str] = &[
    "runtime",
    "serve",
    "--no-worker",
    "--insecure-no-auth",
    "--listen",
    "127.0.0.1:0",
];

/// A server that takes the connection and never says a word (a hung server, a port that
/// is not PostgreSQL's): a command and the runtime give up on it once the connect timeout
/// has passed, with exit 1 and what to check. The driver bounds only the socket's opening
/// by that timeout, so before, both waited for ever on the handshake.
#[test]
fn a_server_that_takes_the_connection_and_never_answers_is_given_up_on() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for stream in listener.incoming().flatten() {
            held.push(stream);
        }
    });
    let url = format!("postgres://uns@127.0.0.1:{port}/uns?connect_timeout=1");
    for args in [&["dlq", "list"][..], SERVE_ON_ANY_PORT] {
        let (stopped, out) = run_or_stop(support::unsctl().args(["--db", &url]).args(args));
        let said = String::from_utf8_lossy(&out.stderr);
        assert!(stopped, "{args:?}: still waiting on the handshake: {said}");
        assert_eq!(out.status.code(), Some(1), "{args:?}: {said}");
        assert!(
            said.contains("no session opened within 1 s")
                && said.contains("never finished PostgreSQL's handshake"),
            "{args:?}: {said}"
        );
    }
}

#[test]
fn bad_databases_are_refused_with_their_exit_code_and_nothing_is_written() {
    let cluster = postgres::cluster();
    // Not a UNS store: another application's tables.
    let other = cluster.database();
    other
        .client()
        .batch_execute("CREATE TABLE invoices (id BIGINT PRIMARY KEY, total NUMERIC)")
        .expect("another application's table");
    for args in [&["dlq", "triage"][..], SERVE_ON_ANY_PORT] {
        let out = run(&mut other.unsctl(args));
        let said = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {said}");
        assert!(said.contains("not a UNS store"), "{args:?}: {said}");
        assert!(!said.contains(postgres::PASSWORD), "{said}");
    }
    let tables: i64 = other
        .client()
        .query_one(
            "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = 'public'",
            &[],
        )
        .expect("tables")
        .get(0);
    assert_eq!(
        tables, 1,
        "nothing was created beside the other application's table"
    );

    // A store of a version this unsctl does not know.
    let newer = cluster.database();
    submit(&newer, 1, "SLACK");
    newer
        .client()
        .batch_execute("UPDATE uns_schema SET version = 99")
        .expect("a newer version");
    let out = run(&mut newer.unsctl(&["dlq", "triage"]));
    let said = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{said}");
    assert!(
        said.contains("newer than this unsctl understands"),
        "{said}"
    );

    // An empty database: read commands find no store there and make none.
    let empty = cluster.database();
    let out = run(&mut empty.unsctl(&["dlq", "triage"]));
    let said = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{said}");
    assert!(said.contains("not a UNS store yet"), "{said}");
    let created: bool = empty
        .client()
        .query_one("SELECT to_regclass('uns_schema') IS NOT NULL", &[])
        .expect("catalogue")
        .get(0);
    assert!(!created, "a read made no schema");

    // A refused password: exit 6, the password never printed.
    let store = cluster.database();
    submit(&store, 1, "SLACK");
    let out = run(support::unsctl()
        .env("PGPASSWORD", "wrong-password-1234")
        .args(["--db", &store.url, "dlq", "triage"]));
    let said = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(6), "{said}");
    assert!(!said.contains("wrong-password-1234"), "{said}");
    // A password in the URL is never printed either.
    let with_password = store.url.replacen("uns@", "uns:wrong-password-1234@", 1);
    let out = run(support::unsctl().args(["--db", &with_password, "dlq", "triage"]));
    let said = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(6), "{said}");
    assert!(!said.contains("wrong-password-1234"), "{said}");

    // A server that goes away mid-command: the command's read is held by a lock, its
    // session ended by the server; a clear error, and the store as it was.
    let mut holder = store.client();
    let mut hold = holder.transaction().expect("transaction");
    hold.batch_execute("LOCK TABLE uns_notifications IN ACCESS EXCLUSIVE MODE")
        .expect("lock");
    let reader = store
        .unsctl(&["dlq", "triage"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("triage starts");
    let mut admin = postgres::cluster().admin();
    support::wait_until(
        "the triage to wait on the lock",
        std::time::Duration::from_secs(30),
        || {
            admin
            .query(
                "SELECT 1 FROM pg_stat_activity WHERE application_name LIKE 'unsctl%' AND wait_event_type = 'Lock' AND datname = $1",
                &[&store.name],
            )
            .is_ok_and(|rows| !rows.is_empty())
        },
    );
    admin
        .execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name LIKE 'unsctl%' AND datname = $1",
            &[&store.name],
        )
        .expect("terminate");
    let out = reader.wait_with_output().expect("triage ends");
    hold.rollback().expect("rollback");
    let said = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{said}");
    assert!(
        said.contains("went away") || said.contains("terminat"),
        "{said}"
    );
    let rows: i64 = store
        .client()
        .query_one("SELECT COUNT(*) FROM uns_events", &[])
        .expect("count")
        .get(0);
    assert_eq!(
        rows, 1,
        "the store holds its one SUBMITTED event and nothing more"
    );
}

#[test]
fn a_store_is_copied_unchanged_or_not_at_all() {
    let dir = tempfile::tempdir().expect("dir");
    let file = dir.path().join("uns.db");
    generated::generate(&file, 30).expect("store");
    // A note, so the copy carries the record too.
    let out = run(support::unsctl().arg("--db").arg(&file).args([
        "note",
        "relay restarted",
        "--fixed",
        "--operator",
        "oncall-jane",
    ]));
    support::succeeded(&out);
    let database = postgres::cluster().database();
    let out = run(support::unsctl()
        .env("PGPASSWORD", postgres::PASSWORD)
        .args(["store", "copy", "--from"])
        .arg(&file)
        .args(["--to", &database.url, "-o", "json"]));
    support::succeeded(&out);
    let copied: Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(copied["notifications"], 30);
    assert_eq!(copied["notes"], 1);
    assert!(!String::from_utf8_lossy(&out.stdout).contains(postgres::PASSWORD));
    // Every value as it was: SQLite's dump and PostgreSQL's, row by row.
    let sqlite = rusqlite::Connection::open(&file).expect("file");
    let mut pg = database.client();
    let from: Vec<(i64, String, f64, String)> = sqlite
        .prepare("SELECT id, notification_id, at, payload FROM uns_events ORDER BY id")
        .expect("events")
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
        .expect("rows")
        .collect::<Result<_, _>>()
        .expect("rows");
    let to: Vec<(i64, String, f64, String)> = pg
        .query(
            "SELECT id, notification_id, at, payload FROM uns_events ORDER BY id",
            &[],
        )
        .expect("events")
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get(2), r.get(3)))
        .collect();
    assert_eq!(from.len(), copied["events"].as_u64().unwrap_or(0) as usize);
    assert_eq!(from, to);
    let rowids: Vec<(i64, String)> = sqlite
        .prepare("SELECT rowid, id FROM uns_notifications ORDER BY rowid")
        .expect("rows")
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .expect("rows")
        .collect::<Result<_, _>>()
        .expect("rows");
    let pg_rowids: Vec<(i64, String)> = pg
        .query(
            "SELECT rowid, id FROM uns_notifications ORDER BY rowid",
            &[],
        )
        .expect("rows")
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    assert_eq!(rowids, pg_rowids);
    // New events go on after the copied ones.
    let id = &rowids[0].1;
    let out = run(&mut database.unsctl(&["note", "after the copy"]));
    support::succeeded(&out);
    let next: i64 = pg
        .query_one("SELECT MAX(id) FROM uns_notes", &[])
        .expect("notes")
        .get(0);
    assert_eq!(next, 2, "the note after the copy follows the copied one");
    // The history is evidence: the database refuses to rewrite or delete it.
    for statement in [
        "UPDATE uns_events SET kind = 'X' WHERE id = 1".to_string(),
        "DELETE FROM uns_events WHERE id = 1".into(),
        "TRUNCATE uns_events CASCADE".into(),
        format!("DELETE FROM uns_notifications WHERE id = '{id}'"),
        "DELETE FROM uns_notes".into(),
    ] {
        let err = pg.batch_execute(&statement).expect_err(&statement);
        let said = err
            .as_db_error()
            .map(|e| e.message().to_string())
            .unwrap_or_default();
        assert!(
            said.contains("append-only") || said.contains("never deleted"),
            "{statement}: {err:?}"
        );
    }
    // A second copy into the same database: refused, nothing added.
    let out = run(support::unsctl()
        .env("PGPASSWORD", postgres::PASSWORD)
        .args(["store", "copy", "--from"])
        .arg(&file)
        .args(["--to", &database.url]));
    assert_eq!(
        out.status.code(),
        Some(4),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("not empty"));
    // A database named as the source is a usage error, before anything is opened: the
    // copy reads SQLite files only (it was "no such store file").
    let out = run(support::unsctl()
        .env("PGPASSWORD", postgres::PASSWORD)
        .args(["store", "copy", "--from", &database.url])
        .args(["--to", &postgres::cluster().database().url]));
    let said = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{said}");
    assert!(said.contains("a SQLite store file"), "{said}");
    // A store holding what PostgreSQL's types cannot keep unchanged: every such value
    // named, and nothing copied.
    let hostile = dir.path().join("hostile.db");
    std::fs::copy(&file, &hostile).expect("copy");
    let nul: i64 = {
        let conn = rusqlite::Connection::open(&hostile).expect("hostile");
        conn.execute_batch(
            "INSERT INTO uns_events (notification_id, at, kind, payload)
               SELECT id, 1.0, 'ODD', CAST(X'7B2261223A2200227D' AS TEXT) FROM uns_notifications LIMIT 1;
             UPDATE uns_notifications SET attempts = 'three' WHERE rowid = 1;",
        )
        .expect("hostile values");
        conn.query_row("SELECT MAX(id) FROM uns_events", [], |r| r.get(0))
            .expect("id")
    };
    let empty = postgres::cluster().database();
    let out = run(support::unsctl()
        .env("PGPASSWORD", postgres::PASSWORD)
        .args(["store", "copy", "--from"])
        .arg(&hostile)
        .args(["--to", &empty.url]));
    let said = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(4), "{said}");
    assert!(
        said.contains(&format!(
            "uns_events id {nul}: payload: text with a NUL byte"
        )),
        "{said}"
    );
    assert!(
        said.contains("uns_notifications rowid 1: attempts: a Text value"),
        "{said}"
    );
    let made: bool = empty
        .client()
        .query_one("SELECT to_regclass('uns_schema') IS NOT NULL", &[])
        .expect("catalogue")
        .get(0);
    assert!(!made, "nothing was written, not even the schema");
}

/// A `runtime serve` process on the database: its API, and a worker of four.
struct Serve {
    child: std::process::Child,
    url: String,
    stopped: bool,
}

impl Serve {
    fn start(database: &postgres::Database, fakes: &Fakes, name: &str, extra: &[&str]) -> Self {
        let mut args = vec!["--concurrency", "4", "--lease-seconds", LEASE];
        args.extend(extra);
        Self::start_with(database, fakes, name, &args, std::process::Stdio::null())
    }

    /// As [`Serve::start`], with `args` for the worker's threads and lease (and anything
    /// else), and the log (warnings and worse) written to `log`.
    fn start_with(
        database: &postgres::Database,
        fakes: &Fakes,
        name: &str,
        args: &[&str],
        log: std::process::Stdio,
    ) -> Self {
        let port = support::free_port();
        let child = database
            .unsctl(&[
                "runtime",
                "serve",
                "--listen",
                &format!("127.0.0.1:{port}"),
                "--poll-ms",
                "20",
                "--worker-id",
                name,
                "--min-io-timeout",
                "60",
                "--backoff-base",
                "0.05",
                "--backoff-max",
                "0.1",
            ])
            .args(args)
            .env("UNS_API_KEY", support::KEY)
            .env("UNS_SLACK_WEBHOOK_URL", fakes.slack_url())
            .env("UNS_LOG", "warn")
            .stdout(std::process::Stdio::null())
            .stderr(log)
            .spawn()
            .expect("runtime serve starts");
        let addr: std::net::SocketAddr = format!("127.0.0.1:{port}").parse().expect("addr");
        support::wait_for_port(addr);
        Self {
            child,
            url: format!("http://{addr}"),
            stopped: false,
        }
    }

    fn signal(&mut self, signal: &str) {
        let status = support::launch("/usr/bin/kill")
            .args([signal, &self.child.id().to_string()])
            .status()
            .expect("kill");
        assert!(status.success(), "kill {signal}");
        self.stopped = signal == "-STOP";
    }

    /// GET `path` of this server's API: its status and its bytes.
    fn get(&self, path: &str) -> (u16, Vec<u8>) {
        unsctl::runtime::adapters::init_tls();
        let response = reqwest::blocking::Client::new()
            .get(format!("{}{path}", self.url))
            .bearer_auth(support::KEY)
            .send()
            .expect("the API answers");
        (
            response.status().as_u16(),
            response.bytes().expect("a body").to_vec(),
        )
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        if self.stopped {
            let _ = support::launch("/usr/bin/kill")
                .args(["-CONT", &self.child.id().to_string()])
                .status();
        }
        let _ = support::launch("/usr/bin/kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let _ = self.child.wait();
    }
}

/// One event as the database holds it.
#[derive(Debug, Clone, PartialEq)]
struct Stored {
    id: i64,
    notification: String,
    at: f64,
    kind: String,
    payload: Value,
}

fn history(database: &postgres::Database) -> Vec<Stored> {
    database
        .client()
        .query(
            "SELECT id, notification_id, at, kind, payload FROM uns_events ORDER BY notification_id, id",
            &[],
        )
        .expect("events")
        .iter()
        .map(|row| Stored {
            id: row.get(0),
            notification: row.get(1),
            at: row.get(2),
            kind: row.get(3),
            payload: serde_json::from_str(row.get::<_, &str>(4)).expect("payload"),
        })
        .collect()
}

fn open_rows(database: &postgres::Database) -> i64 {
    database
        .client()
        .query_one(
            "SELECT COUNT(*) FROM uns_notifications WHERE status IN ('PENDING', 'LEASED')",
            &[],
        )
        .expect("count")
        .get(0)
}

/// The fencing of §3 read from the history. A channel is started only under the
/// current lease; a provider's answer is kept under the lease its call was made under
/// (it is evidence, whenever it came), and one that came after that lease was lost is
/// followed by LEASE_LOST; only the current lease settles the row; and no two leases
/// on one notification were live at once (a new claim came after the last one ended
/// or expired, by the database's clock). Returns how many late answers were fenced.
fn fenced(events: &[Stored]) -> usize {
    let mut late = 0;
    for notification in events.chunk_by(|a, b| a.notification == b.notification) {
        let name = &notification[0].notification;
        // The current lease: its token, until when, and whether an event ended it.
        let mut current: Option<(String, f64, bool)> = None;
        let mut started = std::collections::HashSet::new();
        for (n, event) in notification.iter().enumerate() {
            let token = event.payload["lease_token"].as_str().map(str::to_string);
            let held = current.as_ref().map(|(held, ..)| held.clone());
            match event.kind.as_str() {
                "ATTEMPT_STARTED" => {
                    if let Some((_, until, ended)) = &current {
                        assert!(
                            *ended || event.at >= *until,
                            "{name}: claimed at {} while the lease until {until} was live",
                            event.at,
                        );
                    }
                    let until = event.payload["lease_until"].as_f64().expect("lease_until");
                    current = Some((token.expect("a token"), until, false));
                }
                "CHANNEL_ATTEMPT_STARTED" => {
                    assert_eq!(
                        token, held,
                        "{name}: event {} started a channel under a lease that was not current",
                        event.id
                    );
                    started.insert(token);
                }
                "CHANNEL_ATTEMPT_RESULT" => {
                    assert!(
                        started.contains(&token),
                        "{name}: event {} answers no call",
                        event.id
                    );
                    if token != held {
                        late += 1;
                        let fenced = notification[n..].iter().any(|later| {
                            later.kind == "LEASE_LOST"
                                && later.payload["lease_token"].as_str() == token.as_deref()
                        });
                        assert!(
                            fenced,
                            "{name}: the late answer {} was not fenced",
                            event.id
                        );
                    }
                }
                "RETRY_SCHEDULED" | "DELIVERED" | "DEAD_LETTERED" => {
                    if token.is_some() {
                        assert_eq!(
                            token, held,
                            "{name}: event {} settled under a lease that was not current",
                            event.id
                        );
                    }
                    if let Some((.., ended)) = current.as_mut() {
                        *ended = true;
                    }
                }
                _ => {}
            }
        }
    }
    late
}

/// `n` Slack notifications in a database of their own, sent to fakes that accept at
/// once, but for the first send of the `victim`-th: taken and answered only on cue, a
/// provider slower than any lease.
fn one_send_held(n: usize, victim: usize) -> (Fakes, postgres::Database, Vec<String>, String) {
    use unsctl::lab::fakes::Behavior;
    let fakes = Fakes::start().expect("fakes");
    fakes.control.set_default(Behavior::Accept);
    let database = postgres::cluster().database();
    let ids = submit(&database, n, "SLACK");
    let victim = ids[victim].clone();
    fakes
        .control
        .script(&victim, &[Behavior::Hold, Behavior::Accept]);
    (fakes, database, ids, victim)
}

/// Waits until the provider has `victim`'s send (held, as [`one_send_held`] scripts it).
fn wait_until_taken(fakes: &Fakes, victim: &str) {
    let limit = std::time::Duration::from_secs(60);
    support::wait_until("the held send to be taken", limit, || {
        fakes
            .control
            .ledger()
            .iter()
            .any(|a| a.notification_id.as_deref() == Some(victim))
    });
}

#[test]
fn two_processes_on_one_database_fence_a_paused_workers_late_writes() {
    let (fakes, database, ids, victim) = one_send_held(40, 7);
    let mut servers = [
        Serve::start(&database, &fakes, "A", &[]),
        Serve::start(&database, &fakes, "B", &[]),
    ];
    let limit = std::time::Duration::from_secs(60);
    wait_until_taken(&fakes, &victim);
    let started = |database: &postgres::Database| -> Vec<Stored> {
        history(database)
            .into_iter()
            .filter(|e| e.notification == victim && e.kind == "ATTEMPT_STARTED")
            .collect()
    };
    let first = started(&database)[0].clone();
    let holder = first.payload["worker_id"]
        .as_str()
        .expect("worker")
        .to_string();
    let held_token = first.payload["lease_token"]
        .as_str()
        .expect("token")
        .to_string();
    let (paused, other) = if holder == "A" { (0, "B") } else { (1, "A") };
    // The holder pauses mid-call, as a stopped container or a long GC pause does.
    servers[paused].signal("-STOP");
    support::wait_until("the other process to reclaim and deliver", limit, || {
        let reclaimed = started(&database)
            .iter()
            .any(|e| e.payload["worker_id"] == other && e.payload["reclaimed"] == true);
        reclaimed
            && history(&database)
                .iter()
                .any(|e| e.notification == victim && e.kind == "DELIVERED")
    });
    // The provider answers the held send, and the paused worker wakes to its answer.
    fakes.control.release();
    servers[paused].signal("-CONT");
    support::wait_until("the late answer to be fenced", limit, || {
        history(&database).iter().any(|e| {
            e.notification == victim
                && e.kind == "LEASE_LOST"
                && e.payload["lease_token"] == held_token.as_str()
        })
    });
    support::wait_until("every notification to settle", limit, || {
        open_rows(&database) == 0
    });
    let events = history(&database);
    assert!(fenced(&events) >= 1, "the late answer was kept and fenced");
    let late: Vec<&str> = events
        .iter()
        .filter(|e| e.payload["lease_token"] == held_token.as_str())
        .map(|e| e.kind.as_str())
        .collect();
    assert_eq!(
        late.last(),
        Some(&"LEASE_LOST"),
        "the paused worker's last write was LEASE_LOST: {late:?}"
    );
    // Both processes claimed work, and every notification was delivered.
    for worker in ["A", "B"] {
        assert!(
            events
                .iter()
                .any(|e| e.kind == "ATTEMPT_STARTED" && e.payload["worker_id"] == worker),
            "{worker} claimed nothing"
        );
    }
    let delivered = events.iter().filter(|e| e.kind == "DELIVERED").count();
    assert_eq!(delivered, ids.len());
    // Any of them answers every route with the same bytes.
    let until = support::wall_clock();
    let since = until - 600.0;
    for path in [
        format!("{}?include=events", unsctl::api::DLQ),
        format!("{}/{victim}", unsctl::api::RUNTIME_NOTIFICATION),
        format!("{}?id_prefix=n-", unsctl::api::RUNTIME_NOTIFICATION),
        format!("{}?limit=1000", unsctl::api::RUNTIME_EVENTS),
        format!(
            "{}?since={since}&until={until}&step=60",
            unsctl::api::RUNTIME_PULSE
        ),
        format!(
            "{}?since={since}&until={until}",
            unsctl::api::RUNTIME_RECONCILE
        ),
        unsctl::api::HEALTHZ.to_string(),
    ] {
        let (a, b) = (servers[0].get(&path), servers[1].get(&path));
        assert_eq!(a.0, 200, "{path}: {}", String::from_utf8_lossy(&a.1));
        assert!(a == b, "{path}: the two processes answer differently");
    }
}

#[test]
fn a_worker_whose_clock_runs_an_hour_ahead_neither_extends_nor_steals_a_lease() {
    let (fakes, database, _, _victim) = one_send_held(1, 0);
    let mut honest = Serve::start(&database, &fakes, "honest", &[]);
    let limit = std::time::Duration::from_secs(60);
    support::wait_until("the honest worker's send to be held", limit, || {
        !fakes.control.ledger().is_empty()
    });
    // The honest process pauses, so only the skewed one can take the notification on.
    honest.signal("-STOP");
    // An hour ahead by its own clock, the honest lease looks long expired to it, and a
    // lease it took would look an hour longer.
    let ahead = Serve::start(&database, &fakes, "ahead", &["--clock-offset", "3600"]);
    support::wait_until("the lease to expire and be reclaimed", limit, || {
        history(&database)
            .iter()
            .any(|e| e.kind == "ATTEMPT_STARTED" && e.payload["reclaimed"] == true)
    });
    fakes.control.release();
    honest.signal("-CONT");
    support::wait_until("the notification to settle", limit, || {
        open_rows(&database) == 0
    });
    support::wait_until("the honest late answer to be fenced", limit, || {
        history(&database).iter().any(|e| e.kind == "LEASE_LOST")
    });
    drop(ahead);
    drop(honest);
    let events = history(&database);
    fenced(&events);
    let wall = support::wall_clock();
    for event in &events {
        // Every time is the database's: none an hour ahead, and every lease as long as
        // the worker asked for by that clock.
        assert!(
            event.at <= wall + 5.0,
            "{event:?} is stamped by the skewed clock"
        );
        if event.kind == "ATTEMPT_STARTED" {
            let until = event.payload["lease_until"].as_f64().expect("until");
            let asked: f64 = LEASE.parse().expect("a number");
            assert!(
                (until - event.at - asked).abs() < 0.5,
                "{event:?}: a lease of {} s, not {asked}",
                until - event.at
            );
        }
    }
    let starts: Vec<&Stored> = events
        .iter()
        .filter(|e| e.kind == "ATTEMPT_STARTED")
        .collect();
    assert_eq!(starts[0].payload["worker_id"], "honest");
    // The reclaim came only once the honest lease had run out by the database's clock.
    let reclaim = starts
        .iter()
        .find(|e| e.payload["reclaimed"] == true)
        .expect("a reclaim");
    assert_eq!(reclaim.payload["worker_id"], "ahead");
    let honest_until = starts[0].payload["lease_until"].as_f64().expect("until");
    assert!(
        reclaim.at >= honest_until,
        "reclaimed at {} before the lease ran out at {honest_until}",
        reclaim.at
    );
}

#[test]
fn the_remediation_sweep_on_postgres_finds_no_unsafe_verdict() {
    let database = postgres::cluster().database();
    let out = run(&mut database.unsctl(&[
        "sweep",
        "--schedules",
        "200",
        "--seed",
        "20261204",
        "--verify",
        "--remediate",
        "-o",
        "json",
    ]));
    support::the_sweep_was_safe(&out, 200);
    // It ran on the database, not on a file of its own.
    let delivered: i64 = database
        .client()
        .query_one("SELECT COUNT(*) FROM uns_notifications", &[])
        .expect("count")
        .get(0);
    assert_eq!(delivered, 200);
    // A second sweep finds the first one's notifications there: its worker would take
    // them, as it would a real store's, so it refuses to start (exit 4).
    let out = run(&mut database.unsctl(&["sweep", "--schedules", "2"]));
    let said = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(4), "{said}");
    assert!(said.contains("holds 200 notification(s) already"), "{said}");
}

/// The store being worked on is never a lab's: a sweep or a repro pointed at one that
/// holds real notifications (by `--db`, or by the `UNS_DB_FILE` the runbook exports)
/// would have its worker claim them and "deliver" them to its fakes. The sweep runs on
/// a scratch file of its own unless `--db` itself names an empty database, and refuses
/// one that is not empty; neither writes or claims anything of the store.
#[test]
fn a_lab_run_never_claims_a_real_stores_notifications() {
    let database = postgres::cluster().database();
    let real = submit(&database, 2, "EMAIL");
    let before = history(&database);
    let out = run(&mut database.unsctl(&["sweep", "--schedules", "3", "--seed", "7"]));
    let said = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(4), "{said}");
    assert!(
        said.contains(&real[0]) && said.contains("holds 2 notification(s)"),
        "{said}"
    );
    let mut from_environment = support::unsctl();
    from_environment
        .env("PGPASSWORD", postgres::PASSWORD)
        .env("UNS_DB_FILE", &database.url)
        .args(["sweep", "--schedules", "3", "--seed", "7", "-o", "json"]);
    let out = run(&mut from_environment);
    support::succeeded(&out);
    assert_eq!(
        history(&database),
        before,
        "the database was left as it was"
    );
    let rows: i64 = database
        .client()
        .query_one(
            "SELECT COUNT(*) FROM uns_notifications WHERE status = 'PENDING'",
            &[],
        )
        .expect("count")
        .get(0);
    assert_eq!(rows, 2, "both still waiting for the real worker");
}

/// A URL, and the variables set beside it.
type Reached<'a> = (String, Vec<(&'a str, &'a str)>);

/// Each way read by `read` succeeds with the bytes `plain` read.
fn each_reads_the_same(
    read: impl Fn(&str, &[(&str, &str)]) -> Output,
    ways: &[Reached<'_>],
    plain: &[u8],
) {
    for (url, env) in ways {
        let out = read(url, env);
        assert!(
            out.status.success(),
            "{url} {env:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(out.stdout, plain, "{url} {env:?}: the same bytes");
    }
}

/// TLS as libpq's `sslmode` asks, from the URL or `PGSSLMODE`/`PGSSLROOTCERT`: a role
/// the server accepts only over TLS is read the same as over a plain session when the
/// mode allows TLS; the `verify-` modes accept the cluster's root and refuse a
/// stranger's, `verify-full` refuses a name the certificate was not issued for, and
/// neither trusts anything when no root is named. A refused peer never gets as far as
/// the password.
#[test]
fn tls_is_what_sslmode_asks_and_a_peer_with_an_unknown_certificate_gets_no_password() {
    let cluster = postgres::cluster();
    let store = cluster.database();
    submit(&store, 3, "EMAIL,SLACK");
    let events = |url: &str, env: &[(&str, &str)]| {
        let mut command = support::unsctl();
        command
            .env("PGPASSWORD", postgres::PASSWORD)
            .args(["--db", url, "events", "-o", "json"]);
        for (name, value) in env {
            command.env(name, value);
        }
        run(&mut command)
    };
    let plain = events(&store.url, &[]);
    support::succeeded(&plain);
    let tls_only = |host: &str, query: &str| {
        format!(
            "postgres://{}@{host}:{}/{}{query}",
            postgres::TLS_ONLY_USER,
            cluster.port,
            store.name
        )
    };
    let root = cluster.tls.root.display().to_string();
    let stranger = cluster.tls.stranger_root.display().to_string();
    let accepted = [
        (tls_only("127.0.0.1", ""), vec![]),
        (tls_only("127.0.0.1", "?sslmode=require"), vec![]),
        (
            tls_only(
                "127.0.0.1",
                &format!("?sslmode=verify-full&sslrootcert={root}"),
            ),
            vec![],
        ),
        (
            tls_only("127.0.0.1", ""),
            vec![
                ("PGSSLMODE", "verify-full"),
                ("PGSSLROOTCERT", root.as_str()),
            ],
        ),
        // The certificate names 127.0.0.1 only: verify-ca checks the chain, not the name.
        (
            tls_only(
                "localhost",
                &format!("?sslmode=verify-ca&sslrootcert={root}"),
            ),
            vec![],
        ),
    ];
    each_reads_the_same(events, &accepted, &plain.stdout);
    // doctor says which it was, and reads the store through it.
    for (url, says) in [
        (store.url.clone(), "TLS"),
        (format!("{}?sslmode=disable", store.url), "not encrypted"),
    ] {
        let out = run(support::unsctl()
            .env("PGPASSWORD", postgres::PASSWORD)
            .args(["doctor", "--db", &url]));
        let printed = String::from_utf8_lossy(&out.stdout);
        let line = printed
            .lines()
            .find(|line| line.contains(" store "))
            .unwrap_or_else(|| panic!("no store check: {printed}"));
        assert!(line.starts_with("ok "), "{line}");
        assert!(line.contains("schema v3, PostgreSQL "), "{line}");
        assert!(line.contains(&format!(", {says}, writable")), "{line}");
        assert!(
            printed
                .lines()
                .any(|line| line.contains(" backlog ") && line.starts_with("ok ")),
            "the store's health read through it: {printed}"
        );
    }
    let refused = [
        // In the clear, the server refuses the role: TLS was really in use above.
        (
            tls_only("127.0.0.1", "?sslmode=disable"),
            vec![],
            "no encryption",
        ),
        (
            tls_only(
                "127.0.0.1",
                &format!("?sslmode=verify-full&sslrootcert={stranger}"),
            ),
            vec![],
            "certificate",
        ),
        // The environment's mode, for a URL that names none (the URL's would win).
        (
            tls_only("127.0.0.1", ""),
            vec![("PGSSLMODE", "disable")],
            "no encryption",
        ),
        (
            tls_only(
                "localhost",
                &format!("?sslmode=verify-full&sslrootcert={root}"),
            ),
            vec![],
            "certificate",
        ),
        (
            tls_only("127.0.0.1", "?sslmode=verify-full"),
            vec![],
            "sslrootcert",
        ),
        (tls_only("127.0.0.1", "?sslmode=always"), vec![], "sslmode"),
    ];
    for (url, env, says) in &refused {
        let out = events(url, env);
        let said = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{url} {env:?}: refused");
        if *says == "sslmode" || *says == "sslrootcert" {
            // Settings that cannot be used as given: the command line is wrong.
            assert_eq!(out.status.code(), Some(2), "{said}");
        }
        if *says == "no encryption" {
            // The server refused the session: exit 6, and the hint is the database's.
            assert_eq!(out.status.code(), Some(6), "{said}");
            assert!(
                said.contains("sslmode") && !said.contains("UNS_API_KEY"),
                "{said}"
            );
        }
        assert!(out.stdout.is_empty(), "{url} {env:?}: nothing read");
        assert!(said.contains(says), "{url} {env:?}: {said}");
        assert!(!said.contains(postgres::PASSWORD), "{said}");
    }
}

/// `unsctl ARGS` for a terminal, from an environment of `env` alone.
fn in_terminal(args: &str, env: &[(&str, &str)]) -> String {
    let vars: Vec<String> = env.iter().map(|(k, v)| format!("{k}={v}")).collect();
    format!(
        "env -i PATH={} HOME=/nonexistent UNSCTL_CONFIG=/nonexistent/config.toml TERM=xterm-256color NO_COLOR=1 {} {} {args}",
        std::env::var("PATH").unwrap_or_default(),
        vars.join(" "),
        env!("CARGO_BIN_EXE_unsctl"),
    )
}

/// The live screen on PostgreSQL: the DLQ reads as it reads from the file it was copied
/// from, line for line below the header (which names the store), and a resolve made on
/// the screen is the guarded transition, written to the database with the person, the
/// reason and `via`.
#[test]
fn the_live_screen_works_an_entry_on_postgres_as_on_the_file() {
    let dir = tempfile::tempdir().expect("dir");
    let file = dir.path().join("uns.db");
    let fakes = Fakes::start().expect("fakes");
    let binary = PathBuf::from(env!("CARGO_BIN_EXE_unsctl"));
    repro::run(&file, &Scenario::ALL, Some(&binary), &fakes).expect("repro all");
    let database = postgres::cluster().database_from(&file);
    let env = [
        ("PGPASSWORD", postgres::PASSWORD),
        ("UNS_OPERATOR", "oncall-pg"),
    ];
    // The rows below the header once the frame is whole: the selected entry's preview
    // (its `next:` line, drawn after the rows) on the screen, and five captures in a row
    // the same, so a frame caught half written is never compared.
    let rows = |term: &support::tmux::Tmux| -> Vec<String> {
        let below_header =
            |screen: &str| -> Vec<String> { screen.lines().skip(1).map(str::to_string).collect() };
        let mut last = below_header(&term.wait_for("next: "));
        let mut same = 0;
        let still = support::wait_for(std::time::Duration::from_secs(20), || {
            let now = below_header(&term.wait_for("next: "));
            same = if now == last { same + 1 } else { 0 };
            last = now;
            same >= 5
        });
        assert!(still, "the screen never held still:\n{}", last.join("\n"));
        last
    };
    let on_file = support::tmux::Tmux::start_sized(
        &in_terminal(&format!("--db {} tui", file.display()), &env),
        120,
        30,
    );
    let term = support::tmux::Tmux::start_sized(
        &in_terminal(&format!("--db {} tui", database.url), &env),
        120,
        30,
    );
    term.wait_for(&database.url);
    let (expected, seen) = (rows(&on_file), rows(&term));
    assert_eq!(
        seen, expected,
        "the screen over PostgreSQL and over the file"
    );
    on_file.keys(&["q"]);
    // The screen's walks (its counts by branch) read on two sessions that end with each
    // walk: none is left idle for the server or a load balancer to cut meanwhile.
    let mut admin = postgres::cluster().admin();
    support::wait_until(
        "the screen's walk sessions to end",
        std::time::Duration::from_secs(30),
        || {
            admin
                .query_one(
                    "SELECT COUNT(*) FROM pg_stat_activity WHERE datname = $1 AND application_name = $2",
                    &[&database.name, &unsctl::db::snapshot::WALK_SESSION],
                )
                .is_ok_and(|row| row.get::<_, i64>(0) == 0)
        },
    );

    // The RESOLVE entry, reached with the arrow keys and resolved from the screen.
    let position = seen
        .iter()
        .filter(|line| line.contains("[ ]"))
        .position(|line| line.contains(" RESOLVE "))
        .expect("a RESOLVE row");
    let plan = run(support::unsctl()
        .arg("--db")
        .arg(&file)
        .args(["dlq", "triage", "-o", "json"]));
    let plan: Value = serde_json::from_slice(&plan.stdout).expect("plan");
    let id = support::entry_of_branch(&plan, "RESOLVE");
    for _ in 0..position {
        term.keys(&["Down"]);
    }
    term.keys(&["r"]);
    term.wait_for("resolve 1 entry");
    crate::tui::reason_word_go(&term, 2, "accepted per the fake's ledger", &[]);
    term.wait_for("1 done");
    term.keys(&["Enter"]);
    let mut client = database.client();
    support::wait_until("the resolve", std::time::Duration::from_secs(30), || {
        client
            .query_one("SELECT status FROM uns_notifications WHERE id = $1", &[&id])
            .map(|row| row.get::<_, String>(0) == "RESOLVED")
            .unwrap_or(false)
    });
    let payload: String = client
        .query_one(
            "SELECT payload FROM uns_events WHERE notification_id = $1 AND kind = 'DLQ_RESOLVED'",
            &[&id],
        )
        .expect("a DLQ_RESOLVED event")
        .get(0);
    let payload: Value = serde_json::from_str(&payload).expect("json");
    assert_eq!(
        payload["reason"], "accepted per the fake's ledger",
        "{payload}"
    );
    assert_eq!(payload["via"], "tui", "{payload}");
    assert!(payload.to_string().contains("oncall-pg"), "{payload}");
    term.keys(&["q"]);
    term.wait_for("EXIT=0");
}

/// `verify --record` on PostgreSQL: entries written in batches, as on SQLite
/// (`tests/runtime/recording.rs`). An entry refused by the tool leaves nothing behind,
/// and after a write the database itself refuses (which aborts PostgreSQL's whole
/// transaction) every other entry is still recorded and the broken one gets its own
/// error.
#[test]
fn answers_are_recorded_in_batches_on_postgresql_as_on_sqlite() {
    use support::recording::{answered_entries, check_recorded, delivered, record};
    use unsctl::remediation::verified::BATCH;
    let dir = tempfile::tempdir().expect("dir");
    let file = dir.path().join("uns.db");
    let (mut ids, mut asked) = answered_entries(&file, BATCH + 9);
    ids.sort();
    let database = postgres::cluster().database_from(&file);
    let (stale, broken) = (ids[3].clone(), ids[BATCH + 2].clone());
    asked.answers.push(delivered(&stale, 9));
    database
        .client()
        .batch_execute(&format!(
            "CREATE FUNCTION fault() RETURNS trigger LANGUAGE plpgsql AS $$
             BEGIN
                 IF NEW.notification_id = '{broken}' AND NEW.kind = 'VERIFIED' THEN
                     RAISE EXCEPTION 'the disk refused this write';
                 END IF;
                 RETURN NEW;
             END $$;
             CREATE TRIGGER fault BEFORE INSERT ON uns_events
                 FOR EACH ROW EXECUTE FUNCTION fault();"
        ))
        .expect("fault");
    let conn = unsctl::db::pg::PgConn::open(&database.target(), false).expect("connect");
    let db = unsctl::db::Db::Postgres(&conn);
    let results = record(&db, &asked);
    let errors = check_recorded(&db, &ids, results, &[&stale, &broken]);
    let said: Vec<String> = errors.iter().map(|(_, err)| err.to_string()).collect();
    assert!(said[0].contains("attempt 9 of cycle 1"), "{said:?}");
    assert!(said[1].contains("the disk refused this write"), "{said:?}");
}

/// `Db::read_tx` on PostgreSQL: one snapshot, ended whatever happens, and inside a
/// transaction already open it reads in that one and never rolls it back.
#[test]
fn a_read_transaction_on_postgresql_sees_one_snapshot_and_never_ends_another() {
    use support::recording::answered_entries;
    use unsctl::db::{Db, DbError};
    let dir = tempfile::tempdir().expect("dir");
    let file = dir.path().join("uns.db");
    answered_entries(&file, 2);
    let database = postgres::cluster().database_from(&file);
    let conn = unsctl::db::pg::PgConn::open(&database.target(), false).expect("connect");
    let db = Db::Postgres(&conn);
    let count = |db: &Db<'_>| -> Result<i64, DbError> {
        db.row("SELECT count(*) FROM uns_notes", &[], |row| {
            Ok(match row.cell(0)? {
                rusqlite::types::ValueRef::Integer(n) => n,
                _ => -1,
            })
        })
        .map(|n| n.unwrap_or(-1))
    };
    let note = || {
        database
            .client()
            .batch_execute("INSERT INTO uns_notes (at, kind, payload) VALUES (1, 'NOTE', '{}')")
            .expect("note");
    };
    let before = count(&db).expect("count");
    let (first, during) = db
        .read_tx(|tx| {
            let first = count(tx)?;
            note();
            Ok::<_, DbError>((first, count(tx)?))
        })
        .expect("read");
    assert_eq!((first, during), (before, before), "one snapshot");
    assert!(!conn.in_transaction(), "the read transaction ended");
    assert_eq!(count(&db).expect("count"), before + 1);
    let failed = db.read_tx(|tx| {
        count(tx)?;
        Err::<(), _>(DbError::Value("the caller gave up".into()))
    });
    assert!(failed.is_err() && !conn.in_transaction());
    // Nested in a write transaction, its read sees that transaction's own write, and the
    // write is still committed after it.
    let inside = db
        .write_tx(|tx| {
            tx.batch("INSERT INTO uns_notes (at, kind, payload) VALUES (2, 'NOTE', '{}')")?;
            tx.read_tx(|tx| count(tx))
        })
        .expect("nested");
    assert_eq!(inside, before + 2, "read inside the open transaction");
    assert_eq!(count(&db).expect("count"), before + 2, "the write was kept");
}

/// A reader whose clock is a day behind counts what is due, and how long ago the runtime
/// last did anything, by the database's clock: the one every row and event there was
/// written by. By its own clock nothing would be due for a day.
#[test]
fn a_reader_a_day_behind_reads_the_runtimes_numbers_by_the_databases_clock() {
    use unsctl::store::Store;
    let database = postgres::cluster().database();
    submit(&database, 3, "email");
    let behind = unsctl::store::direct::DirectStore::open_postgres(&database.target(), false)
        .expect("the store opens")
        .with_clock(Box::new(unsctl::clock::OffsetClock(-86_400.0)));
    let health = behind.health(900.0, None).expect("health");
    assert_eq!(health.stats.due, 3, "{health:#?}");
    assert_eq!(health.stats.scheduled, 0, "{health:#?}");
    let oldest = health.stats.oldest_due_at.expect("the oldest due");
    let waited = health.stats.at - oldest;
    assert!(
        (0.0..3600.0).contains(&waited),
        "due for {waited} s by the reader's clock, not the database's"
    );
    let recent = unsctl::reconcile::Recent::read(&behind, None, 300.0).expect("recent");
    assert!((recent.at - health.stats.at).abs() < 3600.0, "{recent:?}");
}

/// A database of its own holding every runbook case.
fn every_case_database() -> postgres::Database {
    let dir = tempfile::tempdir().expect("dir");
    postgres::cluster().database_from(&support::every_case_store(dir.path()))
}

/// A database that takes no writes (a hot standby, or `default_transaction_read_only`
/// as a site sets it for its readers): every read works, and a change is refused before
/// any entry is tried, saying why and where changes go.
#[test]
fn a_database_that_takes_no_writes_is_read_and_a_change_is_refused_up_front() {
    let database = every_case_database();
    takes_no_writes(&database, true);
    let before = history(&database).len();
    let out = run(&mut database.unsctl(&["dlq", "triage", "-o", "json"]));
    support::succeeded(&out);
    let plan: Value = serde_json::from_slice(&out.stdout).expect("plan");
    let id = support::entry_of_branch(&plan, "RESOLVE");
    let out =
        run(&mut database.unsctl(&["dlq", "resolve", &id, "--confirm", "--yes", "--reason", "x"]));
    let text = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(text.contains("takes no writes"), "{text}");
    assert!(!text.contains("failed"), "no entry was tried: {text}");
    // The runtime's own writes say the same.
    let out = run(&mut database.unsctl(SUBMIT_ONE));
    let text = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && text.contains("takes no writes"),
        "{text}"
    );
    // Nor does the runtime start on it: it would fail every claim.
    match unsctl::server::start(ServerConfig::api_only(
        Place::Postgres(database.target()),
        Some(Keys::single(support::KEY).expect("key")),
    )) {
        Ok(_) => panic!("the runtime started on a database that takes no writes"),
        Err(err) => assert!(err.to_string().contains("takes no writes"), "{err}"),
    }
    // doctor, in its own read-only session, says the database's state, not the session's.
    let out = run(&mut database.unsctl(&["doctor"]));
    let printed = String::from_utf8_lossy(&out.stdout);
    let line = printed
        .lines()
        .find(|line| line.contains(" store "))
        .unwrap_or_else(|| panic!("no store check: {printed}"));
    assert!(
        line.starts_with("warn ")
            && line.ends_with(
                "read-only: default_transaction_read_only is on for this database or role"
            ),
        "{printed}"
    );
    assert!(
        printed.contains("the runtime will not start on it"),
        "{printed}"
    );
    assert!(!printed.contains("target_session_attrs"), "{printed}");
    // Named among several hosts, the first that answers is taken, a standby as well as the
    // primary: doctor and the refusal say how to have the one that takes writes chosen.
    let here = format!("127.0.0.1:{}", database.port);
    let several = database.url.replace(&here, &format!("{here},{here}"));
    let out = run(&mut postgres::unsctl_at(&several, &["doctor"]));
    let printed = String::from_utf8_lossy(&out.stdout);
    assert!(
        printed.contains("the URL names several hosts")
            && printed.contains("add target_session_attrs=read-write"),
        "{printed}"
    );
    let port = support::free_port().to_string();
    let listen = format!("127.0.0.1:{port}");
    let out = run(
        postgres::unsctl_at(&several, &["runtime", "serve", "--listen", &listen])
            .env("UNS_API_KEY", support::KEY),
    );
    let text = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success()
            && text.contains("takes no writes")
            && text.contains("add target_session_attrs=read-write"),
        "{text}"
    );
    assert_eq!(history(&database).len(), before, "nothing was written");
}

/// A site that fails over by a list of hosts sets `PGTARGETSESSIONATTRS` (and
/// `PGCONNECT_TIMEOUT`) for every libpq client: unsctl takes them too, the URL's own
/// winning. When every host named answers and none is of the kind asked for, the refusal
/// says so and what to do, not to check whether the database is up.
#[test]
fn the_kind_of_host_asked_for_comes_from_the_environment_as_libpq_takes_it() {
    let database = every_case_database();
    let here = format!("127.0.0.1:{}", database.port);
    let several = database.url.replace(&here, &format!("{here},{here}"));
    let with = |url: &str, attrs: &str, args: &[&str]| {
        let mut command = postgres::unsctl_at(url, args);
        command
            .env("PGTARGETSESSIONATTRS", attrs)
            .env("PGCONNECT_TIMEOUT", "5");
        run(&mut command)
    };
    // A primary is what read-write asks for, among several hosts too.
    succeeded(&with(
        &several,
        "read-write",
        &["dlq", "triage", "-o", "json"],
    ));
    // Read-only asks for a standby: the primary is turned away, as libpq turns it away.
    let out = with(&database.url, "read-only", &["dlq", "triage"]);
    let text = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(
        text.contains("no host it names is read-only")
            && text.ends_with(&format!("{}\n", unsctl::db::pg::NO_HOST_OF_KIND_REMEDY)),
        "{text}"
    );
    // The URL's own attribute wins over the environment's.
    let own = format!("{several}?target_session_attrs=any");
    succeeded(&with(&own, "read-only", &["dlq", "triage", "-o", "json"]));
    // A value this client cannot take is a usage error naming the values it can.
    let out = with(&database.url, "prefer-standby", &["dlq", "triage"]);
    let text = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{text}");
    assert!(
        text.contains("takes any, read-write or read-only"),
        "{text}"
    );
    // Now the database takes no writes: read-write finds no host, and doctor and the
    // runtime say that, not that the database may be down or that the attribute is missing.
    takes_no_writes(&database, true);
    let before = history(&database).len();
    let out = with(&several, "read-write", &["doctor"]);
    let printed = String::from_utf8_lossy(&out.stdout);
    let line = printed
        .lines()
        .find(|line| line.contains(" store "))
        .unwrap_or_else(|| panic!("no store check: {printed}"));
    assert!(
        line.starts_with("fail ") && line.contains("no host it names takes writes"),
        "{printed}"
    );
    assert!(!printed.contains("is the database up"), "{printed}");
    assert!(!printed.contains("add target_session_attrs"), "{printed}");
    let port = support::free_port().to_string();
    let listen = format!("127.0.0.1:{port}");
    let mut serve = postgres::unsctl_at(&several, &["runtime", "serve", "--listen", &listen]);
    serve
        .env("UNS_API_KEY", support::KEY)
        .env("PGTARGETSESSIONATTRS", "read-write");
    let out = run(&mut serve);
    let text = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && text.contains("no host it names takes writes"),
        "{text}"
    );
    takes_no_writes(&database, false);
    assert_eq!(history(&database).len(), before, "nothing was written");
}

/// A store the connection's search_path does not reach (made by another role, in its own
/// schema) is named where it is, for reading and for the runtime alike: the runtime
/// never makes a second store beside it, which would split the workers between two.
#[test]
fn a_store_outside_the_search_path_is_named_and_never_made_twice() {
    let database = every_case_database();
    let mut client = database.client();
    client
        .batch_execute(&format!(
            "CREATE SCHEMA elsewhere; GRANT ALL ON SCHEMA elsewhere TO PUBLIC;
             ALTER DATABASE {} SET search_path = elsewhere",
            database.name
        ))
        .expect("a search_path without the store");
    let out = run(&mut database.unsctl(&["dlq", "triage", "-o", "json"]));
    let text = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(
        text.contains(
            "no UNS store on this connection's search_path (elsewhere), but one in schema public"
        ),
        "{text}"
    );
    match unsctl::server::start(ServerConfig::api_only(
        Place::Postgres(database.target()),
        Some(Keys::single(support::KEY).expect("key")),
    )) {
        Ok(_) => panic!("the runtime started a second store"),
        Err(err) => assert!(
            err.to_string().contains("but one in schema public"),
            "{err}"
        ),
    }
    let made: i64 = database
        .client()
        .query_one(
            "SELECT COUNT(*) FROM pg_tables WHERE schemaname = 'elsewhere'",
            &[],
        )
        .expect("tables")
        .get(0);
    assert_eq!(made, 0, "a second store was made");
    // Named in the URL, the store is read as ever.
    let mut command = support::unsctl();
    command.env("PGPASSWORD", postgres::PASSWORD).args([
        "--db",
        &format!("{}?options=-csearch_path%3Dpublic", database.url),
        "dlq",
        "triage",
        "-o",
        "json",
    ]);
    let out = run(&mut command);
    support::succeeded(&out);
    let plan: Value = serde_json::from_slice(&out.stdout).expect("plan");
    assert!(!plan["entries"].as_array().expect("entries").is_empty());
}

/// The store over the cluster's Unix socket, with the host, port, user and database
/// from libpq's variables, as an operator on the database's machine reaches it: no TLS
/// asked of a socket, whatever sslmode says, and what the URL names wins over the
/// environment.
#[test]
fn a_unix_socket_and_libpqs_variables_reach_the_same_store() {
    let cluster = postgres::cluster();
    let database = cluster.database();
    submit(&database, 1, "email");
    let identity = |out: Output| -> String {
        support::succeeded(&out);
        let plan: Value = serde_json::from_slice(&out.stdout).expect("plan");
        plan["store"].as_str().expect("store").to_string()
    };
    let by_url = identity(run(&mut database.unsctl(&["dlq", "triage", "-o", "json"])));
    let triage = |url: &str, env: &[(&str, String)]| {
        let mut command = support::unsctl();
        command
            .args(["--db", url, "dlq", "triage", "-o", "json"])
            .env_remove("PGPASSWORD");
        for (name, value) in env {
            command.env(name, value);
        }
        run(&mut command)
    };
    let socket = cluster.socket_dir.display().to_string();
    let variables = [
        ("PGHOST", socket.clone()),
        ("PGPORT", cluster.port.to_string()),
        ("PGUSER", postgres::USER.to_string()),
        ("PGDATABASE", database.name.clone()),
    ];
    assert_eq!(identity(triage("postgres://", &variables)), by_url);
    assert_eq!(
        identity(triage("postgres://?sslmode=verify-full", &variables)),
        by_url
    );
    // The URL's database wins over PGDATABASE's.
    let elsewhere = [
        ("PGHOST", socket),
        ("PGPORT", cluster.port.to_string()),
        ("PGUSER", postgres::USER.to_string()),
        ("PGDATABASE", "postgres".to_string()),
    ];
    let url = format!("postgres:///{}", database.name);
    assert_eq!(identity(triage(&url, &elsewhere)), by_url);
    // Over TCP, the port and user from the environment, the password from PGPASSWORD.
    let mut tcp = elsewhere[1..3].to_vec();
    tcp.push(("PGPASSWORD", postgres::PASSWORD.to_string()));
    let url = format!("postgres://127.0.0.1/{}", database.name);
    assert_eq!(identity(triage(&url, &tcp)), by_url);

    // No host named anywhere: libpq's own directory for the socket, /var/run/postgresql
    // as Debian builds it or /tmp as PostgreSQL's builds do, and no TCP. The cluster's
    // socket is reached there through a link of this test's own (its port is its own).
    let url = format!("postgres:///{}", database.name);
    let no_host = [
        ("PGPORT", cluster.port.to_string()),
        ("PGUSER", postgres::USER.to_string()),
    ];
    let without_pghost = |url: &str| {
        let mut command = support::unsctl();
        command
            .args(["--db", url, "dlq", "triage", "-o", "json"])
            .env_remove("PGPASSWORD")
            .env_remove("PGHOST");
        for (name, value) in &no_host {
            command.env(name, value);
        }
        run(&mut command)
    };
    let socket_name = format!(".s.PGSQL.{}", cluster.port);
    let out = without_pghost(&url);
    assert_eq!(out.status.code(), Some(1), "no socket there yet");
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(
        said.contains(&format!("socket /var/run/postgresql/{socket_name}")),
        "names the socket it tried: {said}"
    );
    let link = Link::new(
        std::path::Path::new("/tmp").join(&socket_name),
        &cluster.socket_dir.join(&socket_name),
    );
    assert_eq!(identity(without_pghost(&url)), by_url);
    drop(link);
}

/// A symbolic link removed when it goes out of scope.
struct Link(std::path::PathBuf);

impl Link {
    fn new(at: std::path::PathBuf, to: &std::path::Path) -> Self {
        std::os::unix::fs::symlink(to, &at).expect("a link to the socket");
        Self(at)
    }
}

impl Drop for Link {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// A pooler that lends each transaction to whichever server session is free (PgBouncer's
/// transaction and statement modes) would run this session's prepared statements on
/// another's, and lend a reader's READ ONLY to other clients: every command and the
/// runtime refuse it up front, naming it, and leave nothing on its sessions. One in
/// session mode is a session of one's own, and reads as PostgreSQL itself does.
#[test]
fn a_pooler_that_lends_each_transaction_elsewhere_is_refused_and_left_as_it_was() {
    let database = every_case_database();
    let direct = run(&mut database.unsctl(&["dlq", "triage", "-o", "json"]));
    support::succeeded(&direct);

    let session = postgres::Pooler::start(&database, "session", 4);
    let pooled = run(&mut session.unsctl(&["dlq", "triage", "-o", "json"]));
    support::succeeded(&pooled);
    assert_eq!(
        String::from_utf8_lossy(&pooled.stdout).replace(&session.url, &database.url),
        String::from_utf8_lossy(&direct.stdout),
        "through a pool in session mode the plan is the same"
    );

    // One server session: what a refused reader set on it, the next client would get.
    for (mode, sessions) in [("transaction", 1), ("transaction", 4), ("statement", 4)] {
        let pooler = postgres::Pooler::start(&database, mode, sessions);
        let out = run(&mut pooler.unsctl(&["dlq", "list"]));
        let text = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{mode}: {text}");
        assert!(text.contains("pool_mode = session"), "{mode}: {text}");
        assert!(text.contains(&pooler.url), "{mode}: names the URL: {text}");
        assert!(out.stdout.is_empty(), "{mode}: nothing read");
        match unsctl::server::start(ServerConfig::api_only(
            Place::Postgres(pooler.target()),
            Some(Keys::single(support::KEY).expect("key")),
        )) {
            Ok(_) => panic!("the runtime started behind a pooler in {mode} mode"),
            Err(err) => assert!(err.to_string().contains("pool_mode"), "{mode}: {err}"),
        }
        if mode == "transaction" {
            // Asked in the simple protocol, which prepares nothing of its own.
            let mut other = pooler.client().expect("another client of the pooler");
            let mut ask = |sql: &str| -> String {
                let messages = other.simple_query(sql).expect(sql);
                messages
                    .iter()
                    .find_map(|m| match m {
                        ::postgres::SimpleQueryMessage::Row(row) => row.get(0).map(str::to_string),
                        _ => None,
                    })
                    .expect("a row")
            };
            let read_only = ask("SHOW transaction_read_only");
            assert_eq!(read_only, "off", "{mode}: the sessions were left writable");
            let prepared = ask("SELECT count(*) FROM pg_prepared_statements");
            assert_eq!(prepared, "0", "{mode}: no statement was left prepared");
        }
    }
}

/// The server's words for a row it cannot send as text, a lost prepared statement and a
/// cancelled one say nothing of their cause: unsctl adds what it is and what to do.
#[test]
fn a_lost_statement_and_a_timeout_say_what_to_do() {
    let database = postgres::cluster().database();
    let conn = unsctl::db::pg::PgConn::open(&database.target(), true).expect("open");
    for (sql, code, says) in [
        (
            "SELECT convert_from('\\xff'::bytea, 'UTF8')",
            "(22021)",
            "UTF8 database",
        ),
        ("EXECUTE s0", "(26000)", "pool_mode = session"),
        (
            "SET statement_timeout = 1; SELECT pg_sleep(5)",
            "(57014)",
            "statement_timeout",
        ),
    ] {
        let said = conn.batch(sql).expect_err(sql).to_string();
        assert!(said.contains(code) && said.contains(says), "{sql}: {said}");
    }
}

/// A session that holds the store's locks (a transaction left open in psql, a
/// migration) keeps no command waiting without end: each transaction bounds its waits
/// for a lock (5 s, as SQLite's busy timeout, unless the role, the database or the URL
/// set a lock_timeout of their own, which is kept), so a read and a change each give up,
/// say what to look for, and change nothing; once the lock is let go the change is made.
#[test]
fn a_lock_another_session_holds_is_waited_for_within_a_bound() {
    use unsctl::db::{Db, DbError};
    let database = every_case_database();
    let setting = |database: &postgres::Database| -> Vec<String> {
        let conn = unsctl::db::pg::PgConn::open(&database.target(), false).expect("open");
        let db = Db::Postgres(&conn);
        let shown = |db: &Db<'_>| -> Result<String, DbError> {
            let text = db.row("SELECT current_setting('lock_timeout')", &[], |row| {
                Ok(match row.cell(0)? {
                    rusqlite::types::ValueRef::Text(text) => String::from_utf8_lossy(text).into(),
                    _ => String::new(),
                })
            })?;
            Ok(text.unwrap_or_default())
        };
        let read = db.read_tx(shown).expect("read");
        let write = db.write_tx(shown).expect("write");
        vec![read, write, shown(&db).expect("outside")]
    };
    assert_eq!(
        setting(&database),
        ["5s", "5s", "0"],
        "bounded in each transaction only"
    );
    let plan = run(&mut database.unsctl(&["dlq", "triage", "-o", "json"]));
    succeeded(&plan);
    let plan: Value = serde_json::from_slice(&plan.stdout).expect("plan");
    let id = support::entry_of_branch(&plan, "RESOLVE");
    let before = history(&database);
    let mut holder = database.client();
    let server = serve(Place::Postgres(database.target()), None);
    let resolve = |why| ["dlq", "resolve", &id, "--confirm", "--yes", "--reason", why];
    let mut over_the_api = support::over_the_api(server.addr);
    over_the_api.args(resolve("held"));
    for (held, mut command, says) in [
        (
            "LOCK TABLE uns_notifications IN ACCESS EXCLUSIVE MODE",
            database.unsctl(&["dlq", "list"]),
            "(55P03)",
        ),
        (
            "SELECT 1 FROM uns_notifications FOR UPDATE",
            database.unsctl(&resolve("held")),
            "(55P03)",
        ),
        // The API's client is told to ask again, not that the server failed.
        (
            "SELECT 1 FROM uns_notifications FOR UPDATE",
            over_the_api,
            "answered 503: the store could not do this just now",
        ),
    ] {
        holder.batch_execute(&format!("BEGIN; {held}")).expect(held);
        let (stopped, out) = run_or_stop(&mut command);
        holder.batch_execute("ROLLBACK").expect("let go");
        let args: Vec<_> = command.get_args().collect();
        // A bulk change names each entry's failure beside it, on stdout.
        let said = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(stopped, "{args:?} still waiting for the lock: {said}");
        assert_eq!(out.status.code(), Some(1), "{args:?}: {said}");
        let what_to_do = match says {
            "(55P03)" => "idle in transaction",
            _ => "nothing was changed: ask again",
        };
        assert!(
            said.contains(says) && said.contains(what_to_do),
            "{args:?}: {said}"
        );
        assert_eq!(history(&database), before, "{args:?} changed nothing");
    }
    let out = run(&mut database.unsctl(&resolve("let go")));
    succeeded(&out);
    assert!(
        history(&database).len() > before.len(),
        "resolved once the lock was let go"
    );
    // A limit the database sets is its own.
    database
        .client()
        .batch_execute(&format!(
            "ALTER DATABASE \"{}\" SET lock_timeout = '1min'",
            database.name
        ))
        .expect("set");
    assert_eq!(setting(&database), ["1min", "1min", "1min"]);
}

/// A role the server knows by a client certificate alone (`cert` in pg_hba.conf, as
/// managed databases and sites with a private CA run it): the certificate and key named
/// by the URL's `sslcert`/`sslkey`, by `PGSSLCERT`/`PGSSLKEY`, or found where libpq looks
/// (`~/.postgresql/postgresql.crt` and `.key`) read the store with no password at all.
/// A key others may read, a file named and missing, and a certificate another root
/// signed are refused, each saying which.
#[test]
fn a_client_certificate_is_offered_as_libpq_offers_it_and_its_key_kept_to_its_owner() {
    let cluster = postgres::cluster();
    let store = cluster.database();
    submit(&store, 2, "EMAIL,SLACK");
    let plain = run(&mut store.unsctl(&["events", "-o", "json"]));
    support::succeeded(&plain);
    let url = |query: &str| {
        format!(
            "postgres://{}@127.0.0.1:{}/{}?{query}",
            postgres::CERT_USER,
            cluster.port,
            store.name
        )
    };
    // No password anywhere: only the certificate can let it in.
    let events = |url: &str, env: &[(&str, &str)]| {
        let mut command = support::unsctl();
        command.args(["--db", url, "events", "-o", "json"]);
        for (name, value) in env {
            command.env(name, value);
        }
        run(&mut command)
    };
    let text = |path: &std::path::Path| path.display().to_string();
    let (cert, key) = (text(&cluster.tls.client.0), text(&cluster.tls.client.1));
    let root = text(&cluster.tls.root);
    let home = tempfile::tempdir().expect("home");
    let dot = home.path().join(".postgresql");
    std::fs::create_dir(&dot).expect(".postgresql");
    std::fs::copy(&cluster.tls.client.0, dot.join("postgresql.crt")).expect("cert");
    std::fs::copy(&cluster.tls.client.1, dot.join("postgresql.key")).expect("key");
    let home_dir = text(home.path());
    let accepted: [(String, Vec<(&str, &str)>); 3] = [
        (
            url(&format!(
                "sslmode=verify-full&sslrootcert={root}&sslcert={cert}&sslkey={key}"
            )),
            vec![],
        ),
        (
            url("sslmode=require"),
            vec![("PGSSLCERT", &cert), ("PGSSLKEY", &key)],
        ),
        (
            url(&format!("sslmode=verify-full&sslrootcert={root}")),
            vec![("HOME", &home_dir)],
        ),
    ];
    each_reads_the_same(events, &accepted, &plain.stdout);

    let loose = home.path().join("loose.key");
    std::fs::copy(&cluster.tls.client.1, &loose).expect("key");
    std::fs::set_permissions(&loose, std::os::unix::fs::PermissionsExt::from_mode(0o644))
        .expect("mode");
    let (impostor, impostor_key) = (text(&cluster.tls.impostor.0), text(&cluster.tls.impostor.1));
    let missing = text(&home.path().join("missing.crt"));
    let refused: [(String, i32, &str); 4] = [
        // Without a certificate the server refuses the role: exit 6.
        (url("sslmode=require"), 6, "certificate"),
        (
            url(&format!(
                "sslmode=require&sslcert={cert}&sslkey={}",
                text(&loose)
            )),
            2,
            "others may read it",
        ),
        (
            url(&format!("sslmode=require&sslcert={missing}&sslkey={key}")),
            2,
            "missing.crt",
        ),
        (
            url(&format!(
                "sslmode=require&sslcert={impostor}&sslkey={impostor_key}"
            )),
            6,
            "did not accept the client certificate",
        ),
    ];
    for (url, code, says) in &refused {
        let out = events(url, &[]);
        let said = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{url}: refused");
        assert_eq!(out.status.code(), Some(*code), "{url}: {said}");
        assert!(said.contains(says), "{url}: {said}");
        assert!(out.stdout.is_empty(), "{url}: nothing read");
        assert!(!said.contains("PRIVATE KEY"), "{said}");
    }
}

/// A database whose encoding is not UTF8 (SQL_ASCII, initdb's default under the C
/// locale) stores any bytes in a text column, and a row PostgreSQL then cannot send as
/// UTF-8 fails every read that meets it: no store is made in one, by the runtime or by
/// a copy, and nothing is written there.
#[test]
fn no_store_is_made_in_a_database_that_keeps_bytes_for_text() {
    let cluster = postgres::cluster();
    let database = cluster.database();
    let mut admin = cluster.admin();
    admin
        .batch_execute(&format!("DROP DATABASE {}", database.name))
        .expect("drop");
    admin
        .batch_execute(&format!(
            "CREATE DATABASE {} ENCODING 'SQL_ASCII' TEMPLATE template0 \
             LC_COLLATE 'C' LC_CTYPE 'C'",
            database.name
        ))
        .expect("a SQL_ASCII database");
    let dir = tempfile::tempdir().expect("dir");
    let file = support::every_case_store(dir.path());
    let copied = run(support::unsctl()
        .env("PGPASSWORD", postgres::PASSWORD)
        .args(["store", "copy", "--from"])
        .arg(&file)
        .args(["--to", &database.url]));
    let submitted = run(&mut database.unsctl(SUBMIT_ONE));
    for out in [copied, submitted] {
        let said = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{said}");
        assert!(
            said.contains("encoding is SQL_ASCII") && said.contains("UTF8"),
            "{said}"
        );
    }
    let tables: i64 = database
        .client()
        .query_one(
            "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = 'public'",
            &[],
        )
        .expect("count")
        .get(0);
    assert_eq!(tables, 0, "nothing was made");
}

/// A role that may read the store but not change it (a reporting role, one granted
/// SELECT only) reads as any other; a change is refused before any entry is tried,
/// naming the role and what it lacks, and the runtime does not start with it: otherwise
/// each entry of a bulk resolve, and each of the worker's claims, failed on its own.
#[test]
fn a_role_that_may_only_read_is_refused_a_change_up_front() {
    let database = every_case_database();
    database
        .client()
        .batch_execute(&format!(
            "CREATE ROLE viewer_{name} LOGIN PASSWORD '{password}';
             GRANT SELECT ON ALL TABLES IN SCHEMA public TO viewer_{name}",
            name = database.name,
            password = postgres::PASSWORD
        ))
        .expect("a role that may only read");
    let url = database.url.replacen(
        &format!("{}@", postgres::USER),
        &format!("viewer_{}@", database.name),
        1,
    );
    let as_viewer = |args: &[&str]| {
        run(support::unsctl()
            .env("PGPASSWORD", postgres::PASSWORD)
            .args(["--db", &url])
            .args(args))
    };
    let before = history(&database);
    let out = as_viewer(&["dlq", "triage", "-o", "json"]);
    support::succeeded(&out);
    let plan: Value = serde_json::from_slice(&out.stdout).expect("plan");
    let ids: Vec<String> = plan["entries"]
        .as_array()
        .expect("entries")
        .iter()
        .filter(|entry| entry["branch"] == "RESOLVE")
        .map(|entry| entry["id"].as_str().expect("id").to_string())
        .collect();
    assert!(!ids.is_empty(), "{plan}");
    let mut args = vec!["dlq", "resolve"];
    args.extend(ids.iter().map(String::as_str));
    args.extend(["--confirm", "--yes", "--reason", "x"]);
    let out = as_viewer(&args);
    let text = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(
        text.contains("may read the store but not change it"),
        "{text}"
    );
    assert!(
        text.contains(&format!("viewer_{}", database.name)),
        "{text}"
    );
    assert!(!text.contains("failed"), "no entry was tried: {text}");
    let target = unsctl::db::pg::Target::new(&url, Some(postgres::PASSWORD.into()), None);
    match unsctl::server::start(ServerConfig::api_only(
        Place::Postgres(target),
        Some(Keys::single(support::KEY).expect("key")),
    )) {
        Ok(_) => panic!("the runtime started with a role that may not write"),
        Err(err) => assert!(err.to_string().contains("not change it"), "{err}"),
    }
    assert_eq!(history(&database), before, "nothing was written");
}

/// The server ended every session of a running API's pools (what a restart or a
/// failover does; here `pg_terminate_backend`). A pooled connection idle past the
/// check is asked whether it is still there before it is lent, so no request given
/// one fails: reads, and a resolve through the writer's pool.
#[test]
fn a_pooled_session_the_server_ended_is_never_lent() {
    let database = every_case_database();
    let server = serve(Place::Postgres(database.target()), None);
    let list = || run(support::over_the_api(server.addr).args(["dlq", "triage", "-o", "json"]));
    let first = list();
    support::succeeded(&first);
    let plan: Value = serde_json::from_slice(&first.stdout).expect("plan");
    let id = support::entry_of_branch(&plan, "RESOLVE");
    // Several at once, so the pool holds more than one session.
    std::thread::scope(|scope| {
        for _ in 0..4 {
            scope.spawn(|| assert!(list().status.success()));
        }
    });
    let ended = end_unsctls_sessions(&database);
    assert!(ended >= 2, "the pools' sessions ended: {ended}");
    let since = std::time::Instant::now();
    support::wait_until(
        "the pools' sessions to be idle past the check",
        std::time::Duration::from_secs(30),
        || since.elapsed() > unsctl::runtime::writer::Pool::CHECKED_AFTER_IDLE * 2,
    );
    for _ in 0..3 {
        let out = list();
        support::succeeded(&out);
        assert_eq!(out.stdout, first.stdout, "the same answer");
    }
    let out = run(support::over_the_api(server.addr).args([
        "dlq",
        "resolve",
        &id,
        "--confirm",
        "--yes",
        "--reason",
        "x",
    ]));
    support::succeeded(&out);
}

/// Ends every session unsctl holds on `database` (as a restart or a failover does); how
/// many.
fn end_unsctls_sessions(database: &postgres::Database) -> i64 {
    postgres::cluster()
        .admin()
        .query_one(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
             WHERE datname = $1 AND application_name = 'unsctl' AND pid <> pg_backend_pid()",
            &[&database.name],
        )
        .expect("terminate")
        .get(0)
}

/// A command that polls reads on once the server is back, and says so once: through a
/// restart (here, the server ending its session and refusing new ones for a while)
/// `events --follow` said "trying again" at every poll, for ever on the dead session, and
/// never showed another event.
#[test]
fn a_follow_reads_on_after_an_outage_saying_each_failure_once() {
    let database = every_case_database();
    let dir = tempfile::tempdir().expect("dir");
    let (out, err) = (dir.path().join("out"), dir.path().join("err"));
    let mut follow = database
        .unsctl(&[
            "events",
            "--follow",
            "--kind",
            "DLQ_RESOLVED",
            "--interval",
            "0.05",
        ])
        .stdin(std::process::Stdio::null())
        .stdout(std::fs::File::create(&out).expect("out"))
        .stderr(std::fs::File::create(&err).expect("err"))
        .spawn()
        .expect("unsctl");
    let read = |path: &Path| std::fs::read_to_string(path).unwrap_or_default();
    let wait = std::time::Duration::from_secs(30);
    assert!(
        support::wait_for(wait, || read(&err).contains("following")),
        "{}",
        read(&err)
    );
    let allow = |allowed: bool| {
        postgres::cluster()
            .admin()
            .batch_execute(&format!(
                "ALTER DATABASE {} ALLOW_CONNECTIONS {allowed}",
                database.name
            ))
            .expect("alter the database");
    };
    allow(false);
    assert!(
        end_unsctls_sessions(&database) >= 1,
        "the follow's session ended"
    );
    // Refused while it is down: polled again and again (the server logs each refusal),
    // said once.
    let refusal = format!(
        "database \"{}\" is not currently accepting connections",
        database.name
    );
    assert!(
        support::wait_for(wait, || postgres::cluster().log().matches(&refusal).count()
            >= 5),
        "{}",
        read(&err)
    );
    allow(true);
    let plan = run(&mut database.unsctl(&["dlq", "triage", "-o", "json"]));
    succeeded(&plan);
    let plan: Value = serde_json::from_slice(&plan.stdout).expect("plan");
    let id = support::entry_of_branch(&plan, "RESOLVE");
    succeeded(&run(&mut database.unsctl(&[
        "dlq",
        "resolve",
        &id,
        "--confirm",
        "--yes",
        "--reason",
        "x",
    ])));
    let shown = support::wait_for(wait, || {
        read(&out)
            .lines()
            .any(|line| line.contains("DLQ_RESOLVED") && line.contains(&id))
    });
    let _ = follow.kill();
    let _ = follow.wait();
    let said = read(&err);
    assert!(shown, "stdout:\n{}\nstderr:\n{said}", read(&out));
    let failures: Vec<&str> = said
        .lines()
        .filter(|l| l.contains("trying again"))
        .collect();
    assert!(
        (1..=2).contains(&failures.len()) && failures.windows(2).all(|pair| pair[0] != pair[1]),
        "each failure once: {said}"
    );
    assert_eq!(said.matches("reading again, after ").count(), 1, "{said}");
}

/// The session made again for a reader refuses writes as the first did, and reads as it
/// did once the server ended the first.
#[test]
fn a_readers_session_made_again_still_refuses_every_write() {
    let database = every_case_database();
    let store = unsctl::store::direct::DirectStore::open_postgres(&database.target(), false)
        .expect("the store opens");
    let count = || {
        store
            .db()
            .row("SELECT COUNT(*) FROM uns_notifications", &[], |row| {
                Ok(unsctl::db::value::Cells::new(row).integer(0, "count"))
            })
    };
    let before = count().expect("read").expect("a count");
    assert!(end_unsctls_sessions(&database) >= 1);
    // The statement that finds the session gone fails; the next reads on a new one.
    let _ = count();
    assert_eq!(count().expect("read again"), Some(before));
    let write = store.db().execute(
        "UPDATE uns_notifications SET status = status WHERE id = ?1",
        &[rusqlite::types::Value::Text("n".into())],
    );
    let refused = write
        .expect_err("a reader's session takes no write")
        .to_string();
    assert!(refused.contains("read-only"), "{refused}");
}

/// Sites set `default_transaction_isolation` to REPEATABLE READ or SERIALIZABLE for their
/// own applications. The store's writes begin at READ COMMITTED whatever it says: two
/// processes of four workers each claim and record every notification once, with no
/// write refused (40001), no lease left to run out and no call made twice.
#[test]
fn a_site_default_of_serializable_changes_no_write_of_the_runtime() {
    use unsctl::lab::fakes::Behavior;
    let fakes = Fakes::start().expect("fakes");
    fakes.control.set_default(Behavior::Accept);
    let database = postgres::cluster().database();
    database
        .client()
        .batch_execute(&format!(
            "ALTER DATABASE {} SET default_transaction_isolation = 'serializable'",
            database.name
        ))
        .expect("the site's default");
    let ids = submit(&database, 80, "SLACK");
    let logs = tempfile::tempdir().expect("a directory");
    let servers: Vec<(Serve, std::path::PathBuf)> = ["A", "B"]
        .into_iter()
        .map(|name| {
            let path = logs.path().join(format!("{name}.log"));
            let log = std::fs::File::create(&path).expect("a log");
            // A lease no call here comes near, even on a busy machine: a reclaim can only
            // be a write that was lost.
            let args = ["--concurrency", "4", "--lease-seconds", "120"];
            let server = Serve::start_with(&database, &fakes, name, &args, log.into());
            (server, path)
        })
        .collect();
    let limit = std::time::Duration::from_secs(120);
    support::wait_until("every notification to settle", limit, || {
        open_rows(&database) == 0
    });
    let events = history(&database);
    let count = |kind: &str| events.iter().filter(|e| e.kind == kind).count();
    assert_eq!(count("DELIVERED"), ids.len());
    assert_eq!(count("ATTEMPT_STARTED"), ids.len(), "each claimed once");
    assert_eq!(fakes.control.ledger().len(), ids.len(), "each sent once");
    for (server, path) in servers {
        drop(server);
        let log = std::fs::read_to_string(&path).expect("the log");
        assert!(
            !log.contains("store error"),
            "a write was refused: {}",
            log.lines().next().unwrap_or_default()
        );
    }
}

/// One worker thread with a lease longer than any moment without the database, however
/// slow the machine, its log kept at the path returned (with the directory that holds it).
fn serve_logged(
    database: &postgres::Database,
    fakes: &Fakes,
) -> (Serve, tempfile::TempDir, PathBuf) {
    let logs = tempfile::tempdir().expect("a directory");
    let path = logs.path().join("serve.log");
    let log = std::fs::File::create(&path).expect("a log");
    let args = ["--concurrency", "1", "--lease-seconds", "120"];
    let server = Serve::start_with(database, fakes, "A", &args, log.into());
    (server, logs, path)
}

/// The one notification settled before its lease ran out, sent once under its one
/// claim, each write of it once, and `retried` in the worker's log.
fn settled_under_one_claim(
    database: &postgres::Database,
    fakes: &Fakes,
    log: &Path,
    retried: &str,
) {
    // Without the write tried again, the row would wait out its lease.
    support::wait_until(
        "the notification to settle before its lease runs out",
        std::time::Duration::from_secs(60),
        || open_rows(database) == 0,
    );
    let events = history(database);
    let count = |kind: &str| events.iter().filter(|e| e.kind == kind).count();
    assert_eq!(count("ATTEMPT_STARTED"), 1, "no reclaim");
    assert_eq!(count("CHANNEL_ATTEMPT_STARTED"), 1, "the start, once");
    assert_eq!(count("CHANNEL_ATTEMPT_RESULT"), 1, "the answer, once");
    assert_eq!(count("DELIVERED"), 1);
    assert_eq!(count("LEASE_LOST"), 0);
    assert_eq!(fakes.control.ledger().len(), 1, "one send");
    let log = std::fs::read_to_string(log).expect("the log");
    assert!(
        log.contains(&format!("could not record {retried}; trying again")),
        "the write of {retried} was tried again: {log}"
    );
}

/// The database goes away while a provider has the call (a restart, a failover) and
/// comes back before the lease runs out: the worker writes the provider's answer and
/// settles as soon as it can, instead of leaving the lease to run out and a reclaim to
/// call again. One send, one claim, one result.
#[test]
fn a_database_gone_for_a_moment_loses_no_providers_answer() {
    let (fakes, database, _, victim) = one_send_held(1, 0);
    // One thread: every failure the log names is the answer's write.
    let (server, _logs, path) = serve_logged(&database, &fakes);
    let limit = std::time::Duration::from_secs(60);
    wait_until_taken(&fakes, &victim);
    let mut admin = postgres::cluster().admin();
    let allow = |admin: &mut ::postgres::Client, allowed: bool| {
        admin
            .batch_execute(&format!(
                "ALTER DATABASE {} ALLOW_CONNECTIONS {allowed}",
                database.name
            ))
            .expect("ALTER DATABASE");
    };
    allow(&mut admin, false);
    admin
        .execute(
            // Each session waited for until it has ended.
            "SELECT pg_terminate_backend(pid, 10000) FROM pg_stat_activity WHERE datname = $1",
            &[&database.name],
        )
        .expect("the sessions ended");
    fakes.control.release();
    support::wait_until("the worker to find the database gone", limit, || {
        let log = std::fs::read_to_string(&path).unwrap_or_default();
        log.contains("could not record") || log.contains("store error")
    });
    allow(&mut admin, true);
    settled_under_one_claim(&database, &fakes, &path, "the provider's answer");
    drop(server);
}

/// The database refuses a channel's start for a moment (a serialization failure here, as
/// a failover or a site's own trigger can make one): the worker writes it again while its
/// lease holds, so the notification is sent under its first claim. Before, the attempt
/// was dropped, and the row waited out its lease for a reclaim, with nothing sent.
#[test]
fn a_start_refused_for_a_moment_is_written_again_under_the_same_lease() {
    use unsctl::lab::fakes::Behavior;
    let fakes = Fakes::start().expect("fakes");
    fakes.control.set_default(Behavior::Accept);
    let database = postgres::cluster().database();
    submit(&database, 1, "SLACK");
    // A sequence is not rolled back with the insert it refused: the first start only.
    database
        .client()
        .batch_execute(
            "CREATE SEQUENCE refused_once;
             CREATE FUNCTION refuse_once() RETURNS trigger LANGUAGE plpgsql AS
               $$ BEGIN
                    IF NEW.kind = 'CHANNEL_ATTEMPT_STARTED' THEN
                      IF nextval('refused_once') = 1 THEN
                        RAISE EXCEPTION 'could not serialize access' USING ERRCODE = '40001';
                      END IF;
                    END IF;
                    RETURN NEW;
                  END $$;
             CREATE TRIGGER refuse_once BEFORE INSERT ON uns_events
               FOR EACH ROW EXECUTE FUNCTION refuse_once();",
        )
        .expect("a start refused once");
    let (server, _logs, path) = serve_logged(&database, &fakes);
    settled_under_one_claim(&database, &fakes, &path, "the channel's start");
    drop(server);
    let refused: i64 = database
        .client()
        .query_one("SELECT last_value FROM refused_once", &[])
        .expect("the sequence")
        .get(0);
    assert!(refused >= 2, "the start was refused, then written");
}

/// A failed COMMIT says whether anything may have been kept, as PostgreSQL says it: an
/// ERROR (a deferred check that refused) kept nothing; a session the server ended during
/// COMMIT (FATAL) may have kept it all, as when a wait for a synchronous standby is cut
/// short, so the worker never writes a settlement again after one.
#[test]
fn a_commit_the_server_ended_is_never_taken_for_one_that_kept_nothing() {
    use unsctl::db::{Db, pg::PgConn};
    let database = postgres::cluster().database();
    // The store first: a database holding anything else is not one unsctl makes a store in.
    let conn = PgConn::open(&database.target(), true).expect("open");
    database
        .client()
        .batch_execute(
            "CREATE TABLE checked (n int);
             CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS
               $$ BEGIN IF NEW.n < 0 THEN RAISE EXCEPTION 'no'; END IF;
                        PERFORM pg_sleep(CASE WHEN NEW.n = 1 THEN 60 ELSE 0 END);
                        RETURN NEW; END $$;
             CREATE CONSTRAINT TRIGGER at_commit AFTER INSERT ON checked
               DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION refuse();
             GRANT ALL ON checked TO PUBLIC;",
        )
        .expect("a table checked at COMMIT");
    let refused = Db::Postgres(&conn)
        .write_tx(|tx| tx.batch("INSERT INTO checked VALUES (-1)"))
        .expect_err("refused at COMMIT");
    assert!(!refused.may_have_committed(), "{refused}");
    let ended = std::thread::scope(|scope| {
        let committing = scope.spawn(|| {
            let conn = PgConn::open(&database.target(), true).expect("open");
            Db::Postgres(&conn).write_tx(|tx| tx.batch("INSERT INTO checked VALUES (1)"))
        });
        let mut admin = database.client();
        let limit = std::time::Duration::from_secs(60);
        support::wait_until("the COMMIT to be under way", limit, || {
            admin
                .query(
                    "SELECT 1 FROM pg_stat_activity WHERE query = 'COMMIT' AND wait_event = 'PgSleep'",
                    &[],
                )
                .is_ok_and(|rows| !rows.is_empty())
        });
        admin
            .batch_execute(
                "SELECT pg_terminate_backend(pid, 10000) FROM pg_stat_activity WHERE query = 'COMMIT'",
            )
            .expect("ended");
        committing.join().expect("the thread")
    });
    let ended = ended.expect_err("ended during COMMIT");
    assert!(ended.may_have_committed(), "{ended}");
    assert!(
        ended
            .to_string()
            .contains("whether the change was kept is not known")
    );
}

/// A failover not yet finished, as the runtime sees it (`on`): the database's default is
/// made read-only and the runtime's sessions are ended, so every one it opens again takes
/// no writes; then (`!on`) the name reaches a primary again, for sessions opened after.
fn takes_no_writes(database: &postgres::Database, on: bool) {
    let setting = if on {
        "SET default_transaction_read_only = on"
    } else {
        "RESET default_transaction_read_only"
    };
    let mut admin = postgres::cluster().admin();
    admin
        .batch_execute(&format!("ALTER DATABASE {} {setting}", database.name))
        .expect("ALTER DATABASE");
    if on {
        admin
            .execute(
                // Each session waited for until it has ended.
                "SELECT pg_terminate_backend(pid, 10000) FROM pg_stat_activity
                 WHERE datname = $1 AND application_name = 'unsctl'",
                &[&database.name],
            )
            .expect("the sessions ended");
    }
}

/// A failover that left the database's name on a server taking no writes for a while (the
/// old primary back as a standby, before the name moved): every session the pool opened
/// meanwhile refuses writes for as long as it lives, though nothing closes it. Once the
/// name reaches a primary again, the worker settles what is due without a restart: a
/// session that refused a write for taking none is closed, never lent again.
#[test]
fn a_session_that_took_no_writes_is_closed_not_lent_again() {
    use unsctl::lab::fakes::Behavior;
    let fakes = Fakes::start().expect("fakes");
    fakes.control.set_default(Behavior::Accept);
    let database = postgres::cluster().database();
    let (server, _logs, path) = serve_logged(&database, &fakes);
    let limit = std::time::Duration::from_secs(60);
    // The failover: the runtime's sessions end, and the ones it opens again take no writes.
    takes_no_writes(&database, true);
    support::wait_until("the worker to find no writes taken", limit, || {
        std::fs::read_to_string(&path)
            .unwrap_or_default()
            .contains("takes no writes")
    });
    // Meanwhile each of its threads waits longer after each refusal in a row, rather than
    // claim and open a session five times a second until the failover ends.
    support::wait_until(
        "a thread to wait longer after refusals in a row",
        limit,
        || {
            std::fs::read_to_string(&path)
                .unwrap_or_default()
                .lines()
                .filter(|line| line.contains("store error; retrying"))
                .filter_map(|line| {
                    line.split("pause_ms=")
                        .nth(1)?
                        .split(' ')
                        .next()?
                        .parse::<u64>()
                        .ok()
                })
                .any(|pause| pause >= 1200)
        },
    );
    // The name reaches a primary again: sessions opened from now on take writes.
    takes_no_writes(&database, false);
    let ids = submit(&database, 1, "SLACK");
    support::wait_until(
        "the notification to settle on a session that takes writes",
        limit,
        || open_rows(&database) == 0,
    );
    let events = history(&database);
    let count = |kind: &str| events.iter().filter(|e| e.kind == kind).count();
    assert_eq!(count("DELIVERED"), ids.len());
    assert_eq!(fakes.control.ledger().len(), 1, "one send");
    drop(server);
}

/// The provider answers while the database's name reaches a server that takes no writes
/// (a failover not yet finished: the old primary back as a standby): the worker writes the
/// answer again, on a new session each time, until the name reaches a primary while its
/// lease holds, and settles under its one claim. Before, a write refused for taking none
/// was not tried again: the answer was lost, and a reclaim called the provider again.
#[test]
fn an_answer_refused_for_a_moment_by_a_server_taking_no_writes_is_written_again() {
    let (fakes, database, _, victim) = one_send_held(1, 0);
    let (server, _logs, path) = serve_logged(&database, &fakes);
    let limit = std::time::Duration::from_secs(60);
    wait_until_taken(&fakes, &victim);
    takes_no_writes(&database, true);
    fakes.control.release();
    support::wait_until(
        "the answer to be refused for taking no writes",
        limit,
        || {
            std::fs::read_to_string(&path)
                .unwrap_or_default()
                .lines()
                .any(|line| line.contains("could not record") && line.contains("takes no writes"))
        },
    );
    takes_no_writes(&database, false);
    settled_under_one_claim(&database, &fakes, &path, "the provider's answer");
    drop(server);
}

/// A context in the config file that names a database by its URL reads it as `--db`
/// does, beside a context of a file, alone and across contexts; the file never holds its
/// password, and nothing printed does.
#[test]
fn a_context_names_a_database_by_its_url_as_db_does() {
    let dir = tempfile::tempdir().expect("dir");
    let file = support::every_case_store(dir.path());
    let database = postgres::cluster().database_from(&file);
    let config = dir.path().join("config.toml");
    let write_config = |url: &str| {
        std::fs::write(
            &config,
            format!(
                "[contexts.pg]\ndb = \"{url}\"\n\n[contexts.file]\ndb = \"{}\"\n",
                file.display()
            ),
        )
        .expect("config");
    };
    write_config(&database.url);
    let unsctl = |args: &[&str]| {
        let out = support::unsctl()
            .env("UNSCTL_CONFIG", &config)
            .env("PGPASSWORD", postgres::PASSWORD)
            .args(args)
            .output()
            .expect("unsctl");
        let said = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(!said.contains(postgres::PASSWORD), "{said}");
        (out, said)
    };
    let (listed, said) = unsctl(&["context", "list"]);
    assert!(listed.status.success(), "{said}");
    assert!(said.contains(&format!("db {}", database.url)), "{said}");
    // The database's entries, read through the context, are the file's copied into it:
    // the same ids on the same branches.
    let plan = |context: &str| {
        let (out, said) = unsctl(&["--context", context, "dlq", "triage", "-o", "json"]);
        assert!(out.status.success(), "{context}: {said}");
        let plan: Value = serde_json::from_slice(&out.stdout).expect("json");
        plan["entries"]
            .as_array()
            .map(|entries| {
                entries
                    .iter()
                    .map(|e| (e["id"].to_string(), e["branch"].to_string()))
                    .collect::<Vec<_>>()
            })
            .unwrap_or_default()
    };
    let entries = plan("pg");
    assert!(!entries.is_empty(), "{entries:?}");
    assert_eq!(entries, plan("file"));
    let (fleet, said) = unsctl(&["--all-contexts", "dlq", "triage", "-o", "json"]);
    assert!(fleet.status.success(), "{said}");
    let fleet: Value = serde_json::from_slice(&fleet.stdout).expect("json");
    let read: Vec<&Value> = fleet["contexts"]
        .as_array()
        .map(|c| c.iter().filter(|c| c["error"].is_null()).collect())
        .unwrap_or_default();
    assert_eq!(read.len(), 2, "{fleet:#}");
    // A URL with its password in the file is refused, and the refusal does not repeat it.
    write_config(
        &database
            .url
            .replacen('@', &format!(":{}@", postgres::PASSWORD), 1),
    );
    let (refused, said) = unsctl(&["--context", "pg", "dlq", "triage"]);
    assert_eq!(refused.status.code(), Some(2), "{said}");
    assert!(said.contains("holds a password"), "{said}");
}
