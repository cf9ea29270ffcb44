//! Where a store is, resolved: the backend, the context it came from, and how to open
//! it. The front ends resolve flags, the environment and the config file into a
//! [`Resolution`]; opening one is the same for every front end.

use super::direct::DirectStore;
use super::http::HttpStore;
use super::{Store, StoreError};
use std::path::PathBuf;
use std::time::Duration;

/// Where the store is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Backend {
    Sqlite(PathBuf),
    /// A PostgreSQL database (DESIGN §12), its password from the operator's environment.
    Postgres(crate::db::pg::Target),
    Http {
        url: String,
        key: Option<String>,
        /// The context's own deadline for each request, when it sets one.
        deadline: Option<Duration>,
    },
}

impl Resolution {
    /// `--api-timeout`, when given, over the context's own deadline.
    pub fn deadline_at_most(mut self, flag: Option<Duration>) -> Self {
        if let (Backend::Http { deadline, .. }, Some(flag)) = (&mut self.backend, flag) {
            *deadline = Some(flag);
        }
        self
    }
}

/// Which rung of the precedence named the store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// `--db` or `--api`.
    Flag,
    /// `--context NAME`.
    ContextFlag,
    /// `UNS_CONTEXT`.
    ContextEnv,
    /// `UNS_DB_FILE` or `UNS_BASE_URL`; `both` when the two are set (the API is used).
    Environment { both: bool },
    /// The config file's current context.
    Current,
}

/// The store a command line names: the backend, the config context it came from, and
/// which rung of the precedence named it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolution {
    pub backend: Backend,
    pub context: Option<String>,
    pub source: Source,
    /// The context says `readonly = true`.
    pub readonly: bool,
}

/// Opens a resolved backend (SQLite read-only unless `write`); its context is named in
/// everything it describes. With the store, what it says of how it was opened (a
/// read-only snapshot), for the front end to show.
pub fn open(
    resolution: Resolution,
    write: bool,
) -> Result<(Box<dyn Store>, Option<String>), StoreError> {
    let Resolution {
        backend, context, ..
    } = resolution;
    Ok(match backend {
        Backend::Sqlite(path) => {
            let mut store = if write {
                DirectStore::open_read_write(&path)?
            } else {
                DirectStore::open_read_only(&path)?
            };
            let note = store.note.clone();
            store.context = context;
            (Box::new(store), note)
        }
        Backend::Postgres(target) => {
            let mut store = DirectStore::open_postgres(&target, write)?;
            store.context = context;
            (Box::new(store), None)
        }
        Backend::Http { url, key, deadline } => {
            let mut store = http_store(&url, key, deadline)?;
            let note = store.note.clone();
            store.context = context;
            (Box::new(store), note)
        }
    })
}

/// The API at `url`; a URL that cannot be one (not http or https, not a URL at all) is
/// `Invalid`, wherever it was given.
pub fn http_store(
    url: &str,
    key: Option<String>,
    deadline: Option<Duration>,
) -> Result<HttpStore, StoreError> {
    let deadline = deadline.unwrap_or(super::http::DEFAULT_DEADLINE);
    HttpStore::new(url, key).map(|store| store.with_deadline(deadline))
}
