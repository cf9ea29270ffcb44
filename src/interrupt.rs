//! Ctrl-C, the same for every front end: it marks the run interrupted (the loop that is
//! acting lets the entry in flight finish, then stops and says what was done), and the
//! error that ends the run carries that account. And the signals that stop a
//! long-running process ([`StopSignals`]), watched before it starts.

use crate::exit::{ExitKind, Failure};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

/// What a run has done so far, printed if Ctrl-C ends it.
static PROGRESS: Mutex<String> = Mutex::new(String::new());
/// Set by Ctrl-C while the run is acting; the loop stops before the next entry.
static INTERRUPTED: AtomicBool = AtomicBool::new(false);
static INSTALLED: AtomicBool = AtomicBool::new(false);

/// Records what has been done so far (replaces the previous account).
pub fn set_progress(account: &str) {
    let mut progress = PROGRESS.lock().unwrap_or_else(|p| p.into_inner());
    progress.clear();
    progress.push_str(account);
}

/// Whether Ctrl-C asked the run to stop.
pub fn interrupted() -> bool {
    INTERRUPTED.load(Ordering::SeqCst)
}

/// The error that ends a run after Ctrl-C, with the account of what was already done.
pub fn interrupted_error() -> Failure {
    Failure::new(ExitKind::Interrupted, interrupted_text())
}

/// "interrupted (Ctrl-C): " and what was done before it.
pub fn interrupted_text() -> String {
    let account = PROGRESS
        .lock()
        .map(|p| p.clone())
        .unwrap_or_else(|p| p.into_inner().clone());
    let done = if account.is_empty() {
        "nothing was changed".to_string()
    } else {
        format!("done before the interrupt: {account}; nothing else was changed")
    };
    format!("interrupted (Ctrl-C): {done}")
}

/// The error that ends a run after Ctrl-C when the caller has already said what was
/// done: nothing more is printed.
pub fn interrupted_quietly() -> Failure {
    Failure::new(ExitKind::Interrupted, "")
}

/// Installs the Ctrl-C handler once: it marks the run interrupted, so a loop that is acting
/// lets the entry in flight finish, then stops and reports. (At a prompt, Ctrl-C is a key
/// that `ask` reads itself.)
pub fn install_interrupt_handler() {
    if INSTALLED.swap(true, Ordering::SeqCst) {
        return;
    }
    let Ok(mut signals) = signal_hook::iterator::Signals::new([signal_hook::consts::SIGINT]) else {
        return;
    };
    let spawned = std::thread::Builder::new()
        .name("unsctl-interrupt".into())
        .spawn(move || {
            for _ in signals.forever() {
                INTERRUPTED.store(true, Ordering::SeqCst);
            }
        });
    if spawned.is_err() {
        INSTALLED.store(false, Ordering::SeqCst);
    }
}

/// SIGINT and SIGTERM, the signals that stop a long-running process (`runtime serve`,
/// `runtime worker`), watched from the moment [`StopSignals::watch`] returns. A process
/// watches before it starts any work and before it says it has started: one stopped
/// the moment it said so (a supervisor, a deploy that changed its mind) drains what it
/// holds and exits 0, rather than die by the signal's default with a provider call in
/// flight and its lease left to run out.
pub struct StopSignals(signal_hook::iterator::Signals);

impl StopSignals {
    pub fn watch() -> std::io::Result<Self> {
        use signal_hook::consts::{SIGINT, SIGTERM};
        Ok(Self(signal_hook::iterator::Signals::new([
            SIGINT, SIGTERM,
        ])?))
    }

    /// Blocks until one of them arrives (false: the watch itself ended). Those that
    /// come later, while the process stops, are taken and ignored as long as this is
    /// kept.
    pub fn wait(&mut self) -> bool {
        self.0.forever().next().is_some()
    }
}
