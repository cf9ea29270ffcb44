//! The operator's config file: named contexts, one per runtime an on-call engineer looks
//! after, and which one is current.
//!
//! ```toml
//! current_context = "eu"
//! operator = "alice"
//!
//! [contexts.eu]
//! api = "https://uns-eu.internal:8080"
//! api_key_env = "UNS_EU_API_KEY"
//!
//! [contexts.lab]
//! db = "/srv/uns/lab.db"
//! ```
//!
//! A context names where its API key is (`api_key_env`), never the key: a file that
//! holds one is refused. It lives at `$UNSCTL_CONFIG`, else
//! `$XDG_CONFIG_HOME/unsctl/config.toml`, else `~/.config/unsctl/config.toml`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The largest config file read.
const MAX_BYTES: u64 = 1 << 20;

/// Keys that would put a secret in the file.
const SECRET_KEYS: &[&str] = &[
    "api_key",
    "apikey",
    "key",
    "token",
    "password",
    "secret",
    "bearer",
    "authorization",
];

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("{path}: {message}")]
    Invalid { path: String, message: String },
    #[error("{path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
    #[error("no context named {name:?} in {path}{known}")]
    Unknown {
        name: String,
        path: String,
        known: String,
    },
    #[error("no config file: {path} does not exist")]
    Missing { path: String },
}

/// Where a context's store is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Place {
    Db(PathBuf),
    /// The API's URL and the environment variable that holds its key.
    Api {
        url: String,
        key_env: Option<String>,
    },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Context {
    pub name: String,
    pub place: Place,
    /// The most one request to its API may take (`timeout = "30s"`).
    pub timeout: Option<std::time::Duration>,
}

impl Context {
    /// The key for an API context, read from its variable now.
    pub fn api_key(&self) -> Option<String> {
        match &self.place {
            Place::Api {
                key_env: Some(var), ..
            } => std::env::var(var).ok().filter(|k| !k.trim().is_empty()),
            _ => None,
        }
    }

    /// `db PATH` or `api URL`, for listings.
    pub fn target(&self) -> String {
        match &self.place {
            Place::Db(path) => format!("db {}", path.display()),
            Place::Api { url, .. } => format!("api {}", crate::api::without_userinfo(url)),
        }
    }
}

#[derive(Debug, Clone, Default)]
pub struct Config {
    pub path: PathBuf,
    pub current: Option<String>,
    pub operator: Option<String>,
    /// In the file's order of names (sorted).
    pub contexts: Vec<Context>,
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct FileShape {
    current_context: Option<String>,
    operator: Option<String>,
    #[serde(default)]
    contexts: BTreeMap<String, ContextShape>,
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct ContextShape {
    db: Option<PathBuf>,
    api: Option<String>,
    api_key_env: Option<String>,
    timeout: Option<String>,
}

/// The config file's path, whether or not it exists.
pub fn path() -> Option<PathBuf> {
    let var = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty());
    if let Some(path) = var("UNSCTL_CONFIG") {
        return Some(PathBuf::from(path));
    }
    if let Some(dir) = var("XDG_CONFIG_HOME") {
        return Some(PathBuf::from(dir).join("unsctl/config.toml"));
    }
    var("HOME").map(|home| PathBuf::from(home).join(".config/unsctl/config.toml"))
}

/// The config, or None when there is no file.
pub fn load() -> Result<Option<Config>, ConfigError> {
    let Some(path) = path() else {
        return Ok(None);
    };
    match std::fs::metadata(&path) {
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(ConfigError::Io {
            path: path.display().to_string(),
            source,
        }),
        Ok(meta) if meta.len() > MAX_BYTES => Err(ConfigError::Invalid {
            path: path.display().to_string(),
            message: format!("larger than {} KiB; not a config file", MAX_BYTES >> 10),
        }),
        Ok(_) => {
            let text = std::fs::read_to_string(&path).map_err(|source| ConfigError::Io {
                path: path.display().to_string(),
                source,
            })?;
            parse(&path, &text).map(Some)
        }
    }
}

fn invalid(path: &Path, message: impl Into<String>) -> ConfigError {
    ConfigError::Invalid {
        path: path.display().to_string(),
        message: message.into(),
    }
}

/// Parses and checks a config file's text.
pub fn parse(path: &Path, text: &str) -> Result<Config, ConfigError> {
    // Secrets first, by name, so the refusal says why rather than "unknown field".
    let raw: toml::Table = toml::from_str(text).map_err(|err| invalid(path, err.to_string()))?;
    refuse_secrets(path, "", &raw)?;
    let shape: FileShape = toml::from_str(text).map_err(|err| invalid(path, err.to_string()))?;
    let mut contexts = Vec::new();
    for (name, context) in shape.contexts {
        if !valid_name(&name) {
            return Err(invalid(
                path,
                format!("context name {name:?}: use letters, digits, '-', '_' and '.'"),
            ));
        }
        let place = match (context.db, context.api) {
            (Some(_), Some(_)) => {
                return Err(invalid(
                    path,
                    format!("context {name}: give either db or api, not both"),
                ));
            }
            (None, None) => {
                return Err(invalid(
                    path,
                    format!("context {name}: needs db = PATH or api = URL"),
                ));
            }
            (Some(db), None) => {
                if context.api_key_env.is_some() {
                    return Err(invalid(
                        path,
                        format!("context {name}: api_key_env goes with api, not db"),
                    ));
                }
                Place::Db(db)
            }
            (None, Some(url)) => {
                if !(url.starts_with("http://") || url.starts_with("https://")) {
                    return Err(invalid(
                        path,
                        format!("context {name}: api must be an http:// or https:// URL"),
                    ));
                }
                if url.split_once("://").is_some_and(|(_, rest)| {
                    rest.split(['/', '?', '#'])
                        .next()
                        .unwrap_or("")
                        .contains('@')
                }) {
                    return Err(invalid(
                        path,
                        format!(
                            "context {name}: the api URL holds credentials (user:password@); keys are never stored in this file: set api_key_env and export the key"
                        ),
                    ));
                }
                if let Some(var) = &context.api_key_env
                    && !valid_env_name(var)
                {
                    return Err(invalid(
                        path,
                        format!(
                            "context {name}: api_key_env must name an environment variable (A-Z, 0-9, _), not hold the key itself; keys are never stored in this file"
                        ),
                    ));
                }
                Place::Api {
                    url,
                    key_env: context.api_key_env,
                }
            }
        };
        let timeout = match &context.timeout {
            None => None,
            Some(text) => Some(
                crate::clock::parse_deadline(text)
                    .map_err(|why| invalid(path, format!("context {name}: timeout {why}")))?,
            ),
        };
        contexts.push(Context {
            name,
            place,
            timeout,
        });
    }
    let config = Config {
        path: path.to_path_buf(),
        current: shape.current_context,
        operator: shape.operator.filter(|o| !o.trim().is_empty()),
        contexts,
    };
    if let Some(current) = &config.current
        && config.find(current).is_none()
    {
        return Err(invalid(
            path,
            format!("current_context {current:?} names no context in the file"),
        ));
    }
    Ok(config)
}

fn refuse_secrets(path: &Path, at: &str, table: &toml::Table) -> Result<(), ConfigError> {
    for (key, value) in table {
        if let toml::Value::Table(inner) = value {
            refuse_secrets(path, &format!("{at}{key}."), inner)?;
            continue;
        }
        let lower = key.to_ascii_lowercase();
        if lower != "api_key_env"
            && SECRET_KEYS
                .iter()
                .any(|s| lower == *s || lower.ends_with(&format!("_{s}")))
        {
            return Err(invalid(
                path,
                format!(
                    "{at}{key}: API keys are never stored in the config file, where backups, dotfile repositories and screen shares would carry them; put the key in an environment variable and name it with api_key_env = \"NAME\""
                ),
            ));
        }
    }
    Ok(())
}

fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

fn valid_env_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 128
        && !name.starts_with(|c: char| c.is_ascii_digit())
        && name
            .chars()
            .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
}

impl Config {
    pub fn find(&self, name: &str) -> Option<&Context> {
        self.contexts.iter().find(|c| c.name == name)
    }

    /// The context named `name`, or an error listing the known ones.
    pub fn get(&self, name: &str) -> Result<&Context, ConfigError> {
        self.find(name).ok_or_else(|| ConfigError::Unknown {
            name: name.to_string(),
            path: self.path.display().to_string(),
            known: if self.contexts.is_empty() {
                " (it has none)".into()
            } else {
                format!(
                    "; known: {}",
                    self.contexts
                        .iter()
                        .map(|c| c.name.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            },
        })
    }

    /// Makes `name` the current context, keeping the rest of the file as written.
    pub fn set_current(&mut self, name: &str) -> Result<(), ConfigError> {
        self.get(name)?;
        let text = std::fs::read_to_string(&self.path).map_err(|source| ConfigError::Io {
            path: self.path.display().to_string(),
            source,
        })?;
        let mut doc: toml_edit::DocumentMut = text
            .parse()
            .map_err(|err: toml_edit::TomlError| invalid(&self.path, err.to_string()))?;
        doc["current_context"] = toml_edit::value(name);
        // Written beside and renamed over, so a crash never leaves half a file.
        let fresh = self.path.with_extension("toml.new");
        std::fs::write(&fresh, doc.to_string())
            .and_then(|()| std::fs::rename(&fresh, &self.path))
            .map_err(|source| ConfigError::Io {
                path: self.path.display().to_string(),
                source,
            })?;
        self.current = Some(name.to_string());
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(text: &str) -> Result<Config, String> {
        parse(Path::new("config.toml"), text).map_err(|e| e.to_string())
    }

    #[test]
    fn reads_db_and_api_contexts() {
        let config = parsed(
            r#"
current_context = "eu"
operator = "alice"
[contexts.eu]
api = "https://uns-eu:8080"
api_key_env = "UNS_EU_KEY"
[contexts.lab]
db = "/srv/lab.db"
"#,
        )
        .expect("valid");
        assert_eq!(config.current.as_deref(), Some("eu"));
        assert_eq!(config.operator.as_deref(), Some("alice"));
        assert_eq!(
            config.get("eu").expect("eu").place,
            Place::Api {
                url: "https://uns-eu:8080".into(),
                key_env: Some("UNS_EU_KEY".into())
            }
        );
        assert_eq!(
            config.get("lab").expect("lab").place,
            Place::Db("/srv/lab.db".into())
        );
        assert!(
            config
                .get("us")
                .unwrap_err()
                .to_string()
                .contains("known: eu, lab")
        );
    }

    #[test]
    fn a_stored_key_is_refused_and_says_why() {
        for text in [
            "[contexts.eu]\napi = \"http://a\"\napi_key = \"s3cret\"\n",
            "[contexts.eu]\napi = \"http://a\"\ntoken = \"s3cret\"\n",
            "api_key = \"s3cret\"\n",
            "[contexts.eu]\napi = \"http://a\"\nUNS_API_KEY = \"s3cret\"\n",
        ] {
            let err = parsed(text).unwrap_err();
            assert!(err.contains("API keys are never stored"), "{text}: {err}");
            assert!(!err.contains("s3cret"), "the key is never echoed: {err}");
        }
        let err =
            parsed("[contexts.eu]\napi = \"http://a\"\napi_key_env = \"abc123-secret-value\"\n")
                .unwrap_err();
        assert!(err.contains("must name an environment variable"), "{err}");
        let err = parsed("[contexts.eu]\napi = \"http://user:pw@a:1\"\n").unwrap_err();
        assert!(
            err.contains("holds credentials") && !err.contains("pw"),
            "{err}"
        );
    }

    #[test]
    fn malformed_contexts_are_refused() {
        for (text, says) in [
            ("[contexts.a]\ndb = \"x\"\napi = \"http://a\"\n", "not both"),
            ("[contexts.a]\n", "needs db"),
            (
                "[contexts.a]\ndb = \"x\"\napi_key_env = \"K\"\n",
                "goes with api",
            ),
            ("[contexts.a]\napi = \"ftp://a\"\n", "http://"),
            (
                "current_context = \"b\"\n[contexts.a]\ndb = \"x\"\n",
                "names no context",
            ),
            ("[contexts.a]\ndb = \"x\"\ncolour = 1\n", "unknown field"),
            ("[contexts.\"a b\"]\ndb = \"x\"\n", "context name"),
            ("not toml at all [", ""),
        ] {
            let err = parsed(text).unwrap_err();
            assert!(err.contains(says), "{text}: {err}");
        }
    }
}
