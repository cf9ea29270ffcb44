//! `unsctl context list|show|use`: the runtimes of the config file, and which one
//! commands act on.

use crate::cli::backend;
use crate::cli::backend::Invocation;
use crate::cli::error::CliResult;
use crate::config::{Config, Context, Place};
use crate::render::output::{Output, View, print, status};
use crate::render::sanitize::clean;
use crate::render::table::{Column, Text};
use serde::Serialize;

/// Name the runtimes you look after, and pick the one commands act on
///
/// Contexts live in $UNSCTL_CONFIG, else $XDG_CONFIG_HOME/unsctl/config.toml, one
/// [contexts.NAME] table each: db = "PATH" or db = "postgres://USER@HOST/DB" (its
/// password from PGPASSWORD or ~/.pgpass), or api = "URL" with api_key_env = "UNS_..."
/// (the variable that holds the key; never the key itself).
///
/// Example: unsctl context list
/// Example: unsctl context use eu-west
/// Example: unsctl --context eu-west dlq triage
#[derive(Debug, clap::Subcommand)]
#[command(verbatim_doc_comment)]
pub enum Command {
    /// Every context, the current one marked
    ///
    /// Example: unsctl context list
    List,
    /// The context commands act on now, and why (flag, environment or config)
    ///
    /// Example: unsctl context show
    Show {
        /// A context to show instead of the one in effect
        name: Option<String>,
    },
    /// Make NAME the current context (written to the config file)
    ///
    /// Example: unsctl context use eu-west
    Use {
        /// The context's name
        name: String,
    },
}

/// One context, as `list` and `show` print it. The key is never shown: only its
/// variable, and whether it is set.
#[derive(Debug, Serialize)]
struct Shown {
    name: String,
    current: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    db: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    api: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    api_key_env: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    api_key_set: Option<bool>,
}

fn shown(context: &Context, config: &Config) -> Shown {
    let (db, api, key_env) = match &context.place {
        Place::Db(path) => (Some(crate::config::shown_db(path)), None, None),
        Place::Api { url, key_env } => (
            None,
            Some(crate::api::without_userinfo(url)),
            key_env.clone(),
        ),
    };
    Shown {
        name: context.name.clone(),
        current: config.current.as_deref() == Some(context.name.as_str()),
        api_key_set: key_env.as_ref().map(|_| context.api_key().is_some()),
        db,
        api,
        api_key_env: key_env,
    }
}

fn key_text(shown: &Shown) -> String {
    match (&shown.api_key_env, shown.api_key_set) {
        (Some(var), Some(true)) => format!("{var} (set)"),
        (Some(var), _) => format!("{var} (not set)"),
        (None, _) if shown.api.is_some() => "none".into(),
        _ => "-".into(),
    }
}

/// `context list`: `{"config", "contexts", "current"}`.
#[derive(Debug, Serialize)]
struct Listed<'a> {
    config: &'a std::path::Path,
    contexts: Vec<Shown>,
    current: Option<&'a str>,
}

impl View for Listed<'_> {
    const SORTED: bool = true;

    fn show(&self, out: &Output) -> std::io::Result<()> {
        if self.contexts.is_empty() {
            status(&format!("{} has no contexts", self.config.display()));
            return Ok(());
        }
        let rows: Vec<Vec<Text>> = self
            .contexts
            .iter()
            .map(|s| {
                vec![
                    if s.current { "*" } else { "" }.into(),
                    clean(&s.name).into_owned().into(),
                    clean(
                        &s.db
                            .as_ref()
                            .map(|d| format!("db {d}"))
                            .or_else(|| s.api.as_ref().map(|a| format!("api {a}")))
                            .unwrap_or_default(),
                    )
                    .into_owned()
                    .into(),
                    key_text(s).into(),
                ]
            })
            .collect();
        crate::render::table::print_all(COLUMNS, rows, out)
    }
}

/// `context show`: `{"context", "why"}`.
#[derive(Debug, Serialize)]
struct InEffect<'a> {
    context: Shown,
    why: String,
    #[serde(skip)]
    store: String,
    #[serde(skip)]
    config: &'a std::path::Path,
}

impl View for InEffect<'_> {
    const SORTED: bool = true;

    fn show(&self, _out: &Output) -> std::io::Result<()> {
        let mut lines = vec![
            format!("context  {}", clean(&self.context.name)),
            format!("store    {}", clean(&self.store)),
        ];
        if self.context.api.is_some() {
            lines.push(format!("key      {}", key_text(&self.context)));
        }
        lines.push(format!("why      {}", self.why));
        lines.push(format!("config   {}", self.config.display()));
        print(&lines.join("\n"))
    }
}

const COLUMNS: &[Column] = &[
    Column::new("CURRENT", 0),
    Column::new("NAME", 0),
    Column::new("STORE", 0),
    Column::new("KEY", 1),
];

pub fn run(global: &Invocation, command: Command) -> CliResult {
    let out = global.output();
    match command {
        Command::List => {
            let config = backend::required_config()?;
            let listed = Listed {
                config: &config.path,
                contexts: config.contexts.iter().map(|c| shown(c, &config)).collect(),
                current: config.current.as_deref(),
            };
            out.emit(&listed)?;
            Ok(())
        }
        Command::Show { name } => {
            let (context, why) = match name {
                Some(name) => (Some(name), "asked for".to_string()),
                None => backend::in_effect(global)?,
            };
            let Some(name) = context else {
                status(&why);
                return Ok(());
            };
            let config = backend::required_config()?;
            let context = config.get(&name).map_err(backend::config_error)?;
            out.emit(&InEffect {
                context: shown(context, &config),
                why,
                store: context.target(),
                config: &config.path,
            })?;
            Ok(())
        }
        Command::Use { name } => {
            let mut config = backend::required_config()?;
            config.set_current(&name).map_err(backend::config_error)?;
            let context = config.get(&name).map_err(backend::config_error)?;
            status(&format!(
                "current context is now {} ({}); written to {}",
                clean(&name),
                clean(&context.target()),
                config.path.display()
            ));
            if let Some(flag) = backend::overridden(global) {
                status(&format!(
                    "note: {flag} is set and still takes precedence over the current context"
                ));
            }
            Ok(())
        }
    }
}
