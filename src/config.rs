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
//!
//! [contexts.us]
//! db = "postgres://uns@db.us.internal/uns"
//! ```
//!
//! A context names where its API key is (`api_key_env`, a `UNS_*` variable unless the
//! context says `api_key_env_any = true`), never the key: a file that holds one, or an
//! `api` URL with a query or userinfo, is refused, and no error quotes the file's text.
//! The file is trusted as ssh trusts its own: owned by this user (or root) and writable
//! by nobody else, in a directory nobody else can write (`--trust-config-owner` lets
//! root read a file someone else owns). A relative `db` path is read from the file's
//! directory; a `db` URL names a PostgreSQL database as `--db` does, and one with a
//! password in it is refused. It lives at `$UNSCTL_CONFIG`, else
//! `$XDG_CONFIG_HOME/unsctl/config.toml`, else `~/.config/unsctl/config.toml`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The largest config file read.
const MAX_BYTES: u64 = 1 << 20;

/// Words that, anywhere in a key's name, would put a secret in the file.
const SECRET_WORDS: &[&str] = &[
    "key",
    "token",
    "passw",
    "passwd",
    "secret",
    "bearer",
    "auth",
    "credential",
    "cookie",
    "session",
    "private",
];

/// The keys the file may have; any other whose name has a secret word is refused as one,
/// before its value could be read or quoted.
const KNOWN_KEYS: &[&str] = &[
    "current_context",
    "operator",
    "contexts",
    "db",
    "api",
    "api_key_env",
    "api_key_env_any",
    "timeout",
];

/// Whether root may read a config file another user owns (`--trust-config-owner`).
static TRUST_OWNER: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Lets root read a config file owned by another user, for this process.
pub fn trust_owner() {
    TRUST_OWNER.store(true, std::sync::atomic::Ordering::Relaxed);
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("{path}: {message}")]
    Invalid { path: String, message: String },
    #[error("cannot read {path}")]
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
    /// `readonly = true`: the live screen offers no action on it (production, say).
    pub readonly: bool,
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
            Place::Db(path) => format!("db {}", shown_db(path)),
            Place::Api { url, .. } => format!("api {}", crate::api::without_userinfo(url)),
        }
    }
}

/// A context's `db` as it may be printed: a file's path, or a database's URL without any
/// password (the file refuses one; this holds whatever the file said).
pub fn shown_db(db: &Path) -> String {
    match db.to_str().filter(|text| crate::db::pg::is_url(text)) {
        Some(url) => crate::db::pg::shown(url),
        None => db.display().to_string(),
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
    #[serde(default)]
    api_key_env_any: bool,
    timeout: Option<String>,
    #[serde(default)]
    readonly: bool,
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
        // A FIFO, a device or a directory is refused before it is opened: reading one
        // would wait for ever or read without end.
        Ok(meta) if !meta.is_file() => Err(ConfigError::Invalid {
            path: path.display().to_string(),
            message: "not a regular file (a FIFO, a device or a directory); not a config file"
                .into(),
        }),
        Ok(meta) if meta.len() > MAX_BYTES => Err(ConfigError::Invalid {
            path: path.display().to_string(),
            message: format!("larger than {} KiB; not a config file", MAX_BYTES >> 10),
        }),
        Ok(meta) => {
            trusted(&path, &meta)?;
            let text = read_regular(&path).map_err(|source| ConfigError::Io {
                path: path.display().to_string(),
                source,
            })?;
            parse(&path, &text).map(Some)
        }
    }
}

/// The text of `path`, opened without waiting (a FIFO put in its place after it was
/// looked at opens at once) and read only if it is still a regular file, at most
/// `MAX_BYTES` of it.
fn read_regular(path: &Path) -> std::io::Result<String> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)?;
    if !file.metadata()?.is_file() {
        return Err(std::io::Error::other("no longer a regular file"));
    }
    let mut text = String::new();
    file.take(MAX_BYTES + 1).read_to_string(&mut text)?;
    if text.len() as u64 > MAX_BYTES {
        return Err(std::io::Error::other(
            "grew past the most a config file may hold",
        ));
    }
    Ok(text)
}

/// Whether a file with this owner and mode, in a directory with these, may be trusted:
/// the reason when not.
pub fn distrust(
    (owner, mode): (u32, u32),
    (dir_owner, dir_mode): (u32, u32),
    me: u32,
    trust_owner: bool,
) -> Option<String> {
    let someone_else = |uid: u32| uid != me && uid != 0;
    if owner != me && (someone_else(owner) || me == 0) && !trust_owner {
        return Some(format!(
            "owned by uid {owner}, not by this user (uid {me}): someone else could have written it{}",
            if me == 0 {
                "; pass --trust-config-owner to read it as root anyway"
            } else {
                ""
            }
        ));
    }
    if mode & 0o022 != 0 {
        return Some(format!(
            "writable by {} (mode {:o}): anyone who can write it picks where your commands go and which variable is sent as a key; chmod go-w it",
            if mode & 0o002 != 0 {
                "anyone"
            } else {
                "its group"
            },
            mode & 0o7777
        ));
    }
    if someone_else(dir_owner) && !trust_owner {
        return Some(format!(
            "its directory is owned by uid {dir_owner}, who could replace it"
        ));
    }
    // A sticky directory (such as /tmp) lets nobody replace another's file.
    if dir_mode & 0o022 != 0 && dir_mode & 0o1000 == 0 {
        return Some(format!(
            "its directory is writable by others (mode {:o}), who could replace it",
            dir_mode & 0o7777
        ));
    }
    None
}

fn trusted(path: &Path, meta: &std::fs::Metadata) -> Result<(), ConfigError> {
    use std::os::unix::fs::MetadataExt;
    let dir = std::fs::canonicalize(path)
        .ok()
        .and_then(|p| p.parent().map(Path::to_path_buf))
        .unwrap_or_else(|| PathBuf::from("."));
    let dir_meta = std::fs::metadata(&dir).map_err(|source| ConfigError::Io {
        path: dir.display().to_string(),
        source,
    })?;
    // SAFETY: geteuid has no preconditions and cannot fail.
    let me = unsafe { libc::geteuid() };
    match distrust(
        (meta.uid(), meta.mode()),
        (dir_meta.uid(), dir_meta.mode()),
        me,
        TRUST_OWNER.load(std::sync::atomic::Ordering::Relaxed),
    ) {
        Some(why) => Err(invalid(path, format!("not trusted: {why}"))),
        None => Ok(()),
    }
}

/// A TOML error without the text it quotes (the line it points at may hold a secret):
/// what is wrong, and on which line.
fn toml_error(text: &str, message: &str, span: Option<std::ops::Range<usize>>) -> String {
    let line = span.map(|span| text[..span.start.min(text.len())].matches('\n').count() + 1);
    let first = message.lines().next().unwrap_or("not TOML").trim();
    match line {
        Some(line) => format!("line {line}: {first}"),
        None => first.to_string(),
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
    let raw: toml::Table = toml::from_str(text)
        .map_err(|err| invalid(path, toml_error(text, err.message(), err.span())))?;
    refuse_secrets(path, "", &raw)?;
    let shape: FileShape = toml::from_str(text)
        .map_err(|err| invalid(path, toml_error(text, err.message(), err.span())))?;
    let home = path.parent().unwrap_or(Path::new("."));
    let mut contexts = Vec::new();
    for (name, context) in shape.contexts {
        if !valid_name(&name) {
            return Err(invalid(
                path,
                format!("context name {name:?}: use letters, digits, '-', '_' and '.'"),
            ));
        }
        let place = place(
            path,
            home,
            &name,
            context.db,
            context.api,
            context.api_key_env,
            context.api_key_env_any,
        )?;
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
            readonly: context.readonly,
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

/// The store file a context's `db` names: `~/` is the operator's home, as in a shell;
/// any other relative path is relative to the config file's folder `home`, so a context
/// names one store wherever it is used.
fn store_file(db: PathBuf, home: &Path) -> Result<PathBuf, &'static str> {
    match db.strip_prefix("~") {
        Ok(rest) => std::env::var_os("HOME")
            .filter(|home| !home.is_empty())
            .map(|home| PathBuf::from(home).join(rest))
            .ok_or("db starts with ~ and HOME is not set"),
        Err(_) if db.is_relative() => Ok(home.join(db)),
        Err(_) => Ok(db),
    }
}

/// Where one context's store is: `db = PATH` (relative to the file) or `api = URL` with
/// the variable its key is in. Each wrong combination is refused with why.
fn place(
    path: &Path,
    home: &Path,
    name: &str,
    db: Option<PathBuf>,
    api: Option<String>,
    key_env: Option<String>,
    key_env_any: bool,
) -> Result<Place, ConfigError> {
    let place = match (db, api) {
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
            if key_env.is_some() {
                return Err(invalid(
                    path,
                    format!("context {name}: api_key_env goes with api, not db"),
                ));
            }
            // A PostgreSQL URL names its database wherever it is used, as it is; its
            // password comes from the operator's environment, never from this file.
            let url = db.to_str().filter(|text| crate::db::pg::is_url(text));
            if url.is_some_and(crate::db::pg::holds_password) {
                return Err(invalid(
                    path,
                    format!(
                        "context {name}: the db URL holds a password; passwords are never stored in this file, where backups, dotfile repositories and screen shares would carry them: leave it out and give it with PGPASSWORD or ~/.pgpass"
                    ),
                ));
            }
            Place::Db(match url {
                Some(_) => db,
                None => store_file(db, home)
                    .map_err(|why| invalid(path, format!("context {name}: {why}")))?,
            })
        }
        (None, Some(url)) => {
            if !(url.starts_with("http://") || url.starts_with("https://")) {
                return Err(invalid(
                    path,
                    format!("context {name}: api must be an http:// or https:// URL"),
                ));
            }
            if let Some(why) = url_secret(&url) {
                return Err(invalid(
                    path,
                    format!(
                        "context {name}: the api URL {why}; keys are never stored in this file: set api_key_env and export the key"
                    ),
                ));
            }
            if let Some(var) = &key_env
                && valid_env_name(var)
                && !var.starts_with("UNS_")
                && !var.starts_with("UNSCTL_")
                && !key_env_any
            {
                return Err(invalid(
                    path,
                    format!(
                        "context {name}: api_key_env {var} is not a UNS_ variable: a file that names any variable can send, say, a cloud secret as a bearer token; name a UNS_ variable, or add api_key_env_any = true to this context if {var} really holds its key"
                    ),
                ));
            }
            if let Some(var) = &key_env
                && !valid_env_name(var)
            {
                return Err(invalid(
                    path,
                    format!(
                        "context {name}: api_key_env must name an environment variable (A-Z, 0-9, _), not hold the key itself; keys are never stored in this file"
                    ),
                ));
            }
            Place::Api { url, key_env }
        }
    };
    Ok(place)
}

/// Why an `api` URL would carry a secret: a query string or userinfo.
fn url_secret(url: &str) -> Option<&'static str> {
    let rest = url.split_once("://").map_or(url, |(_, rest)| rest);
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    if authority.contains('@') {
        return Some("holds credentials (user:password@)");
    }
    if rest.contains('?') || rest.contains('#') {
        return Some("has a query or fragment, where keys hide (?api_key=...)");
    }
    None
}

fn refuse_secrets(path: &Path, at: &str, table: &toml::Table) -> Result<(), ConfigError> {
    for (key, value) in table {
        let lower = key.to_ascii_lowercase().replace('-', "_");
        let known = KNOWN_KEYS.contains(&lower.as_str());
        if let toml::Value::Table(inner) = value {
            refuse_secrets(path, &format!("{at}{key}."), inner)?;
            continue;
        }
        let secret = SECRET_WORDS.iter().any(|word| lower.contains(word));
        if !known && secret {
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
        // Only the value changes: the comment written beside it stays.
        match doc
            .get_mut("current_context")
            .and_then(toml_edit::Item::as_value_mut)
        {
            Some(value) => {
                let decor = value.decor().clone();
                *value = toml_edit::Value::from(name);
                *value.decor_mut() = decor;
            }
            None => doc["current_context"] = toml_edit::value(name),
        }
        replace_contents(&self.path, doc.to_string().as_bytes()).map_err(|source| {
            ConfigError::Io {
                path: self.path.display().to_string(),
                source,
            }
        })?;
        self.current = Some(name.to_string());
        Ok(())
    }
}

/// Replaces the file at `path` with `contents`, so a crash never leaves half a file: a
/// new file beside the real one (through any symlink), created exclusively so nothing
/// planted there is followed or overwritten, with the old file's mode, then renamed
/// over it. The symlink, if any, stays a symlink.
fn replace_contents(path: &Path, contents: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    let target = std::fs::canonicalize(path)?;
    let mode = std::fs::metadata(&target)?.permissions().mode() & 0o7777;
    let dir = target.parent().unwrap_or(Path::new("."));
    let name = target
        .file_name()
        .map_or_else(|| "config".into(), |n| n.to_string_lossy().into_owned());
    let mut last = None;
    for attempt in 0..16u32 {
        let fresh = dir.join(format!(".{name}.{}.{attempt}.new", std::process::id()));
        let created = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(mode)
            .open(&fresh);
        let mut file = match created {
            Ok(file) => file,
            Err(err) if err.kind() == std::io::ErrorKind::AlreadyExists => {
                last = Some(err);
                continue;
            }
            Err(err) => return Err(err),
        };
        let written = file
            .write_all(contents)
            .and_then(|()| file.set_permissions(std::fs::Permissions::from_mode(mode)))
            .and_then(|()| file.sync_all())
            .and_then(|()| std::fs::rename(&fresh, &target));
        if written.is_err() {
            let _ = std::fs::remove_file(&fresh);
        }
        return written;
    }
    Err(last.unwrap_or_else(|| std::io::Error::other("no free name for the new file")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_is_trusted_as_ssh_trusts_its_own() {
        let me = 1000;
        let dir = (me, 0o40700);
        assert_eq!(distrust((me, 0o100600), dir, me, false), None);
        assert_eq!(
            distrust((0, 0o100644), dir, me, false),
            None,
            "root's own file"
        );
        let why = distrust((1001, 0o100600), dir, me, false).expect("refused");
        assert!(why.contains("owned by uid 1001"), "{why}");
        assert!(distrust((me, 0o100666), dir, me, false).is_some_and(|w| w.contains("anyone")));
        assert!(distrust((me, 0o100620), dir, me, false).is_some_and(|w| w.contains("group")));
        assert!(distrust((me, 0o100600), (me, 0o40777), me, false).is_some());
        assert_eq!(
            distrust((me, 0o100600), (0, 0o41777), me, false),
            None,
            "a sticky dir"
        );
        assert!(distrust((me, 0o100600), (1001, 0o40755), me, false).is_some());
        // Root reading another user's file: refused unless told to.
        let why = distrust((1000, 0o100600), (1000, 0o40700), 0, false).expect("refused");
        assert!(why.contains("--trust-config-owner"), "{why}");
        assert_eq!(distrust((1000, 0o100600), (1000, 0o40700), 0, true), None);
        // Trust never overrides a mode that lets others write.
        assert!(distrust((1000, 0o100666), (1000, 0o40700), 0, true).is_some());
    }

    #[test]
    fn secrets_under_any_name_are_refused_and_never_echoed() {
        for text in [
            "[contexts.eu]\napi = \"http://a\"\npasswd = \"s3cret-value\"\n",
            "[contexts.eu]\napi = \"http://a\"\napi-key = \"s3cret-value\"\n",
            "[contexts.eu]\napi = \"http://a\"\nauth = \"s3cret-value\"\n",
            "[contexts.eu]\napi = \"http://a\"\ncredentials = \"s3cret-value\"\n",
            "[contexts.eu]\napi = \"http://a\"\nx_api_key_value = \"s3cret-value\"\n",
            "keys = [\"s3cret-value\", \"another\"]\n",
        ] {
            let err = parsed(text).unwrap_err();
            assert!(err.contains("never stored"), "{text}: {err}");
            assert!(!err.contains("s3cret-value"), "{err}");
        }
        // Text TOML cannot read is named by line, never quoted.
        for text in [
            "[contexts.eu]\napi = \"http://a\"\napi_key = s3cret-value\n",
            "s3cret-value\n",
            "[contexts.eu]\napi = \"http://a\"\nfoo = s3cret-value\n",
        ] {
            let err = parsed(text).unwrap_err();
            assert!(!err.contains("s3cret-value"), "{err}");
            assert!(err.contains("line "), "{err}");
        }
        for url in [
            "http://a/?api_key=s3cret-value",
            "http://a/#s3cret-value",
            "http://u:s3cret-value@a",
        ] {
            let err = parsed(&format!("[contexts.eu]\napi = \"{url}\"\n")).unwrap_err();
            assert!(!err.contains("s3cret-value"), "{err}");
            assert!(err.contains("keys are never stored"), "{err}");
        }
    }

    #[test]
    fn a_key_variable_must_be_this_tools_unless_the_context_says_so() {
        let err =
            parsed("[contexts.eu]\napi = \"http://a\"\napi_key_env = \"AWS_SECRET_ACCESS_KEY\"\n")
                .unwrap_err();
        assert!(err.contains("not a UNS_ variable"), "{err}");
        let config = parsed(
            "[contexts.eu]\napi = \"http://a\"\napi_key_env = \"VAULT_UNS\"\napi_key_env_any = true\n",
        )
        .expect("allowed when said");
        assert!(
            matches!(&config.get("eu").expect("eu").place, Place::Api { key_env: Some(v), .. } if v == "VAULT_UNS")
        );
    }

    #[test]
    fn a_relative_store_is_the_config_files_neighbour_and_a_timeout_parses() {
        let config = parse(
            Path::new("/etc/unsctl/config.toml"),
            "[contexts.lab]\ndb = \"stores/uns.db\"\n[contexts.eu]\napi = \"http://a\"\ntimeout = \"30s\"\n",
        )
        .expect("valid");
        assert_eq!(
            config.get("lab").expect("lab").place,
            Place::Db("/etc/unsctl/stores/uns.db".into())
        );
        // `~/` is the home folder's, as in a shell; `~user/` is only a folder's name.
        let home = std::env::var_os("HOME")
            .map(PathBuf::from)
            .unwrap_or_default();
        for (db, place) in [
            ("~/stores/uns.db", home.join("stores/uns.db")),
            ("~", home.clone()),
            ("~ops/uns.db", "/etc/unsctl/~ops/uns.db".into()),
        ] {
            let config = parse(
                Path::new("/etc/unsctl/config.toml"),
                &format!("[contexts.lab]\ndb = \"{db}\"\n"),
            )
            .expect(db);
            assert_eq!(
                config.get("lab").expect("lab").place,
                Place::Db(place),
                "{db}"
            );
        }
        assert_eq!(
            config.get("eu").expect("eu").timeout,
            Some(std::time::Duration::from_secs(30))
        );
        assert!(parsed("[contexts.eu]\napi = \"http://a\"\ntimeout = \"forever\"\n").is_err());
    }

    /// A database's URL is its name wherever the file is: never a path beside the file
    /// (where it read as `/etc/unsctl/postgres://...`, a store that does not exist), and
    /// never with a password in it.
    #[test]
    fn a_database_url_is_kept_whole_and_its_password_refused_unquoted() {
        let at = Path::new("/etc/unsctl/config.toml");
        for url in [
            "postgres://uns@db.internal:5432/uns",
            "postgresql://uns@[::1]/uns?sslmode=verify-full",
        ] {
            let config = parse(at, &format!("[contexts.pg]\ndb = \"{url}\"\n")).expect(url);
            let context = config.get("pg").expect("pg");
            assert_eq!(context.place, Place::Db(url.into()));
            assert_eq!(context.target(), format!("db {url}"));
        }
        for url in [
            "postgres://uns:hunter2-pw@db.internal/uns",
            "postgresql://uns@db.internal/uns?sslmode=require&password=hunter2-pw",
        ] {
            let err = parse(at, &format!("[contexts.pg]\ndb = \"{url}\"\n"))
                .expect_err(url)
                .to_string();
            assert!(
                err.contains("holds a password") && err.contains("PGPASSWORD"),
                "{err}"
            );
            assert!(!err.contains("hunter2"), "{err}");
        }
    }

    #[test]
    fn context_use_writes_through_a_symlink_keeping_its_mode_and_ignores_planted_files() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().expect("dir");
        let real = dir.path().join("real.toml");
        std::fs::write(
            &real,
            "[contexts.a]\ndb = \"a.db\"\n[contexts.b]\ndb = \"b.db\"\n",
        )
        .expect("write");
        std::fs::set_permissions(&real, std::fs::Permissions::from_mode(0o600)).expect("mode");
        let link = dir.path().join("config.toml");
        std::os::unix::fs::symlink(&real, &link).expect("symlink");
        // Someone planted a symlink where a careless writer would put its new file.
        let victim = dir.path().join("victim");
        std::fs::write(&victim, "untouched").expect("victim");
        std::os::unix::fs::symlink(&victim, dir.path().join("config.toml.new")).expect("plant");
        std::os::unix::fs::symlink(&victim, dir.path().join("real.toml.new")).expect("plant");
        let text = std::fs::read_to_string(&link).expect("read");
        let mut config = parse(&link, &text).expect("valid");
        config.set_current("b").expect("use b");
        assert!(
            std::fs::symlink_metadata(&link)
                .expect("link")
                .file_type()
                .is_symlink()
        );
        assert!(
            std::fs::read_to_string(&real)
                .expect("real")
                .contains("current_context = \"b\"")
        );
        assert_eq!(
            std::fs::metadata(&real).expect("real").permissions().mode() & 0o777,
            0o600
        );
        assert_eq!(
            std::fs::read_to_string(&victim).expect("victim"),
            "untouched"
        );
        let leftovers: Vec<_> = std::fs::read_dir(dir.path())
            .expect("dir")
            .flatten()
            .filter(|e| {
                e.file_name().to_string_lossy().ends_with(".new")
                    && e.file_name().to_string_lossy().starts_with('.')
            })
            .collect();
        assert!(leftovers.is_empty(), "no temporary file is left behind");
    }

    /// `context use` changes the one value: every comment, the one beside it too, and
    /// the layout stay as written.
    #[test]
    fn choosing_a_context_keeps_the_files_comments() {
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("config.toml");
        let written = "# my runtimes\ncurrent_context = \"a\"  # the usual one\n\n[contexts.a]\ndb = \"a.db\" # lab\n\n[contexts.b]\ndb = \"b.db\"\n";
        std::fs::write(&path, written).expect("config");
        let mut config = parse(&path, written).expect("valid");
        config.set_current("b").expect("use b");
        assert_eq!(
            std::fs::read_to_string(&path).expect("read"),
            written.replace("= \"a\"  #", "= \"b\"  #")
        );
        // A file without the key gets it, before its tables.
        let bare = "[contexts.a]\ndb = \"a.db\"\n";
        std::fs::write(&path, bare).expect("config");
        let mut config = parse(&path, bare).expect("valid");
        config.set_current("a").expect("use a");
        let now = std::fs::read_to_string(&path).expect("read");
        assert_eq!(now, format!("current_context = \"a\"\n{bare}"));
        assert_eq!(
            parse(&path, &now).expect("valid").current.as_deref(),
            Some("a")
        );
    }

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
