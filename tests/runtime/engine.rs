//! Engine transitions under an injected clock: the exact events of DESIGN section 3.

use rusqlite::Connection;
use serde_json::{Value, json};
use std::collections::BTreeSet;
use unsctl::db::Db;
use unsctl::model::{Channel, ChannelSet};
use unsctl::runtime::engine::{
    self, Backoff, ClaimOutcome, Decision, DeliveryResult, Ended, Fence, Lease, NewNotification,
    RECOVERY_EXHAUSTED,
};
use unsctl::runtime::schema::{self, OpenMode};

const LEASE: f64 = 60.0;
const BACKOFF: Backoff = Backoff {
    base_seconds: 5.0,
    max_seconds: 300.0,
};

struct Store {
    _dir: tempfile::TempDir,
    conn: Connection,
}

fn store() -> Store {
    let dir = tempfile::tempdir().expect("temp dir");
    let conn = schema::open(&dir.path().join("uns.db"), OpenMode::Create).expect("create store");
    Store { _dir: dir, conn }
}

fn submit(conn: &Connection, channels: &[Channel], max_attempts: i64) -> String {
    engine::submit(
        &Db::Sqlite(conn),
        1000.0,
        &NewNotification {
            channels: channels.iter().copied().collect(),
            payload: json!({"recipient": "ops@example.com", "subject": "s", "body": "b"}),
            idempotency_key: None,
            max_attempts,
        },
    )
    .expect("submit")
    .id
}

fn claim(conn: &Connection, now: f64, worker: &str) -> Lease {
    match engine::claim(&Db::Sqlite(conn), now, worker, LEASE).expect("claim") {
        ClaimOutcome::Claimed(lease) => lease,
        other => panic!("expected a claim at {now}, got {other:?}"),
    }
}

fn events(conn: &Connection, id: &str) -> Vec<(String, Value)> {
    let mut stmt = conn
        .prepare("SELECT kind, payload FROM uns_events WHERE notification_id = ?1 ORDER BY id")
        .expect("prepare");
    let rows = stmt
        .query_map([id], |row| {
            let payload: String = row.get(1)?;
            Ok((
                row.get(0)?,
                serde_json::from_str(&payload).unwrap_or(Value::Null),
            ))
        })
        .expect("query");
    rows.map(|row| row.expect("row")).collect()
}

fn kinds(conn: &Connection, id: &str) -> Vec<String> {
    events(conn, id).into_iter().map(|(kind, _)| kind).collect()
}

fn keys(payload: &Value) -> BTreeSet<String> {
    payload
        .as_object()
        .map(|map| map.keys().cloned().collect())
        .unwrap_or_default()
}

fn set(names: &[&str]) -> BTreeSet<String> {
    names.iter().map(|name| name.to_string()).collect()
}

fn row(
    conn: &Connection,
    id: &str,
) -> (String, bool, i64, i64, i64, Option<String>, Option<String>) {
    conn.query_row(
        "SELECT status, dead_letter, attempts, cycle, cycle_attempts, lease_token, error_message
         FROM uns_notifications WHERE id = ?1",
        [id],
        |row| {
            Ok((
                row.get(0)?,
                row.get(1)?,
                row.get(2)?,
                row.get(3)?,
                row.get(4)?,
                row.get(5)?,
                row.get(6)?,
            ))
        },
    )
    .expect("row")
}

fn started(conn: &Connection, now: f64, lease: &Lease, channel: Channel) {
    let fence = engine::start_channel(&Db::Sqlite(conn), now, lease, channel, &Default::default())
        .expect("start");
    assert!(matches!(fence, Fence::Held { .. }), "fence lost at {now}");
}

fn channels(list: &[Channel]) -> ChannelSet {
    list.iter().copied().collect()
}

#[test]
fn first_attempt_delivers_with_the_documented_payload_keys() {
    let s = store();
    let id = submit(&s.conn, &[Channel::Email], 3);
    let lease = claim(&s.conn, 1001.0, "w1");
    started(&s.conn, 1001.5, &lease, Channel::Email);
    let result = DeliveryResult::accepted(Some("<m@uns.local>".into())).with("smtp_code", 250);
    engine::record_result(
        &Db::Sqlite(&s.conn),
        1002.0,
        &lease,
        Channel::Email,
        &result,
    )
    .expect("result");
    let settled = engine::settle(
        &Db::Sqlite(&s.conn),
        1002.1,
        &lease,
        &[(Channel::Email, result)],
        &BACKOFF,
    )
    .expect("settle");
    assert_eq!(settled, Ended::Decided(Decision::Delivered));

    let history = events(&s.conn, &id);
    let observed: Vec<&str> = history.iter().map(|(kind, _)| kind.as_str()).collect();
    assert_eq!(
        observed,
        [
            "SUBMITTED",
            "ATTEMPT_STARTED",
            "CHANNEL_ATTEMPT_STARTED",
            "CHANNEL_ATTEMPT_RESULT",
            "DELIVERED"
        ]
    );
    let lease_keys = ["attempt", "cycle", "cycle_attempt", "lease_token"];
    let with = |extra: &[&str]| {
        let mut all = set(&lease_keys);
        all.extend(set(extra));
        all
    };
    assert_eq!(
        keys(&history[0].1),
        set(&[
            "attempt",
            "cycle",
            "cycle_attempt",
            "channels",
            "idempotency_key"
        ])
    );
    assert_eq!(
        keys(&history[1].1),
        with(&["worker_id", "reclaimed", "lease_until"])
    );
    assert_eq!(history[1].1["worker_id"], "w1");
    assert_eq!(history[1].1["reclaimed"], false);
    assert_eq!(
        keys(&history[2].1),
        with(&["channel", "provider_effect_may_have_occurred"])
    );
    assert_eq!(history[2].1["provider_effect_may_have_occurred"], true);
    assert_eq!(
        keys(&history[3].1),
        with(&["channel", "success", "message_id", "error", "metadata"])
    );
    assert_eq!(history[3].1["metadata"]["provider_outcome"], "ACCEPTED");
    assert_eq!(history[3].1["metadata"]["smtp_code"], 250);
    assert_eq!(keys(&history[4].1), with(&[]));
    for (_, payload) in &history[1..] {
        assert_eq!(payload["lease_token"], json!(lease.token));
    }
    let (status, dead_letter, attempts, cycle, cycle_attempts, token, _) = row(&s.conn, &id);
    assert_eq!(
        (
            status.as_str(),
            dead_letter,
            attempts,
            cycle,
            cycle_attempts
        ),
        ("DELIVERED", false, 1, 1, 1)
    );
    assert_eq!(token, None);
}

#[test]
fn late_success_after_the_lease_expired_is_recorded_then_lease_lost() {
    let s = store();
    let id = submit(&s.conn, &[Channel::Email], 3);
    let old = claim(&s.conn, 1000.0, "w1");
    started(&s.conn, 1000.1, &old, Channel::Email);
    // The provider is slow; the lease runs out and another worker reclaims the row.
    let replacement = claim(&s.conn, 1060.2, "w2");
    assert!(replacement.reclaimed);
    let late = DeliveryResult::accepted(Some("<late@uns.local>".into()));
    engine::record_result(&Db::Sqlite(&s.conn), 1060.5, &old, Channel::Email, &late)
        .expect("late result");
    let settled = engine::settle(
        &Db::Sqlite(&s.conn),
        1060.6,
        &old,
        &[(Channel::Email, late)],
        &BACKOFF,
    )
    .expect("settle");
    assert_eq!(settled, Ended::LeaseLost);

    let history = events(&s.conn, &id);
    let tail: Vec<&str> = history[history.len() - 2..]
        .iter()
        .map(|(k, _)| k.as_str())
        .collect();
    assert_eq!(tail, ["CHANNEL_ATTEMPT_RESULT", "LEASE_LOST"]);
    let (_, lost) = &history[history.len() - 1];
    assert_eq!(lost["lease_token"], json!(old.token));
    assert_eq!(lost["provider_effect_may_have_occurred"], true);
    assert_eq!(
        keys(lost),
        set(&[
            "attempt",
            "cycle",
            "cycle_attempt",
            "lease_token",
            "provider_effect_may_have_occurred"
        ])
    );
    // The late result never touched the aggregate row: the replacement still owns it.
    let (status, dead_letter, attempts, _, _, token, _) = row(&s.conn, &id);
    assert_eq!(
        (status.as_str(), dead_letter, attempts),
        ("LEASED", false, 2)
    );
    assert_eq!(token, Some(replacement.token.clone()));
}

#[test]
fn lease_lost_before_any_channel_started_says_no_effect() {
    let s = store();
    let id = submit(&s.conn, &[Channel::Slack], 3);
    let lease = claim(&s.conn, 1000.0, "w1");
    let fence = engine::start_channel(
        &Db::Sqlite(&s.conn),
        1061.0,
        &lease,
        Channel::Slack,
        &Default::default(),
    )
    .expect("fence");
    assert_eq!(fence, Fence::Lost);
    let history = events(&s.conn, &id);
    let (kind, payload) = &history[history.len() - 1];
    assert_eq!(kind, "LEASE_LOST");
    assert_eq!(payload["provider_effect_may_have_occurred"], false);
}

#[test]
fn an_expired_lease_is_reclaimed_and_counts_against_the_budget() {
    let s = store();
    let id = submit(&s.conn, &[Channel::Email], 3);
    let first = claim(&s.conn, 1000.0, "w1");
    assert_eq!(
        engine::claim(&Db::Sqlite(&s.conn), 1059.9, "w2", LEASE).expect("claim"),
        ClaimOutcome::Idle { declined: 0 }
    );
    let second = claim(&s.conn, 1060.0, "w2");
    assert!(second.reclaimed);
    assert_eq!((second.attempt, second.cycle_attempt), (2, 2));
    assert_ne!(second.token, first.token);
    let history = events(&s.conn, &id);
    let (kind, payload) = &history[history.len() - 1];
    assert_eq!(kind, "ATTEMPT_STARTED");
    assert_eq!(payload["reclaimed"], true);
    assert_eq!(payload["worker_id"], "w2");
    assert_eq!(payload["previous_lease_token"], json!(first.token));
    assert!(!engine::lease_held(&Db::Sqlite(&s.conn), 1060.0, &first).expect("fence"));
    assert!(engine::lease_held(&Db::Sqlite(&s.conn), 1060.0, &second).expect("fence"));
}

#[test]
fn unknown_outcomes_under_lost_leases_exhaust_the_budget_with_the_exact_message() {
    let s = store();
    let id = submit(&s.conn, &[Channel::Email], 2);
    let mut now = 1000.0;
    for _ in 0..2 {
        let lease = claim(&s.conn, now, "w1");
        started(&s.conn, now + 0.1, &lease, Channel::Email);
        let unknown = DeliveryResult::unknown("no reply after the message data was sent")
            .with("stage", "message");
        engine::record_result(
            &Db::Sqlite(&s.conn),
            now + 61.0,
            &lease,
            Channel::Email,
            &unknown,
        )
        .expect("result");
        let settled = engine::settle(
            &Db::Sqlite(&s.conn),
            now + 61.0,
            &lease,
            &[(Channel::Email, unknown)],
            &BACKOFF,
        )
        .expect("settle");
        assert_eq!(settled, Ended::LeaseLost);
        now += 61.5;
    }
    let outcome = engine::claim(&Db::Sqlite(&s.conn), now, "w2", LEASE).expect("claim");
    assert_eq!(
        outcome,
        ClaimOutcome::RecoveryExhausted {
            notification_id: id.clone()
        }
    );
    assert_eq!(
        kinds(&s.conn, &id),
        [
            "SUBMITTED",
            "ATTEMPT_STARTED",
            "CHANNEL_ATTEMPT_STARTED",
            "CHANNEL_ATTEMPT_RESULT",
            "LEASE_LOST",
            "ATTEMPT_STARTED",
            "CHANNEL_ATTEMPT_STARTED",
            "CHANNEL_ATTEMPT_RESULT",
            "LEASE_LOST",
            "DEAD_LETTERED",
        ]
    );
    let history = events(&s.conn, &id);
    assert_eq!(history[9].1["error_message"], RECOVERY_EXHAUSTED);
    let (status, dead_letter, attempts, _, _, token, error) = row(&s.conn, &id);
    assert_eq!((status.as_str(), dead_letter, attempts), ("DEAD", true, 2));
    assert_eq!(token, None);
    assert_eq!(
        error.as_deref(),
        Some("Provider outcome unknown: recovery exhausted the attempt budget")
    );
}

#[test]
fn an_unknown_outcome_under_a_held_lease_is_dead_lettered_at_once() {
    let s = store();
    let id = submit(&s.conn, &[Channel::Email], 5);
    let lease = claim(&s.conn, 1000.0, "w1");
    started(&s.conn, 1000.1, &lease, Channel::Email);
    let unknown = DeliveryResult::unknown("no reply after the message data was sent: timed out");
    engine::record_result(
        &Db::Sqlite(&s.conn),
        1030.0,
        &lease,
        Channel::Email,
        &unknown,
    )
    .expect("result");
    let settled = engine::settle(
        &Db::Sqlite(&s.conn),
        1030.0,
        &lease,
        &[(Channel::Email, unknown)],
        &BACKOFF,
    )
    .expect("settle");
    let expected =
        "Provider outcome unknown: EMAIL no reply after the message data was sent: timed out";
    assert_eq!(
        settled,
        Ended::Decided(Decision::DeadLettered {
            reason: unsctl::runtime::engine::DeadReason::UnknownOutcome,
            error_message: expected.into()
        })
    );
    let (status, dead_letter, attempts, ..) = row(&s.conn, &id);
    assert_eq!((status.as_str(), dead_letter, attempts), ("DEAD", true, 1));
    let history = events(&s.conn, &id);
    assert_eq!(
        history
            .last()
            .map(|(k, p)| (k.as_str(), p["error_message"].clone())),
        Some(("DEAD_LETTERED", json!(expected)))
    );
}

#[test]
fn a_rejection_is_retried_with_backoff_then_dead_lettered() {
    let s = store();
    let id = submit(&s.conn, &[Channel::Slack], 2);
    let lease = claim(&s.conn, 1000.0, "w1");
    started(&s.conn, 1000.0, &lease, Channel::Slack);
    let rejected = DeliveryResult::rejected("HTTP 503: busy", true).with("http_status", 503);
    engine::record_result(
        &Db::Sqlite(&s.conn),
        1000.2,
        &lease,
        Channel::Slack,
        &rejected,
    )
    .expect("result");
    let settled = engine::settle(
        &Db::Sqlite(&s.conn),
        1000.2,
        &lease,
        &[(Channel::Slack, rejected.clone())],
        &BACKOFF,
    )
    .expect("settle");
    assert_eq!(
        settled,
        Ended::Decided(Decision::RetryScheduled {
            next_attempt_at: 1005.2,
            channels: [Channel::Slack].into_iter().collect()
        })
    );
    let history = events(&s.conn, &id);
    let (kind, payload) = &history[history.len() - 1];
    assert_eq!(kind, "RETRY_SCHEDULED");
    assert_eq!(payload["next_attempt_at"], 1005.2);
    assert_eq!(payload["channels"], json!(["SLACK"]));

    assert_eq!(
        engine::claim(&Db::Sqlite(&s.conn), 1005.1, "w1", LEASE).expect("claim"),
        ClaimOutcome::Idle { declined: 0 }
    );
    let retry = claim(&s.conn, 1005.2, "w1");
    assert!(!retry.reclaimed);
    assert_eq!(retry.cycle_attempt, 2);
    started(&s.conn, 1005.3, &retry, Channel::Slack);
    engine::record_result(
        &Db::Sqlite(&s.conn),
        1005.4,
        &retry,
        Channel::Slack,
        &rejected,
    )
    .expect("result");
    let settled = engine::settle(
        &Db::Sqlite(&s.conn),
        1005.4,
        &retry,
        &[(Channel::Slack, rejected)],
        &BACKOFF,
    )
    .expect("settle");
    assert_eq!(
        settled,
        Ended::Decided(Decision::DeadLettered {
            reason: unsctl::runtime::engine::DeadReason::BudgetExhausted,
            error_message: "Attempt budget exhausted (2 of 2): SLACK HTTP 503: busy".into()
        })
    );
    assert_eq!(
        kinds(&s.conn, &id),
        [
            "SUBMITTED",
            "ATTEMPT_STARTED",
            "CHANNEL_ATTEMPT_STARTED",
            "CHANNEL_ATTEMPT_RESULT",
            "RETRY_SCHEDULED",
            "ATTEMPT_STARTED",
            "CHANNEL_ATTEMPT_STARTED",
            "CHANNEL_ATTEMPT_RESULT",
            "DEAD_LETTERED",
        ]
    );
}

#[test]
fn a_permanent_rejection_is_not_retried() {
    let s = store();
    let id = submit(&s.conn, &[Channel::Email], 5);
    let lease = claim(&s.conn, 1000.0, "w1");
    started(&s.conn, 1000.0, &lease, Channel::Email);
    let rejected = DeliveryResult::rejected("rcpt: 550 no such user", false).with("smtp_code", 550);
    engine::record_result(
        &Db::Sqlite(&s.conn),
        1000.1,
        &lease,
        Channel::Email,
        &rejected,
    )
    .expect("result");
    let settled = engine::settle(
        &Db::Sqlite(&s.conn),
        1000.1,
        &lease,
        &[(Channel::Email, rejected)],
        &BACKOFF,
    )
    .expect("settle");
    assert!(matches!(
        settled,
        Ended::Decided(Decision::DeadLettered { .. })
    ));
    assert_eq!(row(&s.conn, &id).0, "DEAD");
}

#[test]
fn a_channel_accepted_in_this_cycle_is_not_sent_again() {
    let s = store();
    let id = submit(&s.conn, &[Channel::Email, Channel::Slack], 3);
    let lease = claim(&s.conn, 1000.0, "w1");
    assert_eq!(lease.owed, channels(&[Channel::Email, Channel::Slack]));
    let ok = DeliveryResult::accepted(Some("<a@uns.local>".into()));
    let no = DeliveryResult::rejected("HTTP 500", true);
    for (channel, result) in [(Channel::Email, &ok), (Channel::Slack, &no)] {
        started(&s.conn, 1000.1, &lease, channel);
        engine::record_result(&Db::Sqlite(&s.conn), 1000.2, &lease, channel, result)
            .expect("result");
    }
    let results = [(Channel::Email, ok), (Channel::Slack, no)];
    let settled =
        engine::settle(&Db::Sqlite(&s.conn), 1000.3, &lease, &results, &BACKOFF).expect("settle");
    assert!(
        matches!(settled, Ended::Decided(Decision::RetryScheduled { channels: ref owed, .. }) if owed == &channels(&[Channel::Slack]))
    );
    let retry = claim(&s.conn, 1006.0, "w1");
    assert_eq!(retry.owed, channels(&[Channel::Slack]));

    assert_eq!(retry.notification_id, id);
}

#[test]
fn a_late_acceptance_is_honoured_by_the_reclaim() {
    let s = store();
    let id2 = submit(&s.conn, &[Channel::Email], 3);
    let lease = claim(&s.conn, 2000.0, "w1");
    assert_eq!(lease.notification_id, id2);
    started(&s.conn, 2000.1, &lease, Channel::Email);
    engine::record_result(
        &Db::Sqlite(&s.conn),
        2030.0,
        &lease,
        Channel::Email,
        &DeliveryResult::accepted(None),
    )
    .expect("result");
    let reclaim = claim(&s.conn, 2061.0, "w2");
    assert_eq!(reclaim.notification_id, id2);
    assert!(reclaim.owed.is_empty());
    assert_eq!(
        engine::settle(&Db::Sqlite(&s.conn), 2061.1, &reclaim, &[], &BACKOFF).expect("settle"),
        Ended::Decided(Decision::Delivered)
    );
}

#[test]
fn idempotent_submit_returns_the_first_row() {
    let s = store();
    let new = NewNotification {
        channels: [Channel::Slack, Channel::Email, Channel::Slack]
            .into_iter()
            .collect(),
        payload: json!({}),
        idempotency_key: Some("order-42".into()),
        max_attempts: 3,
    };
    let first = engine::submit(&Db::Sqlite(&s.conn), 1.0, &new).expect("submit");
    let again = engine::submit(&Db::Sqlite(&s.conn), 2.0, &new).expect("submit");
    assert!(first.created && !again.created);
    assert_eq!(first.id, again.id);
    let channels: String = s
        .conn
        .query_row(
            "SELECT channels FROM uns_notifications WHERE id = ?1",
            [&first.id],
            |row| row.get(0),
        )
        .expect("channels");
    assert_eq!(channels, r#"["EMAIL","SLACK"]"#);
}

fn insert_event(conn: &Connection, id: &str, at: f64, kind: &str, payload: &str) {
    conn.execute(
        "INSERT INTO uns_events (notification_id, at, kind, payload) VALUES (?1, ?2, ?3, ?4)",
        rusqlite::params![id, at, kind, payload],
    )
    .expect("insert");
}

fn undeliverable(conn: &Connection, now: f64) -> String {
    match engine::claim(&Db::Sqlite(conn), now, "w1", LEASE).expect("claim") {
        ClaimOutcome::Undeliverable { error_message, .. } => error_message,
        other => panic!("expected the row to be dead-lettered as undeliverable, got {other:?}"),
    }
}

#[test]
fn a_row_whose_channels_cannot_be_read_is_dead_lettered_never_delivered() {
    for (stored, named) in [
        ("'SLACK and EMAIL'", "not a JSON array"),
        ("'[]'", "empty"),
        ("'[\"EMAIL\", \"SMS\"]'", "SMS"),
        ("X'00ff'", "BLOB"),
    ] {
        let s = store();
        let id = submit(&s.conn, &[Channel::Slack], 3);
        s.conn
            .execute(
                &format!("UPDATE uns_notifications SET channels = {stored} WHERE id = ?1"),
                [&id],
            )
            .expect("garble");
        let error = undeliverable(&s.conn, 1001.0);
        assert!(
            error.contains("channels") && error.contains(named),
            "{stored}: {error}"
        );
        let (status, dead_letter, .., error_message) = row(&s.conn, &id);
        assert_eq!((status.as_str(), dead_letter), ("DEAD", true), "{stored}");
        assert_eq!(error_message.as_deref(), Some(error.as_str()));
        assert!(
            !kinds(&s.conn, &id)
                .iter()
                .any(|k| k == "CHANNEL_ATTEMPT_STARTED" || k == "DELIVERED"),
            "{stored}: nothing may be sent or settled"
        );
    }
}

#[test]
fn a_replay_whose_channels_cannot_be_read_is_never_widened() {
    for (payload, named) in [
        (r#"{"cycle": 2, "channels": "SLACK"}"#, "REPLAYED"),
        (r#"{"cycle": 2, "channels": ["SMS"]}"#, "SMS"),
        (
            r#"{"cycle": 2, "channels": ["PAGERDUTY"]}"#,
            "does not have",
        ),
        ("not json", "cannot be read"),
    ] {
        let s = store();
        let id = submit(&s.conn, &[Channel::Email, Channel::Slack], 1);
        let lease = claim(&s.conn, 1000.0, "w1");
        let rejected = DeliveryResult::rejected("HTTP 400", false);
        for channel in [Channel::Email, Channel::Slack] {
            started(&s.conn, 1000.1, &lease, channel);
            engine::record_result(&Db::Sqlite(&s.conn), 1000.2, &lease, channel, &rejected)
                .expect("result");
        }
        let results = [
            (Channel::Email, rejected.clone()),
            (Channel::Slack, rejected.clone()),
        ];
        engine::settle(&Db::Sqlite(&s.conn), 1000.3, &lease, &results, &BACKOFF).expect("settle");
        // A replay written by hand (or by an old build) whose channels make no sense.
        s.conn
            .execute(
                "UPDATE uns_notifications SET status = 'PENDING', dead_letter = 0, cycle = 2, cycle_attempts = 0, next_attempt_at = 1100 WHERE id = ?1",
                [&id],
            )
            .expect("replay by hand");
        insert_event(&s.conn, &id, 1100.0, "REPLAYED", payload);
        let error = undeliverable(&s.conn, 1100.0);
        assert!(error.contains(named), "{payload}: {error}");
        assert_eq!(row(&s.conn, &id).0, "DEAD", "{payload}");
    }
}

#[test]
fn a_worker_without_an_adapter_leaves_the_row_untouched() {
    let s = store();
    let slack = submit(&s.conn, &[Channel::Slack], 3);
    let email = submit(&s.conn, &[Channel::Email], 3);
    let email_only: ChannelSet = [Channel::Email].into_iter().collect();
    let first =
        engine::claim_for(&Db::Sqlite(&s.conn), 1001.0, "w1", LEASE, &email_only).expect("claim");
    let ClaimOutcome::Claimed(lease) = first else {
        panic!("the EMAIL row is claimable: {first:?}");
    };
    assert_eq!(lease.notification_id, email);
    let idle =
        engine::claim_for(&Db::Sqlite(&s.conn), 1001.0, "w1", LEASE, &email_only).expect("claim");
    assert_eq!(idle, ClaimOutcome::Idle { declined: 1 });
    let (status, dead_letter, attempts, ..) = row(&s.conn, &slack);
    assert_eq!(
        (status.as_str(), dead_letter, attempts),
        ("PENDING", false, 0)
    );
    assert_eq!(kinds(&s.conn, &slack), ["SUBMITTED"]);
}

/// The lease's EMAIL call started at `at`, accepted with `message_id` half a second later,
/// and the attempt settled a tenth of a second after that: how it ended.
fn email_accepted(conn: &Connection, lease: &Lease, at: f64, message_id: &str) -> Ended {
    started(conn, at, lease, Channel::Email);
    let accepted = DeliveryResult::accepted(Some(message_id.into()));
    engine::record_result(
        &Db::Sqlite(conn),
        at + 0.5,
        lease,
        Channel::Email,
        &accepted,
    )
    .expect("result");
    engine::settle(
        &Db::Sqlite(conn),
        at + 0.6,
        lease,
        &[(Channel::Email, accepted)],
        &BACKOFF,
    )
    .expect("settle")
}

/// A partial replay leaves the other channels owed: once the replayed channel is
/// delivered the entry is back in the DLQ saying what is still outstanding, never
/// DELIVERED; and a caller whose lease claims to owe less than the notification has
/// cannot settle DELIVERED either, since the settlement reads the store, not the lease.
#[test]
fn no_settlement_is_delivered_past_an_outstanding_channel() {
    use unsctl::remediation::{self, Action, Actor, Request};
    let s = store();
    let id = submit(&s.conn, &[Channel::Email, Channel::Slack], 1);
    let lease = claim(&s.conn, 1001.0, "w1");
    let refused = |why: &str| DeliveryResult::rejected(why, false);
    let mut results = Vec::new();
    for channel in [Channel::Email, Channel::Slack] {
        started(&s.conn, 1001.5, &lease, channel);
        let result = refused("HTTP 400: no");
        engine::record_result(&Db::Sqlite(&s.conn), 1002.0, &lease, channel, &result)
            .expect("result");
        results.push((channel, result));
    }
    engine::settle(&Db::Sqlite(&s.conn), 1002.1, &lease, &results, &BACKOFF).expect("settle");
    assert_eq!(row(&s.conn, &id).0, "DEAD");
    // Replay EMAIL alone: SLACK is left as it was.
    let request = Request {
        channels: Some(channels(&[Channel::Email])),
        reason: Some("relay fixed".into()),
        ..Request::default()
    };
    remediation::apply(
        &Db::Sqlite(&s.conn),
        1100.0,
        &id,
        Action::Replay,
        &request,
        &Actor::local("oncall-jane"),
    )
    .expect("replay");
    let lease = claim(&s.conn, 1100.5, "w1");
    assert_eq!(lease.owed, channels(&[Channel::Email]));
    let ended = email_accepted(&s.conn, &lease, 1101.0, "<m@uns.local>");
    let Ended::Decided(Decision::DeadLettered {
        reason,
        error_message,
    }) = ended
    else {
        panic!("settled {ended:?} with SLACK outstanding");
    };
    assert_eq!(reason, engine::DeadReason::Outstanding);
    assert!(error_message.contains("SLACK"), "{error_message}");
    let (status, dead_letter, ..) = row(&s.conn, &id);
    assert_eq!((status.as_str(), dead_letter), ("DEAD", true));

    // A lease that says it owes EMAIL alone on a first try of EMAIL and SLACK.
    let other = submit(&s.conn, &[Channel::Email, Channel::Slack], 1);
    let mut lease = claim(&s.conn, 1200.0, "liar");
    assert_eq!(lease.notification_id, other);
    lease.owed = channels(&[Channel::Email]);
    let ended = email_accepted(&s.conn, &lease, 1200.5, "<m2@uns.local>");
    assert!(
        !matches!(ended, Ended::Decided(Decision::Delivered)),
        "{ended:?}"
    );
    assert_ne!(row(&s.conn, &other).0, "DELIVERED");

    // A stored result that names `success` twice says two things: it delivers nothing,
    // as the history reads it, so SLACK is still outstanding.
    let third = submit(&s.conn, &[Channel::Email, Channel::Slack], 1);
    let mut lease = claim(&s.conn, 1300.0, "w1");
    assert_eq!(lease.notification_id, third);
    // The lease owes EMAIL alone, so the settlement asks the store what is outstanding.
    lease.owed = channels(&[Channel::Email]);
    s.conn
        .execute(
            "INSERT INTO uns_events (notification_id, at, kind, payload) VALUES (?1, 1300.2,
             'CHANNEL_ATTEMPT_RESULT', '{\"channel\": \"SLACK\", \"success\": false, \"success\": true}')",
            [&third],
        )
        .expect("a hostile result");
    let ended = email_accepted(&s.conn, &lease, 1300.5, "<m3@uns.local>");
    assert!(
        matches!(
            ended,
            Ended::Decided(Decision::DeadLettered {
                reason: engine::DeadReason::Outstanding,
                ..
            })
        ),
        "{ended:?}"
    );
}

/// A COMMIT that fails leaves SQLite's transaction open; the write transaction rolls
/// it back, so nothing of it is kept and the connection can start the next one.
#[test]
fn a_commit_that_fails_leaves_no_transaction_open() {
    let dir = tempfile::tempdir().expect("dir");
    let conn = schema::open(&dir.path().join("uns.db"), OpenMode::Create).expect("store");
    let db = Db::Sqlite(&conn);
    // An event of no notification, its foreign key checked only at COMMIT.
    let failed: Result<(), unsctl::db::DbError> = db.write_tx(|tx| {
        tx.batch("PRAGMA defer_foreign_keys = ON")?;
        tx.execute(
            "INSERT INTO uns_events (notification_id, at, kind, payload) VALUES ('nobody', 0, 'SUBMITTED', '{}')",
            &[],
        )?;
        Ok(())
    });
    let err = failed.expect_err("the COMMIT fails on the foreign key");
    assert!(err.to_string().contains("FOREIGN KEY"), "{err}");
    assert!(conn.is_autocommit(), "no transaction is left open");
    let events: i64 = conn
        .query_row("SELECT COUNT(*) FROM uns_events", [], |row| row.get(0))
        .expect("count");
    assert_eq!(events, 0, "nothing of it was kept");
    db.write_tx(|tx| tx.batch("SELECT 1"))
        .expect("the next transaction starts");
}

/// The relay a store's health names is the one its newest email starts named: a relay
/// named only before the newest `RELAY_STARTS_READ` starts is not looked for, so a store
/// of Slack starts alone is never read to its first event.
#[test]
fn the_relay_in_the_health_is_read_from_the_newest_starts_alone() {
    use unsctl::runtime::queries::{RELAY_STARTS_READ, health};
    let store = store();
    let id = submit(&store.conn, &[Channel::Email, Channel::Slack], 3);
    let start = |at: f64, payload: Value| {
        store
            .conn
            .execute(
                "INSERT INTO uns_events (notification_id, at, kind, payload)
                 VALUES (?1, ?2, 'CHANNEL_ATTEMPT_STARTED', ?3)",
                rusqlite::params![id, at, payload.to_string()],
            )
            .expect("insert");
    };
    let relay = || {
        health(&Db::Sqlite(&store.conn), 1e6, 900.0, None)
            .expect("health")
            .smtp_relay
    };
    start(
        2000.0,
        json!({"channel": "EMAIL", "smtp_relay": "old.example:25"}),
    );
    assert_eq!(relay().as_deref(), Some("old.example:25"));
    for n in 1..RELAY_STARTS_READ {
        start(2000.0 + n as f64, json!({"channel": "SLACK"}));
    }
    assert_eq!(
        relay().as_deref(),
        Some("old.example:25"),
        "the 1000th newest"
    );
    start(5000.0, json!({"channel": "SLACK"}));
    assert_eq!(relay(), None, "past the newest starts read");
    start(
        6000.0,
        json!({"channel": "EMAIL", "smtp_relay": "new.example:2525"}),
    );
    start(6001.0, json!({"channel": "SLACK"}));
    assert_eq!(relay().as_deref(), Some("new.example:2525"));
}

/// The worker writes a provider's answer again after a COMMIT the store never answered:
/// it looks first, and finds its own answer by lease and channel, never another's.
#[test]
fn an_answer_written_already_is_found_by_its_lease_and_channel() {
    let s = store();
    submit(&s.conn, &[Channel::Email, Channel::Slack], 3);
    let lease = claim(&s.conn, 1001.0, "w1");
    let db = Db::Sqlite(&s.conn);
    started(&s.conn, 1001.5, &lease, Channel::Email);
    let found =
        |lease: &Lease, channel| engine::result_recorded(&db, lease, channel).expect("read");
    assert!(!found(&lease, Channel::Email), "nothing written yet");
    let result = DeliveryResult::accepted(Some("<m@uns.local>".into()));
    engine::record_result(&db, 1002.0, &lease, Channel::Email, &result).expect("result");
    assert!(found(&lease, Channel::Email));
    assert!(
        !found(&lease, Channel::Slack),
        "another channel's is its own"
    );
    let other = Lease {
        token: "another-lease".into(),
        ..lease.clone()
    };
    assert!(!found(&other, Channel::Email), "another lease's is its own");
}

/// The worker writes a channel's start again after a COMMIT the store never answered: a
/// start that COMMIT kept is taken as written (the same event), one it did not keep is
/// written once, and a lease that ran out meanwhile is lost as at the first try.
#[test]
fn a_start_written_already_is_taken_as_written_not_written_twice() {
    let s = store();
    let id = submit(&s.conn, &[Channel::Email, Channel::Slack], 3);
    let lease = claim(&s.conn, 1001.0, "w1");
    let db = Db::Sqlite(&s.conn);
    let details = Default::default();
    let first =
        engine::start_channel(&db, 1001.5, &lease, Channel::Email, &details).expect("start");
    let again = engine::start_channel_tried(&db, 1002.0, &lease, Channel::Email, &details, true)
        .expect("start again");
    assert_eq!(again, first, "the start kept is the start");
    let slack = engine::start_channel_tried(&db, 1002.0, &lease, Channel::Slack, &details, true)
        .expect("another channel");
    assert!(
        matches!(slack, Fence::Held { .. }) && slack != first,
        "another channel's start is its own: {slack:?}"
    );
    let starts = || {
        kinds(&s.conn, &id)
            .iter()
            .filter(|kind| *kind == "CHANNEL_ATTEMPT_STARTED")
            .count()
    };
    assert_eq!(starts(), 2, "one start per channel");
    let late = engine::start_channel_tried(
        &db,
        1001.0 + LEASE + 1.0,
        &lease,
        Channel::Email,
        &details,
        true,
    )
    .expect("past the lease");
    assert_eq!(late, Fence::Lost);
    assert_eq!(starts(), 2);
    assert_eq!(
        kinds(&s.conn, &id).last().map(String::as_str),
        Some("LEASE_LOST")
    );
}
