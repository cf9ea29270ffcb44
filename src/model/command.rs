//! The commands unsctl composes for a person to paste or a script to run (DESIGN §5):
//! unsctl's own words as it wrote them, and every value it did not write (an id, a path,
//! a context's name) quoted for a POSIX shell, so the line passes each value as one word
//! and runs nothing else. A value that cannot stand on one line is never put in one.
//!
//! The quoting is the `shlex` crate's; what it does not cover (control characters, which
//! no quoting makes safe to paste into an interactive shell, and an operand that a parser
//! would take for a flag) is refused or placed here.

use std::fmt;

/// What an entry's id is called where it cannot be written: the one value whose command
/// can be replaced by naming the entry another way.
pub const THE_ID: &str = "the id";

/// What a printed step holds where only a person can say why: the step stays whole, and
/// the guardrails take these words for no reason at all ([`placeholder_of`]), so a step
/// pasted unchanged never puts in the audit record a reason nobody wrote.
pub const WHAT_WAS_FIXED: &str = "what was fixed";
pub const WHY_GIVEN_UP: &str = "why it is given up";

/// `placeholder` as a step writes it: `'what was fixed'`.
pub fn placeholder(placeholder: &str) -> String {
    quote(placeholder)
}

/// The placeholder `reason` is, as a shell or a copy may have left it: any case, any
/// spacing, in its quotes or not.
pub fn placeholder_of(reason: &str) -> Option<&'static str> {
    let words: Vec<&str> = reason
        .trim()
        .trim_matches(|c| matches!(c, '\'' | '"' | '`'))
        .split_whitespace()
        .collect();
    let said = words.join(" ");
    [WHAT_WAS_FIXED, WHY_GIVEN_UP]
        .into_iter()
        .find(|p| said.eq_ignore_ascii_case(p))
}

/// Why a value cannot stand on one line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Unfit {
    #[error("it is empty")]
    Empty,
    #[error("it holds a line break")]
    LineBreak,
    #[error("it holds a control or direction character")]
    Unprintable,
}

/// A value that cannot be written into a command line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{what} cannot be written on one command line: {why}")]
pub struct Unwritable {
    /// What the value is ("the id", "the relay log's path").
    pub what: String,
    pub why: Unfit,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Part {
    /// unsctl's own text, as written.
    Word(String),
    /// A value, quoted when written; an operand, so it may need `--` before it.
    Operand(String),
    /// `--name value`, the value quoted.
    Valued(&'static str, String),
}

/// One command, kept in parts until it is written, so a context or a shorter id can be
/// put in without editing text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandLine {
    parts: Vec<Part>,
}

impl CommandLine {
    /// `unsctl` followed by its own `words` (a subcommand, flags it wrote).
    pub fn unsctl(words: &[&str]) -> Self {
        let mut line = Self { parts: Vec::new() };
        line.parts.push(Part::Word("unsctl".into()));
        line.words(words)
    }

    /// unsctl's own words, as written.
    pub fn words(mut self, words: &[&str]) -> Self {
        self.parts
            .extend(words.iter().map(|w| Part::Word((*w).to_string())));
        self
    }

    /// An operand (an id, a path) that unsctl did not write; `what` names it in the error.
    pub fn operand(mut self, what: &str, value: &str) -> Result<Self, Unwritable> {
        check(what, value)?;
        self.parts.push(Part::Operand(value.to_string()));
        Ok(self)
    }

    /// Every one of `values` as an operand.
    pub fn operands<'v>(
        mut self,
        what: &str,
        values: impl IntoIterator<Item = &'v str>,
    ) -> Result<Self, Unwritable> {
        for value in values {
            self = self.operand(what, value)?;
        }
        Ok(self)
    }

    /// `--flag value` (`--flag=value` where the value starts with `-`), where unsctl did
    /// not write the value.
    pub fn valued(mut self, flag: &'static str, value: &str) -> Result<Self, Unwritable> {
        check(flag, value)?;
        self.parts.push(Part::Valued(flag, value.to_string()));
        Ok(self)
    }

    /// The same command run in another store: `unsctl --context NAME ...`.
    pub fn in_context(&self, context: &str) -> Result<Self, Unwritable> {
        check("the context's name", context)?;
        let mut parts = self.parts.clone();
        let at = usize::from(matches!(parts.first(), Some(Part::Word(w)) if w == "unsctl"));
        parts.insert(at, Part::Valued("--context", context.to_string()));
        Ok(Self { parts })
    }

    /// The same command with every operand equal to `from` written as `to` (a unique
    /// prefix in place of a long id).
    pub fn with_operand(&self, from: &str, to: &str) -> Result<Self, Unwritable> {
        check(THE_ID, to)?;
        let parts = self
            .parts
            .iter()
            .map(|part| match part {
                Part::Operand(value) if value == from => Part::Operand(to.to_string()),
                other => other.clone(),
            })
            .collect();
        Ok(Self { parts })
    }

    /// The operands, as given (unquoted).
    pub fn operand_values(&self) -> impl Iterator<Item = &str> {
        self.parts.iter().filter_map(|part| match part {
            Part::Operand(value) => Some(value.as_str()),
            _ => None,
        })
    }
}

impl fmt::Display for CommandLine {
    /// The line as a POSIX shell reads it. Where an operand starts with `-`, every operand
    /// goes after a `--`, so none is taken for a flag.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let dashed = self
            .parts
            .iter()
            .any(|part| matches!(part, Part::Operand(value) if value.starts_with('-')));
        let mut words: Vec<String> = Vec::with_capacity(self.parts.len() + 1);
        let mut operands: Vec<String> = Vec::new();
        for part in &self.parts {
            match part {
                Part::Word(word) => words.push(word.clone()),
                Part::Operand(value) if dashed => operands.push(quote(value)),
                Part::Operand(value) => words.push(quote(value)),
                // `--flag=value` only where the value could pass for a flag.
                Part::Valued(flag, value) if value.starts_with('-') => {
                    words.push(format!("{flag}={}", quote(value)));
                }
                Part::Valued(flag, value) => {
                    words.push((*flag).to_string());
                    words.push(quote(value));
                }
            }
        }
        if dashed {
            words.push("--".into());
            words.extend(operands);
        }
        f.write_str(&words.join(" "))
    }
}

impl serde::Serialize for CommandLine {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

/// What to do next: a command, a command after something a person must do first, or
/// words alone where no command can be written. Shown and serialised as one line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    Run(CommandLine),
    /// `first` is a sentence of unsctl's (provider text in it is quoted as data).
    After {
        first: String,
        then: CommandLine,
    },
    Words(String),
}

impl Step {
    /// `line`, or why it could not be written, as words that name no command.
    pub fn run(line: Result<CommandLine, Unwritable>) -> Self {
        match line {
            Ok(line) => Step::Run(line),
            Err(err) => Step::unwritable(&err),
        }
    }

    /// `first`, then `line`.
    pub fn after(first: String, line: Result<CommandLine, Unwritable>) -> Self {
        match line {
            Ok(then) => Step::After { first, then },
            Err(err) => Step::unwritable(&err),
        }
    }

    /// What stands in for a command that cannot be written: why, and what to do
    /// instead. An entry named by a prefix of its id (which the id rule lets stop before
    /// the character that cannot be written) or picked in the screen needs no command
    /// with its id; any other value must be given another way.
    pub fn unwritable(err: &Unwritable) -> Self {
        let instead = if err.what != THE_ID {
            "so give that value another way (a path without it, a link) and write the command by hand"
        } else if err.why == Unfit::Empty {
            "so pick it in the live screen (the `tui` command) instead"
        } else {
            "so name it by a unique prefix of its id that ends before that, or pick it in the live screen"
        };
        Step::Words(format!("none: {err}, {instead}"))
    }

    /// The command in it, if any.
    pub fn command(&self) -> Option<&CommandLine> {
        match self {
            Step::Run(line) | Step::After { then: line, .. } => Some(line),
            Step::Words(_) => None,
        }
    }

    /// The command alone, or the words where there is none.
    pub fn command_text(&self) -> String {
        match self.command() {
            Some(line) => line.to_string(),
            None => self.to_string(),
        }
    }

    /// The same step, its command changed by `change`.
    pub fn map(
        &self,
        change: impl FnOnce(&CommandLine) -> Result<CommandLine, Unwritable>,
    ) -> Self {
        match self {
            Step::Run(line) => Step::run(change(line)),
            Step::After { first, then } => Step::after(first.clone(), change(then)),
            Step::Words(words) => Step::Words(words.clone()),
        }
    }

    /// The same step, run in `context`.
    pub fn in_context(&self, context: &str) -> Self {
        self.map(|line| line.in_context(context))
    }
}

impl Default for Step {
    fn default() -> Self {
        Step::Words(String::new())
    }
}

impl fmt::Display for Step {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Step::Run(line) => write!(f, "{line}"),
            Step::After { first, then } => write!(f, "{first}, then: {then}"),
            Step::Words(words) => f.write_str(words),
        }
    }
}

impl serde::Serialize for Step {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

/// `unsctl WORDS ID REST` in backquotes, ready to paste inside a sentence, the id quoted
/// as data; or why no command can carry the id.
pub fn pasted(words: &[&str], id: &str, rest: &[&str]) -> String {
    match CommandLine::unsctl(words).operand(THE_ID, id) {
        Ok(line) => format!("`{}`", line.words(rest)),
        Err(err) => format!("(no command: {err})"),
    }
}

/// `value` as one word of a shell line (a path in `export UNS_DB_FILE=...`), or why it
/// cannot be one.
pub fn word(what: &str, value: &str) -> Result<String, Unwritable> {
    check(what, value)?;
    Ok(quote(value))
}

/// Whether `value` can stand in a command line: not empty, and no character that no
/// quoting makes safe to paste (a control character, a line or paragraph separator, a
/// character that reorders what the terminal shows).
fn check(what: &str, value: &str) -> Result<(), Unwritable> {
    let unwritable = |why| {
        Err(Unwritable {
            what: what.to_string(),
            why,
        })
    };
    if value.is_empty() {
        return unwritable(Unfit::Empty);
    }
    if value.contains(['\n', '\r']) {
        return unwritable(Unfit::LineBreak);
    }
    if value.chars().any(unprintable) {
        return unwritable(Unfit::Unprintable);
    }
    Ok(())
}

/// Whether `c` may not reach a terminal raw, nor stand in a command: C0 and C1 controls,
/// DEL, the line and paragraph separators, and Unicode's format characters.
pub fn unprintable(c: char) -> bool {
    if c.is_ascii() {
        return c.is_ascii_control();
    }
    c.is_control() || matches!(c, '\u{2028}' | '\u{2029}') || format_character(c)
}

/// Whether `text` holds a character that is [`unprintable`]. Printable ASCII, most of
/// what a store or a provider writes, is told by its bytes alone.
pub fn holds_unprintable(text: &str) -> bool {
    !text.bytes().all(|b| (0x20..0x7f).contains(&b)) && text.chars().any(unprintable)
}

/// Unicode's format characters (general category Cf, Unicode 16): invisible, and among
/// them every mark that reorders the text around it (the embeddings, overrides and
/// isolates, and the left-to-right, right-to-left and Arabic letter marks), the joiners
/// and the tags, which carry text no one sees.
fn format_character(c: char) -> bool {
    matches!(c,
        '\u{ad}' | '\u{600}'..='\u{605}' | '\u{61c}' | '\u{6dd}' | '\u{70f}'
        | '\u{890}'..='\u{891}' | '\u{8e2}' | '\u{180e}' | '\u{200b}'..='\u{200f}'
        | '\u{202a}'..='\u{202e}' | '\u{2060}'..='\u{2064}' | '\u{2066}'..='\u{206f}'
        | '\u{feff}' | '\u{fff9}'..='\u{fffb}' | '\u{110bd}' | '\u{110cd}'
        | '\u{13430}'..='\u{1343f}' | '\u{1bca0}'..='\u{1bca3}' | '\u{1d173}'..='\u{1d17a}'
        | '\u{e0001}' | '\u{e0020}'..='\u{e007f}')
}

/// `value` as one word for a POSIX shell. Checked first, so it holds no NUL and
/// `shlex` cannot refuse it; should it, the value is written in single quotes by the
/// same rule.
fn quote(value: &str) -> String {
    match shlex::try_quote(value) {
        Ok(quoted) => quoted.into_owned(),
        Err(_) => format!("'{}'", value.replace('\'', r"'\''")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(line: &CommandLine) -> Vec<String> {
        shlex::split(&line.to_string()).expect("splits")
    }

    #[test]
    fn a_placeholder_is_told_however_a_copy_left_it_and_a_reason_of_ones_own_is_not() {
        for pasted in [
            "what was fixed",
            "'what was fixed'",
            " \"What  was\tFIXED\" ",
            "`why it is given up`",
            "WHY IT IS GIVEN UP",
        ] {
            assert!(placeholder_of(pasted).is_some(), "{pasted:?}");
        }
        for own in [
            "what was fixed: the webhook URL",
            "channel recreated",
            "why it is given up? the mailbox is gone",
            "",
        ] {
            assert_eq!(placeholder_of(own), None, "{own:?}");
        }
        assert_eq!(placeholder(WHAT_WAS_FIXED), "'what was fixed'");
    }

    #[test]
    fn plain_values_read_as_before() {
        let line = CommandLine::unsctl(&["dlq", "resolve"])
            .operand(THE_ID, "n-123")
            .expect("id")
            .words(&["--confirm"]);
        assert_eq!(line.to_string(), "unsctl dlq resolve n-123 --confirm");
    }

    #[test]
    fn every_hostile_value_is_one_word_and_nothing_else() {
        for id in [
            "n-1;touch pwned",
            "$(touch pwned)",
            "`touch pwned`",
            "it's \"quoted\"",
            "-rf",
            "--confirm",
            "a b\tc",
            "~root",
            "*",
            "!!",
        ] {
            let Ok(line) = CommandLine::unsctl(&["inspect"]).operand(THE_ID, id) else {
                assert!(id.contains('\t'), "{id:?} refused");
                continue;
            };
            let line = line.words(&["--confirm"]);
            let expected: &[&str] = if id.starts_with('-') {
                &["unsctl", "inspect", "--confirm", "--", id]
            } else {
                &["unsctl", "inspect", id, "--confirm"]
            };
            assert_eq!(words(&line), expected, "{line}");
        }
    }

    #[test]
    fn a_value_that_cannot_stand_on_one_line_is_refused() {
        for id in ["a\nb", "a\rb", "a\u{1b}[2Jb", "a\u{202e}b", ""] {
            assert!(
                CommandLine::unsctl(&["inspect"])
                    .operand(THE_ID, id)
                    .is_err(),
                "{id:?}"
            );
        }
    }

    #[test]
    fn every_invisible_or_reordering_character_is_refused_and_text_is_not() {
        // The Arabic letter mark reorders as the right-to-left mark does; the word
        // joiner, the soft hyphen and the tags are invisible; all are format characters.
        for c in [
            '\u{61c}',
            '\u{200e}',
            '\u{2067}',
            '\u{2060}',
            '\u{ad}',
            '\u{180e}',
            '\u{fff9}',
            '\u{e0041}',
            '\u{e0001}',
            '\u{206a}',
            '\u{feff}',
        ] {
            let id = format!("n-1{c}2");
            assert!(unprintable(c), "{c:?}");
            assert!(
                CommandLine::unsctl(&["inspect"])
                    .operand(THE_ID, &id)
                    .is_err(),
                "{id:?}"
            );
        }
        // Letters of any script, marks that combine with them, and spaces are text.
        for id in [
            "n-\u{645}\u{631}\u{62d}\u{628}\u{627}",
            "n-\u{4e2d}\u{6587}",
            "n-e\u{301}",
            "n-1 2",
            "n-\u{1f600}",
        ] {
            assert!(!id.chars().any(unprintable), "{id:?}");
            assert!(
                CommandLine::unsctl(&["inspect"])
                    .operand(THE_ID, id)
                    .is_ok(),
                "{id:?}"
            );
        }
    }

    /// The shortcuts for ASCII say what the whole rule says: for every character, and for
    /// text with each of them among printable ASCII.
    #[test]
    fn the_ascii_shortcuts_agree_with_the_rule() {
        let rule =
            |c: char| c.is_control() || matches!(c, '\u{2028}' | '\u{2029}') || format_character(c);
        for c in (0..=0x10ffff).filter_map(char::from_u32) {
            assert_eq!(unprintable(c), rule(c), "{c:?}");
        }
        for c in (0..0x3000)
            .chain(0xe0000..0xe0080)
            .filter_map(char::from_u32)
        {
            for text in [format!("{c}"), format!("n-1{c}"), format!("{c}n-1 x")] {
                assert_eq!(holds_unprintable(&text), rule(c), "{text:?}");
            }
        }
        assert!(!holds_unprintable(""));
        assert!(!holds_unprintable(
            "n-01H ~!@#$%^&*()_+{}|:\"<>?`-=[]\\;',./"
        ));
    }

    #[test]
    fn a_step_that_cannot_be_written_says_what_to_do_for_what_it_lacks() {
        let step = |what: &str, value: &str| {
            let line = CommandLine::unsctl(&["verify"]).operand(what, value);
            Step::run(line).to_string()
        };
        let id = step(THE_ID, "n-1\nX");
        assert!(id.starts_with("none: the id cannot be written"), "{id}");
        assert!(
            id.contains("unique prefix of its id") && id.contains("live screen"),
            "{id}"
        );
        let empty = step(THE_ID, "");
        assert!(
            !empty.contains("prefix") && empty.contains("live screen"),
            "{empty}"
        );
        let path = step("--relay-log", "/var/log/mail\nlog");
        assert!(
            path.starts_with("none: --relay-log cannot be written"),
            "{path}"
        );
        assert!(!path.contains("prefix of its id"), "{path}");
    }

    #[test]
    fn a_context_and_a_shorter_id_go_in_as_parts() {
        let line = CommandLine::unsctl(&["verify"])
            .operand(THE_ID, "n-0123456789")
            .expect("id")
            .valued("--relay-log", "/var/log/mail log")
            .expect("path");
        let line = line.in_context("prod; rm").expect("context");
        assert_eq!(
            line.to_string(),
            "unsctl --context 'prod; rm' verify n-0123456789 --relay-log '/var/log/mail log'"
        );
        let short = line.with_operand("n-0123456789", "n-0123").expect("short");
        assert_eq!(words(&short)[4], "n-0123");
    }
}
