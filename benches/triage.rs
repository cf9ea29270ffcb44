//! Triage at scale: `unsctl dlq triage -o json` over 100,000 DLQ entries and ~1,000,000
//! events, against the sqlite3 shell streaming the same joined rows; peak memory;
//! `inspect` as a whole process; and 10,000 entries triaged over the HTTP API.
//!
//! Run: cargo bench --bench triage [-- ENTRIES]

#[path = "support.rs"]
mod support;

use std::process::Command;
use std::time::Duration;

const JOIN: &str = "SELECT n.id, n.status, n.dead_letter, n.attempts, n.cycle, n.cycle_attempts, n.max_attempts, \
    n.channels, n.payload, n.idempotency_key, n.lease_token, n.lease_until, n.next_attempt_at, n.error_message, \
    n.created_at, n.updated_at, e.id, e.at, e.kind, e.payload \
    FROM uns_notifications n JOIN uns_events e ON e.notification_id = n.id \
    WHERE n.dead_letter = 1 ORDER BY n.id, e.id;";

fn best_of(runs: usize, mut make: impl FnMut() -> Command) -> anyhow::Result<support::Measured> {
    let mut best: Option<support::Measured> = None;
    for _ in 0..runs {
        let measured = support::measure(&mut make())?;
        anyhow::ensure!(measured.success, "the command failed");
        if best.as_ref().is_none_or(|b| measured.elapsed < b.elapsed) {
            best = Some(measured);
        }
    }
    best.ok_or_else(|| anyhow::anyhow!("no run"))
}

fn main() -> anyhow::Result<()> {
    let entries: usize = std::env::args()
        .skip(1)
        .find(|a| !a.starts_with('-'))
        .and_then(|a| a.parse().ok())
        .unwrap_or(100_000);
    let unsctl = env!("CARGO_BIN_EXE_unsctl");
    let dir = tempfile::tempdir()?;
    let db = dir.path().join("big.db");
    let generated = std::time::Instant::now();
    let ids = support::generate(&db, entries)?;
    let conn = rusqlite::Connection::open(&db)?;
    let events: i64 = conn.query_row("SELECT COUNT(*) FROM uns_events", [], |r| r.get(0))?;
    println!(
        "triage benchmark: {entries} DLQ entries, {events} events (generated in {:.1} s)",
        generated.elapsed().as_secs_f64()
    );

    let shell = best_of(3, || {
        let mut c = Command::new("sqlite3");
        c.arg(&db).arg(JOIN);
        c
    })?;
    let triage = best_of(3, || {
        let mut c = Command::new(unsctl);
        c.arg("--db").arg(&db).args(["dlq", "triage", "-o", "json"]);
        c
    })?;
    let ratio = triage.elapsed.as_secs_f64() / shell.elapsed.as_secs_f64();
    println!(
        "  sqlite3 shell, same join  {:>8.2} s",
        shell.elapsed.as_secs_f64()
    );
    println!(
        "  unsctl dlq triage -o json {:>8.2} s   ratio {ratio:.2} (target <= 2.0)",
        triage.elapsed.as_secs_f64()
    );
    println!(
        "  unsctl peak RSS           {:>8.1} MB  (target <= 100 MB)",
        triage.max_rss_kib as f64 / 1024.0
    );

    let mut inspects: Vec<Duration> = Vec::new();
    for n in 0..21 {
        let measured = support::measure(
            Command::new(unsctl)
                .arg("--db")
                .arg(&db)
                .args(["inspect", &ids[n % ids.len()]]),
        )?;
        anyhow::ensure!(measured.success, "inspect failed");
        inspects.push(measured.elapsed);
    }
    inspects.sort();
    println!(
        "  unsctl inspect <ID>       {:>8.1} ms median, {:.1} ms worst of 21 (target < 50 ms)",
        inspects[10].as_secs_f64() * 1e3,
        inspects[20].as_secs_f64() * 1e3
    );

    // Over HTTP: 10,000 entries, paged with include=events.
    let http_db = dir.path().join("http.db");
    support::generate(&http_db, 10_000)?;
    let server = unsctl::server::start(unsctl::server::ServerConfig {
        db_path: http_db.clone(),
        listen: "127.0.0.1:0".parse()?,
        keys: Some(unsctl::server::Keys::single("bench-key-0123456789").expect("key")),
        worker: None,
        default_max_attempts: 3,
        limits: unsctl::server::Limits::default(),
    })?;
    let url = format!("http://{}", server.addr);
    let http = best_of(3, || {
        let mut c = Command::new(unsctl);
        c.args(["--api", &url, "dlq", "triage", "-o", "json"])
            .env("UNS_API_KEY", "bench-key-0123456789");
        c
    })?;
    println!(
        "  10,000 entries over HTTP  {:>8.2} s   (target < 5 s; pages of 500 with include=events)",
        http.elapsed.as_secs_f64()
    );
    Ok(())
}
