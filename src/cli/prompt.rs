//! Questions at a terminal: an answer is a typed line ended by Enter, never a single key,
//! and Ctrl-C anywhere ends the run with an account of what was already done.
//!
//! Lines are read in the terminal's cooked mode, so the terminal itself echoes and edits
//! them and nothing here ever hides the cursor or leaves the terminal in raw mode.
//!
//! Ctrl-C never ends the process from here: at a prompt it wakes the read, which returns
//! `Interrupted`; while acting it lets the entry in flight finish. Either way the command
//! returns an `ExitKind::Interrupted` error carrying the account, and `main` exits 130.

use super::error::{CliError, ExitKind, Interrupted};
use std::io::{IsTerminal, Read, Write};
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::{Mutex, OnceLock};

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
/// The write end of the pipe that wakes a prompt's read on Ctrl-C (-1: none).
static WAKE_WRITE: AtomicI32 = AtomicI32::new(-1);
/// The read end of that pipe.
static WAKE_READ: OnceLock<RawFd> = OnceLock::new();

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
pub fn interrupted_error() -> CliError {
    CliError::new(ExitKind::Interrupted, interrupted_text())
}

/// "interrupted (Ctrl-C): " and what was done before it.
fn interrupted_text() -> String {
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
pub fn interrupted_quietly() -> CliError {
    CliError::new(ExitKind::Interrupted, "")
}

/// Whether `err` is a prompt woken by Ctrl-C.
fn is_ctrl_c(err: &std::io::Error) -> bool {
    err.get_ref().is_some_and(|inner| inner.is::<Interrupted>())
}

/// What a prompt's read returns when Ctrl-C woke it: the account, ready for `main`.
fn ctrl_c() -> std::io::Error {
    std::io::Error::new(
        std::io::ErrorKind::Interrupted,
        Interrupted(interrupted_text()),
    )
}

/// The pipe a Ctrl-C writes to, so a prompt blocked on stdin wakes up.
fn wake_pipe() -> Option<RawFd> {
    let read = *WAKE_READ.get_or_init(|| {
        let mut fds = [-1; 2];
        // SAFETY: `fds` has room for the two descriptors pipe2 writes.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC | libc::O_NONBLOCK) } != 0 {
            return -1;
        }
        WAKE_WRITE.store(fds[1], Ordering::SeqCst);
        fds[0]
    });
    (read >= 0).then_some(read)
}

fn wake_prompt() {
    let write = WAKE_WRITE.load(Ordering::SeqCst);
    if write >= 0 {
        // SAFETY: writing one byte from a live buffer to a descriptor we own.
        let _ = unsafe { libc::write(write, b"!".as_ptr().cast(), 1) };
    }
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
                    wake_prompt();
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
    fn enter() -> std::io::Result<Self> {
        AT_PROMPT.store(true, Ordering::SeqCst);
        if interrupted() {
            AT_PROMPT.store(false, Ordering::SeqCst);
            return Err(ctrl_c());
        }
        Ok(AtPrompt)
    }
}

impl Drop for AtPrompt {
    fn drop(&mut self) {
        AT_PROMPT.store(false, Ordering::SeqCst);
    }
}

/// Asks `question` on stderr and reads one line from stdin, trimmed. `None` means the
/// input ended (Ctrl-D), which every caller treats as "do nothing".
///
/// Ctrl-C while it waits returns an `Interrupted` error (see `is_ctrl_c`).
pub fn ask(question: &str) -> std::io::Result<Option<String>> {
    let wake = wake_pipe();
    install_interrupt_handler();
    let _waiting = AtPrompt::enter()?;
    let mut stderr = std::io::stderr().lock();
    stderr.write_all(question.as_bytes())?;
    if !question.ends_with(' ') {
        stderr.write_all(b" ")?;
    }
    stderr.flush()?;
    drop(stderr);
    match wake {
        Some(wake) => read_answer(&mut WakeableStdin { wake }),
        None => read_answer(&mut std::io::stdin().lock()),
    }
}

/// Stdin read a byte at a time (never more than the answer), giving up when Ctrl-C writes
/// to the wake pipe.
struct WakeableStdin {
    wake: RawFd,
}

impl WakeableStdin {
    /// Waits until stdin has a byte, or Ctrl-C asked to stop.
    fn wait(&self) -> std::io::Result<()> {
        let mut fds = [
            libc::pollfd {
                fd: libc::STDIN_FILENO,
                events: libc::POLLIN,
                revents: 0,
            },
            libc::pollfd {
                fd: self.wake,
                events: libc::POLLIN,
                revents: 0,
            },
        ];
        loop {
            // SAFETY: `fds` is a live array of two pollfd, and we pass its length.
            let ready = unsafe { libc::poll(fds.as_mut_ptr(), 2, -1) };
            if ready < 0 {
                let err = std::io::Error::last_os_error();
                if err.kind() == std::io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(err);
            }
            if fds[1].revents != 0 || interrupted() {
                return Err(ctrl_c());
            }
            if fds[0].revents != 0 {
                return Ok(());
            }
        }
    }
}

impl Read for WakeableStdin {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        self.wait()?;
        // SAFETY: reading at most one byte into a live buffer of at least one byte.
        let read = unsafe { libc::read(libc::STDIN_FILENO, buf.as_mut_ptr().cast(), 1) };
        if read < 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(read as usize)
    }
}

/// An answer longer than this is not an answer; reading stops there.
const MAX_ANSWER: usize = 4096;

/// One answer line from `input`, trimmed; `None` at end of input. Read a byte at a time,
/// so nothing past the line is taken from the terminal.
pub fn read_answer<R: Read>(input: &mut R) -> std::io::Result<Option<String>> {
    let mut line = Vec::new();
    let mut byte = [0u8; 1];
    while line.len() < MAX_ANSWER {
        match input.read(&mut byte) {
            Ok(0) => break,
            Ok(_) if byte[0] == b'\n' => {
                line.push(b'\n');
                break;
            }
            Ok(_) => line.push(byte[0]),
            Err(err) if err.kind() == std::io::ErrorKind::Interrupted && !is_ctrl_c(&err) => {}
            Err(err) => return Err(err),
        }
    }
    if line.is_empty() {
        return Ok(None);
    }
    Ok(Some(String::from_utf8_lossy(&line).trim().to_string()))
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
