//! Questions at a terminal: an answer is a typed line ended by Enter, never a single key,
//! and Ctrl-C anywhere ends the run with an account of what was already done.
//!
//! Lines are read by dialoguer's `Input`, which holds the terminal in raw mode only while
//! it reads a key, and shows the cursor again when it is done.
//!
//! Ctrl-C never ends the process from here: at a prompt it is a key, and the read returns
//! `Interrupted`; while acting, the signal lets the entry in flight finish. Either way
//! the command returns an `ExitKind::Interrupted` error carrying the account, and `main`
//! exits 130.

use super::error::Interrupted;
use crate::interrupt::interrupted_text;
pub use crate::interrupt::{
    install_interrupt_handler, interrupted, interrupted_error, interrupted_quietly, set_progress,
};
use std::io::IsTerminal;

/// Whether a person can answer: both stdin and stderr are terminals.
pub fn interactive() -> bool {
    std::io::stdin().is_terminal() && std::io::stderr().is_terminal()
}

/// What a prompt's read returns when Ctrl-C woke it: the account, ready for `main`.
fn ctrl_c() -> std::io::Error {
    std::io::Error::new(
        std::io::ErrorKind::Interrupted,
        Interrupted(interrupted_text()),
    )
}

/// Asks `question` on stderr and reads one line, trimmed, through dialoguer's `Input`:
/// the typed line counts only when Enter ends it. `None` means the input ended (Ctrl-D),
/// which every caller treats as "do nothing".
///
/// The terminal is in raw mode only while a key is read, so Ctrl-C there arrives as a
/// key: it returns an `Interrupted` error with the account, and the
/// terminal is as it was. A SIGINT sent from elsewhere while the prompt waits is taken
/// when the answer comes, the same way.
pub fn ask(question: &str) -> std::io::Result<Option<String>> {
    install_interrupt_handler();
    if interrupted() {
        return Err(ctrl_c());
    }
    let term = console::Term::stderr();
    // dialoguer redraws its prompt by counting lines, not the rows a long line wraps
    // into: the lines before the last are printed here, and the last is wrapped to the
    // terminal so that each of its lines is one row.
    let width = term
        .size_checked()
        .map_or(80, |(_, columns)| columns as usize)
        .saturating_sub(1);
    let question = wrapped(question.trim_end(), width);
    let (head, last) = question.rsplit_once('\n').unwrap_or(("", &question));
    if !head.is_empty() {
        term.write_line(head)?;
    }
    let last = last.to_string();
    let answer = dialoguer::Input::<String>::with_theme(&Plain)
        .with_prompt(last)
        .allow_empty(true)
        .validate_with(|text: &String| {
            if text.len() > MAX_ANSWER {
                Err(format!("an answer is at most {MAX_ANSWER} bytes"))
            } else {
                Ok(())
            }
        })
        .interact_text_on(&term);
    let _ = term.show_cursor();
    let answer = match answer {
        Ok(text) => Some(text.trim().to_string()),
        Err(dialoguer::Error::IO(err)) if err.kind() == std::io::ErrorKind::Interrupted => {
            let _ = term.write_line("");
            return Err(ctrl_c());
        }
        Err(dialoguer::Error::IO(err)) if err.kind() == std::io::ErrorKind::UnexpectedEof => None,
        Err(dialoguer::Error::IO(err)) => return Err(err),
    };
    if interrupted() {
        return Err(ctrl_c());
    }
    Ok(answer)
}

/// The prompt as written, a space, and the answer after it: no decoration.
struct Plain;

impl dialoguer::theme::Theme for Plain {
    fn format_input_prompt(
        &self,
        f: &mut dyn std::fmt::Write,
        prompt: &str,
        _default: Option<&str>,
    ) -> std::fmt::Result {
        write!(f, "{prompt} ")
    }

    fn format_input_prompt_selection(
        &self,
        f: &mut dyn std::fmt::Write,
        prompt: &str,
        answer: &str,
    ) -> std::fmt::Result {
        write!(f, "{prompt} {answer}")
    }
}

/// An answer longer than this is not an answer: the prompt asks again.
const MAX_ANSWER: usize = 4096;

/// Asks `question`, after the lines of `context`, with the first ten of `labels` one per
/// line under it (each once, as given: already made safe to show) and how many more,
/// and whether the typed answer is the confirmation word for `count` (the count itself
/// past ten).
pub fn confirm_listed(
    context: &[String],
    question: &str,
    labels: &[String],
    count: usize,
) -> std::io::Result<bool> {
    Ok(crate::session::confirms(
        ask(&listed_question(context, question, labels, count))?.as_deref(),
        count,
    ))
}

/// The text [`confirm_listed`] asks: context, the question, its labels indented one per
/// line, then what to type.
pub fn listed_question(
    context: &[String],
    question: &str,
    labels: &[String],
    count: usize,
) -> String {
    let mut text = String::new();
    for line in context {
        text.push_str(line);
        text.push('\n');
    }
    text.push_str(question);
    text.push('\n');
    for label in labels.iter().take(10) {
        text.push_str("  ");
        text.push_str(label);
        text.push('\n');
    }
    if count > 10 {
        text.push_str(&format!("  and {} more\n", count - 10));
    }
    text.push_str(&format!(
        "Type {} and press Enter to go ahead (anything else does nothing):",
        crate::session::confirmation_word(count)
    ));
    text
}

/// `text` wrapped at word boundaries to `width` columns, line by line: a line keeps its
/// indent, and what it wraps onto is indented two more. A word longer than the width
/// (an id, a path) is never broken.
pub fn wrapped(text: &str, width: usize) -> String {
    let width = width.max(20);
    text.lines()
        .map(|line| {
            let indent: String = line.chars().take_while(|c| *c == ' ').collect();
            let more = format!("{indent}  ");
            let options = textwrap::Options::new(width)
                .break_words(false)
                .subsequent_indent(&more);
            textwrap::wrap(line, options).join("\n")
        })
        .collect::<Vec<_>>()
        .join("\n")
}
