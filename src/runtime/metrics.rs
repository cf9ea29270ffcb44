//! The runtime's metrics (DESIGN §8), in Prometheus's text format.
//!
//! Counters and the provider-call histogram are counted by the worker where each
//! transition happens, never by scanning the store. The gauges that need the store
//! (rows by status, the DLQ's size, the oldest due row) are read on a scrape, from
//! indexes where they can be, and kept for a few seconds. No id and no payload is ever
//! a label: every label takes one of a few fixed values.

use crate::model::{Channel, ProviderOutcome};
use crate::runtime::engine::DeadReason;
use prometheus_client::encoding::{EncodeLabelSet, EncodeLabelValue};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;
use rusqlite::Connection;
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

/// The statuses a row can have.
const STATUSES: [&str; 5] = ["PENDING", "LEASED", "DELIVERED", "DEAD", "RESOLVED"];

/// Histogram buckets for provider calls: from 10 ms to well past the lease.
#[derive(Clone)]
struct CallBuckets(Vec<f64>);

impl prometheus_client::metrics::family::MetricConstructor<Histogram> for CallBuckets {
    fn new_metric(&self) -> Histogram {
        Histogram::new(self.0.iter().copied())
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

/// Everything `GET /metrics` shows.
pub struct Metrics {
    registry: Registry,
    attempts: Family<AttemptLabels, Counter>,
    lease_lost: Counter,
    reclaims: Counter,
    dead_lettered: Family<ReasonLabels, Counter>,
    provider_call: Family<ChannelLabels, Histogram, CallBuckets>,
    notifications: Family<StatusLabels, Gauge>,
    dlq_entries: Gauge,
    oldest_due: Gauge<f64, AtomicU64>,
    /// When the store gauges were last read.
    read_at: Mutex<Option<Instant>>,
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
        // the first event rather than a series appearing.
        for channel in Channel::ALL {
            for outcome in [
                ProviderOutcome::Accepted,
                ProviderOutcome::Rejected,
                ProviderOutcome::Unknown,
            ] {
                drop(attempts.get_or_create(&AttemptLabels {
                    channel: channel.into(),
                    outcome: outcome.into(),
                }));
            }
            drop(provider_call.get_or_create(&ChannelLabels {
                channel: channel.into(),
            }));
        }
        for reason in DeadReason::ALL {
            drop(dead_lettered.get_or_create(&ReasonLabels {
                reason: reason.as_str().into(),
            }));
        }
        for status in STATUSES {
            drop(notifications.get_or_create(&StatusLabels {
                status: status.into(),
            }));
        }
        Self {
            registry,
            attempts,
            lease_lost,
            reclaims,
            dead_lettered,
            provider_call,
            notifications,
            dlq_entries,
            oldest_due,
            read_at: Mutex::new(None),
        }
    }

    /// One provider call: how it ended and how long it took.
    pub fn call(&self, channel: Channel, outcome: ProviderOutcome, seconds: f64) {
        self.attempts
            .get_or_create(&AttemptLabels {
                channel: channel.into(),
                outcome: outcome.into(),
            })
            .inc();
        self.provider_call
            .get_or_create(&ChannelLabels {
                channel: channel.into(),
            })
            .observe(seconds);
    }

    pub fn lease_lost(&self) {
        self.lease_lost.inc();
    }

    pub fn reclaim(&self) {
        self.reclaims.inc();
    }

    pub fn dead_lettered(&self, reason: DeadReason) {
        self.dead_lettered
            .get_or_create(&ReasonLabels {
                reason: reason.as_str().into(),
            })
            .inc();
    }

    /// Reads the store gauges again when they are older than [`STORE_GAUGES_TTL`].
    pub fn refresh(&self, conn: &Connection, now: f64) -> rusqlite::Result<()> {
        let mut read_at = self.read_at.lock().unwrap_or_else(|p| p.into_inner());
        if read_at.is_some_and(|at| at.elapsed() < STORE_GAUGES_TTL) {
            return Ok(());
        }
        let stats = crate::runtime::queries::stats(conn, now)?;
        for status in STATUSES {
            let count = stats.by_status.get(status).copied().unwrap_or(0);
            self.notifications
                .get_or_create(&StatusLabels {
                    status: status.into(),
                })
                .set(count);
        }
        self.dlq_entries.set(stats.dlq_entries);
        self.oldest_due
            .set(stats.oldest_due_at.map_or(0.0, |at| (now - at).max(0.0)));
        *read_at = Some(Instant::now());
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
