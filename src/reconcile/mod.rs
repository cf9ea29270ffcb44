//! Reconciliation (DESIGN §9): per notification and channel, how many copies the provider
//! took, counted from the history (ACCEPTED results, VERIFIED DELIVERED) and from the
//! providers' own records read by the rules of evidence of DESIGN §7, a copy seen by both
//! counted once. Then the class: ONCE, DUPLICATED, MAYBE_DUPLICATED, MISSING or UNSETTLED.
//!
//! What counts as one copy differs by channel, as the providers differ:
//! - EMAIL: one per attempt, by its own Message-ID. However many queue ids carry that
//!   Message-ID (a content filter re-queues a message under a new id), an attempt sends
//!   one message.
//! - SLACK: the Idempotency-Key is shared by a cycle's attempts and Slack drops nothing,
//!   so a cycle holds as many copies as messages carry its key, or as attempts were
//!   accepted if that is more.
//! - PAGERDUTY: one per incident. PagerDuty merges a trigger into an incident open under
//!   the dedup key, so a second accepted trigger is not a second page unless the list of
//!   incidents shows a second incident.

pub mod records;

use crate::clock;
use crate::history::{Attempt, ChannelHistory, History, Reader, Verification};
use crate::model::ProviderOutcome;
use crate::model::{Channel, MessageId, Status};
use crate::store::Events;
use crate::verify::Delivery;
use records::Records;
use serde::Serialize;
use std::collections::BTreeMap;
use std::sync::mpsc::Receiver;

/// What reconciliation says about one notification's channel. The order of the variants
/// is the order a person works through them ([`person_order`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Class {
    /// Two or more copies proven.
    Duplicated,
    /// No copy, and nothing will send one.
    Missing,
    /// One copy proven, and attempts whose outcome nothing settles.
    MaybeDuplicated,
    /// No copy proven yet, and the notification is still due, leased or in doubt.
    Unsettled,
    /// Exactly one copy, proven.
    Once,
}

impl Class {
    pub const ALL: [Class; 5] = [
        Class::Once,
        Class::Duplicated,
        Class::MaybeDuplicated,
        Class::Missing,
        Class::Unsettled,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Class::Once => "ONCE",
            Class::Duplicated => "DUPLICATED",
            Class::MaybeDuplicated => "MAYBE_DUPLICATED",
            Class::Missing => "MISSING",
            Class::Unsettled => "UNSETTLED",
        }
    }

    /// Its colour's meaning (the word carries it without colour).
    pub fn tone(self) -> crate::render::table::Tone {
        use crate::render::table::Tone;
        match self {
            Class::Once => Tone::Good,
            Class::Duplicated | Class::Missing => Tone::Bad,
            Class::MaybeDuplicated | Class::Unsettled => Tone::Warn,
        }
    }

    /// DUPLICATED and MISSING need a person: an apology, or a re-send.
    pub fn needs_a_person(self) -> bool {
        matches!(self, Class::Duplicated | Class::Missing)
    }
}

impl std::fmt::Display for Class {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What one item of evidence is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum What {
    /// A copy the provider took.
    Copy,
    /// An attempt whose outcome nothing settles.
    Unknown,
    /// An attempt proven not taken.
    NotTaken,
    /// Why nothing will send a copy: the resolution, the dead letter.
    Settled,
    /// Something read that is not proof either way, or a contradiction.
    Note,
}

/// One item of evidence: `evidence[]` of `reconcile -o json`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Evidence {
    pub what: What,
    pub cycle: Option<i64>,
    pub attempt: Option<i64>,
    /// When, in unix seconds: the provider's time for a copy it records, else the
    /// history's.
    pub at: Option<f64>,
    /// Where it was seen: history, relay-log, pagerduty, slack.
    pub sources: Vec<&'static str>,
    pub event_ids: Vec<i64>,
    pub message_id: Option<String>,
    pub queue_ids: Vec<String>,
    pub incident: Option<String>,
    pub message_ts: Option<String>,
    pub text: String,
}

impl Evidence {
    fn new(what: What, text: impl Into<String>) -> Self {
        Self {
            what,
            cycle: None,
            attempt: None,
            at: None,
            sources: Vec::new(),
            event_ids: Vec::new(),
            message_id: None,
            queue_ids: Vec::new(),
            incident: None,
            message_ts: None,
            text: text.into(),
        }
    }

    /// What it says and what it names, in one line: the text, the relay's queue ids and
    /// the events it rests on (raw: each layout escapes it its own way).
    pub fn described(&self) -> String {
        let mut said = self.text.clone();
        if !self.queue_ids.is_empty() {
            said.push_str(&format!(" (queue id {})", self.queue_ids.join(", ")));
        }
        if !self.event_ids.is_empty() {
            let ids: Vec<String> = self.event_ids.iter().map(i64::to_string).collect();
            said.push_str(&format!(" (events {})", ids.join(", ")));
        }
        said
    }

    fn of(mut self, attempt: &Attempt) -> Self {
        self.cycle = Some(attempt.cycle);
        self.attempt = Some(attempt.attempt);
        self.at = self.at.or(Some(attempt.started));
        self.event_ids.extend(attempt.event_ids());
        self
    }
}

/// One notification's channel, reconciled: `notifications[]` of `reconcile -o json`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Reconciled {
    pub id: String,
    pub status: String,
    pub channel: Channel,
    pub class: Class,
    pub copies: usize,
    pub unknown_attempts: usize,
    /// Who the copies went to: the email address, the Slack channel, the PagerDuty
    /// service, when known.
    pub recipient: Option<String>,
    pub evidence: Vec<Evidence>,
}

/// The one order of what needs a person, wherever it is listed: DUPLICATED, then MISSING,
/// then what is in doubt, each by id and channel.
pub fn person_order(a: &Reconciled, b: &Reconciled) -> std::cmp::Ordering {
    (a.class, &a.id, a.channel).cmp(&(b.class, &b.id, b.channel))
}

impl Reconciled {
    /// Its row of the needs' columns, the id shown as `id` (whole, or a unique prefix).
    pub fn row(&self, id: &str) -> crate::render::columns::NeedRow {
        let copies: Vec<f64> = self
            .evidence
            .iter()
            .filter(|e| e.what == What::Copy)
            .filter_map(|e| e.at)
            .collect();
        crate::render::columns::NeedRow {
            channel: self.channel,
            recipient: self
                .recipient
                .clone()
                .unwrap_or_else(|| crate::model::payload::Message::default().to(self.channel)),
            id: id.to_string(),
            class: self.class.as_str(),
            tone: self.class.tone(),
            copies: self.copies as i64,
            first_copy: copies.iter().copied().reduce(f64::min),
            last_copy: copies.iter().copied().reduce(f64::max),
            evidence: self.evidence.iter().map(Evidence::described).collect(),
            times: crate::render::time::Times::Whole,
        }
    }
}

/// What the records say about one channel's copies.
#[derive(Debug, Default)]
struct Count {
    copies: Vec<Evidence>,
    unknown: Vec<Evidence>,
    others: Vec<Evidence>,
}

/// Reconciles one notification's channels (only `only`, when given), in channel order.
pub fn reconcile(
    history: &History,
    records: &Records,
    only: Option<Channel>,
    now: f64,
) -> Vec<Reconciled> {
    history
        .by_channel
        .iter()
        .filter(|(channel, _)| only.is_none_or(|c| c == *channel))
        .map(|(channel, part)| {
            let count = match channel {
                Channel::Email => email(history, part, records, now),
                Channel::Slack => slack_copies(history, part, records, now),
                Channel::Pagerduty => pagerduty_copies(history, part, records, now),
            };
            classify(history, channel, count, records)
        })
        .collect()
}

fn classify(history: &History, channel: Channel, count: Count, records: &Records) -> Reconciled {
    let copies = count.copies.len();
    let unknown = count.unknown.len();
    let mut evidence = count.copies;
    evidence.extend(count.unknown);
    evidence.extend(count.others);
    let class = match copies {
        0 if unknown > 0 => Class::Unsettled,
        0 if history.still_owed(channel) => {
            evidence.push(Evidence::new(
                What::Note,
                format!(
                    "still owed: the notification is {} and the worker will try {channel} again",
                    history.status.as_str()
                ),
            ));
            Class::Unsettled
        }
        0 if history.status.known() == Some(Status::Delivered) => {
            evidence.push(Evidence::new(
                What::Note,
                "DELIVERED, yet no copy can be read from the history: check it by hand (`unsctl inspect`)",
            ));
            Class::Unsettled
        }
        0 => {
            evidence.push(nothing_will_send(history, channel));
            Class::Missing
        }
        1 if unknown > 0 => Class::MaybeDuplicated,
        1 => Class::Once,
        _ => Class::Duplicated,
    };
    if copies > 0 && history.still_owed(channel) && history.status.known() == Some(Status::Pending)
    {
        evidence.push(Evidence::new(
            What::Note,
            format!("the current cycle still owes {channel}: its next attempt sends another copy"),
        ));
    }
    for note in &history.notes {
        evidence.push(Evidence::new(What::Note, note.clone()));
    }
    Reconciled {
        id: history.id.clone(),
        status: history.status.as_str().to_string(),
        channel,
        class,
        copies,
        unknown_attempts: unknown,
        recipient: records.recipient(history, channel),
        evidence,
    }
}

/// Why nothing will send a copy.
fn nothing_will_send(history: &History, channel: Channel) -> Evidence {
    if let Some(resolution) = &history.resolution {
        let how = if resolution.given_up.contains(channel) {
            "given up on purpose"
        } else {
            "resolved"
        };
        let mut item = Evidence::new(
            What::Settled,
            format!(
                "{how} by {} at {}{}: nothing will send {channel}",
                resolution.operator,
                clock::rfc3339(resolution.at),
                resolution
                    .reason
                    .as_deref()
                    .map(|r| format!(" (reason: {r})"))
                    .unwrap_or_default()
            ),
        );
        item.at = Some(resolution.at);
        item.event_ids.push(resolution.event_id);
        return item;
    }
    let text = match history.status.known() {
        Some(Status::Dead) => format!(
            "dead-lettered with every attempt refused: nothing will send {channel} unless it is replayed"
        ),
        Some(Status::Delivered) => format!("the current cycle did not owe {channel}"),
        _ => format!(
            "the current cycle does not owe {channel} (a replay named other channels): nothing will send it"
        ),
    };
    Evidence::new(What::Settled, text)
}

/// The attempts of `part` under their cycle, in order.
fn by_cycle(part: &ChannelHistory) -> BTreeMap<i64, Vec<&Attempt>> {
    let mut cycles: BTreeMap<i64, Vec<&Attempt>> = BTreeMap::new();
    for attempt in &part.attempts {
        cycles.entry(attempt.cycle).or_default().push(attempt);
    }
    for attempts in cycles.values_mut() {
        attempts.sort_by(|a, b| a.started.total_cmp(&b.started));
    }
    cycles
}

fn recorded_text(attempt: &Attempt) -> String {
    let error = attempt
        .error
        .as_deref()
        .map(|e| format!(": {}", crate::render::sanitize::clean(e)))
        .unwrap_or_default();
    match attempt.recorded() {
        ProviderOutcome::Accepted => {
            "the provider accepted it (CHANNEL_ATTEMPT_RESULT ACCEPTED)".into()
        }
        ProviderOutcome::Rejected => format!("the provider refused it{error}"),
        ProviderOutcome::Unknown if !attempt.results.is_empty() => {
            format!("its outcome is UNKNOWN{error}")
        }
        ProviderOutcome::Unknown => "the call started and no result was ever written".into(),
    }
}

/// EMAIL: one copy per attempt the history or the relay log proves taken.
fn email(history: &History, part: &ChannelHistory, records: &Records, now: f64) -> Count {
    let mut count = Count::default();
    for attempt in &part.attempts {
        let verified = |delivered: bool| {
            part.verifications.iter().find(|v| {
                v.delivered == delivered
                    && v.cycle == attempt.cycle
                    && v.attempts.contains(&attempt.attempt)
            })
        };
        let message_id = (attempt.attempt >= 0)
            .then(|| MessageId::new(&history.id, attempt.cycle, attempt.attempt).to_string());
        let relay = message_id
            .as_deref()
            .and_then(|m| records.relay(m, attempt, now));
        let by_verified = verified(true);
        let by_relay = relay.as_ref().is_some_and(|r| !r.committed.is_empty());
        if attempt.recorded() == ProviderOutcome::Accepted || by_verified.is_some() || by_relay {
            email_copy(&mut count, attempt, by_verified, relay.as_ref(), message_id);
            continue;
        }
        let mut item = if attempt.recorded() == ProviderOutcome::Rejected {
            Evidence::new(What::NotTaken, recorded_text(attempt))
        } else if let Some(v) = verified(false) {
            let mut item = Evidence::new(
                What::NotTaken,
                format!(
                    "VERIFIED NOT_DELIVERED by {} (event {})",
                    v.source, v.event_id
                ),
            );
            item.event_ids.push(v.event_id);
            item
        } else if let Some(relay) = relay
            .as_ref()
            .filter(|r| r.outcome == Delivery::NotDelivered)
        {
            let mut item = Evidence::new(What::NotTaken, relay.text.clone());
            item.sources.push("relay-log");
            item
        } else {
            let why = match &relay {
                Some(relay) => relay.text.clone(),
                None => records.no_relay_log(),
            };
            let mut item = in_doubt(
                attempt,
                "the relay log",
                relay.is_some().then_some("relay-log"),
                &why,
            );
            item.message_id = message_id;
            count.unknown.push(item);
            continue;
        };
        item.message_id = message_id;
        count.others.push(item.of(attempt));
    }
    count
}

/// The copy one EMAIL attempt made, with what proves it.
fn email_copy(
    count: &mut Count,
    attempt: &Attempt,
    verified: Option<&Verification>,
    relay: Option<&RelayWord>,
    message_id: Option<String>,
) {
    let mut item = Evidence::new(What::Copy, "");
    let mut said = Vec::new();
    let accepted = attempt.recorded() == ProviderOutcome::Accepted;
    if accepted {
        item.sources.push("history");
        said.push("the relay accepted it (250 to the final dot)".to_string());
    }
    if let Some(v) = verified {
        item.sources.push("history");
        item.event_ids.push(v.event_id);
        said.push(format!(
            "VERIFIED DELIVERED by {} (event {})",
            v.source, v.event_id
        ));
    }
    if let Some(relay) = relay.filter(|r| !r.committed.is_empty()) {
        item.sources.push("relay-log");
        item.at = relay.committed.iter().map(|c| c.1).reduce(f64::min);
        item.queue_ids = relay.committed.iter().map(|c| c.0.clone()).collect();
        // The queue ids are named beside the text, wherever it is shown.
        said.push("the relay log shows it committed".to_string());
    }
    item.sources.dedup();
    if attempt.recorded() == ProviderOutcome::Rejected {
        said.push(format!(
            "though the history says {}",
            recorded_text(attempt)
        ));
    }
    item.text = said.join("; ");
    item.message_id = message_id;
    count.copies.push(item.of(attempt));
    if accepted && let Some(relay) = relay.filter(|r| r.outcome == Delivery::NotDelivered) {
        count.others.push(
            Evidence::new(
                What::Note,
                format!(
                    "the relay accepted attempt {} yet its log shows no such message: {}",
                    attempt.attempt, relay.text
                ),
            )
            .of(attempt),
        );
    }
}

/// SLACK: per cycle, as many copies as messages carry its key, or as attempts were
/// accepted if that is more.
fn slack_copies(history: &History, part: &ChannelHistory, records: &Records, now: f64) -> Count {
    let mut count = Count::default();
    for (cycle, attempts) in by_cycle(part) {
        let key = format!("{}:{}:{cycle}", history.id, Channel::Slack);
        let from = attempts
            .iter()
            .map(|a| a.started)
            .fold(f64::INFINITY, f64::min)
            - records.skew();
        let to = attempts
            .iter()
            .map(|a| a.ended)
            .fold(f64::NEG_INFINITY, f64::max)
            + records.skew();
        let read = records.slack_messages(&key, (from, to), now);
        let accepted: Vec<&&Attempt> = attempts
            .iter()
            .filter(|a| a.recorded() == ProviderOutcome::Accepted)
            .collect();
        let verified_delivered = part
            .verifications
            .iter()
            .find(|v| v.cycle == cycle && v.delivered);
        let messages = read.as_ref().map_or(&[][..], |r| &r.proven[..]);
        let total = messages
            .len()
            .max(accepted.len())
            .max(usize::from(verified_delivered.is_some()));
        for n in 0..total {
            let attempt = accepted.get(n).copied().copied();
            let (mut item, mut said) = history_side(
                attempt,
                verified_delivered.filter(|_| n == 0),
                "the webhook accepted it",
            );
            if let Some((ts, at)) = messages.get(n) {
                item.sources.push("slack");
                item.message_ts = Some(ts.clone());
                item.at = Some(*at);
                said.push(format!("message ts {ts} carries Idempotency-Key {key}"));
            }
            item.sources.dedup();
            item.text = said.join("; ");
            item.cycle = Some(cycle);
            count.copies.push(match attempt {
                Some(attempt) => item.of(attempt),
                None => item,
            });
        }
        let settled_by_record = read.as_ref().is_some_and(|r| r.complete);
        let unsettled: Vec<&&Attempt> = attempts
            .iter()
            .filter(|a| history.outcome_of(a).0 == ProviderOutcome::Unknown)
            .collect();
        // Every copy beyond the accepted ones came from an attempt whose outcome was
        // unknown, which is then no longer in doubt.
        let explained = total - accepted.len();
        let why = match &read {
            Some(read) => read.text.clone(),
            None => records.no_slack(),
        };
        for attempt in unsettled.iter().skip(explained) {
            if settled_by_record {
                continue;
            }
            count.unknown.push(in_doubt(
                attempt,
                "Slack's history",
                read.is_some().then_some("slack"),
                &why,
            ));
        }
        if settled_by_record && let Some(read) = &read {
            count
                .others
                .push(Evidence::new(What::Note, read.text.clone()));
        }
    }
    count
}

/// PAGERDUTY: one copy per incident the notification's triggers opened.
fn pagerduty_copies(
    history: &History,
    part: &ChannelHistory,
    records: &Records,
    now: f64,
) -> Count {
    let mut count = Count::default();
    let mut attempts: Vec<&Attempt> = part.attempts.iter().collect();
    attempts.sort_by(|a, b| a.started.total_cmp(&b.started));
    let windows: Vec<(f64, f64)> = attempts
        .iter()
        .map(|a| (a.started - records.skew(), a.ended + records.skew()))
        .collect();
    let read = records.incidents(&history.id, &windows, now);
    let accepted: Vec<&&Attempt> = attempts
        .iter()
        .filter(|a| a.recorded() == ProviderOutcome::Accepted)
        .collect();
    let verified_delivered = part.verifications.iter().find(|v| v.delivered);
    let incidents = read.as_ref().map_or(&[][..], |r| &r.proven[..]);
    let history_copies = usize::from(!accepted.is_empty() || verified_delivered.is_some());
    let total = incidents.len().max(history_copies);
    for n in 0..total {
        // One accepted trigger is one page; any further ones merged into it.
        let attempt = accepted.first().copied().copied().filter(|_| n == 0);
        let (mut item, mut said) = history_side(
            attempt,
            verified_delivered.filter(|_| n == 0),
            "PagerDuty accepted the trigger",
        );
        if let Some(incident) = incidents.get(n) {
            item.sources.push("pagerduty");
            item.incident = Some(incident.name.clone());
            item.at = Some(incident.created);
            said.push(format!(
                "incident_key {}: {}",
                history.id, incident.describe
            ));
        }
        item.sources.dedup();
        item.text = said.join("; ");
        count.copies.push(match attempt {
            Some(attempt) => item.of(attempt),
            None => item,
        });
    }
    let complete = read.as_ref().is_some_and(|r| r.complete);
    if complete {
        for attempt in accepted.iter().skip(total) {
            count.others.push(
                Evidence::new(
                    What::Note,
                    "an accepted trigger merged into an incident already open under the dedup key: no second page",
                )
                .of(attempt),
            );
        }
        if let Some(read) = &read {
            count
                .others
                .push(Evidence::new(What::Note, read.text.clone()));
        }
        return count;
    }
    pagerduty_doubt(
        &mut count,
        history,
        &attempts,
        &accepted,
        read.as_ref(),
        records,
        total,
    );
    count
}

/// PAGERDUTY without the whole list of incidents: the attempts still in doubt.
#[allow(clippy::too_many_arguments)]
fn pagerduty_doubt(
    count: &mut Count,
    history: &History,
    attempts: &[&Attempt],
    accepted: &[&&Attempt],
    read: Option<&IncidentWord>,
    records: &Records,
    total: usize,
) {
    let why = match read {
        Some(read) => read.text.clone(),
        None => records.no_pagerduty(),
    };
    // Without the whole list of incidents, an accepted trigger past the first may have
    // merged into the open incident or opened another.
    for attempt in accepted.iter().skip(total) {
        let mut item = Evidence::new(
            What::Unknown,
            format!(
                "PagerDuty accepted another trigger: merged into the open incident, or a second page if it had been resolved; {why}"
            ),
        );
        item.sources.push("history");
        count.unknown.push(item.of(attempt));
    }
    // Every copy but an accepted trigger's came from a trigger whose outcome was unknown
    // (an incident PagerDuty lists, or one a VERIFIED DELIVERED event recorded), which is
    // then no longer in doubt: as for Slack, whatever the list can tell yet.
    let explained = total.saturating_sub(usize::from(!accepted.is_empty()));
    for attempt in attempts
        .iter()
        .filter(|a| history.outcome_of(a).0 == ProviderOutcome::Unknown)
        .skip(explained)
    {
        count.unknown.push(in_doubt(
            attempt,
            "PagerDuty",
            read.is_some().then_some("pagerduty"),
            &why,
        ));
    }
}

/// The history's side of one copy: the accepted attempt it was (`accepted` says so in
/// words), or else the VERIFIED DELIVERED event that proves it; the evidence begun, and
/// what was said.
fn history_side(
    attempt: Option<&Attempt>,
    verified: Option<&Verification>,
    accepted: &str,
) -> (Evidence, Vec<String>) {
    let mut item = Evidence::new(What::Copy, "");
    let mut said = Vec::new();
    if attempt.is_some() {
        item.sources.push("history");
        said.push(accepted.to_string());
    } else if let Some(v) = verified {
        item.sources.push("history");
        item.event_ids.push(v.event_id);
        said.push(format!(
            "VERIFIED DELIVERED by {} (event {})",
            v.source, v.event_id
        ));
    }
    (item, said)
}

/// An attempt whose outcome nothing settles: what the history says of it, and why
/// `record` cannot tell (read from `source`, when it was read at all).
fn in_doubt(attempt: &Attempt, record: &str, source: Option<&'static str>, why: &str) -> Evidence {
    let mut item = Evidence::new(
        What::Unknown,
        format!("{}; {record} cannot tell: {why}", recorded_text(attempt)),
    );
    item.sources.extend(source);
    item.of(attempt)
}

/// Counts per channel and class: `channels` always, every class present.
pub type Summary = BTreeMap<Channel, BTreeMap<Class, usize>>;

/// The summary of `classes` (each reconciled channel's), over `channels` at least.
pub fn summary(
    channels: &[Channel],
    classes: impl IntoIterator<Item = (Channel, Class)>,
) -> Summary {
    let empty = || {
        Class::ALL
            .iter()
            .map(|k| (*k, 0))
            .collect::<BTreeMap<_, _>>()
    };
    let mut summary: Summary = channels.iter().map(|c| (*c, empty())).collect();
    for (channel, class) in classes {
        *summary
            .entry(channel)
            .or_insert_with(empty)
            .entry(class)
            .or_default() += 1;
    }
    summary
}

/// The relay log's word on one attempt's Message-ID.
#[derive(Debug, Clone)]
pub struct RelayWord {
    /// Queue ids that committed it inside the attempt's window, from the runtime's
    /// sender, with when.
    pub committed: Vec<(String, f64)>,
    /// By the rules of §7, when nothing committed it.
    pub outcome: Delivery,
    pub text: String,
}

/// Slack's word on one cycle's key.
#[derive(Debug, Clone)]
pub struct SlackWord {
    /// Messages that are proof: ts and when.
    pub proven: Vec<(String, f64)>,
    /// Whether the whole window was read and nothing casts doubt: the messages are all.
    pub complete: bool,
    pub text: String,
}

/// PagerDuty's word on one dedup key.
#[derive(Debug, Clone)]
pub struct IncidentWord {
    pub proven: Vec<ProvenIncident>,
    pub complete: bool,
    pub text: String,
}

#[derive(Debug, Clone)]
pub struct ProvenIncident {
    pub name: String,
    pub created: f64,
    pub describe: String,
    pub service: Option<String>,
}

pub(crate) fn window_text(from: f64, to: f64) -> String {
    format!("{} to {}", clock::rfc3339(from), clock::rfc3339(to))
}

/// Handed each notification's row, its events as stored and its channels reconciled.
pub type NotificationVisit<'v> = dyn FnMut(
        &crate::model::Notification,
        &[crate::store::StoredEvent<'_>],
        Vec<Reconciled>,
    ) -> crate::store::Result<()>
    + Send
    + 'v;

/// What to reconcile.
#[derive(Debug, Clone, Default)]
pub struct Asked {
    /// The channel and error text to narrow by (its times are not used: see `window`).
    pub selection: crate::store::Selection,
    /// When the attempts were started.
    pub window: crate::store::Window,
    /// These notifications only, whenever their attempts were made.
    pub ids: Option<Vec<String>>,
    /// At most this many notifications, the first by id.
    pub limit: Option<usize>,
}

/// The providers' records, gathered before the histories are reconciled: from the
/// window's starts when the relay logs are all there is to read, else in a first pass over
/// the histories. Reconcile each notification with [`Reconciliation::each`], which reads
/// the histories one at a time, so a window of any size is held in memory only as what
/// the records found.
pub struct Reconciliation {
    pub window: crate::store::Window,
    pub records: Records,
    asked: Asked,
    now: f64,
}

impl Reconciliation {
    /// Reads what the providers' records `sources` name say about the histories `asked`
    /// picks (nothing to read when they name none).
    pub fn read(
        store: &dyn crate::store::Store,
        asked: &Asked,
        sources: crate::verify::Sources,
        now: f64,
    ) -> crate::store::Result<Self> {
        // A window's relay logs are searched for every attempt of the notifications
        // that made its starts, read by the index of kinds by time: the histories are
        // read once, after, not twice.
        let window_starts = if records::Needs::relay_logs_alone(&sources) && asked.ids.is_none() {
            store.window_starts(asked.window)?
        } else {
            None
        };
        let records = if let Some(starts) = window_starts {
            Records::gather_for_window(starts, sources)
        } else if records::Needs::wanted(&sources) {
            let mut needs = records::Needs::default();
            let mut reader = Reader::default();
            // Only the attempts are asked about: the events they are read from suffice.
            let only = records::Needs::events(&sources);
            walk(store, asked, only, &mut |row, events| {
                let observed = events.iter().map(crate::store::StoredEvent::observed);
                needs.add(reader.read_history(row, observed), &sources);
                Ok(())
            })?;
            Records::gather(needs, sources, now)
        } else {
            Records::none(sources)
        };
        Ok(Self {
            window: asked.window,
            records,
            asked: asked.clone(),
            now,
        })
    }

    /// Every notification's channels, reconciled, ordered by id then channel, each handed
    /// to `visit` as it is read; returns how many notifications were read.
    pub fn each(
        &self,
        store: &dyn crate::store::Store,
        visit: &mut (dyn FnMut(Reconciled) -> crate::store::Result<()> + Send),
    ) -> crate::store::Result<usize> {
        // The histories are read on the walk's thread and reconciled on one of their own,
        // in the order read: reading and reconciling each took a core's worth of time.
        let only = self.asked.selection.channel;
        let mut read = 0;
        let mut reader = Reader::default();
        let reconcile_each = |arriving: Receiver<Vec<History>>| -> crate::store::Result<()> {
            for history in arriving.into_iter().flatten() {
                for item in reconcile(&history, &self.records, only, self.now) {
                    visit(item)?;
                }
            }
            Ok(())
        };
        let (walked, reconciled) = crate::handoff::beside("reconcile", reconcile_each, |emit| {
            walk(store, &self.asked, Events::All, &mut |row, events| {
                read += 1;
                let observed = events.iter().map(crate::store::StoredEvent::observed);
                if emit(reader.read_history(row, observed).clone()) {
                    Ok(())
                } else {
                    Err(crate::store::StoreError::Stopped)
                }
            })
        })
        .map_err(|lost| crate::store::StoreError::Other(lost.to_string()))?;
        // The visitor's error comes first: it is why the walk stopped. A visitor that
        // says Stopped ended early on purpose, as the walk's own visitors may.
        match reconciled.and(walked) {
            Ok(()) | Err(crate::store::StoreError::Stopped) => Ok(read),
            Err(err) => Err(err),
        }
    }

    /// [`Reconciliation::each`], one notification at a time, with its row and its events
    /// as stored: what a report reads its moments and its evidence bundle from in the
    /// same pass.
    pub fn each_with_events(
        &self,
        store: &dyn crate::store::Store,
        visit: &mut NotificationVisit<'_>,
    ) -> crate::store::Result<usize> {
        let mut read = 0;
        let mut reader = Reader::default();
        walk(store, &self.asked, Events::All, &mut |row, events| {
            read += 1;
            let observed = events.iter().map(crate::store::StoredEvent::observed);
            let history = reader.read_history(row, observed);
            let items = reconcile(
                history,
                &self.records,
                self.asked.selection.channel,
                self.now,
            );
            visit(row, events, items)
        })?;
        Ok(read)
    }

    /// Every notification's channels, reconciled, in a list.
    pub fn all(&self, store: &dyn crate::store::Store) -> crate::store::Result<Vec<Reconciled>> {
        let mut all = Vec::new();
        self.each(store, &mut |item| {
            all.push(item);
            Ok(())
        })?;
        Ok(all)
    }

    /// The channels the summary names: the one asked for, or all.
    pub fn channels(&self) -> Vec<Channel> {
        self.asked.channels()
    }
}

impl Asked {
    /// The channels a summary of it names: the one asked for, or all.
    pub fn channels(&self) -> Vec<Channel> {
        match self.selection.channel {
            Some(channel) => vec![channel],
            None => Channel::ALL.to_vec(),
        }
    }
}

/// Each notification `asked` picks, with its events, in id order.
/// Every notification `asked` picks, with (at least) the events `events` asks for.
fn walk(
    store: &dyn crate::store::Store,
    asked: &Asked,
    events: Events<'_>,
    visit: &mut (
             dyn FnMut(
        &crate::model::Notification,
        &[crate::store::StoredEvent<'_>],
    ) -> crate::store::Result<()>
                 + Send
         ),
) -> crate::store::Result<()> {
    if let Some(ids) = &asked.ids {
        let mut read = store.documents(ids);
        for id in ids {
            let doc = read(id)?;
            let events: Vec<crate::store::StoredEvent<'_>> =
                doc.events.iter().map(stored).collect();
            visit(&doc.row, &events)?;
        }
        return Ok(());
    }
    let limit = asked.limit.unwrap_or(usize::MAX);
    let mut taken = 0;
    let walked = store.each_attempted(
        &asked.selection,
        asked.window,
        events,
        &mut |row, events| {
            visit(&row, events)?;
            taken += 1;
            if taken >= limit {
                return Err(crate::store::StoreError::Stopped);
            }
            Ok(())
        },
    );
    match walked {
        Ok(()) | Err(crate::store::StoreError::Stopped) => Ok(()),
        Err(err) => Err(err),
    }
}

fn stored(event: &crate::model::Event) -> crate::store::StoredEvent<'_> {
    crate::store::StoredEvent {
        id: event.id,
        at: event.at,
        kind: std::borrow::Cow::Borrowed(event.kind.as_str()),
        payload: std::borrow::Cow::Borrowed(&*event.payload),
        unreadable: event.unreadable.clone(),
    }
}

/// Whether duplicates are still being made: lease losses and reclaims over the last
/// minutes of the window, the numbers `doctor` reads.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Recent {
    pub window_seconds: f64,
    /// The end of the span counted, in unix seconds: the window's end, or null for now.
    pub until: Option<f64>,
    pub claims: i64,
    pub lease_lost: i64,
    pub reclaims: i64,
    pub lease_lost_per_minute: f64,
    pub reclaims_per_minute: f64,
    /// The last lease loss and the last reclaim, however long before the span's end.
    pub last_lease_lost: Option<f64>,
    pub last_reclaim: Option<f64>,
    /// How long after the last of them the incident is still called happening.
    pub quiet_after_seconds: f64,
    /// A lease lost or a reclaim within `quiet_after_seconds` of the span's end (or now):
    /// each may send another copy. Told by the last one, never by the 15-minute count.
    pub still_happening: bool,
    /// Now, by the store's clock, when these were read ([`crate::runtime::queries::stats`]):
    /// what "ago" is told by, since the events it is told of were stamped by that clock.
    #[serde(skip)]
    pub at: f64,
}

/// How far back "still happening" looks from the window's end: 15 minutes.
pub const RECENT_SECONDS: f64 = 900.0;

impl Recent {
    /// The span before `until`, or before now by the store's own clock: the events were
    /// stamped by it (by the database's on PostgreSQL, the server's over the API), so a
    /// reader whose clock runs ahead would see the last lease loss older than it is.
    pub fn read(
        store: &dyn crate::store::Store,
        until: Option<f64>,
        quiet_after: f64,
    ) -> crate::store::Result<Self> {
        let health = store.health(RECENT_SECONDS, until)?;
        let now = health.stats.at;
        let minutes = RECENT_SECONDS / 60.0;
        let rate = |n: i64| (n as f64 / minutes * 100.0).round() / 100.0;
        let stillness = crate::pulse::Stillness::of(
            health.last_lease_lost,
            health.last_reclaim,
            until.unwrap_or(now),
            quiet_after,
        );
        Ok(Self {
            window_seconds: RECENT_SECONDS,
            until,
            claims: health.claims,
            lease_lost: health.lease_lost,
            reclaims: health.reclaims,
            lease_lost_per_minute: rate(health.lease_lost),
            reclaims_per_minute: rate(health.reclaims),
            last_lease_lost: health.last_lease_lost,
            last_reclaim: health.last_reclaim,
            quiet_after_seconds: quiet_after,
            still_happening: stillness.still_happening,
            at: now,
        })
    }
}

#[cfg(test)]
mod tests;
