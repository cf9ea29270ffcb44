//! Markdown for a terminal, parsed by pulldown-cmark and wrapped by textwrap: headings
//! underlined, prose and list items wrapped with hanging indents, tables aligned,
//! code indented. What is there for the runbook test only (`# prints:` lines, HTML
//! comments) is not shown.

use super::output::Output;
use super::table::display_width;
use pulldown_cmark::{CodeBlockKind, Event, HeadingLevel, Options, Parser, Tag, TagEnd};

/// Renders `markdown` for a terminal `width` columns wide.
pub fn render(markdown: &str, width: usize, out: &Output) -> String {
    let mut state = State {
        width: width.max(20),
        out,
        lines: Vec::new(),
        inline: String::new(),
        lists: Vec::new(),
        item_prefix: None,
        code: None,
        table: None,
        link: None,
    };
    let options = Options::ENABLE_TABLES | Options::ENABLE_STRIKETHROUGH;
    for event in Parser::new_ext(markdown, options) {
        state.event(event);
    }
    state.flush_inline();
    let mut text = state.lines.join("\n");
    while text.contains("\n\n\n") {
        text = text.replace("\n\n\n", "\n\n");
    }
    text.trim_matches('\n').to_string()
}

struct Table {
    rows: Vec<Vec<String>>,
    row: Vec<String>,
}

struct State<'o> {
    width: usize,
    out: &'o Output,
    lines: Vec<String>,
    /// The text of the paragraph, heading, item or cell being read.
    inline: String,
    /// Open lists: the next number of an ordered one, None for bullets.
    lists: Vec<Option<u64>>,
    /// The marker of the item whose first line is still to be written.
    item_prefix: Option<String>,
    code: Option<String>,
    table: Option<Table>,
    /// The target of the link being read.
    link: Option<String>,
}

impl State<'_> {
    /// Where the text of the innermost list item continues (0 outside lists); its
    /// marker sits two columns to the left.
    fn indent(&self) -> usize {
        self.lists.len() * 4
    }

    fn blank(&mut self) {
        if self.lines.last().is_some_and(|l| !l.is_empty()) {
            self.lines.push(String::new());
        }
    }

    /// Writes the inline text read so far as wrapped lines, under the open list item.
    fn flush_inline(&mut self) {
        let text = std::mem::take(&mut self.inline);
        let text = text.trim();
        if text.is_empty() {
            return;
        }
        let indent = self.indent();
        let (first, rest) = match self.item_prefix.take() {
            Some(marker) => {
                let first = format!("{}{marker}", " ".repeat(indent.saturating_sub(2)));
                let rest = " ".repeat(display_width(&first) as usize);
                (first, rest)
            }
            None => (" ".repeat(indent), " ".repeat(indent)),
        };
        let options = textwrap::Options::new(self.width)
            .initial_indent(&first)
            .subsequent_indent(&rest)
            .break_words(false);
        for hard in text.split('\n') {
            for line in textwrap::wrap(hard, &options) {
                self.lines.push(line.trim_end().to_string());
            }
        }
    }

    /// Inside a code block: its text, kept as written and indented, without the
    /// `# prints:` lines that are for the runbook test.
    fn code_event(&mut self, event: Event<'_>) {
        match event {
            Event::Text(text) => {
                if let Some(code) = self.code.as_mut() {
                    code.push_str(&text);
                }
            }
            Event::End(TagEnd::CodeBlock) => {
                let code = self.code.take().unwrap_or_default();
                self.blank();
                let indent = " ".repeat(self.indent() + 4);
                for line in code.lines() {
                    if line.trim_start().starts_with("# prints:") {
                        continue;
                    }
                    self.lines
                        .push(format!("{indent}{line}").trim_end().to_string());
                }
                self.blank();
            }
            _ => {}
        }
    }

    /// A heading: bold, wrapped, underlined at levels 1 and 2.
    fn heading(&mut self, level: HeadingLevel) {
        let text = std::mem::take(&mut self.inline).trim().to_string();
        let underline = match level {
            HeadingLevel::H1 => Some('='),
            HeadingLevel::H2 => Some('-'),
            _ => None,
        };
        let wrapped = textwrap::wrap(&text, self.width);
        let longest = wrapped
            .iter()
            .map(|l| display_width(l) as usize)
            .max()
            .unwrap_or(0);
        for line in wrapped {
            self.lines.push(self.out.bold(&line));
        }
        if let Some(mark) = underline {
            self.lines.push(mark.to_string().repeat(longest));
        }
        self.lines.push(String::new());
    }

    /// The end of a table: its rows aligned in columns under the open list item.
    fn table_end(&mut self) {
        if let Some(table) = self.table.take() {
            self.blank();
            let indent = self.indent();
            let rendered = table_lines(&table.rows, self.width.saturating_sub(indent), self.out);
            self.lines.extend(
                rendered
                    .into_iter()
                    .map(|l| format!("{}{l}", " ".repeat(indent))),
            );
            self.lines.push(String::new());
        }
    }

    /// A list item begins: its marker, numbered in an ordered list.
    fn item_start(&mut self) {
        self.flush_inline();
        let marker = match self.lists.last_mut() {
            Some(Some(n)) => {
                let marker = format!("{n}. ");
                *n += 1;
                marker
            }
            _ => "- ".to_string(),
        };
        self.item_prefix = Some(marker);
    }

    fn cell_end(&mut self) {
        let cell = std::mem::take(&mut self.inline).trim().to_string();
        if let Some(table) = self.table.as_mut() {
            table.row.push(cell);
        }
    }

    fn row_end(&mut self) {
        if let Some(table) = self.table.as_mut() {
            let row = std::mem::take(&mut table.row);
            table.rows.push(row);
        }
    }

    fn event(&mut self, event: Event<'_>) {
        if self.code.is_some() {
            self.code_event(event);
            return;
        }
        match event {
            Event::Start(Tag::Heading { .. }) => {
                self.flush_inline();
                self.blank();
            }
            Event::End(TagEnd::Heading(level)) => self.heading(level),
            Event::Start(Tag::Paragraph) => self.flush_inline(),
            Event::End(TagEnd::Paragraph) => {
                self.flush_inline();
                if self.lists.is_empty() {
                    self.lines.push(String::new());
                }
            }
            Event::Start(Tag::List(start)) => {
                self.flush_inline();
                if self.lists.is_empty() {
                    self.blank();
                }
                self.lists.push(start);
            }
            Event::End(TagEnd::List(_)) => {
                self.flush_inline();
                self.lists.pop();
                if self.lists.is_empty() {
                    self.lines.push(String::new());
                }
            }
            Event::Start(Tag::Item) => self.item_start(),
            Event::End(TagEnd::Item) => self.flush_inline(),
            Event::Start(Tag::CodeBlock(kind)) => {
                self.flush_inline();
                let _ = matches!(kind, CodeBlockKind::Fenced(_));
                self.code = Some(String::new());
            }
            Event::Start(Tag::Table(_)) => {
                self.flush_inline();
                self.table = Some(Table {
                    rows: Vec::new(),
                    row: Vec::new(),
                });
            }
            Event::End(TagEnd::TableCell) => self.cell_end(),
            Event::End(TagEnd::TableHead | TagEnd::TableRow) => self.row_end(),
            Event::End(TagEnd::Table) => self.table_end(),
            Event::Start(Tag::Link { dest_url, .. }) => self.link = Some(dest_url.to_string()),
            Event::End(TagEnd::Link) => {
                if let Some(url) = self.link.take()
                    && !url.starts_with('#')
                    && !self.inline.ends_with(&url)
                {
                    self.inline.push_str(&format!(" ({url})"));
                }
            }
            Event::Text(text) | Event::Code(text) => self.inline.push_str(&text),
            Event::SoftBreak => self.inline.push(' '),
            Event::HardBreak => self.inline.push('\n'),
            Event::Rule => {
                self.flush_inline();
                self.blank();
                self.lines.push("-".repeat(self.width.min(40)));
                self.lines.push(String::new());
            }
            // Comments and markup for the runbook test are not for the reader.
            Event::Html(_) | Event::InlineHtml(_) => {}
            _ => {}
        }
    }
}

/// A table aligned in columns; the widest column is wrapped until the table fits.
fn table_lines(rows: &[Vec<String>], width: usize, out: &Output) -> Vec<String> {
    const GAP: usize = 2;
    let columns = rows.iter().map(Vec::len).max().unwrap_or(0);
    if columns == 0 {
        return Vec::new();
    }
    let natural: Vec<usize> = (0..columns)
        .map(|c| {
            rows.iter()
                .filter_map(|r| r.get(c))
                .map(|cell| display_width(cell) as usize)
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut widths = natural.clone();
    let budget = width.saturating_sub(GAP * (columns - 1)).max(columns * 8);
    while widths.iter().sum::<usize>() > budget {
        let (widest, w) = widths
            .iter()
            .enumerate()
            .max_by_key(|(_, w)| **w)
            .map(|(i, w)| (i, *w))
            .unwrap_or((0, 0));
        if w <= 8 {
            break;
        }
        let over = widths.iter().sum::<usize>() - budget;
        widths[widest] = w.saturating_sub(over).max(8).max(w / 2);
    }
    let mut lines = Vec::new();
    for (n, row) in rows.iter().enumerate() {
        let cells: Vec<Vec<String>> = (0..columns)
            .map(|c| {
                let cell = row.get(c).map(String::as_str).unwrap_or("");
                textwrap::wrap(cell, widths[c])
                    .into_iter()
                    .map(|l| l.into_owned())
                    .collect()
            })
            .collect();
        let height = cells.iter().map(Vec::len).max().unwrap_or(1).max(1);
        for line in 0..height {
            let mut text = String::new();
            for (c, cell) in cells.iter().enumerate() {
                let part = cell.get(line).map(String::as_str).unwrap_or("");
                text.push_str(part);
                if c + 1 < columns {
                    let pad = widths[c].saturating_sub(display_width(part) as usize) + GAP;
                    text.push_str(&" ".repeat(pad));
                }
            }
            let text = text.trim_end().to_string();
            lines.push(if n == 0 { out.bold(&text) } else { text });
        }
        if n == 0 {
            lines.push(
                widths
                    .iter()
                    .map(|w| "-".repeat(*w))
                    .collect::<Vec<_>>()
                    .join(&" ".repeat(GAP)),
            );
        }
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::render::output::{ColorChoice, Format};

    fn plain() -> Output {
        Output::new(Format::Table, ColorChoice::Never)
    }

    #[test]
    fn tables_align_and_fit() {
        let text = render(
            "| a | the evidence | do |\n| --- | --- | --- |\n| 1 `RESOLVE` | every channel has a result with success true, and more words to wrap | resolve |\n",
            60,
            &plain(),
        );
        assert!(!text.contains('|'), "{text}");
        for line in text.lines() {
            assert!(display_width(line) <= 60, "{line:?}");
        }
        let header = text.lines().next().unwrap_or_default();
        let row = text.lines().nth(2).unwrap_or_default();
        assert_eq!(header.find("the evidence"), row.find("every"), "{text}");
    }

    #[test]
    fn test_markers_and_comments_are_hidden_and_lists_hang() {
        let text = render(
            "<!-- runbook: NOTIF_ID=RESOLVE -->\n```sh\nunsctl dlq triage\n# prints: NEXT STEP\n```\n\n- a list item long enough that it has to wrap onto a second line at this width\n",
            40,
            &plain(),
        );
        assert!(
            !text.contains("# prints:") && !text.contains("<!--"),
            "{text}"
        );
        assert!(text.contains("    unsctl dlq triage"), "{text}");
        let lines: Vec<&str> = text
            .lines()
            .filter(|l| l.contains("list") || l.starts_with("  "))
            .collect();
        assert!(lines.iter().any(|l| l.starts_with("  - a list")), "{text}");
        assert!(
            text.lines()
                .any(|l| l.starts_with("    ") && !l.contains("unsctl")),
            "hanging indent: {text}"
        );
    }
}
