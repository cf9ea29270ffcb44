//! The human renderings shared by several commands: the timeline, a verdict, the triage
//! table. Meaning never rides on colour alone: incident rows also carry a `!` marker.

use super::output::{Output, table, table_text};
use crate::model::{Event, Notification, kind};
use crate::triage::{self, Branch, ChannelState, Verdict};
use serde_json::Value;

fn text(value: &Value, key: &str) -> Option<String> {
    match value.get(key)? {
        Value::Null => None,
        Value::String(s) => Some(s.clone()),
        Value::Array(items) => Some(
            items
                .iter()
                .map(|item| {
                    item.as_str()
                        .map(str::to_string)
                        .unwrap_or_else(|| item.to_string())
                })
                .collect::<Vec<_>>()
                .join(","),
        ),
        other => Some(other.to_string()),
    }
}

/// Whether an event is one this incident turns on.
pub fn stands_out(event: &Event) -> bool {
    match event.kind.as_str() {
        kind::LEASE_LOST | kind::DEAD_LETTERED => true,
        kind::CHANNEL_ATTEMPT_RESULT => event.payload["metadata"]["provider_outcome"] == "UNKNOWN",
        kind::ATTEMPT_STARTED => event.payload["reclaimed"] == true,
        other => !kind::ALL.contains(&other),
    }
}

/// The key payload fields of an event, in a few words.
pub fn detail(event: &Event, out: &Output) -> String {
    let p = &event.payload;
    if !p.is_object() {
        return "unreadable payload".into();
    }
    match event.kind.as_str() {
        kind::SUBMITTED => format!("channels {}", text(p, "channels").unwrap_or_default()),
        kind::ATTEMPT_STARTED => {
            let mut parts = vec![format!(
                "worker {}",
                text(p, "worker_id").unwrap_or_default()
            )];
            if p["reclaimed"] == true {
                parts.push("reclaimed an expired lease".into());
            }
            parts.join(", ")
        }
        kind::CHANNEL_ATTEMPT_STARTED => "provider call may act from here".into(),
        kind::CHANNEL_ATTEMPT_RESULT => {
            let outcome =
                p["metadata"]["provider_outcome"]
                    .as_str()
                    .unwrap_or(if p["success"] == true {
                        "ACCEPTED"
                    } else {
                        "?"
                    });
            let mut parts = vec![outcome.to_string()];
            if let Some(id) = text(p, "message_id").or_else(|| text(&p["metadata"], "message_id")) {
                parts.push(id);
            }
            if let Some(code) =
                text(&p["metadata"], "smtp_code").or_else(|| text(&p["metadata"], "http_status"))
            {
                parts.push(format!("code {code}"));
            }
            if let Some(error) = text(p, "error") {
                parts.push(error);
            }
            parts.join(" ")
        }
        kind::LEASE_LOST => {
            if p["provider_effect_may_have_occurred"] == true {
                "provider effect may have occurred".into()
            } else {
                "no provider call had started".into()
            }
        }
        kind::RETRY_SCHEDULED => format!(
            "next at {} for {}",
            p["next_attempt_at"]
                .as_f64()
                .map(|t| out.time(t))
                .unwrap_or_default(),
            text(p, "channels").unwrap_or_default()
        ),
        kind::DELIVERED => "every channel accepted".into(),
        kind::DEAD_LETTERED => text(p, "error_message").unwrap_or_default(),
        kind::DLQ_RESOLVED | kind::REPLAYED => {
            let mut parts = vec![format!(
                "by {}",
                text(p, "operator").unwrap_or_else(|| "?".into())
            )];
            if let Some(branch) = text(&p["triage"], "branch") {
                parts.push(format!("on {branch}"));
            }
            if event.kind == kind::REPLAYED {
                parts.push(format!(
                    "channels {}",
                    text(p, "channels").unwrap_or_default()
                ));
            }
            for key in ["reason", "ticket", "attestation"] {
                if let Some(value) = text(p, key) {
                    parts.push(format!("{key}: {value}"));
                }
            }
            if p["forced"] == true {
                parts.push("FORCED".into());
            }
            parts.join(", ")
        }
        other => format!("unknown kind {other}"),
    }
}

/// One row per event: id, time, kind, attempt/cycle, channel, detail.
pub fn timeline(events: &[Event], out: &Output) -> String {
    let mut rows = table(&["", "EVENT", "TIME", "KIND", "ATT/CYC", "CHANNEL", "DETAIL"]);
    for event in events {
        let marker = if stands_out(event) { "!" } else { "" };
        let attempt = event.payload["attempt"].as_i64();
        let cycle = event.payload["cycle"].as_i64();
        let attempt_cycle = match (attempt, cycle) {
            (Some(a), Some(c)) => format!("{a}/{c}"),
            (None, Some(c)) => format!("-/{c}"),
            _ => "-".into(),
        };
        let kind_text = if stands_out(event) {
            out.yellow(&event.kind)
        } else {
            event.kind.clone()
        };
        rows.add_row(vec![
            marker.to_string(),
            event.id.to_string(),
            out.time(event.at),
            kind_text,
            attempt_cycle,
            event.payload["channel"].as_str().unwrap_or("").to_string(),
            detail(event, out),
        ]);
    }
    table_text(&rows)
}

pub fn branch_text(branch: Branch, out: &Output) -> String {
    match branch {
        Branch::Resolve => out.green("RESOLVE"),
        Branch::Verify => out.yellow("VERIFY"),
        Branch::Replay => out.red("REPLAY"),
    }
}

fn meaning(branch: Branch) -> &'static str {
    match branch {
        Branch::Resolve => {
            "branch 1: every channel was accepted by its provider; resolve it, never replay"
        }
        Branch::Verify => {
            "branch 2: the outcome is unknown; check out of band before resolving or replaying"
        }
        Branch::Replay => {
            "branch 3: rejected or never sent; fix the cause, then replay the channels not delivered"
        }
    }
}

fn state_text(state: ChannelState, out: &Output) -> String {
    match state {
        ChannelState::Delivered => out.green(state.as_str()),
        ChannelState::Uncertain => out.yellow(state.as_str()),
        ChannelState::Failed | ChannelState::NotAttempted => out.red(state.as_str()),
    }
}

/// A verdict with its evidence and the commands that follow.
pub fn verdict_block(verdict: &Verdict, out: &Output) -> String {
    let mut lines = vec![format!(
        "Triage: {} ({})",
        branch_text(verdict.branch, out),
        meaning(verdict.branch)
    )];
    lines.push(format!(
        "  lease lost: {}",
        if verdict.lease_lost {
            "yes (a worker lost its lease mid-call)"
        } else {
            "no"
        }
    ));
    let mut channels = table(&["  CHANNEL", "STATE", "EVIDENCE", "LOOK FOR"]);
    for channel in &verdict.channels {
        channels.add_row(vec![
            format!("  {}", channel.channel),
            state_text(channel.state, out),
            join_ids(&channel.evidence),
            channel.message_ids.join(" "),
        ]);
    }
    lines.push(table_text(&channels));
    for note in &verdict.notes {
        lines.push(format!("  note: {note}"));
    }
    lines.extend(
        next_steps(verdict)
            .into_iter()
            .map(|step| format!("  {step}")),
    );
    lines.join("\n")
}

/// "next: ..." lines; a VERIFY entry gets both follow-ups.
pub fn next_steps(verdict: &Verdict) -> Vec<String> {
    match verdict.branch {
        Branch::Verify => {
            let (resolve, replay) = triage::after_verification(verdict);
            let look_for: Vec<String> = verdict
                .channels
                .iter()
                .filter(|c| c.state == ChannelState::Uncertain)
                .flat_map(|c| {
                    c.message_ids
                        .iter()
                        .map(move |id| format!("{} {id}", c.channel))
                })
                .collect();
            let mut steps = Vec::new();
            if !look_for.is_empty() {
                steps.push(format!(
                    "check: search the provider for {}",
                    look_for.join(", ")
                ));
            }
            steps.push(format!("if it arrived:    {resolve}"));
            steps.push(format!("if it did not:    {replay}"));
            steps
        }
        _ => vec![format!("next: {}", verdict.next_step)],
    }
}

pub fn join_ids(ids: &[i64]) -> String {
    ids.iter().map(i64::to_string).collect::<Vec<_>>().join(",")
}

/// The triage table: one row per entry, with its next command.
pub fn triage_table(verdicts: &[Verdict], out: &Output) -> String {
    let mut rows = table(&[
        "ID",
        "BRANCH",
        "LEASE LOST",
        "CHANNELS",
        "EVIDENCE",
        "NEXT STEP",
    ]);
    for verdict in verdicts {
        let channels: Vec<String> = verdict
            .channels
            .iter()
            .map(|c| format!("{}={}", c.channel, c.state.as_str()))
            .collect();
        let evidence: Vec<i64> = verdict
            .channels
            .iter()
            .flat_map(|c| c.evidence.iter().copied())
            .collect();
        rows.add_row(vec![
            verdict.id.clone(),
            branch_text(verdict.branch, out),
            if verdict.lease_lost {
                "yes".into()
            } else {
                "no".into()
            },
            channels.join(" "),
            join_ids(&evidence),
            verdict.next_step.clone(),
        ]);
    }
    table_text(&rows)
}

/// "3 entries: 1 RESOLVE, 1 VERIFY, 1 REPLAY".
pub fn summary_line(verdicts: &[Verdict]) -> String {
    let counts = triage::summary(verdicts);
    let parts: Vec<String> = counts
        .iter()
        .map(|(branch, n)| format!("{n} {branch}"))
        .collect();
    format!(
        "{} {}: {}",
        verdicts.len(),
        if verdicts.len() == 1 {
            "entry"
        } else {
            "entries"
        },
        parts.join(", ")
    )
}

/// The summary block of `inspect`.
pub fn summary_block(row: &Notification, out: &Output) -> String {
    let dlq = if row.dead_letter {
        out.red("yes")
    } else {
        "no".into()
    };
    let lease = match (&row.lease_token, row.lease_until) {
        (Some(token), Some(until)) => format!("{token} until {}", out.time(until)),
        _ => "none".into(),
    };
    let mut lines = vec![
        format!("Notification {}", out.bold(&row.id)),
        format!("  status    {}", row.status),
        format!("  in DLQ    {dlq}"),
        format!(
            "  attempts  {} in all; cycle {} used {} of {}",
            row.attempts, row.cycle, row.cycle_attempts, row.max_attempts
        ),
        format!("  channels  {}", row.channels.join(", ")),
        format!("  lease     {lease}"),
    ];
    if let Some(error) = &row.error_message {
        lines.push(format!("  error     {}", out.red(error)));
    }
    lines.push(format!("  created   {}", out.time(row.created_at)));
    lines.push(format!("  updated   {}", out.time(row.updated_at)));
    lines.join("\n")
}
