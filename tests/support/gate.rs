//! A TCP proxy on loopback in front of a UNS API that shows whether a client sends some
//! kind of request several at once: it holds the answer to each such request until two
//! connections have sent one. A client that sends them one at a time is held, until the
//! proxy gives up waiting, lets everything pass and says it had to.

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

/// What a request for a notification document starts with.
pub const DOCUMENT: &[u8] = b"GET /api/v1/runtime/notifications/";

/// What a request that records an entry's verify answers starts with.
pub const RECORDING: &[u8] = b"POST /api/v1/runtime/notifications/";

/// What a request that looks up the ids a typed prefix starts begins with.
pub const PREFIX: &[u8] = b"GET /api/v1/runtime/notifications?";

/// How long an answer is held at most: a guard against a client that never asks twice
/// at once, which fails the test that uses the gate rather than hanging it.
const GIVE_UP_AFTER: Duration = Duration::from_secs(30);

#[derive(Default)]
struct Seen {
    /// Connections that have sent a request the gate watches for.
    asking: usize,
    /// The gate was opened by giving up, not by a second connection.
    gave_up: bool,
}

pub struct Gate {
    pub addr: SocketAddr,
    seen: Arc<(Mutex<Seen>, Condvar)>,
    _front: super::relay::Front,
}

impl Gate {
    /// A gate in front of `upstream` for requests that start with `watched`.
    pub fn start(upstream: SocketAddr, watched: &'static [u8]) -> Self {
        let seen = Arc::new((Mutex::new(Seen::default()), Condvar::new()));
        let shared = seen.clone();
        let front = super::relay::Front::start(upstream, move |client, server| {
            conversation(client, server, watched, shared.clone());
        });
        Self {
            addr: front.addr,
            seen,
            _front: front,
        }
    }

    /// Fails the test unless two connections sent a request it watches for, the second
    /// while the first was held (it never had to give up waiting).
    pub fn saw_two_at_once(&self, what: &str) {
        let seen = self.seen.0.lock().unwrap_or_else(|p| p.into_inner());
        assert!(
            seen.asking >= 2 && !seen.gave_up,
            "{what}: sent one at a time ({} connections sent, the gate gave up: {})",
            seen.asking,
            seen.gave_up
        );
    }
}

fn conversation(
    client: TcpStream,
    server: TcpStream,
    watched: &[u8],
    seen: Arc<(Mutex<Seen>, Condvar)>,
) {
    let asked = Arc::new(AtomicBool::new(false));
    let (held, gate) = (asked.clone(), seen.clone());
    let down = super::relay::answers(&server, &client, move || {
        if held.load(Ordering::SeqCst) {
            wait_for_a_second(&gate);
        }
        true
    });
    let (mut from_client, mut to_server) = (client, server);
    let mut buffer = [0u8; 8192];
    // The end of what came before, so a request split across reads is still seen.
    let mut tail: Vec<u8> = Vec::new();
    while let Ok(n) = from_client.read(&mut buffer) {
        if n == 0 {
            break;
        }
        tail.extend_from_slice(&buffer[..n]);
        if !asked.load(Ordering::SeqCst) && tail.windows(watched.len()).any(|w| w == watched) {
            // Marked before the request goes on, so its answer is always held.
            asked.store(true, Ordering::SeqCst);
            let (lock, changed) = &*seen;
            lock.lock().unwrap_or_else(|p| p.into_inner()).asking += 1;
            changed.notify_all();
        }
        let keep = tail.len().saturating_sub(watched.len());
        tail.drain(..keep);
        if to_server.write_all(&buffer[..n]).is_err() {
            break;
        }
    }
    let _ = to_server.shutdown(Shutdown::Both);
    let _ = down.join();
}

/// Returns once two connections have sent a watched request (or the gate gave up).
fn wait_for_a_second(seen: &(Mutex<Seen>, Condvar)) {
    let (lock, changed) = seen;
    let guard = lock.lock().unwrap_or_else(|p| p.into_inner());
    let (mut guard, waited) = changed
        .wait_timeout_while(guard, GIVE_UP_AFTER, |s| s.asking < 2 && !s.gave_up)
        .unwrap_or_else(|p| p.into_inner());
    if waited.timed_out() {
        guard.gave_up = true;
        changed.notify_all();
    }
}
