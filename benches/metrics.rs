//! `GET /metrics` on a large store: how long a scrape takes when the store gauges must be
//! read again (the cache has expired), and when they come from the cache.
//!
//! Run: cargo bench --bench metrics [-- ROWS]

mod support;

use std::time::{Duration, Instant};
use unsctl::db::Db;
use unsctl::runtime::metrics::STORE_GAUGES_TTL;

fn main() -> anyhow::Result<()> {
    let rows: usize = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .find_map(|a| a.parse().ok())
        .unwrap_or(100_000);
    unsctl::runtime::adapters::init_tls();
    let dir = tempfile::tempdir()?;
    let db = dir.path().join("bench.db");
    support::generate(&db, rows)?;
    let server = unsctl::server::start(unsctl::server::ServerConfig::api_only(db.clone(), None))?;
    let url = format!("http://{}/metrics", server.addr);
    let client = reqwest::blocking::Client::new();
    let scrape = || -> anyhow::Result<(Duration, String)> {
        let start = Instant::now();
        let text = client.get(&url).send()?.error_for_status()?.text()?;
        Ok((start.elapsed(), text))
    };
    let (_, first) = scrape()?;
    anyhow::ensure!(
        first.contains(&format!("uns_dlq_entries {rows}")),
        "the scrape does not show the store: {first}"
    );
    let mut stale = Vec::new();
    let mut fresh = Vec::new();
    for _ in 0..5 {
        std::thread::sleep(STORE_GAUGES_TTL + Duration::from_millis(100));
        stale.push(scrape()?.0.as_secs_f64() * 1e3);
        fresh.push(scrape()?.0.as_secs_f64() * 1e3);
    }
    // What the background read costs, and what the very first scrape of a server waits.
    let conn = unsctl::runtime::schema::open(&db, unsctl::runtime::schema::OpenMode::ReadOnly)?;
    let metrics = unsctl::runtime::metrics::Metrics::new(60.0);
    let mut read = Vec::new();
    for _ in 0..5 {
        let start = Instant::now();
        metrics.refresh(&Db::Sqlite(&conn), 0.0)?;
        read.push(start.elapsed().as_secs_f64() * 1e3);
    }
    for list in [&mut stale, &mut fresh, &mut read] {
        list.sort_by(f64::total_cmp);
    }
    println!(
        "metrics benchmark: {rows} rows in the store ({} events)",
        rows * 10
    );
    println!(
        "  scrape, gauges older than {} s  median {:.2} ms, worst {:.2} ms   (target < 50 ms; renewed in the background)",
        STORE_GAUGES_TTL.as_secs(),
        stale[2],
        stale[4]
    );
    println!(
        "  scrape, gauges fresh            median {:.2} ms, worst {:.2} ms",
        fresh[2], fresh[4]
    );
    println!(
        "  reading the store gauges        median {:.1} ms, worst {:.1} ms   (a server's first scrape waits for this once)",
        read[2], read[4]
    );
    println!("  text size                       {} bytes", first.len());
    server.stop();
    Ok(())
}
