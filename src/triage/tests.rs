//! Table-driven triage cases: each history the issue names, and the awkward ones.

use super::*;
use serde_json::{Value, json};

struct History {
    events: Vec<Event>,
}

impl History {
    fn new() -> Self {
        Self { events: Vec::new() }
    }

    fn push(mut self, kind: &str, payload: Value) -> Self {
        let id = self.events.len() as i64 + 1;
        self.events.push(Event {
            id,
            at: 1000.0 + id as f64,
            kind: kind.into(),
            payload: crate::model::payload_from_value(&payload),
            unreadable: Vec::new(),
        });
        self
    }

    fn start(self, cycle: i64, attempt: i64, channel: &str, token: &str) -> Self {
        self.push(
            "CHANNEL_ATTEMPT_STARTED",
            json!({"cycle": cycle, "attempt": attempt, "cycle_attempt": attempt, "channel": channel,
                   "lease_token": token, "provider_effect_may_have_occurred": true}),
        )
    }

    fn result(self, cycle: i64, attempt: i64, channel: &str, token: &str, outcome: &str) -> Self {
        let success = outcome == "ACCEPTED";
        let message_id = success.then(|| format!("<n-1.{cycle}.{attempt}@uns.local>"));
        self.push(
            "CHANNEL_ATTEMPT_RESULT",
            json!({"cycle": cycle, "attempt": attempt, "cycle_attempt": attempt, "channel": channel,
                   "lease_token": token, "success": success, "message_id": message_id,
                   "error": if success { Value::Null } else { json!("boom") },
                   "metadata": {"provider_outcome": outcome}}),
        )
    }

    fn lease_lost(self, cycle: i64, attempt: i64, token: &str) -> Self {
        self.push(
            "LEASE_LOST",
            json!({"cycle": cycle, "attempt": attempt, "lease_token": token,
                   "provider_effect_may_have_occurred": true}),
        )
    }

    fn replayed(self, cycle: i64, channels: &[&str]) -> Self {
        self.push(
            "REPLAYED",
            json!({"cycle": cycle, "channels": channels, "operator": "op"}),
        )
    }

    fn replayed_attested(self, cycle: i64, channels: &[&str]) -> Self {
        self.push(
            "REPLAYED",
            json!({"cycle": cycle, "channels": channels, "operator": "op",
                   "attestation": "relay log: nothing queued"}),
        )
    }

    fn verified(self, channel: &str, cycle: i64, attempts: &[i64], outcome: &str) -> Self {
        self.push(
            "VERIFIED",
            json!({"channel": channel, "cycle": cycle, "attempts": attempts, "outcome": outcome,
                   "source": "relay-log", "evidence": "line", "operator": "op"}),
        )
    }

    fn dead(self) -> Self {
        self.push("DEAD_LETTERED", json!({"error_message": "dead"}))
    }
}

fn row(channels: &[&str], cycle: i64) -> Notification {
    Notification {
        id: "n-1".into(),
        status: "DEAD".into(),
        dead_letter: true,
        attempts: 3,
        cycle,
        cycle_attempts: 1,
        max_attempts: 3,
        channels: channels.iter().map(|c| c.to_string()).collect(),
        payload: json!({}),
        idempotency_key: None,
        lease_token: None,
        lease_until: None,
        next_attempt_at: 0.0,
        error_message: Some(
            "Provider outcome unknown: recovery exhausted the attempt budget".into(),
        ),
        created_at: 0.0,
        updated_at: 0.0,
        unreadable: Vec::new(),
    }
}

use ChannelState::{Delivered, Failed, NotAttempted, Uncertain};

struct Case {
    name: &'static str,
    channels: &'static [&'static str],
    cycle: i64,
    history: fn() -> History,
    branch: Branch,
    states: &'static [(&'static str, ChannelState)],
    lease_lost: bool,
}

const CASES: &[Case] = &[
    Case {
        name: "late success after LEASE_LOST",
        channels: &["EMAIL"],
        cycle: 1,
        history: || {
            History::new()
                .start(1, 1, "EMAIL", "a")
                .result(1, 1, "EMAIL", "a", "ACCEPTED")
                .lease_lost(1, 1, "a")
                .dead()
        },
        branch: Branch::Resolve,
        states: &[("EMAIL", Delivered)],
        lease_lost: true,
    },
    Case {
        name: "SMTP post-data timeout",
        channels: &["EMAIL"],
        cycle: 1,
        history: || {
            History::new()
                .start(1, 1, "EMAIL", "a")
                .result(1, 1, "EMAIL", "a", "UNKNOWN")
                .dead()
        },
        branch: Branch::Verify,
        states: &[("EMAIL", Uncertain)],
        lease_lost: false,
    },
    Case {
        name: "rejection",
        channels: &["SLACK"],
        cycle: 1,
        history: || {
            History::new()
                .start(1, 1, "SLACK", "a")
                .result(1, 1, "SLACK", "a", "REJECTED")
                .dead()
        },
        branch: Branch::Replay,
        states: &[("SLACK", Failed)],
        lease_lost: false,
    },
    Case {
        name: "start with no result",
        channels: &["PAGERDUTY"],
        cycle: 1,
        history: || History::new().start(1, 1, "PAGERDUTY", "a").dead(),
        branch: Branch::Verify,
        states: &[("PAGERDUTY", Uncertain)],
        lease_lost: false,
    },
    Case {
        name: "two channels, one delivered and one rejected",
        channels: &["EMAIL", "SLACK"],
        cycle: 1,
        history: || {
            History::new()
                .start(1, 1, "EMAIL", "a")
                .result(1, 1, "EMAIL", "a", "ACCEPTED")
                .start(1, 1, "SLACK", "a")
                .result(1, 1, "SLACK", "a", "REJECTED")
                .dead()
        },
        branch: Branch::Replay,
        states: &[("EMAIL", Delivered), ("SLACK", Failed)],
        lease_lost: false,
    },
    Case {
        name: "two channels, one delivered and one unknown",
        channels: &["EMAIL", "SLACK"],
        cycle: 1,
        history: || {
            History::new()
                .start(1, 1, "EMAIL", "a")
                .result(1, 1, "EMAIL", "a", "UNKNOWN")
                .start(1, 1, "SLACK", "a")
                .result(1, 1, "SLACK", "a", "ACCEPTED")
                .dead()
        },
        branch: Branch::Verify,
        states: &[("EMAIL", Uncertain), ("SLACK", Delivered)],
        lease_lost: false,
    },
    Case {
        name: "delivered in an earlier cycle stays delivered after a replay",
        channels: &["EMAIL", "SLACK"],
        cycle: 2,
        history: || {
            History::new()
                .start(1, 1, "EMAIL", "a")
                .result(1, 1, "EMAIL", "a", "ACCEPTED")
                .start(1, 1, "SLACK", "a")
                .result(1, 1, "SLACK", "a", "REJECTED")
                .dead()
                .replayed(2, &["SLACK"])
                .start(2, 2, "SLACK", "b")
                .result(2, 2, "SLACK", "b", "REJECTED")
                .dead()
        },
        branch: Branch::Replay,
        states: &[("EMAIL", Delivered), ("SLACK", Failed)],
        lease_lost: false,
    },
    Case {
        name: "a rejection in an earlier cycle does not count in the current one",
        channels: &["SLACK"],
        cycle: 2,
        history: || {
            History::new()
                .start(1, 1, "SLACK", "a")
                .result(1, 1, "SLACK", "a", "REJECTED")
                .dead()
                .replayed(2, &["SLACK"])
                .start(2, 2, "SLACK", "b")
                .result(2, 2, "SLACK", "b", "UNKNOWN")
                .dead()
        },
        branch: Branch::Verify,
        states: &[("SLACK", Uncertain)],
        lease_lost: false,
    },
    Case {
        name: "an earlier cycle's rejection alone leaves the channel not attempted",
        channels: &["SLACK"],
        cycle: 2,
        history: || {
            History::new()
                .start(1, 1, "SLACK", "a")
                .result(1, 1, "SLACK", "a", "REJECTED")
                .dead()
                .replayed(2, &["SLACK"])
                .dead()
        },
        branch: Branch::Replay,
        states: &[("SLACK", NotAttempted)],
        lease_lost: false,
    },
    Case {
        name: "a malformed payload is named and gives VERIFY",
        channels: &["EMAIL"],
        cycle: 1,
        history: || {
            History::new()
                .start(1, 1, "EMAIL", "a")
                .result(1, 1, "EMAIL", "a", "ACCEPTED")
                .push("CHANNEL_ATTEMPT_RESULT", Value::String("{not json".into()))
                .dead()
        },
        branch: Branch::Verify,
        states: &[("EMAIL", Delivered)],
        lease_lost: false,
    },
    Case {
        name: "an unknown event kind is named and gives VERIFY",
        channels: &["SLACK"],
        cycle: 1,
        history: || {
            History::new()
                .start(1, 1, "SLACK", "a")
                .result(1, 1, "SLACK", "a", "REJECTED")
                .push("PROVIDER_CALLBACK", json!({"channel": "SLACK"}))
                .dead()
        },
        branch: Branch::Verify,
        states: &[("SLACK", Failed)],
        lease_lost: false,
    },
    Case {
        name: "a result whose success flag cannot be read is unknown",
        channels: &["SLACK"],
        cycle: 1,
        history: || {
            History::new()
                .start(1, 1, "SLACK", "a")
                .push("CHANNEL_ATTEMPT_RESULT", json!({"cycle": 1, "attempt": 1, "channel": "SLACK", "lease_token": "a", "success": "yes"}))
                .dead()
        },
        branch: Branch::Verify,
        states: &[("SLACK", Uncertain)],
        lease_lost: false,
    },
    Case {
        name: "a channel seen in events but missing from the row is still reported",
        channels: &["EMAIL"],
        cycle: 1,
        history: || {
            History::new()
                .start(1, 1, "EMAIL", "a")
                .result(1, 1, "EMAIL", "a", "ACCEPTED")
                .start(1, 1, "PAGERDUTY", "a")
                .result(1, 1, "PAGERDUTY", "a", "REJECTED")
                .dead()
        },
        branch: Branch::Replay,
        states: &[("EMAIL", Delivered), ("PAGERDUTY", Failed)],
        lease_lost: false,
    },
    Case {
        name: "a DLQ entry with no attempts at all",
        channels: &["EMAIL", "SLACK"],
        cycle: 1,
        history: || History::new().dead(),
        branch: Branch::Replay,
        states: &[("EMAIL", NotAttempted), ("SLACK", NotAttempted)],
        lease_lost: false,
    },
    Case {
        name: "the late result of an old lease arrives after the replacement's rejection",
        channels: &["EMAIL"],
        cycle: 1,
        history: || {
            History::new()
                .start(1, 1, "EMAIL", "old")
                .start(1, 2, "EMAIL", "new")
                .result(1, 2, "EMAIL", "new", "REJECTED")
                .result(1, 1, "EMAIL", "old", "ACCEPTED")
                .lease_lost(1, 1, "old")
                .dead()
        },
        branch: Branch::Resolve,
        states: &[("EMAIL", Delivered)],
        lease_lost: true,
    },
    Case {
        name: "a reclaim's rejection does not hide the lost lease's unknown call",
        channels: &["EMAIL"],
        cycle: 1,
        history: || {
            History::new()
                .start(1, 1, "EMAIL", "old")
                .lease_lost(1, 1, "old")
                .start(1, 2, "EMAIL", "new")
                .result(1, 2, "EMAIL", "new", "REJECTED")
                .dead()
        },
        branch: Branch::Verify,
        states: &[("EMAIL", Uncertain)],
        lease_lost: true,
    },
    Case {
        name: "doubt from an earlier cycle survives a forced replay without an attestation",
        channels: &["EMAIL"],
        cycle: 2,
        history: || {
            History::new()
                .start(1, 1, "EMAIL", "a")
                .result(1, 1, "EMAIL", "a", "UNKNOWN")
                .dead()
                .replayed(2, &["EMAIL"])
                .start(2, 2, "EMAIL", "b")
                .result(2, 2, "EMAIL", "b", "REJECTED")
                .dead()
        },
        branch: Branch::Verify,
        states: &[("EMAIL", Uncertain)],
        lease_lost: false,
    },
    Case {
        name: "an attested replay clears the doubt of the earlier cycle",
        channels: &["EMAIL"],
        cycle: 2,
        history: || {
            History::new()
                .start(1, 1, "EMAIL", "a")
                .result(1, 1, "EMAIL", "a", "UNKNOWN")
                .dead()
                .replayed_attested(2, &["EMAIL"])
                .start(2, 2, "EMAIL", "b")
                .result(2, 2, "EMAIL", "b", "REJECTED")
                .dead()
        },
        branch: Branch::Replay,
        states: &[("EMAIL", Failed)],
        lease_lost: false,
    },
    Case {
        name: "an attested replay of another channel clears nothing",
        channels: &["EMAIL", "SLACK"],
        cycle: 2,
        history: || {
            History::new()
                .start(1, 1, "EMAIL", "a")
                .result(1, 1, "EMAIL", "a", "UNKNOWN")
                .start(1, 1, "SLACK", "a")
                .result(1, 1, "SLACK", "a", "REJECTED")
                .dead()
                .replayed_attested(2, &["SLACK"])
                .start(2, 2, "SLACK", "b")
                .result(2, 2, "SLACK", "b", "REJECTED")
                .dead()
        },
        branch: Branch::Verify,
        states: &[("EMAIL", Uncertain), ("SLACK", Failed)],
        lease_lost: false,
    },
    Case {
        name: "VERIFIED NOT_DELIVERED settles the attempts it lists as refused",
        channels: &["EMAIL"],
        cycle: 1,
        history: || {
            History::new()
                .start(1, 1, "EMAIL", "a")
                .result(1, 1, "EMAIL", "a", "UNKNOWN")
                .dead()
                .verified("EMAIL", 1, &[1], "NOT_DELIVERED")
        },
        branch: Branch::Replay,
        states: &[("EMAIL", Failed)],
        lease_lost: false,
    },
    Case {
        name: "VERIFIED NOT_DELIVERED for one attempt leaves another unknown",
        channels: &["EMAIL"],
        cycle: 1,
        history: || {
            History::new()
                .start(1, 1, "EMAIL", "a")
                .lease_lost(1, 1, "a")
                .start(1, 2, "EMAIL", "b")
                .result(1, 2, "EMAIL", "b", "UNKNOWN")
                .dead()
                .verified("EMAIL", 1, &[2], "NOT_DELIVERED")
        },
        branch: Branch::Verify,
        states: &[("EMAIL", Uncertain)],
        lease_lost: true,
    },
    Case {
        name: "VERIFIED DELIVERED makes the channel DELIVERED",
        channels: &["SLACK"],
        cycle: 1,
        history: || {
            History::new()
                .start(1, 1, "SLACK", "a")
                .result(1, 1, "SLACK", "a", "UNKNOWN")
                .dead()
                .verified("SLACK", 1, &[1], "DELIVERED")
        },
        branch: Branch::Resolve,
        states: &[("SLACK", Delivered)],
        lease_lost: false,
    },
    Case {
        name: "VERIFIED NOT_DELIVERED never overrides an acceptance",
        channels: &["EMAIL"],
        cycle: 1,
        history: || {
            History::new()
                .start(1, 1, "EMAIL", "a")
                .result(1, 1, "EMAIL", "a", "ACCEPTED")
                .dead()
                .verified("EMAIL", 1, &[1], "NOT_DELIVERED")
        },
        branch: Branch::Resolve,
        states: &[("EMAIL", Delivered)],
        lease_lost: false,
    },
    Case {
        name: "an unreadable VERIFIED counts as no verification",
        channels: &["EMAIL"],
        cycle: 1,
        history: || {
            History::new()
                .start(1, 1, "EMAIL", "a")
                .result(1, 1, "EMAIL", "a", "UNKNOWN")
                .dead()
                .push(
                    "VERIFIED",
                    json!({"channel": "EMAIL", "cycle": "one", "outcome": "NOT_DELIVERED"}),
                )
        },
        branch: Branch::Verify,
        states: &[("EMAIL", Uncertain)],
        lease_lost: false,
    },
    Case {
        name: "no channels at all is never RESOLVE",
        channels: &[],
        cycle: 1,
        history: || History::new().dead(),
        branch: Branch::Verify,
        states: &[],
        lease_lost: false,
    },
];

#[test]
fn every_case_gets_its_branch_and_states() {
    for case in CASES {
        let history = (case.history)();
        let verdict = triage_events(&row(case.channels, case.cycle), &history.events);
        assert_eq!(verdict.branch, case.branch, "{}: {verdict:#?}", case.name);
        let states: Vec<(&str, ChannelState)> = verdict
            .channels
            .iter()
            .map(|c| (c.channel.as_str(), c.state))
            .collect();
        assert_eq!(states, case.states, "{}", case.name);
        assert_eq!(verdict.lease_lost, case.lease_lost, "{}", case.name);
        assert_eq!(
            verdict.last_event_id,
            history.events.last().map(|e| e.id),
            "{}",
            case.name
        );
        for channel in &verdict.channels {
            let proven = channel.state == NotAttempted || !channel.evidence.is_empty();
            assert!(proven, "{}: {} has no evidence", case.name, channel.channel);
        }
    }
}

fn verdict_of(name: &str) -> Verdict {
    let case = CASES.iter().find(|c| c.name == name).expect("case");
    triage_events(&row(case.channels, case.cycle), &(case.history)().events)
}

#[test]
fn evidence_names_the_events_that_prove_each_state() {
    let late = verdict_of("late success after LEASE_LOST");
    assert_eq!(late.channels[0].evidence, [1, 2]);
    assert_eq!(late.channels[0].message_ids, ["<n-1.1.1@uns.local>"]);
    assert_eq!(
        late.next_step.to_string(),
        "unsctl dlq resolve n-1 --confirm"
    );

    let old_lease =
        verdict_of("the late result of an old lease arrives after the replacement's rejection");
    assert_eq!(old_lease.channels[0].evidence, [1, 4]);

    let unknown = verdict_of("start with no result");
    assert_eq!(unknown.channels[0].evidence, [1]);
    assert_eq!(unknown.next_step.to_string(), "unsctl verify n-1");
}

#[test]
fn replay_covers_only_the_channels_not_delivered() {
    let mixed = verdict_of("two channels, one delivered and one rejected");
    assert_eq!(mixed.undelivered().joined(","), "SLACK");
    assert_eq!(
        mixed.next_step.to_string(),
        "unsctl replay n-1 --channels SLACK --confirm"
    );
    let verify = verdict_of("two channels, one delivered and one unknown");
    assert_eq!(verify.undelivered().joined(","), "EMAIL");
    let steps: Vec<(&str, String)> = after_verification(&verify)
        .into_iter()
        .map(|(label, step)| (label, step.to_string()))
        .collect();
    assert_eq!(
        steps,
        [
            (
                "if it arrived",
                "unsctl dlq resolve n-1 --verified-delivered --confirm".to_string()
            ),
            (
                "if it did not",
                "unsctl replay n-1 --channels EMAIL --verified-not-delivered --confirm".to_string()
            ),
        ]
    );
}

#[test]
fn uncertain_email_names_the_message_id_to_search_for() {
    let verdict = verdict_of("SMTP post-data timeout");
    assert_eq!(verdict.channels[0].message_ids, ["<n-1.1.1@uns.local>"]);
}

#[test]
fn message_ids_keep_the_order_they_were_seen_in_once_each() {
    let result = |message_id: &str, key: &str| {
        json!({"cycle": 1, "attempt": 1, "channel": "EMAIL", "lease_token": "t1",
               "success": true, "message_id": message_id,
               "metadata": {"provider_outcome": "ACCEPTED", "idempotency_key": key}})
    };
    let in_order = History::new().start(1, 1, "EMAIL", "t1").push(
        "CHANNEL_ATTEMPT_RESULT",
        result("<n-1.1.1@uns.local>", "k-1"),
    );
    let verdict = triage_events(&row(&["EMAIL"], 1), &in_order.events);
    assert_eq!(
        verdict.channels[0].message_ids,
        ["<n-1.1.1@uns.local>", "k-1"]
    );
    // A result stored before its start (clock skew, a hand-edited store) still names
    // each id once, the provider's first.
    let reversed = History::new()
        .push("CHANNEL_ATTEMPT_RESULT", result("<relay-42@mx>", "k-1"))
        .start(1, 1, "EMAIL", "t1");
    let verdict = triage_events(&row(&["EMAIL"], 1), &reversed.events);
    assert_eq!(
        verdict.channels[0].message_ids,
        ["<relay-42@mx>", "k-1", "<n-1.1.1@uns.local>"]
    );
    let same = History::new()
        .push(
            "CHANNEL_ATTEMPT_RESULT",
            result("<n-1.1.1@uns.local>", "k-1"),
        )
        .start(1, 1, "EMAIL", "t1");
    let verdict = triage_events(&row(&["EMAIL"], 1), &same.events);
    assert_eq!(
        verdict.channels[0].message_ids,
        ["<n-1.1.1@uns.local>", "k-1"]
    );
}

#[test]
fn bad_evidence_is_named_in_the_notes() {
    let malformed = verdict_of("a malformed payload is named and gives VERIFY");
    assert!(
        malformed.notes.iter().any(|n| n.starts_with("event 3 ")),
        "{:?}",
        malformed.notes
    );
    let unknown_kind = verdict_of("an unknown event kind is named and gives VERIFY");
    assert!(
        unknown_kind
            .notes
            .iter()
            .any(|n| n.contains("event 3") && n.contains("PROVIDER_CALLBACK")),
        "{:?}",
        unknown_kind.notes
    );
}

#[test]
fn success_without_a_message_id_is_delivered_but_flagged() {
    let history = History::new().start(1, 1, "SLACK", "a").push(
        "CHANNEL_ATTEMPT_RESULT",
        json!({"cycle": 1, "attempt": 1, "channel": "SLACK", "lease_token": "a", "success": true,
               "message_id": null, "metadata": {"provider_outcome": "ACCEPTED"}}),
    );
    let verdict = triage_events(&row(&["SLACK"], 1), &history.events);
    assert_eq!(verdict.branch, Branch::Resolve);
    assert_eq!(verdict.channels[0].state, Delivered);
    assert!(
        verdict
            .notes
            .iter()
            .any(|n| n.contains("event 2") && n.contains("without a message_id"))
    );
}

#[test]
fn the_verification_is_part_of_the_evidence() {
    let settled = verdict_of("VERIFIED NOT_DELIVERED settles the attempts it lists as refused");
    assert_eq!(settled.channels[0].evidence, [1, 2, 4]);
    assert!(
        settled.channels[0]
            .cause
            .as_deref()
            .unwrap_or_default()
            .contains("event 4")
    );
    let delivered = verdict_of("VERIFIED DELIVERED makes the channel DELIVERED");
    assert!(delivered.channels[0].evidence.contains(&4));
    let unreadable = verdict_of("an unreadable VERIFIED counts as no verification");
    assert!(
        unreadable
            .notes
            .iter()
            .any(|n| n.contains("event 4") && n.contains("no verification"))
    );
}

#[test]
fn a_verify_entry_only_suggests_commands_that_can_succeed() {
    // Every channel delivered, yet VERIFY because one event cannot be read.
    let history = History::new()
        .start(1, 1, "EMAIL", "a")
        .result(1, 1, "EMAIL", "a", "ACCEPTED")
        .push("CHANNEL_ATTEMPT_RESULT", Value::String("{oops".into()));
    let verdict = triage_events(&row(&["EMAIL"], 1), &history.events);
    assert_eq!(verdict.branch, Branch::Verify);
    for (_, command) in after_verification(&verdict) {
        let command = command.to_string();
        assert!(
            !command.contains("--channels  ") && !command.ends_with("--channels"),
            "{command}"
        );
        assert!(!command.contains("--channels --"), "{command}");
    }
    // No provider holds the doubt: the store does, so nothing but `inspect` is offered.
    assert_eq!(verdict.next_step.to_string(), "unsctl inspect n-1");
    assert!(after_verification(&verdict).is_empty());
}

#[test]
fn if_it_arrived_never_replays_whatever_the_other_channels_are() {
    // EMAIL unknown beside SLACK in every state, with and without an unreadable event.
    let slack_states: [(&str, Option<&str>); 3] = [
        ("delivered", Some("ACCEPTED")),
        ("failed", Some("REJECTED")),
        ("not attempted", None),
    ];
    for (slack, outcome) in slack_states {
        for unreadable in [false, true] {
            let mut history = History::new().start(1, 1, "EMAIL", "a");
            history = history.result(1, 1, "EMAIL", "a", "UNKNOWN");
            if let Some(outcome) = outcome {
                history = history
                    .start(1, 1, "SLACK", "a")
                    .result(1, 1, "SLACK", "a", outcome);
            }
            if unreadable {
                history = history.push("CHANNEL_ATTEMPT_RESULT", Value::String("{oops".into()));
            }
            let verdict = triage_events(&row(&["EMAIL", "SLACK"], 1), &history.events);
            let what = format!("SLACK {slack}, unreadable {unreadable}");
            assert_eq!(verdict.branch, Branch::Verify, "{what}");
            let steps = after_verification(&verdict);
            for (label, command) in &steps {
                let command = command.to_string();
                if *label == "if it arrived" {
                    assert!(
                        command.starts_with("unsctl dlq resolve"),
                        "{what}: {command}"
                    );
                    assert_eq!(slack, "delivered", "{what}: resolve only with nothing owed");
                } else {
                    assert!(
                        command.contains("--channels EMAIL")
                            && command.contains("--verified-not-delivered"),
                        "{what}: {command}"
                    );
                }
            }
            assert!(
                steps.iter().any(|(label, _)| *label == "if it did not"),
                "{what}"
            );
        }
    }
}

/// A row whose channels column the store could not read.
fn garbled_channels() -> Notification {
    let mut garbled = row(&[], 1);
    garbled
        .unreadable
        .push("channels: \"x\" is not a JSON array of channel names".into());
    garbled
}

#[test]
fn an_unreadable_channels_column_offers_nothing_after_a_check_even_with_a_channel_in_doubt() {
    // The doubt is at a provider (EMAIL UNKNOWN), but which channels the entry owes
    // cannot be read: the guardrails refuse every unforced action on such a row, so
    // neither "if it arrived" nor "if it did not" may be offered.
    let garbled = garbled_channels();
    let history = History::new()
        .start(1, 1, "EMAIL", "a")
        .result(1, 1, "EMAIL", "a", "UNKNOWN");
    let verdict = triage_events(&garbled, &history.events);
    assert_eq!(verdict.branch, Branch::Verify);
    assert!(verdict.channels_unreadable, "{verdict:#?}");
    assert!(!verdict.in_state(ChannelState::Uncertain).is_empty());
    assert!(after_verification(&verdict).is_empty());
}

#[test]
fn a_row_that_cannot_be_read_is_verify_with_the_column_named() {
    let garbled = garbled_channels();
    let history = History::new()
        .start(1, 1, "EMAIL", "a")
        .result(1, 1, "EMAIL", "a", "ACCEPTED");
    let verdict = triage_events(&garbled, &history.events);
    assert_eq!(verdict.branch, Branch::Verify, "{verdict:#?}");
    assert!(
        verdict.notes.iter().any(|n| n.contains("channels")),
        "{:?}",
        verdict.notes
    );
    // No provider can answer for a column, and the guardrails refuse every unforced
    // action on it: the next step shows the row, and nothing else is suggested.
    assert_eq!(
        verdict.next_step.to_string(),
        format!("unsctl inspect {}", verdict.id)
    );
    assert!(after_verification(&verdict).is_empty());

    let unknown = row(&["EMAIL", "SMS"], 1);
    let verdict = triage_events(&unknown, &history.events);
    assert_eq!(verdict.branch, Branch::Verify);
    assert!(verdict.notes.iter().any(|n| n.contains("SMS")));

    let mut event = history.events.clone();
    event[1]
        .unreadable
        .push("at: text \"noon\" is not a number".into());
    let verdict = triage_events(&row(&["EMAIL"], 1), &event);
    assert_eq!(verdict.branch, Branch::Verify);
    assert!(
        verdict
            .notes
            .iter()
            .any(|n| n.contains("event 2") && n.contains("at:"))
    );
}

#[test]
fn summary_counts_every_branch() {
    let verdicts: Vec<Verdict> = CASES
        .iter()
        .map(|c| triage_events(&row(c.channels, c.cycle), &(c.history)().events))
        .collect();
    let counts = summary(&verdicts);
    assert_eq!(counts.len(), 3);
    assert_eq!(counts.values().sum::<usize>(), CASES.len());
    let empty = summary(&[]);
    assert_eq!(empty.get(&Branch::Verify), Some(&0));
}

#[test]
fn a_cause_of_megabytes_is_cut_in_the_verdict_and_kept_whole_in_its_event() {
    let huge = "é".repeat(3_000_000);
    let history = History::new().start(1, 1, "SLACK", "a").push(
        "CHANNEL_ATTEMPT_RESULT",
        json!({"cycle": 1, "attempt": 1, "cycle_attempt": 1, "channel": "SLACK",
               "lease_token": "a", "success": false, "error": huge,
               "metadata": {"provider_outcome": "REJECTED"}}),
    );
    let verdict = triage_events(&row(&["SLACK"], 1), &history.events);
    assert_eq!(verdict.branch, Branch::Replay);
    let cause = verdict.channels[0].cause.as_deref().unwrap_or_default();
    assert!(cause.len() < 5_000, "{} bytes", cause.len());
    assert!(cause.starts_with("éé") && cause.contains("whole text is in the event"));
    assert!(history.events[1].payload.get().len() > 6_000_000);
}

#[test]
fn a_rejection_is_permanent_by_its_code_and_a_code_of_the_wrong_type_is_none() {
    let refused = |metadata: Value, error: &str| {
        let history = History::new().start(1, 1, "EMAIL", "a").push(
            "CHANNEL_ATTEMPT_RESULT",
            json!({"cycle": 1, "attempt": 1, "cycle_attempt": 1, "channel": "EMAIL",
                   "lease_token": "a", "success": false, "message_id": null,
                   "error": error, "metadata": metadata}),
        );
        let verdict = triage_events(&row(&["EMAIL"], 1), &history.dead().events);
        assert!(verdict.notes.is_empty(), "{:?}", verdict.notes);
        assert_eq!(verdict.channels[0].state, Failed);
        verdict.channels[0].permanent
    };
    let meta = |key: &str, value: Value| json!({"provider_outcome": "REJECTED", key: value});
    assert!(refused(
        meta("smtp_code", json!(550)),
        "message: 550 User unknown"
    ));
    assert!(!refused(
        meta("smtp_code", json!(451)),
        "message: 451 try later"
    ));
    assert!(refused(meta("http_status", json!(410)), "HTTP 410: gone"));
    assert!(!refused(
        meta("http_status", json!(429)),
        "HTTP 429: invalid_rate"
    ));
    // A code that is not a number is no code: the text decides, and the event is read.
    assert!(!refused(
        meta("smtp_code", json!("550")),
        "message: 550 User unknown"
    ));
    assert!(refused(
        meta("smtp_code", json!({"x": [1]})),
        "invalid recipient"
    ));
    assert!(!refused(
        json!({"provider_outcome": "REJECTED"}),
        "connect failed"
    ));
}
