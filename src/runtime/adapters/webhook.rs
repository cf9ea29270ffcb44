//! SLACK (incoming webhook) and PAGERDUTY (Events API v2) over HTTP.
//!
//! Both send `Idempotency-Key`, so a receiver that cooperates can drop the duplicates a
//! lost lease causes. Nothing sent is REJECTED; sent but unanswered is UNKNOWN.

use super::{Adapter, DeliveryRequest, LeaseCheck};
use crate::model::Channel;
use crate::runtime::engine::DeliveryResult;
use serde_json::{Value, json};
use std::time::Duration;

/// The most of a provider's answer read: it carries a status and perhaps a key.
const MAX_ANSWER_BYTES: u64 = 64 << 10;

/// The message-metadata event type on every Slack message the adapter posts.
pub const SLACK_EVENT_TYPE: &str = "uns_notification";

/// Which HTTP provider an adapter talks to.
#[derive(Debug, Clone)]
pub enum Provider {
    /// A Slack incoming-webhook URL.
    Slack { webhook_url: String },
    /// The Events API v2 enqueue URL and the service's routing key.
    PagerDuty {
        events_url: String,
        routing_key: String,
    },
}

pub struct WebhookAdapter {
    provider: Provider,
    client: reqwest::blocking::Client,
    secrets: crate::redact::Secrets,
}

impl WebhookAdapter {
    /// Builds the adapter. Must not be called from inside a tokio runtime: the blocking
    /// client owns one of its own.
    pub fn new(provider: Provider) -> Result<Self, reqwest::Error> {
        super::init_tls();
        // No redirect is followed: a 307 would send the payload (and PagerDuty's routing
        // key) to a host nobody configured, and a 302 to a page that answers 200 would be
        // taken for the provider's acceptance.
        let client = reqwest::blocking::Client::builder()
            .connect_timeout(Duration::from_secs(10))
            .redirect(reqwest::redirect::Policy::none())
            .pool_max_idle_per_host(64)
            .user_agent(concat!("uns-runtime/", env!("CARGO_PKG_VERSION")))
            .build()?;
        let mut secrets = crate::redact::Secrets::new();
        match &provider {
            Provider::Slack { webhook_url } => {
                secrets.add_url(webhook_url);
            }
            Provider::PagerDuty {
                events_url,
                routing_key,
            } => {
                secrets.add_url(events_url).add(routing_key);
            }
        }
        Ok(Self {
            provider,
            client,
            secrets,
        })
    }

    pub fn channel(&self) -> Channel {
        match self.provider {
            Provider::Slack { .. } => Channel::Slack,
            Provider::PagerDuty { .. } => Channel::Pagerduty,
        }
    }

    fn body(&self, request: &DeliveryRequest<'_>) -> (String, Value) {
        let subject = request.text("subject").unwrap_or("UNS notification");
        let body = request.text("body").unwrap_or_default();
        let key = request.idempotency_key();
        match &self.provider {
            Provider::Slack { webhook_url } => (
                webhook_url.clone(),
                // The key is in the text so a person can search the channel for it, and in
                // the message metadata so `unsctl verify` can read it back from history.
                json!({
                    "text": format!("*{subject}*\n{body}\n_uns {key}_"),
                    "metadata": {
                        "event_type": SLACK_EVENT_TYPE,
                        "event_payload": {
                            "idempotency_key": key,
                            "notification_id": request.notification_id,
                            "cycle": request.cycle,
                            "attempt": request.attempt,
                        },
                    },
                }),
            ),
            Provider::PagerDuty {
                events_url,
                routing_key,
            } => (
                events_url.clone(),
                json!({
                    "routing_key": routing_key,
                    "event_action": "trigger",
                    "dedup_key": request.notification_id,
                    "payload": {
                        "summary": subject,
                        "source": "uns",
                        "severity": "error",
                        "custom_details": { "body": body, "idempotency_key": key },
                    },
                }),
            ),
        }
    }
}

impl Adapter for WebhookAdapter {
    fn secrets(&self) -> &crate::redact::Secrets {
        &self.secrets
    }

    fn send(&self, request: &DeliveryRequest<'_>, _lease: &dyn LeaseCheck) -> DeliveryResult {
        let (url, body) = self.body(request);
        let key = request.idempotency_key();
        let response = self
            .client
            .post(&url)
            .header("Idempotency-Key", &key)
            .timeout(request.step_timeout())
            .json(&body)
            .send();
        let result = match response {
            Ok(response) => {
                let status = response.status();
                let location = response
                    .headers()
                    .get(reqwest::header::LOCATION)
                    .and_then(|value| value.to_str().ok())
                    .map(|to| {
                        if to.starts_with('/') {
                            "another path of the same host".to_string()
                        } else {
                            crate::redact::origin(to)
                        }
                    });
                // A provider's answer is read up to a bound: it only ever carries a key.
                let text = crate::bounded::text_at_most(response, MAX_ANSWER_BYTES);
                if status.is_success() {
                    let message_id = match self.provider {
                        // The key the answer names, read strictly: an answer naming it
                        // twice says two things, and the key sent stands in.
                        Provider::PagerDuty { .. } => crate::json::strict(text.as_bytes())
                            .ok()
                            .and_then(|v| v["dedup_key"].as_str().map(str::to_string))
                            .or_else(|| Some(request.notification_id.to_string())),
                        Provider::Slack { .. } => Some(key.clone()),
                    };
                    DeliveryResult::accepted(message_id)
                } else if status.is_redirection() {
                    // The provider took nothing: the request went no further than this.
                    DeliveryResult::rejected(
                        format!(
                            "HTTP {}: redirected to {}, which is not followed: only the configured URL is sent the payload",
                            status.as_u16(),
                            location.as_deref().unwrap_or("nowhere named")
                        ),
                        false,
                    )
                } else {
                    let retryable = status.is_server_error()
                        || status == reqwest::StatusCode::TOO_MANY_REQUESTS
                        || status == reqwest::StatusCode::REQUEST_TIMEOUT;
                    let snippet: String = text.chars().take(200).collect();
                    DeliveryResult::rejected(
                        format!("HTTP {}: {snippet}", status.as_u16()),
                        retryable,
                    )
                }
                .with("http_status", status.as_u16())
            }
            // Nothing reached the provider: the connection was never established.
            Err(err) if err.is_connect() => {
                DeliveryResult::rejected(format!("connect failed: {}", error_chain(&err)), true)
                    .with("stage", "connect")
            }
            Err(err) if err.is_builder() => {
                DeliveryResult::rejected(format!("invalid request: {}", error_chain(&err)), false)
                    .with("stage", "prepare")
            }
            // The request went out; whatever happened next, the provider may have acted.
            Err(err) => DeliveryResult::unknown(format!(
                "no answer after the request was sent: {}",
                error_chain(&err)
            ))
            .with("stage", "response")
            .with("timeout", err.is_timeout()),
        };
        result
            .with("idempotency_key", key)
            .with("url", crate::redact::origin(&url))
    }
}

fn error_chain(err: &dyn std::error::Error) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}
