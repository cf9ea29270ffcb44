//! The bundled minimal runtime: schema, engine transitions, worker and adapters.

pub mod adapters;
pub mod engine;
pub mod schema;
pub mod worker;
