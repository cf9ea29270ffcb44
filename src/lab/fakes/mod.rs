//! Fault-injecting provider fakes: an SMTP server and Slack/PagerDuty-shaped HTTP
//! endpoints on loopback, each following a per-message script and keeping a ledger of
//! what it really accepted. The ledger is the ground truth triage is checked against.

mod http;
pub mod maillog;
mod smtp;

use crate::model::Channel;
use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// What a fake does with one message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Behavior {
    Accept,
    /// Take the message, wait, then answer that it was accepted.
    DelayAccept(Duration),
    /// Refuse with this code (SMTP reply code to the final dot, or HTTP status).
    Reject(u16),
    /// Take the message (it is in the ledger) and never answer.
    Hang,
    /// Take the message (it is in the ledger) and answer that it was accepted only once
    /// the driver calls [`Control::release`]: a provider slower than any lease, on cue.
    Hold,
    /// Take the message and answer that it was accepted only once another message with
    /// the same key has been taken: the first send of a lost lease, answered after the
    /// reclaim's copy went out, however fast or slow the machine is.
    AcceptOnceCopied,
    /// Close the connection without taking the message (SMTP: on DATA).
    Drop,
    /// SMTP: read the message data, then close before any reply and queue nothing, as a
    /// relay does when the connection is lost before the final dot.
    Lose,
}

/// One message a fake really accepted.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Accepted {
    pub channel: Channel,
    /// The script key it matched: the recipient for SMTP, the notification id for HTTP.
    pub key: String,
    pub notification_id: Option<String>,
    pub message_id: Option<String>,
    pub idempotency_key: Option<String>,
    /// The HTTP request body, or the email's headers and text.
    pub body: serde_json::Value,
    /// When it was taken, in unix seconds.
    pub at: f64,
}

/// Behaviours by key, consumed one per message, falling back to a default.
#[derive(Debug, Default)]
struct Script {
    queues: HashMap<String, VecDeque<Behavior>>,
    default: Option<Behavior>,
}

/// The token the fake PagerDuty REST API takes (`Authorization: Token token=...`).
pub const PAGERDUTY_TOKEN: &str = "fake-pagerduty-api-token";
/// The bot token the fake Slack Web API takes (`Authorization: Bearer ...`).
pub const SLACK_TOKEN: &str = "xoxb-fake-slack-bot-token";
/// The channel the fake Slack webhook posts to.
pub const SLACK_CHANNEL: &str = "C0UNSFAKE";
/// The bot the fake Slack webhook posts as.
pub const SLACK_BOT_ID: &str = "B0UNSFAKE";

/// State shared between the fakes and whoever drives them.
pub struct Control {
    script: Mutex<Script>,
    ledger: Mutex<Vec<Accepted>>,
    /// When the incidents open under a dedup key were resolved, in order.
    resolutions: Mutex<Vec<(String, f64)>>,
    /// Deliveries being handled now, and the most ever at once.
    in_flight: std::sync::atomic::AtomicUsize,
    peak: std::sync::atomic::AtomicUsize,
    released: tokio::sync::watch::Sender<bool>,
    /// How many messages the ledger holds, for those waiting on a copy.
    taken: tokio::sync::watch::Sender<usize>,
    maillog: Option<maillog::MailLog>,
    /// Whether the provider lookups list every record twice, as offset paging does when
    /// records arrive between pages.
    repeated_listings: std::sync::atomic::AtomicBool,
}

impl std::fmt::Debug for Control {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Control").finish_non_exhaustive()
    }
}

impl Default for Control {
    fn default() -> Self {
        Self {
            script: Mutex::default(),
            ledger: Mutex::default(),
            in_flight: Default::default(),
            peak: Default::default(),
            resolutions: Mutex::default(),
            released: tokio::sync::watch::Sender::new(false),
            taken: tokio::sync::watch::Sender::new(0),
            maillog: None,
            repeated_listings: Default::default(),
        }
    }
}

impl Control {
    /// Makes the PagerDuty and Slack lookups list every record twice (or stop).
    pub fn repeat_listings(&self, repeat: bool) {
        self.repeated_listings
            .store(repeat, std::sync::atomic::Ordering::SeqCst);
    }

    pub(super) fn listings_repeated(&self) -> bool {
        self.repeated_listings
            .load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Queues behaviours for messages matching `key` (an email recipient, or a
    /// notification id for Slack and PagerDuty).
    pub fn script(&self, key: &str, behaviors: &[Behavior]) {
        let mut script = self.script.lock().unwrap_or_else(|p| p.into_inner());
        script
            .queues
            .entry(key.to_ascii_lowercase())
            .or_default()
            .extend(behaviors.iter().copied());
    }

    /// Forgets every queued behaviour: the provider is fixed, and accepts by default.
    pub fn clear_scripts(&self) {
        let mut script = self.script.lock().unwrap_or_else(|p| p.into_inner());
        script.queues.clear();
        script.default = Some(Behavior::Accept);
    }

    /// What to do with messages no script entry matches (Accept unless set).
    pub fn set_default(&self, behavior: Behavior) {
        self.script
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .default = Some(behavior);
    }

    fn next(&self, key: &str) -> Behavior {
        self.next_of(&[key])
    }

    /// The next behaviour of the first key with one queued.
    fn next_of(&self, keys: &[&str]) -> Behavior {
        let mut script = self.script.lock().unwrap_or_else(|p| p.into_inner());
        let fallback = script.default.unwrap_or(Behavior::Accept);
        keys.iter()
            .find_map(|key| {
                script
                    .queues
                    .get_mut(&key.to_ascii_lowercase())
                    .and_then(VecDeque::pop_front)
            })
            .unwrap_or(fallback)
    }

    /// A line of the fake relay's log (when it keeps one).
    fn log(&self, daemon: &str, text: &str) {
        if let Some(log) = &self.maillog {
            log.line(daemon, text);
        }
    }

    /// A line of smtpd session `pid`.
    /// Writes the relay log's lines from now on in `layouts`.
    pub fn log_layouts(&self, layouts: maillog::Layouts) {
        if let Some(log) = &self.maillog {
            log.set_layouts(layouts);
        }
    }

    fn log_session(&self, pid: u64, text: &str) {
        if let Some(log) = &self.maillog {
            log.line_as("smtpd", pid, text);
        }
    }

    fn session_pid(&self) -> u64 {
        self.maillog
            .as_ref()
            .map_or(0, maillog::MailLog::session_pid)
    }

    fn queue_id(&self) -> String {
        self.maillog
            .as_ref()
            .map_or_else(|| "7E4000000".to_string(), maillog::MailLog::queue_id)
    }

    /// A line in the relay log now, as Postfix's anvil writes its statistics: a quiet
    /// relay's log still shows it was running up to this moment.
    pub fn mark_log(&self) {
        self.log(
            "anvil",
            "statistics: max connection rate 1/60s for (smtp:127.0.0.1)",
        );
    }

    fn record(&self, accepted: Accepted) {
        let mut ledger = self.ledger.lock().unwrap_or_else(|p| p.into_inner());
        ledger.push(accepted);
        self.taken.send_replace(ledger.len());
    }

    /// Waits as `behavior` says before a message taken under `key` is answered as
    /// accepted: not at all, a while, until released, or until a copy arrives.
    async fn before_answering(&self, behavior: Behavior, key: &str) {
        match behavior {
            Behavior::DelayAccept(delay) => tokio::time::sleep(delay).await,
            Behavior::Hold => self.held().await,
            Behavior::AcceptOnceCopied => self.copied(key).await,
            _ => {}
        }
    }

    /// Waits until the ledger holds two messages taken under `key`.
    async fn copied(&self, key: &str) {
        let mut taken = self.taken.subscribe();
        let _ = taken
            .wait_for(|_| {
                self.ledger
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .iter()
                    .filter(|a| a.key.eq_ignore_ascii_case(key))
                    .count()
                    >= 2
            })
            .await;
    }

    /// Lets every held message (and any held later) be answered.
    pub fn release(&self) {
        self.released.send_replace(true);
    }

    /// Waits until [`Control::release`] is called.
    async fn held(&self) {
        let mut released = self.released.subscribe();
        let _ = released.wait_for(|released| *released).await;
    }

    /// Resolves the incident open under `dedup_key` now, as a responder does: the next
    /// trigger with the key opens a new incident (a new page) instead of merging.
    pub fn resolve_incident(&self, dedup_key: &str) {
        self.resolutions
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push((dedup_key.to_string(), now()));
    }

    /// The incidents the PagerDuty fake's triggers opened, oldest first, as PagerDuty
    /// keeps them: a trigger merges into the incident open under its dedup key, and opens
    /// a new one when there is none (never one, or the last was resolved).
    pub fn incidents(&self) -> Vec<Incident> {
        let resolutions = self
            .resolutions
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        let mut incidents: Vec<Incident> = Vec::new();
        let ledger = self.ledger.lock().unwrap_or_else(|p| p.into_inner());
        for accepted in ledger.iter() {
            if accepted.channel != Channel::Pagerduty {
                continue;
            }
            let key = accepted.body["dedup_key"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            let open = incidents.iter().rposition(|i| {
                i.dedup_key == key
                    && !resolutions
                        .iter()
                        .any(|(k, at)| *k == key && *at >= i.created && *at <= accepted.at)
            });
            if open.is_none() {
                incidents.push(Incident {
                    number: incidents.len() + 1,
                    dedup_key: key,
                    title: accepted.body["payload"]["summary"]
                        .as_str()
                        .unwrap_or_default()
                        .to_string(),
                    created: accepted.at,
                    resolved: None,
                });
            }
        }
        for incident in &mut incidents {
            incident.resolved = resolutions
                .iter()
                .filter(|(k, at)| *k == incident.dedup_key && *at >= incident.created)
                .map(|(_, at)| *at)
                .reduce(f64::min);
        }
        incidents
    }

    /// One delivery begins: counted until the guard it returns is dropped.
    fn delivering(&self) -> InFlight<'_> {
        use std::sync::atomic::Ordering;
        let now = self.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        self.peak.fetch_max(now, Ordering::SeqCst);
        InFlight(self)
    }

    /// The most deliveries the fakes handled at once: how hard a replay pushed them.
    pub fn peak_concurrency(&self) -> usize {
        self.peak.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Everything accepted so far, in order.
    pub fn ledger(&self) -> Vec<Accepted> {
        self.ledger
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// How many copies of `notification_id` reached its recipient on `channel`: each
    /// email and Slack post the fake took, and for PagerDuty each incident (the fake, as
    /// PagerDuty does, folds a trigger into the incident open under its dedup key).
    pub fn copies(&self, channel: Channel, notification_id: &str) -> usize {
        self.all_copies()
            .get(&(notification_id.to_string(), channel))
            .copied()
            .unwrap_or(0)
    }

    /// [`Control::copies`] of every notification and channel at once, read in one pass.
    pub fn all_copies(&self) -> HashMap<(String, Channel), usize> {
        let mut copies: HashMap<(String, Channel), usize> = HashMap::new();
        for accepted in self
            .ledger
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .filter(|a| a.channel != Channel::Pagerduty)
        {
            if let Some(id) = &accepted.notification_id {
                *copies.entry((id.clone(), accepted.channel)).or_default() += 1;
            }
        }
        for incident in self.incidents() {
            *copies
                .entry((incident.dedup_key, Channel::Pagerduty))
                .or_default() += 1;
        }
        copies
    }

    /// How many copies of `notification_id` a channel accepted.
    pub fn accepted_count(&self, channel: Channel, notification_id: &str) -> usize {
        self.ledger
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .filter(|a| {
                a.channel == channel && a.notification_id.as_deref() == Some(notification_id)
            })
            .count()
    }
}

/// An incident the PagerDuty fake keeps.
#[derive(Debug, Clone, PartialEq)]
pub struct Incident {
    pub number: usize,
    pub dedup_key: String,
    pub title: String,
    pub created: f64,
    /// When a responder resolved it; open until then.
    pub resolved: Option<f64>,
}

fn now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// A delivery being handled, counted in [`Control`] while it lives.
struct InFlight<'c>(&'c Control);

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0
            .in_flight
            .fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
    }
}

/// The running fakes. Dropping this stops them.
pub struct Fakes {
    pub smtp: SocketAddr,
    pub http: SocketAddr,
    pub control: Arc<Control>,
    /// Where the fake relay writes its log.
    pub maillog: std::path::PathBuf,
    runtime: Option<tokio::runtime::Runtime>,
    _dir: tempfile::TempDir,
}

impl Fakes {
    /// Starts both fakes on 127.0.0.1 with ephemeral ports, on a runtime of their own.
    pub fn start() -> std::io::Result<Self> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("uns-fakes")
            .enable_all()
            .build()?;
        let dir = tempfile::tempdir()?;
        let maillog = dir.path().join("maillog");
        let control = Arc::new(Control {
            maillog: Some(maillog::MailLog::create(&maillog)?),
            ..Control::default()
        });
        let (smtp, http) = runtime.block_on(async {
            let smtp = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
            let http = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
            Ok::<_, std::io::Error>((smtp, http))
        })?;
        let (smtp_addr, http_addr) = (smtp.local_addr()?, http.local_addr()?);
        runtime.spawn(smtp::serve(smtp, control.clone()));
        runtime.spawn(http::serve(http, control.clone()));
        Ok(Self {
            smtp: smtp_addr,
            http: http_addr,
            control,
            maillog,
            runtime: Some(runtime),
            _dir: dir,
        })
    }

    /// The base URL of the fake PagerDuty REST API (`GET /incidents`).
    pub fn pagerduty_api_url(&self) -> String {
        format!("http://{}", self.http)
    }

    /// The base URL of the fake Slack Web API (`GET /api/conversations.history`).
    pub fn slack_api_url(&self) -> String {
        format!("http://{}/api", self.http)
    }

    /// The Slack webhook URL the fake answers on.
    pub fn slack_url(&self) -> String {
        format!("http://{}/services/T000/B000/fake", self.http)
    }

    /// The PagerDuty Events API v2 URL the fake answers on.
    pub fn pagerduty_url(&self) -> String {
        format!("http://{}/v2/enqueue", self.http)
    }
}

impl Drop for Fakes {
    fn drop(&mut self) {
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scripts_are_consumed_per_key_then_fall_back() {
        let control = Control::default();
        control.script("A@x", &[Behavior::Reject(554), Behavior::Hang]);
        control.set_default(Behavior::Drop);
        assert_eq!(control.next("a@X"), Behavior::Reject(554));
        assert_eq!(control.next("a@x"), Behavior::Hang);
        assert_eq!(control.next("a@x"), Behavior::Drop);
        assert_eq!(control.next("other"), Behavior::Drop);
    }
}
