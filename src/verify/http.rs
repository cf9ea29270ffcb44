//! The HTTP side of the lookups: one blocking client that never follows a redirect, JSON
//! answers read within one deadline per lookup (every page, every retry, every byte of a
//! body that trickles in), and the providers' rate limits honoured only while the
//! deadline leaves room for the wait they ask.

use serde::de::DeserializeOwned;
use std::io::Read;
use std::time::{Duration, Instant};

pub type Client = reqwest::blocking::Client;

/// How long one lookup (all its pages and retries) may take unless the operator says
/// otherwise (`--provider-timeout`).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);

/// A client for the lookups. Not to be built inside a tokio runtime. It follows no
/// redirect: an answer from wherever a provider (or a proxy, or a wrong URL) sends it is
/// no answer of the provider's, and the token must not go there.
pub fn client() -> Result<Client, String> {
    crate::runtime::adapters::init_tls();
    reqwest::blocking::Client::builder()
        .connect_timeout(Duration::from_secs(10))
        .timeout(DEFAULT_TIMEOUT)
        .redirect(reqwest::redirect::Policy::none())
        .user_agent(concat!("unsctl-verify/", env!("CARGO_PKG_VERSION")))
        .build()
        .map_err(|err| format!("cannot build an HTTP client: {err}"))
}

/// When one lookup must be done by, over all its pages and retries.
#[derive(Debug, Clone, Copy)]
pub struct Deadline {
    at: Instant,
    of: Duration,
}

impl Deadline {
    /// `of` from now.
    pub fn after(of: Duration) -> Self {
        Self {
            at: Instant::now() + of,
            of,
        }
    }

    fn left(&self) -> Duration {
        self.at.saturating_duration_since(Instant::now())
    }

    fn passed(&self, provider: &str) -> String {
        format!(
            "{provider} did not answer in full within the lookup's {} s (--provider-timeout): not every page could be read",
            self.of.as_secs()
        )
    }
}

/// Tries after a 429 before giving up.
const RATE_LIMITED_TRIES: u32 = 3;
/// The largest answer read: a page of Slack history or PagerDuty incidents is far less.
const MAX_ANSWER_BYTES: u64 = 32 << 20;

/// Sends `request` and reads a JSON answer into `T`, all within `deadline`; errors name
/// `provider`. A token a provider echoes back is hidden where answers leave the verifier
/// ([`super::check`]).
pub fn json<T: DeserializeOwned>(
    request: reqwest::blocking::RequestBuilder,
    provider: &str,
    deadline: &Deadline,
) -> Result<T, String> {
    let mut tries = 0;
    loop {
        if deadline.left().is_zero() {
            return Err(deadline.passed(provider));
        }
        let attempt = request
            .try_clone()
            .ok_or_else(|| format!("{provider}: the request cannot be repeated"))?
            .timeout(deadline.left());
        let response = attempt.send().map_err(|err| {
            if err.is_timeout() {
                deadline.passed(provider)
            } else {
                format!("{provider}: {}", chain(&err))
            }
        })?;
        let status = response.status();
        if status == reqwest::StatusCode::TOO_MANY_REQUESTS && tries + 1 < RATE_LIMITED_TRIES {
            tries += 1;
            let (wait, header) = wait_asked(&response)
                .unwrap_or((Duration::from_secs(1), "rate limited, no wait named"));
            if wait >= deadline.left() {
                return Err(format!(
                    "{provider} asked to wait {} s before asking again ({header}), more than the {} s left of the lookup's {} s (--provider-timeout): not read",
                    wait.as_secs(),
                    deadline.left().as_secs(),
                    deadline.of.as_secs()
                ));
            }
            std::thread::sleep(wait);
            continue;
        }
        if status.is_redirection() {
            let to = response
                .headers()
                .get(reqwest::header::LOCATION)
                .and_then(|v| v.to_str().ok())
                .map_or_else(|| "nowhere named".to_string(), crate::redact::origin);
            return Err(format!(
                "{provider} answered HTTP {} sending the lookup to {}: a redirect is not followed, so this is not the provider's answer",
                status.as_u16(),
                crate::render::sanitize::clean(&to)
            ));
        }
        let body = read_within(response, provider, deadline)?;
        if !status.is_success() {
            let text = String::from_utf8_lossy(&body);
            let snippet: String = text.chars().take(200).collect();
            return Err(format!(
                "{provider} answered HTTP {}: {}",
                status.as_u16(),
                crate::render::sanitize::clean(&snippet)
            ));
        }
        return typed(&body, provider);
    }
}

/// How long a rate-limited answer asks to wait, in seconds, and the header that asks:
/// `Retry-After` (Slack's; its HTTP-date form is read as unknown), else PagerDuty's
/// `ratelimit-reset`, the seconds until its limit resets.
fn wait_asked(response: &reqwest::blocking::Response) -> Option<(Duration, &'static str)> {
    let seconds = |name: &str| {
        response
            .headers()
            .get(name)?
            .to_str()
            .ok()?
            .trim()
            .parse::<u64>()
            .ok()
            .map(Duration::from_secs)
    };
    [
        ("retry-after", "Retry-After"),
        ("ratelimit-reset", "ratelimit-reset"),
    ]
    .into_iter()
    .find_map(|(name, shown)| Some((seconds(name)?, shown)))
}

/// The body, read a piece at a time so that one trickling in never outlasts the deadline,
/// and never more than [`MAX_ANSWER_BYTES`].
fn read_within(
    mut response: reqwest::blocking::Response,
    provider: &str,
    deadline: &Deadline,
) -> Result<Vec<u8>, String> {
    let mut body = Vec::new();
    let mut piece = [0u8; 16 << 10];
    loop {
        if deadline.left().is_zero() {
            return Err(deadline.passed(provider));
        }
        let read = response.read(&mut piece).map_err(|err| {
            if timed_out(&err) {
                deadline.passed(provider)
            } else {
                format!("{provider}: reading the answer: {err}")
            }
        })?;
        if read == 0 {
            return Ok(body);
        }
        body.extend_from_slice(&piece[..read]);
        if body.len() as u64 > MAX_ANSWER_BYTES {
            return Err(format!(
                "{provider} answered with more than {} MiB: not an answer to read",
                MAX_ANSWER_BYTES >> 20
            ));
        }
    }
}

/// Whether reading a body stopped at its timeout (reqwest wraps its own error in the
/// reader's).
fn timed_out(err: &std::io::Error) -> bool {
    err.kind() == std::io::ErrorKind::TimedOut
        || err
            .get_ref()
            .and_then(|inner| inner.downcast_ref::<reqwest::Error>())
            .is_some_and(reqwest::Error::is_timeout)
}

/// `body` as `T`, only from a JSON object that names each key once: serde would also build
/// a struct from a list of its fields in order, which no provider's API answers with, and
/// an object naming a key twice says two things ([`crate::json::strict`]).
fn typed<T: DeserializeOwned>(body: &[u8], provider: &str) -> Result<T, String> {
    let not_an_answer = |shape: &str| {
        format!("{provider} answered with a body that is not its API's answer ({shape})")
    };
    let value = crate::json::strict(body).map_err(|err| {
        let shape = if err.is_data() {
            "a key given twice"
        } else {
            "not JSON"
        };
        format!("{}: {err}", not_an_answer(shape))
    })?;
    let shape = match &value {
        serde_json::Value::Object(map) if map.is_empty() => "an empty object",
        serde_json::Value::Object(map) if map.contains_key("error") => "an error object",
        serde_json::Value::Object(_) => "an object without the fields of a complete answer",
        serde_json::Value::Array(_) => return Err(not_an_answer("a list, not an object")),
        _ => return Err(not_an_answer("not an object")),
    };
    T::deserialize(value).map_err(|err| format!("{}: {err}", not_an_answer(shape)))
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
