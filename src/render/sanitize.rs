//! The one sanitizer: every byte of store, provider or client text that reaches a
//! terminal in tables or plain output passes through here, so an escape sequence in an
//! error message or an id can never move the cursor, clear the screen or retitle the
//! window. JSON output is left exact; its encoder escapes control characters itself.

use std::borrow::Cow;
use std::fmt::Write;

/// Whether `c` must not reach a terminal raw: the same characters no composed command
/// may hold.
fn hostile(c: char) -> bool {
    crate::model::command::unprintable(c)
}

/// Store or provider text shown in a sentence: in double quotes, its own quotes and
/// backslashes escaped and its control characters shown escaped, so whatever it holds
/// (a command, a quote that would end ours) reads as quoted text, never as one of
/// unsctl's own steps. Wrapping keeps commands whole only outside quotes.
pub fn quoted(text: &str) -> String {
    // One pass over the text as it was: a backslash of its own is doubled, and the
    // backslash of an escape made here is not (it would read `\\u{202e}`).
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '"' | '\\' => {
                out.push('\\');
                out.push(c);
            }
            c => push_shown(&mut out, c),
        }
    }
    out.push('"');
    out
}

/// Whether `text` leaves a [`quoted`] span open: an unescaped double quote without its
/// closing one, as a cut leaves it.
pub fn quote_open(text: &str) -> bool {
    let mut open = false;
    let mut escaped = false;
    for c in text.chars() {
        match c {
            '\\' if open && !escaped => {
                escaped = true;
                continue;
            }
            '"' if !escaped => open = !open,
            _ => {}
        }
        escaped = false;
    }
    open
}

/// `text` with every control character shown escaped (`\x1b`, `\n`, `\u{202e}`).
/// [`clean`], owned: for text kept in an answer or an evidence line.
pub fn cleaned(text: &str) -> String {
    clean(text).into_owned()
}

pub fn clean(text: &str) -> Cow<'_, str> {
    if !crate::model::command::holds_unprintable(text) {
        return Cow::Borrowed(text);
    }
    let mut cleaned = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        push_shown(&mut cleaned, c);
    }
    Cow::Owned(cleaned)
}

/// `c` as a terminal may be shown it: itself, or escaped.
fn push_shown(out: &mut String, c: char) {
    match c {
        '\n' => out.push_str("\\n"),
        '\r' => out.push_str("\\r"),
        '\t' => out.push_str("\\t"),
        c if (c as u32) < 0x100 && hostile(c) => {
            let _ = write!(out, "\\x{:02x}", c as u32);
        }
        c if hostile(c) => {
            let _ = write!(out, "\\u{{{:x}}}", c as u32);
        }
        c => out.push(c),
    }
}

/// Like [`clean`], cut to `max` characters with a marker saying how much was left out;
/// tables use it so one huge value cannot take the screen (JSON keeps values whole).
pub fn clip(text: &str, max: usize) -> Cow<'_, str> {
    match cut(text, max) {
        (kept, None) => clean(kept),
        (kept, Some(marker)) => Cow::Owned(format!("{}{marker}", clean(kept))),
    }
}

/// `text` cut to `max` characters, as it was (not made safe to show), and the marker
/// saying how much was left out, if anything was.
pub fn cut(text: &str, max: usize) -> (&str, Option<String>) {
    match text.char_indices().nth(max) {
        None => (text, None),
        Some(_) => {
            let end = text
                .char_indices()
                .nth(max.saturating_sub(1))
                .map_or(text.len(), |(at, _)| at);
            let dropped = text.len() - end;
            (&text[..end], Some(format!("… (+{dropped} bytes)")))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoted_text_is_escaped_once() {
        assert_eq!(quoted("evil \u{202e}txt"), "\"evil \\u{202e}txt\"");
        assert_eq!(quoted("a \"b\" c\\d"), "\"a \\\"b\\\" c\\\\d\"");
        assert_eq!(quoted("line\nbreak"), "\"line\\nbreak\"");
    }

    #[test]
    fn control_bytes_are_shown_escaped() {
        assert_eq!(clean("plain text"), "plain text");
        assert_eq!(clean("\x1b[2Jgone"), "\\x1b[2Jgone");
        assert_eq!(clean("a\nb\tc\rd"), "a\\nb\\tc\\rd");
        assert_eq!(clean("\u{9b}31m"), "\\x9b31m");
        assert_eq!(clean("\x07\x7f"), "\\x07\\x7f");
        assert_eq!(clean("abc\u{202e}cba"), "abc\\u{202e}cba");
        assert_eq!(clean("a\u{61c}b\u{e0041}c"), "a\\u{61c}b\\u{e0041}c");
        assert_eq!(clean("héllo ✓"), "héllo ✓");
    }

    #[test]
    fn long_values_are_clipped_with_a_marker() {
        let long = "x".repeat(10_000);
        let clipped = clip(&long, 20);
        assert!(clipped.starts_with("xxxxxxxxxxxxxxxxxxx…"), "{clipped}");
        assert!(clipped.ends_with("(+9981 bytes)"), "{clipped}");
        assert_eq!(clip("short", 20), "short");
        assert_eq!(clip("\x1b", 20), "\\x1b");
    }
}
