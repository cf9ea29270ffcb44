//! What operators read: the human output, snapshotted on a deterministic store with ids
//! and tokens filtered to placeholders.

use crate::support;

use unsctl::runtime::schema::{self, OpenMode};

const NOW: f64 = 1_761_192_000.0;

fn seeded() -> (tempfile::TempDir, String, Vec<String>) {
    let dir = tempfile::tempdir().expect("dir");
    let db = dir.path().join("uns.db");
    let conn = schema::open(&db, OpenMode::Create).expect("store");
    let ids = vec![
        support::resolve_entry(&conn, NOW),
        support::verify_entry(&conn, NOW + 100.0),
        support::replay_entry(&conn, NOW + 200.0),
    ];
    (dir, db.display().to_string(), ids)
}

fn run(db: &str, args: &[&str]) -> String {
    let output = support::unsctl()
        .args(["--db", db])
        .args(args)
        .output()
        .expect("unsctl");
    format!(
        "exit: {}\n--- stdout\n{}--- stderr\n{}",
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

fn settings(ids: &[String]) -> insta::Settings {
    let mut settings = support::snapshot_settings(ids);
    settings.add_filter(r"(?m) +$", "");
    settings
}

#[test]
fn human_output() {
    let (_dir, db, ids) = seeded();
    settings(&ids).bind(|| {
        insta::assert_snapshot!("dlq_triage", run(&db, &["dlq", "triage"]));
        insta::assert_snapshot!("dlq_list", run(&db, &["dlq", "list"]));
        insta::assert_snapshot!("inspect_resolve", run(&db, &["inspect", &ids[0]]));
        insta::assert_snapshot!("inspect_verify", run(&db, &["inspect", &ids[1]]));
        insta::assert_snapshot!("events", run(&db, &["events", "--limit", "10"]));
        insta::assert_snapshot!("triage_json", run(&db, &["dlq", "triage", "-o", "json"]));
    });
}
