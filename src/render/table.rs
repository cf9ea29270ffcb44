//! Tables that stream and fit: rows are printed in chunks as they arrive (the first chunk
//! fixes the layout, so memory stays flat however long the table), columns are dropped
//! by priority when the terminal is too narrow, and colour wraps the text only, so it
//! never counts toward a column's width.

use super::output::Output;
use std::io::Write;

/// Rows held before a chunk is printed.
const CHUNK: usize = 256;
/// Spaces between columns.
const GAP: u16 = 2;
/// No column is squeezed below this.
const NARROWEST: u16 = 6;
/// What a cuttable column keeps before a less important one is dropped for it.
const SQUEEZED: u16 = 20;

/// A column: its header, how much it matters, and the most width it may take.
#[derive(Debug, Clone, Copy)]
pub struct Column {
    pub header: &'static str,
    /// 0 is always shown; higher numbers are dropped first when space runs out.
    pub priority: u8,
    /// The widest this column grows before its values are cut (None: as wide as needed).
    pub max: Option<u16>,
    /// When there is no room for it, its value goes on a line of its own under the row,
    /// whole, rather than out of sight: a command to paste is never cut or dropped.
    pub own_line: bool,
    /// Never cut: an id that is pasted into a command. Other columns give way first.
    pub whole: bool,
}

impl Column {
    pub const fn new(header: &'static str, priority: u8) -> Self {
        Self {
            header,
            priority,
            max: None,
            own_line: false,
            whole: false,
        }
    }

    pub const fn whole(mut self) -> Self {
        self.whole = true;
        self
    }

    pub const fn own_line(mut self) -> Self {
        self.own_line = true;
        self
    }

    pub const fn max(mut self, width: u16) -> Self {
        self.max = Some(width);
        self
    }
}

/// A cell's meaning, for colour; colour never carries it alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tone {
    Plain,
    Good,
    Warn,
    Bad,
    Dim,
}

/// One cell: text already made safe to show, and its tone.
#[derive(Debug, Clone)]
pub struct Text {
    pub text: String,
    pub tone: Tone,
}

impl From<String> for Text {
    fn from(text: String) -> Self {
        Text {
            text,
            tone: Tone::Plain,
        }
    }
}

impl From<&str> for Text {
    fn from(text: &str) -> Self {
        Text::from(text.to_string())
    }
}

pub fn toned(text: impl Into<String>, tone: Tone) -> Text {
    Text {
        text: text.into(),
        tone,
    }
}

struct Layout {
    shown: Vec<bool>,
    widths: Vec<u16>,
}

/// A table being printed.
pub struct Grid {
    columns: Vec<Column>,
    /// The width to fit, when output is a terminal and not `-o wide`.
    width: Option<u16>,
    /// `-o wide`: no column is cut at its usual widest either.
    wide: bool,
    color: bool,
    layout: Option<Layout>,
    pending: Vec<Vec<Text>>,
    rows: usize,
}

impl Grid {
    pub fn new(columns: &[Column], out: &Output) -> Self {
        Self {
            columns: columns.to_vec(),
            width: out.fit_width(),
            wide: out.wide(),
            color: out.color,
            layout: None,
            pending: Vec::new(),
            rows: 0,
        }
    }

    /// How many rows have been added.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Adds a row; prints a chunk when enough have gathered.
    pub fn row(&mut self, cells: Vec<Text>, to: &mut dyn Write) -> std::io::Result<()> {
        self.pending.push(cells);
        self.rows += 1;
        if self.pending.len() >= CHUNK {
            self.flush(to)?;
        }
        Ok(())
    }

    /// Prints what is left. A table that never got a row prints nothing, not even its
    /// header: the caller says why it is empty (nothing selected, or the read failed).
    pub fn finish(mut self, to: &mut dyn Write) -> std::io::Result<()> {
        if self.rows == 0 {
            return Ok(());
        }
        self.flush(to)
    }

    fn plan(&self) -> Layout {
        let (shown, widths) = plan(&self.columns, &self.pending, self.width, self.wide);
        Layout { shown, widths }
    }

    fn flush(&mut self, to: &mut dyn Write) -> std::io::Result<()> {
        if self.pending.is_empty() && self.layout.is_some() {
            return Ok(());
        }
        let mut line = String::new();
        if self.layout.is_none() {
            let layout = self.plan();
            let header: Vec<Text> = self.columns.iter().map(|c| Text::from(c.header)).collect();
            layout.write(&header, false, &mut line);
            self.layout = Some(layout);
        }
        let Some(layout) = &self.layout else {
            return Ok(());
        };
        for cells in self.pending.drain(..) {
            layout.write(&cells, self.color, &mut line);
            layout.write_own_lines(&self.columns, &cells, self.width, &mut line);
        }
        to.write_all(line.as_bytes())
    }
}

impl Layout {
    /// Appends one line: each shown cell cut to its column and padded, colour around the
    /// text only, no trailing spaces.
    fn write(&self, cells: &[Text], color: bool, line: &mut String) {
        let mut owed = 0usize;
        let columns = self.shown.iter().zip(&self.widths);
        for ((shown, width), cell) in columns.zip(cells) {
            if !shown {
                continue;
            }
            let width = usize::from(*width);
            let (text, used) = fit(&cell.text, width);
            if used > 0 {
                line.extend(std::iter::repeat_n(' ', owed));
                match (color, escape(cell.tone)) {
                    (true, Some(start)) => {
                        line.push_str(start);
                        line.push_str(&text);
                        line.push_str(RESET);
                    }
                    _ => line.push_str(&text),
                }
                owed = 0;
            }
            owed += width - used + usize::from(GAP);
        }
        line.push('\n');
    }

    /// The values of the columns with no room that go on lines of their own, whole:
    /// wrapped to the width at word boundaries (never inside an id, a queue id or one of
    /// unsctl's commands, which stands whole on a line of its own).
    fn write_own_lines(
        &self,
        columns: &[Column],
        cells: &[Text],
        width: Option<u16>,
        line: &mut String,
    ) {
        for ((column, shown), cell) in columns.iter().zip(&self.shown).zip(cells) {
            if !*shown && column.own_line && !cell.text.is_empty() {
                let text = format!("{OWN_LINE}{}", cell.text);
                // A lone command stays on its arrow's line, however long: it is pasted whole.
                let lone_command = cell.text.starts_with("unsctl ") && !cell.text.contains('"');
                let lines = match width {
                    Some(width) if usize::from(width) > 30 && !lone_command => {
                        super::output::wrap_to(&text, usize::from(width), OWN_LINE_HANG)
                    }
                    _ => vec![text],
                };
                for part in lines {
                    line.push_str(&part);
                    line.push('\n');
                }
            }
        }
    }
}

/// What a value on a line of its own starts with.
pub const OWN_LINE: &str = "    \u{21b3} ";

/// Where the continuations of a value on a line of its own start.
const OWN_LINE_HANG: usize = 6;

const RESET: &str = "\x1b[0m";

/// The SGR sequence a tone starts with (none for plain text).
fn escape(tone: Tone) -> Option<&'static str> {
    match tone {
        Tone::Plain => None,
        Tone::Good => Some("\x1b[1;32m"),
        Tone::Warn => Some("\x1b[1;33m"),
        Tone::Bad => Some("\x1b[1;31m"),
        Tone::Dim => Some("\x1b[2m"),
    }
}

/// `text` cut to `width` columns, an ellipsis marking the cut; and the columns it takes.
pub fn fit(text: &str, width: usize) -> (std::borrow::Cow<'_, str>, usize) {
    use unicode_width::UnicodeWidthChar;
    let whole = unicode_width::UnicodeWidthStr::width(text);
    if whole <= width {
        return (std::borrow::Cow::Borrowed(text), whole);
    }
    let mut cut = String::new();
    let mut taken = 0;
    let mut rest = text.chars().peekable();
    while let Some(&c) = rest.peek() {
        let w = c.width().unwrap_or(0);
        if taken + w + 1 > width {
            break;
        }
        cut.push(c);
        taken += w;
        rest.next();
    }
    // End on a whole word when one fits: "exhausted the…", not "exhausted the att…".
    let mid_word =
        rest.peek().is_some_and(|c| !c.is_whitespace()) && !cut.ends_with(char::is_whitespace);
    if mid_word && let Some(space) = cut.rfind(' ') {
        cut.truncate(space);
    }
    let kept = cut.trim_end().len();
    cut.truncate(kept);
    // A cut inside quoted store or provider text closes the quote after the ellipsis,
    // so the cell still reads as quoted text, never as a step of unsctl's.
    let closes = super::sanitize::quote_open(&cut);
    if closes && width > 1 {
        while unicode_width::UnicodeWidthStr::width(cut.as_str()) + 2 > width && cut.pop().is_some()
        {
        }
    }
    let mut used = unicode_width::UnicodeWidthStr::width(cut.as_str());
    if width > 0 {
        cut.push('…');
        used += 1;
    }
    if closes && width > 1 {
        cut.push('"');
        used += 1;
    }
    (std::borrow::Cow::Owned(cut), used)
}

/// Which of `columns` are shown, and how wide each is, for `rows` in `width` columns (no
/// limit: every column as wide as its widest value; `wide`: not cut at its usual widest
/// either). The least important give way first; the essential ones are cut last.
pub fn plan(
    columns: &[Column],
    rows: &[Vec<Text>],
    width: Option<u16>,
    wide: bool,
) -> (Vec<bool>, Vec<u16>) {
    let natural: Vec<u16> = (0..columns.len())
        .map(|i| {
            let content = rows
                .iter()
                .filter_map(|row| row.get(i))
                .map(|c| display_width(&c.text))
                .max()
                .unwrap_or(0);
            let wanted = content.max(display_width(columns[i].header));
            match columns[i].max {
                Some(max) if !wide => wanted.min(max),
                _ => wanted,
            }
        })
        .collect();
    let Some(limit) = width else {
        return (vec![true; columns.len()], natural);
    };
    // The columns and the gaps between them (none after the last).
    let total = |shown: &[bool], widths: &[u16]| -> u16 {
        shown
            .iter()
            .zip(widths)
            .filter(|(s, _)| **s)
            .map(|(_, w)| w + GAP)
            .sum::<u16>()
            .saturating_sub(GAP)
    };
    // The essential columns always; then each of the others in order of importance, at
    // its whole width if it fits beside those before it, else cut (if it holds text that
    // may be cut) down to a readable minimum, else left out. A column never takes room
    // from one more important than itself; a value that has a line of its own to go to
    // is shown whole or not at all.
    let mut shown: Vec<bool> = columns.iter().map(|c| c.priority == 0).collect();
    let mut widths = natural;
    let mut order: Vec<usize> = (0..columns.len())
        .filter(|&i| columns[i].priority > 0)
        .collect();
    order.sort_by_key(|&i| (columns[i].priority, i));
    for i in order {
        shown[i] = true;
        let over = total(&shown, &widths).saturating_sub(limit);
        let cuttable = columns[i].max.is_some() && !columns[i].own_line && !columns[i].whole;
        if over == 0 {
            continue;
        }
        if cuttable && widths[i].saturating_sub(over) >= widths[i].min(SQUEEZED) {
            widths[i] -= over;
        } else {
            shown[i] = false;
        }
    }
    // The essential ones alone too wide: the widest that may be cut gives way, a column
    // at a time.
    while total(&shown, &widths) > limit {
        let widest = (0..widths.len())
            .filter(|&i| {
                shown[i] && widths[i] > NARROWEST && !columns[i].whole && !columns[i].own_line
            })
            .max_by_key(|&i| widths[i]);
        match widest {
            Some(i) => widths[i] -= 1,
            None => break,
        }
    }
    (shown, widths)
}

/// Columns a string takes on a terminal.
pub fn display_width(text: &str) -> u16 {
    unicode_width::UnicodeWidthStr::width(text).min(u16::MAX as usize) as u16
}

/// Prints rows as one table (small tables whose rows are all at hand).
pub fn print_all(columns: &[Column], rows: Vec<Vec<Text>>, out: &Output) -> std::io::Result<()> {
    let stdout = std::io::stdout();
    let mut to = stdout.lock();
    let mut grid = Grid::new(columns, out);
    for row in rows {
        grid.row(row, &mut to)?;
    }
    grid.finish(&mut to)
}

/// Renders rows as one table into a string, laid out as [`print_all`] would print it.
pub fn render_all(columns: &[Column], rows: Vec<Vec<Text>>, out: &Output) -> String {
    let mut text = Vec::new();
    let mut grid = Grid::new(columns, out);
    for row in rows {
        // Writing to a Vec cannot fail.
        let _ = grid.row(row, &mut text);
    }
    let _ = grid.finish(&mut text);
    String::from_utf8_lossy(&text)
        .trim_end_matches('\n')
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::render::output::{ColorChoice, Format};

    fn render(width: Option<u16>, color: bool, rows: usize) -> String {
        render_as(width, false, color, rows)
    }

    fn render_as(width: Option<u16>, wide: bool, color: bool, rows: usize) -> String {
        let columns = [
            Column::new("ID", 0),
            Column::new("BRANCH", 0),
            Column::new("DETAIL", 2).max(40),
            Column::new("EXTRA", 3),
        ];
        let mut grid = Grid {
            columns: columns.to_vec(),
            width,
            wide,
            color,
            layout: None,
            pending: Vec::new(),
            rows: 0,
        };
        let mut text = Vec::new();
        for n in 0..rows {
            grid.row(
                vec![
                    format!("n-{n:030}").into(),
                    toned("VERIFY", Tone::Warn),
                    "x".repeat(n % 90).into(),
                    "extra extra extra".into(),
                ],
                &mut text,
            )
            .expect("row");
        }
        grid.finish(&mut text).expect("finish");
        String::from_utf8_lossy(&text).into_owned()
    }

    #[test]
    fn a_value_with_no_room_in_its_row_stands_whole_under_it() {
        let columns = [
            Column::new("ID", 0),
            Column::new("CAUSE", 1).max(60),
            Column::new("NEXT STEP", 2).own_line(),
        ];
        let command = "unsctl replay n-0192c3d4e5f60718293a4b5c6d7e8f90 --channels SLACK --confirm";
        let mut grid = Grid {
            columns: columns.to_vec(),
            width: Some(60),
            wide: false,
            color: false,
            layout: None,
            pending: Vec::new(),
            rows: 0,
        };
        let mut text = Vec::new();
        grid.row(
            vec!["n-1".into(), "SLACK: HTTP 400".into(), command.into()],
            &mut text,
        )
        .expect("row");
        grid.finish(&mut text).expect("finish");
        let text = String::from_utf8_lossy(&text);
        assert!(
            !text
                .lines()
                .next()
                .unwrap_or_default()
                .contains("NEXT STEP"),
            "{text}"
        );
        assert!(text.contains(&format!("{OWN_LINE}{command}\n")), "{text}");
    }

    #[test]
    fn wide_output_cuts_no_value() {
        // DETAIL's usual widest is 40; the rows hold up to 89 characters of it.
        let piped = render_as(None, false, false, 90);
        assert!(
            !piped.contains(&"x".repeat(89)),
            "cut at its widest when piped"
        );
        let wide = render_as(None, true, false, 90);
        assert!(wide.contains(&"x".repeat(89)), "{wide}");
        assert!(!wide.contains('…'), "{wide}");
    }

    #[test]
    fn narrow_terminals_drop_columns_by_priority_and_every_line_fits() {
        let _ = Output::new(Format::Table, ColorChoice::Never);
        for (width, color) in [(80, false), (80, true), (60, true), (160, false)] {
            let text = render(Some(width), color, 600);
            for line in text.lines() {
                // Colour takes no columns on a terminal.
                let visible = line.replace("\u{1b}[1;33m", "").replace("\u{1b}[0m", "");
                assert!(
                    display_width(&visible) <= width,
                    "{width} {color}: {} > {width}: {line:?}",
                    display_width(&visible)
                );
            }
            assert!(
                text.lines().next().unwrap_or_default().starts_with("ID"),
                "{text}"
            );
        }
        let narrow = render(Some(60), false, 3);
        assert!(!narrow.contains("EXTRA"), "{narrow}");
        let wide = render(None, false, 3);
        assert!(wide.contains("EXTRA"), "{wide}");
    }

    #[test]
    fn cut_text_ends_on_a_word_and_never_passes_the_width() {
        let text = "Provider outcome unknown: EMAIL no reply after the message data was sent";
        assert_eq!(
            fit(text, 60),
            (
                "Provider outcome unknown: EMAIL no reply after the message…".into(),
                59
            )
        );
        assert_eq!(fit(text, 30), ("Provider outcome unknown:…".into(), 26));
        assert_eq!(fit("short", 30), ("short".into(), 5));
        assert_eq!(fit("averyveryverylongword", 8), ("averyve…".into(), 8));
        // Wide characters count double, and a cut never splits one.
        assert_eq!(fit("日本語のテキスト", 7), ("日本語…".into(), 7));
        for width in 1..40 {
            let (cut, used) = fit(text, width);
            assert_eq!(display_width(&cut) as usize, used);
            assert!(used <= width, "{width}: {cut}");
        }
    }

    #[test]
    fn a_long_table_streams_in_chunks_with_one_header_and_aligned_columns() {
        let text = render(Some(120), false, 1000);
        assert_eq!(text.lines().count(), 1001);
        assert_eq!(text.matches("BRANCH").count(), 1);
        let at = |line: &str| line.find("VERIFY");
        let first = text.lines().nth(1).and_then(at);
        assert!(
            text.lines().skip(1).all(|line| at(line) == first),
            "aligned across chunks"
        );
    }
}
