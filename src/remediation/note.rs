//! An operator's note about an incident: the one transition that writes one, and the
//! rules a note keeps whoever writes it (the command line, the screen, the API).

use super::{Actor, Rejection};
use crate::args;
use crate::db::Db;
use crate::model::{NoteRow, payload};
use crate::runtime::engine::{self, EngineError};
use serde::{Deserialize, Serialize};

/// What `unsctl note` asks a store to keep (`POST /api/v1/runtime/notes`). A key it does
/// not know is refused, as in every act's body: a misspelt `fixed_at` dropped would keep
/// a note that no report reads as the fix.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NoteRequest {
    /// Who the client says is writing; over the API the key's name is recorded beside it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operator: Option<String>,
    pub text: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ticket: Option<String>,
    /// The note records the fix, which went in now.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub fixed: bool,
    /// The note records the fix, which went in at this time (unix seconds), not later
    /// than the note.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fixed_at: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub via: Option<payload::Via>,
}

/// The longest note kept, in characters: a paragraph, not a document.
pub const MAX_TEXT: usize = 2000;

/// What every note is stored as.
pub const KIND: &str = "NOTE";

/// A note's text as it is kept, trimmed: some text, at most [`MAX_TEXT`] characters;
/// else why not. Every note is checked by it in [`of`], and the command line asks it
/// first, so a note it would refuse is a usage error before a store is opened.
pub fn text(given: &str) -> Result<&str, String> {
    let text = given.trim();
    if text.is_empty() {
        return Err("a note needs some text".to_string());
    }
    if text.chars().count() > MAX_TEXT {
        return Err(format!("a note is at most {MAX_TEXT} characters"));
    }
    Ok(text)
}

/// The note `request` asks for, written by `actor` at `now`, checked: some text, and a
/// fix time that is not later than the note.
pub fn of(request: &NoteRequest, actor: &Actor, now: f64) -> Result<payload::Note, EngineError> {
    let invalid = |why: &str| EngineError::Invalid(why.to_string());
    let text = text(&request.text).map_err(EngineError::Invalid)?;
    let fixed_at = match request.fixed_at {
        Some(at) if !at.is_finite() || at < 0.0 => {
            return Err(invalid("fixed_at must be a time in unix seconds"));
        }
        Some(at) if at > now => {
            return Err(EngineError::Invalid(format!(
                "fixed_at ({}) is later than now ({}): a fix is noted once it went in",
                crate::clock::rfc3339(at),
                crate::clock::rfc3339(now)
            )));
        }
        Some(at) => Some(at),
        None => request.fixed.then_some(now),
    };
    Ok(payload::Note {
        via: request.via,
        operator: actor.operator.clone(),
        claimed_operator: actor.claimed_operator.clone(),
        text: text.to_string(),
        ticket: request
            .ticket
            .as_deref()
            .map(str::trim)
            .filter(|t| !t.is_empty())
            .map(str::to_string),
        fixed_at,
    })
}

/// Appends the note to the store's notes, in one transaction; the store must have a
/// place for them (schema version 3, which `runtime serve` brings an older store to).
pub fn write(
    db: &Db<'_>,
    now: f64,
    request: &NoteRequest,
    actor: &Actor,
) -> Result<NoteRow, Rejection> {
    engine::write_tx(db, |tx| {
        let now = tx.now(now)?;
        let note = of(request, actor, now)?;
        if !crate::runtime::queries::has_notes(tx)? {
            return Err(Rejection::Store(EngineError::Invalid(
                "this store has no place for notes yet (schema version 2 or older); `unsctl runtime serve` brings it to version 3"
                    .into(),
            )));
        }
        let text = payload::to_text(&note);
        let id = tx.insert(
            "INSERT INTO uns_notes (at, kind, payload) VALUES (?1, ?2, ?3) RETURNING id",
            args![now, KIND, text.as_str()],
        )?;
        let (payload, _) = crate::model::payload_of(&text);
        Ok(NoteRow {
            id,
            at: now,
            kind: KIND.to_string(),
            payload,
            unreadable: Vec::new(),
        })
    })
}
