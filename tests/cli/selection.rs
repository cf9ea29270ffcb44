//! Selection (`--channel`, `--error`, `--since`, `--until`, `--limit`): each filter picks
//! the same entries over both backends, byte for byte; a filtered bulk replay or resolve
//! acts on exactly what the filter selects; `events --limit` gives the runbook query's rows
//! in its order; a version 1 store is read as it is and migrated only by the runtime.

use crate::support;

use serde_json::Value;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};
use unsctl::model::Channel;
use unsctl::runtime::engine::DeliveryResult;
use unsctl::runtime::schema::{self, OpenMode};

/// Seconds between seeded entries.
const STEP: f64 = 600.0;
const T0: f64 = 1_761_192_000.0;

/// What was seeded, to know what each filter must select.
struct Seeded {
    db: PathBuf,
    /// (id, branch, channel, error words, dead-lettered at)
    entries: Vec<(String, &'static str, Channel, &'static str, f64)>,
}

/// Twelve DLQ entries ten minutes apart: REPLAY on SLACK and on EMAIL with different
/// errors, VERIFY on EMAIL, RESOLVE on EMAIL.
fn seed(dir: &Path, name: &str) -> Seeded {
    let db = dir.join(name);
    let conn = schema::open(&db, OpenMode::Create).expect("store");
    let mut entries = Vec::new();
    for n in 0..12 {
        let at = T0 + n as f64 * STEP;
        let (id, branch, channel, error) = match n % 4 {
            0 => (
                support::replay_entry(&conn, at),
                "REPLAY",
                Channel::Slack,
                "HTTP 400",
            ),
            1 => (
                support::play(
                    &conn,
                    at,
                    &[Channel::Email],
                    &[DeliveryResult::rejected("550 mailbox unavailable", false)],
                    1,
                ),
                "REPLAY",
                Channel::Email,
                "mailbox",
            ),
            2 => (
                support::verify_entry(&conn, at),
                "VERIFY",
                Channel::Email,
                "no reply",
            ),
            _ => (
                support::resolve_entry(&conn, at),
                "RESOLVE",
                Channel::Email,
                "recovery",
            ),
        };
        let dead_at: f64 = conn
            .query_row(
                "SELECT updated_at FROM uns_notifications WHERE id = ?1",
                [&id],
                |r| r.get(0),
            )
            .expect("row");
        entries.push((id, branch, channel, error, dead_at));
    }
    Seeded { db, entries }
}

fn unsctl(target: &[String], args: &[&str]) -> Output {
    let mut command = support::unsctl();
    command
        .args(target)
        .args(args)
        .env("UNS_API_KEY", support::KEY)
        .env("USER", "selection-test")
        .stdin(Stdio::null())
        .output()
        .expect("unsctl")
}

fn json(out: &Output, label: &str) -> Value {
    assert_eq!(
        out.status.code(),
        Some(0),
        "{label}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap_or_else(|err| panic!("{label}: {err}"))
}

fn ids(value: &Value, key: &str, field: &str) -> Vec<String> {
    value[key]
        .as_array()
        .map(|entries| {
            entries
                .iter()
                .filter_map(|e| e[field].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

fn targets(db: &Path, server: &unsctl::server::RunningServer) -> [(String, Vec<String>); 2] {
    support::BACKENDS.map(|b| (b.name().to_string(), b.flags(db, server)))
}

#[test]
fn each_filter_selects_the_same_entries_over_both_backends() {
    let dir = tempfile::tempdir().expect("dir");
    let seeded = seed(dir.path(), "uns.db");
    let server = support::server(&seeded.db);
    let cut = seeded.entries[5].4;
    let since = format!("{cut}");
    let until = format!("{cut}");
    let (left_a, left_b) = (seeded.entries[0].0.clone(), seeded.entries[5].0.clone());
    let (kept_a, kept_b) = (left_a.clone(), left_b.clone());
    let exclude = format!("{left_a},{left_b}");
    // Each filter, and the ids it must select (in id order).
    type Keep = Box<dyn Fn(&(String, &str, Channel, &str, f64)) -> bool>;
    let filters: Vec<(Vec<&str>, Keep)> = vec![
        (vec![], Box::new(|_| true)),
        (
            vec!["--channel", "slack"],
            Box::new(|e| e.2 == Channel::Slack),
        ),
        (
            vec!["--channel", "EMAIL"],
            Box::new(|e| e.2 == Channel::Email),
        ),
        (vec!["--error", "MAILBOX"], Box::new(|e| e.3 == "mailbox")),
        (vec!["--since", &since], Box::new(move |e| e.4 >= cut)),
        (vec!["--until", &until], Box::new(move |e| e.4 < cut)),
        (
            vec![
                "--channel",
                "email",
                "--since",
                &since,
                "--error",
                "no reply",
            ],
            Box::new(move |e| e.2 == Channel::Email && e.4 >= cut && e.3 == "no reply"),
        ),
        // What is left out: by channel, by error text, by id.
        (
            vec!["--not-channel", "slack"],
            Box::new(|e| e.2 != Channel::Slack),
        ),
        (
            vec!["--not-error", "MAILBOX", "--channel", "email"],
            Box::new(|e| e.3 != "mailbox" && e.2 == Channel::Email),
        ),
        (
            vec!["--exclude", &exclude],
            Box::new(move |e| e.0 != kept_a && e.0 != kept_b),
        ),
    ];
    for (flags, keep) in &filters {
        let mut expected: Vec<String> = seeded
            .entries
            .iter()
            .filter(|e| keep(e))
            .map(|e| e.0.clone())
            .collect();
        expected.sort();
        assert!(
            !expected.is_empty() || flags.is_empty(),
            "{flags:?} selects something"
        );
        for command in [
            &["dlq", "list", "-o", "json"][..],
            &["dlq", "triage", "-o", "json"],
        ] {
            let mut outputs = Vec::new();
            for (backend, target) in targets(&seeded.db, &server) {
                let args: Vec<&str> = command.iter().chain(flags.iter()).copied().collect();
                let label = format!("{backend} {}", args.join(" "));
                let out = unsctl(&target, &args);
                let value = json(&out, &label);
                assert_eq!(ids(&value, "entries", "id"), expected, "{label}");
                outputs.push(out.stdout);
            }
            assert_eq!(
                outputs[0], outputs[1],
                "{command:?} {flags:?}: byte for byte"
            );
        }
        // The event search takes the same flags; both backends agree on it too.
        let mut outputs = Vec::new();
        for (_, target) in targets(&seeded.db, &server) {
            let args: Vec<&str> = ["events", "-o", "json", "--limit", "500"]
                .iter()
                .chain(flags.iter())
                .copied()
                .collect();
            outputs.push(json(&unsctl(&target, &args), "events")["events"].clone());
        }
        assert_eq!(outputs[0], outputs[1], "events {flags:?}");
    }
    // --limit keeps the first N by id, on both backends.
    let mut all: Vec<String> = seeded.entries.iter().map(|e| e.0.clone()).collect();
    all.sort();
    for (backend, target) in targets(&seeded.db, &server) {
        let value = json(
            &unsctl(&target, &["dlq", "triage", "-o", "json", "--limit", "5"]),
            &backend,
        );
        assert_eq!(ids(&value, "entries", "id"), all[..5], "{backend} --limit");
    }
    server.stop();
}

/// The entries each `REPLAYED` or `DLQ_RESOLVED` event in the store is about.
fn acted_on(db: &Path, kind: &str) -> BTreeSet<String> {
    let conn = rusqlite::Connection::open(db).expect("db");
    let mut stmt = conn
        .prepare("SELECT notification_id FROM uns_events WHERE kind = ?1")
        .expect("query");
    stmt.query_map([kind], |r| r.get(0))
        .expect("rows")
        .map(|r| r.expect("id"))
        .collect()
}

#[test]
fn a_filtered_bulk_action_acts_on_exactly_the_filtered_entries() {
    let dir = tempfile::tempdir().expect("dir");
    for backend in ["sqlite", "api"] {
        let seeded = seed(dir.path(), &format!("{backend}.db"));
        let server = support::server(&seeded.db);
        let target = targets(&seeded.db, &server)
            .into_iter()
            .find(|(name, _)| name == backend)
            .map(|(_, target)| target)
            .expect("target");
        let slack_replays: BTreeSet<String> = seeded
            .entries
            .iter()
            .filter(|e| e.1 == "REPLAY" && e.2 == Channel::Slack)
            .map(|e| e.0.clone())
            .collect();

        // The dry run names exactly the entries the action then changes.
        let select = ["--branch", "replay", "--channel", "slack", "-o", "json"];
        let dry = json(
            &unsctl(&target, &[&["replay"][..], &select].concat()),
            "dry run",
        );
        assert_eq!(
            ids(&dry, "results", "id")
                .into_iter()
                .collect::<BTreeSet<_>>(),
            slack_replays,
            "{backend}: the dry run"
        );
        assert!(
            acted_on(&seeded.db, "REPLAYED").is_empty(),
            "{backend}: a dry run acts"
        );
        let done = json(
            &unsctl(
                &target,
                &[
                    &["replay"][..],
                    &select,
                    &["--confirm", "--yes", "--reason", "webhook fixed"],
                ]
                .concat(),
            ),
            "replay",
        );
        assert_eq!(
            ids(&done, "results", "id")
                .into_iter()
                .collect::<BTreeSet<_>>(),
            slack_replays,
            "{backend}: the results"
        );
        assert_eq!(
            acted_on(&seeded.db, "REPLAYED"),
            slack_replays,
            "{backend}: replayed exactly the SLACK entries of the REPLAY branch"
        );

        // Leaving out: the EMAIL REPLAY entries but one, named by --exclude, and the
        // SLACK ones, by --not-channel: exactly the rest is replayed.
        let email_replays: Vec<String> = seeded
            .entries
            .iter()
            .filter(|e| e.1 == "REPLAY" && e.2 == Channel::Email)
            .map(|e| e.0.clone())
            .collect();
        let (spared, rest) = email_replays.split_first().expect("email replays");
        // An exclusion that leaves out nothing is a mistake, never a silent no-op: one
        // that matches no entry, and one that names a DLQ entry the filters leave out (it
        // meant another entry).
        let unpicked = seeded
            .entries
            .iter()
            .find(|e| e.1 == "VERIFY")
            .map(|e| e.0.clone())
            .expect("a VERIFY entry");
        for (exclude, filters, says) in [
            ("n-ffffffffff", &[][..], "--exclude n-ffffffffff"),
            (
                &*unpicked,
                &["--error", "mailbox"][..],
                "not in the selection",
            ),
        ] {
            let refused = unsctl(
                &target,
                &[
                    &["replay", "--branch", "replay"][..],
                    filters,
                    &["--exclude", exclude, "--reason", "x"],
                ]
                .concat(),
            );
            assert_eq!(refused.status.code(), Some(2), "{backend}: {refused:?}");
            assert!(
                String::from_utf8_lossy(&refused.stderr).contains(says),
                "{backend}: {refused:?}"
            );
        }
        // A unique prefix names the entry, as every id argument does.
        let spared_prefix = &spared[..spared.len() - 6];
        let out = unsctl(
            &target,
            &[
                "replay",
                "--branch",
                "replay",
                "--not-channel",
                "SLACK",
                "--exclude",
                spared_prefix,
                "--confirm",
                "--yes",
                "--reason",
                "relay fixed",
                "-o",
                "json",
            ],
        );
        json(&out, "replay with exclusions");
        let mut expected = slack_replays.clone();
        expected.extend(rest.iter().cloned());
        assert_eq!(
            acted_on(&seeded.db, "REPLAYED"),
            expected,
            "{backend}: the excluded entry and channel were left out"
        );

        // A time window on resolve: only the RESOLVE entries dead-lettered in it.
        let cut = seeded.entries[6].4;
        let window: BTreeSet<String> = seeded
            .entries
            .iter()
            .filter(|e| e.1 == "RESOLVE" && e.4 >= cut)
            .map(|e| e.0.clone())
            .collect();
        assert!(!window.is_empty() && window.len() < 3);
        let out = unsctl(
            &target,
            &[
                "dlq",
                "resolve",
                "--branch",
                "resolve",
                "--since",
                &format!("{cut}"),
                "--confirm",
                "--yes",
                "--reason",
                "provider accepted",
                "-o",
                "json",
            ],
        );
        json(&out, "resolve");
        assert_eq!(
            acted_on(&seeded.db, "DLQ_RESOLVED"),
            window,
            "{backend}: resolved exactly the window's RESOLVE entries"
        );
        server.stop();
    }
}

#[test]
fn a_plan_lists_what_it_left_out_and_apply_never_acts_on_it() {
    let dir = tempfile::tempdir().expect("dir");
    let seeded = seed(dir.path(), "uns.db");
    let target = vec!["--db".to_string(), seeded.db.display().to_string()];
    let resolves: Vec<String> = seeded
        .entries
        .iter()
        .filter(|e| e.1 == "RESOLVE")
        .map(|e| e.0.clone())
        .collect();
    let left_out = resolves[0].clone();
    let plan = json(
        &unsctl(
            &target,
            &[
                "dlq",
                "triage",
                "--branch",
                "resolve",
                "--exclude",
                &left_out,
                "-o",
                "json",
            ],
        ),
        "plan",
    );
    assert_eq!(
        plan["excluded"]["ids"],
        serde_json::json!([left_out]),
        "{plan:#}"
    );
    assert!(!ids(&plan, "entries", "id").contains(&left_out));
    // Someone pastes the excluded entry back into the plan: apply leaves it alone.
    let mut edited = plan.clone();
    let mut entry = edited["entries"][0].clone();
    entry["id"] = Value::String(left_out.clone());
    edited["entries"]
        .as_array_mut()
        .expect("entries")
        .push(entry);
    let path = dir.path().join("plan.json");
    std::fs::write(&path, serde_json::to_vec(&edited).expect("json")).expect("plan");
    let out = unsctl(
        &target,
        &[
            "apply",
            &path.display().to_string(),
            "--confirm",
            "--yes",
            "--reason",
            "provider accepted",
        ],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("skipped: the plan excludes it"), "{stderr}");
    let resolved = acted_on(&seeded.db, "DLQ_RESOLVED");
    assert!(!resolved.contains(&left_out), "{resolved:?}");
    assert_eq!(resolved.len(), resolves.len() - 1, "{stderr}");

    // A plan made leaving out a channel: an entry with that channel added by hand is
    // held to the exclusion too, and nothing is replayed on it.
    let plan = json(
        &unsctl(
            &target,
            &[
                "dlq",
                "triage",
                "--branch",
                "replay",
                "--not-channel",
                "SLACK",
                "-o",
                "json",
            ],
        ),
        "plan without SLACK",
    );
    let slack_entry = seeded
        .entries
        .iter()
        .find(|e| e.1 == "REPLAY" && e.2 == Channel::Slack)
        .map(|e| e.0.clone())
        .expect("a SLACK REPLAY entry");
    let triaged = json(&unsctl(&target, &["dlq", "triage", "-o", "json"]), "triage");
    let mut added = triaged["entries"]
        .as_array()
        .and_then(|all| all.iter().find(|e| e["id"] == slack_entry.as_str()))
        .cloned()
        .expect("its entry");
    added["action"] = Value::String("replay".into());
    let mut edited = plan.clone();
    edited["entries"]
        .as_array_mut()
        .expect("entries")
        .push(added);
    std::fs::write(&path, serde_json::to_vec(&edited).expect("json")).expect("plan");
    let out = unsctl(
        &target,
        &[
            "apply",
            &path.display().to_string(),
            "--confirm",
            "--yes",
            "--reason",
            "fixed",
        ],
    );
    let stderr = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stderr.contains("left out by the plan's own selection (--not-channel SLACK)"),
        "{stderr}"
    );
    assert!(
        !acted_on(&seeded.db, "REPLAYED").contains(&slack_entry),
        "{stderr}"
    );
}

#[test]
fn the_event_search_gives_the_runbook_querys_rows_in_its_order() {
    let dir = tempfile::tempdir().expect("dir");
    let seeded = seed(dir.path(), "uns.db");
    // Every event of a seeded attempt shares its instant: ties the order must settle
    // as the runbook's query does.
    let conn = rusqlite::Connection::open(&seeded.db).expect("db");
    let guide: Vec<i64> = conn
        .prepare(
            "SELECT n.id, n.status, n.dead_letter, n.attempts, n.cycle, e.kind, e.at, e.payload, e.id
             FROM uns_events e
             JOIN uns_notifications n ON n.id = e.notification_id
             WHERE e.kind IN ('LEASE_LOST', 'CHANNEL_ATTEMPT_RESULT')
             ORDER BY e.at DESC
             LIMIT 25",
        )
        .expect("guide query")
        .query_map([], |r| r.get(8))
        .expect("rows")
        .map(|r| r.expect("id"))
        .collect();
    assert!(guide.len() == 25 || guide.len() > 12, "{guide:?}");
    let server = support::server(&seeded.db);
    for (backend, target) in targets(&seeded.db, &server) {
        let value = json(
            &unsctl(
                &target,
                &[
                    "events",
                    "--kind",
                    "LEASE_LOST",
                    "--kind",
                    "CHANNEL_ATTEMPT_RESULT",
                    "--limit",
                    "25",
                    "-o",
                    "json",
                ],
            ),
            &backend,
        );
        let ours: Vec<i64> = value["events"]
            .as_array()
            .map(|events| events.iter().filter_map(|e| e["id"].as_i64()).collect())
            .unwrap_or_default();
        assert_eq!(ours, guide, "{backend}");
    }
    server.stop();
}

#[test]
fn a_version_1_store_is_read_as_it_is_and_only_the_runtime_migrates_it() {
    let dir = tempfile::tempdir().expect("dir");
    let current = seed(dir.path(), "v2.db");
    let old = dir.path().join("v1.db");
    std::fs::copy(&current.db, &old).expect("copy");
    {
        let conn = rusqlite::Connection::open(&old).expect("db");
        conn.execute_batch(
            "DROP INDEX uns_notifications_dlq_updated;
             DROP TRIGGER uns_notes_append_only_update; DROP TRIGGER uns_notes_append_only_delete;
             DROP TABLE uns_notes; PRAGMA user_version = 1;",
        )
        .expect("back to version 1");
        conn.execute_batch("PRAGMA wal_checkpoint(TRUNCATE)")
            .expect("checkpoint");
    }
    let version = |db: &Path| -> i64 {
        rusqlite::Connection::open(db)
            .expect("db")
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .expect("version")
    };
    let before = std::fs::read(&old).expect("bytes");
    let cut = format!("{}", current.entries[4].4);
    for args in [
        vec!["dlq", "triage", "-o", "json", "--since", &cut],
        vec!["dlq", "list", "-o", "json", "--until", &cut],
        vec!["events", "-o", "json", "--since", &cut],
        vec!["doctor"],
    ] {
        let on = |db: &Path| unsctl(&["--db".into(), db.display().to_string()], &args);
        let (v1, v2) = (on(&old), on(&current.db));
        if args[0] != "doctor" {
            // Two stores: only which store each is may differ.
            let without_store = |out: &[u8]| {
                let text = String::from_utf8_lossy(out).into_owned();
                match text.find(",\n  \"store\": \"") {
                    Some(at) => text[..at].to_string(),
                    None => text,
                }
            };
            assert_eq!(
                without_store(&v1.stdout),
                without_store(&v2.stdout),
                "{args:?}: the same on both versions"
            );
        }
        assert_ne!(v1.status.code(), Some(101), "{args:?}");
    }
    // A dry-run mutation and a real one on the CLI leave the version alone.
    let out = unsctl(
        &["--db".into(), old.display().to_string()],
        &[
            "replay",
            &current.entries[0].0,
            "--confirm",
            "--yes",
            "--reason",
            "r",
        ],
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(version(&old), 1, "the CLI never migrates");
    assert_ne!(
        std::fs::read(&old).expect("bytes"),
        before,
        "the replay was written"
    );
    // The runtime brings it to the current version when it starts.
    let server = support::server(&old);
    server.stop();
    assert_eq!(version(&old), schema::SCHEMA_VERSION);
}

/// A window that ends before it starts is refused the same way by every command that
/// takes one, over both backends: a usage error in the same words, never an empty answer.
/// Runs `args` against `target` and checks it was refused as a usage error (exit 2, on
/// stderr, saying each of `says`) with nothing on stdout.
fn refused_as_usage(target: &(String, Vec<String>), args: &[&str], says: &[&str]) {
    let out = unsctl(&target.1, args);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(2),
        "{} {args:?}: {stderr}",
        target.0
    );
    assert!(
        says.iter().all(|text| stderr.contains(text)),
        "{} {args:?}: {stderr}",
        target.0
    );
    assert!(out.stdout.is_empty(), "{} {args:?}", target.0);
}

#[test]
fn a_window_that_ends_before_it_starts_is_refused_alike_everywhere() {
    let dir = tempfile::tempdir().expect("dir");
    let seeded = seed(dir.path(), "uns.db");
    let server = support::server(&seeded.db);
    let commands: [&[&str]; 6] = [
        &["dlq", "list"],
        &["dlq", "triage"],
        &["events", "--kind", "DEAD_LETTERED"],
        &["reconcile"],
        &["pulse"],
        &["report"],
    ];
    for target in targets(&seeded.db, &server) {
        for command in commands {
            let mut args = command.to_vec();
            args.extend(["--since", "1h", "--until", "2h"]);
            refused_as_usage(&target, &args, &["since must come before until"]);
        }
    }
}

/// A text filter that names nothing (`--error "$TEXT"` with the variable unset) would
/// pick every entry, or leave every one out: it is refused as a usage error, on either
/// backend, before anything is read or changed; a bulk change given one changes nothing.
#[test]
fn an_empty_text_filter_is_refused_never_taken_for_every_entry() {
    let dir = tempfile::tempdir().expect("dir");
    let seeded = seed(dir.path(), "uns.db");
    let server = support::server(&seeded.db);
    let before = std::fs::read(&seeded.db).expect("store");
    let commands: [&[&str]; 6] = [
        &["dlq", "list", "--error", ""],
        &["dlq", "triage", "--not-error", "  "],
        &["events", "--kind", "DEAD_LETTERED", "--subject", ""],
        &["replay", "--error", "", "--confirm", "--yes"],
        &["dlq", "resolve", "--to", " ", "--confirm", "--yes"],
        &["reconcile", "--error", ""],
    ];
    for target in targets(&seeded.db, &server) {
        for args in commands {
            let blank = args
                .iter()
                .position(|a| a.trim().is_empty())
                .expect("blank");
            let flag = format!("for '{} <TEXT>'", args[blank - 1]);
            refused_as_usage(&target, args, &[&flag, "is in every text"]);
        }
    }
    assert_eq!(
        std::fs::read(&seeded.db).expect("store"),
        before,
        "nothing changed"
    );
    // The API refuses it too, for a caller other than unsctl.
    unsctl::runtime::adapters::init_tls();
    for query in ["error=", "not_error=%20", "subject=", "to="] {
        let url = format!("http://{}/api/v1/dlq?{query}", server.addr);
        let answer = reqwest::blocking::Client::new()
            .get(&url)
            .bearer_auth(support::KEY)
            .send()
            .expect("answer");
        assert_eq!(answer.status().as_u16(), 400, "{query}");
        let body = answer.text().expect("body");
        assert!(body.contains("is in every text"), "{query}: {body}");
    }
}
