//! Triage over random histories: arbitrary kinds, payloads and orderings, some of them
//! unreadable. It must never panic, never answer RESOLVE or REPLAY when it could not
//! read an event that bears on the entry, and never say RESOLVE without an acceptance.

use proptest::prelude::*;
use serde_json::{Value, json};
use unsctl::model::{Event, Notification};
use unsctl::triage::{Branch, ChannelState, triage_events};

const CHANNELS: [&str; 3] = ["EMAIL", "SLACK", "PAGERDUTY"];
const KINDS: [&str; 11] = [
    "SUBMITTED",
    "ATTEMPT_STARTED",
    "CHANNEL_ATTEMPT_STARTED",
    "CHANNEL_ATTEMPT_RESULT",
    "LEASE_LOST",
    "RETRY_SCHEDULED",
    "DELIVERED",
    "DEAD_LETTERED",
    "DLQ_RESOLVED",
    "REPLAYED",
    "VERIFIED",
];

/// One generated event, and whether it is one triage cannot read.
#[derive(Debug, Clone)]
struct Drawn {
    kind: String,
    payload: Value,
    unreadable_column: bool,
    bad: bool,
}

fn readable_payload() -> impl Strategy<Value = Value> {
    (
        prop::sample::select(CHANNELS.to_vec()),
        1i64..4,
        1i64..5,
        prop::sample::select(vec!["a", "b", "c"]),
        prop::option::of(any::<bool>()),
        prop::option::of(prop::sample::select(vec![
            "ACCEPTED", "REJECTED", "UNKNOWN",
        ])),
        prop::collection::vec(prop::sample::select(CHANNELS.to_vec()), 0..3),
        prop::option::of(prop::sample::select(vec!["checked the relay log", ""])),
        prop::sample::select(vec!["DELIVERED", "NOT_DELIVERED"]),
        prop::collection::vec(1i64..5, 0..3),
    )
        .prop_map(
            |(
                channel,
                cycle,
                attempt,
                token,
                success,
                outcome,
                channels,
                attestation,
                verified,
                attempts,
            )| {
                let mut payload = json!({
                    "channel": channel, "cycle": cycle, "attempt": attempt, "lease_token": token,
                    "channels": channels, "outcome": verified, "attempts": attempts,
                });
                if let Some(success) = success {
                    payload["success"] = json!(success);
                }
                if let Some(outcome) = outcome {
                    payload["metadata"] = json!({"provider_outcome": outcome});
                }
                if let Some(attestation) = attestation {
                    payload["attestation"] = json!(attestation);
                }
                payload
            },
        )
}

fn unreadable_payload() -> impl Strategy<Value = Value> {
    prop_oneof![
        any::<String>().prop_map(Value::String),
        any::<i64>().prop_map(|n| json!(n)),
        Just(Value::Null),
        prop::collection::vec(any::<bool>(), 0..3).prop_map(|v| json!(v)),
        (any::<String>(), prop::sample::select(CHANNELS.to_vec()))
            .prop_map(|(cycle, channel)| json!({"channel": channel, "cycle": cycle})),
        prop::sample::select(CHANNELS.to_vec())
            .prop_map(|channel| json!({"channel": channel, "cycle": 1, "success": "yes"})),
        Just(json!({"channel": 7, "cycle": 1})),
    ]
}

fn drawn() -> impl Strategy<Value = Drawn> {
    prop_oneof![
        6 => (prop::sample::select(KINDS.to_vec()), readable_payload()).prop_map(|(kind, payload)| Drawn {
            kind: kind.into(), payload, unreadable_column: false, bad: false,
        }),
        1 => (prop::sample::select(KINDS.to_vec()), unreadable_payload()).prop_map(|(kind, payload)| Drawn {
            kind: kind.into(), payload, unreadable_column: false, bad: true,
        }),
        1 => (prop::sample::select(KINDS.to_vec()), readable_payload()).prop_map(|(kind, payload)| Drawn {
            kind: kind.into(), payload, unreadable_column: true, bad: true,
        }),
        1 => ("[A-Z_]{1,20}", readable_payload()).prop_map(|(kind, payload)| {
            let bad = !KINDS.contains(&kind.as_str());
            Drawn { kind, payload, unreadable_column: false, bad }
        }),
    ]
}

fn row(channels: &[&str], cycle: i64) -> Notification {
    Notification {
        id: "n-prop".into(),
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
        error_message: None,
        created_at: 0.0,
        updated_at: 0.0,
        unreadable: Vec::new(),
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn triage_never_acts_on_what_it_cannot_read(
        channels in prop::sample::subsequence(CHANNELS.to_vec(), 1..=3),
        cycle in 1i64..4,
        drawn in prop::collection::vec(drawn(), 0..25),
        shuffle in any::<u64>(),
    ) {
        let mut drawn = drawn;
        // Any ordering: ids follow the shuffled order, as a store's would.
        let len = drawn.len().max(1);
        drawn.rotate_left((shuffle as usize) % len);
        let events: Vec<Event> = drawn
            .iter()
            .enumerate()
            .map(|(n, d)| Event {
                id: n as i64 + 1,
                at: 1000.0 + n as f64,
                kind: d.kind.as_str().into(),
                payload: unsctl::model::payload_from_value(&d.payload),
                unreadable: if d.unreadable_column { vec!["payload: a BLOB of 3 bytes, not text".into()] } else { Vec::new() },
            })
            .collect();
        let verdict = triage_events(&row(&channels, cycle), &events);

        // An unreadable event bears on the entry, unless it is a verification, which
        // then counts as none (DESIGN section 7).
        let unreadable = drawn.iter().any(|d| d.bad && d.kind != "VERIFIED");
        if unreadable {
            prop_assert_eq!(verdict.branch, Branch::Verify, "{:#?}", verdict);
            prop_assert!(!verdict.notes.is_empty());
        }
        // RESOLVE only on acceptances: every channel has a readable success, or a
        // readable VERIFIED DELIVERED.
        if verdict.branch == Branch::Resolve {
            for channel in &verdict.channels {
                let proven = drawn.iter().filter(|d| !d.bad).any(|d| {
                    let p = &d.payload;
                    p["channel"] == channel.channel.as_str()
                        && ((d.kind == "CHANNEL_ATTEMPT_RESULT" && p["success"] == true)
                            || (d.kind == "VERIFIED" && p["outcome"] == "DELIVERED"))
                });
                prop_assert!(proven, "RESOLVE without an acceptance of {}: {:#?}", channel.channel, verdict);
            }
        }
        // REPLAY never covers a channel with an acceptance, nor one left in doubt.
        if verdict.branch == Branch::Replay {
            for channel in &verdict.channels {
                prop_assert!(channel.state != ChannelState::Uncertain);
                if channel.state != ChannelState::Delivered {
                    let accepted = drawn.iter().any(|d| {
                        d.kind == "CHANNEL_ATTEMPT_RESULT"
                            && d.payload["channel"] == channel.channel.as_str()
                            && d.payload["success"] == true
                    });
                    prop_assert!(!accepted, "REPLAY of an accepted {}: {:#?}", channel.channel, verdict);
                }
            }
        }
        // Every verdict names its next step.
        prop_assert!(!verdict.next_step.to_string().is_empty());
    }
}
