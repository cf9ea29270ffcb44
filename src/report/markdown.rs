//! The report as Markdown, to paste into the postmortem document: every text from a
//! store or a provider escaped so it reads as text (never as markup, a link or HTML).

use super::{Moment, Report};
use crate::pulse::Series;
use crate::render::columns::{self, CodePlace, markdown_code};
use crate::render::time::rfc3339;
use std::fmt::Write;

pub use crate::render::columns::markdown_text as escape;

fn moment_row(out: &mut String, report: &Report, label: &str, moment: Option<&Moment>) {
    let _ = match moment {
        Some(m) => writeln!(
            out,
            "| {label} | {} | event {} | {} |",
            report.times().of(m.at),
            m.event_id,
            markdown_code(report.shown(&m.notification_id), CodePlace::Cell)
        ),
        None => writeln!(out, "| {label} | none in the window | | |"),
    };
}

pub fn render(report: &Report) -> String {
    let mut out = String::new();
    let (since, until) = (
        report.window.since.map(rfc3339).unwrap_or_default(),
        report.window.until.map(rfc3339).unwrap_or_default(),
    );
    let _ = match report.provisional_until {
        Some(open) => writeln!(
            out,
            "# PROVISIONAL postmortem: notifications from {since} to {until}\n\n**PROVISIONAL:** the window is still open until {}: its figures can still change, and a report of it is complete only when written after then.\n",
            rfc3339(open)
        ),
        None => writeln!(out, "# Postmortem: notifications from {since} to {until}\n"),
    };
    let _ = writeln!(
        out,
        "Written by unsctl {} from the store{} and the providers' records it was given. Each figure names the events or records it comes from. {}\n",
        env!("CARGO_PKG_VERSION"),
        report
            .store
            .as_deref()
            .map(|s| format!(" {}", escape(s)))
            .unwrap_or_default(),
        report.times_said()
    );
    for what in &report.unread {
        let _ = writeln!(out, "**{}**\n", escape(&crate::verify::unread_line(what)));
    }
    summary(&mut out, report);
    impact(&mut out, report);
    timeline(&mut out, report);
    needs(&mut out, report);
    actions(&mut out, report);
    verdicts(&mut out, report);
    out.push_str("## Left for people\n\n### Root cause\n\n### What went well\n\n### What went wrong\n\n### Action items\n");
    out
}

fn summary(out: &mut String, report: &Report) {
    let s = &report.summary;
    out.push_str("## Summary\n\n| | When | Event | Notification |\n|---|---|---|---|\n");
    moment_row(out, report, "Impact start", s.impact_start.as_ref());
    moment_row(out, report, "First lease loss", s.first_lease_lost.as_ref());
    moment_row(out, report, "Last lease loss", s.last_lease_lost.as_ref());
    moment_row(
        out,
        report,
        "Repair started (first operator action)",
        s.first_action.as_ref(),
    );
    moment_row(out, report, "Last dead letter", s.last_dead_letter.as_ref());
    if let Some(fixed) = s.fixed_at {
        let _ = writeln!(
            out,
            "| Fixed ({}) | {} | | |",
            escape(s.fixed_by.as_deref().unwrap_or("as the operator gave it")),
            report.times().of(fixed)
        );
    }
    let _ = writeln!(
        out,
        "\n{} notifications had a channel attempt in the window.\n",
        report.notifications
    );
}

fn impact(out: &mut String, report: &Report) {
    out.push_str("## Impact per channel\n\nFrom the history and the providers' records, as `unsctl reconcile` counts them for the window.\n\n");
    out.push_str("| Channel | Attempted | Delivered once | Duplicated | Recipients duplicated | Maybe duplicated | Missing | Unsettled |\n|---|---:|---:|---:|---:|---:|---:|---:|\n");
    for i in &report.impact {
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} | {} | {} |",
            i.channel,
            i.attempted,
            i.delivered_once,
            i.duplicated,
            i.duplicated_recipients,
            i.maybe_duplicated,
            i.missing,
            i.unsettled
        );
    }
    let dlq: Vec<String> = report
        .dlq_now
        .iter()
        .map(|(branch, n)| format!("{branch} {n}"))
        .collect();
    let _ = writeln!(out, "\nThe DLQ now: {}.\n", dlq.join(", "));
}

fn timeline(out: &mut String, report: &Report) {
    let pulse = &report.pulse;
    let _ = writeln!(
        out,
        "## Timeline\n\nPer {} from the events (`unsctl pulse`); steps with nothing are left out.\n",
        crate::render::time::duration(pulse.step)
    );
    // The columns are the rows' own series, so a series added to the pulse is a column
    // here too, never a cell with no heading.
    let titles: Vec<&str> = Series::ALL.iter().map(|s| s.title()).collect();
    let _ = writeln!(
        out,
        "| Step (UTC) | {} |\n|---|{}",
        titles.join(" | "),
        "---:|".repeat(titles.len())
    );
    let steps = pulse.series.values().map(Vec::len).max().unwrap_or(0);
    for k in 0..steps {
        let counts: Vec<u64> = Series::ALL
            .iter()
            .map(|s| {
                pulse
                    .series
                    .get(s)
                    .and_then(|c| c.get(k))
                    .copied()
                    .unwrap_or(0)
            })
            .collect();
        if counts.iter().all(|n| *n == 0) {
            continue;
        }
        let at = pulse.window.since + k as f64 * pulse.step;
        let cells: Vec<String> = counts.iter().map(u64::to_string).collect();
        let _ = writeln!(out, "| {} | {} |", report.times().of(at), cells.join(" | "));
    }
    out.push_str("\nKey moments:\n\n");
    let lines = report.key_lines();
    if lines.is_empty() {
        out.push_str("- none in the window\n");
    }
    for line in lines {
        let _ = match line {
            super::KeyLine::Moment(m) => writeln!(
                out,
                "- {}: {} (event {}, {})",
                report.times().of(m.at),
                escape(&m.what),
                m.event_id,
                markdown_code(report.shown(&m.notification_id), CodePlace::Line)
            ),
            super::KeyLine::Note(n) => writeln!(
                out,
                "- {}: {} (note {})",
                report.times().of(n.at),
                escape(&n.what()),
                n.note_id
            ),
        };
    }
    out.push('\n');
}

fn needs(out: &mut String, report: &Report) {
    out.push_str("## Who got duplicates, and what never arrived\n\n");
    if report.needs.is_empty() {
        out.push_str("Nobody: no notification was proven duplicated or missing.\n\n");
        return;
    }
    out.push_str(&columns::markdown(columns::NEEDS, &report.need_rows()));
    out.push('\n');
}

fn actions(out: &mut String, report: &Report) {
    out.push_str("## Operator actions\n\n");
    if report.carry_outs.is_empty() {
        out.push_str("None in the window.\n\n");
        return;
    }
    out.push_str("One row per carry-out: the acts of one kind by one person for one reason, each within 15 minutes of the last; every entry's action is in the bundle's report.json.\n\n");
    let (rows, notes) = super::carry_out_rows(report);
    out.push_str(&columns::markdown(columns::CARRY_OUTS, &rows));
    if !notes.is_empty() {
        out.push('\n');
    }
    for (n, guardrails) in notes.iter().enumerate() {
        let _ = writeln!(
            out,
            "[{}] FORCED over the guardrails: {}\n",
            n + 1,
            escape(&guardrails.join("; "))
        );
    }
    if report.actions_not_followed > 0 {
        let _ = writeln!(
            out,
            "\n{} actions past the first 2,000 were not followed up one by one.",
            report.actions_not_followed
        );
    }
    out.push('\n');
}

fn verdicts(out: &mut String, report: &Report) {
    out.push_str("## Verdict changes\n\n");
    let rows = super::verdict_rows(report);
    if rows.is_empty() {
        out.push_str("None in the window.\n\n");
        return;
    }
    out.push_str("Each VERIFIED event: an answer from a provider's own record, and when the attempts it answers for ran by their own events.\n\n");
    out.push_str(&columns::markdown(columns::VERDICTS, &rows));
    out.push('\n');
}
