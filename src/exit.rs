//! The one error type the front ends show and exit by, and the one table that maps it to
//! exit codes (DESIGN §5): the command line and the live screen alike.

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

/// What went wrong, the exit it calls for, and what to do. `details` are the items the
/// message lists, one line each under it; `causes` is the chain under them, outermost
/// first (`error:`, the details, then each `Caused by:`, then each `hint:`). A message
/// is one line: text it quotes may hold a line break, shown escaped, so only these lists
/// make lines.
#[derive(Debug, Clone)]
pub struct Failure {
    pub kind: ExitKind,
    pub message: String,
    pub details: Vec<String>,
    pub causes: Vec<String>,
    pub hints: Vec<String>,
}

impl Failure {
    pub fn new(kind: ExitKind, message: impl Into<String>) -> Self {
        Self {
            kind,
            message: message.into(),
            details: Vec::new(),
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
            details: Vec::new(),
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

    /// The items the message lists, each a line under it.
    pub fn details(mut self, details: impl IntoIterator<Item = String>) -> Self {
        self.details.extend(details);
        self
    }

    pub fn hint(mut self, hint: impl Into<String>) -> Self {
        self.hints.push(hint.into());
        self
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Failure {}

/// The one ranking a command with several failures exits by: error, authentication,
/// conflict, refusal, not found.
pub fn most_serious(kinds: impl IntoIterator<Item = ExitKind>) -> Option<ExitKind> {
    let kinds: Vec<ExitKind> = kinds.into_iter().collect();
    [
        ExitKind::Error,
        ExitKind::Auth,
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
        StoreError::Auth(_) | StoreError::DatabaseAuth(_) => ExitKind::Auth,
        StoreError::Usage(_) => ExitKind::Usage,
        _ => ExitKind::Error,
    }
}

impl From<StoreError> for Failure {
    /// The exit is [`exit_kind`]'s, the one mapping; this adds the words and the hint.
    fn from(err: StoreError) -> Self {
        let kind = exit_kind(&err);
        let message = err.to_string();
        let hint = match &err {
            StoreError::Conflict(_) => Some(
                "someone else acted on it first; run `unsctl inspect <ID>` to see what changed"
                    .to_string(),
            ),
            StoreError::Stale(_) => {
                Some("its history moved since it was triaged; triage it again".to_string())
            }
            StoreError::Refused(refusal) => Some(refusal.cli_remedy()),
            StoreError::Auth(_) => Some(
                "check UNS_API_KEY: it must match the key the server was started with".to_string(),
            ),
            StoreError::DatabaseAuth(_) => Some(
                "check PGPASSWORD (or ~/.pgpass, readable by you alone) and the URL's user; \
                 the server's pg_hba.conf also decides whether TLS is required (sslmode)"
                    .to_string(),
            ),
            StoreError::InvalidStore(_) => {
                Some("--db must name a store written by the UNS runtime".to_string())
            }
            _ => None,
        };
        let message = match &err {
            StoreError::Refused(refusal) => refusal.why(),
            _ => message,
        };
        let error = Failure::new(kind, message);
        match hint {
            Some(hint) => error.hint(hint),
            None => error,
        }
    }
}

impl From<anyhow::Error> for Failure {
    fn from(err: anyhow::Error) -> Self {
        Failure::of(ExitKind::Error, &err)
    }
}

impl From<std::io::Error> for Failure {
    fn from(err: std::io::Error) -> Self {
        if err.kind() == std::io::ErrorKind::BrokenPipe {
            return Failure::new(ExitKind::Closed, "output closed");
        }
        if let Some(Interrupted(account)) = err.get_ref().and_then(|e| e.downcast_ref()) {
            return Failure::new(ExitKind::Interrupted, account.clone());
        }
        Failure::error(format!("I/O error: {err}"))
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

pub type Result<T = ()> = std::result::Result<T, Failure>;

#[cfg(test)]
mod exit_tests {
    use super::*;

    /// The exit codes are a contract (DESIGN §5): each kind's code, pinned.
    #[test]
    fn every_exit_kind_keeps_its_code() {
        let table = [
            (ExitKind::Closed, 0),
            (ExitKind::Error, 1),
            (ExitKind::Usage, 2),
            (ExitKind::NotFound, 3),
            (ExitKind::Refused, 4),
            (ExitKind::Conflict, 5),
            (ExitKind::Auth, 6),
            (ExitKind::Interrupted, 130),
        ];
        for (kind, code) in table {
            assert_eq!(kind.code(), code, "{kind:?}");
        }
        // A store error exits by the one mapping, whichever way it is turned into one.
        let errors = || {
            [
                StoreError::NotFound("n".into()),
                StoreError::Auth("a".into()),
                StoreError::DatabaseAuth("a".into()),
                StoreError::Usage("u".into()),
                StoreError::Unavailable("u".into()),
                StoreError::Invalid("i".into()),
            ]
        };
        for (err, again) in errors().into_iter().zip(errors()) {
            assert_eq!(Failure::from(err).kind, exit_kind(&again));
        }
    }
}
