//! The human renderings shared by several commands: the timeline, a verdict, the triage
//! table. Meaning never rides on colour alone: incident rows also carry a `!` marker.

use super::output::{Output, table, table_text};
use super::sanitize::clean;
use crate::model::{Event, Kind, Notification};
use crate::triage::{self, Branch, ChannelState, Verdict};
use serde_json::Value;

/// The longest value a table cell or a detail shows; JSON keeps values whole.
pub const MAX_SHOWN: usize = 160;

/// Store text as a table shows it: control characters escaped, long values cut.
pub fn shown(text: &str) -> String {
    super::sanitize::clip(text, MAX_SHOWN).into_owned()
}

/// A payload field as text, made safe to show.
fn text(value: &Value, key: &str) -> Option<String> {
    raw_text(value, key).map(|t| shown(&t))
}

fn raw_text(value: &Value, key: &str) -> Option<String> {
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
    match Kind::from_stored(&event.kind) {
        Some(Kind::LeaseLost | Kind::DeadLettered) => true,
        Some(Kind::ChannelAttemptResult) => {
            event.payload["metadata"]["provider_outcome"] == "UNKNOWN"
        }
        Some(Kind::AttemptStarted) => event.payload["reclaimed"] == true,
        Some(_) => false,
        None => true,
    }
}

/// The key payload fields of an event, in a few words.
pub fn detail(event: &Event, out: &Output) -> String {
    let p = &event.payload;
    if !p.is_object() {
        return "unreadable payload".into();
    }
    let Some(kind) = Kind::from_stored(&event.kind) else {
        return format!(
            "unknown kind {}",
            crate::render::sanitize::clean(&event.kind)
        );
    };
    match kind {
        Kind::Submitted => format!("channels {}", text(p, "channels").unwrap_or_default()),
        Kind::AttemptStarted => {
            let mut parts = vec![format!(
                "worker {}",
                text(p, "worker_id").unwrap_or_default()
            )];
            if p["reclaimed"] == true {
                parts.push("reclaimed an expired lease".into());
            }
            parts.join(", ")
        }
        Kind::ChannelAttemptStarted => "provider call may act from here".into(),
        Kind::ChannelAttemptResult => {
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
        Kind::LeaseLost => {
            if p["provider_effect_may_have_occurred"] == true {
                "provider effect may have occurred".into()
            } else {
                "no provider call had started".into()
            }
        }
        Kind::RetryScheduled => format!(
            "next at {} for {}",
            p["next_attempt_at"]
                .as_f64()
                .map(|t| out.time(t))
                .unwrap_or_default(),
            text(p, "channels").unwrap_or_default()
        ),
        Kind::Delivered => "every channel accepted".into(),
        Kind::DeadLettered => text(p, "error_message").unwrap_or_default(),
        Kind::DlqResolved | Kind::Replayed => {
            let mut parts = vec![format!(
                "by {}",
                text(p, "operator").unwrap_or_else(|| "?".into())
            )];
            if let Some(branch) = text(&p["triage"], "branch") {
                parts.push(format!("on {branch}"));
            }
            if kind == Kind::Replayed {
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
        Kind::Verified => format!(
            "{} by {}: {}",
            text(p, "outcome").unwrap_or_else(|| "?".into()),
            text(p, "source").unwrap_or_else(|| "?".into()),
            text(p, "evidence").unwrap_or_default()
        ),
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
            out.yellow(&shown(&event.kind))
        } else {
            shown(&event.kind)
        };
        rows.add_row(vec![
            marker.to_string(),
            event.id.to_string(),
            out.time(event.at),
            kind_text,
            attempt_cycle,
            shown(event.payload["channel"].as_str().unwrap_or("")),
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
            shown(&channel.message_ids.join(" ")),
        ]);
    }
    lines.push(table_text(&channels));
    for note in &verdict.notes {
        lines.push(format!("  note: {}", shown(note)));
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
            let look_for: Vec<String> = verdict
                .channels
                .iter()
                .filter(|c| c.state == ChannelState::Uncertain)
                .flat_map(|c| {
                    c.message_ids
                        .iter()
                        .map(move |id| format!("{} {}", c.channel, clean(id)))
                })
                .collect();
            let mut steps = Vec::new();
            if !look_for.is_empty() {
                steps.push(format!(
                    "check: search the provider for {}",
                    look_for.join(", ")
                ));
            }
            for (label, command) in triage::after_verification(verdict) {
                steps.push(format!("{:<17} {}", format!("{label}:"), clean(&command)));
            }
            steps
        }
        _ => vec![format!("next: {}", clean(&verdict.next_step))],
    }
}

/// What an empty DLQ says: a stated end, never silence.
pub fn empty_dlq(place: &str) -> String {
    format!("The DLQ in {} is empty: nothing to do.", clean(place))
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
            shown(&verdict.id),
            branch_text(verdict.branch, out),
            if verdict.lease_lost {
                "yes".into()
            } else {
                "no".into()
            },
            channels.join(" "),
            join_ids(&evidence),
            shown(&verdict.next_step),
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
        (Some(token), Some(until)) => format!("{} until {}", shown(token), out.time(until)),
        _ => "none".into(),
    };
    let mut lines = vec![
        format!("Notification {}", out.bold(&shown(&row.id))),
        format!("  status    {}", shown(&row.status)),
        format!("  in DLQ    {dlq}"),
        format!(
            "  attempts  {} in all; cycle {} used {} of {}",
            row.attempts, row.cycle, row.cycle_attempts, row.max_attempts
        ),
        format!("  channels  {}", shown(&row.channels.join(", "))),
        format!("  lease     {lease}"),
    ];
    if let Some(error) = &row.error_message {
        lines.push(format!("  error     {}", out.red(&shown(error))));
    }
    lines.push(format!("  created   {}", out.time(row.created_at)));
    lines.push(format!("  updated   {}", out.time(row.updated_at)));
    lines.join("\n")
}
