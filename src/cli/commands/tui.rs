//! `unsctl tui`: the flags of the live screen, resolved into the settings the screen
//! (`crate::tui`, a sibling front end) runs with. `main` starts it; the command line
//! never imports the screen, nor the screen the command line.

use crate::cli::backend::{self, Invocation};
use crate::cli::error::{CliError, CliResult};
use crate::session::screen::{self, Settings};
use std::io::IsTerminal;
use std::time::Duration;

/// A live screen for the whole incident, refreshed in place
///
/// Views: the DLQ, one notification, reconcile, the pulse, the audit, the providers and
/// every context. Nothing changes without a reason and the typed word; the keys are
/// listed below and by `?` on the screen.
///
/// Example: unsctl tui
/// Example: unsctl tui --view pulse
/// Example: unsctl tui inspect n-0192c3d4
/// Example: unsctl --context prod tui --readonly
#[derive(Debug, clap::Args)]
#[command(verbatim_doc_comment, after_long_help = crate::render::keys::help_text())]
pub struct Args {
    /// `inspect ID` opens one notification
    #[arg(value_name = "inspect ID", num_args = 0..=2)]
    pub open: Vec<String>,
    /// The view to open with
    #[arg(long, default_value = "dlq", ignore_case = true, value_parser = ["dlq", "reconcile", "pulse", "audit", "contexts", "providers"])]
    pub view: String,
    /// No action can run (also `readonly = true` on a context)
    #[arg(long)]
    pub readonly: bool,
    /// Capture the mouse (off by default, so the terminal's own selection works)
    #[arg(long)]
    pub mouse: bool,
    /// How often the view in front is read again
    #[arg(long, value_name = "DURATION", default_value = "2s", value_parser = crate::cli::values::parse_duration)]
    pub refresh: f64,
    /// Where reconcile starts: RFC 3339 or a duration back from now (default: all)
    #[arg(long, value_name = "TIME")]
    pub since: Option<String>,
    /// How long a replay carried out from the screen is waited on, after the last is due
    #[arg(long, value_name = "DURATION", default_value = "5m", value_parser = crate::cli::values::parse_span)]
    pub wait: f64,
    /// Where `:report` writes the evidence bundle (each in a new directory)
    #[arg(long, value_name = "DIR", default_value = ".")]
    pub reports: std::path::PathBuf,
    /// The pulse's span, back from now
    #[arg(long, value_name = "DURATION", default_value = "1h", value_parser = crate::cli::values::parse_duration)]
    pub pulse: f64,
    /// Who is acting (default: UNS_OPERATOR, then the account name)
    #[arg(long, value_parser = crate::cli::values::parse_said)]
    pub operator: Option<String>,
    #[command(flatten)]
    pub sources: crate::cli::args::SourceArgs,
    #[command(flatten)]
    pub senders: crate::cli::args::SenderArgs,
}

/// The screen's settings, as this command line asks for them.
pub fn run(global: &Invocation, args: Args) -> CliResult<Box<Settings>> {
    if !(std::io::stdout().is_terminal() && std::io::stdin().is_terminal()) {
        return Err(CliError::error(
            "unsctl tui needs a terminal: the commands (dlq triage, reconcile, pulse) print the same answers",
        ));
    }
    let settings = settings(global, &args)?;
    let id = match (&settings.id, settings.view.as_str()) {
        (Some(id), "inspect") => {
            let store = (settings.open)(false)?;
            Some(crate::session::ids::expand_id(store.as_ref(), id)?)
        }
        (id, _) => id.clone(),
    };
    Ok(Box::new(Settings { id, ..settings }))
}

/// Everything the screen needs, resolved; nothing is opened for a change.
pub fn settings(global: &Invocation, args: &Args) -> CliResult<Settings> {
    let (view, id) = first_view(args)?;
    let operator = global.operator(args.operator.as_deref())?;
    let contexts = match backend::config()? {
        Some(config) => config
            .contexts
            .iter()
            .map(|c| (c.name.clone(), global.context(&config, &c.name)))
            .collect(),
        None => Vec::new(),
    };
    let (place, readonly, open): (String, Option<String>, screen::Opener) = if global.all_contexts {
        (
            format!("{} contexts", contexts.len()),
            Some("--all-contexts reads only".into()),
            Box::new(|_| {
                Err(CliError::usage(
                    "--all-contexts: choose a context in the contexts view (Enter)",
                ))
            }),
        )
    } else {
        screen::opener(global.resolution()?.clone(), args.readonly)?
    };
    let view = if global.all_contexts && view == "dlq" {
        "contexts".to_string()
    } else {
        view
    };
    Ok(Settings {
        view,
        id,
        place,
        operator,
        readonly,
        open,
        contexts,
        sources: args.senders.apply(args.sources.sources()),
        since: args.since.clone(),
        color: crate::render::output::color_enabled(global.color, true),
        refresh: Duration::from_secs_f64(args.refresh.max(0.5)),
        pulse_span: args.pulse.clamp(60.0, 86_400.0),
        wait: Duration::from_secs_f64(args.wait),
        reports: args.reports.clone(),
        mouse: args.mouse,
        all_contexts: global.all_contexts,
    })
}

fn first_view(args: &Args) -> CliResult<(String, Option<String>)> {
    match args.open.as_slice() {
        [] => Ok((args.view.to_ascii_lowercase(), None)),
        [verb, id] if verb == "inspect" => {
            crate::cli::values::parse_id(id).map_err(CliError::usage)?;
            Ok(("inspect".into(), Some(id.clone())))
        }
        _ => Err(CliError::usage(
            "unsctl tui takes `inspect ID` or nothing: `unsctl tui inspect n-0192...`",
        )),
    }
}
