//! The runtime's metrics (DESIGN §8), in Prometheus's text format.
//!
//! Counters and the provider-call histogram are counted by the worker where each
//! transition happens, never by scanning the store. The gauges that need the store
//! (rows by status, the DLQ's size, the oldest due row) are read from indexes where they
//! can be and kept for a few seconds; once older, a scrape gets them as they were while
//! a background read renews them, so no scrape waits on a large store. No id and no payload is ever
//! a label: every label takes one of a few fixed values.

use crate::model::{Channel, ProviderOutcome};
use crate::runtime::engine::DeadReason;
use prometheus_client::encoding::{EncodeLabelSet, EncodeLabelValue};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use std::sync::Mutex;
use std::sync::atomic::AtomicU64;
use std::time::{Duration, Instant};

/// How long the store gauges are kept before a scrape reads the store again.
pub const STORE_GAUGES_TTL: Duration = Duration::from_secs(2);

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelValue)]
#[allow(non_camel_case_types, clippy::upper_case_acronyms)]
enum ChannelLabel {
    EMAIL,
    SLACK,
    PAGERDUTY,
}

impl From<Channel> for ChannelLabel {
    fn from(channel: Channel) -> Self {
        match channel {
            Channel::Email => ChannelLabel::EMAIL,
            Channel::Slack => ChannelLabel::SLACK,
            Channel::Pagerduty => ChannelLabel::PAGERDUTY,
        }
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelValue)]
#[allow(non_camel_case_types, clippy::upper_case_acronyms)]
enum OutcomeLabel {
    ACCEPTED,
    REJECTED,
    UNKNOWN,
}

impl From<ProviderOutcome> for OutcomeLabel {
    fn from(outcome: ProviderOutcome) -> Self {
        match outcome {
            ProviderOutcome::Accepted => OutcomeLabel::ACCEPTED,
            ProviderOutcome::Rejected => OutcomeLabel::REJECTED,
            ProviderOutcome::Unknown => OutcomeLabel::UNKNOWN,
        }
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct AttemptLabels {
    channel: ChannelLabel,
    outcome: OutcomeLabel,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ChannelLabels {
    channel: ChannelLabel,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReasonLabels {
    reason: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StatusLabels {
    status: String,
}

const OUTCOMES: [ProviderOutcome; 3] = [
    ProviderOutcome::Accepted,
    ProviderOutcome::Rejected,
    ProviderOutcome::Unknown,
];

fn channel_index(channel: Channel) -> usize {
    Channel::ALL.iter().position(|c| *c == channel).unwrap_or(0)
}

/// The statuses a row can have.
const STATUSES: [&str; 5] = ["PENDING", "LEASED", "DELIVERED", "DEAD", "RESOLVED"];

/// Histogram buckets for provider calls: from 10 ms to well past the lease.
#[derive(Clone)]
struct CallBuckets(Vec<f64>);

impl prometheus_client::metrics::family::MetricConstructor<AtomicHistogram> for CallBuckets {
    fn new_metric(&self) -> AtomicHistogram {
        AtomicHistogram::new(&self.0)
    }
}

/// A histogram counted with atomics only. The crate's own takes a mutex per
/// observation; with more worker threads than cores, a thread preempted while holding it
/// stalls every other call's bookkeeping, which cost the worker about a tenth of its
/// throughput in `cargo bench --bench worker`.
#[derive(Clone, Debug)]
pub struct AtomicHistogram {
    inner: std::sync::Arc<HistogramCells>,
}

#[derive(Debug)]
struct HistogramCells {
    bounds: Vec<f64>,
    /// One count per bound, then the overflow bucket (not cumulative).
    counts: Vec<AtomicU64>,
    /// The sum, as f64 bits.
    sum: AtomicU64,
    count: AtomicU64,
}

impl AtomicHistogram {
    fn new(bounds: &[f64]) -> Self {
        Self {
            inner: std::sync::Arc::new(HistogramCells {
                bounds: bounds.to_vec(),
                counts: (0..=bounds.len()).map(|_| AtomicU64::new(0)).collect(),
                sum: AtomicU64::new(0f64.to_bits()),
                count: AtomicU64::new(0),
            }),
        }
    }

    pub fn observe(&self, value: f64) {
        use std::sync::atomic::Ordering::Relaxed;
        let cells = &self.inner;
        let slot = cells.bounds.partition_point(|bound| *bound < value);
        if let Some(count) = cells.counts.get(slot) {
            count.fetch_add(1, Relaxed);
        }
        let _ = cells.sum.fetch_update(Relaxed, Relaxed, |bits| {
            Some((f64::from_bits(bits) + value).to_bits())
        });
        cells.count.fetch_add(1, Relaxed);
    }
}

impl prometheus_client::metrics::TypedMetric for AtomicHistogram {
    const TYPE: prometheus_client::metrics::MetricType =
        prometheus_client::metrics::MetricType::Histogram;
}

impl prometheus_client::encoding::EncodeMetric for AtomicHistogram {
    fn encode(
        &self,
        mut encoder: prometheus_client::encoding::MetricEncoder,
    ) -> Result<(), std::fmt::Error> {
        use std::sync::atomic::Ordering::Relaxed;
        let cells = &self.inner;
        let buckets: Vec<(f64, u64)> = cells
            .bounds
            .iter()
            .copied()
            .chain(std::iter::once(f64::INFINITY))
            .zip(cells.counts.iter().map(|c| c.load(Relaxed)))
            .collect();
        // The count is the buckets' total, so a scrape during an observation is never
        // inconsistent with itself.
        let count = buckets.iter().map(|(_, n)| n).sum();
        encoder.encode_histogram::<prometheus_client::encoding::NoLabelSet>(
            f64::from_bits(cells.sum.load(Relaxed)),
            count,
            &buckets,
            None,
        )
    }

    fn metric_type(&self) -> prometheus_client::metrics::MetricType {
        <Self as prometheus_client::metrics::TypedMetric>::TYPE
    }
}

fn call_buckets(lease_seconds: f64) -> Vec<f64> {
    let mut buckets: Vec<f64> = [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0]
        .into_iter()
        .filter(|b| *b < lease_seconds * 0.25)
        .collect();
    for fraction in [0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 4.0] {
        buckets.push(lease_seconds * fraction);
    }
    buckets
}

/// How old the store gauges are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Freshness {
    /// Never read: the first scrape reads them before it answers.
    Never,
    /// Read within [`STORE_GAUGES_TTL`]: served as they are.
    Fresh,
    /// Older: served as they are while a background read brings them up to date, so a
    /// scrape never waits for the store.
    Stale,
}

/// Everything `GET /metrics` shows.
pub struct Metrics {
    registry: Registry,
    lease_lost: Counter,
    reclaims: Counter,
    notifications: Family<StatusLabels, Gauge>,
    dlq_entries: Gauge,
    oldest_due: Gauge<f64, AtomicU64>,
    /// The series the worker counts into, looked up once: counting is then an atomic
    /// add (or one short lock for the histogram), with no label hashing per call.
    attempt_series: Vec<Counter>,
    call_series: Vec<AtomicHistogram>,
    dead_series: Vec<Counter>,
    /// When the store gauges were last read.
    read_at: Mutex<Option<Instant>>,
    /// Set while a background read of the store gauges runs.
    refreshing: std::sync::atomic::AtomicBool,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

impl Metrics {
    /// The metrics of a runtime whose worker leases rows for `lease_seconds`.
    pub fn new(lease_seconds: f64) -> Self {
        let mut registry = Registry::default();
        let attempts = Family::<AttemptLabels, Counter>::default();
        let lease_lost = Counter::default();
        let reclaims = Counter::default();
        let dead_lettered = Family::<ReasonLabels, Counter>::default();
        let provider_call =
            Family::new_with_constructor(CallBuckets(call_buckets(lease_seconds.max(0.001))));
        let lease = Gauge::<f64, AtomicU64>::default();
        lease.set(lease_seconds);
        let notifications = Family::<StatusLabels, Gauge>::default();
        let dlq_entries = Gauge::default();
        let oldest_due = Gauge::<f64, AtomicU64>::default();
        registry.register(
            "uns_channel_attempts",
            "Provider calls by channel and outcome (ACCEPTED, REJECTED, UNKNOWN)",
            attempts.clone(),
        );
        registry.register(
            "uns_lease_lost",
            "Fenced writes that found the worker's lease gone (LEASE_LOST)",
            lease_lost.clone(),
        );
        registry.register(
            "uns_reclaims",
            "Claims of a row whose previous lease had expired",
            reclaims.clone(),
        );
        registry.register(
            "uns_dead_lettered",
            "Rows moved to the DLQ, by reason",
            dead_lettered.clone(),
        );
        registry.register(
            "uns_provider_call_seconds",
            "How long provider calls took, by channel",
            provider_call.clone(),
        );
        registry.register(
            "uns_lease_seconds",
            "The lease a worker holds a row for while it calls the providers",
            lease,
        );
        registry.register("uns_notifications", "Rows by status", notifications.clone());
        registry.register("uns_dlq_entries", "Rows in the DLQ", dlq_entries.clone());
        registry.register(
            "uns_oldest_due_seconds",
            "How long the oldest due row has waited to be claimed (0 when none is due)",
            oldest_due.clone(),
        );
        // Every series exists from the start, at zero, so alerts see an increase from
        // the first event rather than a series appearing: the series kept below are
        // made here, and so is each status's.
        for status in STATUSES {
            drop(notifications.get_or_create(&StatusLabels {
                status: status.into(),
            }));
        }
        let attempt_series = attempt_series(&attempts);
        let call_series = Channel::ALL
            .iter()
            .map(|channel| {
                provider_call
                    .get_or_create(&ChannelLabels {
                        channel: (*channel).into(),
                    })
                    .clone()
            })
            .collect();
        let dead_series = dead_series(&dead_lettered);
        Self {
            attempt_series,
            call_series,
            dead_series,
            registry,
            lease_lost,
            reclaims,
            notifications,
            dlq_entries,
            oldest_due,
            read_at: Mutex::new(None),
            refreshing: std::sync::atomic::AtomicBool::new(false),
        }
    }

    /// One provider call: how it ended and how long it took.
    pub fn call(&self, channel: Channel, outcome: ProviderOutcome, seconds: f64) {
        let c = channel_index(channel);
        let o = OUTCOMES.iter().position(|x| *x == outcome).unwrap_or(0);
        if let Some(counter) = self.attempt_series.get(c * OUTCOMES.len() + o) {
            counter.inc();
        }
        if let Some(histogram) = self.call_series.get(c) {
            histogram.observe(seconds);
        }
    }

    pub fn lease_lost(&self) {
        self.lease_lost.inc();
    }

    pub fn reclaim(&self) {
        self.reclaims.inc();
    }

    pub fn dead_lettered(&self, reason: DeadReason) {
        if let Some(counter) = DeadReason::ALL
            .iter()
            .position(|r| *r == reason)
            .and_then(|i| self.dead_series.get(i))
        {
            counter.inc();
        }
    }

    /// What a scrape should do about the store gauges.
    pub fn freshness(&self) -> Freshness {
        let read_at = *self.read_at.lock().unwrap_or_else(|p| p.into_inner());
        match read_at {
            None => Freshness::Never,
            Some(at) if at.elapsed() < STORE_GAUGES_TTL => Freshness::Fresh,
            Some(_) => Freshness::Stale,
        }
    }

    /// Claims the one background read of the store gauges; false if one already runs.
    pub fn begin_refresh(&self) -> bool {
        !self
            .refreshing
            .swap(true, std::sync::atomic::Ordering::SeqCst)
    }

    pub fn end_refresh(&self) {
        self.refreshing
            .store(false, std::sync::atomic::Ordering::SeqCst);
    }

    /// Reads the store gauges now, by `clock` where the store keeps no clock of its own.
    pub fn refresh(&self, db: &crate::db::Db<'_>, clock: f64) -> crate::db::DbResult<()> {
        let stats = crate::runtime::queries::stats(db, clock)?;
        for status in STATUSES {
            let count = stats.by_status.get(status).copied().unwrap_or(0);
            self.notifications
                .get_or_create(&StatusLabels {
                    status: status.into(),
                })
                .set(count);
        }
        self.dlq_entries.set(stats.dlq_entries);
        self.oldest_due.set(
            stats
                .oldest_due_at
                .map_or(0.0, |at| (stats.at - at).max(0.0)),
        );
        *self.read_at.lock().unwrap_or_else(|p| p.into_inner()) = Some(Instant::now());
        Ok(())
    }

    /// OpenMetrics text, for a scraper that asks for it (Prometheus does).
    pub fn encode(&self) -> String {
        let mut text = String::with_capacity(8192);
        // Writing to a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut text, &self.registry);
        text
    }

    /// Prometheus's classic text format (version 0.0.4), for everything else: `curl`,
    /// `promtool check metrics`, older scrapers.
    pub fn encode_classic(&self) -> String {
        classic(&self.encode())
    }
}

/// Rewrites OpenMetrics text as the classic format: a counter family is named after its
/// `_total` samples, and there is no `# EOF` or `# UNIT` line.
fn classic(open_metrics: &str) -> String {
    let mut counters = std::collections::HashSet::new();
    for line in open_metrics.lines() {
        if let Some(name) = line
            .strip_prefix("# TYPE ")
            .and_then(|rest| rest.strip_suffix(" counter"))
        {
            counters.insert(name);
        }
    }
    let mut out = String::with_capacity(open_metrics.len() + 64);
    for line in open_metrics.lines() {
        if line == "# EOF" || line.starts_with("# UNIT ") {
            continue;
        }
        let comment = ["# HELP ", "# TYPE "]
            .into_iter()
            .find_map(|prefix| Some((prefix, line.strip_prefix(prefix)?)));
        match comment {
            Some((prefix, rest)) => {
                let (name, tail) = rest.split_once(' ').unwrap_or((rest, ""));
                out.push_str(prefix);
                out.push_str(name);
                if counters.contains(name) {
                    out.push_str("_total");
                }
                out.push(' ');
                out.push_str(tail);
            }
            None => out.push_str(line),
        }
        out.push('\n');
    }
    out
}

/// Each channel's and outcome's attempt counter, made at zero.
fn attempt_series(attempts: &Family<AttemptLabels, Counter>) -> Vec<Counter> {
    Channel::ALL
        .iter()
        .flat_map(|channel| {
            OUTCOMES.iter().map(|outcome| {
                attempts
                    .get_or_create(&AttemptLabels {
                        channel: (*channel).into(),
                        outcome: (*outcome).into(),
                    })
                    .clone()
            })
        })
        .collect()
}

/// Each dead-letter reason's counter, made at zero.
fn dead_series(dead_lettered: &Family<ReasonLabels, Counter>) -> Vec<Counter> {
    DeadReason::ALL
        .iter()
        .map(|reason| {
            dead_lettered
                .get_or_create(&ReasonLabels {
                    reason: reason.as_str().into(),
                })
                .clone()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_series_is_there_from_the_start_and_counts() {
        let metrics = Metrics::new(60.0);
        metrics.call(Channel::Email, ProviderOutcome::Unknown, 61.0);
        metrics.lease_lost();
        metrics.dead_lettered(DeadReason::UnknownOutcome);
        let text = metrics.encode();
        for line in [
            "uns_channel_attempts_total{channel=\"EMAIL\",outcome=\"UNKNOWN\"} 1",
            "uns_channel_attempts_total{channel=\"SLACK\",outcome=\"ACCEPTED\"} 0",
            "uns_lease_lost_total 1",
            "uns_reclaims_total 0",
            "uns_dead_lettered_total{reason=\"unknown_outcome\"} 1",
            "uns_dead_lettered_total{reason=\"recovery_exhausted\"} 0",
            "uns_lease_seconds 60.0",
            "uns_provider_call_seconds_bucket{le=\"60.0\",channel=\"EMAIL\"} 0",
            "uns_provider_call_seconds_bucket{le=\"90.0\",channel=\"EMAIL\"} 1",
            "uns_provider_call_seconds_bucket{le=\"+Inf\",channel=\"EMAIL\"} 1",
            "uns_provider_call_seconds_count{channel=\"EMAIL\"} 1",
            "uns_provider_call_seconds_sum{channel=\"EMAIL\"} 61.0",
        ] {
            assert!(text.contains(line), "{line} missing:\n{text}");
        }
    }

    #[test]
    fn the_classic_format_names_counters_by_their_samples() {
        let metrics = Metrics::new(60.0);
        metrics.lease_lost();
        let text = metrics.encode_classic();
        assert!(
            text.contains("# HELP uns_lease_lost_total Fenced writes"),
            "{text}"
        );
        assert!(
            text.contains("# TYPE uns_lease_lost_total counter\n"),
            "{text}"
        );
        assert!(text.contains("# TYPE uns_lease_seconds gauge\n"), "{text}");
        assert!(
            text.contains("# TYPE uns_provider_call_seconds histogram\n"),
            "{text}"
        );
        assert!(text.contains("\nuns_lease_lost_total 1\n"), "{text}");
        assert!(!text.contains("# EOF"), "{text}");
        assert!(metrics.encode().ends_with("# EOF\n"));
    }

    #[test]
    fn buckets_reach_past_the_lease() {
        let buckets = call_buckets(60.0);
        assert!(buckets.windows(2).all(|w| w[0] < w[1]), "{buckets:?}");
        assert_eq!(buckets.last(), Some(&240.0));
        assert!(buckets.contains(&30.0) && buckets.contains(&60.0));
        let short = call_buckets(1.0);
        assert!(short.windows(2).all(|w| w[0] < w[1]), "{short:?}");
        assert_eq!(short.last(), Some(&4.0));
    }
}
