//! Helpers shared by the integration tests: real peers started on loopback.
#![allow(dead_code)]

pub mod gate;
pub mod incident;
pub mod postgres;
pub mod recording;
pub mod relay;
pub mod runtime;
pub mod tmux;

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use unsctl::db::Db;

pub const SMTP_SINK: &str = "/usr/sbin/smtp-sink";

/// The one way tests start the real binary: with an environment cleared of everything
/// but `PATH`, a `HOME` and `UNSCTL_CONFIG` that name nothing, and no stdin. So no test
/// reads the developer's config, store variables or colour settings; a test that wants
/// one sets it.
pub fn unsctl() -> Command {
    let mut command = cleared(env!("CARGO_BIN_EXE_unsctl"));
    command.stdin(Stdio::null());
    command
}

/// `program` with an environment of `PATH` alone, plus a `HOME` and `UNSCTL_CONFIG` that
/// name nothing.
fn cleared(program: &str) -> Command {
    let mut command = Command::new(program);
    command
        .env_clear()
        .env(
            "PATH",
            std::env::var_os("PATH").unwrap_or_else(|| "/usr/bin:/bin".into()),
        )
        .env("HOME", "/nonexistent/unsctl-test-home")
        .env("UNSCTL_CONFIG", "/nonexistent/unsctl-test-home/config.toml");
    command
}

/// The one way tests start a shell, `script`, `tmux` or `runuser` (which then start the
/// binary): from the same cleared environment as [`unsctl`], with a terminal type and a
/// UTF-8 locale, so nothing of the caller's (`UNS_*`, `NO_COLOR`, `HOME`, a config)
/// reaches what runs inside. A test that wants a variable sets it.
/// A child process that is killed and waited for when the test ends, however it ends: a
/// failed assertion must not leave it running, holding the test's output open.
pub struct Reaped(pub std::process::Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Asserts that a command ran to success, showing what it said on stderr when it did not.
#[track_caller]
pub fn succeeded(out: &std::process::Output) {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

pub fn launch(program: &str) -> Command {
    let mut command = cleared(program);
    command.env("LANG", "C.UTF-8").env("TERM", "xterm-256color");
    command
}

/// [`launch`] for a person at their own machine (the README's new user): their `HOME`
/// and Rust toolchain, and nothing else of the caller's.
pub fn launch_as_user(program: &str) -> Command {
    let mut command = launch(program);
    for name in ["HOME", "CARGO_HOME", "RUSTUP_HOME"] {
        if let Some(value) = std::env::var_os(name) {
            command.env(name, value);
        }
    }
    command
}

/// The filters every snapshot of ours uses: each of `ids` as `[ID1]`, `[ID2]`, ... (then
/// any other id as `[ID]`), lease tokens as `[TOKEN]`, a plan's store fingerprint as
/// `[STORE]`.
pub fn snapshot_settings(ids: &[String]) -> insta::Settings {
    let mut settings = insta::Settings::clone_current();
    for (n, id) in ids.iter().enumerate() {
        settings.add_filter(&regex_escape(id), format!("[ID{}]", n + 1));
    }
    settings.add_filter(r"n-[0-9a-f]{32}", "[ID]");
    settings.add_filter(r#""store": "[0-9a-f]{16}""#, r#""store": "[STORE]""#);
    settings.add_filter(
        r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}",
        "[TOKEN]",
    );
    settings
}

/// `text` as a regular expression that matches it literally.
pub fn regex_escape(text: &str) -> String {
    text.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_string()
            } else {
                format!("\\{c}")
            }
        })
        .collect()
}

/// The two ways to reach a store: the file itself, or the API server over it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    Sqlite,
    Http,
}

/// Every backend, for the tests that must print the same bytes on both.
pub const BACKENDS: [Backend; 2] = [Backend::Sqlite, Backend::Http];

impl Backend {
    pub fn name(self) -> &'static str {
        match self {
            Backend::Sqlite => "sqlite",
            Backend::Http => "api",
        }
    }

    /// The global flags that point unsctl at `db`, directly or through `server` over it.
    pub fn flags(self, db: &Path, server: &unsctl::server::RunningServer) -> Vec<String> {
        match self {
            Backend::Sqlite => vec!["--db".into(), db.display().to_string()],
            Backend::Http => vec!["--api".into(), format!("http://{}", server.addr)],
        }
    }

    /// The launcher pointed at this backend, with the test key when it is the API.
    pub fn command(self, db: &Path, server: &unsctl::server::RunningServer) -> Command {
        match self {
            Backend::Sqlite => {
                let mut command = unsctl();
                command.args(self.flags(db, server));
                command
            }
            Backend::Http => over_the_api(server.addr),
        }
    }
}

/// The launcher pointed at the API at `addr` (a server, or a proxy before one), with the
/// test key.
pub fn over_the_api(addr: SocketAddr) -> Command {
    let mut command = unsctl();
    command
        .args(["--api", &format!("http://{addr}")])
        .env("UNS_API_KEY", KEY);
    command
}

/// Polls `condition` every 10 ms until it holds; fails the test after `limit`, naming
/// `what` was awaited. Tests wait for events this way, never for a fixed time.
pub fn wait_until(what: &str, limit: Duration, condition: impl FnMut() -> bool) {
    assert!(
        wait_for(limit, condition),
        "timed out after {limit:?} waiting for {what}"
    );
}

/// Polls `condition` every 10 ms for at most `limit`; whether it came to hold. For the
/// tests that say more than "timed out" when it did not.
pub fn wait_for(limit: Duration, mut condition: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    loop {
        if condition() {
            return true;
        }
        if start.elapsed() >= limit {
            return false;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// The system clock, in unix seconds: the clock real peers stamp their records by.
pub fn wall_clock() -> f64 {
    unsctl::clock::Clock::now(&unsctl::clock::SystemClock)
}

/// Waits until the system clock has passed `at` (unix seconds): for a real peer that
/// stamps its records by it (a relay's log, a provider's API) and a window that must
/// have closed. The condition is the instant, named by the caller, not a guessed pause.
pub fn wait_past(what: &str, at: f64) {
    let limit = Duration::from_secs_f64((at - wall_clock()).max(0.0) + 5.0);
    wait_until(what, limit, || wall_clock() > at);
}

/// A free loopback port (there is a small race between this and the bind that uses it).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .map(|addr| addr.port())
        .expect("a free loopback port")
}

/// Postfix's `smtp-sink` on 127.0.0.1, dumping every message it takes into a folder.
pub struct SmtpSink {
    pub addr: SocketAddr,
    child: Child,
    dumps: tempfile::TempDir,
}

impl SmtpSink {
    /// Starts the sink with extra flags (`-W .:3`, `-f DATA`, `-q RCPT`, ...).
    pub fn start(flags: &[&str]) -> Self {
        assert!(
            Path::new(SMTP_SINK).exists(),
            "{SMTP_SINK} is missing: install Debian's postfix package (.ci/run does)"
        );
        let dumps = tempfile::tempdir().expect("dump dir");
        // smtp-sink drops root privileges to -u; the dump folder must be writable then.
        set_mode(dumps.path(), 0o777);
        let port = free_port();
        let addr: SocketAddr = format!("127.0.0.1:{port}").parse().expect("addr");
        let template = format!("{}/msg.", dumps.path().display());
        let mut command = Command::new(SMTP_SINK);
        if is_root() {
            command.args(["-u", "nobody"]);
        }
        let child = command
            .args(["-d", &template])
            .args(flags)
            .arg(addr.to_string())
            .arg("64")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start smtp-sink");
        wait_for_port(addr);
        Self { addr, child, dumps }
    }

    /// The messages the sink really received, as dumped.
    pub fn received(&self) -> Vec<String> {
        let mut files: Vec<PathBuf> = std::fs::read_dir(self.dumps.path())
            .map(|entries| entries.filter_map(|e| e.ok().map(|e| e.path())).collect())
            .unwrap_or_default();
        files.sort();
        files
            .iter()
            .filter_map(|path| std::fs::read_to_string(path).ok())
            .collect()
    }
}

impl Drop for SmtpSink {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .map(|out| String::from_utf8_lossy(&out.stdout).trim() == "0")
        .unwrap_or(false)
}

fn set_mode(path: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    let _ = std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode));
}

/// A test server over `db` (no worker), with key `KEY`.
pub fn server(db: &Path) -> unsctl::server::RunningServer {
    unsctl::server::start(unsctl::server::ServerConfig::api_only(
        db.to_path_buf(),
        Some(unsctl::server::Keys::single(KEY).expect("key")),
    ))
    .expect("server starts")
}

/// [`server`], its clock standing at `now` (unix seconds) until told otherwise: what
/// the server calls now, whatever the test machine's clock says.
pub fn server_at(db: &Path, now: f64) -> unsctl::server::RunningServer {
    unsctl::server::start_with_clock(
        unsctl::server::ServerConfig::api_only(
            db.to_path_buf(),
            Some(unsctl::server::Keys::single(KEY).expect("key")),
        ),
        std::sync::Arc::new(unsctl::clock::ManualClock::new(now)),
    )
    .expect("server starts")
}

/// A notification's status and whether it is in the DLQ, as stored in `db` now.
pub fn status(db: &Path, id: &str) -> (String, bool) {
    rusqlite::Connection::open(db)
        .expect("open")
        .query_row(
            "SELECT status, dead_letter FROM uns_notifications WHERE id = ?1",
            [id],
            |r| Ok((r.get(0)?, r.get::<_, i64>(1)? == 1)),
        )
        .expect("row")
}

pub const KEY: &str = "test-key-0123456789";

/// Waits until something listens on `addr` (at most 60 s: a guard against a peer that never
/// starts, never a pace).
pub fn wait_for_port(addr: SocketAddr) {
    wait_until(
        &format!("something to listen on {addr}"),
        Duration::from_secs(60),
        || TcpStream::connect_timeout(&addr, Duration::from_millis(100)).is_ok(),
    );
}

/// Starts `command` (its stderr piped), reads its stderr until a line holds `said`,
/// sends it SIGTERM at once, and waits for it to exit (at most 30 s): its exit status
/// and all it wrote to stderr.
pub fn terminated_once_it_says(
    mut command: Command,
    said: &str,
) -> (std::process::ExitStatus, String) {
    use std::io::BufRead;
    let mut child = command.stderr(Stdio::piped()).spawn().expect("spawn");
    let mut lines = std::io::BufReader::new(child.stderr.take().expect("stderr")).lines();
    let mut written = String::new();
    for line in lines.by_ref() {
        let line = line.expect("stderr line");
        written.push_str(&line);
        written.push('\n');
        if line.contains(said) {
            // At once, from this process: no `kill` to start in between.
            let pid = libc::pid_t::try_from(child.id()).expect("pid");
            assert_eq!(unsafe { libc::kill(pid, libc::SIGTERM) }, 0, "kill");
            break;
        }
    }
    assert!(written.contains(said), "it never said {said:?}: {written}");
    let stopped = wait_for(Duration::from_secs(30), || {
        matches!(child.try_wait(), Ok(Some(_)))
    });
    if !stopped {
        let _ = child.kill();
    }
    for line in lines {
        written.push_str(&line.unwrap_or_default());
        written.push('\n');
    }
    assert!(stopped, "still running 30 s after SIGTERM: {written}");
    (child.wait().expect("status"), written)
}

/// Waits until an HTTP server on `addr` answers a request (at most 10 s): not only
/// listening, which the kernel does from the bind on, but serving.
pub fn wait_for_answer(addr: SocketAddr) {
    use std::io::{Read, Write};
    let answers = || -> std::io::Result<bool> {
        let mut stream = TcpStream::connect_timeout(&addr, Duration::from_millis(100))?;
        stream.set_read_timeout(Some(Duration::from_secs(5)))?;
        stream.write_all(b"GET /healthz HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n")?;
        let mut start = [0u8; 9];
        stream.read_exact(&mut start)?;
        Ok(start.starts_with(b"HTTP/1."))
    };
    wait_until(
        &format!("an HTTP answer from {addr}"),
        Duration::from_secs(10),
        || answers().unwrap_or(false),
    );
}

use serde_json::json;
use unsctl::model::Channel;
use unsctl::runtime::engine::{self, Backoff, ClaimOutcome, DeliveryResult, NewNotification};

const BACKOFF: Backoff = Backoff {
    base_seconds: 1.0,
    max_seconds: 1.0,
};

/// Adds a notification and plays one attempt where each channel gets `results[i]`,
/// settled under a held lease. Returns its id.
pub fn play(
    conn: &rusqlite::Connection,
    now: f64,
    channels: &[Channel],
    results: &[DeliveryResult],
    max_attempts: i64,
) -> String {
    let id = engine::submit(
        &Db::Sqlite(conn),
        now,
        &NewNotification {
            channels: channels.iter().copied().collect(),
            payload: json!({"recipient": "ops@example.com", "subject": "seeded", "body": "seeded"}),
            idempotency_key: None,
            max_attempts,
        },
    )
    .expect("submit")
    .id;
    let ClaimOutcome::Claimed(lease) =
        engine::claim(&Db::Sqlite(conn), now, "seed-worker", 60.0).expect("claim")
    else {
        panic!("nothing to claim");
    };
    assert_eq!(
        lease.notification_id, id,
        "seeding expects an otherwise idle store"
    );
    let mut recorded = Vec::new();
    for (channel, result) in channels.iter().zip(results) {
        engine::start_channel(
            &Db::Sqlite(conn),
            now,
            &lease,
            *channel,
            &Default::default(),
        )
        .expect("start");
        engine::record_result(&Db::Sqlite(conn), now, &lease, *channel, result).expect("result");
        recorded.push((*channel, result.clone()));
    }
    engine::settle(&Db::Sqlite(conn), now, &lease, &recorded, &BACKOFF).expect("settle");
    id
}

/// Claims the due row for `worker` with a lease of `seconds` and starts its `channel`
/// call with `details`, as a worker does just before it calls the provider: the lease.
pub fn claim_and_start(
    conn: &rusqlite::Connection,
    worker: &str,
    seconds: f64,
    channel: Channel,
    details: &serde_json::Map<String, serde_json::Value>,
) -> unsctl::runtime::engine::Lease {
    let ClaimOutcome::Claimed(lease) =
        engine::claim(&Db::Sqlite(conn), wall_clock(), worker, seconds).expect("claim")
    else {
        panic!("nothing due");
    };
    engine::start_channel(&Db::Sqlite(conn), wall_clock(), &lease, channel, details)
        .expect("start");
    lease
}

/// A REPLAY-branch DLQ entry: SLACK refused (not retryable).
pub fn replay_entry(conn: &rusqlite::Connection, now: f64) -> String {
    play(
        conn,
        now,
        &[Channel::Slack],
        &[DeliveryResult::rejected("HTTP 400: bad", false)],
        3,
    )
}

/// A new store `dir/NAME` holding one REPLAY-branch entry made at `now`: its path and
/// the entry's id.
pub fn store_with_replay_entry(dir: &Path, name: &str, now: f64) -> (PathBuf, String) {
    let db = dir.join(name);
    let conn = unsctl::runtime::schema::open(&db, unsctl::runtime::schema::OpenMode::Create)
        .expect("store");
    let id = replay_entry(&conn, now);
    (db, id)
}

/// A VERIFY-branch DLQ entry: EMAIL timed out after the data.
pub fn verify_entry(conn: &rusqlite::Connection, now: f64) -> String {
    play(
        conn,
        now,
        &[Channel::Email],
        &[DeliveryResult::unknown(
            "no reply after the message data was sent",
        )],
        3,
    )
}

/// A RESOLVE-branch DLQ entry: EMAIL accepted late under a lost lease, then the reclaim
/// found the budget gone.
pub fn resolve_entry(conn: &rusqlite::Connection, now: f64) -> String {
    let id = accepted_late(conn, now, json!({"recipient": "ops@example.com"}), 1);
    let exhausted =
        engine::claim(&Db::Sqlite(conn), now + 62.0, "seed-worker-2", 60.0).expect("reclaim");
    assert!(matches!(exhausted, ClaimOutcome::RecoveryExhausted { .. }));
    id
}

/// An EMAIL notification whose first attempt the relay accepted 61 s into a 60 s lease:
/// the result written late, the lease lost. Returns its id.
fn accepted_late(
    conn: &rusqlite::Connection,
    now: f64,
    payload: serde_json::Value,
    max_attempts: i64,
) -> String {
    let id = engine::submit(
        &Db::Sqlite(conn),
        now,
        &NewNotification {
            channels: [Channel::Email].into_iter().collect(),
            payload,
            idempotency_key: None,
            max_attempts,
        },
    )
    .expect("submit")
    .id;
    let ClaimOutcome::Claimed(lease) =
        engine::claim(&Db::Sqlite(conn), now, "seed-worker", 60.0).expect("claim")
    else {
        panic!("nothing to claim");
    };
    engine::start_channel(
        &Db::Sqlite(conn),
        now,
        &lease,
        Channel::Email,
        &Default::default(),
    )
    .expect("start");
    let late = DeliveryResult::accepted(Some(format!("<{id}.1.1@uns.local>")));
    engine::record_result(&Db::Sqlite(conn), now + 61.0, &lease, Channel::Email, &late)
        .expect("result");
    engine::settle(
        &Db::Sqlite(conn),
        now + 61.0,
        &lease,
        &[(Channel::Email, late)],
        &BACKOFF,
    )
    .expect("settle");
    id
}

/// An EMAIL to `recipient` the relay took twice: accepted after its lease ran out, then
/// again by the reclaim. DELIVERED, with two copies in its history.
pub fn duplicated_email(conn: &rusqlite::Connection, now: f64, recipient: &str) -> String {
    let payload = json!({"recipient": recipient, "subject": "s", "body": "b"});
    let id = accepted_late(conn, now, payload, 2);
    let ClaimOutcome::Claimed(again) =
        engine::claim(&Db::Sqlite(conn), now + 62.0, "seed-worker-2", 60.0).expect("reclaim")
    else {
        panic!("no reclaim");
    };
    engine::start_channel(
        &Db::Sqlite(conn),
        now + 62.0,
        &again,
        Channel::Email,
        &Default::default(),
    )
    .expect("start");
    let second = DeliveryResult::accepted(Some(format!("<{id}.1.2@uns.local>")));
    engine::record_result(
        &Db::Sqlite(conn),
        now + 63.0,
        &again,
        Channel::Email,
        &second,
    )
    .expect("result");
    engine::settle(
        &Db::Sqlite(conn),
        now + 63.0,
        &again,
        &[(Channel::Email, second)],
        &BACKOFF,
    )
    .expect("settle");
    id
}

/// An SMTP server on loopback that offers a login and writes down every command it is
/// sent: what a relay named by data would learn from a client that trusted it.
pub struct RecordingRelay {
    pub addr: SocketAddr,
    heard: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
}

impl RecordingRelay {
    pub fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = listener.local_addr().expect("addr");
        let heard = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let log = heard.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let log = log.clone();
                std::thread::spawn(move || Self::session(stream, &log));
            }
        });
        Self { addr, heard }
    }

    fn session(stream: TcpStream, heard: &std::sync::Mutex<Vec<String>>) {
        use std::io::{BufRead, BufReader, Write};
        let mut writer = match stream.try_clone() {
            Ok(writer) => writer,
            Err(_) => return,
        };
        let _ = writer.write_all(b"220 recording.test ESMTP\r\n");
        for line in BufReader::new(stream).lines().map_while(Result::ok) {
            heard
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push(line.clone());
            let verb = line
                .split(' ')
                .next()
                .unwrap_or_default()
                .to_ascii_uppercase();
            let reply: &[u8] = match verb.as_str() {
                "EHLO" => b"250-recording.test\r\n250 AUTH PLAIN LOGIN\r\n",
                "AUTH" => b"235 2.7.0 Authentication successful\r\n",
                "QUIT" => b"221 2.0.0 Bye\r\n",
                _ => b"250 2.0.0 Ok\r\n",
            };
            if writer.write_all(reply).is_err() || verb == "QUIT" {
                return;
            }
        }
    }

    /// Every command line heard so far.
    pub fn heard(&self) -> Vec<String> {
        self.heard.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

/// `text` as the one shell word unsctl's composed commands write for it.
pub fn shell_quoted(text: &str) -> String {
    shlex::try_quote(text).expect("quotable").into_owned()
}

/// The store's `.dump` as the `sqlite3` shell writes it. The shell waits for a lock a
/// reader of a WAL store may meet for a moment while another process opens it, instead
/// of writing its error into the dump.
pub fn dump(db: &Path) -> String {
    let out = Command::new("sqlite3")
        .args(["-cmd", ".timeout 10000"])
        .arg(db)
        .arg(".dump")
        .output()
        .expect("sqlite3");
    assert!(
        out.status.success(),
        "sqlite3 .dump: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The hostile store `fixtures/hostile/PATCH.sql` makes of the base store, in `dir`, as
/// the runtime leaves a store: WAL mode, everything checkpointed.
pub fn hostile_store(dir: &Path, patch: &str) -> PathBuf {
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/hostile");
    let db = dir.join(format!("{patch}.db"));
    let conn = rusqlite::Connection::open(&db).expect("db");
    for file in ["base.sql", &format!("{patch}.sql")] {
        let sql = std::fs::read_to_string(fixtures.join(file)).expect("fixture");
        conn.execute_batch(&sql)
            .unwrap_or_else(|err| panic!("{file}: {err}"));
    }
    conn.pragma_update(None, "journal_mode", "WAL")
        .expect("wal");
    conn.execute_batch("PRAGMA wal_checkpoint(TRUNCATE)")
        .expect("checkpoint");
    db
}

/// Each of `kind`'s event payloads for `id`, oldest first.
pub fn payloads(db: &Path, id: &str, kind: &str) -> Vec<serde_json::Value> {
    let conn = rusqlite::Connection::open(db).expect("db");
    let mut statement = conn
        .prepare(
            "SELECT payload FROM uns_events WHERE notification_id = ?1 AND kind = ?2 ORDER BY id",
        )
        .expect("query");
    statement
        .query_map([id, kind], |r| r.get::<_, String>(0))
        .expect("rows")
        .map(|p| serde_json::from_str(&p.expect("payload")).expect("json"))
        .collect()
}

/// The one evidence bundle the screen's `:report` wrote under `reports`, checked by
/// `unsctl report check` (which must pass).
pub fn checked_bundle(reports: &Path) -> PathBuf {
    let bundle = std::fs::read_dir(reports)
        .expect("reports")
        .flatten()
        .map(|e| e.path())
        .find(|p| p.is_dir())
        .expect("a bundle directory");
    let out = unsctl()
        .args(["report", "check"])
        .arg(&bundle)
        .output()
        .expect("check");
    succeeded(&out);
    bundle
}

/// The judgement of `unsctl sweep --verify --remediate -o json` over `schedules`
/// schedules, wherever its store was: no unsafe verdict, no answer the ledger
/// contradicts, no duplicate or drop an action caused, every branch exercised.
pub fn the_sweep_was_safe(out: &std::process::Output, schedules: u64) {
    use serde_json::Value;
    let counts: Value = serde_json::from_slice(&out.stdout).expect("json");
    assert!(
        out.status.success(),
        "{counts:#}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(counts["schedules"], schedules);
    assert_eq!(counts["unsafe_resolve"], 0, "{counts:#}");
    assert_eq!(counts["unsafe_replay"], 0, "{counts:#}");
    assert_eq!(counts["false_delivered"], 0, "{counts:#}");
    assert_eq!(counts["unfinished"], 0, "{counts:#}");
    // Reconcile, against the ledger: every duplicate the providers took is DUPLICATED
    // or in doubt, never ONCE or MISSING; nothing DUPLICATED or MISSING is false.
    assert!(
        counts["duplicates_in_ledger"].as_u64().unwrap_or(0) > 0,
        "{counts:#}"
    );
    for key in ["duplicates_missed", "duplicates_false", "missing_false"] {
        assert_eq!(counts[key], 0, "{key}: {counts:#}");
    }
    assert!(
        counts["reconciled"]["DUPLICATED"].as_u64().unwrap_or(0) > 0
            && counts["reconciled"]["MISSING"].as_u64().unwrap_or(0) > 0
            && counts["reconciled"]["ONCE"].as_u64().unwrap_or(0) > 0,
        "{counts:#}"
    );
    // From the history alone, the doubt shows, and is held to the same ledger.
    let alone = &counts["reconciled_history_only"];
    assert!(
        alone["MAYBE_DUPLICATED"].as_u64().unwrap_or(0) > 0
            && alone["UNSETTLED"].as_u64().unwrap_or(0) > 0,
        "{counts:#}"
    );
    // The schedules really exercise every branch and the incident itself.
    for key in [
        "resolve",
        "verify",
        "replay",
        "duplicated",
        "dead_lettered",
        "seed",
    ] {
        assert!(counts[key].as_u64().unwrap_or(0) > 0, "{key}: {counts:#}");
    }
    // verify asked the fakes' records about every VERIFY entry: no answer the ledger
    // contradicts, no unsafe verdict after recording, at most 5% still VERIFY.
    let verification = &counts["verification"];
    assert_eq!(verification["wrong_answers"], 0, "{counts:#}");
    assert_eq!(verification["after"]["unsafe_resolve"], 0, "{counts:#}");
    assert_eq!(verification["after"]["unsafe_replay"], 0, "{counts:#}");
    let before = counts["verify_before"].as_u64().unwrap_or(0);
    let after = counts["verify_after"].as_u64().unwrap_or(u64::MAX);
    let dead = counts["dead_lettered"].as_u64().unwrap_or(0);
    assert!(
        before > 0 && after * 20 <= dead,
        "{before} -> {after} of {dead}: {counts:#}"
    );
    // Past triage (and verification): every next step ran, every mistake was refused, and
    // the providers' ledger shows no duplicate and no drop caused by an unforced action.
    assert_eq!(counts["remediated"], true);
    assert_eq!(counts["duplicates_caused"], 0, "{counts:#}");
    assert_eq!(counts["drops_caused"], 0, "{counts:#}");
    let remediation = &counts["remediation"];
    assert_eq!(remediation["careless_acted"], 0, "{counts:#}");
    assert_eq!(remediation["next_steps_failed"], 0, "{counts:#}");
    assert!(
        counts["refusals"].as_u64().unwrap_or(0) > 1000,
        "{counts:#}"
    );
    assert_eq!(
        remediation["replays_delivered"], remediation["replayed"],
        "every replay, once the cause was fixed, was delivered: {counts:#}"
    );
    assert!(
        remediation["resolved"].as_u64().unwrap_or(0) > 0,
        "{counts:#}"
    );
}

/// `dir/uns.db`, a store of every runbook case (`fixtures/every-case.sql`).
pub fn every_case_store(dir: &Path) -> PathBuf {
    let db = dir.join("uns.db");
    let sql = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/every-case.sql"),
    )
    .expect("fixture");
    rusqlite::Connection::open(&db)
        .expect("db")
        .execute_batch(&sql)
        .expect("load");
    db
}

/// The id of the first entry of `branch` in a plan (`dlq triage -o json`).
pub fn entry_of_branch(plan: &serde_json::Value, branch: &str) -> String {
    plan["entries"]
        .as_array()
        .expect("entries")
        .iter()
        .find(|entry| entry["branch"] == branch)
        .and_then(|entry| entry["id"].as_str())
        .unwrap_or_else(|| panic!("no {branch} entry in {plan}"))
        .to_string()
}
