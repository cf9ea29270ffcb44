//! The report as one self-contained HTML file: no script, no external link or font, the
//! chart an inline SVG of our own, every text escaped by the builder (maud), laid out
//! to print on A4.

use super::{Moment, Report};
use crate::pulse::Series;
use crate::render::time::rfc3339;
use maud::{DOCTYPE, Markup, PreEscaped, html};

const STYLE: &str = r#"
@page { size: A4; margin: 14mm; }
body { font-family: sans-serif; font-size: 10pt; color: #111; max-width: 1400px; margin: 0 auto; }
h1 { font-size: 16pt; } h2 { font-size: 13pt; margin-top: 1.1em; border-bottom: 1px solid #999; }
table { border-collapse: collapse; width: 100%; margin: 0.5em 0; }
th, td { border: 1px solid #bbb; padding: 2px 4px; text-align: left; vertical-align: top;
  overflow-wrap: break-word; font-size: 8.5pt; }
td.p { overflow-wrap: anywhere; }
tr.under td { border-top: none; color: #333; font-size: 8pt; }
tr.under code { white-space: normal; overflow-wrap: anywhere; }
.k { color: #666; }
th { background: #eee; }
td.n { text-align: right; white-space: nowrap; }
code { font-family: monospace; font-size: 8.5pt; }
svg { width: 100%; max-width: 760px; height: auto; }
.bar-LEASE_LOST { fill: #c0392b; } .bar-UNKNOWN { fill: #d68910; }
.bar-DEAD_LETTERED { fill: #7d3c98; } .bar-DELIVERED { fill: #1e8449; }
.bar-REPLAYED { fill: #2471a3; } .bar-DLQ_RESOLVED { fill: #5d6d7e; }
.mark { stroke: #333; stroke-dasharray: 3 2; }
ol.marks { columns: 2; font-size: 8.5pt; margin: 0.3em 0 0.8em; }
.t, code { white-space: nowrap; }
.empty { min-height: 2em; border-left: 3px solid #ccc; padding-left: 6px; color: #777; }
"#;

/// Width and height of the chart's drawing area, in SVG units.
const CHART_WIDTH: f64 = 700.0;
const ROW_HEIGHT: f64 = 44.0;
const BAR_MAX: f64 = 30.0;
const LABEL: f64 = 110.0;
/// Room above the rows for one line of the markers' numbers.
const LABEL_LINE: f64 = 12.0;
/// The least distance between two numbers on one line: closer, the later goes a line up.
const LABEL_GAP: f64 = 12.0;

pub fn render(report: &Report) -> String {
    let since = report.window.since.map(rfc3339).unwrap_or_default();
    let until = report.window.until.map(rfc3339).unwrap_or_default();
    let provisional = if report.provisional_until.is_some() {
        "PROVISIONAL "
    } else {
        ""
    };
    let page = html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="referrer" content="no-referrer";
                title { (provisional) "Postmortem: notifications from " (since) " to " (until) }
                style { (PreEscaped(STYLE)) }
            }
            body {
                h1 { (provisional) "Postmortem: notifications from " (since) " to " (until) }
                @if let Some(open) = report.provisional_until {
                    p.provisional {
                        strong { "PROVISIONAL:" }
                        " the window is still open until " (rfc3339(open))
                        ": its figures can still change, and a report of it is complete only when written after then."
                    }
                }
                p {
                    "Written by unsctl " (env!("CARGO_PKG_VERSION")) " from the store "
                    @if let Some(store) = &report.store { code { (c(store)) } }
                    " and the providers' records it was given. Each figure names the events or records it comes from. " (report.times_said())
                }
                @for what in &report.unread {
                    p.unread { strong { (crate::verify::unread_line(what)) } }
                }
                (summary(report))
                (impact(report))
                (timeline(report))
                (needs(report))
                (actions(report))
                (verdicts(report))
                h2 { "Left for people" }
                @for heading in ["Root cause", "What went well", "What went wrong", "Action items"] {
                    h3 { (heading) }
                    div.empty { "(to be written)" }
                }
            }
        }
    };
    page.into_string()
}

fn moment_row(report: &Report, label: &str, moment: Option<&Moment>) -> Markup {
    html! {
        tr {
            th { (label) }
            @match moment {
                Some(m) => {
                    td.t { (report.times().of(m.at)) }
                    td.t { "event " (m.event_id) }
                    td { code { (c(report.shown(&m.notification_id))) } }
                }
                None => { td colspan="3" { "none in the window" } }
            }
        }
    }
}

fn summary(report: &Report) -> Markup {
    let s = &report.summary;
    html! {
        h2 { "Summary" }
        table {
            tr { th {} th { "When" } th { "Event" } th { "Notification" } }
            (moment_row(report, "Impact start", s.impact_start.as_ref()))
            (moment_row(report, "First lease loss", s.first_lease_lost.as_ref()))
            (moment_row(report, "Last lease loss", s.last_lease_lost.as_ref()))
            (moment_row(report, "Repair started (first operator action)", s.first_action.as_ref()))
            (moment_row(report, "Last dead letter", s.last_dead_letter.as_ref()))
            @if let Some(fixed) = s.fixed_at {
                tr {
                    th { "Fixed" }
                    td.t { (report.times().of(fixed)) }
                    td.p colspan="2" { (c(s.fixed_by.as_deref().unwrap_or("as the operator gave it"))) }
                }
            }
        }
        p { (report.notifications) " notifications had a channel attempt in the window." }
    }
}

fn impact(report: &Report) -> Markup {
    html! {
        h2 { "Impact per channel" }
        p { "From the history and the providers' records, as " code { "unsctl reconcile" } " counts them for the window." }
        table {
            tr {
                th { "Channel" } th { "Attempted" } th { "Delivered once" } th { "Duplicated" }
                th { "Recipients duplicated" } th { "Maybe duplicated" } th { "Missing" } th { "Unsettled" }
            }
            @for i in &report.impact {
                tr {
                    td { (i.channel) }
                    td.n { (i.attempted) } td.n { (i.delivered_once) } td.n { (i.duplicated) }
                    td.n { (i.duplicated_recipients) } td.n { (i.maybe_duplicated) }
                    td.n { (i.missing) } td.n { (i.unsettled) }
                }
            }
        }
        p {
            "The DLQ now: "
            @for (n, (branch, count)) in report.dlq_now.iter().enumerate() {
                @if n > 0 { ", " }
                (branch) " " (count)
            }
            "."
        }
    }
}

/// The pulse as small multiples: a row of bars per series, one bar a step, its height
/// the step's count against the series' largest; the summary's moments as dashed lines.
pub fn chart(report: &Report) -> Markup {
    let pulse = &report.pulse;
    let steps = pulse
        .series
        .values()
        .map(Vec::len)
        .max()
        .unwrap_or(0)
        .max(1);
    let plot = CHART_WIDTH - LABEL;
    let width = plot / steps as f64;
    let x_of = |at: f64| LABEL + (at - pulse.window.since) / pulse.step * width;
    let marks = marks(report);
    let xs: Vec<f64> = marks.iter().map(|(_, at)| x_of(*at)).collect();
    let lines = label_lines(&xs);
    let top = LABEL_LINE * (lines.iter().copied().max().unwrap_or(0) + 1) as f64 + 2.0;
    let height = top + ROW_HEIGHT * super::CHARTED.len() as f64 + 16.0;
    html! {
        svg xmlns="http://www.w3.org/2000/svg" viewBox=(format!("0 0 {CHART_WIDTH} {height}"))
            role="img" aria-label="Per step: lease losses, unknown outcomes, dead letters, deliveries; numbered lines mark the moments listed under it" {
            g transform=(format!("translate(0 {top})")) {
                @for (row, series) in super::CHARTED.iter().enumerate() {
                    (series_row(report, *series, row, width))
                }
            }
            @for (n, ((label, _), x)) in marks.iter().zip(&xs).enumerate() {
                line.mark x1=(fmt(*x)) x2=(fmt(*x)) y1=(fmt(top)) y2=(fmt(height - 14.0)) data-mark=(c(label)) {
                    title { (n + 1) ". " (c(label)) }
                }
                text.mark-label x=(fmt(*x)) y=(fmt(top - 2.0 - LABEL_LINE * lines[n] as f64)) font-size="9" text-anchor="middle" { (n + 1) }
            }
            text x=(fmt(LABEL)) y=(fmt(height - 2.0)) font-size="9" {
                (rfc3339(pulse.window.since))
            }
            text x=(fmt(CHART_WIDTH)) y=(fmt(height - 2.0)) font-size="9" text-anchor="end" {
                (rfc3339(pulse.window.until))
            }
        }
    }
}

/// For markers at `xs` (in order), the line above the chart each one's number goes on:
/// the lowest where no number already there is nearer than [`LABEL_GAP`], so numbers of
/// moments close in time stack instead of covering each other.
fn label_lines(xs: &[f64]) -> Vec<usize> {
    let mut placed: Vec<Vec<f64>> = Vec::new();
    xs.iter()
        .map(|x| {
            let free = placed
                .iter()
                .position(|line| line.iter().all(|other| (other - x).abs() >= LABEL_GAP));
            let line = free.unwrap_or(placed.len());
            if line == placed.len() {
                placed.push(Vec::new());
            }
            placed[line].push(*x);
            line
        })
        .collect()
}

/// The moments the chart marks, in time order: the summary's, the fix, and each
/// carry-out (its replays or resolves), each with its label.
pub fn marks(report: &Report) -> Vec<(String, f64)> {
    let s = &report.summary;
    let mut marks: Vec<(String, f64)> = [
        ("impact start", s.impact_start.as_ref()),
        ("last lease loss", s.last_lease_lost.as_ref()),
        ("repair started", s.first_action.as_ref()),
        ("last dead letter", s.last_dead_letter.as_ref()),
    ]
    .into_iter()
    .filter_map(|(label, m)| Some((label.to_string(), m?.at)))
    .collect();
    marks.extend(s.fixed_at.map(|at| ("fixed".to_string(), at)));
    marks.extend(report.carry_outs.iter().map(|carry_out| {
        let what = match carry_out.kind.as_str() {
            "REPLAYED" => "replayed",
            "DLQ_RESOLVED" => "resolved",
            other => other,
        };
        (
            format!(
                "{what} {} by {}",
                crate::render::output::counted(carry_out.ids.len() as i64, "entry"),
                carry_out.operator
            ),
            carry_out.first_at,
        )
    }));
    marks.sort_by(|a, b| a.1.total_cmp(&b.1).then_with(|| a.0.cmp(&b.0)));
    marks
}

fn series_row(report: &Report, series: Series, row: usize, width: f64) -> Markup {
    let pulse = &report.pulse;
    let counts = pulse.series.get(&series).cloned().unwrap_or_default();
    let most = counts.iter().copied().max().unwrap_or(0).max(1) as f64;
    let base = ROW_HEIGHT * (row as f64 + 1.0);
    html! {
        g data-series=(series.as_str()) {
            text x="0" y=(fmt(base - 20.0)) font-size="10" { (series.as_str()) }
            text x="0" y=(fmt(base - 8.0)) font-size="9" {
                @match pulse.total(series) {
                    0 => "none in the window",
                    total => { (total) " in all, at most " (most as u64) " a step" }
                }
            }
            line x1=(fmt(LABEL)) x2=(fmt(CHART_WIDTH)) y1=(fmt(base)) y2=(fmt(base)) stroke="#999" {}
            @for (k, count) in counts.iter().enumerate() {
                @if *count > 0 {
                    @let h = (*count as f64 / most * BAR_MAX).max(1.0);
                    rect class=(format!("bar bar-{}", series.as_str())) data-series=(series.as_str())
                        data-step=(k) data-count=(count)
                        x=(fmt(LABEL + k as f64 * width)) y=(fmt(base - h))
                        width=(fmt((width * 0.9).max(0.5))) height=(fmt(h)) {
                        title { (rfc3339(pulse.window.since + k as f64 * pulse.step)) ": " (count) }
                    }
                }
            }
        }
    }
}

/// `text` (a guardrail's, naming entries by their full ids) with each id the report shows
/// kept on one line: a line may break between its words, never inside an id.
fn ids_whole(report: &Report, text: &str) -> Markup {
    // Punctuation a guardrail's text puts around an id.
    let around = |b: char| matches!(b, ':' | ';' | ',' | '.' | '(' | ')' | '`' | '"' | '\'');
    html! {
        @for (n, word) in text.split(' ').enumerate() {
            @if n > 0 { " " }
            @let core = word.trim_matches(around);
            @if !core.is_empty() && report.shown_ids.contains_key(core) {
                @let at = word.len() - word.trim_start_matches(around).len();
                (word[..at]) span.t { (core) } (word[at + core.len()..])
            } @else {
                (word)
            }
        }
    }
}

/// Text from a store or a provider: control bytes shown escaped (maud escapes the markup).
fn c(text: &str) -> String {
    crate::render::sanitize::clean(text).into_owned()
}

/// A number for an SVG attribute: two decimals at most, the same bytes every run.
fn fmt(value: f64) -> String {
    let text = format!("{value:.2}");
    text.trim_end_matches('0').trim_end_matches('.').to_string()
}

fn timeline(report: &Report) -> Markup {
    html! {
        h2 { "Timeline" }
        p { "Per " (crate::render::time::duration(report.pulse.step)) " from the events (" code { "unsctl pulse" } "); the numbered dashed lines mark these moments:" }
        (chart(report))
        ol.marks {
            @for (label, at) in marks(report) {
                li { span.t { (report.times().of(at)) } " " (c(&label)) }
            }
        }
        h3 { "Key moments" }
        ul {
            @let lines = report.key_lines();
            @if lines.is_empty() { li { "none in the window" } }
            @for line in lines {
                @match line {
                    super::KeyLine::Moment(m) => {
                        li { span.t { (report.times().of(m.at)) } ": " (c(&m.what)) " (event " (m.event_id) ", " code { (c(report.shown(&m.notification_id))) } ")" }
                    }
                    super::KeyLine::Note(n) => {
                        li { span.t { (report.times().of(n.at)) } ": " (c(&n.what())) " (note " (n.note_id) ")" }
                    }
                }
            }
        }
    }
}

fn needs(report: &Report) -> Markup {
    html! {
        h2 { "Who got duplicates, and what never arrived" }
        @if report.needs.is_empty() {
            p { "Nobody: no notification was proven duplicated or missing." }
        } @else {
            (crate::render::columns::html(crate::render::columns::NEEDS, &report.need_rows()))
        }
    }
}

fn actions(report: &Report) -> Markup {
    let (rows, notes) = super::carry_out_rows(report);
    html! {
        h2 { "Operator actions" }
        @if rows.is_empty() {
            p { "None in the window." }
        } @else {
            p { "One row per carry-out: the acts of one kind by one person for one reason, each within 15 minutes of the last; every entry's action is in the bundle's report.json." }
            (crate::render::columns::html(crate::render::columns::CARRY_OUTS, &rows))
            @for (n, guardrails) in notes.iter().enumerate() {
                p.note { "[" (n + 1) "] FORCED over the guardrails: " (ids_whole(report, &c(&guardrails.join("; ")))) }
            }
            @if report.actions_not_followed > 0 {
                p { (report.actions_not_followed) " actions past the first 2,000 were not followed up one by one." }
            }
        }
    }
}

fn verdicts(report: &Report) -> Markup {
    let rows = super::verdict_rows(report);
    html! {
        h2 { "Verdict changes" }
        @if rows.is_empty() {
            p { "None in the window." }
        } @else {
            p { "Each VERIFIED event: an answer from a provider's own record, and when the attempts it answers for ran by their own events." }
            (crate::render::columns::html(crate::render::columns::VERDICTS, &rows))
        }
    }
}
