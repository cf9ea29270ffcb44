//! A notification as unsctl shows it: the API's document with the verdict when it is in
//! the DLQ, as `inspect` prints it and the live screen's inspect view draws it.

use crate::model::{Notification, NotificationDoc};
use crate::render::output::{Output, print};
use crate::render::views;
use crate::triage::{self, Verdict};
use serde::Serialize;

/// The API's notification document plus the verdict when in the DLQ.
#[derive(Debug, Serialize)]
pub struct NotificationView {
    #[serde(flatten)]
    pub doc: NotificationDoc,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub triage: Option<Verdict>,
}

pub fn view(doc: NotificationDoc) -> NotificationView {
    let triage = doc
        .row
        .dead_letter
        .then(|| triage::triage_events(&doc.row, &doc.events));
    NotificationView { doc, triage }
}

impl crate::render::output::View for NotificationView {
    fn show(&self, out: &crate::render::output::Output) -> std::io::Result<()> {
        show(self, out)
    }
}

/// How a followed notification ended: its status, and the verdict if it is in the DLQ.
pub fn settled_block(view: &NotificationView, out: &crate::render::output::Output) -> String {
    let row = &view.doc.row;
    let mut text = vec![
        String::new(),
        format!(
            "Settled: {} (attempt {}, cycle {})",
            views::shown(row.status.as_str()),
            row.attempts,
            row.cycle
        ),
    ];
    if let Some(verdict) = &view.triage {
        text.push(views::verdict_block(verdict, out));
    }
    text.join("\n")
}

pub fn show(view: &NotificationView, out: &crate::render::output::Output) -> std::io::Result<()> {
    print(&text(view, out))?;
    Ok(())
}

/// What `inspect` prints, fitted to `out`'s width: the summary, the timeline with the
/// evidence marked, what was verified out of band and the verdict with its next step.
pub fn text(view: &NotificationView, out: &crate::render::output::Output) -> String {
    let mut text = vec![summary_block(&view.doc.row, out), String::new()];
    let evidence: Vec<i64> = view
        .triage
        .as_ref()
        .map(|v| {
            v.channels
                .iter()
                .flat_map(|c| c.evidence.iter().copied())
                .collect()
        })
        .unwrap_or_default();
    text.push(if evidence.is_empty() {
        format!("Timeline ({} events)", view.doc.events.len())
    } else {
        format!(
            "Timeline ({} events; * marks the evidence the verdict rests on)",
            view.doc.events.len()
        )
    });
    text.push(views::timeline(&view.doc.events, &evidence, out));
    let verified = views::verification_lines(&view.doc.events);
    if !verified.is_empty() {
        text.push(String::new());
        text.push("Verified out of band (the providers' own records):".into());
        text.extend(verified.into_iter().map(|line| format!("  {line}")));
    }
    if let Some(verdict) = &view.triage {
        text.push(String::new());
        text.push(views::verdict_block(verdict, out));
    } else {
        text.push(String::new());
        text.push(format!(
            "Not in the DLQ (status {}): nothing to triage.",
            view.doc.row.status
        ));
    }
    crate::render::output::fit_lines(&text.join("\n"), out)
}

/// The summary block of `inspect`.
fn summary_block(row: &Notification, out: &Output) -> String {
    let dlq = if row.dead_letter {
        out.red("yes")
    } else {
        "no".into()
    };
    let message = crate::model::payload::Message::of(&row.payload);
    // Who each channel's copy goes to, channel by channel.
    let to = match row.channel_set() {
        Ok(channels) if !channels.is_empty() => channels
            .iter()
            .map(|channel| format!("{channel} {}", message.to(channel)))
            .collect::<Vec<_>>()
            .join("; "),
        _ => "(the row's channels cannot be read)".to_string(),
    };
    let lease = match (&row.lease_token, row.lease_until) {
        (Some(token), Some(until)) => format!("{} until {}", views::shown(token), out.time(until)),
        _ => "none".into(),
    };
    let mut lines = vec![
        format!("Notification {}", out.bold(&views::shown(&row.id))),
        format!("  status    {}", views::shown(row.status.as_str())),
        format!("  in DLQ    {dlq}"),
        format!(
            "  attempts  {} in all; cycle {} used {} of {}",
            row.attempts, row.cycle, row.cycle_attempts, row.max_attempts
        ),
        format!("  channels  {}", views::shown(&row.channels.join(", "))),
        format!(
            "  subject   {}",
            message
                .subject
                .as_deref()
                .map_or_else(|| "(none recorded)".to_string(), views::said)
        ),
        format!("  to        {}", views::shown(&to)),
        format!("  lease     {lease}"),
    ];
    if let Some(error) = &row.error_message {
        lines.push(format!("  error     {}", out.red(&views::said(error))));
    }
    lines.push(format!("  created   {}", out.time(row.created_at)));
    lines.push(format!("  updated   {}", out.time(row.updated_at)));
    lines.join("\n")
}
