//! `unsctl completions <shell>`: shell completion scripts.

use crate::cli::error::CliResult;
use clap::CommandFactory;

/// Print a shell completion script
///
/// Example: unsctl completions bash > /etc/bash_completion.d/unsctl
#[derive(Debug, clap::Args)]
pub struct Args {
    /// bash, zsh, fish, elvish or powershell
    #[arg(ignore_case = true)]
    pub shell: clap_complete::Shell,
}

pub fn run(args: Args) -> CliResult {
    let mut command = crate::cli::Cli::command();
    // Into a buffer first: clap_complete panics if its own write fails (a closed pipe).
    let mut script = Vec::new();
    clap_complete::generate(args.shell, &mut command, "unsctl", &mut script);
    crate::render::output::print(&String::from_utf8_lossy(&script))?;
    Ok(())
}
