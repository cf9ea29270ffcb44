//! Resolve, replay and apply through the real binary, on both backends: dry runs,
//! every guardrail and its override, the audit record, races and stale plans.

mod support;

use serde_json::Value;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};
use unsctl::model::Channel;
use unsctl::runtime::engine::DeliveryResult;
use unsctl::runtime::schema::{self, OpenMode};

#[derive(Debug, Clone, Copy, PartialEq)]
enum Backend {
    Sqlite,
    Http,
}

const BACKENDS: [Backend; 2] = [Backend::Sqlite, Backend::Http];

struct Fixture {
    _dir: tempfile::TempDir,
    db: PathBuf,
    conn: rusqlite::Connection,
    server: unsctl::runtime::server::RunningServer,
    clock: std::cell::Cell<f64>,
}

impl Fixture {
    fn new() -> Self {
        let dir = tempfile::tempdir().expect("dir");
        let db = dir.path().join("uns.db");
        let conn = schema::open(&db, OpenMode::Create).expect("store");
        let server = support::server(&db);
        Self {
            _dir: dir,
            db,
            conn,
            server,
            clock: std::cell::Cell::new(1_000.0),
        }
    }

    fn tick(&self) -> f64 {
        self.clock.set(self.clock.get() + 100.0);
        self.clock.get()
    }

    fn resolve_entry(&self) -> String {
        support::resolve_entry(&self.conn, self.tick())
    }

    fn verify_entry(&self) -> String {
        support::verify_entry(&self.conn, self.tick())
    }

    fn replay_entry(&self) -> String {
        support::replay_entry(&self.conn, self.tick())
    }

    /// EMAIL accepted, SLACK refused: REPLAY of SLACK only.
    fn mixed_entry(&self) -> String {
        support::play(
            &self.conn,
            self.tick(),
            &[Channel::Email, Channel::Slack],
            &[
                DeliveryResult::accepted(Some("<m@uns.local>".into())),
                DeliveryResult::rejected("HTTP 400", false),
            ],
            3,
        )
    }

    fn command(&self, backend: Backend, args: &[&str]) -> Command {
        let mut command = Command::new(env!("CARGO_BIN_EXE_unsctl"));
        for name in ["UNS_DB_FILE", "UNS_BASE_URL", "UNS_API_KEY", "UNS_OPERATOR"] {
            command.env_remove(name);
        }
        match backend {
            Backend::Sqlite => command.arg("--db").arg(&self.db),
            Backend::Http => command
                .args(["--api", &format!("http://{}", self.server.addr)])
                .env("UNS_API_KEY", support::KEY),
        };
        command.args(args).stdin(Stdio::null());
        command
    }

    fn run(&self, backend: Backend, args: &[&str]) -> Output {
        self.command(backend, args).output().expect("unsctl")
    }

    fn audit(&self, id: &str, kind: &str) -> Vec<Value> {
        let mut stmt = self
            .conn
            .prepare("SELECT payload FROM uns_events WHERE notification_id = ?1 AND kind = ?2 ORDER BY id")
            .expect("prepare");
        stmt.query_map([id, kind], |row| row.get::<_, String>(0))
            .expect("query")
            .map(|p| serde_json::from_str(&p.expect("row")).expect("json"))
            .collect()
    }

    fn status(&self, id: &str) -> String {
        self.conn
            .query_row(
                "SELECT status FROM uns_notifications WHERE id = ?1",
                [id],
                |r| r.get(0),
            )
            .expect("status")
    }

    fn bytes(&self) -> (Vec<u8>, Vec<u8>) {
        let wal = PathBuf::from(format!("{}-wal", self.db.display()));
        (
            std::fs::read(&self.db).unwrap_or_default(),
            std::fs::read(wal).unwrap_or_default(),
        )
    }
}

fn text(output: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

#[test]
fn dry_runs_print_the_plan_and_change_nothing() {
    for backend in BACKENDS {
        let f = Fixture::new();
        let (resolvable, replayable) = (f.resolve_entry(), f.replay_entry());
        let plan = f._dir.path().join("plan.json");
        let triage = f.run(backend, &["dlq", "triage", "-o", "json"]);
        std::fs::write(&plan, &triage.stdout).expect("plan");
        let plan = plan.display().to_string();
        let before = f.bytes();
        for args in [
            vec!["dlq", "resolve", resolvable.as_str()],
            vec!["replay", replayable.as_str()],
            vec!["replay", "--branch", "replay"],
            vec!["apply", plan.as_str()],
        ] {
            let out = f.run(backend, &args);
            assert_eq!(
                out.status.code(),
                Some(0),
                "{backend:?} {args:?}: {}",
                text(&out)
            );
            let stdout = String::from_utf8_lossy(&out.stdout);
            assert!(stdout.trim_end().ends_with("(dry run)"), "{stdout}");
            assert!(stdout.contains("evidence"), "{stdout}");
        }
        assert!(
            f.bytes() == before,
            "{backend:?}: a dry run changed the store"
        );
        assert_eq!(f.status(&resolvable), "DEAD");
    }
}

struct Guardrail {
    name: &'static str,
    entry: fn(&Fixture) -> String,
    refused: &'static [&'static str],
    allowed: &'static [&'static str],
    event: &'static str,
    /// (payload key, expected value) in the audit event of the allowed run.
    recorded: &'static [(&'static str, &'static str)],
}

const GUARDRAILS: &[Guardrail] = &[
    Guardrail {
        name: "replaying a RESOLVE entry sends a duplicate",
        entry: Fixture::resolve_entry,
        refused: &["replay", "ID", "--channels", "EMAIL"],
        allowed: &[
            "replay",
            "ID",
            "--channels",
            "EMAIL",
            "--force",
            "--reason",
            "customer asked for a resend",
        ],
        event: "REPLAYED",
        recorded: &[
            ("reason", "customer asked for a resend"),
            ("forced", "true"),
        ],
    },
    Guardrail {
        name: "replaying a VERIFY entry needs an attestation",
        entry: Fixture::verify_entry,
        refused: &["replay", "ID"],
        allowed: &[
            "replay",
            "ID",
            "--verified-not-delivered",
            "--reason",
            "relay log has no such Message-ID",
        ],
        event: "REPLAYED",
        recorded: &[
            ("attestation", "verified out of band: not delivered"),
            ("reason", "relay log has no such Message-ID"),
        ],
    },
    Guardrail {
        name: "resolving a VERIFY entry needs an attestation",
        entry: Fixture::verify_entry,
        refused: &["dlq", "resolve", "ID"],
        allowed: &[
            "dlq",
            "resolve",
            "ID",
            "--verified-delivered",
            "--ticket",
            "INC-42",
        ],
        event: "DLQ_RESOLVED",
        recorded: &[
            ("attestation", "verified out of band: delivered"),
            ("ticket", "INC-42"),
        ],
    },
    Guardrail {
        name: "resolving a REPLAY entry drops a message nobody received",
        entry: Fixture::replay_entry,
        refused: &["dlq", "resolve", "ID"],
        allowed: &[
            "dlq",
            "resolve",
            "ID",
            "--force",
            "--reason",
            "superseded by a newer alert",
        ],
        event: "DLQ_RESOLVED",
        recorded: &[
            ("reason", "superseded by a newer alert"),
            ("forced", "true"),
        ],
    },
    Guardrail {
        name: "--channels cannot widen a replay onto a delivered channel",
        entry: Fixture::mixed_entry,
        refused: &["replay", "ID", "--channels", "EMAIL,SLACK"],
        allowed: &[
            "replay",
            "ID",
            "--channels",
            "EMAIL,SLACK",
            "--force",
            "--reason",
            "the email went to the wrong list",
        ],
        event: "REPLAYED",
        recorded: &[("forced", "true")],
    },
    Guardrail {
        name: "--force needs a reason",
        entry: Fixture::replay_entry,
        refused: &["dlq", "resolve", "ID", "--force"],
        allowed: &["replay", "ID"],
        event: "REPLAYED",
        recorded: &[("attestation", "null")],
    },
];

fn with_id<'a>(args: &[&'a str], id: &'a str) -> Vec<&'a str> {
    args.iter()
        .map(|a| if *a == "ID" { id } else { a })
        .collect()
}

#[test]
fn each_guardrail_refuses_with_exit_4_and_its_override_is_audited() {
    for backend in BACKENDS {
        let f = Fixture::new();
        for guardrail in GUARDRAILS {
            let id = (guardrail.entry)(&f);
            let before = f.audit(&id, guardrail.event).len();
            let mut refused = with_id(guardrail.refused, &id);
            refused.extend(["--confirm", "--yes"]);
            let out = f.run(backend, &refused);
            assert_eq!(
                out.status.code(),
                Some(4),
                "{backend:?} {}: {}",
                guardrail.name,
                text(&out)
            );
            let message = text(&out);
            assert!(
                message.contains("--"),
                "{}: the refusal says what would allow it: {message}",
                guardrail.name
            );
            assert_eq!(f.status(&id), "DEAD", "{}: nothing changed", guardrail.name);

            let mut allowed = with_id(guardrail.allowed, &id);
            allowed.extend(["--confirm", "--yes", "--operator", "alice"]);
            let out = f.run(backend, &allowed);
            assert_eq!(
                out.status.code(),
                Some(0),
                "{backend:?} {}: {}",
                guardrail.name,
                text(&out)
            );
            let events = f.audit(&id, guardrail.event);
            assert_eq!(events.len(), before + 1, "{}", guardrail.name);
            let audit = &events[events.len() - 1];
            assert_eq!(audit["operator"], "alice", "{}", guardrail.name);
            for (key, value) in guardrail.recorded {
                let found = match &audit[*key] {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                };
                assert_eq!(
                    found, *value,
                    "{backend:?} {}: {key} in {audit}",
                    guardrail.name
                );
            }
            let triage = &audit["triage"];
            assert!(
                triage["branch"].is_string() && triage["last_event_id"].is_i64(),
                "{audit}"
            );
            assert!(triage["channels"][0]["evidence"].is_array(), "{audit}");
        }
    }
}

#[test]
fn without_a_terminal_and_without_yes_it_refuses_at_once() {
    for backend in BACKENDS {
        let f = Fixture::new();
        let id = f.replay_entry();
        let started = Instant::now();
        let out = f.run(backend, &["replay", &id, "--confirm"]);
        assert_eq!(out.status.code(), Some(4), "{}", text(&out));
        assert!(text(&out).contains("--yes"), "{}", text(&out));
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "it must not wait for input"
        );
        assert_eq!(f.status(&id), "DEAD");
        let out = f.run(backend, &["replay", &id, "--confirm", "--yes"]);
        assert_eq!(out.status.code(), Some(0), "{}", text(&out));
        assert_eq!(f.status(&id), "PENDING");
        assert!(String::from_utf8_lossy(&out.stdout).contains("replayed SLACK"));
    }
}

#[test]
fn the_operator_comes_from_the_flag_then_the_environment() {
    let f = Fixture::new();
    let first = f.replay_entry();
    let out = f
        .command(Backend::Sqlite, &["replay", &first, "--confirm", "--yes"])
        .env("UNS_OPERATOR", "bob")
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert_eq!(f.audit(&first, "REPLAYED")[0]["operator"], "bob");
    let second = f.replay_entry();
    let out = f
        .command(
            Backend::Http,
            &[
                "replay",
                &second,
                "--confirm",
                "--yes",
                "--operator",
                "carol",
            ],
        )
        .env("UNS_OPERATOR", "bob")
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert_eq!(f.audit(&second, "REPLAYED")[0]["operator"], "carol");
}

#[test]
fn two_operators_replaying_one_entry_make_exactly_one_replay() {
    for backend in BACKENDS {
        let f = Fixture::new();
        for _ in 0..3 {
            let id = f.replay_entry();
            let children: Vec<_> = (0..2)
                .map(|n| {
                    f.command(
                        backend,
                        &[
                            "replay",
                            &id,
                            "--confirm",
                            "--yes",
                            "--operator",
                            &format!("op{n}"),
                        ],
                    )
                    .stdout(Stdio::piped())
                    .stderr(Stdio::piped())
                    .spawn()
                    .expect("spawn")
                })
                .collect();
            let mut codes: Vec<i32> = children
                .into_iter()
                .map(|c| {
                    c.wait_with_output()
                        .expect("wait")
                        .status
                        .code()
                        .unwrap_or(-1)
                })
                .collect();
            codes.sort();
            assert_eq!(codes, [0, 5], "{backend:?}");
            assert_eq!(f.audit(&id, "REPLAYED").len(), 1);
        }
    }
}

#[test]
fn a_stale_plan_entry_is_skipped_with_exit_5() {
    for backend in BACKENDS {
        let f = Fixture::new();
        let (resolvable, replayable, uncertain) =
            (f.resolve_entry(), f.replay_entry(), f.verify_entry());
        let triage = f.run(backend, &["dlq", "triage", "-o", "json"]);
        let plan_path = f._dir.path().join("plan.json");
        std::fs::write(&plan_path, &triage.stdout).expect("plan");
        // Someone else acts on one entry after the plan was made.
        let out = f.run(
            backend,
            &["dlq", "resolve", &resolvable, "--confirm", "--yes"],
        );
        assert_eq!(out.status.code(), Some(0), "{}", text(&out));
        let out = f.run(
            backend,
            &[
                "apply",
                &plan_path.display().to_string(),
                "--confirm",
                "--yes",
            ],
        );
        assert_eq!(out.status.code(), Some(5), "{backend:?}: {}", text(&out));
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        let outcome = |id: &str| {
            stdout
                .lines()
                .rev()
                .find(|l| l.starts_with(id))
                .map(str::to_string)
                .unwrap_or_default()
        };
        assert!(outcome(&resolvable).contains("skipped (stale)"), "{stdout}");
        assert!(outcome(&replayable).contains("replayed SLACK"), "{stdout}");
        assert!(
            outcome(&uncertain).contains("refused (guardrail)"),
            "{stdout}"
        );
        assert_eq!(
            f.audit(&resolvable, "DLQ_RESOLVED").len(),
            1,
            "the stale entry was not resolved twice"
        );
        assert_eq!(f.status(&uncertain), "DEAD");

        // An attested VERIFY entry in an edited plan is carried out.
        let mut plan: Value = serde_json::from_slice(&triage.stdout).expect("json");
        for entry in plan["entries"].as_array_mut().expect("entries") {
            if entry["id"] == uncertain.as_str() {
                entry["action"] = "resolve".into();
                entry["attestation"] = "found in the mailbox at 03:12".into();
            }
        }
        std::fs::write(&plan_path, plan.to_string()).expect("plan");
        let out = f.run(
            backend,
            &[
                "apply",
                &plan_path.display().to_string(),
                "--confirm",
                "--yes",
            ],
        );
        assert!(
            String::from_utf8_lossy(&out.stdout)
                .lines()
                .any(|l| l.starts_with(&uncertain) && l.ends_with("resolved")),
            "{}",
            text(&out)
        );
        assert_eq!(
            f.audit(&uncertain, "DLQ_RESOLVED")[0]["attestation"],
            "found in the mailbox at 03:12"
        );
    }
}

#[test]
fn inspect_shows_the_audit_in_the_timeline() {
    let f = Fixture::new();
    let id = f.replay_entry();
    let out = f.run(
        Backend::Sqlite,
        &[
            "replay",
            &id,
            "--confirm",
            "--yes",
            "--operator",
            "dana",
            "--reason",
            "fixed the webhook",
            "--ticket",
            "INC-9",
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let out = f.run(Backend::Sqlite, &["inspect", &id]);
    let timeline = String::from_utf8_lossy(&out.stdout);
    let line = timeline
        .lines()
        .find(|l| l.contains("REPLAYED"))
        .unwrap_or_default();
    for expected in [
        "by dana",
        "on REPLAY",
        "channels SLACK",
        "reason: fixed the webhook",
        "ticket: INC-9",
    ] {
        assert!(line.contains(expected), "{expected} missing: {line}");
    }
}
