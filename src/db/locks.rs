//! How long a statement waits for a lock another connection holds, on either engine: a
//! wait without end is a command, or a worker, that hangs and says nothing.

use std::time::Duration;

/// How long a statement waits for a lock another connection holds before it gives up:
/// SQLite's busy timeout on the file, PostgreSQL's `lock_timeout` ([`BOUND_LOCK_WAITS`]).
pub const LOCK_WAIT: Duration = Duration::from_secs(5);

/// Bounds how long a statement of the transaction waits for a lock another session
/// holds ([`LOCK_WAIT`]). Without it a transaction left open in psql, a migration or a
/// `VACUUM FULL` kept every command (and the worker) waiting without end, saying nothing;
/// with it the statement fails with 55P03, which says what to look for. Set for the
/// transaction only, so nothing outlives it on a session a pooler lends to others, and
/// only where no limit is set: one the role, the database or the URL's options set is
/// theirs to keep. A query, so it comes after `SET TRANSACTION SNAPSHOT`, never before.
macro_rules! bound_lock_waits {
    () => {
        "SELECT set_config('lock_timeout', '5s', true) WHERE current_setting('lock_timeout') = '0'"
    };
}
pub(crate) use bound_lock_waits;

/// [`bound_lock_waits`], for a transaction begun another way.
pub const BOUND_LOCK_WAITS: &str = bound_lock_waits!();

#[cfg(test)]
mod tests {
    use super::*;

    /// PostgreSQL waits for a lock as long as SQLite waits for its file, and the refusal
    /// that ends the wait says how long that was.
    #[test]
    fn a_lock_is_waited_for_as_long_on_either_engine() {
        let secs = LOCK_WAIT.as_secs();
        assert!(BOUND_LOCK_WAITS.contains(&format!("'lock_timeout', '{secs}s'")));
        let hint = super::super::error::hint(&postgres::error::SqlState::LOCK_NOT_AVAILABLE);
        assert!(hint.is_some_and(|hint| hint.contains(&format!("({secs} s,"))));
    }
}
