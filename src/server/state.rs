//! What every handler shares: the read connections, the writer, the keys, the clock,
//! and who is calling.

use super::errors::ApiError;
use super::keys::Keys;
use crate::clock::Clock;
use crate::db::Db;
use crate::runtime::metrics::Metrics;
use crate::runtime::writer::{Database, Pool};
use crate::store::StoreError;
use rusqlite::Connection;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// Who is calling: the name of the key they presented.
#[derive(Debug, Clone)]
pub(crate) struct Principal(pub(crate) String);

/// Recorded as the operator when the server runs without keys.
pub(crate) const ANONYMOUS: &str = "anonymous";

pub(crate) struct AppState {
    pub(crate) metrics: Arc<Metrics>,
    pub(crate) verify: crate::verify::Sources,
    pub(crate) readers: Readers,
    pub(crate) writer: Database,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) keys: Option<Keys>,
    pub(crate) default_max_attempts: i64,
    /// The channels the in-process worker has adapters for; None without a worker.
    pub(crate) worker: Option<crate::model::ChannelSet>,
    pub(crate) request_timeout: std::time::Duration,
    /// What the store's identity is hashed with (see `queries::store_identity`).
    pub(crate) identity_place: String,
}

/// Where requests read: a few read-only connections to the file, or a pool of
/// read-only sessions on the database.
pub(crate) enum Readers {
    Sqlite {
        connections: Vec<Mutex<Connection>>,
        next: AtomicUsize,
    },
    Postgres(Box<Pool>),
}

impl AppState {
    pub(crate) fn read<T>(
        &self,
        work: impl FnOnce(&Db<'_>) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        match &self.readers {
            Readers::Sqlite { connections, next } => {
                let start = next.fetch_add(1, Ordering::Relaxed);
                // Take the first idle reader, else wait on one.
                for offset in 0..connections.len() {
                    if let Ok(conn) = connections[(start + offset) % connections.len()].try_lock() {
                        return work(&Db::Sqlite(&conn));
                    }
                }
                let conn = connections[start % connections.len()]
                    .lock()
                    .unwrap_or_else(|p| p.into_inner());
                work(&Db::Sqlite(&conn))
            }
            Readers::Postgres(pool) => pool
                .with(work)
                .map_err(|gone| StoreError::Unavailable(gone.to_string()))?,
        }
    }

    /// Runs `work` where the store's writes run (SQLite's writer thread, shared with the
    /// in-process worker; a connection of PostgreSQL's pool).
    pub(crate) fn write<T: Send + 'static>(
        &self,
        work: impl FnOnce(&Db<'_>) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, StoreError> {
        self.writer
            .run(work)
            .map_err(|gone| StoreError::Unavailable(gone.to_string()))?
    }
}

pub(crate) async fn blocking<T: Send + 'static, E: Into<ApiError> + Send + 'static>(
    state: &Arc<AppState>,
    work: impl FnOnce(&AppState) -> Result<T, E> + Send + 'static,
) -> Result<T, ApiError> {
    let state = state.clone();
    tokio::task::spawn_blocking(move || work(&state))
        .await
        .map_err(|_| ApiError::internal())?
        .map_err(Into::into)
}
