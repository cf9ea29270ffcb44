//! A canary (`--canary N`, and the live screen's replay): an outage-scale replay goes
//! first to a few entries, spread over the causes selected, and on to the rest only once
//! every one of those was delivered. A cause still refusing stops the run after the
//! canary, with nothing else changed. Both front ends plan and stop by these rules.

use super::Intent;
use super::outcome::Outcome;
use super::wait::Waited;
use crate::remediation::Action;
use crate::render::output::counted;
use crate::render::views;
use crate::triage::ChannelState;
use std::collections::BTreeMap;

/// What the cause of an entry's failure is, for spreading a canary: each channel to be
/// replayed with the code its provider refused it with (`SLACK HTTP 404`, `EMAIL 5.1.1`),
/// or its state when there is no code (`EMAIL UNCERTAIN`).
pub fn cause(intent: &Intent) -> String {
    let (Some(verdict), Ok(approved)) = (&intent.verdict, &intent.preview) else {
        return "-".into();
    };
    let parts: Vec<String> = verdict
        .channels
        .iter()
        .filter(|c| approved.channels.contains(c.channel))
        .map(|c| match (c.state, c.code_group()) {
            (ChannelState::Failed, Some(code)) => format!("{} {code}", c.channel),
            (state, _) => format!("{} {}", c.channel, state.as_str()),
        })
        .collect();
    if parts.is_empty() {
        "-".into()
    } else {
        parts.join(", ")
    }
}

/// The causes among the replays of `intents`, largest first (then in the order met),
/// each with the indices of its entries in order.
fn causes(intents: &[Intent]) -> Vec<(String, Vec<usize>)> {
    let mut groups: Vec<(String, Vec<usize>)> = Vec::new();
    let mut at: BTreeMap<String, usize> = BTreeMap::new();
    for (k, intent) in intents.iter().enumerate() {
        if intent.action != Action::Replay || intent.preview.is_err() {
            continue;
        }
        let key = cause(intent);
        let slot = *at.entry(key.clone()).or_insert_with(|| {
            groups.push((key, Vec::new()));
            groups.len() - 1
        });
        groups[slot].1.push(k);
    }
    groups.sort_by_key(|(_, members)| std::cmp::Reverse(members.len()));
    groups
}

/// The indices of the `n` replays a canary sends: one from each cause in turn, largest
/// cause first, until there are `n` or none is left.
pub fn pick(intents: &[Intent], n: usize) -> Vec<usize> {
    let groups = causes(intents);
    let mut picked = Vec::new();
    let mut round = 0;
    while picked.len() < n {
        let before = picked.len();
        for (_, members) in &groups {
            if picked.len() == n {
                break;
            }
            if let Some(k) = members.get(round) {
                picked.push(*k);
            }
        }
        if picked.len() == before {
            break;
        }
        round += 1;
    }
    picked.sort_unstable();
    picked
}

/// Each canary not delivered, in a line: its id, its cause, and what became of it.
pub fn not_delivered(canary: &[Intent], first: &[Outcome], waited: &Waited) -> Vec<String> {
    canary
        .iter()
        .zip(first)
        .filter_map(|(intent, outcome)| {
            let settled = waited.done.iter().find(|s| s.id == intent.id);
            let why = match (outcome, settled) {
                (Outcome::Done { .. }, Some(s)) if s.delivered => return None,
                (Outcome::Done { .. }, Some(s)) if !s.settled => {
                    format!("still {}", views::shown(&s.status))
                }
                (Outcome::Done { .. }, Some(s)) => match &s.error_message {
                    Some(error) => format!("{}: {}", views::shown(&s.status), views::said(error)),
                    None => views::shown(&s.status),
                },
                (outcome, _) => outcome.label(intent.action),
            };
            Some(format!(
                "{} ({}): {why}",
                views::shown(&intent.id),
                views::shown(&cause(intent))
            ))
        })
        .collect()
}

/// The canary and the rest, as planned.
#[derive(Debug, Clone)]
pub struct Plan {
    pub canary: Vec<Intent>,
    pub rest: Vec<Intent>,
    /// Every cause among the replays and how many entries it has, largest first.
    causes: Vec<Cause>,
    pub timeout: std::time::Duration,
}

/// A cause, and how many of the entries have it.
type Cause = (String, usize);

impl Plan {
    /// The canary (the `chosen` indices) apart from the rest: it runs first and at once;
    /// the rest keep their order, for the pace.
    pub fn split(intents: Vec<Intent>, chosen: &[usize], timeout: std::time::Duration) -> Self {
        let causes = causes(&intents)
            .into_iter()
            .map(|(cause, members)| (cause, members.len()))
            .collect();
        let (canary, rest): (Vec<_>, Vec<_>) = intents
            .into_iter()
            .enumerate()
            .partition(|(k, _)| chosen.binary_search(k).is_ok());
        let strip = |part: Vec<(usize, Intent)>| part.into_iter().map(|(_, i)| i).collect();
        Self {
            canary: strip(canary),
            rest: strip(rest),
            causes,
            timeout,
        }
    }

    /// Every entry, the canary's first: the order they are carried out in.
    pub fn all(&self) -> impl Iterator<Item = &Intent> {
        self.canary.iter().chain(&self.rest)
    }

    /// The entries after the canary that will be acted on.
    pub fn rest_actionable(&self) -> usize {
        self.rest.iter().filter(|i| i.preview.is_ok()).count()
    }

    /// What the plan and the prompt say of the canary (nothing without one).
    pub fn words(&self) -> Vec<String> {
        if self.canary.is_empty() {
            return Vec::new();
        }
        let (covered, uncovered): (Vec<&Cause>, Vec<&Cause>) = self
            .causes
            .iter()
            .partition(|(key, _)| self.canary.iter().any(|i| cause(i) == *key));
        let named = |(key, size): &&Cause| format!("{} ×{size}", views::shown(key));
        let mut lines = vec![format!(
            "Canary: {} first ({}), covering {}: {}.",
            counted(self.canary.len() as i64, "replay"),
            self.canary
                .iter()
                .map(|i| views::shown(&i.id))
                .collect::<Vec<_>>()
                .join(", "),
            counted(covered.len() as i64, "cause"),
            covered.iter().map(named).collect::<Vec<_>>().join("; "),
        )];
        if !uncovered.is_empty() {
            lines.push(format!(
                "No canary for {}: {}.",
                counted(uncovered.len() as i64, "cause"),
                uncovered.iter().map(named).collect::<Vec<_>>().join("; ")
            ));
        }
        lines.push(format!(
            "The other {} only once every canary is delivered (waiting at most {}); one that is not stops the run there.",
            counted(self.rest_actionable() as i64, "entry"),
            crate::render::time::duration(self.timeout.as_secs_f64())
        ));
        lines
    }
}
