//! One remediation session, whichever front end drives it: each entry read and triaged
//! afresh and previewed against the shared guardrails ([`Intent`]), what each receiver
//! does with a copy ([`receivers`]) and the pace ([`pace`]), a confirmation behind
//! [`Confirm`] (the terminal's prompt, the live screen's typed word), then the carry-out
//! through the guarded transitions ([`carry_out`]), each ending in a typed [`Outcome`].
//!
//! The command line and the live screen both come here, so they preview, confirm and
//! carry out alike; neither decides on its own what an action will do.

pub mod canary;
pub mod ids;
pub mod outcome;
pub mod pace;
pub mod preview;
pub mod run;
pub mod screen;
pub mod select;
pub mod stream;
pub mod wait;

pub use outcome::{Blocked, NotInDlq, Outcome};

use crate::api::ActionRequest;
use crate::model::{Channel, ChannelSet};
use crate::remediation::{Action, Approved, policy};
use crate::store::{Store, StoreError};
use crate::triage::{self, Verdict};
use crate::verify::pagerduty;

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
}

/// Reads and triages one entry, and previews `action` on it with `request`.
pub fn intent(
    store: &dyn Store,
    id: &str,
    action: Action,
    request: &ActionRequest,
) -> Result<Intent, StoreError> {
    intent_of(id, store.notification(id), action, request)
}

/// [`intent`] of each of `ids`, in their order: the entries are read as the store reads a
/// list ([`Store::documents`]). The first that cannot be read (other than not found) is
/// the error.
pub fn intents(
    store: &dyn Store,
    ids: &[String],
    action: Action,
    request: &ActionRequest,
) -> Result<Vec<Intent>, StoreError> {
    let mut read = store.documents(ids);
    ids.iter()
        .map(|id| intent_of(id, read(id), action, request))
        .collect()
}

/// The intent of `action` on the entry `id`, as its document (`read`) stands.
pub fn intent_of(
    id: &str,
    read: Result<crate::api::NotificationDoc, StoreError>,
    action: Action,
    request: &ActionRequest,
) -> Result<Intent, StoreError> {
    let doc = match read {
        Ok(doc) => doc,
        Err(StoreError::NotFound(what)) => {
            return Ok(Intent::blocked(id, action, None, Blocked::NotFound(what)));
        }
        Err(err) => return Err(err),
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

/// Most PagerDuty entries whose incidents are looked up for one prompt.
const INCIDENTS_LOOKED_UP: usize = 5;

/// What each receiver does with the copy a replay sends: statements, not guardrails.
/// Email and Slack drop no second copy; PagerDuty merges a trigger into an incident open
/// under its dedup key and opens a new one (a new page) otherwise, which its REST API
/// (`pagerduty`, when the front end was given a token) says.
pub fn receivers(intents: &[Intent], pagerduty: Option<&pagerduty::Api>) -> Vec<String> {
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
    lines.extend(pagerduty_statements(&paging, pagerduty));
    lines
}

/// For each of `ids` (the first few), what a trigger sent now does at PagerDuty: merged
/// into the incident open under its dedup key, or a new incident, as its REST API says
/// when `config` is given; else the rule, said once.
pub fn pagerduty_statements(ids: &[&str], config: Option<&pagerduty::Api>) -> Vec<String> {
    let mut lines = Vec::new();
    if ids.is_empty() {
        return lines;
    }
    let client = config.map(|_| crate::verify::http::client());
    match (config, client) {
        (Some(config), Some(Ok(client))) => {
            for id in ids.iter().take(INCIDENTS_LOOKED_UP) {
                let said = pagerduty::replay_outcome(&client, config, id);
                lines.push(format!(
                    "PAGERDUTY {}: {}",
                    crate::render::sanitize::clean(id),
                    crate::redact::Secrets::new().add(&config.token).redact(&said)
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

/// The outcomes counted, in one line.
pub fn summary(outcomes: &[Outcome]) -> String {
    let count = |f: fn(&Outcome) -> bool| outcomes.iter().filter(|o| f(o)).count();
    format!(
        "{} done, {} skipped as stale, {} conflicts, {} refused, {} not found, {} failed, {} skipped",
        count(|o| matches!(o, Outcome::Done { .. })),
        count(|o| matches!(o, Outcome::Stale(_))),
        count(|o| matches!(o, Outcome::Conflict(_))),
        count(|o| matches!(o, Outcome::Refused(_))),
        count(|o| matches!(o, Outcome::NotFound(_))),
        count(|o| matches!(o, Outcome::Failed(..))),
        count(|o| matches!(o, Outcome::Skipped(_))),
    )
}

/// The word a confirmation needs: `yes`, or past ten entries the count itself.
pub fn confirmation_word(count: usize) -> String {
    if count > 10 {
        count.to_string()
    } else {
        "yes".to_string()
    }
}

/// Whether `answer` is exactly the confirmation word (case-insensitive for `yes`).
pub fn confirms(answer: Option<&str>, count: usize) -> bool {
    let expected = confirmation_word(count);
    answer.is_some_and(|a| a.eq_ignore_ascii_case(&expected))
}

/// What a session asks to go ahead with: the entries the preview approved, in what they
/// will be called (`resolve`, `replay`), and what each receiver does with a copy.
pub struct Preview<'a> {
    pub verb: &'a str,
    pub approved: &'a [&'a Intent],
    pub receivers: &'a [String],
}

impl Preview<'_> {
    /// How many entries a yes carries out.
    pub fn count(&self) -> usize {
        self.approved.len()
    }

    /// The pace the replays go at, if they are paced.
    pub fn planned(&self) -> Option<Planned<'_>> {
        planned(self.approved.iter().copied())
    }
}

/// Who says yes: the terminal's prompt, the live screen's dialog.
pub trait Confirm {
    type Error;
    /// Whether to carry `preview` out.
    fn confirm(&mut self, preview: &Preview<'_>) -> Result<bool, Self::Error>;
}

/// A confirmation already typed, as the live screen takes it: it confirms only when it
/// is the word the count calls for.
pub struct Typed<'a>(pub &'a str);

impl Confirm for Typed<'_> {
    type Error = std::convert::Infallible;

    fn confirm(&mut self, preview: &Preview<'_>) -> Result<bool, Self::Error> {
        Ok(confirms(Some(self.0.trim()), preview.count()))
    }
}

/// Whether a carry-out goes on after an entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flow {
    Continue,
    Stop,
}

/// Carries `intents` out in order, each through the guarded transition (an entry the
/// preview blocked ends as its block, and nothing is asked of the store), telling
/// `after` each outcome. A paced replay is made due at its place counted from when the
/// first paced one runs (by `clock`). Stops early when `after` says so.
pub fn carry_out(
    store: &dyn Store,
    intents: &[Intent],
    clock: &dyn crate::clock::Clock,
    after: &mut dyn FnMut(&Intent, &Outcome) -> Flow,
) -> Vec<Outcome> {
    let mut outcomes = Vec::with_capacity(intents.len());
    // A pace counts from when the first paced replay runs, not from the prompt.
    let mut paced_from: Option<f64> = None;
    for intent in intents {
        let outcome = match intent.offset {
            Some(offset) => {
                let from = *paced_from.get_or_insert_with(|| clock.now());
                let request = ActionRequest {
                    due_at: Some(from + offset),
                    ..intent.request.clone()
                };
                execute_at(store, intent, &request)
            }
            None => execute(store, intent),
        };
        let flow = after(intent, &outcome);
        outcomes.push(outcome);
        if flow == Flow::Stop {
            break;
        }
    }
    outcomes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_whole_word_confirms() {
        for stray in ["y", "Y", "ye", "yes please", "", "no", "j", " "] {
            assert!(!confirms(Some(stray.trim()), 1), "{stray:?}");
        }
        assert!(confirms(Some("yes"), 1));
        assert!(confirms(Some("YES"), 3));
        assert!(!confirms(None, 1));
        assert!(!confirms(Some("yes"), 11), "past ten the count is needed");
        assert!(confirms(Some("11"), 11));
        assert!(!confirms(Some("12"), 11));
    }

    /// The live screen's typed word confirms by the same rule as the terminal's prompt,
    /// counted over what the preview approved.
    #[test]
    fn a_typed_word_confirms_by_the_count_of_approved_entries() {
        let intent = |id: &str| {
            Intent::blocked(
                id,
                Action::Replay,
                None,
                Blocked::NotFound(format!("notification {id}")),
            )
        };
        let intents: Vec<Intent> = (0..11).map(|n| intent(&format!("n-{n}"))).collect();
        let approved: Vec<&Intent> = intents.iter().collect();
        let preview = |approved| Preview {
            verb: "replay",
            approved,
            receivers: &[],
        };
        let Ok(eleven) = Typed(" 11 ").confirm(&preview(&approved));
        let Ok(yes) = Typed("yes").confirm(&preview(&approved));
        assert!(eleven && !yes);
        let Ok(one) = Typed("YES").confirm(&preview(&approved[..1]));
        assert!(one);
    }
}
