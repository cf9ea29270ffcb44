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
use crate::history::{History, InDoubt, Observed, Question};
use crate::model::command::{CommandLine, Step};
use crate::model::{Channel, Event, Notification};
use crate::remediation::verified::Written;
use crate::remediation::verified::{Finding, Verified};
use crate::remediation::{Actor, Rejection};
use crate::render::sanitize::cleaned;
use crate::runtime::queries;
use crate::triage;
use crate::triage::{Branch, ChannelState, Verdict};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::PathBuf;

/// What a provider's own records say of one channel attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Delivery {
    Delivered,
    NotDelivered,
    CannotTell,
}

impl Delivery {
    pub const ALL: [Delivery; 3] = [
        Delivery::Delivered,
        Delivery::NotDelivered,
        Delivery::CannotTell,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Delivery::Delivered => "DELIVERED",
            Delivery::NotDelivered => "NOT_DELIVERED",
            Delivery::CannotTell => "CANNOT_TELL",
        }
    }

    /// What recording it says, if anything.
    pub fn finding(self) -> Option<Finding> {
        match self {
            Delivery::Delivered => Some(Finding::Delivered),
            Delivery::NotDelivered => Some(Finding::NotDelivered),
            Delivery::CannotTell => None,
        }
    }
}

impl std::fmt::Display for Delivery {
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
    pub answer: Delivery,
    /// relay-log, pagerduty or slack.
    pub source: String,
    /// What was found, in words: the log lines, the incident, the message ts.
    pub evidence: String,
}

/// The reason of an answer in a few words, for a narrow table: its evidence's first
/// clause, up to a parenthesis, a colon that ends a phrase or a semicolon.
pub fn brief(evidence: &str) -> String {
    let end = [" (", ": ", "; ", ", but "]
        .iter()
        .filter_map(|stop| evidence.find(stop))
        .min()
        .unwrap_or(evidence.len());
    let clause = evidence[..end].trim();
    match clause.char_indices().nth(48) {
        Some((cut, _)) => {
            let head = &clause[..cut];
            let head = head.rsplit_once(' ').map_or(head, |(words, _)| words);
            format!("{head}…")
        }
        None => clause.to_string(),
    }
}

/// Counts per answer, every answer present.
pub fn summary<'a>(answers: impl IntoIterator<Item = &'a Answer>) -> BTreeMap<Delivery, usize> {
    let mut counts: BTreeMap<Delivery, usize> = Delivery::ALL.iter().map(|o| (*o, 0)).collect();
    for answer in answers {
        *counts.entry(answer.answer).or_default() += 1;
    }
    counts
}

/// What to ask, for a VERIFY entry: its UNCERTAIN channels' unknown attempts, by cycle,
/// from the history `verdict` was judged on.
pub fn questions(history: &History, verdict: &Verdict) -> Vec<Question> {
    if verdict.branch != Branch::Verify {
        return Vec::new();
    }
    let uncertain: Vec<(Channel, &[i64])> = verdict
        .channels
        .iter()
        .filter(|c| c.state == ChannelState::Uncertain)
        .map(|c| (c.channel, c.evidence.as_slice()))
        .collect();
    crate::history::questions(history, &uncertain)
}

/// Where to look, and how much the clocks may disagree.
#[derive(Debug, Clone)]
pub struct Sources {
    pub relay_logs: Vec<PathBuf>,
    pub zone: relay_log::Zone,
    /// The syslog names the relay logs under (`--relay-syslog-name`); none: Postfix's.
    pub syslog_names: relay_log::SyslogNames,
    /// Host fields that are the relay's own though it greets under another name
    /// (`--relay-host`: a container's id, a short name).
    pub relay_hosts: Vec<String>,
    /// The runtime's envelope sender as the relay's log writes it: for attempts whose
    /// start does not record one (stores written before the adapter recorded it), and,
    /// where the relay rewrites senders, the address the operator vouches it rewrites
    /// the runtime's to.
    pub smtp_from: Vec<String>,
    /// The longest stretch without a line that a relay log may have and still cover a
    /// window.
    pub max_log_gap: f64,
    pub pagerduty: Option<pagerduty::Api>,
    pub slack: Option<slack::Api>,
    /// Seconds added either side of an attempt's window: clocks that disagree, and
    /// providers that take a moment to show what they took.
    pub skew: f64,
}

impl Default for Sources {
    fn default() -> Self {
        Self {
            relay_logs: Vec::new(),
            zone: relay_log::Zone::default(),
            syslog_names: relay_log::SyslogNames::default(),
            relay_hosts: Vec::new(),
            smtp_from: Vec::new(),
            max_log_gap: DEFAULT_MAX_LOG_GAP,
            pagerduty: None,
            slack: None,
            skew: DEFAULT_SKEW,
        }
    }
}

impl Sources {
    /// The flags that name these sources again, so a printed next step asks the same
    /// records the same way when pasted; tokens stay in the environment, never printed.
    pub fn flags(&self) -> Vec<(&'static str, String)> {
        let mut flags = Vec::new();
        let mut flag = |name: &'static str, value: &str| {
            flags.push((name, value.to_string()));
        };
        for path in &self.relay_logs {
            flag("--relay-log", &path.display().to_string());
        }
        if !self.relay_logs.is_empty() {
            if self.zone != relay_log::Zone::Local {
                flag("--relay-log-zone", &self.zone.flag_value());
            }
            for name in self.syslog_names.given() {
                flag("--relay-syslog-name", name);
            }
            for name in &self.relay_hosts {
                flag("--relay-host", name);
            }
            for sender in &self.smtp_from {
                flag("--smtp-from", sender);
            }
            if self.max_log_gap != DEFAULT_MAX_LOG_GAP {
                flag(
                    "--max-log-gap",
                    &crate::clock::seconds_flag(self.max_log_gap),
                );
            }
        }
        if self.skew != DEFAULT_SKEW {
            flag("--clock-skew", &crate::clock::seconds_flag(self.skew));
        }
        if let Some(config) = &self.pagerduty
            && config.api_url != pagerduty::DEFAULT_API_URL
        {
            flag("--pagerduty-api-url", &config.api_url);
        }
        let timeout = [
            self.pagerduty.as_ref().map(|c| c.timeout),
            self.slack.as_ref().map(|c| c.timeout),
        ]
        .into_iter()
        .flatten()
        .find(|t| *t != http::DEFAULT_TIMEOUT);
        if let Some(timeout) = timeout {
            flag(
                "--provider-timeout",
                &crate::clock::seconds_flag(timeout.as_secs_f64()),
            );
        }
        if let Some(config) = &self.slack {
            if config.api_url != slack::DEFAULT_API_URL {
                flag("--slack-api-url", &config.api_url);
            }
            flag("--slack-channel", &config.channel);
            if let Some(bot) = &config.bot_id {
                flag("--slack-bot-id", bot);
            }
        }
        flags
    }
}

/// The default clock-skew margin: two minutes.
pub const DEFAULT_SKEW: f64 = 120.0;

/// The default longest stretch without a relay-log line: five minutes.
pub const DEFAULT_MAX_LOG_GAP: f64 = 300.0;

/// Attempts further apart than this are read against separate passes of the logs, so
/// that each syslog stamp takes the year nearest its own attempts.
const YEAR_CLUSTER: f64 = 30.0 * 86_400.0;

/// How far from the instant a pass read yearless stamps nearest an attempt may have
/// started and still be answered from that pass: a stamp takes the year that puts it
/// nearest that instant, which is its own for any line less than half a year from it.
const YEAR_SAFE: f64 = 150.0 * 86_400.0;

/// The relay logs read once per cluster of attempts close in time.
pub(crate) struct Logs {
    passes: Vec<Pass>,
}

/// One reading of the relay logs: what it looked for, the instant its yearless stamps
/// were read nearest, and what it found.
struct Pass {
    wanted: relay_log::Wanted,
    near: f64,
    findings: relay_log::Findings,
}

/// Why the logs hold no findings for a Message-ID.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Unsearched {
    /// No pass looked for it: its notification's attempts began after the search.
    After,
    /// Passes looked for it, each reading yearless stamps nearest an instant more than
    /// [`YEAR_SAFE`] from when the attempt started.
    FarFromTheWindow,
}

impl std::fmt::Display for Unsearched {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::After => {
                f.write_str("the attempt started after the relay log was searched: reconcile again")
            }
            Self::FarFromTheWindow => write!(
                f,
                "the attempt started more than {} days from the window's attempts, whose time the relay log's stamps without a year were read by: reconcile a window that holds it (--since, --until)",
                YEAR_SAFE / 86_400.0
            ),
        }
    }
}

/// `items` in order of when each started, cut where one starts more than
/// [`YEAR_CLUSTER`] after the first of its cluster.
fn clusters<T>(mut items: Vec<T>, started: impl Fn(&T) -> f64) -> Vec<Vec<T>> {
    items.sort_by(|a, b| started(a).total_cmp(&started(b)));
    let mut clusters: Vec<Vec<T>> = Vec::new();
    for item in items {
        match clusters.last_mut() {
            Some(cluster) if started(&item) - started(&cluster[0]) <= YEAR_CLUSTER => {
                cluster.push(item);
            }
            _ => clusters.push(vec![item]),
        }
    }
    clusters
}

impl Logs {
    fn read(questions: &[Question], sources: &Sources) -> Option<Self> {
        let attempts: Vec<(f64, &str)> = questions
            .iter()
            .filter(|q| q.channel == Channel::Email)
            .flat_map(|q| &q.attempts)
            .filter_map(|a| Some((a.started, a.message_id.as_deref()?)))
            .collect();
        Self::read_for(attempts, sources)
    }

    /// One pass over the logs per cluster of `attempts` (when each started, and its
    /// Message-ID); None without logs or attempts.
    pub(crate) fn read_for(attempts: Vec<(f64, &str)>, sources: &Sources) -> Option<Self> {
        if attempts.is_empty() || sources.relay_logs.is_empty() {
            return None;
        }
        let passes = clusters(attempts, |a| a.0)
            .into_iter()
            .map(|cluster| {
                let near = cluster[cluster.len() / 2].0;
                let wanted = cluster.iter().map(|a| a.1.to_string()).collect();
                Self::pass(relay_log::Wanted::Ids(wanted), near, sources)
            })
            .collect();
        Some(Self { passes })
    }

    /// One pass over the logs per cluster of the attempts started in a window (`starts`),
    /// each for every Message-ID of an attempt of the `notifications` that made them:
    /// what a reconciliation asks before it reads their histories, so that it reads them
    /// once. None without logs or starts.
    pub(crate) fn read_for_window(
        notifications: HashSet<String, foldhash::fast::RandomState>,
        starts: Vec<f64>,
        sources: &Sources,
    ) -> Option<Self> {
        let starts: Vec<f64> = starts.into_iter().filter(|at| at.is_finite()).collect();
        if starts.is_empty() || sources.relay_logs.is_empty() {
            return None;
        }
        let wanted = relay_log::Wanted::Notifications(std::sync::Arc::new(notifications));
        let passes = clusters(starts, |at| *at)
            .into_iter()
            .map(|cluster| Self::pass(wanted.clone(), cluster[cluster.len() / 2], sources))
            .collect();
        Some(Self { passes })
    }

    fn pass(wanted: relay_log::Wanted, near: f64, sources: &Sources) -> Pass {
        let options = relay_log::Options {
            zone: sources.zone.clone(),
            near,
            max_gap: sources.max_log_gap,
            names: sources.syslog_names.clone(),
        };
        let findings = relay_log::search_for(&sources.relay_logs, &wanted, options);
        Pass {
            wanted,
            near,
            findings,
        }
    }

    /// Every file a pass could not read to its end, and why, once each in the order
    /// found: each answer that rests on one says so, and a front end says it once up
    /// front, where a mistyped path is seen.
    pub fn problems(&self) -> Vec<String> {
        let mut all: Vec<String> = Vec::new();
        for problem in self.passes.iter().flat_map(|pass| &pass.findings.problems) {
            if !all.contains(problem) {
                all.push(problem.clone());
            }
        }
        all
    }

    /// The findings of the pass that looked for `message_id`, sent by an attempt that
    /// started at `started`: of those that did, the one whose stamps were read nearest
    /// that time, if within [`YEAR_SAFE`] of it (a pass for exact Message-IDs looked for
    /// the attempt's own, by its own time).
    pub(crate) fn for_message(
        &self,
        message_id: &str,
        started: f64,
    ) -> Result<&relay_log::Findings, Unsearched> {
        let mut looked = self
            .passes
            .iter()
            .filter(|pass| pass.wanted.contains(message_id))
            .peekable();
        looked.peek().ok_or(Unsearched::After)?;
        looked
            .filter(|pass| match pass.wanted {
                relay_log::Wanted::Ids(_) => true,
                relay_log::Wanted::Notifications(_) => (started - pass.near).abs() <= YEAR_SAFE,
            })
            .min_by(|a, b| {
                (started - a.near)
                    .abs()
                    .total_cmp(&(started - b.near).abs())
            })
            .map(|pass| &pass.findings)
            .ok_or(Unsearched::FarFromTheWindow)
    }
}

/// Answers every question, with the relay logs that could not be read to their end, and
/// why; one pass over the relay logs serves every EMAIL attempt. No answer quotes a
/// token, whichever provider's answer echoed it.
fn check(questions: &[Question], sources: &Sources, now: f64) -> (Vec<Answer>, Vec<String>) {
    let mut secrets = crate::redact::Secrets::new();
    if let Some(config) = &sources.pagerduty {
        secrets.add(&config.token);
    }
    if let Some(config) = &sources.slack {
        secrets.add(&config.token);
    }
    let logs = Logs::read(questions, sources);
    let (mut answers, lookups) = ask_each(questions, logs.as_ref(), sources, now);
    for answer in &mut answers {
        answer.evidence = secrets.redact(&answer.evidence);
    }
    let mut unread = logs.as_ref().map(Logs::problems).unwrap_or_default();
    unread.extend(lookups.unread());
    let unread = unread.iter().map(|what| secrets.redact(what)).collect();
    (answers, unread)
}

/// The lookups of one provider's record made for a check, and why each that failed did.
#[derive(Debug, Default)]
pub struct Lookups {
    made: usize,
    failed: Vec<String>,
}

impl Lookups {
    fn took(&mut self, looked: Result<PerAttempt, String>, question: &Question) -> PerAttempt {
        self.made += 1;
        looked.unwrap_or_else(|err| {
            let answers = every_attempt(question, Delivery::CannotTell, &err);
            self.failed.push(err);
            answers
        })
    }

    /// `made` lookups made elsewhere (reconcile's, a few at a time), and why each that
    /// failed did.
    pub(crate) fn of(made: usize, failed: impl IntoIterator<Item = String>) -> Self {
        Self {
            made,
            failed: failed.into_iter().collect(),
        }
    }

    /// These lookups and `other`'s as one: what contexts that read the same records made.
    pub fn add(&mut self, other: Lookups) {
        self.made += other.made;
        self.failed.extend(other.failed);
    }

    /// The lines a front end says up front ([`unread_line`]): each reason lookups failed,
    /// once, with how many of those made it stopped, the most common first. A revoked
    /// token stops every lookup the same way, so it is said once, not once per entry.
    pub fn unread(&self) -> Vec<String> {
        // Counted by a map: a provider in trouble may give every lookup a reason of its own
        // (a request id in each error's body), and there may be a lookup per entry.
        let mut counts: HashMap<&str, usize> = HashMap::new();
        for why in &self.failed {
            *counts.entry(why.as_str()).or_default() += 1;
        }
        let mut reasons: Vec<(&str, usize)> = counts.into_iter().collect();
        reasons.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(b.0)));
        let told = |(why, count): (&str, usize)| {
            if self.made == 1 {
                why.to_string()
            } else {
                format!("{why} ({count} of {} lookups)", self.made)
            }
        };
        let mut lines: Vec<String> = reasons
            .iter()
            .take(REASONS_SAID)
            .map(|r| told(*r))
            .collect();
        let rest: usize = reasons.iter().skip(REASONS_SAID).map(|(_, n)| n).sum();
        if rest > 0 {
            lines.push(format!(
                "{rest} more of {} lookups, each for a reason of its own: each answer says which",
                self.made
            ));
        }
        lines
    }
}

/// The most reasons for failed lookups said up front; each answer says its own.
const REASONS_SAID: usize = 4;

/// The lookups of Slack's history and of PagerDuty's incidents a check made.
#[derive(Debug, Default)]
struct Looked {
    slack: Lookups,
    pagerduty: Lookups,
}

impl Looked {
    fn unread(&self) -> Vec<String> {
        let mut lines = self.slack.unread();
        lines.extend(self.pagerduty.unread());
        lines
    }
}

fn ask_each(
    questions: &[Question],
    logs: Option<&Logs>,
    sources: &Sources,
    now: f64,
) -> (Vec<Answer>, Looked) {
    let needs_http = questions.iter().any(|q| q.channel != Channel::Email);
    let client = if needs_http {
        Some(http::client())
    } else {
        None
    };
    let mut answers = Vec::new();
    let mut looked = Looked::default();
    for question in questions {
        if question.channel == Channel::Email {
            for attempt in &question.attempts {
                answers.push(email(question, attempt, logs, sources, now));
            }
            continue;
        }
        let Some(client) = client.as_ref() else {
            continue;
        };
        let client = client.as_ref().map_err(String::clone);
        // A record not given is not looked up: each answer says what gives it.
        let per_attempt = match (question.channel, &sources.pagerduty, &sources.slack) {
            (Channel::Pagerduty, Some(config), _) => looked.pagerduty.took(
                client.and_then(|c| by_incident(question, c, config, sources.skew, now)),
                question,
            ),
            (Channel::Slack, _, Some(config)) => looked.slack.took(
                client.and_then(|c| by_history(question, c, config, sources.skew, now)),
                question,
            ),
            _ => not_given(question),
        };
        for (attempt, (answer, evidence)) in question.attempts.iter().zip(per_attempt) {
            answers.push(Answer {
                id: question.id.clone(),
                channel: question.channel,
                cycle: question.cycle,
                attempt: attempt.attempt,
                message_id: None,
                answer,
                source: source_name(question.channel),
                evidence,
            });
        }
    }
    (answers, looked)
}

/// Per attempt of a question, in its order: the answer and its evidence.
type PerAttempt = Vec<(Delivery, String)>;

fn every_attempt(question: &Question, outcome: Delivery, evidence: &str) -> PerAttempt {
    question
        .attempts
        .iter()
        .map(|_| (outcome, evidence.to_string()))
        .collect()
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
    attempt: &InDoubt,
    logs: Option<&Logs>,
    sources: &Sources,
    now: f64,
) -> Answer {
    let message_id = attempt.message_id.clone().unwrap_or_default();
    let found = logs.and_then(|l| l.for_message(&message_id, attempt.started).ok());
    let (answer, evidence) = match found {
        None => (
            Delivery::CannotTell,
            "no relay log to read (give one with --relay-log PATH)".to_string(),
        ),
        Some(logs) => email_answer(&message_id, attempt, logs, sources, now),
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

/// How one message carrying the attempt's Message-ID bears on the attempt.
pub(crate) enum Bearing {
    /// The runtime's message, committed by the relay.
    Committed,
    /// The relay's own word that it committed nothing (the sender may be unknown: a
    /// session lost during DATA names none, and no other sender's message is committed).
    Refused,
    /// Committed under another envelope sender than the runtime's: a relay that rewrites
    /// senders logs the runtime's own message so. Neither proof nor absence.
    Rewritten(String),
    /// Inside the window, and nothing says whose it is or what became of it.
    Unsettled(String),
    /// About something else: outside the window, or another sender's and not committed.
    Elsewhere(String),
}

/// The runtime's envelope senders for `attempt`, as the relay's log may write them: the
/// one its start recorded, and those the operator gave (`--smtp-from`, `UNS_SMTP_FROM`).
pub(crate) fn senders(attempt: &InDoubt, sources: &Sources) -> Vec<String> {
    let mut senders: Vec<String> = attempt.sender.iter().cloned().collect();
    for given in &sources.smtp_from {
        if !senders.contains(given) {
            senders.push(given.clone());
        }
    }
    senders
}

fn named_senders(senders: &[String]) -> String {
    senders
        .iter()
        .map(|s| format!("<{}>", cleaned(s)))
        .collect::<Vec<_>>()
        .join(" or ")
}

pub(crate) fn bearing(
    message: &relay_log::Message,
    ours: &[String],
    (from, to): (f64, f64),
) -> Bearing {
    use relay_log::{Fate, Sender};
    let at = clock::rfc3339(message.at.lo);
    let queue_id = cleaned(&message.queue_id);
    let outside = message.span.1 <= from || message.span.0 > to;
    let when = if outside {
        format!("{at}, outside the attempt's window,")
    } else {
        at.clone()
    };
    if let Sender::Known(seen) = &message.sender
        && !ours.is_empty()
        && !ours.contains(seen)
    {
        return match message.fate {
            Fate::Queued | Fate::Held => Bearing::Rewritten(format!(
                "queue id {queue_id} at {when} was committed carrying the attempt's Message-ID from <{seen}>, not the runtime's {ours}: a relay that rewrites senders (canonical maps, masquerading, SRS) logs the runtime's own message so, and so does a forger; neither proof nor absence (if <{seen}> is how the relay writes the runtime's sender, say so with --smtp-from {seen})",
                seen = cleaned(seen),
                ours = named_senders(ours),
            )),
            _ => Bearing::Elsewhere(format!(
                "queue id {queue_id} at {when} came from <{}>, not the runtime's {}, and was not committed: not this attempt",
                cleaned(seen),
                named_senders(ours)
            )),
        };
    }
    if outside {
        // The attempt's own Message-ID from no other sender, at another time: a clock
        // further off than the margin, or a forger who also took the sender. Neither
        // proves it arrived, and neither lets its absence in the window prove it did not.
        return if message.fate.refused() {
            Bearing::Elsewhere(format!(
                "queue id {queue_id} carried it at {when} and was not committed: not this attempt"
            ))
        } else {
            Bearing::Unsettled(format!(
                "queue id {queue_id} carried it at {when} from the runtime's sender or an unknown one: a clock further off than --clock-skew, or a forgery; neither proof nor absence"
            ))
        };
    }
    if message.fate.committed() {
        let doubt = match (&message.sender, ours.is_empty()) {
            _ if message.ambiguous && (message.span.0 < from || message.span.1 > to) => Some(
                "but its lines fall in an hour a clock change repeats, and one reading puts them outside the attempt's window".to_string(),
            ),
            (Sender::Ambiguous, _) => Some("but its line names its sender more than one way".into()),
            (Sender::Unknown, _) => Some("but no line names its envelope sender".into()),
            (Sender::Known(_), true) => Some(
                "but the runtime's sender is not known (give it with --smtp-from)".into(),
            ),
            (Sender::Known(_), false) => None,
        };
        return match doubt {
            Some(doubt) => Bearing::Unsettled(format!(
                "queue id {queue_id} at {at} was committed, {doubt}"
            )),
            None => Bearing::Committed,
        };
    }
    match message.fate {
        Fate::Rejected | Fate::Discarded | Fate::Lost => Bearing::Refused,
        _ => Bearing::Unsettled(format!(
            "queue id {queue_id} at {at} carried it, and no line says what became of it"
        )),
    }
}

/// The rules for the relay log's answer about one attempt's Message-ID (DESIGN §7).
pub(crate) fn email_answer(
    message_id: &str,
    attempt: &InDoubt,
    logs: &relay_log::Findings,
    sources: &Sources,
    now: f64,
) -> (Delivery, String) {
    let window = (attempt.started - sources.skew, attempt.ended + sources.skew);
    let ours = senders(attempt, sources);
    let mut elsewhere = Vec::new();
    let mut doubts = Vec::new();
    let mut rewritten = Vec::new();
    let mut refused = Vec::new();
    for message in logs.seen(message_id) {
        match bearing(message, &ours, window) {
            Bearing::Committed => return (Delivery::Delivered, committed_text(message)),
            Bearing::Refused => refused.push(message),
            Bearing::Unsettled(why) => doubts.push(why),
            Bearing::Rewritten(why) => rewritten.push(why),
            Bearing::Elsewhere(why) => elsewhere.push(why),
        }
    }
    let mut notes = elsewhere;
    if !logs.problems.is_empty() {
        notes.push(format!(
            "could not be read to the end: {}",
            logs.problems.join("; ")
        ));
    }
    let with_notes = |text: String| {
        if notes.is_empty() {
            text
        } else {
            format!("{text}; {}", notes.join("; "))
        }
    };
    doubts.extend(rewritten);
    if !doubts.is_empty() {
        return (Delivery::CannotTell, with_notes(doubts.join("; ")));
    }
    match absence(message_id, attempt, logs, &ours, &refused, sources, now) {
        Ok(proof) => (Delivery::NotDelivered, with_notes(proof)),
        Err(why) => (Delivery::CannotTell, with_notes(why)),
    }
}

/// What forbids claiming absence in the window `from`..`to` whatever else the log
/// shows: a window not yet past, a log that cannot be read, lines lost near it, a line
/// that mentions the Message-ID without being its record, a queue id taken with no
/// message-id line (DESIGN §7).
fn nothing_forbids_absence(
    message_id: &str,
    logs: &relay_log::Findings,
    ours: &[String],
    (from, to): (f64, f64),
    now: f64,
) -> Result<(), String> {
    if to > now {
        return Err(format!(
            "the attempt's window ends at {}, not yet past",
            clock::rfc3339(to)
        ));
    }
    if !logs.problems.is_empty() {
        return Err(format!(
            "a log that cannot be read may hold the attempt's {message_id}"
        ));
    }
    if let Some(loss) = logs.loss_near(from, to) {
        let line = cleaned(&loss.line);
        return Err(match loss.why {
            relay_log::Lost::Said => format!(
                "the log says it lost lines near the attempt's window ({line:?}): what it lost may have been this message's"
            ),
            relay_log::Lost::Reboot => format!(
                "the log marks a reboot of the relay's host near the attempt's window ({line:?}): what the relay logged just before it may never have reached the disk, and may have been this message's"
            ),
            relay_log::Lost::Restart => format!(
                "the relay started again near the attempt's window with no line saying it had been stopped ({line:?}): its host may have crashed, and what it logged just before may never have reached the disk, and may have been this message's"
            ),
        });
    }
    if let Some(line) = logs.mentioned(message_id).first() {
        return Err(format!(
            "a line mentions {message_id} without being the relay's record of a message carrying it ({:?}): absence cannot be claimed",
            cleaned(line)
        ));
    }
    if let Some(line) = logs.damaged_naming(message_id).first() {
        return Err(format!(
            "a damaged line names {message_id} and cannot be read whole, {}: what it says of it cannot be told, so absence cannot be claimed",
            cleaned(line)
        ));
    }
    if let Some(hole) = logs.hole_within(from, to) {
        return Err(format!(
            "{} cannot be read, and it lies {}, reaching into the attempt's window: the log there proves no absence",
            cleaned(&hole.line),
            hole_span(hole)
        ));
    }
    if let Some(queue_id) = logs.orphan_within(from, to, ours) {
        return Err(format!(
            "queue id {} inside the attempt's window was taken with no message-id line naming the Message-ID it was sent with: lines are missing from the log, or the relay did not keep it, and it may be this attempt's message",
            cleaned(queue_id)
        ));
    }
    Ok(())
}

/// Whether the relay's own record proves the attempt's message was never committed:
/// the relay's word that the session carrying it ended without committing it, or no line
/// with the Message-ID at all in a log proven to cover the window. The proof, or what it
/// lacks.
fn absence(
    message_id: &str,
    attempt: &InDoubt,
    logs: &relay_log::Findings,
    ours: &[String],
    refused: &[&relay_log::Message],
    sources: &Sources,
    now: f64,
) -> Result<String, String> {
    let (from, to) = (attempt.started - sources.skew, attempt.ended + sources.skew);
    nothing_forbids_absence(message_id, logs, ours, (from, to), now)?;
    let host = logs.relay_host(from, to, attempt.relay.as_deref(), &sources.relay_hosts)?;
    let on_host = |m: &&&relay_log::Message| m.host.as_deref().unwrap_or_default() == host;
    if let Some(message) = refused.iter().find(on_host) {
        if !logs.host_continuous(host, message.span.0, message.span.1) {
            return Err(format!(
                "queue id {} was refused, but the log has a hole during its session: its lines cannot be told from a later session's",
                cleaned(&message.queue_id)
            ));
        }
        return Ok(format!(
            "the relay's own record: queue id {} carried {message_id} ({}) and was never committed: {}",
            cleaned(&message.queue_id),
            cleaned(&message.line),
            cleaned(message.fate_line.as_deref().unwrap_or_default())
        ));
    }
    if let Some(message) = refused.first() {
        return Err(format!(
            "queue id {} on {} refused a message carrying it, and that is not the relay that answered the attempt",
            cleaned(&message.queue_id),
            cleaned(message.host.as_deref().unwrap_or("(no host)"))
        ));
    }
    if logs.host_covers(host, from, to) {
        return Ok(format!(
            "the relay log of {} covers {} without a gap longer than {}s, and no line carries {message_id}",
            if host.is_empty() {
                "(no host named)".to_string()
            } else {
                cleaned(host)
            },
            window_text(from, to),
            sources.max_log_gap
        ));
    }
    let covered: Vec<String> = logs
        .covered
        .get(host)
        .into_iter()
        .flatten()
        .map(|run| {
            // A run of one line proves only that instant; never shown backwards.
            if run.inner.0 < run.inner.1 {
                window_text(run.inner.0, run.inner.1)
            } else {
                format!("one line at {}", clock::rfc3339(run.outer.0))
            }
        })
        .collect();
    let mut why = format!(
        "the relay's own lines cover {} (gaps over {}s break them) but not all of the attempt's window, {}",
        if covered.is_empty() {
            "nothing".to_string()
        } else {
            covered.join(", ")
        },
        sources.max_log_gap,
        window_text(from, to)
    );
    if let Some(unread) = logs.unread.first() {
        why.push_str(&format!("; {}", cleaned(unread)));
    }
    Err(why)
}

/// Where a damaged line lies, between the readable lines around it.
fn hole_span(hole: &relay_log::Hole) -> String {
    match (hole.from.is_finite(), hole.to.is_finite()) {
        (true, true) => format!(
            "between the lines of {} and {}",
            clock::rfc3339(hole.from),
            clock::rfc3339(hole.to)
        ),
        (true, false) => format!("after the line of {}", clock::rfc3339(hole.from)),
        (false, true) => format!("before the line of {}", clock::rfc3339(hole.to)),
        (false, false) => "in a file with no readable stamp".into(),
    }
}

fn committed_text(message: &relay_log::Message) -> String {
    let how = match message.fate {
        relay_log::Fate::Held => {
            "holds it (held by the relay: committed, and `postsuper -H` sends it on)"
        }
        _ => "queued it",
    };
    format!(
        "the relay {how} as {} ({}): {} | {}",
        cleaned(&message.queue_id),
        message.path.display(),
        cleaned(&message.line),
        cleaned(message.fate_line.as_deref().unwrap_or_default())
    )
}

/// PAGERDUTY: the incidents the notification's dedup key opened, weighed against each
/// attempt's own window. PagerDuty folds every trigger of the key into the incident open
/// under it, so the incident one attempt opened (or one merged into) proves the cycle's
/// channel, and the cycle's other attempts say so, never that they opened it.
fn by_incident(
    question: &Question,
    client: &http::Client,
    config: &pagerduty::Api,
    skew: f64,
    now: f64,
) -> Result<PerAttempt, String> {
    let incidents = pagerduty::incidents(client, config, &question.id)?;
    let mut answers: PerAttempt = question
        .attempts
        .iter()
        .map(|attempt| {
            let window = (attempt.started - skew, attempt.ended + skew);
            let ran = (attempt.started, attempt.ended);
            incident_answer(&question.id, &incidents, window, ran, now)
        })
        .collect();
    let proof = question
        .attempts
        .iter()
        .zip(&answers)
        .find(|(_, (outcome, _))| *outcome == Delivery::Delivered)
        .map(|(attempt, (_, evidence))| (attempt.attempt, evidence.clone()));
    if let Some((number, evidence)) = proof {
        for (outcome, text) in &mut answers {
            if *outcome != Delivery::Delivered {
                *outcome = Delivery::Delivered;
                *text = format!(
                    "the cycle's incident, by attempt {number}'s trigger ({evidence}); PagerDuty holds one incident for the cycle's dedup key, so this attempt's trigger added no page of its own"
                );
            }
        }
    }
    Ok(answers)
}

/// Every attempt of a question whose provider's record was not given: what gives it.
fn not_given(question: &Question) -> PerAttempt {
    let what = match question.channel {
        Channel::Pagerduty => "no PagerDuty API token (set UNS_PAGERDUTY_API_TOKEN)",
        _ => "no Slack bot token and channel (set UNS_SLACK_BOT_TOKEN and UNS_SLACK_CHANNEL)",
    };
    every_attempt(question, Delivery::CannotTell, what)
}

/// The rules for PagerDuty's answer: an incident is proof only with the exact key and an
/// RFC 3339 `created_at` inside the window, or as the open incident a trigger inside the
/// window was merged into; NOT_DELIVERED only when no incident at all came back.
pub fn incident_answer(
    key: &str,
    incidents: &[pagerduty::Incident],
    (from, to): (f64, f64),
    (started, ended): (f64, f64),
    now: f64,
) -> (Delivery, String) {
    use pagerduty::Standing;
    let mut doubts = Vec::new();
    for incident in incidents {
        match pagerduty::standing(incident, key, (from, to), now) {
            Standing::Opened => {
                return (
                    Delivery::Delivered,
                    format!(
                        "incident_key {key}: {} opened inside the attempt's window",
                        incident.describe()
                    ),
                );
            }
            Standing::MergedInto => {
                return (
                    Delivery::Delivered,
                    format!(
                        "incident_key {key}: merged into open incident {}: it was open through the attempt's window, and PagerDuty folds a trigger with its key into it",
                        incident.describe()
                    ),
                );
            }
            Standing::Doubt(why) => doubts.push(why),
        }
    }
    if !doubts.is_empty() {
        return (Delivery::CannotTell, doubts.join("; "));
    }
    if to > now {
        return (
            Delivery::CannotTell,
            format!(
                "no incident yet, but the window ends at {}: too soon to say none will appear",
                clock::rfc3339(to)
            ),
        );
    }
    (
        Delivery::NotDelivered,
        format!(
            "no incident with incident_key {key} (every page read, all dates searched); the attempt ran {} (searched {} either side for clock skew)",
            window_text(started, ended),
            crate::render::time::duration((started - from).max(0.0))
        ),
    )
}

/// SLACK: the channel's history over the attempts' windows, by the message metadata.
fn by_history(
    question: &Question,
    client: &http::Client,
    config: &slack::Api,
    skew: f64,
    now: f64,
) -> Result<PerAttempt, String> {
    let key = crate::model::idempotency_key(&question.id, Channel::Slack, question.cycle);
    let (started, ended) = question.window();
    let (from, to) = (started - skew, ended + skew);
    let window = slack::history(client, config, from, to.max(now))?;
    Ok(slack_answers(
        &key,
        config,
        &window,
        &question.attempts,
        skew,
        now,
    ))
}

/// A Slack message proven to carry a key, and when it was posted.
type Proven<'m> = (f64, &'m slack::Tagged);

/// Each Slack message proven to carry a cycle's key, credited to one attempt: the one
/// whose own window holds it, else the one that started nearest it among those whose
/// widened window holds it; the ts of each message no attempt explains.
fn credit<'m>(
    mut proven: Vec<Proven<'m>>,
    attempts: &[InDoubt],
    skew: f64,
) -> (Vec<Option<Proven<'m>>>, Vec<String>) {
    proven.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut credited: Vec<Option<(f64, &slack::Tagged)>> = vec![None; attempts.len()];
    let mut extra = Vec::new();
    for (at, message) in proven {
        let open = |n: &usize| {
            credited[*n].is_none()
                && at >= attempts[*n].started - skew
                && at <= attempts[*n].ended + skew
        };
        let own = (0..attempts.len())
            .filter(open)
            .find(|n| at >= attempts[*n].started && at <= attempts[*n].ended);
        let nearest = || {
            (0..attempts.len()).filter(open).min_by(|a, b| {
                (at - attempts[*a].started)
                    .abs()
                    .total_cmp(&(at - attempts[*b].started).abs())
            })
        };
        match own.or_else(nearest) {
            Some(n) => credited[n] = Some((at, message)),
            None => extra.push(cleaned(&message.ts)),
        }
    }
    (credited, extra)
}

/// Each attempt's answer from Slack's history: every message with the cycle's key proves
/// one attempt, never two (the attempt whose own window holds it, else the one that
/// started nearest it, among those whose widened window holds it); an attempt no message
/// is credited to did not post, once the history was read in full and its window is past.
pub fn slack_answers(
    key: &str,
    config: &slack::Api,
    window: &slack::Window,
    attempts: &[InDoubt],
    skew: f64,
    now: f64,
) -> PerAttempt {
    let widest = (
        attempts
            .iter()
            .map(|a| a.started)
            .fold(f64::INFINITY, f64::min)
            - skew,
        attempts
            .iter()
            .map(|a| a.ended)
            .fold(f64::NEG_INFINITY, f64::max)
            + skew,
    );
    let mut doubts = window.doubts_within(widest);
    let mut proven: Vec<(f64, &slack::Tagged)> = Vec::new();
    for message in window.tagged.iter().filter(|m| m.idempotency_key == key) {
        match slack::proof(message, key, config, widest) {
            Ok(at) => proven.push((at, message)),
            Err(doubt) => doubts.push(doubt),
        }
    }
    let (credited, extra) = credit(proven, attempts, skew);
    let extra = if extra.is_empty() {
        String::new()
    } else {
        format!(
            "; message(s) ts {} also carry the key: a post no attempt's window explains",
            extra.join(", ")
        )
    };
    attempts
        .iter()
        .zip(&credited)
        .map(|(attempt, credit)| {
            if let Some((at, message)) = credit {
                let whose = if *at >= attempt.started && *at <= attempt.ended {
                    "inside this attempt's own window"
                } else {
                    "nearest this attempt's start"
                };
                return (
                    Delivery::Delivered,
                    format!(
                        "message ts {} in {} carries Idempotency-Key {key}, posted {whose}{extra}",
                        cleaned(&message.ts),
                        cleaned(&config.channel)
                    ),
                );
            }
            let (from, to) = (attempt.started - skew, attempt.ended + skew);
            if !doubts.is_empty() {
                return (Delivery::CannotTell, doubts.join("; "));
            }
            if to > now {
                return (
                    Delivery::CannotTell,
                    format!(
                        "nothing yet, but the window ends at {}: too soon to say",
                        clock::rfc3339(to)
                    ),
                );
            }
            (
                Delivery::NotDelivered,
                format!(
                    "no message with Idempotency-Key {key} in {} from {} is this attempt's ({} messages read, every page){extra}",
                    cleaned(&config.channel),
                    window_text(from, to),
                    window.read
                ),
            )
        })
        .collect()
}

/// The answers worth recording, as VERIFIED findings: one per Message-ID for EMAIL; for
/// SLACK, whose messages each prove one attempt, one per outcome of the cycle listing its
/// attempts; for PAGERDUTY, whose incident proves the cycle's channel, one per cycle listing
/// the cycle's attempts that were not REJECTED, once every answer agrees or one proves it.
pub fn findings(answers: &[Answer], questions: &[Question]) -> BTreeMap<String, Vec<Verified>> {
    let mut by_entry: BTreeMap<String, Vec<Verified>> = BTreeMap::new();
    let mut grouped: BTreeMap<(String, Channel, i64), Vec<&Answer>> = BTreeMap::new();
    for answer in answers {
        grouped
            .entry((answer.id.clone(), answer.channel, answer.cycle))
            .or_default()
            .push(answer);
    }
    for ((id, channel, cycle), answers) in grouped {
        let verified = |outcome: Finding, attempts: Vec<i64>, proof: &Answer| Verified {
            channel,
            cycle,
            attempts,
            outcome,
            source: proof.source.clone(),
            evidence: proof.evidence.clone(),
        };
        let mut found = Vec::new();
        match channel {
            Channel::Email => {
                for answer in &answers {
                    if let Some(outcome) = answer.answer.finding() {
                        found.push(verified(outcome, vec![answer.attempt], answer));
                    }
                }
            }
            Channel::Slack => {
                for outcome in [Delivery::Delivered, Delivery::NotDelivered] {
                    let these: Vec<&&Answer> =
                        answers.iter().filter(|a| a.answer == outcome).collect();
                    if let (Some(finding), Some(first)) = (outcome.finding(), these.first()) {
                        let attempts = these.iter().map(|a| a.attempt).collect();
                        found.push(verified(finding, attempts, first));
                    }
                }
            }
            Channel::Pagerduty => {
                let cycle_attempts = questions
                    .iter()
                    .find(|q| q.id == id && q.channel == channel && q.cycle == cycle)
                    .map(|q| q.cycle_attempts.clone())
                    .unwrap_or_else(|| answers.iter().map(|a| a.attempt).collect());
                let delivered = answers.iter().find(|a| a.answer == Delivery::Delivered);
                let all_absent = answers.iter().all(|a| a.answer == Delivery::NotDelivered);
                if let Some(proof) = delivered {
                    found.push(verified(Finding::Delivered, cycle_attempts, proof));
                } else if all_absent && let Some(first) = answers.first() {
                    found.push(verified(Finding::NotDelivered, cycle_attempts, first));
                }
            }
        }
        if !found.is_empty() {
            by_entry.entry(id).or_default().extend(found);
        }
    }
    by_entry
}

/// What to do about each entry once its answers are in, before they are recorded: one
/// rule per answer. An entry with any CANNOT_TELL goes to the out-of-band check, naming
/// what to search for; one answered in full is recorded, after which triage gives RESOLVE
/// (every answer DELIVERED) or REPLAY (a NOT_DELIVERED, attested by the VERIFIED event).
pub fn next_steps(answers: &[Answer], sources: &Sources) -> Vec<(String, String)> {
    let flags = sources.flags();
    let mut by_entry: BTreeMap<&str, Vec<&Answer>> = BTreeMap::new();
    for answer in answers {
        by_entry.entry(&answer.id).or_default().push(answer);
    }
    by_entry
        .into_iter()
        .map(|(id, answers)| {
            let unsettled: Vec<String> = answers
                .iter()
                .filter(|a| a.answer == Delivery::CannotTell)
                .map(|a| {
                    let key = match &a.message_id {
                        Some(message_id) => message_id.clone(),
                        None => crate::model::provider_key(&a.id, a.channel, a.cycle, a.attempt),
                    };
                    format!(
                        "{} {} {key}",
                        a.channel,
                        crate::model::provider_key_name(a.channel)
                    )
                })
                .collect();
            let step = if unsettled.is_empty() {
                let line = CommandLine::unsctl(&["verify"])
                    .operand(crate::model::command::THE_ID, id)
                    .and_then(|line| {
                        flags
                            .iter()
                            .try_fold(line, |line, (flag, value)| line.valued(flag, value))
                    });
                Step::run(line.map(|l| l.words(&["--record", "--confirm"]))).to_string()
            } else {
                let mut unique = unsettled;
                unique.dedup();
                format!(
                    "check out of band (TSG-02 branch 2): search the provider for {}",
                    unique.join(", ")
                )
            };
            (id.to_string(), step)
        })
        .collect()
}

/// What every front end says, up front, of a record named that could not be read (a
/// relay log, a lookup of Slack or PagerDuty): each answer that rests on it says so in
/// its evidence, cut short in a table, and a mistyped path or a revoked token must not
/// pass for a record read.
pub fn unread_line(what: &str) -> String {
    format!(
        "Not read, so no answer rests on it: {}",
        crate::render::sanitize::clean(what)
    )
}

/// What asking found for a set of entries.
#[derive(Debug, Default)]
pub struct Asked {
    pub questions: Vec<Question>,
    pub answers: Vec<Answer>,
    /// The records named that could not be read (relay logs not read to their end, lookups
    /// of Slack or PagerDuty that failed), and why: no answer rests on them.
    pub unread: Vec<String>,
    /// Entries with nothing to ask, and why (not found, not VERIFY, nothing UNCERTAIN).
    pub skipped: Vec<(String, String)>,
}

/// Why an entry named is skipped when the store holds no notification with its id.
const NOT_FOUND: &str = "not found";

impl Asked {
    /// The ids named that the store holds no notification for: each is skipped, and the
    /// run as a whole ends as not found (exit 3), as a bulk resolve or replay does.
    pub fn not_found(&self) -> impl Iterator<Item = &str> {
        self.skipped
            .iter()
            .filter(|(_, why)| why == NOT_FOUND)
            .map(|(id, _)| id.as_str())
    }
}

/// Reads each entry from the store, and asks about every UNCERTAIN channel attempt of
/// those that are VERIFY; one check serves them all.
pub fn ask(
    conn: &crate::db::Db<'_>,
    ids: &[String],
    sources: &Sources,
    now: f64,
) -> crate::db::DbResult<Asked> {
    // The entries are read in one transaction; the records are asked after it ends.
    let mut asked = conn.read_tx(|tx| {
        gather(ids, |id| {
            let Some(row) = queries::read_notification(tx, id)? else {
                return Ok(None);
            };
            let events = queries::read_events(tx, id)?;
            crate::db::DbResult::Ok(Some((row, events)))
        })
    })?;
    (asked.answers, asked.unread) = check(&asked.questions, sources, now);
    Ok(asked)
}

/// The same over any reader of a notification and its events (the store, the API's
/// notification document): the records are asked where this runs, with `sources`.
pub fn ask_with<E>(
    ids: &[String],
    read: impl FnMut(&str) -> Result<Option<(Notification, Vec<Event>)>, E>,
    sources: &Sources,
    now: f64,
) -> Result<Asked, E> {
    let mut asked = gather(ids, read)?;
    (asked.answers, asked.unread) = check(&asked.questions, sources, now);
    Ok(asked)
}

/// The questions of the entries `ids` as `read` gives them, and the entries skipped, with
/// no answer yet.
fn gather<E>(
    ids: &[String],
    mut read: impl FnMut(&str) -> Result<Option<(Notification, Vec<Event>)>, E>,
) -> Result<Asked, E> {
    let mut asked = Asked::default();
    for id in ids {
        let Some((row, events)) = read(id)? else {
            asked.skipped.push((id.clone(), NOT_FOUND.into()));
            continue;
        };
        let history = History::read(&row, events.iter().map(Observed::from_event));
        let verdict = triage::judge(&row, &history);
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
        let found = questions(&history, &verdict);
        if found.is_empty() {
            asked.skipped.push((
                id.clone(),
                "VERIFY because evidence could not be read, not because a provider's answer is unknown: check it by hand (`unsctl inspect`)".into(),
            ));
        }
        asked.questions.extend(found);
    }
    Ok(asked)
}

/// Records the answers of `asked` that are not CANNOT_TELL, each entry as
/// [`crate::remediation::verified::record_each`] does, as read `read_on`.
pub fn record(
    conn: &crate::db::Db<'_>,
    now: f64,
    asked: &Asked,
    actor: &Actor,
    why: crate::remediation::verified::Why<'_>,
    read_on: crate::remediation::verified::ReadOn,
) -> Vec<Result<Written, (String, Rejection)>> {
    let entries: Vec<(String, Vec<Verified>)> = findings(&asked.answers, &asked.questions)
        .into_iter()
        .collect();
    crate::remediation::verified::record_each(conn, now, &entries, actor, why, read_on)
}

#[cfg(test)]
mod tests;
