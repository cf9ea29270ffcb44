//! How a run prints: its format chosen once (table, JSON, CSV, Markdown, HTML) for every
//! document on stdout, colour decided once, status on stderr.

use clap::ValueEnum;
use owo_colors::OwoColorize;
use std::io::{IsTerminal, Write};

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Default)]
pub enum Format {
    /// Tables that fit the terminal
    #[default]
    Table,
    /// Every column, nothing cut to fit
    Wide,
    /// The stable JSON contract
    Json,
    /// reconcile: one line per notification and channel that needs a person (RFC 4180)
    Csv,
    /// report: the postmortem as Markdown (report's default)
    Markdown,
    /// report: the postmortem as one self-contained HTML file
    Html,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Default)]
pub enum ColorChoice {
    #[default]
    Auto,
    Always,
    Never,
}

/// Decided once per run; commands only ask it.
#[derive(Debug, Clone, Copy)]
pub struct Output {
    pub format: Format,
    pub color: bool,
    /// stdout is a terminal: relative times are shown beside RFC 3339.
    pub terminal: bool,
    /// The terminal's width in columns, when stdout is one.
    pub columns: Option<u16>,
}

/// Whether to colour a stream: `--color`, then NO_COLOR, then whether it is a terminal.
pub fn color_enabled(choice: ColorChoice, terminal: bool) -> bool {
    let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
    match choice {
        ColorChoice::Always => true,
        ColorChoice::Never => false,
        ColorChoice::Auto => terminal && !no_color,
    }
}

impl Output {
    pub fn new(format: Format, color: ColorChoice) -> Self {
        let terminal = std::io::stdout().is_terminal();
        let color = color_enabled(color, terminal);
        let columns = terminal
            .then(|| console::Term::stdout().size_checked().map(|(_, w)| w))
            .flatten()
            .or_else(|| {
                terminal
                    .then(|| std::env::var("COLUMNS").ok()?.parse().ok())
                    .flatten()
            });
        Self {
            format,
            color,
            terminal,
            columns,
        }
    }

    /// For a screen that lays text out itself: no colour, `columns` wide.
    pub fn plain(columns: u16) -> Self {
        Self {
            format: Format::Table,
            color: false,
            terminal: false,
            columns: Some(columns),
        }
    }

    /// The width a table must fit: the terminal's, unless `-o wide` or not a terminal.
    pub fn fit_width(&self) -> Option<u16> {
        match self.format {
            Format::Wide => None,
            _ => self.columns,
        }
    }

    /// `-o wide`: every value whole, however wide the table grows.
    pub fn wide(&self) -> bool {
        self.format == Format::Wide
    }

    /// Store, provider or client text made safe for a terminal (see [`super::sanitize`]).
    pub fn clean<'t>(&self, text: &'t str) -> std::borrow::Cow<'t, str> {
        super::sanitize::clean(text)
    }

    pub fn red(&self, text: &str) -> String {
        if self.color {
            text.red().bold().to_string()
        } else {
            text.to_string()
        }
    }

    pub fn yellow(&self, text: &str) -> String {
        if self.color {
            text.yellow().bold().to_string()
        } else {
            text.to_string()
        }
    }

    pub fn green(&self, text: &str) -> String {
        if self.color {
            text.green().bold().to_string()
        } else {
            text.to_string()
        }
    }

    pub fn bold(&self, text: &str) -> String {
        if self.color {
            text.bold().to_string()
        } else {
            text.to_string()
        }
    }

    pub fn dim(&self, text: &str) -> String {
        if self.color {
            text.dimmed().to_string()
        } else {
            text.to_string()
        }
    }

    /// A time as RFC 3339, plus "(3m ago)" on a terminal.
    pub fn time(&self, seconds: f64) -> String {
        let absolute = crate::render::time::rfc3339(seconds);
        let in_range = seconds.is_finite() && seconds.abs() < 1e11;
        if self.terminal && in_range {
            let now = crate::clock::Clock::now(&crate::clock::SystemClock);
            format!(
                "{absolute} ({})",
                crate::render::time::relative(seconds, now)
            )
        } else {
            absolute
        }
    }
}

/// `n` and `noun`, the noun plural unless `n` is 1 ("1 entry", "3 entries", "2 copies").
/// A name in capitals (an event kind) stays as it is.
pub fn counted(n: i64, noun: &str) -> String {
    if n == 1 || !noun.chars().any(char::is_lowercase) {
        return format!("{n} {noun}");
    }
    match noun.strip_suffix('y') {
        Some(stem) if !stem.ends_with(['a', 'e', 'i', 'o', 'u']) => format!("{n} {stem}ies"),
        _ => format!("{n} {noun}s"),
    }
}

/// Writes `text` and a newline (unless it ends with one) to stdout: a person's line.
pub fn print(text: &str) -> std::io::Result<()> {
    let mut stdout = std::io::stdout().lock();
    stdout.write_all(text.as_bytes())?;
    if !text.ends_with('\n') {
        stdout.write_all(b"\n")?;
    }
    Ok(())
}

/// A document a command prints: JSON with `-o json`, else its own table or text. A view
/// is printed only through [`Output::emit`], which makes that choice in one place.
pub trait View: serde::Serialize {
    /// Whether the JSON has its keys sorted at every level (the documents that have
    /// always printed so) rather than in the order the types declare them (the
    /// documents whose order is a contract, DESIGN §6).
    const SORTED: bool = false;

    /// The table or text a person reads.
    fn show(&self, out: &Output) -> std::io::Result<()>;
}

/// A document written a piece at a time as its parts arrive (a triage of a million
/// entries, a reconciliation): [`Output::stream`] picks which writing, once.
pub trait Streamed {
    /// What the writing hands back (its tally), or why it stopped.
    type Done;

    /// The JSON contract.
    fn json(self) -> Self::Done;

    /// The table or text a person reads.
    fn show(self, out: &Output) -> Self::Done;

    /// `-o csv`, where a command offers it (the CLI refuses it elsewhere).
    fn csv(self, out: &Output) -> Self::Done
    where
        Self: Sized,
    {
        self.show(out)
    }

    /// `-o html`, where a command offers it (the report; the CLI refuses it elsewhere).
    fn html(self, out: &Output) -> Self::Done
    where
        Self: Sized,
    {
        self.show(out)
    }
}

/// The one place a run's format is chosen. Every document a command prints on stdout
/// comes through one of these, so no command asks which format it is in.
impl Output {
    /// Prints `view`: as JSON with `-o json` (see [`View::SORTED`]), else as the view
    /// shows itself.
    pub fn emit<V: View>(&self, view: &V) -> std::io::Result<()> {
        match (self.json(), V::SORTED) {
            (true, true) => print_document(view),
            (true, false) => print_json(view),
            (false, _) => view.show(self),
        }
    }

    /// Writes a streamed document in the run's format.
    pub fn stream<S: Streamed>(&self, document: S) -> S::Done {
        match self.format {
            Format::Json => document.json(),
            Format::Csv => document.csv(self),
            Format::Html => document.html(self),
            Format::Table | Format::Wide | Format::Markdown => document.show(self),
        }
    }

    /// One record of a stream that runs until it is stopped (`--follow`, `--watch`): a
    /// compact JSON line, or the line a person reads.
    pub fn record<T: serde::Serialize>(
        &self,
        record: &T,
        line: impl FnOnce() -> String,
    ) -> std::io::Result<()> {
        match self.json() {
            true => print_json_line(record),
            false => print(&line()),
        }
    }

    /// Several records of such a stream at once: a compact JSON line each, or the block
    /// a person reads them in.
    pub fn records<T: serde::Serialize>(
        &self,
        records: &[T],
        block: impl FnOnce() -> String,
    ) -> std::io::Result<()> {
        match self.json() {
            true => records.iter().try_for_each(print_json_line),
            false => print(&block()),
        }
    }

    /// What a person reads on stdout as a command goes (a preview, each result as it
    /// comes); with `-o json` nothing, as the command's closing document says it all.
    pub fn progress<E>(&self, show: impl FnOnce() -> Result<(), E>) -> Result<(), E> {
        match self.json() {
            true => Ok(()),
            false => show(),
        }
    }

    /// The document a command ends with when a person's lines went out as it ran: with
    /// `-o json`, printed with its keys sorted; for a person, nothing.
    pub fn closing<T: serde::Serialize>(&self, document: &T) -> std::io::Result<()> {
        match self.json() {
            true => print_document(document),
            false => Ok(()),
        }
    }

    /// The same, as one compact line (its keys sorted too): the end of a stream of JSON
    /// lines.
    pub fn closing_line<T: serde::Serialize>(&self, document: &T) -> std::io::Result<()> {
        match self.json() {
            true => {
                print_json_line(&serde_json::to_value(document).map_err(std::io::Error::other)?)
            }
            false => Ok(()),
        }
    }

    /// Whether a person reads stdout: a summary or advice on stderr is for them, and a
    /// value only the JSON contract carries need not be fetched.
    pub fn for_people(&self) -> bool {
        !self.json()
    }

    fn json(&self) -> bool {
        self.format == Format::Json
    }
}

/// A JSON document, its keys sorted at every level: what [`Output::emit`] prints, and
/// what a command prints whose table was written as it went (the results of a bulk
/// action).
fn print_document(document: &impl serde::Serialize) -> std::io::Result<()> {
    print_json(&serde_json::to_value(document).map_err(std::io::Error::other)?)
}

fn print_json<T: serde::Serialize>(value: &T) -> std::io::Result<()> {
    let text = serde_json::to_string_pretty(value).map_err(std::io::Error::other)?;
    print(&text)
}

/// Status for people, on stderr, wrapped to the terminal when stderr is one (a long
/// line continues two columns in). Each line is made safe for a terminal here, whatever
/// store, provider or client text a caller put in it. Never fails: with stderr closed
/// there is nobody to tell.
pub fn status(text: &str) {
    if let Ok(mut held) = HELD.lock()
        && let Some(lines) = held.as_mut()
    {
        lines.push(crate::render::sanitize::clean(text).into_owned());
        return;
    }
    let width = status_width().filter(|width| *width >= 22);
    let mut stderr = std::io::stderr().lock();
    for line in text.split('\n') {
        let line = crate::render::sanitize::clean(line);
        let parts = match width {
            Some(width) => wrap_to(&line, width, 2),
            None => vec![line.into_owned()],
        };
        for part in parts {
            let _ = stderr.write_all(part.as_bytes());
            let _ = stderr.write_all(b"\n");
        }
    }
}

/// Status lines held back while a full-screen view owns the terminal (`None`: printed).
static HELD: std::sync::Mutex<Option<Vec<String>>> = std::sync::Mutex::new(None);

/// From now on, status lines are held for [`take_held`] instead of printed: a screen
/// drawn over the whole terminal shows them itself.
pub fn hold_status() {
    if let Ok(mut held) = HELD.lock() {
        held.get_or_insert_with(Vec::new);
    }
}

/// The status lines held since the last call, and printing them again when `release`.
pub fn take_held(release: bool) -> Vec<String> {
    let Ok(mut held) = HELD.lock() else {
        return Vec::new();
    };
    if release {
        held.take().unwrap_or_default()
    } else {
        held.as_mut().map(std::mem::take).unwrap_or_default()
    }
}

/// The width of stderr, when it is a terminal.
fn status_width() -> Option<usize> {
    std::io::stderr()
        .is_terminal()
        .then(|| {
            console::Term::stderr()
                .size_checked()
                .map(|(_, w)| w as usize)
                .or_else(|| std::env::var("COLUMNS").ok()?.parse().ok())
        })
        .flatten()
}

/// Commands to paste, on stderr: each whole on a line of its own, two columns in, under
/// what it is for as a shell comment (wrapped, each line a comment), so a block copied
/// whole still runs.
pub fn status_commands(commands: &[(String, String)]) {
    let width = status_width().filter(|w| *w >= 22);
    let mut lines = Vec::new();
    for (comment, command) in commands {
        let comment = crate::render::sanitize::clean(comment);
        match width {
            Some(width) => lines.extend(
                textwrap::wrap(&comment, width - 4)
                    .into_iter()
                    .map(|part| format!("  # {part}")),
            ),
            None => lines.push(format!("  # {comment}")),
        }
        lines.push(format!("  {}", crate::render::sanitize::clean(command)));
    }
    let mut stderr = std::io::stderr().lock();
    for line in lines {
        let _ = stderr.write_all(line.as_bytes());
        let _ = stderr.write_all(b"\n");
    }
}

/// What stands for a space inside a command while a line is wrapped.
const UNBROKEN: char = '\u{a0}';

/// The byte ranges of `line` inside double quotes (a quote escaped with a backslash does
/// not end one): store and provider text, as [`crate::render::sanitize::quoted`] shows it.
fn quoted_spans(line: &str) -> Vec<(usize, usize)> {
    let mut spans = Vec::new();
    let mut open: Option<usize> = None;
    let mut escaped = false;
    for (at, c) in line.char_indices() {
        match (open, c) {
            (Some(_), '\\') if !escaped => {
                escaped = true;
                continue;
            }
            (Some(start), '"') if !escaped => {
                spans.push((start, at + 1));
                open = None;
            }
            (None, '"') => open = Some(at),
            _ => {}
        }
        escaped = false;
    }
    if let Some(start) = open {
        spans.push((start, line.len()));
    }
    spans
}

/// `line` with the spaces inside each of unsctl's own `unsctl ...` commands made
/// unbreakable: each up to a backtick or the line's end, and never one inside quotes,
/// where it is store or provider text (DESIGN §5).
fn commands_whole(line: &str) -> String {
    let quoted = quoted_spans(line);
    let inside = |at: usize| quoted.iter().any(|(start, end)| at > *start && at < *end);
    let mut out = String::with_capacity(line.len());
    let mut at = 0;
    while let Some(found) = line[at..].find("unsctl ") {
        let start = at + found;
        out.push_str(&line[at..start]);
        if inside(start) {
            out.push_str("unsctl ");
            at = start + "unsctl ".len();
            continue;
        }
        let command = &line[start..];
        let quote = quoted
            .iter()
            .find(|(open, _)| *open > start)
            .map_or(command.len(), |(open, _)| open - start);
        let end = command.find('`').unwrap_or(command.len()).min(quote);
        out.push_str(
            &command[..end]
                .trim_end()
                .replace(' ', &UNBROKEN.to_string()),
        );
        out.push_str(&command[command[..end].trim_end().len()..end]);
        at = start + end;
    }
    out.push_str(&line[at..]);
    out
}

/// `line` wrapped to `width`: never inside a word (ids, keys and commands are pasted),
/// each of unsctl's commands whole, each continuation `hang` columns in.
pub fn wrap_to(line: &str, width: usize, hang: usize) -> Vec<String> {
    let indent = " ".repeat(hang);
    let options = textwrap::Options::new(width)
        .subsequent_indent(&indent)
        .break_words(false)
        .word_separator(textwrap::WordSeparator::AsciiSpace)
        .word_splitter(textwrap::WordSplitter::NoHyphenation);
    let parts: Vec<String> = textwrap::wrap(&commands_whole(line), &options)
        .into_iter()
        .map(|l| l.trim_end().replace(UNBROKEN, " "))
        .collect();
    // A word longer than the width after an indent leaves the indent a line of its own.
    match parts.split_first() {
        Some((first, rest)) if first.trim().is_empty() && !rest.is_empty() => {
            let lead = " ".repeat(first.len());
            let mut rest = rest.to_vec();
            rest[0] = format!("{lead}{}", rest[0].trim_start());
            rest
        }
        _ => parts,
    }
}

/// `line` wrapped to the terminal's width (when there is one), each continuation
/// `hang` columns in.
pub fn wrapped(line: &str, out: &Output, hang: usize) -> Vec<String> {
    match out.fit_width() {
        // A word or command longer than the width stands whole on a line of its own.
        Some(width) if width as usize > hang + 20 => wrap_to(line, width as usize, hang),
        _ => vec![line.to_string()],
    }
}

#[cfg(test)]
mod wrap_tests {
    use super::*;

    #[test]
    fn prose_wraps_between_words_and_never_inside_an_id() {
        let out = Output {
            columns: Some(40),
            ..Output::new(Format::Table, ColorChoice::Never)
        };
        let id = "n-01a2306f9c8f75bb80ffe82f267d20ef";
        let line = format!("by hand:          search the provider for SLACK {id}:SLACK:1");
        let lines = wrapped(&line, &out, 4);
        assert!(lines.len() > 1, "{lines:?}");
        assert!(
            lines.iter().any(|l| l.trim() == format!("{id}:SLACK:1")),
            "{lines:?}"
        );
        assert!(lines.iter().all(|l| !l.ends_with("n-")), "{lines:?}");
    }

    #[test]
    fn a_command_is_never_broken_across_lines() {
        let out = Output {
            columns: Some(60),
            ..Output::new(Format::Table, ColorChoice::Never)
        };
        let command = "unsctl replay n-01a2306f9c8f75bb80ffe82f267d20ef --channels EMAIL --verified-not-delivered --confirm";
        let lines = wrapped(&format!("  if it did not:    {command}"), &out, 4);
        assert_eq!(lines, ["  if it did not:", &format!("    {command}")]);
        // In prose, up to its backtick; the prose around it still wraps.
        let line = format!("replay it instead (`{command}`), or pass --force --reason to drop it");
        let lines = wrapped(&line, &out, 2);
        assert!(lines.iter().any(|l| l.contains(command)), "{lines:?}");
        assert!(lines.iter().all(|l| !l.contains('\u{a0}')), "{lines:?}");
    }
}

/// Every line of `text` that is wider than the terminal, wrapped under its own indent
/// (tables already fit, so this is for prose).
pub fn fit_lines(text: &str, out: &Output) -> String {
    text.lines()
        .flat_map(|line| {
            let lead = line.len() - line.trim_start().len();
            wrapped(line, out, lead + 2)
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// One compact JSON value per line on stdout, for streams (`--follow`, `--watch`).
fn print_json_line<T: serde::Serialize>(value: &T) -> std::io::Result<()> {
    let text = serde_json::to_string(value).map_err(std::io::Error::other)?;
    let mut stdout = std::io::stdout().lock();
    stdout.write_all(text.as_bytes())?;
    stdout.write_all(b"\n")?;
    stdout.flush()
}

/// Writes `value` as pretty JSON four spaces in, as one entry of an `"entries": [...]`
/// array written a piece at a time; `buffer` is reused between entries.
pub fn write_indented_entry<T: serde::Serialize>(
    writer: &mut dyn Write,
    buffer: &mut Vec<u8>,
    value: &T,
) -> std::io::Result<()> {
    buffer.clear();
    serde_json::to_writer_pretty(&mut *buffer, value).map_err(std::io::Error::other)?;
    indent_lines_after_the_first(buffer);
    writer.write_all(buffer)
}

/// Puts four spaces after every newline of `text`, in place: one pass from the end, each
/// line moved once, so an entry is handed to the writer whole.
fn indent_lines_after_the_first(text: &mut Vec<u8>) {
    const INDENT: &[u8] = b"    ";
    let newlines = memchr::memchr_iter(b'\n', text).count();
    let mut read = text.len();
    text.resize(read + INDENT.len() * newlines, b' ');
    let mut write = text.len();
    while let Some(newline) = memchr::memrchr(b'\n', &text[..read]) {
        let line = newline + 1..read;
        write -= line.len();
        text.copy_within(line, write);
        write -= INDENT.len();
        text[write..write + INDENT.len()].copy_from_slice(INDENT);
        write -= 1;
        text[write] = b'\n';
        read = newline;
    }
    debug_assert_eq!(read, write, "every line moved");
}

#[cfg(test)]
mod tests {
    use super::{Format, Output, Streamed, counted, indent_lines_after_the_first};

    /// Every line but the first gains four spaces, and nothing else changes, whatever
    /// the lines hold: empty ones, ones in a row, one at either end.
    #[test]
    fn lines_after_the_first_are_indented_in_place() {
        for text in [
            "",
            "\n",
            "{}",
            "{\n  \"a\": 1\n}",
            "\n\nx\n",
            "a\n\n\nb",
            "ü\n€\n",
        ] {
            let expected = text.replace('\n', "\n    ");
            let mut bytes = text.as_bytes().to_vec();
            indent_lines_after_the_first(&mut bytes);
            assert_eq!(
                String::from_utf8(bytes).expect("utf-8"),
                expected,
                "{text:?}"
            );
        }
    }

    /// Says which writing the output layer chose.
    struct Which;

    impl Streamed for Which {
        type Done = &'static str;
        fn json(self) -> &'static str {
            "json"
        }
        fn show(self, _: &Output) -> &'static str {
            "show"
        }
        fn csv(self, _: &Output) -> &'static str {
            "csv"
        }
        fn html(self, _: &Output) -> &'static str {
            "html"
        }
    }

    #[test]
    fn each_format_chooses_one_writing_and_a_persons_lines_only_for_people() {
        let chosen = [
            (Format::Table, "show", true),
            (Format::Wide, "show", true),
            (Format::Markdown, "show", true),
            (Format::Json, "json", false),
            (Format::Csv, "csv", true),
            (Format::Html, "html", true),
        ];
        for (format, writing, for_people) in chosen {
            let out = Output {
                format,
                ..Output::plain(80)
            };
            assert_eq!(out.stream(Which), writing, "{format:?}");
            assert_eq!(out.for_people(), for_people, "{format:?}");
            // A person's lines are not even made for the JSON contract.
            let ran = out.progress(|| Err::<(), &str>("ran"));
            assert_eq!(ran.is_err(), for_people, "{format:?}");
        }
    }

    #[test]
    fn nouns_are_plural_unless_there_is_one() {
        assert_eq!(counted(1, "entry"), "1 entry");
        assert_eq!(counted(3, "entry"), "3 entries");
        assert_eq!(counted(0, "copy"), "0 copies");
        assert_eq!(counted(2, "day"), "2 days");
        assert_eq!(
            counted(2, "replayed notification"),
            "2 replayed notifications"
        );
        assert_eq!(counted(4, "LEASE_LOST"), "4 LEASE_LOST");
    }
}
