//! What can go wrong asking the database, in either engine, and which of PostgreSQL's
//! errors mean the operator's credentials were refused or the server is gone.

/// What can go wrong asking the database.
#[derive(Debug, thiserror::Error)]
pub enum DbError {
    #[error(transparent)]
    Sqlite(#[from] rusqlite::Error),
    #[error("{}", said(.0))]
    Postgres(#[from] postgres::Error),
    /// A value the statement was given does not fit the column it is for.
    #[error("{0}")]
    Value(String),
    /// COMMIT failed in a way that does not say whether the transaction was kept: the
    /// connection ended with no answer, or the server ended the session (FATAL) after
    /// the commit may have been written, as it does when a wait for a synchronous
    /// standby is cut short.
    #[error("{0} (at COMMIT: whether the change was kept is not known)")]
    CommitUncertain(Box<DbError>),
    /// The server ended the session, and a new one could not be made (or reached
    /// another store): what was said, and whether it may pass.
    #[error("the session the server ended could not be made again: {said}")]
    Reopen {
        said: String,
        /// The server could not be reached, or did not let a session begin: it may be
        /// back in a moment.
        passing: bool,
        /// It refused the credentials.
        credentials: bool,
    },
}

impl DbError {
    /// The server refused who we said we were (a wrong password, an unknown role).
    pub fn refused_credentials(&self) -> bool {
        match self {
            DbError::Postgres(err) => refused_credentials(err),
            DbError::CommitUncertain(err) => err.refused_credentials(),
            DbError::Reopen { credentials, .. } => *credentials,
            _ => false,
        }
    }

    /// The database could not be reached, or went away.
    pub fn unreachable(&self) -> bool {
        match self {
            DbError::Postgres(err) => unreachable(err),
            DbError::CommitUncertain(err) => err.unreachable(),
            DbError::Reopen { passing, .. } => *passing,
            _ => false,
        }
    }

    /// Whether the same transaction may well succeed when tried again in a moment: the
    /// database went away, is restarting or takes no more connections for now, gave up
    /// waiting for a lock, or rolled the transaction back for another's sake (a
    /// serialization failure, a deadlock); SQLite's file was locked by another process.
    /// A session that takes no writes too: during a failover the name may reach the old
    /// primary, back as a standby, until it moves, and the pool never lends such a
    /// session again, so the next try is made on a new one. The refusal came before any
    /// write, so nothing of it was kept.
    pub fn passing(&self) -> bool {
        match self {
            DbError::Sqlite(rusqlite::Error::SqliteFailure(err, _)) => matches!(
                err.code,
                rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked
            ),
            DbError::Postgres(err) => {
                use postgres::error::SqlState;
                unreachable(err)
                    || err.code().is_some_and(|code| {
                        code.code().starts_with("08")
                            || *code == SqlState::T_R_SERIALIZATION_FAILURE
                            || *code == SqlState::T_R_DEADLOCK_DETECTED
                            || *code == SqlState::TOO_MANY_CONNECTIONS
                            || *code == SqlState::LOCK_NOT_AVAILABLE
                            || *code == SqlState::READ_ONLY_SQL_TRANSACTION
                    })
            }
            DbError::CommitUncertain(err) => err.passing(),
            DbError::Reopen { passing, .. } => *passing,
            _ => false,
        }
    }

    /// Whether the transaction this error ended may have been committed all the same: a
    /// COMMIT whose failure does not say ([`DbError::CommitUncertain`]). Any other error
    /// left nothing of it behind.
    pub fn may_have_committed(&self) -> bool {
        matches!(self, DbError::CommitUncertain(_))
    }

    /// What a failed COMMIT leaves known: an ERROR from the server (a deferred
    /// constraint, a serialization failure) or from SQLite kept nothing; a connection
    /// that ended with no answer, or a session the server ended (FATAL, PANIC), may have
    /// kept it all.
    pub(crate) fn at_commit(self) -> DbError {
        let uncertain = match &self {
            DbError::Postgres(err) => err.as_db_error().is_none_or(|db| db.severity() != "ERROR"),
            _ => false,
        };
        if uncertain {
            DbError::CommitUncertain(Box::new(self))
        } else {
            self
        }
    }
}

pub type DbResult<T> = std::result::Result<T, DbError>;

/// What a PostgreSQL error says, without a password or anything the server echoed of
/// the URL.
pub fn said(err: &postgres::Error) -> String {
    match err.as_db_error() {
        Some(db) => match hint(db.code()) {
            Some(hint) => format!("{} ({}): {hint}", db.message(), db.code().code()),
            None => format!("{} ({})", db.message(), db.code().code()),
        },
        None => {
            let mut text = err.to_string();
            // What the TLS layer or the socket said lies beneath ("error performing TLS
            // handshake: invalid peer certificate: UnknownIssuer").
            let mut source = std::error::Error::source(err);
            while let Some(cause) = source {
                let cause_text = cause.to_string();
                if !cause_text.is_empty() && !text.contains(&cause_text) {
                    text = format!("{text}: {cause_text}");
                }
                source = cause.source();
            }
            if text.is_empty() {
                "the database connection failed".into()
            } else if refused_certificate(&text) {
                format!(
                    "{text}: the server did not accept the client certificate (sslcert, PGSSLCERT or ~/.postgresql/postgresql.crt): one its roots signed for this role is needed"
                )
            } else {
                text
            }
        }
    }
}

/// What an operator can do about an error of `code` that says nothing of its cause.
pub(super) fn hint(code: &postgres::error::SqlState) -> Option<&'static str> {
    use postgres::error::SqlState;
    Some(match code {
        c if *c == SqlState::READ_ONLY_SQL_TRANSACTION => {
            "this database takes no writes (a hot standby, or default_transaction_read_only is on); changes go to the primary"
        }
        // A statement this session prepared is gone, or another's has its name: the
        // session changed under it.
        c if *c == SqlState::INVALID_SQL_STATEMENT_NAME || *c == SqlState::DUPLICATE_PSTATEMENT => {
            "this session's statements are not its own: a pooler between here and PostgreSQL lends each transaction to another session (pgbouncer's pool_mode = transaction); connect to PostgreSQL itself, or through a pool with pool_mode = session"
        }
        c if *c == SqlState::CHARACTER_NOT_IN_REPERTOIRE => {
            "a row holds bytes that are not text (a database whose encoding is SQL_ASCII lets them in), and PostgreSQL will not send it: find it with psql and correct it, and keep the store in a UTF8 database"
        }
        c if *c == SqlState::LOCK_NOT_AVAILABLE => {
            "another session held a lock this needed for longer than unsctl waits for one (5 s, unless lock_timeout is set for the role, the database or in the URL's options): a transaction left open (\"idle in transaction\" in pg_stat_activity), a migration or a VACUUM FULL. The transaction was rolled back; find that session in pg_stat_activity, let it finish or end it, and run this again"
        }
        c if *c == SqlState::QUERY_CANCELED => {
            "the server cancelled it: a statement_timeout (set for this role or database, or in the URL's options) or an administrator; reading fewer entries at once (--limit, --since) asks less of it"
        }
        _ => return None,
    })
}

/// The server refused the credentials: a wrong password, an unknown role, no entry for
/// this client in its host-based rules.
pub fn refused_credentials(err: &postgres::Error) -> bool {
    use postgres::error::SqlState;
    err.code().is_some_and(|code| {
        *code == SqlState::INVALID_PASSWORD
            || *code == SqlState::INVALID_AUTHORIZATION_SPECIFICATION
    }) || err.to_string().contains("password missing")
        || refused_certificate(&said(err))
}

/// The server ended the TLS handshake over the client's certificate: one it does not
/// trust, a bad one, or none where one is required.
fn refused_certificate(text: &str) -> bool {
    [
        "UnknownCA",
        "BadCertificate",
        "CertificateRequired",
        "CertificateUnknown",
    ]
    .iter()
    .any(|alert| text.contains(&format!("received fatal alert: {alert}")))
}

/// Whether the client reached the hosts named and turned the last away for not being of
/// the kind `target_session_attrs` asks for: it says so in an error of its own making,
/// which no socket's permission error reads like.
pub fn no_host_of_the_kind_asked(err: &postgres::Error) -> bool {
    let mut source = std::error::Error::source(err);
    while let Some(cause) = source {
        if let Some(io) = cause.downcast_ref::<std::io::Error>() {
            let text = io.to_string();
            return io.kind() == std::io::ErrorKind::PermissionDenied
                && (text == "database does not allow writes"
                    || text == "database is not read only");
        }
        source = cause.source();
    }
    false
}

/// The database cannot be reached, or the connection is gone.
pub fn unreachable(err: &postgres::Error) -> bool {
    err.is_closed()
        || err.as_db_error().is_none() && err.code().is_none()
        || err.code().is_some_and(|code| {
            use postgres::error::SqlState;
            *code == SqlState::ADMIN_SHUTDOWN
                || *code == SqlState::CRASH_SHUTDOWN
                || *code == SqlState::CANNOT_CONNECT_NOW
        })
}
