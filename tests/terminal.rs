//! Prompts under a real terminal (tmux): what the operator sees, and that the choice took
//! effect.

mod support;

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};
use unsctl::runtime::schema::{self, OpenMode};

struct Tmux {
    socket: String,
    session: String,
}

impl Tmux {
    fn start(command: &str) -> Self {
        let socket = format!(
            "unsctl-test-{}-{}",
            std::process::id(),
            uuid::Uuid::new_v4().simple()
        );
        let session = "t".to_string();
        let status = Command::new("tmux")
            .args([
                "-L",
                &socket,
                "new-session",
                "-d",
                "-s",
                &session,
                "-x",
                "220",
                "-y",
                "60",
            ])
            .arg(format!("env -u NO_COLOR {command}; echo EXIT=$?; sleep 60"))
            .status()
            .expect("tmux (apt-get install tmux)");
        assert!(status.success());
        Self { socket, session }
    }

    fn screen(&self) -> String {
        let output = Command::new("tmux")
            .args([
                "-L",
                &self.socket,
                "capture-pane",
                "-p",
                "-J",
                "-S",
                "-200",
                "-t",
                &self.session,
            ])
            .output()
            .expect("capture");
        String::from_utf8_lossy(&output.stdout).into_owned()
    }

    fn wait_for(&self, text: &str) -> String {
        let start = Instant::now();
        loop {
            let screen = self.screen();
            if screen.contains(text) {
                return screen;
            }
            assert!(
                start.elapsed() < Duration::from_secs(20),
                "timed out waiting for {text:?}:\n{screen}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn keys(&self, keys: &[&str]) {
        let status = Command::new("tmux")
            .args(["-L", &self.socket, "send-keys", "-t", &self.session])
            .args(keys)
            .status()
            .expect("send-keys");
        assert!(status.success());
        std::thread::sleep(Duration::from_millis(150));
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .args(["-L", &self.socket, "kill-server"])
            .status();
    }
}

fn status(db: &Path, id: &str) -> String {
    let conn = schema::open(db, OpenMode::ReadOnly).expect("store");
    conn.query_row(
        "SELECT status FROM uns_notifications WHERE id = ?1",
        [id],
        |r| r.get(0),
    )
    .expect("status")
}

fn command(db: &Path, args: &str) -> String {
    format!(
        "{} --db {} {args}",
        env!("CARGO_BIN_EXE_unsctl"),
        db.display()
    )
}

#[test]
fn confirming_and_declining_at_the_prompt() {
    let dir = tempfile::tempdir().expect("dir");
    let db = dir.path().join("uns.db");
    let conn = schema::open(&db, OpenMode::Create).expect("store");
    let declined = support::replay_entry(&conn, 1000.0);
    let confirmed = support::replay_entry(&conn, 2000.0);

    let tmux = Tmux::start(&command(&db, &format!("replay {declined} --confirm")));
    let screen = tmux.wait_for("replay 1 entry?");
    assert!(
        screen.contains(&format!("{declined}  REPLAY  replay  channels SLACK")),
        "{screen}"
    );
    tmux.keys(&["n", "Enter"]);
    let screen = tmux.wait_for("EXIT=");
    assert!(
        screen.contains("Declined: nothing was changed."),
        "{screen}"
    );
    assert_eq!(status(&db, &declined), "DEAD");

    let tmux = Tmux::start(&command(&db, &format!("replay {confirmed} --confirm")));
    tmux.wait_for("replay 1 entry?");
    tmux.keys(&["yes", "Enter"]);
    let screen = tmux.wait_for("EXIT=0");
    assert!(screen.contains("replayed SLACK"), "{screen}");
    assert_eq!(status(&db, &confirmed), "PENDING");
}

#[test]
fn more_than_ten_entries_need_the_count_typed() {
    let dir = tempfile::tempdir().expect("dir");
    let db = dir.path().join("uns.db");
    let conn = schema::open(&db, OpenMode::Create).expect("store");
    let ids: Vec<String> = (0..11)
        .map(|n| support::replay_entry(&conn, 1000.0 + f64::from(n)))
        .collect();
    let tmux = Tmux::start(&command(&db, "replay --branch replay --confirm"));
    tmux.wait_for("Type 11 and press Enter");
    tmux.keys(&["10", "Enter"]);
    let screen = tmux.wait_for("EXIT=");
    assert!(screen.contains("Declined"), "{screen}");
    assert!(ids.iter().all(|id| status(&db, id) == "DEAD"));
    let tmux = Tmux::start(&command(&db, "replay --branch replay --confirm"));
    tmux.wait_for("Type 11 and press Enter");
    tmux.keys(&["11", "Enter"]);
    tmux.wait_for("EXIT=0");
    assert!(ids.iter().all(|id| status(&db, id) == "PENDING"));
}

#[test]
fn the_interactive_walk_resolves_replays_skips_and_quits() {
    let dir = tempfile::tempdir().expect("dir");
    let db = dir.path().join("uns.db");
    let conn = schema::open(&db, OpenMode::Create).expect("store");
    let resolvable = support::resolve_entry(&conn, 1000.0);
    let replayable = support::replay_entry(&conn, 2000.0);
    let uncertain = support::verify_entry(&conn, 3000.0);
    let skipped = support::replay_entry(&conn, 4000.0);
    let unreached = support::replay_entry(&conn, 5000.0);
    // Ids are uuid v7, ordered by creation within one process: the walk follows this list.
    let order = [
        (resolvable.clone(), "resolve"),
        (replayable.clone(), "replay"),
        (uncertain.clone(), "attest"),
        (skipped.clone(), "skip"),
        (unreached.clone(), "quit"),
    ];

    let tmux = Tmux::start(&command(&db, "dlq triage --interactive --operator erin"));
    for (n, (id, choice)) in order.iter().enumerate() {
        let marker = format!("[{}/5] {id}", n + 1);
        let screen = tmux.wait_for(&marker);
        tmux.wait_for("Decision");
        assert!(
            screen.contains("Triage:"),
            "the evidence is shown first:\n{screen}"
        );
        let word = match *choice {
            "attest" => "resolve",
            other => other,
        };
        tmux.keys(&[word, "Enter"]);
        if *choice == "attest" {
            tmux.wait_for("What did you check out of band?");
            tmux.keys(&["found it in the recipient mailbox", "Enter"]);
        }
        if *choice == "quit" {
            break;
        }
    }
    let screen = tmux.wait_for("EXIT=0");
    let decided = |id: &str| {
        order
            .iter()
            .find(|(i, _)| i == id)
            .map(|(_, c)| *c)
            .unwrap_or("")
    };
    for (id, expected_status) in [
        (&resolvable, "RESOLVED"),
        (&replayable, "PENDING"),
        (&uncertain, "RESOLVED"),
        (&skipped, "DEAD"),
        (&unreached, "DEAD"),
    ] {
        let expected = if decided(id) == "quit" {
            "DEAD"
        } else {
            expected_status
        };
        assert_eq!(
            status(&db, id),
            expected,
            "{id} ({}):\n{screen}",
            decided(id)
        );
    }
    assert!(screen.contains("skipped: by the operator"), "{screen}");
    assert!(screen.contains("skipped: quit before deciding"), "{screen}");
    assert!(
        screen.contains("1 resolved") || screen.contains("2 resolved"),
        "{screen}"
    );
    let conn = schema::open(&db, OpenMode::ReadOnly).expect("store");
    let attestation: String = conn
        .query_row(
            "SELECT json_extract(payload, '$.attestation') FROM uns_events WHERE notification_id = ?1 AND kind = 'DLQ_RESOLVED'",
            [&uncertain],
            |r| r.get(0),
        )
        .expect("attestation");
    assert_eq!(attestation, "found it in the recipient mailbox");
}

#[test]
fn times_are_relative_on_a_terminal_and_absolute_off_it() {
    let dir = tempfile::tempdir().expect("dir");
    let db = dir.path().join("uns.db");
    let conn = schema::open(&db, OpenMode::Create).expect("store");
    let now = unsctl::clock::Clock::now(&unsctl::clock::SystemClock);
    let id = support::replay_entry(&conn, now - 7200.0);
    let tmux = Tmux::start(&command(&db, &format!("inspect {id}")));
    let screen = tmux.wait_for("EXIT=0");
    assert!(
        screen.contains("(2h ago)"),
        "a terminal gets relative times:\n{screen}"
    );
    let piped = Command::new(env!("CARGO_BIN_EXE_unsctl"))
        .arg("--db")
        .arg(&db)
        .args(["inspect", &id])
        .output()
        .expect("run");
    let text = String::from_utf8_lossy(&piped.stdout);
    assert!(
        !text.contains(" ago)") && text.contains("Z "),
        "off a terminal, RFC 3339 only:\n{text}"
    );
}
