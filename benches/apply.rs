//! Applying a plan of 10,000 REPLAY entries to a SQLite store with --confirm --yes.
//!
//! Run: cargo bench --bench apply [-- ENTRIES]

#[path = "support.rs"]
mod support;

use std::process::Command;

fn main() -> anyhow::Result<()> {
    let entries: usize = std::env::args()
        .skip(1)
        .find(|a| !a.starts_with('-'))
        .and_then(|a| a.parse().ok())
        .unwrap_or(10_000);
    let unsctl = env!("CARGO_BIN_EXE_unsctl");
    let dir = tempfile::tempdir()?;
    let db = dir.path().join("apply.db");
    support::generate_branches(&db, entries, &[2])?;
    let plan = dir.path().join("plan.json");
    let triage = Command::new(unsctl)
        .arg("--db")
        .arg(&db)
        .args(["dlq", "triage", "-o", "json"])
        .output()?;
    anyhow::ensure!(triage.status.success(), "triage failed");
    std::fs::write(&plan, &triage.stdout)?;
    let measured = support::measure(
        Command::new(unsctl)
            .arg("--db")
            .arg(&db)
            .arg("apply")
            .arg(&plan)
            .args([
                "--confirm",
                "--yes",
                "--operator",
                "bench",
                "--reason",
                "provider fixed",
            ])
            .stderr(std::process::Stdio::null()),
    )?;
    let conn = rusqlite::Connection::open(&db)?;
    let audits: i64 = conn.query_row(
        "SELECT COUNT(*) FROM uns_events WHERE kind = 'REPLAYED'",
        [],
        |r| r.get(0),
    )?;
    let pending: i64 = conn.query_row(
        "SELECT COUNT(*) FROM uns_notifications WHERE status = 'PENDING'",
        [],
        |r| r.get(0),
    )?;
    println!("apply benchmark: plan of {entries} REPLAY entries, --confirm --yes, SQLite");
    println!(
        "  elapsed        {:.2} s (target < 10 s), exit ok: {}",
        measured.elapsed.as_secs_f64(),
        measured.success
    );
    println!(
        "  audit events   {audits} REPLAYED (target {entries}); {pending} rows back to PENDING"
    );
    println!(
        "  rate           {:.0} entries/s, peak RSS {:.1} MB",
        entries as f64 / measured.elapsed.as_secs_f64(),
        measured.max_rss_kib as f64 / 1024.0
    );
    Ok(())
}
