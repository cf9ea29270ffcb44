//! `--canary N` on `replay` and `apply`: an outage-scale replay goes first to a few
//! entries, spread over the causes selected, and on to the rest only once every one of
//! those was delivered. A cause still refusing stops the run after the canary, with
//! nothing else changed; the API's replay is the same call either way (the CLI drives).

use super::act::{self, Go};
use super::args::{ConfirmArgs, WaitArgs};
use super::error::{CliError, CliResult};
use super::follow;
use crate::render::output::{Output, counted, status};
use crate::session::Intent;
use crate::session::canary::Plan;
use crate::session::outcome::Outcome;
use crate::session::pace::{self, Pace};
use crate::session::run::{self, Ran, Stage, Steps};
use crate::session::wait::Waited;
use crate::store::Store;
use std::time::Duration;

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
/// at `pace`, waited on with `--wait`, and behind a canary with `--canary`. The order of
/// the steps is the library's ([`run::drive`]); this prints them.
pub fn carry_out(
    store: &dyn Store,
    intents: Vec<Intent>,
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
    let (every, timeout) = if wait.wait || wait.canary.is_some() {
        wait.checked()?
    } else {
        (
            Duration::from_secs(1),
            Duration::from_secs_f64(wait.timeout),
        )
    };
    let plan = run::arrange(intents, wait.canary, pace, timeout).map_err(CliError::usage)?;
    let all: Vec<Intent> = plan.all().cloned().collect();
    if let Go::Stop(result) =
        act::present(store, &all, confirm, out, verb, &plan.words(), pagerduty)?
    {
        return result;
    }
    let mut steps = Printed {
        store,
        out,
        every,
        timeout,
        pacing: pace::expected(&plan.rest),
        all: &all,
        acted: None,
    };
    match run::drive(&plan, wait.wait, &mut steps)? {
        Ran::CanaryInterrupted { waited, .. } => {
            status(&format!(
                "\nstopped (Ctrl-C) while waiting on the canary: {}; nothing else was changed",
                waited.account(timeout)
            ));
            Err(crate::cli::prompt::interrupted_quietly())
        }
        Ran::CanaryFailed {
            outcomes,
            failed,
            waited,
        } => stop_after_canary(store, &plan, &all, &outcomes, &failed, &waited, out),
        Ran::Carried { waited, .. } => {
            let acted = steps.acted.unwrap_or(Ok(()));
            match waited {
                Some(waited) => acted.and(follow::judge(&waited, timeout, out)),
                None => acted,
            }
        }
    }
}

/// The command line's steps: each outcome a line, each settlement a line, the results
/// and the summary once the rest is carried out.
struct Printed<'a> {
    store: &'a dyn Store,
    out: &'a Output,
    every: Duration,
    timeout: Duration,
    /// The pace in words and when its last replay is due, for the wait's progress.
    pacing: Option<(String, f64)>,
    all: &'a [Intent],
    /// What the carry-out exits with (a refusal among the entries), before any wait.
    acted: Option<CliResult>,
}

impl Steps for Printed<'_> {
    type Error = CliError;

    fn carry(&mut self, intents: &[Intent]) -> CliResult<Vec<Outcome>> {
        act::execute_all(self.store, intents, self.out)
    }

    fn wait(&mut self, sent: &[(String, i64)], stage: Stage) -> CliResult<Waited> {
        let pacing = match stage {
            Stage::Canary => None,
            Stage::Replays => self.pacing.as_ref().map(|(w, last)| (w.as_str(), *last)),
        };
        let waited =
            follow::wait_settled(self.store, sent, self.every, self.timeout, pacing, self.out)?;
        if stage == Stage::Canary {
            self.out.closing_line(&CanaryDocument {
                canary: waited.document(),
            })?;
        }
        Ok(waited)
    }

    fn canary_passed(&mut self, waited: &Waited, plan: &Plan) -> CliResult {
        status(&format!(
            "Canary: {}; carrying on with the other {}.",
            waited.account(self.timeout),
            counted(plan.rest_actionable() as i64, "entry")
        ));
        Ok(())
    }

    fn carried(&mut self, outcomes: &[Outcome]) -> CliResult {
        act::print_results(self.out, &self.all[..outcomes.len()], outcomes, false)?;
        self.acted = Some(act::finish(&self.store.describe(), outcomes));
        Ok(())
    }
}

/// The canary was not delivered: the rest are reported skipped, nothing else is changed,
/// and the run exits 1 with the account.
fn stop_after_canary(
    store: &dyn Store,
    plan: &Plan,
    all: &[Intent],
    outcomes: &[Outcome],
    failed: &[String],
    waited: &Waited,
    out: &Output,
) -> CliResult {
    act::print_results(out, all, outcomes, false)?;
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
        if rest == 1 { "was" } else { "are" },
        if rest == 1 { "is" } else { "are" },
    ));
    Err(CliError::error("the canary was not delivered: nothing else was replayed").hint(
        "`unsctl inspect ID` shows what still refuses; once it is fixed, the same command replays the rest (`dlq triage --error-code CODE` narrows to one cause)",
    ))
}

/// The JSON line the canary's wait ends with.
#[derive(serde::Serialize)]
struct CanaryDocument<'a> {
    canary: crate::session::wait::WaitDocument<'a>,
}
