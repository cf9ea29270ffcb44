//! `unsctl verify` at scale: 10,000 VERIFY entries (post-data timeouts) against 1 GB of
//! relay log in Postfix's syslog format, most of it other mail. Half the entries' messages
//! were queued, a quarter reached the relay but were never queued (the connection dropped
//! before the final dot), a quarter never reached it. Target: under 10 s, end to end, in
//! one pass over the log.
//!
//! Run: cargo bench --bench verify [-- ENTRIES MEGABYTES]

#[path = "support.rs"]
mod support;

use std::io::Write;
use std::process::Command;

/// `Nov 29 22:15:57` for unix seconds `at`, in UTC.
fn syslog(at: i64) -> String {
    let t = time::OffsetDateTime::from_unix_timestamp(at).expect("time");
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    format!(
        "{} {:>2} {:02}:{:02}:{:02}",
        MONTHS[u8::from(t.month()) as usize - 1],
        t.day(),
        t.hour(),
        t.minute(),
        t.second()
    )
}

/// Writes about `megabytes` of log covering `from..to`, with the wanted messages spread
/// through the traffic at their own times.
fn write_log(
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

fn main() -> anyhow::Result<()> {
    let numbers: Vec<u64> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let entries = numbers.first().copied().unwrap_or(10_000) as usize;
    let megabytes = numbers.get(1).copied().unwrap_or(1024);
    let unsctl = env!("CARGO_BIN_EXE_unsctl");
    let dir = tempfile::tempdir()?;
    let db = dir.path().join("verify.db");
    // Post-data timeouts only: every entry is VERIFY, its one uncertain attempt attempt 1
    // of cycle 1 (the other attempts were refused).
    support::generate_branches(&db, entries, &[1])?;
    let conn = rusqlite::Connection::open(&db)?;
    let mut wanted: Vec<(i64, String, bool)> = Vec::new();
    {
        let mut stmt = conn.prepare(
            "SELECT n.id, MIN(e.at) FROM uns_notifications n JOIN uns_events e ON e.notification_id = n.id
             WHERE e.kind = 'CHANNEL_ATTEMPT_STARTED' GROUP BY n.id ORDER BY 2",
        )?;
        let rows = stmt.query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, f64>(1)?)))?;
        for (n, row) in rows.enumerate() {
            let (id, at) = row?;
            // Half queued, a quarter lost before the dot, a quarter never seen.
            if n % 4 != 3 {
                wanted.push((at as i64 + 1, format!("<{id}.1.1@uns.local>"), n % 4 < 2));
            }
        }
    }
    let first = wanted.first().map_or(0, |w| w.0);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)?
        .as_secs() as i64;
    let log = dir.path().join("mail.log");
    let written_at = std::time::Instant::now();
    let bytes = write_log(&log, megabytes, first - 3600, now, &wanted)?;
    println!(
        "verify benchmark: {entries} VERIFY entries, {:.2} GB of relay log ({} wanted lines), written in {:.1} s",
        bytes as f64 / 1e9,
        wanted.len(),
        written_at.elapsed().as_secs_f64()
    );
    // The log is in UTC; the default margin of two minutes. The generated store's starts
    // do not record the envelope sender, as a store from before the adapter did: name it.
    let command = |extra: &[&str]| {
        let mut command = Command::new(unsctl);
        command
            .arg("--db")
            .arg(&db)
            .args(["verify", "--smtp-from", "uns@uns.local"])
            .args(["--relay-log-zone", "UTC", "--relay-log"])
            .arg(&log)
            .args(["-o", "json"])
            .args(extra);
        command
    };
    let report: serde_json::Value =
        serde_json::from_slice(&command(&[]).output()?.stdout).unwrap_or_default();
    let asked = support::measure(&mut command(&[]))?;
    anyhow::ensure!(asked.success, "verify failed");
    println!(
        "  unsctl verify (answers only)           {:>6.2} s   peak RSS {:>5.1} MB   {} answers: {}",
        asked.elapsed.as_secs_f64(),
        asked.max_rss_kib as f64 / 1024.0,
        report["answers"].as_array().map_or(0, Vec::len),
        report["summary"]
    );
    let recorded = support::measure(&mut command(&[
        "--record",
        "--confirm",
        "--yes",
        "--reason",
        "bench",
    ]))?;
    anyhow::ensure!(recorded.success, "verify --record failed");
    let written: i64 = conn.query_row(
        "SELECT COUNT(*) FROM uns_events WHERE kind = 'VERIFIED'",
        [],
        |r| r.get(0),
    )?;
    println!(
        "  unsctl verify --record --confirm       {:>6.2} s   peak RSS {:>5.1} MB   {written} VERIFIED events (target < 10 s)",
        recorded.elapsed.as_secs_f64(),
        recorded.max_rss_kib as f64 / 1024.0
    );
    Ok(())
}
