//! Questions at a terminal: an answer is a typed line ended by Enter, never a single key,
//! and Ctrl-C anywhere ends the run with an account of what was already done.
//!
//! Lines are read in the terminal's cooked mode, so the terminal itself echoes and edits
//! them and nothing here ever hides the cursor or leaves the terminal in raw mode.

use std::io::{BufRead, IsTerminal, Read, Write};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

/// The exit code of a run ended by Ctrl-C (128 + SIGINT), as shells report it.
pub const INTERRUPTED_EXIT: i32 = 130;

/// Whether a person can answer: both stdin and stderr are terminals.
pub fn interactive() -> bool {
    std::io::stdin().is_terminal() && std::io::stderr().is_terminal()
}

/// What a run has done so far, printed if Ctrl-C ends it.
static PROGRESS: Mutex<String> = Mutex::new(String::new());
/// Set while the run waits at a prompt: nothing is in flight, so Ctrl-C may end it at once.
static AT_PROMPT: AtomicBool = AtomicBool::new(false);
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

/// Ends the process after Ctrl-C: the terminal restored, the account printed, exit 130.
pub fn exit_interrupted() -> ! {
    let account = PROGRESS
        .lock()
        .map(|p| p.clone())
        .unwrap_or_else(|p| p.into_inner().clone());
    let mut stderr = std::io::stderr().lock();
    if std::io::stderr().is_terminal() {
        // Show the cursor again, in case a progress bar had hidden it.
        let _ = stderr.write_all(b"\x1b[?25h");
    }
    let done = if account.is_empty() {
        "nothing was changed".to_string()
    } else {
        format!("done before the interrupt: {account}; nothing else was changed")
    };
    let _ = writeln!(stderr, "\ninterrupted (Ctrl-C): {done}");
    let _ = stderr.flush();
    std::process::exit(INTERRUPTED_EXIT)
}

/// Ends the process after Ctrl-C when the caller has already said what was done: the
/// cursor shown again, exit 130.
pub fn exit_interrupted_quietly() -> ! {
    if std::io::stderr().is_terminal() {
        let _ = std::io::stderr().write_all(b"\x1b[?25h");
    }
    let _ = std::io::stdout().flush();
    std::process::exit(INTERRUPTED_EXIT)
}

/// Installs the Ctrl-C handler once. At a prompt it ends the run at once; while acting it
/// lets the entry in flight finish, then the loop stops and reports.
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
                if AT_PROMPT.load(Ordering::SeqCst) {
                    exit_interrupted();
                }
            }
        });
    if spawned.is_err() {
        INSTALLED.store(false, Ordering::SeqCst);
    }
}

/// Marks the run as waiting at a prompt for as long as it lives.
struct AtPrompt;

impl AtPrompt {
    fn enter() -> Self {
        AT_PROMPT.store(true, Ordering::SeqCst);
        if interrupted() {
            exit_interrupted();
        }
        AtPrompt
    }
}

impl Drop for AtPrompt {
    fn drop(&mut self) {
        AT_PROMPT.store(false, Ordering::SeqCst);
    }
}

/// Asks `question` on stderr and reads one line from stdin, trimmed. `None` means the
/// input ended (Ctrl-D), which every caller treats as "do nothing".
pub fn ask(question: &str) -> std::io::Result<Option<String>> {
    install_interrupt_handler();
    let _waiting = AtPrompt::enter();
    let mut stderr = std::io::stderr().lock();
    stderr.write_all(question.as_bytes())?;
    if !question.ends_with(' ') {
        stderr.write_all(b" ")?;
    }
    stderr.flush()?;
    drop(stderr);
    read_answer(&mut std::io::stdin().lock())
}

/// One answer line from `input`, trimmed; `None` at end of input.
pub fn read_answer<R: BufRead>(input: &mut R) -> std::io::Result<Option<String>> {
    let mut line = String::new();
    // An answer longer than this is not an answer; reading stops there.
    let read = BufRead::read_line(&mut Read::take(input, 4096), &mut line)?;
    if read == 0 {
        return Ok(None);
    }
    Ok(Some(line.trim().to_string()))
}

/// The word a confirmation needs: `yes`, or past ten entries the count itself.
pub fn confirmation_word(count: usize) -> String {
    if count > 10 {
        count.to_string()
    } else {
        "yes".to_string()
    }
}

/// Asks "`head`: first ten labels and N more?" and whether the typed answer is the
/// confirmation word for `count` (the count itself past ten). `labels` are already
/// made safe to show.
pub fn confirm_listed(head: &str, labels: &[String], count: usize) -> std::io::Result<bool> {
    let shown: Vec<&str> = labels.iter().take(10).map(String::as_str).collect();
    let more = if count > 10 {
        format!(" and {} more", count - 10)
    } else {
        String::new()
    };
    let word = confirmation_word(count);
    let answer = ask(&format!(
        "{head}: {}{more}?\nType {word} and press Enter to go ahead (anything else does nothing):",
        shown.join(", ")
    ))?;
    Ok(confirms(answer.as_deref(), count))
}

/// Whether `answer` is exactly the confirmation word (case-insensitive for `yes`).
pub fn confirms(answer: Option<&str>, count: usize) -> bool {
    let expected = confirmation_word(count);
    answer.is_some_and(|a| a.eq_ignore_ascii_case(&expected))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_whole_word_confirms() {
        for stray in ["y", "Y", "ye", "yes please", "", "no", "j", " "] {
            assert!(!confirms(Some(stray.trim()), 1), "{stray:?}");
        }
        assert!(confirms(Some("yes"), 1));
        assert!(confirms(Some("YES"), 3));
        assert!(!confirms(None, 1));
        assert!(!confirms(Some("yes"), 11), "past ten the count is needed");
        assert!(confirms(Some("11"), 11));
        assert!(!confirms(Some("12"), 11));
    }

    #[test]
    fn answers_are_lines() {
        let mut input: &[u8] = b"  replay  \nrest";
        assert_eq!(
            read_answer(&mut input).ok().flatten().as_deref(),
            Some("replay")
        );
        let mut empty: &[u8] = b"";
        assert_eq!(read_answer(&mut empty).ok(), Some(None));
    }
}
