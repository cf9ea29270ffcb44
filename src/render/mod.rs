//! Turning view structs into tables, timelines and JSON.

pub mod columns;
pub mod keys;
pub mod markdown;
pub mod notification;
pub mod output;
pub mod sanitize;
pub mod table;
pub mod time;
pub mod views;

pub use output::Output;
