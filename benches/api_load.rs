//! API load on loopback: GETs of a notification with 50 events over 16 keep-alive
//! connections while the in-process worker delivers. Bounded in count; loopback only.
//!
//! Run: cargo bench --bench api_load [-- REQUESTS CONNECTIONS]

use serde_json::json;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};
use unsctl::clock::{Clock, SystemClock};
use unsctl::db::Db;
use unsctl::lab::fakes::Fakes;
use unsctl::lab::repro;
use unsctl::model::Channel;
use unsctl::runtime::engine::{self, ClaimOutcome, DeliveryResult, NewNotification};
use unsctl::runtime::schema::{self, OpenMode};
use unsctl::runtime::worker::WorkerConfig;
use unsctl::server::{self, ServerConfig};

const KEY: &str = "load-test-key";

fn arg(n: usize, default: usize) -> usize {
    std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .nth(n)
        .and_then(|a| a.parse().ok())
        .unwrap_or(default)
}

/// A notification whose history is exactly 50 events: 12 refused attempts, dead-lettered,
/// then resolved.
fn fifty_events(conn: &rusqlite::Connection) -> anyhow::Result<String> {
    let mut now = 1_000.0;
    let id = engine::submit(
        &Db::Sqlite(conn),
        now,
        &NewNotification {
            channels: [Channel::Slack].into_iter().collect(),
            payload: json!({"subject": "load"}),
            idempotency_key: None,
            max_attempts: 12,
        },
    )?
    .id;
    let backoff = engine::Backoff {
        base_seconds: 1.0,
        max_seconds: 1.0,
    };
    for _ in 0..12 {
        let ClaimOutcome::Claimed(lease) = engine::claim(&Db::Sqlite(conn), now, "load", 60.0)?
        else {
            anyhow::bail!("nothing to claim");
        };
        engine::start_channel(
            &Db::Sqlite(conn),
            now,
            &lease,
            Channel::Slack,
            &Default::default(),
        )?;
        let refused = DeliveryResult::rejected("HTTP 503", true);
        engine::record_result(&Db::Sqlite(conn), now, &lease, Channel::Slack, &refused)?;
        engine::settle(
            &Db::Sqlite(conn),
            now,
            &lease,
            &[(Channel::Slack, refused)],
            &backoff,
        )?;
        now += 2.0;
    }
    unsctl::remediation::apply(
        &Db::Sqlite(conn),
        now,
        &id,
        unsctl::remediation::Action::Resolve,
        &unsctl::remediation::Request {
            force: true,
            reason: Some("a fixture for the load test".into()),
            ..Default::default()
        },
        &unsctl::remediation::Actor::local("load"),
    )?;
    let events: i64 = conn.query_row(
        "SELECT COUNT(*) FROM uns_events WHERE notification_id = ?1",
        [&id],
        |r| r.get(0),
    )?;
    anyhow::ensure!(events == 50, "expected 50 events, got {events}");
    Ok(id)
}

/// One keep-alive connection; returns each request's latency, or None on an error.
fn client(addr: std::net::SocketAddr, path: String, count: usize) -> Vec<Option<Duration>> {
    let mut latencies = Vec::with_capacity(count);
    let Ok(stream) = TcpStream::connect(addr) else {
        return vec![None; count];
    };
    let _ = stream.set_nodelay(true);
    let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
    let mut writer = match stream.try_clone() {
        Ok(w) => w,
        Err(_) => return vec![None; count],
    };
    let mut reader = BufReader::new(stream);
    let request =
        format!("GET {path} HTTP/1.1\r\nHost: load\r\nAuthorization: Bearer {KEY}\r\n\r\n");
    for _ in 0..count {
        let start = Instant::now();
        let ok = (|| -> std::io::Result<bool> {
            writer.write_all(request.as_bytes())?;
            let mut line = String::new();
            reader.read_line(&mut line)?;
            let ok = line.starts_with("HTTP/1.1 200");
            let mut length = 0usize;
            loop {
                line.clear();
                reader.read_line(&mut line)?;
                if line == "\r\n" || line.is_empty() {
                    break;
                }
                if let Some((name, value)) = line.split_once(':')
                    && name.eq_ignore_ascii_case("content-length")
                {
                    length = value.trim().parse().unwrap_or(0);
                }
            }
            let mut body = vec![0; length];
            reader.read_exact(&mut body)?;
            Ok(ok && body.starts_with(b"{"))
        })();
        latencies.push(matches!(ok, Ok(true)).then(|| start.elapsed()));
    }
    latencies
}

fn main() -> anyhow::Result<()> {
    let requests = arg(0, 20_000);
    let connections = arg(1, 16).max(1);
    let dir = tempfile::tempdir()?;
    let db = dir.path().join("load.db");
    let conn = schema::open(&db, OpenMode::Create)?;
    let id = fifty_events(&conn)?;
    // Work for the worker while the GETs run.
    for n in 0..20_000 {
        engine::submit(
            &Db::Sqlite(&conn),
            SystemClock.now(),
            &NewNotification {
                channels: [Channel::Slack].into_iter().collect(),
                payload: json!({"subject": format!("background {n}")}),
                idempotency_key: None,
                max_attempts: 3,
            },
        )?;
    }
    let fakes = Fakes::start()?;
    let running = server::start(ServerConfig {
        verify: Default::default(),
        db: db.clone().into(),
        listen: "127.0.0.1:0".parse()?,
        keys: Some(unsctl::server::Keys::single(KEY).expect("key")),
        worker: Some((
            WorkerConfig {
                worker_id: "load".into(),
                concurrency: 4,
                poll_interval: Duration::from_millis(5),
                ..WorkerConfig::default()
            },
            repro::fake_adapters(&fakes)?,
        )),
        default_max_attempts: 3,
        metrics: None,
        limits: unsctl::server::Limits::default(),
    })?;
    let path = format!("/api/v1/runtime/notifications/{id}");
    let start = Instant::now();
    let per = requests / connections;
    let threads: Vec<_> = (0..connections)
        .map(|_| {
            let path = path.clone();
            let addr = running.addr;
            std::thread::spawn(move || client(addr, path, per))
        })
        .collect();
    let mut latencies = Vec::new();
    let mut errors = 0usize;
    for thread in threads {
        for result in thread.join().unwrap_or_default() {
            match result {
                Some(latency) => latencies.push(latency),
                None => errors += 1,
            }
        }
    }
    let elapsed = start.elapsed().as_secs_f64();
    let delivered = running
        .worker
        .as_ref()
        .map(|w| w.counters.delivered.load(Ordering::Relaxed))
        .unwrap_or(0);
    running.stop();
    latencies.sort();
    let pick = |q: f64| {
        latencies
            .get(((latencies.len() as f64 * q) as usize).min(latencies.len().saturating_sub(1)))
            .copied()
            .unwrap_or_default()
    };
    println!(
        "API load: {} GETs of a 50-event notification over {connections} connections, worker delivering meanwhile",
        per * connections
    );
    println!(
        "  throughput   {:.0} requests/s ({:.2} s)",
        latencies.len() as f64 / elapsed,
        elapsed
    );
    println!(
        "  latency      p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms (target p99 < 20 ms)",
        pick(0.50).as_secs_f64() * 1e3,
        pick(0.99).as_secs_f64() * 1e3,
        pick(1.0).as_secs_f64() * 1e3
    );
    println!("  errors       {errors} (target 0)");
    println!("  worker       {delivered} notifications delivered during the run");
    Ok(())
}
