//! `unsctl report` at scale: a window of 100,000 notifications and about 1,000,000
//! events, against `unsctl reconcile` over the same window in the same run. Targets:
//! within 2× of reconcile, under 256 MB.
//!
//! Run: cargo bench --bench report [-- ENTRIES]

#[path = "support.rs"]
mod support;

use std::process::Command;

fn main() -> anyhow::Result<()> {
    let entries: usize = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(100_000);
    let dir = tempfile::tempdir()?;
    let db = dir.path().join("report.db");
    support::generate(&db, entries)?;
    let events: i64 =
        rusqlite::Connection::open(&db)?
            .query_row("SELECT count(*) FROM uns_events", [], |r| r.get(0))?;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)?
        .as_secs_f64();
    let time = unsctl::render::time::rfc3339;
    let (since, until) = (time(now - entries as f64 - 3600.0), time(now + 60.0));
    println!("report benchmark: {entries} notifications, {events} events in the window");
    let unsctl = env!("CARGO_BIN_EXE_unsctl");
    let db_text = db.display().to_string();
    let command = |args: Vec<String>| {
        move || {
            let mut command = Command::new(unsctl);
            command.args(&args);
            command
        }
    };
    let window = |first: &[&str]| -> Vec<String> {
        let mut args: Vec<String> = ["--db", &db_text].iter().map(|s| s.to_string()).collect();
        args.extend(first.iter().map(|s| s.to_string()));
        args.extend([
            "--since".to_string(),
            since.clone(),
            "--until".to_string(),
            until.clone(),
        ]);
        args
    };
    let best = support::race(vec![
        Box::new(command(window(&["-o", "json", "report"]))),
        Box::new(command(window(&["-o", "json", "reconcile"]))),
        Box::new(command(window(&["report"]))),
    ])?;
    let (json, reconcile, markdown) = (&best[0], &best[1], &best[2]);
    let line = |name: &str, m: &support::Measured| {
        println!(
            "{name}: {:.2} s, {} MiB peak",
            m.elapsed.as_secs_f64(),
            m.max_rss_kib / 1024
        )
    };
    line("report -o json   ", json);
    line("report (markdown)", markdown);
    line("reconcile -o json", reconcile);
    let ratio = json.elapsed.as_secs_f64() / reconcile.elapsed.as_secs_f64();
    let peak = json.max_rss_kib.max(markdown.max_rss_kib) / 1024;
    println!(
        "ratio report / reconcile: {ratio:.2}× (target ≤ 2×): {}; peak {peak} MiB (target < 256): {}",
        if ratio <= 2.0 { "met" } else { "MISSED" },
        if peak < 256 { "met" } else { "MISSED" }
    );
    Ok(())
}
