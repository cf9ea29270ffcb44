//! One notification's history, read once (DESIGN §2–§4): its events, in id order, reduced
//! to the channel attempts (each with its window, outcome, provider identifiers and
//! reply), the VERIFIED records that may settle them, the operator's replays and
//! resolution, and what could not be read.
//!
//! Triage, verify and reconcile each ask their own question of this one reading, so a
//! payload is read by one set of rules ([`fields`]), an attempt has one window rule and
//! one outcome, and the three can never disagree about what the store says happened.
//! The reading is streamed: a caller feeds events one at a time and keeps nothing else,
//! which is what lets triage walk a million events without holding them.

mod fields;
mod questions;

pub use questions::{InDoubt, Question, questions};

use crate::model::{Channel, ChannelSet, Event, Kind, MessageId, Notification, Status, Stored};
use fields::{Fields, Metadata};
use std::borrow::Cow;

/// What a reader takes of one event: its id, time, kind and payload text, or which
/// column could not be read.
#[derive(Debug, Clone, Copy)]
pub struct Observed<'a> {
    pub id: i64,
    /// When it was committed.
    pub at: f64,
    pub kind: &'a str,
    /// A column of the event that could not be read, with why.
    pub unreadable: Option<&'a str>,
    /// The stored payload, parsed only here: every reader comes here, so the same bytes
    /// always give the same history and the same notes.
    pub payload: &'a str,
}

impl<'a> Observed<'a> {
    /// From an event read in full (the notification document, the API).
    pub fn from_event(event: &'a Event) -> Self {
        Self::from_text(event.id, event.at, event.kind.as_str(), event.payload.get())
            .with_unreadable(event.unreadable.first().map(String::as_str))
    }

    pub fn from_text(id: i64, at: f64, kind: &'a str, payload: &'a str) -> Self {
        Self {
            id,
            at,
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

use crate::model::ProviderOutcome;

/// One channel attempt: the events sharing (cycle, attempt, channel, lease token).
#[derive(Debug, Clone, PartialEq)]
pub struct Attempt {
    pub channel: Channel,
    pub cycle: i64,
    /// -1 when the payload does not say.
    pub attempt: i64,
    pub lease_token: String,
    /// CHANNEL_ATTEMPT_STARTED's event id.
    pub start: Option<i64>,
    /// Each result's event id, and what it recorded.
    pub results: Vec<(i64, ProviderOutcome)>,
    /// When the first of its events was committed.
    pub started: f64,
    /// When the call could last have acted: its lease's end, or a later event.
    pub ended: f64,
    /// EMAIL: the envelope sender the adapter recorded on the start.
    pub sender: Option<String>,
    /// EMAIL: the relay that answered, by its greeting's name, where a result recorded it.
    pub relay: Option<String>,
    /// The provider's reply or the adapter's error: the newest result's that has one.
    pub error: Option<String>,
    /// Whether the newest rejection among the results is permanent (DESIGN §4).
    pub permanent: bool,
    /// The newest rejection's reply code, as [`reply_code`] classes it.
    pub code: Option<String>,
    /// What to search the provider for, in the provider's own terms.
    message_ids: Vec<String>,
    /// Where among `message_ids` the Message-ID the start implies goes (EMAIL only): it
    /// is made only for attempts that are asked for theirs.
    implied_message_id: Option<usize>,
}

impl Attempt {
    /// The best result wins; a start without a result means the worker died or hung.
    pub fn recorded(&self) -> ProviderOutcome {
        self.results
            .iter()
            .map(|(_, outcome)| *outcome)
            .max()
            .unwrap_or(ProviderOutcome::Unknown)
    }

    /// Its start and result events, in that order.
    pub fn event_ids(&self) -> impl Iterator<Item = i64> + '_ {
        self.start
            .into_iter()
            .chain(self.results.iter().map(|(id, _)| *id))
    }

    pub fn newest_event(&self) -> i64 {
        self.event_ids().max().unwrap_or(0)
    }

    /// Whether a VERIFIED record names this attempt.
    pub fn covered_by(&self, verification: &Verification) -> bool {
        verification.channel == self.channel
            && verification.cycle == self.cycle
            && verification.attempts.contains(&self.attempt)
    }

    /// What to search for out of band, the implied Message-ID in its place.
    pub fn message_ids<'s>(&'s self, row_id: &'s str) -> impl Iterator<Item = String> + 's {
        let implied = self.implied_message_id.map(|at| {
            (
                at,
                MessageId::new(row_id, self.cycle, self.attempt).to_string(),
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

    fn new(channel: Channel, cycle: i64, attempt: i64, lease_token: &str, at: f64) -> Self {
        Self {
            channel,
            cycle,
            attempt,
            lease_token: lease_token.to_string(),
            start: None,
            results: Vec::new(),
            started: at,
            ended: at,
            sender: None,
            relay: None,
            error: None,
            permanent: false,
            code: None,
            message_ids: Vec::new(),
            implied_message_id: None,
        }
    }
}

/// A VERIFIED event: an operator recorded a provider's own answer about some attempts.
#[derive(Debug, Clone, PartialEq)]
pub struct Verification {
    pub event_id: i64,
    pub at: f64,
    pub channel: Channel,
    pub cycle: i64,
    pub attempts: Vec<i64>,
    pub delivered: bool,
    /// Whose records answered.
    pub source: String,
}

/// An operator's replay: which channels, and whether they attested what they checked.
#[derive(Debug, Clone, PartialEq)]
pub struct Replay {
    pub event_id: i64,
    pub channels: ChannelSet,
    pub attested: bool,
}

/// Who resolved the entry, and why.
#[derive(Debug, Clone, PartialEq)]
pub struct Resolution {
    pub event_id: i64,
    pub at: f64,
    /// The person who acted ([`crate::model::payload::person`]).
    pub operator: String,
    pub reason: Option<String>,
    /// The channels given up on purpose.
    pub given_up: ChannelSet,
}

/// One channel's attempts and the VERIFIED records about it, each in event order.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ChannelHistory {
    pub attempts: Vec<Attempt>,
    pub verifications: Vec<Verification>,
}

/// Each channel's part of a history, in channel order; held inline, as a history is read
/// per notification, a million times in a large triage. A reader that starts again keeps
/// each part's room, so a long walk allocates its attempts' lists once.
#[derive(Debug, Clone, Default)]
pub struct Parts {
    parts: [ChannelHistory; 3],
    present: [bool; 3],
}

impl Parts {
    fn at(channel: Channel) -> usize {
        match channel {
            Channel::Email => 0,
            Channel::Slack => 1,
            Channel::Pagerduty => 2,
        }
    }

    pub fn get(&self, channel: &Channel) -> Option<&ChannelHistory> {
        let at = Self::at(*channel);
        self.present[at].then(|| &self.parts[at])
    }

    pub fn get_mut(&mut self, channel: &Channel) -> Option<&mut ChannelHistory> {
        let at = Self::at(*channel);
        self.present[at].then(|| &mut self.parts[at])
    }

    /// The channel's part, begun empty if it had none.
    pub fn entry(&mut self, channel: Channel) -> &mut ChannelHistory {
        let at = Self::at(channel);
        self.present[at] = true;
        &mut self.parts[at]
    }

    pub fn insert(&mut self, channel: Channel, part: ChannelHistory) {
        *self.entry(channel) = part;
    }

    /// Every channel with a part, in channel order.
    pub fn iter(&self) -> impl Iterator<Item = (Channel, &ChannelHistory)> {
        Channel::ALL
            .into_iter()
            .filter_map(|channel| Some((channel, self.get(&channel)?)))
    }

    /// No part, each list's room kept.
    fn clear(&mut self) {
        for part in &mut self.parts {
            part.attempts.clear();
            part.verifications.clear();
        }
        self.present = [false; 3];
    }
}

impl PartialEq for Parts {
    fn eq(&self, other: &Self) -> bool {
        self.iter().eq(other.iter())
    }
}

/// One notification's history, read.
#[derive(Debug, Clone, PartialEq)]
pub struct History {
    pub id: String,
    pub status: Stored<Status>,
    pub dead_letter: bool,
    pub cycle: i64,
    /// The message's recipient (EMAIL), when the row's message was read.
    pub recipient: Option<String>,
    /// The channels the notification was asked to send on: its row's, each replay's and
    /// each attempt's.
    pub channels: ChannelSet,
    /// The attempts and verifications of each channel the row names or a record is about.
    pub by_channel: Parts,
    pub replays: Vec<Replay>,
    /// The channels the current cycle owes, when the newest replay named them; None:
    /// every one.
    pub owed: Option<ChannelSet>,
    /// The newest resolution not followed by a replay.
    pub resolution: Option<Resolution>,
    pub lease_lost: bool,
    pub last_event_id: Option<i64>,
    /// Anything odd, each naming its event or column.
    pub notes: Vec<String>,
    /// Some evidence could not be read: no answer may rest on what is left.
    pub unreadable: bool,
    /// The row's `channels` column could not be read.
    pub channels_unreadable: bool,
}

impl History {
    /// Nothing read yet, of no row: a reader's start, and a test's.
    pub(crate) fn blank() -> Self {
        Self {
            id: String::new(),
            status: Stored::Unreadable(String::new()),
            dead_letter: false,
            cycle: 0,
            recipient: None,
            channels: ChannelSet::default(),
            by_channel: Parts::default(),
            replays: Vec::new(),
            owed: None,
            resolution: None,
            lease_lost: false,
            last_event_id: None,
            notes: Vec::new(),
            unreadable: false,
            channels_unreadable: false,
        }
    }

    /// Reads `row` and its events, oldest first.
    pub fn read<'a>(row: &Notification, events: impl IntoIterator<Item = Observed<'a>>) -> Self {
        let mut reader = Reader::default();
        reader.read_history(row, events);
        reader.finish()
    }

    /// Whether the runtime will still try `channel` on its own: the row is due or leased
    /// and its current cycle owes the channel.
    pub fn still_owed(&self, channel: Channel) -> bool {
        let active = matches!(self.status.known(), Some(Status::Pending | Status::Leased));
        active && self.owed.as_ref().is_none_or(|owed| owed.contains(channel))
    }

    /// Every attempt of `channel`, in event order.
    pub fn attempts(&self, channel: Channel) -> &[Attempt] {
        self.by_channel
            .get(&channel)
            .map_or(&[], |part| part.attempts.as_slice())
    }

    /// Every VERIFIED record about `channel`, in event order.
    pub fn verifications(&self, channel: Channel) -> &[Verification] {
        self.by_channel
            .get(&channel)
            .map_or(&[], |part| part.verifications.as_slice())
    }

    /// The attempt's outcome once recorded verifications are applied: a NOT_DELIVERED
    /// answer settles an UNKNOWN outcome as REJECTED (with the event that did), and never
    /// overrides an acceptance.
    pub fn outcome_of(&self, attempt: &Attempt) -> (ProviderOutcome, Option<i64>) {
        let recorded = attempt.recorded();
        if recorded != ProviderOutcome::Unknown {
            return (recorded, None);
        }
        let by = self
            .verifications(attempt.channel)
            .iter()
            .find(|v| !v.delivered && attempt.covered_by(v))
            .map(|v| v.event_id);
        match by {
            Some(id) => (ProviderOutcome::Rejected, Some(id)),
            None => (recorded, None),
        }
    }

    /// Whether an operator's later replay of `channel`, with an attestation, cleared the
    /// doubt of an attempt whose newest event is `after`. A forced replay without one
    /// clears nothing.
    pub fn cleared_by_replay(&self, channel: Channel, after: i64) -> bool {
        self.replays
            .iter()
            .any(|r| r.event_id > after && r.attested && r.channels.contains(channel))
    }

    fn unreadable(&mut self, note: String) {
        self.notes.push(note);
        self.unreadable = true;
    }
}

/// The kinds a history's attempts are read from: the channel starts and results. Read
/// alone, in order, they give the same attempts, numbered and started alike; only when
/// an attempt ended needs the claims as well ([`ATTEMPT_WINDOW_KINDS`]).
pub const ATTEMPT_KINDS: &[Kind] = &[Kind::ChannelAttemptStarted, Kind::ChannelAttemptResult];

/// [`ATTEMPT_KINDS`] and the claims, whose leases bound when each attempt ended.
pub const ATTEMPT_WINDOW_KINDS: &[Kind] = &[
    Kind::AttemptStarted,
    Kind::ChannelAttemptStarted,
    Kind::ChannelAttemptResult,
];

/// Reads a history one event at a time, in id order.
pub struct Reader {
    history: History,
    /// The lease each claim took: an attempt's window ends with it. The tokens are kept
    /// end to end in one text, each claim naming its span.
    leases: Vec<(std::ops::Range<usize>, f64)>,
    tokens: String,
}

/// A reader between notifications: [`Reader::begin`] one before reading its events.
impl Default for Reader {
    fn default() -> Self {
        Self {
            history: History::blank(),
            leases: Vec::new(),
            tokens: String::new(),
        }
    }
}

impl Reader {
    /// Starts on `row`, keeping the room the last notification's lists took: a walk
    /// reads every entry with one reader.
    pub fn begin(&mut self, row: &Notification) {
        let history = &mut self.history;
        history.id.clone_from(&row.id);
        history.status.clone_from(&row.status);
        history.dead_letter = row.dead_letter;
        history.cycle = row.cycle;
        history.recipient = row
            .payload
            .get("recipient")
            .and_then(serde_json::Value::as_str)
            .map(str::to_string);
        history.channels = ChannelSet::default();
        history.by_channel.clear();
        history.replays.clear();
        history.owed = None;
        history.resolution = None;
        history.lease_lost = false;
        history.last_event_id = None;
        history.notes.clear();
        history.unreadable = false;
        history.channels_unreadable = false;
        self.leases.clear();
        self.tokens.clear();
        for problem in &row.unreadable {
            history.unreadable(format!("row {}: {problem}", row.id));
        }
        match row.channel_set() {
            Ok(channels) => {
                for channel in channels.iter() {
                    history.by_channel.entry(channel);
                }
                history.channels = channels;
            }
            // The column or its text could not be read: what it names still counts, and
            // which it is, is said.
            Err(_) => {
                history.channels_unreadable = true;
                match ChannelSet::parse(&row.channels) {
                    Ok(channels) => history.channels = channels,
                    Err(err) => {
                        history.unreadable(format!("row {}: channels column: {err}", row.id))
                    }
                }
            }
        }
    }

    /// Reads `row` and all its events, oldest first, keeping the room the last
    /// notification's lists took: the history of each entry of a walk.
    pub fn read_history<'a>(
        &mut self,
        row: &Notification,
        events: impl IntoIterator<Item = Observed<'a>>,
    ) -> &History {
        self.begin(row);
        for event in events {
            self.read(event);
        }
        &self.history
    }

    /// The history read so far.
    pub fn history(&self) -> &History {
        &self.history
    }

    pub fn finish(self) -> History {
        self.history
    }

    /// Reads one event; false when its payload is not a JSON object the reading can use
    /// (the caller may want to say why in its own words).
    pub fn read(&mut self, event: Observed<'_>) -> bool {
        let history = &mut self.history;
        history.last_event_id = Some(
            history
                .last_event_id
                .map_or(event.id, |id| id.max(event.id)),
        );
        let mut fields = Fields::default();
        let parsed = fields::parse(event.payload, &mut fields);
        let readable = parsed.is_ok();
        let Some(kind) = Kind::from_stored(event.kind) else {
            history.unreadable(format!("event {}: unknown kind {:?}", event.id, event.kind));
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
            history.unreadable(format!("event {} ({kind}): {column}", event.id));
            return readable;
        }
        match parsed {
            Ok(()) => {}
            // An unreadable verification is no verification: the doubt it would have
            // settled stays, so ignoring it can only keep the answer cautious.
            Err(why) if kind == Kind::Verified => {
                history.notes.push(format!(
                    "event {} (VERIFIED): {why}; counted as no verification",
                    event.id
                ));
                return readable;
            }
            Err(why) => {
                history.unreadable(format!("event {} ({kind}): {why}", event.id));
                return readable;
            }
        }
        match kind {
            Kind::AttemptStarted => self.read_lease(&fields),
            Kind::LeaseLost => history.lease_lost = true,
            Kind::Replayed => read_replay(history, event.id, &fields),
            Kind::Verified => read_verification(history, event, &fields),
            Kind::DlqResolved => read_resolution(history, event, &fields),
            Kind::ChannelAttemptStarted | Kind::ChannelAttemptResult => {
                self.read_attempt(event, kind, &fields)
            }
            _ => {}
        }
        readable
    }

    fn read_lease(&mut self, fields: &Fields<'_>) {
        // A token claimed twice keeps its first lease: the lookup finds that one.
        if let (Some(token), Some(until)) = (fields.lease_token.as_deref(), fields.lease_until) {
            let start = self.tokens.len();
            self.tokens.push_str(token);
            self.leases.push((start..self.tokens.len(), until));
        }
    }

    /// When the lease `token` names ran out, if a claim took it.
    fn lease_until(&self, token: &str) -> Option<f64> {
        self.leases
            .iter()
            .find(|(span, _)| &self.tokens[span.clone()] == token)
            .map(|(_, until)| *until)
    }

    fn read_attempt(&mut self, event: Observed<'_>, kind: Kind, fields: &Fields<'_>) {
        let Some(channel) = channel(&mut self.history, event.id, kind, fields.channel.as_deref())
        else {
            return;
        };
        let Some(cycle) = fields.cycle else {
            self.history.unreadable(format!(
                "event {} ({kind}): no cycle in the payload",
                event.id
            ));
            return;
        };
        let number = fields.attempt.unwrap_or(-1);
        let token = fields.lease_token.as_deref().unwrap_or_default();
        let found = self
            .history
            .attempts(channel)
            .iter()
            .position(|a| a.cycle == cycle && a.attempt == number && a.lease_token == token);
        // Its lease is looked up only for an attempt not seen before.
        let lease_end = found.is_none().then(|| self.lease_until(token)).flatten();
        let history = &mut self.history;
        let row_id = &history.id;
        let attempts = &mut history.by_channel.entry(channel).attempts;
        let at = found.unwrap_or_else(|| {
            let mut attempt = Attempt::new(channel, cycle, number, token, event.at);
            attempt.ended = lease_end.unwrap_or(event.at).max(event.at);
            // What to search the provider for, in its own terms, first: PagerDuty's
            // incident is named by the dedup key, the bare id, never by the
            // Idempotency-Key; Slack's message by the cycle's Idempotency-Key.
            match channel {
                Channel::Pagerduty => attempt.message_ids.push(row_id.clone()),
                Channel::Slack => attempt
                    .message_ids
                    .push(crate::model::idempotency_key(row_id, channel, cycle)),
                Channel::Email => {}
            }
            attempts.push(attempt);
            attempts.len() - 1
        });
        let attempt = &mut attempts[at];
        attempt.started = attempt.started.min(event.at);
        attempt.ended = attempt.ended.max(event.at);
        if kind == Kind::ChannelAttemptStarted {
            attempt.start.get_or_insert(event.id);
            if let Some(sender) = &fields.smtp_from {
                attempt.sender = Some(sender.to_string());
            }
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
        record_result(attempt, &mut history.notes, row_id, event.id, fields);
    }
}

/// One result of `attempt`: what it recorded, the identifiers to search the provider
/// for, and the reply's cause and code.
fn record_result(
    attempt: &mut Attempt,
    notes: &mut Vec<String>,
    row_id: &str,
    event_id: i64,
    fields: &Fields<'_>,
) {
    let (channel, cycle, number) = (attempt.channel, attempt.cycle, attempt.attempt);
    let unsaid = Metadata::default();
    let metadata = fields.metadata.as_ref().unwrap_or(&unsaid);
    let outcome = crate::model::ProviderOutcome::of_result(
        fields.success,
        metadata.provider_outcome.as_deref(),
    );
    if let Some(name) = &metadata.smtp_greeting {
        attempt.relay = Some(name.to_string());
    }
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
        attempt.error = Some(error.to_string());
    }
    if outcome == ProviderOutcome::Rejected {
        let error = fields.error.as_deref().unwrap_or_default();
        attempt.permanent = permanent_rejection(metadata.smtp_code, metadata.http_status, error);
        attempt.code = reply_code(metadata.smtp_code, metadata.http_status, error);
    }
    attempt.results.push((event_id, outcome));
    if outcome == ProviderOutcome::Accepted && message_id.is_none() {
        notes.push(format!(
            "event {}: {channel} accepted without a message_id; confirm with the provider",
            event_id
        ));
    }
    if fields.success.is_none() {
        notes.push(format!(
            "event {}: {channel} result has no readable success flag; treated as unknown",
            event_id
        ));
    }
}

fn channel(
    history: &mut History,
    event_id: i64,
    kind: Kind,
    name: Option<&str>,
) -> Option<Channel> {
    let Some(name) = name else {
        history.unreadable(format!(
            "event {event_id} ({kind}): no channel in the payload"
        ));
        return None;
    };
    match name.parse::<Channel>() {
        Ok(channel) => {
            history.channels.insert(channel);
            Some(channel)
        }
        Err(err) => {
            history.unreadable(format!("event {event_id} ({kind}): {err}"));
            None
        }
    }
}

fn read_replay(history: &mut History, event_id: i64, fields: &Fields<'_>) {
    history.resolution = None;
    let names = fields.channels.as_deref().unwrap_or_default();
    match ChannelSet::parse(names) {
        Ok(channels) => {
            for channel in channels.iter() {
                history.channels.insert(channel);
            }
            history.owed = Some(channels.clone()).filter(|set| !set.is_empty());
            history.replays.push(Replay {
                event_id,
                channels,
                attested: fields
                    .attestation
                    .as_deref()
                    .is_some_and(|a| !a.trim().is_empty()),
            });
        }
        Err(err) => {
            // Which channels the new cycle owes is unknown: every one may be.
            history.owed = None;
            history.unreadable(format!("event {event_id} (REPLAYED): {err}"));
        }
    }
}

fn read_verification(history: &mut History, event: Observed<'_>, fields: &Fields<'_>) {
    let channel = fields.channel.as_deref().map(str::parse::<Channel>);
    let delivered = match fields.outcome.as_deref() {
        Some("DELIVERED") => Some(true),
        Some("NOT_DELIVERED") => Some(false),
        _ => None,
    };
    match (channel, fields.cycle, &fields.attempts, delivered) {
        (Some(Ok(channel)), Some(cycle), Some(attempts), Some(delivered)) => history
            .by_channel
            .entry(channel)
            .verifications
            .push(Verification {
                event_id: event.id,
                at: event.at,
                channel,
                cycle,
                attempts: attempts.clone(),
                delivered,
                source: fields.source.as_deref().unwrap_or("operator").to_string(),
            }),
        _ => history.notes.push(format!(
            "event {} (VERIFIED): channel, cycle, attempts or outcome unreadable; counted as no verification",
            event.id
        )),
    }
}

fn read_resolution(history: &mut History, event: Observed<'_>, fields: &Fields<'_>) {
    let operator = crate::model::payload::person(
        fields.operator.as_deref(),
        fields.claimed_operator.as_deref(),
    );
    // A channel name that cannot be read is not taken as given up.
    let given_up = fields
        .given_up
        .iter()
        .flatten()
        .filter_map(|name| name.parse().ok())
        .collect();
    history.resolution = Some(Resolution {
        event_id: event.id,
        at: event.at,
        operator,
        reason: fields.reason.as_deref().map(str::to_string),
        given_up,
    });
}

fn remember(list: &mut Vec<String>, item: &str) {
    if !list.iter().any(|existing| existing == item) {
        list.push(item.to_string());
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

#[cfg(test)]
impl Attempt {
    /// An attempt as a test states it: a start and one result that recorded `recorded`,
    /// the two events numbered from `first_event`.
    pub(crate) fn stated(
        channel: Channel,
        cycle: i64,
        number: i64,
        window: (f64, f64),
        recorded: ProviderOutcome,
        first_event: i64,
    ) -> Self {
        let mut attempt = Attempt::new(
            channel,
            cycle,
            number,
            &format!("lease-{cycle}-{number}"),
            window.0,
        );
        attempt.ended = window.1;
        attempt.start = Some(first_event);
        attempt.results.push((first_event + 1, recorded));
        attempt
    }
}

#[cfg(test)]
mod tests;
