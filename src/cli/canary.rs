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
use crate::session::Intent;
use crate::session::canary::{Plan, not_delivered, pick};
use crate::session::outcome::{Outcome, Skip};
use crate::session::pace::{self, Pace};
use crate::store::Store;

/// How the command line carries a remediation out, by its flags: the confirmation, the
/// wait and canary, the pace, what the prompt calls it, and PagerDuty's API for what a
/// replay's trigger would do there.
#[derive(Clone, Copy)]
pub struct How<'a> {
    pub confirm: &'a ConfirmArgs,
    pub wait: &'a WaitArgs,
    pub pace: Option<Pace>,
    pub verb: &'a str,
    pub pagerduty: Option<&'a crate::verify::pagerduty::Api>,
}

/// Carries out `intents` (replays, with `apply` resolves too) the way the flags say:
/// at `pace`, waited on with `--wait`, and behind a canary with `--canary`.
pub fn carry_out(
    store: &dyn Store,
    mut intents: Vec<Intent>,
    how: &How<'_>,
    out: &Output,
) -> CliResult {
    let How {
        confirm,
        wait,
        pace,
        verb,
        pagerduty,
    } = *how;
    let Some(n) = wait.canary else {
        pace::apply(&mut intents, pace).map_err(CliError::usage)?;
        return carry_out_waited(store, intents, how, out);
    };
    let (every, timeout) = wait.checked()?;
    let chosen = pick(&intents, usize::from(n));
    if chosen.is_empty() {
        pace::apply(&mut intents, pace).map_err(CliError::usage)?;
        return carry_out_waited(store, intents, how, out);
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

/// The canary was not delivered: the rest are reported skipped, nothing else is changed,
/// and the run exits 1 with the account.
fn stop_after_canary(
    store: &dyn Store,
    plan: &Plan,
    first: Vec<Outcome>,
    failed: &[String],
    waited: &crate::session::wait::Waited,
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
    how: &How<'_>,
    out: &Output,
) -> CliResult {
    let How {
        confirm,
        wait,
        verb,
        pagerduty,
        ..
    } = *how;
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
    canary: crate::session::wait::WaitDocument<'a>,
}
