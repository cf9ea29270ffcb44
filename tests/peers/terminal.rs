//! Prompts under a real terminal (tmux): what the operator sees, and that the choice took
//! effect.

use crate::support;

use support::tmux::Tmux;

use std::path::Path;

use unsctl::runtime::schema::{self, OpenMode};

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

fn events_of(db: &Path, id: &str, kind: &str) -> i64 {
    let conn = schema::open(db, OpenMode::ReadOnly).expect("store");
    conn.query_row(
        "SELECT COUNT(*) FROM uns_events WHERE notification_id = ?1 AND kind = ?2",
        [id, kind],
        |r| r.get(0),
    )
    .expect("count")
}

#[test]
fn the_prompt_names_what_it_changes_and_takes_only_the_whole_word() {
    let dir = tempfile::tempdir().expect("dir");
    let db = dir.path().join("uns.db");
    let conn = schema::open(&db, OpenMode::Create).expect("store");
    let id = support::replay_entry(&conn, 1000.0);
    for stray in ["y", "Y", "n", "yes please", "it is fine, go", "   "] {
        let tmux = Tmux::start(&command(
            &db,
            &format!("replay {id} --confirm --operator erin"),
        ));
        let screen = tmux.wait_for("Type yes");
        assert!(
            screen.contains(&format!("{id}  REPLAY  replay  channels SLACK")),
            "{screen}"
        );
        assert!(
            screen.contains(&format!("in {} as erin", db.display()))
                && screen.contains(&format!("{id} (SLACK)")),
            "the prompt names the store, the operator, the entry and its channels:\n{screen}"
        );
        tmux.line(stray);
        let screen = tmux.wait_for("EXIT=");
        assert!(
            screen.contains("Declined: nothing was changed."),
            "{stray:?}:\n{screen}"
        );
        assert!(screen.contains("EXIT=0"), "{screen}");
        assert_eq!(status(&db, &id), "DEAD", "{stray:?} must not act");
    }
    let tmux = Tmux::start(&command(&db, &format!("replay {id} --confirm")));
    tmux.wait_for("Type yes");
    tmux.line("yes");
    let screen = tmux.wait_for("EXIT=0");
    assert!(screen.contains("replayed SLACK"), "{screen}");
    assert_eq!(status(&db, &id), "PENDING");
}

/// Over the API the prompt names the person as the audit will: the operator claimed with
/// the key it comes through, never the key's name alone.
#[test]
fn a_prompt_over_the_api_names_the_person_with_the_key() {
    let dir = tempfile::tempdir().expect("dir");
    let db = dir.path().join("uns.db");
    let conn = schema::open(&db, OpenMode::Create).expect("store");
    let id = support::replay_entry(&conn, 1000.0);
    drop(conn);
    let server = support::server(&db);
    let tmux = Tmux::start(&format!(
        "UNS_API_KEY={} {} --api http://{} replay {id} --confirm --operator oncall-jane",
        support::KEY,
        env!("CARGO_BIN_EXE_unsctl"),
        server.addr
    ));
    let screen = tmux.wait_for("Type yes");
    assert!(
        screen.contains(&format!(
            "Replay 1 entry in http://{} as oncall-jane (key default)?",
            server.addr
        )),
        "{screen}"
    );
    tmux.line("no");
    let screen = tmux.wait_for("EXIT=");
    assert!(
        screen.contains("Declined: nothing was changed."),
        "{screen}"
    );
    assert_eq!(status(&db, &id), "DEAD");
}

/// On a narrow terminal the prompt wraps; once answered, what it asked is on the screen
/// once, with the answer after it, and no row of it is left over from the redraw.
#[test]
fn an_answered_prompt_leaves_its_question_once_on_a_narrow_terminal() {
    let dir = tempfile::tempdir().expect("dir");
    let db = dir.path().join("uns.db");
    let conn = schema::open(&db, OpenMode::Create).expect("store");
    let id = support::replay_entry(&conn, 1000.0);
    let tmux = Tmux::start_sized(
        &command(&db, &format!("replay {id} --confirm --operator erin")),
        50,
        30,
    );
    tmux.wait_for("Type yes");
    tmux.line("no");
    let screen = tmux.wait_for("EXIT=");
    let rows: Vec<&str> = screen.lines().map(str::trim_end).collect();
    assert_eq!(
        rows.iter()
            .filter(|r| r.starts_with("Replay 1 entry in "))
            .count(),
        1,
        "{screen}"
    );
    assert_eq!(
        rows.iter().filter(|r| r.starts_with("Type yes")).count(),
        1,
        "{screen}"
    );
    assert!(
        rows.iter().any(|r| r.ends_with(": no")),
        "the answer shows after the question:\n{screen}"
    );
    assert!(
        screen.contains("Declined: nothing was changed."),
        "{screen}"
    );
}

#[test]
fn more_than_ten_entries_need_the_count_typed() {
    let dir = tempfile::tempdir().expect("dir");
    let db = dir.path().join("uns.db");
    let conn = schema::open(&db, OpenMode::Create).expect("store");
    let ids: Vec<String> = (0..11)
        .map(|n| support::replay_entry(&conn, 1000.0 + f64::from(n)))
        .collect();
    for wrong in ["yes", "10", "y"] {
        let tmux = Tmux::start(&command(&db, "replay --branch replay --confirm"));
        tmux.wait_for("Type 11 and press Enter");
        tmux.line(wrong);
        let screen = tmux.wait_for("EXIT=");
        assert!(screen.contains("Declined"), "{screen}");
        assert!(ids.iter().all(|id| status(&db, id) == "DEAD"));
    }
    let tmux = Tmux::start(&command(&db, "replay --branch replay --confirm"));
    tmux.wait_for("Type 11 and press Enter");
    tmux.line("11");
    tmux.wait_for("EXIT=0");
    assert!(ids.iter().all(|id| status(&db, id) == "PENDING"));
}

#[test]
fn ctrl_c_at_the_prompt_restores_the_terminal_and_changes_nothing() {
    let dir = tempfile::tempdir().expect("dir");
    let db = dir.path().join("uns.db");
    let conn = schema::open(&db, OpenMode::Create).expect("store");
    let id = support::replay_entry(&conn, 1000.0);
    let tmux = Tmux::start(&command(&db, &format!("replay {id} --confirm")));
    tmux.wait_for("Type yes");
    tmux.ctrl_c();
    let screen = tmux.wait_for("EXIT=");
    assert!(screen.contains("EXIT=130"), "{screen}");
    assert!(
        screen.contains("interrupted (Ctrl-C): nothing was changed"),
        "{screen}"
    );
    assert!(tmux.cursor_visible(), "the cursor is shown again");
    assert_eq!(status(&db, &id), "DEAD");
}

/// Every command that changes the store asks the same way: a lone `y` or a sentence does
/// nothing, Ctrl-C ends it with the terminal restored, and only `yes` acts.
#[test]
fn every_mutation_prompt_takes_only_yes_and_ctrl_c_changes_nothing() {
    let dir = tempfile::tempdir().expect("dir");
    let db = dir.path().join("uns.db");
    let conn = schema::open(&db, OpenMode::Create).expect("store");
    let resolvable = support::resolve_entry(&conn, 1000.0);
    let replayable = support::replay_entry(&conn, 2000.0);
    let plan = dir.path().join("plan.json");
    let out = support::unsctl()
        .arg("--db")
        .arg(&db)
        .args(["dlq", "triage", "-o", "json"])
        .output()
        .expect("plan");
    std::fs::write(&plan, &out.stdout).expect("plan");
    let commands = [
        (format!("dlq resolve {resolvable} --confirm"), &resolvable),
        (format!("replay {replayable} --confirm"), &replayable),
        (format!("apply {} --confirm", plan.display()), &replayable),
    ];
    for (args, id) in &commands {
        for stray in ["y", "go ahead"] {
            let tmux = Tmux::start(&command(&db, args));
            tmux.wait_for("Type yes");
            tmux.line(stray);
            let screen = tmux.wait_for("EXIT=");
            assert!(screen.contains("EXIT=0"), "{args} {stray:?}:\n{screen}");
            assert!(screen.contains("nothing was changed"), "{args}:\n{screen}");
        }
        let tmux = Tmux::start(&command(&db, args));
        tmux.wait_for("Type yes");
        tmux.ctrl_c();
        let screen = tmux.wait_for("EXIT=");
        assert!(screen.contains("EXIT=130"), "{args}:\n{screen}");
        assert!(tmux.cursor_visible(), "{args}: the cursor is shown again");
        assert_eq!(status(&db, id), "DEAD", "{args}");
        assert_eq!(status(&db, &resolvable), "DEAD", "{args}");
    }
}

#[test]
fn ctrl_c_in_a_bulk_replay_stops_after_the_entry_in_flight_and_accounts_for_it() {
    let dir = tempfile::tempdir().expect("dir");
    let db = dir.path().join("uns.db");
    let conn = schema::open(&db, OpenMode::Create).expect("store");
    let ids: Vec<String> = (0..1500)
        .map(|n| support::replay_entry(&conn, 1000.0 + f64::from(n)))
        .collect();
    drop(conn);
    let tmux = Tmux::start(&command(&db, "replay --branch replay --confirm --yes"));
    tmux.wait_for_count("replayed SLACK", 3);
    tmux.ctrl_c();
    let screen = tmux.wait_for("EXIT=");
    assert!(screen.contains("EXIT=130"), "{screen}");
    assert!(tmux.cursor_visible(), "the cursor is shown again");
    let conn = schema::open(&db, OpenMode::ReadOnly).expect("store");
    let replayed: i64 = conn
        .query_row(
            "SELECT COUNT(*) FROM uns_events WHERE kind = 'REPLAYED'",
            [],
            |r| r.get(0),
        )
        .expect("count");
    assert!(
        replayed > 0 && (replayed as usize) < ids.len(),
        "stopped part way: {replayed}"
    );
    assert!(
        screen.contains(&format!("done before the interrupt: {replayed} done")),
        "the account matches the store ({replayed} replayed):\n{screen}"
    );
}

#[test]
fn the_interactive_walk_takes_typed_choices_and_a_second_yes() {
    let dir = tempfile::tempdir().expect("dir");
    let db = dir.path().join("uns.db");
    let conn = schema::open(&db, OpenMode::Create).expect("store");
    let resolvable = support::resolve_entry(&conn, 1000.0);
    let replayable = support::replay_entry(&conn, 2000.0);
    let uncertain = support::verify_entry(&conn, 3000.0);
    let declined = support::replay_entry(&conn, 4000.0);
    let skipped = support::replay_entry(&conn, 5000.0);
    let unreached = support::replay_entry(&conn, 6000.0);

    let tmux = Tmux::start(&command(&db, "dlq triage --interactive --operator erin"));
    // 1: stray keys and a sentence choose nothing; then `resolve` and `yes`.
    tmux.wait_for(&format!("[1/6] {resolvable}"));
    tmux.wait_for("Decision");
    for stray in ["j", "k", "y", "it arrived, so resolve it"] {
        tmux.line(stray);
    }
    tmux.wait_for_count("not a choice", 3);
    tmux.wait_for("no choice understood: skipped");
    // The fourth stray answer was a sentence: skipped, nothing done.
    tmux.wait_for(&format!("[2/6] {replayable}"));
    assert_eq!(status(&db, &resolvable), "DEAD", "stray input acted");
    // 2: replay, confirmed.
    tmux.wait_for_count("Decision", 2);
    tmux.line("2");
    let screen = tmux.wait_for(&format!("replay {replayable} on SLACK in"));
    assert!(screen.contains("as erin?"), "{screen}");
    tmux.line("yes");
    // 3: VERIFY needs what was checked, then a confirmation.
    tmux.wait_for(&format!("[3/6] {uncertain}"));
    tmux.wait_for_count("Decision", 3);
    tmux.line("resolve");
    tmux.wait_for("Where did you look out of band");
    // A lone `y` is not an account of a check: asked again.
    tmux.line("y");
    tmux.wait_for("does not say what was checked");
    tmux.line("found it in the recipient mailbox");
    let screen = tmux.wait_for(&format!("resolve {uncertain} on your word that it arrived"));
    assert!(
        screen.contains("(\"found it in the recipient mailbox\") in"),
        "the confirmation repeats the account:\n{screen}"
    );
    tmux.line("yes");
    // 4: a lone y at the confirmation does not act.
    tmux.wait_for(&format!("[4/6] {declined}"));
    tmux.wait_for_count("Decision", 4);
    tmux.line("replay");
    tmux.wait_for(&format!("replay {declined} on SLACK in"));
    tmux.line("y");
    // 5: Enter alone skips; 6: q quits.
    tmux.wait_for(&format!("[5/6] {skipped}"));
    tmux.wait_for_count("Decision", 5);
    tmux.keys(&["Enter"]);
    tmux.wait_for(&format!("[6/6] {unreached}"));
    tmux.wait_for_count("Decision", 6);
    tmux.line("q");
    let screen = tmux.wait_for("EXIT=");
    assert!(screen.contains("EXIT=0"), "{screen}");
    for (id, expected) in [
        (&resolvable, "DEAD"),
        (&replayable, "PENDING"),
        (&uncertain, "RESOLVED"),
        (&declined, "DEAD"),
        (&skipped, "DEAD"),
        (&unreached, "DEAD"),
    ] {
        assert_eq!(status(&db, id), expected, "{id}:\n{screen}");
    }
    assert!(
        screen.contains(&format!("{declined}  skipped: not confirmed")),
        "{screen}"
    );
    assert!(screen.contains("skipped: quit before deciding"), "{screen}");
    assert_eq!(events_of(&db, &replayable, "REPLAYED"), 1);
    let conn = schema::open(&db, OpenMode::ReadOnly).expect("store");
    let (attestation, reason): (String, Option<String>) = conn
        .query_row(
            "SELECT json_extract(payload, '$.attestation'), json_extract(payload, '$.reason') FROM uns_events WHERE notification_id = ?1 AND kind = 'DLQ_RESOLVED'",
            [&uncertain],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .expect("audit");
    assert_eq!(attestation, "found it in the recipient mailbox");
    assert_eq!(
        reason, None,
        "no reason is made up on the operator's behalf"
    );
}

#[test]
fn ctrl_c_at_each_interactive_prompt_exits_130_with_an_account() {
    let dir = tempfile::tempdir().expect("dir");
    let db = dir.path().join("uns.db");
    let conn = schema::open(&db, OpenMode::Create).expect("store");
    let replayable = support::replay_entry(&conn, 1000.0);
    let uncertain = support::verify_entry(&conn, 2000.0);
    // (answers before Ctrl-C, the prompt it arrives at)
    let walks: [(&[&str], &str); 3] = [
        (&[], "Decision"),
        (&["2"], "Type yes"),
        (&["skip", "replay"], "Where did you look out of band"),
    ];
    for (answers, at) in walks {
        let tmux = Tmux::start(&command(&db, "dlq triage --interactive"));
        tmux.wait_for("Decision");
        for answer in answers {
            tmux.line(answer);
        }
        tmux.wait_for(at);
        tmux.ctrl_c();
        let screen = tmux.wait_for("EXIT=");
        assert!(screen.contains("EXIT=130"), "{at}:\n{screen}");
        assert!(screen.contains("interrupted (Ctrl-C)"), "{at}:\n{screen}");
        assert!(tmux.cursor_visible(), "{at}: the cursor is shown again");
        assert_eq!(status(&db, &replayable), "DEAD", "{at}");
        assert_eq!(status(&db, &uncertain), "DEAD", "{at}");
    }
    // After one entry was acted on, the account says so.
    let tmux = Tmux::start(&command(&db, "dlq triage --interactive"));
    tmux.wait_for("Decision");
    tmux.line("replay");
    tmux.wait_for("Type yes");
    tmux.line("yes");
    tmux.wait_for_count("Decision", 2);
    tmux.ctrl_c();
    let screen = tmux.wait_for("EXIT=");
    assert!(screen.contains("EXIT=130"), "{screen}");
    assert!(
        screen.contains("done before the interrupt: 1 done"),
        "{screen}"
    );
    assert_eq!(status(&db, &replayable), "PENDING");
    assert_eq!(status(&db, &uncertain), "DEAD");
}

#[test]
fn a_refusal_in_the_walk_exits_4() {
    let dir = tempfile::tempdir().expect("dir");
    let db = dir.path().join("uns.db");
    let conn = schema::open(&db, OpenMode::Create).expect("store");
    let resolvable = support::resolve_entry(&conn, 1000.0);
    let tmux = Tmux::start(&command(&db, "dlq triage --interactive"));
    tmux.wait_for("Decision");
    // A refused choice is said and the card asks again; the third refusal stands.
    for n in 1..=2 {
        tmux.line("replay");
        tmux.wait_for_count("choose again", n);
        tmux.wait_for_count("Decision", n + 1);
    }
    tmux.line("replay");
    let screen = tmux.wait_for("EXIT=");
    assert!(screen.contains("refused (guardrail)"), "{screen}");
    assert!(screen.contains("EXIT=4"), "{screen}");
    assert_eq!(status(&db, &resolvable), "DEAD");
}

/// The card of a rejected entry shows the cause and the provider's reply, asks again
/// after a refusal, and refuses a choice the card does not have.
#[test]
fn the_card_shows_the_cause_and_asks_again_after_a_refusal() {
    let dir = tempfile::tempdir().expect("dir");
    let db = dir.path().join("uns.db");
    let conn = schema::open(&db, OpenMode::Create).expect("store");
    let rejected = support::replay_entry(&conn, 1000.0);
    let tmux = Tmux::start(&command(&db, "dlq triage --interactive"));
    let screen = tmux.wait_for("Decision");
    assert!(screen.contains("cause: SLACK: \"HTTP 400"), "{screen}");
    assert!(
        screen.contains("(or 1-4)") || !screen.contains("5 verify"),
        "{screen}"
    );
    tmux.line("verify");
    tmux.wait_for("nothing to verify");
    tmux.line("bogus");
    let screen = tmux.wait_for("not a choice");
    assert!(
        screen.contains("resolve, replay, skip or quit (or 1-4)"),
        "{screen}"
    );
    // Resolving it would drop a message nobody received: refused, and asked again.
    tmux.line("resolve");
    tmux.wait_for("choose again");
    tmux.wait_for_count("Decision", 2);
    tmux.line("skip");
    let screen = tmux.wait_for("EXIT=");
    assert!(screen.contains("EXIT=0"), "{screen}");
    assert_eq!(status(&db, &rejected), "DEAD");
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
    let piped = support::unsctl()
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

/// A forced action's prompt says FORCED with the guardrail it overrides, and an attested
/// one repeats the attestation, before anything acts.
#[test]
fn a_prompt_says_what_is_unusual_about_the_action() {
    let dir = tempfile::tempdir().expect("dir");
    let db = dir.path().join("uns.db");
    let conn = schema::open(&db, OpenMode::Create).expect("store");
    let resolve = support::replay_entry(&conn, 1000.0);
    let verify = support::verify_entry(&conn, 1001.0);
    let tmux = Tmux::start(&command(
        &db,
        &format!("dlq resolve {resolve} --force --reason 'customer asked' --confirm"),
    ));
    let screen = tmux.wait_for("Type yes");
    assert!(screen.contains("FORCED"), "{screen}");
    assert!(screen.contains("overriding:"), "{screen}");
    tmux.line("no");
    tmux.wait_for("EXIT=");
    assert_eq!(status(&db, &resolve), "DEAD");
    let tmux = Tmux::start(&command(
        &db,
        &format!(
            "replay {verify} --verified-not-delivered --reason 'no trace at the relay' --confirm"
        ),
    ));
    let screen = tmux.wait_for("Type yes");
    assert!(
        screen.contains("On your word that it did not arrive")
            && screen.contains("reason: no trace at the relay"),
        "{screen}"
    );
    tmux.line("no");
    tmux.wait_for("EXIT=");
    assert_eq!(status(&db, &verify), "DEAD");
}
