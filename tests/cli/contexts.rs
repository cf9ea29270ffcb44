//! Contexts: one CLI for every runtime an operator looks after. Three `runtime serve`
//! processes on loopback, a context that reads a store directly and one whose server is
//! down; the fleet read, its exit codes, the precedence of flags, environment and the
//! current context, the refusals, and `apply` acting context by context with one prompt
//! each under a real terminal.

use crate::support;

use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use support::tmux::Tmux;
use unsctl::clock::{Clock, SystemClock};
use unsctl::runtime::schema::{self, OpenMode};

struct Serve {
    child: Child,
    url: String,
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn serve(db: &Path, key: &str) -> Serve {
    let port = support::free_port();
    let child = support::unsctl()
        .arg("--db")
        .arg(db)
        .args([
            "runtime",
            "serve",
            "--no-worker",
            "--listen",
            &format!("127.0.0.1:{port}"),
        ])
        .env("UNS_API_KEY", key)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("runtime serve");
    support::wait_for_port(format!("127.0.0.1:{port}").parse().expect("addr"));
    Serve {
        child,
        url: format!("http://127.0.0.1:{port}"),
    }
}

/// A store with `replay` REPLAY entries and `verify` VERIFY entries.
fn store(dir: &Path, name: &str, replay: usize, verify: usize) -> (PathBuf, Vec<String>) {
    let db = dir.join(format!("{name}.db"));
    let conn = schema::open(&db, OpenMode::Create).expect("store");
    let now = SystemClock.now();
    let mut ids = Vec::new();
    for _ in 0..replay {
        ids.push(support::replay_entry(&conn, now));
    }
    for _ in 0..verify {
        ids.push(support::verify_entry(&conn, now));
    }
    (db, ids)
}

struct Fleet {
    dir: tempfile::TempDir,
    servers: Vec<Serve>,
    /// Each context's entries, by context name.
    ids: BTreeMap<String, Vec<String>>,
    dbs: BTreeMap<String, PathBuf>,
    down_port: u16,
}

impl Fleet {
    fn start() -> Self {
        let dir = tempfile::tempdir().expect("dir");
        let mut servers = Vec::new();
        let mut ids = BTreeMap::new();
        let mut dbs = BTreeMap::new();
        for (name, replay, verify) in [("eu", 2, 0), ("us", 1, 1), ("ap", 0, 1), ("lab", 1, 0)] {
            let (db, made) = store(dir.path(), name, replay, verify);
            if name != "lab" {
                servers.push(serve(&db, &format!("key-of-{name}-0123456789")));
            }
            ids.insert(name.to_string(), made);
            dbs.insert(name.to_string(), db);
        }
        let fleet = Fleet {
            dir,
            servers,
            ids,
            dbs,
            down_port: support::free_port(),
        };
        fleet.write_config("config.toml", true);
        fleet.write_config("up.toml", false);
        fleet
    }

    fn write_config(&self, file: &str, with_down: bool) {
        let mut text = String::from("operator = \"fleet-test\"\n");
        for (name, server) in ["eu", "us", "ap"].iter().zip(&self.servers) {
            text.push_str(&format!(
                "[contexts.{name}]\napi = \"{}\"\napi_key_env = \"UNS_KEY_{}\"\n",
                server.url,
                name.to_uppercase()
            ));
        }
        text.push_str(&format!(
            "[contexts.lab]\ndb = \"{}\"\n",
            self.dbs["lab"].display()
        ));
        if with_down {
            text.push_str(&format!(
                "[contexts.down]\napi = \"http://127.0.0.1:{}\"\napi_key_env = \"UNS_KEY_DOWN\"\n",
                self.down_port
            ));
        }
        std::fs::write(self.dir.path().join(file), text).expect("config");
    }

    fn config(&self, file: &str) -> PathBuf {
        self.dir.path().join(file)
    }

    fn unsctl(&self, config: &str, args: &[&str]) -> Command {
        let mut command = support::unsctl();
        command
            .args(args)
            .env("UNSCTL_CONFIG", self.config(config))
            .stdin(Stdio::null());
        for name in ["eu", "us", "ap", "down"] {
            command.env(
                format!("UNS_KEY_{}", name.to_uppercase()),
                format!("key-of-{name}-0123456789"),
            );
        }
        command
    }

    fn run(&self, config: &str, args: &[&str]) -> Output {
        self.unsctl(config, args).output().expect("unsctl")
    }
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn triage_across_the_fleet_tags_every_entry_and_owns_up_to_a_partial_answer() {
    let fleet = Fleet::start();
    // JSON: every entry of every reachable context, tagged; the dead one named.
    let out = fleet.run(
        "config.toml",
        &["--all-contexts", "-o", "json", "dlq", "triage"],
    );
    assert_eq!(
        out.status.code(),
        Some(1),
        "partial is not complete: {}",
        text(&out.stderr)
    );
    let doc: Value = serde_json::from_slice(&out.stdout).expect("json");
    let mut seen: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for entry in doc["entries"].as_array().expect("entries") {
        let context = entry["context"]
            .as_str()
            .expect("each entry names its context");
        seen.entry(context.into())
            .or_default()
            .push(entry["id"].as_str().expect("id").into());
        assert!(
            entry["next_step"]
                .as_str()
                .is_some_and(|s| s.starts_with(&format!("unsctl --context {context} "))),
            "{entry}"
        );
    }
    for ids in seen.values_mut() {
        ids.sort();
    }
    let mut expected = fleet.ids.clone();
    for ids in expected.values_mut() {
        ids.sort();
    }
    assert_eq!(seen, expected);
    assert_eq!(doc["summary"]["REPLAY"], 4, "{}", doc["summary"]);
    assert_eq!(doc["summary"]["VERIFY"], 2);
    let contexts = doc["contexts"].as_array().expect("contexts");
    let down = contexts
        .iter()
        .find(|c| c["context"] == "down")
        .expect("down listed");
    assert!(
        down["error"]
            .as_str()
            .is_some_and(|e| e.contains("connection refused")),
        "{down}"
    );
    assert_eq!(
        contexts.iter().find(|c| c["context"] == "eu").expect("eu")["entries"],
        2
    );
    let stderr = text(&out.stderr);
    assert!(stderr.contains("context down: cannot read"), "{stderr}");
    assert!(
        stderr.contains("partial answer: read 4 of 5 contexts"),
        "{stderr}"
    );

    // The table: a CONTEXT column, every reachable entry, the same exit.
    let out = fleet.run(
        "config.toml",
        &["--all-contexts", "--color", "never", "dlq", "triage"],
    );
    assert_eq!(out.status.code(), Some(1));
    let table = text(&out.stdout);
    assert!(
        table
            .lines()
            .next()
            .is_some_and(|h| h.starts_with("CONTEXT")),
        "{table}"
    );
    for (context, ids) in &fleet.ids {
        for id in ids {
            assert!(
                table
                    .lines()
                    .any(|l| l.starts_with(context.as_str()) && l.contains(id.as_str())),
                "{context} {id} missing:\n{table}"
            );
        }
    }
    // With every context up, the same read is complete and exits 0.
    let out = fleet.run(
        "up.toml",
        &["--all-contexts", "-o", "json", "dlq", "triage"],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("read all 4 contexts"));

    // dlq list, events and doctor read the fleet the same way.
    let out = fleet.run(
        "config.toml",
        &["--all-contexts", "-o", "json", "dlq", "list"],
    );
    assert_eq!(out.status.code(), Some(1));
    let doc: Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(doc["entries"].as_array().map(Vec::len), Some(6), "{doc}");
    let out = fleet.run(
        "up.toml",
        &[
            "--all-contexts",
            "-o",
            "json",
            "events",
            "--kind",
            "dead_lettered",
            "--limit",
            "100",
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let doc: Value = serde_json::from_slice(&out.stdout).expect("json");
    let events = doc["events"].as_array().expect("events");
    assert_eq!(events.len(), 6, "{doc}");
    assert!(events.iter().all(|e| e["context"].is_string()));
    let out = fleet.run("config.toml", &["--all-contexts", "-o", "json", "doctor"]);
    assert_eq!(out.status.code(), Some(1));
    let doc: Value = serde_json::from_slice(&out.stdout).expect("json");
    let down = doc["contexts"]
        .as_array()
        .and_then(|c| c.iter().find(|c| c["context"] == "down"))
        .expect("down");
    assert_eq!(down["checks"][0]["level"], "fail", "{down}");
    // Every key is one word, and each context's checks are shaped as one context's are.
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(!text.contains("\"smtp relay\":"), "{text}");
    let single = fleet.run("config.toml", &["--context", "lab", "-o", "json", "doctor"]);
    let single: Value = serde_json::from_slice(&single.stdout).expect("json");
    let lab = doc["contexts"]
        .as_array()
        .and_then(|c| c.iter().find(|c| c["context"] == "lab"))
        .expect("lab");
    let names = |checks: &Value| -> Vec<String> {
        checks
            .as_array()
            .map(|c| c.iter().map(|c| c["name"].to_string()).collect())
            .unwrap_or_default()
    };
    assert_eq!(names(&lab["checks"]), names(&single), "{lab}\n{single}");
}

#[test]
fn one_context_at_a_time_by_flag_environment_or_current_and_mutations_never_span() {
    let fleet = Fleet::start();
    let ids_of = |out: &Output| -> Vec<String> {
        let doc: Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
        let mut ids: Vec<String> = doc["entries"]
            .as_array()
            .map(|e| {
                e.iter()
                    .filter_map(|e| e["id"].as_str().map(String::from))
                    .collect()
            })
            .unwrap_or_default();
        ids.sort();
        ids
    };
    let sorted = |name: &str| {
        let mut ids = fleet.ids[name].clone();
        ids.sort();
        ids
    };
    // No current context and nothing named: a usage error that points at contexts.
    let out = fleet.run("config.toml", &["dlq", "triage"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("context list"),
        "{}",
        text(&out.stderr)
    );
    let out = fleet.run("config.toml", &["context", "use", "us"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        std::fs::read_to_string(fleet.config("config.toml"))
            .expect("config")
            .contains("current_context = \"us\"")
    );
    let current = fleet.run("config.toml", &["-o", "json", "dlq", "triage"]);
    assert_eq!(ids_of(&current), sorted("us"));
    let list = fleet.run("config.toml", &["context", "list"]);
    assert!(
        text(&list.stdout)
            .lines()
            .any(|l| l.starts_with('*') && l.contains("us"))
    );
    assert!(
        text(&list.stdout).contains("UNS_KEY_EU (set)"),
        "{}",
        text(&list.stdout)
    );
    assert!(
        !text(&list.stdout).contains("key-of-"),
        "a key is never shown"
    );
    // The environment outranks the current context; a flag outranks both.
    let env = fleet
        .unsctl("config.toml", &["-o", "json", "dlq", "triage"])
        .env("UNS_CONTEXT", "eu")
        .output()
        .expect("unsctl");
    assert_eq!(ids_of(&env), sorted("eu"));
    let flag = fleet
        .unsctl(
            "config.toml",
            &["--context", "lab", "-o", "json", "dlq", "triage"],
        )
        .env("UNS_CONTEXT", "eu")
        .output()
        .expect("unsctl");
    assert_eq!(ids_of(&flag), sorted("lab"));
    let db = fleet
        .unsctl("config.toml", &["-o", "json", "dlq", "triage"])
        .arg("--db")
        .arg(&fleet.dbs["ap"])
        .output()
        .expect("unsctl");
    assert_eq!(ids_of(&db), sorted("ap"));
    let show = fleet
        .unsctl("config.toml", &["context", "show"])
        .env("UNS_CONTEXT", "eu")
        .output()
        .expect("unsctl");
    assert!(
        text(&show.stdout).contains("UNS_CONTEXT is set"),
        "{}",
        text(&show.stdout)
    );
    let unknown = fleet.run("config.toml", &["--context", "mars", "dlq", "triage"]);
    assert_eq!(unknown.status.code(), Some(3));
    assert!(text(&unknown.stderr).contains("known: ap, down, eu, lab, us"));

    // A mutation acts in one context, and says which.
    let id = &fleet.ids["eu"][0];
    for args in [
        vec![
            "--all-contexts",
            "replay",
            id.as_str(),
            "--confirm",
            "--yes",
        ],
        vec![
            "--all-contexts",
            "dlq",
            "resolve",
            id.as_str(),
            "--confirm",
            "--yes",
        ],
        vec!["--all-contexts", "verify", "--record", "--confirm", "--yes"],
    ] {
        let out = fleet.run("config.toml", &args);
        assert_eq!(
            out.status.code(),
            Some(2),
            "{args:?}: {}",
            text(&out.stderr)
        );
        assert!(
            text(&out.stderr).contains("acts in one context"),
            "{}",
            text(&out.stderr)
        );
    }
    let out = fleet.run(
        "config.toml",
        &["--context", "eu", "replay", id, "--confirm", "--yes"],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("context eu (http://127.0.0.1:"),
        "{}",
        text(&out.stderr)
    );
    let dry = fleet.run(
        "config.toml",
        &["--context", "us", "replay", &fleet.ids["us"][0]],
    );
    assert!(
        text(&dry.stderr).contains("Nothing was changed in context us"),
        "{}",
        text(&dry.stderr)
    );

    // A file that stores a key is refused, and says why.
    std::fs::write(
        fleet.config("leaky.toml"),
        "[contexts.eu]\napi = \"http://127.0.0.1:1\"\napi_key = \"key-of-eu-0123456789\"\n",
    )
    .expect("write");
    let out = fleet.run("leaky.toml", &["--context", "eu", "dlq", "triage"]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("API keys are never stored in the config file"),
        "{stderr}"
    );
    assert!(!stderr.contains("key-of-eu"), "{stderr}");
}

#[test]
fn a_fleet_plan_is_applied_context_by_context_with_one_prompt_each() {
    let fleet = Fleet::start();
    let plan = fleet.dir.path().join("plan.json");
    let out = fleet.run(
        "up.toml",
        &[
            "--all-contexts",
            "-o",
            "json",
            "dlq",
            "triage",
            "--branch",
            "replay",
        ],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    std::fs::write(&plan, &out.stdout).expect("plan");
    // Replay entries are in eu (2), us (1) and lab (1): three contexts, three prompts.
    let command = format!(
        "env UNSCTL_CONFIG={config} UNS_KEY_EU=key-of-eu-0123456789 UNS_KEY_US=key-of-us-0123456789 UNS_KEY_AP=key-of-ap-0123456789 {bin} --color never apply {plan} --confirm",
        config = fleet.config("up.toml").display(),
        bin = env!("CARGO_BIN_EXE_unsctl"),
        plan = plan.display()
    );
    let term = Tmux::start(&command);
    let screen = term.wait_for("Type yes");
    assert!(
        screen.contains("Apply the plan to 2 entries in context eu (http://127.0.0.1:"),
        "{screen}"
    );
    term.line("yes");
    let screen = term.wait_for("in context lab (");
    assert!(screen.contains("context eu (http://127.0.0.1:"), "{screen}");
    // Declined here: lab stays as it was.
    term.line("no");
    let screen = term.wait_for("in context us (");
    assert!(
        screen.contains("2 done"),
        "eu's summary came first: {screen}"
    );
    term.line("yes");
    let screen = term.wait_for("EXIT=");
    assert!(screen.contains("EXIT=0"), "{screen}");
    let replayed = |name: &str, id: &str| {
        let conn = rusqlite::Connection::open(&fleet.dbs[name]).expect("open");
        conn.query_row(
            "SELECT COUNT(*) FROM uns_events WHERE notification_id = ?1 AND kind = 'REPLAYED'",
            [id],
            |r| r.get::<_, i64>(0),
        )
        .expect("count")
    };
    for id in &fleet.ids["eu"] {
        assert_eq!(replayed("eu", id), 1, "{screen}");
    }
    assert_eq!(replayed("us", &fleet.ids["us"][0]), 1, "{screen}");
    assert_eq!(
        replayed("lab", &fleet.ids["lab"][0]),
        0,
        "declined: {screen}"
    );
}

/// How a hostile stand-in pages its DLQ.
#[derive(Clone, Copy, PartialEq)]
enum Hostile {
    /// Its answer a byte every half second.
    Trickle,
    /// Empty pages, each with a new cursor, for ever.
    Empty,
    /// The same page of one entry, each time with a new cursor, for ever.
    Repeating,
}

/// A server that is a UNS API as far as `/healthz` goes, and whose DLQ pages as `how`
/// says.
fn hostile_api(how: Hostile) -> String {
    hostile_api_with(how, None)
}

/// The same, answering `/api/v1/runtime/stats` with `stats` when given.
fn hostile_api_with(how: Hostile, stats: Option<String>) -> String {
    let trickle = how == Hostile::Trickle;
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("addr");
    let pages = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let pages = pages.clone();
            let stats = stats.clone();
            std::thread::spawn(move || {
                use std::io::{Read, Write};
                let mut stream = stream;
                let mut buffer = [0u8; 4096];
                let n = stream.read(&mut buffer).unwrap_or(0);
                let request = String::from_utf8_lossy(&buffer[..n]).into_owned();
                if request.starts_with("GET /healthz") {
                    let body = r#"{"service":"uns-runtime","status":"ok"}"#;
                    let _ = write!(
                        stream,
                        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                        body.len()
                    );
                } else if let (true, Some(body)) =
                    (request.starts_with("GET /api/v1/runtime/stats"), &stats)
                {
                    let _ = write!(
                        stream,
                        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                        body.len()
                    );
                } else if !(request.starts_with("GET /api/v1/dlq")
                    || request.starts_with("GET /api/v1/runtime/reconcile"))
                {
                    let body = r#"{"error":"no such endpoint"}"#;
                    let _ = write!(
                        stream,
                        "HTTP/1.1 404 Not Found\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                        body.len()
                    );
                } else if trickle {
                    let _ = write!(
                        stream,
                        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 100000\r\nconnection: close\r\n\r\n"
                    );
                    for _ in 0..240 {
                        if stream.write_all(b" ").is_err() {
                            return;
                        }
                        std::thread::sleep(std::time::Duration::from_millis(500));
                    }
                } else {
                    let page = pages.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    let entries = if how == Hostile::Repeating {
                        r#"[{"id":"n-repeat0001","status":"DEAD","dead_letter":true,"attempts":1,"cycle":1,"cycle_attempts":1,"max_attempts":1,"channels":["SLACK"],"payload":{},"idempotency_key":null,"lease_token":null,"lease_until":null,"next_attempt_at":0,"error_message":"x","created_at":0,"updated_at":0,"events":[]}]"#
                    } else {
                        "[]"
                    };
                    let body = format!(r#"{{"entries":{entries},"next_cursor":"c{page}"}}"#);
                    let _ = write!(
                        stream,
                        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nuns-next-cursor: c{page}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                        body.len()
                    );
                }
            });
        }
    });
    format!("http://{addr}")
}

/// One context trickles, one pages without end, two answer: the two are printed, the
/// others named, exit 1, and all within the stated deadline.
#[test]
fn a_trickling_or_endless_context_holds_up_only_itself() {
    let fleet = Fleet::start();
    let text_config = format!(
        "[contexts.eu]\napi = \"{}\"\napi_key_env = \"UNS_KEY_EU\"\n\
         [contexts.lab]\ndb = \"{}\"\n\
         [contexts.trickle]\napi = \"{}\"\napi_key_env = \"UNS_KEY_EU\"\n\
         [contexts.endless]\napi = \"{}\"\napi_key_env = \"UNS_KEY_EU\"\ntimeout = \"30s\"\n",
        fleet.servers[0].url,
        fleet.dbs["lab"].display(),
        hostile_api(Hostile::Trickle),
        hostile_api(Hostile::Empty),
    );
    std::fs::write(fleet.config("hostile.toml"), text_config).expect("config");
    let started = std::time::Instant::now();
    let out = fleet.run(
        "hostile.toml",
        &[
            "--all-contexts",
            "--api-timeout",
            "2s",
            "-o",
            "json",
            "dlq",
            "triage",
        ],
    );
    let took = started.elapsed();
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    let doc: Value = serde_json::from_slice(&out.stdout).expect("json");
    let mut seen: Vec<String> = doc["entries"]
        .as_array()
        .expect("entries")
        .iter()
        .map(|e| e["id"].as_str().unwrap_or_default().to_string())
        .collect();
    seen.sort();
    let mut expected: Vec<String> = fleet.ids["eu"]
        .iter()
        .chain(&fleet.ids["lab"])
        .cloned()
        .collect();
    expected.sort();
    assert_eq!(seen, expected, "{stderr}");
    assert!(stderr.contains("context trickle: cannot read"), "{stderr}");
    assert!(stderr.contains("deadline"), "{stderr}");
    assert!(stderr.contains("context endless: cannot read"), "{stderr}");
    assert!(stderr.contains("empty pages"), "{stderr}");
    // The deadline is 2 s a request; the GETs are tried again a few times.
    assert!(
        took < std::time::Duration::from_secs(20),
        "took {took:?}: {stderr}"
    );
}

/// A server that repeats a non-empty page under a new cursor each time: every paging
/// command stops with the reason, within the deadline, and among several contexts the
/// good ones are still printed, with exit 1.
#[test]
fn a_server_that_repeats_its_page_is_not_paged_for_ever() {
    let fleet = Fleet::start();
    // Its stats are a real server's, so reconcile reaches its paging.
    unsctl::runtime::adapters::init_tls();
    let stats = reqwest::blocking::Client::new()
        .get(format!("{}/api/v1/runtime/stats", fleet.servers[0].url))
        .bearer_auth("key-of-eu-0123456789")
        .send()
        .and_then(|r| r.text())
        .expect("stats");
    let repeating = hostile_api_with(Hostile::Repeating, Some(stats));
    let config = format!(
        "[contexts.eu]\napi = \"{}\"\napi_key_env = \"UNS_KEY_EU\"\n\
         [contexts.repeating]\napi = \"{repeating}\"\napi_key_env = \"UNS_KEY_EU\"\n",
        fleet.servers[0].url,
    );
    std::fs::write(fleet.config("repeating.toml"), config).expect("config");
    let started = std::time::Instant::now();
    let out = fleet.run(
        "repeating.toml",
        &["--all-contexts", "-o", "json", "dlq", "triage"],
    );
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    let doc: Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(
        doc["entries"].as_array().map(Vec::len),
        Some(fleet.ids["eu"].len()),
        "the good context is printed: {stderr}"
    );
    assert!(stderr.contains("repeats itself"), "{stderr}");
    for args in [
        &["dlq", "triage"][..],
        &["reconcile", "--since", "1h"],
        &["replay", "--branch", "replay", "--reason", "x"],
        &["dlq", "list"],
    ] {
        let out = support::unsctl()
            .args(["--api", &repeating, "--api-timeout", "5s"])
            .args(args)
            .env("UNS_API_KEY", "anything")
            .output()
            .expect("unsctl");
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {stderr}");
        assert!(stderr.contains("repeats itself"), "{args:?}: {stderr}");
    }
    assert!(
        started.elapsed() < std::time::Duration::from_secs(30),
        "took {:?}",
        started.elapsed()
    );
}

/// A server that takes every request and never answers it, counting them; a UNS API as
/// far as `/healthz` goes when `healthy`, so the requests counted are those past it.
fn silent_api(healthy: bool) -> (String, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("addr");
    let asked = std::sync::Arc::new(AtomicUsize::new(0));
    let counted = asked.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let counted = counted.clone();
            std::thread::spawn(move || {
                use std::io::{Read, Write};
                let mut stream = stream;
                let mut buffer = [0u8; 4096];
                let n = stream.read(&mut buffer).unwrap_or(0);
                if healthy && buffer[..n].starts_with(b"GET /healthz") {
                    let body = r#"{"service":"uns-runtime","status":"ok"}"#;
                    let _ = write!(
                        stream,
                        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                        body.len()
                    );
                    return;
                }
                counted.fetch_add(1, Ordering::SeqCst);
                // Held open, unanswered, until the client gives up.
                while stream.read(&mut buffer).is_ok_and(|n| n > 0) {}
            });
        }
    });
    (format!("http://{addr}"), asked)
}

/// A server that takes a request and never answers costs the deadline the operator set,
/// once: the request is not sent again (each try would wait as long), and the error says
/// which deadline ran out and how to set another. Before, a hung server held a command
/// for three deadlines at its health check alone (three minutes by default).
#[test]
fn a_server_that_never_answers_is_asked_once_within_the_deadline() {
    for healthy in [false, true] {
        let (url, asked) = silent_api(healthy);
        let out = support::unsctl()
            .args(["--api", &url, "--api-timeout", "1s", "dlq", "list"])
            .env("UNS_API_KEY", "key-of-nobody-0123456789")
            .stdin(Stdio::null())
            .output()
            .expect("unsctl");
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{stderr}");
        assert!(
            stderr.contains("within the 1 s deadline (--api-timeout), so it was not asked again"),
            "{stderr}"
        );
        let route = if healthy { "/api/v1/dlq" } else { "/healthz" };
        assert!(stderr.contains(route), "{stderr}");
        assert_eq!(
            asked.load(std::sync::atomic::Ordering::SeqCst),
            1,
            "healthy {healthy}: {stderr}"
        );
    }
}

/// unsctl with `config` as its config file and no store named by the environment.
fn with_config(config: &Path, args: &[&str]) -> Output {
    support::unsctl()
        .args(args)
        .env("UNSCTL_CONFIG", config)
        .env("UNS_OPERATOR", "config-test")
        .stdin(Stdio::null())
        .output()
        .expect("unsctl")
}

/// `~/` in a context's db is the operator's home, as in a shell, wherever the file is;
/// without a HOME to read it by, the context says so rather than naming a folder "~".
#[test]
fn a_store_under_the_home_folder_is_found_there() {
    let home = tempfile::tempdir().expect("home");
    let db = home.path().join("stores").join("lab.db");
    std::fs::create_dir(db.parent().expect("folder")).expect("folder");
    let conn = schema::open(&db, OpenMode::Create).expect("store");
    let id = support::replay_entry(&conn, 1000.0);
    drop(conn);
    let elsewhere = tempfile::tempdir().expect("config's folder");
    let config = elsewhere.path().join("config.toml");
    std::fs::write(
        &config,
        "current_context = \"lab\"\n[contexts.lab]\ndb = \"~/stores/lab.db\"\n",
    )
    .expect("config");
    let run = |home: Option<&Path>, args: &[&str]| {
        let mut command = support::unsctl();
        command
            .args(args)
            .env("UNSCTL_CONFIG", &config)
            .env_remove("UNS_DB_FILE")
            .env_remove("UNS_BASE_URL")
            .env_remove("UNS_CONTEXT")
            .stdin(Stdio::null());
        match home {
            Some(home) => command.env("HOME", home),
            None => command.env_remove("HOME"),
        };
        command.output().expect("unsctl")
    };
    let listed = run(Some(home.path()), &["context", "list"]);
    assert_eq!(listed.status.code(), Some(0), "{}", text(&listed.stderr));
    assert!(
        text(&listed.stdout).contains(&db.display().to_string()),
        "{}",
        text(&listed.stdout)
    );
    let read = run(Some(home.path()), &["-o", "json", "dlq", "list"]);
    assert_eq!(read.status.code(), Some(0), "{}", text(&read.stderr));
    assert!(text(&read.stdout).contains(&id), "{}", text(&read.stdout));
    let homeless = run(None, &["dlq", "list"]);
    assert_eq!(
        homeless.status.code(),
        Some(2),
        "{}",
        text(&homeless.stderr)
    );
    assert!(
        text(&homeless.stderr).contains("HOME is not set"),
        "{}",
        text(&homeless.stderr)
    );
}

/// A config file someone else could have written is refused with the reason, before any
/// of it is used; root reads another user's file only when told to.
#[test]
fn a_config_file_others_could_write_is_refused() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().expect("dir");
    let config = dir.path().join("config.toml");
    std::fs::write(&config, "[contexts.lab]\ndb = \"lab.db\"\n").expect("config");
    let run = |args: &[&str]| with_config(&config, args);
    let listed = run(&["context", "list"]);
    assert_eq!(listed.status.code(), Some(0), "{}", text(&listed.stderr));
    assert!(
        text(&listed.stdout).contains(&dir.path().join("lab.db").display().to_string()),
        "relative to the file"
    );
    std::fs::set_permissions(&config, std::fs::Permissions::from_mode(0o666)).expect("mode");
    let refused = run(&["context", "list"]);
    assert_eq!(refused.status.code(), Some(2));
    assert!(
        text(&refused.stderr).contains("writable by anyone"),
        "{}",
        text(&refused.stderr)
    );
    std::fs::set_permissions(&config, std::fs::Permissions::from_mode(0o644)).expect("mode");
    if support::is_root() {
        let chowned = Command::new("chown")
            .arg("nobody")
            .arg(&config)
            .status()
            .expect("chown");
        assert!(chowned.success());
        let refused = run(&["context", "list"]);
        assert_eq!(refused.status.code(), Some(2));
        assert!(
            text(&refused.stderr).contains("--trust-config-owner"),
            "{}",
            text(&refused.stderr)
        );
        let trusted = run(&["--trust-config-owner", "context", "list"]);
        assert_eq!(trusted.status.code(), Some(0), "{}", text(&trusted.stderr));
    }
}

/// A plan carries the identity of the store it was made on: applied to a copy, or to a
/// context that now names another store, it is refused and nothing changes.
#[test]
fn a_plan_is_never_applied_to_another_store() {
    let dir = tempfile::tempdir().expect("dir");
    let (db, ids) = store(dir.path(), "a", 2, 0);
    let copy = dir.path().join("copy.db");
    std::fs::copy(&db, &copy).expect("copy");
    let config = dir.path().join("config.toml");
    let run = |args: &[&str]| with_config(&config, args);
    std::fs::write(
        &config,
        format!("[contexts.a]\ndb = \"{}\"\n", db.display()),
    )
    .expect("config");
    let plan = run(&["--context", "a", "dlq", "triage", "-o", "json"]);
    assert_eq!(plan.status.code(), Some(0), "{}", text(&plan.stderr));
    let doc: Value = serde_json::from_slice(&plan.stdout).expect("plan");
    assert!(
        doc["store"].as_str().is_some_and(|s| s.len() == 16),
        "{doc}"
    );
    let plan_path = dir.path().join("plan.json");
    std::fs::write(&plan_path, &plan.stdout).expect("plan");
    let plan_arg = plan_path.display().to_string();
    let before = std::fs::read(&copy).expect("copy");
    // The same store by another way in is the same store; a copy is not.
    let refused = run(&[
        "--db",
        &copy.display().to_string(),
        "apply",
        &plan_arg,
        "--confirm",
        "--yes",
    ]);
    assert_eq!(refused.status.code(), Some(4), "{}", text(&refused.stderr));
    assert!(
        text(&refused.stderr).contains("made on another store"),
        "{}",
        text(&refused.stderr)
    );
    // The context edited to name the copy: refused as well.
    std::fs::write(
        &config,
        format!("[contexts.a]\ndb = \"{}\"\n", copy.display()),
    )
    .expect("config");
    let refused = run(&["--context", "a", "apply", &plan_arg, "--confirm", "--yes"]);
    assert_eq!(refused.status.code(), Some(4), "{}", text(&refused.stderr));
    assert_eq!(
        std::fs::read(&copy).expect("copy"),
        before,
        "the copy is untouched"
    );
    // On the store it was made on, it acts.
    let applied = run(&[
        "--db",
        &db.display().to_string(),
        "apply",
        &plan_arg,
        "--confirm",
        "--yes",
    ]);
    assert_eq!(applied.status.code(), Some(0), "{}", text(&applied.stderr));
    let conn = schema::open(&db, OpenMode::ReadOnly).expect("store");
    let replayed: i64 = conn
        .query_row(
            "SELECT COUNT(*) FROM uns_events WHERE kind = 'REPLAYED'",
            [],
            |r| r.get(0),
        )
        .expect("count");
    assert_eq!(replayed, ids.len() as i64);
}

/// The one launcher every test uses shows the binary no config file, no HOME of the
/// developer's and none of the store variables of the shell the tests run in: what a
/// test sees is what it sets.
#[test]
fn the_test_launcher_hands_the_binary_a_clean_environment() {
    let out = support::unsctl()
        .args(["context", "list"])
        .output()
        .expect("unsctl");
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("no config file at /nonexistent/"),
        "{stderr}"
    );
    // No store named by the environment either, so a read has nothing to open.
    let out = support::unsctl()
        .args(["dlq", "list"])
        .output()
        .expect("unsctl");
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("no store named"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A config path that names a FIFO is refused at once, never opened and waited on.
#[test]
fn a_config_path_that_is_not_a_regular_file_is_refused_at_once() {
    let dir = tempfile::tempdir().expect("dir");
    let fifo = dir.path().join("config.toml");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .expect("mkfifo");
    assert!(made.success());
    let mut child = support::unsctl()
        .args(["context", "list"])
        .env("UNSCTL_CONFIG", &fifo)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("unsctl");
    let ended = support::wait_for(std::time::Duration::from_secs(10), || {
        matches!(child.try_wait(), Ok(Some(_)))
    });
    if !ended {
        let _ = child.kill();
    }
    assert!(ended, "unsctl waited on the FIFO");
    let out = child.wait_with_output().expect("output");
    assert_ne!(out.status.code(), Some(0));
    assert!(
        text(&out.stderr).contains("not a regular file"),
        "{}",
        text(&out.stderr)
    );
}
