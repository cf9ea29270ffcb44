//! Broken and hostile stores (`fixtures/hostile/`): every read command and the
//! mutations, on both backends. Nothing panics, the exit code is the expected one, the bad
//! row is named, every other row is still there, no raw control byte reaches the terminal,
//! and the file is unchanged wherever nothing was meant to change.

use crate::support;
use unsctl::db::Db;

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use unsctl::runtime::schema::{self, OpenMode};

/// One hostile store: its patch, the entry it breaks (by recipient, or a literal id), and
/// what the notes must say about it.
struct Case {
    patch: &'static str,
    bad: Bad,
    note: &'static str,
    /// How many DLQ entries the store holds (the base has five).
    entries: usize,
}

enum Bad {
    Recipient(&'static str),
    Id(&'static str),
}

const CASES: &[Case] = &[
    Case {
        patch: "payload-blob",
        bad: Bad::Recipient("mixed-channels"),
        note: "BLOB",
        entries: 5,
    },
    Case {
        patch: "payload-invalid-utf8",
        bad: Bad::Recipient("mixed-channels"),
        note: "UTF-8",
        entries: 5,
    },
    Case {
        patch: "at-text",
        bad: Bad::Recipient("mixed-channels"),
        note: "at: text",
        entries: 5,
    },
    Case {
        patch: "null-id",
        bad: Bad::Id("(no id: rowid 7)"),
        note: "id: NULL",
        entries: 6,
    },
    Case {
        patch: "terminal-escapes",
        bad: Bad::Recipient("provider-rejected"),
        note: "",
        entries: 6,
    },
    Case {
        patch: "channels-not-array",
        bad: Bad::Recipient("mixed-channels"),
        note: "channels",
        entries: 5,
    },
    Case {
        patch: "unknown-kind",
        bad: Bad::Recipient("lease-lost-delivered"),
        note: "PROVIDER_CALLBACK",
        entries: 5,
    },
    Case {
        patch: "payload-not-object",
        bad: Bad::Recipient("lease-lost-delivered"),
        note: "not a JSON object",
        entries: 5,
    },
    Case {
        patch: "out-of-range",
        bad: Bad::Recipient("smtp-unknown"),
        note: "at: inf is not a time",
        entries: 5,
    },
    Case {
        patch: "huge-value",
        bad: Bad::Recipient("provider-rejected"),
        note: "",
        entries: 5,
    },
    Case {
        patch: "wrong-types",
        bad: Bad::Recipient("provider-rejected"),
        note: "attempts",
        entries: 5,
    },
];

fn build(dir: &Path, patch: &str) -> PathBuf {
    support::hostile_store(dir, patch)
}

fn bytes(db: &Path) -> Vec<Vec<u8>> {
    ["", "-wal"]
        .iter()
        .map(|suffix| std::fs::read(format!("{}{suffix}", db.display())).unwrap_or_default())
        .collect()
}

fn id_of(db: &Path, bad: &Bad) -> String {
    match bad {
        Bad::Id(id) => id.to_string(),
        Bad::Recipient(scenario) => rusqlite::Connection::open(db)
            .expect("db")
            .query_row(
                "SELECT id FROM uns_notifications WHERE json_extract(payload, '$.recipient') = ?1",
                [format!("{scenario}@repro.uns.local")],
                |r| r.get(0),
            )
            .expect("bad row"),
    }
}

fn unsctl(target: &[String], args: &[&str]) -> Output {
    let mut command = support::unsctl();
    command
        .args(target)
        .args(args)
        .env("UNS_API_KEY", support::KEY)
        .stdin(Stdio::null())
        .output()
        .expect("unsctl")
}

fn all(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// The checks every command's output must pass, whatever its exit code.
fn sane(label: &str, out: &Output, code: i32) {
    let text = all(out);
    assert_eq!(out.status.code(), Some(code), "{label}: {text}");
    assert!(!text.contains("panicked"), "{label}: {text}");
}

fn terminal_safe(label: &str, out: &Output) {
    for (name, stream) in [("stdout", &out.stdout), ("stderr", &out.stderr)] {
        assert!(
            !stream.contains(&0x1b) && !stream.contains(&0x07),
            "{label}: raw control bytes on {name}"
        );
        let text = String::from_utf8_lossy(stream);
        assert!(
            !text.contains('\u{9b}'),
            "{label}: a raw C1 control on {name}"
        );
    }
}

#[test]
fn every_hostile_store_is_read_and_refused_without_harm() {
    let dir = tempfile::tempdir().expect("dir");
    for case in CASES {
        let db = build(dir.path(), case.patch);
        // As the runtime keeps it now: the server below would bring it there first.
        drop(
            unsctl::runtime::schema::open(&db, unsctl::runtime::schema::OpenMode::Runtime)
                .expect("migrate"),
        );
        let bad = id_of(&db, &case.bad);
        let good: Vec<String> = {
            let conn = rusqlite::Connection::open(&db).expect("db");
            let mut stmt = conn
                .prepare("SELECT id FROM uns_notifications WHERE dead_letter = 1 AND id IS NOT NULL AND id NOT LIKE '%' || char(27) || '%'")
                .expect("ids");
            stmt.query_map([], |r| r.get(0))
                .expect("query")
                .map(|r| r.expect("id"))
                .filter(|id: &String| *id != bad)
                .collect()
        };
        let before = bytes(&db);
        let server = support::server(&db);
        let targets = support::BACKENDS.map(|b| (b.name(), b.flags(&db, &server)));
        let mut json_by_backend = Vec::new();
        for (backend, target) in &targets {
            let label = |what: &str| format!("{} / {backend} / {what}", case.patch);
            // The list: every row there, the bad one marked, a count on stderr.
            let out = unsctl(target, &["dlq", "list"]);
            sane(&label("dlq list"), &out, 0);
            terminal_safe(&label("dlq list"), &out);
            let stdout = String::from_utf8_lossy(&out.stdout);
            for id in &good {
                assert!(
                    stdout.contains(id.as_str()),
                    "{}: {id} missing:\n{stdout}",
                    label("dlq list")
                );
            }
            let out = unsctl(target, &["dlq", "list", "-o", "json"]);
            sane(&label("dlq list -o json"), &out, 0);
            let list: Value = serde_json::from_slice(&out.stdout).expect("json");
            assert_eq!(
                list["entries"].as_array().map(Vec::len),
                Some(case.entries),
                "{}",
                label("list json")
            );

            // Triage: the bad entry is VERIFY (or its own branch when only its text is
            // hostile), with a note naming what could not be read; the others unchanged.
            let out = unsctl(target, &["dlq", "triage"]);
            sane(&label("dlq triage"), &out, 0);
            terminal_safe(&label("dlq triage"), &out);
            let out = unsctl(target, &["dlq", "triage", "-o", "json"]);
            sane(&label("dlq triage -o json"), &out, 0);
            let triage: Value = serde_json::from_slice(&out.stdout).expect("json");
            let entries = triage["entries"].as_array().cloned().unwrap_or_default();
            assert_eq!(entries.len(), case.entries, "{}", label("triage entries"));
            let entry = entries
                .iter()
                .find(|e| e["id"] == bad.as_str())
                .cloned()
                .unwrap_or_default();
            if !case.note.is_empty() {
                assert_eq!(
                    entry["branch"],
                    "VERIFY",
                    "{}: {entry:#}",
                    label("bad entry")
                );
                let notes = entry["notes"].to_string();
                assert!(notes.contains(case.note), "{}: {notes}", label("note"));
            }
            json_by_backend.push(out.stdout.clone());

            // One entry in full, and the cross-notification query.
            if !bad.starts_with("(no id") {
                let out = unsctl(target, &["inspect", &bad]);
                sane(&label("inspect"), &out, 0);
                terminal_safe(&label("inspect"), &out);
                assert!(
                    out.stdout.len() < 100_000,
                    "{}: tables cut long values",
                    label("inspect")
                );
            }
            let out = unsctl(target, &["events", "--limit", "50"]);
            sane(&label("events"), &out, 0);
            terminal_safe(&label("events"), &out);

            // Mutations on the bad entry: refused, as dry runs and for real.
            if !bad.starts_with("(no id") && !case.note.is_empty() {
                for args in [
                    vec!["dlq", "resolve", bad.as_str()],
                    vec!["replay", bad.as_str()],
                    vec!["dlq", "resolve", bad.as_str(), "--confirm", "--yes"],
                    vec!["replay", bad.as_str(), "--confirm", "--yes"],
                ] {
                    let out = unsctl(target, &args);
                    sane(&label(&args.join(" ")), &out, 4);
                    terminal_safe(&label(&args.join(" ")), &out);
                }
            }
            let plan = dir.path().join(format!("{}-{backend}.json", case.patch));
            std::fs::write(&plan, json_by_backend.last().expect("plan")).expect("plan");
            let out = unsctl(target, &["apply", &plan.display().to_string()]);
            assert_ne!(out.status.code(), Some(101), "{}", label("apply"));
            terminal_safe(&label("apply"), &out);
        }
        assert_eq!(
            json_by_backend[0], json_by_backend[1],
            "{}: both backends print the same triage",
            case.patch
        );
        server.stop();
        assert!(
            bytes(&db) == before,
            "{}: the store was changed",
            case.patch
        );
    }
}

/// Each page of the API's DLQ, as the server writes it, holds what the one-entry readers
/// (`inspect`'s) read of the same rows, byte for byte; paging visits every row once.
#[test]
fn every_page_holds_what_the_single_entry_readers_read() {
    use unsctl::api::{DlqEntry, DlqPage};
    use unsctl::runtime::queries;
    let dir = tempfile::tempdir().expect("dir");
    for case in CASES {
        let db = build(dir.path(), case.patch);
        let conn = schema::open(&db, OpenMode::ReadOnly).expect("store");
        let rows: Vec<(i64, Option<String>)> = conn
            .prepare(
                "SELECT rowid, id FROM uns_notifications WHERE dead_letter = 1 ORDER BY id, rowid",
            )
            .expect("rows")
            .query_map([], |r| Ok((r.get(0)?, r.get(1).ok())))
            .expect("rows")
            .map(|r| r.expect("row"))
            .collect();
        let expected = |(rowid, id): &(i64, Option<String>), events: bool| DlqEntry {
            row: conn
                .query_row(
                    &format!(
                        "SELECT {} FROM uns_notifications n WHERE n.rowid = ?1",
                        queries::NOTIFICATION_COLUMNS
                    ),
                    [rowid],
                    |r| Ok(queries::notification(r, 0)),
                )
                .expect("row"),
            events: events.then(|| {
                id.as_deref()
                    .map(|id| queries::read_events(&Db::Sqlite(&conn), id).expect("events"))
                    .unwrap_or_default()
            }),
        };
        for events in [false, true] {
            let mut cursor: Option<String> = None;
            let mut seen = 0;
            loop {
                let (json, next) = unsctl::store::page::dlq_page_json(
                    &Db::Sqlite(&conn),
                    &Default::default(),
                    cursor.as_deref(),
                    2,
                    events,
                )
                .expect("page");
                let page = DlqPage {
                    entries: rows[seen..(seen + 2).min(rows.len())]
                        .iter()
                        .map(|row| expected(row, events))
                        .collect(),
                    next_cursor: next.clone(),
                };
                assert_eq!(
                    String::from_utf8_lossy(&json),
                    serde_json::to_string(&page).expect("json"),
                    "{} (events: {events}) from row {seen}",
                    case.patch
                );
                seen += page.entries.len();
                match next {
                    Some(next) => cursor = Some(next),
                    None => break,
                }
            }
            assert_eq!(seen, rows.len(), "{}: every row once", case.patch);
        }
    }
}

#[test]
fn files_that_are_not_stores_are_named_and_left_alone() {
    let dir = tempfile::tempdir().expect("dir");
    let empty = dir.path().join("empty.db");
    std::fs::write(&empty, b"").expect("empty");
    let text = dir.path().join("notes.txt");
    std::fs::write(&text, "just some words\n".repeat(100)).expect("text");
    let foreign = dir.path().join("other.db");
    rusqlite::Connection::open(&foreign)
        .expect("db")
        .execute_batch("CREATE TABLE t (x); INSERT INTO t VALUES (1);")
        .expect("foreign");
    let newer = dir.path().join("newer.db");
    drop(schema::open(&newer, OpenMode::Create).expect("store"));
    rusqlite::Connection::open(&newer)
        .expect("db")
        .pragma_update(None, "user_version", 9)
        .expect("version");
    let directory = dir.path().join("a-directory");
    std::fs::create_dir(&directory).expect("dir");
    // Stores of a known version that someone cut down: a table or a column gone.
    let damaged = |name: &str, sql: &str| {
        let path = dir.path().join(name);
        drop(schema::open(&path, OpenMode::Create).expect("store"));
        let conn = rusqlite::Connection::open(&path).expect("db");
        conn.execute_batch(sql).expect("damage");
        conn.execute_batch("PRAGMA journal_mode = DELETE")
            .expect("no wal");
        path
    };
    let no_events = damaged("no-events.db", "DROP TABLE uns_events;");
    let no_column = damaged(
        "no-column.db",
        "DROP INDEX IF EXISTS uns_notifications_dlq_updated; ALTER TABLE uns_notifications DROP COLUMN error_message;",
    );
    // A pipe: opening it to read would wait for a writer that never comes.
    let pipe = dir.path().join("a-pipe");
    assert!(
        Command::new("mkfifo")
            .arg(&pipe)
            .status()
            .expect("mkfifo")
            .success()
    );
    let cases: [(&Path, &str); 9] = [
        (&empty, "is an empty file, not a UNS store"),
        (&text, "not a SQLite database"),
        (&foreign, "not a UNS store"),
        (&newer, "newer than this unsctl"),
        (&directory, "is a directory, not a store file"),
        (&no_events, "damaged UNS store: table uns_events is missing"),
        (
            &no_column,
            "damaged UNS store: uns_notifications lacks error_message",
        ),
        (&pipe, "is a device, pipe or socket"),
        (Path::new("/dev/null"), "is a device, pipe or socket"),
    ];
    for (path, message) in cases {
        let before: Vec<PathBuf> = listing(dir.path());
        let content = std::fs::metadata(path)
            .is_ok_and(|m| m.is_file())
            .then(|| std::fs::read(path).ok());
        let target = vec!["--db".to_string(), path.display().to_string()];
        for args in [
            vec!["dlq", "list"],
            vec!["dlq", "triage", "-o", "json"],
            vec!["events"],
            vec!["inspect", "n-1"],
            vec!["dlq", "resolve", "n-1", "--confirm", "--yes"],
            vec!["replay", "n-1", "--confirm", "--yes"],
        ] {
            let out = unsctl(&target, &args);
            sane(&format!("{} {args:?}", path.display()), &out, 1);
            assert!(
                all(&out).contains(message),
                "{}: {}",
                path.display(),
                all(&out)
            );
        }
        if let Some(content) = &content {
            assert_eq!(
                &std::fs::read(path).ok(),
                content,
                "{} was changed",
                path.display()
            );
        }
        if path != newer.as_path() {
            // A newer store is still a SQLite store in WAL mode: reading it may leave
            // SQLite's own -wal and -shm beside it. Nothing else may appear.
            assert_eq!(
                listing(dir.path()),
                before,
                "nothing appeared beside {}",
                path.display()
            );
        }
    }
}

fn listing(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .expect("dir")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
    files.sort();
    files
}

#[test]
fn a_store_in_a_read_only_place_is_read_as_a_snapshot() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().expect("dir");
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let place = dir.path().join("copy");
    std::fs::create_dir(&place).expect("dir");
    let db = build(&place, "payload-blob");
    std::fs::remove_file(format!("{}-wal", db.display())).ok();
    std::fs::remove_file(format!("{}-shm", db.display())).ok();
    std::fs::set_permissions(&db, std::fs::Permissions::from_mode(0o444)).expect("chmod");
    std::fs::set_permissions(&place, std::fs::Permissions::from_mode(0o555)).expect("chmod");
    let before = bytes(&db);
    // Where a private copy would go, so the test can see it removed.
    let private = dir.path().join("tmp");
    std::fs::create_dir(&private).expect("tmp");
    std::fs::set_permissions(&private, std::fs::Permissions::from_mode(0o777)).expect("chmod");
    let as_user = |args: &[&str]| as_another_user(&db, &private, args);
    let out = as_user(&["dlq", "triage", "-o", "json"]);
    sane("read-only triage", &out, 0);
    assert!(
        all(&out).contains("read as an immutable snapshot"),
        "{}",
        all(&out)
    );
    let triage: Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(triage["entries"].as_array().map(Vec::len), Some(5));
    let out = as_user(&["dlq", "resolve", "n-1", "--confirm", "--yes"]);
    sane("read-only resolve", &out, 1);
    assert!(all(&out).contains("cannot write here"), "{}", all(&out));
    std::fs::set_permissions(&place, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    assert!(bytes(&db) == before, "the read-only store was changed");
    assert_eq!(
        listing(&place),
        std::slice::from_ref(&db),
        "nothing was created beside it"
    );

    // A hot copy: a change still in the -wal, and no -shm beside it. An immutable read
    // would miss the change; a private copy of both is read instead, and removed after.
    std::fs::set_permissions(&db, std::fs::Permissions::from_mode(0o644)).expect("chmod");
    let writer = rusqlite::Connection::open(&db).expect("db");
    writer
        .execute_batch(
            "PRAGMA wal_autocheckpoint = 0;
             UPDATE uns_notifications SET error_message = 'seen only in the wal'
             WHERE json_extract(payload, '$.recipient') = 'smtp-unknown@repro.uns.local';",
        )
        .expect("write into the wal");
    // Left open, as a crashed or copied writer leaves it: the change stays in the -wal.
    std::mem::forget(writer);
    std::fs::remove_file(format!("{}-shm", db.display())).expect("no shm");
    assert!(std::fs::metadata(format!("{}-wal", db.display())).is_ok_and(|m| m.len() > 0));
    std::fs::set_permissions(&db, std::fs::Permissions::from_mode(0o444)).expect("chmod");
    std::fs::set_permissions(&place, std::fs::Permissions::from_mode(0o555)).expect("chmod");
    let before = bytes(&db);
    let out = as_user(&["dlq", "list", "-o", "json"]);
    sane("read-only store with a -wal", &out, 0);
    assert!(all(&out).contains("private copy"), "{}", all(&out));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("seen only in the wal"),
        "the change in the -wal is seen: {}",
        all(&out)
    );
    std::fs::set_permissions(&place, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    assert!(bytes(&db) == before, "the read-only store was changed");
    assert!(listing(&private).is_empty(), "the private copy was removed");
}

/// `unsctl --db DB ARGS` as an account that may not write what the test's may not:
/// root may write anywhere, so as root it runs as nobody.
fn as_another_user(db: &Path, tmp: &Path, args: &[&str]) -> Output {
    let mut command = if is_root() {
        let mut c = support::launch("runuser");
        c.args(["-u", "nobody", "--", env!("CARGO_BIN_EXE_unsctl")]);
        c
    } else {
        support::unsctl()
    };
    command
        .arg("--db")
        .arg(db)
        .args(args)
        .env("TMPDIR", tmp)
        .stdin(Stdio::null())
        .output()
        .expect("unsctl")
}

/// The runtime's store as it is while the runtime runs (its -wal and -shm beside it), in
/// a place this user may read but not write. SQLite opens such a file for reading only
/// and says so only at the first write; a change is refused before any entry is tried.
#[test]
fn a_store_this_user_cannot_write_is_refused_before_any_entry_is_tried() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().expect("dir");
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let db = build(dir.path(), "payload-blob");
    // Held open, as the running runtime holds it: its -shm stays.
    let runtime = rusqlite::Connection::open(&db).expect("db");
    runtime
        .query_row("SELECT COUNT(*) FROM uns_notifications", [], |r| {
            r.get::<_, i64>(0)
        })
        .expect("read");
    assert!(std::fs::metadata(format!("{}-shm", db.display())).is_ok());
    for suffix in ["", "-wal", "-shm"] {
        std::fs::set_permissions(
            format!("{}{suffix}", db.display()),
            std::fs::Permissions::from_mode(0o444),
        )
        .expect("chmod");
    }
    let before = bytes(&db);
    let out = as_another_user(&db, dir.path(), &["dlq", "triage", "-o", "json"]);
    sane("triage by a user who cannot write", &out, 0);
    let triage: Value = serde_json::from_slice(&out.stdout).expect("json");
    // An entry whose resolve nothing else refuses.
    let id = support::entry_of_branch(&triage, "RESOLVE");
    let out = as_another_user(
        &db,
        dir.path(),
        &["dlq", "resolve", &id, "--confirm", "--yes", "--reason", "x"],
    );
    sane("resolve by a user who cannot write", &out, 1);
    let text = all(&out);
    assert!(text.contains("cannot write here"), "{text}");
    assert!(!text.contains("failed"), "no entry was tried: {text}");
    assert!(bytes(&db) == before, "the store was changed");
    drop(runtime);
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

#[test]
fn no_command_panics_when_its_output_goes_away() {
    let dir = tempfile::tempdir().expect("dir");
    let db = build(dir.path(), "terminal-escapes");
    let db = db.display().to_string();
    let plan = dir.path().join("plan.json");
    let out = unsctl(
        &["--db".into(), db.clone()],
        &["dlq", "triage", "-o", "json"],
    );
    std::fs::write(&plan, &out.stdout).expect("plan");
    let plan = plan.display().to_string();
    let commands: Vec<Vec<&str>> = vec![
        vec!["dlq", "list"],
        vec!["dlq", "list", "-o", "json"],
        vec!["dlq", "triage"],
        vec!["dlq", "triage", "-o", "json"],
        vec!["events"],
        vec!["inspect", "n-does-not-exist"],
        vec!["dlq", "resolve", "n-does-not-exist"],
        vec!["replay", "n-does-not-exist", "--confirm", "--yes"],
        vec!["apply", &plan],
        vec!["tsg", "list"],
        vec!["tsg", "show", "TSG-02"],
        vec!["doctor"],
        vec!["completions", "bash"],
        vec!["inspect", "n-\u{1b}[2J"],
        vec!["events", "--kind", "LEASE_LOST", "-o", "json"],
        vec!["dlq", "resolve", "--branch", "resolve"],
        vec!["replay", "--branch", "replay", "-o", "json"],
        vec!["dlq", "triage", "--interactive"],
        vec!["verify"],
        vec!["verify", "-o", "json"],
        vec!["context", "list"],
        vec!["tsg", "alerts"],
        vec!["doctor", "-o", "json"],
        vec!["--help"],
        vec!["runtime", "serve", "--help"],
        vec!["repro", "provider-rejected"],
        vec!["sweep", "--schedules", "3", "--seed", "1"],
    ];
    for args in commands {
        let line = format!(
            "{} --db {db} {}",
            env!("CARGO_BIN_EXE_unsctl"),
            args.iter()
                .map(|a| format!("'{a}'"))
                .collect::<Vec<_>>()
                .join(" ")
        );
        // Closed outright, and a reader that goes away after one byte.
        for shell in [
            format!("{line} >&- 2>&-"),
            format!("{line} 2>&1 >/dev/null | head -c1 >/dev/null; exit ${{PIPESTATUS[0]}}"),
            format!("{line} | head -c1 >/dev/null; exit ${{PIPESTATUS[0]}}"),
        ] {
            let out = support::launch("bash")
                .args(["-c", &shell])
                .stdin(Stdio::null())
                .output()
                .expect("bash");
            assert_ne!(out.status.code(), Some(101), "{shell}: panicked");
            assert!(out.status.code().is_some(), "{shell}: killed by a signal");
        }
    }
}

/// A usage error quotes what was typed; on a terminal that must not carry a control byte
/// (an id pasted with an escape sequence in it) or a screenful of one huge argument.
#[test]
fn usage_errors_reach_a_terminal_escaped_and_clipped() {
    let huge = "a".repeat(5_000);
    // As the shell would be given them: bash's $'...' makes the control bytes.
    for (arg, clipped) in [
        (r"$'n-abcd\e[2J\e]0;owned\a'", false),
        (huge.as_str(), true),
    ] {
        let dir = tempfile::tempdir().expect("dir");
        let captured = dir.path().join("tty");
        // `script` gives the command a pseudo-terminal and keeps every byte it wrote.
        let out = support::launch("script")
            .args(["-qe", "-c"])
            .arg(format!(
                "env -u NO_COLOR {} --db /nonexistent inspect {arg}",
                env!("CARGO_BIN_EXE_unsctl")
            ))
            .arg(&captured)
            .env("SHELL", "/bin/bash")
            .stdin(Stdio::null())
            .output()
            .expect("script (bsdutils)");
        let _ = out;
        let bytes = std::fs::read(&captured).expect("typescript");
        let text = String::from_utf8_lossy(&bytes);
        let shown = text
            .lines()
            .skip_while(|l| !l.contains("error:"))
            .collect::<Vec<_>>()
            .join("\n");
        assert!(shown.contains("invalid value"), "{text}");
        assert!(
            !shown.contains('\u{1b}') && !shown.contains('\u{7}'),
            "raw control bytes on the terminal: {shown:?}"
        );
        if clipped {
            assert!(shown.len() < 1_000, "{} bytes", shown.len());
        }
    }
}

/// A plan is read up to its stated limit, and an entry's id up to its own; past either,
/// the plan is refused before anything is done, and the store is left as it was.
#[test]
fn plans_past_their_limits_are_refused_before_anything_is_done() {
    let dir = tempfile::tempdir().expect("dir");
    let db = build(dir.path(), "terminal-escapes");
    let target = ["--db".to_string(), db.display().to_string()];
    let before = bytes(&db);

    // Larger than 256 MiB, as a sparse file: refused by its size, nothing read.
    let huge = dir.path().join("huge.json");
    std::fs::File::create(&huge)
        .and_then(|f| f.set_len((256 << 20) + 1))
        .expect("sparse plan");
    let out = unsctl(
        &target,
        &["apply", &huge.display().to_string(), "--confirm", "--yes"],
    );
    sane("huge plan", &out, 1);
    assert!(all(&out).contains("larger than 256 MiB"), "{}", all(&out));
    assert!(bytes(&db) == before, "the huge plan wrote to the store");

    // A plan whose only entry carries an id of 300 bytes: refused, and named.
    let out = unsctl(&target, &["dlq", "triage", "-o", "json"]);
    assert!(bytes(&db) == before, "triage wrote to the store");
    let mut plan: Value = serde_json::from_slice(&out.stdout).expect("plan");
    let mut entry = plan["entries"][0].clone();
    entry["id"] = Value::String("n".repeat(300));
    plan["entries"] = Value::Array(vec![entry]);
    let edited = dir.path().join("long-id.json");
    std::fs::write(&edited, plan.to_string()).expect("plan");
    let out = unsctl(
        &target,
        &["apply", &edited.display().to_string(), "--confirm", "--yes"],
    );
    sane("long id", &out, 4);
    assert!(all(&out).contains("256 bytes"), "{}", all(&out));
    assert!(
        bytes(&db) == before,
        "the plan with a long id wrote to the store"
    );
}

/// The ids of `hostile-ids.sql`, each beside the file its text would create if a shell
/// ran it.
const HOSTILE_IDS: &[(&str, &str)] = &[
    ("n-1;touch pwned-semicolon", "pwned-semicolon"),
    ("$(touch pwned-dollar)", "pwned-dollar"),
    ("`touch pwned-backquote`'\"", "pwned-backquote"),
    ("-n \"it's\" >pwned-dash", "pwned-dash"),
    ("n-5\ntouch pwned-newline", "pwned-newline"),
];

/// Every command unsctl composed in `text`: from `unsctl ` to the end of its line or a
/// closing backquote, and not where it stands inside double quotes (provider text).
fn composed_commands(text: &str) -> Vec<String> {
    let mut found = Vec::new();
    for line in text.lines() {
        let mut at = 0;
        while let Some(start) = line[at..].find("unsctl ").map(|s| s + at) {
            let quotes = line[..start].matches('"').count() - line[..start].matches("\\\"").count();
            at = start + "unsctl ".len();
            if quotes % 2 == 1 || line[..start].ends_with('`') {
                continue;
            }
            let command = &line[start..];
            let end = command.find("  ").unwrap_or(command.len());
            found.push(command[..end].trim_end().to_string());
        }
    }
    found
}

/// Runs `command` through `sh -c` in an empty folder, with a stand-in `unsctl` first on
/// the PATH that writes down its arguments; what it was given, one argument each.
fn run_pasted(command: &str) -> Vec<String> {
    use std::os::unix::fs::PermissionsExt;
    let scratch = tempfile::tempdir().expect("scratch");
    let bin = tempfile::tempdir().expect("bin");
    let argv = bin.path().join("argv");
    let standin = bin.path().join("unsctl");
    std::fs::write(
        &standin,
        "#!/bin/sh\nfor arg in \"$@\"; do printf '%s\\0' \"$arg\"; done > \"$ARGV_FILE\"\n",
    )
    .expect("stand-in");
    std::fs::set_permissions(&standin, std::fs::Permissions::from_mode(0o755)).expect("mode");
    let status = support::launch("sh")
        .arg("-c")
        .arg(command)
        .current_dir(scratch.path())
        .env("PATH", format!("{}:/usr/bin:/bin", bin.path().display()))
        .env("ARGV_FILE", &argv)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .expect("sh");
    assert!(status.success(), "`{command}` did not run");
    let made: Vec<_> = std::fs::read_dir(scratch.path())
        .expect("scratch")
        .collect();
    assert!(made.is_empty(), "`{command}` created {made:?}");
    let recorded = std::fs::read(&argv).expect("the stand-in ran");
    recorded
        .split(|b| *b == 0)
        .filter(|arg| !arg.is_empty())
        .map(|arg| String::from_utf8_lossy(arg).into_owned())
        .collect()
}

#[test]
fn every_composed_command_passes_a_hostile_id_as_one_word_and_runs_nothing_else() {
    let dir = tempfile::tempdir().expect("dir");
    let db = build(dir.path(), "hostile-ids");
    let server = support::server(&db);
    let backends = [
        vec!["--db".to_string(), db.display().to_string()],
        vec!["--api".to_string(), format!("http://{}", server.addr)],
    ];
    for target in &backends {
        let mut pasted = 0;
        let mut texts: Vec<(String, String)> = Vec::new();
        let triage = unsctl(target, &["dlq", "triage", "-o", "json"]);
        sane("triage", &triage, 0);
        let document: Value = serde_json::from_slice(&triage.stdout).expect("json");
        for entry in document["entries"].as_array().expect("entries") {
            let step = entry["next_step"].as_str().expect("next_step");
            let command = step.rsplit_once("then: ").map_or(step, |(_, c)| c);
            texts.push((entry["id"].as_str().expect("id").into(), command.into()));
        }
        for args in [&["dlq", "triage", "-o", "wide"][..], &["dlq", "list"][..]] {
            let out = unsctl(target, args);
            sane(&args.join(" "), &out, 0);
            for command in composed_commands(&String::from_utf8_lossy(&out.stdout)) {
                texts.push((String::new(), command));
            }
        }
        for (id, _) in HOSTILE_IDS {
            let out = unsctl(target, &["inspect", "--", id]);
            // No argument can carry a line break: the entry is named by a prefix instead.
            sane("inspect", &out, if id.contains('\n') { 2 } else { 0 });
            for command in composed_commands(&String::from_utf8_lossy(&out.stdout)) {
                texts.push((id.to_string(), command));
            }
        }
        for (id, command) in &texts {
            if !command.starts_with("unsctl ") {
                // Words where no command can be written: never one with a line break.
                assert!(id.contains('\n'), "{id:?}: no command in {command:?}");
                assert!(!command.contains("unsctl "), "{command}");
                continue;
            }
            let argv = run_pasted(command);
            pasted += 1;
            let named: Vec<&(&str, &str)> = HOSTILE_IDS
                .iter()
                .filter(|(hostile, _)| command.contains(&support::shell_quoted(hostile)))
                .collect();
            for (hostile, _) in &named {
                assert!(
                    argv.iter().any(|arg| arg == hostile),
                    "`{command}` passed {argv:?}, not {hostile:?} as one argument"
                );
            }
        }
        assert!(pasted >= 10, "only {pasted} commands were composed");
        // The id that cannot stand on one line is in no command anywhere.
        let everything = texts
            .iter()
            .map(|(_, c)| c.as_str())
            .collect::<Vec<_>>()
            .join("\n");
        assert!(!everything.contains("touch pwned-newline"), "{everything}");
    }
}
