//! `unsctl pulse` at scale: a 24-hour window at one-minute steps over a store of
//! 1,000,000 events, against the `sqlite3` shell counting the same rows per minute with
//! the same conditions on the same index. Target: within 1.5× of the shell, in the same
//! run.
//!
//! Run: cargo bench --bench pulse [-- EVENTS]

#[path = "support.rs"]
mod support;

use rusqlite::params;
use std::process::Command;
use unsctl::runtime::schema::{self, OpenMode};

/// Each notification's events, as the runtime writes them for a lost lease that a
/// reclaim delivered, then an unknown outcome dead-lettered and replayed: one of each
/// series the pulse counts, and the events it does not.
const STORY: &[(&str, &str)] = &[
    ("CREATED", "{}"),
    ("ATTEMPT_STARTED", "{\"attempt\":1}"),
    ("CHANNEL_ATTEMPT_STARTED", "{\"channel\":\"EMAIL\"}"),
    ("LEASE_LOST", "{}"),
    ("ATTEMPT_STARTED", "{\"attempt\":2,\"reclaimed\":1}"),
    (
        "CHANNEL_ATTEMPT_RESULT",
        "{\"channel\":\"EMAIL\",\"metadata\":{\"provider_outcome\":\"UNKNOWN\"}}",
    ),
    ("DEAD_LETTERED", "{}"),
    ("REPLAYED", "{\"cycle\":2}"),
    (
        "CHANNEL_ATTEMPT_RESULT",
        "{\"channel\":\"EMAIL\",\"metadata\":{}}",
    ),
    ("DELIVERED", "{}"),
];

fn main() -> anyhow::Result<()> {
    let events: usize = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(1_000_000);
    let dir = tempfile::tempdir()?;
    let db = dir.path().join("pulse.db");
    let day = 86_400.0;
    let until = 1_764_000_000.0;
    let since = until - day;
    let written = std::time::Instant::now();
    {
        let conn = schema::open(&db, OpenMode::Create)?;
        conn.execute_batch("BEGIN")?;
        let mut row = conn.prepare(
            "INSERT INTO uns_notifications (id, status, dead_letter, attempts, cycle, cycle_attempts, max_attempts,
                 channels, payload, next_attempt_at, created_at, updated_at)
             VALUES (?1, 'DELIVERED', 0, 3, 2, 1, 3, '[\"EMAIL\"]', '{}', ?2, ?2, ?2)",
        )?;
        let mut event = conn.prepare(
            "INSERT INTO uns_events (notification_id, at, kind, payload) VALUES (?1, ?2, ?3, ?4)",
        )?;
        let notifications = events / STORY.len();
        for n in 0..notifications {
            let id = format!("n-{n:012}");
            // Spread over the day, a story taking a few seconds.
            let at = since + day * n as f64 / notifications as f64;
            row.execute(params![id, at])?;
            for (k, (kind, payload)) in STORY.iter().enumerate() {
                event.execute(params![id, at + k as f64 * 0.7, kind, payload])?;
            }
        }
        drop((row, event));
        conn.execute_batch("COMMIT; ANALYZE;")?;
    }
    let count: i64 =
        rusqlite::Connection::open(&db)?
            .query_row("SELECT count(*) FROM uns_events", [], |r| r.get(0))?;
    println!(
        "pulse benchmark: {count} events over 24 h, written in {:.1} s",
        written.elapsed().as_secs_f64()
    );
    // The same rows the pulse counts: per series, per minute of the window, and the last
    // of each, by the same conditions.
    let series = [
        ("LEASE_LOST", "1"),
        (
            "ATTEMPT_STARTED",
            "json_valid(payload) AND json_extract(payload, '$.reclaimed') = 1",
        ),
        (
            "CHANNEL_ATTEMPT_RESULT",
            "json_valid(payload) AND json_extract(payload, '$.metadata.provider_outcome') = 'UNKNOWN'",
        ),
        ("DEAD_LETTERED", "1"),
        ("REPLAYED", "1"),
        ("DLQ_RESOLVED", "1"),
        ("DELIVERED", "1"),
    ];
    let mut script = String::new();
    for (kind, condition) in series {
        script.push_str(&format!(
            "SELECT CAST((at - {since}) / 60 AS INTEGER), COUNT(*) FROM uns_events
             WHERE kind = '{kind}' AND at >= {since} AND at < {until} AND typeof(at) IN ('real', 'integer') AND {condition}
             GROUP BY 1;
             SELECT at FROM uns_events WHERE kind = '{kind}' AND at < {until} AND typeof(at) IN ('real', 'integer') AND {condition}
             ORDER BY at DESC LIMIT 1;\n"
        ));
    }
    let script_path = dir.path().join("pulse.sql");
    std::fs::write(&script_path, &script)?;
    let unsctl = env!("CARGO_BIN_EXE_unsctl");
    let window = |t: f64| unsctl::render::time::rfc3339(t);
    let (from, to) = (window(since), window(until));
    let db_text = db.display().to_string();
    // Both print what they counted: the rows must agree before the times mean anything.
    let pulse = Command::new(unsctl)
        .args([
            "--db", &db_text, "-o", "json", "pulse", "--since", &from, "--until", &to,
        ])
        .output()?;
    anyhow::ensure!(
        pulse.status.success(),
        "pulse failed: {}",
        String::from_utf8_lossy(&pulse.stderr)
    );
    let document: serde_json::Value = serde_json::from_slice(&pulse.stdout)?;
    let lost: u64 = document["series"]["LEASE_LOST"]
        .as_array()
        .map(|a| a.iter().filter_map(serde_json::Value::as_u64).sum())
        .unwrap_or(0);
    let in_window: i64 = rusqlite::Connection::open(&db)?.query_row(
        "SELECT count(*) FROM uns_events WHERE kind = 'LEASE_LOST' AND at >= ?1 AND at < ?2",
        params![since, until],
        |r| r.get(0),
    )?;
    anyhow::ensure!(
        lost as i64 == in_window,
        "pulse counted {lost} lease losses, the window holds {in_window}"
    );
    let shell = |script_path: std::path::PathBuf, db: String| {
        move || {
            let mut command = Command::new("sh");
            command.args([
                "-c",
                &format!("exec sqlite3 -readonly {} < {}", db, script_path.display()),
            ]);
            command
        }
    };
    let ours = {
        let (from, to, db) = (from.clone(), to.clone(), db_text.clone());
        move || {
            let mut command = Command::new(unsctl);
            command.args([
                "--db", &db, "-o", "json", "pulse", "--since", &from, "--until", &to,
            ]);
            command
        }
    };
    let best = support::race(vec![
        Box::new(ours),
        Box::new(shell(script_path.clone(), db_text.clone())),
    ])?;
    let (a, b) = (&best[0], &best[1]);
    println!(
        "unsctl pulse (1,440 one-minute steps, 7 series): {:.3} s, {} MiB peak",
        a.elapsed.as_secs_f64(),
        a.max_rss_kib / 1024
    );
    println!(
        "sqlite3 shell, the same counts:                  {:.3} s, {} MiB peak",
        b.elapsed.as_secs_f64(),
        b.max_rss_kib / 1024
    );
    let ratio = a.elapsed.as_secs_f64() / b.elapsed.as_secs_f64();
    println!(
        "ratio unsctl / sqlite3: {ratio:.2}× (target ≤ 1.5×): {}",
        if ratio <= 1.5 { "met" } else { "MISSED" }
    );
    Ok(())
}
