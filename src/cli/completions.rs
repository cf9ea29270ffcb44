//! `unsctl completions <shell>`: shell completion scripts.

use super::error::CliResult;
use clap::CommandFactory;

/// Print a shell completion script
///
/// Example: unsctl completions bash > /etc/bash_completion.d/unsctl
#[derive(Debug, clap::Args)]
pub struct Args {
    /// bash, zsh, fish, elvish or powershell
    pub shell: clap_complete::Shell,
}

pub fn run(args: Args) -> CliResult {
    let mut command = super::Cli::command();
    let mut stdout = std::io::stdout();
    clap_complete::generate(args.shell, &mut command, "unsctl", &mut stdout);
    Ok(())
}
