//! The fake relay's log, in Postfix's own format (RFC 3339 stamps, as `maillog_file`
//! writes them when asked to): what the SMTP fake queued, and what it took in part and
//! never queued, so the verifier reads it as it reads a real relay's.

use std::io::Write;
use std::path::Path;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

pub struct MailLog {
    file: Mutex<std::fs::File>,
    next: AtomicU64,
    sessions: AtomicU64,
}

/// The process id the fake's lines name for every daemon but smtpd.
const PID: u64 = 4242;

impl MailLog {
    pub fn create(path: &Path) -> std::io::Result<Self> {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)?;
        let log = Self {
            file: Mutex::new(file),
            next: AtomicU64::new(0x09C0_0000),
            sessions: AtomicU64::new(5000),
        };
        log.line(
            "master",
            "daemon started -- version 3.7.11 (uns fake relay)",
        );
        Ok(log)
    }

    /// A new queue id, short form (upper-case hex).
    pub fn queue_id(&self) -> String {
        format!("7E4{:08X}", self.next.fetch_add(1, Ordering::Relaxed))
    }

    /// A process id for a new smtpd session: Postfix runs concurrent sessions in
    /// separate smtpd processes, and a session's lines are told apart by it.
    pub fn session_pid(&self) -> u64 {
        self.sessions.fetch_add(1, Ordering::Relaxed)
    }

    /// Appends `<stamp> fake postfix/<daemon>[pid]: <text>`.
    pub fn line(&self, daemon: &str, text: &str) {
        self.line_as(daemon, PID, text);
    }

    /// Appends a line of the process `pid`.
    pub fn line_as(&self, daemon: &str, pid: u64, text: &str) {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0.0, |d| d.as_secs_f64());
        let line = format!("{} uns-fake postfix/{daemon}[{pid}]: {text}\n", stamp(now));
        let mut file = self.file.lock().unwrap_or_else(|p| p.into_inner());
        let _ = file.write_all(line.as_bytes());
    }
}

/// `2026-11-29T22:15:57.123456+00:00`.
fn stamp(seconds: f64) -> String {
    let nanos = (seconds * 1e9) as i128;
    let Ok(at) = time::OffsetDateTime::from_unix_timestamp_nanos(nanos) else {
        return "1970-01-01T00:00:00.000000+00:00".into();
    };
    format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:06}+00:00",
        at.year(),
        u8::from(at.month()),
        at.day(),
        at.hour(),
        at.minute(),
        at.second(),
        at.microsecond()
    )
}
