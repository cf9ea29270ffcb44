//! Conventions every command keeps: help with a summary and an example, --version,
//! completions, a quiet broken pipe, and a readable runbook in a real terminal.

use crate::support;
use clap::CommandFactory;
use std::time::Duration;

fn unsctl(args: &[&str]) -> std::process::Output {
    support::unsctl().args(args).output().expect("unsctl")
}

fn paths(command: &clap::Command, prefix: Vec<String>, found: &mut Vec<Vec<String>>) {
    for sub in command.get_subcommands() {
        if sub.get_name() == "help" {
            continue;
        }
        let mut path = prefix.clone();
        path.push(sub.get_name().to_string());
        found.push(path.clone());
        paths(sub, path, found);
    }
}

#[test]
fn every_command_has_a_summary_and_an_example() {
    let mut found = Vec::new();
    paths(&unsctl::cli::Cli::command(), Vec::new(), &mut found);
    assert!(found.len() >= 20, "{found:?}");
    for path in found {
        let mut args: Vec<&str> = path.iter().map(String::as_str).collect();
        args.push("--help");
        let out = unsctl(&args);
        assert!(out.status.success(), "{args:?}");
        let help = String::from_utf8_lossy(&out.stdout);
        let summary = help.lines().next().unwrap_or_default();
        assert!(
            !summary.trim().is_empty() && !summary.starts_with("Usage"),
            "{args:?} has no summary:\n{help}"
        );
        assert!(help.contains("Example"), "{args:?} has no example:\n{help}");
        // Examples one per line, each a command that starts the line.
        for line in help.lines().filter(|l| l.contains("Example:")) {
            assert!(
                (line.starts_with("Example: unsctl ") || line.starts_with("Example: UNS_"))
                    && line.matches("Example:").count() == 1,
                "{args:?}: examples run together: {line:?}"
            );
        }
        // The summary is one line, with the detail after a blank line.
        assert!(
            help.lines().nth(1).is_none_or(|l| l.trim().is_empty()),
            "{args:?}: the summary runs onto a second line:\n{help}"
        );
    }
}

#[test]
fn conventions_of_mutations_dry_run_and_yes() {
    // --dry-run is the explicit default; --yes without --confirm is a usage error.
    let dir = tempfile::tempdir().expect("dir");
    let db = dir.path().join("uns.db");
    unsctl::runtime::schema::open(&db, unsctl::runtime::schema::OpenMode::Create).expect("store");
    let db = db.to_string_lossy().to_string();
    let out = unsctl(&["--db", &db, "replay", "n-0000", "--dry-run"]);
    assert_ne!(
        out.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = unsctl(&["--db", &db, "replay", "n-0000", "--yes"]);
    assert_eq!(out.status.code(), Some(2));
    let out = unsctl(&["--db", &db, "replay", "n-0000", "--dry-run", "--confirm"]);
    assert_eq!(out.status.code(), Some(2));
    let out = unsctl(&["--db", &db, "dlq", "resolve", "n-0000", "--yes"]);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn version_and_completions() {
    let out = unsctl(&["--version"]);
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        format!("unsctl {}", env!("CARGO_PKG_VERSION"))
    );
    for shell in ["bash", "zsh", "fish"] {
        let out = unsctl(&["completions", shell]);
        assert!(out.status.success());
        let script = String::from_utf8_lossy(&out.stdout);
        assert!(
            script.contains("unsctl") && script.contains("triage"),
            "{shell}"
        );
        // Values are completed, not file names: branches, channels, kinds, guides, cases.
        let positional: &[&str] = if shell == "fish" {
            &[]
        } else {
            &["TSG-03", "worker-crash"]
        };
        for value in ["verify", "pagerduty", "LEASE_LOST"]
            .iter()
            .chain(positional)
        {
            assert!(script.contains(value), "{shell} does not complete {value}");
        }
    }
    let out = unsctl(&["completions", "tcsh"]);
    assert_eq!(
        out.status.code(),
        Some(2),
        "an unknown shell is a usage error"
    );
}

#[test]
fn a_closed_pipe_ends_quietly() {
    let out = support::launch("bash")
        .arg("-c")
        .arg(format!(
            "{} tsg show TSG-02 | head -1",
            env!("CARGO_BIN_EXE_unsctl")
        ))
        .output()
        .expect("bash");
    assert!(out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !stderr.contains("panicked") && !stderr.contains("error"),
        "{stderr}"
    );
}

#[test]
fn the_runbook_reads_well_in_an_80_column_terminal() {
    let socket = format!("unsctl-tsg-{}", std::process::id());
    let tmux = |args: &[&str]| {
        support::launch("tmux")
            .args(["-L", &socket])
            .args(args)
            .output()
            .expect("tmux")
    };
    let command = format!(
        "{} tsg show TSG-02 | head -45; echo END-OF-PAGE; sleep 30",
        env!("CARGO_BIN_EXE_unsctl")
    );
    assert!(
        tmux(&[
            "new-session",
            "-d",
            "-s",
            "t",
            "-x",
            "80",
            "-y",
            "50",
            &command
        ])
        .status
        .success()
    );
    // The page is whole once the line after it is on the screen.
    let mut screen = String::new();
    let shown = support::wait_for(Duration::from_secs(60), || {
        screen =
            String::from_utf8_lossy(&tmux(&["capture-pane", "-p", "-t", "t"]).stdout).into_owned();
        screen.contains("END-OF-PAGE")
    });
    let _ = tmux(&["kill-server"]);
    assert!(shown, "the page never ended:\n{screen}");
    assert!(screen.starts_with("TSG-02: Lost worker leases"), "{screen}");
    assert!(
        screen.contains("1. What you see\n---------------"),
        "headings are underlined:\n{screen}"
    );
    assert!(
        screen.contains("  - A recipient got the same email"),
        "lists are indented:\n{screen}"
    );
    for artefact in ["```", "<!--", "**", "`"] {
        assert!(
            !screen.contains(artefact),
            "{artefact:?} leaked into the terminal:\n{screen}"
        );
    }
    // Prose is wrapped, not cut by the terminal: no line runs to the last column.
    assert!(screen.lines().all(|l| l.chars().count() < 80), "{screen}");
}

/// Every word a flag or argument takes from a list (a branch, a channel, a format, a
/// scenario) is accepted in any letter case: an operator typing REPLAY or Json at 3 a.m.
/// is not making a mistake worth an error.
#[test]
fn every_listed_value_is_accepted_in_any_case() {
    let root = unsctl::cli::Cli::command();
    let mut found = vec![Vec::new()];
    paths(&root, Vec::new(), &mut found);
    let mut checked = 0;
    for path in found {
        let mut command = &root;
        for name in &path {
            command = command.find_subcommand(name).expect("subcommand");
        }
        for arg in command.get_arguments() {
            for value in arg.get_possible_values() {
                let name = value.get_name();
                for spelled in [
                    name.to_uppercase(),
                    format!("{}{}", &name[..1].to_uppercase(), &name[1..]),
                ] {
                    let mut argv = vec!["unsctl".to_string()];
                    argv.extend(path.iter().cloned());
                    match arg.get_long() {
                        Some(long) => argv.push(format!("--{long}={spelled}")),
                        None => argv.push(spelled.clone()),
                    }
                    if let Err(err) = unsctl::cli::Cli::command().try_get_matches_from(&argv) {
                        assert_ne!(
                            err.kind(),
                            clap::error::ErrorKind::InvalidValue,
                            "{argv:?}: {err}"
                        );
                    }
                    checked += 1;
                }
            }
        }
    }
    assert!(checked > 50, "only {checked} values checked");
}
