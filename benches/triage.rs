//! Triage at scale, on a store of 100,000 DLQ entries and about 1.2 million events, each
//! figure against its comparison in the same run (issue 12):
//! - `dlq triage -o json` and the table, against the `sqlite3` shell streaming the rows
//!   triage needs; peak RSS of both;
//! - `events --limit 25` against the runbook's query, with the same rows in the same order;
//! - the HTTP backend against the SQLite backend on the same store, output byte for byte;
//! - a filtered triage (`--channel SLACK --since 1h`), and `inspect` as a whole process.
//!
//! Runs alternate between the two sides of each comparison and the best of five is kept
//! for each, so a busy neighbour slows both rather than one.
//!
//! Run: cargo bench --bench triage [-- ENTRIES]

#[path = "support.rs"]
mod support;

use std::process::Command;
use std::time::Duration;

/// The rows triage needs, as the issue streams them with the sqlite3 shell.
const ROWS_TRIAGE_NEEDS: &str = "SELECT e.id, e.notification_id, e.at, e.kind, e.payload \
    FROM uns_events e JOIN uns_notifications n ON n.id = e.notification_id \
    WHERE n.dead_letter = 1 ORDER BY e.notification_id, e.id";

/// The runbook's cross-notification query (TSG-02), plus the event id to compare rows by.
const RUNBOOK_QUERY: &str = "SELECT n.id, n.status, n.dead_letter, n.attempts, n.cycle, e.kind, e.at, e.payload, e.id \
    FROM uns_events e JOIN uns_notifications n ON n.id = e.notification_id \
    WHERE e.kind IN ('LEASE_LOST', 'CHANNEL_ATTEMPT_RESULT') ORDER BY e.at DESC LIMIT 25;";

const KEY: &str = "bench-key-0123456789";

fn secs(d: Duration) -> f64 {
    d.as_secs_f64()
}

fn mb(m: &support::Measured) -> f64 {
    m.max_rss_kib as f64 / 1024.0
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
        "triage benchmark: {entries} DLQ entries, {events} events (generated in {:.1} s), best of {}",
        generated.elapsed().as_secs_f64(),
        support::RUNS
    );
    let db_arg = db.display().to_string();
    let on_db = |args: &'static [&'static str]| -> Box<dyn FnMut() -> Command> {
        let db = db_arg.clone();
        Box::new(move || {
            let mut c = Command::new(unsctl);
            c.args(["--db", &db]).args(args).env("COLUMNS", "200");
            c
        })
    };
    let shell = |sql: &'static str| -> Box<dyn FnMut() -> Command> {
        let db = db_arg.clone();
        Box::new(move || {
            let mut c = Command::new("sqlite3");
            c.arg(&db).arg(sql);
            c
        })
    };

    // 1. Triage against the sqlite3 shell reading the same rows.
    let measured = support::race(vec![
        shell(ROWS_TRIAGE_NEEDS),
        on_db(&["dlq", "triage", "-o", "json"]),
        on_db(&["dlq", "triage"]),
    ])?;
    let (sql, json, table) = (&measured[0], &measured[1], &measured[2]);
    println!(
        "  sqlite3 shell, the rows triage needs  {:>6.2} s",
        secs(sql.elapsed)
    );
    for (name, m) in [("dlq triage -o json", json), ("dlq triage (table)", table)] {
        println!(
            "  unsctl {name:<30} {:>6.2} s   ratio {:.2} (target <= 1.0)   peak RSS {:>5.1} MB (target <= 64)",
            secs(m.elapsed),
            secs(m.elapsed) / secs(sql.elapsed),
            mb(m)
        );
    }

    // 2. The event search against the runbook's query: the same rows, in the same order.
    let guide_ids = Command::new("sqlite3")
        .arg(&db)
        .arg(RUNBOOK_QUERY)
        .output()?;
    let guide_ids: Vec<String> = String::from_utf8_lossy(&guide_ids.stdout)
        .lines()
        .filter_map(|line| line.rsplit('|').next().map(str::to_string))
        .collect();
    let ours = Command::new(unsctl)
        .args(["--db", &db_arg, "events", "--kind", "LEASE_LOST"])
        .args([
            "--kind",
            "CHANNEL_ATTEMPT_RESULT",
            "--limit",
            "25",
            "-o",
            "json",
        ])
        .output()?;
    let ours: serde_json::Value = serde_json::from_slice(&ours.stdout)?;
    let our_ids: Vec<String> = ours["events"]
        .as_array()
        .map(|events| events.iter().map(|e| e["id"].to_string()).collect())
        .unwrap_or_default();
    anyhow::ensure!(
        our_ids == guide_ids && our_ids.len() == 25,
        "events --limit 25 differs from the runbook query: {our_ids:?} vs {guide_ids:?}"
    );
    let measured = support::race(vec![
        shell(RUNBOOK_QUERY),
        on_db(&[
            "events",
            "--kind",
            "LEASE_LOST",
            "--kind",
            "CHANNEL_ATTEMPT_RESULT",
            "--limit",
            "25",
        ]),
    ])?;
    println!(
        "  runbook query, newest 25 lease events  {:>6.3} s\n  unsctl events --limit 25               {:>6.3} s   speed-up {:.1}x (target >= 10), same 25 rows in the same order",
        secs(measured[0].elapsed),
        secs(measured[1].elapsed),
        secs(measured[0].elapsed) / secs(measured[1].elapsed)
    );

    // 3. The HTTP backend against the SQLite backend, on the same store.
    let server = unsctl::server::start(unsctl::server::ServerConfig::api_only(
        db.clone(),
        Some(unsctl::server::Keys::single(KEY).map_err(anyhow::Error::msg)?),
    ))?;
    let url = format!("http://{}", server.addr);
    let over_http = {
        let url = url.clone();
        move || {
            let mut c = Command::new(unsctl);
            c.args(["--api", &url, "dlq", "triage", "-o", "json"])
                .env("UNS_API_KEY", KEY);
            c
        }
    };
    let same = over_http().output()?.stdout
        == Command::new(unsctl)
            .args(["--db", &db_arg, "dlq", "triage", "-o", "json"])
            .output()?
            .stdout;
    anyhow::ensure!(same, "the two backends printed different triage");
    let measured = support::race(vec![
        on_db(&["dlq", "triage", "-o", "json"]),
        Box::new(over_http),
    ])?;
    println!(
        "  dlq triage -o json over SQLite         {:>6.2} s\n  dlq triage -o json over HTTP           {:>6.2} s   ratio {:.2} (target <= 3.0), output identical",
        secs(measured[0].elapsed),
        secs(measured[1].elapsed),
        secs(measured[1].elapsed) / secs(measured[0].elapsed)
    );
    server.stop();

    // 4. A filtered triage, and one entry in full.
    let filtered = support::race(vec![on_db(&[
        "dlq",
        "triage",
        "-o",
        "json",
        "--channel",
        "SLACK",
        "--since",
        "1h",
    ])])?;
    let selected = Command::new(unsctl)
        .args([
            "--db",
            &db_arg,
            "dlq",
            "triage",
            "-o",
            "json",
            "--channel",
            "SLACK",
            "--since",
            "1h",
        ])
        .output()?;
    let selected: serde_json::Value = serde_json::from_slice(&selected.stdout)?;
    println!(
        "  dlq triage --channel SLACK --since 1h  {:>6.3} s   ({} entries of {entries})",
        secs(filtered[0].elapsed),
        selected["entries"].as_array().map_or(0, Vec::len)
    );
    let mut inspects: Vec<Duration> = Vec::new();
    for n in 0..21 {
        let measured = support::measure(
            Command::new(unsctl)
                .args(["--db", &db_arg])
                .args(["inspect", &ids[n % ids.len()]]),
        )?;
        anyhow::ensure!(measured.success, "inspect failed");
        inspects.push(measured.elapsed);
    }
    inspects.sort();
    println!(
        "  unsctl inspect <ID>                    {:>6.1} ms median, {:.1} ms worst of 21",
        inspects[10].as_secs_f64() * 1e3,
        inspects[20].as_secs_f64() * 1e3
    );
    Ok(())
}
