//! The interactive walk: the DLQ one entry at a time, each decided at a terminal (or by
//! a script, as the safety sweep plays it). `dlq triage --interactive` runs it.
//!
//! A choice is a typed word or number ended by Enter; Enter alone skips; nothing acts
//! without a second answer to a question that repeats the action, the entry, its
//! channels, the store and the operator. Anything not understood is asked again.

use crate::cli::act::{self, Target};
use crate::cli::args::AuditArgs;
use crate::cli::error::CliResult;
use crate::cli::prompt;
use crate::remediation::{Action, Claim};
use crate::render::output::{Output, status};
use crate::render::sanitize::clean;
use crate::render::views;
use crate::session::Intent;
use crate::session::outcome::{Blocked, Outcome, Skip};
use crate::store::Store;
use crate::triage::{Branch, ChannelState, Verdict};
use crate::verify::Sources;
use std::collections::VecDeque;

/// Where answers come from: the terminal, or a script (the safety sweep, tests).
pub trait Ask {
    /// Asks `question`; `None` means the input ended.
    fn ask(&mut self, question: &str) -> std::io::Result<Option<String>>;
    /// Tells the operator something.
    fn say(&mut self, text: &str);
}

/// The operator at a terminal.
pub struct Terminal;

impl Ask for Terminal {
    fn ask(&mut self, question: &str) -> std::io::Result<Option<String>> {
        prompt::ask(question)
    }

    fn say(&mut self, text: &str) {
        status(text);
    }
}

/// Answers given in advance; what was said is kept.
#[derive(Debug, Default)]
pub struct Scripted {
    answers: VecDeque<String>,
    pub transcript: Vec<String>,
}

impl Scripted {
    pub fn new<S: Into<String>>(answers: impl IntoIterator<Item = S>) -> Self {
        Self {
            answers: answers.into_iter().map(Into::into).collect(),
            transcript: Vec::new(),
        }
    }
}

impl Ask for Scripted {
    fn ask(&mut self, question: &str) -> std::io::Result<Option<String>> {
        self.transcript.push(question.to_string());
        Ok(self.answers.pop_front().map(|a| a.trim().to_string()))
    }

    fn say(&mut self, text: &str) {
        self.transcript.push(text.to_string());
    }
}

/// What the operator can decide for one entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Choice {
    Act(Action),
    /// Ask the providers' records (VERIFY entries), then decide again.
    Verify,
    Skip,
    Quit,
}

/// Reads a decision: a word or its number; Enter alone skips; anything else is `None`.
pub fn parse_choice(answer: &str) -> Option<Choice> {
    match answer.trim().to_ascii_lowercase().as_str() {
        "" | "3" | "skip" | "s" => Some(Choice::Skip),
        "1" | "resolve" => Some(Choice::Act(Action::Resolve)),
        "2" | "replay" => Some(Choice::Act(Action::Replay)),
        "4" | "quit" | "q" => Some(Choice::Quit),
        "5" | "verify" => Some(Choice::Verify),
        _ => None,
    }
}

/// How many times a question is asked again before the entry is skipped.
const RETRIES: usize = 3;

fn proposal(verdict: &Verdict) -> &'static str {
    match verdict.branch {
        Branch::Resolve => "resolve",
        Branch::Replay => "replay",
        Branch::Verify if verdict.in_state(ChannelState::Uncertain).is_empty() => {
            "skip: the doubt is in the store itself (see the notes), not at a provider"
        }
        Branch::Verify => "verify: ask the providers' records",
    }
}

fn decide(ask: &mut dyn Ask, verdict: &Verdict) -> std::io::Result<Choice> {
    let verify = if verdict.branch == Branch::Verify {
        ", 5 verify"
    } else {
        ""
    };
    // Only the choices this card has are offered, in the question and in the correction.
    let words = if verdict.branch == Branch::Verify {
        "resolve, replay, skip, quit or verify (or 1-5)"
    } else {
        "resolve, replay, skip or quit (or 1-4)"
    };
    let question = format!(
        "Decision: 1 resolve, 2 replay, 3 skip, 4 quit{verify} (proposed: {}; Enter skips):",
        proposal(verdict)
    );
    for _ in 0..RETRIES {
        let Some(answer) = ask.ask(&question)? else {
            return Ok(Choice::Quit);
        };
        match parse_choice(&answer) {
            Some(Choice::Verify) if verdict.branch != Branch::Verify => {
                ask.say("nothing is uncertain here, so there is nothing to verify")
            }
            Some(choice) => return Ok(choice),
            None => ask.say(&format!(
                "not a choice: {}; type {words} and press Enter",
                clean(&answer)
            )),
        }
    }
    ask.say("no choice understood: skipped");
    Ok(Choice::Skip)
}

/// One decided entry.
pub struct Decision {
    pub id: String,
    pub action: Option<Action>,
    pub outcome: Outcome,
}

/// Asks the providers' records about one entry, offers to record the answers, and
/// returns the entry's verdict afterwards.
fn verify_one(
    store: &dyn Store,
    verdict: Verdict,
    sources: &Sources,
    audit: &AuditArgs,
    operator: &str,
    ask: &mut dyn Ask,
    out: &Output,
) -> CliResult<Verdict> {
    let asked = store.verify(std::slice::from_ref(&verdict.id), sources)?;
    for answer in &asked.answers {
        ask.say(&format!(
            "  {} cycle {} attempt {}: {} ({}): {}",
            answer.channel,
            answer.cycle,
            answer.attempt,
            answer.answer,
            answer.source,
            clean(&answer.evidence)
        ));
    }
    for (_, why) in &asked.skipped {
        ask.say(&format!("  {}", clean(why)));
    }
    if !asked.answers.iter().any(|a| a.answer.finding().is_some()) {
        ask.say("No record proves it either way: check by hand (TSG-02, branch 2).");
        return Ok(verdict);
    }
    let answer = ask.ask(&format!(
        "Record these answers on {} in {} as {}? Type yes and press Enter (anything else does not):",
        clean(&verdict.id),
        clean(&store.describe()),
        clean(&store.operator(operator)?)
    ))?;
    if !crate::session::confirms(answer.as_deref(), 1) {
        ask.say("Not recorded.");
        return Ok(verdict);
    }
    for result in store.record_verified(
        &asked,
        operator,
        crate::remediation::verified::Why {
            reason: audit.reason.as_deref(),
            ticket: audit.ticket.as_deref(),
            via: None,
        },
    ) {
        match result {
            Ok(done) => ask.say(&format!(
                "Recorded {} VERIFIED event(s); the entry is now {}.",
                done.event_ids.len(),
                done.branch
            )),
            Err((_, err)) => ask.say(&format!("Not recorded: {}", clean(&err.to_string()))),
        }
    }
    let doc = store.notification(&verdict.id)?;
    let now = crate::triage::triage_events(&doc.row, &doc.events);
    ask.say(&views::verdict_block(&now, out));
    Ok(now)
}

/// One entry's card: what was verified out of band, then its verdict.
fn show_card(store: &dyn Store, verdict: &Verdict, ask: &mut dyn Ask, out: &Output) {
    if let Ok(doc) = store.notification(&verdict.id) {
        let verified = views::verification_lines(&doc.events);
        if !verified.is_empty() {
            ask.say("Verified out of band (the providers' own records):");
            for line in verified {
                ask.say(&format!("  {line}"));
            }
        }
    }
    ask.say(&views::verdict_block(verdict, out));
}

/// The request for `action` on a card: on a VERIFY entry, with the operator's account
/// of what they checked (None when they gave none).
fn request_for(
    verdict: &Verdict,
    action: Action,
    operator: &str,
    audit: &AuditArgs,
    ask: &mut dyn Ask,
) -> std::io::Result<Option<crate::api::ActionRequest>> {
    let mut request = act::base_request(operator, audit, None, None);
    if verdict.branch == Branch::Verify {
        let Some(checked) = account_of_check(ask, action)? else {
            return Ok(None);
        };
        request.attestation = Some(checked);
        request.verified = Some(match action {
            Action::Resolve => Claim::Delivered,
            Action::Replay => Claim::NotDelivered,
        });
    }
    Ok(Some(request))
}

/// Walks `verdicts` and carries out what the operator confirms, entry by entry.
pub fn walk(
    store: &dyn Store,
    verdicts: Vec<Verdict>,
    audit: &AuditArgs,
    operator: &str,
    sources: &Sources,
    ask: &mut dyn Ask,
    out: &Output,
) -> CliResult<Vec<Decision>> {
    let total = verdicts.len();
    let mut decisions: Vec<Decision> = Vec::new();
    for (n, verdict) in verdicts.into_iter().enumerate() {
        ask.say(&format!("\n[{}/{total}] {}", n + 1, clean(&verdict.id)));
        show_card(store, &verdict, ask, out);
        let mut verdict = verdict;
        let id = verdict.id.clone();
        let mut decided = |action: Option<Action>, outcome: Outcome, ask: &mut dyn Ask| {
            ask.say(&format!(
                "{}: {}",
                clean(&id),
                outcome.label(action.unwrap_or(Action::Resolve))
            ));
            decisions.push(Decision {
                id: id.clone(),
                action,
                outcome,
            });
            prompt::set_progress(&crate::session::summary(
                &decisions
                    .iter()
                    .map(|d| d.outcome.clone())
                    .collect::<Vec<_>>(),
            ));
        };
        // A choice the guardrails refuse is said, and the card asks again.
        let mut refusals = 0;
        let mut quit = false;
        loop {
            let mut choice = decide(ask, &verdict)?;
            while choice == Choice::Verify {
                verdict = verify_one(store, verdict, sources, audit, operator, ask, out)?;
                choice = decide(ask, &verdict)?;
            }
            let action = match choice {
                Choice::Skip | Choice::Verify => {
                    decided(None, Outcome::Skipped(Skip::ByOperator), ask);
                    break;
                }
                Choice::Quit => {
                    decided(None, Outcome::Skipped(Skip::QuitBeforeDeciding), ask);
                    quit = true;
                    break;
                }
                Choice::Act(action) => action,
            };
            let Some(request) = request_for(&verdict, action, operator, audit, ask)? else {
                decided(Some(action), Outcome::Skipped(Skip::NoCheckGiven), ask);
                break;
            };
            // Read the entry again: the decision is checked against what is stored now.
            let intent = crate::session::intent(store, &verdict.id, action, &request)?;
            let approved = match &intent.preview {
                Ok(approved) => approved.clone(),
                Err(Blocked::Refused(refusal)) if refusals + 1 < RETRIES => {
                    refusals += 1;
                    ask.say(&format!(
                        "refused: {}; choose again",
                        clean(&refusal.to_string())
                    ));
                    continue;
                }
                Err(blocked) => {
                    decided(Some(action), blocked.into(), ask);
                    break;
                }
            };
            if !confirm(store, ask, &intent, &approved.channels)? {
                decided(Some(action), Outcome::Skipped(Skip::NotConfirmed), ask);
                break;
            }
            let outcome = crate::session::execute(store, &intent);
            decided(Some(action), outcome, ask);
            break;
        }
        if quit {
            break;
        }
    }
    Ok(decisions)
}

/// What counts as an account of an out-of-band check: a few words saying where one looked
/// and what one found. A stray key, `y` or `ok` is not one.
pub fn is_account(text: &str) -> bool {
    let text = text.trim();
    text.split_whitespace().count() >= 2
        && text.chars().filter(|c| c.is_alphanumeric()).count() >= 8
}

/// Asks what the operator checked before acting on a VERIFY entry; `None` when they gave no
/// account (Enter, the input ended, or three answers too short to be one).
fn account_of_check(ask: &mut dyn Ask, action: Action) -> std::io::Result<Option<String>> {
    let found = match action {
        Action::Resolve => "that it arrived",
        Action::Replay => "that it did not arrive",
    };
    let question = format!(
        "Where did you look out of band, and what shows {found}? (a few words, recorded in the audit; Enter skips)"
    );
    for _ in 0..RETRIES {
        let Some(answer) = ask.ask(&question)? else {
            return Ok(None);
        };
        let answer = answer.trim();
        if answer.is_empty() {
            return Ok(None);
        }
        if is_account(answer) {
            return Ok(Some(answer.to_string()));
        }
        ask.say(&format!(
            "{:?} does not say what was checked; for example: relay log has no line for the Message-ID",
            clean(answer)
        ));
    }
    Ok(None)
}

/// The second question, which repeats exactly what will happen.
fn confirm(
    store: &dyn Store,
    ask: &mut dyn Ask,
    intent: &Intent,
    channels: &crate::model::ChannelSet,
) -> CliResult<bool> {
    let target = Target::of(store, &intent.request)?;
    let mut what = match intent.action {
        Action::Resolve => format!("resolve {}", clean(&intent.id)),
        Action::Replay => format!("replay {} on {}", clean(&intent.id), channels.joined(",")),
    };
    if let Some(checked) = intent.request.attestation() {
        let claim = match intent.request.verified {
            Some(Claim::Delivered) => "it arrived",
            _ => "it did not arrive",
        };
        what.push_str(&format!(
            " on your word that {claim} (\"{}\")",
            clean(checked)
        ));
    }
    let answer = ask.ask(&format!(
        "{what} in {} as {}? Type yes and press Enter (anything else skips):",
        clean(&target.place),
        clean(&target.operator)
    ))?;
    Ok(crate::session::confirms(answer.as_deref(), 1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_whole_words_and_numbers_are_choices() {
        assert_eq!(parse_choice(""), Some(Choice::Skip));
        assert_eq!(parse_choice(" Replay "), Some(Choice::Act(Action::Replay)));
        assert_eq!(parse_choice("1"), Some(Choice::Act(Action::Resolve)));
        assert_eq!(parse_choice("q"), Some(Choice::Quit));
        assert_eq!(parse_choice(" verify"), Some(Choice::Verify));
        for stray in [
            "j",
            "k",
            " ",
            "y",
            "yes",
            "it arrived, replay it",
            "re",
            "2 3",
            "r",
        ] {
            assert!(
                !matches!(parse_choice(stray), Some(Choice::Act(_))),
                "{stray:?} must not choose an action"
            );
        }
    }

    #[test]
    fn a_stray_answer_is_not_an_account_of_a_check() {
        for stray in ["y", "yes", "ok", "  ", "yes yes", "it ok", "n"] {
            assert!(!is_account(stray), "{stray:?}");
        }
        for account in [
            "relay log has no line for the Message-ID",
            "mailbox: not there",
            "asked Bob, nothing arrived",
        ] {
            assert!(is_account(account), "{account:?}");
        }
    }
}
