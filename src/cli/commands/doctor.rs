//! `unsctl doctor`: the checks the runbook's mitigation section asks for, one line each.

use crate::cli::backend::Invocation;
use crate::cli::backend::{self, Named};
use crate::cli::error::{CliError, CliResult};
use crate::db::pg::Target;
use crate::render::output::{Output, View, counted, print};
use crate::render::time;
use crate::runtime::adapters::email::{StartTls, login_allowed};
use crate::runtime::queries::Health;
use crate::runtime::schema;
use crate::store::Store;
use crate::store::StoreError;
use crate::store::direct::DirectStore;
use crate::store::http::HttpStore;
use crate::store::place::Backend;
use lettre::transport::smtp::authentication::{Credentials, Mechanism};
use lettre::transport::smtp::client::{SmtpConnection, TlsParameters};
use lettre::transport::smtp::extension::ClientId;
use serde::Serialize;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// Check the store, the API, the SMTP relay, the workers and lease health
///
/// Uses --db/UNS_DB_FILE and --api/UNS_BASE_URL (both may be given), UNS_SMTP_HOST and
/// UNS_LEASE_SECONDS. Exits 1 when a check fails; warnings alone exit 0.
///
/// Example: unsctl doctor
#[derive(Debug, clap::Args)]
pub struct Args {
    /// SMTP relay to measure, host:port
    #[arg(long, env = "UNS_SMTP_HOST")]
    pub smtp_host: Option<String>,
    /// STARTTLS: never, opportunistic or required
    #[arg(long, env = "UNS_SMTP_STARTTLS", default_value = "never", value_parser = crate::cli::values::parse_starttls)]
    pub smtp_starttls: StartTls,
    /// SMTP login user (password from UNS_SMTP_PASSWORD), sent only over STARTTLS or to a
    /// relay on this machine (localhost, a loopback address)
    #[arg(long, env = "UNS_SMTP_USER")]
    pub smtp_user: Option<String>,
    /// A sink address that takes test mail: the relay is then timed through a whole
    /// message, final dot included (where a slow relay spends the lease); without it,
    /// only the greeting is timed
    #[arg(long, env = "UNS_SMTP_PROBE_TO", value_name = "ADDRESS")]
    pub probe_to: Option<String>,
    /// The sender of the probe message
    #[arg(long, env = "UNS_SMTP_FROM", default_value = "uns@uns.local")]
    pub smtp_from: String,
    /// The workers' lease, to judge the relay's latency against
    #[arg(long, env = "UNS_LEASE_SECONDS", default_value_t = 60.0, value_parser = crate::cli::values::parse_positive_seconds)]
    pub lease_seconds: f64,
    /// How far back to count claims, lease losses and provider calls, in minutes (at
    /// most a week)
    #[arg(long, default_value_t = 15, value_parser = clap::value_parser!(u64).range(1..=10_080))]
    pub interval_minutes: u64,
    /// A due row waiting this long, in seconds, means the worker is stalled
    #[arg(long, default_value_t = 120.0, value_parser = crate::cli::values::parse_positive_seconds)]
    pub stall_seconds: f64,
    /// How long after the last lease loss or reclaim the incident is no longer called
    /// still happening (1s to 24h)
    #[arg(long, value_name = "DURATION", default_value = "5m", value_parser = crate::cli::values::parse_some_span)]
    pub quiet_after: f64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Level {
    Ok,
    Skip,
    Warn,
    Fail,
}

#[derive(Debug, Serialize)]
pub struct Check {
    pub name: &'static str,
    pub level: Level,
    pub detail: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hint: Option<String>,
}

fn check(name: &'static str, level: Level, detail: impl Into<String>, hint: Option<&str>) -> Check {
    Check {
        name,
        level,
        detail: detail.into(),
        hint: hint.map(str::to_string),
    }
}

fn env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

/// The journal mode the SQLite file's header records: bytes 18 and 19 are 2 in WAL mode,
/// 1 in rollback mode.
fn journal_in_header(path: &std::path::Path) -> Option<&'static str> {
    use std::io::Read;
    let mut header = [0u8; 20];
    std::fs::File::open(path)
        .and_then(|mut file| file.read_exact(&mut header))
        .ok()?;
    if !header.starts_with(b"SQLite format 3\0") {
        return None;
    }
    match (header[18], header[19]) {
        (2, 2) => Some("wal"),
        (1, 1) => Some("delete"),
        _ => None,
    }
}

fn store_check(path: &PathBuf) -> Check {
    // The access is kept while the connection is used: it may own a private copy.
    let (conn, _access) = match schema::open_read_only(path) {
        Ok(opened) => opened,
        Err(err) => {
            return check(
                "store",
                Level::Fail,
                err.to_string(),
                Some("point --db or UNS_DB_FILE at the runtime's store"),
            );
        }
    };
    // An immutable snapshot (a store this process cannot write) reports "delete" whatever
    // the file is: the file's own header says whether it is in WAL mode.
    let journal: String = match journal_in_header(path) {
        Some(mode) => mode.to_string(),
        None => conn
            .query_row("PRAGMA journal_mode", [], |r| r.get(0))
            .unwrap_or_default(),
    };
    let writable = std::fs::OpenOptions::new().write(true).open(path).is_ok();
    let version: i64 = conn
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .unwrap_or_default();
    let mut detail = format!("{}: schema v{version}", path.display());
    if version < schema::SCHEMA_VERSION {
        detail.push_str(&format!(
            " (the runtime brings it to v{} when it next starts)",
            schema::SCHEMA_VERSION
        ));
    }
    detail.push_str(&format!(", journal {journal}, "));
    detail.push_str(if writable { "writable" } else { "read-only" });
    if journal != "wal" {
        return check(
            "store",
            Level::Warn,
            detail,
            Some(
                "the runtime runs the store in WAL mode; start it once with `unsctl runtime serve`",
            ),
        );
    }
    if !writable {
        return check(
            "store",
            Level::Warn,
            detail,
            Some("reads work; resolve and replay with --db need write access"),
        );
    }
    check("store", Level::Ok, detail, None)
}

/// A PostgreSQL store (DESIGN §12): reached with the operator's credentials in a
/// read-only session, a UNS store of this version; whether the session is encrypted, and
/// whether the role may write (resolve and replay need it). The store, to read on.
fn database_check(target: &Target) -> (Check, Option<DirectStore>) {
    let shown = crate::db::pg::shown(&target.url);
    let store = match DirectStore::open_postgres(target, false) {
        Ok(store) => store,
        Err(err) => {
            let hint = match &err {
                StoreError::DatabaseAuth(_) => Some(
                    "check PGPASSWORD (or ~/.pgpass, readable by you alone), the URL's user and sslmode",
                ),
                // The refusal says what to do itself.
                StoreError::Unavailable(text)
                    if text.ends_with(crate::db::pg::NO_HOST_OF_KIND_REMEDY) =>
                {
                    None
                }
                StoreError::Unavailable(_) => {
                    Some("is the database up, and does the URL name its host and port?")
                }
                _ => Some("point --db or UNS_DB_FILE at the runtime's database"),
            };
            return (check("store", Level::Fail, err.to_string(), hint), None);
        }
    };
    let Some(facts) = DatabaseFacts::read(&store) else {
        return (
            check(
                "store",
                Level::Fail,
                format!("{}: its catalogue cannot be read", shown),
                None,
            ),
            None,
        );
    };
    (
        facts.check(&shown, target.several_hosts_any_session()),
        Some(store),
    )
}

/// What doctor says of a PostgreSQL store, read in its own read-only session.
struct DatabaseFacts {
    version: i64,
    server: String,
    encrypted: bool,
    /// The role may write the store's tables.
    may_change: bool,
    /// Why the database takes no writes from anyone, if it does not.
    no_writes: Option<String>,
}

impl DatabaseFacts {
    fn read(store: &DirectStore) -> Option<Self> {
        let sql = format!(
            "SELECT (SELECT version FROM uns_schema), current_setting('server_version'),
                CASE WHEN COALESCE((SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()), false)
                     THEN 1 ELSE 0 END,
                CASE WHEN {} THEN 1 ELSE 0 END,
                {}",
            crate::db::pg::MAY_CHANGE,
            crate::db::pg::TAKES_NO_WRITES
        );
        let facts = store.db().row(&sql, &[], |row| {
            let integer = |i| match row.cell(i) {
                Ok(rusqlite::types::ValueRef::Integer(n)) => n,
                _ => 0,
            };
            let text = |i| match row.cell(i) {
                Ok(rusqlite::types::ValueRef::Text(text)) => Some(
                    crate::render::sanitize::cleaned(&String::from_utf8_lossy(text)),
                ),
                _ => None,
            };
            Ok(Self {
                version: integer(0),
                server: text(1).unwrap_or_else(|| "?".into()),
                encrypted: integer(2) == 1,
                may_change: integer(3) == 1,
                no_writes: text(4),
            })
        });
        facts.ok().flatten()
    }

    /// `several_hosts`: the URL names several and takes the first that answers.
    fn check(&self, shown: &str, several_hosts: bool) -> Check {
        let access = match (&self.no_writes, self.may_change) {
            (Some(why), _) => format!("read-only: {why}"),
            (None, true) => "writable".to_string(),
            (None, false) => "read-only".to_string(),
        };
        let detail = format!(
            "{shown}: schema v{}, PostgreSQL {}, {}, {access}",
            self.version,
            self.server,
            if self.encrypted {
                "TLS"
            } else {
                "not encrypted"
            },
        );
        let hint = match (&self.no_writes, self.may_change) {
            (None, true) => return check("store", Level::Ok, detail, None),
            // The client takes the first host that answers; with the attribute, the first
            // whose sessions take writes, however the servers changed places.
            (Some(_), _) if several_hosts => {
                "reads work; the runtime will not start on it, and resolve and replay are refused: the URL names several hosts and takes the first that answers, a standby as well as the primary; add target_session_attrs=read-write to it, and the one that takes writes is chosen"
            }
            (Some(_), _) => {
                "reads work; the runtime will not start on it, and resolve and replay are refused: point --db at the primary, with a role whose writes it takes"
            }
            (None, false) => "reads work; resolve and replay need a role that may write the store",
        };
        check("store", Level::Warn, detail, Some(hint))
    }
}

/// The API's checks and, when it answers, its reading of the runtime. Failures are
/// explained by their cause (refused, timed out, wrong path, wrong key), never by the
/// HTTP client's own text.
fn api_check(url: &str, key: Option<String>, window: f64) -> (Vec<Check>, Option<Health>) {
    let read = HttpStore::new(url, key.clone()).and_then(|store| store.health(window, None));
    let shown = crate::api::without_userinfo(url);
    match read {
        Ok(health) => (
            vec![
                check("api", Level::Ok, format!("{shown} answers"), None),
                check("api key", Level::Ok, "accepted", None),
            ],
            Some(health),
        ),
        Err(StoreError::Auth(_)) => (
            vec![
                check("api", Level::Ok, format!("{shown} answers"), None),
                match key {
                    None => check(
                        "api key",
                        Level::Fail,
                        "no key given (UNS_API_KEY, or the context's api_key_env, is not set)",
                        Some("export the server's key"),
                    ),
                    Some(_) => check(
                        "api key",
                        Level::Fail,
                        "refused (401)",
                        Some("UNS_API_KEY does not match the key the server was started with"),
                    ),
                },
            ],
            None,
        ),
        Err(err @ StoreError::Unavailable(_)) => (
            vec![check(
                "api",
                Level::Fail,
                err.to_string(),
                Some("see TSG-03 §3"),
            )],
            None,
        ),
        Err(err) => (
            vec![check(
                "api",
                Level::Fail,
                err.to_string(),
                Some(
                    "check the URL: UNS_BASE_URL is the server's root, e.g. http://127.0.0.1:8080",
                ),
            )],
            None,
        ),
    }
}

/// Who named the relay doctor talks to. Credentials go only to a peer the operator
/// named (DESIGN §5): a relay a store or an API names is data, greeted at most.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum NamedBy {
    /// `UNS_SMTP_HOST` or `--smtp-host`: measured as the worker uses it, login included.
    Operator,
    /// The runtime's newest email attempt, from the store or the API's stats.
    Data,
}

/// What talking to the relay took: the steps done and how long, or why it failed.
struct RelayProbe {
    relay: String,
    measured: Result<Vec<&'static str>, String>,
    elapsed: f64,
    /// A whole message was sent, to the final dot; else only the greeting was timed.
    message: bool,
    named_by: NamedBy,
}

/// The relay check, judged against the lease the store's events show in use, else the
/// one given; the given one is named when they differ. Without UNS_SMTP_HOST here (the
/// runbook's environment has none), the relay the runtime's newest email went to.
fn smtp_check(args: &Args, in_use: &InUse) -> Check {
    let probe = match (&args.smtp_host, &in_use.relay) {
        (None, Some(relay)) => probe_relay_at(relay, args, NamedBy::Data).map(|mut probe| {
            let login = if args.smtp_user.is_some() {
                "; greeted only, never logged in to: a relay named by data gets no credentials (set UNS_SMTP_HOST to measure the login)"
            } else {
                "; greeted only"
            };
            probe.relay = format!(
                "{} (the relay the newest email attempt used{login})",
                crate::render::sanitize::clean(relay)
            );
            probe
        }),
        _ => probe_relay(args),
    };
    relay_check(probe.as_ref(), args, in_use.lease)
}

fn relay_check(probe: Option<&RelayProbe>, args: &Args, lease: Option<f64>) -> Check {
    let Some(probe) = probe else {
        return check("smtp relay", Level::Skip, "UNS_SMTP_HOST is not set", None);
    };
    let in_use = lease.unwrap_or(args.lease_seconds);
    let named = if (in_use - args.lease_seconds).abs() > 0.01 * in_use.max(0.001) {
        format!(
            " (the lease the store's events show in use; --lease-seconds says {} s)",
            args.lease_seconds
        )
    } else {
        String::new()
    };
    let relay = &probe.relay;
    let elapsed = probe.elapsed;
    let share = elapsed / in_use;
    match &probe.measured {
        Err(err) => check(
            "smtp relay",
            Level::Fail,
            format!("{relay}: {err}"),
            Some("the worker cannot send email through this relay"),
        ),
        Ok(steps) => {
            let only = if probe.message || probe.named_by == NamedBy::Data {
                ""
            } else {
                " (the greeting only: set UNS_SMTP_PROBE_TO to a sink address to time a whole message, final dot included)"
            };
            let detail = format!(
                "{relay}: {} took {:.0} ms, {:.1}% of the {} lease{named}{only}",
                steps.join(" + "),
                elapsed * 1e3,
                share * 100.0,
                time::duration(in_use)
            );
            if share >= 0.10 {
                check(
                    "smtp relay",
                    Level::Warn,
                    detail,
                    Some(
                        "a slow relay eats the lease: sends overrun it and come back as LEASE_LOST; use a local or closer relay",
                    ),
                )
            } else {
                check("smtp relay", Level::Ok, detail, None)
            }
        }
    }
}

fn probe_relay(args: &Args) -> Option<RelayProbe> {
    probe_relay_at(args.smtp_host.as_ref()?, args, NamedBy::Operator)
}

/// Why measuring a relay stopped: what the relay answered, or a login not sent.
enum Refused {
    Smtp(lettre::transport::smtp::Error),
    Login(String),
}

impl From<lettre::transport::smtp::Error> for Refused {
    fn from(err: lettre::transport::smtp::Error) -> Self {
        Refused::Smtp(err)
    }
}

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refused::Smtp(err) => write!(f, "{err}"),
            Refused::Login(why) => f.write_str(why),
        }
    }
}

fn probe_relay_at(relay: &str, args: &Args, named_by: NamedBy) -> Option<RelayProbe> {
    let relay = &relay.to_string();
    // A relay data named is only greeted; the operator's own gets the probe message.
    let probe = match (&args.probe_to, named_by) {
        (Some(to), NamedBy::Operator) => match probe_message(&args.smtp_from, to) {
            Ok(probe) => Some(probe),
            Err(err) => {
                return Some(RelayProbe {
                    relay: relay.clone(),
                    measured: Err(format!("cannot make the probe message: {err}")),
                    elapsed: 0.0,
                    message: false,
                    named_by,
                });
            }
        },
        _ => None,
    };
    let message = probe.is_some();
    let started = Instant::now();
    let timeout = Some(Duration::from_secs_f64(args.lease_seconds.clamp(1.0, 60.0)));
    let hello = ClientId::Domain("uns.local".into());
    let measured = (|| -> Result<Vec<&'static str>, Refused> {
        let mut steps = vec!["connect", "EHLO"];
        let mut conn = SmtpConnection::connect(relay.as_str(), timeout, &hello, None, None)?;
        if named_by == NamedBy::Data {
            let _ = conn.quit();
            return Ok(steps);
        }
        let starttls = args.smtp_starttls;
        if starttls == StartTls::Required
            || (starttls == StartTls::Opportunistic && conn.can_starttls())
        {
            let host = relay.rsplit_once(':').map_or(relay.as_str(), |(h, _)| h);
            conn.starttls(&TlsParameters::new(host.to_string())?, &hello)?;
            steps.push("STARTTLS");
        }
        if let Some(user) = &args.smtp_user {
            login_allowed(conn.is_encrypted(), relay).map_err(Refused::Login)?;
            let password = env("UNS_SMTP_PASSWORD").unwrap_or_default();
            conn.auth(
                &[Mechanism::Plain, Mechanism::Login],
                &Credentials::new(user.clone(), password),
            )?;
            steps.push("login");
        }
        if let Some((envelope, message)) = &probe {
            conn.send(envelope, message)?;
            steps.push("a probe message to the final dot");
        }
        let _ = conn.quit();
        Ok(steps)
    })();
    let elapsed = started.elapsed().as_secs_f64();
    Some(RelayProbe {
        relay: relay.clone(),
        measured: measured.map_err(|err| err.to_string()),
        elapsed,
        message,
        named_by,
    })
}

/// The probe message: from `from` to the sink address `to`, saying what it is, under a
/// Message-ID of its own so it is told apart in the relay's log.
fn probe_message(from: &str, to: &str) -> Result<(lettre::address::Envelope, Vec<u8>), String> {
    let parse = |what: &str, text: &str| {
        text.parse::<lettre::Address>()
            .map_err(|err| format!("{what} {:?}: {err}", crate::render::sanitize::clean(text)))
    };
    let (from, to) = (parse("sender", from)?, parse("probe address", to)?);
    let envelope = lettre::address::Envelope::new(Some(from.clone()), vec![to.clone()])
        .map_err(|err| err.to_string())?;
    let message = lettre::Message::builder()
        .from(lettre::message::Mailbox::new(None, from))
        .to(lettre::message::Mailbox::new(None, to))
        .subject("unsctl doctor: relay probe (discard)")
        .message_id(Some(format!(
            "<doctor-probe.{}@uns.local>",
            uuid::Uuid::new_v4().simple()
        )))
        .body(
            "unsctl doctor timed the relay through this message; it needs no action.\r\n"
                .to_string(),
        )
        .map_err(|err| err.to_string())?;
    Ok((envelope, message.formatted()))
}

/// Worker liveness: a row that is due and waits while nobody claims anything means no
/// worker is running, whatever the history says about the past.
fn worker_check(health: &Health, args: &Args) -> Check {
    let stats = &health.stats;
    let window = time::duration(health.window_seconds);
    let last_claim = stats
        .last_claim_at
        .map(|at| format!("last claim {} ago", time::duration(stats.at - at)));
    let stalled = stats.due > 0
        && stats
            .last_claim_at
            .is_none_or(|at| stats.at - at > args.stall_seconds);
    if stalled {
        let detail = format!(
            "{} due, none claimed: {}",
            counted(stats.due, "row"),
            last_claim.unwrap_or_else(|| "no claim ever recorded".into())
        );
        // The server that answered runs a worker: it is running, and leaves these rows.
        if let Some(channels) = &health.server_worker {
            let has = if channels.is_empty() {
                "no adapter at all".to_string()
            } else {
                format!("adapters for {} only", channels.joined(", "))
            };
            return check(
                "worker",
                Level::Fail,
                format!("{detail}; this server's worker runs, with {has}"),
                Some(
                    "a worker leaves a row that owes a channel it has no adapter for to one that has it: restart it with that channel's settings (UNS_SMTP_HOST, UNS_SLACK_WEBHOOK_URL, UNS_PAGERDUTY_ROUTING_KEY); see TSG-03 §2",
                ),
            );
        }
        return check(
            "worker",
            Level::Fail,
            detail,
            Some(
                "no worker is claiming: start `unsctl runtime serve` (it runs the worker); a worker without an adapter for a row's channel leaves the row to one that has it, and its log says so; see TSG-03 §2",
            ),
        );
    }
    match health.workers.len() {
        n if n > 1 => check(
            "worker",
            Level::Warn,
            format!(
                "{n} workers claimed rows in the last {window}: {}",
                health.workers.join(", ")
            ),
            Some(
                "run one worker per SQLite store; `unsctl runtime serve` already runs it in-process",
            ),
        ),
        _ => {
            let who = health
                .workers
                .first()
                .map(|w| format!(" by {w}"))
                .unwrap_or_default();
            let detail = match last_claim {
                Some(claim) => format!("{claim}{who}; {} due", counted(stats.due, "row")),
                None => "nothing due, no claims recorded".into(),
            };
            check("worker", Level::Ok, detail, None)
        }
    }
}

fn backlog_check(health: &Health, args: &Args) -> Check {
    let stats = &health.stats;
    // Rows due later (a paced replay, retries backing off) are waiting their turn.
    let later = match (stats.scheduled, stats.last_scheduled_at) {
        (0, _) | (_, None) => String::new(),
        (n, Some(last)) => format!(
            "; {} due later, the last in {}",
            counted(n, "row"),
            time::duration((last - stats.at).max(0.0))
        ),
    };
    let Some(oldest) = stats.oldest_due_at else {
        return check(
            "backlog",
            Level::Ok,
            format!("nothing due now{later}"),
            None,
        );
    };
    let waited = (stats.at - oldest).max(0.0);
    let detail = format!(
        "{} due, the oldest waiting {}{later}",
        counted(stats.due, "row"),
        time::duration(waited)
    );
    if waited > args.stall_seconds {
        check(
            "backlog",
            Level::Warn,
            detail,
            Some("the worker falls behind or is stalled; see TSG-03 §2"),
        )
    } else {
        check("backlog", Level::Ok, detail, None)
    }
}

fn dlq_check(health: &Health) -> Check {
    let stats = &health.stats;
    if stats.dlq_entries == 0 {
        return check("dlq", Level::Ok, "empty", None);
    }
    let oldest = stats
        .oldest_dlq_at
        .map(|at| format!(", the oldest there {}", time::duration(stats.at - at)))
        .unwrap_or_default();
    check(
        "dlq",
        Level::Warn,
        format!("{}{oldest}", counted(stats.dlq_entries, "entry")),
        Some("`unsctl dlq triage` says what each one needs (TSG-02 §3)"),
    )
}

/// Provider call p99 by channel, from the events, against the lease.
fn calls_check(health: &Health, args: &Args) -> Check {
    let lease = health.lease_seconds.unwrap_or(args.lease_seconds);
    if health.calls.is_empty() {
        return check(
            "provider calls",
            Level::Ok,
            format!("none in the last {}", time::duration(health.window_seconds)),
            None,
        );
    }
    let parts: Vec<String> = health
        .calls
        .iter()
        .map(|c| {
            format!(
                "{} p99 {} over {} ({:.0}% of the {} lease)",
                c.channel,
                time::duration(c.p99_seconds),
                counted(c.calls as i64, "call"),
                c.p99_seconds / lease * 100.0,
                time::duration(lease)
            )
        })
        .collect();
    let slow = health.calls.iter().any(|c| c.p99_seconds > lease / 2.0);
    if slow {
        check(
            "provider calls",
            Level::Warn,
            parts.join("; "),
            Some(
                "calls past half the lease are close to losing it: find the slow provider (TSG-02 §5)",
            ),
        )
    } else {
        check("provider calls", Level::Ok, parts.join("; "), None)
    }
}

/// Lease losses: still happening only with one (or a reclaim) in the last few minutes,
/// however many the longer window counts, and the last of each named with how long ago.
fn lease_check(health: &Health, args: &Args) -> Check {
    let stillness = crate::pulse::Stillness::of(
        health.last_lease_lost,
        health.last_reclaim,
        health.stats.at,
        args.quiet_after,
    );
    let ago = |at: Option<f64>| match at {
        Some(at) => format!(
            "{} ({} ago)",
            crate::render::time::rfc3339(at),
            time::duration((health.stats.at - at).max(0.0))
        ),
        None => "none recorded".into(),
    };
    let detail = format!(
        "{} and {} in {} in the last {}{}; last lease loss {}, last reclaim {}",
        counted(health.lease_lost, "LEASE_LOST"),
        counted(health.reclaims, "reclaim"),
        counted(health.claims, "claim"),
        time::duration(health.window_seconds),
        if health.claims > 0 {
            format!(
                " ({:.1}%)",
                health.lease_lost as f64 / health.claims as f64 * 100.0
            )
        } else {
            String::new()
        },
        ago(health.last_lease_lost),
        ago(health.last_reclaim),
    );
    if stillness.still_happening {
        check(
            "lease losses",
            Level::Warn,
            format!("still happening: {detail}"),
            Some(
                "each one may have sent a duplicate: who got one, `unsctl reconcile --since 1h` (TSG-02 §1); the DLQ, `unsctl dlq triage` (TSG-02 §3)",
            ),
        )
    } else if health.lease_lost > 0 {
        check(
            "lease losses",
            Level::Ok,
            format!(
                "not happening now (none in the last {}): {detail}",
                time::duration(args.quiet_after)
            ),
            Some("who got duplicates while it lasted: `unsctl reconcile --since 1h` (TSG-02 §1)"),
        )
    } else {
        check("lease losses", Level::Ok, detail, None)
    }
}

/// What a store's events show in use: the lease, and the relay of the newest email.
#[derive(Debug, Default, Clone)]
struct InUse {
    lease: Option<f64>,
    relay: Option<String>,
}

/// The checks of one store: the API and the file it names, then what its numbers say.
/// The store's checks, and what its events show in use.
fn store_checks(named: &Named, args: &Args, window: f64) -> (Vec<Check>, InUse) {
    let mut checks = Vec::new();
    let mut health = None;
    if let Some((url, key)) = &named.api {
        let (api, read) = api_check(url, key.clone(), window);
        checks.extend(api);
        health = read;
    }
    if let Some(path) = &named.db {
        match backend::db_backend(path.clone()) {
            Backend::Postgres(target) => {
                let (check, store) = database_check(&target);
                checks.push(check);
                if health.is_none() {
                    health = store.and_then(|store| store.health(window, None).ok());
                }
            }
            _ => {
                checks.push(store_check(path));
                if health.is_none() {
                    health = DirectStore::open_read_only(path)
                        .and_then(|store| store.health(window, None))
                        .ok();
                }
            }
        }
    }
    match &health {
        Some(health) => {
            checks.push(worker_check(health, args));
            checks.push(backlog_check(health, args));
            checks.push(dlq_check(health));
            checks.push(calls_check(health, args));
            checks.push(lease_check(health, args));
        }
        None => {
            for name in ["worker", "backlog", "dlq", "provider calls", "lease losses"] {
                checks.push(check(name, Level::Skip, "no readable store", None));
            }
        }
    }
    let in_use = InUse {
        lease: health.as_ref().and_then(|h| h.lease_seconds),
        relay: health.and_then(|h| h.smtp_relay),
    };
    (checks, in_use)
}

fn lines(checks: &[Check], out: &Output, indent: &str) -> Vec<String> {
    checks
        .iter()
        .flat_map(|c| {
            let level = match c.level {
                Level::Ok => out.green("ok  "),
                Level::Skip => out.dim("skip"),
                Level::Warn => out.yellow("warn"),
                Level::Fail => out.red("fail"),
            };
            let hang = indent.len() + 21;
            let mut lines = crate::render::output::wrapped(
                &format!("{indent}{level}  {:<14} {}", c.name, out.clean(&c.detail)),
                out,
                hang,
            );
            if let Some(hint) = &c.hint {
                lines.extend(crate::render::output::wrapped(
                    &format!("{indent}      {:<14} hint: {hint}", ""),
                    out,
                    hang + 6,
                ));
            }
            lines
        })
        .collect()
}

fn failed(checks: &[Check]) -> CliResult {
    let failed = checks.iter().filter(|c| c.level == Level::Fail).count();
    if failed > 0 {
        return Err(CliError::error(format!(
            "{failed} check{} failed",
            if failed == 1 { "" } else { "s" }
        )));
    }
    Ok(())
}

/// `doctor`: one context's checks, a JSON array in their order.
#[derive(Serialize)]
#[serde(transparent)]
struct Checks<'a>(&'a [Check]);

impl View for Checks<'_> {
    fn show(&self, out: &Output) -> std::io::Result<()> {
        print(&lines(self.0, out, "").join("\n"))
    }
}

/// `doctor --all-contexts`: each context's checks in the shape one context's doctor
/// prints, the relay's among them.
#[derive(Serialize)]
struct Fleet<'a> {
    contexts: Vec<ContextChecks<'a>>,
}

#[derive(Serialize)]
struct ContextChecks<'a> {
    context: &'a str,
    store: &'a str,
    checks: &'a [Check],
}

impl View for Fleet<'_> {
    const SORTED: bool = true;

    fn show(&self, out: &Output) -> std::io::Result<()> {
        let mut text = Vec::new();
        for context in &self.contexts {
            text.push(format!(
                "{} ({})",
                out.bold(&format!("context {}", out.clean(context.context))),
                out.clean(context.store)
            ));
            text.extend(lines(context.checks, out, "  "));
        }
        print(&text.join("\n"))
    }
}

pub fn run(global: &Invocation, args: Args) -> CliResult {
    let out: Output = global.output();
    crate::runtime::adapters::init_tls();
    let window = (args.interval_minutes.max(1) * 60) as f64;
    if global.all_contexts {
        return run_fleet(global, &args, window, &out);
    }
    let named = backend::named(global)?;
    let (mut checks, in_use) = store_checks(&named, &args, window);
    checks.push(smtp_check(&args, &in_use));
    out.emit(&Checks(&checks))?;
    failed(&checks)
}

/// `doctor --all-contexts`: every context's checks, concurrently, then the relay once.
fn run_fleet(global: &Invocation, args: &Args, window: f64, out: &Output) -> CliResult {
    let config = backend::required_config()?;
    // The relay is this machine's: probed once, judged against each context's lease.
    let probe = probe_relay(args);
    let probe = probe.as_ref();
    let per_context: Vec<(String, String, Vec<Check>)> = std::thread::scope(|scope| {
        let running: Vec<_> = config
            .contexts
            .iter()
            .map(|context| {
                let config = &config;
                scope.spawn(move || {
                    let (mut checks, in_use) = match global.context(config, &context.name) {
                        Ok(resolved) => store_checks(&Named::from(resolved), args, window),
                        Err(err) => (
                            vec![check(
                                "context",
                                Level::Fail,
                                err.message.clone(),
                                err.hints.first().map(String::as_str),
                            )],
                            InUse::default(),
                        ),
                    };
                    checks.push(match probe {
                        Some(probe) => relay_check(Some(probe), args, in_use.lease),
                        None => smtp_check(args, &in_use),
                    });
                    (context.name.clone(), context.target(), checks)
                })
            })
            .collect();
        running
            .into_iter()
            .map(|handle| {
                handle.join().unwrap_or_else(|_| {
                    (
                        "?".into(),
                        String::new(),
                        vec![check(
                            "context",
                            Level::Fail,
                            "the checks failed unexpectedly",
                            None,
                        )],
                    )
                })
            })
            .collect()
    });
    out.emit(&Fleet {
        contexts: per_context
            .iter()
            .map(|(name, target, checks)| ContextChecks {
                context: name,
                store: target,
                checks,
            })
            .collect(),
    })?;
    let unhealthy: Vec<&str> = per_context
        .iter()
        .filter(|(_, _, checks)| checks.iter().any(|c| c.level == Level::Fail))
        .map(|(name, _, _)| name.as_str())
        .collect();
    if !unhealthy.is_empty() {
        return Err(CliError::error(format!(
            "{} of {} contexts failed a check: {}",
            unhealthy.len(),
            per_context.len(),
            unhealthy.join(", ")
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_journal_mode_is_read_from_the_file_not_the_snapshot() {
        let dir = tempfile::tempdir().expect("dir");
        let wal = dir.path().join("wal.db");
        let conn = rusqlite::Connection::open(&wal).expect("open");
        conn.pragma_update(None, "journal_mode", "WAL")
            .expect("wal");
        conn.execute("CREATE TABLE t (x)", []).expect("table");
        drop(conn);
        assert_eq!(journal_in_header(&wal), Some("wal"));
        // Read as an immutable snapshot, SQLite itself says "delete".
        let uri = format!("file:{}?immutable=1", wal.display());
        let snapshot = rusqlite::Connection::open_with_flags(
            &uri,
            rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY | rusqlite::OpenFlags::SQLITE_OPEN_URI,
        )
        .expect("snapshot");
        let said: String = snapshot
            .query_row("PRAGMA journal_mode", [], |r| r.get(0))
            .expect("pragma");
        assert_ne!(said, "wal", "why the header is read");
        let rollback = dir.path().join("rollback.db");
        let conn = rusqlite::Connection::open(&rollback).expect("open");
        conn.execute("CREATE TABLE t (x)", []).expect("table");
        drop(conn);
        assert_eq!(journal_in_header(&rollback), Some("delete"));
        std::fs::write(dir.path().join("text"), "not a store at all").expect("text");
        assert_eq!(journal_in_header(&dir.path().join("text")), None);
    }
}
