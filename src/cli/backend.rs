//! Chooses the backend from `--db`/`UNS_DB_FILE` or `--api`/`UNS_BASE_URL`, and who the
//! operator is.

use super::GlobalArgs;
use super::error::{CliError, CliResult};
use crate::store::Store;
use crate::store::http::HttpStore;
use crate::store::sqlite::SqliteStore;
use std::path::PathBuf;

/// Where the store is, resolved from flags first, then the environment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Backend {
    Sqlite(PathBuf),
    Http { url: String, key: Option<String> },
}

fn env(name: &str) -> Option<String> {
    std::env::var(name)
        .ok()
        .filter(|value| !value.trim().is_empty())
}

/// Every store the flags and the environment name, flags first: `doctor` checks each.
#[derive(Debug, Clone, Default)]
pub struct Named {
    pub db: Option<PathBuf>,
    /// The URL and the key for it.
    pub api: Option<(String, Option<String>)>,
}

pub fn named(global: &GlobalArgs) -> Named {
    let (db, api) = match (&global.db, &global.api) {
        (None, None) => (env("UNS_DB_FILE").map(PathBuf::from), env("UNS_BASE_URL")),
        (db, api) => (db.clone(), api.clone()),
    };
    Named {
        db,
        api: api.map(|url| (url, env("UNS_API_KEY"))),
    }
}

pub fn resolve(global: &GlobalArgs) -> CliResult<Backend> {
    let key = || env("UNS_API_KEY");
    match (&global.db, &global.api) {
        (Some(_), Some(_)) => Err(CliError::usage(
            "--db and --api both given: name one backend",
        )),
        (Some(path), None) => Ok(Backend::Sqlite(path.clone())),
        (None, Some(url)) => Ok(Backend::Http {
            url: url.clone(),
            key: key(),
        }),
        (None, None) => match (env("UNS_DB_FILE"), env("UNS_BASE_URL")) {
            // The runbook's environment exports both: the API is the runtime's own
            // door, and the one that also works from another host.
            (Some(_), Some(url)) => Ok(Backend::Http { url, key: key() }),
            (Some(path), None) => Ok(Backend::Sqlite(PathBuf::from(path))),
            (None, Some(url)) => Ok(Backend::Http { url, key: key() }),
            (None, None) => Err(
                CliError::usage("no store named: pass --db PATH or --api URL")
                    .hint("or set UNS_DB_FILE or UNS_BASE_URL (with UNS_API_KEY)"),
            ),
        },
    }
}

/// A store for reading: SQLite is opened read-only.
pub fn reader(global: &GlobalArgs) -> CliResult<Box<dyn Store>> {
    open(global, false)
}

/// A store for resolve and replay.
pub fn writer(global: &GlobalArgs) -> CliResult<Box<dyn Store>> {
    open(global, true)
}

/// For a command that acts only when confirmed: a dry run never opens the store for writing.
pub fn for_action(global: &GlobalArgs, confirmed: bool) -> CliResult<Box<dyn Store>> {
    open(global, confirmed)
}

/// Said once, on stderr, when the environment names both stores.
fn both_named_note(global: &GlobalArgs) -> Option<String> {
    let both = global.db.is_none()
        && global.api.is_none()
        && env("UNS_DB_FILE").is_some()
        && env("UNS_BASE_URL").is_some();
    both.then(|| {
        "note: UNS_DB_FILE and UNS_BASE_URL are both set; using the API (pass --db to read the file)"
            .to_string()
    })
}

fn open(global: &GlobalArgs, write: bool) -> CliResult<Box<dyn Store>> {
    let backend = resolve(global)?;
    if let Some(note) = both_named_note(global) {
        crate::render::output::status(&note);
    }
    Ok(match backend {
        Backend::Sqlite(path) if write => Box::new(SqliteStore::open_read_write(&path)?),
        Backend::Sqlite(path) => {
            let store = SqliteStore::open_read_only(&path)?;
            if let Some(note) = &store.note {
                crate::render::output::status(note);
            }
            Box::new(store)
        }
        Backend::Http { url, key } => {
            let store = HttpStore::new(&url, key)?;
            if let Some(note) = &store.note {
                crate::render::output::status(note);
            }
            Box::new(store)
        }
    })
}

/// `--operator`, else `UNS_OPERATOR`, else the login name.
pub fn operator(flag: Option<&str>) -> String {
    flag.map(str::to_string)
        .filter(|o| !o.trim().is_empty())
        .or_else(|| env("UNS_OPERATOR"))
        .or_else(|| env("USER"))
        .or_else(|| env("LOGNAME"))
        .unwrap_or_else(|| "unknown".into())
}
