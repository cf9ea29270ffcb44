//! Applying a plan of 10,000 REPLAY entries to a SQLite store with --confirm --yes; then
//! the same plan paced at --rate 200/s, replayed by the real worker into the Slack fake:
//! the achieved rate (target within 10% of 200/s), the fake's peak concurrency, and that
//! every entry was delivered exactly once (issue 26).
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
    let (db, plan) = replay_plan(unsctl, dir.path(), "apply.db", entries)?;
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
    paced(unsctl, entries, 200.0)
}

/// The plan applied at `rate` replays a second, then the worker sends them into the
/// Slack fake as they fall due.
fn paced(unsctl: &str, entries: usize, rate: f64) -> anyhow::Result<()> {
    use std::sync::Arc;
    use std::time::Duration;
    use unsctl::clock::SystemClock;
    use unsctl::runtime::worker::{Worker, WorkerConfig};
    let dir = tempfile::tempdir()?;
    let (db, plan) = replay_plan(unsctl, dir.path(), "paced.db", entries)?;
    let fakes = unsctl::lab::fakes::Fakes::start()?;
    let applied = support::measure(
        Command::new(unsctl)
            .arg("--db")
            .arg(&db)
            .arg("apply")
            .arg(&plan)
            .args(["--rate", &format!("{rate}/s"), "--confirm", "--yes"])
            .args(["--operator", "bench", "--reason", "provider back"]),
    )?;
    anyhow::ensure!(applied.success, "apply --rate failed");
    let worker = Worker::new(
        unsctl::runtime::writer::Database::open(&db)?,
        Arc::new(SystemClock),
        unsctl::lab::repro::fake_adapters(&fakes)?,
        WorkerConfig {
            worker_id: "bench-paced".into(),
            concurrency: 16,
            poll_interval: Duration::from_millis(5),
            ..WorkerConfig::default()
        },
    );
    let conn = rusqlite::Connection::open(&db)?;
    let open = || -> anyhow::Result<i64> {
        Ok(conn.query_row(
            "SELECT COUNT(*) FROM uns_notifications WHERE status IN ('PENDING', 'LEASED')",
            [],
            |r| r.get(0),
        )?)
    };
    let deadline = Duration::from_secs_f64(entries as f64 / rate * 2.0 + 60.0);
    let finished = worker.run_until(deadline, Duration::from_millis(100), || {
        open().map(|n| n == 0)
    })?;
    // The achieved rate: the replayed cycle's accepted results, first to last.
    let (count, first, last): (i64, f64, f64) = conn.query_row(
        "SELECT COUNT(*), MIN(at), MAX(at) FROM uns_events
         WHERE kind = 'CHANNEL_ATTEMPT_RESULT' AND json_extract(payload, '$.cycle') = 2
           AND json_extract(payload, '$.success') = 1",
        [],
        |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
    )?;
    let achieved = (count - 1).max(1) as f64 / (last - first).max(1e-9);
    let delivered: i64 = conn.query_row(
        "SELECT COUNT(*) FROM uns_notifications WHERE status = 'DELIVERED'",
        [],
        |r| r.get(0),
    )?;
    let ids: Vec<String> = conn
        .prepare("SELECT id FROM uns_notifications")?
        .query_map([], |r| r.get(0))?
        .collect::<Result<_, _>>()?;
    let once = ids
        .iter()
        .filter(|id| {
            fakes
                .control
                .accepted_count(unsctl::model::Channel::Slack, id)
                == 1
        })
        .count();
    println!(
        "paced replay: plan of {entries} entries applied with --rate {rate}/s in {:.2} s, then the worker (16 threads) into the Slack fake",
        applied.elapsed.as_secs_f64()
    );
    println!(
        "  achieved rate  {achieved:.1}/s over {:.1} s   ratio {:.3} to the target (within 0.9 to 1.1)",
        last - first,
        achieved / rate
    );
    println!(
        "  fake's peak concurrency {}; delivered {delivered} of {entries}; accepted exactly once {once} of {entries}; finished: {finished}",
        fakes.control.peak_concurrency()
    );
    Ok(())
}

/// A store of `entries` REPLAY entries in `dir`, and the plan `dlq triage -o json` makes
/// of it.
fn replay_plan(
    unsctl: &str,
    dir: &std::path::Path,
    name: &str,
    entries: usize,
) -> anyhow::Result<(std::path::PathBuf, std::path::PathBuf)> {
    let db = dir.join(name);
    support::generate_branches(&db, entries, &[2])?;
    let plan = dir.join(format!("{name}.plan.json"));
    let triage = Command::new(unsctl)
        .arg("--db")
        .arg(&db)
        .args(["dlq", "triage", "-o", "json"])
        .output()?;
    anyhow::ensure!(triage.status.success(), "triage failed");
    std::fs::write(&plan, &triage.stdout)?;
    Ok((db, plan))
}
