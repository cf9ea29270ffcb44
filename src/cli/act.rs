//! The one flow behind `dlq resolve`, `replay`, `apply` and the interactive walk: preview
//! every entry against the shared guardrails, show exactly what will happen, ask, then act
//! through the guarded transition, which checks everything again where the change is made.

use super::args::{AuditArgs, ConfirmArgs};
use super::error::{CliError, CliResult, ExitKind, exit_for};
use super::outcome::{Blocked, NotInDlq, Outcome};
use super::prompt;
use crate::api::ActionRequest;
use crate::model::{Channel, ChannelSet};
use crate::remediation::{Action, Approved, Claim, policy};
use crate::render::output::{Output, print, print_document, status};
use crate::render::views;
use crate::store::{Store, StoreError};
use crate::triage::{self, Verdict};
use serde::Serialize;
use std::collections::BTreeMap;
use std::io::IsTerminal;

/// One entry's planned action, previewed before anything changes.
#[derive(Debug, Clone)]
pub struct Intent {
    pub id: String,
    pub action: Action,
    /// The entry's verdict, when it could be read.
    pub verdict: Option<Verdict>,
    pub request: ActionRequest,
    /// What the guardrails say, computed here for the preview; the transition checks again.
    pub preview: Result<Approved, Blocked>,
    /// What the line calls the action: resolve, replay, or verify for a plan entry left alone.
    pub verb: &'static str,
    /// A paced replay: seconds after the first paced replay runs that this one is due.
    pub offset: Option<f64>,
}

impl Intent {
    /// The intent for an entry whose verdict is known.
    pub fn new(
        action: Action,
        verdict: Verdict,
        row_channels: &Result<ChannelSet, String>,
        mut request: ActionRequest,
    ) -> Self {
        request.expected_last_event_id = verdict.last_event_id;
        let preview =
            policy::check(&verdict, row_channels, action, &request).map_err(Blocked::Refused);
        Self {
            id: verdict.id.clone(),
            action,
            verdict: Some(verdict),
            request,
            preview,
            verb: action.as_str(),
            offset: None,
        }
    }

    /// The intent for an entry that will not be acted on.
    pub fn blocked(id: &str, action: Action, verdict: Option<Verdict>, blocked: Blocked) -> Self {
        Self {
            id: id.to_string(),
            action,
            verdict,
            request: ActionRequest::default(),
            preview: Err(blocked),
            verb: action.as_str(),
            offset: None,
        }
    }

    /// One line: id, branch, action, channels, evidence.
    pub fn line(&self, out: &Output) -> String {
        let branch = self
            .verdict
            .as_ref()
            .map(|v| views::branch_text(v.branch, out))
            .unwrap_or_else(|| "-".into());
        let id = out.clean(&self.id);
        let verb = self.verb;
        match &self.preview {
            Ok(approved) => {
                let channels = if approved.channels.is_empty() {
                    "-".to_string()
                } else {
                    approved.channels.joined(",")
                };
                let evidence = self
                    .verdict
                    .as_ref()
                    .map(|v| views::join_ids(&v.evidence()))
                    .unwrap_or_default();
                let forced = if approved.overridden.is_empty() {
                    ""
                } else {
                    "  FORCED"
                };
                format!("{id}  {branch}  {verb}  channels {channels}  evidence {evidence}{forced}")
            }
            Err(blocked) => format!("{id}  {branch}  {verb} {}", blocked_text(blocked)),
        }
    }
}

fn blocked_text(blocked: &Blocked) -> String {
    crate::render::sanitize::clean(&blocked.words()).into_owned()
}

/// Reads and triages one entry, and previews `action` on it with `request`.
pub fn intent(
    store: &dyn Store,
    id: &str,
    action: Action,
    request: &ActionRequest,
) -> CliResult<Intent> {
    let doc = match store.notification(id) {
        Ok(doc) => doc,
        Err(StoreError::NotFound(what)) => {
            return Ok(Intent::blocked(id, action, None, Blocked::NotFound(what)));
        }
        Err(err) => return Err(err.into()),
    };
    let verdict = triage::triage_events(&doc.row, &doc.events);
    if !doc.row.dead_letter {
        return Ok(Intent::blocked(
            id,
            action,
            Some(verdict),
            Blocked::NotInDlq(NotInDlq {
                id: id.to_string(),
                status: doc.row.status.to_string(),
            }),
        ));
    }
    Ok(Intent::new(
        action,
        verdict,
        &doc.row.channel_set(),
        request.clone(),
    ))
}

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

/// Carries one intent out, through the store's guarded transition.
pub fn execute(store: &dyn Store, intent: &Intent) -> Outcome {
    execute_at(store, intent, &intent.request)
}

/// [`execute`] with `request` (the intent's, made due at its place in a pace).
fn execute_at(store: &dyn Store, intent: &Intent, request: &ActionRequest) -> Outcome {
    if let Err(blocked) = &intent.preview {
        return blocked.into();
    }
    let result = match intent.action {
        Action::Resolve => store.resolve(&intent.id, request),
        Action::Replay => store.replay(&intent.id, request),
    };
    match result {
        Ok(done) => Outcome::Done {
            event_id: done.event_id,
            channels: done.channels,
        },
        Err(err) => Outcome::of_store_error(err),
    }
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
pub fn print_results(intents: &[Intent], outcomes: &[Outcome], dry_run: bool) -> CliResult {
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
    print_document(&Results {
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

/// Asks on a terminal; refuses without one unless `--yes`.
pub fn confirmed(
    store: &dyn Store,
    intents: &[&Intent],
    verb: &str,
    confirm: &ConfirmArgs,
    receivers: &[String],
) -> CliResult<bool> {
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
    let listed: Vec<String> = intents
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
        .collect();
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
    if let Some(planned) = planned(intents.iter().copied()) {
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
    let question = format!(
        "{} {count} {entries} in {} as {}?",
        capitalized(verb),
        clean(&target.place),
        clean(&target.operator),
    );
    Ok(prompt::confirm_listed(&context, &question, &listed, count)?)
}

/// `verb` with its first letter in capitals: the start of a question.
fn capitalized(verb: &str) -> String {
    let mut chars = verb.chars();
    chars
        .next()
        .map(|first| first.to_uppercase().chain(chars).collect())
        .unwrap_or_default()
}

/// Most PagerDuty entries whose incidents are looked up for one prompt.
const INCIDENTS_LOOKED_UP: usize = 5;

/// What each receiver does with the copy a replay sends: statements, not guardrails.
/// Email and Slack drop no second copy; PagerDuty merges a trigger into an incident open
/// under its dedup key and opens a new one (a new page) otherwise, which its REST API
/// says when a token is set (UNS_PAGERDUTY_API_TOKEN).
pub fn receivers(intents: &[Intent]) -> Vec<String> {
    let replayed: Vec<(&str, &ChannelSet)> = intents
        .iter()
        .filter(|i| i.action == Action::Replay)
        .filter_map(|i| Some((i.id.as_str(), &i.preview.as_ref().ok()?.channels)))
        .collect();
    let mut lines = Vec::new();
    let plain: Vec<&str> = [Channel::Email, Channel::Slack]
        .into_iter()
        .filter(|c| replayed.iter().any(|(_, set)| set.contains(*c)))
        .map(Channel::as_str)
        .collect();
    if !plain.is_empty() {
        lines.push(format!(
            "{}: the receiver does not drop a second copy; whoever got an earlier one gets this one too",
            plain.join(" and ")
        ));
    }
    let paging: Vec<&str> = replayed
        .iter()
        .filter(|(_, set)| set.contains(Channel::Pagerduty))
        .map(|(id, _)| *id)
        .collect();
    lines.extend(pagerduty_statements(&paging));
    lines
}

/// For each of `ids` (the first few), what a trigger sent now does at PagerDuty: merged
/// into the incident open under its dedup key, or a new incident. From the REST API when
/// UNS_PAGERDUTY_API_TOKEN is set; else the rule, said once.
/// Whether PagerDuty can be asked here (`UNS_PAGERDUTY_API_TOKEN` is set).
pub fn pagerduty_token_set() -> bool {
    std::env::var("UNS_PAGERDUTY_API_TOKEN").is_ok_and(|t| !t.trim().is_empty())
}

pub fn pagerduty_statements(ids: &[&str]) -> Vec<String> {
    let mut lines = Vec::new();
    if ids.is_empty() {
        return lines;
    }
    let config = std::env::var("UNS_PAGERDUTY_API_TOKEN")
        .ok()
        .map(|t| t.trim().to_string())
        .filter(|t| !t.is_empty())
        .map(|token| crate::verify::pagerduty::Config {
            api_url: std::env::var("UNS_PAGERDUTY_API_URL")
                .unwrap_or_else(|_| "https://api.pagerduty.com".into()),
            token,
        });
    let client = config.as_ref().map(|_| crate::verify::http::client());
    match (&config, client) {
        (Some(config), Some(Ok(client))) => {
            for id in ids.iter().take(INCIDENTS_LOOKED_UP) {
                let said = crate::verify::pagerduty::replay_outcome(&client, config, id);
                lines.push(format!(
                    "PAGERDUTY {}: {}",
                    crate::render::sanitize::clean(id),
                    crate::redact::Secrets::new().add(&config.token).clean(&said)
                ));
            }
            if ids.len() > INCIDENTS_LOOKED_UP {
                lines.push(format!(
                    "PAGERDUTY: {} more not looked up",
                    ids.len() - INCIDENTS_LOOKED_UP
                ));
            }
        }
        _ => lines.push(
            "PAGERDUTY: merged into the incident open under the dedup key if there is one, else it opens a new incident and pages again (set UNS_PAGERDUTY_API_TOKEN to say which)".into(),
        ),
    }
    lines
}

/// What a paced run holds: the pace in words, how many replays it paces, and how long
/// after the first the last is due.
pub struct Planned<'a> {
    pub words: &'a str,
    pub count: usize,
    pub last: f64,
}

/// The pace `pace::apply` gave `intents`, if it gave one.
pub fn planned<'a, I>(intents: I) -> Option<Planned<'a>>
where
    I: IntoIterator<Item = &'a Intent>,
    I::IntoIter: Clone,
{
    let intents = intents.into_iter();
    let words = intents.clone().find_map(|i| i.request.pace.as_deref())?;
    let offsets = intents.filter_map(|i| i.offset);
    let count = offsets.clone().count();
    let last = offsets.reduce(f64::max)?;
    Some(Planned { words, count, last })
}

/// "paced at 200/s: 15000 replays, the last due 1m 15s after the first", when paced.
fn pace_line(intents: &[Intent]) -> Option<String> {
    let planned = planned(intents)?;
    Some(format!(
        "paced at {}: {}, the last due {} after the first",
        crate::render::sanitize::clean(planned.words),
        crate::render::output::counted(planned.count as i64, "replay"),
        crate::render::time::duration(planned.last)
    ))
}

/// Prints the plan, asks, runs it, prints each outcome and a summary, and exits by the
/// most serious outcome.
pub fn carry_out(
    store: &dyn Store,
    intents: Vec<Intent>,
    confirm: &ConfirmArgs,
    out: &Output,
    verb: &str,
) -> CliResult {
    carry_out_into(store, intents, confirm, out, verb, &mut Vec::new())
}

/// [`carry_out`], adding every entry it carried out to `done`: its id and the id of the
/// event the change wrote.
pub fn carry_out_into(
    store: &dyn Store,
    intents: Vec<Intent>,
    confirm: &ConfirmArgs,
    out: &Output,
    verb: &str,
    done: &mut Vec<(String, i64)>,
) -> CliResult {
    if let Go::Stop(result) = present(store, &intents, confirm, out, verb, &[])? {
        return result;
    }
    // Entries the preview blocked are reported, not acted on; the rest run in order.
    let outcomes = execute_all(store, &intents, out)?;
    done.extend(carried_out(intents.iter().zip(&outcomes)));
    if out.json() {
        print_results(&intents[..outcomes.len()], &outcomes, false)?;
    }
    finish(&store.describe(), &outcomes)
}

/// Each intent its outcome says was carried out: its id and the id of the event written.
pub fn carried_out<'a>(
    done: impl IntoIterator<Item = (&'a Intent, &'a Outcome)>,
) -> Vec<(String, i64)> {
    done.into_iter()
        .filter_map(|(intent, outcome)| match outcome {
            Outcome::Done { event_id, .. } => Some((intent.id.clone(), *event_id)),
            _ => None,
        })
        .collect()
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
) -> CliResult<Go> {
    if intents.is_empty() {
        status(&format!("Nothing to {verb}: no matching DLQ entries."));
        if out.json() {
            print_results(&[], &[], !confirm.confirm)?;
        }
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
    if !out.json() {
        for intent in intents {
            print(&crate::render::output::fit_lines(&intent.line(out), out))?;
        }
    }
    let mut told = receivers(intents);
    told.extend(also.iter().cloned());
    // A prompt says all of it where the answer is given; without one it is said here.
    let prompting =
        confirm.confirm && !confirm.yes && !actionable.is_empty() && prompt::interactive();
    if !prompting {
        for line in pace_line(intents).iter().chain(&told) {
            status(line);
        }
    }
    if !confirm.confirm {
        if out.json() {
            print_results(intents, &blocked, true)?;
        } else {
            print("(dry run)")?;
        }
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
        if out.json() {
            print_results(intents, &blocked, false)?;
        }
        status(&format!(
            "Nothing to {verb}: every entry was refused or skipped (see above)."
        ));
        return Ok(Go::Stop(finish(&store.describe(), &blocked)));
    }
    if !confirmed(store, &actionable, verb, confirm, &told)? {
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
    let progress = progress_bar(intents.len());
    let mut outcomes = Vec::with_capacity(intents.len());
    // A pace counts from when the first paced replay runs, not from the prompt.
    let mut paced_from: Option<f64> = None;
    for intent in intents {
        if prompt::interrupted() {
            break;
        }
        let outcome = match intent.offset {
            Some(offset) => {
                let from = *paced_from
                    .get_or_insert_with(|| crate::clock::Clock::now(&crate::clock::SystemClock));
                let request = ActionRequest {
                    due_at: Some(from + offset),
                    ..intent.request.clone()
                };
                execute_at(store, intent, &request)
            }
            None => execute(store, intent),
        };
        let line = crate::render::output::fit_lines(
            &format!(
                "{}  {}",
                out.clean(&intent.id),
                outcome.label(intent.action)
            ),
            out,
        );
        outcomes.push(outcome);
        prompt::set_progress(&summary(&outcomes));
        if !out.json() {
            match &progress {
                Some(bar) => bar.suspend(|| print(&line))?,
                None => print(&line)?,
            }
        }
        if let Some(bar) = &progress {
            bar.inc(1);
        }
    }
    if let Some(bar) = progress {
        bar.finish_and_clear();
    }
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

pub fn summary(outcomes: &[Outcome]) -> String {
    let count = |f: fn(&Outcome) -> bool| outcomes.iter().filter(|o| f(o)).count();
    format!(
        "{} done, {} skipped as stale, {} conflicts, {} refused, {} not found, {} failed, {} skipped",
        count(|o| matches!(o, Outcome::Done { .. })),
        count(|o| matches!(o, Outcome::Stale(_))),
        count(|o| matches!(o, Outcome::Conflict(_))),
        count(|o| matches!(o, Outcome::Refused(_))),
        count(|o| matches!(o, Outcome::NotFound(_))),
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
