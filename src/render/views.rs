//! The human renderings shared by several commands: the timeline, a verdict, the triage
//! table. Meaning never rides on colour alone: incident rows also carry a `!` marker.

use super::output::Output;
use super::sanitize::clean;
use super::table::{Column, Text, Tone, toned};
use crate::model::ProviderOutcome;
use crate::model::{Event, Kind};
use crate::triage::{self, Branch, ChannelState, Verdict};
use serde_json::Value;

/// The longest value a table cell or a detail shows; JSON keeps values whole.
pub const MAX_SHOWN: usize = 160;

/// Store text as a table shows it: control characters escaped, long values cut.
/// When an event was, for a narrow column: the time of day (UTC) for today's, else the
/// date and the minute. JSON and `-o wide` keep the whole instant.
pub fn clock_time(at: f64, now: f64) -> String {
    let stamp = super::time::rfc3339(at);
    if stamp.len() < 19 || !at.is_finite() {
        return stamp;
    }
    let today = (now / 86_400.0).floor() == (at / 86_400.0).floor();
    if today {
        stamp[11..19].to_string()
    } else {
        format!("{} {}", &stamp[5..10], &stamp[11..16])
    }
}

/// What an event says happened, in a word: a result's ACCEPTED, REJECTED or UNKNOWN, a
/// lease LOST, a notification DEAD or DELIVERED; empty for the others.
pub fn outcome_word(kind: &str, payload: &Value) -> &'static str {
    match kind {
        "CHANNEL_ATTEMPT_RESULT" => ProviderOutcome::of_payload(payload).as_str(),
        "LEASE_LOST" => "LOST",
        "DEAD_LETTERED" => "DEAD",
        "DELIVERED" => "DELIVERED",
        "DLQ_RESOLVED" => "RESOLVED",
        "REPLAYED" => "REPLAYED",
        "VERIFIED" => match payload["outcome"].as_str() {
            Some("DELIVERED") => "DELIVERED",
            Some("NOT_DELIVERED") => "NOT_DELIVERED",
            _ => "",
        },
        _ => "",
    }
}

pub fn shown(text: &str) -> String {
    super::sanitize::clip(text, MAX_SHOWN).into_owned()
}

/// Store or provider text in a sentence or a cell: cut like [`shown`], in quotes, so
/// whatever it holds reads as what someone said, never as one of unsctl's own steps.
pub fn said(text: &str) -> String {
    match super::sanitize::cut(text, MAX_SHOWN) {
        (kept, None) => super::sanitize::quoted(kept),
        (kept, Some(marker)) => {
            // The marker inside the quotes, where the text it stands for would be.
            let quoted = super::sanitize::quoted(kept);
            format!("{}{marker}\"", &quoted[..quoted.len() - 1])
        }
    }
}

/// A payload field as text, made safe to show (a long string is cut, never copied whole).
fn text(value: &Value, key: &str) -> Option<String> {
    match value.get(key)? {
        Value::String(s) => Some(shown(s)),
        _ => raw_text(value, key).map(|t| shown(&t)),
    }
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
fn stands_out_of(kind: &str, payload: &Value) -> bool {
    match Kind::from_stored(kind) {
        Some(Kind::LeaseLost | Kind::DeadLettered) => true,
        Some(Kind::ChannelAttemptResult) => {
            ProviderOutcome::of_payload(payload) == ProviderOutcome::Unknown
        }
        Some(Kind::AttemptStarted) => payload["reclaimed"] == true,
        Some(_) => false,
        None => true,
    }
}

/// The key payload fields of an event, in a few words.
pub fn detail(event: &Event, out: &Output) -> String {
    detail_of(event.kind.as_str(), &event.payload_value(), out)
}

/// A provider call's result in a line: its outcome, the Message-ID, the reply code and
/// the provider's words.
fn result_detail(p: &Value) -> String {
    let mut parts = vec![ProviderOutcome::of_payload(p).as_str().to_string()];
    if let Some(id) = text(p, "message_id").or_else(|| text(&p["metadata"], "message_id")) {
        parts.push(id);
    }
    if let Some(code) =
        text(&p["metadata"], "smtp_code").or_else(|| text(&p["metadata"], "http_status"))
    {
        parts.push(format!("code {code}"));
    }
    if let Some(error) = text(p, "error") {
        parts.push(said(&error));
    }
    parts.join(" ")
}

/// An operator's resolve or replay in a line: who, on which verdict, what was said.
fn action_detail(kind: Kind, p: &Value) -> String {
    let mut parts = vec![format!("by {}", who_acted(p))];
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
            parts.push(format!("{key}: {}", said(&value)));
        }
    }
    if p["forced"] == true {
        parts.push("FORCED".into());
    }
    parts.join(", ")
}

/// [`detail`] of an event of `kind` whose payload is parsed already.
pub fn detail_of(kind: &str, p: &Value, out: &Output) -> String {
    if !p.is_object() {
        return "unreadable payload".into();
    }
    let Some(kind) = Kind::from_stored(kind) else {
        return format!("unknown kind {}", crate::render::sanitize::clean(kind));
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
        Kind::ChannelAttemptResult => result_detail(p),
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
        Kind::DeadLettered => text(p, "error_message")
            .map(|error| said(&error))
            .unwrap_or_default(),
        Kind::DlqResolved | Kind::Replayed => action_detail(kind, p),
        Kind::Verified => format!(
            "{} by {}: {}",
            text(p, "outcome").unwrap_or_else(|| "?".into()),
            text(p, "source").unwrap_or_else(|| "?".into()),
            text(p, "evidence").unwrap_or_default()
        ),
    }
}

/// The timeline's columns: what each event is, when, how long after the one before, and
/// where it fell against the lease it was written under. On a narrow terminal identity
/// and meaning go last: the attempt and the channel stay in the row, the outcome in
/// DETAIL goes whole on a line of its own under it (never cut), and the time outlives the
/// gap and the lease.
pub const TIMELINE_COLUMNS: &[Column] = &[
    Column::new("", 0),
    Column::new("EVENT", 0),
    Column::new("TIME", 3),
    Column::new("GAP", 4),
    Column::new("LEASE", 4),
    Column::new("KIND", 0),
    Column::new("ATT/CYC", 1),
    Column::new("CHANNEL", 1),
    Column::new("DETAIL", 2).max(160).own_line(),
];

/// Where `at` falls against the lease `until`: "12.3 s left" or "0.6 s after it ran out".
pub fn lease_position(at: f64, until: f64) -> String {
    if at <= until {
        format!("{} left", crate::render::time::duration(until - at))
    } else {
        format!(
            "{} after it ran out",
            crate::render::time::duration(at - until)
        )
    }
}

/// One row per event. `evidence` (the verdict's events) are marked `*`; the gap to the
/// event before and the position against the event's lease show the timing a lease
/// incident is about.
pub fn timeline(events: &[Event], evidence: &[i64], out: &Output) -> String {
    // Each payload is parsed once: a payload may be megabytes.
    let payloads: Vec<Value> = events.iter().map(Event::payload_value).collect();
    let mut leases: std::collections::HashMap<String, f64> = Default::default();
    for (event, payload) in events.iter().zip(&payloads) {
        if event.kind == Kind::AttemptStarted
            && let (Some(token), Some(until)) = (
                payload["lease_token"].as_str(),
                payload["lease_until"].as_f64(),
            )
        {
            leases.insert(token.to_string(), until);
        }
    }
    let mut previous: Option<f64> = None;
    let rows: Vec<Vec<Text>> = events
        .iter()
        .zip(&payloads)
        .map(|(event, payload)| {
            let attempt_cycle = match (payload["attempt"].as_i64(), payload["cycle"].as_i64()) {
                (Some(a), Some(c)) => format!("{a}/{c}"),
                (None, Some(c)) => format!("-/{c}"),
                _ => "-".into(),
            };
            // A time that could not be read is shown as such, and measures nothing.
            let at_unreadable = event.unreadable.iter().any(|u| u.starts_with("at:"));
            let gap = match (previous, at_unreadable) {
                (Some(before), false) => {
                    format!("+{}", crate::render::time::duration(event.at - before))
                }
                _ => String::new(),
            };
            previous = (!at_unreadable).then_some(event.at).or(previous);
            let until = payload["lease_token"]
                .as_str()
                .and_then(|token| leases.get(token))
                .filter(|_| !at_unreadable);
            let lease = match (event.kind.known(), until) {
                (Some(Kind::AttemptStarted), Some(until)) => {
                    format!("{} lease", crate::render::time::duration(until - event.at))
                }
                (_, Some(until)) => lease_position(event.at, *until),
                (_, None) => String::new(),
            };
            let marked = evidence.contains(&event.id);
            let late = until.is_some_and(|until| event.at > *until);
            let when = if at_unreadable {
                "(time unreadable)".to_string()
            } else {
                crate::render::time::rfc3339(event.at)
            };
            vec![
                if marked { "*" } else { "" }.into(),
                event.id.to_string().into(),
                toned(
                    when,
                    if at_unreadable {
                        Tone::Bad
                    } else {
                        Tone::Plain
                    },
                ),
                gap.into(),
                toned(lease, if late { Tone::Bad } else { Tone::Plain }),
                toned(
                    shown(event.kind.as_str()),
                    if marked {
                        Tone::Warn
                    } else if stands_out_of(event.kind.as_str(), payload) {
                        Tone::Bad
                    } else {
                        Tone::Plain
                    },
                ),
                attempt_cycle.into(),
                shown(payload["channel"].as_str().unwrap_or("")).into(),
                detail_of(event.kind.as_str(), payload, out).into(),
            ]
        })
        .collect();
    super::table::render_all(TIMELINE_COLUMNS, rows, out)
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

fn state_tone(state: ChannelState) -> Tone {
    match state {
        ChannelState::Delivered => Tone::Good,
        ChannelState::Uncertain => Tone::Warn,
        ChannelState::Failed | ChannelState::NotAttempted => Tone::Bad,
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
            "no LEASE_LOST event"
        }
    ));
    const CHANNELS: &[Column] = &[
        Column::new("  CHANNEL", 0),
        Column::new("STATE", 0),
        Column::new("EVIDENCE", 1),
        Column::new("LOOK FOR", 2),
    ];
    let rows: Vec<Vec<Text>> = verdict
        .channels
        .iter()
        .map(|channel| {
            vec![
                format!("  {}", channel.channel).into(),
                toned(channel.state.as_str(), state_tone(channel.state)),
                join_ids(&channel.evidence).into(),
                shown(&channel.message_ids.join(" ")).into(),
            ]
        })
        .collect();
    lines.push(super::table::render_all(CHANNELS, rows, out));
    // Why each channel failed or is in doubt, with the provider's own reply.
    for channel in &verdict.channels {
        if let Some(cause) = channel.cause.as_deref().filter(|c| !c.is_empty()) {
            lines.push(format!("  cause: {}: {}", channel.channel, said(cause)));
        }
    }
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
                    c.message_ids.iter().map(move |id| {
                        format!(
                            "{} {} {}",
                            c.channel,
                            crate::model::provider_key_name(c.channel),
                            clean(id)
                        )
                    })
                })
                .collect();
            let mut steps = vec![format!(
                "{:<17} {}",
                "verify:",
                clean(&verdict.next_step.to_string())
            )];
            if !look_for.is_empty() {
                steps.push(format!(
                    "{:<17} search the provider for {}",
                    "by hand:",
                    look_for.join(", ")
                ));
            }
            for (label, command) in triage::after_verification(verdict) {
                steps.push(format!(
                    "{:<17} {}",
                    format!("{label}:"),
                    clean(&command.to_string())
                ));
            }
            steps
        }
        _ => vec![format!("next: {}", clean(&verdict.next_step.to_string()))],
    }
}

/// Who an audit record says acted: over the API the key's name and the operator the
/// client claimed, `alice (key default)`; on the store directly, the operator.
fn who_acted(p: &Value) -> String {
    shown(&crate::model::payload::person(
        p["operator"].as_str(),
        p["claimed_operator"].as_str(),
    ))
}

/// What the providers' records said, as VERIFIED events recorded it: one line each.
pub fn verification_lines(events: &[Event]) -> Vec<String> {
    events
        .iter()
        .filter(|e| e.kind == Kind::Verified)
        .map(|event| {
            let p = event.payload_value();
            let attempts = p["attempts"]
                .as_array()
                .map(|a| {
                    a.iter()
                        .map(|n| n.to_string())
                        .collect::<Vec<_>>()
                        .join(",")
                })
                .unwrap_or_default();
            format!(
                "event {}: {} cycle {} attempt {}: {} (by {}, recorded by {}): {}",
                event.id,
                shown(p["channel"].as_str().unwrap_or("?")),
                p["cycle"].as_i64().map_or("?".into(), |c| c.to_string()),
                shown(&attempts),
                shown(p["outcome"].as_str().unwrap_or("?")),
                shown(p["source"].as_str().unwrap_or("?")),
                who_acted(&p),
                shown(p["evidence"].as_str().unwrap_or(""))
            )
        })
        .collect()
}

/// What an empty DLQ says: a stated end, never silence.
pub fn empty_dlq(place: &str) -> String {
    format!("The DLQ in {} is empty: nothing to do.", clean(place))
}

pub fn join_ids(ids: &[i64]) -> String {
    ids.iter().map(i64::to_string).collect::<Vec<_>>().join(",")
}

pub fn branch_tone(branch: Branch) -> Tone {
    match branch {
        Branch::Resolve => Tone::Good,
        Branch::Verify => Tone::Warn,
        Branch::Replay => Tone::Bad,
    }
}

/// Why an entry is not simply RESOLVE, in a few words: the first failed or uncertain
/// channel's cause, or the first note.
pub fn cause(verdict: &Verdict) -> String {
    verdict
        .channels
        .iter()
        .find_map(|c| {
            c.cause
                .as_ref()
                .map(|cause| format!("{}: {}", c.channel, said(cause)))
        })
        .or_else(|| verdict.notes.first().map(|note| shown(note)))
        .unwrap_or_default()
}

/// The CHANNELS cell: the channels that need something first, and the delivered ones
/// after them, counted when there are several (`EMAIL=UNCERTAIN +2 delivered`). Two or
/// more that need something lead with their states counted (`UNCERTAIN ×2: SLACK
/// PAGERDUTY`), so a narrow column never hides a second uncertain channel.
pub fn channels_cell(channels: &[(crate::model::Channel, ChannelState)]) -> String {
    type Named<'c> = Vec<&'c (crate::model::Channel, ChannelState)>;
    let (delivered, mut open): (Named<'_>, Named<'_>) = channels
        .iter()
        .partition(|(_, state)| *state == ChannelState::Delivered);
    let severity = |state: ChannelState| match state {
        ChannelState::Uncertain => 0,
        ChannelState::Failed => 1,
        ChannelState::NotAttempted => 2,
        ChannelState::Delivered => 3,
    };
    open.sort_by_key(|entry| severity(entry.1));
    let named = |list: &[&(crate::model::Channel, ChannelState)]| -> Vec<String> {
        list.iter()
            .map(|(channel, state)| format!("{channel}={}", state.as_str()))
            .collect()
    };
    let mut parts = if open.len() > 1 {
        let mut counts: Vec<(ChannelState, usize)> = Vec::new();
        for entry in &open {
            match counts.iter_mut().find(|(s, _)| *s == entry.1) {
                Some((_, n)) => *n += 1,
                None => counts.push((entry.1, 1)),
            }
        }
        let counted: Vec<String> = counts
            .iter()
            .map(|(state, n)| format!("{} ×{n}", state.as_str()))
            .collect();
        let names: Vec<String> = open.iter().map(|entry| entry.0.to_string()).collect();
        vec![format!("{}: {}", counted.join(", "), names.join(" "))]
    } else {
        named(&open)
    };
    if open.is_empty() || delivered.len() == 1 {
        parts.extend(named(&delivered));
    } else if !delivered.is_empty() {
        parts.push(format!("+{} delivered", delivered.len()));
    }
    parts.join(" ")
}

/// Shortens ids in a table of every DLQ entry in id order, as git shortens hashes: each
/// to the shortest prefix no neighbour shares (never under 12 characters). Needs one
/// row of look-ahead; only exact when the rows are the whole DLQ, so callers use it
/// only then.
#[derive(Default)]
pub struct ShortIds {
    previous: Option<String>,
}

/// The shortest id prefix shown.
const SHORT_ID: usize = 12;

impl ShortIds {
    /// The prefix to show for `id`, given the id after it (None at the end).
    pub fn next(&mut self, id: &str, following: Option<&str>) -> String {
        let shared = |other: Option<&str>| {
            other.map_or(0, |o| {
                id.chars()
                    .zip(o.chars())
                    .take_while(|(a, b)| a == b)
                    .count()
            })
        };
        let keep = (shared(self.previous.as_deref()).max(shared(following)) + 1).max(SHORT_ID);
        self.previous = Some(id.to_string());
        id.chars().take(keep).collect()
    }
}

/// "3 entries: 1 RESOLVE, 1 VERIFY, 1 REPLAY".
pub fn summary_counts(counts: &std::collections::BTreeMap<Branch, usize>) -> String {
    let total: usize = counts.values().sum();
    let parts: Vec<String> = Branch::ALL
        .iter()
        .map(|branch| format!("{} {branch}", counts.get(branch).copied().unwrap_or(0)))
        .collect();
    format!(
        "{total} {}: {}",
        if total == 1 { "entry" } else { "entries" },
        parts.join(", ")
    )
}

/// What an empty answer says: a stated end, never silence.
pub fn nothing_selected(place: &str, narrowed: bool) -> String {
    if narrowed {
        format!(
            "No DLQ entry in {} matches the selection: nothing to do.",
            clean(place)
        )
    } else {
        empty_dlq(place)
    }
}

/// "Still happening: last lease loss 18:03:20 (1 min ago) ..." or "Not happening now".
pub fn still_words(stillness: &crate::pulse::Stillness, at: f64, now: f64) -> String {
    let when = |t: Option<f64>| match t {
        Some(t) => format!(
            "{} ({} ago)",
            crate::render::time::rfc3339(t),
            crate::render::time::duration((now - t).max(0.0))
        ),
        None => "none recorded".to_string(),
    };
    let quiet = crate::render::time::duration(stillness.quiet_after);
    let head = if stillness.still_happening {
        format!(
            "Still happening: a lease loss or reclaim in the {quiet} before {}",
            crate::render::time::rfc3339(at)
        )
    } else {
        format!(
            "Not happening now: no lease loss or reclaim in the {quiet} before {}",
            crate::render::time::rfc3339(at)
        )
    };
    format!(
        "{head}. Last lease loss {}; last reclaim {}.",
        when(stillness.last_lease_lost),
        when(stillness.last_reclaim)
    )
}

/// A note as kept, in words: which note, where, by whom, when, what it says, and the fix
/// time it records.
pub fn note_written(row: &crate::model::NoteRow, place: &str) -> String {
    let clean = |text: &str| crate::render::sanitize::clean(text).into_owned();
    let Some(note) = row.note() else {
        return format!(
            "note {} kept in {} at {}",
            row.id,
            clean(place),
            crate::render::time::rfc3339(row.at)
        );
    };
    let mut line = format!(
        "note {} kept in {} by {} at {}: {}",
        row.id,
        clean(place),
        clean(&note.person()),
        crate::render::time::rfc3339(row.at),
        clean(&note.text)
    );
    if let Some(ticket) = &note.ticket {
        line.push_str(&format!(" (ticket {})", clean(ticket)));
    }
    if let Some(fixed) = note.fixed_at {
        line.push_str(&format!(
            "\nthe fix went in at {}: the report's summary names it",
            crate::render::time::rfc3339(fixed)
        ));
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::payload_from_value;
    use crate::render::output::{ColorChoice, Format};

    #[test]
    fn said_text_is_escaped_once_and_cut_inside_its_quotes() {
        assert_eq!(said("x\u{202e}"), "\"x\\u{202e}\"");
        let long = said(&"y".repeat(MAX_SHOWN + 10));
        assert!(
            long.starts_with("\"yyy") && long.ends_with(" bytes)\""),
            "{long}"
        );
    }

    #[test]
    fn the_channel_that_needs_something_comes_first() {
        use crate::model::Channel;
        let mut channels = vec![
            (Channel::Email, ChannelState::Uncertain),
            (Channel::Slack, ChannelState::Delivered),
            (Channel::Pagerduty, ChannelState::Delivered),
        ];
        assert_eq!(channels_cell(&channels), "EMAIL=UNCERTAIN +2 delivered");
        channels.truncate(2);
        assert_eq!(channels_cell(&channels), "EMAIL=UNCERTAIN SLACK=DELIVERED");
        channels[0].1 = ChannelState::Delivered;
        assert_eq!(channels_cell(&channels), "EMAIL=DELIVERED SLACK=DELIVERED");
        let failed = [
            (Channel::Email, ChannelState::Delivered),
            (Channel::Slack, ChannelState::Failed),
        ];
        assert_eq!(channels_cell(&failed), "SLACK=FAILED EMAIL=DELIVERED");
        let two = [
            (Channel::Email, ChannelState::Delivered),
            (Channel::Slack, ChannelState::Failed),
            (Channel::Pagerduty, ChannelState::Uncertain),
        ];
        assert_eq!(
            channels_cell(&two),
            "UNCERTAIN ×1, FAILED ×1: PAGERDUTY SLACK EMAIL=DELIVERED"
        );
        let both = [
            (Channel::Slack, ChannelState::Uncertain),
            (Channel::Pagerduty, ChannelState::Uncertain),
        ];
        assert_eq!(channels_cell(&both), "UNCERTAIN ×2: SLACK PAGERDUTY");
    }

    #[test]
    fn an_unreadable_time_is_shown_as_unreadable_and_measures_nothing() {
        let event = |id: i64, at: f64, unreadable: &[&str]| Event {
            id,
            at,
            kind: "ATTEMPT_STARTED".into(),
            payload: payload_from_value(&serde_json::json!({"attempt": 1, "cycle": 1})),
            unreadable: unreadable.iter().map(|u| u.to_string()).collect(),
        };
        let events = [
            event(1, 1_795_989_600.0, &[]),
            event(2, 0.0, &["at: text \"noon\" is not a number"]),
            event(3, 1_795_989_601.0, &[]),
        ];
        let text = timeline(&events, &[], &Output::new(Format::Wide, ColorChoice::Never));
        assert!(text.contains("(time unreadable)"), "{text}");
        assert!(!text.contains("1970-01-01"), "{text}");
        // The gap skips the unreadable one: event 3 is a second after event 1.
        let third = text
            .lines()
            .find(|l| l.contains("2026-11-29T22:00:01"))
            .unwrap_or_default();
        assert!(third.contains("+1.0 s") || third.contains("+1 s"), "{text}");
    }
}
