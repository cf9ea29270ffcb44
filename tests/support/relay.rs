//! A real Postfix relay on loopback (in front of `smtp-sink`), a fault-injecting TCP proxy
//! to put between the email adapter and it, and a private CA for STARTTLS.

use super::{SmtpSink, free_port};
use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Starting Postfix edits the default configuration: one at a time.
static STARTING: Mutex<()> = Mutex::new(());

/// The relay tool: the one beside the repository when it is there, else our copy.
fn tool() -> PathBuf {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    let shared = manifest.join("../shared/tools/postfix-relay");
    if shared.exists() && std::env::var_os("UNS_OWN_RELAY_TOOL").is_none() {
        shared
    } else {
        manifest.join("tests/tools/postfix-relay")
    }
}

/// A running relay: Postfix on `addr`, relaying to `sink`, logging to `maillog`.
pub struct Relay {
    pub addr: SocketAddr,
    pub sink: SmtpSink,
    pub maillog: PathBuf,
    /// The variables it was started with (TLS, header checks, main.cf lines), to start it
    /// again as it was.
    settings: Vec<(&'static str, PathBuf)>,
    dir: tempfile::TempDir,
}

impl Relay {
    /// Starts one; with `tls` (certificate and key PEM files) it offers STARTTLS.
    pub fn start(tls: Option<(&Path, &Path)>) -> Self {
        Self::start_with(tls, None)
    }

    /// Starts one that applies `header_checks` (Postfix regexp lines: HOLD, WARN, ...).
    pub fn start_with(tls: Option<(&Path, &Path)>, header_checks: Option<&str>) -> Self {
        Self::start_configured(tls, header_checks, None)
    }

    /// Starts one with `main_cf` lines added to its configuration, as a real site sets
    /// it (`sender_canonical_maps`, `syslog_name`, `myhostname`).
    pub fn start_as(main_cf: &str) -> Self {
        Self::start_configured(None, None, Some(main_cf))
    }

    fn start_configured(
        tls: Option<(&Path, &Path)>,
        header_checks: Option<&str>,
        main_cf: Option<&str>,
    ) -> Self {
        assert!(
            super::is_root(),
            "a real Postfix relay needs root (.ci/run runs the tests as root)"
        );
        let sink = SmtpSink::start(&[]);
        let dir = tempfile::tempdir().expect("relay dir");
        // Postfix's own user must reach the queue: the folder is searchable by all.
        super::set_mode(dir.path(), 0o755);
        let port = free_port();
        let mut settings = Vec::new();
        if let Some((cert, key)) = tls {
            settings.push(("TLS_CERT", cert.to_path_buf()));
            settings.push(("TLS_KEY", key.to_path_buf()));
        }
        let checks = dir.path().join("header_checks.in");
        if let Some(lines) = header_checks {
            std::fs::write(&checks, lines).expect("header checks");
            settings.push(("HEADER_CHECKS", checks));
        }
        let extra = dir.path().join("main.cf.in");
        if let Some(lines) = main_cf {
            // Files the lines name are relative to the relay's folder.
            let lines = lines.replace("{dir}", &dir.path().display().to_string());
            std::fs::write(&extra, lines).expect("main.cf lines");
            settings.push(("EXTRA_MAIN_CF", extra));
        }
        let relay = Self {
            addr: format!("127.0.0.1:{port}").parse().expect("addr"),
            sink,
            maillog: dir.path().join("maillog"),
            settings,
            dir,
        };
        relay.start_again();
        relay
    }

    /// Starts its Postfix on its port, as it was first started; its log goes on.
    fn start_again(&self) {
        let out = {
            let _one = STARTING.lock().unwrap_or_else(|p| p.into_inner());
            Command::new(tool())
                .arg("start")
                .arg(self.dir.path())
                .arg(self.addr.port().to_string())
                .arg(self.sink.addr.to_string())
                .envs(self.settings.iter().map(|(name, path)| (name, path)))
                .output()
                .expect("postfix-relay")
        };
        // The tool gives its Postfix 10 s to listen; on a loaded machine the start can
        // take longer, and master runs on in the background: whatever the tool said, the
        // port is what tells, waited for as long as any reply.
        let listening = crate::support::wait_for(PATIENCE, || {
            TcpStream::connect_timeout(&self.addr, Duration::from_millis(100)).is_ok()
        });
        assert!(
            listening,
            "the relay never listened on {}: postfix-relay start: {}{}\n{}",
            self.addr,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
            self.log()
        );
    }

    /// Stops it as its tool does (`postfix stop`, which logs that it is stopping) and
    /// starts it again.
    pub fn restart(&self) {
        self.stop();
        self.wait_closed();
        self.start_again();
    }

    /// Kills every process of its Postfix at once, as a crash of its host ends them (no
    /// line says it stopped), and starts it again.
    pub fn kill_and_start(&self) {
        let pid = std::fs::read_to_string(self.dir.path().join("queue/pid/master.pid"))
            .expect("master.pid");
        let group = format!("-{}", pid.trim());
        let killed = Command::new("kill")
            .args(["-KILL", "--", &group])
            .output()
            .expect("kill");
        assert!(killed.status.success(), "kill {group}: {killed:?}");
        self.wait_closed();
        self.start_again();
    }

    /// Waits until nothing listens on its port.
    fn wait_closed(&self) {
        let closed = crate::support::wait_for(PATIENCE, || {
            TcpStream::connect_timeout(&self.addr, Duration::from_secs(1)).is_err()
        });
        assert!(closed, "the relay on {} never stopped", self.addr);
    }

    fn stop(&self) {
        let _ = Command::new(tool())
            .arg("stop")
            .arg(self.dir.path())
            .output();
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.maillog).unwrap_or_default()
    }

    /// Sends a message straight to the relay (a marker, to move its log on).
    pub fn send_marker(&self) {
        self.submit(
            "marker@marker.test",
            "Message-ID: <marker@marker.test>\r\nSubject: marker\r\n\r\nmarker\r\n",
            true,
        );
    }

    /// Sends a marker and waits until it is logged and the clock is in a later second:
    /// every line logged after this is stamped after the marker (syslog stamps say the
    /// second), so the log is seen to start before what follows.
    pub fn mark_then_next_second(&self) {
        self.mark_and_wait();
        let logged = crate::support::wall_clock();
        crate::support::wait_past("the second after the marker's", logged.floor() + 1.0);
    }

    /// Sends a message straight to the relay as `from`, with `text` (headers, a blank
    /// line, the body). With `finish` false the connection is closed inside DATA, before
    /// the final dot, as a client that died would leave it.
    pub fn submit(&self, from: &str, text: &str, finish: bool) {
        let mut stream = TcpStream::connect(self.addr).expect("relay");
        stream.set_read_timeout(Some(PATIENCE)).expect("timeout");
        let reply = |stream: &mut TcpStream| {
            let mut buffer = [0u8; 1024];
            let mut text = String::new();
            // Read until a final reply line ("250 " rather than "250-").
            while !text
                .lines()
                .last()
                .is_some_and(|l| l.len() > 3 && l.as_bytes()[3] == b' ')
                || !text.ends_with('\n')
            {
                let n = match stream.read(&mut buffer) {
                    Ok(n) => n,
                    Err(err) => panic!(
                        "no reply from the relay after {:?} ({err}); so far {text:?}; its log:\n{}",
                        PATIENCE,
                        self.log()
                    ),
                };
                assert!(n > 0, "the relay closed the connection");
                text.push_str(&String::from_utf8_lossy(&buffer[..n]));
            }
            text
        };
        reply(&mut stream);
        for command in [
            "EHLO marker.test\r\n".to_string(),
            format!("MAIL FROM:<{from}>\r\n"),
            "RCPT TO:<marker@sink.test>\r\n".to_string(),
            "DATA\r\n".to_string(),
        ] {
            stream.write_all(command.as_bytes()).expect("write");
            reply(&mut stream);
        }
        stream.write_all(text.as_bytes()).expect("write");
        if !finish {
            let _ = stream.shutdown(Shutdown::Both);
            return;
        }
        stream.write_all(b".\r\n").expect("write");
        reply(&mut stream);
        stream.write_all(b"QUIT\r\n").expect("write");
        reply(&mut stream);
    }

    /// Waits until the log holds `text`.
    pub fn wait_for_log(&self, text: &str) {
        if !crate::support::wait_for(PATIENCE, || self.log().contains(text)) {
            panic!("{text:?} never logged: {}", self.log());
        }
    }

    /// Waits until the log has a line stamped at or after `at` (unix seconds), sending
    /// a marker once the clock is in a second past it (syslog stamps say the second).
    pub fn log_past(&self, at: f64) {
        crate::support::wait_past("a second past the instant", at.ceil());
        self.mark_and_wait();
    }

    /// Sends a marker and waits until the log has its line (one more than before).
    pub fn mark_and_wait(&self) {
        let marked = |log: &str| log.matches("marker@marker.test>, size=").count();
        let before = marked(&self.log());
        self.send_marker();
        if !crate::support::wait_for(PATIENCE, || marked(&self.log()) > before) {
            panic!("the marker was never logged: {}", self.log());
        }
    }

    /// Waits until every session its smtpd began has ended (a `disconnect from` line for
    /// each `connect from`): a log cut here, as a rotation cuts it, leaves no session open
    /// at its end. The marker's session ends after the line [`Self::mark_and_wait`] waits
    /// for.
    pub fn wait_for_sessions_to_end(&self) {
        let open = |log: &str| {
            log.matches("]: connect from ").count() > log.matches("]: disconnect from ").count()
        };
        if !crate::support::wait_for(PATIENCE, || !open(&self.log())) {
            panic!("a session never ended: {}", self.log());
        }
    }

    pub fn dir(&self) -> &Path {
        self.dir.path()
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.stop();
    }
}

/// What the proxy does to a conversation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// Passes everything.
    None,
    /// Passes the message and its final dot, holds the relay's reply for [`HELD_FOR`],
    /// then cuts the client's connection without it: an attempt whose reply never came,
    /// ended by the fault itself rather than by a timeout the machine's speed decides.
    HoldReplyToDot,
    /// Passes the message but not its final dot, then cuts both connections.
    CutBeforeDot,
}

/// A TCP proxy on loopback in front of `upstream`.
pub struct Proxy {
    pub addr: SocketAddr,
    fault: Arc<Mutex<Fault>>,
    _front: Front,
}

const END_OF_DATA: &[u8] = b"\r\n.\r\n";

/// How long a real Postfix may take to answer or to log on a busy machine: a guard
/// against a relay that hangs, never a pace, since every wait ends when the reply or the
/// line comes. (A fresh relay once took more than the 10 s it had to greet, in a CI run
/// that had every peer of the suite starting beside it.)
pub const PATIENCE: Duration = Duration::from_secs(60);

/// How long [`Fault::HoldReplyToDot`] holds a reply: past the 1 s leases the tests claim
/// with, whatever the machine's speed, since the lease started before the message did.
pub const HELD_FOR: Duration = Duration::from_millis(1500);

impl Proxy {
    pub fn start(upstream: SocketAddr, fault: Fault) -> Self {
        let fault = Arc::new(Mutex::new(fault));
        let faults = fault.clone();
        let front = Front::start(upstream, move |client, server| {
            let fault = *faults.lock().unwrap_or_else(|p| p.into_inner());
            conversation(client, server, fault);
        });
        Self {
            addr: front.addr,
            fault,
            _front: front,
        }
    }

    pub fn set(&self, fault: Fault) {
        *self.fault.lock().unwrap_or_else(|p| p.into_inner()) = fault;
    }
}

/// A listener on loopback that connects each client to `upstream` and hands both to a
/// conversation of their own, until dropped.
pub struct Front {
    pub addr: SocketAddr,
    stop: Arc<AtomicBool>,
}

impl Front {
    pub fn start(
        upstream: SocketAddr,
        converse: impl Fn(TcpStream, TcpStream) + Clone + Send + 'static,
    ) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").expect("proxy");
        let addr = listener.local_addr().expect("addr");
        let stop = Arc::new(AtomicBool::new(false));
        let stopping = stop.clone();
        std::thread::spawn(move || {
            for client in listener.incoming() {
                if stopping.load(Ordering::SeqCst) {
                    return;
                }
                let Ok(client) = client else { continue };
                let Ok(server) = TcpStream::connect(upstream) else {
                    continue;
                };
                let converse = converse.clone();
                std::thread::spawn(move || converse(client, server));
            }
        });
        Self { addr, stop }
    }
}

impl Drop for Front {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect(self.addr);
    }
}

/// The proxy's one timing: a pause, then both connections cut.
fn cut_after(pause: Duration, server: &TcpStream, client: &TcpStream) {
    std::thread::sleep(pause);
    let _ = server.shutdown(Shutdown::Both);
    let _ = client.shutdown(Shutdown::Both);
}

/// A proxy's downstream half, on a thread of its own: what `server` says goes on to
/// `client`, each read passed when `passes` says so (it may wait first) and dropped when
/// not; the client's side is closed for writing when the server's ends.
pub fn answers(
    server: &TcpStream,
    client: &TcpStream,
    mut passes: impl FnMut() -> bool + Send + 'static,
) -> std::thread::JoinHandle<()> {
    let (mut from_server, mut to_client) = (
        server.try_clone().expect("clone"),
        client.try_clone().expect("clone"),
    );
    std::thread::spawn(move || {
        let mut buffer = [0u8; 8192];
        while let Ok(n) = from_server.read(&mut buffer) {
            if n == 0 {
                break;
            }
            if passes() && to_client.write_all(&buffer[..n]).is_err() {
                break;
            }
        }
        let _ = to_client.shutdown(Shutdown::Write);
    })
}

fn conversation(client: TcpStream, server: TcpStream, fault: Fault) {
    let dot_sent = Arc::new(AtomicBool::new(false));
    // Relay to client: everything, until the final dot has gone up under HoldReplyToDot.
    let held = dot_sent.clone();
    let down = answers(&server, &client, move || {
        !(fault == Fault::HoldReplyToDot && held.load(Ordering::SeqCst))
    });
    // Client to relay: watched for the end of the message data.
    let (mut from_client, mut to_server) = (client, server);
    let mut buffer = [0u8; 8192];
    let mut tail: Vec<u8> = Vec::new();
    while let Ok(n) = from_client.read(&mut buffer) {
        if n == 0 {
            break;
        }
        let chunk = &buffer[..n];
        let mut seen: Vec<u8> = tail.clone();
        seen.extend_from_slice(chunk);
        let found = seen
            .windows(END_OF_DATA.len())
            .position(|w| w == END_OF_DATA)
            .filter(|_| !dot_sent.load(Ordering::SeqCst));
        match (fault, found) {
            (Fault::CutBeforeDot, Some(at)) => {
                // Up to the last line's CRLF, not the dot: then both connections go.
                let upto = (at + 2).saturating_sub(tail.len());
                let _ = to_server.write_all(&chunk[..upto.min(chunk.len())]);
                cut_after(Duration::from_millis(200), &to_server, &from_client);
                break;
            }
            (Fault::HoldReplyToDot, Some(_)) => {
                dot_sent.store(true, Ordering::SeqCst);
                let _ = to_server.write_all(chunk);
                // The relay has the message; its answer never reaches the client.
                cut_after(HELD_FOR, &to_server, &from_client);
                break;
            }
            (_, Some(_)) => {
                dot_sent.store(true, Ordering::SeqCst);
                if to_server.write_all(chunk).is_err() {
                    break;
                }
            }
            (_, None) => {
                if to_server.write_all(chunk).is_err() {
                    break;
                }
            }
        }
        tail = seen[seen.len().saturating_sub(END_OF_DATA.len() - 1)..].to_vec();
    }
    let _ = to_server.shutdown(Shutdown::Write);
    let _ = down.join();
}

/// A private CA and a certificate for 127.0.0.1 it signed, made with the openssl tool.
pub struct Ca {
    pub dir: tempfile::TempDir,
    pub ca_cert: PathBuf,
    pub server_cert: PathBuf,
    pub server_key: PathBuf,
}

fn openssl(dir: &Path, args: &[&str]) {
    let out = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .output()
        .expect("openssl (./test installs it)");
    assert!(
        out.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

impl Ca {
    pub fn new(name: &str) -> Self {
        let dir = tempfile::tempdir().expect("ca dir");
        super::set_mode(dir.path(), 0o755);
        let subject = format!("/CN={name} test CA");
        openssl(
            dir.path(),
            &[
                "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", &subject,
                "-keyout", "ca.key", "-out", "ca.pem",
            ],
        );
        openssl(
            dir.path(),
            &[
                "req",
                "-newkey",
                "rsa:2048",
                "-nodes",
                "-subj",
                "/CN=localhost",
                "-keyout",
                "server.key",
                "-out",
                "server.csr",
            ],
        );
        std::fs::write(
            dir.path().join("san.ext"),
            "subjectAltName=IP:127.0.0.1,DNS:localhost\n",
        )
        .expect("ext");
        openssl(
            dir.path(),
            &[
                "x509",
                "-req",
                "-in",
                "server.csr",
                "-CA",
                "ca.pem",
                "-CAkey",
                "ca.key",
                "-CAcreateserial",
                "-days",
                "2",
                "-extfile",
                "san.ext",
                "-out",
                "server.pem",
            ],
        );
        Self {
            ca_cert: dir.path().join("ca.pem"),
            server_cert: dir.path().join("server.pem"),
            server_key: dir.path().join("server.key"),
            dir,
        }
    }
}
