//! What the live screen is given to run with, resolved by the command line from its flags,
//! the environment and the config file: plain values, so the screen (`crate::tui`) reads
//! nothing itself and never imports the command line.

use crate::exit::{ExitKind, Failure, Result};
use crate::store::Store;
use crate::store::place::Resolution;
use std::time::Duration;

/// Opens the store: for reading (`false`), or for a change.
pub type Opener = Box<dyn Fn(bool) -> Result<Box<dyn Store>> + Send + Sync>;

/// The screen's settings.
pub struct Settings {
    /// The view it opens with (`dlq`, `inspect`, `reconcile`, `pulse`, `audit`,
    /// `contexts`), and the notification when it is `inspect`.
    pub view: String,
    pub id: Option<String>,
    /// The store, as every command describes it.
    pub place: String,
    /// Who acts, as every command records it.
    pub operator: String,
    /// Why nothing may be changed from the screen, if that is so.
    pub readonly: Option<String>,
    pub open: Opener,
    /// The contexts of the config file (name and how to reach it), for the contexts view.
    pub contexts: Vec<(String, Result<Resolution>)>,
    /// The providers' records verify, reconcile and the replay's preview read.
    pub sources: crate::verify::Sources,
    /// Where reconcile starts (`--since`), resolved when asked.
    pub since: Option<String>,
    pub color: bool,
    pub refresh: Duration,
    /// The pulse's span, back from now, in seconds.
    pub pulse_span: f64,
    /// How long a carry-out waits on its replays after the last is due.
    pub wait: Duration,
    /// Where `:report` writes its bundles.
    pub reports: std::path::PathBuf,
    /// Capture the mouse.
    pub mouse: bool,
    /// `--all-contexts`: the screen reads every context and changes none.
    pub all_contexts: bool,
}

/// How to open one resolved store, what it is called, and why it is read-only if it is
/// (`flag`: the operator asked). A read-only screen's opener never opens the store for a
/// change, whoever asks.
pub fn opener(resolution: Resolution, flag: bool) -> Result<(String, Option<String>, Opener)> {
    let readonly = if flag {
        Some("--readonly".to_string())
    } else if resolution.readonly {
        Some(format!(
            "context {} says readonly",
            resolution.context.as_deref().unwrap_or("?")
        ))
    } else {
        None
    };
    // Described as every command describes it, without acting on it here.
    let place = open(resolution.clone(), false)?.describe();
    let refusal = readonly.clone();
    let open: Opener = Box::new(move |write| {
        if let (true, Some(why)) = (write, &refusal) {
            return Err(Failure::new(
                ExitKind::Refused,
                format!("read-only ({why}): nothing is changed from this screen"),
            ));
        }
        open(resolution.clone(), write)
    });
    Ok((place, readonly, open))
}

/// Opens `resolution`; what the store says of how it was opened is held for after the
/// screen, as every status line is while it is up.
pub fn open(resolution: Resolution, write: bool) -> Result<Box<dyn Store>> {
    let (store, note) = crate::store::place::open(resolution, write).map_err(|err| match err {
        crate::store::StoreError::Invalid(message) => Failure::usage(message),
        other => other.into(),
    })?;
    if let Some(note) = note {
        crate::render::output::status(&note);
    }
    Ok(store)
}
