//! `unsctl report`: the postmortem for a window, as Markdown, HTML or JSON, and with
//! `--bundle DIR` the evidence behind it with a SHA256SUMS that `report check` (and
//! `sha256sum -c`) verifies.

use crate::cli::args::{SenderArgs, SourceArgs};
use crate::cli::backend::{self, Invocation};
use crate::cli::error::{CliError, CliResult};
use crate::render::output::{Output, Streamed, print, status};
use crate::report::{self, Report};
use crate::store::Selection;
use std::io::Write;
use std::path::{Path, PathBuf};

/// Write the postmortem for a window, from the evidence (-o markdown, html or json)
///
/// Summary, impact per channel, timeline, who got duplicates, operator actions and
/// verdict changes. Every figure comes from the store and the providers' records, tied to the events or
/// records that give it. The same absolute window gives the same bytes every run.
///
/// Example: unsctl report --since 2026-11-30T02:00:00Z --until 2026-11-30T05:00:00Z
/// Example: unsctl report --since 6h --relay-log /var/log/mail.log -o html > postmortem.html
/// Example: unsctl report --since 6h --bundle incident-42/
/// Example: unsctl report check incident-42/
#[derive(Debug, clap::Args)]
#[command(verbatim_doc_comment, args_conflicts_with_subcommands = true)]
pub struct Args {
    #[command(subcommand)]
    pub command: Option<Command>,
    /// Start of the window: RFC 3339, or a duration back from now (6h, 1d)
    #[arg(long, value_name = "TIME")]
    pub since: Option<String>,
    /// End of the window (default: now; give it for a report that reads the same twice)
    #[arg(long, value_name = "TIME")]
    pub until: Option<String>,
    /// Only this channel
    #[arg(long, value_parser = crate::cli::values::channel())]
    pub channel: Option<crate::model::Channel>,
    /// Only notifications whose error message contains TEXT (repeat: any of them)
    #[arg(long, value_name = "TEXT", value_parser = crate::cli::values::parse_text)]
    pub error: Vec<String>,
    /// When the fix went in (RFC 3339, or a duration back from now): it stands in the
    /// summary
    #[arg(long, value_name = "TIME")]
    pub fixed_at: Option<String>,
    #[command(flatten)]
    pub sources: SourceArgs,
    #[command(flatten)]
    pub senders: SenderArgs,
    /// Also write the evidence to DIR (new, or empty): the three reports, events.jsonl,
    /// triage.json, reconcile.json, audit.json and SHA256SUMS; all of them or, when the
    /// run fails, none
    #[arg(long, value_name = "DIR")]
    pub bundle: Option<PathBuf>,
}

#[derive(Debug, clap::Subcommand)]
pub enum Command {
    /// Check an evidence bundle against its SHA256SUMS
    ///
    /// Each file changed, missing or added is named, and any of them exits 1; so is a
    /// file every bundle has that the list leaves out, a link or anything but a plain
    /// file in a file's place, and a line of the list that cannot be read.
    ///
    /// Example: unsctl report check incident-42/
    Check {
        /// The bundle's directory
        dir: PathBuf,
    },
}

pub fn run(global: &Invocation, args: Args) -> CliResult {
    if let Some(Command::Check { dir }) = &args.command {
        return check(dir);
    }
    let Some(since) = args.since.as_deref() else {
        return Err(CliError::usage(
            "a report needs its window: --since TIME (and --until TIME for one that reads the same twice)",
        ));
    };
    let window = crate::cli::args::window(Some(since), args.until.as_deref())?;
    let now = crate::clock::Clock::now(&crate::clock::SystemClock);
    let (since, until) = (window.since.unwrap_or(now), window.until.unwrap_or(now));
    crate::clock::ordered(since, until).map_err(CliError::usage)?;
    let selection = Selection::of_channel_and_error(args.channel, &args.error);
    selection.check().map_err(CliError::usage)?;
    let fixed_at = args
        .fixed_at
        .as_deref()
        .map(|text| crate::clock::parse_instant(text, now))
        .transpose()
        .map_err(|err| CliError::usage(format!("--fixed-at: {err}")))?;
    let asked = report::Asked {
        since,
        until,
        selection,
        sources: args.senders.apply(args.sources.sources()),
        now,
        fixed_at,
    };
    if global.all_contexts {
        return run_fleet(global, &asked, &args);
    }
    let store = backend::reader(global)?;
    let report = match &args.bundle {
        Some(dir) => {
            let report = report::bundle::write(store.as_ref(), &asked, dir)?;
            status(&report::bundle::written(dir));
            report
        }
        None => report::gather(store.as_ref(), &asked, &mut |_, _| Ok(()))?,
    };
    global.output().stream(Postmortem(&report))
}

/// One store's postmortem: Markdown (the default), HTML or JSON.
struct Postmortem<'a>(&'a Report);

impl Streamed for Postmortem<'_> {
    type Done = CliResult;

    fn json(self) -> CliResult {
        write_out(&report::bundle::json(self.0)?)
    }

    fn show(self, _: &Output) -> CliResult {
        write_out(&report::markdown::render(self.0))
    }

    fn html(self, _: &Output) -> CliResult {
        write_out(&report::html::render(self.0))
    }
}

fn write_out(text: &str) -> CliResult {
    let mut stdout = std::io::stdout().lock();
    stdout.write_all(text.as_bytes())?;
    stdout.flush()?;
    Ok(())
}

/// `report --all-contexts`: one report a context, each under its name; one that cannot
/// be read says why, and the rest are still written.
fn run_fleet(global: &Invocation, asked: &report::Asked, args: &Args) -> CliResult {
    if args.bundle.is_some() {
        return Err(CliError::usage(
            "--bundle keeps one store's evidence: pass --context NAME",
        ));
    }
    let config = backend::required_config()?;
    let mut parts = Vec::new();
    for context in &config.contexts {
        let read = global
            .context(&config, &context.name)
            .and_then(|r| backend::open_resolved(r, false))
            .and_then(|store| Ok(report::gather(store.as_ref(), asked, &mut |_, _| Ok(()))?));
        parts.push((context.name.clone(), read.map_err(|err| err.message)));
    }
    global.output().stream(Postmortems(&parts))?;
    let failed = parts.iter().filter(|(_, part)| part.is_err()).count();
    if failed > 0 {
        return Err(CliError::error(format!(
            "{failed} of {} contexts could not be read (see above)",
            config.contexts.len()
        )));
    }
    Ok(())
}

/// Every context's postmortem, each under its name; one that could not be read says why.
struct Postmortems<'a>(&'a [(String, Result<Report, String>)]);

/// One context's part of `report --all-contexts -o json`.
#[derive(serde::Serialize)]
struct InContext<'a> {
    context: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    report: Option<&'a Report>,
}

impl Postmortems<'_> {
    fn each(self, part: impl Fn(&str, &Report) -> String) -> CliResult {
        let text = self
            .0
            .iter()
            .map(|(name, read)| match read {
                Ok(report) => part(name, report),
                Err(why) => format!(
                    "# Context {}: not read\n\n{}\n",
                    report::markdown::escape(name),
                    report::markdown::escape(why)
                ),
            })
            .collect::<Vec<_>>()
            .join("\n");
        Ok(print(text.trim_end())?)
    }
}

impl Streamed for Postmortems<'_> {
    type Done = CliResult;

    /// `{"contexts": [...]}`, its keys sorted at every level.
    fn json(self) -> CliResult {
        let contexts: Vec<InContext<'_>> = self
            .0
            .iter()
            .map(|(context, read)| InContext {
                context,
                error: read.as_ref().err().map(String::as_str),
                report: read.as_ref().ok(),
            })
            .collect();
        #[derive(serde::Serialize)]
        struct Contexts<'a> {
            contexts: Vec<InContext<'a>>,
        }
        let document = serde_json::to_value(Contexts { contexts })
            .and_then(|sorted| serde_json::to_string_pretty(&sorted))
            .map_err(|err| CliError::error(err.to_string()))?;
        Ok(print(&document)?)
    }

    fn show(self, _: &Output) -> CliResult {
        self.each(|name, report| {
            format!(
                "<!-- context {} -->\n{}",
                crate::render::sanitize::clean(name),
                report::markdown::render(report).replacen(
                    "# Postmortem:",
                    &format!("# Context {}: postmortem:", report::markdown::escape(name)),
                    1
                )
            )
        })
    }

    fn html(self, _: &Output) -> CliResult {
        self.each(|_, report| report::html::render(report))
    }
}

/// `report check DIR`: each file's line, then whether every one is as written.
fn check(dir: &Path) -> CliResult {
    let checked = report::bundle::check(dir)?;
    for line in checked.ok.iter().chain(&checked.problems) {
        print(line)?;
    }
    if checked.problems.is_empty() {
        status(&format!(
            "{}: every file is as it was written",
            crate::render::sanitize::clean(&dir.display().to_string())
        ));
        return Ok(());
    }
    Err(CliError::error(format!(
        "{}: {} not as written",
        crate::render::sanitize::clean(&dir.display().to_string()),
        crate::render::output::counted(checked.problems.len() as i64, "file")
    )))
}
