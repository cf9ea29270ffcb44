//! The HTTP backend: the runtime's API through reqwest's blocking client.
//!
//! GETs are retried on transport errors and 5xx; resolve and replay never are, since a
//! retried mutation could act twice. The API key is sent, never printed.

use super::{EventQuery, Result, Selection, Store, StoreError, Triaged};
use crate::api::{
    self, ActionRequest, ActionResponse, DlqPage, ErrorBody, ErrorKind, EventsResponse,
    NotificationDoc,
};
use crate::triage::{Observed, Triage};
use reqwest::StatusCode;
use reqwest::blocking::{Client, RequestBuilder, Response};
use serde::de::DeserializeOwned;
use std::time::Duration;

const GET_ATTEMPTS: u32 = 3;
const PAGE_SIZE: usize = 500;

/// How long a request may take before the answer is "no answer".
const TIMEOUT: Duration = Duration::from_secs(60);

pub struct HttpStore {
    /// The base URL without any user:password part.
    base: String,
    key: Option<String>,
    client: Client,
    /// Whether a UNS API answered at `base` (checked once, before the first call).
    identified: std::sync::OnceLock<std::result::Result<(), String>>,
    /// Said once to the operator: credentials found in the URL, and ignored.
    pub note: Option<String>,
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
        let note = (!url.username().is_empty() || url.password().is_some()).then(|| {
            "note: the user:password part of the API URL is ignored; the key comes from UNS_API_KEY"
                .to_string()
        });
        let _ = url.set_username("");
        let _ = url.set_password(None);
        let base = url.as_str().trim_end_matches('/').to_string();
        let client = Client::builder()
            .connect_timeout(Duration::from_secs(5))
            .timeout(TIMEOUT)
            .user_agent(concat!("unsctl/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|err| StoreError::Other(format!("cannot build the HTTP client: {err}")))?;
        Ok(Self {
            base,
            key,
            client,
            identified: std::sync::OnceLock::new(),
            note,
        })
    }

    /// Asks `/healthz` once whether a UNS API answers here, so a wrong URL is reported
    /// as that and not as "not found".
    fn identify(&self) -> Result<()> {
        let answer = self.identified.get_or_init(|| {
            let url = self.url(api::HEALTHZ);
            let mut last = String::new();
            for attempt in 0..GET_ATTEMPTS {
                if attempt > 0 {
                    std::thread::sleep(Duration::from_millis(200 * u64::from(attempt)));
                }
                match self.client.get(&url).send() {
                    Err(err) => last = unreachable(&url, &err).to_string(),
                    Ok(response) => {
                        let status = response.status();
                        let body: Option<serde_json::Value> = response
                            .text()
                            .ok()
                            .and_then(|t| serde_json::from_str(&t).ok());
                        let service = body.as_ref().and_then(|b| b["service"].as_str());
                        if service == Some(api::SERVICE) {
                            return Ok(());
                        }
                        last = format!(
                            "no UNS API at {}: GET {} answered {}{}",
                            self.base,
                            api::HEALTHZ,
                            status.as_u16(),
                            if body.is_some() {
                                " with another service's answer"
                            } else {
                                ", not a UNS health document"
                            }
                        );
                        if !status.is_server_error() {
                            break;
                        }
                    }
                }
            }
            Err(last)
        });
        answer.clone().map_err(StoreError::Unavailable)
    }

    /// `POST /api/v1/notifications` (not part of [`Store`]: operators triage, apps submit).
    pub fn submit(&self, request: &api::SubmitRequest) -> Result<api::SubmitResponse> {
        self.identify()?;
        let url = self.url(api::NOTIFICATIONS);
        match self.authorized(self.client.post(&url).json(request)).send() {
            Ok(response) => self.decode(&url, response),
            Err(err) => Err(unreachable(&url, &err)),
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
        self.identify()?;
        let url = self.url(path);
        let mut last_error = None;
        for attempt in 0..GET_ATTEMPTS {
            if attempt > 0 {
                std::thread::sleep(Duration::from_millis(200 * u64::from(attempt)));
            }
            match self.authorized(self.client.get(&url).query(query)).send() {
                Ok(response) if response.status().is_server_error() => {
                    last_error = Some(self.failure(&url, response));
                }
                Ok(response) => return self.decode(&url, response),
                Err(err) => last_error = Some(unreachable(&url, &err)),
            }
        }
        Err(last_error.unwrap_or_else(|| StoreError::Unavailable(format!("cannot reach {url}"))))
    }

    fn mutate(&self, request: RequestBuilder, url: &str) -> Result<ActionResponse> {
        self.identify()?;
        match self.authorized(request).send() {
            Ok(response) => self.decode(url, response),
            Err(err) => Err(unreachable(url, &err)),
        }
    }

    fn decode<T: DeserializeOwned>(&self, url: &str, response: Response) -> Result<T> {
        if !response.status().is_success() {
            return Err(self.failure(url, response));
        }
        let text = response.text().map_err(|err| {
            StoreError::Unavailable(format!("{url}: reading the answer failed: {err}"))
        })?;
        serde_json::from_str(&text)
            .map_err(|err| StoreError::Other(format!("malformed answer from {url}: {err}")))
    }

    fn failure(&self, url: &str, response: Response) -> StoreError {
        let status = response.status();
        let body: Option<ErrorBody> = response
            .text()
            .ok()
            .and_then(|text| serde_json::from_str(&text).ok());
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

/// A transport failure, explained by its cause rather than by the HTTP client's words.
fn unreachable(url: &str, err: &reqwest::Error) -> StoreError {
    let mut chain = err.to_string();
    let mut source = std::error::Error::source(err);
    while let Some(cause) = source {
        chain = format!("{chain}: {cause}");
        source = cause.source();
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
    } else if err.is_timeout() {
        format!("no answer from {url} within {} s", TIMEOUT.as_secs())
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
    fn describe(&self) -> String {
        self.base.clone()
    }

    fn operator(&self, _claimed: &str) -> Result<String> {
        let whoami: api::WhoAmI = self.get(api::WHOAMI, &[])?;
        Ok(whoami.operator)
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

    /// Pages of entries with their events, the next page fetched while this one is
    /// triaged.
    fn each_triaged(
        &self,
        selection: &Selection,
        visit: &mut dyn FnMut(Triaged) -> Result<()>,
    ) -> Result<()> {
        std::thread::scope(|scope| {
            let (pages, arriving) = std::sync::mpsc::sync_channel::<Result<DlqPage>>(1);
            scope.spawn(move || {
                let mut cursor: Option<String> = None;
                loop {
                    let page = self.dlq_page(selection, cursor.as_deref(), PAGE_SIZE, true);
                    let next = page.as_ref().ok().and_then(|p| p.next_cursor.clone());
                    if pages.send(page).is_err() {
                        return;
                    }
                    match next {
                        Some(next) => cursor = Some(next),
                        None => return,
                    }
                }
            });
            for page in arriving {
                for entry in page?.entries {
                    let events = entry.events.unwrap_or_default();
                    let mut unreadable = entry.row.unreadable.clone();
                    let mut triage = Triage::start(entry.row);
                    for event in &events {
                        unreadable.extend(
                            event
                                .unreadable
                                .iter()
                                .map(|u| format!("event {}: {u}", event.id)),
                        );
                        triage.read(Observed::from_event(event));
                    }
                    let (verdict, row) = triage.finish();
                    visit(Triaged {
                        row,
                        verdict,
                        unreadable,
                    })?;
                }
            }
            Ok(())
        })
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
}
