//! The command-line harness: the real binary over real stores and the real server, no outside peer.

#[path = "../support/mod.rs"]
mod support;

mod cli_read;
mod contexts;
mod documents;
mod follow;
mod hostile;
mod layering;
mod next_steps;
mod one_spec;
mod pace;
mod permanent;
mod prefix;
mod pulse;
mod reconcile;
mod remediation;
mod report;
mod runbook;
mod screen_acts;
mod selection;
mod snapshots;
mod triage_props;
mod tui;
