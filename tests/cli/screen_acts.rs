//! Every act of the command line, carried out from the screen's dialog alone (issue 43):
//! a replay of one channel, a canary at a pace, giving an entry up on purpose; each
//! writes the events the command writes for the same act, plus `via`, and the preview
//! the screen draws is the dry run's.

use super::tui::{Screen, replayed_count};
use crate::support;
use ratatui::crossterm::event::KeyCode;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::time::Duration;
use unsctl::model::Channel;
use unsctl::runtime::engine::DeliveryResult;
use unsctl::runtime::schema::{self, OpenMode};
use unsctl::tui::app::{Focus, ViewKind};

/// A store of `n` REPLAY entries, each with SLACK and PAGERDUTY refused (permanently,
/// with `codes[k % codes.len()]`), ids sorted.
fn refused_store(n: usize, codes: &[&str]) -> (tempfile::TempDir, PathBuf, Vec<String>) {
    let dir = tempfile::tempdir().expect("dir");
    let db = dir.path().join("uns.db");
    let conn = schema::open(&db, OpenMode::Create).expect("store");
    let mut ids: Vec<String> = (0..n)
        .map(|k| {
            let code = codes[k % codes.len()];
            support::play(
                &conn,
                1_000.0 + k as f64,
                &[Channel::Slack, Channel::Pagerduty],
                &[
                    DeliveryResult::rejected(format!("{code}: slack"), false),
                    DeliveryResult::rejected(format!("{code}: pagerduty"), false),
                ],
                3,
            )
        })
        .collect();
    ids.sort();
    (dir, db, ids)
}

/// What the screen wrote equals what the command wrote, but for `via`.
pub(crate) fn same_but_via(mut ours: Value, theirs: &Value) {
    assert_eq!(ours["via"], "tui", "{ours}");
    ours.as_object_mut().expect("object").remove("via");
    assert_eq!(&ours, theirs);
}

/// The command line's act `args` on `db`, by erin with `reason`, confirmed; it must succeed.
pub(crate) fn carried_out_by_erin(db: &Path, args: &[&str], reason: &str) {
    let out = support::unsctl()
        .arg("--db")
        .arg(db)
        .args(args)
        .args([
            "--reason",
            reason,
            "--operator",
            "erin",
            "--confirm",
            "--yes",
        ])
        .output()
        .expect("unsctl");
    support::succeeded(&out);
}

/// The dialog for `key` on the marked rows (or the one under the cursor), past the
/// moment its keys are ignored.
fn open_dialog(screen: &mut Screen, key: char) {
    screen.press(KeyCode::Char(key));
    assert!(screen.app.dialog.is_some(), "{key} opened no dialog");
    screen.later(Duration::from_millis(400));
}

fn dialog_text(screen: &Screen) -> String {
    screen.text(160, 50)
}

#[test]
fn a_replay_of_one_channel_from_the_screen_replays_that_channel_alone() {
    let (dir, db, ids) = refused_store(1, &["HTTP 400"]);
    let cli_db = dir.path().join("cli.db");
    std::fs::copy(&db, &cli_db).expect("copy");
    let mut screen = Screen::open(&db, false, false);
    screen.view(ViewKind::Dlq, None);
    open_dialog(&mut screen, 'p');
    let dialog = screen.app.dialog.as_ref().expect("dialog");
    assert_eq!(
        dialog.channels,
        [(Channel::Slack, true), (Channel::Pagerduty, true)],
        "every channel not delivered is offered, ticked"
    );
    // Untick SLACK: the preview is read again at once, for PAGERDUTY alone.
    screen.focus(Focus::Channels);
    screen.press(KeyCode::Char(' '));
    let text = dialog_text(&screen);
    assert!(
        text.contains("[ ] SLACK") && text.contains("[x] PAGERDUTY"),
        "{text}"
    );
    assert!(text.contains("channels PAGERDUTY"), "{text}");
    assert!(!text.contains("channels PAGERDUTY,SLACK"), "{text}");
    // The reason, left with Tab (never Enter): what was typed is what is recorded.
    screen.focus(Focus::Reason);
    screen.type_text("pagerduty routing key rotated");
    screen.press(KeyCode::Tab);
    screen.type_text("yes");
    screen.press(KeyCode::Tab);
    screen.press(KeyCode::Enter);
    let text = dialog_text(&screen);
    assert!(text.contains("1 done"), "{text}");
    let ours = support::payloads(&db, &ids[0], "REPLAYED");
    assert_eq!(ours.len(), 1);
    assert_eq!(ours[0]["channels"], serde_json::json!(["PAGERDUTY"]));
    assert_eq!(ours[0]["reason"], "pagerduty routing key rotated");

    carried_out_by_erin(
        &cli_db,
        &["replay", &ids[0], "--channels", "pagerduty"],
        "pagerduty routing key rotated",
    );
    let theirs = support::payloads(&cli_db, &ids[0], "REPLAYED");
    same_but_via(ours[0].clone(), &theirs[0]);
}

/// The lines the screen draws for a canary at a pace are the dry run's: each entry's
/// line on stdout, then the notes the command says on stderr (the pace, the canary).
#[test]
fn the_screen_draws_the_dry_runs_preview_for_the_same_canary_and_pace() {
    let (_dir, db, ids) = refused_store(6, &["HTTP 400", "HTTP 404"]);
    let mut screen = Screen::open(&db, false, false);
    // The command's default wait, which its plan names.
    screen.source.wait = Duration::from_secs(300);
    screen.view(ViewKind::Dlq, None);
    for _ in &ids {
        screen.press(KeyCode::Char(' '));
    }
    open_dialog(&mut screen, 'p');
    screen.focus(Focus::Canary);
    screen.type_text("2");
    screen.press(KeyCode::Tab);
    screen.type_text("2/s");
    screen.focus(Focus::Reason);
    screen.type_text("both webhooks fixed");
    screen.press(KeyCode::Tab);
    let drawn = screen.app.dialog.as_ref().expect("dialog").lines.clone();

    let out = support::unsctl()
        .arg("--db")
        .arg(&db)
        .arg("replay")
        .args(&ids)
        .args([
            "--canary",
            "2",
            "--rate",
            "2/s",
            "--reason",
            "both webhooks fixed",
        ])
        .args(["--operator", "erin"])
        .output()
        .expect("dry run");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let entries: Vec<&str> = stdout.lines().take(ids.len()).collect();
    let notes: Vec<&str> = stderr
        .lines()
        .filter(|line| !line.starts_with("Nothing was changed"))
        .collect();
    let expected: Vec<&str> = entries.iter().chain(&notes).copied().collect();
    assert_eq!(drawn, expected, "stdout:\n{stdout}\nstderr:\n{stderr}");
    assert!(
        drawn.iter().any(|l| l.starts_with("paced at 2/s")),
        "{drawn:?}"
    );
    assert!(
        drawn
            .iter()
            .any(|l| l.starts_with("Canary: 2 replays first")),
        "{drawn:?}"
    );
    assert_eq!(replayed_count(&db), 0, "a preview changes nothing");
}

/// A canary that is not delivered stops the run with the rest untouched: here nothing
/// delivers it (no worker runs), and the screen waits no time.
#[test]
fn a_canary_not_delivered_stops_the_run_from_the_screen() {
    let (_dir, db, ids) = refused_store(4, &["HTTP 400"]);
    let mut screen = Screen::open(&db, false, false);
    screen.view(ViewKind::Dlq, None);
    for _ in &ids {
        screen.press(KeyCode::Char(' '));
    }
    open_dialog(&mut screen, 'p');
    screen.focus(Focus::Canary);
    screen.type_text("1");
    screen.focus(Focus::Reason);
    screen.type_text("webhook fixed");
    screen.press(KeyCode::Tab);
    screen.type_text("yes");
    screen.press(KeyCode::Tab);
    screen.press(KeyCode::Enter);
    let text = dialog_text(&screen);
    assert!(text.contains("Canary not delivered:"), "{text}");
    assert!(text.contains("stopped after the canary"), "{text}");
    assert_eq!(replayed_count(&db), 1, "the canary alone was replayed");
}

#[test]
fn giving_up_from_the_screen_is_a_forced_resolve_with_its_reason() {
    let (dir, db, ids) = refused_store(1, &["HTTP 400"]);
    let cli_db = dir.path().join("cli.db");
    std::fs::copy(&db, &cli_db).expect("copy");
    let mut screen = Screen::open(&db, false, false);
    screen.view(ViewKind::Dlq, None);
    open_dialog(&mut screen, 'r');
    // Refused, with the remedy in the screen's own terms: no flag to paste elsewhere.
    let text = dialog_text(&screen);
    assert!(text.contains("REFUSED"), "{text}");
    assert!(text.contains("tick forced and give a reason"), "{text}");
    assert!(!text.contains("--force"), "{text}");
    // Forced without a reason is refused too.
    screen.focus(Focus::Force);
    screen.press(KeyCode::Char(' '));
    let text = dialog_text(&screen);
    assert!(
        text.contains("give up 1 entry on purpose (forced)"),
        "{text}"
    );
    assert!(text.contains("type a reason"), "{text}");
    assert_eq!(screen.app.dialog.as_ref().expect("dialog").count, 0);
    screen.focus(Focus::Reason);
    screen.type_text("customer churned; nobody to page");
    screen.press(KeyCode::Tab);
    let text = dialog_text(&screen);
    assert!(text.contains("FORCED"), "{text}");
    screen.type_text("yes");
    screen.press(KeyCode::Tab);
    screen.press(KeyCode::Enter);
    assert!(
        dialog_text(&screen).contains("1 done"),
        "{}",
        dialog_text(&screen)
    );
    let ours = support::payloads(&db, &ids[0], "DLQ_RESOLVED");
    assert_eq!(ours.len(), 1);
    assert_eq!(ours[0]["reason"], "customer churned; nobody to page");

    carried_out_by_erin(
        &cli_db,
        &["dlq", "resolve", &ids[0], "--force"],
        "customer churned; nobody to page",
    );
    let theirs = support::payloads(&cli_db, &ids[0], "DLQ_RESOLVED");
    same_but_via(ours[0].clone(), &theirs[0]);
}

/// At 80 columns the audit's table keeps the time, the act and the id; the act under the
/// cursor is said whole beneath it, however many rows its reason takes.
#[test]
fn the_audit_says_the_act_under_the_cursor_whole_at_80_columns() {
    let (_dir, db, ids) = refused_store(1, &["HTTP 400"]);
    let reason = "customer churned last week; the account is closed, the channel archived, \
                  and support confirmed by phone that nobody is left to notify (CASE-4411)";
    carried_out_by_erin(&db, &["dlq", "resolve", &ids[0], "--force"], reason);
    let mut screen = Screen::open(&db, false, false);
    screen.view(ViewKind::Audit, None);
    let text = screen.text(80, 24);
    let words = |text: &str| text.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        words(&text).contains(&format!(
            "by erin: reason \"{reason}\"; ticket -; no attestation; verdict then REPLAY; followed: left the DLQ as RESOLVED; nothing was sent"
        )),
        "{text}"
    );
}

/// The command bar: `:inspect` takes the prefix the list shows, `:providers` opens the
/// providers' figures, and `:report` writes a bundle that `report check` passes.
#[test]
fn the_command_bar_inspects_a_shown_prefix_and_writes_the_report() {
    let (dir, db, ids) = refused_store(2, &["HTTP 400"]);
    let mut screen = Screen::open(&db, false, false);
    screen.source.reports = dir.path().join("reports");
    std::fs::create_dir_all(&screen.source.reports).expect("reports");
    screen.view(ViewKind::Dlq, None);
    let shown = screen.app.dlq.rows[1].short.clone();
    assert!(shown.len() < ids[1].len(), "{shown} is a prefix");
    screen.press(KeyCode::Char(':'));
    screen.type_text(&format!("inspect {shown}"));
    screen.press(KeyCode::Enter);
    assert_eq!(screen.app.view, ViewKind::Inspect);
    assert_eq!(
        screen.app.inspect.id, ids[1],
        "the whole id, from the prefix"
    );
    let text = screen.text(120, 40);
    assert!(text.contains("subject   \"seeded\""), "{text}");
    assert!(
        text.contains("to        SLACK (the Slack webhook's channel)"),
        "{text}"
    );

    screen.press(KeyCode::Char(':'));
    screen.type_text("prov");
    screen.press(KeyCode::Tab);
    screen.press(KeyCode::Enter);
    assert_eq!(screen.app.view, ViewKind::Providers);

    screen.press(KeyCode::Char(':'));
    screen.type_text("report 2d");
    screen.press(KeyCode::Enter);
    let said = screen.app.message.as_ref().expect("said").text.clone();
    assert!(said.contains("report written to"), "{said}");
    let bundle = support::checked_bundle(&screen.source.reports);
    // At 80x24, where it went and how to check it are on the screen, not cut at its edge.
    let text = screen.text(80, 24);
    assert!(
        text.contains(&format!("report written to {}", bundle.display())),
        "{text}"
    );
    // The whole of it, to the window's end, wrapped over the message's rows.
    let words = |text: &str| text.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(words(&text).contains(&words(&said)), "{said}\n{text}");
    let markdown = std::fs::read_to_string(bundle.join("report.md")).expect("report.md");
    assert!(
        markdown.contains("MISSING") || markdown.contains("Postmortem"),
        "{markdown}"
    );
}

/// The reason typed is the reason recorded, whichever key leaves the field: Tab, the
/// arrow keys (down, and up then back down), straight on to the word and Go.
#[test]
fn the_reason_typed_is_recorded_whichever_key_leaves_the_field() {
    let leaving: [(&str, &[KeyCode]); 3] = [
        ("tab", &[KeyCode::Tab]),
        ("down", &[KeyCode::Down]),
        ("up and down", &[KeyCode::Up, KeyCode::Down, KeyCode::Down]),
    ];
    for (how, keys) in leaving {
        let (_dir, db, ids) = refused_store(1, &["HTTP 400"]);
        let mut screen = Screen::open(&db, false, false);
        screen.view(ViewKind::Dlq, None);
        open_dialog(&mut screen, 'p');
        screen.focus(Focus::Reason);
        let reason = format!("webhook fixed, left by {how}");
        screen.type_text(&reason);
        for key in keys {
            screen.press(*key);
        }
        assert_eq!(
            screen.app.dialog.as_ref().map(|d| d.focus),
            Some(Focus::Word),
            "{how}"
        );
        screen.type_text("yes");
        screen.press(KeyCode::Down);
        screen.press(KeyCode::Enter);
        let text = dialog_text(&screen);
        assert!(text.contains("1 done"), "{how}:\n{text}");
        let replayed = support::payloads(&db, &ids[0], "REPLAYED");
        assert_eq!(replayed.len(), 1, "{how}");
        assert_eq!(replayed[0]["reason"], reason.as_str(), "{how}");
    }
}
