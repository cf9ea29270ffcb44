//! Shared by the benchmarks: synthetic stores written in bulk, and timing a child process
//! with its peak memory.
#![allow(dead_code)]

use rusqlite::params;
use std::io::Write;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};
use unsctl::runtime::schema::{self, OpenMode};

/// Writes `entries` DLQ rows with about ten events each, cycling through the three
/// branches (late success after LEASE_LOST, post-data timeout, rejection), in one
/// transaction. They died one a second up to now, so `--since 1h` selects the newest
/// 3,600. Returns one id of each branch.
pub fn generate(db: &Path, entries: usize) -> anyhow::Result<Vec<String>> {
    generate_branches(db, entries, &[0, 1, 2])
}

/// As [`generate`], cycling through only the given branches (0 RESOLVE, 1 VERIFY, 2 REPLAY).
pub fn generate_branches(
    db: &Path,
    entries: usize,
    branches: &[usize],
) -> anyhow::Result<Vec<String>> {
    generate_until(db, entries, branches, unix_now()?)
}

/// How long before now the stores of [`generate_settled`] end: more than an attempt's
/// lease (60 s) and the default clock skew, with room to spare.
pub const SETTLED_FOR: f64 = 600.0;

/// As [`generate_branches`], the last entry dying [`SETTLED_FOR`] ago: every attempt's
/// window is past when the benchmark reads it, so the answers do not depend on the second
/// it runs (a window not yet past is never proven either way) and two runs of one
/// benchmark count alike.
pub fn generate_settled(
    db: &Path,
    entries: usize,
    branches: &[usize],
) -> anyhow::Result<Vec<String>> {
    generate_until(db, entries, branches, unix_now()? - SETTLED_FOR)
}

/// Now, in whole unix seconds.
fn unix_now() -> anyhow::Result<f64> {
    Ok(std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)?
        .as_secs() as f64)
}

/// As [`generate_branches`], the last entry dying at `end` (unix seconds).
pub fn generate_until(
    db: &Path,
    entries: usize,
    branches: &[usize],
    end: f64,
) -> anyhow::Result<Vec<String>> {
    let conn = schema::open(db, OpenMode::Create)?;
    let first = end - entries as f64;
    conn.execute_batch("BEGIN")?;
    let mut ids = Vec::new();
    {
        let mut row = conn.prepare(
            "INSERT INTO uns_notifications (id, status, dead_letter, attempts, cycle, cycle_attempts, max_attempts,
                 channels, payload, next_attempt_at, error_message, created_at, updated_at)
             VALUES (?1, 'DEAD', 1, 3, 1, 3, 3, ?2, '{\"recipient\":\"ops@example.com\",\"subject\":\"bench\"}', ?3, ?4, ?3, ?3)",
        )?;
        let mut event = conn.prepare(
            "INSERT INTO uns_events (notification_id, at, kind, payload) VALUES (?1, ?2, ?3, ?4)",
        )?;
        for n in 0..entries {
            let id = format!("n-{n:012}");
            let at = first + n as f64;
            let branch = branches[n % branches.len()];
            let (channels, error) = match branch {
                0 => (
                    "[\"EMAIL\"]",
                    "Provider outcome unknown: recovery exhausted the attempt budget",
                ),
                1 => (
                    "[\"EMAIL\"]",
                    "Provider outcome unknown: EMAIL no reply after the message data was sent",
                ),
                _ => (
                    "[\"SLACK\"]",
                    "Attempt budget exhausted (3 of 3): SLACK HTTP 500",
                ),
            };
            row.execute(params![id, channels, at, error])?;
            let mut add =
                |kind: &str, payload: String| event.execute(params![id, at, kind, payload]);
            add(
                "SUBMITTED",
                format!(
                    "{{\"attempt\":0,\"channels\":{channels},\"cycle\":1,\"cycle_attempt\":0,\"idempotency_key\":null}}"
                ),
            )?;
            let channel = if branch == 2 { "SLACK" } else { "EMAIL" };
            for attempt in 1..=3 {
                let token = format!("{n:08x}-0000-4000-8000-{attempt:012}");
                let common = format!(
                    "\"attempt\":{attempt},\"cycle\":1,\"cycle_attempt\":{attempt},\"lease_token\":\"{token}\""
                );
                add(
                    "ATTEMPT_STARTED",
                    format!(
                        "{{{common},\"lease_until\":{},\"reclaimed\":{},\"worker_id\":\"bench\"}}",
                        at + 60.0,
                        attempt > 1
                    ),
                )?;
                add(
                    "CHANNEL_ATTEMPT_STARTED",
                    format!(
                        "{{{common},\"channel\":\"{channel}\",\"provider_effect_may_have_occurred\":true}}"
                    ),
                )?;
                let (success, outcome, message_id) = match (branch, attempt) {
                    (0, 1) => (true, "ACCEPTED", format!("\"<{id}.1.1@uns.local>\"")),
                    (1, _) => (false, "UNKNOWN", "null".to_string()),
                    _ => (false, "REJECTED", "null".to_string()),
                };
                if branch < 2 && attempt == 1 {
                    // The lease ran out mid-call: the two lease-loss cases.
                    add(
                        "LEASE_LOST",
                        format!("{{{common},\"provider_effect_may_have_occurred\":true}}"),
                    )?;
                }
                add(
                    "CHANNEL_ATTEMPT_RESULT",
                    format!(
                        "{{{common},\"channel\":\"{channel}\",\"error\":null,\"message_id\":{message_id},\"metadata\":{{\"provider_outcome\":\"{outcome}\",\"retryable\":true}},\"success\":{success}}}"
                    ),
                )?;
            }
            add(
                "DEAD_LETTERED",
                format!(
                    "{{\"attempt\":3,\"cycle\":1,\"cycle_attempt\":3,\"error_message\":\"{error}\",\"lease_token\":null}}"
                ),
            )?;
            if n < 3 {
                ids.push(id);
            }
        }
    }
    conn.execute_batch("COMMIT")?;
    conn.execute_batch("PRAGMA wal_checkpoint(TRUNCATE)")?;
    Ok(ids)
}

pub struct Measured {
    pub elapsed: Duration,
    pub max_rss_kib: i64,
    pub success: bool,
}

/// Runs `command` to completion with its output read and dropped; wall time and peak
/// RSS.
///
/// The peak is GNU time's reading where it is installed: a child's `ru_maxrss` starts at
/// the high-water mark of the process that spawned it (Linux keeps it across fork and
/// exec), so a benchmark that holds a generated store would be charged to the command.
/// `time` is a small process, and what it spawns starts from its size.
pub fn measure(command: &mut Command) -> anyhow::Result<Measured> {
    const TIME: &str = "/usr/bin/time";
    if !Path::new(TIME).exists() {
        return measure_directly(command);
    }
    let peak = tempfile::NamedTempFile::new()?;
    let mut timed = Command::new(TIME);
    timed
        .args(["-q", "-f", "%M", "-o"])
        .arg(peak.path())
        .arg(command.get_program())
        .args(command.get_args());
    for (name, value) in command.get_envs() {
        match value {
            Some(value) => timed.env(name, value),
            None => timed.env_remove(name),
        };
    }
    if let Some(dir) = command.get_current_dir() {
        timed.current_dir(dir);
    }
    let mut measured = measure_directly(&mut timed)?;
    let reading = std::fs::read_to_string(peak.path())?;
    measured.max_rss_kib = reading
        .lines()
        .filter_map(|line| line.trim().parse::<i64>().ok())
        .next_back()
        .ok_or_else(|| anyhow::anyhow!("GNU time printed no peak: {reading:?}"))?;
    Ok(measured)
}

/// [`measure`] by `wait4` alone: the peak includes the spawning process's.
fn measure_directly(command: &mut Command) -> anyhow::Result<Measured> {
    let start = Instant::now();
    // Output goes to a pipe that is read, never to /dev/null: GNU grep stops at its first
    // match when it sees its output thrown away, which would make a floor of nothing.
    let mut child = command
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()?;
    let drain = child
        .stdout
        .take()
        .map(|mut out| std::thread::spawn(move || std::io::copy(&mut out, &mut std::io::sink())));
    let pid = child.id() as libc::pid_t;
    let mut status = 0;
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: waits for our own child; `status` and `usage` are valid for writes.
    let waited = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    if let Some(drain) = drain {
        let _ = drain.join();
    }
    let elapsed = start.elapsed();
    std::mem::forget(child);
    Ok(Measured {
        elapsed,
        max_rss_kib: usage.ru_maxrss,
        success: waited == pid && libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
    })
}

/// Runs of each command a race keeps the best of.
pub const RUNS: usize = 5;

/// The best of `RUNS` runs of each command, the runs interleaved.
pub fn race(mut commands: Vec<Box<dyn FnMut() -> Command>>) -> anyhow::Result<Vec<Measured>> {
    let mut best: Vec<Option<Measured>> = commands.iter().map(|_| None).collect();
    for _ in 0..RUNS {
        for (make, best) in commands.iter_mut().zip(best.iter_mut()) {
            let measured = measure(&mut make())?;
            anyhow::ensure!(measured.success, "a benchmarked command failed");
            if best.as_ref().is_none_or(|b| measured.elapsed < b.elapsed) {
                *best = Some(measured);
            }
        }
    }
    best.into_iter()
        .map(|b| b.ok_or_else(|| anyhow::anyhow!("no run")))
        .collect()
}

/// `Nov 29 22:15:57` for unix seconds `at`, in UTC.
pub fn syslog(at: i64) -> String {
    jiff::Timestamp::from_second(at)
        .expect("time")
        .strftime("%b %e %H:%M:%S")
        .to_string()
}

/// Writes about `megabytes` of log covering `from..to`, with the wanted messages spread
/// through the traffic at their own times.
pub fn write_log(
    path: &std::path::Path,
    megabytes: u64,
    from: i64,
    to: i64,
    wanted: &[(i64, String, bool)],
) -> anyhow::Result<u64> {
    let mut out = std::io::BufWriter::with_capacity(1 << 20, std::fs::File::create(path)?);
    let target = megabytes << 20;
    let mut written = 0u64;
    let mut queue = 0x1000_0000u64;
    let mut next_wanted = wanted.iter().peekable();
    // Other traffic: 7 lines a message (about 780 bytes), spread evenly over the span.
    let per_message = 780u64;
    let messages = target / per_message;
    let step = (to - from) as f64 / messages.max(1) as f64;
    for n in 0..messages {
        let at = from + (n as f64 * step) as i64;
        while let Some((when, message_id, queued)) = next_wanted.peek() {
            if *when > at {
                break;
            }
            queue += 1;
            let stamp = syslog(*when);
            // The runtime's own session, as Postfix logs it, in an smtpd process of its own.
            let mut lines = format!(
                "{stamp} relay postfix/smtpd[2005]: connect from uns.internal[10.0.0.7]\n\
                 {stamp} relay postfix/smtpd[2005]: {queue:X}: client=uns.internal[10.0.0.7]\n\
                 {stamp} relay postfix/cleanup[2002]: {queue:X}: message-id={message_id}\n"
            );
            if *queued {
                lines.push_str(&format!(
                    "{stamp} relay postfix/qmgr[2003]: {queue:X}: from=<uns@uns.local>, size=812, nrcpt=1 (queue active)\n\
                     {stamp} relay postfix/smtpd[2005]: disconnect from uns.internal[10.0.0.7] ehlo=1 mail=1 rcpt=1 data=1 commands=4\n"
                ));
            } else {
                lines.push_str(&format!(
                    "{stamp} relay postfix/smtpd[2005]: lost connection after DATA (512 bytes) from uns.internal[10.0.0.7]\n\
                     {stamp} relay postfix/smtpd[2005]: disconnect from uns.internal[10.0.0.7] ehlo=1 mail=1 rcpt=1 data=0/1 commands=3/4\n"
                ));
            }
            out.write_all(lines.as_bytes())?;
            written += lines.len() as u64;
            next_wanted.next();
        }
        queue += 1;
        let stamp = syslog(at);
        let lines = format!(
            "{stamp} relay postfix/smtpd[2001]: connect from app.internal[10.0.0.5]\n\
             {stamp} relay postfix/smtpd[2001]: {queue:X}: client=app.internal[10.0.0.5]\n\
             {stamp} relay postfix/cleanup[2002]: {queue:X}: message-id=<{n}.other@mail.example.com>\n\
             {stamp} relay postfix/qmgr[2003]: {queue:X}: from=<billing@example.com>, size=4512, nrcpt=1 (queue active)\n\
             {stamp} relay postfix/smtpd[2001]: disconnect from app.internal[10.0.0.5] ehlo=1 mail=1 rcpt=1 data=1 quit=1 commands=5\n\
             {stamp} relay postfix/smtp[2004]: {queue:X}: to=<customer{n}@example.net>, relay=mx.example.net[192.0.2.10]:25, delay=0.4, delays=0.01/0.01/0.2/0.18, dsn=2.0.0, status=sent (250 2.0.0 OK queued)\n\
             {stamp} relay postfix/qmgr[2003]: {queue:X}: removed\n"
        );
        out.write_all(lines.as_bytes())?;
        written += lines.len() as u64;
    }
    out.flush()?;
    Ok(written)
}

/// The floor for reading `log` once, as the fastest tools do: `grep -c message-id=` (the
/// needle every relay-log answer starts from) and `wc -l`, each a command for [`race`].
pub fn floors(log: &std::path::Path) -> Vec<Box<dyn FnMut() -> Command>> {
    let (grep_log, wc_log) = (log.to_path_buf(), log.to_path_buf());
    vec![
        Box::new(move || {
            let mut c = Command::new("grep");
            c.args(["-c", "message-id="]).arg(&grep_log);
            c
        }),
        Box::new(move || {
            let mut c = Command::new("wc");
            c.arg("-l").arg(&wc_log);
            c
        }),
    ]
}

/// The floors' lines: each time, beside the figure they bound.
pub fn print_floors(grep: &Measured, wc: &Measured) {
    println!(
        "  grep -c message-id= (the floor)        {:>6.2} s",
        grep.elapsed.as_secs_f64()
    );
    println!(
        "  wc -l                                   {:>6.2} s",
        wc.elapsed.as_secs_f64()
    );
}
