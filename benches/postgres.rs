//! The store on PostgreSQL against the figures issue 46 names, each a ratio in one run,
//! against a private cluster of the distribution's (the tests' own, `tests/support`):
//!
//! 1. Claims per second: two `runtime worker` processes on one PostgreSQL database
//!    against one process on the SQLite file, 10,000 Slack notifications each through
//!    fakes that answer at once, the same queued store (copied with `store copy`).
//! 2. `dlq triage -o json` over 100,000 DLQ entries (about 1.2 million events) in the
//!    database against `psql` streaming the same rows with `COPY ... TO STDOUT`: the very
//!    two reads the walk makes (the entries as triage reads them, then their events), one
//!    after the other (target <= 1.0); and, as before, against the events alone. The peak
//!    RSS of triage (target <= 64 MB).
//!
//! Runs alternate between the sides of each comparison and the best is kept for each,
//! so a busy neighbour slows both rather than one.
//!
//! Run: cargo bench --bench postgres [-- NOTIFICATIONS ENTRIES]

#[path = "support.rs"]
mod generated;
#[path = "../tests/support/mod.rs"]
#[allow(unused_imports, dead_code, clippy::all)]
mod support;

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use support::postgres;
use unsctl::lab::fakes::Fakes;

/// The DLQ's events alone, the comparison of the first figures.
const EVENTS_ALONE: &str = "COPY (SELECT e.id, e.notification_id, e.at, e.kind, e.payload \
    FROM uns_events e JOIN uns_notifications n ON n.id = e.notification_id \
    WHERE n.dead_letter = 1 ORDER BY e.notification_id, e.id) TO STDOUT";

/// Worker rounds: each engine's best is kept.
const ROUNDS: usize = 3;
const CONCURRENCY: &str = "8";

fn arg(n: usize, default: usize) -> usize {
    std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .nth(n)
        .and_then(|a| a.parse().ok())
        .unwrap_or(default)
}

fn main() -> anyhow::Result<()> {
    let notifications = arg(0, 10_000);
    let entries = arg(1, 100_000);
    let cluster = postgres::cluster();
    println!(
        "postgres benchmark: a private cluster on 127.0.0.1:{}",
        cluster.port
    );
    claims(cluster, notifications)?;
    triage(cluster, entries)?;
    Ok(())
}

/// `runtime worker` on `db` (a file or a URL), its providers the fakes.
fn worker(db: &str, fakes: &Fakes, name: &str) -> anyhow::Result<Child> {
    Ok(Command::new(env!("CARGO_BIN_EXE_unsctl"))
        .args([
            "runtime",
            "worker",
            "--db",
            db,
            "--concurrency",
            CONCURRENCY,
        ])
        .args(["--poll-ms", "5", "--worker-id", name])
        .env("PGPASSWORD", postgres::PASSWORD)
        .env("UNS_SLACK_WEBHOOK_URL", fakes.slack_url())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()?)
}

/// Claims per second of `workers` processes on `db` until `count` reports all
/// delivered: ATTEMPT_STARTED events over the time from the first start.
fn run_workers(
    db: &str,
    processes: usize,
    fakes: &Fakes,
    mut count: impl FnMut() -> anyhow::Result<(i64, i64)>,
    notifications: usize,
) -> anyhow::Result<f64> {
    let start = Instant::now();
    let mut children = (0..processes)
        .map(|n| worker(db, fakes, &format!("bench-{n}")))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let (claims, elapsed) = loop {
        let (delivered, claims) = count()?;
        if delivered as usize >= notifications {
            break (claims, start.elapsed());
        }
        anyhow::ensure!(
            start.elapsed() < Duration::from_secs(600),
            "the workers did not finish"
        );
        std::thread::sleep(Duration::from_millis(5));
    };
    for child in &mut children {
        let _ = Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .status();
        let _ = child.wait();
    }
    Ok(claims as f64 / elapsed.as_secs_f64())
}

const COUNTS: &str = "SELECT (SELECT COUNT(*) FROM uns_notifications WHERE status = 'DELIVERED'), \
    (SELECT COUNT(*) FROM uns_events WHERE kind = 'ATTEMPT_STARTED')";

fn claims(cluster: &postgres::Cluster, notifications: usize) -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let queued = dir.path().join("queued.db");
    queue(&queued, notifications)?;
    let (mut sqlite, mut pg) = (0f64, 0f64);
    for round in 0..ROUNDS {
        // Fakes of the round's own: the same notifications are sent again each round.
        let fakes = Fakes::start()?;
        // A fresh copy of the same queue for each side, each round.
        let file = dir.path().join(format!("round-{round}.db"));
        std::fs::copy(&queued, &file)?;
        let database = cluster.database();
        database.copy_from(&queued);
        let file_arg = file.display().to_string();
        let reader = rusqlite::Connection::open(&file)?;
        let on_file = run_workers(
            &file_arg,
            1,
            &fakes,
            || Ok(reader.query_row(COUNTS, [], |r| Ok((r.get(0)?, r.get(1)?)))?),
            notifications,
        )?;
        let mut client = database.client();
        let on_database = run_workers(
            &database.url,
            2,
            &fakes,
            || {
                let row = client.query_one(COUNTS, &[])?;
                Ok((row.get(0), row.get(1)))
            },
            notifications,
        )?;
        sqlite = sqlite.max(on_file);
        pg = pg.max(on_database);
    }
    println!(
        "  claims/s, 1 worker process on SQLite (concurrency {CONCURRENCY})      {sqlite:>8.0}\n  claims/s, 2 worker processes on PostgreSQL (concurrency {CONCURRENCY} each) {pg:>8.0}   ratio {:.2}",
        pg / sqlite
    );
    Ok(())
}

/// `notifications` Slack notifications, queued and due now, in a new SQLite store.
fn queue(db: &Path, notifications: usize) -> anyhow::Result<()> {
    use unsctl::clock::{Clock, SystemClock};
    use unsctl::runtime::engine::{self, NewNotification};
    let conn = unsctl::runtime::schema::open(db, unsctl::runtime::schema::OpenMode::Create)?;
    // Each submission is a transaction of its own; the queue is made once.
    conn.execute_batch("PRAGMA synchronous = OFF")?;
    for n in 0..notifications {
        engine::submit(
            &unsctl::db::Db::Sqlite(&conn),
            SystemClock.now(),
            &NewNotification {
                channels: [unsctl::model::Channel::Slack].into_iter().collect(),
                payload: serde_json::json!({"subject": format!("bench {n}"), "body": "load"}),
                idempotency_key: None,
                max_attempts: 3,
            },
        )?;
    }
    Ok(())
}

fn triage(cluster: &postgres::Cluster, entries: usize) -> anyhow::Result<()> {
    // POSTGRES_BENCH_DIR keeps the generated store there, for another reader to be run
    // on the very same data.
    let dir = tempfile::tempdir()?;
    let db = match std::env::var_os("POSTGRES_BENCH_DIR") {
        Some(kept) => std::path::PathBuf::from(kept).join("big.db"),
        None => dir.path().join("big.db"),
    };
    let made = Instant::now();
    if !db.exists() {
        generated::generate(&db, entries)?;
    }
    let database = cluster.database();
    database.copy_from(&db);
    let events: i64 = database
        .client()
        .query_one("SELECT COUNT(*) FROM uns_events", &[])?
        .get(0);
    println!(
        "  {entries} DLQ entries, {events} events in PostgreSQL (made and copied in {:.1} s), best of {}",
        made.elapsed().as_secs_f64(),
        generated::RUNS
    );
    database.client().batch_execute("VACUUM ANALYZE")?;
    let url = database.url.clone();
    let psql = cluster.bin.join("psql");
    // The very reads `dlq triage` makes of the whole DLQ (they take no values).
    let selection = unsctl::store::Selection::default();
    let (entries_sql, events_sql, values) = unsctl::store::postgres_reads(
        unsctl::store::Rows::Dlq(&selection),
        unsctl::store::Events::All,
    );
    anyhow::ensure!(values.is_empty(), "a COPY takes no values: {values:?}");
    let psql_copy = |copies: Vec<String>| -> Box<dyn FnMut() -> Command> {
        let (psql, url) = (psql.clone(), url.clone());
        Box::new(move || {
            let mut c = Command::new(&psql);
            c.args(["-X", "-q", "-d", &url]);
            for copy in &copies {
                c.args(["-c", copy]);
            }
            c.env("PGPASSWORD", postgres::PASSWORD);
            c
        })
    };
    let measured = generated::race(vec![
        psql_copy(vec![
            format!("COPY ({entries_sql}) TO STDOUT"),
            format!("COPY ({events_sql}) TO STDOUT"),
        ]),
        psql_copy(vec![EVENTS_ALONE.to_string()]),
        Box::new(move || {
            let mut c = Command::new(env!("CARGO_BIN_EXE_unsctl"));
            c.args(["--db", &url, "dlq", "triage", "-o", "json"])
                .env("PGPASSWORD", postgres::PASSWORD);
            c
        }),
    ])?;
    let (same_rows, events_alone, ours) = (&measured[0], &measured[1], &measured[2]);
    let seconds = |m: &generated::Measured| m.elapsed.as_secs_f64();
    println!(
        "  psql COPY of the same rows TO STDOUT            {:>6.2} s   peak RSS {:>5.1} MB",
        seconds(same_rows),
        same_rows.max_rss_kib as f64 / 1024.0
    );
    println!(
        "  psql COPY of the events alone TO STDOUT         {:>6.2} s",
        seconds(events_alone),
    );
    println!(
        "  unsctl dlq triage -o json on PostgreSQL         {:>6.2} s   ratio {:.2} (target <= 1.0), {:.2} to the events alone   peak RSS {:>5.1} MB (target <= 64)",
        seconds(ours),
        seconds(ours) / seconds(same_rows),
        seconds(ours) / seconds(events_alone),
        ours.max_rss_kib as f64 / 1024.0
    );
    Ok(())
}
