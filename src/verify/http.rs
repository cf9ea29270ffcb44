//! The HTTP side of the lookups: one blocking client, JSON answers, and the providers'
//! rate limits honoured a few times before giving up.

use serde::de::DeserializeOwned;
use std::time::Duration;

pub type Client = reqwest::blocking::Client;

/// A client for the lookups. Not to be built inside a tokio runtime.
pub fn client() -> Result<Client, String> {
    crate::runtime::adapters::init_tls();
    reqwest::blocking::Client::builder()
        .connect_timeout(Duration::from_secs(10))
        .timeout(Duration::from_secs(30))
        .user_agent(concat!("unsctl-verify/", env!("CARGO_PKG_VERSION")))
        .build()
        .map_err(|err| format!("cannot build an HTTP client: {err}"))
}

/// Tries after a 429 before giving up.
const RATE_LIMITED_TRIES: u32 = 3;
/// Longest wait a Retry-After may ask for.
const LONGEST_WAIT: Duration = Duration::from_secs(30);
/// The largest answer read: a page of Slack history or PagerDuty incidents is far less.
const MAX_ANSWER_BYTES: u64 = 32 << 20;

/// Sends `request` and reads a JSON answer; errors name `provider`. A token a provider
/// echoes back is hidden where answers leave the verifier ([`super::check`]).
pub fn json<T: DeserializeOwned>(
    request: reqwest::blocking::RequestBuilder,
    provider: &str,
) -> Result<T, String> {
    let mut tries = 0;
    loop {
        let attempt = request
            .try_clone()
            .ok_or_else(|| format!("{provider}: the request cannot be repeated"))?;
        let response = attempt
            .send()
            .map_err(|err| format!("{provider}: {}", chain(&err)))?;
        let status = response.status();
        if status == reqwest::StatusCode::TOO_MANY_REQUESTS && tries + 1 < RATE_LIMITED_TRIES {
            tries += 1;
            let wait = response
                .headers()
                .get("retry-after")
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.trim().parse::<u64>().ok())
                .map_or(Duration::from_secs(1), Duration::from_secs);
            std::thread::sleep(wait.min(LONGEST_WAIT));
            continue;
        }
        let mut body = Vec::new();
        let whole = crate::bounded::read_to_end_at_most(response, MAX_ANSWER_BYTES, &mut body)
            .map_err(|err| format!("{provider}: reading the answer: {err}"))?;
        if !whole {
            return Err(format!(
                "{provider} answered with more than {} MiB: not an answer to read",
                MAX_ANSWER_BYTES >> 20
            ));
        }
        if !status.is_success() {
            let text = String::from_utf8_lossy(&body);
            let snippet: String = text.chars().take(200).collect();
            return Err(format!(
                "{provider} answered HTTP {}: {}",
                status.as_u16(),
                crate::render::sanitize::clean(&snippet)
            ));
        }
        return serde_json::from_slice(&body)
            .map_err(|err| format!("{provider}: an answer that is not the API's: {err}"));
    }
}

/// The error with its causes (the URL it names holds no secret: tokens go in headers).
fn chain(err: &reqwest::Error) -> String {
    let mut text = err.to_string();
    let mut source = std::error::Error::source(err);
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}
