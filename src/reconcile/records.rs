//! The providers' own records, read once for a whole reconciliation: one pass over the
//! relay logs for every EMAIL attempt's Message-ID, Slack's channel history over the span
//! of every SLACK attempt, and PagerDuty's incidents per dedup key. Each is read by the
//! rules of evidence of DESIGN §7; anything short of them is named, never counted.

use super::{IncidentWord, ProvenIncident, RelayWord, SlackWord, window_text};
use crate::clock;
use crate::history::{Attempt, History};
use crate::model::{Channel, MessageId};
use crate::verify::{self, Bearing, Logs, Sources, pagerduty, slack};
use std::collections::HashMap;

/// Most PagerDuty lookups in flight at once.
const PAGERDUTY_THREADS: usize = 8;

pub struct Records {
    sources: Sources,
    logs: Option<Logs>,
    slack: Option<Result<slack::Window, String>>,
    incidents: HashMap<String, Result<Vec<pagerduty::Incident>, String>>,
    secrets: crate::redact::Secrets,
    /// Whether the records were read before the histories were walked (for a first
    /// pass over them, or the window's starts): an attempt that reading did not see
    /// started after it.
    searched: bool,
}

/// What the records are asked about, collected from the histories one at a time.
#[derive(Debug, Default, PartialEq)]
pub struct Needs {
    /// Every EMAIL attempt's Message-ID, with when it started.
    message_ids: Vec<(f64, String)>,
    /// When the SLACK attempts began and ended.
    slack_span: Option<(f64, f64)>,
    /// The dedup keys of the notifications with PAGERDUTY attempts.
    pagerduty_keys: Vec<String>,
}

impl Needs {
    /// Whether `sources` name any record at all: without one, nothing is collected.
    pub fn wanted(sources: &Sources) -> bool {
        !sources.relay_logs.is_empty() || sources.slack.is_some() || sources.pagerduty.is_some()
    }

    /// Whether the relay logs are the only records `sources` name: those can be asked
    /// about every attempt of the window's notifications before a history is read
    /// ([`Records::gather_for_window`]), where Slack's span needs the leases and
    /// PagerDuty is asked per notification with an attempt on it.
    pub fn relay_logs_alone(sources: &Sources) -> bool {
        !sources.relay_logs.is_empty() && sources.slack.is_none() && sources.pagerduty.is_none()
    }

    /// The events a history must be read with for [`Needs::add`]: the attempts', and
    /// the claims too when Slack is asked over the span of every attempt, which ends
    /// with its lease.
    pub fn events(sources: &Sources) -> crate::store::Events<'static> {
        crate::store::Events::Kinds(if sources.slack.is_some() {
            crate::history::ATTEMPT_WINDOW_KINDS
        } else {
            crate::history::ATTEMPT_KINDS
        })
    }

    /// Adds what `history`'s attempts ask of the records `sources` name.
    pub fn add(&mut self, history: &History, sources: &Sources) {
        if !sources.relay_logs.is_empty()
            && let Some(part) = history.by_channel.get(&Channel::Email)
        {
            self.message_ids
                .extend(part.attempts.iter().filter(|a| a.attempt >= 0).map(|a| {
                    (
                        a.started,
                        MessageId::new(&history.id, a.cycle, a.attempt).to_string(),
                    )
                }));
        }
        if sources.slack.is_some()
            && let Some(part) = history.by_channel.get(&Channel::Slack)
        {
            for a in &part.attempts {
                self.slack_span = Some(match self.slack_span {
                    None => (a.started, a.ended),
                    Some((from, to)) => (from.min(a.started), to.max(a.ended)),
                });
            }
        }
        if sources.pagerduty.is_some()
            && history
                .by_channel
                .get(&Channel::Pagerduty)
                .is_some_and(|p| !p.attempts.is_empty())
        {
            self.pagerduty_keys.push(history.id.clone());
        }
    }
}

impl Records {
    /// No provider record at all: the history alone.
    pub fn none(sources: Sources) -> Self {
        // No token a provider's answer echoes is ever repeated in evidence.
        let mut secrets = crate::redact::Secrets::new();
        if let Some(config) = &sources.pagerduty {
            secrets.add(&config.token);
        }
        if let Some(config) = &sources.slack {
            secrets.add(&config.token);
        }
        Self {
            sources,
            logs: None,
            slack: None,
            incidents: HashMap::new(),
            secrets,
            searched: false,
        }
    }

    /// Reads every record `sources` names about the attempts `needs` collected.
    pub fn gather(needs: Needs, sources: Sources, now: f64) -> Self {
        let mut records = Self::none(sources);
        let sources = &records.sources;
        records.logs = Logs::read_for(
            needs
                .message_ids
                .iter()
                .map(|(at, m)| (*at, m.as_str()))
                .collect(),
            sources,
        );
        let wants_http = (needs.slack_span.is_some() && sources.slack.is_some())
            || (!needs.pagerduty_keys.is_empty() && sources.pagerduty.is_some());
        if wants_http {
            let client = verify::http::client();
            if let (Some(config), Some((from, to))) = (&sources.slack, needs.slack_span) {
                let skew = sources.skew;
                records.slack = Some(match &client {
                    Ok(client) => slack::history(client, config, from - skew, (to + skew).max(now)),
                    Err(err) => Err(err.clone()),
                });
            }
            if let Some(config) = &sources.pagerduty {
                let keys: Vec<&str> = needs.pagerduty_keys.iter().map(String::as_str).collect();
                records.incidents = ask_pagerduty(client.as_ref(), config, &keys);
            }
        }
        records.searched = true;
        records
    }

    /// Reads the relay logs, the only records `sources` name, for every attempt of the
    /// notifications that made the window's `starts`: no history need be read first.
    pub fn gather_for_window(starts: crate::store::WindowStarts, sources: Sources) -> Self {
        let mut records = Self::none(sources);
        records.logs = Logs::read_for_window(starts.notifications, starts.at, &records.sources);
        records.searched = true;
        records
    }

    /// Records already read: Slack's window and PagerDuty's incidents by key (tests).
    #[cfg(test)]
    pub fn read_already(
        sources: Sources,
        slack: Option<Result<slack::Window, String>>,
        incidents: HashMap<String, Result<Vec<pagerduty::Incident>, String>>,
    ) -> Self {
        Self {
            slack,
            incidents,
            ..Self::none(sources)
        }
    }

    pub fn skew(&self) -> f64 {
        self.sources.skew
    }

    /// Provider text as evidence shows it: secrets redacted, made safe for a terminal.
    fn shown(&self, text: &str) -> String {
        crate::render::sanitize::clean(&self.secrets.redact(text)).into_owned()
    }

    /// The relay log's word on `message_id`, sent by `attempt`; None without a log.
    pub fn relay(&self, message_id: &str, attempt: &Attempt, now: f64) -> Option<RelayWord> {
        let findings = match self.logs.as_ref()?.for_message(message_id, attempt.started) {
            Ok(findings) => findings,
            Err(unsearched) => {
                return Some(RelayWord {
                    committed: Vec::new(),
                    outcome: verify::Delivery::CannotTell,
                    text: unsearched.to_string(),
                });
            }
        };
        let window = (
            attempt.started - self.sources.skew,
            attempt.ended + self.sources.skew,
        );
        let question = crate::history::InDoubt {
            attempt: attempt.attempt,
            message_id: Some(message_id.to_string()),
            sender: attempt.sender.clone(),
            relay: attempt.relay.clone(),
            started: attempt.started,
            ended: attempt.ended,
        };
        let ours = verify::senders(&question, &self.sources);
        // One queue id once: a log and another holding the same lines (syslog beside
        // mail.log) show one message twice.
        let mut committed: Vec<(String, f64)> = Vec::new();
        let mut shown = Vec::new();
        for message in findings.seen(message_id) {
            if matches!(verify::bearing(message, &ours, window), Bearing::Committed)
                && !shown.contains(&(&message.host, &message.queue_id))
            {
                shown.push((&message.host, &message.queue_id));
                committed.push((message.queue_id.clone(), message.at.lo));
            }
        }
        let (outcome, text) =
            verify::email_answer(message_id, &question, findings, &self.sources, now);
        Some(RelayWord {
            committed,
            outcome,
            text: self.shown(&text),
        })
    }

    /// Of the records that could settle attempts on `channels`, those not given, each as
    /// the flag or variables that give it: none when every one was.
    pub fn not_given(&self, channels: &crate::model::ChannelSet) -> Vec<&'static str> {
        use crate::model::Channel;
        channels
            .iter()
            .filter_map(|channel| match channel {
                Channel::Email if self.sources.relay_logs.is_empty() => Some("--relay-log"),
                Channel::Slack if self.sources.slack.is_none() => {
                    Some("UNS_SLACK_BOT_TOKEN and UNS_SLACK_CHANNEL")
                }
                Channel::Pagerduty if self.sources.pagerduty.is_none() => {
                    Some("UNS_PAGERDUTY_API_TOKEN")
                }
                _ => None,
            })
            .collect()
    }

    /// The records named that could not be read (a relay log not read to its end, Slack's
    /// history, PagerDuty's incidents for a key), and why: each row that rests on one says
    /// so; a front end says it once up front too, where a mistyped path or a revoked
    /// token is seen.
    pub fn unread(&self) -> Vec<String> {
        let mut unread = self.unread_whole();
        unread.extend(self.pagerduty_lookups().unread());
        unread
    }

    /// [`Records::unread`] but PagerDuty's lookups, which are one per key: the records
    /// read whole (the relay logs, Slack's history).
    pub fn unread_whole(&self) -> Vec<String> {
        let mut unread = self.logs.as_ref().map(Logs::problems).unwrap_or_default();
        if let Some(Err(err)) = &self.slack {
            unread.push(self.shown(err));
        }
        unread
    }

    /// The lookups of PagerDuty's incidents, one per key, and why each that failed did.
    pub fn pagerduty_lookups(&self) -> verify::Lookups {
        let failed = self
            .incidents
            .values()
            .filter_map(|found| found.as_ref().err());
        verify::Lookups::of(self.incidents.len(), failed.map(|err| self.shown(err)))
    }

    pub fn no_relay_log(&self) -> String {
        "no relay log was read (give one with --relay-log PATH)".into()
    }

    pub fn no_slack(&self) -> String {
        "Slack's history was not read (set UNS_SLACK_BOT_TOKEN and UNS_SLACK_CHANNEL)".into()
    }

    pub fn no_pagerduty(&self) -> String {
        "PagerDuty's incidents were not read (set UNS_PAGERDUTY_API_TOKEN)".into()
    }

    /// The messages in Slack's history that carry `key`, by the rules of evidence.
    pub fn slack_messages(&self, key: &str, (from, to): (f64, f64), now: f64) -> Option<SlackWord> {
        let config = self.sources.slack.as_ref()?;
        let window = match self.slack.as_ref()? {
            Ok(window) => window,
            Err(err) => {
                return Some(SlackWord {
                    proven: Vec::new(),
                    complete: false,
                    text: self.shown(err),
                });
            }
        };
        let mut proven = Vec::new();
        let mut doubts: Vec<String> = window
            .doubts_within((from, to))
            .iter()
            .map(|doubt| self.shown(doubt))
            .collect();
        for message in window.tagged.iter().filter(|m| m.idempotency_key == key) {
            match slack::proof(message, key, config, (from, to)) {
                Ok(at) => proven.push((self.shown(&message.ts), at)),
                Err(doubt) => doubts.push(self.shown(&doubt)),
            }
        }
        proven.sort_by(|a, b| a.1.total_cmp(&b.1));
        let complete = doubts.is_empty() && to <= now;
        let text = if !doubts.is_empty() {
            doubts.join("; ")
        } else if to > now {
            format!(
                "the attempts' window ends at {}, not yet past: a message may still show",
                clock::rfc3339(to)
            )
        } else {
            format!(
                "Slack's history of {} from {} holds {} message(s) with Idempotency-Key {key} ({} messages read, every page)",
                self.shown(&config.channel),
                window_text(from, to),
                proven.len(),
                window.read
            )
        };
        Some(SlackWord {
            proven,
            complete,
            text,
        })
    }

    /// The incidents PagerDuty opened for dedup key `key` inside any of `windows`.
    pub fn incidents(&self, key: &str, windows: &[(f64, f64)], now: f64) -> Option<IncidentWord> {
        self.sources.pagerduty.as_ref()?;
        let Some(listed) = self.incidents.get(key) else {
            return self.searched.then(|| IncidentWord {
                proven: Vec::new(),
                complete: false,
                text: "its attempts started after PagerDuty was asked: reconcile again".into(),
            });
        };
        let listed = match listed {
            Ok(listed) => listed,
            Err(err) => {
                return Some(IncidentWord {
                    proven: Vec::new(),
                    complete: false,
                    text: self.shown(err),
                });
            }
        };
        let mut proven = Vec::new();
        let mut doubts = Vec::new();
        for incident in listed {
            let standings: Vec<pagerduty::Standing> = windows
                .iter()
                .map(|w| pagerduty::standing(incident, key, *w, now))
                .collect();
            if standings.contains(&pagerduty::Standing::Opened) {
                let created = incident.proof_time().unwrap_or_default();
                proven.push(ProvenIncident {
                    name: self.shown(&incident_name(incident)),
                    created,
                    describe: self.shown(&incident.describe()),
                    service: incident
                        .service
                        .as_ref()
                        .and_then(|s| s.summary.as_deref())
                        .map(|s| self.shown(s)),
                });
            } else if standings.contains(&pagerduty::Standing::MergedInto) {
                // Opened before the attempts by an earlier trigger of the same key, and
                // counted there if that trigger is this notification's.
                continue;
            } else if let Some(pagerduty::Standing::Doubt(why)) = standings.into_iter().next() {
                doubts.push(self.shown(&why));
            }
        }
        proven.sort_by(|a, b| a.created.total_cmp(&b.created));
        let last = windows
            .iter()
            .map(|w| w.1)
            .fold(f64::NEG_INFINITY, f64::max);
        let complete = doubts.is_empty() && last <= now;
        let text = if !doubts.is_empty() {
            doubts.join("; ")
        } else if last > now {
            format!(
                "the attempts' window ends at {}, not yet past: an incident may still show",
                clock::rfc3339(last)
            )
        } else {
            format!(
                "PagerDuty lists {} incident(s) with incident_key {key} opened by its triggers (every page read, all dates)",
                proven.len()
            )
        };
        Some(IncidentWord {
            proven,
            complete,
            text,
        })
    }

    /// Who `channel`'s copies went to.
    pub fn recipient(&self, history: &History, channel: Channel) -> Option<String> {
        match channel {
            Channel::Email => history.recipient.as_deref().map(|r| self.shown(r)),
            Channel::Slack => self.sources.slack.as_ref().map(|c| self.shown(&c.channel)),
            Channel::Pagerduty => self
                .incidents
                .get(&history.id)?
                .as_ref()
                .ok()?
                .iter()
                .find_map(|i| i.service.as_ref()?.summary.as_deref())
                .map(|s| self.shown(s)),
        }
    }
}

fn incident_name(incident: &pagerduty::Incident) -> String {
    match (&incident.id, incident.incident_number) {
        (Some(id), Some(n)) => format!("{id} (#{n})"),
        (Some(id), None) => id.clone(),
        (None, Some(n)) => format!("#{n}"),
        (None, None) => "(no id)".into(),
    }
}

/// Every key's incidents, a few lookups at a time.
fn ask_pagerduty(
    client: Result<&verify::http::Client, &String>,
    config: &pagerduty::Api,
    keys: &[&str],
) -> HashMap<String, Result<Vec<pagerduty::Incident>, String>> {
    let client = match client {
        Ok(client) => client,
        Err(err) => {
            return keys
                .iter()
                .map(|k| (k.to_string(), Err(err.clone())))
                .collect();
        }
    };
    let chunk = keys.len().div_ceil(PAGERDUTY_THREADS).max(1);
    std::thread::scope(|scope| {
        let handles: Vec<_> = keys
            .chunks(chunk)
            .map(|keys| {
                scope.spawn(move || {
                    keys.iter()
                        .map(|k| (k.to_string(), pagerduty::incidents(client, config, k)))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        let mut found: HashMap<String, Result<Vec<pagerduty::Incident>, String>> = handles
            .into_iter()
            .flat_map(|h| h.join().unwrap_or_default())
            .collect();
        for key in keys {
            found
                .entry(key.to_string())
                .or_insert_with(|| Err("the PagerDuty lookup failed".into()));
        }
        found
    })
}
