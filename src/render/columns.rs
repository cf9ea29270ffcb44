//! One column spec per view that lists rows (the DLQ, what needs a person, the operator
//! actions): each column's header, how much it matters, how wide it may grow and the
//! function that makes its cell. The terminal's grid, the live screen, Markdown, HTML and
//! CSV all read the same spec, so a row is laid out in one place and every front end shows
//! the same cells in the same order (fewer, by priority, where the width is short).
//!
//! The rows are plain views the modules above fill in ([`DlqRow`] from a verdict,
//! [`NeedRow`] from reconcile, [`ActionRow`] from the report's reading of the audit).

use super::table::{Column, Text, Tone, toned};
use super::time::{Times, rfc3339};
use super::views::{branch_tone, cause, channels_cell, join_ids, shown};
use crate::model::payload::Message;
use crate::model::{Channel, command::Step};
use crate::triage::Verdict;

/// One column of a view.
pub struct Spec<R: ?Sized> {
    /// Its name in CSV and JSON (`first_copy_at`).
    pub key: &'static str,
    /// Its header on a terminal (`FIRST COPY`).
    pub header: &'static str,
    /// Its header in a document (`First copy`).
    pub title: &'static str,
    /// 0 is always shown; higher numbers give way first when the width is short.
    pub priority: u8,
    /// The widest it grows before its values are cut.
    pub max: Option<u16>,
    /// Never cut (an id pasted into a command).
    pub whole: bool,
    /// With no room, its value goes on a line of its own under the row (a command).
    pub own_line: bool,
    /// A count: right-aligned in a document.
    pub numeric: bool,
    /// An id or a command: set as code in a document.
    pub code: bool,
    /// A time: never broken across lines in a document.
    pub time: bool,
    pub cell: fn(&R) -> Text,
}

impl<R: ?Sized> Spec<R> {
    const fn new(
        key: &'static str,
        header: &'static str,
        title: &'static str,
        priority: u8,
        cell: fn(&R) -> Text,
    ) -> Self {
        Self {
            key,
            header,
            title,
            priority,
            max: None,
            whole: false,
            own_line: false,
            numeric: false,
            code: false,
            time: false,
            cell,
        }
    }

    const fn max(mut self, width: u16) -> Self {
        self.max = Some(width);
        self
    }

    const fn whole(mut self) -> Self {
        self.whole = true;
        self
    }

    const fn own_line(mut self) -> Self {
        self.own_line = true;
        self
    }

    const fn code(mut self) -> Self {
        self.code = true;
        self
    }

    const fn time(mut self) -> Self {
        self.time = true;
        self
    }

    const fn numeric(mut self) -> Self {
        self.numeric = true;
        self
    }

    /// The grid's column for it.
    pub fn column(&self) -> Column {
        Column {
            header: self.header,
            priority: self.priority,
            max: self.max,
            own_line: self.own_line,
            whole: self.whole,
        }
    }
}

/// The grid's columns for `specs`.
pub fn columns<R: ?Sized>(specs: &[Spec<R>]) -> Vec<Column> {
    specs.iter().map(Spec::column).collect()
}

/// `row`'s cells, in the spec's order.
pub fn cells<R: ?Sized>(specs: &[Spec<R>], row: &R) -> Vec<Text> {
    specs.iter().map(|spec| (spec.cell)(row)).collect()
}

/// A Markdown table of `rows` (GitHub's pipe tables): every cell escaped so store and
/// provider text reads as text; ids and commands as code, never broken.
pub fn markdown<'r, R: 'r + ?Sized>(
    specs: &[Spec<R>],
    rows: impl IntoIterator<Item = &'r R>,
) -> String {
    let mut out = String::new();
    let titles: Vec<&str> = specs.iter().map(|s| s.title).collect();
    out.push_str(&format!("| {} |\n", titles.join(" | ")));
    let rules: Vec<&str> = specs
        .iter()
        .map(|s| if s.numeric { "---:" } else { "---" })
        .collect();
    out.push_str(&format!("|{}|\n", rules.join("|")));
    for row in rows {
        let cells: Vec<String> = specs
            .iter()
            .map(|spec| {
                let text = (spec.cell)(row).text;
                match (spec.code, text.as_str()) {
                    (_, "" | "-") => "-".to_string(),
                    (true, _) => markdown_code(&text, CodePlace::Cell),
                    (false, _) => markdown_text(&text),
                }
            })
            .collect();
        out.push_str(&format!("| {} |\n", cells.join(" | ")));
    }
    out
}

/// `text` safe in a Markdown table cell or line: control bytes shown escaped, markup and
/// HTML characters escaped, one line. GitHub's Markdown also makes a link of any bare
/// `scheme://...` and `www....`; the `:` of the one and the `.` of the other are escaped
/// so a URL in a provider's text reads as the text it is.
pub fn markdown_text(text: &str) -> String {
    let clean = super::sanitize::clean(text);
    let mut out = String::with_capacity(clean.len());
    for (at, c) in clean.char_indices() {
        let url_start = match c {
            ':' => clean[at + 1..].starts_with("//"),
            '.' => clean
                .get(at.saturating_sub(3)..at)
                .is_some_and(|before| before.eq_ignore_ascii_case("www")),
            _ => false,
        };
        if url_start {
            out.push('\\');
            out.push(c);
            continue;
        }
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '|' => out.push_str("\\|"),
            '`' => out.push_str("&#96;"),
            '\n' | '\r' => out.push(' '),
            '\\' | '*' | '_' | '[' | ']' | '~' => {
                out.push('\\');
                out.push(c);
            }
            c => out.push(c),
        }
    }
    out
}

/// Where a Markdown code span stands. In a table cell a `|` ends the cell even inside
/// code unless escaped, and the escape is taken out again; anywhere else a backslash in
/// code is shown as it is, so nothing may be escaped there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CodePlace {
    Cell,
    Line,
}

/// An id or a command as inline code that shows exactly its characters (control bytes
/// written out, as a terminal shows them) on one line: fenced by more backticks than
/// any run inside it, padded with a space where it starts or ends with a backtick or a
/// space (CommonMark takes one such space off each end), a pipe escaped in a cell. Code
/// reads no markup, entity or escape, so nothing else is escaped: `&lt;` would be shown
/// as those four characters.
pub fn markdown_code(text: &str, place: CodePlace) -> String {
    // Line breaks come out of `clean` written as `\n`, so the span stays on its line.
    let mut clean = super::sanitize::clean(text).into_owned();
    if place == CodePlace::Cell {
        clean = clean.replace('|', "\\|");
    }
    if clean.is_empty() {
        return "` `".to_string();
    }
    let longest = clean.split(|c| c != '`').map(str::len).max().unwrap_or(0);
    let fence = "`".repeat(longest + 1);
    let pad = clean.starts_with('`')
        || clean.ends_with('`')
        || (clean.starts_with(' ') && clean.ends_with(' ') && clean.trim_start() != "");
    let pad = if pad { " " } else { "" };
    format!("{fence}{pad}{clean}{pad}{fence}")
}

/// An HTML table of `rows`: maud escapes the markup; ids, commands and times in cells
/// the page's style never breaks, words of ours (a channel, a class) broken only between
/// words, so the columns of free text around them give way instead. A column that goes
/// on a line of its own on a terminal (evidence, a command) takes a row of its own under
/// its row, the table's whole width, rather than a sliver of it.
pub fn html<'r, R: 'r + ?Sized>(
    specs: &[Spec<R>],
    rows: impl IntoIterator<Item = &'r R>,
) -> maud::Markup {
    let clean = |text: &str| super::sanitize::clean(text).into_owned();
    let inline: Vec<&Spec<R>> = specs.iter().filter(|s| !s.own_line).collect();
    let under: Vec<&Spec<R>> = specs.iter().filter(|s| s.own_line).collect();
    maud::html! {
        table {
            tr { @for spec in &inline { th { (spec.title) } } }
            @for row in rows {
                tr {
                    @for spec in &inline {
                        @let text = clean(&(spec.cell)(row).text);
                        @if spec.numeric {
                            td.n { (text) }
                        } @else if spec.code && !text.is_empty() && text != "-" {
                            td { code { (text) } }
                        } @else if spec.time {
                            td.t { (text) }
                        } @else if spec.max.is_some() {
                            // Text from a store, a provider or a person: it may hold
                            // one long run without a space, so it may break anywhere.
                            td.p { (text) }
                        } @else {
                            td { (text) }
                        }
                    }
                }
                @for spec in &under {
                    @let text = clean(&(spec.cell)(row).text);
                    @if !text.is_empty() && text != "-" {
                        tr.under {
                            td.p colspan=(inline.len()) {
                                span.k { (spec.title) ": " }
                                @if spec.code { code { (text) } } @else { (text) }
                            }
                        }
                    }
                }
            }
        }
    }
}

/// A CSV of `rows`: the header of keys, then one line each, CRLF, every cell made safe
/// for a spreadsheet (see [`csv_cell`]).
pub fn csv_line<R: ?Sized>(specs: &[Spec<R>], row: Option<&R>) -> String {
    let cells: Vec<String> = match row {
        None => specs.iter().map(|s| s.key.to_string()).collect(),
        Some(row) => specs
            .iter()
            .map(|spec| csv_cell(&(spec.cell)(row).text))
            .collect(),
    };
    format!("{}\r\n", cells.join(","))
}

/// One CSV cell: control bytes shown escaped, a leading `=`, `+`, `-`, `@`, tab or
/// carriage return neutralised with a `'` (OWASP's advice), quoted when it holds a
/// comma, a quote or a line break, quotes doubled.
pub fn csv_cell(text: &str) -> String {
    let clean = super::sanitize::clean(text);
    let mut cell = clean.into_owned();
    if cell.starts_with(['=', '+', '-', '@', '\t', '\r']) {
        cell.insert(0, '\'');
    }
    if cell.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", cell.replace('"', "\"\""))
    } else {
        cell
    }
}

// ---------------------------------------------------------------------------------------
// The DLQ.

/// A DLQ entry as every front end lists it: its verdict, its id as shown (whole, or the
/// unique prefix every command accepts) and what the message was.
pub struct DlqRow<'a> {
    pub verdict: &'a Verdict,
    pub id: &'a str,
    pub message: &'a Message,
}

impl DlqRow<'_> {
    /// Its next step, with the id as shown.
    fn step(&self) -> Step {
        if self.id.len() < self.verdict.id.len() {
            self.verdict
                .next_step
                .clone()
                .map(|line| line.with_operand(&self.verdict.id, self.id))
        } else {
            self.verdict.next_step.clone()
        }
    }
}

/// The DLQ: what it is and why it failed, then what to do, then what the message was;
/// the columns the detail and `inspect` repeat give way first, then the message's. (A
/// function, as its rows borrow.)
pub fn dlq<'a>() -> [Spec<DlqRow<'a>>; 9] {
    [
        Spec::new("id", "ID", "Notification", 0, |r: &DlqRow<'a>| {
            shown(r.id).into()
        })
        .whole()
        .code(),
        Spec::new("branch", "BRANCH", "Branch", 0, |r: &DlqRow<'a>| {
            toned(r.verdict.branch.as_str(), branch_tone(r.verdict.branch))
        }),
        Spec::new("channels", "CHANNELS", "Channels", 2, |r: &DlqRow<'a>| {
            channels_cell(
                &r.verdict
                    .channels
                    .iter()
                    .map(|c| (c.channel, c.state))
                    .collect::<Vec<_>>(),
            )
            .into()
        })
        .max(48),
        Spec::new("cause", "CAUSE", "Cause", 1, |r: &DlqRow<'a>| {
            cause(r.verdict).into()
        })
        .max(56),
        // The command alone: the cause it says to fix first is in CAUSE.
        Spec::new(
            "next_step",
            "NEXT STEP",
            "Next step",
            3,
            |r: &DlqRow<'a>| shown(&r.step().command_text()).into(),
        )
        .own_line()
        .code(),
        Spec::new(
            "lease_lost",
            "LEASE LOST",
            "Lease lost",
            6,
            |r: &DlqRow<'a>| if r.verdict.lease_lost { "yes" } else { "no" }.into(),
        ),
        Spec::new("evidence", "EVIDENCE", "Evidence", 7, |r: &DlqRow<'a>| {
            join_ids(&r.verdict.evidence()).into()
        })
        .max(24),
        Spec::new("subject", "SUBJECT", "Subject", 4, |r: &DlqRow<'a>| {
            shown(r.message.subject.as_deref().unwrap_or("-")).into()
        })
        .max(40),
        Spec::new("to", "TO", "To", 5, |r: &DlqRow<'a>| {
            let channels: Vec<Channel> = r.verdict.channels.iter().map(|c| c.channel).collect();
            shown(&r.message.to_all(&channels)).into()
        })
        .max(40),
    ]
}

// ---------------------------------------------------------------------------------------
// What needs a person (reconcile).

/// A notification and channel reconcile says needs a person (or is in doubt), as every
/// front end lists it. Reconcile fills it in; the text is already in words.
#[derive(Debug, Clone, PartialEq)]
pub struct NeedRow {
    pub channel: Channel,
    /// Who got the copies, or where to find out.
    pub recipient: String,
    /// As shown: whole, or a unique prefix.
    pub id: String,
    pub class: &'static str,
    pub tone: Tone,
    pub copies: i64,
    pub first_copy: Option<f64>,
    pub last_copy: Option<f64>,
    /// Each piece of evidence in words.
    pub evidence: Vec<String>,
    /// How its times are written.
    pub times: Times,
}

/// What needs a person, in the order of `reconcile -o csv` (DESIGN §11).
pub const NEEDS: &[Spec<NeedRow>] = &[
    Spec::new("channel", "CHANNEL", "Channel", 0, |r: &NeedRow| {
        r.channel.as_str().into()
    }),
    Spec::new("recipient", "RECIPIENT", "Recipient", 1, |r: &NeedRow| {
        shown(&r.recipient).into()
    })
    .max(36),
    Spec::new("id", "ID", "Notification", 0, |r: &NeedRow| {
        shown(&r.id).into()
    })
    .whole()
    .code(),
    Spec::new("class", "CLASS", "Class", 0, |r: &NeedRow| {
        toned(r.class, r.tone)
    })
    .whole(),
    Spec::new("copies", "COPIES", "Copies", 0, |r: &NeedRow| {
        r.copies.to_string().into()
    })
    .numeric(),
    Spec::new(
        "first_copy_at",
        "FIRST COPY",
        "First copy",
        4,
        |r: &NeedRow| {
            r.first_copy
                .map(|at| r.times.of(at))
                .unwrap_or_default()
                .into()
        },
    )
    .time(),
    Spec::new(
        "last_copy_at",
        "LAST COPY",
        "Last copy",
        4,
        |r: &NeedRow| {
            r.last_copy
                .map(|at| r.times.of(at))
                .unwrap_or_default()
                .into()
        },
    )
    .time(),
    Spec::new("evidence", "EVIDENCE", "Evidence", 2, |r: &NeedRow| {
        shown(&r.evidence.join("; ")).into()
    })
    .own_line(),
];

// ---------------------------------------------------------------------------------------
// Operator actions (the audit).

/// One operator action as every front end lists it (the report reads it from the audit).
#[derive(Debug, Clone, PartialEq)]
pub struct ActionRow {
    pub at: f64,
    /// DLQ_RESOLVED, REPLAYED, VERIFIED; FORCED and the front end (`via tui`) beside it.
    pub action: String,
    /// As shown: whole, or a unique prefix.
    pub id: String,
    pub operator: String,
    pub reason: Option<String>,
    pub ticket: Option<String>,
    pub attestation: Option<String>,
    pub verdict_then: Option<String>,
    pub followed: String,
}

fn or_dash(text: &Option<String>) -> Text {
    shown(text.as_deref().unwrap_or("-")).into()
}

/// Operator actions, newest last.
pub const ACTIONS: &[Spec<ActionRow>] = &[
    Spec::new("at", "WHEN", "When", 0, |r: &ActionRow| {
        rfc3339(r.at).into()
    })
    .time(),
    Spec::new("action", "ACTION", "Action", 0, |r: &ActionRow| {
        shown(&r.action).into()
    }),
    Spec::new("id", "ID", "Notification", 0, |r: &ActionRow| {
        shown(&r.id).into()
    })
    .whole()
    .code(),
    Spec::new("operator", "OPERATOR", "Operator", 1, |r: &ActionRow| {
        shown(&r.operator).into()
    })
    .max(24),
    Spec::new("reason", "REASON", "Reason", 1, |r: &ActionRow| {
        or_dash(&r.reason)
    })
    .max(48),
    Spec::new("ticket", "TICKET", "Ticket", 3, |r: &ActionRow| {
        or_dash(&r.ticket)
    })
    .max(16),
    Spec::new(
        "attestation",
        "ATTESTATION",
        "Attestation",
        4,
        |r: &ActionRow| or_dash(&r.attestation),
    )
    .max(40),
    Spec::new(
        "verdict_then",
        "VERDICT THEN",
        "Verdict then",
        2,
        |r: &ActionRow| or_dash(&r.verdict_then),
    ),
    Spec::new(
        "followed",
        "FOLLOWED",
        "What followed",
        2,
        |r: &ActionRow| shown(&r.followed).into(),
    )
    .max(48),
];

// ---------------------------------------------------------------------------------------
// Carry-outs (the report's operator actions, a row per batch).

/// One carry-out as the report lays it out: a row per batch, never per entry.
#[derive(Debug, Clone, PartialEq)]
pub struct CarryOutRow {
    pub first_at: f64,
    pub last_at: f64,
    /// REPLAYED, DLQ_RESOLVED; FORCED with its footnote's number; the front end.
    pub action: String,
    pub entries: usize,
    pub operator: String,
    pub reason: Option<String>,
    pub ticket: Option<String>,
    pub followed: String,
    /// How its times are written.
    pub times: Times,
}

/// The report's operator actions, oldest first.
pub const CARRY_OUTS: &[Spec<CarryOutRow>] = &[
    Spec::new("first_at", "FROM", "From", 0, |r: &CarryOutRow| {
        r.times.of(r.first_at).into()
    })
    .whole()
    .time()
    .code(),
    Spec::new("last_at", "TO", "To", 1, |r: &CarryOutRow| {
        r.times.of(r.last_at).into()
    })
    .whole()
    .time()
    .code(),
    Spec::new("action", "ACTION", "Action", 0, |r: &CarryOutRow| {
        shown(&r.action).into()
    }),
    Spec::new("entries", "ENTRIES", "Entries", 0, |r: &CarryOutRow| {
        r.entries.to_string().into()
    })
    .numeric(),
    Spec::new("operator", "OPERATOR", "Who", 0, |r: &CarryOutRow| {
        shown(&r.operator).into()
    })
    .max(24),
    Spec::new("reason", "REASON", "Why", 1, |r: &CarryOutRow| {
        or_dash(&r.reason)
    })
    .max(48),
    Spec::new("ticket", "TICKET", "Ticket", 3, |r: &CarryOutRow| {
        or_dash(&r.ticket)
    })
    .max(16),
    Spec::new(
        "followed",
        "FOLLOWED",
        "What followed",
        2,
        |r: &CarryOutRow| shown(&r.followed).into(),
    )
    .max(48),
];

// ---------------------------------------------------------------------------------------
// Verdict changes (the report's VERIFIED events).

/// One verdict change: a provider's own record, recorded as VERIFIED.
#[derive(Debug, Clone, PartialEq)]
pub struct VerdictRow {
    pub at: f64,
    /// As shown: whole, or a unique prefix.
    pub id: String,
    pub channel: String,
    pub answer: String,
    pub source: String,
    pub operator: String,
    /// When the attempts the answer is about ran, by their own events.
    pub ran: Option<(f64, f64)>,
    pub event_id: i64,
    pub evidence: String,
    /// How its times are written.
    pub times: Times,
}

/// The most of a verdict change's evidence a page shows; the bundle's report.json and
/// the VERIFIED event keep it whole.
pub const EVIDENCE_SHOWN: usize = 110;

/// Verdict changes, oldest first.
pub const VERDICTS: &[Spec<VerdictRow>] = &[
    Spec::new("at", "WHEN", "Recorded", 0, |r: &VerdictRow| {
        r.times.of(r.at).into()
    })
    .time(),
    Spec::new("id", "ID", "Notification", 0, |r: &VerdictRow| {
        shown(&r.id).into()
    })
    .whole()
    .code(),
    Spec::new("channel", "CHANNEL", "Channel", 0, |r: &VerdictRow| {
        shown(&r.channel).into()
    }),
    Spec::new("answer", "ANSWER", "Answer", 0, |r: &VerdictRow| {
        shown(&r.answer).into()
    }),
    Spec::new("source", "SOURCE", "Source", 1, |r: &VerdictRow| {
        shown(&r.source).into()
    }),
    Spec::new(
        "ran_from",
        "RAN FROM",
        "Attempt started",
        2,
        |r: &VerdictRow| {
            r.ran
                .map(|(from, _)| r.times.of(from))
                .unwrap_or_default()
                .into()
        },
    )
    .time(),
    Spec::new("ran_to", "RAN TO", "Attempt ended", 2, |r: &VerdictRow| {
        r.ran
            .map(|(_, to)| r.times.of(to))
            .unwrap_or_default()
            .into()
    })
    .time(),
    Spec::new("event", "EVENT", "Event", 3, |r: &VerdictRow| {
        r.event_id.to_string().into()
    })
    .numeric(),
    // Who recorded it and what the record said, on a line of their own: the person is
    // the same for a run of them, and the record's words are long.
    Spec::new(
        "evidence",
        "EVIDENCE",
        "Recorded by",
        4,
        |r: &VerdictRow| {
            let evidence = shown(&r.evidence);
            let evidence = match evidence.char_indices().nth(EVIDENCE_SHOWN) {
                Some((end, _)) => format!("{}… (whole in event {})", &evidence[..end], r.event_id),
                None => evidence,
            };
            format!("{}: {evidence}", shown(&r.operator)).into()
        },
    )
    .own_line(),
];

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The text of every code span of `markdown`, as a CommonMark reader with GitHub's
    /// tables shows it.
    fn code_read(markdown: &str) -> Vec<String> {
        use pulldown_cmark::{Event, Options, Parser};
        Parser::new_ext(markdown, Options::ENABLE_TABLES)
            .filter_map(|event| match event {
                Event::Code(text) => Some(text.into_string()),
                _ => None,
            })
            .collect()
    }

    /// `text` read back from its code span in a table cell and in a list item.
    fn both_places(text: &str) -> (Vec<String>, Vec<String>) {
        let cell = markdown_code(text, CodePlace::Cell);
        let table = format!("| A | B |\n|---|---|\n| {cell} | x |\n");
        let line = format!("- the entry ({})\n", markdown_code(text, CodePlace::Line));
        (code_read(&table), code_read(&line))
    }

    #[test]
    fn a_code_span_shows_exactly_its_text_in_a_cell_and_on_a_line() {
        for text in [
            "n-01a242263fad724e97f9415d6a0422d1",
            "a<b>&amp;",
            "*not bold* _nor this_ [nor](a link)",
            "back\\slash",
            "`tick",
            "tick`",
            "a``b`c",
            " spaced ",
            "pipe|in|it",
            "unsctl replay 'a`b' --confirm",
        ] {
            let (cell, line) = both_places(text);
            assert_eq!(
                cell,
                [text],
                "in a cell: {}",
                markdown_code(text, CodePlace::Cell)
            );
            assert_eq!(
                line,
                [text],
                "on a line: {}",
                markdown_code(text, CodePlace::Line)
            );
        }
    }

    #[test]
    fn a_code_span_writes_control_bytes_out_and_stays_on_one_line() {
        let text = "n-\u{1b}[31mEVIL\u{7}\r\nX";
        let (cell, line) = both_places(text);
        let shown = crate::render::sanitize::cleaned(text);
        assert_eq!(cell, [shown.as_str()]);
        assert_eq!(line, [shown.as_str()]);
        assert!(!markdown_code(text, CodePlace::Line).contains(['\n', '\r', '\u{1b}']));
    }

    /// The plain text of `markdown`, as a CommonMark reader shows it.
    fn text_read(markdown: &str) -> String {
        use pulldown_cmark::{Event, Parser};
        Parser::new(markdown)
            .filter_map(|event| match event {
                Event::Text(text) => Some(text.into_string()),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn a_url_in_text_is_no_link_and_reads_as_it_was() {
        for text in [
            "see https://evil.example/fix now",
            "HTTP://x.y and ftp://z",
            "go to www.evil.example or WWW.evil.example",
            "(https://a.b) [x](https://c.d)",
            "stage: auth, 5.1.1, a.www.b, wwwx.y",
        ] {
            let written = markdown_text(text);
            // A `:` before `//` is written escaped, `\://`, which starts no link.
            assert!(!written.replace("\\:", "").contains("://"), "{written}");
            assert!(!written.to_ascii_lowercase().contains("www."), "{written}");
            assert_eq!(text_read(&written), text, "{written}");
        }
        // Only what starts a link is escaped.
        assert_eq!(markdown_text("stage: auth, 5.1.1"), "stage: auth, 5.1.1");
    }

    proptest! {
        #[test]
        fn any_text_reads_back_from_its_code_span(text in "[a-z `|<>&*_\\\\\\[\\]]{1,12}") {
            let (cell, line) = both_places(&text);
            prop_assert_eq!(cell, vec![text.clone()]);
            prop_assert_eq!(line, vec![text]);
        }
    }
}
