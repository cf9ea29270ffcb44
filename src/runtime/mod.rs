//! The bundled minimal runtime: schema, engine transitions, worker, adapters and the
//! fault-injecting provider fakes.

pub mod adapters;
pub mod db;
pub mod engine;
pub mod fakes;
pub mod schema;
pub mod server;
pub mod worker;
