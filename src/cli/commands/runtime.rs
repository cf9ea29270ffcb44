//! `unsctl runtime serve|submit|worker`: the bundled runtime.

use crate::api::SubmitRequest;
use crate::cli::args::init_logging;
use crate::cli::backend::Invocation;
use crate::cli::error::{CliError, CliResult, ExitKind};
use crate::cli::{backend, backend::Backend};
use crate::clock::{Clock, SystemClock};
use crate::db::pg::PgConn;
use crate::db::{Db, Place};
use crate::model::Channel;
use crate::render::output::{Output, View, print, status};
use crate::runtime::adapters::Adapter;
use crate::runtime::adapters::email::{EmailAdapter, EmailConfig, StartTls};
use crate::runtime::adapters::webhook::{Provider, WebhookAdapter};
use crate::runtime::engine::{self, Backoff};
use crate::runtime::schema::{self, OpenMode};
use crate::runtime::worker::{self, Adapters, Worker, WorkerConfig};
use crate::server::{self, Keys, ServeError, ServerConfig};
use crate::store::StoreError;
use anyhow::Context;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

#[derive(Debug, clap::Subcommand)]
pub enum Command {
    Serve(Box<ServeArgs>),
    Submit(SubmitArgs),
    Worker(WorkerArgs),
}

/// Where the providers are. Secrets come from the environment only.
#[derive(Debug, Clone, clap::Args)]
pub struct ProviderArgs {
    /// SMTP relay as host:port
    #[arg(long, env = "UNS_SMTP_HOST", value_name = "HOST:PORT")]
    pub smtp_host: Option<String>,
    /// Envelope sender and From address
    #[arg(long, env = "UNS_SMTP_FROM", default_value = "uns@uns.local")]
    pub smtp_from: String,
    /// STARTTLS: never, opportunistic or required
    #[arg(long, env = "UNS_SMTP_STARTTLS", default_value = "never", value_parser = crate::cli::values::parse_starttls)]
    pub smtp_starttls: StartTls,
    /// Trust this CA (PEM) for STARTTLS instead of the public roots
    #[arg(long, env = "UNS_SMTP_CA_FILE", value_name = "PATH")]
    pub smtp_ca_file: Option<PathBuf>,
    /// SMTP login user (password from UNS_SMTP_PASSWORD), sent only over STARTTLS or to a
    /// relay on this machine (localhost, a loopback address)
    #[arg(long, env = "UNS_SMTP_USER")]
    pub smtp_user: Option<String>,
    /// Slack incoming-webhook URL
    #[arg(long, env = "UNS_SLACK_WEBHOOK_URL", hide_env_values = true)]
    pub slack_webhook_url: Option<String>,
    /// PagerDuty Events API v2 URL
    #[arg(
        long,
        env = "UNS_PAGERDUTY_EVENTS_URL",
        default_value = "https://events.pagerduty.com/v2/enqueue"
    )]
    pub pagerduty_url: String,
    /// PagerDuty routing key (enables PAGERDUTY)
    #[arg(long, env = "UNS_PAGERDUTY_ROUTING_KEY", hide_env_values = true)]
    pub pagerduty_routing_key: Option<String>,
}

/// How the worker runs.
#[derive(Debug, Clone, clap::Args)]
pub struct WorkerTuning {
    /// Seconds a claim holds its row
    #[arg(long, env = "UNS_LEASE_SECONDS", default_value_t = 60.0)]
    pub lease_seconds: f64,
    /// Rows delivered at once
    #[arg(long, default_value_t = 4)]
    pub concurrency: usize,
    /// First retry delay in seconds (doubles per attempt)
    #[arg(long, default_value_t = 5.0)]
    pub backoff_base: f64,
    /// Longest retry delay in seconds
    #[arg(long, default_value_t = 300.0)]
    pub backoff_max: f64,
    /// Shortest timeout any socket step gets, in seconds
    #[arg(long, default_value_t = 1.0)]
    pub min_io_timeout: f64,
    /// Idle poll interval in milliseconds
    #[arg(long, default_value_t = 200)]
    pub poll_ms: u64,
    /// Name recorded in ATTEMPT_STARTED (default host:pid:random)
    #[arg(long)]
    pub worker_id: Option<String>,
    /// Runs this process's clock this many seconds ahead of the system's (negative:
    /// behind), to show what skew does: on PostgreSQL nothing, its leases going by the
    /// database's clock
    #[arg(long, hide = true, value_name = "SECONDS", allow_hyphen_values = true)]
    pub clock_offset: Option<f64>,
}

impl WorkerTuning {
    /// The clock this process's transitions read (the database's on PostgreSQL).
    pub fn clock(&self) -> CliResult<Arc<dyn Clock>> {
        match self.clock_offset {
            None => Ok(Arc::new(SystemClock)),
            Some(offset) if offset.is_finite() && offset.abs() <= 86_400.0 * 365.0 => {
                Ok(Arc::new(crate::clock::OffsetClock(offset)))
            }
            Some(_) => Err(CliError::usage(
                "--clock-offset must be a number of seconds within a year",
            )),
        }
    }

    pub fn config(&self) -> CliResult<WorkerConfig> {
        if !(self.lease_seconds > 0.0 && self.lease_seconds.is_finite()) {
            return Err(CliError::usage("--lease-seconds must be a positive number"));
        }
        if self.concurrency == 0 || self.concurrency > 256 {
            return Err(CliError::usage("--concurrency must be between 1 and 256"));
        }
        // A NaN would pass every comparison below as false: refused, never clamped.
        for (flag, value) in [
            ("--backoff-base", self.backoff_base),
            ("--backoff-max", self.backoff_max),
            ("--min-io-timeout", self.min_io_timeout),
        ] {
            if !value.is_finite() || value < 0.0 {
                return Err(CliError::usage(format!(
                    "{flag} must be a number of seconds, 0 or more"
                )));
            }
        }
        Ok(WorkerConfig {
            worker_id: self
                .worker_id
                .clone()
                .unwrap_or_else(worker::default_worker_id),
            lease_seconds: self.lease_seconds,
            concurrency: self.concurrency,
            poll_interval: Duration::from_millis(self.poll_ms.max(1)),
            backoff: Backoff {
                base_seconds: self.backoff_base.max(0.0),
                max_seconds: self.backoff_max.max(0.0),
            },
            min_io_timeout: Duration::from_secs_f64(self.min_io_timeout.clamp(0.01, 600.0)),
        })
    }
}

/// Builds the adapters the arguments configure. Must run outside any tokio runtime.
pub fn adapters(providers: &ProviderArgs) -> CliResult<Adapters> {
    let mut adapters = Adapters::new();
    if let Some(relay) = &providers.smtp_host {
        let mut config = EmailConfig::new(relay.clone());
        config.from = providers.smtp_from.clone();
        config.starttls = providers.smtp_starttls;
        if let Some(path) = &providers.smtp_ca_file {
            let pem = std::fs::read(path)
                .with_context(|| format!("--smtp-ca-file {}: cannot read it", path.display()))
                .map_err(|err| CliError::of(ExitKind::Usage, &err))?;
            crate::runtime::adapters::email::check_ca(&pem).map_err(|why| {
                CliError::usage(format!("--smtp-ca-file {}: {why}", path.display()))
            })?;
            config.ca_pem = Some(pem);
        }
        if let Some(user) = &providers.smtp_user {
            let password = std::env::var("UNS_SMTP_PASSWORD").unwrap_or_default();
            config.credentials = Some((user.clone(), password));
        }
        adapters.insert(
            Channel::Email,
            Arc::new(EmailAdapter::new(config)) as Arc<dyn Adapter>,
        );
    }
    let webhook = |provider| {
        WebhookAdapter::new(provider)
            .map(|a| Arc::new(a) as Arc<dyn Adapter>)
            .context("cannot build the HTTP client")
            .map_err(CliError::from)
    };
    if let Some(url) = &providers.slack_webhook_url {
        adapters.insert(
            Channel::Slack,
            webhook(Provider::Slack {
                webhook_url: url.clone(),
            })?,
        );
    }
    if let Some(key) = &providers.pagerduty_routing_key {
        adapters.insert(
            Channel::Pagerduty,
            webhook(Provider::PagerDuty {
                events_url: providers.pagerduty_url.clone(),
                routing_key: key.clone(),
            })?,
        );
    }
    Ok(adapters)
}

fn configured(adapters: &Adapters) -> String {
    let names: Vec<&str> = adapters.keys().map(|c| c.as_str()).collect();
    if names.is_empty() {
        "none (due rows are left untouched)".into()
    } else {
        names.join(", ")
    }
}

/// Serve the runtime's HTTP API with the worker in-process
///
/// Keys are at least 16 characters, without whitespace. A request body is at most 64 KiB
/// and must be a JSON object; an id in a route at most 256 bytes; past a limit the answer
/// is a JSON error (400, 413), and slow or idle connections are closed by the timeouts
/// below.
///
/// Example: UNS_API_KEY=$(openssl rand -hex 16) unsctl runtime serve --db uns.db --listen 127.0.0.1:8080
#[derive(Debug, clap::Args)]
pub struct ServeArgs {
    /// Address to listen on
    #[arg(long, default_value = "127.0.0.1:8080")]
    pub listen: SocketAddr,
    /// Serve without a key (only on a loopback address)
    #[arg(long)]
    pub insecure_no_auth: bool,
    /// More keys, one `name key` line each; actions are recorded under the key's name
    /// (UNS_API_KEY is named `default`). Keys need 16 characters and no whitespace; a
    /// file others may read is warned of (make it 0600, or 0640 when root owns it).
    #[arg(long, env = "UNS_API_KEYS_FILE", value_name = "PATH")]
    pub api_keys_file: Option<PathBuf>,
    /// Serve the API only; claim nothing
    #[arg(long)]
    pub no_worker: bool,
    /// Attempt budget per cycle for new notifications
    #[arg(long, default_value_t = 3)]
    pub max_attempts: i64,
    /// Connections open at once. Past it, a new connection takes the place of the oldest
    /// one never answered anything but a refusal (silent, or without a valid key), so a
    /// pile of those cannot shut out a client with a key; only when every open
    /// connection has been served is a new one answered 503 and closed
    #[arg(long, default_value_t = 512)]
    pub max_connections: usize,
    /// Seconds a client has to send a request's headers; also how long a keep-alive
    /// connection may sit idle between requests
    #[arg(long, default_value_t = 10.0)]
    pub header_timeout: f64,
    /// Seconds a connection may go without a byte moving either way before it is closed
    #[arg(long, default_value_t = 60.0)]
    pub idle_timeout: f64,
    /// Seconds a request may take, body included, before it is answered 408
    #[arg(long, default_value_t = 30.0)]
    pub request_timeout: f64,
    #[command(flatten)]
    pub providers: ProviderArgs,
    #[command(flatten)]
    pub worker: WorkerTuning,
    /// What `POST .../verify` reads
    #[command(flatten)]
    pub verify: crate::cli::args::SourceArgs,
}

/// The store the runtime keeps: a file, or a PostgreSQL database.
fn db_place(global: &Invocation) -> CliResult<Place> {
    match backend::resolve(global)? {
        Backend::Sqlite(path) => Ok(Place::File(path)),
        Backend::Postgres(target) => Ok(Place::Postgres(target)),
        Backend::Http { .. } => Err(CliError::usage(
            "the runtime needs --db PATH or --db postgres://..., not --api",
        )),
    }
}

fn serve(global: &Invocation, args: ServeArgs) -> CliResult {
    init_logging(global);
    let db = db_place(global)?;
    let api_key = std::env::var("UNS_API_KEY").ok();
    let keys = if args.insecure_no_auth {
        if api_key.is_some() || args.api_keys_file.is_some() {
            return Err(CliError::usage(
                "--insecure-no-auth with a key configured: drop the flag, or unset UNS_API_KEY and --api-keys-file",
            ));
        }
        None
    } else {
        let keys = Keys::load(api_key.as_deref(), args.api_keys_file.as_deref())
            .map_err(|err| CliError::usage(err.to_string()))?;
        if let Some(exposed) = args
            .api_keys_file
            .as_deref()
            .and_then(crate::server::keys::exposed)
        {
            tracing::warn!("{exposed}");
        }
        Some(keys)
    };
    let worker = if args.no_worker {
        None
    } else {
        let adapters = adapters(&args.providers)?;
        tracing::info!(channels = %configured(&adapters), "worker adapters");
        Some((args.worker.config()?, adapters))
    };
    let config = ServerConfig {
        db,
        // The server's own sender is the one its adapter records and its relay sees.
        verify: crate::verify::Sources {
            smtp_from: vec![args.providers.smtp_from.clone()],
            ..args.verify.sources()
        },
        listen: args.listen,
        keys,
        worker,
        default_max_attempts: args.max_attempts,
        metrics: None,
        limits: server::Limits {
            max_connections: args.max_connections,
            header_timeout: seconds("--header-timeout", args.header_timeout)?,
            idle_timeout: seconds("--idle-timeout", args.idle_timeout)?,
            request_timeout: seconds("--request-timeout", args.request_timeout)?,
        },
    };
    server::serve_until_signal(config, args.worker.clock()?).map_err(serve_error)?;
    Ok(())
}

fn seconds(flag: &str, value: f64) -> CliResult<Duration> {
    if value.is_finite() && value > 0.0 && value <= 86_400.0 {
        Ok(Duration::from_secs_f64(value))
    } else {
        Err(CliError::usage(format!(
            "{flag} must be a number of seconds from 0 to 86400"
        )))
    }
}

/// Why the runtime's store could not be opened, with its exit code.
fn open_failed(err: crate::runtime::writer::OpenFailed) -> CliError {
    serve_error(err.into())
}

fn serve_error(err: ServeError) -> CliError {
    match err {
        ServeError::Store(store) => StoreError::from(store).into(),
        ServeError::Postgres(open) => StoreError::from(open).into(),
        ServeError::InsecureNotLoopback(_) => CliError::usage(err.to_string()),
        other => CliError::error(other.to_string()),
    }
}

/// Run a worker process against a store until SIGINT or SIGTERM
///
/// Example: UNS_SMTP_HOST=127.0.0.1:2525 unsctl runtime worker --db uns.db
#[derive(Debug, clap::Args)]
pub struct WorkerArgs {
    #[command(flatten)]
    pub providers: ProviderArgs,
    #[command(flatten)]
    pub worker: WorkerTuning,
}

fn run_worker(global: &Invocation, args: WorkerArgs) -> CliResult {
    init_logging(global);
    let place = db_place(global)?;
    let db = crate::runtime::writer::Database::open_at(&place).map_err(open_failed)?;
    let adapters = adapters(&args.providers)?;
    let config = args.worker.config()?;
    let stop = Arc::new(AtomicBool::new(false));
    // Watched before the worker starts and before it says so (see StopSignals).
    stop_on_signal(stop.clone()).context("cannot watch for signals")?;
    tracing::info!(worker = %config.worker_id, channels = %configured(&adapters), "worker starting");
    let worker = Worker::new(db, args.worker.clock()?, adapters, config);
    for thread in worker.spawn(stop) {
        let _ = thread.join();
    }
    Ok(())
}

/// Sets `flag` on SIGINT or SIGTERM: watched when this returns, waited for on a thread
/// of its own.
fn stop_on_signal(flag: Arc<AtomicBool>) -> std::io::Result<()> {
    let mut signals = crate::interrupt::StopSignals::watch()?;
    std::thread::Builder::new()
        .name("uns-signal".into())
        .spawn(move || {
            let _ = signals.wait();
            // Stop first: nothing said about it may keep it from stopping.
            flag.store(true, std::sync::atomic::Ordering::SeqCst);
            tracing::info!("signal received: finishing in-flight calls, claiming nothing new");
            // Kept, so a second signal while the calls finish is taken, not fatal.
            while signals.wait() {}
        })?;
    Ok(())
}

/// Submit a notification (to the store directly, or through the API)
///
/// Example: unsctl --db uns.db runtime submit --channel email --recipient ops@example.com --subject "Disk full"
#[derive(Debug, clap::Args)]
pub struct SubmitArgs {
    /// Channels to send on (repeat, or comma-separated): email, slack, pagerduty
    #[arg(long = "channel", value_delimiter = ',', required = true, value_parser = crate::cli::values::channel())]
    pub channels: Vec<Channel>,
    /// Email address (needed for EMAIL)
    #[arg(long)]
    pub recipient: Option<String>,
    #[arg(long)]
    pub subject: Option<String>,
    #[arg(long)]
    pub body: Option<String>,
    /// Resubmitting with the same key returns the first notification
    #[arg(long)]
    pub idempotency_key: Option<String>,
    /// Attempt budget per cycle
    #[arg(long, default_value_t = 3)]
    pub max_attempts: i64,
}

fn submit(global: &Invocation, args: SubmitArgs) -> CliResult {
    let request = SubmitRequest {
        channels: args.channels.iter().copied().collect(),
        recipient: args.recipient,
        subject: args.subject,
        body: args.body,
        idempotency_key: args.idempotency_key,
        max_attempts: Some(args.max_attempts),
    };
    let submitted = match backend::resolve(global)? {
        Backend::Sqlite(path) => {
            let new =
                server::new_notification(&request, args.max_attempts).map_err(CliError::usage)?;
            let conn = schema::open(&path, OpenMode::Create).map_err(StoreError::from)?;
            engine::submit(&Db::Sqlite(&conn), SystemClock.now(), &new).map_err(StoreError::from)?
        }
        Backend::Postgres(target) => {
            let new =
                server::new_notification(&request, args.max_attempts).map_err(CliError::usage)?;
            let conn = PgConn::open(&target, true).map_err(StoreError::from)?;
            engine::submit(&Db::Postgres(&conn), SystemClock.now(), &new)
                .map_err(StoreError::from)?
        }
        Backend::Http { url, key, deadline } => {
            backend::http_store(&url, key, deadline)?.submit(&request)?
        }
    };
    global.output().emit(&Submission(submitted))?;
    Ok(())
}

/// What `submit` prints: the JSON answer, or the id alone on stdout (for a script's
/// `$(...)`) and what happened on stderr.
#[derive(serde::Serialize)]
#[serde(transparent)]
struct Submission(crate::api::SubmitResponse);

impl View for Submission {
    fn show(&self, out: &Output) -> std::io::Result<()> {
        // The answer may come from an API: its text never reaches a terminal raw.
        let submitted = &self.0;
        print(&out.clean(&submitted.id))?;
        let note = if submitted.created {
            "submitted"
        } else {
            "already submitted with this idempotency key"
        };
        status(&format!(
            "{note}: {} ({})",
            out.clean(&submitted.id),
            out.clean(&submitted.status)
        ));
        Ok(())
    }
}

pub fn run(global: &Invocation, command: Command) -> CliResult {
    match command {
        Command::Serve(args) => serve(global, *args),
        Command::Submit(args) => submit(global, args),
        Command::Worker(args) => run_worker(global, args),
    }
}
