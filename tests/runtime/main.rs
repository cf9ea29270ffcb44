//! The runtime harness: engine, worker, adapters, API server and fakes, over real SQLite files and loopback sockets.

#[path = "../support/mod.rs"]
mod support;

mod adapters;
mod api;
mod engine;
mod ledger;
mod recording;
mod repro;
mod serve;
mod transitions;
mod worker;
