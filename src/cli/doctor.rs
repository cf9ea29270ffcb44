//! `unsctl doctor`: the checks the runbook's mitigation section asks for, one line each.

use super::error::{CliError, CliResult};
use super::{GlobalArgs, backend};
use crate::clock::{Clock, SystemClock};
use crate::render::output::{Output, print, print_json};
use crate::runtime::adapters::email::StartTls;
use crate::runtime::schema::{self, OpenMode};
use crate::store::Store;
use crate::store::http::HttpStore;
use crate::store::sqlite::SqliteStore;
use lettre::transport::smtp::authentication::{Credentials, Mechanism};
use lettre::transport::smtp::client::{SmtpConnection, TlsParameters};
use lettre::transport::smtp::extension::ClientId;
use serde::Serialize;
use std::collections::BTreeSet;
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
    #[arg(long, env = "UNS_SMTP_STARTTLS", default_value = "never")]
    pub smtp_starttls: String,
    /// SMTP login user (password from UNS_SMTP_PASSWORD)
    #[arg(long, env = "UNS_SMTP_USER")]
    pub smtp_user: Option<String>,
    /// The workers' lease, to judge the relay's latency against
    #[arg(long, env = "UNS_LEASE_SECONDS", default_value_t = 60.0)]
    pub lease_seconds: f64,
    /// How far back to count the workers that claimed rows, in minutes
    #[arg(long, default_value_t = 15)]
    pub interval_minutes: u64,
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

fn store_check(path: &PathBuf) -> Check {
    let conn = match schema::open(path, OpenMode::ReadOnly) {
        Ok(conn) => conn,
        Err(err) => {
            return check(
                "store",
                Level::Fail,
                err.to_string(),
                Some("point --db or UNS_DB_FILE at the runtime's store"),
            );
        }
    };
    let journal: String = conn
        .query_row("PRAGMA journal_mode", [], |r| r.get(0))
        .unwrap_or_default();
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

fn api_check(url: &str) -> Vec<Check> {
    let key = env("UNS_API_KEY");
    let health = reqwest::blocking::Client::builder()
        .timeout(Duration::from_secs(5))
        .build()
        .and_then(|client| {
            client
                .get(format!("{}/healthz", url.trim_end_matches('/')))
                .send()
        });
    match health {
        Ok(response) if response.status().is_success() => {}
        Ok(response) => {
            return vec![check(
                "api",
                Level::Fail,
                format!("{url}/healthz answered {}", response.status()),
                Some("the server is up but its store is not"),
            )];
        }
        Err(err) => {
            return vec![check(
                "api",
                Level::Fail,
                format!("cannot reach {url}: {err}"),
                Some("is `unsctl runtime serve` running there?"),
            )];
        }
    }
    let reachable = check("api", Level::Ok, format!("{url} reachable"), None);
    let authorized = match HttpStore::new(url, key.clone())
        .and_then(|store| store.dlq_page(&Default::default(), None, 1, false))
    {
        Ok(_) => check("api key", Level::Ok, "accepted", None),
        Err(crate::store::StoreError::Auth(_)) if key.is_none() => check(
            "api key",
            Level::Fail,
            "UNS_API_KEY is not set",
            Some("export UNS_API_KEY with the server's key"),
        ),
        Err(crate::store::StoreError::Auth(_)) => check(
            "api key",
            Level::Fail,
            "refused (401)",
            Some("UNS_API_KEY does not match the key the server was started with"),
        ),
        Err(err) => check("api key", Level::Fail, err.to_string(), None),
    };
    vec![reachable, authorized]
}

fn smtp_check(args: &Args) -> Check {
    let Some(relay) = &args.smtp_host else {
        return check("smtp relay", Level::Skip, "UNS_SMTP_HOST is not set", None);
    };
    let started = Instant::now();
    let timeout = Some(Duration::from_secs_f64(args.lease_seconds.clamp(1.0, 60.0)));
    let hello = ClientId::Domain("uns.local".into());
    let measured = (|| -> Result<Vec<&'static str>, lettre::transport::smtp::Error> {
        let mut steps = vec!["connect", "EHLO"];
        let mut conn = SmtpConnection::connect(relay.as_str(), timeout, &hello, None, None)?;
        let starttls = match args.smtp_starttls.to_ascii_lowercase().as_str() {
            "required" | "on" => StartTls::Required,
            "opportunistic" | "auto" => StartTls::Opportunistic,
            _ => StartTls::Never,
        };
        if starttls == StartTls::Required
            || (starttls == StartTls::Opportunistic && conn.can_starttls())
        {
            let host = relay.rsplit_once(':').map_or(relay.as_str(), |(h, _)| h);
            conn.starttls(&TlsParameters::new(host.to_string())?, &hello)?;
            steps.push("STARTTLS");
        }
        if let Some(user) = &args.smtp_user {
            let password = env("UNS_SMTP_PASSWORD").unwrap_or_default();
            conn.auth(
                &[Mechanism::Plain, Mechanism::Login],
                &Credentials::new(user.clone(), password),
            )?;
            steps.push("login");
        }
        let _ = conn.quit();
        Ok(steps)
    })();
    let elapsed = started.elapsed().as_secs_f64();
    let share = elapsed / args.lease_seconds;
    match measured {
        Err(err) => check(
            "smtp relay",
            Level::Fail,
            format!("{relay}: {err}"),
            Some("the worker cannot send email through this relay"),
        ),
        Ok(steps) => {
            let detail = format!(
                "{relay}: {} took {:.0} ms, {:.1}% of the {} s lease",
                steps.join(" + "),
                elapsed * 1e3,
                share * 100.0,
                args.lease_seconds
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

fn worker_check(store: &dyn Store, minutes: u64) -> Check {
    let since = SystemClock.now() - (minutes * 60) as f64;
    let events = match store.events(&crate::store::EventQuery {
        kinds: vec![crate::model::Kind::AttemptStarted],
        limit: 10_000,
        ..Default::default()
    }) {
        Ok(events) => events.events,
        Err(err) => return check("workers", Level::Fail, err.to_string(), None),
    };
    let workers: BTreeSet<String> = events
        .iter()
        .filter(|e| e.at >= since)
        .filter_map(|e| {
            serde_json::from_str::<serde_json::Value>(e.payload.get())
                .ok()
                .and_then(|p| p["worker_id"].as_str().map(str::to_string))
        })
        .collect();
    let names: Vec<&str> = workers.iter().map(String::as_str).collect();
    match workers.len() {
        0 => check(
            "workers",
            Level::Ok,
            format!("no claims in the last {minutes} min"),
            None,
        ),
        1 => check(
            "workers",
            Level::Ok,
            format!(
                "one worker claimed rows in the last {minutes} min ({})",
                names[0]
            ),
            None,
        ),
        n => check(
            "workers",
            Level::Warn,
            format!(
                "{n} worker processes claimed rows in the last {minutes} min: {}",
                names.join(", ")
            ),
            Some(
                "run one worker per SQLite store; `unsctl runtime serve` already runs it in-process",
            ),
        ),
    }
}

fn lease_check(store: &dyn Store) -> Check {
    let now = SystemClock.now();
    let events = match store.events(&crate::store::EventQuery {
        kinds: vec![crate::model::Kind::LeaseLost],
        limit: 10_000,
        ..Default::default()
    }) {
        Ok(events) => events.events,
        Err(err) => return check("lease health", Level::Fail, err.to_string(), None),
    };
    let hour = events.iter().filter(|e| e.at >= now - 3600.0).count();
    let day = events.iter().filter(|e| e.at >= now - 86_400.0).count();
    let detail = format!("LEASE_LOST: {hour} in the last hour, {day} in the last day");
    if hour > 0 {
        check(
            "lease health",
            Level::Warn,
            detail,
            Some("see TSG-02: `unsctl dlq triage` says what each affected entry needs"),
        )
    } else {
        check("lease health", Level::Ok, detail, None)
    }
}

fn db_path(global: &GlobalArgs) -> Option<PathBuf> {
    global
        .db
        .clone()
        .or_else(|| env("UNS_DB_FILE").map(PathBuf::from))
}

fn api_url(global: &GlobalArgs) -> Option<String> {
    global.api.clone().or_else(|| env("UNS_BASE_URL"))
}

pub fn run(global: &GlobalArgs, args: Args) -> CliResult {
    let out: Output = global.output();
    crate::runtime::adapters::init_tls();
    let (db, url) = (db_path(global), api_url(global));
    if db.is_none() && url.is_none() {
        return Err(backend::resolve(global)
            .err()
            .unwrap_or_else(|| CliError::usage("no store named")));
    }
    let mut checks = Vec::new();
    if let Some(path) = &db {
        checks.push(store_check(path));
    }
    if let Some(url) = &url {
        checks.extend(api_check(url));
    }
    checks.push(smtp_check(&args));
    let store: Option<Box<dyn Store>> = match (&db, &url) {
        (Some(path), _) => SqliteStore::open_read_only(path)
            .ok()
            .map(|s| Box::new(s) as Box<dyn Store>),
        (None, Some(url)) => HttpStore::new(url, env("UNS_API_KEY"))
            .ok()
            .map(|s| Box::new(s) as Box<dyn Store>),
        _ => None,
    };
    match store {
        Some(store) => {
            checks.push(worker_check(store.as_ref(), args.interval_minutes));
            checks.push(lease_check(store.as_ref()));
        }
        None => {
            checks.push(check("workers", Level::Skip, "no readable store", None));
            checks.push(check(
                "lease health",
                Level::Skip,
                "no readable store",
                None,
            ));
        }
    }
    if out.json() {
        print_json(&checks)?;
    } else {
        let lines: Vec<String> = checks
            .iter()
            .flat_map(|c| {
                let level = match c.level {
                    Level::Ok => out.green("ok  "),
                    Level::Skip => out.dim("skip"),
                    Level::Warn => out.yellow("warn"),
                    Level::Fail => out.red("fail"),
                };
                let mut lines = vec![format!("{level}  {:<13} {}", c.name, c.detail)];
                if let Some(hint) = &c.hint {
                    lines.push(format!("      {:<13} hint: {hint}", ""));
                }
                lines
            })
            .collect();
        print(&lines.join("\n"))?;
    }
    let failed = checks.iter().filter(|c| c.level == Level::Fail).count();
    if failed > 0 {
        return Err(CliError::error(format!(
            "{failed} check{} failed",
            if failed == 1 { "" } else { "s" }
        )));
    }
    Ok(())
}
