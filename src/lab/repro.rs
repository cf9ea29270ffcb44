//! Reproducing the runbook's cases for real: the real worker, a short lease, and the
//! fault-injecting fakes, writing into a real store.

use crate::clock::{Clock, SystemClock};
use crate::db::Db;
use crate::lab::fakes::{Accepted, Behavior, Fakes};
use crate::model::{Channel, ChannelSet, Status};
use crate::runtime::adapters::Adapter;
use crate::runtime::adapters::email::{EmailAdapter, EmailConfig};
use crate::runtime::adapters::webhook::{Provider, WebhookAdapter};
use crate::runtime::engine::{self, Backoff};
use crate::runtime::queries;
use crate::runtime::schema::{self, OpenMode};
use crate::runtime::worker::{Adapters, Worker, WorkerConfig};
use crate::runtime::writer::Database;
use crate::store::direct;
use crate::triage::{self, Branch};
use serde::Serialize;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The lease the reproductions run with: short, so a case takes seconds.
pub const LEASE_SECONDS: f64 = 1.0;
/// Long enough that a provider answering after the lease is still heard, with room for a
/// machine slowed by other work: only a provider that never answers waits this long.
pub const MIN_IO_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a slow provider takes: past the lease, far inside the socket timeout.
pub const SLOW: Duration = Duration::from_millis(1500);
const DEADLINE: Duration = Duration::from_secs(20);

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Scenario {
    /// Branch 1: the provider accepts after the lease expired
    LeaseLostDelivered,
    /// Branch 2: the relay takes the data, then never answers
    SmtpUnknown,
    /// Branch 3: the provider refuses every attempt
    ProviderRejected,
    /// Email delivered, Slack refused: replay Slack only
    MixedChannels,
    /// The worker process is killed mid-call: a start with no result
    WorkerCrash,
    /// The reported symptom: a reclaim sends the same email twice
    DuplicateAfterReclaim,
}

impl Scenario {
    pub const ALL: [Scenario; 6] = [
        Scenario::LeaseLostDelivered,
        Scenario::SmtpUnknown,
        Scenario::ProviderRejected,
        Scenario::MixedChannels,
        Scenario::WorkerCrash,
        Scenario::DuplicateAfterReclaim,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Scenario::LeaseLostDelivered => "lease-lost-delivered",
            Scenario::SmtpUnknown => "smtp-unknown",
            Scenario::ProviderRejected => "provider-rejected",
            Scenario::MixedChannels => "mixed-channels",
            Scenario::WorkerCrash => "worker-crash",
            Scenario::DuplicateAfterReclaim => "duplicate-after-reclaim",
        }
    }

    /// What an operator should see in triage, if the row ends in the DLQ.
    pub fn expected_branch(self) -> Option<Branch> {
        match self {
            Scenario::LeaseLostDelivered => Some(Branch::Resolve),
            Scenario::SmtpUnknown | Scenario::WorkerCrash => Some(Branch::Verify),
            Scenario::ProviderRejected | Scenario::MixedChannels => Some(Branch::Replay),
            Scenario::DuplicateAfterReclaim => None,
        }
    }

    pub fn recipient(self) -> String {
        format!("{}{REPRO_DOMAIN}", self.name())
    }

    fn channels(self) -> ChannelSet {
        match self {
            Scenario::ProviderRejected => [Channel::Slack].into_iter().collect(),
            Scenario::MixedChannels => [Channel::Email, Channel::Slack].into_iter().collect(),
            _ => [Channel::Email].into_iter().collect(),
        }
    }

    fn max_attempts(self) -> i64 {
        match self {
            Scenario::ProviderRejected | Scenario::DuplicateAfterReclaim => 2,
            _ => 1,
        }
    }

    /// What the fakes' ledger shows beside the verdict, and why that is right.
    pub fn expected(self) -> &'static str {
        match self {
            Scenario::LeaseLostDelivered => {
                "one copy accepted, and the history records it: RESOLVE; a replay would send a second"
            }
            Scenario::SmtpUnknown => {
                "the relay did take the message, but the worker never heard back, so the history alone cannot tell: VERIFY is right, and the relay's log settles it"
            }
            Scenario::ProviderRejected => {
                "nothing accepted, every attempt refused: REPLAY once Slack is fixed"
            }
            Scenario::MixedChannels => "EMAIL's copy is recorded, so a replay sends SLACK only",
            Scenario::WorkerCrash => {
                "the relay accepted it, but a killed process writes nothing: no result and no LEASE_LOST; a start without a result is VERIFY"
            }
            Scenario::DuplicateAfterReclaim => {
                "two copies: the duplicate this runbook is about; the reclaim delivered the row, so it is not in the DLQ"
            }
        }
    }

    pub fn story(self) -> &'static str {
        match self {
            Scenario::LeaseLostDelivered => {
                "the relay accepted the email 1.5 s into a 1 s lease; the worker recorded the late success, then LEASE_LOST; the reclaim found the budget gone"
            }
            Scenario::SmtpUnknown => {
                "the relay took the message data and never answered; the timeout came after the lease had expired, so nobody knows whether it was delivered"
            }
            Scenario::ProviderRejected => "Slack answered 500 to both attempts of the budget",
            Scenario::MixedChannels => "the email was accepted; Slack answered 400 (not retryable)",
            Scenario::WorkerCrash => {
                "a separate worker process was killed (SIGKILL) while the relay held its message; the start event has no result"
            }
            Scenario::DuplicateAfterReclaim => {
                "the first send was slow; another worker reclaimed the expired lease and sent again; the relay accepted both"
            }
        }
    }
}

/// What one scenario left behind.
#[derive(Debug, Clone, Serialize)]
pub struct ScenarioReport {
    pub scenario: Scenario,
    pub notification_id: String,
    pub status: String,
    pub dead_letter: bool,
    pub error_message: Option<String>,
    pub branch: Option<Branch>,
    /// What the fakes really accepted for this notification.
    pub ledger: Vec<Accepted>,
    /// For a VERIFY entry: what the fakes' own records say (`unsctl verify`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub verify: Vec<crate::verify::Answer>,
    /// Its channels' copies, by the history and the fakes' own records (`unsctl reconcile`).
    pub reconcile: Vec<crate::reconcile::Reconciled>,
}

#[derive(Debug, thiserror::Error)]
pub enum ReproError {
    #[error("cannot start the provider fakes: {0}")]
    Fakes(std::io::Error),
    #[error(transparent)]
    Store(#[from] crate::store::StoreError),
    #[error(transparent)]
    Engine(#[from] engine::EngineError),
    #[error(transparent)]
    Open(#[from] schema::OpenError),
    #[error(transparent)]
    Writer(#[from] crate::runtime::writer::OpenFailed),
    #[error("worker-crash needs the unsctl binary to run a worker process: {0}")]
    Crash(String),
    #[error("timed out after {0:?} waiting for {1} to settle")]
    Timeout(Duration, String),
    /// The store holds notifications `by` did not make: its worker would claim them and
    /// send them to the fakes, and they would never reach anyone.
    #[error(
        "{place} holds {count} notification(s) {} (the first: {first}): {by}'s worker would send them to its fakes, and their recipients would never get them; {by} writes only into {}",
        by.found(),
        by.writes_into()
    )]
    NotOurs {
        by: Lab,
        place: String,
        count: i64,
        first: String,
    },
}

/// What runs a worker against the fakes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lab {
    Repro,
    Sweep,
}

impl Lab {
    /// Which notifications of a store it will not touch.
    fn found(self) -> &'static str {
        match self {
            Lab::Repro => "repro did not make",
            Lab::Sweep => "already",
        }
    }

    /// The stores it writes into.
    fn writes_into(self) -> &'static str {
        match self {
            Lab::Repro => "a new store or one it made",
            Lab::Sweep => "a store with no notification in it",
        }
    }
}

impl std::fmt::Display for Lab {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Lab::Repro => "repro",
            Lab::Sweep => "sweep",
        })
    }
}

/// The domain every recipient repro makes is at.
const REPRO_DOMAIN: &str = "@repro.uns.local";

/// Refuses a store that holds any notification repro did not make.
fn only_ours(db: &Path, conn: &rusqlite::Connection) -> Result<(), ReproError> {
    let recipient = "CASE WHEN json_valid(payload) THEN json_extract(payload, '$.recipient') END";
    let others = format!(
        "SELECT count(*), min(id) FROM uns_notifications
         WHERE coalesce(substr({recipient}, -length('{REPRO_DOMAIN}')), '') IS NOT '{REPRO_DOMAIN}'"
    );
    refuse_others(
        &Db::Sqlite(conn),
        &others,
        Lab::Repro,
        &db.display().to_string(),
    )
}

/// Refuses a store in which `others` (a count and the least id) finds a notification
/// `by` must not touch. The lab's workers claim whatever is due: one let loose on a
/// store that holds anything else would send it to the fakes, and drop it.
pub(crate) fn refuse_others(
    db: &Db<'_>,
    others: &str,
    by: Lab,
    place: &str,
) -> Result<(), ReproError> {
    let found = db
        .row(others, &[], |row| {
            let count = match row.cell(0)? {
                rusqlite::types::ValueRef::Integer(count) => count,
                _ => 0,
            };
            let first = match row.cell(1)? {
                rusqlite::types::ValueRef::Text(id) => String::from_utf8_lossy(id).into_owned(),
                _ => String::new(),
            };
            Ok((count, first))
        })
        .map_err(crate::store::StoreError::from)?;
    match found {
        Some((count, first)) if count > 0 => Err(ReproError::NotOurs {
            by,
            place: place.to_string(),
            count,
            first,
        }),
        _ => Ok(()),
    }
}

/// Where verify looks when the providers are the fakes: their relay log, incident list
/// and channel history. Both sides use this machine's clock, so the margin is small.
pub fn fake_sources(fakes: &Fakes, skew: f64) -> crate::verify::Sources {
    use crate::lab::fakes::{PAGERDUTY_TOKEN, SLACK_BOT_ID, SLACK_CHANNEL, SLACK_TOKEN};
    crate::verify::Sources {
        relay_logs: vec![fakes.maillog.clone()],
        zone: crate::verify::relay_log::Zone::Fixed(0),
        syslog_names: crate::verify::relay_log::SyslogNames::default(),
        relay_hosts: Vec::new(),
        smtp_from: Vec::new(),
        max_log_gap: crate::verify::DEFAULT_MAX_LOG_GAP,
        pagerduty: Some(crate::verify::pagerduty::Api {
            api_url: fakes.pagerduty_api_url(),
            token: PAGERDUTY_TOKEN.into(),
            timeout: crate::verify::http::DEFAULT_TIMEOUT,
        }),
        slack: Some(crate::verify::slack::Api {
            api_url: fakes.slack_api_url(),
            token: SLACK_TOKEN.into(),
            channel: SLACK_CHANNEL.into(),
            bot_id: Some(SLACK_BOT_ID.into()),
            timeout: crate::verify::http::DEFAULT_TIMEOUT,
        }),
        skew,
    }
}

/// The adapters pointed at the fakes.
pub fn fake_adapters(fakes: &Fakes) -> Result<Adapters, ReproError> {
    let mut adapters = Adapters::new();
    adapters.insert(
        Channel::Email,
        Arc::new(EmailAdapter::new(EmailConfig::new(fakes.smtp.to_string()))) as Arc<dyn Adapter>,
    );
    let webhook = |provider| {
        WebhookAdapter::new(provider)
            .map(|a| Arc::new(a) as Arc<dyn Adapter>)
            .map_err(|err| ReproError::Fakes(std::io::Error::other(err)))
    };
    adapters.insert(
        Channel::Slack,
        webhook(Provider::Slack {
            webhook_url: fakes.slack_url(),
        })?,
    );
    adapters.insert(
        Channel::Pagerduty,
        webhook(Provider::PagerDuty {
            events_url: fakes.pagerduty_url(),
            routing_key: "repro-routing-key".into(),
        })?,
    );
    Ok(adapters)
}

pub fn worker_config(concurrency: usize) -> WorkerConfig {
    WorkerConfig {
        worker_id: format!("repro:{}", std::process::id()),
        lease_seconds: LEASE_SECONDS,
        concurrency,
        poll_interval: Duration::from_millis(25),
        backoff: Backoff {
            base_seconds: 0.2,
            max_seconds: 1.0,
        },
        min_io_timeout: MIN_IO_TIMEOUT,
    }
}

fn script(fakes: &Fakes, scenario: Scenario, id: &str) {
    let control = &fakes.control;
    let email = scenario.recipient();
    match scenario {
        Scenario::LeaseLostDelivered => control.script(&email, &[Behavior::DelayAccept(SLOW)]),
        Scenario::SmtpUnknown | Scenario::WorkerCrash => control.script(&email, &[Behavior::Hang]),
        Scenario::ProviderRejected => {
            control.script(id, &[Behavior::Reject(500), Behavior::Reject(500)])
        }
        Scenario::MixedChannels => {
            control.script(&email, &[Behavior::Accept]);
            control.script(id, &[Behavior::Reject(400)]);
        }
        // The first send is answered once the reclaim's copy has gone out: the duplicate
        // happens on cue, not when the machine is quick enough.
        Scenario::DuplicateAfterReclaim => {
            control.script(&email, &[Behavior::AcceptOnceCopied, Behavior::Accept])
        }
    }
}

fn submit(db: &rusqlite::Connection, scenario: Scenario) -> Result<String, ReproError> {
    let payload = serde_json::json!({
        "recipient": scenario.recipient(),
        "subject": format!("[repro] {}", scenario.name()),
        "body": scenario.story(),
    });
    let submitted = engine::submit(
        &Db::Sqlite(db),
        crate::clock::Clock::now(&SystemClock),
        &engine::NewNotification {
            channels: scenario.channels(),
            payload,
            idempotency_key: None,
            max_attempts: scenario.max_attempts(),
        },
    )?;
    Ok(submitted.id)
}

fn settled(conn: &rusqlite::Connection, id: &str) -> Result<bool, ReproError> {
    let row = queries::read_notification(&Db::Sqlite(conn), id)
        .map_err(crate::store::StoreError::from)?;
    Ok(row.is_some_and(|r| r.status.known().is_some_and(Status::is_settled)))
}

/// Runs a worker process until `id` has a CHANNEL_ATTEMPT_STARTED, then kills it.
fn crash_a_worker(
    db: &Path,
    fakes: &Fakes,
    binary: &Path,
    id: &str,
    conn: &rusqlite::Connection,
) -> Result<(), ReproError> {
    let mut child = Command::new(binary)
        .args(["--db"])
        .arg(db)
        .args([
            "runtime",
            "worker",
            "--concurrency",
            "1",
            "--poll-ms",
            "20",
            "--worker-id",
            "doomed-worker",
        ])
        .args([
            "--lease-seconds",
            &LEASE_SECONDS.to_string(),
            "--min-io-timeout",
            "30",
        ])
        .env("UNS_SMTP_HOST", fakes.smtp.to_string())
        .env("UNS_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|err| ReproError::Crash(format!("{}: {err}", binary.display())))?;
    let start = Instant::now();
    let outcome = loop {
        let started: bool = conn
            .query_row(
                "SELECT EXISTS (SELECT 1 FROM uns_events WHERE notification_id = ?1 AND kind = 'CHANNEL_ATTEMPT_STARTED')",
                [id],
                |row| row.get(0),
            )
            .map_err(crate::store::StoreError::from)?;
        if started
            && fakes
                .control
                .ledger()
                .iter()
                .any(|a| a.notification_id.as_deref() == Some(id))
        {
            break Ok(());
        }
        if start.elapsed() > DEADLINE {
            break Err(ReproError::Timeout(
                DEADLINE,
                format!("{id} to start in the doomed worker"),
            ));
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let _ = child.kill();
    let _ = child.wait();
    outcome
}

/// Runs `scenarios` into the store at `db` and reports what each left behind.
/// `binary` is the unsctl executable, needed only for worker-crash.
pub fn run(
    db: &Path,
    scenarios: &[Scenario],
    binary: Option<&Path>,
    fakes: &Fakes,
) -> Result<Vec<ScenarioReport>, ReproError> {
    run_counted(db, scenarios, binary, fakes, None)
}

/// Each scenario's notification, submitted and its fakes scripted (a worker crash's
/// first, its worker started and killed before the others are queued).
fn submit_scripted(
    db: &Path,
    conn: &rusqlite::Connection,
    scenarios: &[Scenario],
    binary: Option<&Path>,
    fakes: &Fakes,
) -> Result<Vec<(Scenario, String)>, ReproError> {
    let mut ids: Vec<(Scenario, String)> = Vec::new();
    if scenarios.contains(&Scenario::WorkerCrash) {
        let binary = binary.ok_or_else(|| ReproError::Crash("no binary given".into()))?;
        let id = submit(conn, Scenario::WorkerCrash)?;
        script(fakes, Scenario::WorkerCrash, &id);
        crash_a_worker(db, fakes, binary, &id, conn)?;
        ids.push((Scenario::WorkerCrash, id));
    }
    for &scenario in scenarios.iter().filter(|s| **s != Scenario::WorkerCrash) {
        let id = submit(conn, scenario)?;
        script(fakes, scenario, &id);
        ids.push((scenario, id));
    }
    Ok(ids)
}

/// [`run`], with the worker counting into `metrics` (a server's `/metrics`) as it goes.
pub fn run_counted(
    db: &Path,
    scenarios: &[Scenario],
    binary: Option<&Path>,
    fakes: &Fakes,
    metrics: Option<Arc<crate::runtime::metrics::Metrics>>,
) -> Result<Vec<ScenarioReport>, ReproError> {
    let conn = schema::open(db, OpenMode::Create)?;
    only_ours(db, &conn)?;
    let mut ids = submit_scripted(db, &conn, scenarios, binary, fakes)?;
    let mut worker = Worker::new(
        Database::open(db)?,
        Arc::new(SystemClock),
        fake_adapters(fakes)?,
        worker_config(8),
    );
    if let Some(metrics) = metrics {
        worker = worker.with_metrics(metrics);
    }
    // Joining the worker's threads lets every call still in flight under a lost lease
    // record its late result before anything is reported.
    let all_settled = worker.run_until(DEADLINE, Duration::from_millis(25), || {
        ids.iter().try_fold(true, |done, (_, id)| {
            Ok::<bool, ReproError>(done && settled(&conn, id)?)
        })
    })?;
    if !all_settled {
        return Err(ReproError::Timeout(DEADLINE, "the scenarios".into()));
    }
    let ledger = fakes.control.ledger();
    ids.sort_by(|a, b| a.1.cmp(&b.1));
    // What verify finds in the fakes' records: the relay log (marked now, so it is seen
    // to run past every window), the incident list, the channel history.
    fakes.control.mark_log();
    let all: Vec<String> = ids.iter().map(|(_, id)| id.clone()).collect();
    let asked = crate::verify::ask(
        &Db::Sqlite(&conn),
        &all,
        &fake_sources(fakes, 1.0),
        SystemClock.now(),
    )
    .map_err(crate::store::StoreError::from)?;
    let store = direct::DirectStore::open_read_only(db)?;
    let reconciliation = crate::reconcile::Reconciliation::read(
        &store,
        &crate::reconcile::Asked {
            ids: Some(all.clone()),
            ..Default::default()
        },
        fake_sources(fakes, 1.0),
        SystemClock.now(),
    )?;
    let reconciled: Vec<crate::reconcile::Reconciled> = reconciliation.all(&store)?;
    ids.into_iter()
        .map(|(scenario, id)| {
            let doc = direct::notification_doc(&Db::Sqlite(&conn), &id)?;
            let branch = doc
                .row
                .dead_letter
                .then(|| triage::triage_events(&doc.row, &doc.events).branch);
            Ok(ScenarioReport {
                scenario,
                status: doc.row.status.to_string(),
                dead_letter: doc.row.dead_letter,
                error_message: doc.row.error_message.clone(),
                branch,
                ledger: ledger
                    .iter()
                    .filter(|a| a.notification_id.as_deref() == Some(id.as_str()))
                    .cloned()
                    .collect(),
                verify: asked
                    .answers
                    .iter()
                    .filter(|a| a.id == id)
                    .cloned()
                    .collect(),
                reconcile: reconciled.iter().filter(|r| r.id == id).cloned().collect(),
                notification_id: id,
            })
        })
        .collect()
}
