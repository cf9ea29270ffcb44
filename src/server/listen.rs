//! Accepting connections with limits, so slow or silent clients cannot hold the server:
//! a cap on open connections, a deadline for each request's headers (which also closes a
//! keep-alive connection left idle between requests), and an inactivity timeout on the
//! socket (a client that stops reading its answer, or trickles a body).
//!
//! At the cap, a new connection takes the place of the oldest one that has not yet been
//! answered anything but a refusal (unauthenticated, or silent since it connected), so
//! connections that never send a valid request cannot crowd out clients that do: a
//! client with a key keeps its connection, and a new one still gets in.

use axum::Router;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Semaphore, watch};

/// The limits of one server.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Limits {
    /// Connections open at once; more are answered 503 and closed.
    pub max_connections: usize,
    /// A request's headers must arrive within this, counted from when the server starts
    /// waiting for them (so it also bounds a keep-alive connection's idle time).
    pub header_timeout: Duration,
    /// A connection with no bytes moving either way for this long is closed.
    pub idle_timeout: Duration,
    /// A whole request, body included, must be answered within this.
    pub request_timeout: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_connections: 512,
            header_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(60),
            request_timeout: Duration::from_secs(30),
        }
    }
}

/// A socket that remembers when bytes last moved.
struct Watched {
    stream: TcpStream,
    origin: Instant,
    /// Milliseconds since `origin` at the last read or write.
    last: Arc<AtomicU64>,
}

impl Watched {
    fn touch(&self) {
        let now = self.origin.elapsed().as_millis() as u64;
        self.last.store(now, Ordering::Relaxed);
    }
}

impl AsyncRead for Watched {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.stream).poll_read(cx, buf);
        if matches!(polled, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            self.touch();
        }
        polled
    }
}

impl AsyncWrite for Watched {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let polled = Pin::new(&mut self.stream).poll_write(cx, data);
        if matches!(polled, Poll::Ready(Ok(n)) if n > 0) {
            self.touch();
        }
        polled
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }
}

/// Resolves once nothing has moved on the socket for `limit`.
async fn idle(origin: Instant, last: Arc<AtomicU64>, limit: Duration) {
    loop {
        let quiet = origin
            .elapsed()
            .saturating_sub(Duration::from_millis(last.load(Ordering::Relaxed)));
        if quiet >= limit {
            return;
        }
        tokio::time::sleep(limit - quiet).await;
    }
}

/// One open connection, as the cap sees it.
struct Admitted {
    /// Set once it was answered something other than a refusal: a client that holds a key.
    proven: std::sync::atomic::AtomicBool,
    /// Told when it must make room for a new connection.
    evicted: tokio::sync::Notify,
}

/// The connections not yet proven, oldest first.
type Unproven = std::sync::Mutex<std::collections::VecDeque<std::sync::Weak<Admitted>>>;

/// Closes the oldest connection still unproven; false when every open one is proven.
fn evict_oldest(unproven: &Unproven) -> bool {
    let mut queue = unproven.lock().unwrap_or_else(|p| p.into_inner());
    while let Some(oldest) = queue.pop_front() {
        if let Some(admitted) = oldest.upgrade()
            && !admitted.proven.load(Ordering::Relaxed)
        {
            admitted.evicted.notify_one();
            return true;
        }
    }
    false
}

/// Whether an answer proves the client holds a key (anything but a refusal of the request
/// itself, or a missing or wrong key).
fn proves(status: u16) -> bool {
    !matches!(status, 400 | 401 | 403 | 405 | 408 | 413 | 414 | 431 | 503)
}

/// The answer to a connection past the cap: a JSON 503, then the socket is closed.
async fn turn_away(mut stream: TcpStream) {
    let body = r#"{"error":"too many connections; try again shortly","kind":"unavailable"}"#;
    let answer = format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\ncontent-length: {}\r\nretry-after: 1\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = tokio::time::timeout(Duration::from_secs(1), stream.write_all(answer.as_bytes())).await;
    let _ = stream.shutdown().await;
}

/// A connection let in, queued among those that have not yet proven a key, so it can be
/// turned out first when the limit is reached.
fn admit(unproven: &Unproven, max_connections: usize) -> Arc<Admitted> {
    let admitted = Arc::new(Admitted {
        proven: std::sync::atomic::AtomicBool::new(false),
        evicted: tokio::sync::Notify::new(),
    });
    let mut queue = unproven.lock().unwrap_or_else(|p| p.into_inner());
    // Closed and proven connections leave the queue from time to time.
    if queue.len() > 2 * max_connections.max(1) {
        queue.retain(|w| {
            w.upgrade()
                .is_some_and(|a| !a.proven.load(Ordering::Relaxed))
        });
    }
    queue.push_back(Arc::downgrade(&admitted));
    admitted
}

/// Logs that the connection limit turned someone away, at most every 10 s.
fn say_turned_away(last: &mut Instant, limit: usize) {
    if last.elapsed() > Duration::from_secs(10) {
        tracing::warn!(limit, "connection limit reached: answering 503");
        *last = Instant::now();
    }
}

/// A connection's place: a free one, or the place of the oldest connection that has not
/// yet proven itself, evicted for it; None when every place is held by a proven one.
async fn place_for(
    permits: &Arc<Semaphore>,
    unproven: &Unproven,
) -> Option<tokio::sync::OwnedSemaphorePermit> {
    if let Ok(permit) = permits.clone().try_acquire_owned() {
        return Some(permit);
    }
    if !evict_oldest(unproven) {
        return None;
    }
    // The evicted connection gives its place back as it closes.
    tokio::time::timeout(Duration::from_millis(200), permits.clone().acquire_owned())
        .await
        .ok()
        .and_then(Result::ok)
}

/// Serves `app` on `listener` until `shutdown` turns true, then lets open connections
/// finish their requests.
pub async fn serve(
    listener: TcpListener,
    app: Router,
    limits: Limits,
    mut shutdown: watch::Receiver<bool>,
) {
    let permits = Arc::new(Semaphore::new(limits.max_connections.max(1)));
    let unproven: Arc<Unproven> = Arc::default();
    let mut turned_away_logged = Instant::now() - Duration::from_secs(60);
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            _ = shutdown.changed() => break,
        };
        let stream = match accepted {
            Ok((stream, _)) => stream,
            Err(err) => {
                // Out of file descriptors and the like: wait a moment rather than spin.
                tracing::warn!(error = %err, "accept failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let Some(permit) = place_for(&permits, &unproven).await else {
            say_turned_away(&mut turned_away_logged, limits.max_connections);
            tokio::spawn(turn_away(stream));
            continue;
        };
        let _ = stream.set_nodelay(true);
        let origin = Instant::now();
        let last = Arc::new(AtomicU64::new(0));
        let io = TokioIo::new(Watched {
            stream,
            origin,
            last: last.clone(),
        });
        let admitted = admit(&unproven, limits.max_connections);
        let inner = TowerToHyperService::new(app.clone());
        let marks = admitted.clone();
        let service = hyper::service::service_fn(move |request| {
            let answer = hyper::service::Service::call(&inner, request);
            let marks = marks.clone();
            async move {
                let response = answer.await?;
                if proves(response.status().as_u16()) {
                    marks.proven.store(true, Ordering::Relaxed);
                }
                Ok::<_, std::convert::Infallible>(response)
            }
        });
        let mut shutdown = shutdown.clone();
        tokio::spawn(async move {
            let _permit = permit;
            let mut builder = hyper::server::conn::http1::Builder::new();
            builder
                .timer(TokioTimer::new())
                .header_read_timeout(limits.header_timeout)
                .keep_alive(true);
            let connection = builder.serve_connection(io, service);
            tokio::pin!(connection);
            let quiet = idle(origin, last, limits.idle_timeout);
            tokio::pin!(quiet);
            let mut stopping = false;
            loop {
                tokio::select! {
                    _ = connection.as_mut() => break,
                    _ = &mut quiet => break,
                    _ = admitted.evicted.notified() => break,
                    changed = shutdown.changed(), if !stopping => {
                        stopping = true;
                        if changed.is_ok() {
                            connection.as_mut().graceful_shutdown();
                        }
                    }
                }
            }
        });
    }
    // No new connections; the ones open finish the requests they are in, for a while.
    let all = permits.acquire_many(limits.max_connections.max(1) as u32);
    let _ = tokio::time::timeout(Duration::from_secs(5), all).await;
}
