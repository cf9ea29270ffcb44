//! 200 slow or idle connections against `runtime serve`'s limits while a normal client
//! makes 5,000 requests: its latency must not suffer (p99 under 50 ms) and the slow
//! connections must be closed by the timeouts. Then 1,000 idle connections without a key,
//! twice the connection cap, held open under a long header timeout while a client with
//! the key makes its requests: none of them may fail.
//!
//! cargo bench --bench slow_clients

mod support;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};
use unsctl::server::{Keys, Limits, ServerConfig};

const KEY: &str = "bench-key-0123456789";
const SLOW: usize = 200;
const REQUESTS: usize = 5_000;
const HEADER_TIMEOUT: Duration = Duration::from_secs(2);

/// A connection that is silent (even `n`) or trickles a request line a byte at a time;
/// returns how long the server took to close it.
fn slow(addr: SocketAddr, n: usize) -> Option<Duration> {
    let started = Instant::now();
    let mut stream = TcpStream::connect(addr).ok()?;
    stream
        .set_read_timeout(Some(Duration::from_millis(100)))
        .ok()?;
    let line = b"GET /api/v1/dlq HTTP/1.1\r\nHost: bench\r\nX-Trickle: ";
    let mut sent = 0;
    let mut buffer = [0u8; 256];
    while started.elapsed() < Duration::from_secs(60) {
        if n % 2 == 1 {
            let byte = line.get(sent).copied().unwrap_or(b'x');
            if stream.write_all(&[byte]).is_err() {
                return Some(started.elapsed());
            }
            sent += 1;
        }
        match stream.read(&mut buffer) {
            Ok(0) => return Some(started.elapsed()),
            Ok(_) => {}
            Err(err)
                if matches!(
                    err.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) => {}
            Err(_) => return Some(started.elapsed()),
        }
    }
    None
}

/// One run of the normal client: each request's latency, sorted.
struct Run {
    latencies: Vec<Duration>,
    elapsed: Duration,
    errors: usize,
}

impl Run {
    fn at(&self, q: f64) -> Duration {
        let n = self.latencies.len();
        self.latencies[((n as f64 * q) as usize).min(n - 1)]
    }
}

fn requests(client: &reqwest::blocking::Client, url: &str) -> Run {
    let mut latencies = Vec::with_capacity(REQUESTS);
    let started = Instant::now();
    let mut errors = 0;
    for _ in 0..REQUESTS {
        let sent = Instant::now();
        match client.get(url).bearer_auth(KEY).send() {
            Ok(response) if response.status().is_success() => {
                let _ = response.bytes();
            }
            _ => errors += 1,
        }
        latencies.push(sent.elapsed());
    }
    let elapsed = started.elapsed();
    latencies.sort();
    Run {
        latencies,
        elapsed,
        errors,
    }
}

const IDLE: usize = 1_000;

fn url_path(id: &str) -> String {
    format!("/api/v1/runtime/notifications/{id}")
}

/// Lets this process hold the idle crowd and the server's side of it.
fn raise_fd_limit() {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: both calls get a valid pointer to a rlimit for the duration of the call.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) == 0 {
            limit.rlim_cur = limit.rlim_max.min(65_536);
            libc::setrlimit(libc::RLIMIT_NOFILE, &limit);
        }
    }
}

/// 1,000 idle connections without a key against a server whose cap is 512 and whose
/// header timeout (20 s) outlasts the run, then a client with the key.
fn idle_crowd(db: &std::path::Path, path: &str) -> anyhow::Result<Run> {
    raise_fd_limit();
    let limits = Limits {
        header_timeout: Duration::from_secs(20),
        ..Limits::default()
    };
    let server = unsctl::server::start(ServerConfig {
        limits,
        ..ServerConfig::api_only(db.to_path_buf(), Some(Keys::single(KEY)?))
    })?;
    let addr = server.addr;
    let crowd: Vec<TcpStream> = (0..IDLE)
        .filter_map(|_| TcpStream::connect(addr).ok())
        .collect();
    std::thread::sleep(Duration::from_millis(300));
    let client = reqwest::blocking::Client::new();
    let run = requests(&client, &format!("http://{addr}{path}"));
    println!(
        "idle crowd: {} idle connections without a key (cap {}, header timeout 20 s), then a client with the key",
        crowd.len(),
        limits.max_connections
    );
    println!(
        "  keyed client       {REQUESTS} GETs in {:.2} s, {} errors (target 0); p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms",
        run.elapsed.as_secs_f64(),
        run.errors,
        run.at(0.50).as_secs_f64() * 1e3,
        run.at(0.99).as_secs_f64() * 1e3,
        run.latencies[run.latencies.len() - 1].as_secs_f64() * 1e3
    );
    drop(crowd);
    server.stop();
    Ok(run)
}

fn main() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let db = dir.path().join("uns.db");
    let ids = support::generate(&db, 30)?;
    unsctl::runtime::adapters::init_tls();
    let limits = Limits {
        header_timeout: HEADER_TIMEOUT,
        ..Limits::default()
    };
    let server = unsctl::server::start(ServerConfig {
        limits,
        ..ServerConfig::api_only(db.clone(), Some(Keys::single(KEY)?))
    })?;
    let addr = server.addr;
    let client = reqwest::blocking::Client::new();
    let url = format!("http://{addr}/api/v1/runtime/notifications/{}", ids[0]);
    // The same client alone first, for comparison in the same run.
    let alone = requests(&client, &url);
    let slow_clients: Vec<_> = (0..SLOW)
        .map(|n| std::thread::spawn(move || slow(addr, n)))
        .collect();
    // Let the slow connections settle in before the measured client starts.
    std::thread::sleep(Duration::from_millis(200));
    let crowded = requests(&client, &url);
    let (latencies, elapsed, errors) = (&crowded.latencies, crowded.elapsed, crowded.errors);
    let at = |q: f64| crowded.at(q);
    let closed: Vec<Option<Duration>> = slow_clients
        .into_iter()
        .map(|h| h.join().unwrap_or(None))
        .collect();
    let mut closed_after: Vec<Duration> = closed.iter().flatten().copied().collect();
    closed_after.sort();
    let still_open = closed.iter().filter(|c| c.is_none()).count();
    println!(
        "slow clients: {SLOW} connections (half silent, half trickling a header a byte per 100 ms) against header timeout {:.1} s",
        HEADER_TIMEOUT.as_secs_f64()
    );
    println!(
        "  normal client      {REQUESTS} GETs of a notification in {:.2} s ({:.0} req/s), {errors} errors",
        elapsed.as_secs_f64(),
        REQUESTS as f64 / elapsed.as_secs_f64()
    );
    println!(
        "  latency            p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms   (target p99 < 50 ms)",
        at(0.50).as_secs_f64() * 1e3,
        at(0.99).as_secs_f64() * 1e3,
        latencies[latencies.len() - 1].as_secs_f64() * 1e3
    );
    println!(
        "  alone, same run    p50 {:.2} ms, p99 {:.2} ms, {} errors; p99 with the slow clients / alone: {:.2}x",
        alone.at(0.50).as_secs_f64() * 1e3,
        alone.at(0.99).as_secs_f64() * 1e3,
        alone.errors,
        at(0.99).as_secs_f64() / alone.at(0.99).as_secs_f64()
    );
    if let (Some(first), Some(last)) = (closed_after.first(), closed_after.last()) {
        println!(
            "  slow connections   {} of {SLOW} closed by the server, after {:.2}-{:.2} s; {still_open} still open",
            closed_after.len(),
            first.as_secs_f64(),
            last.as_secs_f64()
        );
    }
    server.stop();
    let idle = idle_crowd(&db, &url_path(&ids[0]))?;
    anyhow::ensure!(
        idle.errors == 0,
        "{} keyed requests failed beside the idle crowd",
        idle.errors
    );
    anyhow::ensure!(errors == 0, "{errors} requests failed");
    anyhow::ensure!(
        still_open == 0,
        "{still_open} slow connections were never closed"
    );
    anyhow::ensure!(
        at(0.99) < Duration::from_millis(50),
        "p99 {:?} over 50 ms",
        at(0.99)
    );
    Ok(())
}
