//! The bundled minimal runtime: schema, row queries, the worker's transitions, the
//! store's writer thread, the worker and the provider adapters. It imports nothing above
//! it; the fakes it is tested against live in `lab`.

pub mod adapters;
pub mod copy;
pub mod engine;
pub mod metrics;
pub mod queries;
pub mod schema;
pub mod worker;
pub mod writer;
