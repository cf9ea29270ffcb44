//! The bundled minimal runtime: schema, row queries, the worker's transitions, the worker,
//! adapters and the fault-injecting provider fakes. It imports nothing above it.

pub mod adapters;
pub mod db;
pub mod engine;
pub mod fakes;
pub mod metrics;
pub mod queries;
pub mod schema;
pub mod worker;
