//! The worker: claims due rows, calls the providers outside any transaction, settles.
//!
//! Every loop iteration ends in a named outcome that is logged; silence from a running
//! worker therefore only ever means it failed.

use crate::clock::Clock;
use crate::model::Channel;
use crate::model::ChannelSet;
use crate::runtime::adapters::{Adapter, DeliveryRequest};
use crate::runtime::engine::{
    self, Backoff, ClaimOutcome, DeadReason, Decision, DeliveryResult, Ended, Fence, Lease,
};
use crate::runtime::metrics::Metrics;
use crate::runtime::writer::Database;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The first pause before a write that records what a provider said is tried again, and
/// the longest it doubles to.
const WRITE_RETRY_FIRST: Duration = Duration::from_millis(50);
const WRITE_RETRY_MOST: Duration = Duration::from_secs(1);

/// The longest a worker thread waits after store errors in a row (see [`error_pause`]).
const ERROR_PAUSE_MOST: Duration = Duration::from_secs(5);

/// How long a worker thread waits after the `in_a_row`-th store error in a row: the poll
/// interval, doubled with each error up to [`ERROR_PAUSE_MOST`]. While the database is
/// away, or its name reaches a server that takes no writes, every thread of every worker
/// would otherwise claim, fail and open a new session five times a second, flooding the
/// log and the server just as it comes back; a pause of a few seconds at most leaves the
/// leases (a minute) untouched.
pub fn error_pause(poll: Duration, in_a_row: u32) -> Duration {
    let doublings = in_a_row.saturating_sub(1).min(16);
    poll.saturating_mul(1 << doublings)
        .min(ERROR_PAUSE_MOST.max(poll))
}

#[derive(Debug, Clone)]
pub struct WorkerConfig {
    /// Recorded in ATTEMPT_STARTED so operators can see how many processes share a store.
    pub worker_id: String,
    pub lease_seconds: f64,
    /// Threads claiming and delivering at once.
    pub concurrency: usize,
    /// How long an idle thread waits before looking again.
    pub poll_interval: Duration,
    pub backoff: Backoff,
    pub min_io_timeout: Duration,
}

impl Default for WorkerConfig {
    fn default() -> Self {
        Self {
            worker_id: default_worker_id(),
            lease_seconds: 60.0,
            concurrency: 4,
            poll_interval: Duration::from_millis(200),
            backoff: Backoff::default(),
            min_io_timeout: Duration::from_secs(1),
        }
    }
}

/// `host:pid:random`, unique per process.
pub fn default_worker_id() -> String {
    let host = std::env::var("HOSTNAME").unwrap_or_else(|_| "localhost".into());
    let suffix = uuid::Uuid::new_v4().simple().to_string();
    format!("{host}:{}:{}", std::process::id(), &suffix[..6])
}

/// How one pass of the loop ended.
#[derive(Debug, Clone, PartialEq)]
pub enum Pass {
    Idle,
    Delivered(String),
    RetryScheduled(String),
    LeaseLost(String),
    DeadLettered(String),
}

impl Pass {
    pub fn name(&self) -> &'static str {
        match self {
            Pass::Idle => "idle",
            Pass::Delivered(_) => "delivered",
            Pass::RetryScheduled(_) => "retry-scheduled",
            Pass::LeaseLost(_) => "lease-lost",
            Pass::DeadLettered(_) => "dead-lettered",
        }
    }
}

/// Counts of outcomes since start, for the log and the benchmark.
#[derive(Debug, Default)]
pub struct Counters {
    pub delivered: AtomicU64,
    pub retry_scheduled: AtomicU64,
    pub lease_lost: AtomicU64,
    pub dead_lettered: AtomicU64,
    pub errors: AtomicU64,
}

impl Counters {
    fn count(&self, outcome: &Pass) {
        let counter = match outcome {
            Pass::Idle => return,
            Pass::Delivered(_) => &self.delivered,
            Pass::RetryScheduled(_) => &self.retry_scheduled,
            Pass::LeaseLost(_) => &self.lease_lost,
            Pass::DeadLettered(_) => &self.dead_lettered,
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }

    /// Attempts that ended, however they ended (a notification settles only once it is
    /// DELIVERED or DEAD).
    pub fn ended(&self) -> u64 {
        self.delivered.load(Ordering::Relaxed)
            + self.dead_lettered.load(Ordering::Relaxed)
            + self.retry_scheduled.load(Ordering::Relaxed)
            + self.lease_lost.load(Ordering::Relaxed)
    }
}

/// The adapters by channel. A row that needs a channel without one is left untouched
/// (and said so in the log), never dead-lettered for want of an adapter.
pub type Adapters = BTreeMap<Channel, Arc<dyn Adapter>>;

/// A worker whose threads write through the store's single writer thread: within one
/// process they queue for it instead of sleeping in SQLite's busy handler.
#[derive(Clone)]
pub struct Worker {
    db: Database,
    clock: Arc<dyn Clock>,
    adapters: Arc<Adapters>,
    config: WorkerConfig,
    pub counters: Arc<Counters>,
    /// What `GET /metrics` shows, counted here as each transition happens.
    metrics: Option<Arc<Metrics>>,
    /// When the last warning about declined rows was logged (unix seconds).
    declined_warned: Arc<AtomicU64>,
}

impl Worker {
    pub fn new(
        db: Database,
        clock: Arc<dyn Clock>,
        adapters: Adapters,
        config: WorkerConfig,
    ) -> Self {
        Self {
            db,
            clock,
            adapters: Arc::new(adapters),
            config,
            counters: Arc::new(Counters::default()),
            metrics: None,
            declined_warned: Arc::new(AtomicU64::new(0)),
        }
    }

    /// Counts into `metrics` from now on.
    pub fn with_metrics(mut self, metrics: Arc<Metrics>) -> Self {
        self.metrics = Some(metrics);
        self
    }

    /// The same worker (store, clock, providers) holding leases of `lease_seconds`.
    pub fn with_lease(&self, lease_seconds: f64) -> Worker {
        Worker {
            db: self.db.clone(),
            clock: self.clock.clone(),
            adapters: self.adapters.clone(),
            config: WorkerConfig {
                lease_seconds,
                ..self.config.clone()
            },
            counters: Arc::new(Counters::default()),
            metrics: self.metrics.clone(),
            declined_warned: Arc::new(AtomicU64::new(0)),
        }
    }

    pub fn lease_seconds(&self) -> f64 {
        self.config.lease_seconds
    }

    fn count(&self, what: impl FnOnce(&Metrics)) {
        if let Some(metrics) = &self.metrics {
            what(metrics);
        }
    }

    /// The writer thread the worker commits through, for in-process writers to share.
    pub fn database(&self) -> Database {
        self.db.clone()
    }

    /// Runs one engine call on the writer thread. The clock is read there, when the
    /// transaction starts, so a fence is never checked against a time taken while the
    /// job waited in the queue.
    fn write<T: Send + 'static>(
        &self,
        call: impl FnOnce(&crate::db::Db<'_>, f64) -> engine::Result<T> + Send + 'static,
    ) -> engine::Result<T> {
        let clock = self.clock.clone();
        self.db.run(move |db| call(db, clock.now()))?
    }

    /// Runs `write` until it is written while `lease` is this worker's. What a provider
    /// said is known only here: lost to a store that failed for a moment (a restart, a
    /// failover, a lock held by another process), the lease runs out and a reclaim calls
    /// the provider again. Each try is told whether one came before it. A try follows a
    /// COMMIT that may have been kept only when `write` can find its own earlier write
    /// (`checks_again`); past the lease, the reclaim owns the row.
    fn write_while_leased<T: Send + 'static>(
        &self,
        lease: &Lease,
        what: &str,
        checks_again: bool,
        write: impl Fn(&crate::db::Db<'_>, f64, bool) -> engine::Result<T> + Send + Sync + 'static,
    ) -> engine::Result<T> {
        let write = Arc::new(write);
        let until = lease
            .claimed
            .map(|at| at + Duration::from_secs_f64(self.config.lease_seconds));
        let mut pause = WRITE_RETRY_FIRST;
        let mut again = false;
        loop {
            let once = write.clone();
            let err = match self.write(move |conn, now| once(conn, now, again)) {
                Ok(value) => return Ok(value),
                Err(err) => err,
            };
            let left = until.and_then(|until| until.checked_duration_since(Instant::now()));
            let may_retry = err.passing() && (checks_again || !err.may_have_committed());
            if !may_retry || left.is_none_or(|left| left <= pause) {
                return Err(err);
            }
            tracing::warn!(
                worker = %self.config.worker_id,
                notification = %lease.notification_id,
                error = %err,
                "could not record {what}; trying again while the lease holds"
            );
            std::thread::sleep(pause);
            pause = (pause * 2).min(WRITE_RETRY_MOST);
            again = true;
        }
    }

    /// The channels this worker has adapters for.
    pub fn supported(&self) -> ChannelSet {
        self.adapters.keys().copied().collect()
    }

    /// One iteration: claim, deliver every owed channel, settle.
    pub fn run_once(&self) -> engine::Result<Pass> {
        let (worker_id, lease_seconds) = (self.config.worker_id.clone(), self.config.lease_seconds);
        let supported = self.supported();
        let claimed = self.write(move |conn, now| {
            engine::claim_for(conn, now, &worker_id, lease_seconds, &supported)
        })?;
        let outcome = match claimed {
            ClaimOutcome::Idle { declined } => {
                self.warn_declined(declined);
                Pass::Idle
            }
            ClaimOutcome::RecoveryExhausted { notification_id } => {
                self.count(|m| m.dead_lettered(DeadReason::RecoveryExhausted));
                Pass::DeadLettered(notification_id)
            }
            ClaimOutcome::Undeliverable {
                notification_id,
                error_message,
            } => {
                self.count(|m| m.dead_lettered(DeadReason::Undeliverable));
                tracing::warn!(notification = %notification_id, error = %error_message, "dead-lettered: the row cannot be delivered as stored");
                Pass::DeadLettered(notification_id)
            }
            ClaimOutcome::Claimed(mut lease) => {
                // The lease runs from now on this machine's monotonic clock: its budget
                // for the calls never reads a wall clock that may disagree with the store's.
                lease.claimed = Some(Instant::now());
                if lease.reclaimed {
                    self.count(Metrics::reclaim);
                    tracing::warn!(
                        worker = %self.config.worker_id,
                        outcome = "reclaimed",
                        notification = %lease.notification_id,
                        "took over a row whose lease ran out: its last call may have reached the provider"
                    );
                }
                self.attempt(Arc::new(lease))?
            }
        };
        self.counters.count(&outcome);
        Ok(outcome)
    }

    /// Says, at most every ten seconds, that due rows were left for another worker.
    fn warn_declined(&self, declined: u64) {
        if declined == 0 {
            return;
        }
        let now = self.clock.now() as u64;
        let last = self.declined_warned.load(Ordering::Relaxed);
        if now >= last + 10
            && self
                .declined_warned
                .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
        {
            let configured = self.supported();
            tracing::warn!(
                worker = %self.config.worker_id,
                declined,
                adapters = %if configured.is_empty() { "none".to_string() } else { configured.joined(",") },
                "due rows need a channel this worker has no adapter for: left untouched for a worker that has one"
            );
        }
    }

    fn attempt(&self, lease: Arc<Lease>) -> engine::Result<Pass> {
        let id = lease.notification_id.clone();
        let mut results: Vec<(Channel, DeliveryResult)> = Vec::new();
        for channel in lease.owed.iter() {
            let held = lease.clone();
            let details = self
                .adapters
                .get(&channel)
                .map(|adapter| adapter.started())
                .unwrap_or_default();
            // Lost to a store away for a moment, the start would leave the row to wait
            // out its lease and be reclaimed, though nothing was sent.
            let fence = self.write_while_leased(
                &lease,
                "the channel's start",
                true,
                move |conn, now, again| {
                    engine::start_channel_tried(conn, now, &held, channel, &details, again)
                },
            )?;
            if fence == Fence::Lost {
                self.count(Metrics::lease_lost);
                return Ok(Pass::LeaseLost(id));
            }
            let started = Instant::now();
            let result = self.call(&lease, channel);
            let took = started.elapsed().as_secs_f64();
            self.count(|m| m.call(channel, result.outcome, took));
            let (held, recorded) = (lease.clone(), result.clone());
            // A try whose COMMIT failed uncertainly may have kept the result: the next
            // looks before it writes.
            self.write_while_leased(
                &lease,
                "the provider's answer",
                true,
                move |conn, now, again| {
                    if !again || !engine::result_recorded(conn, &held, channel)? {
                        engine::record_result(conn, now, &held, channel, &recorded)?;
                    }
                    Ok(())
                },
            )?;
            results.push((channel, result));
        }
        let backoff = self.config.backoff;
        let held = lease.clone();
        // A settlement kept by a try whose COMMIT failed uncertainly would make the next
        // find its fence gone and write LEASE_LOST: none is tried after one.
        let settlement = self.write_while_leased(
            &lease,
            "how the attempt ended",
            false,
            move |conn, now, _| engine::settle(conn, now, &held, &results, &backoff),
        )?;
        Ok(match settlement {
            Ended::Decided(Decision::Delivered) => Pass::Delivered(id),
            Ended::Decided(Decision::RetryScheduled { .. }) => Pass::RetryScheduled(id),
            Ended::Decided(Decision::DeadLettered { reason, .. }) => {
                self.count(|m| m.dead_lettered(reason));
                Pass::DeadLettered(id)
            }
            Ended::LeaseLost => {
                self.count(Metrics::lease_lost);
                Pass::LeaseLost(id)
            }
        })
    }

    /// The provider call, outside any transaction.
    fn call(&self, lease: &Arc<Lease>, channel: Channel) -> DeliveryResult {
        let Some(adapter) = self.adapters.get(&channel) else {
            return DeliveryResult::rejected(
                format!("no {channel} adapter is configured; nothing was sent"),
                false,
            )
            .with("stage", "configuration");
        };
        let remaining = lease.remaining();
        let request =
            DeliveryRequest::for_lease(lease, channel, remaining, self.config.min_io_timeout);
        let still_held = || {
            let held = lease.clone();
            self.write(move |conn, now| engine::lease_held(conn, now, &held))
                .unwrap_or(false)
        };
        adapter.deliver(&request, &still_held)
    }

    /// Loops until `shutdown` is set: no new claims after that, in-flight calls finish and
    /// record their results.
    pub fn run(&self, shutdown: &AtomicBool) {
        let mut was_idle = false;
        let mut errors_in_a_row: u32 = 0;
        while !shutdown.load(Ordering::SeqCst) {
            let pass = self.run_once();
            if pass.is_ok() {
                errors_in_a_row = 0;
            }
            match pass {
                Ok(Pass::Idle) => {
                    if !was_idle {
                        tracing::info!(worker = %self.config.worker_id, outcome = "idle", "nothing due");
                    } else {
                        tracing::debug!(worker = %self.config.worker_id, outcome = "idle", "nothing due");
                    }
                    was_idle = true;
                    sleep_unless(shutdown, self.config.poll_interval);
                }
                Ok(outcome) => {
                    was_idle = false;
                    let id = match &outcome {
                        Pass::Delivered(id)
                        | Pass::RetryScheduled(id)
                        | Pass::LeaseLost(id)
                        | Pass::DeadLettered(id) => id.as_str(),
                        Pass::Idle => "",
                    };
                    // What log-based alerting watches for is a warning: a lost lease and a
                    // dead letter each may mean a duplicate or a message nobody received.
                    match outcome {
                        Pass::LeaseLost(_) | Pass::DeadLettered(_) => {
                            tracing::warn!(worker = %self.config.worker_id, outcome = outcome.name(), notification = id);
                        }
                        _ => {
                            tracing::info!(worker = %self.config.worker_id, outcome = outcome.name(), notification = id);
                        }
                    }
                }
                Err(err) => {
                    was_idle = false;
                    self.counters.errors.fetch_add(1, Ordering::Relaxed);
                    errors_in_a_row = errors_in_a_row.saturating_add(1);
                    // Each thread's pause a little apart from the others', so they do not
                    // all come back at the same moment.
                    let pause = error_pause(self.config.poll_interval, errors_in_a_row)
                        .mul_f64(rand::random_range(0.75..=1.0));
                    tracing::error!(
                        worker = %self.config.worker_id,
                        outcome = "error",
                        error = %err,
                        in_a_row = errors_in_a_row,
                        pause_ms = pause.as_millis() as u64,
                        "store error; retrying"
                    );
                    sleep_unless(shutdown, pause);
                }
            }
        }
        tracing::info!(worker = %self.config.worker_id, outcome = "stopped", "worker thread stopped");
    }

    /// Runs the worker's threads until `done` holds (asked every `poll`) or `deadline`
    /// passes, then stops them and waits: every call in flight has recorded its result
    /// when this returns. Returns whether `done` held.
    pub fn run_until<E>(
        &self,
        deadline: Duration,
        poll: Duration,
        mut done: impl FnMut() -> Result<bool, E>,
    ) -> Result<bool, E> {
        let stop = Arc::new(AtomicBool::new(false));
        let threads = self.spawn(stop.clone());
        let started = Instant::now();
        let finished = loop {
            match done() {
                Ok(true) => break Ok(true),
                Ok(false) if started.elapsed() >= deadline => break Ok(false),
                Ok(false) => std::thread::sleep(poll),
                Err(err) => break Err(err),
            }
        };
        stop.store(true, Ordering::SeqCst);
        for thread in threads {
            let _ = thread.join();
        }
        finished
    }

    /// Starts `concurrency` threads running [`Worker::run`].
    pub fn spawn(&self, shutdown: Arc<AtomicBool>) -> Vec<JoinHandle<()>> {
        (0..self.config.concurrency.max(1))
            .map(|n| {
                let worker = self.clone();
                let shutdown = shutdown.clone();
                std::thread::Builder::new()
                    .name(format!("uns-worker-{n}"))
                    .spawn(move || worker.run(&shutdown))
            })
            .filter_map(|spawned| match spawned {
                Ok(handle) => Some(handle),
                Err(err) => {
                    tracing::error!(error = %err, "could not start a worker thread");
                    None
                }
            })
            .collect()
    }
}

fn sleep_unless(shutdown: &AtomicBool, total: Duration) {
    let step = Duration::from_millis(20);
    let start = Instant::now();
    while !shutdown.load(Ordering::SeqCst) && start.elapsed() < total {
        std::thread::sleep(step.min(total));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_worker_waits_longer_after_each_store_error_in_a_row_up_to_a_few_seconds() {
        let poll = Duration::from_millis(200);
        let pauses: Vec<u128> = (1..=8)
            .map(|in_a_row| error_pause(poll, in_a_row).as_millis())
            .collect();
        assert_eq!(pauses, [200, 400, 800, 1600, 3200, 5000, 5000, 5000]);
        assert_eq!(error_pause(poll, u32::MAX), ERROR_PAUSE_MOST);
        assert_eq!(error_pause(Duration::ZERO, 9), Duration::ZERO);
        // An interval longer than the most is never shortened.
        let slow = Duration::from_secs(9);
        assert_eq!(error_pause(slow, 1), slow);
        assert_eq!(error_pause(slow, 3), slow);
    }
}
