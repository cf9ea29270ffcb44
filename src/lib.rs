//! unsctl: triage and remediation for the UNS notification runtime, and the runtime itself.

// Functions stay short enough to read at once, and no user path can panic on a
// missing value: every `unwrap` or `expect` outside the tests is a bug.
#![warn(clippy::too_many_lines)]
#![cfg_attr(not(test), warn(clippy::unwrap_used, clippy::expect_used))]

pub mod api;
pub mod bounded;
pub mod cli;
pub mod clock;
pub mod config;
pub mod db;
pub mod documents;
pub mod exit;
pub mod handoff;
pub mod history;
pub mod identity;
pub mod interrupt;
pub mod json;
pub mod lab;
pub mod model;
pub mod pulse;
pub mod reconcile;
pub mod redact;
pub mod remediation;
pub mod render;
pub mod report;
pub mod runtime;
pub mod server;
pub mod session;
pub mod store;
pub mod triage;
pub mod tsg;
pub mod tui;
pub mod verify;
