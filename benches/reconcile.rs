//! `unsctl reconcile` at scale (issue 25): a window of 100,000 notifications and about
//! 1.2 million events, and 1 GB of relay log in Postfix's syslog format, most of it other
//! mail. Each figure is taken against its comparison in the same run:
//! - over the history alone, against the `sqlite3` shell streaming the window's events
//!   from the same store (target: at most 1.5 times as long);
//! - with the relay log, end to end (target: under 10 s and 256 MB peak RSS), and the
//!   log's share of it (the run with the log less the history alone) against `grep -c`
//!   over the same log (target: at most 3 times as long, issue 45).
//!
//! Runs alternate between the sides of each comparison, and the best of five is kept for
//! each, so a busy neighbour slows both rather than one.
//!
//! Run: cargo bench --bench reconcile [-- NOTIFICATIONS MEGABYTES]

#[path = "support.rs"]
mod support;

use std::process::Command;

/// The window's events, as the sqlite3 shell streams them: every event of every
/// notification with a channel attempt since `since`.
fn window_events(since: f64) -> String {
    format!(
        "SELECT e.id, e.notification_id, e.at, e.kind, e.payload FROM uns_events e \
         WHERE e.notification_id IN (SELECT a.notification_id FROM uns_events a \
         WHERE a.kind = 'CHANNEL_ATTEMPT_STARTED' AND a.at >= {since}) \
         ORDER BY e.notification_id, e.id"
    )
}

fn main() -> anyhow::Result<()> {
    let numbers: Vec<u64> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let notifications = numbers.first().copied().unwrap_or(100_000) as usize;
    let megabytes = numbers.get(1).copied().unwrap_or(1024);
    let unsctl = env!("CARGO_BIN_EXE_unsctl");
    // RECONCILE_BENCH_DIR keeps the store and the log there, to profile against.
    let dir = tempfile::tempdir()?;
    let place = std::env::var_os("RECONCILE_BENCH_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| dir.path().to_path_buf());
    std::fs::create_dir_all(&place)?;
    let db = place.join("reconcile.db");
    let _ = std::fs::remove_file(&db);
    support::generate_settled(&db, notifications, &[0, 1, 2])?;
    let conn = rusqlite::Connection::open(&db)?;
    let events: i64 = conn.query_row("SELECT COUNT(*) FROM uns_events", [], |r| r.get(0))?;
    let since: f64 = conn.query_row("SELECT MIN(at) FROM uns_events", [], |r| r.get(0))?;
    // The relay took the first attempt of half the post-data timeouts: each is a second
    // copy that only the log shows.
    let mut wanted: Vec<(i64, String, bool)> = Vec::new();
    {
        let mut stmt = conn.prepare(
            "SELECT n.id, MIN(e.at) FROM uns_notifications n JOIN uns_events e ON e.notification_id = n.id
             WHERE e.kind = 'CHANNEL_ATTEMPT_STARTED' AND n.error_message LIKE '%no reply%'
             GROUP BY n.id ORDER BY 2",
        )?;
        let rows = stmt.query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, f64>(1)?)))?;
        for (n, row) in rows.enumerate() {
            let (id, at) = row?;
            wanted.push((at as i64 + 1, format!("<{id}.1.1@uns.local>"), n % 2 == 0));
        }
    }
    let first = wanted.first().map_or(0, |w| w.0);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)?
        .as_secs() as i64;
    let log = place.join("mail.log");
    let bytes = support::write_log(&log, megabytes, first - 3600, now, &wanted)?;
    println!(
        "reconcile benchmark: {notifications} notifications, {events} events, {:.2} GB of relay log; best of {}",
        bytes as f64 / 1e9,
        support::RUNS
    );
    // The log's first megabyte, in whole lines: what reconcile costs with a log beside the
    // history, whatever the log's size (finding what to look for: the window's starts by
    // the index of kinds by time, and the answers drawn from what was found).
    let head = place.join("mail.head.log");
    {
        let mut bytes = Vec::with_capacity(1 << 20);
        std::io::Read::read_to_end(
            &mut std::io::Read::take(std::fs::File::open(&log)?, 1 << 20),
            &mut bytes,
        )?;
        let whole = bytes
            .iter()
            .rposition(|b| *b == b'\n')
            .map_or(0, |at| at + 1);
        std::fs::write(&head, &bytes[..whole])?;
    }
    let db_arg = db.display().to_string();
    let since_arg = since.to_string();
    let reconcile = |log: Option<&std::path::Path>| -> Box<dyn FnMut() -> Command> {
        let (db, since) = (db_arg.clone(), since_arg.clone());
        let log = log.map(|log| log.display().to_string());
        Box::new(move || {
            let mut c = Command::new(unsctl);
            c.args(["--db", &db, "reconcile", "--since", &since, "-o", "json"]);
            if let Some(log) = &log {
                c.args(["--smtp-from", "uns@uns.local", "--relay-log-zone", "UTC"])
                    .args(["--relay-log", log]);
            }
            c
        })
    };
    let sql = window_events(since);
    let shell = {
        let db = db_arg.clone();
        Box::new(move || {
            let mut c = Command::new("sqlite3");
            c.arg(&db).arg(&sql);
            c
        }) as Box<dyn FnMut() -> Command>
    };
    let mut commands = vec![
        shell,
        reconcile(None),
        reconcile(Some(&log)),
        reconcile(Some(&head)),
    ];
    commands.extend(support::floors(&log));
    let measured = support::race(commands)?;
    let (shell, history, with_log) = (&measured[0], &measured[1], &measured[2]);
    let with_head = &measured[3];
    let (grep, wc) = (&measured[4], &measured[5]);
    let secs = |m: &support::Measured| m.elapsed.as_secs_f64();
    let mb = |m: &support::Measured| m.max_rss_kib as f64 / 1024.0;
    println!(
        "  sqlite3 shell, the window's events          {:>6.2} s   peak RSS {:>6.1} MB",
        secs(shell),
        mb(shell)
    );
    println!(
        "  unsctl reconcile (the history alone)        {:>6.2} s   peak RSS {:>6.1} MB   ratio {:.2} (target <= 1.5)",
        secs(history),
        mb(history),
        secs(history) / secs(shell)
    );
    println!(
        "  unsctl reconcile --relay-log (1 GB)         {:>6.2} s   peak RSS {:>6.1} MB   (targets < 10 s, < 256 MB)",
        secs(with_log),
        mb(with_log)
    );
    support::print_floors(grep, wc);
    let share = secs(with_log) - secs(history);
    println!(
        "  the log's share (with the log - the history alone) {:.2} s = {:.1}x grep (target <= 3x)",
        share,
        share / secs(grep)
    );
    // Of that share, what a log of a megabyte costs already: the part no reader of the
    // log, however fast, takes away.
    let fixed = secs(with_head) - secs(history);
    println!(
        "    of which with the log's first MB alone {:.2} s = {:.1}x grep (the window's starts and the answers); reading the rest {:.2} s = {:.1}x grep",
        fixed,
        fixed / secs(grep),
        share - fixed,
        (share - fixed) / secs(grep)
    );
    // What it found: the log's second copies counted, by class.
    let report: serde_json::Value =
        serde_json::from_slice(&reconcile(Some(&log))().output()?.stdout).unwrap_or_default();
    println!(
        "  EMAIL classes with the log: {}   (the relay queued the message of {} timed-out attempts, and lost {} before the dot)",
        report["summary"]["EMAIL"],
        wanted.iter().filter(|w| w.2).count(),
        wanted.iter().filter(|w| !w.2).count()
    );
    Ok(())
}
