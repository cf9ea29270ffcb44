//! `unsctl report`: the postmortem of a store holding every runbook case and the
//! remediation two operators did (one forced), as Markdown and JSON snapshots; the same
//! bytes over both backends and on a second run; its figures the commands' own; hostile
//! text escaped in every layout and neutralised in CSV; and the evidence bundle checked.

use crate::support;

use serde_json::Value;
use std::path::Path;
use support::incident::incident;
use unsctl::api::ActionRequest;
use unsctl::store::Store;
use unsctl::store::direct::DirectStore;

fn rfc3339(at: f64) -> String {
    unsctl::render::time::rfc3339(at)
}

/// A time as a report of a window within one day writes it: the time of day.
fn of_day(at: f64) -> String {
    unsctl::render::time::Times::OfDay.of(at)
}

fn settings() -> insta::Settings {
    let mut settings = support::snapshot_settings(&[]);
    settings.add_filter(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z", "[TIME]");
    settings.add_filter(r"store [0-9a-f]{16}", "store [STORE]");
    settings.add_filter(r#""at": \d+(\.\d+)?"#, r#""at": [AT]"#);
    settings.add_filter(r#""(since|until)": \d+(\.\d+)?"#, r#""$1": [AT]"#);
    settings.set_snapshot_path("snapshots/report");
    settings
}

fn report(db: &Path, server: Option<&unsctl::server::RunningServer>, args: &[&str]) -> String {
    let mut command = support::unsctl();
    match server {
        Some(server) => command
            .args(["--api", &format!("http://{}", server.addr)])
            .env("UNS_API_KEY", support::KEY),
        None => command.arg("--db").arg(db),
    };
    let out = command.args(args).output().expect("report");
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8")
}

#[test]
fn the_postmortem_of_every_case_reads_the_same_over_both_backends_and_twice() {
    let incident = incident();
    let server = support::server(&incident.db);
    let window = incident.report_args();
    for format in ["markdown", "json", "html"] {
        let mut args = vec!["-o", format];
        args.extend(window);
        let db = report(&incident.db, None, &args);
        assert_eq!(
            db,
            report(&incident.db, None, &args),
            "{format}: a second run"
        );
        assert_eq!(
            db,
            report(&incident.db, Some(&server), &args),
            "{format}: over the API"
        );
        match format {
            "markdown" => settings().bind(|| insta::assert_snapshot!("every_case_markdown", db)),
            "json" => settings().bind(|| insta::assert_snapshot!("every_case_json", db)),
            _ => {}
        }
    }
    let markdown = report(&incident.db, None, &window);
    for words in [
        "| Repair started (first operator action) |",
        "alice",
        "INC\\-42",
        "FORCED \\[1\\]",
        "[1] FORCED over the guardrails:",
        "| EMAIL | duplicate\\-after\\-reclaim@repro.uns.local | `n-",
        "### Root cause",
    ] {
        let words = words.replace("\\-", "-");
        assert!(markdown.contains(&words), "{words}:\n{markdown}");
    }
}

/// A record named that cannot be read is said at the top of the report, in every layout,
/// so the signed record never reads as if the log had been searched; a report of records
/// all read says nothing of it, as before.
#[test]
fn a_record_that_could_not_be_read_is_said_at_the_top_of_the_report() {
    let incident = incident();
    let window = incident.report_args();
    let dir = tempfile::tempdir().expect("dir");
    let missing = dir.path().join("mail.log.typo");
    let missing_arg = missing.display().to_string();
    let said = format!(
        "Not read, so no answer rests on it: {}: No such file or directory",
        missing.display()
    );
    for format in ["markdown", "json", "html"] {
        let mut args = vec!["-o", format];
        args.extend(window);
        args.extend(["--relay-log", &missing_arg]);
        let text = report(&incident.db, None, &args);
        match format {
            "json" => {
                let document: Value = serde_json::from_str(&text).expect("json");
                let unread = document["unread"].as_array().expect("unread");
                assert_eq!(unread.len(), 1, "{unread:?}");
                let named = format!("{}: No such file or directory", missing.display());
                assert!(
                    unread[0].as_str().is_some_and(|u| u.starts_with(&named)),
                    "{unread:?}"
                );
                let mut args = vec!["-o", format];
                args.extend(window);
                let all_read: Value =
                    serde_json::from_str(&report(&incident.db, None, &args)).expect("json");
                assert!(all_read.get("unread").is_none(), "{all_read:#}");
            }
            _ => {
                let at = text
                    .find(&said)
                    .unwrap_or_else(|| panic!("{format}: {text}"));
                let summary = text.find("Summary").expect("a summary");
                assert!(at < summary, "{format}: said before the figures");
            }
        }
    }
}

/// The cells of a Markdown table's line: its unescaped pipes, less the outer two.
fn cells(line: &str) -> usize {
    let mut pipes = 0;
    let mut escaped = false;
    for c in line.chars() {
        if escaped {
            escaped = false;
        } else if c == '\\' {
            escaped = true;
        } else if c == '|' {
            pipes += 1;
        }
    }
    pipes - 1
}

#[test]
fn every_row_of_every_table_in_the_report_has_a_heading_for_each_cell() {
    let incident = incident();
    let markdown = report(&incident.db, None, &incident.report_args());
    let mut tables = 0;
    let mut heading: Option<(usize, &str)> = None;
    for line in markdown.lines() {
        if !line.starts_with('|') {
            heading = None;
            continue;
        }
        match heading {
            None => {
                heading = Some((cells(line), line));
                tables += 1;
            }
            Some((width, title)) => assert_eq!(
                cells(line),
                width,
                "a row unlike its heading:\n{title}\n{line}\n\n{markdown}"
            ),
        }
    }
    // Summary, impact, timeline, who got duplicates, operator actions, verdict changes.
    assert!(tables >= 5, "{tables} tables:\n{markdown}");
    // The timeline's columns are the pulse's series, each by its title.
    for series in unsctl::pulse::Series::ALL {
        assert!(
            markdown.contains(&format!(" {} |", series.title())),
            "{}:\n{markdown}",
            series.title()
        );
    }
}

#[test]
fn the_reports_figures_are_the_commands_own() {
    let incident = incident();
    let json = |args: &[&str]| -> Value {
        serde_json::from_str(&report(&incident.db, None, args)).expect("json")
    };
    let ours = json(&[
        "-o",
        "json",
        "report",
        "--since",
        &incident.since,
        "--until",
        &incident.until,
    ]);
    let reconciled = json(&[
        "-o",
        "json",
        "reconcile",
        "--since",
        &incident.since,
        "--until",
        &incident.until,
    ]);
    let triage = json(&["-o", "json", "dlq", "triage"]);
    for channel in ["EMAIL", "SLACK", "PAGERDUTY"] {
        let impact = ours["impact"]
            .as_array()
            .expect("impact")
            .iter()
            .find(|i| i["channel"] == channel)
            .expect("channel");
        for (field, class) in [
            ("delivered_once", "ONCE"),
            ("duplicated", "DUPLICATED"),
            ("maybe_duplicated", "MAYBE_DUPLICATED"),
            ("missing", "MISSING"),
            ("unsettled", "UNSETTLED"),
        ] {
            assert_eq!(
                impact[field], reconciled["summary"][channel][class],
                "{channel} {class}"
            );
        }
    }
    for branch in ["RESOLVE", "VERIFY", "REPLAY"] {
        assert_eq!(
            ours["dlq_now"][branch], triage["summary"][branch],
            "{branch}"
        );
    }
    let actions = ours["actions"].as_array().expect("actions");
    assert_eq!(actions.len(), 3, "{actions:?}");
    assert_eq!(actions[0]["operator"], "alice");
    assert!(actions[2]["forced"].as_bool().expect("forced"));
    assert_eq!(
        ours["summary"]["first_action"]["event_id"],
        actions[0]["event_id"]
    );
}

const HOSTILE: &str =
    "=HYPERLINK(\"http://evil.example/x\")</svg><script>alert(1)</script>\u{1b}[31m";

#[test]
fn hostile_text_is_escaped_in_html_and_markdown_and_neutralised_in_csv() {
    let dir = tempfile::tempdir().expect("dir");
    let db = dir.path().join("uns.db");
    let conn = unsctl::runtime::schema::open(&db, unsctl::runtime::schema::OpenMode::Create)
        .expect("store");
    // Two copies proven for a recipient whose address is hostile.
    support::duplicated_email(&conn, 1_000.0, HOSTILE);
    let refused = support::play(
        &conn,
        1_100.0,
        &[unsctl::model::Channel::Slack],
        &[unsctl::runtime::engine::DeliveryResult::rejected(
            HOSTILE, false,
        )],
        1,
    );
    drop(conn);
    let store = DirectStore::open_read_write(&db)
        .expect("store")
        .with_clock(Box::new(unsctl::clock::ManualClock::new(1_500.0)));
    store
        .replay(
            &refused,
            &ActionRequest {
                operator: Some(HOSTILE.into()),
                reason: Some(HOSTILE.into()),
                ..Default::default()
            },
        )
        .expect("replay");
    let window = [
        "--since",
        "1970-01-01T00:00:00Z",
        "--until",
        "1970-01-01T01:00:00Z",
    ];
    let mut args = vec!["-o", "html", "report"];
    args.extend(window);
    let html = report(&db, None, &args);
    assert!(!html.contains("<script"), "{html}");
    assert_eq!(html.matches("</svg>").count(), 1, "only the chart's own");
    assert!(!html.contains('\u{1b}'));
    assert!(html.contains("&lt;script&gt;"), "{html}");
    assert!(!html.contains("http://evil") || html.contains("HYPERLINK(&quot;http://evil"));
    assert!(!html.contains("<a "), "no link at all");
    let mut args = vec!["report"];
    args.extend(window);
    let markdown = report(&db, None, &args);
    assert!(!markdown.contains("<script"), "{markdown}");
    assert!(!markdown.contains("</svg>"), "{markdown}");
    assert!(!markdown.contains('\u{1b}'));
    assert!(markdown.contains("&lt;script&gt;"), "{markdown}");
    let csv = report(&db, None, &["-o", "csv", "reconcile"]);
    let row = csv.lines().nth(1).expect("a row");
    assert!(row.contains(",\"'=HYPERLINK(\"\"http://evil"), "{csv}");
    assert!(!csv.contains('\u{1b}'));
    for line in csv.lines().skip(1) {
        for cell in split_csv(line) {
            assert!(
                !cell.starts_with(['=', '+', '-', '@']),
                "a formula a spreadsheet would run: {cell:?}"
            );
        }
    }
}

/// The cells of one RFC 4180 line.
fn split_csv(line: &str) -> Vec<String> {
    let mut cells = Vec::new();
    let mut cell = String::new();
    let mut quoted = false;
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match (c, quoted) {
            ('"', true) if chars.peek() == Some(&'"') => {
                chars.next();
                cell.push('"');
            }
            ('"', _) => quoted = !quoted,
            (',', false) => cells.push(std::mem::take(&mut cell)),
            (c, _) => cell.push(c),
        }
    }
    cells.push(cell);
    cells
}

#[test]
fn a_bundle_is_checked_file_by_file() {
    let incident = incident();
    let dir = tempfile::tempdir().expect("dir");
    let bundle = dir.path().join("incident-42");
    let bundle_text = bundle.display().to_string();
    report(
        &incident.db,
        None,
        &[&incident.report_args()[..], &["--bundle", &bundle_text]].concat(),
    );
    let check = |expect: Option<i32>| {
        let out = support::unsctl()
            .args(["report", "check", &bundle_text])
            .output()
            .expect("check");
        assert_eq!(
            out.status.code(),
            expect,
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let said = check(Some(0));
    assert_eq!(said.matches(": OK").count(), 7, "{said}");
    // sha256sum itself agrees.
    let sums = std::process::Command::new("sha256sum")
        .args(["-c", "SHA256SUMS"])
        .current_dir(&bundle)
        .output()
        .expect("sha256sum");
    assert!(
        sums.status.success(),
        "{}",
        String::from_utf8_lossy(&sums.stdout)
    );
    // Every event of the window's notifications, one a line.
    let events = std::fs::read_to_string(bundle.join("events.jsonl")).expect("events");
    assert!(events.lines().count() > 30);
    assert!(
        events
            .lines()
            .all(|l| serde_json::from_str::<Value>(l).is_ok())
    );
    // One byte changed, one file removed, one added: each named.
    let mut audit = std::fs::read(bundle.join("audit.json")).expect("audit");
    audit[5] ^= 1;
    std::fs::write(bundle.join("audit.json"), audit).expect("write");
    std::fs::remove_file(bundle.join("triage.json")).expect("remove");
    std::fs::write(bundle.join("notes.txt"), "added later").expect("add");
    let said = check(Some(1));
    assert!(said.contains("audit.json: changed"), "{said}");
    assert!(said.contains("triage.json: missing"), "{said}");
    assert!(said.contains("notes.txt: added"), "{said}");
    assert!(said.contains("report.md: OK"), "{said}");
    // What a bundle cannot be, though each digest could match: a file that is a link to
    // a faithful copy elsewhere, a file taken out with its line, a FIFO in a file's place
    // (never waited on). A line as `sha256sum -b` writes it is read; a damaged one is
    // named, its bytes made safe.
    let elsewhere = dir.path().join("copy-of-report.html");
    std::fs::copy(bundle.join("report.html"), &elsewhere).expect("copy");
    std::fs::remove_file(bundle.join("report.html")).expect("remove");
    std::os::unix::fs::symlink(&elsewhere, bundle.join("report.html")).expect("link");
    std::fs::remove_file(bundle.join("events.jsonl")).expect("remove");
    let fifo = std::process::Command::new("mkfifo")
        .arg(bundle.join("events.jsonl"))
        .status()
        .expect("mkfifo");
    assert!(fifo.success(), "mkfifo");
    let sums = std::fs::read_to_string(bundle.join("SHA256SUMS")).expect("sums");
    let sums: String = sums
        .lines()
        .filter(|l| !l.ends_with("  reconcile.json"))
        .map(|l| format!("{}\n", l.replace("  report.md", " *report.md")))
        .collect();
    std::fs::write(
        bundle.join("SHA256SUMS"),
        format!("{sums}not-a-digest  \u{1b}[31mred\n"),
    )
    .expect("sums");
    std::fs::remove_file(bundle.join("reconcile.json")).expect("remove");
    let said = check(Some(1));
    assert!(said.contains("report.md: OK"), "{said}");
    assert!(
        said.contains("report.html: a link, not the file written"),
        "{said}"
    );
    assert!(said.contains("events.jsonl: not a plain file"), "{said}");
    assert!(
        said.contains("reconcile.json: not in SHA256SUMS, though every bundle is written with it"),
        "{said}"
    );
    assert!(said.contains("SHA256SUMS: unreadable line"), "{said}");
    assert!(!said.contains('\u{1b}'), "{said}");
    // A bundle is never written over.
    let out = support::unsctl()
        .arg("--db")
        .arg(&incident.db)
        .args([
            "report",
            "--since",
            &incident.since,
            "--bundle",
            &bundle_text,
        ])
        .output()
        .expect("again");
    assert_eq!(out.status.code(), Some(4));
}

#[test]
fn a_bundle_is_written_only_into_a_new_or_empty_directory() {
    let incident = incident();
    let dir = tempfile::tempdir().expect("dir");
    let bundle = |place: &Path| {
        support::unsctl()
            .arg("--db")
            .arg(&incident.db)
            .args(incident.report_args())
            .arg("--bundle")
            .arg(place)
            .output()
            .expect("bundle")
    };
    // Beside someone's files: refused before anything is written, theirs untouched, so
    // the bundle's own check never names files it did not write.
    let shared = dir.path().join("shared");
    std::fs::create_dir(&shared).expect("mkdir");
    std::fs::write(shared.join("timeline.txt"), "mine").expect("theirs");
    let out = bundle(&shared);
    let said = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(4), "{said}");
    assert!(said.contains("already holds timeline.txt"), "{said}");
    let left: Vec<_> = std::fs::read_dir(&shared)
        .expect("read")
        .map(|e| e.expect("entry").file_name())
        .collect();
    assert_eq!(left, ["timeline.txt"]);
    // A file where the directory should be.
    let file = dir.path().join("a-file");
    std::fs::write(&file, "x").expect("file");
    let out = bundle(&file);
    assert_eq!(out.status.code(), Some(4));
    assert_eq!(std::fs::read_to_string(&file).expect("read"), "x");
    // A link to nowhere is named, not followed into a directory of its making.
    let dangling = dir.path().join("dangling");
    std::os::unix::fs::symlink(dir.path().join("gone"), &dangling).expect("link");
    let out = bundle(&dangling);
    let said = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{said}");
    assert!(
        said.contains("no directory to write the evidence bundle into at"),
        "{said}"
    );
    assert!(!dir.path().join("gone").exists());
    // An empty directory, reached through a link, takes it whole.
    let empty = dir.path().join("empty");
    std::fs::create_dir(&empty).expect("mkdir");
    let link = dir.path().join("latest");
    std::os::unix::fs::symlink(&empty, &link).expect("link");
    let out = bundle(&link);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let checked = support::unsctl()
        .args(["report", "check"])
        .arg(&empty)
        .output()
        .expect("check");
    assert!(
        checked.status.success(),
        "{}",
        String::from_utf8_lossy(&checked.stdout)
    );
}

#[test]
fn across_contexts_each_has_its_section_and_one_unread_is_named() {
    let incident = incident();
    let dir = tempfile::tempdir().expect("dir");
    let config = dir.path().join("config.toml");
    std::fs::write(
        &config,
        format!(
            "[contexts.eu]\ndb = \"{}\"\n[contexts.us]\ndb = \"{}\"\n",
            incident.db.display(),
            dir.path().join("missing.db").display()
        ),
    )
    .expect("config");
    let run = |format: &str| {
        support::unsctl()
            .env("UNSCTL_CONFIG", &config)
            .args([
                "--all-contexts",
                "-o",
                format,
                "report",
                "--since",
                &incident.since,
                "--until",
                &incident.until,
            ])
            .output()
            .expect("report")
    };
    let out = run("markdown");
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("# Context eu: postmortem"), "{text}");
    assert!(text.contains("# Context us: not read"), "{text}");
    let out = run("json");
    let document: Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(document["contexts"][0]["context"], "eu");
    assert_eq!(
        document["contexts"][0]["report"]["actions"]
            .as_array()
            .map(Vec::len),
        Some(3)
    );
    assert!(document["contexts"][1]["error"].is_string());
    // The people to write to come from one store at a time.
    let out = support::unsctl()
        .env("UNSCTL_CONFIG", &config)
        .args(["--all-contexts", "-o", "csv", "reconcile"])
        .output()
        .expect("csv");
    assert_eq!(out.status.code(), Some(2));
    // And -o csv, markdown or html where they do not belong is a usage error.
    for (format, command) in [
        ("csv", "events"),
        ("html", "dlq"),
        ("markdown", "reconcile"),
    ] {
        let out = support::unsctl()
            .arg("--db")
            .arg(&incident.db)
            .args(["-o", format, command])
            .output()
            .expect("format");
        assert_eq!(out.status.code(), Some(2), "-o {format} {command}");
    }
}

/// A window that has not ended: no bundle certifies it (exit 2, nothing written, saying
/// when it may be), and its report says PROVISIONAL and until when, in every format.
#[test]
fn an_open_window_is_never_certified_and_its_report_says_provisional() {
    let incident = incident();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("time")
        .as_secs_f64();
    // An hour ahead: open however slow the machine is.
    let until = rfc3339((now + 3600.0).floor());
    let dir = tempfile::tempdir().expect("dir");
    let bundle = dir.path().join("open");
    let out = support::unsctl()
        .arg("--db")
        .arg(&incident.db)
        .args(["report", "--since", &incident.since, "--until", &until])
        .arg("--bundle")
        .arg(&bundle)
        .output()
        .expect("report");
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&until) && stderr.contains("closed window"),
        "{stderr}"
    );
    assert!(!bundle.exists(), "nothing is written for an open window");

    let args = ["report", "--since", &incident.since, "--until", &until];
    let markdown = report(&incident.db, None, &args);
    assert!(
        markdown.starts_with("# PROVISIONAL postmortem")
            && markdown.contains(&format!("still open until {until}")),
        "{markdown}"
    );
    let html = report(&incident.db, None, &[&args[..], &["-o", "html"]].concat());
    assert!(html.contains("<h1>PROVISIONAL Postmortem"), "{html}");
    let json: serde_json::Value = serde_json::from_str(&report(
        &incident.db,
        None,
        &[&args[..], &["-o", "json"]].concat(),
    ))
    .expect("json");
    assert_eq!(json["provisional_until"], (now + 3600.0).floor());
    // A closed window says nothing of the kind.
    let closed = report(&incident.db, None, &incident.report_args());
    assert!(!closed.contains("PROVISIONAL"), "{closed}");
}

/// The fix time the operator gives stands in the summary; the key moments keep the
/// first and last of each kind of act, never one line per act.
/// A window that starts and ends inside a minute: the timeline counts the events inside
/// it, as the summary does, never those of the minute's part outside it.
#[test]
fn the_timeline_counts_only_the_windows_events_when_it_ends_within_a_minute() {
    let incident = incident();
    let conn = rusqlite::Connection::open(&incident.db).expect("db");
    let times = |kind: &str| -> Vec<f64> {
        let mut statement = conn
            .prepare("SELECT at FROM uns_events WHERE kind = ?1 ORDER BY at")
            .expect("query");
        statement
            .query_map([kind], |row| row.get(0))
            .expect("rows")
            .collect::<Result<_, _>>()
            .expect("times")
    };
    let (dead, lost) = (times("DEAD_LETTERED"), times("LEASE_LOST"));
    // From just after the first dead letter to the last lease loss (which it leaves out),
    // both to the millisecond, as the flags take them.
    let since = ((dead[0] + 0.1) * 1000.0).round() / 1000.0;
    let until = (lost[lost.len() - 1] * 1000.0).floor() / 1000.0;
    let minute = |at: f64| (at / 60.0).floor();
    assert_eq!(
        minute(since),
        minute(dead[0]),
        "the fixture's first dead letter"
    );
    assert_eq!(
        minute(until),
        minute(lost[lost.len() - 1]),
        "its last lease loss"
    );
    let inside = |at: &&f64| **at >= since && **at < until;
    let expected = [
        ("DEAD_LETTERED", dead.iter().filter(inside).count()),
        ("LEASE_LOST", lost.iter().filter(inside).count()),
    ];
    assert!(expected[0].1 < dead.len() && expected[1].1 < lost.len());
    let (since_text, until_text) = (rfc3339(since), rfc3339(until));
    let args = [
        "-o",
        "json",
        "report",
        "--since",
        &since_text,
        "--until",
        &until_text,
    ];
    let text = report(&incident.db, None, &args);
    let server = support::server(&incident.db);
    assert_eq!(
        text,
        report(&incident.db, Some(&server), &args),
        "over the API"
    );
    let json: Value = serde_json::from_str(&text).expect("json");
    for (series, count) in expected {
        let steps = json["pulse"]["series"][series].as_array().expect(series);
        let counted: u64 = steps.iter().filter_map(Value::as_u64).sum();
        assert_eq!(counted, count as u64, "{series}: {steps:?}");
    }
    assert_eq!(json["pulse"]["window"]["since"].as_f64(), Some(since));
    assert_eq!(json["pulse"]["window"]["until"].as_f64(), Some(until));
}

#[test]
fn the_fix_time_stands_in_the_summary_and_key_moments_keep_first_and_last() {
    let incident = incident();
    let fixed = incident.since.replace(":00Z", ":30Z");
    // The same window and fix time, in each format.
    let as_format = |format: &str| {
        report(
            &incident.db,
            None,
            &[
                "report",
                "--since",
                &incident.since,
                "--until",
                &incident.until,
                "--fixed-at",
                &fixed,
                "-o",
                format,
            ],
        )
    };
    let json: serde_json::Value = serde_json::from_str(&as_format("json")).expect("json");
    let fixed_at = json["summary"]["fixed_at"].as_f64().expect("fixed_at");
    assert_eq!(rfc3339(fixed_at), fixed);
    let markdown = as_format("markdown");
    assert!(
        markdown.contains(&format!(
            "| Fixed (as the operator gave it, --fixed-at) | {} |",
            of_day(fixed_at)
        )),
        "{markdown}"
    );
    // The chart numbers every marker, the fix and each carry-out among them, and lists
    // what each number is under it.
    let html = as_format("html");
    let listed = html
        .split("<ol class=\"marks\">")
        .nth(1)
        .and_then(|rest| rest.split("</ol>").next())
        .expect("the markers' list");
    for label in [
        "fixed",
        "resolved 1 entry by alice",
        "replayed 1 entry by bob",
        "impact start",
    ] {
        assert!(listed.contains(label), "{label}: {listed}");
    }
    let numbered = html.matches("class=\"mark-label\"").count();
    assert_eq!(numbered, listed.matches("<li>").count(), "{html}");
    // bob replayed once unforced and once forced: two kinds, one moment each.
    let moments: Vec<&str> = json["key_moments"]
        .as_array()
        .expect("moments")
        .iter()
        .filter_map(|m| m["what"].as_str())
        .collect();
    let replays: Vec<&&str> = moments
        .iter()
        .filter(|m| m.starts_with("REPLAYED"))
        .collect();
    assert_eq!(replays.len(), 2, "{moments:?}");
    assert!(
        replays
            .iter()
            .any(|m| m.starts_with("REPLAYED (FORCED) by bob")),
        "{moments:?}"
    );
    // Every kind appears at most twice (its first and its last).
    let mut kinds: std::collections::BTreeMap<String, usize> = Default::default();
    for what in &moments {
        let kind = what.split(" by ").next().unwrap_or_default().to_string();
        *kinds.entry(kind).or_default() += 1;
    }
    assert!(kinds.values().all(|n| *n <= 2), "{kinds:?}");
}

#[test]
fn a_note_records_the_fix_and_its_writer_and_reads_the_same_over_both_backends() {
    let incident = incident();
    let since = unsctl::clock::parse_instant(&incident.since, 0.0).expect("since");
    let until = unsctl::clock::parse_instant(&incident.until, 0.0).expect("until");
    // A store from before notes says why it keeps none, and is left as it was.
    let before = std::fs::read(&incident.db).expect("db");
    let out = support::unsctl()
        .arg("--db")
        .arg(&incident.db)
        .args(["note", "relay restarted", "--fixed"])
        .output()
        .expect("note");
    assert_eq!(out.status.code(), Some(1));
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(said.contains("no place for notes"), "{said}");
    assert!(said.contains("runtime serve"), "{said}");
    assert_eq!(std::fs::read(&incident.db).expect("db"), before);

    // The runtime brings the store to the version with notes.
    let server = support::server(&incident.db);
    // A note written during the incident, on the incident's clock.
    let store = DirectStore::open_read_write(&incident.db)
        .expect("store")
        .with_clock(Box::new(unsctl::clock::ManualClock::new(since + 600.0)));
    let kept = store
        .note(&unsctl::api::NoteRequest {
            operator: Some("alice".into()),
            text: "paged the relay team".into(),
            ..Default::default()
        })
        .expect("note");
    drop(store);
    // The fix, noted afterwards over the API by a named person: the key and the person.
    let fixed = rfc3339(since + 1800.0);
    let out = support::unsctl()
        .args(["--api", &format!("http://{}", server.addr)])
        .env("UNS_API_KEY", support::KEY)
        .args([
            "-o",
            "json",
            "note",
            "relay restarted with a 120 s data timeout",
        ])
        .args(["--fixed-at", &fixed, "--operator", "oncall-jane"])
        .args(["--ticket", "INC-42"])
        .output()
        .expect("note");
    support::succeeded(&out);
    let written: Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(written["kind"], "NOTE");
    assert_eq!(written["id"], kept.id + 1);
    assert_eq!(written["payload"]["operator"], "default");
    assert_eq!(written["payload"]["claimed_operator"], "oncall-jane");
    assert_eq!(
        written["payload"]["fixed_at"].as_f64(),
        Some(since + 1800.0)
    );
    // A fix still to come, no text or too much is a usage error, refused before anything
    // is written, as a bad window of the report is.
    let later = rfc3339(unsctl::clock::Clock::now(&unsctl::clock::SystemClock) + 3600.0);
    let long = "x".repeat(unsctl::remediation::note::MAX_TEXT + 1);
    for (args, words) in [
        (vec!["note", "done", "--fixed-at", &later], "still to come"),
        (vec!["note", "   "], "needs some text"),
        (vec!["note", &long], "at most 2000 characters"),
        (
            vec!["note", "done", "--fixed-at", "99999999999d"],
            "out of range",
        ),
        // A report's own --fixed-at is named as itself, not as the window's start.
        (
            vec!["report", "--since", "1h", "--fixed-at", "1e400"],
            "--fixed-at: \"1e400\" is not a time",
        ),
        (
            vec!["report", "--since", "1e300"],
            "--since: \"1e300\" is out of range",
        ),
    ] {
        let out = support::unsctl()
            .args(["--api", &format!("http://{}", server.addr)])
            .env("UNS_API_KEY", support::KEY)
            .args(&args)
            .output()
            .expect("note");
        let said = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {said}");
        assert!(said.contains(words), "{args:?}: {said}");
    }

    let window = incident.report_args();
    let mut json_args = vec!["-o", "json"];
    json_args.extend(window);
    let json = report(&incident.db, None, &json_args);
    assert_eq!(json, report(&incident.db, Some(&server), &json_args));
    let data: Value = serde_json::from_str(&json).expect("json");
    assert_eq!(data["summary"]["fixed_at"].as_f64(), Some(since + 1800.0));
    assert_eq!(
        data["summary"]["fixed_by"],
        format!(
            "note {} by oncall-jane (key default): relay restarted with a 120 s data timeout",
            kept.id + 1
        )
    );
    // Only the note written inside the window is one of its moments.
    let notes = data["notes"].as_array().expect("notes");
    assert_eq!(notes.len(), 1, "{notes:?}");
    assert_eq!(notes[0]["by"], "alice");
    assert_eq!(notes[0]["at"].as_f64(), Some(since + 600.0));
    let markdown = report(&incident.db, None, &window);
    assert_eq!(markdown, report(&incident.db, Some(&server), &window));
    assert!(
        markdown.contains(&format!(
            "| Fixed (note {} by oncall-jane (key default): relay restarted with a 120 s data timeout) | {} |",
            kept.id + 1,
            of_day(since + 1800.0)
        )),
        "{markdown}"
    );
    assert!(
        markdown.contains(&format!(
            "- {}: note by alice: paged the relay team (note {})",
            of_day(since + 600.0),
            kept.id
        )),
        "{markdown}"
    );
    // --fixed-at given to the report stands over any note.
    let mut given = window.to_vec();
    let own = rfc3339(until - 60.0);
    given.extend(["--fixed-at", &own]);
    let markdown = report(&incident.db, None, &given);
    assert!(
        markdown.contains(&format!(
            "| Fixed (as the operator gave it, --fixed-at) | {} |",
            of_day(until - 60.0)
        )),
        "{markdown}"
    );
    // The bundle's audit keeps the acts and the notes.
    let bundle = tempfile::tempdir().expect("dir");
    let mut bundled = window.to_vec();
    let place = bundle.path().join("b");
    let place_text = place.display().to_string();
    bundled.extend(["--bundle", &place_text]);
    report(&incident.db, None, &bundled);
    let audit: Value =
        serde_json::from_slice(&std::fs::read(place.join("audit.json")).expect("audit"))
            .expect("json");
    assert_eq!(audit["notes"][0]["text"], "paged the relay team");
    assert!(!audit["actions"].as_array().expect("actions").is_empty());
}
