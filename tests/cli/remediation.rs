//! Resolve, replay and apply through the real binary on both backends, and straight at
//! the API: dry runs, one table row for every guardrail (including each way a careless
//! or hostile caller tried to get around one), the audit record, races and plans.

use crate::support;
use unsctl::db::Db;

use reqwest::StatusCode;
use serde_json::{Value, json};
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

use unsctl::model::Channel;
use unsctl::runtime::engine::DeliveryResult;
use unsctl::runtime::schema::{self, OpenMode};

use support::{BACKENDS, Backend};

struct Fixture {
    _dir: tempfile::TempDir,
    db: PathBuf,
    conn: rusqlite::Connection,
    server: unsctl::server::RunningServer,
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

    /// EMAIL unknown, SLACK refused: VERIFY, with a channel nobody received.
    fn verify_failed_entry(&self) -> String {
        support::play(
            &self.conn,
            self.tick(),
            &[Channel::Email, Channel::Slack],
            &[
                DeliveryResult::unknown("no reply after the message data was sent"),
                DeliveryResult::rejected("HTTP 400", false),
            ],
            3,
        )
    }

    /// EMAIL refused: REPLAY, and EMAIL is its only channel.
    fn email_replay_entry(&self) -> String {
        support::play(
            &self.conn,
            self.tick(),
            &[Channel::Email],
            &[DeliveryResult::rejected("rcpt: 550 no such user", false)],
            3,
        )
    }

    /// A REPLAY entry whose channels column someone overwrote with garbage.
    fn garbled_entry(&self) -> String {
        let id = self.replay_entry();
        self.conn
            .execute(
                "UPDATE uns_notifications SET channels = 'SLACK and EMAIL' WHERE id = ?1",
                [&id],
            )
            .expect("garble");
        id
    }

    fn url(&self) -> String {
        format!("http://{}", self.server.addr)
    }

    fn command(&self, backend: Backend, args: &[&str]) -> Command {
        let mut command = backend.command(&self.db, &self.server);
        command.args(args);
        command
    }

    fn run(&self, backend: Backend, args: &[&str]) -> Output {
        self.command(backend, args).output().expect("unsctl")
    }

    /// A raw API call, as curl would make it.
    fn api(&self, method: &str, path: &str, body: &str) -> (StatusCode, Value) {
        unsctl::runtime::adapters::init_tls();
        let client = reqwest::blocking::Client::new();
        let url = format!("{}{path}", self.url());
        let request = match method {
            "DELETE" => client.delete(url),
            _ => client.post(url),
        };
        let response = request
            .bearer_auth(support::KEY)
            .header("content-type", "application/json")
            .body(body.to_string())
            .send()
            .expect("request");
        let status = response.status();
        let text = response.text().expect("body");
        (
            status,
            serde_json::from_str(&text).unwrap_or_else(|_| panic!("not JSON: {text}")),
        )
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

    fn actions(&self, id: &str) -> usize {
        self.audit(id, "REPLAYED").len() + self.audit(id, "DLQ_RESOLVED").len()
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

fn with_id<'a>(args: &[&'a str], id: &'a str) -> Vec<&'a str> {
    args.iter()
        .map(|a| if *a == "ID" { id } else { a })
        .collect()
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
            vec!["dlq", "resolve", resolvable.as_str(), "--dry-run"],
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

/// One way of trying to act where a guardrail must refuse.
struct Refused {
    name: &'static str,
    entry: fn(&Fixture) -> String,
    /// The CLI arguments (ID stands for the entry), run on both backends with --confirm --yes.
    cli: &'static [&'static str],
    cli_exit: i32,
    /// The same attempt straight at the API: method, route (ID substituted), raw body.
    api: Option<(&'static str, &'static str, &'static str)>,
    http: u16,
}

const REPLAY: &str = "/api/v1/runtime/notifications/ID/replay";
const RESOLVE: &str = "/api/v1/dlq/ID";

const REFUSED: &[Refused] = &[
    Refused {
        name: "a delivered channel spelled with a leading space",
        entry: Fixture::mixed_entry,
        cli: &["replay", "ID", "--channels", " email"],
        cli_exit: 4,
        api: Some(("POST", REPLAY, r#"{"channels": [" email"]}"#)),
        http: 422,
    },
    Refused {
        name: "a delivered channel with a trailing tab",
        entry: Fixture::mixed_entry,
        cli: &["replay", "ID", "--channels", "EMAIL\t"],
        cli_exit: 4,
        api: Some(("POST", REPLAY, "{\"channels\": [\"EMAIL\\t\"]}")),
        http: 422,
    },
    Refused {
        name: "a channel the notification does not have",
        entry: Fixture::email_replay_entry,
        cli: &["replay", "ID", "--channels", "slack"],
        cli_exit: 4,
        api: Some(("POST", REPLAY, r#"{"channels": ["SLACK"]}"#)),
        http: 422,
    },
    Refused {
        name: "an unknown channel name",
        entry: Fixture::replay_entry,
        cli: &["replay", "ID", "--channels", "fax"],
        cli_exit: 2,
        api: Some(("POST", REPLAY, r#"{"channels": ["FAX"]}"#)),
        http: 400,
    },
    Refused {
        name: "force without a reason",
        entry: Fixture::mixed_entry,
        cli: &["replay", "ID", "--channels", "EMAIL", "--force"],
        cli_exit: 4,
        api: Some(("POST", REPLAY, r#"{"force": true, "channels": ["EMAIL"]}"#)),
        http: 422,
    },
    Refused {
        name: "force with a blank reason",
        entry: Fixture::mixed_entry,
        cli: &[
            "replay",
            "ID",
            "--channels",
            "EMAIL",
            "--force",
            "--reason",
            "  ",
        ],
        // A reason that says nothing is refused as typed, before any guardrail is asked.
        cli_exit: 2,
        api: Some((
            "POST",
            REPLAY,
            r#"{"force": true, "reason": "  ", "channels": ["EMAIL"]}"#,
        )),
        http: 422,
    },
    Refused {
        name: "replaying a RESOLVE entry sends a duplicate",
        entry: Fixture::resolve_entry,
        cli: &["replay", "ID", "--channels", "EMAIL"],
        cli_exit: 4,
        api: Some(("POST", REPLAY, "{}")),
        http: 422,
    },
    Refused {
        name: "replaying a VERIFY entry before anyone checked",
        entry: Fixture::verify_entry,
        cli: &["replay", "ID"],
        cli_exit: 4,
        api: Some(("POST", REPLAY, "{}")),
        http: 422,
    },
    Refused {
        name: "resolving a VERIFY entry before anyone checked",
        entry: Fixture::verify_entry,
        cli: &["dlq", "resolve", "ID"],
        cli_exit: 4,
        api: Some(("DELETE", RESOLVE, "")),
        http: 422,
    },
    Refused {
        name: "resolving a REPLAY entry drops a message nobody received",
        entry: Fixture::replay_entry,
        cli: &["dlq", "resolve", "ID"],
        cli_exit: 4,
        api: Some(("DELETE", RESOLVE, "")),
        http: 422,
    },
    Refused {
        name: "resolving an attested VERIFY entry while another channel FAILED",
        entry: Fixture::verify_failed_entry,
        cli: &["dlq", "resolve", "ID", "--verified-delivered"],
        cli_exit: 4,
        api: Some((
            "DELETE",
            RESOLVE,
            r#"{"attestation": "found it in the mailbox", "verified": "DELIVERED"}"#,
        )),
        http: 422,
    },
    Refused {
        name: "attesting delivery while replaying the uncertain channel",
        entry: Fixture::verify_failed_entry,
        cli: &[
            "replay",
            "ID",
            "--channels",
            "email,slack",
            "--verified-delivered",
        ],
        cli_exit: 4,
        api: Some((
            "POST",
            REPLAY,
            r#"{"attestation": "x", "verified": "DELIVERED", "channels": ["EMAIL", "SLACK"]}"#,
        )),
        http: 422,
    },
    Refused {
        name: "a verdict sent by the client is ignored",
        entry: Fixture::replay_entry,
        cli: &["dlq", "resolve", "ID"],
        cli_exit: 4,
        api: Some((
            "DELETE",
            RESOLVE,
            r#"{"triage": {"branch": "RESOLVE", "channels": []}}"#,
        )),
        http: 422,
    },
    Refused {
        name: "a body that is not a JSON object",
        entry: Fixture::replay_entry,
        cli: &[
            "replay",
            "ID",
            "--channels",
            "slack",
            "--verified-delivered",
            "--verified-not-delivered",
        ],
        cli_exit: 2,
        api: Some(("POST", REPLAY, "[]")),
        http: 400,
    },
    Refused {
        name: "a channels column that cannot be read is never replayed",
        entry: Fixture::garbled_entry,
        cli: &["replay", "ID", "--channels", "slack"],
        cli_exit: 4,
        api: Some(("POST", REPLAY, r#"{"channels": ["SLACK"]}"#)),
        http: 422,
    },
    Refused {
        name: "a channels column that cannot be read is not resolved by an attestation",
        entry: Fixture::garbled_entry,
        cli: &["dlq", "resolve", "ID", "--verified-delivered"],
        cli_exit: 4,
        api: Some((
            "DELETE",
            RESOLVE,
            r#"{"attestation": "looked", "verified": "DELIVERED"}"#,
        )),
        http: 422,
    },
];

#[test]
fn every_guardrail_refuses_on_every_path_and_nothing_changes() {
    let f = Fixture::new();
    for case in REFUSED {
        for backend in BACKENDS {
            let id = (case.entry)(&f);
            let mut args = with_id(case.cli, &id);
            args.extend(["--confirm", "--yes"]);
            let out = f.run(backend, &args);
            assert_eq!(
                out.status.code(),
                Some(case.cli_exit),
                "{backend:?} {}: {}",
                case.name,
                text(&out)
            );
            assert_eq!(f.status(&id), "DEAD", "{}: nothing changed", case.name);
            assert_eq!(f.actions(&id), 0, "{}: no audit event", case.name);
            if case.cli_exit == 4 {
                assert!(
                    text(&out).contains("--"),
                    "{}: the refusal says which flag would allow it: {}",
                    case.name,
                    text(&out)
                );
            }
        }
        if let Some((method, route, body)) = case.api {
            let id = (case.entry)(&f);
            let (status, answer) = f.api(method, &route.replace("ID", &id), body);
            assert_eq!(status.as_u16(), case.http, "API {}: {answer}", case.name);
            let error = answer["error"].as_str().unwrap_or_default();
            assert!(!error.is_empty(), "{}: {answer}", case.name);
            if case.http == 422 {
                assert_eq!(answer["kind"], "refused", "{answer}");
                assert!(
                    !error.contains("--"),
                    "{}: the API names its own fields, not CLI flags: {error}",
                    case.name
                );
            }
            assert_eq!(f.status(&id), "DEAD", "API {}: nothing changed", case.name);
            assert_eq!(f.actions(&id), 0, "API {}", case.name);
        }
    }
}

/// An override or an attested action that the guardrails let through, and what the audit
/// must then say.
struct Allowed {
    name: &'static str,
    entry: fn(&Fixture) -> String,
    cli: &'static [&'static str],
    event: &'static str,
    recorded: &'static [(&'static str, &'static str)],
}

const ALLOWED: &[Allowed] = &[
    Allowed {
        name: "replaying a RESOLVE entry on purpose",
        entry: Fixture::resolve_entry,
        cli: &[
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
            ("channels", "[\"EMAIL\"]"),
        ],
    },
    Allowed {
        name: "replaying a VERIFY entry after checking",
        entry: Fixture::verify_entry,
        cli: &[
            "replay",
            "ID",
            "--verified-not-delivered",
            "--reason",
            "relay log has no such Message-ID",
        ],
        event: "REPLAYED",
        recorded: &[
            ("attestation", "verified out of band: not delivered"),
            ("verified", "NOT_DELIVERED"),
            ("forced", "false"),
        ],
    },
    Allowed {
        name: "resolving a VERIFY entry after checking",
        entry: Fixture::verify_entry,
        cli: &[
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
    Allowed {
        name: "the uncertain channel arrived: replay only what was never sent",
        entry: Fixture::verify_failed_entry,
        cli: &["replay", "ID", "--verified-delivered"],
        event: "REPLAYED",
        recorded: &[("channels", "[\"SLACK\"]"), ("verified", "DELIVERED")],
    },
    Allowed {
        name: "dropping a REPLAY entry on purpose",
        entry: Fixture::replay_entry,
        cli: &[
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
    Allowed {
        name: "duplicate channel names collapse into one",
        entry: Fixture::replay_entry,
        cli: &["replay", "ID", "--channels", "slack,SLACK, Slack"],
        event: "REPLAYED",
        recorded: &[("channels", "[\"SLACK\"]"), ("forced", "false")],
    },
];

#[test]
fn each_allowed_action_is_carried_out_once_and_audited() {
    for backend in BACKENDS {
        let f = Fixture::new();
        for case in ALLOWED {
            let id = (case.entry)(&f);
            let mut args = with_id(case.cli, &id);
            args.extend(["--confirm", "--yes", "--operator", "alice"]);
            let out = f.run(backend, &args);
            assert_eq!(
                out.status.code(),
                Some(0),
                "{backend:?} {}: {}",
                case.name,
                text(&out)
            );
            let events = f.audit(&id, case.event);
            assert_eq!(events.len(), 1, "{}", case.name);
            let audit = &events[0];
            for (key, value) in case.recorded {
                let found = match &audit[*key] {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                };
                assert_eq!(found, *value, "{backend:?} {}: {key} in {audit}", case.name);
            }
            if case.recorded.contains(&("forced", "true")) {
                assert!(
                    !audit["overridden"].as_array().is_none_or(Vec::is_empty),
                    "{}: the audit names the guardrail overridden: {audit}",
                    case.name
                );
            }
            let expected_operator = match backend {
                Backend::Sqlite => "alice",
                Backend::Http => "default",
            };
            assert_eq!(audit["operator"], expected_operator, "{audit}");
            if backend == Backend::Http {
                assert_eq!(audit["claimed_operator"], "alice", "{audit}");
            }
            let triage = &audit["triage"];
            assert!(
                triage["branch"].is_string() && triage["last_event_id"].is_i64(),
                "{audit}"
            );
        }
    }
}

/// A bulk replay naming a channel: each entry is checked on its own, and one without that
/// channel is refused rather than replayed onto it.
#[test]
fn a_bulk_replay_never_puts_an_entry_on_a_channel_it_does_not_have() {
    for backend in BACKENDS {
        let f = Fixture::new();
        let email_only = f.email_replay_entry();
        let slack = f.replay_entry();
        let out = f.run(
            backend,
            &[
                "replay",
                "--branch",
                "replay",
                "--channels",
                "slack",
                "--confirm",
                "--yes",
                "-o",
                "json",
            ],
        );
        assert_eq!(out.status.code(), Some(4), "{backend:?}: {}", text(&out));
        assert_eq!(f.status(&email_only), "DEAD", "{backend:?}");
        assert_eq!(f.actions(&email_only), 0, "{backend:?}");
        assert_eq!(f.status(&slack), "PENDING", "{backend:?}");
        let replayed = f.audit(&slack, "REPLAYED");
        assert_eq!(replayed.len(), 1);
        assert_eq!(replayed[0]["channels"], json!(["SLACK"]));
        let results: Value = serde_json::from_slice(&out.stdout).expect("json");
        let refused = results["results"]
            .as_array()
            .and_then(|r| r.iter().find(|r| r["id"] == email_only.as_str()))
            .cloned()
            .unwrap_or_default();
        assert_eq!(refused["outcome"], "refused", "{results:#}");
        assert!(
            refused["reason"]
                .as_str()
                .is_some_and(|r| r.contains("has no SLACK channel")),
            "{results:#}"
        );
    }
}

#[test]
fn the_api_records_the_keys_name_from_a_keys_file() {
    let dir = tempfile::tempdir().expect("dir");
    let db = dir.path().join("uns.db");
    let conn = schema::open(&db, OpenMode::Create).expect("store");
    let keys = dir.path().join("keys");
    std::fs::write(
        &keys,
        "# the on-call rotation\nalice aaaaaaaaaaaaaaaaaaaaaaaa\nbob bbbbbbbbbbbbbbbbbbbbbbbb\n",
    )
    .expect("keys");
    let server = unsctl::server::start(unsctl::server::ServerConfig::api_only(
        db.clone(),
        Some(unsctl::server::Keys::load(Some(support::KEY), Some(&keys)).expect("keys")),
    ))
    .expect("server");
    let id = support::replay_entry(&conn, 1000.0);
    let out = support::unsctl()
        .args(["--api", &format!("http://{}", server.addr)])
        .args(["replay", &id, "--confirm", "--yes", "--operator", "mallory"])
        .env("UNS_API_KEY", "bbbbbbbbbbbbbbbbbbbbbbbb")
        .stdin(Stdio::null())
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let audit: String = conn
        .query_row(
            "SELECT payload FROM uns_events WHERE notification_id = ?1 AND kind = 'REPLAYED'",
            [&id],
            |r| r.get(0),
        )
        .expect("audit");
    let audit: Value = serde_json::from_str(&audit).expect("json");
    assert_eq!(audit["operator"], "bob", "{audit}");
    assert_eq!(audit["claimed_operator"], "mallory", "{audit}");
}

#[test]
fn the_operator_is_the_flag_then_the_environment_then_the_account() {
    let f = Fixture::new();
    let account =
        String::from_utf8_lossy(&Command::new("id").arg("-un").output().expect("id").stdout)
            .trim()
            .to_string();
    for (flag, env, expected) in [
        (Some("carol"), Some("bob"), "carol"),
        (None, Some("bob"), "bob"),
        (None, None, account.as_str()),
    ] {
        let id = f.replay_entry();
        let mut command = f.command(Backend::Sqlite, &["replay", &id, "--confirm", "--yes"]);
        command.env_remove("USER").env_remove("LOGNAME");
        if let Some(flag) = flag {
            command.args(["--operator", flag]);
        }
        if let Some(env) = env {
            command.env("UNS_OPERATOR", env);
        }
        let out = command.output().expect("run");
        assert_eq!(out.status.code(), Some(0), "{}", text(&out));
        let operator = f.audit(&id, "REPLAYED")[0]["operator"].clone();
        assert_eq!(operator, expected);
        assert_ne!(operator, "unknown");
    }
}

/// What is said for the record is refused when it says nothing (`--reason "$WHY"` with
/// the variable unset), on every act that records it, before anything changes: the record
/// would otherwise say nothing where the operator meant it to say something.
#[test]
fn a_reason_a_ticket_or_an_operator_that_says_nothing_is_refused() {
    let f = Fixture::new();
    let id = f.replay_entry();
    let acts: [&[&str]; 4] = [
        &["replay", &id, "--confirm", "--yes"],
        &["dlq", "resolve", &id, "--confirm", "--yes"],
        &["verify", &id, "--record", "--confirm", "--yes"],
        &["note", "the relay is back"],
    ];
    for act in acts {
        for flag in ["--reason", "--ticket", "--operator"] {
            if act[0] == "note" && flag == "--reason" {
                continue;
            }
            for blank in ["", "  "] {
                let mut args = act.to_vec();
                args.extend([flag, blank]);
                let out = f.command(Backend::Sqlite, &args).output().expect("run");
                let said = text(&out);
                assert_eq!(out.status.code(), Some(2), "{args:?}: {said}");
                assert!(
                    said.contains(&format!("for '{flag} <")) && said.contains("would say nothing"),
                    "{args:?}: {said}"
                );
            }
        }
    }
    assert!(f.audit(&id, "REPLAYED").is_empty(), "nothing was replayed");
}

#[test]
fn without_a_terminal_and_without_yes_it_refuses_at_once() {
    for backend in BACKENDS {
        let f = Fixture::new();
        let id = f.replay_entry();
        let out = f.run(backend, &["replay", &id, "--confirm"]);
        assert_eq!(out.status.code(), Some(4), "{}", text(&out));
        assert!(text(&out).contains("--yes"), "{}", text(&out));
        assert!(
            !text(&out).contains("Type yes"),
            "no prompt without a terminal"
        );
        assert_eq!(f.status(&id), "DEAD");
        let out = f.run(backend, &["replay", &id, "--yes"]);
        assert_eq!(
            out.status.code(),
            Some(2),
            "--yes without --confirm: {}",
            text(&out)
        );
        let out = f.run(backend, &["replay", &id, "--confirm", "--dry-run"]);
        assert_eq!(
            out.status.code(),
            Some(2),
            "--dry-run with --confirm: {}",
            text(&out)
        );
        assert_eq!(f.status(&id), "DEAD");
        let out = f.run(backend, &["replay", &id, "--confirm", "--yes"]);
        assert_eq!(out.status.code(), Some(0), "{}", text(&out));
        assert_eq!(f.status(&id), "PENDING");
        assert!(String::from_utf8_lossy(&out.stdout).contains("replayed SLACK"));
    }
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

fn plan_of(f: &Fixture, backend: Backend) -> Value {
    let triage = f.run(backend, &["dlq", "triage", "-o", "json"]);
    serde_json::from_slice(&triage.stdout).expect("plan")
}

fn apply(f: &Fixture, backend: Backend, plan: &Value, extra: &[&str]) -> Output {
    let path = f._dir.path().join("plan.json");
    std::fs::write(&path, plan.to_string()).expect("plan");
    let path = path.display().to_string();
    let mut args = vec!["apply", path.as_str(), "--confirm", "--yes"];
    args.extend(extra);
    f.run(backend, &args)
}

fn outcome_line(out: &Output, id: &str) -> String {
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .rev()
        .find(|l| l.starts_with(id))
        .map(str::to_string)
        .unwrap_or_default()
}

/// A base no triage writes is no base, and one newer than the entry's whole history is
/// of another history: neither entry is carried out, and each says which it is.
#[test]
fn a_plan_base_this_history_cannot_have_is_not_acted_on() {
    for backend in BACKENDS {
        let f = Fixture::new();
        let (replayable, uncertain) = (f.replay_entry(), f.verify_entry());
        let mut plan = plan_of(&f, backend);
        for entry in plan["entries"].as_array_mut().expect("entries") {
            if entry["id"] == replayable.as_str() {
                entry["last_event_id"] = (-5).into();
            }
            if entry["id"] == uncertain.as_str() {
                entry["action"] = "resolve".into();
                entry["attestation"] = "found in the mailbox at 03:12".into();
                let planned = entry["last_event_id"].as_i64().expect("its base");
                entry["last_event_id"] = (planned + 1000).into();
            }
        }
        let out = apply(&f, backend, &plan, &[]);
        assert_ne!(out.status.code(), Some(0), "{}", text(&out));
        assert!(
            outcome_line(&out, &replayable).contains("no usable last_event_id"),
            "{backend:?}: {}",
            text(&out)
        );
        assert!(
            outcome_line(&out, &uncertain).contains("not made from this history"),
            "{backend:?}: {}",
            text(&out)
        );
        assert_eq!(f.status(&uncertain), "DEAD");
        assert_eq!(f.status(&replayable), "DEAD");
        assert!(f.audit(&replayable, "REPLAYED").is_empty(), "not replayed");
    }
}

#[test]
fn a_stale_plan_entry_is_skipped_with_exit_5() {
    for backend in BACKENDS {
        let f = Fixture::new();
        let (resolvable, replayable, uncertain) =
            (f.resolve_entry(), f.replay_entry(), f.verify_entry());
        let plan = plan_of(&f, backend);
        // Someone else acts on one entry after the plan was made.
        let out = f.run(
            backend,
            &["dlq", "resolve", &resolvable, "--confirm", "--yes"],
        );
        assert_eq!(out.status.code(), Some(0), "{}", text(&out));
        let out = apply(&f, backend, &plan, &[]);
        assert_eq!(out.status.code(), Some(5), "{backend:?}: {}", text(&out));
        assert!(
            outcome_line(&out, &resolvable).contains("skipped (stale)"),
            "{}",
            text(&out)
        );
        assert!(
            outcome_line(&out, &replayable).contains("replayed SLACK"),
            "{}",
            text(&out)
        );
        assert!(
            outcome_line(&out, &uncertain).contains("refused"),
            "{}",
            text(&out)
        );
        assert_eq!(
            f.audit(&resolvable, "DLQ_RESOLVED").len(),
            1,
            "not resolved twice"
        );
        assert_eq!(f.status(&uncertain), "DEAD");

        // An attested VERIFY entry in an edited plan is carried out.
        let mut plan = plan_of(&f, backend);
        for entry in plan["entries"].as_array_mut().expect("entries") {
            if entry["id"] == uncertain.as_str() {
                entry["action"] = "resolve".into();
                entry["attestation"] = "found in the mailbox at 03:12".into();
            }
        }
        let out = apply(&f, backend, &plan, &[]);
        assert_eq!(out.status.code(), Some(0), "{}", text(&out));
        assert!(
            outcome_line(&out, &uncertain).ends_with("resolved"),
            "{}",
            text(&out)
        );
        let audit = &f.audit(&uncertain, "DLQ_RESOLVED")[0];
        assert_eq!(audit["attestation"], "found in the mailbox at 03:12");
        assert_eq!(audit["verified"], "DELIVERED");
    }
}

#[test]
fn plan_exit_codes_say_what_happened() {
    for backend in BACKENDS {
        let f = Fixture::new();
        let uncertain = f.verify_entry();
        let resolvable = f.resolve_entry();
        let replayable = f.replay_entry();

        // Every entry refused: exit 4, nothing done.
        let mut plan = plan_of(&f, backend);
        plan["entries"]
            .as_array_mut()
            .expect("entries")
            .retain(|e| e["id"] == uncertain.as_str());
        let out = apply(&f, backend, &plan, &[]);
        assert_eq!(out.status.code(), Some(4), "{backend:?}: {}", text(&out));

        // An entry without a usable last_event_id cannot be checked: refused.
        let mut plan = plan_of(&f, backend);
        for entry in plan["entries"].as_array_mut().expect("entries") {
            if entry["id"] == resolvable.as_str() {
                entry["last_event_id"] = Value::Null;
            }
            if entry["id"] == replayable.as_str() {
                entry["last_event_id"] = "soon".into();
            }
        }
        plan["entries"]
            .as_array_mut()
            .expect("entries")
            .retain(|e| e["id"] != uncertain.as_str());
        let out = apply(&f, backend, &plan, &[]);
        assert_eq!(out.status.code(), Some(4), "{backend:?}: {}", text(&out));
        assert!(
            outcome_line(&out, &resolvable).contains("last_event_id"),
            "{}",
            text(&out)
        );
        assert_eq!(f.status(&resolvable), "DEAD");
        assert_eq!(f.status(&replayable), "DEAD");

        // An id that does not exist is not found (3); the other entries still run.
        let mut plan = plan_of(&f, backend);
        plan["entries"]
            .as_array_mut()
            .expect("entries")
            .retain(|e| e["id"] == resolvable.as_str());
        let mut ghost = plan["entries"][0].clone();
        ghost["id"] = "n-does-not-exist".into();
        plan["entries"].as_array_mut().expect("entries").push(ghost);
        let out = apply(&f, backend, &plan, &["-o", "json"]);
        assert_eq!(out.status.code(), Some(3), "{backend:?}: {}", text(&out));
        assert_eq!(f.status(&resolvable), "RESOLVED");
        let results: Value = serde_json::from_slice(&out.stdout).expect("json");
        let by_id = |id: &str| {
            results["results"]
                .as_array()
                .and_then(|r| r.iter().find(|e| e["id"] == id))
                .cloned()
                .unwrap_or_default()
        };
        assert_eq!(by_id(&resolvable)["outcome"], "done", "{results}");
        assert!(by_id(&resolvable)["event_id"].is_i64(), "{results}");
        assert_eq!(
            by_id("n-does-not-exist")["outcome"],
            "not_found",
            "{results}"
        );
        assert_eq!(results["summary"]["done"], 1, "{results}");

        // The same entry written twice is acted on once; an id listed with two different
        // actions is refused both times.
        let mut plan = plan_of(&f, backend);
        let entries = plan["entries"].as_array_mut().expect("entries");
        entries.retain(|e| e["id"] == replayable.as_str());
        entries.push(entries[0].clone());
        let out = apply(&f, backend, &plan, &[]);
        assert_eq!(out.status.code(), Some(0), "{backend:?}: {}", text(&out));
        assert_eq!(f.audit(&replayable, "REPLAYED").len(), 1);
        let torn = f.replay_entry();
        let mut plan = plan_of(&f, backend);
        let entries = plan["entries"].as_array_mut().expect("entries");
        entries.retain(|e| e["id"] == torn.as_str());
        let mut other = entries[0].clone();
        other["action"] = "resolve".into();
        entries.push(other);
        let out = apply(&f, backend, &plan, &["--force", "--reason", "both ways"]);
        assert_eq!(out.status.code(), Some(4), "{backend:?}: {}", text(&out));
        assert!(
            text(&out).contains("listed more than once"),
            "{}",
            text(&out)
        );
        assert_eq!((f.status(&torn), f.actions(&torn)), ("DEAD".to_string(), 0));

        // Two prefixes of one id on the command line are one entry.
        let twice = f.replay_entry();
        let out = f.run(
            backend,
            &[
                "replay",
                &twice,
                &twice[..twice.len() - 2],
                "--confirm",
                "--yes",
            ],
        );
        assert_eq!(out.status.code(), Some(0), "{backend:?}: {}", text(&out));
        assert_eq!(f.audit(&twice, "REPLAYED").len(), 1);
    }
}

#[test]
fn mutations_print_one_json_result_per_entry() {
    for backend in BACKENDS {
        let f = Fixture::new();
        let (replayable, resolvable) = (f.replay_entry(), f.resolve_entry());
        let out = f.run(backend, &["replay", &replayable, &resolvable, "-o", "json"]);
        assert_eq!(out.status.code(), Some(4), "{}", text(&out));
        let dry: Value = serde_json::from_slice(&out.stdout).expect("json");
        assert_eq!(dry["dry_run"], true);
        assert_eq!(dry["results"][0]["outcome"], "planned", "{dry}");
        assert_eq!(dry["results"][0]["channels"], json!(["SLACK"]), "{dry}");
        assert_eq!(dry["results"][1]["outcome"], "refused", "{dry}");
        assert!(
            dry["results"][1]["reason"]
                .as_str()
                .unwrap_or_default()
                .contains("duplicate")
        );

        let out = f.run(
            backend,
            &["replay", &replayable, "--confirm", "--yes", "-o", "json"],
        );
        assert_eq!(out.status.code(), Some(0), "{}", text(&out));
        let done: Value = serde_json::from_slice(&out.stdout).expect("json");
        assert_eq!(done["dry_run"], false);
        assert_eq!(done["results"][0]["id"], replayable.as_str());
        assert_eq!(done["results"][0]["action"], "replay");
        assert_eq!(done["results"][0]["outcome"], "done");
        let event = done["results"][0]["event_id"].as_i64().expect("event id");
        let audit = f.audit(&replayable, "REPLAYED");
        assert_eq!(audit.len(), 1);
        let written: i64 = f
            .conn
            .query_row(
                "SELECT id FROM uns_events WHERE notification_id = ?1 AND kind = 'REPLAYED'",
                [&replayable],
                |r| r.get(0),
            )
            .expect("event");
        assert_eq!(event, written);
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
        "reason: \"fixed the webhook\"",
        "ticket: \"INC-9\"",
    ] {
        assert!(line.contains(expected), "{expected} missing: {line}");
    }
}

/// Over the API the record keeps the key's name and the operator's claim, and every
/// display shows both: `alice (key default)`.
#[test]
fn over_the_api_the_claimed_operator_shows_beside_the_key() {
    let f = Fixture::new();
    let id = f.replay_entry();
    let out = f.run(
        Backend::Http,
        &["replay", &id, "--confirm", "--yes", "--operator", "alice"],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    for backend in [Backend::Sqlite, Backend::Http] {
        let out = f.run(backend, &["--color", "never", "-o", "wide", "inspect", &id]);
        let timeline = String::from_utf8_lossy(&out.stdout);
        assert!(timeline.contains("by alice (key default)"), "{timeline}");
        let out = f.run(
            backend,
            &[
                "--color", "never", "-o", "wide", "events", "--kind", "REPLAYED",
            ],
        );
        let events = String::from_utf8_lossy(&out.stdout);
        assert!(events.contains("alice (key default)"), "{events}");
    }
    // The JSON keeps both fields.
    let out = f.run(Backend::Http, &["inspect", &id, "-o", "json"]);
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    let replayed = doc["events"]
        .as_array()
        .and_then(|e| e.iter().find(|e| e["kind"] == "REPLAYED"))
        .cloned()
        .unwrap_or_default();
    assert_eq!(replayed["payload"]["operator"], "default", "{replayed}");
    assert_eq!(
        replayed["payload"]["claimed_operator"], "alice",
        "{replayed}"
    );
}

/// The same rule on the command line, wherever the name comes from, before anything is
/// asked of the store: exit 2, the name shown without its control bytes.
#[test]
fn a_name_that_would_make_the_record_name_someone_else_is_refused() {
    let f = Fixture::new();
    let id = f.replay_entry();
    for backend in BACKENDS {
        for (flag, env) in [
            (Some("mallory (Key admin)"), None),
            (None, Some("\u{1b}[2Jeve")),
            (Some("eve\nroot"), None),
        ] {
            for act in [
                &["replay", &id, "--confirm", "--yes"][..],
                &["note", "relay restarted"],
            ] {
                let mut command = f.command(backend, act);
                if let Some(flag) = flag {
                    command.args(["--operator", flag]);
                }
                if let Some(env) = env {
                    command.env("UNS_OPERATOR", env);
                }
                let out = command.output().expect("run");
                let said = text(&out);
                assert_eq!(
                    out.status.code(),
                    Some(2),
                    "{act:?} {flag:?} {env:?}: {said}"
                );
                assert!(said.contains("cannot be recorded"), "{said}");
                assert!(!said.contains('\u{1b}'), "{said}");
            }
        }
    }
    assert_eq!(f.status(&id), "DEAD");
    assert!(f.audit(&id, "REPLAYED").is_empty());
}

/// Over the API, the ids typed on a bulk command are looked up several at once (each
/// lookup a round trip), and name the same entries, or meet the same refusal, as on the
/// store: the first id refused, in the order typed, is the one said.
#[test]
fn over_the_api_typed_ids_are_looked_up_at_once_and_read_as_the_store_reads_them() {
    let f = Fixture::new();
    let replays: Vec<String> = (0..12).map(|_| f.replay_entry()).collect();
    let prefixes: Vec<String> = replays
        .iter()
        .map(|id| id[..id.len() - 2].to_string())
        .collect();
    let mut args = vec!["replay".to_string()];
    args.extend(prefixes.iter().cloned());
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let gate = support::gate::Gate::start(f.server.addr, support::gate::PREFIX);
    let over_the_api = support::over_the_api(gate.addr)
        .args(&args)
        .output()
        .expect("unsctl");
    gate.saw_two_at_once("the ids typed");
    assert_eq!(
        over_the_api.status.code(),
        Some(0),
        "{}",
        text(&over_the_api)
    );
    let shown = String::from_utf8_lossy(&over_the_api.stdout).to_string();
    for id in &replays {
        assert!(shown.contains(id.as_str()), "{id} named in full: {shown}");
    }
    let here = f.run(Backend::Sqlite, &args);
    assert_eq!(shown, String::from_utf8_lossy(&here.stdout));
    // So are the ids --exclude names, and they leave out the same entries.
    let excluding = [
        "replay",
        "--branch",
        "replay",
        "--exclude",
        &prefixes[0],
        "--exclude",
        &prefixes[5],
    ];
    let gate = support::gate::Gate::start(f.server.addr, support::gate::PREFIX);
    let over_the_api = support::over_the_api(gate.addr)
        .args(excluding)
        .output()
        .expect("unsctl");
    gate.saw_two_at_once("the ids excluded");
    let shown = String::from_utf8_lossy(&over_the_api.stdout).to_string();
    assert!(
        !shown.contains(replays[0].as_str()) && !shown.contains(replays[5].as_str()),
        "{shown}"
    );
    assert!(shown.contains(replays[1].as_str()), "{shown}");
    let here = f.run(Backend::Sqlite, &excluding);
    assert_eq!(shown, String::from_utf8_lossy(&here.stdout));
    // A prefix that names nothing is kept as typed (that entry is then not found); one
    // too short to name an id refuses the command, wherever it stands.
    for refused in [
        vec![
            "replay",
            &prefixes[0],
            "n-ffffffffffff",
            &prefixes[1],
            "n-0",
        ],
        vec!["replay", "n-0", &prefixes[0]],
    ] {
        let over_the_api = f.run(Backend::Http, &refused);
        let here = f.run(Backend::Sqlite, &refused);
        assert_eq!(
            over_the_api.status.code(),
            here.status.code(),
            "{refused:?}"
        );
        assert_eq!(over_the_api.status.code(), Some(2), "{}", text(&here));
        assert_eq!(
            String::from_utf8_lossy(&over_the_api.stderr),
            String::from_utf8_lossy(&here.stderr),
            "{refused:?}"
        );
        assert!(
            text(&here).contains("too short to name an id"),
            "{}",
            text(&here)
        );
    }
    assert!(
        replays.iter().all(|id| f.actions(id) == 0),
        "dry runs change nothing"
    );
}

/// Over the API, a bulk act (and a plan's apply) reads its entries several at once before
/// it previews them (each costs a round trip, which to a server across a network is most
/// of what a long list costs), and previews them as the store does, in the same order. A gate in front
/// of the server holds each answer until a second connection asks, so reading one at a
/// time fails the test.
#[test]
fn over_the_api_a_bulk_act_reads_its_entries_at_once_and_previews_as_the_store_does() {
    let f = Fixture::new();
    let replays: Vec<String> = (0..12).map(|_| f.replay_entry()).collect();
    let resolves: Vec<String> = (0..12).map(|_| f.resolve_entry()).collect();
    let named = |verb: &[&'static str], ids: &[String]| -> Vec<String> {
        verb.iter()
            .map(|w| w.to_string())
            .chain(ids.iter().rev().cloned())
            .collect()
    };
    let plan = tempfile::NamedTempFile::new().expect("plan");
    let triage = f.run(Backend::Sqlite, &["dlq", "triage", "-o", "json"]);
    std::fs::write(plan.path(), &triage.stdout).expect("write the plan");
    for args in [
        named(&["replay"], &replays),
        vec!["replay".into(), "--branch".into(), "replay".into()],
        named(&["dlq", "resolve"], &resolves),
        vec!["apply".into(), plan.path().display().to_string()],
    ] {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let gate = support::gate::Gate::start(f.server.addr, support::gate::DOCUMENT);
        let over_the_api = support::over_the_api(gate.addr)
            .args(&args)
            .output()
            .expect("unsctl");
        gate.saw_two_at_once(&format!("{args:?}: the entries"));
        let here = f.run(Backend::Sqlite, &args);
        assert_eq!(
            over_the_api.status.code(),
            Some(0),
            "{}",
            text(&over_the_api)
        );
        let lines = String::from_utf8_lossy(&over_the_api.stdout).to_string();
        let entries = if args[0] == "apply" { 24 } else { 12 };
        assert_eq!(
            lines.lines().filter(|l| l.starts_with("n-")).count(),
            entries,
            "{args:?}: {lines}"
        );
        assert_eq!(lines, String::from_utf8_lossy(&here.stdout), "{args:?}");
    }
    assert!(
        replays.iter().chain(&resolves).all(|id| f.actions(id) == 0),
        "dry runs change nothing"
    );
}

/// A replay of some channels leaves the others owed: EMAIL replayed and delivered, the
/// entry is back in the DLQ with SLACK outstanding (never DELIVERED); giving SLACK up is
/// a forced resolve that names it, the person and the reason; reconcile then calls SLACK
/// MISSING, given up, and EMAIL delivered once. Both backends.
#[test]
fn a_partial_replay_leaves_the_rest_owed_until_given_up_on_purpose() {
    use support::runtime::Runtime;
    use unsctl::lab::fakes::Behavior;
    use unsctl::runtime::engine::{self, NewNotification};
    let runtime = Runtime::start(30.0);
    for (n, backend) in runtime.backends().iter().enumerate() {
        let recipient = format!("partial-{n}@example.com");
        let id = engine::submit(
            &Db::Sqlite(&rusqlite::Connection::open(&runtime.db).expect("db")),
            unsctl::clock::Clock::now(&unsctl::clock::SystemClock),
            &NewNotification {
                channels: [Channel::Email, Channel::Slack].into_iter().collect(),
                payload: json!({"recipient": recipient, "subject": "disk", "body": "b"}),
                idempotency_key: None,
                max_attempts: 1,
            },
        )
        .expect("submit")
        .id;
        runtime
            .fakes
            .control
            .script(&recipient, &[Behavior::Reject(554)]);
        runtime.fakes.control.script(&id, &[Behavior::Reject(400)]);
        runtime.wait_dead(&id);
        // The relay is fixed; Slack's webhook is not.
        let run = |args: &[&str]| {
            let out = runtime
                .unsctl(backend, args)
                .env("UNS_OPERATOR", "oncall-jane")
                .output()
                .expect("unsctl");
            assert!(out.status.success(), "{args:?}: {}", text(&out));
            out
        };
        run(&[
            "replay",
            &id,
            "--channels",
            "email",
            "--reason",
            "relay fixed",
            "--confirm",
            "--yes",
        ]);
        support::wait_until(
            "the EMAIL replay settles",
            std::time::Duration::from_secs(20),
            || {
                let conn = rusqlite::Connection::open(&runtime.db).expect("db");
                conn.query_row(
                "SELECT COUNT(*) FROM uns_events WHERE notification_id = ?1 AND kind = 'DEAD_LETTERED'",
                [&id],
                |r| r.get::<_, i64>(0),
            )
            .expect("count")
                == 2
            },
        );
        assert_eq!(
            runtime.status(&id),
            ("DEAD".into(), true),
            "back in the DLQ"
        );
        let triage: Value =
            serde_json::from_slice(&run(&["dlq", "triage", "-o", "json"]).stdout).expect("json");
        let entry = triage["entries"]
            .as_array()
            .and_then(|e| e.iter().find(|e| e["id"] == id.as_str()))
            .cloned()
            .expect("in the DLQ");
        assert_eq!(entry["branch"], "REPLAY", "{entry:#}");
        let state = |channel: &str| {
            entry["channels"]
                .as_array()
                .and_then(|c| c.iter().find(|c| c["channel"] == channel))
                .map(|c| c["state"].clone())
        };
        assert_eq!(state("EMAIL"), Some(json!("DELIVERED")));
        assert_eq!(state("SLACK"), Some(json!("NOT_ATTEMPTED")));
        assert!(
            entry["error_message"]
                .as_str()
                .is_some_and(|e| e.contains("still outstanding: SLACK")),
            "{entry:#}"
        );
        // Giving SLACK up is an act of its own: forced, with the reason.
        let give_up = [
            "dlq",
            "resolve",
            &id,
            "--force",
            "--reason",
            "webhook retired",
            "--confirm",
            "--yes",
        ];
        run(&give_up);
        let conn = rusqlite::Connection::open(&runtime.db).expect("db");
        let audit: Value = conn
            .query_row(
                "SELECT payload FROM uns_events WHERE notification_id = ?1 AND kind = 'DLQ_RESOLVED'",
                [&id],
                |r| r.get::<_, String>(0),
            )
            .map(|text| serde_json::from_str(&text).expect("payload"))
            .expect("resolved");
        assert_eq!(audit["given_up"], json!(["SLACK"]), "{audit:#}");
        assert_eq!(audit["reason"], "webhook retired");
        assert!(
            audit["operator"] == "oncall-jane" || audit["claimed_operator"] == "oncall-jane",
            "{audit:#}"
        );
        let reconciled: Value =
            serde_json::from_slice(&run(&["reconcile", &id, "-o", "json"]).stdout).expect("json");
        let class = |channel: &str| {
            reconciled["notifications"]
                .as_array()
                .and_then(|n| n.iter().find(|n| n["channel"] == channel))
                .cloned()
                .unwrap_or_default()
        };
        assert_eq!(class("EMAIL")["class"], "ONCE", "{reconciled:#}");
        let slack = class("SLACK");
        assert_eq!(slack["class"], "MISSING", "{reconciled:#}");
        assert!(
            slack
                .to_string()
                .contains("given up on purpose by oncall-jane"),
            "{slack:#}"
        );
    }
}
