//! Every next step unsctl prints runs as printed in the runbook's own environment, which
//! exports both UNS_DB_FILE and UNS_BASE_URL: the API is used, one note says so, and the
//! step does what it says.

use crate::support;

use std::path::Path;
use std::process::{Command, Stdio};
use unsctl::clock::{Clock, SystemClock};
use unsctl::runtime::schema::{self, OpenMode};

fn bin_dir() -> String {
    Path::new(env!("CARGO_BIN_EXE_unsctl"))
        .parent()
        .expect("bin dir")
        .display()
        .to_string()
}

#[test]
fn printed_next_steps_run_in_the_runbooks_environment() {
    let dir = tempfile::tempdir().expect("dir");
    let db = dir.path().join("uns.db");
    let conn = schema::open(&db, OpenMode::Create).expect("store");
    let now = SystemClock.now();
    let resolve = support::resolve_entry(&conn, now);
    let verify = support::verify_entry(&conn, now);
    let replay = support::replay_entry(&conn, now);
    let server = support::server(&db);
    let env = |command: &mut Command| {
        command
            .env("UNS_DB_FILE", &db)
            .env("UNS_BASE_URL", format!("http://{}", server.addr))
            .env("UNS_API_KEY", support::KEY)
            .env(
                "PATH",
                format!(
                    "{}:{}",
                    bin_dir(),
                    std::env::var("PATH").unwrap_or_default()
                ),
            );
    };
    let mut triage = support::unsctl();
    triage.args(["-o", "json", "dlq", "triage"]);
    env(&mut triage);
    let out = triage.output().expect("triage");
    support::succeeded(&out);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        stderr
            .matches("UNS_DB_FILE and UNS_BASE_URL are both set; using the API")
            .count(),
        1,
        "{stderr}"
    );
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    let steps: Vec<(String, String)> = doc["entries"]
        .as_array()
        .expect("entries")
        .iter()
        .map(|e| {
            (
                e["id"].as_str().unwrap_or_default().to_string(),
                e["next_step"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect();
    assert_eq!(steps.len(), 3);
    // inspect prints the same next step on its `next:` line.
    for (id, step) in &steps {
        let mut inspect = support::unsctl();
        inspect.args(["--color", "never", "inspect", id]);
        env(&mut inspect);
        let text = String::from_utf8_lossy(&inspect.output().expect("inspect").stdout).into_owned();
        assert!(text.contains(step.as_str()), "{text}");
    }
    for (id, step) in &steps {
        // Under a terminal, answering the prompt as an operator would.
        let mut run = support::launch("script");
        run.args(["-qec", step, "/dev/null"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped());
        env(&mut run);
        let mut child = run.spawn().expect("script");
        {
            use std::io::Write;
            let mut stdin = child.stdin.take().expect("stdin");
            let _ = stdin.write_all(b"yes\n");
        }
        let out = child.wait_with_output().expect("run");
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{step}:\n{text}");
        assert!(!text.contains("usage"), "{step}:\n{text}");
        let expected = if id == &resolve {
            "resolved"
        } else if id == &replay {
            "replayed"
        } else {
            assert_eq!(id, &verify);
            "CANNOT_TELL"
        };
        assert!(text.contains(expected), "{step}:\n{text}");
    }
    let kinds: Vec<String> = conn
        .prepare(
            "SELECT kind FROM uns_events WHERE kind IN ('DLQ_RESOLVED', 'REPLAYED') ORDER BY id",
        )
        .expect("sql")
        .query_map([], |r| r.get(0))
        .expect("query")
        .map(|r| r.expect("row"))
        .collect();
    assert_eq!(kinds.len(), 2, "{kinds:?}");
}

/// Every `unsctl ...` the code names to a person, in backquotes or in brackets (a hint, an
/// empty screen, a help text), names a command that exists: the screen once sent people
/// looking for a `context add` there is none of.
#[test]
fn every_command_the_code_names_exists() {
    let mut files = Vec::new();
    crate::layering::sources(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("src"),
        &mut files,
    );
    let mut named = std::collections::BTreeSet::new();
    for file in &files {
        let text = std::fs::read_to_string(file).expect("source");
        for opening in ["`unsctl ", "(unsctl "] {
            for (at, _) in text.match_indices(opening) {
                // The words that name the command: up to the first flag, value or end.
                let mut words: Vec<&str> = Vec::new();
                let mut rest = &text[at + opening.len()..];
                while words.len() < 2 && rest.starts_with(|c: char| c.is_ascii_lowercase()) {
                    let end = rest
                        .find(|c: char| !(c.is_ascii_lowercase() || c == '-'))
                        .unwrap_or(rest.len());
                    words.push(&rest[..end]);
                    match rest[end..].strip_prefix(' ') {
                        Some(next) => rest = next,
                        None => break,
                    }
                }
                if !words.is_empty() {
                    named.insert(words.join(" "));
                }
            }
        }
    }
    assert!(named.len() > 20, "found too few to be a check: {named:?}");
    for command in &named {
        let out = support::unsctl()
            .args(command.split(' '))
            .arg("--help")
            .stdin(Stdio::null())
            .output()
            .expect("unsctl");
        assert!(
            out.status.success(),
            "`unsctl {command}` is named in the code but is no command: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}
