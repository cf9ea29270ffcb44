//! Recording many answers at once (`verify --record`): the store, the answers and the
//! checks both engines must pass.

use std::path::Path;
use unsctl::db::Db;
use unsctl::remediation::verified::{ReadOn, Why, Written};
use unsctl::remediation::{Actor, Rejection};
use unsctl::runtime::queries;
use unsctl::verify::{Answer, Asked, Delivery};

/// A new store at `path` with `count` VERIFY entries, each with one EMAIL attempt whose
/// outcome is unknown, and the answers a relay log would give for them: DELIVERED.
/// Returns the ids and the answers.
pub fn answered_entries(path: &Path, count: usize) -> (Vec<String>, Asked) {
    let conn = unsctl::runtime::schema::open(path, unsctl::runtime::schema::OpenMode::Create)
        .expect("create store");
    let ids: Vec<String> = (0..count)
        .map(|n| super::verify_entry(&conn, 1_000_000.0 + n as f64))
        .collect();
    let answers = ids.iter().map(|id| delivered(id, 1)).collect();
    let asked = Asked {
        questions: Vec::new(),
        answers,
        unread: Vec::new(),
        skipped: Vec::new(),
    };
    (ids, asked)
}

/// The relay log's answer for attempt `attempt` of `id`: DELIVERED.
pub fn delivered(id: &str, attempt: i64) -> Answer {
    Answer {
        id: id.to_string(),
        channel: unsctl::model::Channel::Email,
        cycle: 1,
        attempt,
        message_id: Some(format!("<{id}.1.{attempt}@uns.local>")),
        answer: Delivery::Delivered,
        source: "relay-log".into(),
        evidence: format!("relay log: status=sent for <{id}.1.{attempt}@uns.local>"),
    }
}

/// Records `asked` on `db` as `verify --record` does.
pub fn record(db: &Db<'_>, asked: &Asked) -> Vec<Result<Written, (String, Rejection)>> {
    unsctl::verify::record(
        db,
        2_000_000.0,
        asked,
        &Actor::local("oncall"),
        Why {
            reason: Some("incident 7"),
            ticket: None,
            via: None,
        },
        ReadOn::Here,
    )
}

/// The VERIFIED events of `id` in the store, by id.
pub fn verified_events(db: &Db<'_>, id: &str) -> Vec<i64> {
    queries::read_events(db, id)
        .expect("read events")
        .iter()
        .filter(|event| event.kind.as_str() == "VERIFIED")
        .map(|event| event.id)
        .collect()
}

/// What recording promised each entry of `ids`: every one not in `refused` recorded
/// with one event, in the order of the ids; each one in `refused` given its own error
/// and left without a VERIFIED event; and the branch each recorded entry is said to
/// have now equal to its history read fresh from the store. Returns the errors of the
/// refused entries.
pub fn check_recorded(
    db: &Db<'_>,
    ids: &[String],
    results: Vec<Result<Written, (String, Rejection)>>,
    refused: &[&str],
) -> Vec<(String, Rejection)> {
    assert_eq!(results.len(), ids.len(), "one result per entry");
    let mut errors = Vec::new();
    let mut last_event = 0;
    for (id, result) in ids.iter().zip(results) {
        let in_store = verified_events(db, id);
        match result {
            Ok(written) => {
                assert!(!refused.contains(&id.as_str()), "{id} was recorded");
                assert_eq!(&written.id, id);
                assert_eq!(written.event_ids.len(), 1, "{written:?}");
                assert_eq!(
                    written.event_ids, in_store,
                    "{id}: the events said are stored"
                );
                assert!(written.event_ids[0] > last_event, "{id}: recorded in order");
                last_event = written.event_ids[0];
                let row = queries::read_notification(db, id)
                    .expect("read")
                    .expect("row");
                let fresh = unsctl::triage::triage_events(
                    &row,
                    &queries::read_events(db, id).expect("events"),
                );
                assert_eq!(written.branch, fresh.branch, "{id}: the branch said");
                assert_eq!(
                    written.next_step,
                    unsctl::remediation::verified::next_step(&fresh),
                    "{id}: the next step said"
                );
            }
            Err((got, err)) => {
                assert_eq!(&got, id);
                assert!(refused.contains(&id.as_str()), "{id} was refused: {err}");
                assert_eq!(in_store, Vec::<i64>::new(), "{id}: nothing of it is kept");
                errors.push((got, err));
            }
        }
    }
    assert_eq!(errors.len(), refused.len(), "every refused entry said so");
    errors
}
