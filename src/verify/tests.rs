//! What to ask and how an EMAIL answer follows from a relay log; the provider lookups are
//! tested against the fakes and a real relay in `tests/verify.rs`.

use super::*;
use crate::model::payload_from_value;
use serde_json::json;

fn event(id: i64, at: f64, kind: &str, payload: serde_json::Value) -> Event {
    Event {
        id,
        at,
        kind: kind.into(),
        payload: payload_from_value(&payload),
        unreadable: Vec::new(),
    }
}

fn row(channels: &[&str]) -> Notification {
    Notification {
        id: "n-1".into(),
        status: "DEAD".into(),
        dead_letter: true,
        attempts: 2,
        cycle: 1,
        cycle_attempts: 2,
        max_attempts: 2,
        channels: channels.iter().map(|c| c.to_string()).collect(),
        payload: json!({}),
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

/// EMAIL: attempt 1 started and was never answered; attempt 2 answered UNKNOWN late.
/// SLACK: rejected, so not a question.
fn history() -> Vec<Event> {
    let lease = |n: i64, token: &str, until: f64| json!({"attempt": n, "cycle": 1, "cycle_attempt": n, "lease_token": token, "lease_until": until});
    let call = |n: i64, token: &str, channel: &str| json!({"attempt": n, "cycle": 1, "cycle_attempt": n, "lease_token": token, "channel": channel});
    let mut unknown = call(2, "t2", "EMAIL");
    unknown["success"] = json!(false);
    unknown["metadata"] = json!({"provider_outcome": "UNKNOWN"});
    let mut refused = call(1, "t1", "SLACK");
    refused["success"] = json!(false);
    refused["metadata"] = json!({"provider_outcome": "REJECTED"});
    vec![
        event(1, 1000.0, "ATTEMPT_STARTED", lease(1, "t1", 1060.0)),
        event(2, 1001.0, "CHANNEL_ATTEMPT_STARTED", call(1, "t1", "EMAIL")),
        event(3, 1001.5, "CHANNEL_ATTEMPT_STARTED", call(1, "t1", "SLACK")),
        event(4, 1002.0, "CHANNEL_ATTEMPT_RESULT", refused),
        event(5, 1100.0, "ATTEMPT_STARTED", lease(2, "t2", 1160.0)),
        event(6, 1101.0, "CHANNEL_ATTEMPT_STARTED", call(2, "t2", "EMAIL")),
        event(7, 1175.0, "CHANNEL_ATTEMPT_RESULT", unknown),
    ]
}

#[test]
fn each_unknown_attempt_is_asked_about_over_its_whole_window() {
    let row = row(&["EMAIL", "SLACK"]);
    let events = history();
    let verdict = triage::triage_events(&row, &events);
    assert_eq!(verdict.branch, Branch::Verify);
    let asked = questions(&row, &events, &verdict);
    assert_eq!(asked.len(), 1, "{asked:?}");
    let question = &asked[0];
    assert_eq!((question.channel, question.cycle), (Channel::Email, 1));
    assert_eq!(question.cycle_attempts, [1, 2]);
    assert_eq!(
        question.attempts,
        [
            Attempt {
                attempt: 1,
                message_id: Some("<n-1.1.1@uns.local>".into()),
                started: 1001.0,
                ended: 1060.0,
            },
            // The late result came after the lease ran out: the window runs to it.
            Attempt {
                attempt: 2,
                message_id: Some("<n-1.1.2@uns.local>".into()),
                started: 1101.0,
                ended: 1175.0,
            },
        ]
    );
}

fn logs(spans: &[(f64, f64)], committed: Option<&str>) -> relay_log::Findings {
    let mut findings = relay_log::Findings::default();
    for (first, last) in spans {
        findings.spans.push(relay_log::Span {
            path: "maillog".into(),
            first: relay_log::Stamp {
                lo: *first,
                hi: first + 1.0,
            },
            last: relay_log::Stamp {
                lo: *last,
                hi: last + 1.0,
            },
        });
    }
    if let Some(message_id) = committed {
        findings.sightings.insert(
            message_id.into(),
            vec![relay_log::Sighting {
                queue_id: "ABC123".into(),
                at: relay_log::Stamp {
                    lo: 1002.0,
                    hi: 1003.0,
                },
                line: "cleanup: ABC123: message-id=<...>".into(),
                path: "maillog".into(),
                committed: Some("qmgr: ABC123: from=<...> (queue active)".into()),
            }],
        );
    }
    findings
}

#[test]
fn an_email_answer_needs_a_queued_line_or_a_log_covering_the_window() {
    let attempt = Attempt {
        attempt: 1,
        message_id: Some("<n-1.1.1@uns.local>".into()),
        started: 1001.0,
        ended: 1060.0,
    };
    let id = "<n-1.1.1@uns.local>";
    let skew = 10.0;
    // Queued: delivered, whatever the log covers.
    let (answer, evidence) = email_answer(id, &attempt, &logs(&[], Some(id)), skew, 5000.0);
    assert_eq!(answer, Outcome::Delivered);
    assert!(evidence.contains("ABC123"), "{evidence}");
    // Not queued, and the log covers the window with the margin: not delivered.
    let covering = logs(&[(900.0, 2000.0)], None);
    assert_eq!(
        email_answer(id, &attempt, &covering, skew, 5000.0).0,
        Outcome::NotDelivered
    );
    // The log starts inside the margin before the attempt: cannot tell.
    let late_start = logs(&[(995.0, 2000.0)], None);
    assert_eq!(
        email_answer(id, &attempt, &late_start, skew, 5000.0).0,
        Outcome::CannotTell
    );
    // The log ends before the lease ran out (rotated away): cannot tell.
    let early_end = logs(&[(900.0, 1050.0)], None);
    let (answer, evidence) = email_answer(id, &attempt, &early_end, skew, 5000.0);
    assert_eq!(answer, Outcome::CannotTell);
    assert!(
        evidence.contains("not all of the attempt's window"),
        "{evidence}"
    );
    // Two files meeting across the window count as one log.
    let rotated = logs(&[(900.0, 1030.0), (1031.0, 2000.0)], None);
    assert_eq!(
        email_answer(id, &attempt, &rotated, skew, 5000.0).0,
        Outcome::NotDelivered
    );
    // A window not yet past is never NOT_DELIVERED, whatever the log.
    assert_eq!(
        email_answer(id, &attempt, &covering, skew, 1065.0).0,
        Outcome::CannotTell
    );
}

#[test]
fn findings_group_a_cycle_wide_key_once_and_skip_cannot_tell() {
    let question = |channel, attempts: &[i64]| Question {
        id: "n-1".into(),
        channel,
        cycle: 2,
        attempts: attempts
            .iter()
            .map(|&attempt| Attempt {
                attempt,
                message_id: None,
                started: 0.0,
                ended: 1.0,
            })
            .collect(),
        cycle_attempts: vec![1, 2, 3],
    };
    let answer = |channel, attempt, outcome| Answer {
        id: "n-1".into(),
        channel,
        cycle: 2,
        attempt,
        message_id: None,
        answer: outcome,
        source: "test".into(),
        evidence: "e".into(),
    };
    let questions = [
        question(Channel::Slack, &[2, 3]),
        question(Channel::Email, &[1, 3]),
    ];
    let answers = [
        answer(Channel::Slack, 2, Outcome::NotDelivered),
        answer(Channel::Slack, 3, Outcome::NotDelivered),
        answer(Channel::Email, 1, Outcome::Delivered),
        answer(Channel::Email, 3, Outcome::CannotTell),
    ];
    let grouped = findings(&answers, &questions);
    let recorded = &grouped["n-1"];
    assert_eq!(recorded.len(), 2, "{recorded:?}");
    assert_eq!(recorded[0].channel, Channel::Slack);
    assert_eq!(recorded[0].attempts, [1, 2, 3], "the cycle's every attempt");
    assert_eq!(recorded[1].channel, Channel::Email);
    assert_eq!(recorded[1].attempts, [1], "one Message-ID's attempt");
    assert_eq!(summary(&answers)[&Outcome::CannotTell], 1);
}
