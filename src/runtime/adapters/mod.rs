//! Channel adapters: one per provider, each speaking the provider's real protocol.
//!
//! An adapter turns one channel call into a [`DeliveryResult`] and never retries on its
//! own: whether to try again is the engine's decision, made from the recorded outcome.

pub mod email;
pub mod webhook;

use crate::model::Channel;
use crate::runtime::engine::{self, DeliveryResult};
use serde_json::Value;
use std::time::{Duration, Instant};

/// What an adapter needs to know about the call it is making.
#[derive(Debug, Clone)]
pub struct DeliveryRequest<'a> {
    pub notification_id: &'a str,
    pub cycle: i64,
    pub attempt: i64,
    pub channel: Channel,
    pub payload: &'a Value,
    /// When the lease runs out, on this process's monotonic clock.
    pub lease_deadline: Instant,
    /// No socket step gets less than this, so a call started near the end of a lease is
    /// not doomed to time out; the fence catches any overrun.
    pub min_io_timeout: Duration,
}

impl<'a> DeliveryRequest<'a> {
    /// The call for `channel` under `lease`, with `remaining` seconds left on it.
    pub fn for_lease(
        lease: &'a engine::Lease,
        channel: Channel,
        remaining: f64,
        min_io_timeout: Duration,
    ) -> Self {
        Self {
            notification_id: &lease.notification_id,
            cycle: lease.cycle,
            attempt: lease.attempt,
            channel,
            payload: &lease.payload,
            lease_deadline: Instant::now() + Duration::from_secs_f64(remaining.max(0.0)),
            min_io_timeout,
        }
    }

    /// The timeout for the next socket step: the time left on the lease, at least
    /// `min_io_timeout`.
    pub fn step_timeout(&self) -> Duration {
        self.lease_deadline
            .saturating_duration_since(Instant::now())
            .max(self.min_io_timeout)
    }

    /// `Idempotency-Key`: stable across attempts of one cycle, new after a replay.
    pub fn idempotency_key(&self) -> String {
        crate::model::idempotency_key(self.notification_id, self.channel, self.cycle)
    }

    /// The Message-ID an email for this attempt carries, so a relay log can be searched.
    pub fn message_id(&self) -> String {
        crate::model::MessageId::new(self.notification_id, self.cycle, self.attempt).to_string()
    }

    pub fn text(&self, key: &str) -> Option<&str> {
        self.payload.get(key).and_then(Value::as_str)
    }
}

/// Whether the worker still holds its lease; adapters ask before they commit to a send.
pub trait LeaseCheck {
    fn held(&self) -> bool;
}

impl<F: Fn() -> bool> LeaseCheck for F {
    fn held(&self) -> bool {
        self()
    }
}

/// One provider.
pub trait Adapter: Send + Sync {
    /// Makes the call.
    fn send(&self, request: &DeliveryRequest<'_>, lease: &dyn LeaseCheck) -> DeliveryResult;

    /// What this adapter holds that must never be stored or shown: webhook URLs, routing
    /// keys, passwords.
    fn secrets(&self) -> &crate::redact::Secrets;

    /// Makes the call, and hides the adapter's secrets in whatever the result says (the
    /// HTTP and SMTP libraries quote URLs and replies in their errors).
    fn deliver(&self, request: &DeliveryRequest<'_>, lease: &dyn LeaseCheck) -> DeliveryResult {
        self.send(request, lease).redacted(self.secrets())
    }

    /// What the call's CHANNEL_ATTEMPT_STARTED records about how it will send, so the
    /// provider's record can be matched to it even if no result is ever written (EMAIL:
    /// the envelope sender).
    fn started(&self) -> serde_json::Map<String, Value> {
        serde_json::Map::new()
    }
}

/// Installs ring as rustls's process-wide crypto provider; safe to call more than once.
pub fn init_tls() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}
