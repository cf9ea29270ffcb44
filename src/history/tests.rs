//! The one reading of a history: its payload schema is the writers', an attempt's window
//! and outcome have one rule each, and a VERIFIED record settles the attempts it names.

use super::fields::Key;
use super::*;
use crate::model::payload::{self, Audit, Claim, LeaseKeys};
use serde_json::{Value, json};
use std::collections::BTreeSet;

const T0: f64 = 1_764_590_400.0;

fn row() -> Notification {
    Notification {
        id: "n-1".into(),
        status: "DEAD".into(),
        dead_letter: true,
        attempts: 3,
        cycle: 1,
        cycle_attempts: 1,
        max_attempts: 3,
        channels: vec!["EMAIL".into(), "SLACK".into()],
        payload: json!({"recipient": "ops@example.com"}),
        idempotency_key: None,
        lease_token: None,
        lease_until: None,
        next_attempt_at: 0.0,
        error_message: None,
        created_at: 0.0,
        updated_at: 0.0,
        unreadable: Vec::new(),
    }
}

/// Events as (kind, payload text), numbered from 1 and a second apart from T0.
fn read(events: &[(&str, String)]) -> History {
    let observed = events
        .iter()
        .enumerate()
        .map(|(n, (kind, text))| Observed::from_text(n as i64 + 1, T0 + n as f64, kind, text));
    History::read(&row(), observed)
}

fn lease(attempt: i64, token: &str) -> LeaseKeys {
    LeaseKeys {
        attempt: Some(attempt),
        cycle: Some(1),
        cycle_attempt: Some(attempt),
        lease_token: Some(token.into()),
    }
}

fn claimed(attempt: i64, token: &str, until: f64) -> (&'static str, String) {
    let text = payload::to_text(&payload::AttemptStarted {
        lease: lease(attempt, token),
        worker_id: "w".into(),
        reclaimed: false,
        lease_until: until,
        previous_lease_token: None,
    });
    ("ATTEMPT_STARTED", text)
}

fn started(attempt: i64, token: &str) -> (&'static str, String) {
    let mut details = serde_json::Map::new();
    details.insert(payload::SMTP_FROM.into(), json!("uns@uns.local"));
    let text = payload::to_text(&payload::ChannelAttemptStarted {
        lease: lease(attempt, token),
        details,
        channel: Channel::Email,
        provider_effect_may_have_occurred: true,
    });
    ("CHANNEL_ATTEMPT_STARTED", text)
}

fn result(attempt: i64, token: &str, success: bool, outcome: &str) -> (&'static str, String) {
    let metadata = json!({"provider_outcome": outcome, payload::SMTP_GREETING: "relay.test"});
    let text = payload::to_text(&payload::ChannelAttemptResult {
        lease: lease(attempt, token),
        channel: Some("EMAIL".into()),
        success: Some(success),
        message_id: success.then(|| format!("<n-1.1.{attempt}@uns.local>")),
        error: (!success).then(|| "451 4.4.1 timed out".into()),
        metadata: metadata.as_object().cloned(),
    });
    ("CHANNEL_ATTEMPT_RESULT", text)
}

fn audit() -> Audit {
    Audit {
        via: None,
        operator: "key-ops".into(),
        reason: Some("checked".into()),
        ticket: None,
        attestation: Some("relay log".into()),
        verified: None,
        forced: false,
        overridden: Vec::new(),
        triage: Value::Null,
        claimed_operator: Some("alice".into()),
        given_up: vec![crate::model::Channel::Slack],
    }
}

fn verified(attempts: Vec<i64>, outcome: Claim) -> (&'static str, String) {
    let text = payload::to_text(&payload::Verified {
        via: None,
        channel: Channel::Email,
        cycle: 1,
        attempts,
        outcome,
        source: "relay-log".into(),
        evidence: "queue id 4B1".into(),
        operator: "key-ops".into(),
        reason: None,
        ticket: None,
        triage: Value::Null,
        claimed_operator: None,
        read_on_client: false,
    });
    ("VERIFIED", text)
}

/// Every key the reading knows is one a writer writes: renaming a field in
/// `model::payload` without the reader (or the other way round) fails here.
#[test]
fn every_key_read_is_one_the_writers_write() {
    let mut written = BTreeSet::new();
    let resolved = payload::to_text(&payload::DlqResolved {
        audit: audit(),
        cycle: 1,
    });
    let texts = [
        claimed(1, "t1", T0).1,
        started(1, "t1").1,
        result(1, "t1", false, "REJECTED").1,
        verified(vec![1], Claim::Delivered).1,
        resolved,
    ];
    for text in &texts {
        let value: Value = serde_json::from_str(text).expect("a writer writes JSON");
        written.extend(value.as_object().expect("an object").keys().cloned());
    }
    let replayed = payload::to_text(&payload::Replayed {
        audit: audit(),
        cycle: payload::NewCycle {
            cycle: Some(2),
            previous_cycle: Some(1),
            cycle_attempt: Some(0),
            channels: Some(vec!["EMAIL".into()]),
        },
        due_at: None,
        pace: None,
    });
    let value: Value = serde_json::from_str(&replayed).expect("JSON");
    written.extend(value.as_object().expect("an object").keys().cloned());
    for key in Key::ALL {
        assert!(
            written.contains(key.name()),
            "the reading knows {:?}, which no writer writes: {written:?}",
            key.name()
        );
    }
}

#[test]
fn an_attempt_runs_from_its_first_event_to_its_lease_end_or_a_later_result() {
    let history = read(&[
        claimed(1, "t1", T0 + 60.0),
        started(1, "t1"),
        result(1, "t1", false, "UNKNOWN"),
        claimed(2, "t2", T0 + 3.0),
        started(2, "t2"),
    ]);
    let attempts = history.attempts(Channel::Email);
    assert_eq!(attempts.len(), 2);
    // The lease outlasts the result: the call could have acted until it ran out.
    assert_eq!(
        (attempts[0].started, attempts[0].ended),
        (T0 + 1.0, T0 + 60.0)
    );
    // The lease ran out before the start was even committed: the start bounds it.
    assert_eq!(
        (attempts[1].started, attempts[1].ended),
        (T0 + 4.0, T0 + 4.0)
    );
    assert_eq!(attempts[0].sender.as_deref(), Some("uns@uns.local"));
    assert_eq!(attempts[0].relay.as_deref(), Some("relay.test"));
    assert_eq!(attempts[0].event_ids().collect::<Vec<_>>(), [2, 3]);
    assert_eq!(attempts[1].recorded(), ProviderOutcome::Unknown);
    assert!(attempts[1].results.is_empty());
}

/// The best result wins, whatever the order: an UNKNOWN result after a refusal keeps
/// the attempt in doubt, and so does one before it (reconcile used to let the newest
/// result win, so the second order read as refused).
#[test]
fn an_attempts_outcome_is_its_best_result_in_either_order() {
    for results in [
        [
            result(1, "t", false, "REJECTED"),
            result(1, "t", false, "UNKNOWN"),
        ],
        [
            result(1, "t", false, "UNKNOWN"),
            result(1, "t", false, "REJECTED"),
        ],
    ] {
        let mut events = vec![claimed(1, "t", T0 + 60.0), started(1, "t")];
        events.extend(results);
        let history = read(&events);
        assert_eq!(
            history.attempts(Channel::Email)[0].recorded(),
            ProviderOutcome::Unknown
        );
    }
    let accepted_then_refused = read(&[
        started(1, "t"),
        result(1, "t", true, "ACCEPTED"),
        result(1, "t", false, "REJECTED"),
    ]);
    assert_eq!(
        accepted_then_refused.attempts(Channel::Email)[0].recorded(),
        ProviderOutcome::Accepted
    );
}

#[test]
fn a_verified_record_settles_only_the_unknown_attempts_it_names() {
    let history = read(&[
        started(1, "t1"),
        result(1, "t1", false, "UNKNOWN"),
        started(2, "t2"),
        result(2, "t2", false, "UNKNOWN"),
        started(3, "t3"),
        result(3, "t3", true, "ACCEPTED"),
        verified(vec![1, 3], Claim::NotDelivered),
    ]);
    let attempts = history.attempts(Channel::Email);
    let settled: Vec<_> = attempts.iter().map(|a| history.outcome_of(a)).collect();
    assert_eq!(
        settled,
        [
            (ProviderOutcome::Rejected, Some(7)),
            (ProviderOutcome::Unknown, None),
            // An answer never overrides an acceptance.
            (ProviderOutcome::Accepted, None),
        ]
    );
    let record = &history.verifications(Channel::Email)[0];
    assert_eq!((record.source.as_str(), record.at), ("relay-log", T0 + 6.0));
}

#[test]
fn a_resolution_names_who_and_a_replay_undoes_it_and_says_what_is_owed() {
    let resolved = (
        "DLQ_RESOLVED",
        payload::to_text(&payload::DlqResolved {
            audit: audit(),
            cycle: 1,
        }),
    );
    let history = read(std::slice::from_ref(&resolved));
    let resolution = history.resolution.as_ref().expect("resolved");
    assert_eq!(resolution.operator, "alice (key key-ops)");
    assert_eq!(resolution.reason.as_deref(), Some("checked"));
    let replayed = (
        "REPLAYED",
        json!({"cycle": 2, "channels": ["SLACK"], "attestation": " "}).to_string(),
    );
    let history = read(&[resolved, replayed]);
    assert_eq!(history.resolution, None);
    assert_eq!(history.owed, Some(ChannelSet::from_iter([Channel::Slack])));
    // A blank attestation attests nothing.
    assert!(!history.replays[0].attested);
    assert_eq!(history.recipient.as_deref(), Some("ops@example.com"));
}

#[test]
fn what_cannot_be_read_is_named_and_marks_the_history() {
    let history = read(&[
        (
            "CHANNEL_ATTEMPT_RESULT",
            r#"{"channel":"EMAIL","cycle":"one"}"#.into(),
        ),
        ("VERIFIED", r#"{"channel":"EMAIL"}"#.into()),
        ("SOMETHING_NEW", "{}".into()),
    ]);
    assert!(history.unreadable);
    assert_eq!(history.notes.len(), 3, "{:?}", history.notes);
    assert!(history.notes[0].starts_with("event 1 (CHANNEL_ATTEMPT_RESULT): payload:"));
    assert!(history.notes[1].ends_with("counted as no verification"));
    assert!(history.notes[2].contains("unknown kind"));
    assert!(history.verifications(Channel::Email).is_empty());
}

#[test]
fn a_reader_begun_again_reads_each_history_as_a_fresh_reader_would() {
    // Triage walks every entry with one reader; nothing of one entry may reach the next.
    let resolved = (
        "DLQ_RESOLVED",
        payload::to_text(&payload::DlqResolved {
            audit: audit(),
            cycle: 1,
        }),
    );
    let replayed = (
        "REPLAYED",
        json!({"cycle": 2, "channels": ["SLACK"], "attestation": "checked"}).to_string(),
    );
    let histories: Vec<Vec<(&str, String)>> = vec![
        vec![
            claimed(1, "t1", T0 + 60.0),
            started(1, "t1"),
            result(1, "t1", false, "UNKNOWN"),
            verified(vec![1], Claim::NotDelivered),
            resolved,
            replayed,
        ],
        vec![("CHANNEL_ATTEMPT_RESULT", "{oops".into())],
        vec![started(1, "t1"), result(1, "t1", true, "ACCEPTED")],
        Vec::new(),
    ];
    let mut other = row();
    other.id = "n-2".into();
    other.channels = vec!["PAGERDUTY".into()];
    other.unreadable = vec!["payload: not JSON".into()];
    other.payload = Value::Null;
    let rows = [row(), other];
    let mut reader = Reader::default();
    // Every history after every other, on either row.
    for (first, second) in histories
        .iter()
        .flat_map(|a| histories.iter().map(move |b| (a, b)))
    {
        for row in &rows {
            for events in [first, second] {
                let observed = || {
                    events.iter().enumerate().map(|(n, (kind, text))| {
                        Observed::from_text(n as i64 + 1, T0 + n as f64, kind, text)
                    })
                };
                reader.begin(row);
                for event in observed() {
                    reader.read(event);
                }
                assert_eq!(reader.history(), &History::read(row, observed()));
            }
        }
    }
}
