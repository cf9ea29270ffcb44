//! `GET /metrics` on a large store: how long a scrape takes when the store gauges must be
//! read again (the cache has expired), and when they come from the cache.
//!
//! Run: cargo bench --bench metrics [-- ROWS]

mod support;

use std::time::{Duration, Instant};
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
    let server = unsctl::server::start(unsctl::server::ServerConfig {
        verify: Default::default(),
        db_path: db.clone(),
        listen: "127.0.0.1:0".parse()?,
        keys: None,
        worker: None,
        default_max_attempts: 3,
        metrics: None,
        limits: unsctl::server::Limits::default(),
    })?;
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
    let mut cold = Vec::new();
    let mut warm = Vec::new();
    for _ in 0..5 {
        std::thread::sleep(STORE_GAUGES_TTL + Duration::from_millis(100));
        cold.push(scrape()?.0.as_secs_f64() * 1e3);
        warm.push(scrape()?.0.as_secs_f64() * 1e3);
    }
    cold.sort_by(f64::total_cmp);
    warm.sort_by(f64::total_cmp);
    println!("metrics benchmark: {rows} rows in the store ({} events)", rows * 10);
    println!(
        "  scrape, store gauges read   median {:.1} ms, worst {:.1} ms   (target < 50 ms)",
        cold[2], cold[4]
    );
    println!(
        "  scrape, gauges from cache   median {:.2} ms, worst {:.2} ms",
        warm[2], warm[4]
    );
    println!("  text size                   {} bytes", first.len());
    server.stop();
    Ok(())
}
