//! The safety sweep: random fault schedules through the real worker and the fakes, each
//! DLQ verdict compared with what the providers really accepted.
//!
//! Triage must never say RESOLVE where a provider did not accept, nor REPLAY for a
//! channel a provider accepted. Schedules are drawn from a seed, so a failure can be
//! replayed exactly.

use crate::clock::{Clock, SystemClock};
use crate::db::{Conn, Db, Place};
use crate::lab::fakes::{Behavior, Fakes};
use crate::lab::repro::{self, ReproError};
use crate::model::Channel;
use crate::runtime::adapters::DeliveryRequest;
use crate::runtime::engine::{self, Backoff, ClaimOutcome, NewNotification};
use crate::runtime::queries;
use crate::runtime::worker::{Adapters, Worker, WorkerConfig};
use crate::runtime::writer::Database;
use crate::store::direct;
use crate::triage::{self, Branch, ChannelState};
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use serde::Serialize;

use std::sync::Arc;
use std::time::Duration;

const LEASE_SECONDS: f64 = 0.25;
const MIN_IO_TIMEOUT: Duration = Duration::from_millis(400);
const SHORT: Duration = Duration::from_millis(20);
/// Past the lease, inside the socket timeout: a late answer.
const PAST_LEASE: Duration = Duration::from_millis(320);

/// One notification's faults.
#[derive(Debug, Clone)]
pub struct Schedule {
    pub channels: Vec<Channel>,
    /// Per channel, what the provider does with each message, in order: one per attempt,
    /// plus one for a crashed call.
    pub behaviors: Vec<(Channel, Vec<Behavior>)>,
    pub max_attempts: i64,
    /// A worker process dies after starting the first channel call.
    pub crash: bool,
}

fn draw_behavior(rng: &mut StdRng) -> Behavior {
    match rng.random_range(0..9) {
        0 | 1 => Behavior::Accept,
        2 => Behavior::DelayAccept(SHORT),
        3 => Behavior::DelayAccept(PAST_LEASE),
        4 => Behavior::Reject(500),
        5 => Behavior::Reject(if rng.random_bool(0.5) { 400 } else { 554 }),
        6 => Behavior::Hang,
        _ => Behavior::Drop,
    }
}

fn describe(behavior: Behavior) -> String {
    match behavior {
        Behavior::Accept => "accept".into(),
        Behavior::DelayAccept(d) => format!("delay {}ms then accept", d.as_millis()),
        Behavior::Reject(code) => format!("reject {code}"),
        Behavior::Hang => "take it and hang".into(),
        Behavior::Hold => "take it and answer when released".into(),
        Behavior::AcceptOnceCopied => "take it and answer once a copy arrives".into(),
        Behavior::Drop => "drop the connection".into(),
        Behavior::Lose => "read the data, then lose the connection".into(),
    }
}

/// What the sweep found.
#[derive(Debug, Default, Clone, Serialize)]
pub struct Counts {
    pub seed: u64,
    /// How the fake relay wrote its log (picked by the seed).
    pub relay_log_layout: String,
    pub schedules: usize,
    pub dead_lettered: usize,
    pub delivered: usize,
    pub unfinished: usize,
    pub resolve: usize,
    pub verify: usize,
    pub replay: usize,
    /// RESOLVE where some provider did not accept. Must be zero.
    pub unsafe_resolve: usize,
    /// REPLAY of a channel a provider accepted. Must be zero.
    pub unsafe_replay: usize,
    /// VERIFY entries whose truth was: every channel accepted / none / some.
    pub verify_all_accepted: usize,
    pub verify_none_accepted: usize,
    pub verify_some_accepted: usize,
    /// DELIVERED rows with a channel the provider never accepted. Must be zero.
    pub false_delivered: usize,
    /// Notifications some provider accepted more than once (the incident's symptom).
    pub duplicated: usize,
    /// Channels of a notification the provider took two or more copies of, by the ledger
    /// (PagerDuty: incidents, as it folds triggers into the open one).
    pub duplicates_in_ledger: usize,
    /// Of those, how many reconcile called ONCE or MISSING. Must be zero.
    pub duplicates_missed: usize,
    /// DUPLICATED where the ledger has one copy or none. Must be zero.
    pub duplicates_false: usize,
    /// MISSING where the ledger has a copy. Must be zero.
    pub missing_false: usize,
    /// What reconcile said with the fakes' records, channel by channel.
    pub reconciled: std::collections::BTreeMap<crate::reconcile::Class, usize>,
    /// And from the history alone.
    pub reconciled_history_only: std::collections::BTreeMap<crate::reconcile::Class, usize>,
    /// The first few unsafe verdicts, to debug from.
    pub failures: Vec<String>,
}

impl Counts {
    pub fn safe(&self) -> bool {
        self.unsafe_resolve == 0
            && self.unsafe_replay == 0
            && self.false_delivered == 0
            && self.duplicates_missed == 0
            && self.duplicates_false == 0
            && self.missing_false == 0
    }
}

/// The clock-skew margin `--verify` uses: the fakes and the store share this clock.
const VERIFY_SKEW: f64 = 0.05;

/// What `sweep --verify` found.
#[derive(Debug, Default, Clone, Serialize)]
pub struct Verification {
    /// VERIFY entries before the answers were recorded, and after.
    pub verify_before: usize,
    pub verify_after: usize,
    /// The answers, by kind.
    pub answers: std::collections::BTreeMap<crate::verify::Delivery, usize>,
    /// Answers the ledger contradicts. Must be zero.
    pub wrong_answers: usize,
    /// VERIFIED events written.
    pub recorded: usize,
    /// The whole judgement again, with the answers recorded.
    pub after: Counts,
    pub failures: Vec<String>,
    /// Why the first few CANNOT_TELL answers could not tell.
    pub cannot_tell: Vec<String>,
}

impl Verification {
    pub fn safe(&self) -> bool {
        self.wrong_answers == 0 && self.after.safe()
    }
}

/// A sweep in progress: the store, the fakes and what was drawn.
pub struct Sweep {
    pub db: Place,
    pub conn: Conn,
    pub fakes: Fakes,
    pub ids: Vec<String>,
    pub drawn: Vec<Schedule>,
    pub seed: u64,
    worker: Worker,
}

/// The lease the remediation's replays are delivered under (see [`Sweep::run_replays`]).
pub const REPLAY_LEASE_SECONDS: f64 = 60.0;

/// Runs `schedules` random schedules drawn from `seed` in a store at `db`.
pub fn run(
    db: &Place,
    schedules: usize,
    seed: u64,
    concurrency: usize,
) -> Result<Counts, ReproError> {
    Sweep::run(db, schedules, seed, concurrency)?.judge()
}

impl Sweep {
    /// Submits the schedules, lets the worker run them to the end, and returns the
    /// sweep for judging (and, for `--remediate`, for acting on).
    pub fn run(
        db: &Place,
        schedules: usize,
        seed: u64,
        concurrency: usize,
    ) -> Result<Self, ReproError> {
        let mut rng = StdRng::seed_from_u64(seed);
        let fakes = Fakes::start().map_err(ReproError::Fakes)?;
        fakes.control.set_default(Behavior::Accept);
        // The relay's log in a layout the seed picks: each schedule's answers are read
        // from syslog, journald, container or mixed lines alike.
        fakes
            .control
            .log_layouts(crate::lab::fakes::maillog::Layouts::pick(seed));
        // The fake relay's log must be seen running a clock-skew margin before the first
        // message, or no missing message could be proved missing.
        std::thread::sleep(Duration::from_secs_f64(2.0 * VERIFY_SKEW));
        let conn = crate::runtime::writer::open_runtime(db)?;
        repro::refuse_others(
            &conn.db(),
            "SELECT count(*), min(id) FROM uns_notifications",
            repro::Lab::Sweep,
            &db.shown(),
        )?;
        let adapters = repro::fake_adapters(&fakes)?;
        let drawn: Vec<Schedule> = (0..schedules).map(|_| draw(&mut rng)).collect();

        // Crashing schedules are submitted first, so the doomed claims take exactly them.
        let mut order: Vec<usize> = (0..drawn.len()).collect();
        order.sort_by_key(|&i| !drawn[i].crash);
        let mut ids = vec![String::new(); drawn.len()];
        for &i in &order {
            let schedule = &drawn[i];
            let id = engine::submit(
                &conn.db(),
                SystemClock.now(),
                &NewNotification {
                    channels: schedule.channels.iter().copied().collect(),
                    payload: serde_json::json!({"recipient": format!("s{i}@sweep.uns.local"), "subject": "sweep"}),
                    idempotency_key: None,
                    max_attempts: schedule.max_attempts,
                },
            )?;
            ids[i] = id.id;
        }
        for (i, schedule) in drawn.iter().enumerate() {
            script(&fakes, &ids[i], i, schedule);
        }
        let mut abandoned = Vec::new();
        for &i in order.iter().take_while(|&&i| drawn[i].crash) {
            abandoned.push(crash(&conn.db(), &adapters, &ids[i])?);
        }
        let worker = Worker::new(
            Database::open_at(db)?,
            Arc::new(SystemClock),
            adapters,
            WorkerConfig {
                worker_id: format!("sweep:{seed}"),
                lease_seconds: LEASE_SECONDS,
                concurrency,
                poll_interval: Duration::from_millis(10),
                backoff: Backoff {
                    base_seconds: 0.02,
                    max_seconds: 0.1,
                },
                min_io_timeout: MIN_IO_TIMEOUT,
            },
        );
        let sweep = Sweep {
            db: db.clone(),
            conn,
            fakes,
            ids,
            drawn,
            seed,
            worker,
        };
        sweep.run_worker()?;
        for thread in abandoned {
            let _ = thread.join();
        }
        Ok(sweep)
    }

    /// Runs the worker until no row is PENDING or LEASED. Joining its threads lets late
    /// answers under lost leases land before the ledger is read.
    pub fn run_worker(&self) -> Result<(), ReproError> {
        self.drive(&self.worker)
    }

    /// Delivers the remediation's replays with leases far longer than any call to the
    /// fixed providers takes, on a machine as loaded as it may be: the faults were the
    /// schedules'; a copy the sweep counts from here on is one the remediation made,
    /// never one a slow machine's lost lease made.
    pub fn run_replays(&self) -> Result<(), ReproError> {
        self.drive(&self.worker.with_lease(REPLAY_LEASE_SECONDS))
    }

    fn drive(&self, worker: &Worker) -> Result<(), ReproError> {
        let deadline = Duration::from_secs(60 + self.ids.len() as u64 / 10);
        worker
            .run_until(deadline, Duration::from_millis(50), || {
                let open = self
                    .conn
                    .db()
                    .row(
                        "SELECT COUNT(*) FROM uns_notifications WHERE status IN ('PENDING', 'LEASED')",
                        &[],
                        |r| Ok(queries::Cells::new(r).integer(0, "count")),
                    )
                    .map_err(crate::store::StoreError::from)?;
                Ok::<bool, ReproError>(open == Some(0))
            })
            .map(|_| ())
    }

    /// The dead letters triage calls VERIFY.
    fn in_verify(&self) -> Vec<String> {
        self.ids
            .iter()
            .filter(|id| {
                direct::notification_doc(&self.conn.db(), id)
                    .map(|doc| {
                        doc.row.dead_letter
                            && triage::triage_events(&doc.row, &doc.events).branch == Branch::Verify
                    })
                    .unwrap_or(false)
            })
            .cloned()
            .collect()
    }

    /// Asks the fakes' records about every VERIFY entry (as `unsctl verify` does), checks
    /// each answer against the ledger, records the answers, and judges again.
    pub fn verify(&self, before: &Counts) -> Result<Verification, ReproError> {
        self.wait_for_windows()?;
        let skew = VERIFY_SKEW;
        let ids = self.in_verify();
        let sources = repro::fake_sources(&self.fakes, skew);
        let asked = crate::verify::ask(&self.conn.db(), &ids, &sources, SystemClock.now())
            .map_err(crate::store::StoreError::from)?;
        let ledger = self.fakes.control.ledger();
        let mut verification = Verification {
            verify_before: before.verify,
            answers: crate::verify::summary(&asked.answers),
            ..Verification::default()
        };
        let slack_wrong = slack_answers_against(&asked.answers, &ledger);
        for answer in &asked.answers {
            let accepted = ledger.iter().any(|a| {
                a.channel == answer.channel
                    && a.notification_id.as_deref() == Some(answer.id.as_str())
                    && (answer.channel != Channel::Email || a.message_id == answer.message_id)
            });
            let wrong = match answer.answer {
                // Each Slack message proves one attempt: held to the ledger per cycle.
                _ if answer.channel == Channel::Slack => {
                    slack_wrong.contains(&(answer.id.clone(), answer.cycle, answer.attempt))
                }
                crate::verify::Delivery::Delivered => !accepted,
                crate::verify::Delivery::NotDelivered => accepted,
                crate::verify::Delivery::CannotTell => false,
            };
            if answer.answer == crate::verify::Delivery::CannotTell
                && verification.cannot_tell.len() < 10
            {
                verification.cannot_tell.push(format!(
                    "{} {} attempt {}: {}",
                    answer.id, answer.channel, answer.attempt, answer.evidence
                ));
            }
            if wrong {
                verification.wrong_answers += 1;
                verification.failures.push(format!(
                    "{} {} attempt {}: answered {} but the fake {} it",
                    answer.id,
                    answer.channel,
                    answer.attempt,
                    answer.answer,
                    if accepted { "took" } else { "never took" }
                ));
            }
        }
        let actor = crate::remediation::Actor::local("sweep");
        for result in crate::verify::record(
            &self.conn.db(),
            SystemClock.now(),
            &asked,
            &actor,
            crate::remediation::verified::Why {
                reason: Some("sweep --verify"),
                ticket: None,
                via: None,
            },
            crate::remediation::verified::ReadOn::Here,
        ) {
            match result {
                Ok(done) => verification.recorded += done.event_ids.len(),
                Err((id, err)) => verification
                    .failures
                    .push(format!("{id}: not recorded: {err}")),
            }
        }
        let after = self.judge()?;
        verification.verify_after = after.verify;
        verification.after = after;
        verification.failures.truncate(20);
        Ok(verification)
    }

    /// Waits until every attempt's window (its lease plus the clock-skew margin) is
    /// past, so the records can say what is missing; then marks the relay log, which is
    /// then seen to run past every window.
    fn wait_for_windows(&self) -> Result<(), ReproError> {
        let db = self.conn.db();
        let latest = db
            .row(
                &format!(
                    "SELECT MAX({}) FROM uns_events WHERE kind = 'ATTEMPT_STARTED'",
                    db.dialect().json_number("payload", "$.lease_until")
                ),
                &[],
                |r| Ok(queries::Cells::new(r).real(0, "lease_until")),
            )
            .map_err(crate::store::StoreError::from)?
            .flatten();
        if let Some(latest) = latest {
            let wait = latest + VERIFY_SKEW - SystemClock.now();
            if wait > 0.0 {
                std::thread::sleep(Duration::from_secs_f64(wait.min(5.0)));
            }
        }
        self.fakes.control.mark_log();
        Ok(())
    }

    /// Every verdict compared with the fakes' ledger, and every notification's copies as
    /// reconcile counts them.
    pub fn judge(&self) -> Result<Counts, ReproError> {
        let mut counts = judge(
            &self.conn.db(),
            &self.fakes,
            &self.ids,
            &self.drawn,
            self.seed,
        )?;
        self.reconcile_into(&mut counts)?;
        counts.failures.truncate(20);
        Ok(counts)
    }

    /// Reconciles every notification twice, as `unsctl reconcile` does: with the fakes'
    /// records, and from the history alone (which must never guess either), and holds
    /// each channel's class to the copies the ledger holds.
    fn reconcile_into(&self, counts: &mut Counts) -> Result<(), ReproError> {
        self.wait_for_windows()?;
        let store = direct::DirectStore::open(&self.db, false)?;
        let with_records = repro::fake_sources(&self.fakes, VERIFY_SKEW);
        let history_only = crate::verify::Sources {
            skew: VERIFY_SKEW,
            ..crate::verify::Sources::default()
        };
        for (sources, counted) in [(with_records, true), (history_only, false)] {
            let reconciliation = crate::reconcile::Reconciliation::read(
                &store,
                &crate::reconcile::Asked::default(),
                sources,
                SystemClock.now(),
            )?;
            let ledger = self.fakes.control.all_copies();
            for item in reconciliation.all(&store)? {
                let copies = ledger
                    .get(&(item.id.clone(), item.channel))
                    .copied()
                    .unwrap_or(0);
                self.judge_reconciled(&item, copies, counted, counts);
            }
        }
        Ok(())
    }

    /// One reconciled channel against the `copies` the ledger holds of it; `counted` for
    /// the run with records, whose classes are counted (the other is only checked).
    fn judge_reconciled(
        &self,
        item: &crate::reconcile::Reconciled,
        copies: usize,
        counted: bool,
        counts: &mut Counts,
    ) {
        use crate::reconcile::Class;
        let source = if counted {
            "with records"
        } else {
            "from the history alone"
        };
        if counted {
            *counts.reconciled.entry(item.class).or_default() += 1;
        } else {
            *counts
                .reconciled_history_only
                .entry(item.class)
                .or_default() += 1;
        }
        {
            let wrong = match item.class {
                _ if copies >= 2 => {
                    counts.duplicates_in_ledger += usize::from(counted);
                    if matches!(item.class, Class::Once | Class::Missing) {
                        counts.duplicates_missed += 1;
                        true
                    } else {
                        false
                    }
                }
                Class::Duplicated => {
                    counts.duplicates_false += 1;
                    true
                }
                Class::Missing if copies >= 1 => {
                    counts.missing_false += 1;
                    true
                }
                _ => false,
            };
            if wrong {
                let schedule = self
                    .ids
                    .iter()
                    .position(|id| *id == item.id)
                    .map(|i| self.drawn[i].describe())
                    .unwrap_or_default();
                counts.failures.push(format!(
                    "{} {}: reconcile {source} says {} with {} but the ledger holds {copies} [{schedule}]",
                    item.id,
                    item.channel,
                    item.class,
                    crate::render::output::counted(item.copies as i64, "copy"),
                ));
            }
        }
    }

    /// How many copies each provider accepted, per notification and channel.
    pub fn accepted(&self) -> std::collections::HashMap<(String, Channel), usize> {
        let mut counts = std::collections::HashMap::new();
        for accepted in self.fakes.control.ledger() {
            if let Some(id) = accepted.notification_id {
                *counts.entry((id, accepted.channel)).or_default() += 1;
            }
        }
        counts
    }
}

fn draw(rng: &mut StdRng) -> Schedule {
    let mut channels: Vec<Channel> = Channel::ALL
        .into_iter()
        .filter(|_| rng.random_bool(0.5))
        .collect();
    if channels.is_empty() {
        channels.push(Channel::ALL[rng.random_range(0..3)]);
    }
    let max_attempts = rng.random_range(1..=3);
    let behaviors = channels
        .iter()
        .map(|&c| (c, (0..=max_attempts).map(|_| draw_behavior(rng)).collect()))
        .collect();
    Schedule {
        channels,
        behaviors,
        max_attempts,
        crash: rng.random_bool(0.1),
    }
}

impl Schedule {
    /// "EMAIL: accept, reject 500; SLACK: hang (crash first)".
    pub fn describe(&self) -> String {
        let mut parts: Vec<String> = self
            .behaviors
            .iter()
            .map(|(c, b)| {
                format!(
                    "{c}: {}",
                    b.iter()
                        .map(|b| describe(*b))
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            })
            .collect();
        parts.push(format!("budget {}", self.max_attempts));
        if self.crash {
            parts.push("a worker dies mid-call first".into());
        }
        parts.join("; ")
    }
}

fn script(fakes: &Fakes, id: &str, index: usize, schedule: &Schedule) {
    for (channel, behaviors) in &schedule.behaviors {
        match channel {
            Channel::Email => fakes
                .control
                .script(&format!("s{index}@sweep.uns.local"), behaviors),
            other => fakes.control.script(&format!("{id}:{other}"), behaviors),
        }
    }
}

/// A worker that claims `id`, starts its first channel, sends, and dies: the call goes on
/// without anyone to record its result.
fn crash(
    conn: &Db<'_>,
    adapters: &Adapters,
    id: &str,
) -> Result<std::thread::JoinHandle<()>, ReproError> {
    let ClaimOutcome::Claimed(lease) =
        engine::claim(conn, SystemClock.now(), "doomed-worker", LEASE_SECONDS)?
    else {
        return Err(ReproError::Crash(format!("{id} was not claimable")));
    };
    if lease.notification_id != id {
        return Err(ReproError::Crash(format!(
            "claimed {} instead of {id}",
            lease.notification_id
        )));
    }
    let Some(channel) = lease.owed.iter().next() else {
        return Err(ReproError::Crash(format!("{id} owes no channel")));
    };
    let adapter = adapters.get(&channel).cloned();
    let details = adapter.as_ref().map(|a| a.started()).unwrap_or_default();
    engine::start_channel(conn, SystemClock.now(), &lease, channel, &details)?;
    Ok(std::thread::spawn(move || {
        if let Some(adapter) = adapter {
            let request =
                DeliveryRequest::for_lease(&lease, channel, LEASE_SECONDS, MIN_IO_TIMEOUT);
            let _ = adapter.deliver(&request, &|| true);
        }
    }))
}

fn judge(
    conn: &Db<'_>,
    fakes: &Fakes,
    ids: &[String],
    drawn: &[Schedule],
    seed: u64,
) -> Result<Counts, ReproError> {
    let mut counts = Counts {
        seed,
        relay_log_layout: crate::lab::fakes::maillog::Layouts::pick(seed).describe(),
        schedules: drawn.len(),
        ..Counts::default()
    };
    for (id, schedule) in ids.iter().zip(drawn) {
        let doc = direct::notification_doc(conn, id)?;
        let accepted = |channel: Channel| fakes.control.accepted_count(channel, id);
        if Channel::ALL.iter().any(|&c| accepted(c) > 1) {
            counts.duplicated += 1;
        }
        match doc.row.status.as_str() {
            "DELIVERED" => {
                counts.delivered += 1;
                let channels: Vec<Channel> = doc
                    .row
                    .channels
                    .iter()
                    .filter_map(|c| c.parse().ok())
                    .collect();
                if channels.iter().any(|&c| accepted(c) == 0) {
                    counts.false_delivered += 1;
                    counts.failures.push(format!(
                        "{id}: DELIVERED but a provider never accepted it [{}]",
                        schedule.describe()
                    ));
                }
                continue;
            }
            "DEAD" => counts.dead_lettered += 1,
            _ => {
                counts.unfinished += 1;
                continue;
            }
        }
        let verdict = triage::triage_events(&doc.row, &doc.events);
        judge_dead(&mut counts, id, &verdict, &accepted, schedule);
    }
    counts.failures.truncate(20);
    Ok(counts)
}

/// A dead letter's verdict held to what the providers really took: an unsafe RESOLVE or
/// REPLAY is a failure; VERIFY counted by how many channels were taken.
fn judge_dead(
    counts: &mut Counts,
    id: &str,
    verdict: &triage::Verdict,
    accepted: &dyn Fn(Channel) -> usize,
    schedule: &Schedule,
) {
    let truth: Vec<(Channel, bool)> = verdict
        .channels
        .iter()
        .map(|c| c.channel)
        .map(|c| (c, accepted(c) > 0))
        .collect();
    match verdict.branch {
        Branch::Resolve => {
            counts.resolve += 1;
            if truth.iter().any(|(_, ok)| !ok) {
                counts.unsafe_resolve += 1;
                counts.failures.push(format!(
                    "{id}: RESOLVE but not every provider accepted {truth:?} [{}]",
                    schedule.describe()
                ));
            }
        }
        Branch::Replay => {
            counts.replay += 1;
            let replayed_but_accepted = verdict
                .channels
                .iter()
                .filter(|c| c.state != ChannelState::Delivered)
                .map(|c| c.channel)
                .any(|c| accepted(c) > 0);
            if replayed_but_accepted {
                counts.unsafe_replay += 1;
                counts.failures.push(format!(
                    "{id}: REPLAY of a channel the provider accepted {truth:?} [{}]",
                    schedule.describe()
                ));
            }
        }
        Branch::Verify => {
            counts.verify += 1;
            let n = truth.iter().filter(|(_, ok)| *ok).count();
            if n == truth.len() {
                counts.verify_all_accepted += 1;
            } else if n == 0 {
                counts.verify_none_accepted += 1;
            } else {
                counts.verify_some_accepted += 1;
            }
        }
    }
}

/// The Slack answers the ledger contradicts, by (id, cycle, attempt): per cycle, more
/// attempts answered DELIVERED than the webhook took messages with the cycle's key, or a
/// NOT_DELIVERED where more messages were taken than the other answers account for.
fn slack_answers_against(
    answers: &[crate::verify::Answer],
    ledger: &[crate::lab::fakes::Accepted],
) -> std::collections::HashSet<(String, i64, i64)> {
    use crate::verify::Delivery;
    let mut by_cycle: std::collections::BTreeMap<(String, i64), Vec<&crate::verify::Answer>> =
        std::collections::BTreeMap::new();
    for answer in answers.iter().filter(|a| a.channel == Channel::Slack) {
        by_cycle
            .entry((answer.id.clone(), answer.cycle))
            .or_default()
            .push(answer);
    }
    let mut wrong = std::collections::HashSet::new();
    for ((id, cycle), answers) in by_cycle {
        let key = crate::model::idempotency_key(&id, Channel::Slack, cycle);
        let taken = ledger
            .iter()
            .filter(|a| a.channel == Channel::Slack && a.idempotency_key.as_deref() == Some(&key))
            .count();
        let count = |outcome| answers.iter().filter(|a| a.answer == outcome).count();
        let (delivered, cannot_tell) = (count(Delivery::Delivered), count(Delivery::CannotTell));
        let contradicted = |outcome: Delivery| match outcome {
            Delivery::Delivered => delivered > taken,
            Delivery::NotDelivered => taken > delivered + cannot_tell,
            Delivery::CannotTell => false,
        };
        for answer in answers {
            if contradicted(answer.answer) {
                wrong.insert((id.clone(), cycle, answer.attempt));
            }
        }
    }
    wrong
}
