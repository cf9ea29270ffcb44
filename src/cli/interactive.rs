//! `unsctl dlq triage --interactive`: walk the DLQ one entry at a time and decide each.

use super::dlq::TriageArgs;
use super::error::{CliError, CliResult, ExitKind};
use super::remediate::{self, Intent, Outcome};
use super::{GlobalArgs, backend};
use crate::render::output::{print, status};
use crate::render::views;
use crate::store::sqlite::Action;
use crate::triage::{Branch, Verdict};
use std::io::IsTerminal;

const CHOICES: [&str; 4] = ["resolve", "replay", "skip", "quit"];

fn proposed(verdict: &Verdict) -> usize {
    match verdict.branch {
        Branch::Resolve => 0,
        Branch::Replay => 1,
        Branch::Verify => 2,
    }
}

pub fn run(global: &GlobalArgs, args: TriageArgs) -> CliResult {
    if !(std::io::stdin().is_terminal() && std::io::stderr().is_terminal()) {
        return Err(CliError::new(ExitKind::Refused, "--interactive needs a terminal")
            .hint("use `unsctl dlq triage -o json > plan.json` and `unsctl apply plan.json` from automation"));
    }
    remediate::check_force(&args.audit)?;
    let out = global.output();
    let store = backend::writer(global)?;
    let mut verdicts = Vec::new();
    super::dlq::each_verdict(store.as_ref(), &mut |verdict| {
        if args.branch.is_none_or(|b| b == verdict.branch) {
            verdicts.push(verdict);
        }
        Ok(())
    })?;
    if verdicts.is_empty() {
        status("The DLQ is empty: nothing to do.");
        return Ok(());
    }
    let total = verdicts.len();
    let mut decisions: Vec<(String, Outcome)> = Vec::new();
    for (n, verdict) in verdicts.into_iter().enumerate() {
        eprintln!("\n[{}/{total}] {}", n + 1, verdict.id);
        eprintln!("{}", views::verdict_block(&verdict, &out));
        let proposal = CHOICES[proposed(&verdict)];
        let answer = super::prompt::ask(&format!(
            "Decision ({}; Enter = {proposal}):",
            CHOICES.join("/")
        ))?;
        let choice = match answer.as_deref() {
            None => 3,
            Some("") => proposed(&verdict),
            Some(word) => CHOICES.iter().position(|c| *c == word).unwrap_or(2),
        };
        let id = verdict.id.clone();
        let action = match CHOICES[choice] {
            "resolve" => Action::Resolve,
            "replay" => Action::Replay,
            "skip" => {
                eprintln!("{id}: skipped");
                decisions.push((id, Outcome::Skipped("by the operator".into())));
                continue;
            }
            _ => {
                eprintln!("{id}: quit");
                decisions.push((id, Outcome::Skipped("quit before deciding".into())));
                break;
            }
        };
        let mut attestation = None;
        if verdict.branch == Branch::Verify {
            let checked = super::prompt::ask("What did you check out of band? (empty to skip)")?
                .unwrap_or_default();
            if checked.trim().is_empty() {
                eprintln!("{id}: skipped (no out-of-band check given)");
                decisions.push((id, Outcome::Skipped("no out-of-band check given".into())));
                continue;
            }
            attestation = Some(checked);
        }
        let mut request = remediate::base_request(&args.audit, attestation.as_deref());
        if request.reason.is_none() {
            request.reason = Some("interactive triage".into());
        }
        let outcome = remediate::execute(store.as_ref(), &Intent::new(action, verdict, request));
        eprintln!("{id}: {}", outcome.label());
        decisions.push((id, outcome));
    }
    let decided = decisions.len();
    for (id, outcome) in &decisions {
        print(&format!("{id}  {}", outcome.label()))?;
    }
    let outcomes: Vec<Outcome> = decisions.into_iter().map(|(_, o)| o).collect();
    let mut line = remediate::summary(&outcomes);
    if decided < total {
        line.push_str(&format!("; {} not reached", total - decided));
    }
    status(&line);
    Ok(())
}
