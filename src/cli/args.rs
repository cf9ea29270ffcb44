//! The flags more than one command takes, in one place: the global flags, who is acting
//! and why, how a change is confirmed, which entries are selected, and where `verify`
//! looks. Commands flatten these groups; none reaches into another command for them.

use super::error::{CliError, CliResult};
use super::values;
use crate::clock::{Clock, SystemClock};
use crate::model::Channel;
use crate::render::output::{ColorChoice, Format, Output};
use crate::store::Selection;
use crate::verify::{self, Sources, relay_log::Zone};
use clap::Args;
use std::path::PathBuf;

#[derive(Debug, Clone, Args)]
pub struct GlobalArgs {
    /// Read the store directly (read-only for reads): the SQLite file at PATH, or a
    /// PostgreSQL database named postgres://USER@HOST:PORT/DB (what it leaves out from
    /// PGHOST, PGPORT, PGUSER, PGDATABASE, PGTARGETSESSIONATTRS, PGCONNECT_TIMEOUT;
    /// password from PGPASSWORD or ~/.pgpass)
    #[arg(long, global = true, value_name = "PATH|URL")]
    pub db: Option<PathBuf>,
    /// Use the runtime's HTTP API at URL (key from UNS_API_KEY)
    #[arg(long, global = true, value_name = "URL")]
    pub api: Option<String>,
    /// Use this context of the config file (else UNS_CONTEXT, else the current one)
    #[arg(long, global = true, value_name = "NAME")]
    pub context: Option<String>,
    /// Read every context of the config file at once (dlq list, dlq triage, events, doctor,
    /// reconcile)
    #[arg(long, global = true, conflicts_with_all = ["db", "api", "context"])]
    pub all_contexts: bool,
    /// Output format
    #[arg(short, long, global = true, value_enum, ignore_case = true, default_value_t = Format::Table)]
    pub output: Format,
    /// When to use colour (NO_COLOR is honoured)
    #[arg(long, global = true, value_enum, ignore_case = true, default_value_t = ColorChoice::Auto)]
    pub color: ColorChoice,
    /// The most one request to an API may take, its whole answer read (default: the
    /// context's timeout, else 60s); each read also gives up after it
    #[arg(long, global = true, env = "UNS_API_TIMEOUT", value_name = "DURATION", value_parser = values::parse_deadline)]
    pub api_timeout: Option<std::time::Duration>,
    /// Read the config file even when another user owns it (root only needs this)
    #[arg(long, global = true)]
    pub trust_config_owner: bool,
}

impl GlobalArgs {
    pub fn output(&self) -> Output {
        Output::new(self.output, self.color)
    }
}

/// Who is acting and why: recorded in every audit event.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct AuditArgs {
    /// Who is acting (default: UNS_OPERATOR, then the account name)
    #[arg(long, value_parser = crate::cli::values::parse_said)]
    pub operator: Option<String>,
    /// Why; required with --force
    #[arg(long, value_parser = crate::cli::values::parse_said)]
    pub reason: Option<String>,
    /// Incident or ticket reference
    #[arg(long, value_parser = crate::cli::values::parse_said)]
    pub ticket: Option<String>,
    /// Override a guardrail (needs --reason)
    #[arg(long)]
    pub force: bool,
}

/// How a mutation is confirmed.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct ConfirmArgs {
    /// Carry it out (without this, print what would happen and change nothing)
    #[arg(long, conflicts_with = "dry_run")]
    pub confirm: bool,
    /// Do not prompt (automation); only with --confirm
    #[arg(long, requires = "confirm")]
    pub yes: bool,
    /// Print what would happen and change nothing (the default without --confirm)
    #[arg(long)]
    pub dry_run: bool,
}

/// The selection flags shared by `dlq list`, `dlq triage`, `dlq resolve`, `replay` and
/// `events`.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct SelectArgs {
    /// Only entries with this channel (events: about it)
    #[arg(long, value_parser = values::channel())]
    pub channel: Option<Channel>,
    /// Only entries whose error, their own or any channel's, contains TEXT, in any letter
    /// case (repeat: any of them)
    #[arg(long, value_name = "TEXT", value_parser = crate::cli::values::parse_text)]
    pub error: Vec<String>,
    /// Only entries with a channel whose reply code, as triage classes it, is CODE: an
    /// enhanced status code (5.1.1), an SMTP code (550) or an HTTP status (HTTP 400);
    /// repeat: any of them
    #[arg(long, value_name = "CODE", value_parser = crate::cli::values::parse_text)]
    pub error_code: Vec<String>,
    /// Only entries dead-lettered since TIME: RFC 3339, or a duration back from now (2h, 30m, 1d)
    #[arg(long, value_name = "TIME")]
    pub since: Option<String>,
    /// Only entries dead-lettered before TIME
    #[arg(long, value_name = "TIME")]
    pub until: Option<String>,
    /// At most N entries (the first by id)
    #[arg(long, value_name = "N")]
    pub limit: Option<usize>,
    /// Leave out entries with this channel (events: about it)
    #[arg(long, value_name = "CHANNEL", value_parser = values::channel())]
    pub not_channel: Option<Channel>,
    /// Leave out entries whose error, their own or any channel's, contains TEXT, in any
    /// letter case (repeat: each is left out)
    #[arg(long, value_name = "TEXT", value_parser = crate::cli::values::parse_text)]
    pub not_error: Vec<String>,
    /// Leave out entries with a channel whose reply code is CODE (as --error-code reads
    /// it; repeat: each is left out)
    #[arg(long, value_name = "CODE", value_parser = crate::cli::values::parse_text)]
    pub not_error_code: Vec<String>,
    /// Only entries whose message's subject contains TEXT, in any letter case (repeat:
    /// any of them)
    #[arg(long, value_name = "TEXT", value_parser = crate::cli::values::parse_text)]
    pub subject: Vec<String>,
    /// Only entries whose message's recipient contains TEXT, in any letter case (repeat:
    /// any of them)
    #[arg(long, value_name = "TEXT", value_parser = crate::cli::values::parse_text)]
    pub to: Vec<String>,
    /// Leave out these entries, by id or a unique prefix of one (repeat, or separate with
    /// commas); one that matches no entry is a usage error
    #[arg(long, value_name = "ID", value_delimiter = ',', value_parser = values::parse_id)]
    pub exclude: Vec<String>,
}

/// `--since` and `--until` as instants, resolved against the clock now, so that both
/// backends see the same ones.
pub fn window(since: Option<&str>, until: Option<&str>) -> CliResult<crate::store::Window> {
    crate::session::select::window(since, until, SystemClock.now())
}

impl SelectArgs {
    /// The typed selection; times are resolved against the clock now, so both backends
    /// see the same instants.
    pub fn selection(&self) -> CliResult<Selection> {
        let parts = crate::session::select::Parts {
            channel: self.channel,
            not_channel: self.not_channel,
            error: self.error.clone(),
            not_error: self.not_error.clone(),
            error_code: self.error_code.clone(),
            not_error_code: self.not_error_code.clone(),
            subject: self.subject.clone(),
            recipient: self.to.clone(),
            since: self.since.clone(),
            until: self.until.clone(),
            exclude: self.exclude.clone(),
        };
        if self.limit == Some(0) {
            return Err(CliError::usage("--limit must be at least 1"));
        }
        parts.selection(SystemClock.now())
    }

    /// The selection over `store`, each `--exclude` prefix expanded to its id among the
    /// DLQ's entries (`dlq_only`) or every notification.
    pub fn resolved(
        &self,
        store: &dyn crate::store::Store,
        dlq_only: bool,
    ) -> CliResult<Selection> {
        crate::session::ids::with_exclusions(store, self.selection()?, dlq_only)
    }

    /// Whether any flag narrows the selection.
    pub fn narrows(&self) -> bool {
        self.channel.is_some()
            || !self.error.is_empty()
            || !self.error_code.is_empty()
            || self.since.is_some()
            || self.until.is_some()
            || self.limit.is_some()
            || self.not_channel.is_some()
            || !self.not_error.is_empty()
            || !self.not_error_code.is_empty()
            || !self.subject.is_empty()
            || !self.to.is_empty()
            || !self.exclude.is_empty()
    }
}

/// Where verify looks: the relay's log, PagerDuty's incidents, Slack's history
#[derive(Debug, Clone, clap::Args)]
pub struct SourceArgs {
    /// The relay's log, Postfix format, plain or gzip (repeat for rotated files; default:
    /// UNS_RELAY_LOG, comma-separated); read on this machine, over either backend)
    #[arg(long = "relay-log", value_name = "PATH", value_delimiter = ',')]
    pub relay_logs: Vec<PathBuf>,
    /// The zone of stamps in the relay log that carry none: local, UTC, an offset such as
    /// +02:00, or a zone such as Europe/Berlin
    #[arg(long, value_name = "ZONE", default_value = "local", value_parser = values::parse_zone)]
    pub relay_log_zone: Zone,
    /// The syslog name the relay logs under (Postfix's syslog_name; default: postfix and
    /// its postfix-* instances); repeat for several
    #[arg(long, value_name = "NAME")]
    pub relay_syslog_name: Vec<String>,
    /// The relay's host field in its log, where it is not the name the relay greets with
    /// (a container's id, a short name); repeat for several. Without it such a log proves
    /// no absence
    #[arg(long, value_name = "NAME")]
    pub relay_host: Vec<String>,
    /// How far clocks may disagree; windows are widened by it and must be that far past
    #[arg(long, value_name = "DURATION", default_value = "2m", value_parser = values::parse_span)]
    pub clock_skew: f64,
    /// The longest stretch without a relay-log line that still counts as covered: a
    /// longer one inside a window is a hole, and absence there proves nothing (1s to 24h)
    #[arg(long, value_name = "DURATION", default_value = "5m", value_parser = values::parse_some_span)]
    pub max_log_gap: f64,
    /// PagerDuty REST API (token from UNS_PAGERDUTY_API_TOKEN)
    #[arg(
        long,
        env = "UNS_PAGERDUTY_API_URL",
        default_value = verify::pagerduty::DEFAULT_API_URL
    )]
    pub pagerduty_api_url: String,
    /// Slack Web API (bot token from UNS_SLACK_BOT_TOKEN)
    #[arg(
        long,
        env = "UNS_SLACK_API_URL",
        default_value = verify::slack::DEFAULT_API_URL
    )]
    pub slack_api_url: String,
    /// The Slack channel the webhook posts to, by id (C0123456)
    #[arg(long, env = "UNS_SLACK_CHANNEL", value_name = "ID")]
    pub slack_channel: Option<String>,
    /// The webhook's bot or app id (B0123456): a message posted by anyone else is not
    /// proof
    #[arg(long, env = "UNS_SLACK_BOT_ID", value_name = "ID")]
    pub slack_bot_id: Option<String>,
    /// How long one lookup at PagerDuty or Slack may take, all its pages and retries
    /// together; what is not read by then is CANNOT_TELL (1s to 24h)
    #[arg(long, value_name = "DURATION", default_value = "60s", value_parser = values::parse_some_span)]
    pub provider_timeout: f64,
}

/// PagerDuty's REST API as the environment names it (`UNS_PAGERDUTY_API_TOKEN`, and
/// `UNS_PAGERDUTY_API_URL` or PagerDuty's own): what a replay's preview asks about the
/// incidents its triggers would merge into. None without a token.
pub fn pagerduty_api() -> Option<verify::pagerduty::Api> {
    env_value("UNS_PAGERDUTY_API_TOKEN").map(|token| verify::pagerduty::Api {
        api_url: env_value("UNS_PAGERDUTY_API_URL")
            .unwrap_or_else(|| verify::pagerduty::DEFAULT_API_URL.into()),
        token,
        timeout: verify::http::DEFAULT_TIMEOUT,
    })
}

/// The relay logs UNS_RELAY_LOG names, comma-separated.
pub fn relay_logs_from_env() -> Vec<PathBuf> {
    std::env::var_os("UNS_RELAY_LOG")
        .map(|value| {
            value
                .to_string_lossy()
                .split(',')
                .map(str::trim)
                .filter(|p| !p.is_empty())
                .map(PathBuf::from)
                .collect()
        })
        .unwrap_or_default()
}

fn env_value(name: &str) -> Option<String> {
    std::env::var(name)
        .ok()
        .map(|v| v.trim().to_string())
        .filter(|v| !v.is_empty())
}

impl SourceArgs {
    /// `--provider-timeout` as a duration.
    fn lookup_timeout(&self) -> std::time::Duration {
        std::time::Duration::from_secs_f64(self.provider_timeout.max(0.0))
    }

    /// The sources to read on this machine: the logs named, or else UNS_RELAY_LOG's.
    pub fn sources(&self) -> Sources {
        let relay_logs = if self.relay_logs.is_empty() {
            relay_logs_from_env()
        } else {
            self.relay_logs.clone()
        };
        Sources {
            relay_logs,
            zone: self.relay_log_zone.clone(),
            syslog_names: crate::verify::relay_log::SyslogNames::new(
                self.relay_syslog_name.iter().cloned(),
            ),
            relay_hosts: self
                .relay_host
                .iter()
                .map(|h| h.trim().to_string())
                .filter(|h| !h.is_empty())
                .collect(),
            smtp_from: env_value("UNS_SMTP_FROM").into_iter().collect(),
            max_log_gap: self.max_log_gap,
            pagerduty: env_value("UNS_PAGERDUTY_API_TOKEN").map(|token| verify::pagerduty::Api {
                api_url: self.pagerduty_api_url.clone(),
                token,
                timeout: self.lookup_timeout(),
            }),
            slack: match (env_value("UNS_SLACK_BOT_TOKEN"), &self.slack_channel) {
                (Some(token), Some(channel)) => Some(verify::slack::Api {
                    api_url: self.slack_api_url.clone(),
                    token,
                    channel: channel.clone(),
                    bot_id: self.slack_bot_id.clone(),
                    timeout: self.lookup_timeout(),
                }),
                _ => None,
            },
            skew: self.clock_skew,
        }
    }
}

/// The runtime's envelope sender as the relay logs it (verify, reconcile, report)
#[derive(Debug, Clone, Default, clap::Args)]
pub struct SenderArgs {
    /// The runtime's envelope sender as the relay logs it: for attempts whose start does
    /// not record it (older stores; default: UNS_SMTP_FROM), or the address a relay that
    /// rewrites senders turns it into; repeat for several. A message from any other
    /// sender is not the runtime's
    #[arg(long, value_name = "ADDRESS")]
    pub smtp_from: Vec<String>,
}

impl SenderArgs {
    /// `sources` with the senders given, in place of UNS_SMTP_FROM's.
    pub fn apply(&self, mut sources: Sources) -> Sources {
        let given: Vec<String> = self
            .smtp_from
            .iter()
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
            .collect();
        if !given.is_empty() {
            sources.smtp_from = given;
        }
        sources
    }
}

/// Logs on stderr, coloured only when stderr is a terminal and colour is on.
pub fn init_logging(global: &GlobalArgs) {
    use std::io::IsTerminal;
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    let color = crate::render::output::color_enabled(global.color, std::io::stderr().is_terminal());
    let _ = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        // A log line that cannot be written is dropped: told "for internal errors", the
        // library says so with eprintln!, which panics on a stderr whose reader went
        // away, and took a worker thread and the signal watcher with it.
        .log_internal_errors(false)
        .with_ansi(color)
        .with_target(false)
        .finish()
        .with(log_filter(std::env::var("UNS_LOG").ok().as_deref()))
        .try_init();
}

/// What `UNS_LOG` asks to see: a level (`warn`), or per-module levels with a default
/// (`unsctl::runtime=debug,warn`); a bare module name is all of that module, as in
/// RUST_LOG. Unset, empty or naming a level that is none, it is `info`.
///
/// Tracing's `Targets` reads these directives; its `EnvFilter` would read span and field
/// filters too, but it brings a regex engine whose features differ between the test
/// build and `cargo run`, so the new user's demo built the library a second time.
fn log_filter(given: Option<&str>) -> tracing_subscriber::filter::Targets {
    let info = || tracing_subscriber::filter::Targets::new().with_default(tracing::Level::INFO);
    match given.map(str::trim) {
        Some(text) if !text.is_empty() => text.parse().unwrap_or_else(|_| info()),
        _ => info(),
    }
}

/// `--wait`: follow each replay to its end
#[derive(Debug, Clone, clap::Args)]
#[group(skip)]
#[command(group(clap::ArgGroup::new("waiting").args(["wait", "canary"]).multiple(true)))]
pub struct WaitArgs {
    /// Then wait until every replayed notification settles, report each, and exit 0
    /// only if all were delivered (JSON: a second object, `waited`)
    #[arg(long, requires = "confirm")]
    pub wait: bool,
    /// Replay N entries first, spread over the causes selected, and wait until they
    /// settle: if any is not delivered, stop there with nothing else changed; else carry
    /// on with the rest, at the pace given
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..=1000))]
    pub canary: Option<u16>,
    /// How long --wait (and --canary) waits, in seconds
    #[arg(long, default_value_t = 300.0, requires = "waiting")]
    pub timeout: f64,
    /// Seconds between looks at the store, with --wait or --canary
    #[arg(long, default_value_t = 1.0, requires = "waiting")]
    pub interval: f64,
}

impl WaitArgs {
    /// How often to look and how long to wait, checked.
    pub fn checked(&self) -> CliResult<(std::time::Duration, std::time::Duration)> {
        let every = super::follow::interval(self.interval)?;
        if !(self.timeout.is_finite() && self.timeout > 0.0 && self.timeout <= 86_400.0) {
            return Err(CliError::usage(
                "--timeout must be seconds, more than 0 and at most a day",
            ));
        }
        Ok((every, std::time::Duration::from_secs_f64(self.timeout)))
    }
}

/// How the replays of one run are spread out
#[derive(Debug, Clone, Default, clap::Args)]
pub struct PaceArgs {
    /// Make the replays due at most N a second (also N/m, N/h, N/d; at least 1/d): the
    /// worker sends them at that pace, not all at once
    #[arg(long, value_name = "N/s", value_parser = super::values::parse_rate, conflicts_with = "spread")]
    pub rate: Option<crate::session::pace::Rate>,
    /// Make the replays due evenly over DURATION (90s, 30m, 2h, 2d; at most a week), the
    /// last at its end
    #[arg(long, value_name = "DURATION", value_parser = super::values::parse_spread)]
    pub spread: Option<crate::session::pace::Pace>,
}

impl PaceArgs {
    pub fn pace(&self) -> Option<crate::session::pace::Pace> {
        match (self.rate, self.spread) {
            (Some(rate), _) => Some(crate::session::pace::Pace::Rate(rate)),
            (None, Some(spread)) => Some(spread),
            (None, None) => None,
        }
    }
}

/// What an action that sends again takes beside its selection, as one group: who and why
/// (the audit), the confirmation, the pace, and the wait afterwards.
#[derive(Debug, clap::Args)]
pub struct ActionArgs {
    #[command(flatten)]
    pub audit: AuditArgs,
    #[command(flatten)]
    pub confirm: ConfirmArgs,
    #[command(flatten)]
    pub pace: PaceArgs,
    #[command(flatten)]
    pub wait: WaitArgs,
}

#[cfg(test)]
mod tests {
    use super::log_filter;
    use tracing::Level;

    #[test]
    fn uns_log_takes_a_level_or_levels_per_module_and_falls_back_to_info() {
        let warn = log_filter(Some("warn"));
        assert!(warn.would_enable("unsctl::runtime", &Level::WARN));
        assert!(!warn.would_enable("unsctl::runtime", &Level::INFO));

        let mixed = log_filter(Some("unsctl::runtime=debug,warn"));
        assert!(mixed.would_enable("unsctl::runtime::worker", &Level::DEBUG));
        assert!(!mixed.would_enable("unsctl::runtime::worker", &Level::TRACE));
        assert!(!mixed.would_enable("hyper", &Level::INFO));
        assert!(mixed.would_enable("hyper", &Level::WARN));

        for unset in [None, Some(""), Some("  "), Some("loud=much")] {
            let filter = log_filter(unset);
            assert!(filter.would_enable("unsctl", &Level::INFO), "{unset:?}");
            assert!(!filter.would_enable("unsctl", &Level::DEBUG), "{unset:?}");
        }
    }
}
