//! The store on PostgreSQL (DESIGN §12): connecting with what the operator's environment
//! gave, the schema of §2 in PostgreSQL's types (created on an empty database, refused
//! when unknown), and the store's own session, through which every statement goes but
//! a walk's two reads (`snapshot`).

use super::error::{DbError, DbResult, no_host_of_the_kind_asked, refused_credentials, said};
use super::locks::bound_lock_waits;
use super::snapshot::Merged;
use super::value::Source;
use super::wire::values;
pub use super::wire::{PgRow, numbered};
use postgres::types::{ToSql, Type};
use rusqlite::types::Value;
use std::cell::RefCell;
use std::collections::HashMap;

/// The schema version a PostgreSQL store carries in `uns_schema`: §2's tables with the
/// notes of version 3, as the SQLite store of that version has them.
pub const SCHEMA_VERSION: i64 = 3;

/// How long connecting may take before it is given up.
const CONNECT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// Where libpq looks for the server's socket when neither the URL nor `PGHOST` names a
/// host: the directory it was built with, /var/run/postgresql in Debian's and Ubuntu's
/// packages and /tmp in PostgreSQL's own builds. `psql postgres:///uns` works on a
/// database machine through it, and so must `--db postgres:///uns`.
const SOCKET_DIRS: [&str; 2] = ["/var/run/postgresql", "/tmp"];

/// The directory of [`SOCKET_DIRS`] that holds the server's socket for `port`: the first
/// that does, else the first, for the connection to say that none is there.
fn default_socket_dir(port: u16) -> &'static str {
    SOCKET_DIRS
        .into_iter()
        .find(|dir| socket_path(dir, port).exists())
        .unwrap_or(SOCKET_DIRS[0])
}

/// A PostgreSQL server's socket in `dir` for `port`, as libpq names it.
fn socket_path(dir: impl AsRef<std::path::Path>, port: u16) -> std::path::PathBuf {
    dir.as_ref().join(format!(".s.PGSQL.{port}"))
}

/// What to connect with: the URL the operator named, and the password their environment
/// gave (`PGPASSWORD`, `~/.pgpass`), which the front end read.
#[derive(Clone, PartialEq, Eq)]
pub struct Target {
    pub url: String,
    pub password: Option<String>,
    /// `PGSSLMODE`, `PGSSLROOTCERT`, `PGSSLCERT` and `PGSSLKEY`, for what the URL
    /// does not name.
    pub tls: super::tls::Asked,
}

impl std::fmt::Debug for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Target")
            .field("url", &shown(&self.url))
            .field("password", &self.password.as_ref().map(|_| "(given)"))
            .finish()
    }
}

impl Target {
    /// The database at `url`, with the password the operator's environment gives for it,
    /// as libpq finds one: the URL's own, else `PGPASSWORD` (`password`), else the first
    /// line of the password file (`pgpass`, its text) that matches the URL's host, port,
    /// database and user. The front end reads the two.
    pub fn new(url: &str, password: Option<String>, pgpass: Option<&str>) -> Self {
        let password = password.filter(|p| !p.is_empty()).or_else(|| {
            let config: postgres::Config = super::tls::split_url(url).0.parse().ok()?;
            pgpass_lookup(pgpass?, &Parts::of(&config))
        });
        Self {
            url: url.to_string(),
            password,
            tls: super::tls::Asked::default(),
        }
    }

    /// Whether the URL names several hosts and takes whichever answers first, a standby
    /// as soon as a primary (no `target_session_attrs=read-write`).
    pub fn several_hosts_any_session(&self) -> bool {
        // The URL alone, as the client library reads it: no TLS file is read for this.
        let parsed: Result<postgres::Config, _> = super::tls::split_url(&self.url).0.parse();
        parsed.is_ok_and(|config| {
            config.get_hosts().len() > 1
                && config.get_target_session_attrs() == postgres::config::TargetSessionAttrs::Any
        })
    }

    /// With the environment's TLS settings (`PGSSLMODE`, `PGSSLROOTCERT`, `PGSSLCERT`,
    /// `PGSSLKEY`), which the URL's own override.
    pub fn with_tls_environment(mut self, tls: super::tls::Asked) -> Self {
        self.tls = tls;
        self
    }

    /// The client's configuration and the connector the TLS mode asks for.
    fn configured(
        &self,
    ) -> Result<
        (
            tokio_postgres::Config,
            Option<tokio_postgres_rustls::MakeRustlsConnect>,
        ),
        String,
    > {
        let (url, asked) = super::tls::split_url(&self.url);
        let asked = asked.or(&self.tls);
        let mut config: tokio_postgres::Config = url
            .parse()
            .map_err(|err: postgres::Error| {
                let said = said(&err);
                // libpq takes more kinds than the client library does: say which it takes.
                let kinds = if said.contains("`target_session_attrs`") {
                    " (target_session_attrs, or PGTARGETSESSIONATTRS, takes any, read-write or read-only here)"
                } else {
                    ""
                };
                format!("not a PostgreSQL URL: {said}{kinds}")
            })?;
        let mode = match asked.mode.clone() {
            Some(mode) => super::tls::SslMode::parse(&mode)?,
            None => super::tls::SslMode::Prefer,
        };
        if config.get_hosts().is_empty() && config.get_hostaddrs().is_empty() {
            let port = config.get_ports().first().copied().unwrap_or(5432);
            config.host_path(default_socket_dir(port));
        }
        // A Unix socket reaches the server on this machine: libpq asks it for no TLS
        // whatever sslmode says, and neither do we (there is no name to verify).
        let hosts = config.get_hosts();
        let local = !hosts.is_empty()
            && hosts
                .iter()
                .all(|host| matches!(host, postgres::config::Host::Unix(_)));
        if local {
            config.ssl_mode(postgres::config::SslMode::Disable);
            return Ok((config, None));
        }
        config.ssl_mode(mode.negotiated());
        Ok((config, super::tls::connector(mode, &asked)?))
    }

    /// Everything a connection to this target is made with: the URL and TLS as
    /// [`Target::configured`] reads them, the password the environment gave, the
    /// account's name for a URL that names no user, a time limit, and our name in the
    /// server's list of sessions.
    pub(super) fn client_config(
        &self,
    ) -> Result<
        (
            tokio_postgres::Config,
            Option<tokio_postgres_rustls::MakeRustlsConnect>,
        ),
        OpenError,
    > {
        let (mut config, tls) = self.configured().map_err(|said| OpenError::Url {
            url: shown(&self.url),
            said,
        })?;
        if let Some(password) = &self.password
            && config.get_password().is_none()
        {
            config.password(password);
        }
        if config.get_user().is_none() {
            config.user(crate::identity::account_name());
        }
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(CONNECT_TIMEOUT);
        }
        bound_silence(&mut config, &self.url);
        config.application_name("unsctl");
        Ok((config, tls))
    }
}

/// How long a session may hear nothing from a server that has stopped answering (its
/// machine gone, or the network between cut) before it is given up, where the URL says
/// nothing of it: without a bound, a read waited on the system's keepalive, two hours,
/// and a follow or a worker sat silent through a failover. A server busy with a long
/// statement still answers these probes from its kernel, so no slow answer is cut.
const KEEPALIVE_IDLE: std::time::Duration = std::time::Duration::from_secs(10);
const KEEPALIVE_INTERVAL: std::time::Duration = std::time::Duration::from_secs(5);
const KEEPALIVE_RETRIES: u32 = 3;
/// And how long bytes sent may go unacknowledged (a cut while a statement is on its way).
const TCP_USER_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// Bounds of [`KEEPALIVE_IDLE`] and its kin on `config`, each where `url` does not name
/// its own (`keepalives=0` turns the probes off, as in libpq).
fn bound_silence(config: &mut tokio_postgres::Config, url: &str) {
    if !url_names(url, "keepalives_idle") {
        config.keepalives_idle(KEEPALIVE_IDLE);
    }
    if !url_names(url, "keepalives_interval") {
        config.keepalives_interval(KEEPALIVE_INTERVAL);
    }
    if !url_names(url, "keepalives_retries") {
        config.keepalives_retries(KEEPALIVE_RETRIES);
    }
    if !url_names(url, "tcp_user_timeout") {
        config.tcp_user_timeout(TCP_USER_TIMEOUT);
    }
}

/// What a `.pgpass` line is matched against.
struct Parts {
    host: String,
    port: String,
    database: String,
    user: String,
}

impl Parts {
    fn of(config: &postgres::Config) -> Self {
        let host = match config.get_hosts().first() {
            Some(postgres::config::Host::Tcp(host)) => host.clone(),
            Some(postgres::config::Host::Unix(_)) | None => "localhost".into(),
        };
        let port = config
            .get_ports()
            .first()
            .copied()
            .unwrap_or(5432)
            .to_string();
        let user = config
            .get_user()
            .map(str::to_string)
            .unwrap_or_else(crate::identity::account_name);
        let database = config
            .get_dbname()
            .map_or_else(|| user.clone(), str::to_string);
        Self {
            host,
            port,
            database,
            user,
        }
    }
}

/// The password of the first `.pgpass` line (`host:port:database:user:password`, `*`
/// matching anything, `\:` and `\\` escaped) that matches `parts`.
fn pgpass_lookup(text: &str, parts: &Parts) -> Option<String> {
    text.lines()
        .filter(|line| !line.trim_start().starts_with('#'))
        .find_map(|line| {
            let fields = pgpass_fields(line);
            let [host, port, database, user, password] = fields.as_slice() else {
                return None;
            };
            let matches = |field: &str, value: &str| field == "*" || field == value;
            (matches(host, &parts.host)
                && matches(port, &parts.port)
                && matches(database, &parts.database)
                && matches(user, &parts.user))
            .then(|| password.clone())
        })
}

fn pgpass_fields(line: &str) -> Vec<String> {
    let mut fields = vec![String::new()];
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                if let (Some(next), Some(field)) = (chars.next(), fields.last_mut()) {
                    field.push(next);
                }
            }
            ':' if fields.len() < 5 => fields.push(String::new()),
            c => {
                if let Some(field) = fields.last_mut() {
                    field.push(c);
                }
            }
        }
    }
    fields
}

/// Whether `text` names a PostgreSQL database rather than a file.
pub fn is_url(text: &str) -> bool {
    text.starts_with("postgres://") || text.starts_with("postgresql://")
}

/// `url` with what it leaves out taken from the operator's environment as libpq takes
/// it (`PGHOST`, `PGPORT`, `PGUSER`, `PGDATABASE`, `PGTARGETSESSIONATTRS`,
/// `PGCONNECT_TIMEOUT`, read by `env`): what the URL names itself always wins. A URL
/// that cannot be read is returned as it is, for the connection to say why.
pub fn with_environment(url: &str, env: &dyn Fn(&str) -> Option<String>) -> String {
    let Ok(config) = super::tls::split_url(url).0.parse::<postgres::Config>() else {
        return url.to_string();
    };
    let env = |name: &str| env(name).filter(|value| !value.is_empty());
    let mut url = url.to_string();
    let param = |url: &mut String, key: &str, value: &str| {
        url.push(if url.contains('?') { '&' } else { '?' });
        url.push_str(key);
        url.push('=');
        for byte in value.bytes() {
            if byte.is_ascii_alphanumeric() || b"-._~/".contains(&byte) {
                url.push(byte as char);
            } else {
                url.push_str(&format!("%{byte:02X}"));
            }
        }
    };
    let authority = authority(&url);
    if config.get_hosts().is_empty()
        && let Some(host) = env("PGHOST")
    {
        param(&mut url, "host", &host);
    }
    if let Some(port) = env("PGPORT").filter(|p| p.bytes().all(|b| b.is_ascii_digit() || b == b','))
    {
        match authority {
            // Hosts named in the query (or none): so may the port be.
            None if !url_names_port(&url) => param(&mut url, "port", &port),
            None => {}
            // The client library reads a host written without a port as 5432: the port
            // goes beside each such host.
            Some((from, to)) => url = with_ports(&url, from, to, &port),
        }
    }
    if config.get_user().is_none()
        && let Some(user) = env("PGUSER")
    {
        param(&mut url, "user", &user);
    }
    if config.get_dbname().is_none()
        && let Some(dbname) = env("PGDATABASE")
    {
        param(&mut url, "dbname", &dbname);
    }
    // Which of several hosts to take, and how long to wait for one: a site that fails
    // over by a list of hosts sets these for every libpq client, and so for this one.
    if !url_names(&url, "target_session_attrs")
        && let Some(attrs) = env("PGTARGETSESSIONATTRS")
    {
        param(&mut url, "target_session_attrs", &attrs);
    }
    if !url_names(&url, "connect_timeout")
        && let Some(seconds) = env("PGCONNECT_TIMEOUT")
    {
        param(&mut url, "connect_timeout", seconds.trim());
    }
    url
}

/// Where the hosts of `url`'s authority run (after any `user@`), when it names any.
fn authority(url: &str) -> Option<(usize, usize)> {
    let start = url.find("://").map_or(0, |at| at + 3);
    let end = url[start..]
        .find(['/', '?'])
        .map_or(url.len(), |at| start + at);
    let hosts = url[start..end]
        .rfind('@')
        .map_or(start, |at| start + at + 1);
    (hosts < end).then_some((hosts, end))
}

/// Whether `url`'s query names a port.
fn url_names_port(url: &str) -> bool {
    url_names(url, "port")
}

/// Whether `url`'s query names `key`.
fn url_names(url: &str, key: &str) -> bool {
    url.split_once('?').is_some_and(|(_, query)| {
        query
            .split('&')
            .any(|pair| pair.split_once('=').map_or(pair, |(name, _)| name) == key)
    })
}

/// `url` with `ports` (one for all, or one per host) beside each host of `from..to` that
/// is written without one; as it was when the URL's query names a port, or the ports do
/// not match the hosts.
fn with_ports(url: &str, from: usize, to: usize, ports: &str) -> String {
    if url_names_port(url) {
        return url.to_string();
    }
    let hosts: Vec<&str> = url[from..to].split(',').collect();
    let ports: Vec<&str> = ports.split(',').collect();
    if ports.len() != 1 && ports.len() != hosts.len() {
        return url.to_string();
    }
    let written = hosts
        .iter()
        .enumerate()
        .map(|(i, spec)| {
            let after = match spec.strip_prefix('[') {
                Some(v6) => v6.split_once(']').map_or("", |(_, after)| after),
                None => spec.split_once(':').map_or("", |(_, port)| port),
            };
            let port = ports[if ports.len() == 1 { 0 } else { i }];
            if after.trim_start_matches(':').is_empty() && !port.is_empty() {
                format!("{}:{port}", spec.trim_end_matches(':'))
            } else {
                spec.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join(",");
    format!("{}{written}{}", &url[..from], &url[to..])
}

/// `url` as it may be printed: never a password, wherever it was written.
pub fn shown(url: &str) -> String {
    let without = without_password(url);
    let mut shown = without.clone();
    // A password given as a query parameter is as secret as one before the host.
    if let Some(at) = shown.find('?') {
        let (base, query) = without.split_at(at);
        let kept: Vec<&str> = query[1..]
            .split('&')
            .filter(|pair| !pair.to_ascii_lowercase().starts_with("password="))
            .collect();
        shown = if kept.is_empty() {
            base.to_string()
        } else {
            format!("{base}?{}", kept.join("&"))
        };
    }
    shown
}

/// Whether `url` carries a password, before its host or as a query parameter.
pub fn holds_password(url: &str) -> bool {
    shown(url) != url
}

/// `url` without the `:password` of its `user:password@`.
fn without_password(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_string();
    };
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(authority_end);
    match authority.rsplit_once('@') {
        Some((userinfo, host)) => {
            let user = userinfo.split(':').next().unwrap_or_default();
            format!("{scheme}://{user}@{host}{tail}")
        }
        None => url.to_string(),
    }
}

/// What `connect` made, if it made it within `limit`; None past it. The driver bounds
/// only the opening of the socket by the connect timeout, not the handshake after it
/// (TLS, the startup message, authentication), so a server that takes the connection and
/// never answers would hold the caller for ever: the handshake runs on a thread of its
/// own, which is left to the server when it gives no answer (the thread holds only that
/// connection, and a process that gives up on the store soon exits).
fn within<T: Send + 'static>(
    limit: std::time::Duration,
    connect: impl FnOnce() -> T + Send + 'static,
) -> std::io::Result<Option<T>> {
    let (made, arrived) = std::sync::mpsc::sync_channel(1);
    std::thread::Builder::new()
        .name("pg-connect".into())
        .spawn(move || {
            let _ = made.send(connect());
        })?;
    Ok(arrived.recv_timeout(limit).ok())
}

/// Why a database cannot be used as a store.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    /// The URL or its TLS settings cannot be read: the command line is wrong (exit 2).
    #[error("{url}: {said}")]
    Url { url: String, said: String },
    #[error("{url}: {said}")]
    Connect {
        url: String,
        said: String,
        refused: bool,
    },
    #[error(
        "{url}: a PostgreSQL database, but not a UNS store (it holds other tables and no uns_schema)"
    )]
    NotUnsStore { url: String },
    #[error(
        "{url}: schema version {found} is newer than this unsctl understands ({SCHEMA_VERSION}); upgrade unsctl"
    )]
    NewerSchema { url: String, found: i64 },
    #[error(
        "{url}: unknown UNS schema version {found} (this unsctl reads version {SCHEMA_VERSION})"
    )]
    UnknownSchema { url: String, found: i64 },
    #[error(
        "{url}: an empty database, not a UNS store yet (`unsctl runtime serve --db URL` creates one)"
    )]
    Empty { url: String },
    #[error("{url}: {said}")]
    Database { url: String, said: String },
    #[error(
        "{url}: no UNS store on this connection's search_path ({search_path}), but one in {schemas}: add ?options=-csearch_path%3D<schema> to the URL, or set the role's search_path"
    )]
    Elsewhere {
        url: String,
        schemas: String,
        search_path: String,
    },
    #[error(
        "{url}: this database takes no writes (a hot standby, or default_transaction_read_only is on); reads still work, changes go to the primary{}",
        if *several_hosts { " (the URL names several hosts and took the first that answered: add target_session_attrs=read-write to it, and the one that takes writes is chosen)" } else { "" }
    )]
    ReadOnly { url: String, several_hosts: bool },
    #[error(
        "{url}: this connection goes through a pooler that lends each transaction to whichever PostgreSQL session is free (pgbouncer's pool_mode = transaction or statement): unsctl keeps its prepared statements and its read-only guard in its session, which such a pooler would hand to other clients; connect to PostgreSQL itself, or through a pool with pool_mode = session"
    )]
    Pooled { url: String },
    #[error(
        "{url}: the database's encoding is {encoding}, and a store needs UTF8, in which no text column can hold bytes that are not text: CREATE DATABASE ... ENCODING 'UTF8' TEMPLATE template0"
    )]
    Encoding { url: String, encoding: String },
    #[error(
        "{url}: role {role:?} may read the store but not change it (it needs UPDATE on uns_notifications and INSERT on uns_events and uns_notes); reads still work, changes need a role that may write the store"
    )]
    NotPermitted { url: String, role: String },
    /// Every host named answered, and none was of the kind `target_session_attrs` asks
    /// for (the URL's, or `PGTARGETSESSIONATTRS`).
    #[error("{url}: {}", no_host_of_kind(*.asked))]
    NoHostOfKind {
        url: String,
        asked: postgres::config::TargetSessionAttrs,
    },
}

/// What the end of a refusal for want of a host of the kind asked for says: what to do.
pub const NO_HOST_OF_KIND_REMEDY: &str =
    "name the host that is, or leave target_session_attrs out of the URL and PGTARGETSESSIONATTRS";

fn no_host_of_kind(asked: postgres::config::TargetSessionAttrs) -> String {
    let (attrs, kind) = match asked {
        postgres::config::TargetSessionAttrs::ReadOnly => {
            ("read-only", "is read-only (each takes writes)")
        }
        _ => (
            "read-write",
            "takes writes (each is a hot standby, or has default_transaction_read_only on)",
        ),
    };
    format!(
        "no host it names {kind}, and target_session_attrs={attrs} asks for one: {NO_HOST_OF_KIND_REMEDY}"
    )
}

/// What connecting said, naming the socket it tried when every host is a directory on
/// this machine and the socket could not be reached: "No such file or directory" alone
/// does not say which file.
fn on_sockets(err: &postgres::Error, config: &postgres::Config) -> String {
    let said = said(err);
    let unreached = std::iter::successors(std::error::Error::source(err), |cause| cause.source())
        .any(|cause| cause.is::<std::io::Error>());
    let ports = config.get_ports();
    let sockets: Option<Vec<String>> = config
        .get_hosts()
        .iter()
        .enumerate()
        .map(|(at, host)| match host {
            postgres::config::Host::Unix(dir) => {
                let port = ports.get(at).or(ports.first()).copied().unwrap_or(5432);
                Some(socket_path(dir, port).display().to_string())
            }
            postgres::config::Host::Tcp(_) => None,
        })
        .collect();
    match sockets {
        Some(sockets) if unreached && !sockets.is_empty() => {
            format!("socket {}: {said}", sockets.join(", "))
        }
        _ => said,
    }
}

impl OpenError {
    /// The server refused the credentials (exit 6).
    pub fn refused_credentials(&self) -> bool {
        matches!(self, OpenError::Connect { refused: true, .. })
    }
}

/// How every transaction that changes the store begins: at READ COMMITTED, whatever the
/// site's `default_transaction_isolation`. The engine's writes are built for it: a claim
/// takes a row with `FOR UPDATE SKIP LOCKED` and each write is fenced by its lease token,
/// which READ COMMITTED checks against the newest version of the row. Under a site default
/// of REPEATABLE READ or SERIALIZABLE the same writes fail with 40001 when two workers
/// meet, and a worker that loses its write leaves its lease to run out: a reclaim, and
/// an attempt whose outcome no one recorded, caused by a setting. Its waits for a lock
/// are bounded ([`bound_lock_waits`]).
pub const BEGIN_WRITE: &str = concat!(
    "BEGIN ISOLATION LEVEL READ COMMITTED; ",
    bound_lock_waits!()
);

/// How every transaction that only reads begins: one snapshot for all its statements,
/// no write let through, and its waits for a lock bounded.
pub const BEGIN_READ: &str = concat!(
    "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY; ",
    bound_lock_waits!()
);

/// Whether the session's role may change the store, as SQL: what resolve, replay, notes
/// and the worker write.
pub const MAY_CHANGE: &str = "has_table_privilege('uns_notifications', 'UPDATE') \
     AND has_table_privilege('uns_events', 'INSERT') \
     AND has_table_privilege('uns_notes', 'INSERT')";

/// Why the database takes no writes whatever the role may do, as SQL: NULL when it takes
/// them. Read in any session, a reader's too: `reset_val` is the database's and the
/// role's default, not what a reader set for its own session.
pub const TAKES_NO_WRITES: &str = "CASE WHEN pg_is_in_recovery() THEN 'a hot standby' \
     WHEN (SELECT reset_val FROM pg_settings WHERE name = 'default_transaction_read_only') <> 'off' \
     THEN 'default_transaction_read_only is on for this database or role' END";

/// One connection, its statements prepared once.
pub struct PgConn {
    client: RefCell<postgres::Client>,
    statements: RefCell<HashMap<String, postgres::Statement>>,
    /// A transaction this connection began is open: set by its BEGIN, cleared by its
    /// COMMIT or ROLLBACK (PostgreSQL ends a transaction at either, even a failed one).
    /// The client cannot say, and a read must not ROLLBACK a transaction it did not open.
    in_transaction: std::cell::Cell<bool>,
    /// The server refused a write on it for taking none ([`PgConn::took_no_writes`]).
    took_no_writes: std::cell::Cell<bool>,
    /// An answer said the server ended the session (FATAL or PANIC: a restart, an
    /// administrator's `pg_terminate_backend`), which the client learns only at the
    /// statement after: the next one outside a transaction is made on a new session.
    ended: std::cell::Cell<bool>,
    /// Its session refuses every write ([`PgConn::read_only`]): so does one made again.
    read_only: std::cell::Cell<bool>,
    /// The store it reached, once asked ([`PgConn::identity_place`]): a session made
    /// again must reach the same.
    store: RefCell<Option<String>>,
    /// The URL, as it may be printed.
    pub place: String,
    /// What it was made with, for the connections a walk reads on.
    target: Target,
}

impl PgConn {
    /// Connects to `target` and checks it is a UNS store of this version, creating the
    /// schema in an empty database when `create`.
    pub fn open(target: &Target, create: bool) -> Result<Self, OpenError> {
        let conn = Self::connect(target)?;
        conn.check_own_session()?;
        conn.check_schema(create)?;
        Ok(conn)
    }

    /// Refuses a session that is not this connection's own: behind a pooler in
    /// transaction or statement mode, each transaction runs on whichever server session is
    /// free, so a statement prepared on one is missing (or another client's) on the next,
    /// and a session's settings (a reader's READ ONLY) are lent to other clients.
    ///
    /// A second connection holds a transaction open while this one asks for its server
    /// session again: one of its own is still the one it had; a pooler's gives it
    /// another, the one it had being busy with the other transaction. The held
    /// transaction ends itself after two idle seconds, so a pool of one session cannot
    /// keep this one waiting for it. Nothing is set on any session that outlives it.
    fn check_own_session(&self) -> Result<(), OpenError> {
        let failed = |err: DbError| OpenError::Database {
            url: self.place.clone(),
            said: format!("while checking that this session is its own: {err}"),
        };
        let pooled = || OpenError::Pooled {
            url: self.place.clone(),
        };
        let first = self.backend().map_err(failed)?;
        let other = Self::connect(&self.target)?;
        let held = other.batch("BEGIN; SET LOCAL idle_in_transaction_session_timeout = 2000");
        if let Err(err) = held {
            // A server that answers this session yet will not begin a transaction on a
            // fresh one is a pooler in statement mode, which ends the session at BEGIN.
            self.backend().map_err(|_| failed(err))?;
            return Err(pooled());
        }
        other.backend().map_err(failed)?;
        let again = self.backend().map_err(failed)?;
        drop(other);
        if again == first {
            Ok(())
        } else {
            Err(pooled())
        }
    }

    /// The server session this connection's next statement runs in.
    fn backend(&self) -> DbResult<i32> {
        let rows = self
            .client
            .borrow_mut()
            .simple_query("SELECT pg_backend_pid()")?;
        rows.iter()
            .find_map(|message| match message {
                postgres::SimpleQueryMessage::Row(row) => row.get(0)?.parse().ok(),
                _ => None,
            })
            .ok_or_else(|| DbError::Value("the server named no session".into()))
    }

    /// Connects, and checks nothing.
    pub fn connect(target: &Target) -> Result<Self, OpenError> {
        let place = shown(&target.url);
        let connect = |said: String, refused: bool| OpenError::Connect {
            url: place.clone(),
            said,
            refused,
        };
        let (config, tls) = target.client_config()?;
        let config = postgres::Config::from(config);
        let hosts = config.get_hosts().len().max(1) as u32;
        let limit = config
            .get_connect_timeout()
            .copied()
            .unwrap_or(CONNECT_TIMEOUT)
            * hosts;
        // A moment past it, so a socket the driver gave up on is told as the driver tells it.
        let wait = limit + std::time::Duration::from_millis(500);
        let connecting = config.clone();
        let client = within(wait, move || match tls {
            None => connecting.connect(postgres::NoTls),
            Some(tls) => connecting.connect(tls),
        })
        .map_err(|err| connect(format!("cannot start a thread to connect on: {err}"), false))?
        .ok_or_else(|| {
            connect(
                format!(
                    "no session opened within {} s: the server took the connection and never finished PostgreSQL's handshake (is it PostgreSQL, and is it answering?); connect_timeout in the URL, or PGCONNECT_TIMEOUT, sets another limit",
                    limit.as_secs_f64()
                ),
                false,
            )
        })?
        .map_err(|err| {
            if no_host_of_the_kind_asked(&err) {
                OpenError::NoHostOfKind {
                    url: place.clone(),
                    asked: config.get_target_session_attrs(),
                }
            } else {
                connect(on_sockets(&err, &config), refused_credentials(&err))
            }
        })?;
        Ok(Self {
            client: RefCell::new(client),
            statements: RefCell::new(HashMap::new()),
            in_transaction: std::cell::Cell::new(false),
            took_no_writes: std::cell::Cell::new(false),
            ended: std::cell::Cell::new(false),
            read_only: std::cell::Cell::new(false),
            store: RefCell::new(None),
            place,
            target: target.clone(),
        })
    }

    fn check_schema(&self, create: bool) -> Result<(), OpenError> {
        let database = |err: DbError| OpenError::Database {
            url: self.place.clone(),
            said: err.to_string(),
        };
        let has_schema: bool = self
            .scalar_bool("SELECT to_regclass('uns_schema') IS NOT NULL")
            .map_err(database)?;
        if !has_schema {
            // A store the search_path does not reach (another role's, whose own schema it
            // was made in) is not an empty database: one made here beside it would split
            // the runtimes between two stores.
            let elsewhere = self
                .strings(
                    "SELECT quote_ident(n.nspname) FROM pg_catalog.pg_class c
                     JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
                     WHERE c.relname = 'uns_schema' AND c.relkind IN ('r', 'p')
                     ORDER BY 1",
                )
                .map_err(database)?;
            if !elsewhere.is_empty() {
                let search_path = self
                    .strings("SELECT current_setting('search_path')")
                    .map_err(database)?
                    .concat();
                let schemas = match elsewhere.len() {
                    1 => format!("schema {}", elsewhere[0]),
                    _ => format!("schemas {}", elsewhere.join(", ")),
                };
                return Err(OpenError::Elsewhere {
                    url: self.place.clone(),
                    schemas,
                    search_path,
                });
            }
            let tables: i64 = self
                .scalar_i64(
                    "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = current_schema()",
                )
                .map_err(database)?;
            if tables > 0 {
                return Err(OpenError::NotUnsStore {
                    url: self.place.clone(),
                });
            }
            if !create {
                return Err(OpenError::Empty {
                    url: self.place.clone(),
                });
            }
            // Only UTF8 keeps every text column text: SQL_ASCII (initdb's default under
            // the C locale) stores any bytes, and a row the server then cannot send as
            // UTF-8 fails every read that meets it, hiding the rows around it.
            let encoding = self
                .strings(
                    "SELECT pg_encoding_to_char(encoding) FROM pg_database
                     WHERE datname = current_database()",
                )
                .map_err(database)?
                .concat();
            if encoding != "UTF8" {
                return Err(OpenError::Encoding {
                    url: self.place.clone(),
                    encoding,
                });
            }
            return self.create_schema().map_err(database);
        }
        let found = self
            .scalar_i64("SELECT version FROM uns_schema")
            .map_err(database)?;
        match found {
            SCHEMA_VERSION => Ok(()),
            found if found > SCHEMA_VERSION => Err(OpenError::NewerSchema {
                url: self.place.clone(),
                found,
            }),
            found => Err(OpenError::UnknownSchema {
                url: self.place.clone(),
                found,
            }),
        }
    }

    /// Creates the schema in one transaction; two servers starting at once on one empty
    /// database both end with it, the second waiting on the first's lock.
    fn create_schema(&self) -> DbResult<()> {
        self.batch(BEGIN_WRITE)?;
        let result = (|| {
            // One creator at a time: the others find the schema made when they get the lock.
            self.batch("SELECT pg_advisory_xact_lock(7300113)")?;
            if self.scalar_bool("SELECT to_regclass('uns_schema') IS NOT NULL")? {
                return Ok(());
            }
            self.batch(SCHEMA)
        })();
        match result {
            Ok(()) => self.batch("COMMIT"),
            Err(err) => {
                let _ = self.batch("ROLLBACK");
                Err(err)
            }
        }
    }

    fn scalar_bool(&self, sql: &str) -> DbResult<bool> {
        let rows = self.client.borrow_mut().query(sql, &[])?;
        Ok(rows.first().map(|r| r.get::<_, bool>(0)).unwrap_or(false))
    }

    fn strings(&self, sql: &str) -> DbResult<Vec<String>> {
        let rows = self.client.borrow_mut().query(sql, &[])?;
        Ok(rows.iter().map(|r| r.get::<_, String>(0)).collect())
    }

    fn scalar_i64(&self, sql: &str) -> DbResult<i64> {
        let rows = self.client.borrow_mut().query(sql, &[])?;
        Ok(rows.first().map(|r| r.get::<_, i64>(0)).unwrap_or(0))
    }

    /// Makes this session refuse every write: read commands read through it.
    pub fn read_only(&self) -> DbResult<()> {
        self.batch("SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY")?;
        self.read_only.set(true);
        Ok(())
    }

    /// Makes the session again where the server ended it (a restart, a failover, an
    /// administrator's `pg_terminate_backend`) and no transaction of this connection was
    /// open in it: a command that polls (a follow, a wait, the screen) reads on once the
    /// database is back, where it failed on the dead session for ever. The new session
    /// is made and checked as [`PgConn::open`] makes one, refuses writes when the old
    /// one did, and is refused when the URL now reaches another store. Inside a
    /// transaction nothing is made again: the transaction is gone with its session, and
    /// its statements fail until it ends.
    fn revived(&self) -> DbResult<()> {
        if self.in_transaction.get() || !(self.ended.get() || self.client.borrow().is_closed()) {
            return Ok(());
        }
        let failed = |err: OpenError| DbError::Reopen {
            said: err.to_string(),
            passing: matches!(
                err,
                OpenError::Connect { refused: false, .. }
                    | OpenError::Database { .. }
                    | OpenError::ReadOnly { .. }
                    | OpenError::NoHostOfKind { .. }
            ),
            credentials: err.refused_credentials(),
        };
        let fresh = Self::open(&self.target, false).map_err(failed)?;
        if self.read_only.get() {
            fresh.read_only()?;
        }
        if let Some(store) = self.store.borrow().as_deref() {
            let reached = fresh.identity_place()?;
            if reached != store {
                return Err(DbError::Reopen {
                    said: format!(
                        "{} now reaches another store ({reached}, not {store}): start again to read it",
                        self.place
                    ),
                    passing: false,
                    credentials: false,
                });
            }
        }
        let PgConn { client, .. } = fresh;
        *self.client.borrow_mut() = client.into_inner();
        self.statements.borrow_mut().clear();
        self.took_no_writes.set(false);
        self.ended.set(false);
        Ok(())
    }

    /// Refuses a database that would refuse every change (a hot standby, a database or
    /// role with `default_transaction_read_only`), and a role that may read the store but
    /// not change it, before anything is asked of it: otherwise each entry of a bulk
    /// change, and each of a worker's claims, would fail on its own.
    pub fn takes_writes(&self) -> Result<(), OpenError> {
        let rows = self
            .client
            .borrow_mut()
            .query(
                &format!(
                    "SELECT current_setting('transaction_read_only'), current_user::text, {MAY_CHANGE}"
                ),
                &[],
            )
            .map_err(|err| OpenError::Database {
                url: self.place.clone(),
                said: said(&err),
            })?;
        let Some(row) = rows.first() else {
            return Err(OpenError::ReadOnly {
                url: self.place.clone(),
                several_hosts: self.target.several_hosts_any_session(),
            });
        };
        if row.get::<_, String>(0) != "off" {
            return Err(OpenError::ReadOnly {
                url: self.place.clone(),
                several_hosts: self.target.several_hosts_any_session(),
            });
        }
        if !row.get::<_, bool>(2) {
            return Err(OpenError::NotPermitted {
                url: self.place.clone(),
                role: row.get(1),
            });
        }
        Ok(())
    }

    /// What the store's identity is hashed with: the random name the schema was made
    /// with, so the store is the same store however it is reached (a host name or
    /// another, directly or through its API), and a copy of it is another.
    pub fn identity_place(&self) -> DbResult<String> {
        let rows = self
            .client
            .borrow_mut()
            .query("SELECT store FROM uns_schema", &[])?;
        let store: String = rows.first().map(|r| r.get(0)).unwrap_or_default();
        let place = format!("postgres:{store}");
        *self.store.borrow_mut() = Some(place.clone());
        Ok(place)
    }

    /// The database's clock, in unix seconds.
    pub fn now(&self) -> DbResult<f64> {
        let rows = self
            .client
            .borrow_mut()
            .query("SELECT extract(epoch FROM clock_timestamp())::float8", &[])?;
        Ok(rows.first().map(|r| r.get::<_, f64>(0)).unwrap_or(0.0))
    }

    pub fn batch(&self, sql: &str) -> DbResult<()> {
        self.revived()?;
        let first = sql
            .split_whitespace()
            .next()
            .unwrap_or_default()
            .to_ascii_uppercase();
        let done = self.client.borrow_mut().batch_execute(sql);
        match first.as_str() {
            "BEGIN" if done.is_ok() => self.in_transaction.set(true),
            "COMMIT" | "ROLLBACK" => self.in_transaction.set(false),
            _ => {}
        }
        self.noted(done)
    }

    /// Whether the server refused a write on this session because it takes none (a hot
    /// standby's session, or one begun while the database's default was read-only). It
    /// refuses every write for as long as it lives, whatever the name it was reached by
    /// reaches meanwhile (a failover that moved it late), though nothing closes it: a
    /// pool that writes closes it rather than lend it again.
    pub fn took_no_writes(&self) -> bool {
        self.took_no_writes.get()
    }

    /// `result`, its error noted when it says this session takes no writes, or that the
    /// session is over.
    fn noted<T>(&self, result: Result<T, postgres::Error>) -> DbResult<T> {
        if let Err(err) = &result {
            if err.code() == Some(&postgres::error::SqlState::READ_ONLY_SQL_TRANSACTION) {
                self.took_no_writes.set(true);
            }
            let fatal = err
                .as_db_error()
                .is_some_and(|db| matches!(db.severity(), "FATAL" | "PANIC"));
            if fatal || err.is_closed() {
                self.ended.set(true);
            }
        }
        Ok(result?)
    }

    /// Whether a transaction begun by [`PgConn::batch`] is open.
    pub fn in_transaction(&self) -> bool {
        self.in_transaction.get()
    }

    /// `sql` (written with `?N` or `?`) prepared once for this connection.
    fn statement(&self, sql: &str) -> DbResult<postgres::Statement> {
        self.revived()?;
        if let Some(statement) = self.statements.borrow().get(sql) {
            return Ok(statement.clone());
        }
        let statement = self.noted(self.client.borrow_mut().prepare(&numbered(sql)))?;
        self.statements
            .borrow_mut()
            .insert(sql.to_string(), statement.clone());
        Ok(statement)
    }

    pub fn query(&self, sql: &str, params: &[Value]) -> DbResult<Vec<postgres::Row>> {
        let statement = self.statement(sql)?;
        let values = values(&statement, params)?;
        let refs: Vec<&(dyn ToSql + Sync)> = values.iter().map(|v| v.as_ref()).collect();
        let rows = self.client.borrow_mut().query(&statement, &refs);
        self.noted(rows)
    }

    pub fn execute(&self, sql: &str, params: &[Value]) -> DbResult<u64> {
        let statement = self.statement(sql)?;
        let values = values(&statement, params)?;
        let refs: Vec<&(dyn ToSql + Sync)> = values.iter().map(|v| v.as_ref()).collect();
        let changed = self.client.borrow_mut().execute(&statement, &refs);
        self.noted(changed)
    }

    /// Streams the rows of `sql`, handing each to `each` as it arrives (a walk of the
    /// whole store never holds it all) until it returns false; `each` must not ask this
    /// connection again.
    pub fn stream(
        &self,
        sql: &str,
        params: &[Value],
        each: &mut dyn FnMut(&dyn Source) -> DbResult<bool>,
    ) -> DbResult<()> {
        use postgres::fallible_iterator::FallibleIterator;
        let statement = self.statement(sql)?;
        let values = values(&statement, params)?;
        let refs: Vec<&(dyn ToSql + Sync)> = values.iter().map(|v| v.as_ref()).collect();
        let mut client = self.client.borrow_mut();
        let mut rows = self.noted(client.query_raw(&statement, refs))?;
        while let Some(row) = self.noted(rows.next())? {
            if !each(&PgRow(&row))? {
                break;
            }
        }
        Ok(())
    }

    /// Reads `heads` and `lines` of one snapshot side by side, merged by their first
    /// column (see [`super::snapshot`]), on two connections of the walk's own. They
    /// last as long as the walk: one kept idle between a screen's walks could be cut by
    /// the server or a load balancer meanwhile, and the next walk would fail on it.
    pub fn merge(
        &self,
        heads: &str,
        lines: &str,
        params: &[Value],
        each: &mut dyn FnMut(Merged<'_>) -> DbResult<bool>,
    ) -> DbResult<()> {
        let (config, tls) = self
            .target
            .client_config()
            .map_err(|err| DbError::Value(err.to_string()))?;
        super::snapshot::read_merged(config, tls, (heads, lines), params, each)
    }

    /// Runs `COPY ... FROM STDIN (FORMAT binary)`, its rows written by `fill` in
    /// `types`; how many rows it copied. A `fill` that fails abandons the copy.
    pub fn copy_in(
        &self,
        sql: &str,
        types: &[Type],
        fill: &mut dyn FnMut(&mut postgres::binary_copy::BinaryCopyInWriter<'_>) -> DbResult<()>,
    ) -> DbResult<u64> {
        let mut client = self.client.borrow_mut();
        let sink = client.copy_in(sql)?;
        let mut writer = postgres::binary_copy::BinaryCopyInWriter::new(sink, types);
        fill(&mut writer)?;
        Ok(writer.finish()?)
    }

    /// Whether the server still answers on this connection (an empty query, the
    /// protocol's cheapest round trip, within five seconds).
    pub fn is_valid(&self) -> bool {
        self.client
            .borrow_mut()
            .is_valid(std::time::Duration::from_secs(5))
            .is_ok()
    }

    /// Whether the connection has gone (the server stopped, the network failed).
    pub fn is_closed(&self) -> bool {
        self.client.borrow().is_closed()
    }
}

/// §2's tables in PostgreSQL's types, version 3. Ids and kinds sort and compare by bytes
/// (`COLLATE "C"`), as SQLite's do; `rowid` keeps SQLite's row numbers across a copy, so
/// a DLQ page's cursor reads the same on both engines; each JSON text column has a JSON
/// twin the statements that look inside it read (NULL where the text is not JSON). The
/// history is evidence: triggers refuse to rewrite or delete it.
const SCHEMA: &str = r#"
CREATE FUNCTION uns_jsonb(document text) RETURNS jsonb LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
BEGIN
    RETURN document::jsonb;
EXCEPTION WHEN others THEN
    RETURN NULL;
END
$$;
CREATE FUNCTION instr(haystack text, needle text) RETURNS integer LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT strpos(haystack, needle)
$$;
CREATE TABLE uns_schema (
    version BIGINT NOT NULL,
    store   TEXT NOT NULL DEFAULT gen_random_uuid()::text
);
INSERT INTO uns_schema (version) VALUES (3);
CREATE TABLE uns_notifications (
    rowid           BIGINT GENERATED ALWAYS AS IDENTITY UNIQUE,
    id              TEXT COLLATE "C" PRIMARY KEY,
    status          TEXT COLLATE "C" NOT NULL
                    CHECK (status IN ('PENDING', 'LEASED', 'DELIVERED', 'DEAD', 'RESOLVED')),
    dead_letter     BIGINT NOT NULL DEFAULT 0 CHECK (dead_letter IN (0, 1)),
    attempts        BIGINT NOT NULL DEFAULT 0,
    cycle           BIGINT NOT NULL DEFAULT 1,
    cycle_attempts  BIGINT NOT NULL DEFAULT 0,
    max_attempts    BIGINT NOT NULL,
    channels        TEXT COLLATE "C" NOT NULL,
    payload         TEXT COLLATE "C" NOT NULL,
    idempotency_key TEXT COLLATE "C" UNIQUE,
    lease_token     TEXT COLLATE "C",
    lease_until     DOUBLE PRECISION,
    next_attempt_at DOUBLE PRECISION NOT NULL,
    error_message   TEXT COLLATE "C",
    created_at      DOUBLE PRECISION NOT NULL,
    updated_at      DOUBLE PRECISION NOT NULL,
    channels_json   JSONB GENERATED ALWAYS AS (uns_jsonb(channels)) STORED,
    payload_json    JSONB GENERATED ALWAYS AS (uns_jsonb(payload)) STORED
);
CREATE INDEX uns_notifications_due ON uns_notifications (next_attempt_at) WHERE status = 'PENDING';
CREATE INDEX uns_notifications_leased ON uns_notifications (lease_until) WHERE status = 'LEASED';
CREATE INDEX uns_notifications_dlq ON uns_notifications (id) WHERE dead_letter = 1;
CREATE INDEX uns_notifications_dlq_updated ON uns_notifications (updated_at) WHERE dead_letter = 1;
CREATE TABLE uns_events (
    id              BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    notification_id TEXT COLLATE "C" NOT NULL REFERENCES uns_notifications (id),
    at              DOUBLE PRECISION NOT NULL,
    kind            TEXT COLLATE "C" NOT NULL,
    payload         TEXT COLLATE "C" NOT NULL,
    payload_json    JSONB GENERATED ALWAYS AS (uns_jsonb(payload)) STORED
);
CREATE INDEX uns_events_notification ON uns_events (notification_id, id);
CREATE INDEX uns_events_kind ON uns_events (kind, at);
CREATE TABLE uns_notes (
    id      BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at      DOUBLE PRECISION NOT NULL,
    kind    TEXT COLLATE "C" NOT NULL,
    payload TEXT COLLATE "C" NOT NULL
);
CREATE INDEX uns_notes_at ON uns_notes (at);
CREATE FUNCTION uns_refuse() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION '%', TG_ARGV[0];
END
$$;
CREATE TRIGGER uns_events_append_only BEFORE UPDATE OR DELETE ON uns_events
FOR EACH ROW EXECUTE FUNCTION uns_refuse('uns_events is append-only');
CREATE TRIGGER uns_events_never_truncated BEFORE TRUNCATE ON uns_events
FOR EACH STATEMENT EXECUTE FUNCTION uns_refuse('uns_events is append-only');
CREATE TRIGGER uns_notes_append_only BEFORE UPDATE OR DELETE ON uns_notes
FOR EACH ROW EXECUTE FUNCTION uns_refuse('uns_notes is append-only');
CREATE TRIGGER uns_notes_never_truncated BEFORE TRUNCATE ON uns_notes
FOR EACH STATEMENT EXECUTE FUNCTION uns_refuse('uns_notes is append-only');
CREATE TRIGGER uns_notifications_never_deleted BEFORE DELETE ON uns_notifications
FOR EACH ROW EXECUTE FUNCTION uns_refuse('notifications are never deleted');
CREATE TRIGGER uns_notifications_never_truncated BEFORE TRUNCATE ON uns_notifications
FOR EACH STATEMENT EXECUTE FUNCTION uns_refuse('notifications are never deleted');
"#;

#[cfg(test)]
mod tests {
    use super::*;

    /// Each way a transaction begins bounds its waits for a lock.
    #[test]
    fn every_transaction_bounds_its_waits_for_a_lock() {
        use super::super::locks::BOUND_LOCK_WAITS;
        assert!(BEGIN_WRITE.ends_with(BOUND_LOCK_WAITS) && BEGIN_READ.ends_with(BOUND_LOCK_WAITS));
    }

    /// A socket that is not there is named; a configuration the client refuses is said
    /// as it is, with no socket, since none was tried.
    #[test]
    fn a_socket_not_reached_is_named_and_only_then() {
        let said = |url: &str| match PgConn::connect(&Target::new(url, None, None)) {
            Ok(_) => panic!("{url}: connected"),
            Err(err) => err.to_string(),
        };
        let missing = said("postgres://uns@%2Fnowhere%2Fat-all:6543/uns");
        assert!(
            missing.contains("socket /nowhere/at-all/.s.PGSQL.6543: "),
            "{missing}"
        );
        let refused = said("postgres:///uns?host=/nowhere&port=1,2");
        assert!(refused.contains("invalid number of ports"), "{refused}");
        assert!(!refused.contains("socket"), "{refused}");
    }

    #[test]
    fn a_url_of_several_hosts_without_a_session_attribute_is_told() {
        let several = |url: &str| Target::new(url, None, None).several_hosts_any_session();
        assert!(several("postgres://uns@db1:5432,db2:5432/uns"));
        assert!(several("postgres://uns@db1,db2/uns?sslmode=disable"));
        assert!(several(
            "postgres://uns@db1,db2/uns?sslmode=verify-full&sslrootcert=/nowhere/ca.pem"
        ));
        assert!(several("postgres://uns@db1,db2:5433/uns"));
        assert!(several(
            "postgres://uns@db1,db2/uns?target_session_attrs=any"
        ));
        assert!(!several("postgres://uns@db1:5432/uns"));
        assert!(!several(
            "postgres://uns@db1,db2/uns?target_session_attrs=read-write"
        ));
        assert!(!several("not a url"));
    }

    #[test]
    fn what_a_url_leaves_out_comes_from_the_environment_as_libpq_takes_it() {
        let env = |name: &str| {
            Some(match name {
                "PGHOST" => "/var/run/postgresql".to_string(),
                "PGPORT" => "5433".into(),
                "PGUSER" => "on call".into(),
                "PGDATABASE" => "uns&x=1".into(),
                _ => return None,
            })
        };
        let filled = with_environment("postgres://", &env);
        assert_eq!(
            filled,
            "postgres://?host=/var/run/postgresql&port=5433&user=on%20call&dbname=uns%26x%3D1"
        );
        let config: postgres::Config = filled.parse().expect("a URL");
        assert_eq!(config.get_user(), Some("on call"));
        assert_eq!(config.get_dbname(), Some("uns&x=1"));
        assert_eq!(config.get_ports(), [5433]);
        // What the URL names wins; its TLS parameters stay.
        let named = "postgres://ops@db.example:6432/uns?sslmode=verify-full";
        assert_eq!(with_environment(named, &env), named);
        assert_eq!(
            with_environment("postgresql://db.example/uns?sslmode=require", &env),
            "postgresql://db.example:5433/uns?sslmode=require&user=on%20call"
        );
        assert_eq!(
            with_environment("postgres://a:b@h1:1,h2,[::2]/uns", &env),
            "postgres://a:b@h1:1,h2:5433,[::2]:5433/uns"
        );
        assert_eq!(
            with_environment("postgres://ops@[::1]/uns", &env),
            "postgres://ops@[::1]:5433/uns"
        );
        for named in [
            "postgres://[::1]:5432/uns?user=a",
            "postgres://a@h1:1/uns",
            "postgres:///uns?host=/tmp&port=5432&user=a",
        ] {
            assert_eq!(with_environment(named, &env), named);
        }
        // Nothing set, or a URL that cannot be read: as it was.
        assert_eq!(
            with_environment("postgres:///uns", &|_| None),
            "postgres:///uns"
        );
        assert_eq!(with_environment("postgres://[", &env), "postgres://[");
    }

    #[test]
    fn a_server_that_stops_answering_is_given_up_within_a_minute_unless_the_url_says_otherwise() {
        let (config, _) = Target::new("postgres://uns@db1/uns", None, None)
            .client_config()
            .expect("a URL");
        assert!(config.get_keepalives());
        let probes = config.get_keepalives_idle()
            + config.get_keepalives_interval().expect("an interval")
                * config.get_keepalives_retries().expect("retries");
        assert!(probes <= std::time::Duration::from_secs(30), "{probes:?}");
        assert!(
            config
                .get_tcp_user_timeout()
                .is_some_and(|t| *t <= std::time::Duration::from_secs(60)),
            "{config:?}"
        );
        // A site's own settings stand.
        let (config, _) = Target::new(
            "postgres://uns@db1/uns?keepalives_idle=120&keepalives_interval=30&keepalives_retries=9&tcp_user_timeout=600",
            None,
            None,
        )
        .client_config()
        .expect("a URL");
        assert_eq!(
            config.get_keepalives_idle(),
            std::time::Duration::from_secs(120)
        );
        assert_eq!(
            config.get_keepalives_interval(),
            Some(std::time::Duration::from_secs(30))
        );
        assert_eq!(config.get_keepalives_retries(), Some(9));
        assert_eq!(
            config.get_tcp_user_timeout(),
            Some(&std::time::Duration::from_secs(600))
        );
        let (config, _) = Target::new("postgres://uns@db1/uns?keepalives=0", None, None)
            .client_config()
            .expect("a URL");
        assert!(!config.get_keepalives());
    }

    #[test]
    fn which_host_to_take_and_how_long_to_wait_come_from_the_environment_too() {
        let env = |name: &str| {
            Some(match name {
                "PGTARGETSESSIONATTRS" => "read-write".to_string(),
                "PGCONNECT_TIMEOUT" => " 7 ".into(),
                _ => return None,
            })
        };
        let filled = with_environment("postgres://uns@db1,db2/uns", &env);
        assert_eq!(
            filled,
            "postgres://uns@db1,db2/uns?target_session_attrs=read-write&connect_timeout=7"
        );
        let target = Target::new(&filled, None, None);
        assert!(!target.several_hosts_any_session());
        let (config, _) = target.client_config().expect("a URL");
        assert_eq!(
            config.get_connect_timeout(),
            Some(&std::time::Duration::from_secs(7))
        );
        // What the URL names wins, in whatever order its parameters come.
        for named in [
            "postgres://uns@db1,db2/uns?target_session_attrs=any&connect_timeout=2",
            "postgres://uns@db1,db2/uns?connect_timeout=2&target_session_attrs=any",
        ] {
            assert_eq!(with_environment(named, &env), named);
        }
        // A parameter whose name merely ends alike is another one.
        assert!(!url_names(
            "postgres://db/uns?xconnect_timeout=1",
            "connect_timeout"
        ));
        assert!(url_names(
            "postgres://db/uns?a=1&connect_timeout",
            "connect_timeout"
        ));
        // A value the client cannot take is passed on, for the connection to refuse.
        let odd = with_environment("postgres://uns@db1,db2/uns", &|name: &str| {
            (name == "PGTARGETSESSIONATTRS").then(|| "prefer standby".to_string())
        });
        assert_eq!(
            odd,
            "postgres://uns@db1,db2/uns?target_session_attrs=prefer%20standby"
        );
        assert!(Target::new(&odd, None, None).client_config().is_err());
    }

    #[test]
    fn a_pgpass_line_is_found_as_libpq_finds_it() {
        let parts = Parts {
            host: "db.internal".into(),
            port: "5432".into(),
            database: "uns".into(),
            user: "oncall".into(),
        };
        let text = "# comment\nother:5432:uns:oncall:wrong\n*:5432:uns:oncall:pa\\:ss\ndb.internal:*:*:*:later\n";
        assert_eq!(pgpass_lookup(text, &parts).as_deref(), Some("pa:ss"));
        assert_eq!(
            pgpass_lookup("db.internal:5433:uns:oncall:x\n", &parts),
            None
        );
    }

    #[test]
    fn a_url_is_shown_without_its_password() {
        assert_eq!(
            shown("postgres://uns:s3cret@db.internal:5432/uns"),
            "postgres://uns@db.internal:5432/uns"
        );
        assert_eq!(
            shown("postgres://db.internal/uns?sslmode=require&password=s3cret"),
            "postgres://db.internal/uns?sslmode=require"
        );
        assert!(is_url("postgresql://x/y"));
        assert!(!is_url("/var/lib/uns/uns.db"));
    }
}
