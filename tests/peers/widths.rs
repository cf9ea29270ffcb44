//! Every table fits the terminal: each table command, at 80 and 160 columns, colour on
//! and off, under a pseudo-terminal (`script`), and at 80 columns in a real tmux; no line
//! is wider than the terminal. Snapshots pin what `dlq triage` looks like at both widths.

use crate::support;

use std::path::Path;
use std::process::Command;
use support::tmux::Tmux;
use unsctl::clock::{Clock, SystemClock};
use unsctl::runtime::schema::{self, OpenMode};

struct Store {
    _dir: tempfile::TempDir,
    db: String,
    config: String,
    ids: Vec<String>,
}

fn store() -> Store {
    let dir = tempfile::tempdir().expect("dir");
    let db = dir.path().join("uns.db");
    let conn = schema::open(&db, OpenMode::Create).expect("store");
    let now = SystemClock.now();
    let made = [
        support::resolve_entry(&conn, now),
        support::verify_entry(&conn, now),
        support::replay_entry(&conn, now),
    ];
    // Fixed ids, so the layout (ids are shortened to unique prefixes) is the same on
    // every run.
    let mut ids = Vec::new();
    // A test's own store: the append-only trigger is lifted for the renaming only.
    conn.execute_batch("PRAGMA foreign_keys = OFF; DROP TRIGGER uns_events_append_only_update;")
        .expect("lift");
    for (n, old) in made.iter().enumerate() {
        let new = format!("n-{n}{}", "0".repeat(31));
        for sql in [
            "UPDATE uns_notifications SET id = ?2 WHERE id = ?1",
            "UPDATE uns_events SET notification_id = ?2, payload = replace(payload, ?1, ?2) WHERE notification_id = ?1",
        ] {
            conn.execute(sql, [old, &new]).expect("rename");
        }
        ids.push(new);
    }
    conn.execute_batch(
        "PRAGMA foreign_keys = ON;
         CREATE TRIGGER uns_events_append_only_update BEFORE UPDATE ON uns_events
         BEGIN SELECT RAISE(ABORT, 'uns_events is append-only'); END;",
    )
    .expect("restore");
    let config = dir.path().join("config.toml");
    std::fs::write(
        &config,
        format!(
            "[contexts.a-long-context-name-for-eu-west]\ndb = \"{}\"\n[contexts.b]\napi = \"http://127.0.0.1:1/a/rather/long/path/to/the/runtime\"\napi_key_env = \"UNS_SOME_RATHER_LONG_VARIABLE_NAME_FOR_THE_KEY\"\n",
            db.display()
        ),
    )
    .expect("config");
    Store {
        db: db.to_string_lossy().into_owned(),
        config: config.to_string_lossy().into_owned(),
        _dir: dir,
        ids,
    }
}

/// Every command that prints a table, as a shell line.
fn table_commands(store: &Store) -> Vec<String> {
    let bin = env!("CARGO_BIN_EXE_unsctl");
    let db = &store.db;
    let mut commands: Vec<String> = [
        "dlq list",
        "dlq triage",
        "events",
        "events --kind channel_attempt_result --kind attempt_started --kind dead_lettered",
        "doctor",
        "verify",
        "tsg list",
        "tsg alerts",
        "context list",
        "--all-contexts dlq triage",
    ]
    .iter()
    .map(|args| {
        if args.starts_with("tsg") || args.starts_with("context") || args.starts_with("--all") {
            format!("{bin} {args}")
        } else {
            format!("{bin} --db {db} {args}")
        }
    })
    .collect();
    for id in &store.ids {
        commands.push(format!("{bin} --db {db} inspect {id}"));
        commands.push(format!("{bin} --db {db} replay {id}"));
    }
    commands
}

fn strip_ansi(text: &str) -> String {
    let mut out = String::new();
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\x1b' {
            if chars.peek() == Some(&'[') {
                chars.next();
                for c in chars.by_ref() {
                    if c.is_ascii_alphabetic() {
                        break;
                    }
                }
            }
            continue;
        }
        out.push(c);
    }
    out
}

fn width(line: &str) -> usize {
    unicode_width::UnicodeWidthStr::width(line)
}

/// Runs `command` under a pseudo-terminal `columns` wide; its output as the terminal got it.
fn in_pty(command: &str, columns: u16, color: &str, config: &str) -> String {
    let out = support::launch("script")
        .args(["-qec", &format!("{command} --color {color}"), "/dev/null"])
        .env("COLUMNS", columns.to_string())
        .env("TERM", "xterm-256color")
        .env("UNSCTL_CONFIG", config)
        .output()
        .expect("script (bsdutils)");
    String::from_utf8_lossy(&out.stdout).replace('\r', "")
}

/// A line that holds one command and nothing else: a command longer than the width
/// stands whole on a line of its own, as long as it needs, never broken across two.
fn lone_command(line: &str) -> bool {
    let text = line
        .trim_start()
        .trim_start_matches(['(', '`'])
        .trim_end_matches(['`', ')', ',', ';', '.']);
    text.starts_with("unsctl ") && !text.contains("  ") && !text.contains('`')
}

/// Where `line` stands inside double quotes (store or provider text, as unsctl quotes it;
/// a quote escaped with a backslash does not end one), starting `open` as the line
/// before left it; and whether it leaves one open for the next line.
fn quoted_bytes(line: &str, mut open: bool) -> (Vec<bool>, bool) {
    let mut inside = vec![false; line.len()];
    let mut escaped = false;
    for (at, c) in line.char_indices() {
        inside[at] = open;
        match c {
            '\\' if open && !escaped => {
                escaped = true;
                continue;
            }
            '"' if !escaped => open = !open,
            _ => {}
        }
        escaped = false;
    }
    (inside, open)
}

/// The `unsctl ...` commands a screen shows, each as the text from `unsctl` to the end of
/// its cell (two spaces end a cell) or of its line. Text in quotes is what a store or a
/// provider said, shown as text: a command inside it is not one of unsctl's.
fn printed_commands(screen: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut open = false;
    for line in screen.lines() {
        let (inside, still_open) = quoted_bytes(line, open);
        open = still_open;
        let mut rest = line;
        while let Some(at) = rest.find("unsctl ") {
            // The binary's own path in a command line is not a printed step.
            let before = &rest[..at];
            let command = &rest[at..];
            if inside[line.len() - rest.len() + at] {
                rest = &command["unsctl ".len()..];
                continue;
            }
            let end = ["  ", "`", ". "]
                .iter()
                .filter_map(|stop| command.find(stop))
                .min()
                .unwrap_or(command.len());
            let step = command[..end].trim_end().trim_end_matches([',', ';', ')']);
            // A template (`unsctl tsg show GUIDE`) is not a command to paste.
            let template = step.split_whitespace().any(|w| {
                w.len() > 1
                    && w.chars().all(|c| c.is_ascii_uppercase())
                    && w != "EMAIL"
                    && w != "SLACK"
                    && w != "PAGERDUTY"
            });
            if !before.ends_with('/') && !template && step.split_whitespace().count() > 1 {
                found.push(step.to_string());
            }
            rest = &command[end..];
        }
    }
    found
}

#[test]
fn every_table_fits_80_and_160_columns_with_and_without_colour() {
    let store = store();
    let mut printed = std::collections::BTreeSet::new();
    for command in table_commands(&store) {
        for columns in [60u16, 80, 120, 160, 200] {
            for color in ["never", "always"] {
                let text = in_pty(&command, columns, color, &store.config);
                assert!(!text.trim().is_empty(), "{command}: no output");
                if color == "always" && command.contains("dlq triage") && !command.contains("--all")
                {
                    assert!(
                        text.contains('\x1b'),
                        "{command}: colour asked for:\n{text}"
                    );
                }
                printed.extend(printed_commands(&strip_ansi(&text)));
                for line in strip_ansi(&text).lines() {
                    // A command with no room in its row stands whole on a line of its own
                    // (however long: it is pasted whole); other text there is wrapped.
                    if line
                        .strip_prefix("    \u{21b3} ")
                        .is_some_and(|value| value.starts_with("unsctl "))
                    {
                        continue;
                    }
                    if lone_command(line) {
                        continue;
                    }
                    assert!(
                        width(line) <= columns as usize,
                        "{command} at {columns} columns, colour {color}: {} wide:\n{line}\n\n{text}",
                        width(line)
                    );
                }
            }
        }
    }
    // Every command a screen showed, at any width, runs as printed: parsed whole (no usage
    // error) and naming an entry that exists. Without a terminal, a --confirm refuses to
    // act, so nothing changes.
    assert!(printed.len() >= 5, "{printed:?}");
    if std::env::var_os("SHOW_PRINTED").is_some() {
        eprintln!("{printed:#?}");
    }
    let bin = Path::new(env!("CARGO_BIN_EXE_unsctl"))
        .parent()
        .expect("bin dir")
        .display()
        .to_string();
    for command in &printed {
        let out = support::launch("bash")
            .args(["-c", command])
            .env(
                "PATH",
                format!("{bin}:{}", std::env::var("PATH").unwrap_or_default()),
            )
            .env("UNSCTL_CONFIG", &store.config)
            // The store, as the runbook's environment names it.
            .env("UNS_DB_FILE", &store.db)
            .stdin(std::process::Stdio::null())
            .output()
            .expect("bash");
        let code = out.status.code();
        assert!(
            !matches!(code, Some(2 | 3 | 127)),
            "`{command}` as printed exited {code:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

#[test]
fn triage_snapshots_at_80_and_160_columns() {
    let store = store();
    let command = format!(
        "{} --db {} dlq triage",
        env!("CARGO_BIN_EXE_unsctl"),
        store.db
    );
    for columns in [80u16, 160] {
        for color in ["never", "always"] {
            let text = in_pty(&command, columns, color, &store.config).replace('\x1b', "\\e");
            insta::assert_snapshot!(format!("triage_{columns}_{color}"), text);
        }
    }
}

#[test]
fn every_table_fits_a_real_80_column_terminal() {
    let store = store();
    let commands = table_commands(&store);
    let script = commands
        .iter()
        .map(|c| format!("{c} 2>&1"))
        .collect::<Vec<_>>()
        .join("; ");
    let term = Tmux::start_sized(
        &format!(
            "env UNSCTL_CONFIG={} bash -c {}",
            store.config,
            shell_quote(&script)
        ),
        80,
        200,
    );
    let screen = term.wait_for("EXIT=");
    assert!(
        screen.contains("BRANCH") && screen.contains("Timeline"),
        "{screen}"
    );
    for line in screen.lines() {
        // A command with no room in its row stands whole on a line of its own, which the
        // terminal wraps for the eye and copies as one.
        if line
            .strip_prefix("    \u{21b3} ")
            .is_some_and(|value| value.starts_with("unsctl "))
        {
            continue;
        }
        if lone_command(line) {
            continue;
        }
        assert!(width(line) <= 80, "{} wide:\n{line}", width(line));
    }
    let _ = Path::new(&store.db);
}

fn shell_quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', "'\\''"))
}

/// On a narrow terminal a timeline keeps what an event says (its attempt, channel and
/// outcome) and gives up its timing first; the outcome, with no room in the row, stands
/// whole on the line under it.
#[test]
fn a_narrow_timeline_keeps_the_channel_and_the_outcome() {
    let store = store();
    let bin = env!("CARGO_BIN_EXE_unsctl");
    for columns in [80u16, 120] {
        let command = format!("{bin} --db {} inspect {}", store.db, store.ids[2]);
        let text = strip_ansi(&in_pty(&command, columns, "never", &store.config));
        let header = text
            .lines()
            .find(|l| l.contains("EVENT") && l.contains("KIND"))
            .unwrap_or_else(|| panic!("no timeline at {columns}:\n{text}"));
        assert!(
            header.contains("CHANNEL") && header.contains("ATT/CYC"),
            "{columns}: {header}\n{text}"
        );
        let lines: Vec<&str> = text.lines().collect();
        let at = lines
            .iter()
            .position(|l| l.contains("CHANNEL_ATTEMPT_RESULT"))
            .unwrap_or_else(|| panic!("no result row at {columns}:\n{text}"));
        // The row, and the outcome on the line under it when the row has no room for it.
        let result = match lines.get(at + 1) {
            Some(next) if next.starts_with("    \u{21b3} ") => format!("{} {next}", lines[at]),
            _ => lines[at].to_string(),
        };
        assert!(result.contains("SLACK"), "{columns}: {result}");
        assert!(
            result.contains("REJECTED") || result.contains("rejected"),
            "{columns}: {result}\n{text}"
        );
        if columns <= 80 {
            assert!(
                !header.contains("LEASE") && !header.contains("GAP"),
                "{columns}: {header}"
            );
        }
    }
}

/// At 80 columns a next step that does not fit its row stands whole under it, and runs
/// as printed.
#[test]
fn a_next_step_without_room_stands_whole_on_its_own_line() {
    let store = store();
    let bin = env!("CARGO_BIN_EXE_unsctl");
    let command = format!("{bin} --db {} dlq triage --branch replay", store.db);
    let text = strip_ansi(&in_pty(&command, 80, "never", &store.config));
    let step = text
        .lines()
        .find_map(|l| l.strip_prefix("    \u{21b3} "))
        .unwrap_or_else(|| panic!("no next step on its own line:\n{text}"));
    assert!(
        step.starts_with("unsctl replay ") && step.ends_with("--confirm"),
        "{step}"
    );
    let out = Command::new(bin)
        .args(["--db", &store.db])
        .args(step.trim_start_matches("unsctl ").split(' '))
        .env("UNSCTL_CONFIG", &store.config)
        .output()
        .expect("unsctl");
    // Without a terminal and without --yes the printed step refuses to act: it parsed.
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(4), "{step}: {stderr}");
    assert!(stderr.contains("without a terminal"), "{stderr}");
}

/// `events --follow` rows keep to the terminal by the tables' rule, and show each
/// notification whole or as the shortest prefix that names it in the store, never cut.
#[test]
fn follow_rows_fit_and_keep_ids_whole() {
    let store = store();
    let bin = env!("CARGO_BIN_EXE_unsctl");
    for columns in [80u16, 120] {
        let command = format!(
            "timeout -s INT 2 {bin} --db {} events --follow --interval 0.2",
            store.db
        );
        let text = strip_ansi(&in_pty(&command, columns, "never", &store.config));
        assert!(text.contains("following"), "{text}");
        for line in text
            .lines()
            .filter(|l| l.contains("ATTEMPT") || l.contains("SUBMITTED"))
        {
            assert!(
                width(line) <= columns as usize,
                "{columns}: {} wide: {line}",
                width(line)
            );
        }
        for id in &store.ids {
            let shown = text
                .split_whitespace()
                .find(|word| id.starts_with(word) && word.len() >= 12);
            assert!(
                shown.is_some(),
                "{columns}: {id} not shown whole or as its prefix:\n{text}"
            );
            let names = store
                .ids
                .iter()
                .filter(|other| other.starts_with(shown.unwrap_or_default()))
                .count();
            assert_eq!(names, 1, "{columns}: {shown:?} names one notification");
        }
    }
}

/// The demo's table at 80 columns looks like the incident's: ids cut to their unique
/// prefixes, and the cause shown.
#[test]
fn the_demo_table_fits_80_columns_as_triage_does() {
    let dir = tempfile::tempdir().expect("dir");
    let bin = env!("CARGO_BIN_EXE_unsctl");
    let text = strip_ansi(&in_pty(
        &format!("{bin} demo"),
        80,
        "never",
        &dir.path().join("none.toml").display().to_string(),
    ));
    let header = text
        .lines()
        .find(|l| l.starts_with("ID ") && l.contains("BRANCH"))
        .unwrap_or_else(|| panic!("no table:\n{text}"));
    assert!(header.contains("CAUSE"), "{header}\n{text}");
    let rows: Vec<&str> = text
        .lines()
        .filter(|l| {
            l.starts_with("n-")
                && (l.contains("VERIFY") || l.contains("REPLAY") || l.contains("RESOLVE"))
        })
        .collect();
    assert!(!rows.is_empty(), "{text}");
    for row in rows {
        let id = row.split_whitespace().next().unwrap_or_default();
        assert!(id.len() < 34, "a full id at 80 columns: {row}");
        assert!(width(row) <= 80, "{row}");
    }
}

/// Provider text that holds a command (a Slack 400 telling the reader to force a resolve,
/// an error that mimics unsctl's own next step) is shown as quoted text by inspect,
/// triage, verify, list and events at every width, and never found among the commands a
/// screen shows; the genuine steps beside it still are, whole.
#[test]
fn provider_text_that_holds_a_command_is_shown_as_text() {
    let dir = tempfile::tempdir().expect("dir");
    let db = dir.path().join("injected.db");
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/hostile");
    let conn = rusqlite::Connection::open(&db).expect("db");
    for file in ["base.sql", "injected-command.sql"] {
        conn.execute_batch(&std::fs::read_to_string(fixtures.join(file)).expect("fixture"))
            .expect(file);
    }
    drop(conn);
    let bin = env!("CARGO_BIN_EXE_unsctl");
    let rejected = "n-01a2295dfd6f7542ae68623df2047f98";
    let unknown = "n-01a2295dfd6f7542ae68623cddd53c81";
    let mut genuine = std::collections::BTreeSet::new();
    for args in [
        format!("inspect {rejected}"),
        format!("inspect {unknown}"),
        "dlq triage".to_string(),
        "dlq list".to_string(),
        "verify".to_string(),
        "events --kind CHANNEL_ATTEMPT_RESULT --kind DEAD_LETTERED".to_string(),
    ] {
        for columns in [60u16, 80, 120] {
            let command = format!("{bin} --db {} {args}", db.display());
            let screen = strip_ansi(&in_pty(&command, columns, "never", "/nonexistent"));
            if args.starts_with("inspect") {
                assert!(
                    screen.contains("\"HTTP 400: run `unsctl dlq resolve")
                        || screen.contains("\"no reply\\\"; then: unsctl dlq resolve"),
                    "the provider's text is shown, quoted: {args} at {columns}:\n{screen}"
                );
            }
            for printed in printed_commands(&screen) {
                assert!(
                    !printed.contains("--force") && !printed.contains("--yes"),
                    "{args} at {columns}: provider text taken as a command: {printed}\n{screen}"
                );
                genuine.insert(printed);
            }
        }
    }
    assert!(
        genuine
            .iter()
            .any(|c| c.starts_with(&format!("unsctl replay {rejected}")))
            && genuine
                .iter()
                .any(|c| c.starts_with(&format!("unsctl verify {unknown}"))),
        "the genuine steps are still printed: {genuine:#?}"
    );
}

/// Every prompt that asks before a change, in a real terminal 60, 80 and 120 columns
/// wide: no line of it wider than the terminal, the question followed by its entries
/// one per line, each named once, then what to type.
#[test]
fn every_prompt_fits_and_lists_each_entry_once_under_its_question() {
    let store = store();
    let bin = env!("CARGO_BIN_EXE_unsctl");
    let db = &store.db;
    let [resolve, verify, replay] = [&store.ids[0], &store.ids[1], &store.ids[2]];
    let multi = format!(
        "replay {replay} {verify} --verified-not-delivered --reason 'nothing at the relay' --rate 1/m --confirm"
    );
    let prompts = [
        format!("dlq resolve {resolve} --confirm"),
        format!(
            "replay {verify} --verified-not-delivered --reason 'no trace at the relay, looked twice' --confirm"
        ),
        format!(
            "replay {resolve} --channels email --force --reason 'the provider asked for it' --confirm"
        ),
        format!("replay {replay} --rate 10/s --canary 1 --reason 'webhook fixed' --confirm"),
        multi,
    ];
    for args in &prompts {
        for columns in [60u16, 80, 120] {
            let term = Tmux::start_sized(&format!("{bin} --db {db} {args}"), columns, 60);
            let screen = term.wait_for("Type yes");
            term.line("no");
            let after = term.wait_for("EXIT=");
            assert!(after.contains("Declined: nothing was changed."), "{after}");
            for line in screen.lines() {
                assert!(
                    width(line) <= columns as usize,
                    "`{args}` at {columns}: {} wide:\n{line}\n\n{screen}",
                    width(line)
                );
            }
            // The prompt starts at its question; every entry follows it on a line of its
            // own, once.
            let lines: Vec<&str> = screen.lines().collect();
            let asked = lines
                .iter()
                .rposition(|l| l.ends_with('?'))
                .unwrap_or_else(|| panic!("`{args}`: no question:\n{screen}"));
            let prompt = lines[asked..].join("\n");
            for id in store.ids.iter().filter(|id| args.contains(id.as_str())) {
                let named: Vec<&&str> = lines[asked..]
                    .iter()
                    .filter(|l| l.contains(id.as_str()))
                    .collect();
                assert_eq!(named.len(), 1, "`{args}` at {columns}:\n{prompt}");
                assert!(named[0].starts_with(&format!("  {id}")), "{prompt}");
            }
            assert!(
                lines[asked + 1..].iter().any(|l| l.starts_with("Type yes")),
                "{prompt}"
            );
        }
    }
}
