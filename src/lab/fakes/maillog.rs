//! The fake relay's log, in Postfix's own line shapes: what the SMTP fake queued, and what
//! it took in part and never queued, so the verifier reads it as it reads a real relay's.
//! It writes in any of the layouts the reader reads (`relay_log::layouts`), one picked
//! for the whole log or a different one for every line.

use crate::verify::relay_log::layouts::{Layout, PREFIXES, Prefix, STAMPS, Stamps};
use std::io::Write;
use std::path::Path;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

/// How the fake's log is written: one layout throughout, or every line in the next of
/// several.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Layouts {
    One(Layout),
    EachLine(Vec<Layout>),
}

impl Layouts {
    /// Every layout that names the host, with and without each container prefix, taken
    /// in turn line by line.
    pub fn every_hosted() -> Self {
        let mut all = Vec::new();
        for stamps in STAMPS.iter().filter(|s| **s != Stamps::Level) {
            for prefix in PREFIXES {
                all.push(Layout {
                    stamps: *stamps,
                    prefix,
                    name: "postfix",
                });
            }
        }
        Layouts::EachLine(all)
    }

    /// In words, for a report.
    pub fn describe(&self) -> String {
        match self {
            Layouts::One(layout) => format!("{:?} {:?}", layout.stamps, layout.prefix),
            Layouts::EachLine(all) => format!("each line in the next of {} layouts", all.len()),
        }
    }

    /// A pick by `seed`: one hosted layout, or all of them line by line.
    pub fn pick(seed: u64) -> Self {
        let Layouts::EachLine(all) = Self::every_hosted() else {
            return Layouts::One(Layout::CLASSIC);
        };
        let at = (seed as usize) % (all.len() + 1);
        match all.get(at) {
            Some(layout) => Layouts::One(*layout),
            None => Layouts::EachLine(all),
        }
    }
}

pub struct MailLog {
    file: Mutex<std::fs::File>,
    next: AtomicU64,
    sessions: AtomicU64,
    layouts: Mutex<Layouts>,
    lines: AtomicU64,
}

/// The process id the fake's lines name for every daemon but smtpd.
const PID: u64 = 4242;

/// The host the fake's lines name: the name its EHLO reply gives.
pub const HOST: &str = "uns-fake";

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
            layouts: Mutex::new(Layouts::One(Layout {
                stamps: Stamps::Rfc3339,
                prefix: Prefix::None,
                name: "postfix",
            })),
            lines: AtomicU64::new(0),
        };
        log.line(
            "master",
            "daemon started -- version 3.7.11 (uns fake relay)",
        );
        Ok(log)
    }

    /// Writes the lines from now on in `layouts`.
    pub fn set_layouts(&self, layouts: Layouts) {
        *self.layouts.lock().unwrap_or_else(|p| p.into_inner()) = layouts;
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

    /// Appends `<stamp> uns-fake postfix/<daemon>[pid]: <text>`, in the layout in force.
    pub fn line(&self, daemon: &str, text: &str) {
        self.line_as(daemon, PID, text);
    }

    /// Appends a line of the process `pid`.
    pub fn line_as(&self, daemon: &str, pid: u64, text: &str) {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0.0, |d| d.as_secs_f64());
        let layout = match &*self.layouts.lock().unwrap_or_else(|p| p.into_inner()) {
            Layouts::One(layout) => *layout,
            Layouts::EachLine(all) => {
                let n = self.lines.fetch_add(1, Ordering::Relaxed) as usize;
                all.get(n % all.len().max(1))
                    .copied()
                    .unwrap_or(Layout::CLASSIC)
            }
        };
        let line = layout.line(now, HOST, &format!("postfix/{daemon}[{pid}]"), text);
        let mut file = self.file.lock().unwrap_or_else(|p| p.into_inner());
        let _ = file.write_all(format!("{line}\n").as_bytes());
    }
}
