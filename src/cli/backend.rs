//! Chooses the backend, and who the operator is.
//!
//! Flags first (`--db`, `--api`, `--context`), then the environment (`UNS_CONTEXT`, then
//! `UNS_DB_FILE`/`UNS_BASE_URL`), then the config file's current context.

use super::args::GlobalArgs;
use super::error::{CliError, CliResult, ExitKind};
use crate::config::{Config, Place};
use crate::store::Store;
use crate::store::http::HttpStore;
use crate::store::sqlite::SqliteStore;
use std::path::PathBuf;
use std::time::Duration;

/// Where the store is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Backend {
    Sqlite(PathBuf),
    Http {
        url: String,
        key: Option<String>,
        /// The context's own deadline for each request, when it sets one.
        deadline: Option<Duration>,
    },
}

/// `--api-timeout`, when given: it wins over any context's.
static DEADLINE: std::sync::OnceLock<Duration> = std::sync::OnceLock::new();

/// Sets the deadline `--api-timeout` gave, for every API store this process opens.
pub fn set_deadline(deadline: Duration) {
    let _ = DEADLINE.set(deadline);
}

/// The backend, and the config context it came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    pub backend: Backend,
    pub context: Option<String>,
}

fn env(name: &str) -> Option<String> {
    std::env::var(name)
        .ok()
        .filter(|value| !value.trim().is_empty())
}

/// Every store the flags, the environment or the context name: `doctor` checks each.
#[derive(Debug, Clone, Default)]
pub struct Named {
    pub db: Option<PathBuf>,
    /// The URL and the key for it.
    pub api: Option<(String, Option<String>)>,
    pub context: Option<String>,
}

pub fn named(global: &GlobalArgs) -> CliResult<Named> {
    let explicit = global.db.is_some() || global.api.is_some();
    let (db, api) = if explicit {
        (global.db.clone(), global.api.clone())
    } else if global.context.is_none() && env("UNS_CONTEXT").is_none() {
        (env("UNS_DB_FILE").map(PathBuf::from), env("UNS_BASE_URL"))
    } else {
        (None, None)
    };
    if db.is_some() || api.is_some() {
        return Ok(Named {
            db,
            api: api.map(|url| (url, env("UNS_API_KEY"))),
            context: None,
        });
    }
    resolve_with_context(global).map(Named::from)
}

impl From<Resolved> for Named {
    fn from(Resolved { backend, context }: Resolved) -> Self {
        match backend {
            Backend::Sqlite(path) => Named {
                db: Some(path),
                api: None,
                context,
            },
            Backend::Http { url, key, .. } => Named {
                db: None,
                api: Some((url, key)),
                context,
            },
        }
    }
}

/// The config file, when there is one; a broken one is an error.
pub fn config() -> CliResult<Option<Config>> {
    crate::config::load().map_err(config_error)
}

/// The config file, which the command cannot do without.
pub fn required_config() -> CliResult<Config> {
    config()?.ok_or_else(|| {
        CliError::usage(format!(
            "no config file at {}",
            crate::config::path()
                .map(|p| p.display().to_string())
                .unwrap_or_else(|| "$XDG_CONFIG_HOME/unsctl/config.toml".into())
        ))
        .hint("write one with a [contexts.NAME] table each (db = PATH, or api = URL with api_key_env = VAR); see the README")
    })
}

pub fn config_error(err: crate::config::ConfigError) -> CliError {
    match err {
        crate::config::ConfigError::Unknown { .. } => {
            CliError::new(ExitKind::NotFound, err.to_string())
                .hint("`unsctl context list` shows them")
        }
        other => CliError::usage(other.to_string()),
    }
}

/// The context called `name`, as a backend.
pub fn from_context(config: &Config, name: &str) -> CliResult<Resolved> {
    let context = config.get(name).map_err(config_error)?;
    let backend = match &context.place {
        Place::Db(path) => Backend::Sqlite(path.clone()),
        Place::Api { url, key_env } => {
            let key = context.api_key();
            if let (Some(var), None) = (key_env, &key) {
                return Err(CliError::new(
                    ExitKind::Auth,
                    format!("context {name}: its key variable {var} is not set"),
                )
                .hint(format!(
                    "export {var} with the key of {}",
                    crate::api::without_userinfo(url)
                )));
            }
            Backend::Http {
                url: url.clone(),
                key,
                deadline: context.timeout,
            }
        }
    };
    Ok(Resolved {
        backend,
        context: Some(name.to_string()),
    })
}

pub fn resolve_with_context(global: &GlobalArgs) -> CliResult<Resolved> {
    let plain = |backend| {
        Ok(Resolved {
            backend,
            context: None,
        })
    };
    let key = || env("UNS_API_KEY");
    if global.context.is_some() && (global.db.is_some() || global.api.is_some()) {
        return Err(CliError::usage(
            "--context names a store already: leave out --db and --api",
        ));
    }
    match (&global.db, &global.api) {
        (Some(_), Some(_)) => {
            return Err(CliError::usage(
                "--db and --api both given: name one backend",
            ));
        }
        (Some(path), None) => return plain(Backend::Sqlite(path.clone())),
        (None, Some(url)) => {
            return plain(Backend::Http {
                url: url.clone(),
                key: key(),
                deadline: None,
            });
        }
        (None, None) => {}
    }
    if let Some(name) = global.context.clone().or_else(|| env("UNS_CONTEXT")) {
        return from_context(&required_config()?, &name);
    }
    match (env("UNS_DB_FILE"), env("UNS_BASE_URL")) {
        // The runbook's environment exports both: the API is the runtime's own door,
        // and the one that also works from another host.
        (Some(_), Some(url)) | (None, Some(url)) => {
            return plain(Backend::Http {
                url,
                key: key(),
                deadline: None,
            });
        }
        (Some(path), None) => return plain(Backend::Sqlite(PathBuf::from(path))),
        (None, None) => {}
    }
    if let Some(config) = config()?
        && let Some(current) = &config.current
    {
        return from_context(&config, current);
    }
    Err(
        CliError::usage("no store named: pass --db PATH or --api URL").hint(
            "or set UNS_DB_FILE or UNS_BASE_URL (with UNS_API_KEY), or pick a context: `unsctl context list`",
        ),
    )
}

pub fn resolve(global: &GlobalArgs) -> CliResult<Backend> {
    resolve_with_context(global).map(|r| r.backend)
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
        && global.context.is_none()
        && env("UNS_CONTEXT").is_none()
        && env("UNS_DB_FILE").is_some()
        && env("UNS_BASE_URL").is_some();
    both.then(|| {
        "note: UNS_DB_FILE and UNS_BASE_URL are both set; using the API (pass --db to read the file)"
            .to_string()
    })
}

fn open(global: &GlobalArgs, write: bool) -> CliResult<Box<dyn Store>> {
    if global.all_contexts {
        return Err(CliError::usage(
            "--all-contexts reads only, with dlq list, dlq triage, events and doctor; anything that changes a store acts in one context: pass --context NAME",
        ));
    }
    let resolved = resolve_with_context(global)?;
    if let Some(note) = both_named_note(global) {
        crate::render::output::status(&note);
    }
    open_resolved(resolved, write)
}

/// Opens a resolved backend; its context is named in everything it describes.
pub fn open_resolved(resolved: Resolved, write: bool) -> CliResult<Box<dyn Store>> {
    let Resolved { backend, context } = resolved;
    Ok(match backend {
        Backend::Sqlite(path) => {
            let mut store = if write {
                SqliteStore::open_read_write(&path)?
            } else {
                SqliteStore::open_read_only(&path)?
            };
            if let Some(note) = &store.note {
                crate::render::output::status(note);
            }
            store.context = context;
            Box::new(store)
        }
        Backend::Http { url, key, deadline } => {
            let mut store = http_store(&url, key, deadline)?;
            if let Some(note) = &store.note {
                crate::render::output::status(note);
            }
            store.context = context;
            Box::new(store)
        }
    })
}

/// The API at `url`; a URL that cannot be one (not http or https, not a URL at all) is a
/// usage error, wherever it was given.
pub fn http_store(
    url: &str,
    key: Option<String>,
    deadline: Option<Duration>,
) -> CliResult<HttpStore> {
    let deadline = DEADLINE
        .get()
        .copied()
        .or(deadline)
        .unwrap_or(crate::store::http::DEFAULT_DEADLINE);
    HttpStore::new(url, key)
        .map(|store| store.with_deadline(deadline))
        .map_err(|err| match err {
            crate::store::StoreError::Invalid(message) => CliError::usage(message),
            other => other.into(),
        })
}

/// Who an action is recorded as: `--operator`, then `UNS_OPERATOR`, then the config
/// file's `operator`, then the account the process runs as.
pub fn operator(flag: Option<&str>) -> String {
    let given = flag.is_some_and(|f| !f.trim().is_empty()) || env("UNS_OPERATOR").is_some();
    if !given
        && let Some(configured) = crate::config::load()
            .ok()
            .flatten()
            .and_then(|config| config.operator)
    {
        return configured;
    }
    crate::identity::operator(flag)
}

/// The shortest id prefix accepted.
pub const MIN_PREFIX: usize = 4;

/// Turns what the operator typed into ids, as git does with commits: a whole id, or a
/// unique prefix of one. An ambiguous prefix is a usage error that lists the candidates;
/// no match is "not found". Every notification is a candidate, in the DLQ or not.
///
/// A prefix that matches nothing is kept as typed, so a bulk command reports that one
/// entry as not found and carries on with the rest.
/// The full ids `typed` names, each once (two prefixes of one id are one entry), in the
/// order first named.
pub fn expand_ids(store: &dyn Store, typed: &[String]) -> CliResult<Vec<String>> {
    let mut ids: Vec<String> = Vec::with_capacity(typed.len());
    for t in typed {
        let id = match expand_id(store, t) {
            Err(err) if err.kind == ExitKind::NotFound => t.clone(),
            other => other?,
        };
        if !ids.contains(&id) {
            ids.push(id);
        }
    }
    Ok(ids)
}

/// One rule for every command: a prefix names the one notification, in the DLQ or not,
/// whose id it starts; what the command then does with a row outside the DLQ is its own
/// refusal, never a "not found" or a different choice than another command would make.
pub fn expand_id(store: &dyn Store, typed: &str) -> CliResult<String> {
    use crate::render::sanitize::clean;
    const SHOWN: usize = 10;
    if typed.chars().count() < MIN_PREFIX {
        return Err(CliError::usage(format!(
            "{:?} is too short to name an id: type at least {MIN_PREFIX} characters",
            clean(typed)
        )));
    }
    let found = store.ids_with_prefix(typed, false, SHOWN + 1)?;
    if found.iter().any(|id| id == typed) {
        return Ok(typed.to_string());
    }
    let what = "notification";
    match found.as_slice() {
        [] => Err(CliError::new(
            ExitKind::NotFound,
            format!("no {what} id starts with {}", clean(typed)),
        )),
        [one] => Ok(one.clone()),
        many => {
            let listed: Vec<String> = many
                .iter()
                .take(SHOWN)
                .map(|id| clean(id).into_owned())
                .collect();
            let more = if many.len() > SHOWN { ", and more" } else { "" };
            Err(CliError::usage(format!(
                "{} is ambiguous: it starts {} {what} ids: {}{more}",
                clean(typed),
                if many.len() > SHOWN {
                    format!("more than {SHOWN}")
                } else {
                    many.len().to_string()
                },
                listed.join(", ")
            ))
            .hint("type more of the id"))
        }
    }
}
