//! An incident as it really happens and as it is really worked, and the report of it
//! held to what the providers received (issue 44).
//!
//! The real worker delivers 300 notifications to fakes that really send and fail: a relay
//! that takes a message and never answers, one that loses it during DATA, webhooks that
//! refuse, providers that act and never answer, a webhook that acts only once the
//! reclaim's copy arrived (a duplicate), a PagerDuty service that refuses for good. Then
//! one named person works it over the API, as the runbook says: verify and record,
//! resolve, a replay of one channel of two and the other given up, a forced resolve, the
//! replays. The fakes' ledger says what each provider received per notification and
//! channel; the report says the same, names the person and the reason of every act, says
//! per channel what followed, gives each verdict change the attempt's own times, reads
//! the same over the store and the API, and lays out as a page to paste (Chromium).

use crate::support;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use unsctl::clock::{Clock, SystemClock};
use unsctl::db::Db;
use unsctl::lab::fakes::{
    Behavior, Fakes, PAGERDUTY_TOKEN, SLACK_BOT_ID, SLACK_CHANNEL, SLACK_TOKEN,
};
use unsctl::model::Channel;
use unsctl::runtime::engine::{self, NewNotification};
use unsctl::runtime::schema::{self, OpenMode};
use unsctl::runtime::worker::{Worker, WorkerConfig};
use unsctl::runtime::writer::Database;

/// The workers' lease during the incident. Every call to a fake that answers takes a few
/// milliseconds; the calls that outlive it are the faults scripted to (a reply that never
/// comes, an answer held until the reclaim's copy arrived), never a slow machine's luck.
const LEASE: f64 = 2.0;
/// A socket step waits at least this long, so a call held past the lease is still under
/// way when the reclaim's copy goes out.
const IO_FLOOR: Duration = Duration::from_secs(5);
/// The clock skew every command allows for: the fakes run on this machine's clock.
const SKEW: &str = "1s";

/// What happens to one notification, by design.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fault {
    None,
    /// EMAIL: the relay took the message and never answered (committed).
    RelayKeptNoReply,
    /// EMAIL: the relay lost the message during DATA (never committed).
    RelayLost,
    /// SLACK: refused with a 500 (fixed later).
    SlackRefused,
    /// SLACK: took the message and never answered.
    SlackKeptNoReply,
    /// PAGERDUTY: took the trigger and never answered.
    PagerDutyKeptNoReply,
    /// PAGERDUTY: refused with a 400 (the service is gone: given up).
    PagerDutyGone,
    /// EMAIL lost by the relay, and SLACK refused: one channel replayed, one given up.
    EmailLostSlackRefused,
    /// SLACK: answered only once the reclaim's copy arrived (two copies).
    SlackTwice,
}

impl Fault {
    fn channels(self, n: usize) -> Vec<Channel> {
        use Channel::{Email, Pagerduty, Slack};
        match self {
            Fault::RelayKeptNoReply | Fault::RelayLost => vec![Email],
            Fault::SlackRefused | Fault::SlackKeptNoReply | Fault::SlackTwice => vec![Slack],
            Fault::PagerDutyKeptNoReply | Fault::PagerDutyGone => vec![Pagerduty],
            Fault::EmailLostSlackRefused => vec![Email, Slack],
            Fault::None => match n % 5 {
                0 => vec![Email, Slack],
                1 => vec![Email],
                2 => vec![Slack],
                3 => vec![Pagerduty],
                _ => vec![Email, Pagerduty],
            },
        }
    }

    /// How many attempts a cycle has: a reclaim needs a second for its copy.
    fn max_attempts(self) -> i64 {
        if self == Fault::SlackTwice { 2 } else { 1 }
    }
}

/// The 300 notifications: the faulty ones first, so each fault meets a fresh worker.
fn planned() -> Vec<Fault> {
    let mut faults = Vec::new();
    for (fault, count) in [
        (Fault::RelayKeptNoReply, 10),
        (Fault::RelayLost, 6),
        (Fault::SlackRefused, 8),
        (Fault::SlackKeptNoReply, 4),
        (Fault::PagerDutyKeptNoReply, 4),
        (Fault::PagerDutyGone, 2),
        (Fault::EmailLostSlackRefused, 1),
        (Fault::SlackTwice, 5),
    ] {
        faults.extend(std::iter::repeat_n(fault, count));
    }
    faults.resize(300, Fault::None);
    faults
}

struct Incident {
    _dir: tempfile::TempDir,
    db: PathBuf,
    fakes: Fakes,
    server: unsctl::server::RunningServer,
    worker: Worker,
    /// Each notification's id and what was planned for it.
    ids: Vec<(String, Fault)>,
}

impl Incident {
    /// The store, the API over it (no worker of its own), and the fakes, each fault
    /// scripted; the worker runs until every notification has settled.
    fn happen() -> Self {
        let dir = tempfile::tempdir().expect("dir");
        let db = dir.path().join("uns.db");
        let conn = schema::open(&db, OpenMode::Create).expect("store");
        let fakes = Fakes::start().expect("fakes");
        fakes.control.set_default(Behavior::Accept);
        // The fake relay's log is seen running a skew's margin before the first message.
        support::wait_until(
            "the relay's log to be a second old",
            Duration::from_secs(5),
            || {
                std::fs::metadata(&fakes.maillog)
                    .and_then(|m| m.modified())
                    .is_ok_and(|t| t.elapsed().is_ok_and(|e| e >= Duration::from_millis(1100)))
            },
        );
        let mut ids = Vec::new();
        for (n, fault) in planned().into_iter().enumerate() {
            let recipient = format!("customer-{n}@example.net");
            let id = engine::submit(
                &Db::Sqlite(&conn),
                SystemClock.now(),
                &NewNotification {
                    channels: fault.channels(n).into_iter().collect(),
                    payload: serde_json::json!({
                        "recipient": recipient,
                        "subject": format!("Invoice {n} is ready"),
                        "body": "b",
                    }),
                    idempotency_key: None,
                    max_attempts: fault.max_attempts(),
                },
            )
            .expect("submit")
            .id;
            script(&fakes, fault, &id, &recipient);
            ids.push((id, fault));
        }
        drop(conn);
        let worker = Worker::new(
            Database::open(&db).expect("writer"),
            Arc::new(SystemClock),
            unsctl::lab::repro::fake_adapters(&fakes).expect("adapters"),
            WorkerConfig {
                worker_id: "incident".into(),
                lease_seconds: LEASE,
                concurrency: 16,
                poll_interval: Duration::from_millis(10),
                backoff: unsctl::runtime::engine::Backoff {
                    base_seconds: 0.05,
                    max_seconds: 0.2,
                },
                min_io_timeout: IO_FLOOR,
            },
        );
        let incident = Incident {
            server: support::server(&db),
            _dir: dir,
            db,
            fakes,
            worker,
            ids,
        };
        incident.deliver(&incident.worker);
        incident
    }

    /// Runs `worker` until no notification is due or leased; joining its threads lets
    /// the answers that came after a lost lease land first.
    fn deliver(&self, worker: &Worker) {
        let settled = worker
            .run_until(Duration::from_secs(180), Duration::from_millis(50), || {
                let conn = rusqlite::Connection::open(&self.db)?;
                let open: i64 = conn.query_row(
                    "SELECT COUNT(*) FROM uns_notifications WHERE status IN ('PENDING', 'LEASED')",
                    [],
                    |r| r.get(0),
                )?;
                Ok::<bool, rusqlite::Error>(open == 0)
            })
            .expect("store");
        assert!(settled, "every notification settles within three minutes");
    }

    /// `unsctl` over the API as the person working the incident, with every record the
    /// providers keep.
    fn unsctl(&self, args: &[&str]) -> Value {
        let out = self.command(true, args).output().expect("unsctl");
        assert!(
            out.status.success(),
            "{args:?}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).unwrap_or(Value::Null)
    }

    /// The command line over the API (`api`) or the store itself, with the records.
    fn command(&self, api: bool, args: &[&str]) -> std::process::Command {
        let mut command = support::unsctl();
        if api {
            command
                .args(["--api", &format!("http://{}", self.server.addr)])
                .env("UNS_API_KEY", support::KEY);
        } else {
            command.arg("--db").arg(&self.db);
        }
        command
            .args(args)
            .env("UNS_OPERATOR", "oncall-jane")
            .env("UNS_PAGERDUTY_API_URL", self.fakes.pagerduty_api_url())
            .env("UNS_PAGERDUTY_API_TOKEN", PAGERDUTY_TOKEN)
            .env("UNS_SLACK_API_URL", self.fakes.slack_api_url())
            .env("UNS_SLACK_BOT_TOKEN", SLACK_TOKEN)
            .env("UNS_SLACK_CHANNEL", SLACK_CHANNEL)
            .env("UNS_SLACK_BOT_ID", SLACK_BOT_ID);
        command
    }

    fn records(&self) -> Vec<String> {
        vec![
            "--relay-log".into(),
            self.fakes.maillog.display().to_string(),
            "--relay-log-zone".into(),
            "UTC".into(),
            "--clock-skew".into(),
            SKEW.into(),
        ]
    }

    fn of(&self, fault: Fault) -> Vec<&str> {
        self.ids
            .iter()
            .filter(|(_, f)| *f == fault)
            .map(|(id, _)| id.as_str())
            .collect()
    }

    /// The branch triage gives `id` now.
    fn branch(&self, id: &str) -> String {
        let doc = self.unsctl(&["-o", "json", "inspect", id]);
        doc["triage"]["branch"].as_str().unwrap_or("-").to_string()
    }

    /// What each provider received, per notification and channel.
    fn received(&self) -> BTreeMap<(String, Channel), usize> {
        self.fakes.control.all_copies().into_iter().collect()
    }
}

fn script(fakes: &Fakes, fault: Fault, id: &str, recipient: &str) {
    let control = &fakes.control;
    match fault {
        Fault::None => {}
        Fault::RelayKeptNoReply => control.script(recipient, &[Behavior::Hang]),
        Fault::RelayLost => control.script(recipient, &[Behavior::Lose]),
        Fault::SlackRefused | Fault::PagerDutyGone => {
            let code = if fault == Fault::SlackRefused {
                500
            } else {
                400
            };
            control.script(id, &[Behavior::Reject(code)])
        }
        Fault::SlackKeptNoReply | Fault::PagerDutyKeptNoReply => {
            control.script(id, &[Behavior::Hang])
        }
        Fault::EmailLostSlackRefused => {
            control.script(recipient, &[Behavior::Lose]);
            control.script(id, &[Behavior::Reject(500)]);
        }
        Fault::SlackTwice => control.script(id, &[Behavior::AcceptOnceCopied]),
    }
}

/// The person the audit must name for every act.
const PERSON: &str = "oncall-jane (key default)";

/// The remediation, as the runbook has it, over the API. Returns the partly replayed
/// entry and the entries given up.
fn work(incident: &Incident) -> (String, Vec<String>) {
    let records = incident.records();
    let records: Vec<&str> = records.iter().map(String::as_str).collect();
    let with = |args: &[&str]| -> Vec<String> {
        args.iter()
            .chain(records.iter())
            .map(|a| a.to_string())
            .collect()
    };
    // Branch 2: ask the providers' own records, and record what they say.
    let verified = incident.unsctl(
        &with(&[
            "-o",
            "json",
            "verify",
            "--record",
            "--confirm",
            "--yes",
            "--reason",
            "the providers' records settle what the worker could not",
            "--ticket",
            "INC-7",
        ])
        .iter()
        .map(String::as_str)
        .collect::<Vec<_>>(),
    );
    let answers = verified["answers"].as_array().expect("answers");
    assert!(
        answers.iter().all(|a| a["answer"] != "CANNOT_TELL"),
        "every record answers: {verified:#}"
    );
    // Branch 1: what the providers took is resolved, never replayed.
    incident.unsctl(&[
        "dlq",
        "resolve",
        "--branch",
        "resolve",
        "--confirm",
        "--yes",
        "--reason",
        "the providers took them: the relay log, Slack and PagerDuty say so",
        "--ticket",
        "INC-7",
    ]);
    // The cause is fixed.
    incident.fakes.control.clear_scripts();
    // One entry lost its email at the relay and had its Slack post refused: its email is
    // replayed; its Slack channel was archived meanwhile, and is given up on purpose.
    let partial = incident.of(Fault::EmailLostSlackRefused)[0].to_string();
    assert_eq!(incident.branch(&partial), "REPLAY");
    incident.unsctl(&[
        "replay",
        &partial,
        "--channels",
        "email",
        "--confirm",
        "--yes",
        "--reason",
        "the relay lost the email during DATA; the Slack channel is archived",
        "--ticket",
        "INC-7",
    ]);
    // Branch 3: the rest is replayed once fixed (the partial one is out of the DLQ until
    // its replay ends), but the service PagerDuty no longer has.
    let gone = incident.of(Fault::PagerDutyGone);
    let mut replay = vec![
        "replay",
        "--branch",
        "replay",
        "--confirm",
        "--yes",
        "--reason",
        "webhook and relay fixed",
        "--ticket",
        "INC-7",
    ];
    for id in &gone {
        replay.extend(["--exclude", id]);
    }
    incident.unsctl(&replay);
    incident.deliver(&incident.worker.with_lease(60.0));
    // Email delivered, Slack still owed: the entry stayed in the DLQ, and now gives
    // Slack up, on purpose, with its reason.
    let doc = incident.unsctl(&["-o", "json", "inspect", &partial]);
    assert_eq!(doc["dead_letter"], true, "SLACK is still owed: {doc:#}");
    incident.unsctl(&[
        "dlq",
        "resolve",
        &partial,
        "--force",
        "--confirm",
        "--yes",
        "--reason",
        "the Slack channel was archived: give Slack up",
        "--ticket",
        "INC-7",
    ]);
    // The PagerDuty service was removed: its triggers are given up, forced.
    let mut resolve = vec![
        "dlq",
        "resolve",
        "--force",
        "--confirm",
        "--yes",
        "--reason",
        "the PagerDuty service was retired",
        "--ticket",
        "INC-7",
    ];
    resolve.extend(gone.iter().copied());
    incident.unsctl(&resolve);
    let mut given_up = vec![partial.clone()];
    given_up.extend(gone.iter().map(|id| id.to_string()));
    (partial, given_up)
}

/// Both ends of the report's window, closed: from a minute before the first submission
/// to the second after the last act, once that second has passed.
fn window(db: &Path) -> (String, String) {
    let conn = rusqlite::Connection::open(db).expect("db");
    let (first, last): (f64, f64) = conn
        .query_row("SELECT min(at), max(at) FROM uns_events", [], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })
        .expect("span");
    let until = last.floor() + 1.0;
    support::wait_until("the window to close", Duration::from_secs(5), || {
        SystemClock.now() > until
    });
    let time = unsctl::render::time::rfc3339;
    (time((first / 60.0).floor() * 60.0 - 60.0), time(until))
}

#[test]
fn a_worked_incident_is_reported_as_the_providers_received_it() {
    let incident = Incident::happen();
    let (partial, given_up) = work(&incident);
    let (since, until) = window(&incident.db);
    let records = incident.records();
    let report = |api: bool, format: &str| -> Vec<u8> {
        let mut args: Vec<&str> =
            vec!["-o", format, "report", "--since", &since, "--until", &until];
        args.extend(records.iter().map(String::as_str));
        let out = incident.command(api, &args).output().expect("report");
        support::succeeded(&out);
        out.stdout
    };
    // The same bytes over the store and over the API, in each format.
    let json = report(false, "json");
    for format in ["json", "markdown", "html"] {
        let on_store = if format == "json" {
            json.clone()
        } else {
            report(false, format)
        };
        assert!(
            on_store == report(true, format),
            "{format}: the store and the API differ"
        );
    }
    let data: Value = serde_json::from_slice(&json).expect("json");
    assert!(data.get("provisional_until").is_none(), "a closed window");

    // Per channel, what the providers received: once, twice or more, or never (each
    // never, a channel given up on purpose or refused for good).
    let received = incident.received();
    let mut truth: BTreeMap<Channel, [usize; 3]> = BTreeMap::new();
    let mut duplicated = BTreeSet::new();
    let mut missing = BTreeSet::new();
    for (n, (id, fault)) in incident.ids.iter().enumerate() {
        for channel in fault.channels(n) {
            let copies = received.get(&(id.clone(), channel)).copied().unwrap_or(0);
            let counts = truth.entry(channel).or_default();
            match copies {
                0 => {
                    counts[2] += 1;
                    missing.insert((id.clone(), channel.to_string()));
                }
                1 => counts[0] += 1,
                _ => {
                    counts[1] += 1;
                    duplicated.insert((id.clone(), channel.to_string()));
                }
            }
        }
    }
    // Channel by channel first, for a failure that names the notification.
    let mut args: Vec<&str> = vec![
        "-o",
        "json",
        "reconcile",
        "--since",
        &since,
        "--until",
        &until,
    ];
    args.extend(records.iter().map(String::as_str));
    let reconciled = incident.unsctl(&args);
    let mut wrong = Vec::new();
    for item in reconciled["notifications"]
        .as_array()
        .expect("notifications")
    {
        let id = item["id"].as_str().expect("id").to_string();
        let channel: Channel = item["channel"]
            .as_str()
            .expect("channel")
            .parse()
            .expect("a channel");
        let copies = received.get(&(id.clone(), channel)).copied().unwrap_or(0);
        let expected = match copies {
            0 => "MISSING",
            1 => "ONCE",
            _ => "DUPLICATED",
        };
        if item["class"] != expected {
            let fault = incident.ids.iter().find(|(i, _)| *i == id).map(|(_, f)| *f);
            let history = incident.unsctl(&["-o", "json", "inspect", &id]);
            wrong.push(format!(
                "{id} {channel} ({fault:?}): the providers received {copies}, reconcile says {item}\n{history}"
            ));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n\n"));
    // The report judges as of its window's end: the same classes, item by item.
    let store = unsctl::store::direct::DirectStore::open_read_only(&incident.db).expect("store");
    let at = |text: &str| unsctl::clock::parse_instant(text, 0.0).expect("instant");
    let judged = unsctl::reconcile::Reconciliation::read(
        &store,
        &unsctl::reconcile::Asked {
            window: unsctl::store::Window {
                since: Some(at(&since)),
                until: Some(at(&until)),
            },
            ..Default::default()
        },
        unsctl::lab::repro::fake_sources(&incident.fakes, 1.0),
        at(&until),
    )
    .expect("reconcile")
    .all(&store)
    .expect("all");
    let mut differ = Vec::new();
    for item in &judged {
        let cli = reconciled["notifications"]
            .as_array()
            .and_then(|all| {
                all.iter()
                    .find(|n| n["id"] == item.id.as_str() && n["channel"] == item.channel.as_str())
            })
            .cloned()
            .unwrap_or_default();
        if cli["class"] != item.class.to_string() {
            let history = incident.unsctl(&["-o", "json", "inspect", &item.id]);
            differ.push(format!(
                "{} {}: as of the window's end {} ({:?}); now {}\n{history}",
                item.id, item.channel, item.class, item.evidence, cli
            ));
        }
    }
    assert!(differ.is_empty(), "{}", differ.join("\n\n"));
    assert_eq!(
        duplicated.len(),
        5,
        "the planned duplicates: {duplicated:?}"
    );
    assert_eq!(missing.len(), 3, "the channels given up: {missing:?}");
    for impact in data["impact"].as_array().expect("impact") {
        let channel: Channel = impact["channel"]
            .as_str()
            .expect("channel")
            .parse()
            .expect("a channel");
        let [once, twice, never] = truth.get(&channel).copied().unwrap_or_default();
        let said = |k: &str| impact[k].as_u64().expect("count") as usize;
        assert_eq!(
            (said("delivered_once"), said("duplicated"), said("missing")),
            (once, twice, never),
            "{channel}: once, duplicated, missing: {impact}"
        );
        assert_eq!(
            (said("maybe_duplicated"), said("unsettled")),
            (0, 0),
            "{channel}: every record given, nothing is left in doubt: {impact}"
        );
    }
    let classed = |class: &str| -> BTreeSet<(String, String)> {
        data["needs"]
            .as_array()
            .expect("needs")
            .iter()
            .filter(|n| n["class"] == class)
            .map(|n| {
                (
                    n["id"].as_str().unwrap_or("").to_string(),
                    n["channel"].as_str().unwrap_or("").to_string(),
                )
            })
            .collect()
    };
    assert_eq!(classed("DUPLICATED"), duplicated);
    assert_eq!(classed("MISSING"), missing);
    for need in data["needs"].as_array().expect("needs") {
        if need["class"] == "MISSING" {
            let evidence = need["evidence"].to_string();
            assert!(
                evidence.contains("given up on purpose by oncall-jane (key default)"),
                "who gave it up: {need}"
            );
        }
    }
    assert!(
        given_up
            .iter()
            .all(|id| missing.iter().any(|(m, _)| m == id))
    );

    // Every act names the person and the reason.
    let actions = data["actions"].as_array().expect("actions");
    assert!(actions.len() >= 40, "{} acts", actions.len());
    for action in actions {
        assert_eq!(action["operator"], PERSON, "{action}");
        assert!(
            action["reason"].as_str().is_some_and(|r| !r.is_empty()),
            "{action}"
        );
    }
    // What followed, per channel: the partial replay delivered its email and nothing
    // else; the other replays delivered what they replayed.
    for action in actions.iter().filter(|a| a["kind"] == "REPLAYED") {
        let followed = action["followed"].as_str().expect("followed");
        if action["notification_id"] == partial.as_str() {
            assert!(followed.contains("EMAIL delivered"), "{followed}");
            assert!(!followed.contains("SLACK"), "{followed}");
        } else {
            assert!(followed.contains("delivered"), "{followed}");
            assert!(!followed.contains("still due"), "{followed}");
        }
    }
    let carry_outs = data["carry_outs"].as_array().expect("carry-outs");
    let replays = carry_outs
        .iter()
        .find(|c| c["reason"] == "webhook and relay fixed")
        .expect("the replays' carry-out");
    let followed: Vec<&str> = replays["followed"]
        .as_array()
        .expect("followed")
        .iter()
        .filter_map(|f| f[0].as_str())
        .collect();
    assert!(followed.contains(&"SLACK delivered"), "{followed:?}");
    assert!(followed.contains(&"EMAIL delivered"), "{followed:?}");

    // Each verdict change says when its attempts ran, from their own events.
    let conn = rusqlite::Connection::open(&incident.db).expect("db");
    let changes: Vec<&Value> = actions.iter().filter(|a| a["kind"] == "VERIFIED").collect();
    assert!(changes.len() >= 20, "{} verdict changes", changes.len());
    for change in changes {
        let ran = &change["answer"]["ran"];
        let id = change["notification_id"].as_str().expect("id");
        let channel = change["answer"]["channel"].as_str().expect("channel");
        let started: f64 = conn
            .query_row(
                "SELECT min(at) FROM uns_events WHERE notification_id = ?1
                 AND kind = 'CHANNEL_ATTEMPT_STARTED' AND json_extract(payload, '$.channel') = ?2",
                [id, channel],
                |r| r.get(0),
            )
            .expect("start");
        assert_eq!(ran[0].as_f64(), Some(started), "{change}");
        let ended = ran[1].as_f64().expect("end");
        assert!(
            ended >= started && ended <= started + IO_FLOOR.as_secs_f64() + 1.0,
            "the attempt's own end, not the window widened by the skew: {change}"
        );
    }

    crate::report_browser::holds_to_the_page(&report(false, "html"), &data, 2..=4);
}
