//! The HTTP backend: the runtime's API through reqwest's blocking client.
//!
//! GETs are retried on transport errors and 5xx, within one deadline and never after a
//! server said nothing at all; resolve and replay never are, since a retried mutation
//! could act twice. The API key is sent, never printed.

use super::{EventQuery, Result, Selection, Store, StoreError, Triaged};
use crate::api::{
    self, ActionRequest, ActionResponse, DlqEntryView, DlqPage, DlqPageView, ErrorBody, ErrorKind,
    EventsResponse, NotificationDoc,
};
use crate::history::Observed;
use crate::history::Reader;
use crate::model::Notification;
use crate::triage;
use reqwest::StatusCode;
use reqwest::blocking::{Client, RequestBuilder, Response};
use serde::de::DeserializeOwned;
use std::time::{Duration, Instant};

const GET_ATTEMPTS: u32 = 3;
const PAGE_SIZE: usize = 500;

/// How long a request may take, its tries and its whole answer read, before the answer is
/// "no answer" (`--api-timeout`, or a context's `timeout`).
pub const DEFAULT_DEADLINE: Duration = Duration::from_secs(60);

/// How long a connection to the server may take to open.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// The largest answer read from a server; past it the answer is refused, so a server that
/// streams without end cannot exhaust memory.
const MAX_ANSWER_BYTES: u64 = 256 << 20;

/// The most of an error answer read: enough for any message of ours.
const MAX_ERROR_BYTES: u64 = 64 << 10;

pub struct HttpStore {
    /// The base URL without any user:password part.
    base: String,
    key: Option<String>,
    client: Client,
    /// Whether a UNS API answered at `base` (checked once, before the first call).
    identified: std::sync::OnceLock<std::result::Result<(), String>>,
    /// Said once to the operator: credentials found in the URL, and ignored; a key about
    /// to go to another machine in clear text.
    pub note: Option<String>,
    /// The config context it was opened for, named in every prompt and summary.
    pub context: Option<String>,
    /// How long one request may take in all, its answer read to the end.
    deadline: Duration,
}

/// A server's answer, read against its request's whole deadline: a server that trickles
/// its answer a byte at a time is cut off when the deadline passes, not waited on.
struct Answer {
    response: Response,
    until: Instant,
    deadline: Duration,
}

impl Answer {
    fn status(&self) -> reqwest::StatusCode {
        self.response.status()
    }

    fn headers(&self) -> &reqwest::header::HeaderMap {
        self.response.headers()
    }
}

impl std::io::Read for Answer {
    fn read(&mut self, buffer: &mut [u8]) -> std::io::Result<usize> {
        if Instant::now() >= self.until {
            return Err(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                format!(
                    "the answer was not complete within the {} s deadline",
                    self.deadline.as_secs_f64()
                ),
            ));
        }
        self.response.read(buffer)
    }
}

impl HttpStore {
    pub fn new(base_url: &str, key: Option<String>) -> Result<Self> {
        crate::runtime::adapters::init_tls();
        let trimmed = base_url.trim().trim_end_matches('/');
        let mut url = reqwest::Url::parse(trimmed).map_err(|err| {
            StoreError::Invalid(format!(
                "invalid API URL {:?}: {err}",
                api::without_userinfo(trimmed)
            ))
        })?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(StoreError::Invalid(format!(
                "invalid API URL {}: only http:// and https:// are spoken",
                api::without_userinfo(trimmed)
            )));
        }
        if url.query().is_some() || url.fragment().is_some() {
            return Err(StoreError::Invalid(format!(
                "invalid API URL {}: it has a query or fragment, where keys hide; the key comes from UNS_API_KEY",
                crate::redact::origin(trimmed)
            )));
        }
        let mut notes = Vec::new();
        if !url.username().is_empty() || url.password().is_some() {
            notes.push(
                "note: the user:password part of the API URL is ignored; the key comes from UNS_API_KEY"
                    .to_string(),
            );
        }
        // The rule the SMTP login follows.
        let on_this_machine = url
            .host_str()
            .is_some_and(crate::runtime::adapters::email::is_this_machine);
        if key.is_some() && url.scheme() == "http" && !on_this_machine {
            notes.push(format!(
                "warning: the API key goes to {} in clear text: anyone on the path can read it and act with it; use https://",
                crate::redact::origin(url.as_str())
            ));
        }
        let note = (!notes.is_empty()).then(|| notes.join("\n"));
        let _ = url.set_username("");
        let _ = url.set_password(None);
        let base = url.as_str().trim_end_matches('/').to_string();
        let origin = url.origin();
        let client = Client::builder()
            .connect_timeout(CONNECT_TIMEOUT)
            .timeout(DEFAULT_DEADLINE)
            .redirect(reqwest::redirect::Policy::custom(move |attempt| {
                // Another origin's entries would be shown as this store's: never followed.
                if attempt.url().origin() != origin {
                    let to = crate::redact::origin(attempt.url().as_str());
                    return attempt.error(format!(
                        "the API redirected to another origin ({to}), which is not followed; name that URL if it is the store you mean"
                    ));
                }
                if attempt.previous().len() >= 5 {
                    return attempt.error("the API redirected more than 5 times");
                }
                eprintln!(
                    "note: the API redirected to {} on the same origin",
                    attempt.url().path()
                );
                attempt.follow()
            }))
            .user_agent(concat!("unsctl/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|err| StoreError::Other(format!("cannot build the HTTP client: {err}")))?;
        Ok(Self {
            base,
            key,
            client,
            identified: std::sync::OnceLock::new(),
            note,
            context: None,
            deadline: DEFAULT_DEADLINE,
        })
    }

    /// The same store with another deadline for each request.
    pub fn with_deadline(mut self, deadline: Duration) -> Self {
        self.deadline = deadline;
        self
    }

    /// Sends `request` with the deadline; its answer is read against the same deadline.
    fn send(&self, request: RequestBuilder) -> reqwest::Result<Answer> {
        self.send_until(request, Instant::now() + self.deadline)
    }

    /// Sends `request` to be answered, the answer read, by `until`.
    fn send_until(&self, request: RequestBuilder, until: Instant) -> reqwest::Result<Answer> {
        request
            .timeout(until.saturating_duration_since(Instant::now()))
            .send()
            .map(|response| Answer {
                response,
                until,
                deadline: self.deadline,
            })
    }

    /// Sends the GET `request` makes, and again after a pause while the server fails
    /// (5xx) or cannot be reached; the last answer or failure. One deadline covers every
    /// try: a server that said nothing within it is not asked again, so a hung server
    /// costs the operator the deadline they set, not that many times over.
    fn send_tried(
        &self,
        request: impl Fn() -> RequestBuilder,
    ) -> std::result::Result<Answer, reqwest::Error> {
        let until = Instant::now() + self.deadline;
        let mut attempt = 0;
        loop {
            let answer = self.send_until(request(), until);
            attempt += 1;
            let again = match &answer {
                Ok(response) => response.status().is_server_error(),
                Err(err) => !err.is_timeout(),
            };
            let pause = Duration::from_millis(200 * u64::from(attempt));
            if !again || attempt == GET_ATTEMPTS || Instant::now() + pause >= until {
                return answer;
            }
            std::thread::sleep(pause);
        }
    }

    /// A transport failure of a request to `url`, in the operator's words.
    fn unreachable(&self, url: &str, err: &reqwest::Error) -> StoreError {
        unreachable(url, err, self.deadline)
    }

    /// Asks `/healthz` once whether a UNS API answers here, so a wrong URL is reported
    /// as that and not as "not found".
    fn identify(&self) -> Result<()> {
        let answer = self.identified.get_or_init(|| {
            let url = self.url(api::HEALTHZ);
            let response = self
                .send_tried(|| self.client.get(&url))
                .map_err(|err| self.unreachable(&url, &err).to_string())?;
            let status = response.status();
            let text = crate::bounded::text_at_most(response, MAX_ERROR_BYTES);
            let body: Option<serde_json::Value> = serde_json::from_str(&text).ok();
            let service = body.as_ref().and_then(|b| b["service"].as_str());
            if service == Some(api::SERVICE) {
                return Ok(());
            }
            Err(format!(
                "no UNS API at {}: GET {} answered {}{}",
                self.base,
                api::HEALTHZ,
                status.as_u16(),
                if body.is_some() {
                    " with another service's answer"
                } else {
                    ", not a UNS health document"
                }
            ))
        });
        answer.clone().map_err(StoreError::Unavailable)
    }

    /// `POST /api/v1/notifications` (not part of [`Store`]: operators triage, apps submit).
    pub fn submit(&self, request: &api::SubmitRequest) -> Result<api::SubmitResponse> {
        self.identify()?;
        let url = self.url(api::NOTIFICATIONS);
        match self.send(self.authorized(self.client.post(&url).json(request))) {
            Ok(response) => self.decode(&url, response),
            Err(err) => Err(self.unreachable(&url, &err)),
        }
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    fn authorized(&self, request: RequestBuilder) -> RequestBuilder {
        match &self.key {
            Some(key) => request.bearer_auth(key),
            None => request,
        }
    }

    fn get<T: DeserializeOwned>(&self, path: &str, query: &[(&str, String)]) -> Result<T> {
        let (url, response) = self.send_get(path, query)?;
        self.decode(&url, response)
    }

    /// A GET, tried again after a pause when the server fails or cannot be reached;
    /// any other answer is returned as it came.
    fn send_get(&self, path: &str, query: &[(&str, String)]) -> Result<(String, Answer)> {
        self.identify()?;
        let url = self.url(path);
        match self.send_tried(|| self.authorized(self.client.get(&url).query(query))) {
            Ok(response) if response.status().is_server_error() => {
                Err(self.failure(&url, response))
            }
            Ok(response) => Ok((url, response)),
            Err(err) => Err(self.unreachable(&url, &err)),
        }
    }

    /// Every page of `path` (a route in the DLQ page's shape) with `query`, the next page
    /// fetched on another thread while this one is read in place.
    fn each_page(
        &self,
        path: &str,
        query: &[(&'static str, String)],
        handle: &mut (dyn FnMut(DlqEntryView<'_>) -> Result<()> + Send),
    ) -> Result<()> {
        std::thread::scope(|scope| {
            let (pages, arriving) = std::sync::mpsc::sync_channel::<Result<Vec<u8>>>(1);
            let (spare, returned) = std::sync::mpsc::channel::<Vec<u8>>();
            let fetch = move || {
                let mut cursor: Option<String> = None;
                let mut onward = super::Onward::default();
                let mut empty_in_a_row = 0;
                loop {
                    let buffer = returned.try_recv().unwrap_or_default();
                    let (body, next) = match self.page_bytes(path, query, cursor.as_deref(), buffer)
                    {
                        Ok(page) => page,
                        Err(err) => {
                            let _ = pages.send(Err(err));
                            return;
                        }
                    };
                    if let Some(next) = &next
                        && let Err(err) = onward.cursor(&self.url(path), next)
                    {
                        let _ = pages.send(Err(err));
                        return;
                    }
                    // A UNS API never sends empty pages that point to others: a server that
                    // does would be paged forever. One is let pass, as a filter might leave.
                    empty_in_a_row = if next.is_some() && page_is_empty(&body) {
                        empty_in_a_row + 1
                    } else {
                        0
                    };
                    if empty_in_a_row > 1 {
                        let _ = pages.send(Err(StoreError::Repeats(format!(
                            "{} gave empty pages, each with a cursor to another: not a UNS API answer",
                            self.url(path)
                        ))));
                        return;
                    }
                    if pages.send(Ok(body)).is_err() {
                        return;
                    }
                    match next {
                        Some(next) => cursor = Some(next),
                        None => return,
                    }
                }
            };
            std::thread::Builder::new()
                .name("fetch".into())
                .spawn_scoped(scope, fetch)
                .map_err(|err| {
                    StoreError::Other(format!("cannot start the fetch thread: {err}"))
                })?;
            let url = self.url(path);
            // The ids come in order, page after page.
            let mut onward = super::Onward::default();
            for body in arriving {
                let body = body?;
                let page: DlqPageView<'_> =
                    serde_json::from_slice(&body).map_err(|err| malformed(&url, &err))?;
                onward.page(
                    &url,
                    page.entries.first().map(|e| e.row.id.as_str()),
                    page.entries.last().map(|e| e.row.id.as_str()),
                )?;
                for entry in page.entries {
                    handle(entry)?;
                }
                let _ = spare.send(body);
            }
            Ok(())
        })
    }

    /// A page with its events as the server sent it (read into `buffer`, reused from
    /// an earlier page), and the next page's cursor.
    fn page_bytes(
        &self,
        path: &str,
        asked: &[(&'static str, String)],
        cursor: Option<&str>,
        mut buffer: Vec<u8>,
    ) -> Result<(Vec<u8>, Option<String>)> {
        let mut query = vec![
            ("limit", PAGE_SIZE.to_string()),
            ("include", "events".to_string()),
        ];
        if let Some(cursor) = cursor {
            query.push(("cursor", cursor.to_string()));
        }
        query.extend(asked.iter().cloned());
        let (url, response) = self.send_get(path, &query)?;
        if !response.status().is_success() {
            return Err(self.failure(&url, response));
        }
        let header = response
            .headers()
            .get(api::NEXT_CURSOR)
            .and_then(|value| value.to_str().ok())
            .map(str::to_string);
        buffer.clear();
        read_capped(&url, response, &mut buffer)?;
        let body = buffer;
        let next = match header {
            Some(next) => Some(next),
            // A server that does not send the header: read the cursor from the page.
            None => {
                #[derive(serde::Deserialize)]
                struct Next {
                    next_cursor: Option<String>,
                }
                serde_json::from_slice::<Next>(&body)
                    .map_err(|err| malformed(&url, &err))?
                    .next_cursor
            }
        };
        Ok((body, next))
    }

    fn mutate<T: DeserializeOwned>(&self, request: RequestBuilder, url: &str) -> Result<T> {
        self.identify()?;
        match self.send(self.authorized(request)) {
            Ok(response) => self.decode(url, response),
            Err(err) => Err(self.unreachable(url, &err)),
        }
    }

    fn decode<T: DeserializeOwned>(&self, url: &str, response: Answer) -> Result<T> {
        if !response.status().is_success() {
            return Err(self.failure(url, response));
        }
        serde_json::from_slice(&body(url, response)?).map_err(|err| malformed(url, &err))
    }

    fn failure(&self, url: &str, response: Answer) -> StoreError {
        let status = response.status();
        let text = crate::bounded::text_at_most(response, MAX_ERROR_BYTES);
        let body: Option<ErrorBody> = serde_json::from_str(&text).ok();
        let Some(body) = body else {
            // Not one of our errors: whatever answers here is not a UNS API.
            return match status {
                StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN => {
                    StoreError::Auth(format!("{url} answered {}", status.as_u16()))
                }
                _ => StoreError::Unavailable(format!(
                    "no UNS API at {}: {url} answered {} without a UNS error body",
                    self.base,
                    status.as_u16()
                )),
            };
        };
        let message = body.error.clone();
        match (body.kind, status) {
            (_, StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN)
            | (Some(ErrorKind::Unauthorized), _) => {
                StoreError::Auth(format!("{url} answered {}: {message}", status.as_u16()))
            }
            (Some(ErrorKind::NotFound), _) => {
                StoreError::NotFound(message.trim_end_matches(" not found").to_string())
            }
            (Some(ErrorKind::Refused), _) => match body.refusal {
                Some(refusal) => StoreError::Refused(refusal),
                None => StoreError::Other(format!("{url}: refused: {message}")),
            },
            (Some(kind @ (ErrorKind::Conflict | ErrorKind::Stale)), _) => match body.conflict {
                Some(conflict) if kind == ErrorKind::Stale => StoreError::Stale(conflict),
                Some(conflict) => StoreError::Conflict(conflict),
                None => StoreError::Other(format!("{url}: conflict: {message}")),
            },
            (_, s) if s.is_client_error() => {
                StoreError::Invalid(format!("{url} answered {}: {message}", s.as_u16()))
            }
            (_, s) => StoreError::Unavailable(format!("{url} answered {}: {message}", s.as_u16())),
        }
    }
}

/// How many notification documents are asked for at once when a list of ids is read
/// through: each answer costs a round trip, which, to a server across a network, is most
/// of what reading a long list costs.
const IN_FLIGHT: usize = 8;

/// The documents read ahead at a time: a few per request in flight, so the slowest
/// answer of a batch holds the others up little, and few held at once.
const READ_AHEAD: usize = IN_FLIGHT * 8;

/// The notification documents of a list of ids, handed on in the list's order: the next
/// [`READ_AHEAD`] are asked for [`IN_FLIGHT`] at a time (GETs only, so a document asked
/// for and never used changed nothing).
struct Ahead<'s> {
    store: &'s HttpStore,
    ids: &'s [String],
    /// The place in the list of the next id expected.
    next: usize,
    /// What was asked for `ids[next..next + ready.len()]` (None: not asked yet).
    ready: std::collections::VecDeque<(&'s str, Option<Result<NotificationDoc>>)>,
}

impl<'s> Ahead<'s> {
    fn new(store: &'s HttpStore, ids: &'s [String]) -> Self {
        Self {
            store,
            ids,
            next: 0,
            ready: std::collections::VecDeque::new(),
        }
    }

    /// The document of `id`: the list's next, or a later one (those passed over are
    /// dropped); an id the rest of the list does not hold is asked for on its own.
    fn next(&mut self, id: &str) -> Result<NotificationDoc> {
        let Some(skipped) = self.ids[self.next..].iter().position(|i| i == id) else {
            return self.store.notification(id);
        };
        if skipped >= self.ready.len() {
            self.ready.clear();
        } else {
            self.ready.drain(..skipped);
        }
        self.next += skipped;
        if self.ready.is_empty() {
            let end = (self.next + READ_AHEAD).min(self.ids.len());
            self.ready = self.fetch(&self.ids[self.next..end]).into();
        }
        self.next += 1;
        match self.ready.pop_front() {
            Some((read, Some(doc))) if read == id => doc,
            _ => self.store.notification(id),
        }
    }

    /// The documents of `batch`, in its order. After an answer that failed (not a "not
    /// found"), no more are asked for: those left (None) are asked for on their own if
    /// they are wanted, since the failed one may be passed over.
    fn fetch(&self, batch: &'s [String]) -> Vec<(&'s str, Option<Result<NotificationDoc>>)> {
        let stops = |doc: &Result<NotificationDoc>| match doc {
            Ok(_) | Err(StoreError::NotFound(_)) => false,
            Err(_) => true,
        };
        let docs = at_once(batch, |id| self.store.notification(id), stops);
        batch.iter().map(String::as_str).zip(docs).collect()
    }
}

/// `ask` of each of `items`, [`IN_FLIGHT`] at a time, the answers in the items' order.
/// Items are taken in order; once an answer `stops` says so, no more are taken, so the
/// items never asked about (None) all come after every one that was.
fn at_once<T: Sync, R: Send + Sync>(
    items: &[T],
    ask: impl Fn(&T) -> R + Sync,
    stops: impl Fn(&R) -> bool + Sync,
) -> Vec<Option<R>> {
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    let slots: Vec<std::sync::OnceLock<R>> =
        items.iter().map(|_| std::sync::OnceLock::new()).collect();
    let (next, stopped) = (AtomicUsize::new(0), AtomicBool::new(false));
    let take = || {
        while !stopped.load(Ordering::SeqCst) {
            let at = next.fetch_add(1, Ordering::SeqCst);
            let Some(item) = items.get(at) else { return };
            let answer = ask(item);
            if stops(&answer) {
                stopped.store(true, Ordering::SeqCst);
            }
            let _ = slots[at].set(answer);
        }
    };
    std::thread::scope(|scope| {
        for _ in 1..IN_FLIGHT.min(items.len()) {
            scope.spawn(take);
        }
        take();
    });
    slots
        .into_iter()
        .map(std::sync::OnceLock::into_inner)
        .collect()
}

/// A transport failure, explained by its cause rather than by the HTTP client's words;
/// `deadline` is what a request was given.
fn unreachable(url: &str, err: &reqwest::Error, deadline: Duration) -> StoreError {
    let mut chain = err.to_string();
    let mut source = std::error::Error::source(err);
    while let Some(cause) = source {
        chain = format!("{chain}: {cause}");
        source = cause.source();
    }
    if err.is_redirect() {
        return StoreError::Unavailable(format!(
            "{}: {}",
            crate::redact::origin(url),
            last_cause(&chain)
        ));
    }
    let parsed = reqwest::Url::parse(url).ok();
    let place = parsed
        .as_ref()
        .map(|u| {
            format!(
                "{}:{}",
                u.host_str().unwrap_or("?"),
                u.port_or_known_default().unwrap_or(0)
            )
        })
        .unwrap_or_else(|| url.to_string());
    let tls = parsed.as_ref().is_some_and(|u| u.scheme() == "https");
    let lower = chain.to_ascii_lowercase();
    let message = if tls
        && (lower.contains("invalidcontenttype")
            || lower.contains("corrupt message")
            || lower.contains("wrong version"))
    {
        format!("{place} answered a TLS handshake in plain HTTP: use http:// instead of https://")
    } else if tls && lower.contains("certificate") {
        format!(
            "{place}: the server's TLS certificate is not trusted ({})",
            last_cause(&chain)
        )
    } else if err.is_timeout() && err.is_connect() {
        format!(
            "cannot connect to {place}: no answer to the connection within {} s",
            CONNECT_TIMEOUT.as_secs_f64().min(deadline.as_secs_f64())
        )
    } else if err.is_timeout() {
        format!(
            "no answer from {url} within the {} s deadline (--api-timeout), so it was not asked again",
            deadline.as_secs_f64()
        )
    } else if lower.contains("connection refused") {
        format!(
            "cannot connect to {place}: connection refused; is `unsctl runtime serve` running there?"
        )
    } else if lower.contains("dns error")
        || lower.contains("failed to lookup")
        || lower.contains("name or service not known")
    {
        format!("cannot resolve the host of {url}")
    } else if err.is_connect() {
        format!("cannot connect to {place}: {}", last_cause(&chain))
    } else {
        format!("the connection to {place} failed: {}", last_cause(&chain))
    };
    StoreError::Unavailable(message)
}

/// The innermost cause of an error chain: the part that says what happened.
fn last_cause(chain: &str) -> &str {
    chain.rsplit(": ").next().unwrap_or(chain)
}

fn segment(id: &str) -> String {
    id.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            other => format!("%{other:02X}"),
        })
        .collect()
}

impl Store for HttpStore {
    fn identity(&self) -> Result<Option<String>> {
        self.identify()?;
        let (_, answer) = self.send_get(api::HEALTHZ, &[])?;
        let health: serde_json::Value = self.decode(api::HEALTHZ, answer)?;
        Ok(health["store"].as_str().map(str::to_string))
    }

    fn ids_with_prefix(&self, prefix: &str, dlq_only: bool, limit: usize) -> Result<Vec<String>> {
        let mut query = vec![
            ("id_prefix", prefix.to_string()),
            ("limit", limit.to_string()),
        ];
        if dlq_only {
            query.push(("dlq", "true".to_string()));
        }
        let found: api::IdsResponse = self.get(api::RUNTIME_NOTIFICATION, &query)?;
        Ok(found.ids)
    }

    fn ids_with_prefixes(
        &self,
        prefixes: &[&str],
        dlq_only: bool,
        limit: usize,
    ) -> Vec<Result<Vec<String>>> {
        let answers = at_once(
            prefixes,
            |prefix| self.ids_with_prefix(prefix, dlq_only, limit),
            Result::is_err,
        );
        super::through_first_failure(answers.into_iter().map_while(|answer| answer))
    }

    fn pulse(&self, window: crate::pulse::Window) -> Result<crate::pulse::Pulse> {
        self.get(
            api::RUNTIME_PULSE,
            &[
                ("since", window.since.to_string()),
                ("until", window.until.to_string()),
                ("step", window.step.to_string()),
            ],
        )
    }

    fn health(
        &self,
        window_seconds: f64,
        until: Option<f64>,
    ) -> Result<crate::runtime::queries::Health> {
        let mut query = vec![("window", window_seconds.to_string())];
        if let Some(until) = until {
            query.push(("until", until.to_string()));
        }
        self.get(api::RUNTIME_STATS, &query)
    }

    fn describe(&self) -> String {
        crate::store::in_context(self.context.as_deref(), &self.base)
    }

    /// The person the server will record: the one claimed, with the name of the key it
    /// comes through (`oncall-jane (key ops-2)`), never the key's name alone.
    fn operator(&self, claimed: &str) -> Result<String> {
        let whoami: api::WhoAmI = self.get(api::WHOAMI, &[])?;
        Ok(crate::model::payload::person(
            Some(&whoami.operator),
            Some(claimed),
        ))
    }

    fn notification(&self, id: &str) -> Result<NotificationDoc> {
        self.get(
            &format!("{}/{}", api::RUNTIME_NOTIFICATION, segment(id)),
            &[],
        )
        .map_err(|err| match err {
            StoreError::NotFound(_) => StoreError::NotFound(format!("notification {id}")),
            other => other,
        })
    }

    fn documents<'s>(&'s self, ids: &'s [String]) -> Box<super::Documents<'s>> {
        let mut ahead = Ahead::new(self, ids);
        Box::new(move |id| ahead.next(id))
    }

    fn events(&self, query: &EventQuery) -> Result<EventsResponse> {
        self.get(api::RUNTIME_EVENTS, &query.query())
    }

    fn dlq_page(
        &self,
        selection: &Selection,
        cursor: Option<&str>,
        limit: usize,
        include_events: bool,
    ) -> Result<DlqPage> {
        let mut query = vec![("limit", limit.to_string())];
        if let Some(cursor) = cursor {
            query.push(("cursor", cursor.to_string()));
        }
        if include_events {
            query.push(("include", "events".to_string()));
        }
        query.extend(selection.query());
        self.get(api::DLQ, &query)
    }

    /// Pages of entries with their events, the next page fetched while this one is read
    /// in place and triaged.
    fn each_triaged(&self, selection: &Selection, visit: &mut super::Visit<'_>) -> Result<()> {
        let mut visit = super::keeping(selection, visit);
        let mut reader = Reader::default();
        self.each_page(api::DLQ, &selection.query(), &mut |entry| {
            triage_entry(entry, &mut reader, &mut visit)
        })
    }

    /// Pages of the reconcile route, each entry handed on with every event sent: the
    /// kinds `events` names are asked for (a server that does not know the question
    /// sends every event, which answers the same).
    fn each_attempted(
        &self,
        selection: &Selection,
        window: super::Window,
        events: super::Events<'_>,
        visit: &mut super::EntryVisit<'_>,
    ) -> Result<()> {
        // The route reads `since` and `until` as the window of attempts: a selection's own
        // times (when entries last changed) cannot be asked beside them.
        if selection.since.is_some() || selection.until.is_some() {
            return Err(StoreError::Other(
                "the reconcile route bounds attempts by the window alone, not by a selection's own times"
                    .to_string(),
            ));
        }
        let mut query = selection.query();
        if let Some(since) = window.since {
            query.push(("since", since.to_string()));
        }
        if let Some(until) = window.until {
            query.push(("until", until.to_string()));
        }
        if let super::Events::Kinds(kinds) = events {
            query.extend(kinds.iter().map(|kind| ("kind", kind.as_str().to_string())));
        }
        self.each_page(api::RUNTIME_RECONCILE, &query, &mut |entry| {
            let events: Vec<super::StoredEvent<'_>> = entry
                .events
                .unwrap_or_default()
                .into_iter()
                .map(|event| super::StoredEvent {
                    id: event.id,
                    at: event.at,
                    kind: event.kind,
                    payload: std::borrow::Cow::Borrowed(event.payload),
                    unreadable: event.unreadable,
                })
                .collect();
            visit(entry.row, &events)
        })
    }

    fn verify(
        &self,
        ids: &[String],
        sources: &crate::verify::Sources,
    ) -> Result<crate::verify::Asked> {
        // The records are read here, with this machine's logs and tokens; the server
        // supplies the history, several documents asked for at once.
        let mut read = self.documents(ids);
        crate::verify::ask_with(
            ids,
            |id| match read(id) {
                Ok(doc) => Ok(Some((doc.row, doc.events))),
                Err(StoreError::NotFound(_)) => Ok(None),
                Err(err) => Err(err),
            },
            sources,
            crate::clock::Clock::now(&crate::clock::SystemClock),
        )
    }

    fn record_verified(
        &self,
        asked: &crate::verify::Asked,
        operator: &str,
        why: crate::remediation::verified::Why<'_>,
    ) -> Vec<std::result::Result<crate::remediation::verified::Written, (String, StoreError)>> {
        // Each entry's answers are recorded on their own (a conflict on one leaves the
        // others as they are), so several are sent at once: each costs a round trip.
        let entries: Vec<(String, Vec<crate::remediation::verified::Verified>)> =
            crate::verify::findings(&asked.answers, &asked.questions)
                .into_iter()
                .collect();
        let record = |(id, findings): &(String, Vec<crate::remediation::verified::Verified>)| {
            let request = api::VerifiedRequest {
                findings: findings.clone(),
                reason: why.reason.map(str::to_string),
                ticket: why.ticket.map(str::to_string),
                operator: Some(operator.to_string()),
                via: why.via,
            };
            let url = self.url(&format!(
                "{}/{}/verified",
                api::RUNTIME_NOTIFICATION,
                segment(id)
            ));
            self.mutate(self.client.post(&url).json(&request), &url)
                .map_err(|err| (id.clone(), err))
        };
        at_once(&entries, record, |_| false)
            .into_iter()
            .zip(&entries)
            .map(|(written, (id, _))| {
                written.unwrap_or_else(|| Err((id.clone(), StoreError::Other("never sent".into()))))
            })
            .collect()
    }

    fn resolve(&self, id: &str, request: &ActionRequest) -> Result<ActionResponse> {
        let url = self.url(&format!("{}/{}", api::DLQ, segment(id)));
        self.mutate(self.client.delete(&url).json(request), &url)
    }

    fn replay(&self, id: &str, request: &ActionRequest) -> Result<ActionResponse> {
        let url = self.url(&format!(
            "{}/{}/replay",
            api::RUNTIME_NOTIFICATION,
            segment(id)
        ));
        self.mutate(self.client.post(&url).json(request), &url)
    }

    fn note(&self, request: &api::NoteRequest) -> Result<api::NoteRow> {
        let url = self.url(api::RUNTIME_NOTES);
        self.mutate(self.client.post(&url).json(request), &url)
    }

    fn notes(&self, since: Option<f64>, until: Option<f64>) -> Result<Vec<api::NoteRow>> {
        let mut query = Vec::new();
        query.extend(since.map(|at| ("since", at.to_string())));
        query.extend(until.map(|at| ("until", at.to_string())));
        match self.get::<api::NotesResponse>(api::RUNTIME_NOTES, &query) {
            Ok(notes) => Ok(notes.notes),
            // A server from before notes keeps none.
            Err(StoreError::NotFound(_)) => Ok(Vec::new()),
            Err(err) => Err(err),
        }
    }
}

/// Triages one entry of a page read in place; `reader` reads every entry in turn.
fn triage_entry(
    entry: DlqEntryView<'_>,
    reader: &mut Reader,
    visit: &mut super::Visit<'_>,
) -> Result<()> {
    let events = entry.events.unwrap_or_default();
    let mut unreadable = entry.row.unreadable.clone();
    // As the SQLite walk: only what the message was is kept (see Triaged).
    let message = crate::model::payload::Message::of(&entry.row.payload);
    let row = Notification {
        payload: serde_json::json!({"subject": message.subject, "recipient": message.recipient}),
        ..entry.row
    };
    for event in &events {
        unreadable.extend(
            event
                .unreadable
                .iter()
                .map(|u| format!("event {}: {u}", event.id)),
        );
    }
    let observed = events.iter().map(|event| {
        Observed::from_text(event.id, event.at, &event.kind, event.payload.get())
            .with_unreadable(event.unreadable.first().map(String::as_str))
    });
    let verdict = triage::judge(&row, reader.read_history(&row, observed));
    visit(Triaged {
        row,
        verdict,
        unreadable,
    })
}

/// Whether a DLQ page holds no entry (only a small page is looked at: a large one has some).
fn page_is_empty(body: &[u8]) -> bool {
    #[derive(serde::Deserialize)]
    struct Count {
        #[serde(default)]
        entries: Vec<serde::de::IgnoredAny>,
    }
    body.len() <= 64 << 10
        && serde_json::from_slice::<Count>(body).is_ok_and(|page| page.entries.is_empty())
}

fn body(url: &str, response: Answer) -> Result<Vec<u8>> {
    let mut buffer = Vec::new();
    read_capped(url, response, &mut buffer)?;
    Ok(buffer)
}

/// Reads the whole answer into `buffer`, refusing one past [`MAX_ANSWER_BYTES`].
fn read_capped(url: &str, mut response: Answer, buffer: &mut Vec<u8>) -> Result<()> {
    let whole = crate::bounded::read_to_end_at_most(&mut response, MAX_ANSWER_BYTES, buffer)
        .map_err(|err| {
            // The client's own timeout and ours end the same wait: say which rule it was.
            if Instant::now() + Duration::from_millis(200) >= response.until {
                StoreError::Unavailable(format!(
                    "{url}: no complete answer within the {} s deadline (--api-timeout)",
                    response.deadline.as_secs_f64()
                ))
            } else {
                StoreError::Unavailable(format!("{url}: reading the answer failed: {err}"))
            }
        })?;
    if !whole {
        return Err(StoreError::Other(format!(
            "{url} answered with more than {} MiB: not a UNS API answer",
            MAX_ANSWER_BYTES >> 20
        )));
    }
    Ok(())
}

fn malformed(url: &str, err: &serde_json::Error) -> StoreError {
    StoreError::Other(format!("malformed answer from {url}: {err}"))
}

#[cfg(test)]
mod tests {
    use super::HttpStore;

    fn warned(url: &str, key: Option<&str>) -> bool {
        let store = HttpStore::new(url, key.map(str::to_string)).expect("a valid URL");
        store
            .note
            .is_some_and(|note| note.contains("warning: the API key goes to"))
    }

    #[test]
    fn a_key_sent_in_clear_text_off_this_machine_is_warned_of() {
        for url in [
            "http://10.1.2.3:8080",
            "http://uns.internal",
            "http://[2001:db8::1]:8080/",
            "HTTP://Uns.Internal:80",
        ] {
            assert!(warned(url, Some("k-1")), "{url}");
        }
        let store = HttpStore::new("http://ops:pw@uns.internal:8080", Some("k-1".into()))
            .expect("a valid URL");
        let note = store.note.expect("both notes");
        assert!(
            note.contains("user:password part of the API URL is ignored"),
            "{note}"
        );
        assert!(
            note.contains("goes to http://uns.internal:8080 in clear text") && !note.contains("pw"),
            "{note}"
        );
    }

    #[test]
    fn no_warning_over_https_on_this_machine_or_without_a_key() {
        for url in [
            "https://uns.internal",
            "http://127.0.0.1:8080",
            "http://127.8.9.10:1",
            "http://localhost:8080",
            "http://[::1]:8080",
            "http://[::ffff:127.0.0.1]:8080",
        ] {
            assert!(!warned(url, Some("k-1")), "{url}");
        }
        assert!(!warned("http://10.1.2.3:8080", None));
    }
}
