//! Ids can be typed as unique prefixes, as git takes commits, over both backends: a
//! unique prefix is the id, an ambiguous one is a usage error listing the candidates,
//! and one that matches nothing is "not found".

use crate::support;

use std::process::{Output, Stdio};
use unsctl::clock::{Clock, SystemClock};
use unsctl::runtime::schema::{self, OpenMode};

fn unsctl(backend: &[String], args: &[&str]) -> Output {
    support::unsctl()
        .args(backend)
        .args(args)
        .env("UNS_API_KEY", support::KEY)
        .stdin(Stdio::null())
        .output()
        .expect("unsctl")
}

/// The shortest prefix of `id` that no other id in `all` starts with.
fn unique_prefix(id: &str, all: &[String]) -> String {
    (4..=id.len())
        .map(|n| &id[..n])
        .find(|p| all.iter().filter(|other| other.starts_with(p)).count() == 1)
        .expect("a unique prefix")
        .to_string()
}

fn common_prefix(a: &str, b: &str) -> String {
    a.chars()
        .zip(b.chars())
        .take_while(|(x, y)| x == y)
        .map(|(x, _)| x)
        .collect()
}

#[test]
fn unique_ambiguous_and_unknown_prefixes_on_both_backends() {
    let dir = tempfile::tempdir().expect("dir");
    let db = dir.path().join("uns.db");
    let conn = schema::open(&db, OpenMode::Create).expect("store");
    let now = SystemClock.now();
    let mut ids: Vec<String> = (0..3).map(|_| support::replay_entry(&conn, now)).collect();
    let verified = support::verify_entry(&conn, now);
    ids.push(verified.clone());
    ids.sort();
    let server = support::server(&db);
    let backends = support::BACKENDS.map(|b| b.flags(&db, &server));
    let target = &ids[1];
    let short = unique_prefix(target, &ids);
    assert!(short.len() < target.len());
    let shared = common_prefix(&ids[0], &ids[1]);
    assert!(
        shared.len() >= 4,
        "ids made together share a prefix: {shared}"
    );
    for backend in &backends {
        // Unique: it is the id, for reading and for acting.
        let out = unsctl(backend, &["-o", "json", "inspect", &short]);
        assert!(
            out.status.success(),
            "{backend:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
        assert_eq!(
            doc["notification"]["id"].as_str().or(doc["id"].as_str()),
            Some(target.as_str()),
            "{doc}"
        );
        let out = unsctl(backend, &["--color", "never", "replay", &short]);
        support::succeeded(&out);
        assert!(String::from_utf8_lossy(&out.stdout).contains(target.as_str()));

        // Ambiguous: a usage error that lists the candidates, and nothing is done.
        let out = unsctl(backend, &["inspect", &shared]);
        assert_eq!(out.status.code(), Some(2), "{backend:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains("is ambiguous"), "{stderr}");
        for id in ids.iter().filter(|id| id.starts_with(&shared)) {
            assert!(stderr.contains(id.as_str()), "{id} not listed: {stderr}");
        }
        let out = unsctl(backend, &["replay", &shared, "--confirm", "--yes"]);
        assert_eq!(out.status.code(), Some(2), "{backend:?}");

        // Unknown, and too short.
        let out = unsctl(backend, &["inspect", "zzzz-not-an-id"]);
        assert_eq!(out.status.code(), Some(3), "{backend:?}");
        assert!(String::from_utf8_lossy(&out.stderr).contains("no notification id starts with"));
        let out = unsctl(backend, &["inspect", "n-0"]);
        assert_eq!(out.status.code(), Some(2), "{backend:?}");

        // Unknown among known ones, named to verify or to a bulk resolve: the known ones
        // are still asked about (or acted on), the unknown one is said, and the run ends
        // as not found, never as done.
        let out = unsctl(
            backend,
            &["-o", "json", "verify", &verified, "zzzz-not-an-id"],
        );
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(3), "{backend:?}: {stderr}");
        assert!(
            stderr.contains("1 of the ids named was not found"),
            "{stderr}"
        );
        let doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
        let answered = doc["answers"].as_array().expect("answers");
        assert!(
            answered.iter().any(|a| a["id"] == verified.as_str()),
            "{doc}"
        );
        assert_eq!(doc["skipped"][0]["id"], "zzzz-not-an-id", "{doc}");
        assert_eq!(doc["skipped"][0]["reason"], "not found", "{doc}");
        let out = unsctl(
            backend,
            &["dlq", "resolve", "zzzz-not-an-id", "--confirm", "--yes"],
        );
        assert_eq!(out.status.code(), Some(3), "{backend:?}");
    }
    let conn = rusqlite::Connection::open(&db).expect("open");
    let replayed: i64 = conn
        .query_row(
            "SELECT COUNT(*) FROM uns_events WHERE kind = 'REPLAYED'",
            [],
            |r| r.get(0),
        )
        .expect("count");
    assert_eq!(replayed, 0, "dry runs and refusals only");
}

/// One rule on every command: a prefix is unique among all notifications or it is
/// ambiguous, in the DLQ or not; a prefix of a row outside the DLQ is that row, and a
/// mutation refuses it for what it is, never as "not found".
#[test]
fn a_prefix_follows_one_rule_on_every_command() {
    let dir = tempfile::tempdir().expect("dir");
    let db = dir.path().join("uns.db");
    let conn = schema::open(&db, OpenMode::Create).expect("store");
    let now = SystemClock.now();
    let entry = support::replay_entry(&conn, now);
    // Rows outside the DLQ whose ids share a prefix with one in it, and one alone.
    for (id, dead) in [
        ("n-zzzz-in-dlq", 1),
        ("n-zzzz-delivered-1", 0),
        ("n-zzzz-delivered-2", 0),
        ("n-yyyy-delivered-only", 0),
    ] {
        conn.execute(
            "INSERT INTO uns_notifications (id, status, dead_letter, attempts, cycle, cycle_attempts,
                 max_attempts, channels, payload, next_attempt_at, created_at, updated_at)
             SELECT ?1, CASE WHEN ?2 = 1 THEN status ELSE 'DELIVERED' END, ?2, attempts, cycle,
                 cycle_attempts, max_attempts, channels, payload, next_attempt_at, created_at,
                 updated_at FROM uns_notifications WHERE id = ?3",
            rusqlite::params![id, dead, entry],
        )
        .expect("insert");
    }
    drop(conn);
    let server = support::server(&db);
    for backend in support::BACKENDS.map(|b| b.flags(&db, &server)) {
        for command in [
            vec!["inspect", "n-zzzz"],
            vec!["replay", "n-zzzz"],
            vec!["dlq", "resolve", "n-zzzz"],
            vec!["verify", "n-zzzz"],
        ] {
            let out = unsctl(&backend, &command);
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert_eq!(
                out.status.code(),
                Some(2),
                "{command:?} {backend:?}: {stderr}"
            );
            assert!(stderr.contains("is ambiguous"), "{command:?}: {stderr}");
        }
        let inspected = unsctl(&backend, &["inspect", "n-yyyy"]);
        assert_eq!(inspected.status.code(), Some(0));
        let out = unsctl(
            &backend,
            &["dlq", "resolve", "n-yyyy", "--confirm", "--yes"],
        );
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(
            out.status.code(),
            Some(5),
            "a conflict, not 'not found': {stderr}"
        );
        assert!(
            stderr.contains("1 conflicts, 0 refused, 0 not found"),
            "{stderr}"
        );
    }
}
