//! `unsctl reconcile` against a real Postfix relay. A proxy holds the relay's reply to the
//! final dot past the lease, so the history says UNKNOWN; the reclaim sends the message
//! again and is accepted. The history alone proves one copy; the relay's log proves two,
//! and `smtp-sink`, behind the relay, received two.

use crate::support;
use unsctl::db::Db;

use serde_json::{Value, json};
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;
use support::relay::{Fault, Proxy, Relay};
use unsctl::clock::{Clock, SystemClock};
use unsctl::model::Channel;
use unsctl::runtime::adapters::email::{EmailAdapter, EmailConfig, StartTls};
use unsctl::runtime::adapters::{Adapter, DeliveryRequest};
use unsctl::runtime::engine::{self, Backoff, Decision, Ended, NewNotification};
use unsctl::runtime::schema::{self, OpenMode};

/// The lease of the attempt whose reply is held: the proxy holds it past this, so the
/// call outlives the lease, as in the incident, however fast the machine is.
const LEASE: f64 = 1.0;
/// The lease of the attempt that must succeed: far longer than a relay slowed by a
/// loaded machine takes.
const LONG_LEASE: f64 = 60.0;
/// No socket step gives up before this: only the injected fault ends a call early.
const MIN_IO: Duration = Duration::from_secs(30);
const BACKOFF: Backoff = Backoff {
    base_seconds: 0.0,
    max_seconds: 0.0,
};

fn now() -> f64 {
    SystemClock.now()
}

/// One claim with a lease of `seconds` and one call through `adapter`, recorded as the
/// worker records it.
fn attempt(conn: &rusqlite::Connection, adapter: &EmailAdapter, seconds: f64) -> (String, Ended) {
    let lease = support::claim_and_start(
        conn,
        "reconcile-test",
        seconds,
        Channel::Email,
        &adapter.started(),
    );
    let request = DeliveryRequest::for_lease(&lease, Channel::Email, seconds, MIN_IO);
    let result = adapter.deliver(&request, &|| true);
    engine::record_result(&Db::Sqlite(conn), now(), &lease, Channel::Email, &result)
        .expect("result");
    let settled = engine::settle(
        &Db::Sqlite(conn),
        now(),
        &lease,
        &[(Channel::Email, result.clone())],
        &BACKOFF,
    )
    .expect("settle");
    (result.outcome.as_str().to_string(), settled)
}

fn reconcile(db: &Path, args: &[&str]) -> Value {
    let out = support::unsctl()
        .arg("--db")
        .arg(db)
        .args(["reconcile", "-o", "json", "--clock-skew", "1s"])
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("reconcile");
    support::succeeded(&out);
    serde_json::from_slice(&out.stdout).expect("json")
}

#[test]
fn a_reclaim_after_a_held_reply_is_two_copies_by_the_relays_log_as_the_sink_received() {
    let work = tempfile::tempdir().expect("dir");
    let db = work.path().join("uns.db");
    let relay = Relay::start(None);
    let proxy = Proxy::start(relay.addr, Fault::HoldReplyToDot);
    let mut config = EmailConfig::new(proxy.addr.to_string());
    config.starttls = StartTls::Never;
    let adapter = EmailAdapter::new(config);
    relay.mark_then_next_second();

    let conn = schema::open(&db, OpenMode::Create).expect("store");
    let id = engine::submit(
        &Db::Sqlite(&conn),
        now(),
        &NewNotification {
            channels: [Channel::Email].into_iter().collect(),
            payload: json!({"recipient": "twice@example.test", "subject": "reconcile", "body": "hello"}),
            idempotency_key: None,
            max_attempts: 2,
        },
    )
    .expect("submit")
    .id;
    // 1. The relay queues the message; its reply is held past the lease: UNKNOWN, and
    //    the late settlement finds the lease gone.
    let (outcome, settled) = attempt(&conn, &adapter, LEASE);
    assert_eq!(outcome, "UNKNOWN");
    assert!(matches!(settled, Ended::LeaseLost), "{settled:?}");
    // 2. The reclaim sends it again, and the relay answers this time.
    proxy.set(Fault::None);
    let (outcome, settled) = attempt(&conn, &adapter, LONG_LEASE);
    assert_eq!(outcome, "ACCEPTED");
    assert!(
        matches!(settled, Ended::Decided(Decision::Delivered)),
        "{settled:?}"
    );

    // What really reached the recipient: two messages at the sink (beside the marker).
    let ours = || -> Vec<String> {
        relay
            .sink
            .received()
            .into_iter()
            .filter(|m| m.contains(&format!("<{id}.")))
            .collect()
    };
    support::wait_until(
        "the sink to receive both copies",
        Duration::from_secs(30),
        || ours().len() >= 2,
    );
    let received = ours();
    assert_eq!(received.len(), 2, "the sink received exactly two");
    for attempt in 1..=2 {
        let message_id = format!("<{id}.1.{attempt}@uns.local>");
        assert!(
            received.iter().any(|m| m.contains(&message_id)),
            "{message_id} at the sink"
        );
        relay.wait_for_log(&format!("message-id={message_id}"));
    }
    relay.log_past(now() + 2.0);

    // The history alone: one copy proven, one attempt in doubt.
    let alone = reconcile(&db, &[]);
    let item = &alone["notifications"][0];
    assert_eq!(item["id"], id.as_str());
    assert_eq!(item["class"], "MAYBE_DUPLICATED", "{alone:#}");
    assert_eq!(item["copies"], 1);
    assert_eq!(item["unknown_attempts"], 1);

    // With the relay's own log: two copies, each with its queue id, as the sink received.
    let maillog = relay.maillog.display().to_string();
    let read = reconcile(&db, &["--relay-log", &maillog]);
    let item = &read["notifications"][0];
    assert_eq!(item["class"], "DUPLICATED", "{read:#}");
    assert_eq!(item["copies"].as_u64(), Some(received.len() as u64));
    assert_eq!(item["unknown_attempts"], 0);
    assert_eq!(item["recipient"], "twice@example.test");
    let copies: Vec<&Value> = item["evidence"]
        .as_array()
        .expect("evidence")
        .iter()
        .filter(|e| e["what"] == "copy")
        .collect();
    let log = relay.log();
    for copy in &copies {
        let queue_id = copy["queue_ids"][0].as_str().expect("queue id");
        assert!(
            log.lines()
                .any(|l| l.contains(&format!(": {queue_id}: from=<"))
                    && l.contains("(queue active)")),
            "{queue_id} reached the queue manager: {log}"
        );
        let text = copy["text"].as_str().expect("text");
        assert!(
            !text.contains(queue_id),
            "the queue id is named beside the text, not in it again: {text}"
        );
    }
    assert_eq!(
        copies[0]["sources"],
        json!(["relay-log"]),
        "the UNKNOWN attempt's copy"
    );
    assert_eq!(copies[1]["sources"], json!(["history", "relay-log"]));
    assert_ne!(copies[0]["queue_ids"], copies[1]["queue_ids"]);
}
