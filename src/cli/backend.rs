//! Where the store is, and who the operator is: one precedence (`rung`), resolved once
//! per command line into the `Invocation` every command receives.
//!
//! Flags first (`--db`, `--api`, `--context`), then the environment (`UNS_CONTEXT`, then
//! `UNS_DB_FILE`/`UNS_BASE_URL`), then the config file's current context.

use super::args::GlobalArgs;
use super::error::{CliError, CliResult, ExitKind};
use crate::config::{Config, Place};
use crate::store::Store;
pub use crate::store::place::{Backend, Resolution, Source};
use std::path::PathBuf;
use std::sync::OnceLock;

/// One command line, as every command receives it: the global flags, and the store they,
/// the environment and the config file name, resolved once, when a command first asks.
/// A command that needs no store reads no config file and never sees an error in naming
/// one; the file is read at most once, for the store and the operator alike.
pub struct Invocation {
    pub global: GlobalArgs,
    config: OnceLock<CliResult<Option<Config>>>,
    resolution: OnceLock<CliResult<Resolution>>,
}

impl std::ops::Deref for Invocation {
    type Target = GlobalArgs;

    fn deref(&self) -> &GlobalArgs {
        &self.global
    }
}

impl Invocation {
    pub fn new(global: GlobalArgs) -> Self {
        Self {
            global,
            config: OnceLock::new(),
            resolution: OnceLock::new(),
        }
    }

    /// The config file, when there is one; a broken one is an error.
    fn config(&self) -> CliResult<Option<Config>> {
        self.config.get_or_init(config).clone()
    }

    /// The store this command line names, or why none is named.
    pub fn resolution(&self) -> CliResult<&Resolution> {
        self.resolution
            .get_or_init(|| {
                resolution(&self.global, &|| self.config())
                    .map(|r| r.deadline_at_most(self.api_timeout))
            })
            .as_ref()
            .map_err(Clone::clone)
    }

    /// The context called `name` in `config`, with `--api-timeout` over its own deadline:
    /// what every command that reads more than the one store opens.
    pub fn context(&self, config: &Config, name: &str) -> CliResult<Resolution> {
        from_context(config, name).map(|r| r.deadline_at_most(self.api_timeout))
    }

    /// Who an action is recorded as: `--operator`, then UNS_OPERATOR, then the config
    /// file's operator, then the account (`identity::operator`). The config file is read
    /// only when the first two are not given.
    /// A name that cannot be recorded ([`crate::model::payload::operator_name_problem`])
    /// is a usage error, before anything is asked of the store.
    pub fn operator(&self, flag: Option<&str>) -> CliResult<String> {
        let given = flag.is_some_and(|f| !f.trim().is_empty()) || env("UNS_OPERATOR").is_some();
        let configured = if given {
            None
        } else {
            self.config()
                .ok()
                .flatten()
                .and_then(|config| config.operator)
        };
        let operator = crate::identity::operator(flag, configured.as_deref());
        match crate::model::payload::operator_name_problem(&operator) {
            Some(why) => Err(CliError::usage(format!(
                "the operator \"{}\" cannot be recorded: it {why}; give the name people know you by (--operator, UNS_OPERATOR or the config file's operator)",
                crate::render::sanitize::clean(&operator)
            ))),
            None => Ok(operator),
        }
    }
}

fn env(name: &str) -> Option<String> {
    std::env::var(name)
        .ok()
        .filter(|value| !value.trim().is_empty())
}

/// The one precedence, as rungs: flags first (`--db`, `--api`), then `--context`, then
/// `UNS_CONTEXT`, then UNS_DB_FILE/UNS_BASE_URL, then the config file's current context.
/// Nothing is opened or read here; every question about where the store is starts here.
enum Rung {
    Flags {
        db: Option<PathBuf>,
        api: Option<String>,
    },
    Context {
        name: String,
        source: Source,
    },
    Environment {
        db: Option<PathBuf>,
        api: Option<String>,
    },
    Current,
}

fn rung(global: &GlobalArgs) -> Rung {
    if global.db.is_some() || global.api.is_some() {
        return Rung::Flags {
            db: global.db.clone(),
            api: global.api.clone(),
        };
    }
    if let Some(name) = &global.context {
        return Rung::Context {
            name: name.clone(),
            source: Source::ContextFlag,
        };
    }
    if let Some(name) = env("UNS_CONTEXT") {
        return Rung::Context {
            name,
            source: Source::ContextEnv,
        };
    }
    let (db, api) = (env("UNS_DB_FILE").map(PathBuf::from), env("UNS_BASE_URL"));
    if db.is_some() || api.is_some() {
        return Rung::Environment { db, api };
    }
    Rung::Current
}

/// What `--db`, `UNS_DB_FILE` or a context's `db` names: a `postgres://` URL is a
/// database, its password from the operator's environment as libpq finds one
/// (`PGPASSWORD`, else `PGPASSFILE` or `~/.pgpass`); anything else is a file.
pub fn db_backend(db: PathBuf) -> Backend {
    let Some(url) = db.to_str().filter(|text| crate::db::pg::is_url(text)) else {
        return Backend::Sqlite(db);
    };
    let url = &crate::db::pg::with_environment(url, &env);
    let pgpass = std::env::var_os("PGPASSFILE")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".pgpass")))
        // As libpq: a password file others can read is not used.
        .filter(|file| {
            use std::os::unix::fs::PermissionsExt;
            std::fs::metadata(file).is_ok_and(|m| m.permissions().mode() & 0o077 == 0)
        })
        .and_then(|file| std::fs::read_to_string(file).ok());
    Backend::Postgres(
        crate::db::pg::Target::new(url, env("PGPASSWORD"), pgpass.as_deref()).with_tls_environment(
            crate::db::tls::Asked {
                mode: env("PGSSLMODE"),
                root_cert: env("PGSSLROOTCERT"),
                cert: env("PGSSLCERT"),
                key: env("PGSSLKEY"),
            },
        ),
    )
}

/// Every store the flags, the environment or the context name: `doctor` checks each.
#[derive(Debug, Clone, Default)]
pub struct Named {
    pub db: Option<PathBuf>,
    /// The URL and the key for it.
    pub api: Option<(String, Option<String>)>,
    pub context: Option<String>,
}

pub fn named(global: &Invocation) -> CliResult<Named> {
    match rung(global) {
        Rung::Flags { db, api } | Rung::Environment { db, api } => Ok(Named {
            db,
            api: api.map(|url| (url, env("UNS_API_KEY"))),
            context: None,
        }),
        Rung::Context { .. } | Rung::Current => global.resolution().cloned().map(Named::from),
    }
}

impl From<Resolution> for Named {
    fn from(
        Resolution {
            backend, context, ..
        }: Resolution,
    ) -> Self {
        match backend {
            Backend::Sqlite(path) => Named {
                db: Some(path),
                api: None,
                context,
            },
            Backend::Postgres(target) => Named {
                db: Some(target.url.into()),
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

/// The context commands would use now, and why; `None` with the reason when the store
/// comes from elsewhere (`context show`).
pub fn in_effect(global: &GlobalArgs) -> CliResult<(Option<String>, String)> {
    Ok(match rung(global) {
        Rung::Flags { .. } => (None, "no context: --db or --api names the store".into()),
        Rung::Context {
            name,
            source: Source::ContextFlag,
        } => (Some(name), "the --context flag".into()),
        Rung::Context { name, .. } => (Some(name), "UNS_CONTEXT is set".into()),
        Rung::Environment { .. } => (
            None,
            "no context: UNS_DB_FILE or UNS_BASE_URL names the store".into(),
        ),
        Rung::Current => match required_config()?.current {
            Some(name) => (Some(name), "the current context of the config file".into()),
            None => (
                None,
                "no context in effect: none is current (`unsctl context use NAME`)".into(),
            ),
        },
    })
}

/// What outranks the config file's current context right now, if anything.
pub fn overridden(global: &GlobalArgs) -> Option<String> {
    match rung(global) {
        Rung::Flags { .. } => Some("--db/--api".into()),
        Rung::Context {
            source: Source::ContextFlag,
            ..
        } => Some("--context".into()),
        Rung::Context { .. } => Some("UNS_CONTEXT".into()),
        Rung::Environment { db: Some(_), .. } => Some("UNS_DB_FILE".into()),
        Rung::Environment { .. } => Some("UNS_BASE_URL".into()),
        Rung::Current => None,
    }
}

/// The config file, when there is one; a broken one is an error.
pub fn config() -> CliResult<Option<Config>> {
    crate::config::load().map_err(config_error)
}

/// The config file, which the command cannot do without.
pub fn required_config() -> CliResult<Config> {
    required(config()?)
}

/// The config file found, or why the command cannot do without one.
fn required(found: Option<Config>) -> CliResult<Config> {
    found.ok_or_else(|| {
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
        other => CliError::of(ExitKind::Usage, &anyhow::Error::new(other)),
    }
}

/// The context called `name`, as a backend.
pub fn from_context(config: &Config, name: &str) -> CliResult<Resolution> {
    context_named(config, name, Source::Current)
}

fn context_named(config: &Config, name: &str, source: Source) -> CliResult<Resolution> {
    let context = config.get(name).map_err(config_error)?;
    let backend = match &context.place {
        Place::Db(path) => db_backend(path.clone()),
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
    Ok(Resolution {
        backend,
        context: Some(name.to_string()),
        source,
        readonly: context.readonly,
    })
}

/// Where the store is, by the one precedence (`rung`).
fn resolution(
    global: &GlobalArgs,
    config: &dyn Fn() -> CliResult<Option<Config>>,
) -> CliResult<Resolution> {
    let plain = |backend, source| {
        Ok(Resolution {
            backend,
            context: None,
            source,
            readonly: false,
        })
    };
    let http = |url: String| Backend::Http {
        url,
        key: env("UNS_API_KEY"),
        deadline: None,
    };
    if global.context.is_some() && (global.db.is_some() || global.api.is_some()) {
        return Err(CliError::usage(
            "--context names a store already: leave out --db and --api",
        ));
    }
    match rung(global) {
        Rung::Flags {
            db: Some(_),
            api: Some(_),
        } => Err(CliError::usage(
            "--db and --api both given: name one backend",
        )),
        Rung::Flags { db: Some(path), .. } => plain(db_backend(path), Source::Flag),
        Rung::Flags { api, .. } => plain(http(api.unwrap_or_default()), Source::Flag),
        Rung::Context { name, source } => context_named(&required(config()?)?, &name, source),
        // The runbook's environment exports both: the API is the runtime's own door,
        // and the one that also works from another host.
        Rung::Environment { db, api: Some(url) } => plain(
            http(url),
            Source::Environment {
                both: db.is_some(),
            },
        ),
        Rung::Environment { db, .. } => plain(
            db_backend(db.unwrap_or_default()),
            Source::Environment { both: false },
        ),
        Rung::Current => match config()? {
            Some(config) if config.current.is_some() => {
                let current = config.current.clone().unwrap_or_default();
                from_context(&config, &current)
            }
            _ => Err(
                CliError::usage("no store named: pass --db PATH or --api URL").hint(
                    "or set UNS_DB_FILE or UNS_BASE_URL (with UNS_API_KEY), or pick a context: `unsctl context list`",
                ),
            ),
        },
    }
}

/// The backend this command line names.
pub fn resolve(global: &Invocation) -> CliResult<Backend> {
    global.resolution().map(|r| r.backend.clone())
}

/// A store for reading: SQLite is opened read-only.
pub fn reader(global: &Invocation) -> CliResult<Box<dyn Store>> {
    open(global, false)
}

/// A store for resolve and replay.
pub fn writer(global: &Invocation) -> CliResult<Box<dyn Store>> {
    open(global, true)
}

/// For a command that acts only when confirmed: a dry run never opens the store for writing.
pub fn for_action(global: &Invocation, confirmed: bool) -> CliResult<Box<dyn Store>> {
    open(global, confirmed)
}

fn open(global: &Invocation, write: bool) -> CliResult<Box<dyn Store>> {
    if global.all_contexts {
        return Err(CliError::usage(
            "--all-contexts reads only, with dlq list, dlq triage, events, doctor and reconcile; anything that changes a store acts in one context: pass --context NAME",
        ));
    }
    let resolution = global.resolution()?.clone();
    if resolution.source == (Source::Environment { both: true }) {
        crate::render::output::status(
            "note: UNS_DB_FILE and UNS_BASE_URL are both set; using the API (pass --db to read the file)",
        );
    }
    open_resolved(resolution, write)
}

/// Opens a resolved backend; its context is named in everything it describes, and what
/// the store says of how it was opened (a read-only snapshot) is said on stderr.
pub fn open_resolved(resolution: Resolution, write: bool) -> CliResult<Box<dyn Store>> {
    let (store, note) = crate::store::place::open(resolution, write).map_err(not_opened)?;
    if let Some(note) = note {
        crate::render::output::status(&note);
    }
    Ok(store)
}

/// The API at `url`; a URL that cannot be one (not http or https, not a URL at all) is a
/// usage error, wherever it was given.
pub fn http_store(
    url: &str,
    key: Option<String>,
    deadline: Option<std::time::Duration>,
) -> CliResult<crate::store::http::HttpStore> {
    crate::store::place::http_store(url, key, deadline).map_err(not_opened)
}

/// Why a store could not be opened: a place that cannot be one is the command line's
/// mistake.
fn not_opened(err: crate::store::StoreError) -> CliError {
    match err {
        crate::store::StoreError::Invalid(message) => CliError::usage(message),
        other => other.into(),
    }
}
