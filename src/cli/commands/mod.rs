//! The commands, one module each; what they share (flags, backends, the output, the
//! remediation flow's terminal side) is the plumbing beside this folder. A command never
//! imports another: what two need lives in the plumbing or the library.

pub mod apply;
pub mod completions;
pub mod context;
pub mod dlq;
pub mod doctor;
pub mod events;
pub mod inspect;
pub mod note;
pub mod pulse;
pub mod reconcile;
pub mod replay;
pub mod report;
pub mod repro;
pub mod runtime;
pub mod store;
pub mod sweep;
pub mod tsg;
pub mod tui;
pub mod verify;
