//! Tables that stream and fit: rows are printed in chunks as they arrive (the first chunk
//! fixes the layout, so memory stays flat however long the table), columns are dropped
//! by priority when the terminal is too narrow, and cells are styled by comfy-table, so
//! colour never counts toward a column's width.

use super::output::Output;
use comfy_table::{Cell, Color, ColumnConstraint, ContentArrangement, Row, Table, Width};
use std::io::Write;

/// Rows held before a chunk is printed.
const CHUNK: usize = 256;
/// Spaces between columns.
const GAP: u16 = 2;
/// No column is squeezed below this.
const NARROWEST: u16 = 6;

/// A column: its header, how much it matters, and the most width it may take.
#[derive(Debug, Clone, Copy)]
pub struct Column {
    pub header: &'static str,
    /// 0 is always shown; higher numbers are dropped first when space runs out.
    pub priority: u8,
    /// The widest this column grows before its values are cut (None: as wide as needed).
    pub max: Option<u16>,
}

impl Column {
    pub const fn new(header: &'static str, priority: u8) -> Self {
        Self {
            header,
            priority,
            max: None,
        }
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

    /// Prints what is left.
    pub fn finish(mut self, to: &mut dyn Write) -> std::io::Result<()> {
        self.flush(to)
    }

    fn plan(&self) -> Layout {
        let natural: Vec<u16> = (0..self.columns.len())
            .map(|i| {
                let content = self
                    .pending
                    .iter()
                    .filter_map(|row| row.get(i))
                    .map(|c| display_width(&c.text))
                    .max()
                    .unwrap_or(0);
                let wanted = content.max(display_width(self.columns[i].header));
                self.columns[i].max.map_or(wanted, |max| wanted.min(max))
            })
            .collect();
        let mut shown = vec![true; self.columns.len()];
        let Some(limit) = self.width else {
            return Layout {
                shown,
                widths: natural,
            };
        };
        let total = |shown: &[bool], widths: &[u16]| -> u16 {
            shown
                .iter()
                .zip(widths)
                .filter(|(s, _)| **s)
                .map(|(_, w)| w + GAP)
                .sum::<u16>()
        };
        // Drop the least important columns until the rest fit, never the essential ones.
        let mut order: Vec<usize> = (0..self.columns.len())
            .filter(|&i| self.columns[i].priority > 0)
            .collect();
        order.sort_by_key(|&i| std::cmp::Reverse((self.columns[i].priority, i)));
        for i in order {
            if total(&shown, &natural) <= limit {
                break;
            }
            shown[i] = false;
        }
        // Still too wide: take width from the widest column that may be cut, one step at
        // a time; the essential ones give way last.
        let mut widths = natural;
        for essential in [false, true] {
            while total(&shown, &widths) > limit {
                let widest = (0..widths.len())
                    .filter(|&i| shown[i] && widths[i] > NARROWEST)
                    .filter(|&i| essential || self.columns[i].priority > 0)
                    .max_by_key(|&i| widths[i]);
                match widest {
                    Some(i) => widths[i] -= 1,
                    None => break,
                }
            }
        }
        Layout { shown, widths }
    }

    fn flush(&mut self, to: &mut dyn Write) -> std::io::Result<()> {
        if self.pending.is_empty() && self.layout.is_some() {
            return Ok(());
        }
        let first = self.layout.is_none();
        if first {
            self.layout = Some(self.plan());
        }
        let Some(layout) = &self.layout else {
            return Ok(());
        };
        let mut table = Table::new();
        table
            .load_style(comfy_table::presets::NOTHING)
            .set_content_arrangement(ContentArrangement::Disabled);
        if self.color {
            table.enforce_styling();
        } else {
            table.force_no_tty();
        }
        if first {
            let mut header = Row::from(
                self.columns
                    .iter()
                    .map(|c| Cell::new(c.header))
                    .collect::<Vec<_>>(),
            );
            header.max_height(1);
            table.set_header(header);
        }
        for cells in self.pending.drain(..) {
            let mut row = Row::from(
                cells
                    .into_iter()
                    .map(|cell| styled(cell, self.color))
                    .collect::<Vec<_>>(),
            );
            row.max_height(1);
            table.add_row(row);
        }
        table.set_constraints(
            layout
                .shown
                .iter()
                .zip(&layout.widths)
                .map(|(shown, width)| {
                    if *shown {
                        // The constraint counts the padding too.
                        ColumnConstraint::Absolute(Width::Fixed(*width + GAP))
                    } else {
                        ColumnConstraint::Hidden
                    }
                }),
        );
        for column in table.column_iter_mut() {
            column.set_padding((0, GAP));
        }
        for line in table.lines() {
            to.write_all(line.trim_end().as_bytes())?;
            to.write_all(b"\n")?;
        }
        Ok(())
    }
}

fn styled(cell: Text, color: bool) -> Cell {
    let base = Cell::new(cell.text);
    if !color {
        return base;
    }
    match cell.tone {
        Tone::Plain => base,
        Tone::Good => base
            .fg(Color::Green)
            .add_attribute(comfy_table::Attribute::Bold),
        Tone::Warn => base
            .fg(Color::Yellow)
            .add_attribute(comfy_table::Attribute::Bold),
        Tone::Bad => base
            .fg(Color::Red)
            .add_attribute(comfy_table::Attribute::Bold),
        Tone::Dim => base.add_attribute(comfy_table::Attribute::Dim),
    }
}

/// Columns a string takes on a terminal.
pub fn display_width(text: &str) -> u16 {
    console::measure_text_width(text).min(u16::MAX as usize) as u16
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::render::output::{ColorChoice, Format};

    fn render(width: Option<u16>, color: bool, rows: usize) -> String {
        let columns = [
            Column::new("ID", 0),
            Column::new("BRANCH", 0),
            Column::new("DETAIL", 2).max(40),
            Column::new("EXTRA", 3),
        ];
        let mut grid = Grid {
            columns: columns.to_vec(),
            width,
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
    fn narrow_terminals_drop_columns_by_priority_and_every_line_fits() {
        let _ = Output::new(Format::Table, ColorChoice::Never);
        for (width, color) in [(80, false), (80, true), (60, true), (160, false)] {
            let text = render(Some(width), color, 600);
            for line in text.lines() {
                assert!(
                    display_width(line) <= width,
                    "{width} {color}: {} > {width}: {line:?}",
                    display_width(line)
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
