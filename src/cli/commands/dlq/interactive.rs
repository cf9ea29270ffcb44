//! `unsctl dlq triage --interactive`: walk the DLQ one entry at a time and decide each
//! (the walk itself is `cli::guided`).

use crate::cli::args::{AuditArgs, SelectArgs};
use crate::cli::backend::{self, Invocation};
use crate::cli::error::{CliError, CliResult, ExitKind, exit_for};
use crate::cli::guided::{Terminal, walk};
use crate::cli::{prompt, selection};
use crate::remediation::Action;
use crate::render::output::{print, status};
use crate::render::sanitize::clean;
use crate::render::views;
use crate::session::outcome::Outcome;
use crate::triage::Branch;
use crate::verify::Sources;

pub fn run(
    global: &Invocation,
    branch: Option<Branch>,
    select: &SelectArgs,
    audit: AuditArgs,
    sources: &Sources,
) -> CliResult {
    if !prompt::interactive() {
        return Err(CliError::new(ExitKind::Refused, "--interactive needs a terminal")
            .hint("use `unsctl dlq triage -o json > plan.json` and `unsctl apply plan.json` from automation"));
    }
    if audit.force {
        return Err(CliError::usage(
            "--force cannot be used with --interactive: a guardrail is overridden for one entry at a time, with `replay` or `dlq resolve`",
        ));
    }
    let out = global.output();
    let store = backend::writer(global)?;
    let verdicts = selection::verdicts(
        store.as_ref(),
        &select.resolved(store.as_ref(), true)?,
        &selection::of_branch(branch),
        select.limit,
    )?;
    if verdicts.is_empty() {
        status(&views::empty_dlq(&store.describe()));
        return Ok(());
    }
    let total = verdicts.len();
    prompt::install_interrupt_handler();
    let operator = global.operator(audit.operator.as_deref())?;
    let decisions = walk(
        store.as_ref(),
        verdicts,
        &audit,
        &operator,
        sources,
        &mut Terminal,
        &out,
    )?;
    for decision in &decisions {
        print(&format!(
            "{}  {}",
            clean(&decision.id),
            decision
                .outcome
                .label(decision.action.unwrap_or(Action::Resolve))
        ))?;
    }
    let outcomes: Vec<Outcome> = decisions.into_iter().map(|d| d.outcome).collect();
    let mut line = crate::session::summary(&outcomes);
    if outcomes.len() < total {
        line.push_str(&format!("; {} not reached", total - outcomes.len()));
    }
    status(&line);
    match exit_for(&outcomes) {
        None => Ok(()),
        Some(kind) => Err(CliError::new(
            kind,
            "not every decision was carried out (see above)",
        )),
    }
}
