//! A remediation carried out in order, whichever front end drives it: arranged first
//! (the canary apart, the rest at the pace asked), then run by [`drive`]: the canary,
//! the wait on it, the stop rule, the rest, and the wait on the replays. The front end
//! says how each step is shown ([`Steps`]): the command line prints lines, the live
//! screen keeps a progress line; neither orders the steps itself.

use super::Intent;
use super::canary::{Plan, not_delivered, pick};
use super::outcome::{Outcome, Skip};
use super::pace::{self, Pace};
use super::wait::Waited;
use crate::remediation::Action;
use std::time::Duration;

/// Arranges `intents` as asked: with `canary`, that many replays (spread over the causes)
/// apart, to run first; the rest paced at `pace`. Without a canary (or none to pick) every
/// entry is "the rest". `timeout` is how long the canary is waited on.
pub fn arrange(
    intents: Vec<Intent>,
    canary: Option<u16>,
    pace: Option<Pace>,
    timeout: Duration,
) -> Result<Plan, String> {
    let chosen = canary
        .map(|n| pick(&intents, usize::from(n)))
        .unwrap_or_default();
    let mut plan = Plan::split(intents, &chosen, timeout);
    pace::apply(&mut plan.rest, pace)?;
    Ok(plan)
}

/// Which wait a front end is showing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    /// The canary's replays, before anything else is changed.
    Canary,
    /// Every replay of the run, after the rest was carried out.
    Replays,
}

/// How a front end carries out and waits, step by step.
pub trait Steps {
    type Error;
    /// Carries `intents` out in order (through [`super::carry_out`]); fewer outcomes
    /// than intents when it was stopped.
    fn carry(&mut self, intents: &[Intent]) -> Result<Vec<Outcome>, Self::Error>;
    /// Waits for `sent` (each a notification and the REPLAYED event its replay wrote) to
    /// settle, at most the plan's timeout.
    fn wait(&mut self, sent: &[(String, i64)], stage: Stage) -> Result<Waited, Self::Error>;
    /// The canary was delivered: the rest goes next.
    fn canary_passed(&mut self, _waited: &Waited, _plan: &Plan) -> Result<(), Self::Error> {
        Ok(())
    }
    /// Everything was carried out (`outcomes`, the canary's first), before any wait on
    /// the replays.
    fn carried(&mut self, _outcomes: &[Outcome]) -> Result<(), Self::Error> {
        Ok(())
    }
}

/// How a run ended.
pub enum Ran {
    /// Carried out (all of it, or what ran before a stop): each outcome in the plan's
    /// order, the canary's first, and the wait on the replays when one was asked for.
    Carried {
        outcomes: Vec<Outcome>,
        waited: Option<Waited>,
    },
    /// The canary's wait was stopped (Ctrl-C, or Esc on the screen): nothing after it was
    /// changed.
    CanaryInterrupted {
        outcomes: Vec<Outcome>,
        waited: Waited,
    },
    /// A canary was not delivered: the rest were skipped and not touched. Each canary not
    /// delivered in a line.
    CanaryFailed {
        outcomes: Vec<Outcome>,
        failed: Vec<String>,
        waited: Waited,
    },
}

impl Ran {
    /// Every outcome, in the plan's order.
    pub fn outcomes(&self) -> &[Outcome] {
        match self {
            Ran::Carried { outcomes, .. }
            | Ran::CanaryInterrupted { outcomes, .. }
            | Ran::CanaryFailed { outcomes, .. } => outcomes,
        }
    }
}

/// Runs `plan` with `steps`: the canary first, waited on, and the rest only once every
/// canary was delivered; then, when `wait` is asked, the wait on every replay of the rest
/// (the canary's settled already). Entries the preview refused end as their refusal.
pub fn drive<S: Steps>(plan: &Plan, wait: bool, steps: &mut S) -> Result<Ran, S::Error> {
    let mut outcomes = Vec::new();
    if !plan.canary.is_empty() {
        let first = steps.carry(&plan.canary)?;
        let sent = super::carried_out(plan.canary.iter().zip(&first));
        let waited = steps.wait(&sent, Stage::Canary)?;
        let stopped_early = first.len() < plan.canary.len();
        if waited.stopped || stopped_early {
            return Ok(Ran::CanaryInterrupted {
                outcomes: first,
                waited,
            });
        }
        let failed = not_delivered(&plan.canary, &first, &waited);
        if !failed.is_empty() {
            let mut outcomes = first;
            outcomes.extend(
                plan.rest
                    .iter()
                    .map(|_| Outcome::Skipped(Skip::CanaryNotDelivered)),
            );
            return Ok(Ran::CanaryFailed {
                outcomes,
                failed,
                waited,
            });
        }
        steps.canary_passed(&waited, plan)?;
        outcomes = first;
    }
    let second = steps.carry(&plan.rest)?;
    let replays = super::carried_out(
        plan.rest
            .iter()
            .zip(&second)
            .filter(|(intent, _)| intent.action == Action::Replay),
    );
    outcomes.extend(second);
    steps.carried(&outcomes)?;
    let waited = if wait && !replays.is_empty() {
        Some(steps.wait(&replays, Stage::Replays)?)
    } else {
        None
    };
    Ok(Ran::Carried { outcomes, waited })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::Blocked;
    use crate::session::wait::Settlement;

    /// Steps that record what was asked and settle each replay as `delivered` says.
    struct Script {
        delivered: fn(&str) -> bool,
        carried: Vec<Vec<String>>,
        waited: Vec<(Vec<String>, Stage)>,
    }

    impl Steps for Script {
        type Error = String;
        fn carry(&mut self, intents: &[Intent]) -> Result<Vec<Outcome>, String> {
            self.carried
                .push(intents.iter().map(|i| i.id.clone()).collect());
            Ok(intents
                .iter()
                .enumerate()
                .map(|(k, _)| Outcome::Done {
                    event_id: k as i64 + 1,
                    channels: Default::default(),
                })
                .collect())
        }
        fn wait(&mut self, sent: &[(String, i64)], stage: Stage) -> Result<Waited, String> {
            self.waited
                .push((sent.iter().map(|(id, _)| id.clone()).collect(), stage));
            Ok(Waited {
                done: sent
                    .iter()
                    .map(|(id, _)| Settlement {
                        id: id.clone(),
                        status: "DELIVERED".into(),
                        delivered: (self.delivered)(id),
                        outstanding: None,
                        settled: true,
                        error_message: None,
                        seconds: Some(0.0),
                        unclaimed: false,
                    })
                    .collect(),
                unsettled: 0,
                stopped: false,
            })
        }
    }

    fn replays(n: usize) -> Vec<Intent> {
        (0..n)
            .map(|k| {
                let mut intent = Intent::blocked(
                    &format!("n-{k}"),
                    Action::Replay,
                    None,
                    Blocked::NotFound(String::new()),
                );
                intent.preview = Ok(crate::remediation::Approved {
                    action: Action::Replay,
                    channels: Default::default(),
                    overridden: Vec::new(),
                });
                intent
            })
            .collect()
    }

    #[test]
    fn a_canary_runs_first_and_a_failed_one_stops_the_run() {
        let plan = arrange(replays(5), Some(1), None, Duration::from_secs(5)).unwrap();
        assert_eq!(plan.canary.len(), 1);
        let mut script = Script {
            delivered: |_| false,
            carried: Vec::new(),
            waited: Vec::new(),
        };
        let ran = drive(&plan, true, &mut script).unwrap();
        assert!(matches!(ran, Ran::CanaryFailed { ref failed, .. } if failed.len() == 1));
        assert_eq!(
            script.carried,
            [vec!["n-0".to_string()]],
            "nothing else ran"
        );
        assert_eq!(ran.outcomes().len(), 5, "the rest are skipped, one each");
        let mut script = Script {
            delivered: |_| true,
            carried: Vec::new(),
            waited: Vec::new(),
        };
        let ran = drive(&plan, true, &mut script).unwrap();
        assert!(matches!(
            ran,
            Ran::Carried {
                waited: Some(_),
                ..
            }
        ));
        assert_eq!(script.carried.len(), 2);
        assert_eq!(script.carried[1].len(), 4);
        assert_eq!(
            script.waited.iter().map(|w| w.1).collect::<Vec<_>>(),
            [Stage::Canary, Stage::Replays]
        );
    }

    #[test]
    fn without_a_canary_everything_is_the_rest_and_paced() {
        let pace = Pace::parse("2/s").unwrap();
        let plan = arrange(replays(3), None, pace, Duration::from_secs(5)).unwrap();
        assert!(plan.canary.is_empty() && plan.words().is_empty());
        let offsets: Vec<Option<f64>> = plan.rest.iter().map(|i| i.offset).collect();
        assert_eq!(offsets, [Some(0.0), Some(0.5), Some(1.0)]);
        assert_eq!(Pace::parse(""), Ok(None));
        assert_eq!(Pace::parse("over 30m"), Ok(Some(Pace::Spread(1800.0))));
        assert!(Pace::parse("fast").is_err());
    }
}
