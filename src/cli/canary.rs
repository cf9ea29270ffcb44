//! `--canary N` on `replay` and `apply`: an outage-scale replay goes first to a few
//! entries, spread over the causes selected, and on to the rest only once every one of
//! those was delivered. A cause still refusing stops the run after the canary, with
//! nothing else changed; the API's replay is the same call either way (the CLI drives).

use super::act::{self, Go};
use super::args::{ConfirmArgs, WaitArgs};
use super::error::{CliError, CliResult};
use super::follow;
use crate::remediation::Action;
use crate::render::output::{Output, counted, status};
use crate::render::views;
use crate::session::Intent;
use crate::session::outcome::{Outcome, Skip};
use crate::session::pace::{self, Pace};
use crate::store::Store;
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
fn not_delivered(canary: &[Intent], first: &[Outcome], waited: &follow::Waited) -> Vec<String> {
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

/// Carries out `intents` (replays, with `apply` resolves too) the way the flags say:
/// at `pace`, waited on with `--wait`, and behind a canary with `--canary`.
pub fn carry_out(
    store: &dyn Store,
    mut intents: Vec<Intent>,
    confirm: &ConfirmArgs,
    wait: &WaitArgs,
    pace: Option<Pace>,
    out: &Output,
    verb: &str,
    pagerduty: Option<&crate::verify::pagerduty::Api>,
) -> CliResult {
    let Some(n) = wait.canary else {
        pace::apply(&mut intents, pace).map_err(CliError::usage)?;
        return carry_out_waited(store, intents, confirm, wait, out, verb, pagerduty);
    };
    let (every, timeout) = wait.checked()?;
    let chosen = pick(&intents, usize::from(n));
    if chosen.is_empty() {
        pace::apply(&mut intents, pace).map_err(CliError::usage)?;
        return carry_out_waited(store, intents, confirm, wait, out, verb, pagerduty);
    }
    let mut plan = Plan::split(intents, &chosen, timeout);
    pace::apply(&mut plan.rest, pace).map_err(CliError::usage)?;
    let intents: Vec<Intent> = plan.canary.iter().chain(&plan.rest).cloned().collect();
    if let Go::Stop(result) = act::present(
        store,
        &intents,
        confirm,
        out,
        verb,
        &plan.words(),
        pagerduty,
    )? {
        return result;
    }
    let first = act::execute_all(store, &plan.canary, out)?;
    let sent = crate::session::carried_out(plan.canary.iter().zip(&first));
    let waited = follow::wait_settled(store, &sent, every, timeout, None, out)?;
    out.closing_line(&CanaryDocument {
        canary: waited.document(),
    })?;
    if waited.stopped {
        status(&format!(
            "\nstopped (Ctrl-C) while waiting on the canary: {}; nothing else was changed",
            waited.account(timeout)
        ));
        return Err(crate::cli::prompt::interrupted_quietly());
    }
    let failed = not_delivered(&plan.canary, &first, &waited);
    if !failed.is_empty() {
        return stop_after_canary(store, &plan, first, &failed, &waited, out);
    }
    status(&format!(
        "Canary: {}; carrying on with the other {}.",
        waited.account(timeout),
        counted(plan.rest_actionable() as i64, "entry")
    ));
    let second = act::execute_all(store, &plan.rest, out)?;
    let mut outcomes = first;
    outcomes.extend(second.iter().cloned());
    act::print_results(out, &intents[..outcomes.len()], &outcomes, false)?;
    let acted = act::finish(&store.describe(), &outcomes);
    if !wait.wait {
        return acted;
    }
    let replays = crate::session::carried_out(
        plan.rest
            .iter()
            .zip(&second)
            .filter(|(intent, _)| intent.action == Action::Replay),
    );
    if replays.is_empty() {
        return acted;
    }
    let pacing = pace::expected(&plan.rest);
    let waited = follow::wait_for_delivery_paced(
        store,
        &replays,
        every,
        timeout,
        pacing.as_ref().map(|(words, last)| (words.as_str(), *last)),
        out,
    );
    acted.and(waited)
}

/// The canary and the rest, as planned.
struct Plan {
    canary: Vec<Intent>,
    rest: Vec<Intent>,
    /// Every cause among the replays and how many entries it has, largest first.
    causes: Vec<Cause>,
    timeout: std::time::Duration,
}

/// A cause, and how many of the entries have it.
type Cause = (String, usize);

impl Plan {
    /// The canary (the `chosen` indices) apart from the rest: it runs first and at once;
    /// the rest keep their order, for the pace.
    fn split(intents: Vec<Intent>, chosen: &[usize], timeout: std::time::Duration) -> Self {
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

    /// The entries after the canary that will be acted on.
    fn rest_actionable(&self) -> usize {
        self.rest.iter().filter(|i| i.preview.is_ok()).count()
    }

    /// What the plan and the prompt say of the canary.
    fn words(&self) -> Vec<String> {
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

/// The canary was not delivered: the rest are reported skipped, nothing else is changed,
/// and the run exits 1 with the account.
fn stop_after_canary(
    store: &dyn Store,
    plan: &Plan,
    first: Vec<Outcome>,
    failed: &[String],
    waited: &follow::Waited,
    out: &Output,
) -> CliResult {
    let mut outcomes = first;
    outcomes.extend(
        plan.rest
            .iter()
            .map(|_| Outcome::Skipped(Skip::CanaryNotDelivered)),
    );
    let intents: Vec<Intent> = plan.canary.iter().chain(&plan.rest).cloned().collect();
    act::print_results(out, &intents, &outcomes, false)?;
    status(&format!(
        "Canary: {}. Not delivered:",
        waited.account(plan.timeout)
    ));
    for line in failed {
        status(&format!("  {line}"));
    }
    let rest = plan.rest_actionable();
    status(&format!(
        "{}: stopped after the canary; the other {} {} not touched and {} still in the DLQ.",
        crate::render::sanitize::clean(&store.describe()),
        counted(rest as i64, "entry"),
        if rest == 1 { "was" } else { "were" },
        if rest == 1 { "is" } else { "are" },
    ));
    Err(CliError::error("the canary was not delivered: nothing else was replayed").hint(
        "`unsctl inspect ID` shows what still refuses; once it is fixed, the same command replays the rest (`dlq triage --error-code CODE` narrows to one cause)",
    ))
}

/// Without a canary: carried out in one go, and waited on with `--wait`.
fn carry_out_waited(
    store: &dyn Store,
    intents: Vec<Intent>,
    confirm: &ConfirmArgs,
    wait: &WaitArgs,
    out: &Output,
    verb: &str,
    pagerduty: Option<&crate::verify::pagerduty::Api>,
) -> CliResult {
    if !wait.wait {
        return act::carry_out(store, intents, confirm, out, verb, pagerduty);
    }
    let (every, timeout) = wait.checked()?;
    let pacing = pace::expected(&intents);
    let replays: std::collections::HashSet<String> = intents
        .iter()
        .filter(|i| i.action == Action::Replay)
        .map(|i| i.id.clone())
        .collect();
    let mut done = Vec::new();
    let acted = act::carry_out_into(store, intents, confirm, out, verb, pagerduty, &mut done);
    done.retain(|(id, _)| replays.contains(id));
    if done.is_empty() {
        return acted;
    }
    let waited = follow::wait_for_delivery_paced(
        store,
        &done,
        every,
        timeout,
        pacing.as_ref().map(|(words, last)| (words.as_str(), *last)),
        out,
    );
    // A refusal among the entries outranks what the wait found.
    acted.and(waited)
}

/// The JSON line the canary's wait ends with.
#[derive(serde::Serialize)]
struct CanaryDocument<'a> {
    canary: follow::WaitDocument<'a>,
}
