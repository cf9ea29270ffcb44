//! `unsctl dlq`: list, triage and resolve the dead-letter queue.

pub mod interactive;
mod list;
mod resolve;
mod triage;

use crate::cli::backend::Invocation;
use crate::cli::error::CliResult;

#[derive(Debug, clap::Subcommand)]
pub enum Command {
    List(list::Args),
    Triage(triage::Args),
    Resolve(resolve::Args),
}

pub fn run(global: &Invocation, command: Command) -> CliResult {
    match command {
        Command::List(args) => list::run(global, args),
        Command::Triage(args) if args.interactive => interactive::run(
            global,
            args.branch,
            &args.select,
            args.audit,
            &args.verify.sources(),
        ),
        Command::Triage(args) => triage::run(global, args),
        Command::Resolve(args) => resolve::run(global, args),
    }
}
