//! The live screen, driven key by key on real stores: its jobs run in turn on this
//! thread (the same calls the worker makes), time is passed in, and each frame is drawn
//! with ratatui's test backend. Snapshots hold every view at 80×24 and 120×40, with
//! colour and without (the buffer's styles are in them).

use crate::support;

use ratatui::Terminal;
use ratatui::backend::TestBackend;
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use unsctl::runtime::schema::{self, OpenMode};
use unsctl::store::place::{Backend, Resolution, Source as Named};
use unsctl::triage::PlanAction;
use unsctl::tui::app::{App, Started, ViewKind};
use unsctl::tui::jobs::{self, Job, Source};

/// The screen over `db`, its jobs run here.
pub struct Screen {
    pub app: App,
    pub source: Source,
    pub reader: jobs::Reader,
    pub now: Instant,
}

impl Screen {
    pub fn open(db: &Path, readonly: bool, color: bool) -> Self {
        let resolution = Resolution {
            backend: Backend::Sqlite(db.to_path_buf()),
            context: None,
            source: Named::Flag,
            readonly: false,
        };
        let (place, readonly, refusing) =
            unsctl::session::screen::opener(resolution, readonly).expect("opener");
        let config = Started {
            place,
            operator: "erin".into(),
            readonly,
            color,
            refresh: Duration::from_secs(2),
            pulse_span: 3600.0,
        };
        // The wall clock stands 20 minutes after the store's newest event.
        let newest: f64 = rusqlite::Connection::open(db)
            .expect("db")
            .query_row("SELECT coalesce(max(at), 0) FROM uns_events", [], |r| {
                r.get(0)
            })
            .expect("newest");
        // The store's clock is the screen's: both stand where the test says.
        let clock = unsctl::clock::ManualClock::new(newest + 1200.0);
        let (file, store_clock) = (db.to_path_buf(), clock.clone());
        let open: unsctl::session::screen::Opener = Box::new(move |write| {
            // The screen's own refusal of a change, when it is read-only.
            refusing(write)?;
            let store = unsctl::store::direct::DirectStore::open(
                &unsctl::db::Place::File(file.clone()),
                write,
            )?
            .with_clock(Box::new(store_clock.clone()));
            Ok(Box::new(store) as Box<dyn unsctl::store::Store>)
        });
        let source = Source {
            open,
            contexts: Vec::new(),
            operator: "erin".into(),
            sources: Default::default(),
            since: None,
            clock: std::sync::Arc::new(clock),
            // Nothing runs the replays here: a carry-out looks once and does not wait.
            wait: Duration::ZERO,
            reports: std::env::temp_dir(),
        };
        Self {
            app: App::new(config),
            source,
            reader: jobs::Reader::default(),
            now: Instant::now(),
        }
    }

    pub fn run(&mut self, jobs: Vec<(u64, Job)>) {
        for (seq, job) in jobs {
            let reply = jobs::run(&self.source, &mut self.reader, job);
            self.app.absorb(seq, reply, self.now);
        }
    }

    pub fn view(&mut self, view: ViewKind, id: Option<String>) {
        let jobs = self.app.open(view, id, self.now);
        self.run(jobs);
    }

    pub fn press(&mut self, code: KeyCode) {
        let jobs = self
            .app
            .key(KeyEvent::new(code, KeyModifiers::NONE), self.now);
        self.run(jobs);
    }

    pub fn type_text(&mut self, text: &str) {
        for c in text.chars() {
            self.press(KeyCode::Char(c));
        }
    }

    /// Tabs through the dialog until `focus` has the keys.
    pub fn focus(&mut self, focus: unsctl::tui::app::Focus) {
        for _ in 0..10 {
            if self.app.dialog.as_ref().is_some_and(|d| d.focus == focus) {
                return;
            }
            self.press(KeyCode::Tab);
        }
        panic!("no {focus:?} in the dialog");
    }

    pub fn later(&mut self, by: Duration) {
        self.now += by;
    }

    pub fn draw(&self, width: u16, height: u16) -> Terminal<TestBackend> {
        let mut terminal = Terminal::new(TestBackend::new(width, height)).expect("terminal");
        terminal
            .draw(|frame| unsctl::tui::draw::draw(frame, &self.app, self.now))
            .expect("draw");
        terminal
    }

    pub fn text(&self, width: u16, height: u16) -> String {
        let terminal = self.draw(width, height);
        let buffer = terminal.backend().buffer();
        (0..buffer.area.height)
            .map(|y| {
                (0..buffer.area.width)
                    .map(|x| buffer[(x, y)].symbol().to_string())
                    .collect::<String>()
                    .trim_end()
                    .to_string()
            })
            .collect::<Vec<_>>()
            .join("\n")
    }
}

/// A store loaded from a fixture dump, in a directory of its own.
fn fixture(name: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("dir");
    let db = dir.path().join("uns.db");
    let sql = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("fixtures/{name}.sql")),
    )
    .expect("fixture");
    rusqlite::Connection::open(&db)
        .expect("db")
        .execute_batch(&sql)
        .expect("load");
    (dir, db)
}

fn snapshot_settings() -> insta::Settings {
    let mut settings = support::snapshot_settings(&[]);
    settings.add_filter(r"/tmp/\.tmp[A-Za-z0-9]+/uns\.db", "[DB]");
    settings.add_filter(r"\(\d+(\.\d+)?\s?[smhd]( \d+[smh])? ago\)", "([AGO] ago)");
    settings.add_filter(
        r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|\+00:00)",
        "[TIME]",
    );
    // The providers view names the relay it greeted, on a port of the moment.
    settings.add_filter(r"127\.0\.0\.1:\d+", "127.0.0.1:[PORT]");
    settings.set_snapshot_path("snapshots/tui");
    settings
}

#[test]
fn every_view_at_80x24_and_120x40_with_and_without_colour() {
    let (_dir, db) = fixture("every-case");
    let settings = snapshot_settings();
    for color in [true, false] {
        let mut screen = Screen::open(&db, false, color);
        screen.view(ViewKind::Dlq, None);
        let first = screen.app.dlq.rows[0].verdict.id.clone();
        let mut shots: Vec<(String, Terminal<TestBackend>)> = Vec::new();
        for (name, view, id) in [
            ("dlq", ViewKind::Dlq, None),
            ("inspect", ViewKind::Inspect, Some(first.clone())),
            ("reconcile", ViewKind::Reconcile, None),
            ("pulse", ViewKind::Pulse, None),
            ("audit", ViewKind::Audit, None),
            ("contexts", ViewKind::Contexts, None),
            ("providers", ViewKind::Providers, None),
        ] {
            screen.view(view, id);
            for (width, height) in [(80u16, 24u16), (120, 40)] {
                shots.push((
                    format!("{name}_{width}x{height}"),
                    screen.draw(width, height),
                ));
            }
        }
        screen.view(ViewKind::Dlq, None);
        screen.press(KeyCode::Char('?'));
        shots.push(("help_80x24".into(), screen.draw(80, 24)));
        screen.press(KeyCode::Esc);
        shots.push(("too_small_59x16".into(), screen.draw(59, 16)));
        // A replay's dialog on the REPLAY entry refused permanently: the CLI's preview.
        screen.press(KeyCode::Char('G'));
        screen.press(KeyCode::Char('p'));
        // As a person works with it, its first moment past.
        screen.later(Duration::from_millis(400));
        shots.push(("dialog_80x24".into(), screen.draw(80, 24)));
        shots.push(("dialog_120x40".into(), screen.draw(120, 40)));
        // The other two acts' dialogs, each on the first entry of its own verdict.
        for (name, key, action) in [
            ("resolve_dialog", 'r', PlanAction::Resolve),
            ("verify_dialog", 'v', PlanAction::Verify),
        ] {
            screen.press(KeyCode::Esc);
            let row = screen
                .app
                .dlq
                .rows
                .iter()
                .position(|row| row.verdict.action == action)
                .expect("a row of the verdict");
            screen.press(KeyCode::Char('g'));
            for _ in 0..row {
                screen.press(KeyCode::Char('j'));
            }
            screen.press(KeyCode::Char(key));
            screen.later(Duration::from_millis(400));
            for (width, height) in [(80u16, 24u16), (120, 40)] {
                shots.push((
                    format!("{name}_{width}x{height}"),
                    screen.draw(width, height),
                ));
            }
        }
        let suffix = if color { "color" } else { "no_color" };
        settings.bind(|| {
            for (name, terminal) in shots {
                insta::assert_debug_snapshot!(
                    format!("{name}_{suffix}"),
                    terminal.backend().buffer()
                );
            }
        });
    }
}

#[test]
fn without_colour_every_meaning_is_in_words_or_glyphs() {
    let (_dir, db) = fixture("every-case");
    let mut screen = Screen::open(&db, true, false);
    screen.view(ViewKind::Dlq, None);
    let terminal = screen.draw(80, 24);
    let buffer = terminal.backend().buffer();
    for y in 0..buffer.area.height {
        for x in 0..buffer.area.width {
            let cell = &buffer[(x, y)];
            assert_eq!(cell.fg, ratatui::style::Color::Reset, "({x},{y})");
            assert_eq!(cell.bg, ratatui::style::Color::Reset, "({x},{y})");
        }
    }
    let text = screen.text(80, 24);
    for words in [
        "READ-ONLY",
        "RESOLVE 1",
        "VERIFY 2",
        "REPLAY 2",
        ">[ ]",
        "next: unsctl verify",
    ] {
        assert!(text.contains(words), "{words}:\n{text}");
    }
    // However many keys the width leaves out, the footer keeps how to get help and out.
    let footer = text.lines().last().unwrap_or_default().to_string();
    assert!(
        footer.contains("? help") && footer.contains("q quit"),
        "{footer}"
    );
    // The cursor is a glyph; a mark is [x].
    screen.press(KeyCode::Char(' '));
    assert!(
        screen.text(80, 24).contains("[x]"),
        "{}",
        screen.text(80, 24)
    );
}

/// A relay log named that cannot be read is said up front, in the command's words: in
/// the reconcile view above the table, and first in what verify answers; no answer
/// rests on it.
#[test]
fn the_screen_says_up_front_which_record_it_could_not_read() {
    let (dir, db) = fixture("every-case");
    let missing = dir.path().join("mail.log.typo");
    let mut screen = Screen::open(&db, true, false);
    screen.source.sources.relay_logs = vec![missing.clone()];
    let said = format!(
        "Not read, so no answer rests on it: {}: No such file or directory",
        missing.display()
    );
    screen.view(ViewKind::Reconcile, None);
    assert_eq!(screen.app.reconcile.unread.len(), 1);
    let text = screen.text(200, 50);
    let above = text.find(&said).unwrap_or_else(|| panic!("{text}"));
    assert!(above < text.find("CHANNEL").expect("the table"), "{text}");
    // More than there is room for: the first, and how many more, never one left unsaid.
    let (second, third) = (dir.path().join("mail.log.1"), dir.path().join("mail.log.2"));
    screen.source.sources.relay_logs = vec![missing.clone(), second, third];
    screen.view(ViewKind::Reconcile, None);
    assert_eq!(screen.app.reconcile.unread.len(), 3);
    let text = screen.text(200, 50);
    let first = text.find(&said).unwrap_or_else(|| panic!("{text}"));
    let more = text
        .find("Not read, so no answer rests on it: 2 more (`unsctl reconcile` names each)")
        .unwrap_or_else(|| panic!("{text}"));
    assert!(
        first < more && more < text.find("CHANNEL").expect("the table"),
        "{text}"
    );
    screen.source.sources.relay_logs = vec![missing.clone()];
    screen.view(ViewKind::Dlq, None);
    let ids: Vec<String> = screen
        .app
        .dlq
        .rows
        .iter()
        .filter(|r| r.verdict.branch == unsctl::triage::Branch::Verify)
        .map(|r| r.verdict.id.clone())
        .collect();
    assert!(!ids.is_empty());
    let reply = jobs::run(&screen.source, &mut screen.reader, Job::Verify { ids });
    let jobs::Reply::Verified { lines, asked, .. } = reply else {
        panic!("no answers");
    };
    assert!(lines[0].starts_with(&said), "{lines:#?}");
    assert!(
        asked
            .answers
            .iter()
            .all(|a| a.answer == unsctl::verify::Delivery::CannotTell)
    );
}

/// The branch counts, reconcile classes and pulse series on screen are the commands' own
/// `-o json`, for a store of every runbook case.
#[test]
fn the_screen_gives_the_same_answers_as_the_commands() {
    let (_dir, db) = fixture("every-case");
    let json = |args: &[&str]| -> Value {
        let out = support::unsctl()
            .arg("--db")
            .arg(&db)
            .args(["-o", "json"])
            .args(args)
            .output()
            .expect("unsctl");
        support::succeeded(&out);
        serde_json::from_slice(&out.stdout).expect("json")
    };
    let mut screen = Screen::open(&db, true, false);
    screen.view(ViewKind::Dlq, None);
    let triage = json(&["dlq", "triage"]);
    let entries = triage["entries"].as_array().expect("entries");
    for branch in ["RESOLVE", "VERIFY", "REPLAY"] {
        let cli = entries.iter().filter(|e| e["branch"] == branch).count();
        let shown = screen
            .app
            .dlq
            .counts
            .as_ref()
            .and_then(|c| c.get(&branch.parse().expect("branch")).copied())
            .unwrap_or(0);
        assert_eq!(shown, cli, "{branch}");
        assert!(screen.text(120, 40).contains(&format!("{branch} {cli}")));
    }
    let rows: Vec<(String, String)> = screen
        .app
        .dlq
        .rows
        .iter()
        .map(|r| (r.verdict.id.clone(), r.verdict.branch.to_string()))
        .collect();
    let cli_rows: Vec<(String, String)> = entries
        .iter()
        .map(|e| {
            (
                e["id"].as_str().unwrap_or("").into(),
                e["branch"].as_str().unwrap_or("").into(),
            )
        })
        .collect();
    assert_eq!(rows, cli_rows);

    screen.view(ViewKind::Reconcile, None);
    let reconciled = json(&["reconcile"]);
    let mut cli_classes: Vec<(String, String, String)> = reconciled["notifications"]
        .as_array()
        .expect("notifications")
        .iter()
        .map(|n| {
            let text = |key: &str| n[key].as_str().unwrap_or("").to_string();
            (text("id"), text("channel"), text("class"))
        })
        .collect();
    let mut shown: Vec<(String, String, String)> = screen
        .app
        .reconcile
        .items
        .iter()
        .map(|i| {
            (
                i.id.clone(),
                i.channel.to_string(),
                i.class.as_str().to_string(),
            )
        })
        .collect();
    cli_classes.sort();
    shown.sort();
    assert!(!shown.is_empty());
    assert_eq!(shown, cli_classes);
    // The ids that need a person are shown as prefixes that name one notification each,
    // as every command takes them.
    let conn = rusqlite::Connection::open(&db).expect("db");
    let text = screen.text(120, 40);
    for item in screen.app.reconcile.needs() {
        let short = screen.app.short.get(&item.id).expect("shortened");
        assert!(item.id.starts_with(short.as_str()) && short.len() < item.id.len());
        let named: i64 = conn
            .query_row(
                "SELECT count(*) FROM uns_notifications WHERE substr(id, 1, length(?1)) = ?1",
                [short],
                |r| r.get(0),
            )
            .expect("count");
        assert_eq!(named, 1, "{short} names one notification");
        assert!(text.contains(short.as_str()), "{text}");
    }

    screen.view(ViewKind::Pulse, None);
    let pulse = screen.app.pulse.pulse.clone().expect("pulse");
    let window = &pulse.window;
    let since = unsctl::render::time::rfc3339(window.since);
    let until = unsctl::render::time::rfc3339(window.until);
    let cli = json(&["pulse", "--since", &since, "--until", &until]);
    for series in unsctl::pulse::Series::ALL {
        let cli_counts: Vec<u64> = cli["series"][series.as_str()]
            .as_array()
            .expect("series")
            .iter()
            .map(|n| n.as_u64().unwrap_or(0))
            .collect();
        assert_eq!(pulse.series[&series], cli_counts, "{}", series.as_str());
        assert_eq!(
            pulse.last(series),
            cli["last"][series.as_str()].as_f64(),
            "{}",
            series.as_str()
        );
    }
}

/// Three replay entries and one to leave alone.
fn replay_store() -> (tempfile::TempDir, PathBuf, Vec<String>) {
    let dir = tempfile::tempdir().expect("dir");
    let db = dir.path().join("uns.db");
    let conn = schema::open(&db, OpenMode::Create).expect("store");
    let mut ids: Vec<String> = (0..3)
        .map(|n| support::replay_entry(&conn, 1_000.0 + f64::from(n)))
        .collect();
    ids.sort();
    support::verify_entry(&conn, 2_000.0);
    (dir, db, ids)
}

pub fn replayed_payloads(db: &Path, ids: &[String]) -> Vec<Value> {
    let conn = rusqlite::Connection::open(db).expect("db");
    ids.iter()
        .map(|id| {
            let payload: String = conn
                .query_row(
                    "SELECT payload FROM uns_events WHERE notification_id = ?1 AND kind = 'REPLAYED'",
                    [id],
                    |r| r.get(0),
                )
                .expect("replayed");
            serde_json::from_str(&payload).expect("json")
        })
        .collect()
}

#[test]
fn marked_rows_replayed_from_the_screen_are_audited_as_the_cli_audits_them_plus_via() {
    let (dir, db, ids) = replay_store();
    let cli_db = dir.path().join("cli.db");
    std::fs::copy(&db, &cli_db).expect("copy");
    let mut screen = Screen::open(&db, false, true);
    screen.view(ViewKind::Dlq, None);
    // Filter to the replay branch, mark all three.
    screen.press(KeyCode::Char('/'));
    screen.type_text("branch:replay channel:slack");
    screen.press(KeyCode::Enter);
    assert_eq!(screen.app.dlq.rows.len(), 3, "{}", screen.text(120, 40));
    for _ in 0..3 {
        screen.press(KeyCode::Char(' '));
    }
    assert_eq!(screen.app.dlq.marks.len(), 3);
    screen.press(KeyCode::Char('p'));
    let dialog = screen.app.dialog.as_ref().expect("dialog");
    assert_eq!(
        dialog.focus,
        unsctl::tui::app::Focus::Cancel,
        "focus starts on Cancel"
    );
    // Keys in the first 300 ms are dropped: this Enter would have cancelled. The buttons
    // say so until they answer.
    screen.press(KeyCode::Enter);
    assert!(screen.app.dialog.is_some(), "a key at once is dropped");
    let text = screen.text(120, 40);
    assert!(
        text.contains("> [ Cancel ]"),
        "focus starts on Cancel: {text}"
    );
    assert!(text.contains("(keys in a moment)"), "{text}");
    for id in &ids {
        assert!(
            text.contains(&format!("{id}  REPLAY  replay  channels SLACK")),
            "{text}"
        );
    }
    screen.later(Duration::from_millis(400));
    let text = screen.text(120, 40);
    assert!(text.contains("> [ Cancel ]"), "{text}");
    assert!(!text.contains("(keys in a moment)"), "{text}");
    // Tab to the reason, give it, Enter previews again with it; the word; Go.
    screen.focus(unsctl::tui::app::Focus::Reason);
    screen.type_text("webhook fixed");
    screen.press(KeyCode::Enter);
    screen.type_text("nope");
    screen.press(KeyCode::Enter);
    screen.press(KeyCode::Enter);
    assert!(
        screen.text(120, 40).contains("type yes in the word field"),
        "a wrong word does nothing:\n{}",
        screen.text(120, 40)
    );
    assert!(replayed_count(&db) == 0, "nothing changed yet");
    for _ in 0..4 {
        screen.press(KeyCode::Backspace);
    }
    screen.type_text("yes");
    screen.press(KeyCode::Enter);
    screen.press(KeyCode::Enter);
    let text = screen.text(120, 40);
    assert!(text.contains("3 done"), "{text}");
    // Closed, the view reads again: the counts of before are never shown over the rows
    // of after, not even while they are being counted again.
    assert!(
        screen.app.dlq.counts.is_none(),
        "the old counts are dropped at once"
    );
    // Beneath the outcome the view is read again at the next tick, not only once the
    // dialog is closed: the header never says there is no data over rows it shows.
    assert!(screen.text(120, 40).contains("no data yet"));
    let jobs = screen.app.tick(screen.now);
    assert!(
        jobs.iter().any(|(_, job)| matches!(job, Job::Dlq { .. })),
        "the DLQ is read beneath the outcome"
    );
    screen.run(jobs);
    assert!(
        screen.app.dialog.is_some(),
        "the outcome stays until closed"
    );
    let text = screen.text(120, 40);
    assert!(text.contains("data 0s old"), "{text}");
    assert!(!text.contains("no data yet"), "{text}");
    assert_eq!(
        screen
            .app
            .dlq
            .counts
            .as_ref()
            .map(|c| c.values().sum::<usize>()),
        Some(0)
    );
    // Closed, nothing is read twice.
    screen.press(KeyCode::Enter);
    assert!(screen.app.pending.is_empty());
    let text = screen.text(120, 40);
    assert!(text.contains("No DLQ entries match"), "{text}");
    assert!(!text.contains("REPLAY 3"), "{text}");
    let ours = replayed_payloads(&db, &ids);

    // The CLI, for the same selection, on a copy of the same store.
    let mut replay = vec!["replay"];
    replay.extend(ids.iter().map(String::as_str));
    crate::screen_acts::carried_out_by_erin(&cli_db, &replay, "webhook fixed");
    let theirs = replayed_payloads(&cli_db, &ids);
    for (ours, theirs) in ours.into_iter().zip(theirs) {
        crate::screen_acts::same_but_via(ours, &theirs);
    }
}

pub fn replayed_count(db: &Path) -> i64 {
    rusqlite::Connection::open(db)
        .expect("db")
        .query_row(
            "SELECT count(*) FROM uns_events WHERE kind IN ('REPLAYED', 'DLQ_RESOLVED', 'VERIFIED')",
            [],
            |r| r.get(0),
        )
        .expect("count")
}

pub fn fingerprint(db: &Path) -> (String, String) {
    use sha2::Digest;
    let file = sha2::Sha256::digest(std::fs::read(db).expect("read"));
    let dump = support::dump(db);
    (
        format!("{file:x}"),
        format!("{:x}", sha2::Sha256::digest(dump.as_bytes())),
    )
}

#[test]
fn read_only_every_action_key_leaves_the_store_byte_identical() {
    let (_dir, db, ids) = replay_store();
    let before = fingerprint(&db);
    let mut screen = Screen::open(&db, true, false);
    screen.view(ViewKind::Dlq, None);
    screen.press(KeyCode::Char(' '));
    for key in ['r', 'p', 'v'] {
        screen.press(KeyCode::Char(key));
        assert!(screen.app.dialog.is_none(), "{key} opened a dialog");
        let text = screen.text(80, 24);
        assert!(text.contains("READ-ONLY (--readonly)"), "{key}:\n{text}");
        screen.later(Duration::from_millis(400));
        for key in [
            KeyCode::Tab,
            KeyCode::Enter,
            KeyCode::Char('y'),
            KeyCode::Enter,
        ] {
            screen.press(key);
        }
    }
    // Nor can a change reach the store any other way: the screen's opener refuses.
    let intents = vec![replay_intent(&screen, &ids[0])];
    let reply = jobs::run(
        &screen.source,
        &mut jobs::Reader::default(),
        carry_job(intents, "yes"),
    );
    assert!(
        matches!(&reply, jobs::Reply::Failed { error, .. } if error.message.contains("read-only")),
        "{reply:?}"
    );
    assert_eq!(fingerprint(&db), before);
}

/// The job that carries `intents` out, confirmed by `word`, with no wait.
fn carry_job(intents: Vec<unsctl::session::Intent>, word: &str) -> Job {
    let plan = unsctl::session::run::arrange(intents, None, None, Duration::ZERO).expect("plan");
    Job::Carry {
        plan: std::sync::Arc::new(plan),
        word: word.into(),
        stop: Default::default(),
    }
}

/// The session's intent to replay `id`, read through the screen's own reader.
fn replay_intent(screen: &Screen, id: &str) -> unsctl::session::Intent {
    unsctl::session::intent(
        screen.reader.store().expect("reader"),
        id,
        unsctl::remediation::Action::Replay,
        &Default::default(),
    )
    .expect("intent")
}

/// The screen carries out only what the session confirms: a word that is not the one the
/// count calls for changes nothing, whatever the dialog let through.
#[test]
fn a_carry_out_with_the_wrong_word_changes_nothing() {
    let (_dir, db, ids) = replay_store();
    let before = fingerprint(&db);
    let mut screen = Screen::open(&db, false, false);
    screen.view(ViewKind::Dlq, None);
    let intents = vec![replay_intent(&screen, &ids[0])];
    assert!(intents[0].preview.is_ok(), "{:?}", intents[0].preview);
    for word in ["y", "no", "11", ""] {
        let reply = jobs::run(
            &screen.source,
            &mut jobs::Reader::default(),
            carry_job(intents.clone(), word),
        );
        assert!(
            matches!(&reply, jobs::Reply::Carried { lines, summary } if lines.is_empty() && summary.starts_with("nothing was changed")),
            "{word:?}: {reply:?}"
        );
    }
    assert_eq!(fingerprint(&db), before);
}

#[test]
fn a_preview_gone_stale_before_the_word_ends_as_a_conflict_with_nothing_changed() {
    let (_dir, db, ids) = replay_store();
    let mut screen = Screen::open(&db, false, false);
    screen.view(ViewKind::Dlq, None);
    screen.press(KeyCode::Char('p'));
    screen.later(Duration::from_millis(400));
    // Meanwhile, someone else replays it from the command line.
    let out = support::unsctl()
        .arg("--db")
        .arg(&db)
        .args(["replay", &ids[0], "--operator", "sam", "--confirm", "--yes"])
        .output()
        .expect("replay");
    support::succeeded(&out);
    let replays_before = replayed_count(&db);
    screen.focus(unsctl::tui::app::Focus::Word);
    screen.type_text("yes");
    screen.press(KeyCode::Enter);
    screen.press(KeyCode::Enter);
    let text = screen.text(120, 40);
    assert!(
        text.contains("0 done") && (text.contains("stale") || text.contains("conflict")),
        "{text}"
    );
    assert_eq!(replayed_count(&db), replays_before, "nothing more changed");
}

/// A paste longer than a field holds is never cut without a word: the filter and the
/// reason say so, and keep what they hold.
#[test]
fn a_field_too_short_for_a_paste_says_so() {
    let (_dir, db, ids) = replay_store();
    let mut screen = Screen::open(&db, false, false);
    screen.view(ViewKind::Dlq, None);
    screen.press(KeyCode::Char('/'));
    screen.type_text(&format!("error:\"{}\"", "x".repeat(600)));
    let text = screen.text(80, 24);
    assert!(
        text.contains("the filter holds at most 500 characters: what was typed past them"),
        "{text}"
    );
    screen.press(KeyCode::Esc);
    screen.view(ViewKind::Inspect, Some(ids[0].clone()));
    screen.press(KeyCode::Char('p'));
    screen.later(Duration::from_millis(400));
    screen.focus(unsctl::tui::app::Focus::Reason);
    screen.type_text(&"webhook fixed ".repeat(40));
    let dialog = screen.app.dialog.as_ref().expect("dialog");
    assert_eq!(dialog.reason.len(), 500);
    assert!(
        screen
            .text(120, 40)
            .contains("the reason holds at most 500 characters"),
        "{}",
        screen.text(120, 40)
    );
}

#[test]
fn a_filter_it_cannot_read_says_why_and_keeps_the_rows() {
    let (_dir, db, _ids) = replay_store();
    let mut screen = Screen::open(&db, false, false);
    screen.view(ViewKind::Dlq, None);
    let rows = screen.app.dlq.rows.len();
    screen.press(KeyCode::Char('/'));
    screen.type_text("colour:red");
    screen.press(KeyCode::Enter);
    assert!(
        screen.text(80, 24).contains("filter not applied"),
        "{}",
        screen.text(80, 24)
    );
    assert_eq!(screen.app.dlq.rows.len(), rows);
    screen.press(KeyCode::Esc);
    // y copies the id under the cursor, Y its next step.
    screen.press(KeyCode::Char('y'));
    let id = screen.app.dlq.rows[0].verdict.id.clone();
    assert_eq!(screen.app.clipboard.take(), Some(id.clone()));
    screen.press(KeyCode::Char('Y'));
    assert!(
        screen
            .app
            .clipboard
            .take()
            .is_some_and(|c| c.starts_with("unsctl ") && c.contains(&id))
    );
    // The command bar goes to a view by name, with completion.
    screen.press(KeyCode::Char(':'));
    screen.type_text("aud");
    screen.press(KeyCode::Tab);
    screen.press(KeyCode::Enter);
    assert_eq!(screen.app.view, ViewKind::Audit);
}

/// Esc cancels a read that hangs: the worker is abandoned, and the read is asked again
/// only at the next refresh, not at once and not over and over.
#[test]
fn a_cancelled_read_is_asked_again_at_the_next_refresh_not_at_once() {
    let (_dir, db, _ids) = replay_store();
    let mut screen = Screen::open(&db, false, false);
    let now = screen.now;
    let pending = screen.app.open(ViewKind::Dlq, None, now);
    assert!(!pending.is_empty(), "the first read is asked for");
    // Nothing answers; Esc.
    let jobs = screen
        .app
        .key(KeyEvent::new(KeyCode::Esc, KeyModifiers::NONE), now);
    assert!(jobs.is_empty());
    assert!(screen.app.pending.is_empty() && screen.app.restart_worker);
    assert!(screen.text(80, 24).contains("cancelled: "));
    assert!(screen.text(80, 24).contains("no data yet"));
    assert!(screen.app.tick(now + Duration::from_millis(500)).is_empty());
    let again = screen.app.tick(now + Duration::from_secs(2));
    assert!(
        again.iter().any(|(_, job)| matches!(job, Job::Dlq { .. })),
        "{again:?}"
    );
}

/// A read that failed says so until it answers again, and no longer: a store back after
/// an outage is not shown as failing beside its fresh rows (it was, until someone acted).
#[test]
fn a_read_that_failed_stops_saying_so_once_it_answers_again() {
    let (dir, db, ids) = replay_store();
    let mut screen = Screen::open(&db, false, false);
    screen.view(ViewKind::Dlq, None);
    let refresh = |screen: &mut Screen| {
        screen.later(Duration::from_secs(3));
        let jobs = screen.app.tick(screen.now);
        assert!(!jobs.is_empty(), "the view is read again");
        screen.run(jobs);
    };
    // The store goes away, and the screen's connection with it.
    let away = dir.path().join("away.db");
    std::fs::rename(&db, &away).expect("move the store away");
    screen.reader = jobs::Reader::default();
    refresh(&mut screen);
    let text = screen.text(120, 40);
    assert!(text.contains("failed: "), "{text}");
    // It is back: the next refresh reads it, and the failure is no longer said.
    std::fs::rename(&away, &db).expect("bring the store back");
    refresh(&mut screen);
    let text = screen.text(120, 40);
    assert!(!text.contains("failed"), "{text}");
    assert!(text.contains(&ids[0][..12]), "{text}");
    // An act's failure is not a read's: it stays until something else is said.
    screen.app.say("resolve failed: conflict", true);
    refresh(&mut screen);
    assert!(screen.text(120, 40).contains("resolve failed: conflict"));
}

/// A store file replaced under the screen (a restore moved into place) is read from its
/// path again: the screen went on showing the old file's entries as live.
#[test]
fn the_screen_reads_a_store_file_replaced_under_it_from_its_path() {
    let (dir, db, ids) = replay_store();
    let mut screen = Screen::open(&db, false, false);
    screen.view(ViewKind::Dlq, None);
    let restored = dir.path().join("restored.db");
    std::fs::copy(&db, &restored).expect("copy");
    let added = {
        let conn = schema::open(&restored, OpenMode::ReadWrite).expect("store");
        support::replay_entry(&conn, 3_000.0)
    };
    assert!(!ids.contains(&added));
    std::fs::rename(&restored, &db).expect("move the restore into place");
    screen.later(Duration::from_secs(11));
    let jobs = screen.app.tick(screen.now);
    screen.run(jobs);
    let text = screen.text(120, 40);
    assert!(text.contains(&added[..12]), "{text}");
    assert!(
        text.contains("total 5"),
        "the counts are the new file's: {text}"
    );
}

#[test]
fn the_audit_view_lists_the_notes_beside_the_acts() {
    let (_dir, db) = fixture("every-case");
    drop(
        unsctl::runtime::schema::open(&db, unsctl::runtime::schema::OpenMode::Runtime)
            .expect("migrate"),
    );
    let store = unsctl::store::direct::DirectStore::open_read_write(&db).expect("store");
    use unsctl::store::Store;
    store
        .note(&unsctl::api::NoteRequest {
            operator: Some("oncall-jane".into()),
            text: "relay restarted".into(),
            fixed: true,
            ticket: Some("INC-9".into()),
            ..Default::default()
        })
        .expect("note");
    drop(store);
    let mut screen = Screen::open(&db, false, false);
    screen.view(ViewKind::Audit, None);
    let text = screen.text(120, 40);
    assert!(text.contains("NOTE"), "{text}");
    assert!(text.contains("oncall-jane"), "{text}");
    assert!(text.contains("relay restarted"), "{text}");
    assert!(
        text.contains(
            "NOTE by oncall-jane: \"relay restarted\"; ticket \"INC-9\"; records the fix, at"
        ),
        "the selected note, said in full: {text}"
    );
}

/// The inspect view's next step is shown whole at 80 columns, however many lines it wraps
/// to: here the words that stand in for a command no line can carry (an id with a line
/// break), which wrap to three.
#[test]
fn the_next_step_of_an_entry_is_whole_at_80_columns() {
    let (_dir, db) = fixture("every-case");
    let hostile = "n-0broken\nX";
    let conn = rusqlite::Connection::open(&db).expect("db");
    let first: String = conn
        .query_row(
            "SELECT id FROM uns_notifications WHERE dead_letter = 1 ORDER BY id LIMIT 1",
            [],
            |r| r.get(0),
        )
        .expect("an entry");
    conn.execute(
        "INSERT INTO uns_notifications (id, status, dead_letter, attempts, cycle,
             cycle_attempts, max_attempts, channels, payload, error_message,
             next_attempt_at, created_at, updated_at)
         SELECT ?1, status, dead_letter, attempts, cycle, cycle_attempts, max_attempts,
             channels, payload, error_message, next_attempt_at, created_at, updated_at
         FROM uns_notifications WHERE id = ?2",
        [hostile, first.as_str()],
    )
    .expect("the entry again, under an id no command line can carry");
    conn.execute(
        "INSERT INTO uns_events (notification_id, at, kind, payload)
         SELECT ?1, at, kind, payload FROM uns_events WHERE notification_id = ?2 ORDER BY id",
        [hostile, first.as_str()],
    )
    .expect("its events");
    drop(conn);
    let mut screen = Screen::open(&db, false, false);
    screen.view(ViewKind::Inspect, Some(hostile.to_string()));
    let text = screen.text(80, 24);
    let said = text.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        said.contains("cannot be written on one command line")
            && said.contains("or pick it in the live screen (j/k scroll)"),
        "{text}"
    );
}

/// "Ago" and "still happening" on the screen are told by the store's clock, as the
/// commands tell them: a screen whose own clock runs a year ahead of the store still
/// says how long before the store's now the last lease loss was.
#[test]
fn the_screen_tells_ago_by_the_stores_clock() {
    let (_dir, db) = fixture("every-case");
    let (newest, lost): (f64, f64) = rusqlite::Connection::open(&db)
        .expect("db")
        .query_row(
            "SELECT MAX(at), (SELECT MAX(at) FROM uns_events WHERE kind = 'LEASE_LOST')
             FROM uns_events",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .expect("times");
    let mut screen = Screen::open(&db, false, false);
    // The store's clock stands 20 minutes after its newest event (Screen::open).
    let ago = format!(
        "({} ago)",
        unsctl::render::time::duration(newest + 1200.0 - lost)
    );
    screen.source.clock = std::sync::Arc::new(unsctl::clock::ManualClock::new(
        newest + 1200.0 + 365.0 * 86_400.0,
    ));
    for view in [ViewKind::Reconcile, ViewKind::Pulse] {
        screen.view(view, None);
        let text = screen.text(120, 40);
        assert!(
            text.contains("NOT HAPPENING NOW: last lease loss") && text.contains(&ago),
            "{view:?}: no {ago:?} in:\n{text}"
        );
    }
}
