//! The one flow behind `dlq resolve`, `replay`, `apply` and the interactive walk:
//! preflight every entry against the shared guardrails, show exactly what will happen,
//! ask, then act through the engine's single transition with a staleness guard.

use super::error::{CliError, CliResult, ExitKind};
use crate::api::ActionRequest;
use crate::remediation::{self, Refusal};
use crate::render::output::{Output, print, status};
use crate::render::views;
use crate::store::sqlite::{Action, audit_summary};
use crate::store::{Store, StoreError};
use crate::triage::{self, Branch, Verdict};
use std::io::IsTerminal;

/// Who is acting and why: recorded in every audit event.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct AuditArgs {
    /// Who is acting (default: UNS_OPERATOR, then the login name)
    #[arg(long)]
    pub operator: Option<String>,
    /// Why; required with --force
    #[arg(long)]
    pub reason: Option<String>,
    /// Incident or ticket reference
    #[arg(long)]
    pub ticket: Option<String>,
    /// Override a guardrail (needs --reason)
    #[arg(long)]
    pub force: bool,
}

/// How a mutation is confirmed.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct ConfirmArgs {
    /// Carry it out (without this, print what would happen and change nothing)
    #[arg(long)]
    pub confirm: bool,
    /// Do not prompt (automation); only with --confirm
    #[arg(long)]
    pub yes: bool,
}

/// One entry's planned action, checked before anything changes.
#[derive(Debug, Clone)]
pub struct Intent {
    pub action: Action,
    pub verdict: Verdict,
    pub request: ActionRequest,
    /// The channels a replay covers, or why the guardrails refuse.
    pub checked: Result<Vec<String>, Refusal>,
    /// What the line calls the action: resolve, replay, or verify for a plan entry left alone.
    pub verb: &'static str,
}

impl Intent {
    pub fn new(action: Action, verdict: Verdict, mut request: ActionRequest) -> Self {
        request.expected_last_event_id = verdict.last_event_id;
        request.triage = Some(audit_summary(&verdict));
        let checked = remediation::check(&verdict, action, &request);
        if let (Ok(channels), Action::Replay) = (&checked, action) {
            request.channels = Some(channels.clone());
        }
        let verb = match action {
            Action::Resolve => "resolve",
            Action::Replay => "replay",
        };
        Self {
            action,
            verdict,
            request,
            checked,
            verb,
        }
    }

    /// One line: id, branch, action, channels, evidence.
    pub fn line(&self, out: &Output) -> String {
        let evidence: Vec<i64> = self
            .verdict
            .channels
            .iter()
            .flat_map(|c| c.evidence.iter().copied())
            .collect();
        let verb = self.verb;
        match &self.checked {
            Ok(channels) => {
                let channels = if channels.is_empty() {
                    "-".to_string()
                } else {
                    channels.join(",")
                };
                let forced = if self.request.force { "  FORCED" } else { "" };
                format!(
                    "{}  {}  {verb}  channels {channels}  evidence {}{forced}",
                    self.verdict.id,
                    views::branch_text(self.verdict.branch, out),
                    views::join_ids(&evidence)
                )
            }
            Err(refusal) => format!(
                "{}  {}  {verb} REFUSED: {refusal}",
                self.verdict.id,
                views::branch_text(self.verdict.branch, out)
            ),
        }
    }
}

/// Fetches and triages one entry.
pub fn verdict(store: &dyn Store, id: &str) -> CliResult<Verdict> {
    let doc = store.notification(id)?;
    if !doc.row.dead_letter {
        return Err(CliError::new(
            ExitKind::Conflict,
            format!("{id} is not in the DLQ (status {})", doc.row.status),
        )
        .hint(format!("`unsctl inspect {id}` shows its history")));
    }
    Ok(triage::triage(&doc.row, &doc.events))
}

pub fn base_request(audit: &AuditArgs, attestation: Option<&str>) -> ActionRequest {
    ActionRequest {
        operator: Some(super::backend::operator(audit.operator.as_deref())),
        reason: audit.reason.clone(),
        ticket: audit.ticket.clone(),
        attestation: attestation.map(str::to_string),
        force: audit.force,
        ..ActionRequest::default()
    }
}

/// Refuses `--force` without a reason before anything else happens.
pub fn check_force(audit: &AuditArgs) -> CliResult {
    if audit.force && audit.reason.as_deref().is_none_or(|r| r.trim().is_empty()) {
        return Err(CliError::new(
            ExitKind::Refused,
            "--force needs --reason: the audit record must say why",
        ));
    }
    Ok(())
}

/// Asks on a terminal; refuses without one unless `--yes`.
pub fn confirmed(count: usize, verb: &str, confirm: &ConfirmArgs) -> CliResult<bool> {
    if confirm.yes {
        return Ok(true);
    }
    if !super::prompt::interactive() {
        return Err(CliError::new(
            ExitKind::Refused,
            format!(
                "refusing to {verb} {count} entr{} without a terminal to confirm on",
                if count == 1 { "y" } else { "ies" }
            ),
        )
        .hint("pass --yes to confirm from automation"));
    }
    let word = super::prompt::confirmation_word(count);
    let answer = super::prompt::ask(&format!(
        "{verb} {count} entr{}? Type {word} and press Enter to go ahead (anything else does nothing):",
        if count == 1 { "y" } else { "ies" }
    ))?;
    Ok(super::prompt::confirms(answer.as_deref(), count))
}

/// How one entry ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Resolved,
    Replayed(Vec<String>),
    /// Its history moved since it was triaged or planned.
    Stale(String),
    /// Someone else acted first.
    Conflict(String),
    Refused(String),
    Failed(String),
    Skipped(String),
}

impl Outcome {
    pub fn label(&self) -> String {
        match self {
            Outcome::Resolved => "resolved".into(),
            Outcome::Replayed(channels) => format!("replayed {}", channels.join(",")),
            Outcome::Stale(why) => format!("skipped (stale): {why}"),
            Outcome::Conflict(why) => format!("conflict: {why}"),
            Outcome::Refused(why) => format!("refused (guardrail): {why}"),
            Outcome::Failed(why) => format!("failed: {why}"),
            Outcome::Skipped(why) => format!("skipped: {why}"),
        }
    }

    fn exit(&self) -> Option<ExitKind> {
        match self {
            Outcome::Resolved | Outcome::Replayed(_) | Outcome::Skipped(_) => None,
            Outcome::Stale(_) | Outcome::Conflict(_) => Some(ExitKind::Conflict),
            Outcome::Refused(_) => Some(ExitKind::Refused),
            Outcome::Failed(_) => Some(ExitKind::Error),
        }
    }
}

/// Carries one intent out.
pub fn execute(store: &dyn Store, intent: &Intent) -> Outcome {
    if let Err(refusal) = &intent.checked {
        return Outcome::Refused(refusal.to_string());
    }
    let id = &intent.verdict.id;
    let result = match intent.action {
        Action::Resolve => store.resolve(id, &intent.request),
        Action::Replay => store.replay(id, &intent.request),
    };
    match result {
        Ok(done) if done.action == "replayed" => Outcome::Replayed(done.channels),
        Ok(_) => Outcome::Resolved,
        Err(StoreError::Conflict(conflict)) if conflict.reason.starts_with("history moved") => {
            Outcome::Stale(conflict.to_string())
        }
        Err(StoreError::Conflict(conflict)) => Outcome::Conflict(conflict.to_string()),
        Err(StoreError::Refused(why)) => Outcome::Refused(why),
        Err(err) => Outcome::Failed(err.to_string()),
    }
}

/// The most serious exit among the outcomes: error, then conflict, then refusal.
pub fn exit_for(outcomes: &[Outcome]) -> Option<ExitKind> {
    let kinds: Vec<ExitKind> = outcomes.iter().filter_map(Outcome::exit).collect();
    [ExitKind::Error, ExitKind::Conflict, ExitKind::Refused]
        .into_iter()
        .find(|kind| kinds.contains(kind))
}

/// Prints the plan, asks, runs it, prints each outcome and a summary.
pub fn carry_out(
    store: &dyn Store,
    intents: Vec<Intent>,
    confirm: &ConfirmArgs,
    out: &Output,
    verb: &str,
) -> CliResult {
    if intents.is_empty() {
        status(&format!("Nothing to {verb}: no matching DLQ entries."));
        return Ok(());
    }
    for intent in &intents {
        print(&intent.line(out))?;
    }
    let refused = intents.iter().filter(|i| i.checked.is_err()).count();
    if !confirm.confirm {
        print("(dry run)")?;
        status(&format!(
            "Nothing was changed. Add --confirm to {verb} {} entr{}.",
            intents.len() - refused,
            if intents.len() - refused == 1 {
                "y"
            } else {
                "ies"
            }
        ));
        if refused > 0 {
            return Err(CliError::new(
                ExitKind::Refused,
                format!(
                    "{refused} of {} would be refused by a guardrail (see above)",
                    intents.len()
                ),
            ));
        }
        return Ok(());
    }
    if refused > 0 {
        return Err(CliError::new(
            ExitKind::Refused,
            format!(
                "{refused} of {} refused by a guardrail (see above); nothing was changed",
                intents.len()
            ),
        ));
    }
    if !confirmed(intents.len(), verb, confirm)? {
        status("Declined: nothing was changed.");
        return Ok(());
    }
    finish(execute_all(store, &intents)?)
}

/// Runs every intent in order, one outcome line each on stdout, with a progress bar on
/// stderr when it is a terminal.
pub fn execute_all(store: &dyn Store, intents: &[Intent]) -> CliResult<Vec<Outcome>> {
    let progress = progress_bar(intents.len());
    let mut outcomes = Vec::with_capacity(intents.len());
    for intent in intents {
        let outcome = execute(store, intent);
        if let Some(bar) = &progress {
            bar.inc(1);
        }
        print(&format!("{}  {}", intent.verdict.id, outcome.label()))?;
        outcomes.push(outcome);
    }
    if let Some(bar) = progress {
        bar.finish_and_clear();
    }
    Ok(outcomes)
}

/// The summary line, then the exit code the outcomes call for.
pub fn finish(outcomes: Vec<Outcome>) -> CliResult {
    status(&summary(&outcomes));
    match exit_for(&outcomes) {
        None => Ok(()),
        Some(kind) => Err(CliError::new(
            kind,
            "not every entry was carried out (see above)",
        )),
    }
}

pub fn summary(outcomes: &[Outcome]) -> String {
    let count = |f: fn(&Outcome) -> bool| outcomes.iter().filter(|o| f(o)).count();
    format!(
        "{} resolved, {} replayed, {} skipped as stale, {} conflicts, {} refused, {} failed, {} skipped",
        count(|o| matches!(o, Outcome::Resolved)),
        count(|o| matches!(o, Outcome::Replayed(_))),
        count(|o| matches!(o, Outcome::Stale(_))),
        count(|o| matches!(o, Outcome::Conflict(_))),
        count(|o| matches!(o, Outcome::Refused(_))),
        count(|o| matches!(o, Outcome::Failed(_))),
        count(|o| matches!(o, Outcome::Skipped(_))),
    )
}

/// A bar on stderr for bulk work, only when stderr is a terminal.
fn progress_bar(len: usize) -> Option<indicatif::ProgressBar> {
    if len < 2 || !std::io::stderr().is_terminal() {
        return None;
    }
    let bar = indicatif::ProgressBar::new(len as u64);
    if let Ok(style) = indicatif::ProgressStyle::with_template("{bar:40} {pos}/{len} {msg}") {
        bar.set_style(style);
    }
    Some(bar)
}

/// Every DLQ entry of `branch`, triaged.
pub fn entries_of(store: &dyn Store, branch: Branch) -> CliResult<Vec<Verdict>> {
    let mut verdicts = Vec::new();
    super::dlq::each_verdict(store, &mut |verdict| {
        if verdict.branch == branch {
            verdicts.push(verdict);
        }
        Ok(())
    })?;
    Ok(verdicts)
}
