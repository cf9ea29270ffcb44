//! The CLI's one error type, and the one table that maps it to exit codes (DESIGN §5).

use super::outcome::Outcome;
use crate::store::StoreError;
use std::fmt;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExitKind {
    /// 1: anything that went wrong.
    Error,
    /// 2: the command line is wrong.
    Usage,
    /// 3: no such notification.
    NotFound,
    /// 4: a guardrail refused.
    Refused,
    /// 5: someone else changed it first.
    Conflict,
    /// 6: the API refused the key.
    Auth,
    /// 130 (128 + SIGINT, as shells report it): Ctrl-C ended the run, after an account
    /// of what was already done.
    Interrupted,
    /// 0, silently: whoever read our output closed the pipe (`| head`).
    Closed,
}

impl ExitKind {
    pub fn code(self) -> i32 {
        match self {
            ExitKind::Error => 1,
            ExitKind::Usage => 2,
            ExitKind::NotFound => 3,
            ExitKind::Refused => 4,
            ExitKind::Conflict => 5,
            ExitKind::Auth => 6,
            ExitKind::Interrupted => 130,
            ExitKind::Closed => 0,
        }
    }
}

/// What went wrong, the exit it calls for, and what to do. `causes` is the chain under
/// the message, outermost first (`error:`, then each `Caused by:`, then each `hint:`).
#[derive(Debug, Clone)]
pub struct CliError {
    pub kind: ExitKind,
    pub message: String,
    pub causes: Vec<String>,
    pub hints: Vec<String>,
}

impl CliError {
    pub fn new(kind: ExitKind, message: impl Into<String>) -> Self {
        Self {
            kind,
            message: message.into(),
            causes: Vec::new(),
            hints: Vec::new(),
        }
    }

    /// An error with context (anyhow's), under the exit `kind`: the outermost context is
    /// the message, the rest of the chain its causes.
    pub fn of(kind: ExitKind, err: &anyhow::Error) -> Self {
        let mut chain = err.chain().map(ToString::to_string);
        Self {
            kind,
            message: chain.next().unwrap_or_default(),
            causes: chain.collect(),
            hints: Vec::new(),
        }
    }

    pub fn error(message: impl Into<String>) -> Self {
        Self::new(ExitKind::Error, message)
    }

    pub fn usage(message: impl Into<String>) -> Self {
        Self::new(ExitKind::Usage, message)
    }

    pub fn hint(mut self, hint: impl Into<String>) -> Self {
        self.hints.push(hint.into());
        self
    }
}

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for CliError {}

/// The exit one entry's outcome calls for; `None` when it needs none.
pub fn outcome_exit(outcome: &Outcome) -> Option<ExitKind> {
    match outcome {
        Outcome::Done { .. } | Outcome::Skipped(_) => None,
        Outcome::Stale(_) | Outcome::Conflict(_) => Some(ExitKind::Conflict),
        Outcome::Refused(_) => Some(ExitKind::Refused),
        Outcome::NotFound(_) => Some(ExitKind::NotFound),
        Outcome::Failed(_) => Some(ExitKind::Error),
    }
}

/// The most serious exit among the outcomes: error, conflict, refusal, not found.
pub fn exit_for<'a>(outcomes: impl IntoIterator<Item = &'a Outcome>) -> Option<ExitKind> {
    let kinds: Vec<ExitKind> = outcomes.into_iter().filter_map(outcome_exit).collect();
    [
        ExitKind::Error,
        ExitKind::Conflict,
        ExitKind::Refused,
        ExitKind::NotFound,
    ]
    .into_iter()
    .find(|kind| kinds.contains(kind))
}

/// The exit a store error calls for.
pub fn exit_kind(err: &StoreError) -> ExitKind {
    match err {
        StoreError::NotFound(_) => ExitKind::NotFound,
        StoreError::Conflict(_) | StoreError::Stale(_) => ExitKind::Conflict,
        StoreError::Refused(_) => ExitKind::Refused,
        StoreError::Auth(_) => ExitKind::Auth,
        _ => ExitKind::Error,
    }
}

impl From<StoreError> for CliError {
    fn from(err: StoreError) -> Self {
        let message = err.to_string();
        match err {
            StoreError::NotFound(_) => CliError::new(ExitKind::NotFound, message),
            StoreError::Conflict(_) => CliError::new(ExitKind::Conflict, message).hint(
                "someone else acted on it first; run `unsctl inspect <ID>` to see what changed",
            ),
            StoreError::Stale(_) => CliError::new(ExitKind::Conflict, message)
                .hint("its history moved since it was triaged; triage it again"),
            StoreError::Refused(refusal) => {
                CliError::new(ExitKind::Refused, refusal.why()).hint(refusal.cli_remedy())
            }
            StoreError::Invalid(_) => CliError::new(ExitKind::Error, message),
            StoreError::Auth(_) => CliError::new(ExitKind::Auth, message)
                .hint("check UNS_API_KEY: it must match the key the server was started with"),
            StoreError::Unavailable(_) => CliError::new(ExitKind::Error, message),
            StoreError::InvalidStore(_) => CliError::new(ExitKind::Error, message)
                .hint("--db must name a store written by the UNS runtime"),
            StoreError::Other(_) | StoreError::Stopped => CliError::new(ExitKind::Error, message),
        }
    }
}

impl From<anyhow::Error> for CliError {
    fn from(err: anyhow::Error) -> Self {
        CliError::of(ExitKind::Error, &err)
    }
}

impl From<std::io::Error> for CliError {
    fn from(err: std::io::Error) -> Self {
        if err.kind() == std::io::ErrorKind::BrokenPipe {
            return CliError::new(ExitKind::Closed, "output closed");
        }
        if let Some(Interrupted(account)) = err.get_ref().and_then(|e| e.downcast_ref()) {
            return CliError::new(ExitKind::Interrupted, account.clone());
        }
        CliError::error(format!("I/O error: {err}"))
    }
}

/// A prompt's read ended by Ctrl-C, carrying the account of what was already done.
#[derive(Debug)]
pub struct Interrupted(pub String);

impl fmt::Display for Interrupted {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("interrupted (Ctrl-C)")
    }
}

impl std::error::Error for Interrupted {}

pub type CliResult<T = ()> = Result<T, CliError>;
