//! Triage (DESIGN section 4): from one row and its events, which remediation is safe.
//!
//! Pure: values in, a verdict out, no IO. Its safety rule is that it never says RESOLVE
//! for a channel the provider did not accept, nor REPLAY for one the provider may have
//! acted on; evidence it cannot read makes the answer VERIFY, never silence.

use crate::model::{Channel, ChannelSet, Event, Kind, MessageId, Notification};
pub use fields::{Fields, Metadata};
use serde::{Deserialize, Serialize};
use std::borrow::Cow;
use std::collections::BTreeMap;

/// The remediation a DLQ entry calls for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum Branch {
    /// Branch 1: every channel was accepted. Never replay.
    Resolve,
    /// Branch 2: some channel's outcome is unknown. Check out of band first.
    Verify,
    /// Branch 3: nothing is uncertain and something was not delivered. Fix, then replay.
    Replay,
}

impl Branch {
    pub const ALL: [Branch; 3] = [Branch::Resolve, Branch::Verify, Branch::Replay];

    pub fn as_str(self) -> &'static str {
        match self {
            Branch::Resolve => "RESOLVE",
            Branch::Verify => "VERIFY",
            Branch::Replay => "REPLAY",
        }
    }
}

impl std::fmt::Display for Branch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for Branch {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        Branch::ALL
            .into_iter()
            .find(|b| b.as_str().eq_ignore_ascii_case(text.trim()))
            .ok_or_else(|| format!("unknown branch {text:?}: expected resolve, verify or replay"))
    }
}

/// What a plan does with an entry: the branch's action, or nothing until someone checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PlanAction {
    Resolve,
    Replay,
    /// Nothing is done until someone checks out of band and changes it.
    Verify,
}

impl PlanAction {
    pub fn of(branch: Branch) -> Self {
        match branch {
            Branch::Resolve => PlanAction::Resolve,
            Branch::Verify => PlanAction::Verify,
            Branch::Replay => PlanAction::Replay,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            PlanAction::Resolve => "resolve",
            PlanAction::Replay => "replay",
            PlanAction::Verify => "verify",
        }
    }
}

/// What is known of one channel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ChannelState {
    Delivered,
    Uncertain,
    Failed,
    NotAttempted,
}

impl ChannelState {
    pub fn as_str(self) -> &'static str {
        match self {
            ChannelState::Delivered => "DELIVERED",
            ChannelState::Uncertain => "UNCERTAIN",
            ChannelState::Failed => "FAILED",
            ChannelState::NotAttempted => "NOT_ATTEMPTED",
        }
    }
}

/// The outcome of one channel attempt (a start and its results under one lease).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum AttemptOutcome {
    Rejected,
    Unknown,
    Accepted,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ChannelVerdict {
    pub channel: Channel,
    pub state: ChannelState,
    /// `uns_events.id` values that prove the state.
    pub evidence: Vec<i64>,
    /// What to search for out of band (Message-IDs, idempotency keys).
    pub message_ids: Vec<String>,
    /// Why a channel is FAILED or UNCERTAIN, in the provider's or the adapter's words.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cause: Option<String>,
    /// FAILED, and the last rejection is permanent: replaying it unchanged is refused
    /// again (DESIGN §4).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub permanent: bool,
    /// The code of the reply that proves the state, as triage classes it: an SMTP code
    /// with its enhanced status code where the reply gave one (`550 5.1.1`), or an HTTP
    /// status (`HTTP 400`). What `--error-code` selects by and causes are grouped by.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub code: Option<String>,
}

impl ChannelVerdict {
    /// The most specific part of [`ChannelVerdict::code`]: the enhanced status code, else
    /// the reply code or status (`5.1.1`, `421`, `HTTP 400`).
    pub fn code_group(&self) -> Option<&str> {
        let code = self.code.as_deref()?;
        Some(match code.strip_prefix("HTTP ") {
            Some(_) => code,
            None => code.rsplit(' ').next().unwrap_or(code),
        })
    }

    /// Whether the reply's code is `asked` (`5.1.1`, `550`, `HTTP 400` or `400`, any case
    /// and spacing).
    pub fn has_code(&self, asked: &str) -> bool {
        let Some(code) = self.code.as_deref() else {
            return false;
        };
        let asked: String = asked
            .trim()
            .to_ascii_uppercase()
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ");
        let asked = asked
            .strip_prefix("HTTP ")
            .map_or(asked.clone(), |n| format!("HTTP {n}"));
        match code.strip_prefix("HTTP ") {
            Some(status) => asked == code || asked == status,
            None => code.split(' ').any(|part| part == asked),
        }
    }
}

/// The code of a reply as triage classes it: the SMTP code and the enhanced status code
/// the text carries right after it (`550 5.1.1`), or the HTTP status (`HTTP 400`).
pub fn reply_code(smtp_code: Option<i64>, http_status: Option<i64>, error: &str) -> Option<String> {
    match (smtp_code, http_status) {
        (Some(code), _) => {
            let enhanced = error.split_whitespace().find(|word| {
                let parts: Vec<&str> = word.split('.').collect();
                parts.len() == 3
                    && matches!(parts[0], "2" | "4" | "5")
                    && parts[1..].iter().all(|p| {
                        !p.is_empty() && p.len() <= 3 && p.bytes().all(|b| b.is_ascii_digit())
                    })
            });
            Some(match enhanced {
                Some(enhanced) => format!("{code} {enhanced}"),
                None => code.to_string(),
            })
        }
        (None, Some(status)) => Some(format!("HTTP {status}")),
        (None, None) => None,
    }
}

/// Whether a rejection is permanent (DESIGN §4): an SMTP 5xx reply, an HTTP 400, 401,
/// 403, 404 or 410, or, where no code says otherwise, the provider's or adapter's own
/// "invalid" answer. A 4xx SMTP reply, an HTTP 408, 429 or 5xx, a refused connection are
/// transient.
pub fn permanent_rejection(smtp_code: Option<i64>, http_status: Option<i64>, error: &str) -> bool {
    match (smtp_code, http_status) {
        (Some(code), _) => (500..600).contains(&code),
        (None, Some(status)) => matches!(status, 400 | 401 | 403 | 404 | 410),
        (None, None) => error.to_ascii_lowercase().contains("invalid"),
    }
}

/// One DLQ entry's verdict: the JSON contract of DESIGN section 6. Only triage makes
/// one; a verdict read back from a client or a plan is never trusted.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Verdict {
    pub id: String,
    pub branch: Branch,
    pub lease_lost: bool,
    pub status: String,
    pub cycle: i64,
    pub attempts: i64,
    pub error_message: Option<String>,
    pub last_event_id: Option<i64>,
    pub channels: Vec<ChannelVerdict>,
    pub next_step: String,
    /// The plan's action for this entry.
    pub action: PlanAction,
    /// Anything odd in the evidence, each naming its event or column.
    pub notes: Vec<String>,
    /// The row's `channels` column could not be read: no resolve or replay can pass the
    /// guardrails without `--force`, so no such step is suggested.
    #[serde(skip)]
    pub channels_unreadable: bool,
}

impl Verdict {
    /// Channels in `state`.
    pub fn in_state(&self, state: ChannelState) -> ChannelSet {
        self.channels
            .iter()
            .filter(|c| c.state == state)
            .map(|c| c.channel)
            .collect()
    }

    /// Channels a replay covers by default: every one not DELIVERED.
    pub fn undelivered(&self) -> ChannelSet {
        self.channels
            .iter()
            .filter(|c| c.state != ChannelState::Delivered)
            .map(|c| c.channel)
            .collect()
    }

    /// FAILED and NOT_ATTEMPTED channels: nobody received these, and nothing is in doubt.
    pub fn unsent(&self) -> ChannelSet {
        self.channels
            .iter()
            .filter(|c| matches!(c.state, ChannelState::Failed | ChannelState::NotAttempted))
            .map(|c| c.channel)
            .collect()
    }

    pub fn channel(&self, channel: Channel) -> Option<&ChannelVerdict> {
        self.channels.iter().find(|c| c.channel == channel)
    }

    /// Every evidence event id, in order.
    pub fn evidence(&self) -> Vec<i64> {
        let mut ids: Vec<i64> = self
            .channels
            .iter()
            .flat_map(|c| c.evidence.iter().copied())
            .collect();
        ids.sort_unstable();
        ids.dedup();
        ids
    }
}

/// What triage reads of one event: its id, kind and payload text, or which column
/// could not be read.
#[derive(Debug, Clone, Copy)]
pub struct Observed<'a> {
    pub id: i64,
    pub kind: &'a str,
    /// A column of the event that could not be read, with why.
    pub unreadable: Option<&'a str>,
    /// The stored payload, parsed only by triage itself: every reader comes here, so
    /// the same bytes always give the same verdict and the same notes.
    pub payload: &'a str,
}

impl<'a> Observed<'a> {
    /// From an event read in full (the notification document, the API).
    pub fn from_event(event: &'a Event) -> Self {
        Self::from_text(event.id, event.kind.as_str(), event.payload.get())
            .with_unreadable(event.unreadable.first().map(String::as_str))
    }

    pub fn from_text(id: i64, kind: &'a str, payload: &'a str) -> Self {
        Self {
            id,
            kind,
            unreadable: None,
            payload,
        }
    }

    /// The same, with a column the reader could not read.
    pub fn with_unreadable(mut self, column: Option<&'a str>) -> Self {
        self.unreadable = column;
        self
    }
}

/// One channel attempt: the pair of events sharing (cycle, attempt, channel, lease).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct AttemptKey {
    cycle: i64,
    /// -1 when the payload does not say.
    attempt: i64,
    channel: Channel,
    lease_token: String,
}

#[derive(Debug, Default)]
struct Attempt {
    start: Option<i64>,
    /// Where among `message_ids` the Message-ID the start implies goes (EMAIL only):
    /// it is made only for attempts that end up as proof.
    implied_message_id: Option<usize>,
    results: Vec<(i64, AttemptOutcome)>,
    message_ids: Vec<String>,
    /// The newest error text among the results.
    error: Option<String>,
    /// Whether the newest rejection among the results is permanent.
    permanent: bool,
    /// The newest rejection's reply code, as [`reply_code`] classes it.
    code: Option<String>,
}

impl Attempt {
    /// The best result wins; a start without a result means the worker died or hung.
    fn raw_outcome(&self) -> AttemptOutcome {
        self.results
            .iter()
            .map(|(_, outcome)| *outcome)
            .max()
            .unwrap_or(AttemptOutcome::Unknown)
    }

    fn event_ids(&self) -> impl Iterator<Item = i64> + '_ {
        self.start
            .into_iter()
            .chain(self.results.iter().map(|(id, _)| *id))
    }

    fn newest_event(&self) -> i64 {
        self.event_ids().max().unwrap_or(0)
    }

    /// What to search for out of band, the implied Message-ID in its place.
    fn message_ids(&self, row_id: &str, key: &AttemptKey) -> impl Iterator<Item = String> + '_ {
        let implied = self.implied_message_id.map(|at| {
            (
                at,
                MessageId::new(row_id, key.cycle, key.attempt).to_string(),
            )
        });
        let mut implied = implied.into_iter().peekable();
        let mut stored = self.message_ids.iter().cloned().enumerate().peekable();
        std::iter::from_fn(move || {
            let next_stored = stored.peek().map(|(at, _)| *at);
            match (implied.peek(), next_stored) {
                (Some((at, _)), Some(next)) if *at > next => stored.next().map(|(_, id)| id),
                (Some(_), _) => implied.next().map(|(_, id)| id),
                (None, _) => stored.next().map(|(_, id)| id),
            }
        })
    }
}

/// An operator's replay: which channels, and whether someone attested what they checked.
#[derive(Debug)]
struct Replay {
    event_id: i64,
    channels: ChannelSet,
    attested: bool,
}

/// A provider's own answer, recorded by `unsctl verify --record`.
#[derive(Debug)]
struct Verification {
    event_id: i64,
    channel: Channel,
    cycle: i64,
    attempts: Vec<i64>,
    delivered: bool,
}

/// Everything read from one history, before any conclusion is drawn.
#[derive(Debug, Default)]
struct Reading {
    notes: Vec<String>,
    unreadable: bool,
    channels_unreadable: bool,
    lease_lost: bool,
    last_event_id: Option<i64>,
    channels: ChannelSet,
    /// In the order first seen; few per entry, so a list beats a map.
    attempts: Vec<(AttemptKey, Attempt)>,
    replays: Vec<Replay>,
    verifications: Vec<Verification>,
}

impl Reading {
    fn unreadable(&mut self, note: String) {
        self.notes.push(note);
        self.unreadable = true;
    }

    /// Reads one event; false when its payload is not a JSON object triage can read.
    fn read(&mut self, row_id: &str, event: Observed<'_>) -> bool {
        self.last_event_id = Some(self.last_event_id.map_or(event.id, |id| id.max(event.id)));
        let mut fields = Fields::default();
        let parsed = fields::parse(event.payload, &mut fields);
        let readable = parsed.is_ok();
        let Some(kind) = Kind::from_stored(event.kind) else {
            self.unreadable(format!("event {}: unknown kind {:?}", event.id, event.kind));
            return readable;
        };
        // Text that is not JSON at all reads as an unreadable column, in the words the
        // store's readers use, so every backend notes it the same way.
        let column = match (event.unreadable, &parsed) {
            (Some(column), _) => Some(Cow::Borrowed(column)),
            (None, Err(_)) => crate::model::payload_problem(event.payload).map(Cow::Owned),
            (None, Ok(_)) => None,
        };
        if let Some(column) = column {
            self.unreadable(format!("event {} ({kind}): {column}", event.id));
            return readable;
        }
        match parsed {
            Ok(()) => {}
            // An unreadable verification is no verification: the doubt it would have
            // settled stays, so ignoring it can only keep the answer cautious.
            Err(why) if kind == Kind::Verified => {
                self.notes.push(format!(
                    "event {} (VERIFIED): {why}; counted as no verification",
                    event.id
                ));
                return readable;
            }
            Err(why) => {
                self.unreadable(format!("event {} ({kind}): {why}", event.id));
                return readable;
            }
        }
        match kind {
            Kind::LeaseLost => self.lease_lost = true,
            Kind::Replayed => self.read_replay(event.id, &fields),
            Kind::Verified => self.read_verification(event.id, &fields),
            Kind::ChannelAttemptStarted | Kind::ChannelAttemptResult => {
                self.read_attempt(row_id, event.id, kind, &fields)
            }
            _ => {}
        }
        readable
    }

    fn channel(&mut self, event_id: i64, kind: Kind, name: Option<&str>) -> Option<Channel> {
        let Some(name) = name else {
            self.unreadable(format!(
                "event {event_id} ({kind}): no channel in the payload"
            ));
            return None;
        };
        match name.parse::<Channel>() {
            Ok(channel) => {
                self.channels.insert(channel);
                Some(channel)
            }
            Err(err) => {
                self.unreadable(format!("event {event_id} ({kind}): {err}"));
                None
            }
        }
    }

    fn read_replay(&mut self, event_id: i64, fields: &Fields<'_>) {
        let names = fields.channels.as_deref().unwrap_or_default();
        match ChannelSet::parse(names) {
            Ok(channels) => {
                for channel in channels.iter() {
                    self.channels.insert(channel);
                }
                self.replays.push(Replay {
                    event_id,
                    channels,
                    attested: fields
                        .attestation
                        .as_deref()
                        .is_some_and(|a| !a.trim().is_empty()),
                });
            }
            Err(err) => self.unreadable(format!("event {event_id} (REPLAYED): {err}")),
        }
    }

    fn read_verification(&mut self, event_id: i64, fields: &Fields<'_>) {
        let channel = fields.channel.as_deref().map(str::parse::<Channel>);
        let delivered = match fields.outcome.as_deref() {
            Some("DELIVERED") => Some(true),
            Some("NOT_DELIVERED") => Some(false),
            _ => None,
        };
        match (channel, fields.cycle, &fields.attempts, delivered) {
            (Some(Ok(channel)), Some(cycle), Some(attempts), Some(delivered)) => {
                self.verifications.push(Verification {
                    event_id,
                    channel,
                    cycle,
                    attempts: attempts.clone(),
                    delivered,
                })
            }
            _ => self.notes.push(format!(
                "event {event_id} (VERIFIED): channel, cycle, attempts or outcome unreadable; counted as no verification"
            )),
        }
    }

    fn read_attempt(&mut self, row_id: &str, event_id: i64, kind: Kind, fields: &Fields<'_>) {
        let Some(channel) = self.channel(event_id, kind, fields.channel.as_deref()) else {
            return;
        };
        let Some(cycle) = fields.cycle else {
            self.unreadable(format!(
                "event {event_id} ({kind}): no cycle in the payload"
            ));
            return;
        };
        let number = fields.attempt.unwrap_or(-1);
        let lease_token = fields.lease_token.as_deref().unwrap_or_default();
        let found = self.attempts.iter().position(|(key, _)| {
            key.cycle == cycle
                && key.attempt == number
                && key.channel == channel
                && key.lease_token == lease_token
        });
        let at = found.unwrap_or_else(|| {
            let key = AttemptKey {
                cycle,
                attempt: number,
                channel,
                lease_token: lease_token.to_string(),
            };
            self.attempts.push((key, Attempt::default()));
            self.attempts.len() - 1
        });
        let attempt = &mut self.attempts[at].1;
        // What to search the provider for, in its own terms: PagerDuty's incident is
        // named by the dedup key, the bare id, never by the Idempotency-Key.
        match channel {
            Channel::Pagerduty => remember(&mut attempt.message_ids, row_id),
            Channel::Slack => remember(
                &mut attempt.message_ids,
                &crate::model::idempotency_key(row_id, channel, cycle),
            ),
            Channel::Email => {}
        }
        if kind == Kind::ChannelAttemptStarted {
            attempt.start.get_or_insert(event_id);
            let implied = |id: &String| MessageId::is(id, row_id, cycle, number);
            if channel == Channel::Email
                && number >= 0
                && attempt.implied_message_id.is_none()
                && !attempt.message_ids.iter().any(implied)
            {
                attempt.implied_message_id = Some(attempt.message_ids.len());
            }
            return;
        }
        let unsaid = Metadata::default();
        let metadata = fields.metadata.as_ref().unwrap_or(&unsaid);
        let outcome = match (fields.success, metadata.provider_outcome.as_deref()) {
            (Some(true), _) => AttemptOutcome::Accepted,
            (Some(false), Some("UNKNOWN")) => AttemptOutcome::Unknown,
            (Some(false), _) => AttemptOutcome::Rejected,
            (None, _) => AttemptOutcome::Unknown,
        };
        let message_id = fields.message_id.as_deref().filter(|m| !m.is_empty());
        let idempotency_key = metadata
            .idempotency_key
            .as_deref()
            .filter(|_| channel != Channel::Pagerduty);
        for id in [message_id, metadata.message_id.as_deref(), idempotency_key]
            .into_iter()
            .flatten()
        {
            let implied =
                attempt.implied_message_id.is_some() && MessageId::is(id, row_id, cycle, number);
            if !implied {
                remember(&mut attempt.message_ids, id);
            }
        }
        if let Some(error) = fields.error.as_deref().filter(|e| !e.is_empty()) {
            attempt.error = Some(cause_text(error));
        }
        if outcome == AttemptOutcome::Rejected {
            let error = fields.error.as_deref().unwrap_or_default();
            attempt.permanent =
                permanent_rejection(metadata.smtp_code, metadata.http_status, error);
            attempt.code = reply_code(metadata.smtp_code, metadata.http_status, error);
        }
        attempt.results.push((event_id, outcome));
        if outcome == AttemptOutcome::Accepted && message_id.is_none() {
            self.notes.push(format!(
                "event {event_id}: {channel} accepted without a message_id; confirm with the provider"
            ));
        }
        if fields.success.is_none() {
            self.notes.push(format!(
                "event {event_id}: {channel} result has no readable success flag; treated as unknown"
            ));
        }
    }

    /// The attempt's outcome once recorded verifications are applied: a NOT_DELIVERED
    /// answer settles an UNKNOWN outcome as REJECTED, and never overrides an acceptance.
    fn outcome(&self, key: &AttemptKey, attempt: &Attempt) -> (AttemptOutcome, Option<i64>) {
        let raw = attempt.raw_outcome();
        if raw != AttemptOutcome::Unknown {
            return (raw, None);
        }
        let settled_by = self
            .verifications
            .iter()
            .find(|v| {
                !v.delivered
                    && v.channel == key.channel
                    && v.cycle == key.cycle
                    && v.attempts.contains(&key.attempt)
            })
            .map(|v| v.event_id);
        match settled_by {
            Some(id) => (AttemptOutcome::Rejected, Some(id)),
            None => (raw, None),
        }
    }

    /// Whether an operator's later replay of `channel`, with an attestation, cleared the
    /// doubt of an attempt whose newest event is `after`. A forced replay without one
    /// clears nothing.
    fn cleared_by_replay(&self, channel: Channel, after: i64) -> bool {
        self.replays
            .iter()
            .any(|r| r.event_id > after && r.attested && r.channels.contains(channel))
    }

    fn channel_verdict(&self, row_id: &str, channel: Channel, current: i64) -> ChannelVerdict {
        let mut attempts: Vec<(&AttemptKey, &Attempt, AttemptOutcome, Option<i64>)> = self
            .attempts
            .iter()
            .filter(|(key, _)| key.channel == channel)
            .map(|(key, attempt)| {
                let (outcome, settled_by) = self.outcome(key, attempt);
                (key, attempt, outcome, settled_by)
            })
            .collect();
        attempts.sort_by(|a, b| a.0.cmp(b.0));
        let verified_delivered: Vec<i64> = self
            .verifications
            .iter()
            .filter(|v| v.delivered && v.channel == channel)
            .map(|v| v.event_id)
            .collect();
        let pick = |wanted: AttemptOutcome, keep: &dyn Fn(&AttemptKey, &Attempt) -> bool| {
            attempts
                .iter()
                .filter(|(key, attempt, outcome, _)| *outcome == wanted && keep(key, attempt))
                .collect::<Vec<_>>()
        };
        let accepted = pick(AttemptOutcome::Accepted, &|_, _| true);
        let uncertain = pick(AttemptOutcome::Unknown, &|key, attempt| {
            key.cycle == current || !self.cleared_by_replay(channel, attempt.newest_event())
        });
        let rejected = pick(AttemptOutcome::Rejected, &|key, _| key.cycle == current);
        let (state, proof, extra) = if !accepted.is_empty() || !verified_delivered.is_empty() {
            // The attempts a DELIVERED answer was about are part of its proof.
            let verified = attempts.iter().filter(|(key, _, outcome, _)| {
                *outcome != AttemptOutcome::Accepted
                    && self.verifications.iter().any(|v| {
                        v.delivered
                            && v.channel == channel
                            && v.cycle == key.cycle
                            && v.attempts.contains(&key.attempt)
                    })
            });
            let proof = accepted.into_iter().chain(verified).collect();
            (ChannelState::Delivered, proof, verified_delivered)
        } else if !uncertain.is_empty() {
            (ChannelState::Uncertain, uncertain, Vec::new())
        } else if !rejected.is_empty() {
            let settled = rejected.iter().filter_map(|a| a.3).collect();
            (ChannelState::Failed, rejected, settled)
        } else {
            (ChannelState::NotAttempted, Vec::new(), Vec::new())
        };
        let mut evidence: Vec<i64> = proof
            .iter()
            .flat_map(|(_, attempt, _, _)| attempt.event_ids())
            .chain(extra)
            .collect();
        evidence.sort_unstable();
        evidence.dedup();
        let mut message_ids = Vec::new();
        for (key, attempt, _, _) in &proof {
            for id in attempt.message_ids(row_id, key) {
                if !message_ids.contains(&id) {
                    message_ids.push(id);
                }
            }
        }
        let cause = match state {
            ChannelState::Uncertain | ChannelState::Failed => proof.last().map(|(_, attempt, _, settled)| {
                match (&attempt.error, settled, attempt.results.is_empty()) {
                    (_, Some(id), _) => format!("verified not delivered (event {id})"),
                    (Some(error), _, _) => error.clone(),
                    (None, _, true) => format!(
                        "the call started (event {}) and no result was recorded: the worker died or hung mid-call",
                        attempt.start.unwrap_or_default()
                    ),
                    (None, _, false) => "no detail recorded".to_string(),
                }
            }),
            _ => None,
        };
        // The newest rejection decides: a permanent one fixed and then refused for a
        // transient reason is transient now.
        let newest_rejection = proof
            .iter()
            .filter(|(_, _, _, settled)| settled.is_none())
            .max_by_key(|(_, attempt, _, _)| attempt.newest_event())
            .filter(|_| state == ChannelState::Failed);
        let permanent = newest_rejection.is_some_and(|(_, attempt, _, _)| attempt.permanent);
        let code = newest_rejection.and_then(|(_, attempt, _, _)| attempt.code.clone());
        ChannelVerdict {
            channel,
            state,
            evidence,
            message_ids,
            cause,
            permanent,
            code,
        }
    }
}

/// The longest cause a verdict carries: it is read in a table cell or a JSON field, and
/// the provider's whole text stays in its event.
const MAX_CAUSE_BYTES: usize = 4096;

/// `error` as a verdict's cause: whole when short, else cut with a note of what was left.
fn cause_text(error: &str) -> String {
    if error.len() <= MAX_CAUSE_BYTES {
        return error.to_string();
    }
    let mut end = MAX_CAUSE_BYTES;
    while !error.is_char_boundary(end) {
        end -= 1;
    }
    format!(
        "{}… (+{} bytes; the whole text is in the event)",
        &error[..end],
        error.len() - end
    )
}

/// The triage of one entry, fed its events one at a time in id order.
pub struct Triage {
    row: Notification,
    reading: Reading,
}

impl Triage {
    pub fn start(row: Notification) -> Self {
        let mut reading = Reading::default();
        for problem in &row.unreadable {
            reading.unreadable(format!("row {}: {problem}", row.id));
        }
        match ChannelSet::parse(&row.channels) {
            Ok(channels) => reading.channels = channels,
            Err(err) => reading.unreadable(format!("row {}: channels column: {err}", row.id)),
        }
        reading.channels_unreadable = row.channel_set().is_err();
        Self { row, reading }
    }

    /// Reads the next event; false when its payload is not a JSON object triage can
    /// read (the caller may want to say why in its own words).
    pub fn read(&mut self, event: Observed<'_>) -> bool {
        self.reading.read(&self.row.id, event)
    }

    /// The row this triage is about.
    pub fn row(&self) -> &Notification {
        &self.row
    }

    /// The verdict, and the row back.
    pub fn finish(self) -> (Verdict, Notification) {
        let Triage { row, mut reading } = self;
        let channels: Vec<ChannelVerdict> = reading
            .channels
            .iter()
            .map(|channel| reading.channel_verdict(&row.id, channel, row.cycle))
            .collect();
        let mut notes = std::mem::take(&mut reading.notes);
        let branch = if reading.unreadable {
            Branch::Verify
        } else if channels.is_empty() {
            notes.push("no channels recorded for this notification".into());
            Branch::Verify
        } else if channels.iter().all(|c| c.state == ChannelState::Delivered) {
            Branch::Resolve
        } else if channels.iter().any(|c| c.state == ChannelState::Uncertain) {
            Branch::Verify
        } else {
            Branch::Replay
        };
        let mut verdict = Verdict {
            id: row.id.clone(),
            branch,
            lease_lost: reading.lease_lost,
            status: row.status.to_string(),
            cycle: row.cycle,
            attempts: row.attempts,
            error_message: row.error_message.clone(),
            last_event_id: reading.last_event_id,
            channels,
            next_step: String::new(),
            action: PlanAction::of(branch),
            notes,
            channels_unreadable: reading.channels_unreadable,
        };
        verdict.next_step = next_step(&verdict);
        (verdict, row)
    }
}

/// Classifies one notification from its row and full history.
pub fn triage<'a>(row: &Notification, events: impl IntoIterator<Item = Observed<'a>>) -> Verdict {
    let mut triage = Triage::start(row.clone());
    for event in events {
        triage.read(event);
    }
    triage.finish().0
}

/// Triage over events read in full.
pub fn triage_events(row: &Notification, events: &[Event]) -> Verdict {
    triage(row, events.iter().map(Observed::from_event))
}

fn remember(list: &mut Vec<String>, item: &str) {
    if !list.iter().any(|existing| existing == item) {
        list.push(item.to_string());
    }
}

/// The command that carries the remediation out (for VERIFY: the one that asks the
/// providers' own records, since nothing may act before someone has checked; when no
/// channel is UNCERTAIN and the doubt comes from evidence that cannot be read, the one
/// that shows it).
fn next_step(verdict: &Verdict) -> String {
    let id = &verdict.id;
    if verdict.notes.iter().any(|n| n.ends_with(": id: NULL")) {
        return "none: the row has no id, so no command can address it; repair the store".into();
    }
    match verdict.branch {
        Branch::Resolve => format!("unsctl dlq resolve {id} --confirm"),
        // Nothing a provider could answer: the doubt is in the store itself.
        Branch::Verify if verdict.in_state(ChannelState::Uncertain).is_empty() => {
            format!("unsctl inspect {id}")
        }
        Branch::Verify => format!("unsctl verify {id}"),
        Branch::Replay => {
            let channels = verdict.undelivered().joined(",");
            let failed: Vec<&ChannelVerdict> = verdict
                .channels
                .iter()
                .filter(|c| c.state == ChannelState::Failed)
                .collect();
            // A channel refused permanently is refused again unless its cause is fixed, and
            // the replay must say what was: the guardrail asks for the reason.
            if !failed.iter().any(|c| c.permanent) {
                return format!("unsctl replay {id} --channels {channels} --confirm");
            }
            let causes: Vec<String> = failed
                .iter()
                .filter(|c| c.permanent)
                .map(|c| {
                    format!(
                        "{} {}",
                        c.channel,
                        quote(&short_cause(c.cause.as_deref().unwrap_or("refused")))
                    )
                })
                .collect();
            format!(
                "fix the cause first ({}: refused permanently, so a replay unchanged is refused again), then: unsctl replay {id} --channels {channels} --reason 'what was fixed' --confirm",
                causes.join("; ")
            )
        }
    }
}

/// Provider text inside one of triage's sentences: in double quotes, its own quotes and
/// backslashes escaped, so it never reads as a step of unsctl's (DESIGN §5).
fn quote(text: &str) -> String {
    let mut quoted = String::with_capacity(text.len() + 2);
    quoted.push('"');
    for c in text.chars() {
        if matches!(c, '"' | '\\') {
            quoted.push('\\');
        }
        quoted.push(c);
    }
    quoted.push('"');
    quoted
}

/// A cause cut to a clause: the first line, at most 80 characters.
pub fn short_cause(cause: &str) -> String {
    let line = cause.lines().next().unwrap_or_default().trim();
    match line.char_indices().nth(80) {
        Some((end, _)) => format!("{}…", &line[..end]),
        None => line.to_string(),
    }
}

/// The command in a next step: all of it, or what follows "then: ".
pub fn step_command(step: &str) -> &str {
    step.rsplit_once("then: ")
        .map_or(step, |(_, command)| command)
}

/// What a VERIFY entry leads to once someone has checked out of band: each a label and
/// the command, only those that can succeed. "If it arrived" only ever resolves: where a
/// channel is still owed, or the doubt is in the store rather than at a provider, an
/// operator's word that something arrived must not be the ground for sending anything.
pub fn after_verification(verdict: &Verdict) -> Vec<(&'static str, String)> {
    let id = &verdict.id;
    let uncertain = verdict.in_state(ChannelState::Uncertain);
    if verdict.channels_unreadable || uncertain.is_empty() {
        return Vec::new();
    }
    let mut steps = Vec::new();
    if verdict.unsent().is_empty() {
        steps.push((
            "if it arrived",
            format!("unsctl dlq resolve {id} --verified-delivered --confirm"),
        ));
    }
    steps.push((
        "if it did not",
        format!(
            "unsctl replay {id} --channels {} --verified-not-delivered --confirm",
            verdict.undelivered().joined(",")
        ),
    ));
    steps
}

/// Counts per branch, every branch present.
pub fn summary<'a>(verdicts: impl IntoIterator<Item = &'a Verdict>) -> BTreeMap<Branch, usize> {
    let mut counts = empty_summary();
    for verdict in verdicts {
        *counts.entry(verdict.branch).or_default() += 1;
    }
    counts
}

/// Every branch at zero.
pub fn empty_summary() -> BTreeMap<Branch, usize> {
    Branch::ALL.iter().map(|b| (*b, 0)).collect()
}

mod fields;
#[cfg(test)]
mod tests;
