//! What to ask and how an EMAIL answer follows from a relay log; the provider lookups are
//! tested against the fakes and a real relay in `tests/peers/verify.rs`.

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
    let history = History::read(&row, events.iter().map(Observed::from_event));
    let verdict = triage::judge(&row, &history);
    assert_eq!(verdict.branch, Branch::Verify);
    let asked = questions(&history, &verdict);
    assert_eq!(asked.len(), 1, "{asked:?}");
    let question = &asked[0];
    assert_eq!((question.channel, question.cycle), (Channel::Email, 1));
    assert_eq!(question.cycle_attempts, [1, 2]);
    assert_eq!(
        question.attempts,
        [
            InDoubt {
                attempt: 1,
                message_id: Some("<n-1.1.1@uns.local>".into()),
                sender: None,
                relay: None,
                started: 1001.0,
                ended: 1060.0,
            },
            // The late result came after the lease ran out: the window runs to it.
            InDoubt {
                attempt: 2,
                message_id: Some("<n-1.1.2@uns.local>".into()),
                sender: None,
                relay: None,
                started: 1101.0,
                ended: 1175.0,
            },
        ]
    );
}

const ID: &str = "<n-1.1.1@uns.local>";
const OURS: &str = "uns@uns.local";

fn message(at: f64, sender: relay_log::Sender, fate: relay_log::Fate) -> relay_log::Message {
    relay_log::Message {
        queue_id: "ABC123".into(),
        host: Some("relay".into()),
        at: relay_log::Stamp {
            lo: at,
            hi: at + 1.0,
            ambiguous: false,
        },
        span: (at, at + 1.0),
        ambiguous: false,
        path: "maillog".into(),
        line: format!("cleanup: ABC123: message-id={ID}"),
        sender,
        fate,
        fate_line: Some("the fate line".into()),
    }
}

fn logs(covered: &[(f64, f64)], messages: Vec<relay_log::Message>) -> relay_log::Findings {
    let runs = covered
        .iter()
        .map(|&span| relay_log::Covered {
            inner: span,
            outer: span,
        })
        .collect();
    let mut findings = relay_log::Findings {
        covered: [("relay".to_string(), runs)].into(),
        ..Default::default()
    };
    if !messages.is_empty() {
        findings.messages.insert(ID.into(), messages);
    }
    findings
}

fn attempt(sender: Option<&str>) -> InDoubt {
    InDoubt {
        attempt: 1,
        message_id: Some(ID.into()),
        sender: sender.map(str::to_string),
        relay: None,
        started: 1001.0,
        ended: 1060.0,
    }
}

fn sources() -> Sources {
    Sources {
        skew: 10.0,
        ..Sources::default()
    }
}

/// (what, covered, messages, expected, a word the evidence must hold)
type EmailCase<'a> = (
    &'a str,
    &'a [(f64, f64)],
    Vec<relay_log::Message>,
    Delivery,
    &'a str,
);

/// Each case's answer for an attempt from our sender, and the word its evidence holds.
fn check_email_cases(cases: Vec<EmailCase>) {
    for (what, covered, messages, expected, word) in cases {
        let (answer, evidence) = email_answer(
            ID,
            &attempt(Some(OURS)),
            &logs(covered, messages),
            &sources(),
            5000.0,
        );
        assert_eq!(answer, expected, "{what}: {evidence}");
        assert!(evidence.contains(word), "{what}: {evidence}");
    }
}

/// A log that covers the window yet says it lost lines near it, marks a reboot of the
/// relay's host there, or shows the relay starting again unstopped, proves no absence,
/// and says which; a commit it shows still stands.
#[test]
fn near_a_loss_a_reboot_or_a_restart_absence_is_no_answer_and_the_evidence_says_which() {
    use relay_log::{Fate, Lost, Sender};
    for (why, line, words) in [
        (
            Lost::Said,
            "systemd-journald[384]: Suppressed 1523 messages from postfix@-.service",
            "says it lost lines",
        ),
        (
            Lost::Reboot,
            "-- Boot 5c4f0e8e2a9f4b2a8a3d1e7b6c5d4e3f --",
            "marks a reboot of the relay's host",
        ),
        (
            Lost::Restart,
            "relay postfix/master[4121]: daemon started -- version 3.7.11, configuration /etc/postfix",
            "started again near the attempt's window with no line saying it had been stopped",
        ),
    ] {
        let with_loss = |messages| {
            let mut found = logs(&[(900.0, 2000.0)], messages);
            found.losses.push(relay_log::Loss {
                at: 1030.0,
                line: line.into(),
                why,
            });
            found
        };
        let (answer, evidence) = email_answer(
            ID,
            &attempt(Some(OURS)),
            &with_loss(vec![]),
            &sources(),
            5000.0,
        );
        assert_eq!(answer, Delivery::CannotTell, "{evidence}");
        assert!(evidence.contains(words), "{evidence}");
        assert!(evidence.contains(line), "{evidence}");
        let queued = vec![message(1002.0, Sender::Known(OURS.into()), Fate::Queued)];
        assert_eq!(
            email_answer(
                ID,
                &attempt(Some(OURS)),
                &with_loss(queued),
                &sources(),
                5000.0
            )
            .0,
            Delivery::Delivered
        );
    }
}

#[test]
fn an_email_answer_follows_what_the_relay_recorded() {
    use relay_log::{Fate, Sender};
    let ours = || Sender::Known(OURS.into());
    let theirs = || Sender::Known("attacker@evil.test".into());
    let covering = [(900.0, 2000.0)];
    check_email_cases(vec![
        (
            "queued from our sender",
            &[],
            vec![message(1002.0, ours(), Fate::Queued)],
            Delivery::Delivered,
            "queued it as ABC123",
        ),
        (
            "held by the relay",
            &[],
            vec![message(1002.0, ours(), Fate::Held)],
            Delivery::Delivered,
            "held by the relay",
        ),
        (
            "another sender, queued in the window: a rewrite or a forgery",
            &covering,
            vec![message(1002.0, theirs(), Fate::Queued)],
            Delivery::CannotTell,
            "--smtp-from attacker@evil.test",
        ),
        (
            "another sender, refused in the window",
            &covering,
            vec![message(1002.0, theirs(), Fate::Rejected)],
            Delivery::NotDelivered,
            "not this attempt",
        ),
        (
            "a forged sender, with no coverage",
            &[],
            vec![message(1002.0, theirs(), Fate::Queued)],
            Delivery::CannotTell,
            "not the runtime's",
        ),
        (
            "ours, queued 21 minutes after the window",
            &covering,
            vec![message(1060.0 + 10.0 + 1260.0, ours(), Fate::Queued)],
            Delivery::CannotTell,
            "outside the attempt's window",
        ),
        (
            "another sender's, committed 21 minutes after the window",
            &covering,
            vec![message(1060.0 + 10.0 + 1260.0, theirs(), Fate::Queued)],
            Delivery::CannotTell,
            "outside the attempt's window",
        ),
        (
            "ours, three days before",
            &[],
            vec![message(1001.0 - 3.0 * 86_400.0, ours(), Fate::Queued)],
            Delivery::CannotTell,
            "outside the attempt's window",
        ),
    ]);
}

#[test]
fn an_email_answer_from_a_refusal_needs_the_relays_own_unbroken_record() {
    use relay_log::{Fate, Sender};
    let ours = || Sender::Known(OURS.into());
    let covering = [(900.0, 2000.0)];
    check_email_cases(vec![
        (
            "a session lost during DATA",
            &covering,
            vec![message(1002.0, Sender::Unknown, Fate::Lost)],
            Delivery::NotDelivered,
            "the relay's own record",
        ),
        (
            "a session lost during DATA, with a hole in the log during it",
            &[(900.0, 1002.5), (1100.0, 2000.0)],
            vec![message(1002.0, Sender::Unknown, Fate::Lost)],
            Delivery::CannotTell,
            "a hole during its session",
        ),
        (
            "rejected by cleanup",
            &covering,
            vec![message(1002.0, ours(), Fate::Rejected)],
            Delivery::NotDelivered,
            "never committed",
        ),
        (
            "seen, fate unknown",
            &covering,
            vec![message(1002.0, ours(), Fate::Open)],
            Delivery::CannotTell,
            "no line says",
        ),
        (
            "committed, sender ambiguous",
            &covering,
            vec![message(1002.0, Sender::Ambiguous, Fate::Held)],
            Delivery::CannotTell,
            "more than one way",
        ),
        (
            "lost and, in a second session, queued",
            &[],
            vec![
                message(1002.0, Sender::Unknown, Fate::Lost),
                message(1003.0, ours(), Fate::Queued),
            ],
            Delivery::Delivered,
            "queued",
        ),
    ]);
}

#[test]
fn an_email_answer_from_absence_needs_the_whole_window_covered() {
    let covering = [(900.0, 2000.0)];
    check_email_cases(vec![
        (
            "no line, the log covers the window",
            &covering,
            vec![],
            Delivery::NotDelivered,
            "covers",
        ),
        (
            "no line, the log starts inside the margin",
            &[(995.0, 2000.0)],
            vec![],
            Delivery::CannotTell,
            "not all of the attempt's window",
        ),
        (
            "no line, the log ends before the lease ran out",
            &[(900.0, 1050.0)],
            vec![],
            Delivery::CannotTell,
            "not all of the attempt's window",
        ),
        (
            "no line, a hole across the window",
            &[(900.0, 1020.0), (1040.0, 2000.0)],
            vec![],
            Delivery::CannotTell,
            "not all of the attempt's window",
        ),
    ]);
}

#[test]
fn an_email_answer_without_a_known_sender_or_a_readable_log_proves_less() {
    use relay_log::{Fate, Sender};
    let queued = || vec![message(1002.0, Sender::Known(OURS.into()), Fate::Queued)];
    // The sender comes from the attempt's start, or else --smtp-from.
    let (answer, evidence) =
        email_answer(ID, &attempt(None), &logs(&[], queued()), &sources(), 5000.0);
    assert_eq!(answer, Delivery::CannotTell, "{evidence}");
    assert!(evidence.contains("--smtp-from"), "{evidence}");
    let named = Sources {
        smtp_from: vec![OURS.into()],
        ..sources()
    };
    assert_eq!(
        email_answer(ID, &attempt(None), &logs(&[], queued()), &named, 5000.0).0,
        Delivery::Delivered
    );
    // A file that could not be read may hold the commit: absence and refusals prove nothing.
    for messages in [vec![], vec![message(1002.0, Sender::Unknown, Fate::Lost)]] {
        let mut found = logs(&[(900.0, 2000.0)], messages);
        found
            .problems
            .push("maillog.1: Permission denied (os error 13)".into());
        let (answer, evidence) = email_answer(ID, &attempt(Some(OURS)), &found, &sources(), 5000.0);
        assert_eq!(answer, Delivery::CannotTell, "{evidence}");
        assert!(
            evidence.contains("maillog.1: Permission denied"),
            "{evidence}"
        );
    }
    // A commit read from a readable file stands beside an unreadable one.
    let mut found = logs(&[], queued());
    found.problems.push("maillog.1: Permission denied".into());
    assert_eq!(
        email_answer(ID, &attempt(Some(OURS)), &found, &sources(), 5000.0).0,
        Delivery::Delivered
    );
    // A window not yet past is never NOT_DELIVERED, whatever the log.
    assert_eq!(
        email_answer(
            ID,
            &attempt(Some(OURS)),
            &logs(&[(900.0, 2000.0)], vec![]),
            &sources(),
            1065.0
        )
        .0,
        Delivery::CannotTell
    );
}

fn incident(
    key: Option<&str>,
    created: &str,
    status: &str,
    changed: Option<&str>,
) -> pagerduty::Incident {
    pagerduty::Incident {
        id: Some("PABC".into()),
        incident_number: Some(7),
        incident_key: key.map(str::to_string),
        status: Some(status.into()),
        created_at: Some(created.into()),
        last_status_change_at: changed.map(str::to_string),
        html_url: None,
        service: None,
        grouped: None,
    }
}

/// An incident that groups alerts has no incident_key; PagerDuty lists it because one of
/// its alerts has the key. That alert is read as an incident of its own would be.
#[test]
fn an_incident_that_groups_alerts_proves_by_its_alert_with_the_key() {
    let (from, to) = (1_795_989_600.0, 1_795_989_900.0);
    let now = to + 3600.0;
    let inside = "2026-11-29T22:01:00Z";
    let cases: Vec<(&str, Vec<pagerduty::Incident>, Delivery, &str)> = vec![
        (
            "grouped, our alert inside",
            vec![grouped(vec![alert("n-1", inside, "resolved")])],
            Delivery::Delivered,
            "groups alerts; with the key: alert A-n-1 created 2026-11-29T22:01:00Z",
        ),
        (
            "grouped, our alert open since before",
            vec![grouped(vec![alert(
                "n-1",
                "2026-11-29T20:00:00Z",
                "triggered",
            )])],
            Delivery::Delivered,
            "merged into open incident",
        ),
        (
            "grouped, our alert after the window",
            vec![grouped(vec![alert(
                "n-1",
                "2026-11-29T22:30:00Z",
                "triggered",
            )])],
            Delivery::CannotTell,
            "after the attempt's window",
        ),
        (
            "grouped, no alert with the key",
            vec![grouped(vec![])],
            Delivery::CannotTell,
            "carries no incident_key, and no alert it groups has dedup key n-1",
        ),
        (
            "grouped, its alerts unread",
            vec![pagerduty::Incident {
                grouped: Some(Err("PagerDuty answered HTTP 500".into())),
                ..incident(None, inside, "triggered", None)
            }],
            Delivery::CannotTell,
            "carries no incident_key, and the alerts it may group could not be read",
        ),
    ];
    for (what, incidents, expected, word) in cases {
        let (answer, evidence) = incident_answer("n-1", &incidents, (from, to), (from, to), now);
        assert_eq!(answer, expected, "{what}: {evidence}");
        assert!(evidence.contains(word), "{what}: {evidence}");
    }
}

/// An alert of an incident that groups alerts.
fn alert(key: &str, created: &str, status: &str) -> pagerduty::Alert {
    pagerduty::Alert {
        id: Some(format!("A-{key}")),
        alert_key: Some(key.into()),
        status: Some(status.into()),
        created_at: Some(created.into()),
    }
}

/// An incident that groups alerts (so has no incident_key), opened well before the
/// window by another key's alert, with these alerts of the key asked about.
fn grouped(alerts: Vec<pagerduty::Alert>) -> pagerduty::Incident {
    pagerduty::Incident {
        grouped: Some(Ok(alerts)),
        ..incident(None, "2026-11-29T18:00:00Z", "triggered", None)
    }
}

#[test]
fn a_pagerduty_incident_is_proof_only_with_its_key_inside_the_window() {
    // The window: 2026-11-29T22:00:00Z to 22:05:00Z; now is an hour later.
    let (from, to) = (1_795_989_600.0, 1_795_989_900.0);
    let now = to + 3600.0;
    let inside = "2026-11-29T22:01:00Z";
    let cases: Vec<(&str, Vec<pagerduty::Incident>, Delivery, &str)> = vec![
        (
            "exact key, inside",
            vec![incident(Some("n-1"), inside, "resolved", None)],
            Delivery::Delivered,
            "opened inside",
        ),
        (
            "no key",
            vec![incident(None, inside, "triggered", None)],
            Delivery::CannotTell,
            "no incident_key",
        ),
        (
            "another key",
            vec![incident(Some("n-2"), inside, "triggered", None)],
            Delivery::CannotTell,
            "not n-1",
        ),
        (
            "created in 2099",
            vec![incident(
                Some("n-1"),
                "2099-01-01T00:00:00Z",
                "triggered",
                None,
            )],
            Delivery::CannotTell,
            "future",
        ),
        (
            "created_at 1s",
            vec![incident(Some("n-1"), "1s", "triggered", None)],
            Delivery::CannotTell,
            "not an RFC 3339",
        ),
        (
            "after the window",
            vec![incident(
                Some("n-1"),
                "2026-11-29T22:30:00Z",
                "triggered",
                None,
            )],
            Delivery::CannotTell,
            "after the attempt's window",
        ),
        ("nothing", vec![], Delivery::NotDelivered, "every page read"),
    ];
    for (what, incidents, expected, word) in cases {
        let (answer, evidence) = incident_answer("n-1", &incidents, (from, to), (from, to), now);
        assert_eq!(answer, expected, "{what}: {evidence}");
        assert!(evidence.contains(word), "{what}: {evidence}");
    }
    assert_eq!(
        incident_answer("n-1", &[], (from, to), (from, to), to - 1.0).0,
        Delivery::CannotTell,
        "too soon"
    );
}

/// An incident opened before the window proves a trigger merged into it only while it
/// was still open when the attempt ran.
#[test]
fn a_pagerduty_incident_open_before_the_window_proves_only_while_it_was_open() {
    let (from, to) = (1_795_989_600.0, 1_795_989_900.0);
    let now = to + 3600.0;
    let cases: Vec<(&str, Vec<pagerduty::Incident>, Delivery, &str)> = vec![
        (
            "open before the window",
            vec![incident(
                Some("n-1"),
                "2026-11-29T20:00:00Z",
                "acknowledged",
                None,
            )],
            Delivery::Delivered,
            "merged into open incident",
        ),
        (
            "resolved after the window",
            vec![incident(
                Some("n-1"),
                "2026-11-29T20:00:00Z",
                "resolved",
                Some("2026-11-29T22:10:00Z"),
            )],
            Delivery::Delivered,
            "merged into open incident",
        ),
        (
            "resolved before the window",
            vec![incident(
                Some("n-1"),
                "2026-11-29T20:00:00Z",
                "resolved",
                Some("2026-11-29T21:00:00Z"),
            )],
            Delivery::CannotTell,
            "cannot be told",
        ),
    ];
    for (what, incidents, expected, word) in cases {
        let (answer, evidence) = incident_answer("n-1", &incidents, (from, to), (from, to), now);
        assert_eq!(answer, expected, "{what}: {evidence}");
        assert!(evidence.contains(word), "{what}: {evidence}");
    }
}

/// Slack's API for channel C1, with the webhook's bot when known.
fn slack_api(bot: Option<&str>) -> slack::Api {
    slack::Api {
        api_url: String::new(),
        token: String::new(),
        channel: "C1".into(),
        bot_id: bot.map(str::to_string),
        timeout: crate::verify::http::DEFAULT_TIMEOUT,
    }
}

#[test]
fn a_slack_message_is_proof_only_with_its_key_inside_the_window_and_from_the_bot() {
    let (from, to) = (1_795_989_600.0, 1_795_989_900.0);
    let now = to + 3600.0;
    let key = "n-1:SLACK:1";
    let config = slack_api(Some("B1"));
    let tagged = |ts: &str, key: &str, bot: Option<&str>| slack::Tagged {
        ts: ts.into(),
        idempotency_key: key.into(),
        bot_id: bot.map(str::to_string),
        app_id: None,
        user: None,
    };
    let inside = "1795989700.000100";
    let cases: Vec<(&str, Vec<slack::Tagged>, Delivery, &str)> = vec![
        (
            "ours",
            vec![tagged(inside, key, Some("B1"))],
            Delivery::Delivered,
            "carries Idempotency-Key",
        ),
        (
            "another cycle's key",
            vec![tagged(inside, "n-1:SLACK:2", Some("B1"))],
            Delivery::NotDelivered,
            "no message",
        ),
        (
            "another bot",
            vec![tagged(inside, key, Some("B666"))],
            Delivery::CannotTell,
            "not the webhook's bot",
        ),
        (
            "no bot named",
            vec![tagged(inside, key, None)],
            Delivery::CannotTell,
            "not the webhook's bot",
        ),
        (
            "outside the window",
            vec![tagged("1795990000.000000", key, Some("B1"))],
            Delivery::CannotTell,
            "outside the attempt's window",
        ),
        (
            "a ts that is not one",
            vec![tagged("soon", key, Some("B1"))],
            Delivery::CannotTell,
            "not a Slack time",
        ),
        ("nothing", vec![], Delivery::NotDelivered, "every page"),
    ];
    for (what, messages, expected, word) in cases {
        let window = slack::Window {
            unreadable: Vec::new(),
            tagged: messages,
            read: 3,
        };
        let (answer, evidence) = history_answer(key, &config, &window, (from, to), now);
        assert_eq!(answer, expected, "{what}: {evidence}");
        assert!(evidence.contains(word), "{what}: {evidence}");
    }
    // Where the bot is not known, the key and the time are what count.
    let anyone = slack::Api {
        bot_id: None,
        ..config
    };
    let window = slack::Window {
        unreadable: Vec::new(),
        tagged: vec![tagged(inside, key, None)],
        read: 1,
    };
    assert_eq!(
        history_answer(key, &anyone, &window, (from, to), now).0,
        Delivery::Delivered
    );
}

/// A PagerDuty on loopback serving `lists` (a path, the list's field, its items), at
/// most `cap` items a page whatever limit is asked, paged by the offset asked, as offset
/// paging does; every path asked about is counted in `asked`. Its address.
fn listing_pagerduty(
    lists: Vec<(&'static str, &'static str, Vec<serde_json::Value>)>,
    cap: usize,
    asked: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
) -> String {
    use std::io::{BufRead, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("addr");
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let mut reader = std::io::BufReader::new(&stream);
            let mut request = String::new();
            if reader.read_line(&mut request).is_err() {
                continue;
            }
            loop {
                let mut header = String::new();
                match reader.read_line(&mut header) {
                    Ok(n) if n > 2 => {}
                    _ => break,
                }
            }
            let target = request.split(' ').nth(1).unwrap_or_default().to_string();
            let path = target.split('?').next().unwrap_or_default().to_string();
            asked.lock().expect("asked").push(path.clone());
            let offset: usize = target
                .split(['?', '&'])
                .find_map(|part| part.strip_prefix("offset="))
                .and_then(|n| n.parse().ok())
                .unwrap_or(0);
            let body = match lists.iter().find(|(at, ..)| *at == path) {
                Some((_, field, items)) => json!({
                    *field: items.iter().skip(offset).take(cap).cloned().collect::<Vec<_>>(),
                    "limit": cap,
                    "offset": offset,
                    "more": offset + cap < items.len(),
                }),
                None => json!({"error": {"message": "Not Found", "code": 2100}}),
            }
            .to_string();
            let _ = write!(
                &stream,
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    format!("http://{addr}")
}

fn pagerduty_at(api_url: String) -> pagerduty::Api {
    pagerduty::Api {
        api_url,
        token: "pd-token".into(),
        timeout: std::time::Duration::from_secs(20),
    }
}

/// An API whose pages hold fewer incidents than the limit asked is read to its end, each
/// incident once: the next page starts after the last one listed, not after the limit.
#[test]
fn pagerduty_pages_shorter_than_the_limit_skip_no_incident() {
    let listed: Vec<serde_json::Value> = (0..60)
        .map(|n| {
            json!({"id": format!("P{n:03}"), "incident_key": "n-1",
                "created_at": "2026-11-29T20:00:00Z", "status": "resolved"})
        })
        .collect();
    let asked = std::sync::Arc::default();
    let api = pagerduty_at(listing_pagerduty(
        vec![("/incidents", "incidents", listed)],
        25,
        asked,
    ));
    let client = crate::verify::http::client().expect("client");
    let found = pagerduty::incidents(&client, &api, "n-1").expect("every page");
    let ids: Vec<String> = found.iter().filter_map(|i| i.id.clone()).collect();
    let expected: Vec<String> = (0..60).map(|n| format!("P{n:03}")).collect();
    assert_eq!(ids, expected);
}

/// An incident that groups alerts carries no incident_key: its alerts are read (every
/// page, by the same offset rule) and only those with the key asked about are kept; an
/// id that is not of the API's shape is never put into a path.
#[test]
fn the_alerts_of_an_incident_that_groups_alerts_are_read_for_the_key() {
    let alerts: Vec<serde_json::Value> = (0..30)
        .map(|n| {
            let key = if n == 27 { "n-1" } else { "n-other" };
            json!({"id": format!("A{n:02}"), "alert_key": key, "status": "resolved",
                "created_at": "2026-11-29T22:01:00Z"})
        })
        .collect();
    let incidents = vec![
        json!({"id": "PGRP", "incident_key": null, "status": "resolved",
            "created_at": "2026-11-29T20:00:00Z"}),
        json!({"id": "../../users", "status": "resolved",
            "created_at": "2026-11-29T20:00:00Z"}),
        json!({"id": "POWN", "incident_key": "n-1", "status": "resolved",
            "created_at": "2026-11-29T22:01:00Z"}),
    ];
    let asked = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let api = pagerduty_at(listing_pagerduty(
        vec![
            ("/incidents", "incidents", incidents),
            ("/incidents/PGRP/alerts", "alerts", alerts),
        ],
        10,
        asked.clone(),
    ));
    let client = crate::verify::http::client().expect("client");
    let found = pagerduty::incidents(&client, &api, "n-1").expect("every page");
    let grouped = |id: &str| {
        found
            .iter()
            .find(|i| i.id.as_deref() == Some(id))
            .and_then(|i| i.grouped.clone())
    };
    let kept = grouped("PGRP").expect("read").expect("its alerts");
    let ids: Vec<_> = kept.iter().filter_map(|a| a.id.as_deref()).collect();
    assert_eq!(
        ids,
        ["A27"],
        "the one alert with the key, on the third page"
    );
    let refused = grouped("../../users")
        .expect("named")
        .expect_err("not asked");
    assert!(
        refused.contains("not one the API can be asked about"),
        "{refused}"
    );
    assert_eq!(
        grouped("POWN"),
        None,
        "an incident with its own key groups nothing"
    );
    let paths = asked.lock().expect("asked").clone();
    assert!(
        paths
            .iter()
            .all(|p| p == "/incidents" || p == "/incidents/PGRP/alerts"),
        "{paths:?}"
    );
    assert_eq!(
        paths.iter().filter(|p| p.ends_with("/alerts")).count(),
        3,
        "{paths:?}"
    );
}

/// A message tagged as ours whose key cannot be read may be the attempt's post: inside
/// the window (or at a time that cannot be read) it forbids NOT_DELIVERED; outside, it
/// says nothing of the attempt; and it never takes a proof away.
#[test]
fn a_message_tagged_as_ours_without_a_key_forbids_absence_in_its_window() {
    let (from, to) = (1_795_989_600.0, 1_795_989_900.0);
    let now = to + 3600.0;
    let key = "n-1:SLACK:1";
    let config = slack_api(None);
    let unreadable = |ts: &str| slack::Unreadable { ts: ts.into() };
    let ours = slack::Tagged {
        ts: "1795989700.000100".into(),
        idempotency_key: key.into(),
        bot_id: None,
        app_id: None,
        user: None,
    };
    let cases = [
        ("inside", "1795989800.000001", vec![], Delivery::CannotTell),
        ("no time", "null", vec![], Delivery::CannotTell),
        ("after", "1795990000.000001", vec![], Delivery::NotDelivered),
        (
            "beside a proof",
            "1795989800.000001",
            vec![ours],
            Delivery::Delivered,
        ),
    ];
    for (what, ts, tagged, expected) in cases {
        let window = slack::Window {
            tagged,
            unreadable: vec![unreadable(ts)],
            read: 2,
        };
        let (answer, evidence) = history_answer(key, &config, &window, (from, to), now);
        assert_eq!(answer, expected, "{what}: {evidence}");
        if expected == Delivery::CannotTell {
            assert!(
                evidence.contains(&format!("message ts {ts} carries unsctl's metadata")),
                "{what}: {evidence}"
            );
        }
    }
}

/// Slack's answer for one attempt running `[from, to]`, with no margin.
fn history_answer(
    key: &str,
    config: &slack::Api,
    window: &slack::Window,
    (from, to): (f64, f64),
    now: f64,
) -> (Delivery, String) {
    let attempt = InDoubt {
        attempt: 1,
        message_id: None,
        sender: None,
        relay: None,
        started: from,
        ended: to,
    };
    slack_answers(key, config, window, &[attempt], 0.0, now)
        .pop()
        .expect("one answer")
}

#[test]
fn one_slack_message_proves_one_attempt_never_two() {
    let config = slack_api(Some("B1"));
    let key = "n-1:SLACK:1";
    let message = |ts: f64| slack::Tagged {
        ts: format!("{ts:.6}"),
        idempotency_key: key.into(),
        bot_id: Some("B1".into()),
        app_id: None,
        user: None,
    };
    let attempt = |attempt, started: f64| InDoubt {
        attempt,
        message_id: None,
        sender: None,
        relay: None,
        started,
        ended: started + 60.0,
    };
    // Two attempts whose windows the 120 s margin makes overlap.
    let attempts = [attempt(1, 1000.0), attempt(2, 1070.0)];
    let answers = |messages: &[f64]| {
        let window = slack::Window {
            unreadable: Vec::new(),
            tagged: messages.iter().map(|ts| message(*ts)).collect(),
            read: 50,
        };
        slack_answers(key, &config, &window, &attempts, 120.0, 5000.0)
    };
    // One message inside the second attempt's own window: the second posted it.
    let one = answers(&[1080.0]);
    assert_eq!(one[0].0, Delivery::NotDelivered, "{}", one[0].1);
    assert_eq!(one[1].0, Delivery::Delivered, "{}", one[1].1);
    assert!(one[1].1.contains("own window"), "{}", one[1].1);
    // One in neither attempt's own window: the nearest start, not both.
    let between = answers(&[1065.0]);
    assert_eq!(
        (between[0].0, between[1].0),
        (Delivery::NotDelivered, Delivery::Delivered)
    );
    // Two messages: one each, whatever their order.
    let two = answers(&[1010.0, 1020.0]);
    assert_eq!(
        (two[0].0, two[1].0),
        (Delivery::Delivered, Delivery::Delivered)
    );
    assert_ne!(two[0].1, two[1].1, "each cites its own message");
    // A third has no attempt left to prove: named, never counted as an attempt's.
    let three = answers(&[1010.0, 1020.0, 1030.0]);
    assert!(
        three[0].1.contains("a post no attempt's window explains"),
        "{}",
        three[0].1
    );
}

#[test]
fn each_answer_has_one_next_step_and_cannot_tell_names_what_to_search_for() {
    let answer = |id: &str, channel, attempt, outcome| Answer {
        id: id.into(),
        channel,
        cycle: 1,
        attempt,
        message_id: (channel == Channel::Email).then(|| format!("<{id}.1.{attempt}@uns.local>")),
        answer: outcome,
        source: "test".into(),
        evidence: "e".into(),
    };
    let answers = [
        answer("n-1", Channel::Email, 1, Delivery::Delivered),
        answer("n-2", Channel::Email, 1, Delivery::NotDelivered),
        answer("n-3", Channel::Email, 1, Delivery::Delivered),
        answer("n-3", Channel::Slack, 1, Delivery::CannotTell),
        answer("n-3", Channel::Slack, 2, Delivery::CannotTell),
        answer("n-4", Channel::Pagerduty, 1, Delivery::CannotTell),
        answer("n-4", Channel::Email, 2, Delivery::CannotTell),
    ];
    let steps = next_steps(&answers, &Sources::default());
    assert_eq!(
        steps,
        [
            (
                "n-1".to_string(),
                "unsctl verify n-1 --record --confirm".to_string()
            ),
            (
                "n-2".to_string(),
                "unsctl verify n-2 --record --confirm".to_string()
            ),
            (
                "n-3".to_string(),
                "check out of band (TSG-02 branch 2): search the provider for SLACK metadata idempotency_key n-3:SLACK:1"
                    .to_string()
            ),
            // PagerDuty's incident is named by the bare id, never the Idempotency-Key.
            (
                "n-4".to_string(),
                "check out of band (TSG-02 branch 2): search the provider for PAGERDUTY incident_key (dedup key) n-4, EMAIL Message-ID <n-4.1.2@uns.local>"
                    .to_string()
            ),
        ]
    );
    for (_, step) in &steps {
        assert!(!step.contains("replay"), "{step}");
    }
    // The step to record carries every source that gave the answer.
    let sources = Sources {
        relay_logs: vec!["/var/log/mail.log".into(), "/srv/logs/old mail.gz".into()],
        zone: relay_log::Zone::Fixed(3600),
        syslog_names: relay_log::SyslogNames::new(["mailrelay".to_string()]),
        smtp_from: vec!["noreply@example.com".into()],
        max_log_gap: 600.0,
        skew: 30.0,
        ..Sources::default()
    };
    assert_eq!(
        next_steps(&answers[..1], &sources)[0].1,
        "unsctl verify n-1 --relay-log /var/log/mail.log --relay-log '/srv/logs/old mail.gz' --relay-log-zone +01:00 --relay-syslog-name mailrelay --smtp-from noreply@example.com --max-log-gap 10m --clock-skew 30s --record --confirm"
    );
}

#[test]
fn findings_record_what_each_record_proves_and_skip_cannot_tell() {
    let question = |channel, attempts: &[i64]| Question {
        id: "n-1".into(),
        channel,
        cycle: 2,
        attempts: attempts
            .iter()
            .map(|&attempt| InDoubt {
                attempt,
                message_id: None,
                sender: None,
                relay: None,
                started: 0.0,
                ended: 1.0,
            })
            .collect(),
        // Attempt 2 was refused: no record about the cycle's key covers it.
        cycle_attempts: vec![1, 3],
    };
    let answer = |channel, attempt, outcome| Answer {
        id: "n-1".into(),
        channel,
        cycle: 2,
        attempt,
        message_id: None,
        answer: outcome,
        source: "test".into(),
        evidence: format!("{channel} {attempt}"),
    };
    let questions = [
        question(Channel::Slack, &[1, 3]),
        question(Channel::Email, &[1, 3]),
        question(Channel::Pagerduty, &[1, 3]),
    ];
    let answers = [
        answer(Channel::Slack, 1, Delivery::NotDelivered),
        answer(Channel::Slack, 3, Delivery::Delivered),
        answer(Channel::Email, 1, Delivery::Delivered),
        answer(Channel::Email, 3, Delivery::CannotTell),
        answer(Channel::Pagerduty, 1, Delivery::Delivered),
        answer(Channel::Pagerduty, 3, Delivery::Delivered),
    ];
    let grouped = findings(&answers, &questions);
    let recorded: Vec<(Channel, Finding, Vec<i64>, &str)> = grouped["n-1"]
        .iter()
        .map(|v| {
            (
                v.channel,
                v.outcome,
                v.attempts.clone(),
                v.evidence.as_str(),
            )
        })
        .collect();
    assert_eq!(
        recorded,
        [
            (Channel::Email, Finding::Delivered, vec![1], "EMAIL 1"),
            (Channel::Slack, Finding::Delivered, vec![3], "SLACK 3"),
            (Channel::Slack, Finding::NotDelivered, vec![1], "SLACK 1"),
            (
                Channel::Pagerduty,
                Finding::Delivered,
                vec![1, 3],
                "PAGERDUTY 1"
            ),
        ]
    );
    assert_eq!(summary(&answers)[&Delivery::CannotTell], 1);
    // PagerDuty's absence is recorded only when every attempt's answer agrees.
    let split = [
        answer(Channel::Pagerduty, 1, Delivery::NotDelivered),
        answer(Channel::Pagerduty, 3, Delivery::CannotTell),
    ];
    assert!(findings(&split, &questions).is_empty());
}

/// Logs that prove an answer, then changed the ways real logs and attackers change them:
/// lines deleted, rotated files split anywhere and given in any order, what an attacker
/// can make the relay write (sessions of its own carrying the attempt's Message-ID, lines
/// quoting `status=sent`), stamps shifted elsewhere in time, the whole log rewritten into
/// another layout DESIGN §7 lists (with a container runtime's prefix, under another syslog
/// name), loss reports inserted, and lines of other programs and another host mixed in.
/// The answer may stay or fall back to CANNOT_TELL; DELIVERED never becomes NOT_DELIVERED,
/// nor the reverse. A change of layout alone changes nothing.
mod evidence_holds {
    use super::*;
    use proptest::prelude::*;

    /// 2026-11-29T22:00:00Z: the attempt starts here, and its lease runs 60 s.
    const T0: f64 = 1_795_989_600.0;
    const OUR_QUEUE_ID: &str = "AAAA0001";
    const HOST: &str = "relay";

    #[derive(Debug, Clone, Copy, PartialEq)]
    enum Base {
        /// The relay queued the attempt's message.
        Delivered,
        /// Its session was lost during DATA.
        Lost,
        /// Nothing of it, in a log that covers the window.
        Absent,
    }

    impl Base {
        fn answer(self) -> Delivery {
            match self {
                Base::Delivered => Delivery::Delivered,
                Base::Lost | Base::Absent => Delivery::NotDelivered,
            }
        }
    }

    /// One line: when, which host wrote it, and `program[pid]: text`.
    type Line = (f64, &'static str, String);
    type Lines = Vec<Line>;

    use super::relay_log::layouts::{Layout, PREFIXES, STAMPS, Stamps};

    const CLASSIC: Layout = Layout::CLASSIC;

    /// One line as `layout` writes it: `text` is `program[pid]: words`, or a line of
    /// journalctl's own (`-- Boot ... --`), written as it is.
    fn render(at: f64, host: &str, text: &str, layout: Layout) -> String {
        if text.starts_with("-- ") {
            return text.to_string();
        }
        let (program, words) = text.split_once(": ").unwrap_or((text, ""));
        layout.line(at, host, program, words)
    }

    fn session(at: f64, pid: u32, queue_id: &str, from: &str, fate: u8) -> Lines {
        let smtpd = format!("postfix/smtpd[{pid}]");
        let mut lines: Lines = vec![
            (at, HOST, format!("{smtpd}: connect from app[10.0.0.5]")),
            (
                at,
                HOST,
                format!("{smtpd}: {queue_id}: client=app[10.0.0.5]"),
            ),
            (
                at,
                HOST,
                format!("postfix/cleanup[2]: {queue_id}: message-id={ID}"),
            ),
        ];
        let line = |text: String| (at + 1.0, HOST, text);
        match fate % 5 {
            0 => lines.push(line(format!("postfix/qmgr[3]: {queue_id}: from=<{from}>, size=9, nrcpt=1 (queue active)"))),
            1 => lines.push(line(format!("{smtpd}: lost connection after DATA (9 bytes) from app[10.0.0.5]"))),
            2 => lines.push(line(format!("postfix/cleanup[2]: {queue_id}: hold: header Subject: x; from=<{OURS}> to=<a@b> proto=ESMTP from app[10.0.0.5]; from=<{from}> to=<a@b.test> proto=ESMTP helo=<x>: held"))),
            3 => lines.push(line(format!("postfix/cleanup[2]: {queue_id}: hold: header Subject: x from app[10.0.0.5]; from=<{from}> to=<a@b.test> proto=ESMTP helo=<x>: held"))),
            _ => {}
        }
        let data = if fate % 5 == 1 { "data=0/1" } else { "data=1" };
        lines.push((
            at + 2.0,
            HOST,
            format!(
                "{smtpd}: disconnect from app[10.0.0.5] ehlo=1 mail=1 rcpt=1 {data} commands=4"
            ),
        ));
        lines
    }

    fn base(kind: Base) -> Lines {
        let mut lines: Lines = Vec::new();
        let mut at = T0 - 1800.0;
        while at <= T0 + 1800.0 {
            // Around a session the heartbeat is sparse, so that losing the session's
            // lines leaves a hole longer than the allowed gap.
            if kind == Base::Absent || (at - T0).abs() > 200.0 {
                lines.push((
                    at,
                    HOST,
                    "postfix/anvil[9]: statistics: max connection rate 1/60s".into(),
                ));
            }
            at += 60.0;
        }
        match kind {
            Base::Delivered => lines.extend(session(T0 + 1.0, 100, OUR_QUEUE_ID, OURS, 0)),
            Base::Lost => lines.extend(session(T0 + 1.0, 100, OUR_QUEUE_ID, OURS, 1)),
            Base::Absent => {}
        }
        lines.sort_by(|a, b| a.0.total_cmp(&b.0));
        lines
    }

    /// The answer for the attempt from files written in `layout`, read with the syslog
    /// names `given` (none: Postfix's own).
    fn answer_in(
        files: &[Lines],
        layout: Layout,
        given: &[&str],
        relay: Option<&str>,
    ) -> (Delivery, String) {
        answer_with_hosts(files, layout, given, relay, &[])
    }

    /// [`answer_in`], the operator naming `relay_hosts` as the relay's (`--relay-host`).
    fn answer_with_hosts(
        files: &[Lines],
        layout: Layout,
        given: &[&str],
        relay: Option<&str>,
        relay_hosts: &[&str],
    ) -> (Delivery, String) {
        let dir = tempfile::tempdir().expect("dir");
        let paths: Vec<PathBuf> = files
            .iter()
            .enumerate()
            .map(|(n, lines)| {
                let path = dir.path().join(format!("maillog.{n}"));
                std::fs::write(&path, damaged(lines, layout)).expect("write");
                path
            })
            .collect();
        let wanted: HashSet<String> = [ID.to_string()].into();
        let found = relay_log::search(&paths, &wanted, options(given));
        let attempt = InDoubt {
            attempt: 1,
            message_id: Some(ID.into()),
            sender: Some(OURS.into()),
            relay: relay.map(str::to_string),
            started: T0,
            ended: T0 + 60.0,
        };
        let sources = Sources {
            relay_hosts: relay_hosts.iter().map(|h| h.to_string()).collect(),
            ..sources()
        };
        email_answer(ID, &attempt, &found, &sources, T0 + 10_000.0)
    }

    /// Marks in a line's text for damage only bytes can carry: bytes that are not UTF-8,
    /// and (at the end of the file's last line) the line cut before its end.
    const NOT_UTF8: &str = "<not-utf8>";
    const CUT: &str = "<cut>";

    /// The file `lines` make in `layout`, with the damage their marks ask for. A NUL is a
    /// `\0` in the text itself.
    fn damaged(lines: &Lines, layout: Layout) -> Vec<u8> {
        let mut bytes = Vec::new();
        for (at, host, text) in lines {
            let cut = text.ends_with(CUT);
            let text = render(*at, host, text.trim_end_matches(CUT), layout);
            for (n, part) in text.split(NOT_UTF8).enumerate() {
                if n > 0 {
                    bytes.extend_from_slice(&[0xff, 0xfe, 0xc3]);
                }
                bytes.extend_from_slice(part.as_bytes());
            }
            if !cut {
                bytes.push(b'\n');
            }
        }
        bytes
    }

    /// Damage of the kinds a crash or a broken writer leaves: a NUL in a line, a block of
    /// NULs where lines were, bytes that are not UTF-8, and the last line cut short.
    fn damage(mut lines: Lines, seeds: &[u32]) -> Vec<Lines> {
        let seed = |n| pick(seeds, n);
        for n in 0..(1 + seed(0) as usize % 3) {
            // Half the time the line that matters most: the attempt's own cleanup line.
            let cleanup = lines.iter().position(|l| l.2.contains("message-id="));
            let at = match cleanup {
                Some(at) if seed(n + 9).is_multiple_of(2) => at,
                _ => seed(n + 1) as usize % lines.len(),
            };
            let text = &mut lines[at].2;
            // Inside a Message-ID where the line carries one, else the middle of the line.
            let middle = match text.find("@uns.local>") {
                Some(at) => at,
                None => (0..=text.len() / 2)
                    .rev()
                    .find(|i| text.is_char_boundary(*i))
                    .unwrap_or(0),
            };
            match seed(n + 5) % 4 {
                0 => text.insert(middle, '\0'),
                1 => text.insert_str(0, &"\0".repeat(512)),
                2 => text.insert_str(middle, NOT_UTF8),
                _ => {
                    let last = lines.len() - 1;
                    lines[last].2.push_str(CUT);
                }
            }
        }
        vec![lines]
    }

    fn classic_answer(files: &[Lines]) -> (Delivery, String) {
        answer_in(files, CLASSIC, &[], None)
    }

    const SHIFTS: [f64; 6] = [-259_200.0, -86_400.0, -3600.0, 1260.0, 86_400.0, 259_200.0];
    const ATTACKS: [f64; 6] = [-259_200.0, -3600.0, 5.0, 30.0, 1260.0, 3600.0];
    const LOSSES: [&str; 7] = [
        "-- Boot 5c4f0e8e2a9f4b2a8a3d1e7b6c5d4e3f --",
        "postfix/master[2]: daemon started -- version 3.7.11, configuration /etc/postfix",
        "rsyslogd[1]: imuxsock begins to drop messages from pid 4242 due to rate-limiting",
        "rsyslogd[1]: imuxsock lost 1523 messages from pid 4242 due to rate-limiting",
        "rsyslogd[1]: imjournal: 1523 messages lost due to rate-limiting",
        "systemd-journald[384]: Suppressed 1523 messages from postfix@-.service",
        "systemd-journald[384]: Forwarding to syslog missed 12 messages.",
    ];
    const STRANGERS: [&str; 4] = [
        "CRON[811]: (root) CMD (command -v debian-sa1 > /dev/null && debian-sa1 1 1)",
        "systemd[1]: Started session-42.scope - Session 42 of User root.",
        "postfix/unknownd[7]: statistics: nothing to say",
        "sshd[99]: Accepted publickey for ops from 10.0.0.9 port 52514",
    ];

    /// A seeded pick.
    fn pick(seeds: &[u32], n: usize) -> u32 {
        seeds.get(n % seeds.len().max(1)).copied().unwrap_or(0)
    }

    fn delete_lines(mut lines: Lines, seeds: &[u32]) -> Vec<Lines> {
        let mut n = 0;
        lines.retain(|_| {
            n += 1;
            !pick(seeds, n).is_multiple_of(4)
        });
        vec![lines]
    }

    /// Rotated files, split anywhere, one perhaps missing, given in any order.
    fn rotate(lines: Lines, seeds: &[u32]) -> Vec<Lines> {
        let seed = |n| pick(seeds, n);
        let mut cuts: Vec<usize> = (0..3).map(|n| seed(n) as usize % lines.len()).collect();
        cuts.sort_unstable();
        cuts.dedup();
        let mut files = Vec::new();
        let mut rest = lines.as_slice();
        let mut taken = 0;
        for cut in cuts {
            let (head, tail) = rest.split_at(cut - taken);
            files.push(head.to_vec());
            rest = tail;
            taken = cut;
        }
        files.push(rest.to_vec());
        if seed(3) % 2 == 0 && files.len() > 1 {
            files.remove(seed(4) as usize % files.len());
        }
        let turn = seed(5) as usize % files.len();
        files.rotate_left(turn);
        if seed(6) % 2 == 0 {
            files.reverse();
        }
        files
    }

    /// What an attacker can make the relay write.
    fn forge(mut lines: Lines, seeds: &[u32]) -> Vec<Lines> {
        let seed = |n| pick(seeds, n);
        for n in 0..(1 + seed(0) as usize % 3) {
            let at = T0 + ATTACKS[seed(n + 1) as usize % ATTACKS.len()];
            let queue_id = format!("BBBB{n:04}");
            let mut forged = session(
                at,
                700 + n as u32,
                &queue_id,
                "attacker@evil.test",
                seed(n + 4) as u8,
            );
            forged.push((at, HOST, format!("postfix/cleanup[2]: {OUR_QUEUE_ID}: warning: header Subject: status=sent (250 2.0.0 Ok) {OUR_QUEUE_ID}: from=<{OURS}>, size=1, nrcpt=1 (queue active) from app[10.0.0.5]; from=<{OURS}> to=<a@b> proto=ESMTP helo=<x>")));
            for line in forged {
                let position = seed(n + 7) as usize % (lines.len() + 1);
                lines.insert(position, line);
            }
        }
        vec![lines]
    }

    /// Lines of the log itself, of other programs, and of another host, put anywhere.
    fn insert(mut lines: Lines, seeds: &[u32], choices: &[(&'static str, &str)]) -> Vec<Lines> {
        let seed = |n| pick(seeds, n);
        for n in 0..(1 + seed(0) as usize % 4) {
            let at = T0 + ATTACKS[seed(n + 1) as usize % ATTACKS.len()].clamp(-400.0, 400.0);
            let (host, text) = choices[seed(n + 2) as usize % choices.len()];
            let position = lines.partition_point(|l| l.0 <= at);
            lines.insert(position, (at, host, text.to_string()));
        }
        vec![lines]
    }

    /// Other mail under queue ids the relay reuses, ours among them: whole messages
    /// (each with its own message-id line, another Message-ID, our sender or another)
    /// an hour before the attempt, just inside the times a pending or identified queue
    /// id is kept, or after our message is done. Postfix reuses a queue id only once its
    /// message has left the queue, so none overlaps our own message's lines.
    fn reuse(mut lines: Lines, seeds: &[u32]) -> Vec<Lines> {
        const OFFSETS: [f64; 8] = [-3601.0, -3595.0, -601.0, -595.0, -30.0, 5.0, 30.0, 900.0];
        const QUEUE_IDS: [&str; 3] = [OUR_QUEUE_ID, "CCCC0001", "DDDD0001"];
        const MESSAGE_IDS: [&str; 2] = ["<a@example.com>", "<n-7.1.1@uns.local>"];
        let seed = |n| pick(seeds, n) as usize;
        for n in 0..(1 + seed(0) % 4) {
            let queue_id = QUEUE_IDS[seed(4 * n + 1) % QUEUE_IDS.len()];
            let mut offset = OFFSETS[seed(4 * n + 2) % OFFSETS.len()];
            if queue_id == OUR_QUEUE_ID && (-10.0..=10.0).contains(&offset) {
                offset = 30.0;
            }
            let from = if seed(4 * n + 3).is_multiple_of(2) {
                OURS
            } else {
                "x@example.com"
            };
            lines.extend(other_message(
                T0 + offset,
                7 + n as u32,
                queue_id,
                MESSAGE_IDS[seed(4 * n + 4) % MESSAGE_IDS.len()],
                from,
            ));
        }
        lines.sort_by(|a, b| a.0.total_cmp(&b.0));
        vec![lines]
    }

    fn mutate(kind: Base, family: u8, seeds: &[u32]) -> Vec<Lines> {
        let lines = base(kind);
        match family % 9 {
            8 => reuse(lines, seeds),
            7 => damage(lines, seeds),
            0 => delete_lines(lines, seeds),
            1 => rotate(lines, seeds),
            2 => forge(lines, seeds),
            3 => {
                let mut lines = lines;
                for (n, line) in lines.iter_mut().enumerate() {
                    if pick(seeds, n).is_multiple_of(3) {
                        line.0 += SHIFTS[pick(seeds, n + 1) as usize % SHIFTS.len()];
                    }
                }
                vec![lines]
            }
            4 => insert(lines, seeds, &LOSSES.map(|l| (HOST, l))),
            5 => insert(lines, seeds, &STRANGERS.map(|l| (HOST, l))),
            _ => insert(
                lines,
                seeds,
                &[
                    (
                        "relay2",
                        "postfix/anvil[9]: statistics: max connection rate 1/60s",
                    ),
                    ("relay2", "postfix/smtpd[5]: connect from app[10.0.0.5]"),
                ],
            ),
        }
    }

    fn layout(seeds: &[u32]) -> Layout {
        Layout {
            stamps: STAMPS[pick(seeds, 11) as usize % STAMPS.len()],
            prefix: PREFIXES[pick(seeds, 12) as usize % PREFIXES.len()],
            name: if pick(seeds, 13).is_multiple_of(3) {
                "mailrelay"
            } else {
                "postfix"
            },
        }
    }

    /// The log `log` writes for each base proves that base's answer in the classic layout
    /// and in every stamp and prefix layout, read under its syslog name.
    fn proves_each_answer_in_every_layout(log: impl Fn(Base) -> Lines) {
        for kind in [Base::Delivered, Base::Lost, Base::Absent] {
            let (answer, evidence) = classic_answer(&[log(kind)]);
            assert_eq!(answer, kind.answer(), "{kind:?}: {evidence}");
            for stamps in STAMPS {
                for prefix in PREFIXES {
                    let layout = Layout {
                        stamps,
                        prefix,
                        name: "mailrelay",
                    };
                    let (answer, evidence) = answer_in(&[log(kind)], layout, &["mailrelay"], None);
                    assert_eq!(answer, kind.answer(), "{kind:?} in {layout:?}: {evidence}");
                }
            }
        }
    }

    #[test]
    fn each_base_log_proves_its_answer_in_every_layout() {
        proves_each_answer_in_every_layout(base);
    }

    /// Another message's whole lines under `queue_id`: smtpd `pid`'s session from `at`,
    /// carrying `message_id` from `from`.
    fn other_message(at: f64, pid: u32, queue_id: &str, message_id: &str, from: &str) -> Lines {
        let smtpd = format!("postfix/smtpd[{pid}]");
        [
            (at, format!("{smtpd}: connect from app[10.0.0.5]")),
            (at, format!("{smtpd}: {queue_id}: client=app[10.0.0.5]")),
            (
                at,
                format!("postfix/cleanup[2]: {queue_id}: message-id={message_id}"),
            ),
            (
                at + 1.0,
                format!(
                    "postfix/qmgr[3]: {queue_id}: from=<{from}>, size=9, nrcpt=1 (queue active)"
                ),
            ),
            (at + 1.0, format!("postfix/qmgr[3]: {queue_id}: removed")),
            (
                at + 1.0,
                format!(
                    "{smtpd}: disconnect from app[10.0.0.5] ehlo=1 mail=1 rcpt=1 data=1 commands=4"
                ),
            ),
        ]
        .into_iter()
        .map(|(at, text)| (at, HOST, text))
        .collect()
    }

    #[test]
    fn a_queue_id_the_relay_reuses_keeps_every_answer_in_every_layout() {
        // Inside the attempt's window the relay reuses two queue ids of other mail: one
        // first taken up an hour before (just when a message without a message-id line
        // is given up on), one that named another Message-ID 600 s before (just when
        // that is forgotten). Each later message has every line of its own, so neither
        // is a message "no message-id line names", and absence stays provable.
        let reused = |kind: Base| -> Lines {
            let mut lines = base(kind);
            lines.extend(other_message(
                T0 - 3595.0,
                7,
                "CCCC0001",
                "<a@example.com>",
                "x@example.com",
            ));
            lines.extend(other_message(
                T0 - 595.0,
                8,
                "DDDD0001",
                "<n-7.1.1@uns.local>",
                OURS,
            ));
            // CCCC0001's new session at T0+5 comes before DDDD0001's queue manager line
            // of the same second: the entries about both earlier messages fall due there.
            lines.extend(other_message(
                T0 + 5.0,
                10,
                "CCCC0001",
                "<b@example.com>",
                "x@example.com",
            ));
            lines.extend(other_message(
                T0 + 4.0,
                9,
                "DDDD0001",
                "<n-8.1.1@uns.local>",
                OURS,
            ));
            lines.sort_by(|a, b| a.0.total_cmp(&b.0));
            lines
        };
        proves_each_answer_in_every_layout(reused);
    }

    #[test]
    fn a_message_the_relay_gave_a_message_id_of_its_own_proves_no_absence_in_any_layout() {
        // `/^Message-ID:/ IGNORE` in header_checks removes the Message-ID a message was
        // sent with, and cleanup logs one it makes from the time and the queue id (as a
        // real Postfix 3.7 does): from the runtime's sender, that message may be the
        // attempt's; from another sender it is not.
        let with = |from: &str| -> Lines {
            let mut lines = base(Base::Absent);
            lines.extend(other_message(
                T0 + 3.0,
                11,
                "EEEE0001",
                "<20261129220003.EEEE0001@relay.test>",
                from,
            ));
            lines.sort_by(|a, b| a.0.total_cmp(&b.0));
            lines
        };
        let layouts = STAMPS.iter().flat_map(|&stamps| {
            PREFIXES.iter().map(move |&prefix| Layout {
                stamps,
                prefix,
                name: "mailrelay",
            })
        });
        for layout in layouts {
            let (answer, evidence) = answer_in(&[with(OURS)], layout, &["mailrelay"], None);
            assert_eq!(answer, Delivery::CannotTell, "{layout:?}: {evidence}");
            assert!(
                evidence.contains("EEEE0001 (the relay gave it a Message-ID of its own"),
                "{evidence}"
            );
            let (answer, evidence) =
                answer_in(&[with("x@example.com")], layout, &["mailrelay"], None);
            assert_eq!(answer, Delivery::NotDelivered, "{layout:?}: {evidence}");
        }
    }

    #[test]
    fn a_log_the_reader_cannot_take_as_the_relays_proves_no_absence() {
        for kind in [Base::Lost, Base::Absent] {
            // Another syslog name, not given: none of its lines is the relay's.
            let renamed = Layout {
                name: "mailrelay",
                ..CLASSIC
            };
            let (answer, evidence) = answer_in(&[base(kind)], renamed, &[], None);
            assert_eq!(answer, Delivery::CannotTell, "{kind:?}: {evidence}");
            // Only lines of other programs around the window.
            let cron: Lines = base(kind)
                .into_iter()
                .map(|(at, host, _)| (at, host, STRANGERS[0].to_string()))
                .collect();
            let (answer, evidence) = classic_answer(&[cron]);
            assert_eq!(answer, Delivery::CannotTell, "{kind:?}: {evidence}");
        }
        // The message's own lines under an unread name are a mention: not absence.
        let renamed = Layout {
            name: "mailrelay",
            ..CLASSIC
        };
        let mut files = vec![base(Base::Delivered)];
        files.push(base(Base::Absent));
        let (answer, evidence) = answer_in(&files, renamed, &["postfix"], None);
        assert_eq!(answer, Delivery::CannotTell, "{evidence}");
    }

    #[test]
    fn the_relay_that_answered_decides_whose_log_proves_absence() {
        for kind in [Base::Lost, Base::Absent] {
            let expected = kind.answer();
            // The greeting's full name against syslog's short one.
            let (answer, evidence) = answer_in(&[base(kind)], CLASSIC, &[], Some("relay.test"));
            assert_eq!(answer, expected, "{kind:?}: {evidence}");
            // Another relay answered the attempt: this log is not its.
            let (answer, evidence) = answer_in(&[base(kind)], CLASSIC, &[], Some("relay2.test"));
            assert_eq!(answer, Delivery::CannotTell, "{kind:?}: {evidence}");
            assert!(evidence.contains("another relay's log"), "{evidence}");
            // A container's lines name no host: they cannot be shown to be its.
            let level = Layout {
                stamps: Stamps::Level,
                ..CLASSIC
            };
            let (answer, evidence) = answer_in(&[base(kind)], level, &[], Some("relay.test"));
            assert_eq!(answer, Delivery::CannotTell, "{kind:?}: {evidence}");
        }
        // A container's log names the container's id where the host would be: it proves
        // no absence for the relay that greeted as relay.test until the operator says the
        // id is that relay's, and the answer names both names.
        for kind in [Base::Lost, Base::Absent] {
            let container: Lines = base(kind)
                .into_iter()
                .map(|(at, _, text)| (at, "3f2a1b9c0d4e", text))
                .collect();
            let files = [container];
            let (answer, evidence) = answer_in(&files, CLASSIC, &[], Some("relay.test"));
            assert_eq!(answer, Delivery::CannotTell, "{kind:?}: {evidence}");
            assert!(
                evidence.contains("relay.test")
                    && evidence.contains("3f2a1b9c0d4e")
                    && evidence.contains("--relay-host"),
                "{evidence}"
            );
            let (answer, evidence) =
                answer_with_hosts(&files, CLASSIC, &[], Some("relay.test"), &["3f2a1b9c0d4e"]);
            assert_eq!(answer, kind.answer(), "{kind:?}: {evidence}");
        }
        // A committed message proves delivery whoever's log holds it.
        let (answer, _) = answer_in(&[base(Base::Delivered)], CLASSIC, &[], Some("other.test"));
        assert_eq!(answer, Delivery::Delivered);
    }

    /// The line of `lines` whose text contains `needle`.
    fn line_with(lines: &mut Lines, needle: &str) -> usize {
        lines
            .iter()
            .position(|l| l.2.contains(needle))
            .unwrap_or_else(|| panic!("no line with {needle}"))
    }

    #[test]
    fn a_damaged_line_is_read_as_nothing_and_proves_no_absence() {
        let cleanup = "message-id=";
        let mut cases: Vec<(&str, Lines)> = Vec::new();
        // The committed message's cleanup line, damaged three ways.
        for (what, change) in [
            ("a NUL inside the Message-ID", 0),
            ("a block of NULs before the line", 1),
            ("bytes that are not UTF-8 inside it", 2),
        ] {
            let mut lines = base(Base::Delivered);
            let at = line_with(&mut lines, cleanup);
            let text = &mut lines[at].2;
            match change {
                0 => *text = text.replace("@uns.local>", "\0@uns.local>"),
                1 => text.insert_str(0, &"\0".repeat(4096)),
                _ => *text = text.replace(".1.1@", &format!(".1.1{NOT_UTF8}@")),
            }
            cases.push((what, lines));
        }
        for (what, lines) in &cases {
            let (answer, evidence) = classic_answer(std::slice::from_ref(lines));
            assert_eq!(answer, Delivery::CannotTell, "{what}: {evidence}");
            assert!(
                evidence.contains("cannot be read") || evidence.contains("damaged"),
                "{what}: the damaged line is named: {evidence}"
            );
        }
        // A log that covers the window, with one damaged line inside it: no absence, and
        // the line is named; outside the window it changes nothing.
        for (offset, expected) in [
            (30.0, Delivery::CannotTell),
            (900.0, Delivery::NotDelivered),
        ] {
            let mut lines = base(Base::Absent);
            let position = lines.partition_point(|l| l.0 <= T0 + offset);
            lines.insert(
                position,
                (
                    T0 + offset,
                    HOST,
                    format!("postfix/anvil[9]: stat{NOT_UTF8}istics"),
                ),
            );
            let (answer, evidence) = classic_answer(&[lines]);
            assert_eq!(answer, expected, "damage at +{offset}s: {evidence}");
            if expected == Delivery::CannotTell {
                assert!(evidence.contains("line "), "{evidence}");
                assert!(evidence.contains("not UTF-8"), "{evidence}");
            }
        }
        // The last line cut short, long after the window: it proves nothing, and takes
        // nothing away from the lines before it.
        let mut lines = base(Base::Absent);
        let last = lines.len() - 1;
        lines[last].2.push_str(CUT);
        let (answer, evidence) = classic_answer(&[lines]);
        assert_eq!(answer, Delivery::NotDelivered, "{evidence}");
    }

    /// Everything a search found, in one order, for comparing two readings of a log.
    fn canonical(found: &relay_log::Findings) -> String {
        canonical_of(found, |_| true)
    }

    /// [`canonical`], of the Message-IDs `asked` keeps alone.
    fn canonical_of(found: &relay_log::Findings, asked: impl Fn(&str) -> bool) -> String {
        let sorted = |map: &std::collections::HashMap<String, Vec<String>>| {
            let mut all: Vec<_> = map.iter().filter(|(id, _)| asked(id)).collect();
            all.sort();
            format!("{all:?}")
        };
        let mut messages: Vec<_> = found.messages.iter().filter(|(id, _)| asked(id)).collect();
        messages.sort_by(|a, b| a.0.cmp(b.0));
        format!(
            "messages {messages:?}\ncovered {:?}\nlosses {:?}\nmentions {}\nunread {:?}\nholes {:?}\ndamaged {}\nproblems {:?}\norphans {:?} {}\nlines {} bytes {}",
            found.covered,
            found.losses,
            sorted(&found.mentions),
            found.unread,
            found.holes,
            sorted(&found.damaged_mentions),
            found.problems,
            found.orphans,
            found.orphans_overflow,
            found.lines,
            found.bytes
        )
    }

    /// `files` written in `layout` (damaged lines and all) into `dir`, each gzipped where
    /// its bit of `zipped` is set.
    fn written(files: &[Lines], layout: Layout, zipped: u8, dir: &std::path::Path) -> Vec<PathBuf> {
        files
            .iter()
            .enumerate()
            .map(|(n, lines)| {
                let path = dir.join(format!("maillog.{n}"));
                let bytes = damaged(lines, layout);
                if zipped >> (n % 8) & 1 == 1 {
                    let file = std::fs::File::create(&path).expect("file");
                    let mut gz = flate2::write::GzEncoder::new(file, flate2::Compression::fast());
                    std::io::Write::write_all(&mut gz, &bytes).expect("gzip");
                    gz.finish().expect("gzip");
                } else {
                    std::fs::write(&path, bytes).expect("write");
                }
                path
            })
            .collect()
    }

    /// The base logs in the classic layout: the search for every Message-ID of the
    /// notifications finds the message a search for its Message-ID finds, where there is
    /// one, so the property above compares what was found, not two empty findings.
    #[test]
    fn a_search_for_a_notifications_every_message_finds_its_message() {
        for kind in [Base::Delivered, Base::Lost] {
            let dir = tempfile::tempdir().expect("dir");
            let paths = written(&[base(kind)], CLASSIC, 0, dir.path());
            let ids: HashSet<String> = [ID.to_string()].into();
            let notifications = relay_log::Wanted::Notifications(std::sync::Arc::new(
                ["n-1".to_string()].into_iter().collect(),
            ));
            let exact = relay_log::search(&paths, &ids, options(&[]));
            let every = relay_log::search(&paths, notifications, options(&[]));
            assert!(!exact.seen(ID).is_empty(), "{kind:?}");
            assert_eq!(exact.seen(ID), every.seen(ID), "{kind:?}");
        }
    }

    /// How the generated logs are read: in UTC near [`T0`], gaps of five minutes, under
    /// the syslog names `given`.
    fn options(given: &[&str]) -> relay_log::Options {
        relay_log::Options {
            zone: relay_log::Zone::Fixed(0),
            near: T0,
            max_gap: 300.0,
            names: relay_log::SyslogNames::new(given.iter().map(|n| n.to_string())),
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(
            std::env::var("UNS_PROPTEST_CASES").ok().and_then(|n| n.parse().ok()).unwrap_or(300),
        ))]
        /// A log cut into blocks (as small as a few bytes, so every line and session is
        /// cut somewhere) and read on several threads finds exactly what one thread reading
        /// it whole finds: every layout, holes, damaged and cut lines, rotated files, gzip.
        #[test]
        fn a_log_read_on_every_core_finds_what_one_thread_finds(
            kind in prop_oneof![Just(Base::Delivered), Just(Base::Lost), Just(Base::Absent)],
            family in 0u8..9,
            seeds in prop::collection::vec(any::<u32>(), 1..64),
            block in 1usize..700,
            threads in 2usize..5,
            zipped in any::<u8>(),
        ) {
            let layout = layout(&seeds);
            let dir = tempfile::tempdir().expect("dir");
            let paths = written(&mutate(kind, family, &seeds), layout, zipped, dir.path());
            let wanted: HashSet<String> = [ID.to_string(), "<n-9.1.1@uns.local>".to_string()].into();
            let options = options(&[layout.name]);
            let one = relay_log::search_with(&paths, &wanted, options.clone(), relay_log::Reading { threads: 1, block: 1 << 20 });
            let many = relay_log::search_with(&paths, &wanted, options, relay_log::Reading { threads, block });
            prop_assert_eq!(canonical(&one), canonical(&many));
        }

        /// A search for every Message-ID of a notification's attempts (what reconcile
        /// reads a window's log with, before its histories) finds, of each Message-ID a
        /// search for exactly it finds, the same, and the same of the log itself: every
        /// layout, holes, damaged and cut lines, rotated files, gzip.
        #[test]
        fn a_search_for_a_notifications_every_message_finds_what_one_for_its_ids_finds(
            kind in prop_oneof![Just(Base::Delivered), Just(Base::Lost), Just(Base::Absent)],
            family in 0u8..9,
            seeds in prop::collection::vec(any::<u32>(), 1..64),
            zipped in any::<u8>(),
        ) {
            let layout = layout(&seeds);
            let dir = tempfile::tempdir().expect("dir");
            let paths = written(&mutate(kind, family, &seeds), layout, zipped, dir.path());
            let ids: HashSet<String> = [ID.to_string(), "<n-9.1.1@uns.local>".to_string()].into();
            let notifications = relay_log::Wanted::Notifications(std::sync::Arc::new(
                ["n-1".to_string(), "n-9".to_string()].into_iter().collect(),
            ));
            let options = options(&[layout.name]);
            let exact = relay_log::search(&paths, &ids, options.clone());
            let every = relay_log::search(&paths, notifications, options);
            let asked = |id: &str| ids.contains(id);
            prop_assert_eq!(canonical_of(&exact, asked), canonical_of(&every, asked));
        }

        /// What a parser remembers of the lines before (the last stamp of each layout, the
        /// relay's prefixes) never changes what a line is: every line of a random log, in
        /// every layout, damaged and cut lines among them, reads after the others as a
        /// parser of its own reads it.
        #[test]
        fn a_line_reads_after_the_others_as_on_its_own(
            kind in prop_oneof![Just(Base::Delivered), Just(Base::Lost), Just(Base::Absent)],
            family in 0u8..9,
            seeds in prop::collection::vec(any::<u32>(), 1..64),
        ) {
            let layout = layout(&seeds);
            let options = options(&[layout.name]);
            for lines in mutate(kind, family, &seeds) {
                let bytes = damaged(&lines, layout);
                let otherwise = relay_log::first_line_read_otherwise_after_the_others(&bytes, &options);
                prop_assert_eq!(otherwise, None, "{:?}", layout);
            }
        }
    }

    proptest! {
        // 600 cases in CI; UNS_PROPTEST_CASES asks for more (a long run before a release).
        #![proptest_config(ProptestConfig::with_cases(
            std::env::var("UNS_PROPTEST_CASES").ok().and_then(|n| n.parse().ok()).unwrap_or(600),
        ))]
        #[test]
        fn no_mutation_turns_one_answer_into_the_other(
            kind in prop_oneof![Just(Base::Delivered), Just(Base::Lost), Just(Base::Absent)],
            family in 0u8..9,
            seeds in prop::collection::vec(any::<u32>(), 1..64),
        ) {
            let files = mutate(kind, family, &seeds);
            let layout = layout(&seeds);
            let given: &[&str] = if pick(&seeds, 14).is_multiple_of(2) { &[] } else { &[layout.name] };
            let (answer, evidence) = answer_in(&files, layout, given, None);
            prop_assert!(
                answer == kind.answer() || answer == Delivery::CannotTell,
                "{kind:?}, family {family}, {layout:?}: {answer} ({evidence})"
            );
            // The same log in the classic layout answers as this one, or this one
            // falls back to CANNOT_TELL (a container's lines name no host).
            // Where the classic layout gives an answer, every layout that names hosts,
            // read under its syslog name, gives the same one. (A more precise stamp may
            // prove a window a second-precise one leaves CANNOT_TELL, and a container's
            // layout names no host, so another host's lines mixed in cannot be told
            // apart there.)
            if layout.stamps != Stamps::Level && (given == [layout.name] || layout.name == "postfix") {
                let (classic, _) = answer_in(&files, CLASSIC, &[], None);
                prop_assert!(
                    classic == Delivery::CannotTell || answer == classic,
                    "{kind:?}, family {family}, {layout:?}: {answer}, classic {classic} ({evidence})"
                );
            }
        }

        /// Whole messages under reused queue ids take no answer away, not even to
        /// CANNOT_TELL: each names its own Message-ID, so none is a message "no
        /// message-id line names", and none is ours. In every layout, read under its
        /// syslog name.
        #[test]
        fn a_queue_id_the_relay_reuses_costs_no_answer(
            kind in prop_oneof![Just(Base::Delivered), Just(Base::Lost), Just(Base::Absent)],
            seeds in prop::collection::vec(any::<u32>(), 1..64),
        ) {
            let files = reuse(base(kind), &seeds);
            let layout = layout(&seeds);
            let (answer, evidence) = answer_in(&files, layout, &[layout.name], None);
            prop_assert_eq!(answer, kind.answer(), "{:?}, {:?}: {}", kind, layout, evidence);
        }
    }
}

#[test]
fn failed_lookups_are_said_once_per_reason_with_how_many_each_stopped() {
    let said = |made: usize, failed: &[&str]| {
        Lookups::of(made, failed.iter().map(|f| f.to_string())).unread()
    };
    assert!(said(3, &[]).is_empty(), "nothing failed, nothing said");
    // One lookup (reconcile's Slack history): its reason alone.
    assert_eq!(said(1, &["Slack: invalid_auth"]), ["Slack: invalid_auth"]);
    // A revoked token stops every lookup alike: one line, not one per entry.
    assert_eq!(
        said(
            3,
            &[
                "PagerDuty answered HTTP 401",
                "PagerDuty answered HTTP 401",
                "PagerDuty answered HTTP 401"
            ]
        ),
        ["PagerDuty answered HTTP 401 (3 of 3 lookups)"]
    );
    // The most common reason first, then by its words, so the lines are the same each run.
    assert_eq!(
        said(5, &["b timed out", "a refused", "b timed out", "c"]),
        [
            "b timed out (2 of 5 lookups)",
            "a refused (1 of 5 lookups)",
            "c (1 of 5 lookups)"
        ]
    );
    // Past a few reasons, the rest are counted: each answer says its own.
    let many: Vec<String> = (0..7).map(|n| format!("reason {n}")).collect();
    let many: Vec<&str> = many.iter().map(String::as_str).collect();
    let lines = said(9, &many);
    assert_eq!(lines.len(), REASONS_SAID + 1, "{lines:?}");
    assert_eq!(
        lines.last().map(String::as_str),
        Some("3 more of 9 lookups, each for a reason of its own: each answer says which")
    );
    // A provider in trouble that puts a request id in every error: as many reasons as
    // lookups, counted in one pass, still said in a few lines.
    let many: Vec<String> = (0..200_000)
        .map(|n| format!("HTTP 500 request {n}"))
        .collect();
    let lines = Lookups::of(many.len(), many).unread();
    assert_eq!(lines.len(), REASONS_SAID + 1, "{lines:?}");
    assert_eq!(
        lines[0], "HTTP 500 request 0 (1 of 200000 lookups)",
        "the same order each run: by count, then by words"
    );
    assert!(
        lines[REASONS_SAID].starts_with("199996 more of 200000 lookups"),
        "{lines:?}"
    );
}
