//! Permanent rejections told apart from transient ones (DESIGN §4): an SMTP 5xx reply, an
//! HTTP 400, 401, 403, 404 or 410, or the provider's own "invalid" answer is permanent;
//! a 4xx SMTP reply, an HTTP 429 or 5xx is not. Triage marks the channel, the next step
//! says what to fix before any replay, the table groups such entries by cause, and a
//! resolve is refused with words that say replaying is pointless and a command that
//! carries its reason. Both backends print the same bytes.

use crate::support;

use serde_json::Value;
use unsctl::model::Channel;
use unsctl::runtime::engine::DeliveryResult;
use unsctl::runtime::schema::{self, OpenMode};

const T0: f64 = 1_761_192_000.0;

/// One dead letter per case, a minute apart, each with a budget of one attempt.
fn seed(db: &std::path::Path) -> Vec<(String, &'static str, bool)> {
    let conn = schema::open(db, OpenMode::Create).expect("store");
    let smtp = |code: i64, text: &str| {
        DeliveryResult::rejected(format!("message: {code} {text}"), code < 500)
            .with("smtp_code", code)
    };
    let http = |status: i64, body: &str| {
        DeliveryResult::rejected(
            format!("HTTP {status}: {body}"),
            status >= 500 || status == 429,
        )
        .with("http_status", status)
    };
    let cases: Vec<(&'static str, Channel, DeliveryResult, bool)> = vec![
        (
            "smtp 550",
            Channel::Email,
            smtp(
                550,
                "5.1.1 <gone@example.com>: Recipient address rejected: User unknown",
            ),
            true,
        ),
        (
            "smtp 550 again",
            Channel::Email,
            smtp(
                550,
                "5.1.1 <left@example.com>: Recipient address rejected: User unknown",
            ),
            true,
        ),
        (
            "smtp 421",
            Channel::Email,
            smtp(421, "4.7.0 Try again later"),
            false,
        ),
        (
            "smtp 451",
            Channel::Email,
            smtp(451, "4.3.0 Temporary lookup failure"),
            false,
        ),
        (
            "slack 400",
            Channel::Slack,
            http(400, "invalid_payload"),
            true,
        ),
        (
            "slack 404",
            Channel::Slack,
            http(404, "channel_not_found"),
            true,
        ),
        (
            "slack 429",
            Channel::Slack,
            http(429, "rate_limited"),
            false,
        ),
        (
            "slack 500",
            Channel::Slack,
            http(500, "internal_error"),
            false,
        ),
        (
            "pagerduty 400",
            Channel::Pagerduty,
            http(
                400,
                "{\"status\":\"invalid event\",\"message\":\"Event object is invalid\"}",
            ),
            true,
        ),
        (
            "pagerduty 500",
            Channel::Pagerduty,
            http(500, "oops"),
            false,
        ),
        (
            "prepare",
            Channel::Email,
            DeliveryResult::rejected(
                "prepare: invalid recipient address \"not-an-address\"",
                false,
            ),
            true,
        ),
        (
            "connect",
            Channel::Email,
            DeliveryResult::rejected("connect failed: connection refused", true),
            false,
        ),
    ];
    cases
        .into_iter()
        .enumerate()
        .map(|(n, (name, channel, result, permanent))| {
            let id = support::play(&conn, T0 + 60.0 * n as f64, &[channel], &[result], 1);
            (id, name, permanent)
        })
        .collect()
}

fn entry<'a>(document: &'a Value, id: &str) -> &'a Value {
    document["entries"]
        .as_array()
        .expect("entries")
        .iter()
        .find(|e| e["id"] == id)
        .unwrap_or_else(|| panic!("{id} not triaged"))
}

#[test]
fn permanent_and_transient_rejections_are_told_apart_on_both_backends() {
    let dir = tempfile::tempdir().expect("dir");
    let db = dir.path().join("uns.db");
    let cases = seed(&db);
    let ids: Vec<String> = cases.iter().map(|c| c.0.clone()).collect();
    let server = support::server(&db);
    let mut jsons = Vec::new();
    let mut tables = Vec::new();
    for backend in support::BACKENDS {
        let json = backend
            .command(&db, &server)
            .args(["dlq", "triage", "-o", "json"])
            .output()
            .expect("triage");
        support::succeeded(&json);
        let document: Value = serde_json::from_slice(&json.stdout).expect("json");
        for (id, name, permanent) in &cases {
            let entry = entry(&document, id);
            assert_eq!(entry["branch"], "REPLAY", "{name}");
            let channel = &entry["channels"][0];
            assert_eq!(channel["state"], "FAILED", "{name}");
            assert_eq!(
                channel["permanent"].as_bool().unwrap_or(false),
                *permanent,
                "{name}: {channel}"
            );
            let step = entry["next_step"].as_str().expect("step");
            if *permanent {
                // What to fix first, then a replay that says what was fixed.
                assert!(step.starts_with("fix the cause first ("), "{name}: {step}");
                assert!(
                    step.ends_with(&format!(
                        "then: unsctl replay {id} --channels {} --reason 'what was fixed' --confirm",
                        channel["channel"].as_str().unwrap_or_default()
                    )),
                    "{name}: {step}"
                );
            } else {
                assert!(step.starts_with("unsctl replay "), "{name}: {step}");
            }
        }
        jsons.push(json.stdout);
        let table = backend
            .command(&db, &server)
            .args(["--color", "never", "dlq", "triage"])
            .env("COLUMNS", "200")
            .output()
            .expect("triage");
        let text = String::from_utf8_lossy(&table.stdout).into_owned();
        assert!(text.contains("Refused permanently, by code"), "{text}");
        tables.push(text);
    }
    assert_eq!(jsons[0], jsons[1], "the JSON of both backends");
    assert_eq!(tables[0], tables[1], "the table of both backends");
    // Grouped by code: one line per code with its count, the distinct replies under it.
    let footer: Vec<&str> = tables[0]
        .lines()
        .skip_while(|l| !l.starts_with("Refused permanently"))
        .skip(1)
        .collect();
    let groups: Vec<&&str> = footer.iter().filter(|l| !l.starts_with("    ")).collect();
    assert_eq!(groups.len(), 5, "{}", tables[0]);
    assert!(
        groups
            .iter()
            .any(|l| l.starts_with("  EMAIL 5.1.1  2 entries:")),
        "two 550 5.1.1 replies to two addresses are one decision: {}",
        tables[0]
    );
    assert!(
        footer.iter().any(|l| l.contains("<gone@example.com>"))
            && footer.iter().any(|l| l.contains("<left@example.com>")),
        "each distinct reply counted under its code: {}",
        tables[0]
    );
    assert!(
        groups
            .iter()
            .any(|l| l.starts_with("  SLACK HTTP 400  1 entry")),
        "{}",
        tables[0]
    );
    // --error-code selects by the code as triage classes it, on both backends.
    for (code, expected) in [
        ("5.1.1", 2),
        ("550", 2),
        ("HTTP 400", 2),
        ("http 404", 1),
        ("421", 1),
    ] {
        for backend in support::BACKENDS {
            let out = backend
                .command(&db, &server)
                .args(["dlq", "triage", "--error-code", code, "-o", "json"])
                .output()
                .expect("triage");
            let doc: Value = serde_json::from_slice(&out.stdout).expect("json");
            assert_eq!(
                doc["entries"].as_array().map(Vec::len),
                Some(expected),
                "{backend:?} --error-code {code}: {doc:#}"
            );
        }
    }
    // Repeated text filters: any --error matches, every --not-error leaves out.
    for backend in support::BACKENDS {
        let out = backend
            .command(&db, &server)
            .args([
                "dlq",
                "triage",
                "--error",
                "invalid_payload",
                "--error",
                "rate_limited",
                "--not-error",
                "nothing-matches",
                "-o",
                "json",
            ])
            .output()
            .expect("triage");
        let doc: Value = serde_json::from_slice(&out.stdout).expect("json");
        assert_eq!(
            doc["entries"].as_array().map(Vec::len),
            Some(2),
            "{backend:?}: {doc:#}"
        );
        let out = backend
            .command(&db, &server)
            .args([
                "dlq",
                "triage",
                "--not-error",
                "HTTP",
                "--not-error",
                "message:",
                "-o",
                "json",
            ])
            .output()
            .expect("triage");
        let doc: Value = serde_json::from_slice(&out.stdout).expect("json");
        assert_eq!(
            doc["entries"].as_array().map(Vec::len),
            Some(2),
            "{backend:?}: {doc:#}"
        );
    }
    support::snapshot_settings(&ids).bind(|| {
        insta::assert_snapshot!("permanent_triage_json", String::from_utf8_lossy(&jsons[0]));
        insta::assert_snapshot!("permanent_triage_table", tables[0]);
    });
}

#[test]
fn resolving_a_permanent_rejection_explains_why_and_needs_a_reason() {
    let dir = tempfile::tempdir().expect("dir");
    let db = dir.path().join("uns.db");
    let cases = seed(&db);
    let (id, _, _) = cases.iter().find(|c| c.1 == "smtp 550").expect("case");
    let server = support::server(&db);
    for backend in support::BACKENDS {
        let out = backend
            .command(&db, &server)
            .args(["dlq", "resolve", id, "--confirm", "--yes"])
            .output()
            .expect("resolve");
        // The entry's line on stdout, the account on stderr.
        let stderr = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(out.status.code(), Some(4), "{stderr}");
        assert!(stderr.contains("refused permanently"), "{stderr}");
        assert!(
            stderr.contains("User unknown") && stderr.contains("replaying it is pointless"),
            "{stderr}"
        );
        assert!(
            stderr.contains(&format!(
                "unsctl dlq resolve {id} --force --reason 'why it is given up' --confirm"
            )),
            "{stderr}"
        );
    }
    // Given up on purpose, with its reason: resolved.
    let out = support::Backend::Sqlite
        .command(&db, &server)
        .args([
            "dlq",
            "resolve",
            id,
            "--force",
            "--reason",
            "the mailbox is gone for good",
            "--confirm",
            "--yes",
        ])
        .output()
        .expect("resolve");
    support::succeeded(&out);
}

/// A replay of a channel refused permanently must say what was fixed: without --reason it
/// is refused by the engine (exit 4) on both backends, naming the command that carries
/// one; with it, it goes ahead.
#[test]
fn replaying_a_permanent_refusal_needs_a_reason() {
    let dir = tempfile::tempdir().expect("dir");
    let db = dir.path().join("uns.db");
    let cases = seed(&db);
    let (id, _, _) = cases.iter().find(|c| c.1 == "slack 404").expect("case");
    let server = support::server(&db);
    for backend in support::BACKENDS {
        let out = backend
            .command(&db, &server)
            .args(["replay", id, "--confirm", "--yes"])
            .output()
            .expect("replay");
        assert_eq!(out.status.code(), Some(4), "{backend:?}: {out:?}");
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(text.contains("refused permanently"), "{text}");
        assert!(
            text.contains(&format!(
                "unsctl replay {id} --channels SLACK --reason 'what was fixed' --confirm"
            )),
            "{text}"
        );
    }
    let out = support::unsctl()
        .arg("--db")
        .arg(&db)
        .args([
            "replay",
            id,
            "--reason",
            "channel recreated",
            "--confirm",
            "--yes",
        ])
        .output()
        .expect("replay");
    assert!(out.status.success(), "{out:?}");
}

/// The step unsctl prints for a permanent refusal holds a placeholder where only a person
/// can say why. Pasted as printed, on either backend, it is refused by the engine (exit
/// 4) and changes nothing, so no audit record ever says "what was fixed"; in the person's
/// own words, the same line goes ahead.
#[test]
fn a_printed_step_pasted_with_its_placeholder_reason_is_refused_and_changes_nothing() {
    let dir = tempfile::tempdir().expect("dir");
    let db = dir.path().join("uns.db");
    let cases = seed(&db);
    let (replayed, _, _) = cases.iter().find(|c| c.1 == "slack 404").expect("case");
    let (given_up, _, _) = cases.iter().find(|c| c.1 == "smtp 550").expect("case");
    let server = support::server(&db);
    let events = || -> i64 {
        let conn = rusqlite::Connection::open(&db).expect("store");
        conn.query_row("SELECT count(*) FROM uns_events", [], |row| row.get(0))
            .expect("count")
    };
    let before = events();
    // The steps as printed: the triage's, and the refusal's way to give it up.
    let triage = support::unsctl()
        .arg("--db")
        .arg(&db)
        .args(["dlq", "triage", "-o", "json"])
        .output()
        .expect("triage");
    let document: Value = serde_json::from_slice(&triage.stdout).expect("json");
    let printed = entry(&document, replayed)["next_step"]
        .as_str()
        .expect("step")
        .to_string();
    let replay = printed
        .split("then: ")
        .nth(1)
        .expect("a command")
        .to_string();
    let give_up =
        format!("unsctl dlq resolve {given_up} --force --reason 'why it is given up' --confirm");
    for step in [&replay, &give_up] {
        let words = shlex::split(step).expect("one shell line");
        assert_eq!(words[0], "unsctl", "{step}");
        for backend in support::BACKENDS {
            let out = backend
                .command(&db, &server)
                .args(&words[1..])
                .arg("--yes")
                .output()
                .expect("pasted");
            let text = format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
            assert_eq!(out.status.code(), Some(4), "{backend:?} {step}: {text}");
            assert!(
                text.contains("is the placeholder of the step unsctl printed"),
                "{backend:?} {step}: {text}"
            );
            assert!(text.contains("in your own words"), "{backend:?}: {text}");
        }
    }
    // Any case, spacing or quoting of it left by a copy is the placeholder all the same.
    let out = support::unsctl()
        .arg("--db")
        .arg(&db)
        .args([
            "replay",
            replayed,
            "--reason",
            " 'What  was FIXED' ",
            "--confirm",
            "--yes",
        ])
        .output()
        .expect("replay");
    assert_eq!(out.status.code(), Some(4), "{out:?}");
    assert_eq!(events(), before, "a refused step wrote nothing");
    // The same line in a person's own words goes ahead.
    let words = shlex::split(&replay.replace("'what was fixed'", "'channel recreated'"))
        .expect("one shell line");
    let out = support::unsctl()
        .arg("--db")
        .arg(&db)
        .args(&words[1..])
        .arg("--yes")
        .output()
        .expect("replay");
    assert!(out.status.success(), "{out:?}");
    assert!(events() > before);
}
