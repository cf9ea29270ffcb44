//! How one entry of a remediation ends, as types: what the preview found before anything
//! changed (`Blocked`), and what became of the entry (`Outcome`). The words shown for
//! each live here; the exit code each calls for lives in `error.rs`'s one table.

use crate::exit::ExitKind;
use crate::model::{ChannelSet, MAX_ID_BYTES};
use crate::remediation::policy::Terms;
use crate::remediation::{Action, Conflict, Refusal};
use crate::store::StoreError;
use std::fmt;

/// Why an entry will not be acted on, found before anything changes.
#[derive(Debug, Clone, PartialEq)]
pub enum Blocked {
    /// A guardrail said no.
    Refused(Refusal),
    /// A plan entry that cannot be carried out as written.
    Unplanned(Unplanned),
    /// No notification has this id.
    NotFound(String),
    /// Not in the DLQ: someone else already acted on it.
    NotInDlq(NotInDlq),
    /// The history moved since the plan was made.
    Stale(Stale),
}

/// An entry already out of the DLQ when it was read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotInDlq {
    pub id: String,
    pub status: String,
}

impl fmt::Display for NotInDlq {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Self { id, status } = self;
        write!(
            f,
            "{id} is not in the DLQ (status {status}); {} shows its history",
            crate::model::command::pasted(&["inspect"], id, &[])
        )
    }
}

/// Why a plan entry cannot be carried out as written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unplanned {
    /// The id breaks the id rule (`NotificationId`).
    NotAnId,
    /// Left as `verify`: nothing is done without an out-of-band check.
    LeftAsVerify(String),
    /// No usable `last_event_id` to check the entry against.
    NoBase(String),
    /// Listed twice with different actions or bases.
    ListedTwice(String),
    /// Left out by the plan's own selection (`--not-channel`, `--not-error`), yet listed.
    Excluded(String, String),
}

impl fmt::Display for Unplanned {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Unplanned::NotAnId => write!(
                f,
                "not a notification id (empty, longer than {MAX_ID_BYTES} bytes, or holding spaces or control characters)"
            ),
            Unplanned::LeftAsVerify(id) => write!(
                f,
                "{id} is VERIFY in the plan: nothing is done without an out-of-band check; set its action to resolve or replay and add an \"attestation\" saying what you checked"
            ),
            Unplanned::NoBase(id) => write!(
                f,
                "{id}: the plan has no usable last_event_id, so nothing shows the entry is still as it was planned"
            ),
            Unplanned::ListedTwice(id) => write!(
                f,
                "{id} is listed more than once in the plan, with different actions or bases; make the plan again"
            ),
            Unplanned::Excluded(id, why) => write!(
                f,
                "{id} is left out by the plan's own selection ({why}), yet listed in its entries: skipped"
            ),
        }
    }
}

/// An entry whose history moved since the view an action was based on.
#[derive(Debug, Clone, PartialEq)]
pub enum Stale {
    /// The plan saw `planned` as the newest event; the store's newest is `newest`.
    SincePlan {
        id: String,
        newest: Option<i64>,
        planned: i64,
    },
    /// The guarded transition found the history moved.
    Moved(Conflict),
}

impl fmt::Display for Stale {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            // Events are never deleted: a plan that saw a newer one than the entry has
            // was not made from this history.
            Stale::SincePlan {
                id,
                newest: Some(newest),
                planned,
            } if planned > newest => write!(
                f,
                "{id}: the plan saw event {planned}, newer than any this entry has (its newest is {newest}): the plan was not made from this history; make it again"
            ),
            Stale::SincePlan {
                id,
                newest,
                planned,
            } => write!(
                f,
                "{id}: history moved since the plan was made (newest event {}, the plan saw {planned})",
                newest.map_or_else(|| "none".into(), |n| n.to_string())
            ),
            Stale::Moved(conflict) => conflict.fmt(f),
        }
    }
}

/// Why an entry was left alone by the operator's own choice.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Skip {
    ByOperator,
    QuitBeforeDeciding,
    NoCheckGiven,
    NotConfirmed,
    /// Held back: a canary of the same run was not delivered.
    CanaryNotDelivered,
}

impl fmt::Display for Skip {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Skip::ByOperator => "by the operator",
            Skip::QuitBeforeDeciding => "quit before deciding",
            Skip::NoCheckGiven => "no out-of-band check given",
            Skip::NotConfirmed => "not confirmed",
            Skip::CanaryNotDelivered => "held back: the canary was not delivered",
        })
    }
}

/// How one entry ended.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// Carried out: the audit event written and the channels replayed.
    Done { event_id: i64, channels: ChannelSet },
    /// Its history moved since it was previewed or planned.
    Stale(Stale),
    /// Someone else acted first.
    Conflict(Conflicted),
    /// A guardrail, or the plan itself, said no.
    Refused(Refused),
    /// No notification has this id.
    NotFound(String),
    /// The store could not carry it out: what it said, and the exit that calls for (a
    /// refused key is an authentication failure, whichever front end meets it).
    Failed(String, ExitKind),
    /// Left alone by the operator.
    Skipped(Skip),
}

/// Someone else acted first: the transition's own account, or the entry already out of
/// the DLQ when it was read.
#[derive(Debug, Clone, PartialEq)]
pub enum Conflicted {
    Acted(Conflict),
    NotInDlq(NotInDlq),
}

impl fmt::Display for Conflicted {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Conflicted::Acted(conflict) => conflict.fmt(f),
            Conflicted::NotInDlq(not_in_dlq) => not_in_dlq.fmt(f),
        }
    }
}

/// A refusal: a guardrail's, or a plan entry's that cannot be carried out as written.
#[derive(Debug, Clone, PartialEq)]
pub enum Refused {
    Guardrail(Refusal),
    Unplanned(Unplanned),
}

impl fmt::Display for Refused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Refused::Guardrail(refusal) => refusal.fmt(f),
            Refused::Unplanned(why) => why.fmt(f),
        }
    }
}

impl Blocked {
    /// The words a dry-run line shows after the verb, not yet made safe to print.
    pub fn words(&self) -> String {
        self.words_in(Terms::CommandLine)
    }

    /// [`Blocked::words`], a refusal's remedy in `terms`.
    pub fn words_in(&self, terms: Terms) -> String {
        match self {
            Blocked::Refused(refusal) => {
                format!("REFUSED: {}; {}", refusal.why(), refusal.remedy(terms))
            }
            Blocked::Unplanned(why) => format!("REFUSED: {why}"),
            Blocked::NotFound(what) => format!("NOT FOUND: {what} not found"),
            Blocked::NotInDlq(not_in_dlq) => format!("CONFLICT: {not_in_dlq}"),
            Blocked::Stale(stale) => format!("STALE: {stale}"),
        }
    }
}

impl From<&Blocked> for Outcome {
    fn from(blocked: &Blocked) -> Self {
        match blocked {
            Blocked::Refused(refusal) => Outcome::Refused(Refused::Guardrail(refusal.clone())),
            Blocked::Unplanned(why) => Outcome::Refused(Refused::Unplanned(why.clone())),
            Blocked::NotFound(what) => Outcome::NotFound(what.clone()),
            Blocked::NotInDlq(not_in_dlq) => {
                Outcome::Conflict(Conflicted::NotInDlq(not_in_dlq.clone()))
            }
            Blocked::Stale(stale) => Outcome::Stale(stale.clone()),
        }
    }
}

impl Outcome {
    /// What the guarded transition's error means for this entry.
    pub fn of_store_error(err: StoreError) -> Self {
        match err {
            StoreError::Stale(conflict) => Outcome::Stale(Stale::Moved(conflict)),
            StoreError::Conflict(conflict) => Outcome::Conflict(Conflicted::Acted(conflict)),
            StoreError::Refused(refusal) => Outcome::Refused(Refused::Guardrail(refusal)),
            StoreError::NotFound(what) => Outcome::NotFound(what),
            err => {
                let exit = crate::exit::exit_kind(&err);
                Outcome::Failed(err.to_string(), exit)
            }
        }
    }

    /// The JSON name of the outcome.
    pub fn name(&self) -> &'static str {
        match self {
            Outcome::Done { .. } => "done",
            Outcome::Stale(_) => "stale",
            Outcome::Conflict(_) => "conflict",
            Outcome::Refused(_) => "refused",
            Outcome::NotFound(_) => "not_found",
            Outcome::Failed(..) => "failed",
            Outcome::Skipped(_) => "skipped",
        }
    }

    /// Why it was not done, in words; `None` when it was.
    pub fn reason(&self) -> Option<String> {
        match self {
            Outcome::Done { .. } => None,
            _ => Some(self.why()),
        }
    }

    fn why(&self) -> String {
        match self {
            Outcome::Done { .. } => String::new(),
            Outcome::Stale(stale) => stale.to_string(),
            Outcome::Conflict(conflict) => conflict.to_string(),
            Outcome::Refused(refusal) => refusal.to_string(),
            Outcome::NotFound(what) => format!("{what} not found"),
            Outcome::Failed(why, _) => why.clone(),
            Outcome::Skipped(skip) => skip.to_string(),
        }
    }

    /// The outcome in words, safe to print: reasons can quote store text.
    pub fn label(&self, action: Action) -> String {
        crate::render::sanitize::clean(&self.words(action)).into_owned()
    }

    fn words(&self, action: Action) -> String {
        match self {
            Outcome::Done { channels, .. } if channels.is_empty() => action.done().to_string(),
            Outcome::Done { channels, .. } => format!("{} {}", action.done(), channels.joined(",")),
            Outcome::Stale(_) => format!("skipped (stale): {}", self.why()),
            Outcome::Conflict(_) => format!("conflict: {}", self.why()),
            Outcome::Refused(_) => format!("refused (guardrail): {}", self.why()),
            Outcome::NotFound(_) => format!("not found: {}", self.why()),
            Outcome::Failed(..) => format!("failed: {}", self.why()),
            Outcome::Skipped(_) => format!("skipped: {}", self.why()),
        }
    }
}

/// The exit one entry's outcome calls for; `None` when it needs none.
pub fn outcome_exit(outcome: &Outcome) -> Option<ExitKind> {
    match outcome {
        Outcome::Done { .. } | Outcome::Skipped(_) => None,
        Outcome::Stale(_) | Outcome::Conflict(_) => Some(ExitKind::Conflict),
        Outcome::Refused(_) => Some(ExitKind::Refused),
        Outcome::NotFound(_) => Some(ExitKind::NotFound),
        Outcome::Failed(_, exit) => Some(*exit),
    }
}

/// The most serious exit among the outcomes: error, conflict, refusal, not found.
pub fn exit_for<'a>(outcomes: impl IntoIterator<Item = &'a Outcome>) -> Option<ExitKind> {
    crate::exit::most_serious(outcomes.into_iter().filter_map(outcome_exit))
}
