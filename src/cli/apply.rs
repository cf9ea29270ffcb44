//! `unsctl apply plan.json`: carry out a triage plan, skipping entries that moved since.

use super::error::{CliError, CliResult};
use super::remediate::{self, AuditArgs, ConfirmArgs, Intent};
use super::{GlobalArgs, backend};
use crate::remediation::Refusal;
use crate::render::output::{print, status};
use crate::store::sqlite::Action;
use crate::triage::Verdict;
use std::path::PathBuf;

/// Apply a plan written by `unsctl dlq triage -o json` (dry run unless --confirm)
///
/// Each entry's `action` (resolve, replay or verify) is carried out; an entry whose
/// history moved since the plan was made is skipped as stale. A VERIFY entry is only
/// acted on once someone sets its action and adds an "attestation" to it.
///
/// Example: unsctl --db uns.db dlq triage -o json > plan.json && unsctl --db uns.db apply plan.json --confirm
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The plan file (`-` for standard input)
    pub plan: PathBuf,
    #[command(flatten)]
    pub audit: AuditArgs,
    #[command(flatten)]
    pub confirm: ConfirmArgs,
}

#[derive(Debug, serde::Deserialize)]
struct Plan {
    entries: Vec<PlanEntry>,
}

#[derive(Debug, serde::Deserialize)]
struct PlanEntry {
    #[serde(flatten)]
    verdict: Verdict,
    /// What the operator wrote down they checked (needed to act on a VERIFY entry).
    #[serde(default)]
    attestation: Option<String>,
}

fn read_plan(path: &PathBuf) -> CliResult<Plan> {
    let text = if path.as_os_str() == "-" {
        std::io::read_to_string(std::io::stdin())?
    } else {
        std::fs::read_to_string(path)
            .map_err(|err| CliError::error(format!("{}: {err}", path.display())))?
    };
    serde_json::from_str(&text).map_err(|err| {
        CliError::error(format!("{}: not a triage plan: {err}", path.display()))
            .hint("write one with `unsctl dlq triage -o json > plan.json`")
    })
}

pub fn run(global: &GlobalArgs, args: Args) -> CliResult {
    remediate::check_force(&args.audit)?;
    let out = global.output();
    let plan = read_plan(&args.plan)?;
    let store = backend::for_action(global, args.confirm.confirm)?;
    let mut intents = Vec::new();
    for entry in plan.entries {
        let verdict = entry.verdict;
        let request = remediate::base_request(&args.audit, entry.attestation.as_deref());
        let planned = verdict.action.clone();
        let action = match planned.as_str() {
            "resolve" => Action::Resolve,
            "replay" => Action::Replay,
            other => {
                let mut intent = Intent::new(Action::Resolve, verdict, request);
                intent.verb = "verify";
                intent.checked = Err(Refusal {
                    why: format!("{} is {other}: nothing is done without an out-of-band check", intent.verdict.id),
                    allow: "set its action to resolve or replay and add an \"attestation\" saying what you checked".into(),
                });
                intents.push(intent);
                continue;
            }
        };
        // The plan's own view is what the operator approved; the store re-checks it and
        // refuses it as stale if the history has moved since.
        intents.push(Intent::new(action, verdict, request));
    }
    if intents.is_empty() {
        status("The plan has no entries: nothing to do.");
        return Ok(());
    }
    let actionable: Vec<&Intent> = intents.iter().filter(|i| i.checked.is_ok()).collect();
    for intent in &intents {
        print(&intent.line(&out))?;
    }
    if !args.confirm.confirm {
        print("(dry run)")?;
        status(&format!(
            "Nothing was changed. Add --confirm to carry out {} entr{}.",
            actionable.len(),
            if actionable.len() == 1 { "y" } else { "ies" }
        ));
        return Ok(());
    }
    if actionable.is_empty()
        || !remediate::confirmed(actionable.len(), "apply the plan to", &args.confirm)?
    {
        status("Nothing was changed.");
        return Ok(());
    }
    remediate::finish(remediate::execute_all(store.as_ref(), &intents)?)
}
