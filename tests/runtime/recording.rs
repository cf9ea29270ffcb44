//! `verify --record` over many entries on a SQLite store: entries written in batches,
//! one transaction each, and every entry answered as if it had had a transaction of its
//! own. The same checks on PostgreSQL are in `tests/peers/postgres.rs`.

use crate::support::recording::{answered_entries, check_recorded, delivered, record};
use unsctl::db::Db;
use unsctl::remediation::Rejection;
use unsctl::remediation::verified::BATCH;
use unsctl::runtime::schema::{self, OpenMode};

#[test]
fn an_entry_refused_inside_a_batch_leaves_nothing_behind() {
    let dir = tempfile::tempdir().expect("dir");
    let path = dir.path().join("uns.db");
    let (mut ids, mut asked) = answered_entries(&path, 2 * BATCH + 7);
    ids.sort();
    // In the middle of the second batch, an entry whose first answer is good and whose
    // second names an attempt that was never made: the refusal of the second must leave
    // no event of the first in the store, and cost no other entry its answer. The first
    // entry of the third batch is refused the same way.
    let refused = [ids[BATCH + 5].clone(), ids[2 * BATCH].clone()];
    for id in &refused {
        asked.answers.push(delivered(id, 9));
    }
    let conn = schema::open(&path, OpenMode::ReadWrite).expect("open");
    let db = Db::Sqlite(&conn);
    let results = record(&db, &asked);
    let refused: Vec<&str> = refused.iter().map(String::as_str).collect();
    let errors = check_recorded(&db, &ids, results, &refused);
    for (id, err) in errors {
        assert!(matches!(err, Rejection::Stale(_)), "{id}: {err}");
        assert!(
            err.to_string().contains("attempt 9 of cycle 1"),
            "{id}: the refusal says why: {err}"
        );
    }
}

#[test]
fn an_entry_the_store_will_not_write_costs_no_other_entry_its_answer() {
    let dir = tempfile::tempdir().expect("dir");
    let path = dir.path().join("uns.db");
    let (mut ids, asked) = answered_entries(&path, BATCH + 3);
    ids.sort();
    let broken = ids[10].clone();
    let conn = schema::open(&path, OpenMode::ReadWrite).expect("open");
    // A fault of the store itself, not a refusal of the tool's: the insert fails.
    conn.execute_batch(&format!(
        "CREATE TRIGGER fault BEFORE INSERT ON uns_events
         WHEN NEW.notification_id = '{broken}' AND NEW.kind = 'VERIFIED'
         BEGIN SELECT RAISE(ABORT, 'the disk refused this write'); END;"
    ))
    .expect("fault");
    let db = Db::Sqlite(&conn);
    let results = record(&db, &asked);
    let errors = check_recorded(&db, &ids, results, &[&broken]);
    let (_, err) = &errors[0];
    assert!(matches!(err, Rejection::Store(_)), "{err}");
    assert!(
        err.to_string().contains("the disk refused this write"),
        "the entry gets the store's own error: {err}"
    );
}

#[test]
fn answers_already_recorded_are_skipped_on_the_second_run() {
    let dir = tempfile::tempdir().expect("dir");
    let path = dir.path().join("uns.db");
    let (mut ids, asked) = answered_entries(&path, BATCH + 1);
    ids.sort();
    let conn = schema::open(&path, OpenMode::ReadWrite).expect("open");
    let db = Db::Sqlite(&conn);
    check_recorded(&db, &ids, record(&db, &asked), &[]);
    // The channel is settled now: a second run writes nothing and says why.
    for (id, result) in ids.iter().zip(record(&db, &asked)) {
        let written = result.expect("a skip is not an error");
        assert_eq!(written.event_ids, Vec::<i64>::new(), "{id}");
        assert_eq!(written.skipped.len(), 1, "{id}: {written:?}");
        assert!(
            written.skipped[0].contains("nothing to settle"),
            "{written:?}"
        );
    }
}

#[test]
fn an_entry_named_twice_in_one_batch_is_read_again_after_its_first_answers() {
    use unsctl::remediation::Actor;
    use unsctl::remediation::verified::{Finding, ReadOn, Verified, Why, record_each};
    let dir = tempfile::tempdir().expect("dir");
    let path = dir.path().join("uns.db");
    let (ids, _) = answered_entries(&path, 6);
    let answer = |id: &str| {
        (
            id.to_string(),
            vec![Verified {
                channel: unsctl::model::Channel::Email,
                cycle: 1,
                attempts: vec![1],
                outcome: Finding::Delivered,
                source: "relay-log".into(),
                evidence: format!("relay log: status=sent for <{id}.1.1@uns.local>"),
            }],
        )
    };
    // The entries of a batch are read before any is written: the second naming of
    // ids[1] must still see the event its first naming wrote, as it would alone.
    let twice = ids[1].clone();
    let mut entries: Vec<_> = ids.iter().map(|id| answer(id)).collect();
    entries.insert(4, answer(&twice));
    let conn = schema::open(&path, OpenMode::ReadWrite).expect("open");
    let db = Db::Sqlite(&conn);
    let results = record_each(
        &db,
        2_000_000.0,
        &entries,
        &Actor::local("oncall"),
        Why::default(),
        ReadOn::Here,
    );
    assert_eq!(results.len(), entries.len());
    for ((id, _), result) in entries.iter().zip(&results) {
        let written = result.as_ref().expect("recorded");
        assert_eq!(&written.id, id);
    }
    let first = results[1].as_ref().expect("first");
    let second = results[4].as_ref().expect("second");
    assert_eq!(first.event_ids.len(), 1, "{first:?}");
    assert_eq!(second.event_ids, Vec::<i64>::new(), "{second:?}");
    assert!(
        second.skipped[0].contains("nothing to settle"),
        "{second:?}"
    );
    assert_eq!(
        crate::support::recording::verified_events(&db, &twice),
        first.event_ids,
        "one VERIFIED event for the entry named twice"
    );
}

#[test]
fn a_read_transaction_sees_one_snapshot_and_always_ends() {
    use unsctl::db::DbError;
    let dir = tempfile::tempdir().expect("dir");
    let path = dir.path().join("uns.db");
    let (_, _) = answered_entries(&path, 2);
    let writer = schema::open(&path, OpenMode::ReadWrite).expect("writer");
    let reader = schema::open(&path, OpenMode::ReadOnly).expect("reader");
    let db = Db::Sqlite(&reader);
    let count = |db: &Db<'_>| -> Result<i64, DbError> {
        db.row("SELECT count(*) FROM uns_notifications", &[], |row| {
            Ok(match row.cell(0)? {
                rusqlite::types::ValueRef::Integer(n) => n,
                _ => -1,
            })
        })
        .map(|n| n.unwrap_or(-1))
    };
    let (before, during) = db
        .read_tx(|tx| {
            let before = count(tx)?;
            crate::support::verify_entry(&writer, 1_500_000.0);
            Ok::<_, DbError>((before, count(tx)?))
        })
        .expect("read");
    assert_eq!(
        (before, during),
        (2, 2),
        "every read of it sees the store as it was at its first"
    );
    assert!(reader.is_autocommit(), "the read transaction ended");
    assert_eq!(count(&db).expect("count"), 3, "a later read sees the write");
    let failed = db.read_tx(|tx| {
        count(tx)?;
        Err::<(), _>(DbError::Value("the caller gave up".into()))
    });
    assert!(failed.is_err());
    assert!(
        reader.is_autocommit(),
        "a failed read ended its transaction too"
    );
    // Inside a transaction already open, it reads in that one.
    let inside = Db::Sqlite(&writer)
        .write_tx(|tx| tx.read_tx(|tx| count(tx)))
        .expect("nested");
    assert_eq!(inside, 3);
}
