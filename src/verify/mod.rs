//! Out-of-band verification (DESIGN §7): every UNCERTAIN channel attempt of a VERIFY
//! entry, put to the provider's own record, answered DELIVERED, NOT_DELIVERED or
//! CANNOT_TELL with the evidence.
//!
//! The rule that keeps it safe: DELIVERED only on proof that the provider took the
//! message; NOT_DELIVERED only from a record that covers the attempt's whole window
//! (its start until its lease ran out, widened by the clock-skew margin, and that window
//! already past); anything less is CANNOT_TELL, never a guess.

pub mod http;
pub mod pagerduty;
pub mod relay_log;
pub mod slack;

use crate::clock;
use crate::model::{Channel, Event, Kind, MessageId, Notification};
use crate::remediation::verified::Recorded;
use crate::remediation::verified::{Finding, Verified};
use crate::remediation::{Actor, Rejection};
use crate::runtime::queries;
use crate::triage;
use crate::triage::{Branch, ChannelState, Verdict};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashSet};
use std::path::PathBuf;

/// The answer for one channel attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Outcome {
    Delivered,
    NotDelivered,
    CannotTell,
}

impl Outcome {
    pub const ALL: [Outcome; 3] = [
        Outcome::Delivered,
        Outcome::NotDelivered,
        Outcome::CannotTell,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Delivered => "DELIVERED",
            Outcome::NotDelivered => "NOT_DELIVERED",
            Outcome::CannotTell => "CANNOT_TELL",
        }
    }

    /// What recording it says, if anything.
    pub fn finding(self) -> Option<Finding> {
        match self {
            Outcome::Delivered => Some(Finding::Delivered),
            Outcome::NotDelivered => Some(Finding::NotDelivered),
            Outcome::CannotTell => None,
        }
    }
}

impl std::fmt::Display for Outcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One answer: `verify -o json`'s `answers[]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Answer {
    pub id: String,
    pub channel: Channel,
    pub cycle: i64,
    pub attempt: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message_id: Option<String>,
    pub answer: Outcome,
    /// relay-log, pagerduty or slack.
    pub source: String,
    /// What was found, in words: the log lines, the incident, the message ts.
    pub evidence: String,
}

/// Counts per answer, every answer present.
pub fn summary<'a>(answers: impl IntoIterator<Item = &'a Answer>) -> BTreeMap<Outcome, usize> {
    let mut counts: BTreeMap<Outcome, usize> = Outcome::ALL.iter().map(|o| (*o, 0)).collect();
    for answer in answers {
        *counts.entry(answer.answer).or_default() += 1;
    }
    counts
}

/// One attempt whose outcome is unknown, and when it could have reached the provider.
#[derive(Debug, Clone, PartialEq)]
pub struct Attempt {
    pub attempt: i64,
    /// EMAIL: the Message-ID the attempt's message carried.
    pub message_id: Option<String>,
    /// When the call started.
    pub started: f64,
    /// When its lease ran out, or its late result came, whichever was later.
    pub ended: f64,
}

/// The unknown attempts of one channel in one cycle of one entry.
#[derive(Debug, Clone, PartialEq)]
pub struct Question {
    pub id: String,
    pub channel: Channel,
    pub cycle: i64,
    pub attempts: Vec<Attempt>,
    /// Every attempt of the cycle on this channel (what a cycle-wide key covers).
    pub cycle_attempts: Vec<i64>,
}

impl Question {
    /// The span every attempt could have acted in.
    fn window(&self) -> (f64, f64) {
        let started = self
            .attempts
            .iter()
            .map(|a| a.started)
            .fold(f64::INFINITY, f64::min);
        let ended = self
            .attempts
            .iter()
            .map(|a| a.ended)
            .fold(f64::NEG_INFINITY, f64::max);
        (started, ended)
    }
}

/// What to ask, for a VERIFY entry: its UNCERTAIN channels' unknown attempts, by cycle.
pub fn questions(row: &Notification, events: &[Event], verdict: &Verdict) -> Vec<Question> {
    if verdict.branch != Branch::Verify {
        return Vec::new();
    }
    let by_id: BTreeMap<i64, &Event> = events.iter().map(|e| (e.id, e)).collect();
    let mut questions = Vec::new();
    for channel in verdict
        .channels
        .iter()
        .filter(|c| c.state == ChannelState::Uncertain)
    {
        // The evidence of an UNCERTAIN channel is its unknown attempts' events.
        let mut attempts: BTreeMap<(i64, i64, String), Attempt> = BTreeMap::new();
        for event in channel.evidence.iter().filter_map(|id| by_id.get(id)) {
            let kind = Kind::from_stored(&event.kind);
            if !matches!(
                kind,
                Some(Kind::ChannelAttemptStarted | Kind::ChannelAttemptResult)
            ) {
                continue;
            }
            let payload = event.payload_value();
            let (Some(cycle), Some(number)) =
                (payload["cycle"].as_i64(), payload["attempt"].as_i64())
            else {
                continue;
            };
            let token = payload["lease_token"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            let lease_until = lease_until(events, &token);
            let entry = attempts
                .entry((cycle, number, token))
                .or_insert_with(|| Attempt {
                    attempt: number,
                    message_id: (channel.channel == Channel::Email)
                        .then(|| MessageId::new(&row.id, cycle, number).to_string()),
                    started: event.at,
                    ended: lease_until.unwrap_or(event.at),
                });
            entry.started = entry.started.min(event.at);
            entry.ended = entry.ended.max(event.at);
        }
        let mut by_cycle: BTreeMap<i64, Vec<Attempt>> = BTreeMap::new();
        for ((cycle, _, _), attempt) in attempts {
            by_cycle.entry(cycle).or_default().push(attempt);
        }
        for (cycle, attempts) in by_cycle {
            questions.push(Question {
                id: row.id.clone(),
                channel: channel.channel,
                cycle,
                attempts,
                cycle_attempts: cycle_attempts(events, channel.channel, cycle),
            });
        }
    }
    questions
}

/// When the lease `token` ran out, from the ATTEMPT_STARTED that took it.
fn lease_until(events: &[Event], token: &str) -> Option<f64> {
    events
        .iter()
        .filter(|e| e.kind == Kind::AttemptStarted.as_str())
        .map(Event::payload_value)
        .find(|p| p["lease_token"] == token && !token.is_empty())
        .and_then(|p| p["lease_until"].as_f64())
}

fn cycle_attempts(events: &[Event], channel: Channel, cycle: i64) -> Vec<i64> {
    let mut numbers: Vec<i64> = events
        .iter()
        .filter(|e| {
            matches!(
                Kind::from_stored(&e.kind),
                Some(Kind::ChannelAttemptStarted | Kind::ChannelAttemptResult)
            )
        })
        .map(Event::payload_value)
        .filter(|p| {
            p["cycle"].as_i64() == Some(cycle)
                && p["channel"]
                    .as_str()
                    .and_then(|c| c.parse::<Channel>().ok())
                    == Some(channel)
        })
        .filter_map(|p| p["attempt"].as_i64())
        .collect();
    numbers.sort_unstable();
    numbers.dedup();
    numbers
}

/// Where to look, and how much the clocks may disagree.
#[derive(Debug, Clone, Default)]
pub struct Sources {
    pub relay_logs: Vec<PathBuf>,
    pub zone: relay_log::Zone,
    pub pagerduty: Option<pagerduty::Config>,
    pub slack: Option<slack::Config>,
    /// Seconds added either side of an attempt's window: clocks that disagree, and
    /// providers that take a moment to show what they took.
    pub skew: f64,
}

/// The default clock-skew margin: two minutes.
pub const DEFAULT_SKEW: f64 = 120.0;

/// Answers every question; one pass over the relay logs serves every EMAIL attempt.
pub fn check(questions: &[Question], sources: &Sources, now: f64) -> Vec<Answer> {
    let wanted: HashSet<String> = questions
        .iter()
        .filter(|q| q.channel == Channel::Email)
        .flat_map(|q| q.attempts.iter().filter_map(|a| a.message_id.clone()))
        .collect();
    let logs = (!wanted.is_empty() && !sources.relay_logs.is_empty())
        .then(|| relay_log::search(&sources.relay_logs, &wanted, sources.zone));
    let needs_http = questions.iter().any(|q| q.channel != Channel::Email);
    let client = if needs_http {
        Some(http::client())
    } else {
        None
    };
    let mut answers = Vec::new();
    for question in questions {
        match question.channel {
            Channel::Email => {
                for attempt in &question.attempts {
                    answers.push(email(question, attempt, logs.as_ref(), sources, now));
                }
            }
            Channel::Pagerduty | Channel::Slack => {
                let (answer, source, evidence) = match client.as_ref() {
                    Some(Ok(client)) => match question.channel {
                        Channel::Pagerduty => by_incident(question, client, sources, now),
                        _ => by_history(question, client, sources, now),
                    },
                    Some(Err(err)) => (
                        Outcome::CannotTell,
                        source_name(question.channel),
                        err.clone(),
                    ),
                    None => continue,
                };
                for attempt in &question.attempts {
                    answers.push(Answer {
                        id: question.id.clone(),
                        channel: question.channel,
                        cycle: question.cycle,
                        attempt: attempt.attempt,
                        message_id: None,
                        answer,
                        source: source.clone(),
                        evidence: evidence.clone(),
                    });
                }
            }
        }
    }
    answers
}

fn source_name(channel: Channel) -> String {
    match channel {
        Channel::Email => "relay-log",
        Channel::Pagerduty => "pagerduty",
        Channel::Slack => "slack",
    }
    .to_string()
}

fn window_text(from: f64, to: f64) -> String {
    format!("{} to {}", clock::rfc3339(from), clock::rfc3339(to))
}

/// EMAIL: the relay's log, by the attempt's Message-ID.
fn email(
    question: &Question,
    attempt: &Attempt,
    logs: Option<&relay_log::Findings>,
    sources: &Sources,
    now: f64,
) -> Answer {
    let message_id = attempt.message_id.clone().unwrap_or_default();
    let (answer, evidence) = match logs {
        None => (
            Outcome::CannotTell,
            "no relay log to read (give one with --relay-log PATH)".to_string(),
        ),
        Some(logs) => email_answer(&message_id, attempt, logs, sources.skew, now),
    };
    Answer {
        id: question.id.clone(),
        channel: Channel::Email,
        cycle: question.cycle,
        attempt: attempt.attempt,
        message_id: Some(message_id),
        answer,
        source: "relay-log".into(),
        evidence,
    }
}

fn email_answer(
    message_id: &str,
    attempt: &Attempt,
    logs: &relay_log::Findings,
    skew: f64,
    now: f64,
) -> (Outcome, String) {
    let sightings = logs
        .sightings
        .get(message_id)
        .map(Vec::as_slice)
        .unwrap_or_default();
    if let Some(queued) = sightings.iter().find(|s| s.committed.is_some()) {
        return (
            Outcome::Delivered,
            format!(
                "the relay queued it as {} ({}): {} | {}",
                queued.queue_id,
                queued.path.display(),
                queued.line,
                queued.committed.as_deref().unwrap_or_default()
            ),
        );
    }
    let (from, to) = (attempt.started - skew, attempt.ended + skew);
    let seen = sightings
        .first()
        .map(|s| {
            format!(
                "; its message-id line was logged ({}) but queue id {} never reached the queue manager: the data never ended",
                s.line, s.queue_id
            )
        })
        .unwrap_or_default();
    if to <= now && logs.covers(from, to, skew) {
        return (
            Outcome::NotDelivered,
            format!(
                "the relay log covers {} and never queued {message_id}{seen}",
                window_text(from, to)
            ),
        );
    }
    let covered: Vec<String> = logs
        .runs(skew)
        .iter()
        .map(|(first, last)| window_text(first.lo, last.hi))
        .collect();
    let mut why = if to > now {
        format!(
            "the attempt's window ends at {}, not yet past",
            clock::rfc3339(to)
        )
    } else {
        format!(
            "the logs cover {} but not all of the attempt's window, {}",
            if covered.is_empty() {
                "nothing".to_string()
            } else {
                covered.join(", ")
            },
            window_text(from, to)
        )
    };
    why.push_str(&seen);
    if !logs.problems.is_empty() {
        why.push_str(&format!("; unreadable: {}", logs.problems.join("; ")));
    }
    (Outcome::CannotTell, why)
}

/// PAGERDUTY: the incidents the notification's dedup key opened.
fn by_incident(
    question: &Question,
    client: &http::Client,
    sources: &Sources,
    now: f64,
) -> (Outcome, String, String) {
    let source = "pagerduty".to_string();
    let Some(config) = &sources.pagerduty else {
        return (
            Outcome::CannotTell,
            source,
            "no PagerDuty API token (set UNS_PAGERDUTY_API_TOKEN)".into(),
        );
    };
    let incidents = match pagerduty::incidents(client, config, &question.id) {
        Ok(incidents) => incidents,
        Err(err) => return (Outcome::CannotTell, source, err),
    };
    let (started, ended) = question.window();
    let (from, to) = (started - sources.skew, ended + sources.skew);
    let created = |i: &pagerduty::Incident| clock::parse_instant(&i.created_at, now).ok();
    let describe = |i: &pagerduty::Incident| {
        format!(
            "incident {}{} created {}, status {}",
            i.id,
            i.incident_number
                .map(|n| format!(" (#{n})"))
                .unwrap_or_default(),
            i.created_at,
            i.status.as_deref().unwrap_or("unknown")
        )
    };
    // PagerDuty stamps `created_at` to the second: an incident of the window's first
    // second counts as the window's.
    if let Some(incident) = incidents
        .iter()
        .find(|i| created(i).is_some_and(|at| at + 1.0 >= from))
    {
        return (
            Outcome::Delivered,
            source,
            format!("incident_key {}: {}", question.id, describe(incident)),
        );
    }
    if let Some(earlier) = incidents.first() {
        return (
            Outcome::CannotTell,
            source,
            format!(
                "only an earlier cycle's {}; PagerDuty folds a trigger with the same key into an open incident, so whether this cycle's reached it cannot be told",
                describe(earlier)
            ),
        );
    }
    if to > now {
        return (
            Outcome::CannotTell,
            source,
            format!(
                "no incident yet, but the window ends at {}: too soon to say none will appear",
                clock::rfc3339(to)
            ),
        );
    }
    (
        Outcome::NotDelivered,
        source,
        format!(
            "no incident with incident_key {} (all dates searched); the attempts ran {}",
            question.id,
            window_text(started, ended)
        ),
    )
}

/// SLACK: the channel's history in the attempts' window, by the message metadata.
fn by_history(
    question: &Question,
    client: &http::Client,
    sources: &Sources,
    now: f64,
) -> (Outcome, String, String) {
    let source = "slack".to_string();
    let Some(config) = &sources.slack else {
        return (
            Outcome::CannotTell,
            source,
            "no Slack bot token and channel (set UNS_SLACK_BOT_TOKEN and UNS_SLACK_CHANNEL)".into(),
        );
    };
    let key = format!("{}:{}:{}", question.id, Channel::Slack, question.cycle);
    let (started, ended) = question.window();
    let (from, to) = (started - sources.skew, ended + sources.skew);
    let window = match slack::history(client, config, from, to.max(now)) {
        Ok(window) => window,
        Err(err) => return (Outcome::CannotTell, source, err),
    };
    if let Some(message) = window.tagged.iter().find(|m| m.idempotency_key == key) {
        return (
            Outcome::Delivered,
            source,
            format!(
                "message ts {} in {} carries Idempotency-Key {key}",
                message.ts, config.channel
            ),
        );
    }
    if to > now {
        return (
            Outcome::CannotTell,
            source,
            format!(
                "nothing yet, but the window ends at {}: too soon to say",
                clock::rfc3339(to)
            ),
        );
    }
    (
        Outcome::NotDelivered,
        source,
        format!(
            "no message with Idempotency-Key {key} in {} from {} ({} messages read)",
            config.channel,
            window_text(from, to),
            window.read
        ),
    )
}

/// The answers worth recording, as VERIFIED findings: one per Message-ID for EMAIL, one
/// per cycle for the channels whose key the cycle shares.
pub fn findings(answers: &[Answer], questions: &[Question]) -> BTreeMap<String, Vec<Verified>> {
    let mut by_entry: BTreeMap<String, Vec<Verified>> = BTreeMap::new();
    let mut seen: HashSet<(String, Channel, i64)> = HashSet::new();
    for answer in answers {
        let Some(outcome) = answer.answer.finding() else {
            continue;
        };
        let attempts = match answer.channel {
            Channel::Email => vec![answer.attempt],
            other => {
                if !seen.insert((answer.id.clone(), other, answer.cycle)) {
                    continue;
                }
                questions
                    .iter()
                    .find(|q| q.id == answer.id && q.channel == other && q.cycle == answer.cycle)
                    .map_or_else(|| vec![answer.attempt], |q| q.cycle_attempts.clone())
            }
        };
        by_entry
            .entry(answer.id.clone())
            .or_default()
            .push(Verified {
                channel: answer.channel,
                cycle: answer.cycle,
                attempts,
                outcome,
                source: answer.source.clone(),
                evidence: answer.evidence.clone(),
            });
    }
    by_entry
}

/// What asking found for a set of entries.
#[derive(Debug, Default)]
pub struct Asked {
    pub questions: Vec<Question>,
    pub answers: Vec<Answer>,
    /// Entries with nothing to ask, and why (not found, not VERIFY, nothing UNCERTAIN).
    pub skipped: Vec<(String, String)>,
}

/// Reads each entry from the store, and asks about every UNCERTAIN channel attempt of
/// those that are VERIFY; one check serves them all.
pub fn ask(
    conn: &rusqlite::Connection,
    ids: &[String],
    sources: &Sources,
    now: f64,
) -> rusqlite::Result<Asked> {
    let mut asked = Asked::default();
    for id in ids {
        let Some(row) = queries::read_notification(conn, id)? else {
            asked.skipped.push((id.clone(), "not found".into()));
            continue;
        };
        let events = queries::read_events(conn, id)?;
        let verdict = triage::triage_events(&row, &events);
        if !row.dead_letter {
            asked.skipped.push((
                id.clone(),
                format!("not in the DLQ (status {})", row.status),
            ));
            continue;
        }
        if verdict.branch != Branch::Verify {
            asked.skipped.push((
                id.clone(),
                format!(
                    "{}: nothing is uncertain, so nothing to verify",
                    verdict.branch
                ),
            ));
            continue;
        }
        let found = questions(&row, &events, &verdict);
        if found.is_empty() {
            asked.skipped.push((
                id.clone(),
                "VERIFY because evidence could not be read, not because a provider's answer is unknown: check it by hand (`unsctl inspect`)".into(),
            ));
        }
        asked.questions.extend(found);
    }
    asked.answers = check(&asked.questions, sources, now);
    Ok(asked)
}

/// Records the answers of `asked` that are not CANNOT_TELL, one transaction per entry.
pub fn record(
    conn: &rusqlite::Connection,
    now: f64,
    asked: &Asked,
    actor: &Actor,
    reason: Option<&str>,
) -> Vec<Result<Recorded, (String, Rejection)>> {
    findings(&asked.answers, &asked.questions)
        .into_iter()
        .map(|(id, findings)| {
            crate::remediation::verified::record(conn, now, &id, &findings, actor, reason)
                .map_err(|err| (id, err))
        })
        .collect()
}

#[cfg(test)]
mod tests;
