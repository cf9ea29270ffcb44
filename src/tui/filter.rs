//! The `/` filter: the selection of DESIGN §5 written as words, read by the library's one
//! builder ([`crate::session::select`]), which the command line's flags go through too.

pub use crate::session::select::{Filter, WORDS as KEYS};
