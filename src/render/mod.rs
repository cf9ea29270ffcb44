//! Turning view structs into tables, timelines and JSON.

pub mod time;
