//! unsctl: triage and remediation for the UNS notification runtime, and the runtime itself.

pub mod clock;
pub mod model;
pub mod render;
pub mod runtime;
pub mod triage;

pub use runtime::engine;
