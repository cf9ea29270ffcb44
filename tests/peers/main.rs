//! The peers harness: tests that start Postfix, Prometheus, tmux or a pty, and a new user's fresh clone.

#[path = "../support/mod.rs"]
mod support;

mod cli_conventions;
mod doctor;
mod incident;
mod metrics;
mod new_user;
mod postgres;
mod reconcile;
mod report_browser;
mod terminal;
mod tsg_runbook;
mod tui;
mod verify;
mod widths;
