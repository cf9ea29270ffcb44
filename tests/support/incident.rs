//! The report's incident, shared by the harnesses that write a report of it (the
//! commands' snapshots, the browser's layout).

use std::path::{Path, PathBuf};
use unsctl::api::ActionRequest;
use unsctl::store::Store;
use unsctl::store::direct::DirectStore;

/// A store and the report's window around it.
pub struct Incident {
    pub _dir: tempfile::TempDir,
    pub db: PathBuf,
    pub since: String,
    pub until: String,
}

impl Incident {
    /// `report` of the incident's window, as a command's arguments.
    pub fn report_args(&self) -> [&str; 5] {
        ["report", "--since", &self.since, "--until", &self.until]
    }
}

fn rfc3339(at: f64) -> String {
    unsctl::render::time::rfc3339(at)
}

/// The every-case store, then: alice resolves the RESOLVE entry, bob replays the REPLAY
/// entry refused with a 500, and bob forces a replay of a VERIFY entry; each two minutes
/// after the last, on a clock of the test's.
pub fn incident() -> Incident {
    let dir = tempfile::tempdir().expect("dir");
    let db = dir.path().join("uns.db");
    let sql = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/every-case.sql"),
    )
    .expect("fixture");
    let conn = rusqlite::Connection::open(&db).expect("db");
    conn.execute_batch(&sql).expect("load");
    let (first, newest): (f64, f64) = conn
        .query_row("SELECT min(at), max(at) FROM uns_events", [], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })
        .expect("span");
    drop(conn);
    let clock = unsctl::clock::ManualClock::new(newest + 120.0);
    let store = DirectStore::open_read_write(&db)
        .expect("store")
        .with_clock(Box::new(clock.clone()));
    let verdicts: Vec<(String, String, String)> = {
        let mut found = Vec::new();
        store
            .each_triaged(&Default::default(), &mut |t| {
                let error = t.verdict.error_message.clone().unwrap_or_default();
                found.push((t.verdict.id.clone(), t.verdict.branch.to_string(), error));
                Ok(())
            })
            .expect("triage");
        found
    };
    let of = |branch: &str, error: &str| {
        verdicts
            .iter()
            .find(|(_, b, e)| b == branch && e.contains(error))
            .map(|(id, _, _)| id.clone())
            .expect("entry")
    };
    store
        .resolve(
            &of("RESOLVE", ""),
            &ActionRequest {
                operator: Some("alice".into()),
                reason: Some("the relay log shows it queued".into()),
                ticket: Some("INC-42".into()),
                ..Default::default()
            },
        )
        .expect("resolve");
    clock.advance(120.0);
    store
        .replay(
            &of("REPLAY", "HTTP 500"),
            &ActionRequest {
                operator: Some("bob".into()),
                reason: Some("Slack is back".into()),
                ticket: Some("INC-42".into()),
                ..Default::default()
            },
        )
        .expect("replay");
    clock.advance(120.0);
    store
        .replay(
            &of("VERIFY", "Provider outcome unknown"),
            &ActionRequest {
                operator: Some("bob".into()),
                reason: Some("the customer asked for a resend".into()),
                force: true,
                ..Default::default()
            },
        )
        .expect("forced replay");
    let since = (first / 60.0).floor() * 60.0 - 60.0;
    Incident {
        _dir: dir,
        db,
        since: rfc3339(since),
        until: rfc3339(since + 3.0 * 3600.0),
    }
}
