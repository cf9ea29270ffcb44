//! The command line: one file per command, one dispatch, one exit-code table.

pub mod act;
pub mod args;
pub mod backend;
pub mod canary;
pub mod commands;
pub mod error;
pub mod fleet;
pub mod follow;
pub mod guided;
pub mod plan;
pub mod prompt;
pub mod selection;
pub mod values;

use args::GlobalArgs;
use clap::{Parser, Subcommand};
use commands::{
    apply, completions, context, dlq, doctor, events, inspect, note, pulse, reconcile, replay,
    report, repro, runtime, store, sweep, tsg, tui, verify,
};
use error::CliResult;

/// Triage the UNS dead-letter queue: which entries are safe to resolve, verify or replay,
/// and the events that prove it.
#[derive(Debug, Parser)]
#[command(
    name = "unsctl",
    version,
    propagate_version = true,
    max_term_width = 100
)]
#[command(
    after_help = "Examples:\n  unsctl demo\n  unsctl --db uns.db dlq triage\n  unsctl --api http://127.0.0.1:8080 inspect n-0192...\n\nLogs go to stderr at level info; UNS_LOG sets a level (UNS_LOG=warn) or levels per\nmodule with a default (UNS_LOG=unsctl::runtime=debug,info)."
)]
pub struct Cli {
    #[command(flatten)]
    pub global: GlobalArgs,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    Inspect(inspect::Args),
    Events(events::Args),
    /// List, triage and resolve the dead-letter queue
    ///
    /// Example: unsctl --db uns.db dlq triage
    #[command(subcommand)]
    Dlq(dlq::Command),
    /// Run the bundled runtime: the API server, a worker, submissions
    ///
    /// Example: UNS_API_KEY=$(openssl rand -hex 16) unsctl runtime serve --db uns.db
    #[command(subcommand)]
    Runtime(Box<runtime::Command>),
    Replay(replay::Args),
    Apply(apply::Args),
    Repro(repro::ReproArgs),
    Demo(repro::DemoArgs),
    Sweep(sweep::Args),
    Verify(verify::Args),
    Reconcile(reconcile::Args),
    Pulse(pulse::Args),
    Report(report::Args),
    Note(note::Args),
    /// Move a store between engines: a SQLite file into PostgreSQL
    ///
    /// Example: unsctl store copy --from uns.db --to postgres://uns@db.internal/uns
    #[command(subcommand)]
    Store(store::Command),
    #[command(subcommand)]
    Tsg(tsg::Command),
    Doctor(doctor::Args),
    #[command(subcommand)]
    Context(context::Command),
    Completions(completions::Args),
    Tui(Box<tui::Args>),
}

/// `-o csv` is reconcile's, `-o markdown` and `-o html` are report's: anywhere else they
/// are a usage error, never a table printed instead.
fn check_format(
    command: &Command,
    format: crate::render::output::Format,
    all_contexts: bool,
) -> CliResult {
    use crate::render::output::Format;
    if format == Format::Csv && all_contexts {
        return Err(error::CliError::usage(
            "-o csv lists one store's people to write to: pass --context NAME",
        ));
    }
    let fits = match format {
        Format::Csv => matches!(command, Command::Reconcile(_)),
        Format::Markdown | Format::Html => matches!(command, Command::Report(_)),
        Format::Table | Format::Wide | Format::Json => true,
    };
    if fits {
        return Ok(());
    }
    Err(error::CliError::usage(match format {
        Format::Csv => "-o csv is reconcile's: unsctl reconcile -o csv",
        _ => "-o markdown and -o html are report's: unsctl report --since TIME -o html",
    }))
}

/// What a command line leaves to do once it has run: nothing, or the live screen (a
/// sibling front end, which `main` starts with these settings).
pub enum Next {
    Done,
    Screen(Box<crate::session::screen::Settings>),
}

/// Runs one parsed command line.
pub fn run(cli: Cli) -> CliResult<Next> {
    let invocation = backend::Invocation::new(cli.global);
    let global = &invocation;
    if global.trust_config_owner {
        crate::config::trust_owner();
    }
    check_format(&cli.command, global.output, global.all_contexts)?;
    let done = match cli.command {
        Command::Tui(args) => return tui::run(global, *args).map(Next::Screen),
        Command::Inspect(args) => inspect::run(global, args),
        Command::Events(args) => events::run(global, args),
        Command::Dlq(command) => dlq::run(global, command),
        Command::Runtime(command) => runtime::run(global, *command),
        Command::Replay(args) => replay::run(global, args),
        Command::Apply(args) => apply::run(global, args),
        Command::Repro(args) => repro::run_repro(global, args),
        Command::Demo(args) => repro::run_demo(global, args),
        Command::Sweep(args) => sweep::run(global, args),
        Command::Verify(args) => verify::run(global, args),
        Command::Reconcile(args) => reconcile::run(global, args),
        Command::Pulse(args) => pulse::run(global, args),
        Command::Report(args) => report::run(global, args),
        Command::Note(args) => note::run(global, args),
        Command::Store(command) => store::run(global, command),
        Command::Tsg(command) => tsg::run(global, command),
        Command::Doctor(args) => doctor::run(global, args),
        Command::Context(command) => context::run(global, command),
        Command::Completions(args) => completions::run(args),
    };
    done.map(|()| Next::Done)
}
