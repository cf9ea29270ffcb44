//! Two reads of one snapshot of a PostgreSQL store, streamed side by side on two
//! connections of their own and merged by key as they arrive.
//!
//! A walk of the DLQ needs every selected entry and, after each, its events in order.
//! One query that hands back both has to join, sort and number the rows on the server
//! (an entry's row, once, then its events); two reads need neither: the entries in the
//! order of their index, and their events in the order of theirs, the plan psql's own
//! `COPY` of those rows gets. One transaction exports its snapshot and the other takes
//! it, so the two reads see the same store, and a line whose entry the other read does
//! not have is an error, never dropped.
//!
//! Both connections run on one thread of this walk's own, inside one `block_on`: rows
//! are read where they arrive, without entering a runtime once per row.

use super::error::{DbError, DbResult};
use super::locks::BOUND_LOCK_WAITS;
use super::value::Source;
use super::wire::{PgRow, Raw, numbered, values};
use futures_util::StreamExt;
use postgres::types::ToSql;
use rusqlite::types::Value;
use std::sync::{Arc, Mutex};

/// The name a walk's sessions go by in `pg_stat_activity`.
pub const WALK_SESSION: &str = "unsctl walk";

/// What a merge hands on: a row of the first read, or a row of the second with its key.
pub enum Merged<'r> {
    Head(&'r dyn Source),
    Line(&'r dyn Source),
}

/// Reads `heads` and `lines` (each ordered by its first column, a text key, in byte
/// order) in one snapshot, each with `params`, on two sessions made with `config` and
/// `tls` (the store's own session's) on a runtime of this walk's own; hands `each` every
/// head followed by the lines of its key, until `each` returns false. The sessions end
/// with the walk, whether it read to the end or not.
pub fn read_merged(
    mut config: tokio_postgres::Config,
    tls: Option<tokio_postgres_rustls::MakeRustlsConnect>,
    (heads, lines): (&str, &str),
    params: &[Value],
    each: &mut dyn FnMut(Merged<'_>) -> DbResult<bool>,
) -> DbResult<()> {
    // Told apart from the store's own session in the server's list of sessions.
    config.application_name(WALK_SESSION);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|err| DbError::Value(format!("cannot start the database client: {err}")))?;
    runtime.block_on(async {
        let (head_side, line_side) = tokio::try_join!(
            Side::connect(&config, tls.clone()),
            Side::connect(&config, tls)
        )?;
        let read = merge(
            &head_side.client,
            &line_side.client,
            (heads, lines),
            params,
            each,
        )
        .await;
        read.map_err(|err| match err {
            DbError::Postgres(err) if err.is_closed() => {
                let ended = head_side.why_ended().or_else(|| line_side.why_ended());
                DbError::Postgres(ended.unwrap_or(err))
            }
            other => other,
        })
    })
}

/// One connection, and why it ended when it did.
struct Side {
    client: tokio_postgres::Client,
    /// The server's own words when it ends a session ("terminating connection due to
    /// administrator command"), which the client's requests only see as "closed".
    ended: Arc<Mutex<Option<postgres::Error>>>,
}

impl Side {
    async fn connect(
        config: &tokio_postgres::Config,
        tls: Option<tokio_postgres_rustls::MakeRustlsConnect>,
    ) -> Result<Self, postgres::Error> {
        let ended = Arc::new(Mutex::new(None));
        let client = match tls {
            None => {
                let (client, connection) = config.connect(tokio_postgres::NoTls).await?;
                tokio::spawn(watch(connection, ended.clone()));
                client
            }
            Some(tls) => {
                let (client, connection) = config.connect(tls).await?;
                tokio::spawn(watch(connection, ended.clone()));
                client
            }
        };
        Ok(Self { client, ended })
    }

    fn why_ended(&self) -> Option<postgres::Error> {
        self.ended.lock().ok()?.take()
    }
}

/// Drives one connection until it ends, keeping why it ended.
async fn watch(
    connection: impl std::future::Future<Output = Result<(), postgres::Error>>,
    ended: Arc<Mutex<Option<postgres::Error>>>,
) {
    if let Err(err) = connection.await
        && let Ok(mut slot) = ended.lock()
    {
        *slot = Some(err);
    }
}

async fn merge(
    head_client: &tokio_postgres::Client,
    line_client: &tokio_postgres::Client,
    (heads, lines): (&str, &str),
    params: &[Value],
    each: &mut dyn FnMut(Merged<'_>) -> DbResult<bool>,
) -> DbResult<()> {
    // A walk reads a store that workers go on writing: one snapshot for both reads.
    // Streaming scans gain nothing from compiling their expressions first.
    let begin = "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY; SET LOCAL jit = off";
    head_client
        .batch_execute(&format!("{begin}; {BOUND_LOCK_WAITS}"))
        .await?;
    let exported = head_client
        .query_one("SELECT pg_export_snapshot()", &[])
        .await?;
    let snapshot: &str = exported.try_get(0)?;
    // The name goes back to the server inside quotes: it must be the name's own shape.
    if snapshot.is_empty() || !snapshot.bytes().all(|b| b.is_ascii_hexdigit() || b == b'-') {
        return Err(DbError::Value(format!(
            "the server named its snapshot {snapshot:?}, which is not a snapshot's name"
        )));
    }
    line_client
        .batch_execute(&format!(
            "{begin}; SET TRANSACTION SNAPSHOT '{snapshot}'; {BOUND_LOCK_WAITS}"
        ))
        .await?;
    let (heads, lines) = (numbered(heads), numbered(lines));
    let (head_statement, line_statement) =
        tokio::try_join!(head_client.prepare(&heads), line_client.prepare(&lines))?;
    let head_values = values(&head_statement, params)?;
    let line_values = values(&line_statement, params)?;
    let (head_rows, line_rows) = tokio::try_join!(
        head_client.query_raw(&head_statement, refs(&head_values)),
        line_client.query_raw(&line_statement, refs(&line_values))
    )?;
    futures_util::pin_mut!(head_rows, line_rows);
    let mut line = line_rows.next().await.transpose()?;
    while let Some(head) = head_rows.next().await.transpose()? {
        let Raw(key) = head.try_get(0)?;
        if !each(Merged::Head(&PgRow(&head)))? {
            return Ok(());
        }
        while let Some(this) = &line {
            let Raw(line_key) = this.try_get(0)?;
            if line_key != key {
                if line_key < key {
                    return Err(disagree(line_key));
                }
                break;
            }
            if !each(Merged::Line(&PgRow(this)))? {
                return Ok(());
            }
            line = line_rows.next().await.transpose()?;
        }
    }
    if let Some(this) = &line {
        return Err(disagree(this.try_get::<_, Raw<'_>>(0)?.0));
    }
    // Read-only: the transactions end with their sessions, when the pair is dropped.
    Ok(())
}

fn refs(values: &[Box<dyn ToSql + Sync>]) -> Vec<&(dyn ToSql + Sync)> {
    values.iter().map(|v| v.as_ref()).collect()
}

fn disagree(key: &[u8]) -> DbError {
    DbError::Value(format!(
        "the walk's two reads of one snapshot disagree: a line of {:?} came where no entry \
         of that key was read",
        String::from_utf8_lossy(key)
    ))
}
