//! Drawing the screen from [`App`]: no IO and no decisions, only layout. Every meaning
//! is in words or glyphs as well as colour (`[x]` marked, `*` changed since the last
//! look, `>` the cursor), so NO_COLOR loses nothing.

use super::app::{App, Dialog, Focus, Input, ViewKind};
use super::keymap;
use crate::render::columns::{self, Spec};
use crate::render::sanitize::clean;
use crate::render::table::{Text, Tone};
use crate::triage::Branch;
use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Clear, Paragraph, Row, Sparkline, Table, Wrap};
use std::time::Instant;

/// The smallest terminal the screen lays out in.
pub const MIN_WIDTH: u16 = 60;
pub const MIN_HEIGHT: u16 = 16;

const SPINNER: [&str; 4] = ["|", "/", "-", "\\"];

/// Styles, or none without colour.
struct Paint {
    color: bool,
}

impl Paint {
    fn fg(&self, color: Color) -> Style {
        if self.color {
            Style::default().fg(color)
        } else {
            Style::default()
        }
    }

    fn branch(&self, branch: Branch) -> Style {
        self.fg(match branch {
            Branch::Resolve => Color::Green,
            Branch::Verify => Color::Yellow,
            Branch::Replay => Color::Red,
        })
    }

    fn bold(&self) -> Style {
        Style::default().add_modifier(Modifier::BOLD)
    }

    /// A cell's tone, in colour (the words carry the meaning without it).
    fn tone(&self, tone: Tone) -> Style {
        match tone {
            Tone::Plain => Style::default(),
            Tone::Good => self.fg(Color::Green),
            Tone::Warn => self.fg(Color::Yellow),
            Tone::Bad => self.fg(Color::Red),
            Tone::Dim => self.fg(Color::DarkGray),
        }
    }

    /// The cursor's row: reversed, which needs no colour.
    fn selected(&self) -> Style {
        Style::default().add_modifier(Modifier::REVERSED)
    }
}

pub fn draw(frame: &mut Frame<'_>, app: &App, now: Instant) {
    let area = frame.area();
    if area.width < MIN_WIDTH || area.height < MIN_HEIGHT {
        too_small(frame, area);
        return;
    }
    let paint = Paint {
        color: app.config.color,
    };
    let [header, body, message, footer] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Min(5),
        Constraint::Length(wrapped_rows(
            message_line(app, &paint, area.width),
            area.width,
            (1, MESSAGE_ROWS),
        )),
        Constraint::Length(1),
    ])
    .areas(area);
    frame.render_widget(Paragraph::new(header_line(app, now, &paint)), header);
    match app.view {
        ViewKind::Dlq => dlq(frame, app, body, &paint),
        ViewKind::Inspect => inspect(frame, app, body),
        ViewKind::Reconcile => reconcile(frame, app, body, &paint),
        ViewKind::Pulse => pulse(frame, app, body, &paint),
        ViewKind::Audit => audit(frame, app, body),
        ViewKind::Contexts => contexts(frame, app, body),
        ViewKind::Providers => providers(frame, app, body, &paint),
    }
    frame.render_widget(
        Paragraph::new(message_line(app, &paint, area.width)).wrap(Wrap { trim: false }),
        message,
    );
    frame.render_widget(
        Paragraph::new(footer_line(app, &paint, footer.width)),
        footer,
    );
    if app.help {
        help(frame, app, body);
    }
    if let Some(dialog) = &app.dialog {
        dialog_box(frame, dialog, body, &paint, now);
    }
}

fn too_small(frame: &mut Frame<'_>, area: Rect) {
    let text = format!(
        "unsctl tui needs at least {MIN_WIDTH}×{MIN_HEIGHT}; this terminal is {}×{}. Make it larger, or use the commands (unsctl dlq triage). q quits.",
        area.width, area.height
    );
    frame.render_widget(Paragraph::new(text).wrap(Wrap { trim: true }), area);
}

fn header_line(app: &App, now: Instant, paint: &Paint) -> Line<'static> {
    // What matters most first: a long store path is what the width cuts.
    let mut spans = vec![
        Span::styled("unsctl ", paint.bold()),
        Span::styled(app.view.name().to_uppercase(), paint.bold()),
    ];
    if app.config.readonly.is_some() {
        spans.push(Span::raw(" · "));
        spans.push(Span::styled(
            "READ-ONLY",
            paint.fg(Color::Yellow).add_modifier(Modifier::BOLD),
        ));
    }
    let age = match app.loaded() {
        Some(at) => format!(" · data {}s old", now.duration_since(at).as_secs()),
        None => " · no data yet".to_string(),
    };
    spans.push(Span::raw(age));
    if let Some(pending) = app.pending.values().next() {
        let turn = (now.duration_since(pending.since).as_millis() / 120) as usize;
        spans.push(Span::raw(format!(
            " {} {} (esc cancels)",
            SPINNER[turn % SPINNER.len()],
            pending.label
        )));
    }
    spans.push(Span::raw(format!(
        " · as {} · {}",
        clean(&app.config.operator),
        clean(&app.config.place)
    )));
    Line::from(spans)
}

/// The most rows the message takes.
const MESSAGE_ROWS: u16 = 4;

/// The message, or what is typed in the bar (with an error's message after it): it takes
/// as many rows as it needs to be read whole, up to four, so a reason or where a report
/// went is never cut at the screen's edge. Typed text too long to stand whole beside its
/// error shows its end, where the keys go.
fn message_line(app: &App, paint: &Paint, width: u16) -> Line<'static> {
    let after = app
        .message
        .as_ref()
        .filter(|m| m.error)
        .map(|m| format!("   ! {}", clean(&m.text)))
        .unwrap_or_default();
    // The fewest characters dropped from the front (by halving) that let it fit.
    let typed = |bar: char, text: &str| {
        let chars: Vec<char> = clean(text).chars().collect();
        let line = |dropped: usize| {
            let kept: String = chars[dropped..].iter().collect();
            let ellipsis = if dropped > 0 { "…" } else { "" };
            format!("{bar}{ellipsis}{kept}_{after}")
        };
        let fits = |dropped: usize| {
            let rows = Paragraph::new(line(dropped))
                .wrap(Wrap { trim: false })
                .line_count(width.max(1));
            rows <= usize::from(MESSAGE_ROWS)
        };
        if fits(0) {
            return Line::from(line(0));
        }
        let (mut low, mut high) = (1, chars.len());
        while low < high {
            let middle = (low + high) / 2;
            if fits(middle) {
                high = middle;
            } else {
                low = middle + 1;
            }
        }
        Line::from(line(low))
    };
    match (&app.input, &app.message) {
        (Some(Input::Filter(text)), _) => typed('/', text),
        (Some(Input::Command(text)), _) => typed(':', text),
        (None, Some(message)) if message.error => Line::from(Span::styled(
            format!("! {}", clean(&message.text)),
            paint.fg(Color::Red),
        )),
        (None, Some(message)) => Line::from(clean(&message.text).into_owned()),
        (None, None) => Line::from(""),
    }
}

/// The footer's keys, as many as fit `width` ([`keymap::footer`] chooses them).
fn footer_line(app: &App, paint: &Paint, width: u16) -> Line<'static> {
    let mut spans = Vec::new();
    for (keys, does) in keymap::footer(app.view, app.config.readonly.is_some(), width.into()) {
        spans.push(Span::styled(keys, paint.bold()));
        spans.push(Span::raw(format!(" {does}  ")));
    }
    Line::from(spans)
}

fn dlq(frame: &mut Frame<'_>, app: &App, area: Rect, paint: &Paint) {
    let view = &app.dlq;
    // The detail holds the row under the cursor whole: four lines, and the next step's
    // command wrapped rather than cut.
    let [counts, table, detail] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Min(3),
        Constraint::Length(detail_height(view, area.width)),
    ])
    .areas(area);
    frame.render_widget(Paragraph::new(counts_line(view, paint)), counts);
    dlq_table(frame, view, table, paint);
    frame.render_widget(
        Paragraph::new(dlq_detail(view)).wrap(Wrap { trim: false }),
        detail,
    );
}

/// Counts by branch, the filter, the marks and the page.
fn counts_line(view: &super::app::DlqView, paint: &Paint) -> Line<'static> {
    let mut spans = Vec::new();
    match &view.counts {
        Some(counts) => {
            for branch in Branch::ALL {
                spans.push(Span::styled(branch.as_str(), paint.branch(branch)));
                spans.push(Span::raw(format!(
                    " {}  ",
                    counts.get(&branch).copied().unwrap_or(0)
                )));
            }
            spans.push(Span::raw(format!(
                "total {}",
                counts.values().sum::<usize>()
            )));
        }
        None => spans.push(Span::raw("counting…")),
    }
    if !view.filter.text.is_empty() {
        spans.push(Span::raw(format!(" · filter {}", clean(&view.filter.text))));
    }
    if !view.marks.is_empty() {
        spans.push(Span::raw(format!(" · {} marked", view.marks.len())));
    }
    if !view.pages.is_empty() {
        spans.push(Span::raw(format!(" · page {}", view.pages.len() + 1)));
    }
    Line::from(spans)
}

fn dlq_table(frame: &mut Frame<'_>, view: &super::app::DlqView, table: Rect, paint: &Paint) {
    let specs = columns::dlq();
    let cells: Vec<Vec<Text>> = view
        .rows
        .iter()
        .map(|row| {
            columns::cells(
                &specs,
                &columns::DlqRow {
                    verdict: &row.verdict,
                    id: &row.short,
                    message: &row.message,
                },
            )
        })
        .collect();
    // The cursor, the mark and the change take the first five columns.
    let lead = |n: usize| {
        let id = &view.rows[n].verdict.id;
        format!(
            "{}{}{}",
            cursor(n, view.selected),
            if view.marks.contains(id) {
                "[x]"
            } else {
                "[ ]"
            },
            if view.changed.contains(id) { "*" } else { " " }
        )
    };
    let drawn = spec_table(&specs, &cells, (table, view.selected), (5, &lead), paint);
    let empty = view.rows.is_empty() && view.loaded.is_some();
    table_or_nothing(
        frame,
        drawn,
        table,
        empty.then_some("No DLQ entries match: nothing to do here."),
    );
}

/// Spaces between a table's columns, as the terminal's grid leaves them.
const GAP: u16 = 2;

/// The columns of `specs` the screen has room for in `width`, each with its width, laid
/// out by the grid's own rule (the least important give way first). A column whose
/// value would go on a line of its own is left to the detail under the table.
fn spec_columns<R>(specs: &[Spec<R>], cells: &[Vec<Text>], width: u16) -> Vec<(usize, u16)> {
    let kept: Vec<usize> = (0..specs.len()).filter(|&i| !specs[i].own_line).collect();
    let columns: Vec<crate::render::table::Column> =
        kept.iter().map(|&i| specs[i].column()).collect();
    let rows: Vec<Vec<Text>> = cells
        .iter()
        .map(|row| kept.iter().map(|&i| row[i].clone()).collect())
        .collect();
    let (shown, widths) = crate::render::table::plan(&columns, &rows, Some(width), false);
    kept.into_iter()
        .zip(shown.into_iter().zip(widths))
        .filter(|(_, (shown, _))| *shown)
        .map(|(i, (_, width))| (i, width))
        .collect()
}

/// A cell cut to `width` as the grid cuts it, in its tone's colour.
fn cell_line(cell: &Text, width: u16, paint: &Paint) -> Line<'static> {
    let (text, _) = crate::render::table::fit(&cell.text, usize::from(width));
    Line::from(Span::styled(text.into_owned(), paint.tone(cell.tone)))
}

/// The lines the detail takes at `width`, its wrapped lines counted.
fn detail_height(view: &super::app::DlqView, width: u16) -> u16 {
    wrapped_rows(dlq_detail(view), width, (4, 8))
}

/// The rows `lines` take wrapped at `width` as they are drawn (at word ends, not every
/// `width` characters), within `(least, most)`.
fn wrapped_rows<'a>(
    lines: impl Into<ratatui::text::Text<'a>>,
    width: u16,
    (least, most): (u16, u16),
) -> u16 {
    let rows = Paragraph::new(lines)
        .wrap(Wrap { trim: false })
        .line_count(width.max(1));
    u16::try_from(rows).unwrap_or(most).clamp(least, most)
}

/// `text` drawn wrapped at the foot of `area`, in the rows it takes within `rows`: what a
/// table's cells cut of the row under its cursor, said whole. Returns the room above it
/// (all of `area` without a text).
fn beneath(frame: &mut Frame<'_>, area: Rect, text: Option<String>, rows: (u16, u16)) -> Rect {
    let Some(text) = text else {
        return area;
    };
    let height = wrapped_rows(text.as_str(), area.width, rows);
    let [above, foot] =
        Layout::vertical([Constraint::Min(3), Constraint::Length(height)]).areas(area);
    frame.render_widget(Paragraph::new(text).wrap(Wrap { trim: false }), foot);
    above
}

/// A table of `specs` over `cells` in `area`, scrolled to `selected` (reversed), each
/// row led by `lead` of its index (`lead_width` columns: the cursor, the marks).
fn spec_table<'a, R>(
    specs: &[Spec<R>],
    cells: &'a [Vec<Text>],
    (area, selected): (Rect, usize),
    (lead_width, lead): (u16, &dyn Fn(usize) -> String),
    paint: &Paint,
) -> Table<'a> {
    let laid = spec_columns(specs, cells, area.width.saturating_sub(lead_width + GAP));
    let rows: Vec<Row<'_>> = visible(cells, selected, area)
        .map(|(n, row)| {
            let mut line = vec![Line::from(lead(n))];
            line.extend(
                laid.iter()
                    .map(|&(i, width)| cell_line(&row[i], width, paint)),
            );
            let style = if n == selected {
                paint.selected()
            } else {
                Style::default()
            };
            Row::new(line).style(style)
        })
        .collect();
    let widths: Vec<Constraint> = std::iter::once(Constraint::Length(lead_width))
        .chain(laid.iter().map(|&(_, w)| Constraint::Length(w)))
        .collect();
    let header: Vec<&str> = std::iter::once("")
        .chain(laid.iter().map(|&(i, _)| specs[i].header))
        .collect();
    Table::new(rows, widths)
        .column_spacing(GAP)
        .header(Row::new(header).style(paint.bold()))
}

/// The cursor's mark, for a table's lead.
fn cursor(n: usize, selected: usize) -> String {
    if n == selected { ">" } else { " " }.to_string()
}

/// The row under the cursor in full: its channels, its cause, what the message was, and
/// the next step whole (wrapped, never cut).
fn dlq_detail(view: &super::app::DlqView) -> Vec<Line<'static>> {
    view.current()
        .map(|row| {
            let verdict = &row.verdict;
            let states: Vec<String> = verdict
                .channels
                .iter()
                .map(|c| format!("{}={}", c.channel, c.state.as_str()))
                .collect();
            let channels: Vec<crate::model::Channel> =
                verdict.channels.iter().map(|c| c.channel).collect();
            vec![
                Line::from(format!(
                    "{} {}: {}",
                    clean(&verdict.id),
                    verdict.branch.as_str(),
                    states.join(" ")
                )),
                Line::from(format!("cause: {}", crate::render::views::cause(verdict))),
                Line::from(format!(
                    "message: {} to {}",
                    row.message
                        .subject
                        .as_deref()
                        .map_or_else(|| "(no subject)".to_string(), |s| format!("{:?}", clean(s))),
                    clean(&row.message.to_all(&channels))
                )),
                Line::from(format!(
                    "next: {}",
                    clean(&verdict.next_step.command_text())
                )),
            ]
        })
        .unwrap_or_default()
}

/// The rows a table of `area` (a header, then rows) shows, numbered, scrolled so that
/// `selected` is in sight.
fn visible<T>(rows: &[T], selected: usize, area: Rect) -> impl Iterator<Item = (usize, &T)> {
    let height = area.height.saturating_sub(1) as usize;
    let offset = scrolled(selected, height, rows.len());
    rows.iter().enumerate().skip(offset).take(height)
}

/// The first row to show so that `selected` is on screen.
fn scrolled(selected: usize, height: usize, len: usize) -> usize {
    if height == 0 || len <= height {
        return 0;
    }
    selected.saturating_sub(height - 1).min(len - height)
}

fn inspect(frame: &mut Frame<'_>, app: &App, area: Rect) {
    let view = &app.inspect;
    let text: Vec<Line<'_>> = if view.lines.is_empty() {
        vec![Line::from(format!("reading {}…", clean(&view.id)))]
    } else {
        view.lines
            .iter()
            .map(|l| Line::from(clean(l).into_owned()))
            .collect()
    };
    let next = match &view.next_step {
        Some(step) => format!("next: {} (j/k scroll)", clean(&step.to_string())),
        None if view.lines.is_empty() => String::new(),
        None => "not in the DLQ: nothing to do (j/k scroll)".into(),
    };
    // The next step stays in sight, whole, however far the timeline is scrolled: the
    // lines it wraps to at this width (two at least, six at most).
    let wrapped = textwrap::wrap(&next, usize::from(area.width.max(1))).len();
    let needed = u16::try_from(wrapped.clamp(2, 6)).unwrap_or(2);
    let [body, step] =
        Layout::vertical([Constraint::Min(3), Constraint::Length(needed)]).areas(area);
    frame.render_widget(
        Paragraph::new(text)
            .scroll((view.scroll, 0))
            .block(Block::default().borders(Borders::NONE)),
        body,
    );
    frame.render_widget(Paragraph::new(next).wrap(Wrap { trim: false }), step);
}

/// The reconcile view's head: the classes counted over every channel, then each
/// channel's counts.
fn reconcile_counts(view: &super::app::ReconcileView) -> Vec<Line<'static>> {
    use crate::reconcile::Class;
    let summary = crate::reconcile::summary(
        &view.channels,
        view.items.iter().map(|i| (i.channel, i.class)),
    );
    let count = |class: Class| -> usize {
        summary
            .values()
            .map(|by| by.get(&class).copied().unwrap_or(0))
            .sum()
    };
    let mut lines = vec![Line::from(format!(
        "duplicated: {} proven, {} may be · missing: {} · unsettled: {} · once: {}",
        count(Class::Duplicated),
        count(Class::MaybeDuplicated),
        count(Class::Missing),
        count(Class::Unsettled),
        count(Class::Once)
    ))];
    for (channel, by) in &summary {
        let parts: Vec<String> = Class::ALL
            .iter()
            .map(|class| format!("{} {}", by.get(class).copied().unwrap_or(0), class.as_str()))
            .collect();
        lines.push(Line::from(format!("{channel}: {}", parts.join(", "))));
    }
    if view.loaded.is_none() {
        lines = vec![Line::from("reconciling…")];
    }
    // As the command says it, up front; past the room for them, how many more.
    let named = if view.unread.len() > UNREAD_SHOWN {
        UNREAD_SHOWN - 1
    } else {
        view.unread.len()
    };
    for what in &view.unread[..named] {
        lines.push(Line::from(crate::verify::unread_line(what)));
    }
    if view.unread.len() > named {
        lines.push(Line::from(crate::verify::unread_line(&format!(
            "{} more (`unsctl reconcile` names each)",
            view.unread.len() - named
        ))));
    }
    lines
}

/// The most lines the reconcile view gives to records not read.
const UNREAD_SHOWN: usize = 2;

fn reconcile(frame: &mut Frame<'_>, app: &App, area: Rect, paint: &Paint) {
    let view = &app.reconcile;
    let unread = view.unread.len().min(UNREAD_SHOWN) as u16;
    let [head, table, still] = Layout::vertical([
        Constraint::Length(4 + unread),
        Constraint::Min(3),
        Constraint::Length(2),
    ])
    .areas(area);
    let lines = reconcile_counts(view);
    frame.render_widget(Paragraph::new(lines), head);
    let needs = view.needs();
    // Its cells cut the recipient an apology or a re-send is addressed to.
    let detail = needs.get(view.selected).copied().map(need_detail);
    let table = beneath(frame, table, detail, (1, 4));
    let rows: Vec<crate::render::columns::NeedRow> = needs
        .iter()
        .map(|item| item.row(short(app, &item.id)))
        .collect();
    let cells: Vec<Vec<Text>> = rows
        .iter()
        .map(|row| columns::cells(columns::NEEDS, row))
        .collect();
    let lead = |n: usize| cursor(n, view.selected);
    frame.render_widget(
        spec_table(
            columns::NEEDS,
            &cells,
            (table, view.selected),
            (1, &lead),
            paint,
        ),
        table,
    );
    if let Some(recent) = &view.recent {
        let now = view.now;
        let stillness = crate::pulse::Stillness::of(
            recent.last_lease_lost,
            recent.last_reclaim,
            now,
            recent.quiet_after_seconds,
        );
        frame.render_widget(
            Paragraph::new(still_line(&stillness, now)).wrap(Wrap { trim: true }),
            still,
        );
    }
}

/// One channel that needs a person, in a line: its class and copies, the whole id, who
/// got it (or where to find out), then the evidence.
fn need_detail(item: &crate::reconcile::Reconciled) -> String {
    let row = item.row(&item.id);
    let mut text = format!(
        "{} {} {}: {} {} to {}",
        row.channel,
        row.class,
        clean(&row.id),
        row.copies,
        if row.copies == 1 { "copy" } else { "copies" },
        clean(&row.recipient)
    );
    if !row.evidence.is_empty() {
        text.push_str(&format!("; {}", clean(&row.evidence.join("; "))));
    }
    text
}

/// Whether it is still happening, by the last lease loss and reclaim, in one line:
/// "NOT HAPPENING: last lease loss 20:45:32 (20 min ago), last reclaim …".
fn still_line(stillness: &crate::pulse::Stillness, now: f64) -> String {
    let when = |at: Option<f64>| match at {
        Some(at) => format!(
            "{} ({} ago)",
            crate::render::time::rfc3339(at)
                .chars()
                .skip(11)
                .take(8)
                .collect::<String>(),
            crate::render::time::duration((now - at).max(0.0))
        ),
        None => "never".into(),
    };
    format!(
        "{}: last lease loss {}, last reclaim {}.",
        if stillness.still_happening {
            "STILL HAPPENING"
        } else {
            "NOT HAPPENING NOW"
        },
        when(stillness.last_lease_lost),
        when(stillness.last_reclaim)
    )
}

/// An id as the shortest prefix that names it alone in the store, when the screen has
/// looked it up; else whole.
fn short<'a>(app: &'a App, id: &'a str) -> &'a str {
    app.short.get(id).map_or(id, String::as_str)
}

/// Doctor's figures per provider: calls, p99 against the lease, refusals and unknown
/// outcomes over the window, and the relay's answer to a greeting.
fn providers(frame: &mut Frame<'_>, app: &App, area: Rect, paint: &Paint) {
    use crate::render::time::duration;
    let Some(read) = &app.providers.read else {
        frame.render_widget(Paragraph::new("asking the providers…"), area);
        return;
    };
    let health = &read.health;
    let lease = health.lease_seconds.unwrap_or(60.0);
    let mut lines = vec![Line::from(format!(
        "Provider calls over the last {}, against the {} lease (doctor's figures):",
        duration(health.window_seconds),
        duration(lease)
    ))];
    if health.calls.is_empty() {
        lines.push(Line::from("  no provider call ended in the window"));
    }
    for calls in &health.calls {
        let share = calls.p99_seconds / lease;
        let text = format!(
            "  {:<10} {:>6} calls  p99 {:>8} ({:>3.0}% of the lease)  max {:>8}  refused {}  unknown {}",
            clean(&calls.channel),
            calls.calls,
            duration(calls.p99_seconds),
            share * 100.0,
            duration(calls.max_seconds),
            calls.refused,
            calls.unknown
        );
        let style = if share > 0.5 || calls.unknown > 0 {
            paint.fg(Color::Red)
        } else if calls.refused > 0 {
            paint.fg(Color::Yellow)
        } else {
            Style::default()
        };
        let slow = if share > 0.5 {
            "  SLOW: past half the lease"
        } else {
            ""
        };
        lines.push(Line::from(Span::styled(format!("{text}{slow}"), style)));
    }
    lines.push(Line::from(""));
    match &read.relay {
        None => lines.push(Line::from("The relay: no email attempt names one yet.")),
        Some((relay, Ok(greeting))) => lines.push(Line::from(format!(
            "The relay {} (the newest email's) greeted as {} in {} ({:.1}% of the lease); greeted only, never logged in to",
            clean(relay),
            clean(&greeting.name),
            duration(greeting.seconds),
            greeting.seconds / lease * 100.0
        ))),
        Some((relay, Err(err))) => lines.push(Line::from(Span::styled(
            format!("The relay {} did not answer a greeting: {}", clean(relay), clean(err)),
            paint.fg(Color::Red),
        ))),
    }
    // What only the server that answered can say: which channels its worker can send.
    if let Some(channels) = &health.server_worker {
        let all = channels.len() == crate::model::Channel::ALL.len();
        let text = if channels.is_empty() {
            "This server's worker has no adapter: it leaves every row to a worker that has one."
                .to_string()
        } else if all {
            format!(
                "This server's worker has adapters for {}.",
                channels.joined(", ")
            )
        } else {
            format!(
                "This server's worker has adapters for {} only: a row that owes another channel waits for a worker that has its adapter.",
                channels.joined(", ")
            )
        };
        let style = if all {
            Style::default()
        } else {
            paint.fg(Color::Yellow)
        };
        lines.push(Line::from(Span::styled(text, style)));
    }
    frame.render_widget(Paragraph::new(lines).wrap(Wrap { trim: false }), area);
}

fn pulse(frame: &mut Frame<'_>, app: &App, area: Rect, paint: &Paint) {
    use crate::pulse::Series;
    let Some(pulse) = &app.pulse.pulse else {
        frame.render_widget(Paragraph::new("reading the pulse…"), area);
        return;
    };
    let stillness = crate::pulse::Stillness::from_pulse(
        pulse,
        app.pulse.now,
        crate::pulse::DEFAULT_QUIET_AFTER,
    );
    let mut rows = vec![Constraint::Length(3)];
    rows.extend(Series::ALL.iter().map(|_| Constraint::Length(2)));
    rows.push(Constraint::Min(0));
    let areas = Layout::vertical(rows).split(area);
    let still = still_line(&stillness, app.pulse.now);
    let tone = if stillness.still_happening {
        paint.fg(Color::Red)
    } else {
        paint.fg(Color::Green)
    };
    frame.render_widget(
        Paragraph::new(Line::from(Span::styled(
            format!("{still} One bar a minute, newest at the right."),
            tone,
        )))
        .wrap(Wrap { trim: true }),
        areas[0],
    );
    for (n, series) in Series::ALL.iter().enumerate() {
        let place = areas[n + 1];
        let [label, chart] =
            Layout::horizontal([Constraint::Length(34), Constraint::Min(10)]).areas(place);
        let counts = pulse.series.get(series).cloned().unwrap_or_default();
        let last = pulse
            .last(*series)
            .map(|at| {
                crate::render::time::rfc3339(at)
                    .chars()
                    .skip(11)
                    .take(8)
                    .collect::<String>()
            })
            .unwrap_or_else(|| "-".into());
        // The numbers behind the bars: this minute's, the busiest minute's, the window's.
        let now_count = counts.last().copied().unwrap_or(0);
        let peak = counts.iter().copied().max().unwrap_or(0);
        frame.render_widget(
            Paragraph::new(vec![
                Line::from(vec![
                    Span::styled(series.as_str(), paint.bold()),
                    Span::raw(format!(" · last {last}")),
                ]),
                Line::from(format!(
                    "{now_count}/min now · peak {peak}/min · {} in all",
                    pulse.total(*series)
                )),
            ]),
            label,
        );
        // The newest minutes that fit, the last at the right edge.
        let shown = chart.width as usize;
        let data: Vec<u64> = counts
            .iter()
            .skip(counts.len().saturating_sub(shown))
            .copied()
            .collect();
        frame.render_widget(
            Sparkline::default()
                .data(&data)
                .style(paint.fg(Color::Cyan)),
            chart,
        );
    }
}

fn audit(frame: &mut Frame<'_>, app: &App, area: Rect) {
    let view = &app.audit;
    let said = view
        .rows
        .get(view.selected)
        .map(|row| {
            if row.kind == crate::remediation::note::KIND {
                return format!(
                    "NOTE by {}: {}; ticket {}; {}",
                    clean(&row.operator),
                    quoted(row.reason.as_deref()),
                    quoted(row.ticket.as_deref()),
                    clean(&row.followed)
                );
            }
            format!(
                "{} {} by {}: reason {}; ticket {}; {}; verdict then {}{}{}",
                clean(&row.kind),
                clean(&row.notification_id),
                clean(&row.operator),
                quoted(row.reason.as_deref()),
                quoted(row.ticket.as_deref()),
                match row.said() {
                    Some(said) => format!("said {}", quoted(Some(&said))),
                    None => "no attestation".into(),
                },
                row.verdict_then
                    .as_deref()
                    .map_or("-".into(), |b| clean(b).into_owned()),
                row.via
                    .as_deref()
                    .map(|v| format!("; via {}", clean(v)))
                    .unwrap_or_default(),
                if row.followed.is_empty() {
                    String::new()
                } else {
                    format!("; followed: {}", clean(&row.followed))
                }
            )
        })
        .unwrap_or_else(|| {
            if view.loaded.is_some() {
                "No operator action recorded yet.".into()
            } else {
                String::new()
            }
        });
    // Who, why, the ticket, what was said, the verdict then: the table keeps what fits.
    let table = beneath(frame, area, Some(said), (2, 5));
    let cells: Vec<Vec<Text>> = view
        .rows
        .iter()
        .map(|action| {
            columns::cells(
                columns::ACTIONS,
                &action.row(short(app, &action.notification_id)),
            )
        })
        .collect();
    let paint = Paint {
        color: app.config.color,
    };
    let lead = |n: usize| cursor(n, view.selected);
    frame.render_widget(
        spec_table(
            columns::ACTIONS,
            &cells,
            (table, view.selected),
            (1, &lead),
            &paint,
        ),
        table,
    );
}

fn quoted(text: Option<&str>) -> String {
    text.map_or("-".into(), crate::render::views::said)
}

fn contexts(frame: &mut Frame<'_>, app: &App, area: Rect) {
    let view = &app.contexts;
    // Why the context under the cursor could not be read, whole: the table's cell cuts it.
    let why = view
        .rows
        .get(view.selected)
        .and_then(|row| Some((&row.name, row.read.as_ref().err()?)))
        .map(|(name, why)| format!("context {}: {}", clean(name), clean(why)));
    let area = beneath(frame, area, why, (1, 4));
    let rows: Vec<Row<'_>> = view
        .rows
        .iter()
        .enumerate()
        .map(|(n, row)| {
            let cells = match &row.read {
                Ok((counts, lost)) => {
                    let mut cells = vec![format!(
                        "{}{}",
                        if n == view.selected { ">" } else { " " },
                        clean(&row.name)
                    )];
                    cells.extend(
                        Branch::ALL
                            .iter()
                            .map(|b| counts.get(b).copied().unwrap_or(0).to_string()),
                    );
                    cells.push(lost.to_string());
                    cells.push("reachable".into());
                    cells
                }
                Err(why) => vec![
                    format!(
                        "{}{}",
                        if n == view.selected { ">" } else { " " },
                        clean(&row.name)
                    ),
                    "-".into(),
                    "-".into(),
                    "-".into(),
                    "-".into(),
                    format!("UNREACHABLE: {}", clean(why)),
                ],
            };
            Row::new(cells)
        })
        .collect();
    let widths = [
        Constraint::Length(20),
        Constraint::Length(8),
        Constraint::Length(7),
        Constraint::Length(7),
        Constraint::Length(9),
        Constraint::Min(10),
    ];
    let header = Row::new(vec![
        " CONTEXT", "RESOLVE", "VERIFY", "REPLAY", "LOST 15m", "STATE",
    ]);
    let empty = view.rows.is_empty() && view.loaded.is_some();
    table_or_nothing(
        frame,
        Table::new(rows, widths).header(header),
        area,
        empty.then_some(
            "No contexts: add [contexts.NAME] to the config file (see unsctl context --help).",
        ),
    );
}

fn help(frame: &mut Frame<'_>, app: &App, area: Rect) {
    let mut lines = Vec::new();
    for (keys, does) in keymap::help_lines(keymap::for_view(app.view)) {
        lines.push(Line::from(format!("{keys:<9} {does}")));
    }
    lines.push(Line::from(keymap::LEGEND));
    lines.push(Line::from(keymap::VIEWS));
    lines.push(Line::from(format!("filter words: {}", super::filter::KEYS)));
    if let Some(why) = &app.config.readonly {
        lines.push(Line::from(format!(
            "READ-ONLY ({}): r, p and v do nothing",
            clean(why)
        )));
    }
    // The whole body: at 80×24 every key fits.
    frame.render_widget(Clear, area);
    frame.render_widget(
        Paragraph::new(lines).wrap(Wrap { trim: false }).block(
            Block::default().borders(Borders::ALL).title(format!(
                " keys in {} (any key closes this) ",
                app.view.name()
            )),
        ),
        area,
    );
}

fn centered(area: Rect, width_percent: u16, height_percent: u16) -> Rect {
    let width = area.width * width_percent / 100;
    let height = area.height * height_percent / 100;
    Rect {
        x: area.x + (area.width - width) / 2,
        y: area.y + (area.height - height) / 2,
        width,
        height,
    }
}

fn dialog_box(frame: &mut Frame<'_>, dialog: &Dialog, area: Rect, paint: &Paint, now: Instant) {
    let place = centered(area, 96, 96);
    frame.render_widget(Clear, place);
    let block = Block::default()
        .borders(Borders::ALL)
        .title(format!(" {} ", clean(&dialog.title)));
    let inner = block.inner(place);
    frame.render_widget(block, place);
    let fields = if dialog.done.is_some() || dialog.progress.is_some() {
        Vec::new()
    } else {
        field_lines(dialog, paint)
    };
    let [body, note, asked] = Layout::vertical([
        Constraint::Min(2),
        Constraint::Length(2),
        Constraint::Length(fields.len() as u16),
    ])
    .areas(inner);
    let lines: Vec<Line<'_>> = match (&dialog.done, dialog.lines.is_empty()) {
        (Some(done), _) => done
            .iter()
            .map(|l| Line::from(clean(l).into_owned()))
            .collect(),
        (None, true) if dialog.progress.is_none() => vec![Line::from("reading the preview…")],
        (None, _) => dialog
            .acting
            .iter()
            .chain(&dialog.lines)
            .map(|l| Line::from(clean(l).into_owned()))
            .collect(),
    };
    // Under way, the newest lines are the ones in view.
    let scroll = match &dialog.progress {
        Some(_) => (lines.len() as u16).saturating_sub(body.height),
        None => dialog.scroll,
    };
    frame.render_widget(
        Paragraph::new(lines)
            .wrap(Wrap { trim: false })
            .scroll((scroll, 0)),
        body,
    );
    if dialog.done.is_some() {
        frame.render_widget(Paragraph::new("Done. Enter closes."), note);
        return;
    }
    if let Some(progress) = &dialog.progress {
        let said = dialog.note.clone().unwrap_or_else(|| {
            "Esc stops: the entry in flight finishes, nothing after it starts.".into()
        });
        frame.render_widget(
            Paragraph::new(vec![
                Line::from(Span::styled(clean(progress).into_owned(), paint.bold())),
                Line::from(clean(&said).into_owned()),
            ])
            .wrap(Wrap { trim: true }),
            note,
        );
        return;
    }
    let waiting = now.duration_since(dialog.opened) < super::app::DIALOG_GRACE;
    let note_text = dialog.note.clone().unwrap_or_else(|| {
        if waiting {
            "(keys are ignored for a moment: read first)".into()
        } else {
            "Tab moves between the fields (the preview is read again with them); space ticks; Esc cancels."
                .into()
        }
    });
    frame.render_widget(
        Paragraph::new(clean(&note_text).into_owned()).wrap(Wrap { trim: true }),
        note,
    );
    let mut fields = fields;
    if waiting && let Some(buttons) = fields.last_mut() {
        // Until the buttons answer, they say so: a key typed before then is dropped.
        buttons.push_span(Span::raw(" (keys in a moment)"));
    }
    frame.render_widget(Paragraph::new(fields), asked);
}

/// The dialog's fields, one line each, in Tab's order after Cancel, then the buttons.
fn field_lines(dialog: &Dialog, paint: &Paint) -> Vec<Line<'static>> {
    let marker = |focus: Focus| if dialog.focus == focus { "> " } else { "  " };
    let text = |label: &str, value: &str, focus: Focus| {
        let on = dialog.focus == focus;
        Line::from(vec![
            Span::raw(marker(focus)),
            Span::raw(label.to_string()),
            Span::styled(
                format!("{}{}", clean(value), if on { "_" } else { "" }),
                if on {
                    paint.selected()
                } else {
                    Style::default()
                },
            ),
        ])
    };
    let tick = |on: bool| if on { "[x]" } else { "[ ]" };
    let mut lines = Vec::new();
    for focus in dialog.fields() {
        match focus {
            Focus::Channels => lines.push(channels_line(dialog, paint)),
            Focus::Canary => lines.push(text(
                "Canary (entries first; empty: none): ",
                &dialog.canary,
                Focus::Canary,
            )),
            Focus::Pace => lines.push(text(
                "Pace (200/s, 30/m, over 30m; empty: at once): ",
                &dialog.pace,
                Focus::Pace,
            )),
            Focus::Force => {
                let what = match dialog.action {
                    Some(crate::remediation::Action::Resolve) => {
                        "Give up on purpose (forced, past the guardrails; needs a reason)"
                    }
                    _ => "Forced (overrides the guardrails on purpose; needs a reason)",
                };
                lines.push(Line::from(vec![
                    Span::raw(marker(Focus::Force)),
                    Span::styled(
                        format!("{} {what}", tick(dialog.force)),
                        if dialog.focus == Focus::Force {
                            paint.selected()
                        } else {
                            Style::default()
                        },
                    ),
                ]));
            }
            Focus::Reason => lines.push(text("Reason (recorded): ", &dialog.reason, Focus::Reason)),
            Focus::Word => lines.push(text(
                &format!("Type {} to go ahead: ", dialog.word_needed()),
                &dialog.word,
                Focus::Word,
            )),
            Focus::Cancel | Focus::Go => {}
        }
    }
    lines.push(buttons_line(dialog, paint));
    lines
}

/// `Channels: [x] SLACK  [ ] PAGERDUTY`, the one the keys are on marked.
fn channels_line(dialog: &Dialog, paint: &Paint) -> Line<'static> {
    let on_it = dialog.focus == Focus::Channels;
    let mut spans = vec![
        Span::raw(if on_it { "> " } else { "  " }),
        Span::raw("Channels: "),
    ];
    if dialog.channels.is_empty() {
        spans.push(Span::raw(if dialog.previewed.is_some() {
            "(none left to replay)"
        } else {
            "(read with the preview)"
        }));
    }
    for (k, (channel, ticked)) in dialog.channels.iter().enumerate() {
        let here = on_it && k == dialog.channel_at;
        spans.push(Span::styled(
            format!("{} {channel}", if *ticked { "[x]" } else { "[ ]" }),
            if here {
                paint.selected()
            } else {
                Style::default()
            },
        ));
        spans.push(Span::raw("  "));
    }
    Line::from(spans)
}

/// `[ Cancel ]  [ Go: replay 3 entries ]`, the one with the keys marked `>`.
fn buttons_line(dialog: &Dialog, paint: &Paint) -> Line<'static> {
    let button = |label: &str, focus: Focus| {
        let on = dialog.focus == focus;
        Span::styled(
            if on {
                format!("> [ {label} ] ")
            } else {
                format!("  [ {label} ] ")
            },
            if on {
                paint.selected()
            } else {
                Style::default()
            },
        )
    };
    let go = match dialog.action {
        Some(action) => format!(
            "Go: {} {}",
            action.as_str(),
            crate::render::output::counted(dialog.count as i64, "entry")
        ),
        None => format!(
            "Go: record {} over {}",
            crate::render::output::counted(dialog.count as i64, "answer"),
            crate::render::output::counted(dialog.entries as i64, "entry")
        ),
    };
    Line::from(vec![
        button("Cancel", Focus::Cancel),
        button(&go, Focus::Go),
    ])
}

/// A table, and under its header, when it has no rows, what that means.
fn table_or_nothing(frame: &mut Frame<'_>, table: Table<'_>, area: Rect, empty: Option<&str>) {
    frame.render_widget(table, area);
    if let Some(said) = empty {
        let line = Rect {
            y: area.y + 1,
            height: 1,
            ..area
        };
        frame.render_widget(Paragraph::new(said.to_string()), line);
    }
}
