//! Resolve and replay called straight on the store, with no CLI or API in front: the
//! guardrails, the staleness check and the audit live inside the transition itself.

use crate::support;
use unsctl::db::Db;

use rusqlite::Connection;
use serde_json::{Value, json};
use std::collections::BTreeSet;
use unsctl::model::{Channel, ChannelSet};
use unsctl::remediation::{self, Action, Actor, Claim, Refusal, Rejection, Request};
use unsctl::runtime::engine::{self, ClaimOutcome, DeliveryResult};
use unsctl::runtime::schema::{self, OpenMode};

struct Store {
    _dir: tempfile::TempDir,
    conn: Connection,
}

fn store() -> Store {
    let dir = tempfile::tempdir().expect("dir");
    let conn = schema::open(&dir.path().join("uns.db"), OpenMode::Create).expect("store");
    Store { _dir: dir, conn }
}

fn request(json: Value) -> Request {
    serde_json::from_value(json).expect("request")
}

fn apply(
    s: &Store,
    now: f64,
    id: &str,
    action: Action,
    body: Value,
) -> Result<remediation::Done, Rejection> {
    remediation::apply(
        &Db::Sqlite(&s.conn),
        now,
        id,
        action,
        &request(body),
        &Actor::local("alice"),
    )
}

fn events(conn: &Connection, id: &str, kind: &str) -> Vec<Value> {
    let mut stmt = conn
        .prepare(
            "SELECT payload FROM uns_events WHERE notification_id = ?1 AND kind = ?2 ORDER BY id",
        )
        .expect("prepare");
    stmt.query_map([id, kind], |row| row.get::<_, String>(0))
        .expect("query")
        .map(|p| serde_json::from_str(&p.expect("row")).expect("json"))
        .collect()
}

fn status(conn: &Connection, id: &str) -> String {
    conn.query_row(
        "SELECT status FROM uns_notifications WHERE id = ?1",
        [id],
        |r| r.get(0),
    )
    .expect("status")
}

fn mixed(conn: &Connection) -> String {
    support::play(
        conn,
        1000.0,
        &[Channel::Email, Channel::Slack],
        &[
            DeliveryResult::accepted(Some("<m@uns.local>".into())),
            DeliveryResult::rejected("HTTP 400", false),
        ],
        3,
    )
}

fn refused(result: Result<remediation::Done, Rejection>) -> Refusal {
    match result {
        Err(Rejection::Refused(refusal)) => refusal,
        other => panic!("expected a refusal, got {other:?}"),
    }
}

#[test]
fn every_spelling_of_a_delivered_channel_is_refused_inside_the_transition() {
    let s = store();
    let id = mixed(&s.conn);
    for spelling in [" email", "EMAIL\t", "Email", "email "] {
        let refusal = refused(apply(
            &s,
            1100.0,
            &id,
            Action::Replay,
            json!({"channels": [spelling]}),
        ));
        assert!(
            matches!(refusal, Refusal::ReplayDeliveredChannels { .. }),
            "{spelling:?}: {refusal:?}"
        );
    }
    let refusal = refused(apply(
        &s,
        1100.0,
        &id,
        Action::Replay,
        json!({"channels": ["EMAIL"], "force": true}),
    ));
    assert_eq!(refusal, Refusal::ForceWithoutReason { id: id.clone() });
    assert_eq!(status(&s.conn, &id), "DEAD");
    assert!(events(&s.conn, &id, "REPLAYED").is_empty());
    // An unknown name never reaches the transition: the request does not parse.
    assert!(serde_json::from_value::<Request>(json!({"channels": ["FAX"]})).is_err());
}

#[test]
fn a_foreign_channel_and_a_duplicate_are_handled_as_a_set() {
    let s = store();
    let id = support::replay_entry(&s.conn, 1000.0);
    let refusal = refused(apply(
        &s,
        1100.0,
        &id,
        Action::Replay,
        json!({"channels": ["SLACK", "EMAIL"]}),
    ));
    assert!(
        matches!(refusal, Refusal::ForeignChannel { .. }),
        "{refusal:?}"
    );
    let done = apply(
        &s,
        1100.0,
        &id,
        Action::Replay,
        json!({"channels": ["slack", "SLACK", " Slack"]}),
    )
    .expect("replay");
    assert_eq!(
        done.channels,
        [Channel::Slack].into_iter().collect::<ChannelSet>()
    );
    assert_eq!(
        events(&s.conn, &id, "REPLAYED")[0]["channels"],
        json!(["SLACK"])
    );
    let ClaimOutcome::Claimed(lease) =
        engine::claim(&Db::Sqlite(&s.conn), 1100.0, "w", 60.0).expect("claim")
    else {
        panic!("the replay is due");
    };
    assert_eq!(lease.owed.len(), 1, "one SLACK call, not two");
}

#[test]
fn resolve_over_a_failed_channel_needs_force_even_when_attested() {
    let s = store();
    let id = support::play(
        &s.conn,
        1000.0,
        &[Channel::Email, Channel::Slack],
        &[
            DeliveryResult::unknown("no reply after the message data was sent"),
            DeliveryResult::rejected("HTTP 400", false),
        ],
        3,
    );
    let refusal = refused(apply(
        &s,
        1100.0,
        &id,
        Action::Resolve,
        json!({"attestation": "found it in the mailbox", "verified": "DELIVERED"}),
    ));
    assert!(
        matches!(refusal, Refusal::ResolveUnsent { .. }),
        "{refusal:?}"
    );
    let done = apply(
        &s,
        1100.0,
        &id,
        Action::Resolve,
        json!({"attestation": "found it", "verified": "DELIVERED", "force": true, "reason": "the Slack alert is obsolete"}),
    )
    .expect("forced resolve");
    let audit = &events(&s.conn, &id, "DLQ_RESOLVED")[0];
    assert_eq!(audit["forced"], true);
    assert_eq!(
        audit["overridden"].as_array().map(Vec::len),
        Some(1),
        "{audit}"
    );
    assert_eq!(done.status, "RESOLVED");
}

#[test]
fn the_verdict_recorded_is_the_one_computed_in_the_transaction() {
    let s = store();
    let id = support::replay_entry(&s.conn, 1000.0);
    let refusal = refused(apply(
        &s,
        1100.0,
        &id,
        Action::Resolve,
        json!({"triage": {"branch": "RESOLVE", "channels": []}}),
    ));
    assert!(matches!(refusal, Refusal::ResolveUnsent { .. }));
    apply(
        &s,
        1100.0,
        &id,
        Action::Replay,
        json!({"triage": {"branch": "RESOLVE"}}),
    )
    .expect("replay");
    let audit = &events(&s.conn, &id, "REPLAYED")[0];
    assert_eq!(audit["triage"]["branch"], "REPLAY");
    assert_eq!(audit["triage"]["channels"][0]["state"], "FAILED");
}

#[test]
fn replay_starts_a_new_cycle_for_the_named_channels_only() {
    let s = store();
    let id = mixed(&s.conn);
    let done = apply(&s, 1100.0, &id, Action::Replay, json!({})).expect("replay");
    assert_eq!((done.cycle, done.status.as_str()), (2, "PENDING"));
    let audit = &events(&s.conn, &id, "REPLAYED")[0];
    assert_eq!(audit["operator"], "alice");
    assert_eq!(audit["channels"], json!(["SLACK"]));
    assert_eq!(
        (audit["cycle"].clone(), audit["previous_cycle"].clone()),
        (json!(2), json!(1))
    );
    let ClaimOutcome::Claimed(lease) =
        engine::claim(&Db::Sqlite(&s.conn), 1100.0, "w1", 60.0).expect("claim")
    else {
        panic!("due");
    };
    assert_eq!((lease.cycle, lease.cycle_attempt), (2, 1));
    assert_eq!(
        lease.owed,
        [Channel::Slack].into_iter().collect::<ChannelSet>()
    );

    // No longer in the DLQ: a second replay or a resolve is a conflict, with the state.
    match apply(&s, 1101.0, &id, Action::Replay, json!({})) {
        Err(Rejection::NotInDlq(conflict)) => {
            assert_eq!(
                (conflict.status.as_str(), conflict.since),
                ("LEASED", 1100.0)
            );
        }
        other => panic!("expected a conflict, got {other:?}"),
    }
    assert!(matches!(
        apply(&s, 1101.0, &id, Action::Resolve, json!({})),
        Err(Rejection::NotInDlq(_))
    ));
    assert!(matches!(
        apply(&s, 1101.0, "n-missing", Action::Resolve, json!({})),
        Err(Rejection::NotFound(_))
    ));
    assert_eq!(events(&s.conn, &id, "REPLAYED").len(), 1);
}

#[test]
fn resolve_keeps_the_row_and_its_history() {
    let s = store();
    let id = support::resolve_entry(&s.conn, 1000.0);
    apply(&s, 1200.0, &id, Action::Resolve, json!({"ticket": "INC-7"})).expect("resolve");
    assert_eq!(status(&s.conn, &id), "RESOLVED");
    let audit = &events(&s.conn, &id, "DLQ_RESOLVED")[0];
    let keys: BTreeSet<&str> = audit
        .as_object()
        .map(|m| m.keys().map(String::as_str).collect())
        .unwrap_or_default();
    assert_eq!(
        keys,
        [
            "attestation",
            "cycle",
            "forced",
            "operator",
            "overridden",
            "reason",
            "ticket",
            "triage",
            "verified"
        ]
        .into_iter()
        .collect()
    );
    // Nothing can delete history, even by hand.
    assert!(s.conn.execute("DELETE FROM uns_events", []).is_err());
    assert!(
        s.conn
            .execute("UPDATE uns_events SET kind = 'X'", [])
            .is_err()
    );
    assert!(s.conn.execute("DELETE FROM uns_notifications", []).is_err());
}

#[test]
fn a_stale_plan_is_refused_inside_the_transition() {
    let s = store();
    let id = support::replay_entry(&s.conn, 1000.0);
    let newest: i64 = s
        .conn
        .query_row(
            "SELECT MAX(id) FROM uns_events WHERE notification_id = ?1",
            [&id],
            |row| row.get(0),
        )
        .expect("newest");
    assert!(matches!(
        apply(
            &s,
            1300.0,
            &id,
            Action::Replay,
            json!({"expected_last_event_id": newest - 1})
        ),
        Err(Rejection::Stale(_))
    ));
    assert_eq!(status(&s.conn, &id), "DEAD");
    apply(
        &s,
        1300.0,
        &id,
        Action::Replay,
        json!({"expected_last_event_id": newest}),
    )
    .expect("fresh plan applies");
}

#[test]
fn attestations_are_typed_claims() {
    let s = store();
    let id = support::verify_entry(&s.conn, 1000.0);
    let refusal = refused(apply(
        &s,
        1100.0,
        &id,
        Action::Resolve,
        json!({"attestation": "x", "verified": "NOT_DELIVERED"}),
    ));
    assert!(matches!(
        refusal,
        Refusal::ResolveAttestedUndelivered { .. }
    ));
    let refusal = refused(apply(
        &s,
        1100.0,
        &id,
        Action::Replay,
        json!({"attestation": "x", "verified": "DELIVERED"}),
    ));
    assert!(
        matches!(
            refusal,
            Refusal::NothingToReplay { .. } | Refusal::ReplayAttestedDelivered { .. }
        ),
        "{refusal:?}"
    );
    let done = apply(
        &s,
        1100.0,
        &id,
        Action::Replay,
        json!({"attestation": "relay log: nothing queued", "verified": "NOT_DELIVERED"}),
    )
    .expect("replay");
    assert_eq!(done.channels.joined(","), "EMAIL");
    let audit = &events(&s.conn, &id, "REPLAYED")[0];
    assert_eq!(audit["verified"], json!(Claim::NotDelivered));
}
