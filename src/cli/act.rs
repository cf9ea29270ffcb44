//! The one flow behind `dlq resolve`, `replay`, `apply` and the interactive walk: preview
//! every entry against the shared guardrails, show exactly what will happen, ask, then act
//! through the guarded transition, which checks everything again where the change is made.

use super::args::{AuditArgs, ConfirmArgs};
use super::error::{CliError, CliResult, ExitKind, exit_for};
use super::prompt;
use crate::api::ActionRequest;
use crate::model::ChannelSet;
use crate::remediation::Action;
use crate::remediation::policy::Terms;
use crate::remediation::{Approved, Claim};
use crate::render::output::{Output, print, status};
use crate::session::{self, Confirm, Flow, Intent, Outcome, Preview, receivers, summary};
use crate::store::Store;
use serde::Serialize;
use std::collections::BTreeMap;
use std::io::IsTerminal;

/// The request every intent of one command starts from, recorded as `operator`
/// (`Invocation::operator`).
pub fn base_request(
    operator: &str,
    audit: &AuditArgs,
    attestation: Option<&str>,
    verified: Option<Claim>,
) -> ActionRequest {
    ActionRequest {
        operator: Some(operator.to_string()),
        reason: audit.reason.clone(),
        ticket: audit.ticket.clone(),
        attestation: attestation.map(str::to_string),
        verified,
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

/// One entry's result in `-o json`.
#[derive(Debug, Serialize)]
struct ResultView<'a> {
    id: &'a str,
    action: &'a str,
    outcome: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    event_id: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    channels: Option<&'a ChannelSet>,
}

/// `{"dry_run": .., "results": [...], "summary": {...}}`.
/// The closing document of resolve, replay and apply (only `-o json` prints one: a person
/// read each line as it came).
pub fn print_results(
    out: &Output,
    intents: &[Intent],
    outcomes: &[Outcome],
    dry_run: bool,
) -> CliResult {
    let mut summary: BTreeMap<&'static str, usize> = BTreeMap::new();
    let results: Vec<ResultView> = intents
        .iter()
        .zip(outcomes)
        .map(|(intent, outcome)| {
            let name = match (dry_run, outcome) {
                (true, Outcome::Done { .. }) => "planned",
                _ => outcome.name(),
            };
            *summary.entry(name).or_default() += 1;
            let (event_id, channels) = match (outcome, &intent.preview) {
                (Outcome::Done { event_id, channels }, _) if !dry_run => {
                    (Some(*event_id), Some(channels))
                }
                (_, Ok(approved)) if dry_run && intent.action == Action::Replay => {
                    (None, Some(&approved.channels))
                }
                _ => (None, None),
            };
            ResultView {
                id: &intent.id,
                action: intent.verb,
                outcome: name,
                reason: outcome.reason(),
                event_id,
                channels,
            }
        })
        .collect();
    out.closing(&Results {
        dry_run,
        results,
        summary,
    })?;
    Ok(())
}

/// `-o json` of resolve, replay and apply: `{"dry_run", "results", "summary"}`.
#[derive(Debug, Serialize)]
struct Results<'a> {
    dry_run: bool,
    results: Vec<ResultView<'a>>,
    summary: BTreeMap<&'static str, usize>,
}

/// What a prompt names: where the change goes and who it is recorded as.
pub struct Target {
    pub place: String,
    pub operator: String,
}

impl Target {
    pub fn of(store: &dyn Store, request: &ActionRequest) -> CliResult<Self> {
        let claimed = request
            .operator
            .clone()
            .unwrap_or_else(crate::identity::account_name);
        Ok(Self {
            place: store.describe(),
            operator: store.operator(&claimed)?,
        })
    }
}

/// The terminal's confirmation: it asks on a terminal, and refuses without one unless
/// `--yes`.
pub struct Prompt<'a> {
    pub store: &'a dyn Store,
    pub confirm: &'a ConfirmArgs,
}

impl Confirm for Prompt<'_> {
    type Error = CliError;

    fn confirm(&mut self, preview: &Preview<'_>) -> CliResult<bool> {
        confirmed(self.store, preview, self.confirm)
    }
}

fn confirmed(store: &dyn Store, preview: &Preview<'_>, confirm: &ConfirmArgs) -> CliResult<bool> {
    let (intents, verb) = (preview.approved, preview.verb);
    let count = intents.len();
    let entries = if count == 1 { "entry" } else { "entries" };
    if confirm.yes {
        return Ok(true);
    }
    if !prompt::interactive() {
        return Err(CliError::new(
            ExitKind::Refused,
            format!("refusing to {verb} {count} {entries} without a terminal to confirm on"),
        )
        .hint("pass --yes to confirm from automation"));
    }
    let target = Target::of(store, &intents[0].request)?;
    let clean = crate::render::sanitize::clean;
    let listed = labels(intents);
    let context = context_lines(preview);
    let question = format!(
        "{} {count} {entries} in {} as {}?",
        capitalized(verb),
        clean(&target.place),
        clean(&target.operator),
    );
    Ok(prompt::confirm_listed(&context, &question, &listed, count)?)
}

/// Each approved entry as the prompt lists it (the first ten): its id, its channels, and
/// in colour the guardrails a forced action overrides.
fn labels(intents: &[&Intent]) -> Vec<String> {
    let clean = crate::render::sanitize::clean;
    // What is unusual is said where the answer is given: a forced action in colour with
    // the guardrail it overrides, and the attestation it rests on.
    // Each guardrail as the entry's own line says it: the id is already there.
    let forced = |id: &str, approved: &Approved| {
        (!approved.overridden.is_empty()).then(|| {
            let said: Vec<String> = approved
                .overridden
                .iter()
                .map(|why| match why.strip_prefix(id) {
                    Some(rest) => match rest.strip_prefix(": ") {
                        Some(rest) => rest.to_string(),
                        None => format!("it{rest}"),
                    },
                    None => why.clone(),
                })
                .collect();
            format!(
                "  {}, overriding: {}",
                console::style("FORCED").red().bold().for_stderr(),
                clean(&said.join("; "))
            )
        })
    };
    intents
        .iter()
        .take(10)
        .map(|intent| match &intent.preview {
            Ok(approved) => {
                let channels = if approved.channels.is_empty() {
                    String::new()
                } else {
                    format!(" ({})", approved.channels.joined(","))
                };
                format!(
                    "{}{channels}{}",
                    clean(&intent.id),
                    forced(&intent.id, approved).unwrap_or_default()
                )
            }
            _ => clean(&intent.id).into_owned(),
        })
        .collect()
}

/// What the prompt says above its question: the attestation acted on, the pace, what
/// each receiver does with a copy, and how many override a guardrail.
fn context_lines(preview: &Preview<'_>) -> Vec<String> {
    let (intents, receivers) = (preview.approved, preview.receivers);
    let clean = crate::render::sanitize::clean;
    let mut context = Vec::new();
    if let Some(attestation) = intents[0].request.attestation.as_deref() {
        let reason = intents[0]
            .request
            .reason
            .as_deref()
            .map(|r| format!("; reason: {}", clean(r)))
            .unwrap_or_default();
        context.push(format!(
            "On your word that {} (\"{}\"{reason}).",
            match intents[0].request.verified {
                Some(Claim::Delivered) => "it arrived",
                _ => "it did not arrive",
            },
            clean(attestation)
        ));
    }
    if let Some(planned) = preview.planned() {
        let at = crate::clock::Clock::now(&crate::clock::SystemClock) + planned.last;
        context.push(format!(
            "Paced at {}: {} made due one after another, the last in {} (about {}).",
            clean(planned.words),
            planned.count,
            crate::render::time::duration(planned.last),
            crate::render::time::rfc3339(at)
        ));
    }
    context.extend(receivers.iter().map(|line| clean(line).into_owned()));
    let forced_count = intents
        .iter()
        .filter(|i| i.preview.as_ref().is_ok_and(|a| !a.overridden.is_empty()))
        .count();
    if forced_count > 0 {
        context.push(format!(
            "{}: {forced_count} of these override a guardrail, each marked under the question.",
            console::style("FORCED").red().bold().for_stderr()
        ));
    }
    context
}

/// `verb` with its first letter in capitals: the start of a question.
fn capitalized(verb: &str) -> String {
    let mut chars = verb.chars();
    chars
        .next()
        .map(|first| first.to_uppercase().chain(chars).collect())
        .unwrap_or_default()
}

/// Prints the plan, asks, runs it, prints each outcome and a summary, and exits by the
/// most serious outcome.
pub fn carry_out(
    store: &dyn Store,
    intents: Vec<Intent>,
    confirm: &ConfirmArgs,
    out: &Output,
    verb: &str,
    pagerduty: Option<&crate::verify::pagerduty::Api>,
) -> CliResult {
    if let Go::Stop(result) = present(store, &intents, confirm, out, verb, &[], pagerduty)? {
        return result;
    }
    // Entries the preview blocked are reported, not acted on; the rest run in order.
    let outcomes = execute_all(store, &intents, out)?;
    print_results(out, &intents[..outcomes.len()], &outcomes, false)?;
    finish(&store.describe(), &outcomes)
}

/// Whether a presented plan goes ahead.
pub enum Go {
    Ahead,
    /// Not carried out (a dry run, nothing to do, declined): what the command returns.
    Stop(CliResult),
}

/// Shows what `intents` will do (each line, the pace, what each receiver does with a
/// copy, and `also`), then asks, or ends a dry run. [`Go::Ahead`] only when confirmed.
pub fn present(
    store: &dyn Store,
    intents: &[Intent],
    confirm: &ConfirmArgs,
    out: &Output,
    verb: &str,
    also: &[String],
    pagerduty: Option<&crate::verify::pagerduty::Api>,
) -> CliResult<Go> {
    if intents.is_empty() {
        status(&format!("Nothing to {verb}: no matching DLQ entries."));
        print_results(out, &[], &[], !confirm.confirm)?;
        return Ok(Go::Stop(Ok(())));
    }
    let blocked: Vec<Outcome> = intents
        .iter()
        .map(|intent| match &intent.preview {
            Ok(approved) => Outcome::Done {
                event_id: 0,
                channels: approved.channels.clone(),
            },
            Err(blocked) => blocked.into(),
        })
        .collect();
    let actionable: Vec<&Intent> = intents.iter().filter(|i| i.preview.is_ok()).collect();
    let mut told = receivers(intents, pagerduty);
    told.extend(also.iter().cloned());
    let shown = session::preview::Preview::of(intents, &told, out, Terms::CommandLine);
    out.progress(|| {
        shown
            .lines
            .iter()
            .try_for_each(|line| print(&crate::render::output::fit_lines(line, out)))
    })?;
    // A prompt says all of it where the answer is given; without one it is said here.
    let prompting =
        confirm.confirm && !confirm.yes && !actionable.is_empty() && prompt::interactive();
    if !prompting {
        for line in &shown.notes {
            status(line);
        }
    }
    if !confirm.confirm {
        print_results(out, intents, &blocked, true)?;
        out.progress(|| print("(dry run)"))?;
        status(&format!(
            "Nothing was changed in {}. Add --confirm to {verb} {} {}.",
            crate::render::sanitize::clean(&store.describe()),
            actionable.len(),
            if actionable.len() == 1 {
                "entry"
            } else {
                "entries"
            }
        ));
        return Ok(Go::Stop(finish_dry_run(&blocked)));
    }
    if actionable.is_empty() {
        print_results(out, intents, &blocked, false)?;
        status(&format!(
            "Nothing to {verb}: every entry was refused or skipped (see above)."
        ));
        return Ok(Go::Stop(finish(&store.describe(), &blocked)));
    }
    let preview = Preview {
        verb,
        approved: &actionable,
        receivers: &told,
    };
    if !(Prompt { store, confirm }).confirm(&preview)? {
        status("Declined: nothing was changed.");
        return Ok(Go::Stop(Ok(())));
    }
    Ok(Go::Ahead)
}

fn finish_dry_run(previews: &[Outcome]) -> CliResult {
    match exit_for(previews) {
        None => Ok(()),
        Some(kind) => Err(CliError::new(
            kind,
            "not every entry could be carried out (see above)",
        )),
    }
}

/// Runs every intent in order, one outcome line each on stdout, with a progress bar on
/// stderr when it is a terminal. Ctrl-C lets the entry in flight finish, then stops.
pub fn execute_all(store: &dyn Store, intents: &[Intent], out: &Output) -> CliResult<Vec<Outcome>> {
    prompt::install_interrupt_handler();
    if prompt::interrupted() {
        return Err(prompt::interrupted_error());
    }
    let progress = progress_bar(intents.len());
    let mut printed: CliResult = Ok(());
    let mut counted = Vec::with_capacity(intents.len());
    let clock = crate::clock::SystemClock;
    let outcomes = session::carry_out(store, intents, &clock, &mut |intent, outcome| {
        let line = crate::render::output::fit_lines(
            &format!(
                "{}  {}",
                out.clean(&intent.id),
                outcome.label(intent.action)
            ),
            out,
        );
        counted.push(outcome.clone());
        prompt::set_progress(&session::summary(&counted));
        let shown = out.progress(|| match &progress {
            Some(bar) => bar.suspend(|| print(&line)),
            None => print(&line),
        });
        if let Err(err) = shown {
            printed = Err(err.into());
            return Flow::Stop;
        }
        if let Some(bar) = &progress {
            bar.inc(1);
        }
        if prompt::interrupted() {
            Flow::Stop
        } else {
            Flow::Continue
        }
    });
    if let Some(bar) = progress {
        bar.finish_and_clear();
    }
    printed?;
    if prompt::interrupted() {
        return Err(prompt::interrupted_error());
    }
    Ok(outcomes)
}

/// The summary line, then the exit code the outcomes call for.
pub fn finish(place: &str, outcomes: &[Outcome]) -> CliResult {
    status(&format!(
        "{}: {}",
        crate::render::sanitize::clean(place),
        summary(outcomes)
    ));
    match exit_for(outcomes) {
        None => Ok(()),
        Some(kind) => Err(CliError::new(
            kind,
            "not every entry was carried out (see above)",
        )),
    }
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
