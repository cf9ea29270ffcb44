//! Values in and out of a statement, the same in either engine: a row is read through
//! [`Source`] as SQLite's cells, and a statement's values are given as SQLite's.

use rusqlite::Row;
use rusqlite::types::{Value, ValueRef};

/// A row whose cells are read by index, as SQLite's: a SQLite row, a PostgreSQL row, a
/// row copied out of either.
pub trait Source {
    fn cell(&self, index: usize) -> rusqlite::Result<ValueRef<'_>>;
}

impl Source for Row<'_> {
    fn cell(&self, index: usize) -> rusqlite::Result<ValueRef<'_>> {
        self.get_ref(index)
    }
}

/// A value a statement is given: text, a number, a flag, or NULL for None.
pub trait Arg {
    fn value(self) -> Value;
}

impl Arg for &str {
    fn value(self) -> Value {
        Value::Text(self.to_string())
    }
}

impl Arg for &String {
    fn value(self) -> Value {
        Value::Text(self.clone())
    }
}

impl Arg for String {
    fn value(self) -> Value {
        Value::Text(self)
    }
}

impl Arg for i64 {
    fn value(self) -> Value {
        Value::Integer(self)
    }
}

impl Arg for usize {
    fn value(self) -> Value {
        Value::Integer(i64::try_from(self).unwrap_or(i64::MAX))
    }
}

impl Arg for f64 {
    fn value(self) -> Value {
        Value::Real(self)
    }
}

impl Arg for bool {
    fn value(self) -> Value {
        Value::Integer(self.into())
    }
}

impl Arg for Value {
    fn value(self) -> Value {
        self
    }
}

impl<T: Arg> Arg for Option<T> {
    fn value(self) -> Value {
        self.map_or(Value::Null, Arg::value)
    }
}

/// The values of a statement, each through [`Arg`]: `args![id, now, None::<f64>]`.
#[macro_export]
macro_rules! args {
    ($($value:expr),* $(,)?) => {
        &[$($crate::db::Arg::value($value)),*]
    };
}

/// Longest stretch of a bad value quoted in a note.
const QUOTE: usize = 40;

/// One row's cells, read leniently; what could not be read is collected.
pub struct Cells<'r, S: Source + ?Sized> {
    row: &'r S,
    pub problems: Vec<String>,
}

/// `text` quoted for a note, cut to a short stretch.
pub fn quote(text: &str) -> String {
    let mut quoted: String = text.chars().take(QUOTE).collect();
    if quoted.len() < text.len() {
        quoted.push('…');
    }
    format!("{quoted:?}")
}

impl<'r, S: Source + ?Sized> Cells<'r, S> {
    pub fn new(row: &'r S) -> Self {
        Self {
            row,
            problems: Vec::new(),
        }
    }

    fn value(&mut self, index: usize, column: &str) -> Option<ValueRef<'r>> {
        match self.row.cell(index) {
            Ok(value) => Some(value),
            Err(err) => {
                self.problems.push(format!("{column}: {err}"));
                None
            }
        }
    }

    /// Text, or `None` for NULL. Invalid UTF-8 and BLOBs are decoded lossily and named.
    pub fn text(&mut self, index: usize, column: &str) -> Option<String> {
        match self.value(index, column)? {
            ValueRef::Null => None,
            ValueRef::Text(bytes) => Some(match std::str::from_utf8(bytes) {
                Ok(text) => text.to_string(),
                Err(_) => {
                    self.problems
                        .push(format!("{column}: not valid UTF-8 ({} bytes)", bytes.len()));
                    String::from_utf8_lossy(bytes).into_owned()
                }
            }),
            ValueRef::Blob(bytes) => {
                self.problems.push(format!(
                    "{column}: a BLOB of {} bytes, not text",
                    bytes.len()
                ));
                Some(String::from_utf8_lossy(bytes).into_owned())
            }
            ValueRef::Integer(n) => Some(n.to_string()),
            ValueRef::Real(x) => Some(x.to_string()),
        }
    }

    /// Text borrowed from the row when it is valid UTF-8 (no copy), as [`Cells::text`]
    /// otherwise; empty and named when NULL.
    pub fn text_ref(&mut self, index: usize, column: &str) -> std::borrow::Cow<'r, str> {
        match self.value(index, column) {
            Some(ValueRef::Text(bytes)) => match std::str::from_utf8(bytes) {
                Ok(text) => std::borrow::Cow::Borrowed(text),
                Err(_) => {
                    self.problems
                        .push(format!("{column}: not valid UTF-8 ({} bytes)", bytes.len()));
                    std::borrow::Cow::Owned(String::from_utf8_lossy(bytes).into_owned())
                }
            },
            Some(ValueRef::Null) => {
                self.problems.push(format!("{column}: NULL"));
                std::borrow::Cow::Borrowed("")
            }
            Some(ValueRef::Blob(bytes)) => {
                self.problems.push(format!(
                    "{column}: a BLOB of {} bytes, not text",
                    bytes.len()
                ));
                std::borrow::Cow::Owned(String::from_utf8_lossy(bytes).into_owned())
            }
            Some(ValueRef::Integer(n)) => std::borrow::Cow::Owned(n.to_string()),
            Some(ValueRef::Real(x)) => std::borrow::Cow::Owned(x.to_string()),
            None => std::borrow::Cow::Borrowed(""),
        }
    }

    /// Text that must be present.
    pub fn required_text(&mut self, index: usize, column: &str) -> String {
        self.text(index, column).unwrap_or_else(|| {
            self.problems.push(format!("{column}: NULL"));
            String::new()
        })
    }

    /// A number, or `None` for NULL; text that does not parse is named.
    pub fn real(&mut self, index: usize, column: &str) -> Option<f64> {
        match self.value(index, column)? {
            ValueRef::Null => None,
            ValueRef::Integer(n) => Some(n as f64),
            ValueRef::Real(x) if x.is_finite() => Some(x),
            ValueRef::Real(x) => {
                self.problems.push(format!("{column}: {x} is not a time"));
                None
            }
            ValueRef::Text(bytes) => {
                let text = String::from_utf8_lossy(bytes);
                match text.trim().parse::<f64>() {
                    Ok(x) if x.is_finite() => Some(x),
                    _ => {
                        self.problems
                            .push(format!("{column}: text {} is not a number", quote(&text)));
                        None
                    }
                }
            }
            ValueRef::Blob(bytes) => {
                self.problems.push(format!(
                    "{column}: a BLOB of {} bytes, not a number",
                    bytes.len()
                ));
                None
            }
        }
    }

    /// A number that must be present; 0 when it is not (and named).
    pub fn required_real(&mut self, index: usize, column: &str) -> f64 {
        self.real(index, column).unwrap_or_else(|| {
            if !self.problems.iter().any(|p| p.starts_with(column)) {
                self.problems.push(format!("{column}: NULL"));
            }
            0.0
        })
    }

    /// An integer, or None for NULL (a value that is not one is named, and None).
    pub fn optional_integer(&mut self, index: usize, column: &str) -> Option<i64> {
        match self.row.cell(index) {
            Ok(ValueRef::Null) => None,
            Ok(_) => Some(self.integer(index, column)),
            Err(err) => {
                self.problems.push(format!("{column}: {err}"));
                None
            }
        }
    }

    /// An integer that must be present; 0 when it is not (and named).
    pub fn integer(&mut self, index: usize, column: &str) -> i64 {
        let value = match self.value(index, column) {
            Some(ValueRef::Integer(n)) => return n,
            Some(value) => value,
            None => return 0,
        };
        let parsed = match value {
            ValueRef::Real(x) if x.fract() == 0.0 && x.abs() < 9e15 => Some(x as i64),
            ValueRef::Text(bytes) => String::from_utf8_lossy(bytes).trim().parse().ok(),
            _ => None,
        };
        parsed.unwrap_or_else(|| {
            let shown = match value {
                ValueRef::Null => "NULL".to_string(),
                ValueRef::Blob(bytes) => format!("a BLOB of {} bytes", bytes.len()),
                ValueRef::Text(bytes) => format!("text {}", quote(&String::from_utf8_lossy(bytes))),
                ValueRef::Real(x) => x.to_string(),
                ValueRef::Integer(n) => n.to_string(),
            };
            self.problems
                .push(format!("{column}: {shown} is not an integer"));
            0
        })
    }

    /// An event payload: the stored text verbatim when it is JSON; otherwise kept as a
    /// string and named (a BLOB becomes null).
    pub fn payload(&mut self, index: usize, column: &str) -> crate::model::Payload {
        let before = self.problems.len();
        match self.text(index, column) {
            None => {
                self.problems.push(format!("{column}: NULL"));
                crate::model::empty_payload()
            }
            Some(_) if self.problems.len() > before => crate::model::empty_payload(),
            Some(text) => {
                let (payload, problem) = crate::model::payload_of(&text);
                self.problems.extend(problem);
                payload
            }
        }
    }

    /// As [`Cells::payload`], borrowed from the row when the stored text is JSON.
    pub fn payload_ref(
        &mut self,
        index: usize,
        column: &str,
    ) -> std::borrow::Cow<'r, serde_json::value::RawValue> {
        use std::borrow::Cow;
        let before = self.problems.len();
        let text = self.text_ref(index, column);
        if self.problems.len() > before {
            return Cow::Owned(crate::model::empty_payload());
        }
        match text {
            Cow::Borrowed(text) => match serde_json::from_str::<&serde_json::value::RawValue>(text)
            {
                Ok(raw) => Cow::Borrowed(raw),
                Err(_) => {
                    self.problems.extend(crate::model::payload_problem(text));
                    Cow::Owned(crate::model::json_string(text))
                }
            },
            Cow::Owned(text) => {
                let (payload, problem) = crate::model::payload_of(&text);
                self.problems.extend(problem);
                Cow::Owned(payload)
            }
        }
    }

    /// A JSON document stored as text: parsed, or kept as a string when it is not JSON
    /// (triage then names it); a BLOB becomes null.
    pub fn json(&mut self, index: usize, column: &str) -> serde_json::Value {
        let before = self.problems.len();
        match self.text(index, column) {
            None => serde_json::Value::Null,
            Some(_) if self.problems.len() > before => serde_json::Value::Null,
            Some(text) => serde_json::from_str(&text).unwrap_or(serde_json::Value::String(text)),
        }
    }
}
