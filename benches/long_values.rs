//! One DLQ entry whose error message and one provider answer are 10 MB each: tables cut
//! them with a marker, so `inspect` and `events` print in a table as fast as a small
//! entry (target: under 100 ms), while `-o json` keeps every byte.
//!
//! cargo bench --bench long_values

mod support;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

const BIG: usize = 10_000_000;
const RUNS: usize = 5;
const TARGET: Duration = Duration::from_millis(100);

/// Makes the entry at `id` carry a 10 MB error message and a 10 MB provider error.
fn enlarge(db: &Path, id: &str) -> anyhow::Result<()> {
    let conn = rusqlite::Connection::open(db)?;
    let huge = "x!".repeat(BIG / 2);
    conn.execute(
        "UPDATE uns_notifications SET error_message = ?1 WHERE id = ?2",
        rusqlite::params![huge, id],
    )?;
    let payload = serde_json::json!({
        "attempt": 9, "cycle": 1, "cycle_attempt": 9, "lease_token": "x", "channel": "SLACK",
        "success": false, "error": "y!".repeat(BIG / 2),
        "metadata": {"provider_outcome": "REJECTED"},
    });
    conn.execute(
        "INSERT INTO uns_events (notification_id, at, kind, payload) VALUES (?1, 1761192100.0, 'CHANNEL_ATTEMPT_RESULT', ?2)",
        rusqlite::params![id, payload.to_string()],
    )?;
    Ok(())
}

/// Best of `RUNS`, with the peak RSS of that run.
fn best(db: &Path, args: &[&str]) -> anyhow::Result<support::Measured> {
    let mut fastest: Option<support::Measured> = None;
    for _ in 0..RUNS {
        let measured = support::measure(
            Command::new(env!("CARGO_BIN_EXE_unsctl"))
                .arg("--db")
                .arg(db)
                .args(["--color", "never"])
                .args(args),
        )?;
        anyhow::ensure!(measured.success, "unsctl {args:?} failed");
        if fastest
            .as_ref()
            .is_none_or(|f| measured.elapsed < f.elapsed)
        {
            fastest = Some(measured);
        }
    }
    fastest.ok_or_else(|| anyhow::anyhow!("no run"))
}

fn main() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let small = dir.path().join("small.db");
    let large = dir.path().join("large.db");
    let ids = support::generate_branches(&small, 3, &[2])?;
    let id = ids
        .first()
        .ok_or_else(|| anyhow::anyhow!("no entry"))?
        .clone();
    std::fs::copy(&small, &large)?;
    enlarge(&large, &id)?;

    println!("one REPLAY entry; large: a 10 MB error message and a 10 MB provider error");
    println!(
        "{:<42} {:>10} {:>10} {:>8} {:>10}",
        "command", "small", "large", "ratio", "large RSS"
    );
    let commands: [(&str, Vec<&str>); 4] = [
        ("inspect (table)", vec!["inspect", &id]),
        (
            "events --kind CHANNEL_ATTEMPT_RESULT (table)",
            vec!["events", "--kind", "CHANNEL_ATTEMPT_RESULT"],
        ),
        ("dlq list (table)", vec!["dlq", "list"]),
        (
            "inspect -o json (every byte)",
            vec!["-o", "json", "inspect", &id],
        ),
    ];
    let mut within = true;
    for (label, args) in &commands {
        let a = best(&small, args)?;
        let b = best(&large, args)?;
        let table = !label.contains("json");
        within &= !table || b.elapsed < TARGET;
        println!(
            "{:<42} {:>8.1}ms {:>8.1}ms {:>7.2}x {:>7} MB",
            label,
            a.elapsed.as_secs_f64() * 1e3,
            b.elapsed.as_secs_f64() * 1e3,
            b.elapsed.as_secs_f64() / a.elapsed.as_secs_f64(),
            b.max_rss_kib / 1024,
        );
    }
    println!(
        "tables on the large entry, target under {} ms: {}",
        TARGET.as_millis(),
        if within { "met" } else { "MISSED" }
    );
    Ok(())
}
