//! Reproduction: each scenario through `unsctl repro`, the demo on a fresh directory,
//! the fixtures on both backends, `--keep-running`, and the CI-sized safety sweep.

use crate::support;

use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

fn unsctl() -> Command {
    let mut command = support::unsctl();
    command.stdin(Stdio::null());
    command
}

fn kinds(db: &Path, id: &str) -> Vec<(String, Value)> {
    let conn = rusqlite::Connection::open(db).expect("db");
    let mut stmt = conn
        .prepare("SELECT kind, payload FROM uns_events WHERE notification_id = ?1 ORDER BY id")
        .expect("prepare");
    stmt.query_map([id], |r| {
        Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?))
    })
    .expect("query")
    .map(|r| {
        let (kind, payload) = r.expect("row");
        (kind, serde_json::from_str(&payload).expect("json"))
    })
    .collect()
}

/// Runs one scenario and returns (store, its report, the triage entry if in the DLQ).
fn repro(scenario: &str) -> (tempfile::TempDir, PathBuf, Value, Option<Value>) {
    let dir = tempfile::tempdir().expect("dir");
    let db = dir.path().join("uns.db");
    let out = unsctl()
        .arg("--db")
        .arg(&db)
        .args(["repro", scenario, "-o", "json"])
        .output()
        .expect("repro");
    support::succeeded(&out);
    let report: Value = serde_json::from_slice(&out.stdout).expect("json");
    let scenario_report = report["scenarios"][0].clone();
    let id = scenario_report["notification_id"].as_str().expect("id");
    let entry = report["triage"]["entries"]
        .as_array()
        .and_then(|e| e.iter().find(|x| x["id"] == id).cloned());
    (dir, db, scenario_report, entry)
}

fn copies(report: &Value, channel: &str) -> usize {
    report["ledger"]
        .as_array()
        .map(|l| l.iter().filter(|a| a["channel"] == channel).count())
        .unwrap_or(0)
}

fn sequence(events: &[(String, Value)]) -> Vec<&str> {
    events.iter().map(|(k, _)| k.as_str()).collect()
}

#[test]
fn lease_lost_delivered_is_resolve_with_one_copy() {
    let (_dir, db, report, entry) = repro("lease-lost-delivered");
    let events = kinds(&db, report["notification_id"].as_str().unwrap_or_default());
    let seq = sequence(&events);
    assert_eq!(
        &seq[seq.len() - 2..],
        ["CHANNEL_ATTEMPT_RESULT", "LEASE_LOST"],
        "{seq:?}"
    );
    assert_eq!(events[events.len() - 2].1["success"], true);
    assert!(seq.contains(&"DEAD_LETTERED"));
    assert_eq!(copies(&report, "EMAIL"), 1);
    assert_eq!(entry.expect("in the DLQ")["branch"], "RESOLVE");
    assert_eq!(
        report["error_message"],
        "Provider outcome unknown: recovery exhausted the attempt budget"
    );
}

#[test]
fn smtp_unknown_is_verify() {
    let (_dir, db, report, entry) = repro("smtp-unknown");
    let events = kinds(&db, report["notification_id"].as_str().unwrap_or_default());
    let result = events
        .iter()
        .find(|(k, _)| k == "CHANNEL_ATTEMPT_RESULT")
        .expect("a result");
    assert_eq!(result.1["metadata"]["provider_outcome"], "UNKNOWN");
    assert_eq!(result.1["success"], false);
    assert_eq!(copies(&report, "EMAIL"), 1, "the relay holds the message");
    let entry = entry.expect("in the DLQ");
    assert_eq!(entry["branch"], "VERIFY");
    assert_eq!(entry["channels"][0]["state"], "UNCERTAIN");
}

#[test]
fn provider_rejected_is_replay_after_the_budget() {
    let (_dir, db, report, entry) = repro("provider-rejected");
    let events = kinds(&db, report["notification_id"].as_str().unwrap_or_default());
    assert_eq!(
        sequence(&events),
        [
            "SUBMITTED",
            "ATTEMPT_STARTED",
            "CHANNEL_ATTEMPT_STARTED",
            "CHANNEL_ATTEMPT_RESULT",
            "RETRY_SCHEDULED",
            "ATTEMPT_STARTED",
            "CHANNEL_ATTEMPT_STARTED",
            "CHANNEL_ATTEMPT_RESULT",
            "DEAD_LETTERED",
        ]
    );
    assert_eq!(copies(&report, "SLACK"), 0);
    assert_eq!(entry.expect("in the DLQ")["branch"], "REPLAY");
}

#[test]
fn mixed_channels_replays_slack_only() {
    let (_dir, db, report, entry) = repro("mixed-channels");
    let events = kinds(&db, report["notification_id"].as_str().unwrap_or_default());
    assert_eq!(
        sequence(&events),
        [
            "SUBMITTED",
            "ATTEMPT_STARTED",
            "CHANNEL_ATTEMPT_STARTED",
            "CHANNEL_ATTEMPT_RESULT",
            "CHANNEL_ATTEMPT_STARTED",
            "CHANNEL_ATTEMPT_RESULT",
            "DEAD_LETTERED"
        ]
    );
    assert_eq!((copies(&report, "EMAIL"), copies(&report, "SLACK")), (1, 0));
    let entry = entry.expect("in the DLQ");
    assert_eq!(entry["branch"], "REPLAY");
    assert!(
        entry["next_step"]
            .as_str()
            .unwrap_or_default()
            .contains("--channels SLACK")
    );
}

#[test]
fn worker_crash_leaves_a_start_without_a_result() {
    let (_dir, db, report, entry) = repro("worker-crash");
    let events = kinds(&db, report["notification_id"].as_str().unwrap_or_default());
    assert_eq!(
        sequence(&events),
        [
            "SUBMITTED",
            "ATTEMPT_STARTED",
            "CHANNEL_ATTEMPT_STARTED",
            "DEAD_LETTERED"
        ]
    );
    assert_eq!(events[1].1["worker_id"], "doomed-worker");
    assert_eq!(copies(&report, "EMAIL"), 1);
    assert_eq!(entry.expect("in the DLQ")["branch"], "VERIFY");
}

#[test]
fn duplicate_after_reclaim_reaches_the_recipient_twice() {
    let (_dir, db, report, entry) = repro("duplicate-after-reclaim");
    let events = kinds(&db, report["notification_id"].as_str().unwrap_or_default());
    let seq = sequence(&events);
    assert!(seq.contains(&"LEASE_LOST"), "{seq:?}");
    let accepted = events
        .iter()
        .filter(|(k, p)| k == "CHANNEL_ATTEMPT_RESULT" && p["success"] == true)
        .count();
    assert_eq!(accepted, 2);
    assert!(
        events
            .iter()
            .any(|(k, p)| k == "ATTEMPT_STARTED" && p["reclaimed"] == true)
    );
    assert_eq!(
        copies(&report, "EMAIL"),
        2,
        "two copies reached the recipient"
    );
    assert_eq!(report["status"], "DELIVERED");
    assert!(entry.is_none(), "not in the DLQ");
    // Reconcile finds it outside the DLQ: one DUPLICATED EMAIL, both copies with the
    // queue ids the relay gave them.
    let reconciled = report["reconcile"].as_array().expect("reconcile");
    assert_eq!(reconciled.len(), 1, "{reconciled:?}");
    let email = &reconciled[0];
    assert_eq!(email["channel"], "EMAIL");
    assert_eq!(email["class"], "DUPLICATED");
    assert_eq!(email["copies"], 2);
    let queue_ids: Vec<&str> = email["evidence"]
        .as_array()
        .expect("evidence")
        .iter()
        .filter(|e| e["what"] == "copy")
        .map(|e| {
            assert_eq!(
                e["sources"],
                serde_json::json!(["history", "relay-log"]),
                "{e}"
            );
            e["queue_ids"][0].as_str().expect("queue id")
        })
        .collect();
    assert_eq!(queue_ids.len(), 2, "{email:#}");
    assert_ne!(queue_ids[0], queue_ids[1], "two messages, two queue ids");
}

#[test]
fn the_demo_runs_on_a_fresh_directory() {
    let dir = tempfile::tempdir().expect("dir");
    let out = unsctl()
        .env("TMPDIR", dir.path())
        .current_dir(dir.path())
        .arg("demo")
        .output()
        .expect("demo");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    for scenario in [
        "lease-lost-delivered",
        "smtp-unknown",
        "provider-rejected",
        "mixed-channels",
        "worker-crash",
        "duplicate-after-reclaim",
    ] {
        assert!(stdout.contains(scenario), "{scenario} missing:\n{stdout}");
    }
    assert!(stdout.contains("NEXT STEP"), "the triage table:\n{stdout}");
    assert!(
        stderr.contains("5 entries: 1 RESOLVE, 2 VERIFY, 2 REPLAY"),
        "{stderr}"
    );
    assert!(
        stdout.contains("EMAIL accepted 2 copies"),
        "the duplicate is shown:\n{stdout}"
    );
    // Every case says why what the fakes accepted matches its verdict.
    assert_eq!(stdout.matches("  expected:").count(), 6, "{stdout}");
    assert!(
        stdout.contains("a killed process writes nothing"),
        "{stdout}"
    );
    // It cleans up after itself, and says how to keep the store instead.
    assert!(
        stderr.contains("The temporary store was removed"),
        "{stderr}"
    );
    assert!(
        stderr.contains("cargo install --path ."),
        "not on PATH here: {stderr}"
    );
    let left: Vec<_> = std::fs::read_dir(dir.path())
        .expect("tmp")
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().starts_with("unsctl-repro-"))
        .collect();
    assert!(left.is_empty(), "left behind: {left:?}");

    // Kept, the commands it prints run as printed.
    let out = unsctl()
        .env("TMPDIR", dir.path())
        .current_dir(dir.path())
        .args(["demo", "--keep"])
        .output()
        .expect("demo");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let export = stderr
        .lines()
        .find(|l| l.trim_start().starts_with("export UNS_DB_FILE="))
        .expect("the export line");
    let mut ran = 0;
    for line in stderr
        .lines()
        .filter(|l| l.starts_with("  ") && !l.contains("export "))
    {
        let command = line.split("   #").next().unwrap_or_default().trim();
        if command.starts_with("rm ")
            || command.contains("--keep-running")
            || command.contains("demo")
        {
            continue;
        }
        let run = support::launch("bash")
            .arg("-c")
            .arg(format!("{}; {command}", export.trim()))
            .output()
            .expect("bash");
        assert!(
            run.status.success(),
            "{command}: {}",
            String::from_utf8_lossy(&run.stderr)
        );
        ran += 1;
    }
    assert!(ran >= 5, "{stderr}");
}

#[test]
fn fixtures_triage_the_same_on_both_backends() {
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures");
    let mut checked = 0;
    for entry in std::fs::read_dir(&fixtures).expect("fixtures") {
        let path = entry.expect("entry").path();
        if path.extension().and_then(|e| e.to_str()) != Some("sql") {
            continue;
        }
        let name = path
            .file_stem()
            .and_then(|s| s.to_str())
            .expect("name")
            .to_string();
        let expected = std::fs::read_to_string(fixtures.join(format!("{name}.triage.json")))
            .expect("expected triage");
        let dir = tempfile::tempdir().expect("dir");
        let db = dir.path().join("uns.db");
        rusqlite::Connection::open(&db)
            .expect("db")
            .execute_batch(&std::fs::read_to_string(&path).expect("sql"))
            .expect("load dump");
        let direct = unsctl()
            .arg("--db")
            .arg(&db)
            .args(["dlq", "triage", "-o", "json"])
            .output()
            .expect("run");
        // Both backends name the same store; the expected file has no store, whose path
        // is a temporary one.
        let identity = |out: &[u8]| {
            let doc: serde_json::Value = serde_json::from_slice(out).expect("json");
            doc["store"].as_str().map(str::to_string)
        };
        assert!(
            identity(&direct.stdout).is_some(),
            "{name}: the plan names its store"
        );
        let without_store = |out: &[u8]| {
            let text = String::from_utf8_lossy(out).into_owned();
            match text.find(",\n  \"store\": \"") {
                Some(at) => format!("{}\n}}\n", &text[..at]),
                None => text,
            }
        };
        assert_eq!(without_store(&direct.stdout), expected, "{name} over --db");
        let server = support::server(&db);
        let remote = unsctl()
            .args([
                "--api",
                &format!("http://{}", server.addr),
                "dlq",
                "triage",
                "-o",
                "json",
            ])
            .env("UNS_API_KEY", support::KEY)
            .output()
            .expect("run");
        assert_eq!(without_store(&remote.stdout), expected, "{name} over --api");
        assert_eq!(
            identity(&remote.stdout),
            identity(&direct.stdout),
            "{name}: the same store over either backend"
        );
        checked += 1;
    }
    assert_eq!(checked, 7, "six runbook cases and the store of all of them");
}

#[test]
fn keep_running_serves_the_api_with_a_printed_key() {
    let dir = tempfile::tempdir().expect("dir");
    let db = dir.path().join("uns.db");
    let mut child = unsctl()
        .arg("--db")
        .arg(&db)
        .args(["repro", "provider-rejected", "--keep-running"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let stderr = child.stderr.take().expect("stderr");
    let mut lines = BufReader::new(stderr).lines();
    let exports = loop {
        let line = lines.next().and_then(|l| l.ok()).expect("the exports line");
        if line.trim_start().starts_with("export UNS_BASE_URL=") {
            break line;
        }
    };
    let value = |name: &str| {
        exports
            .split_whitespace()
            .find_map(|part| part.strip_prefix(&format!("{name}=")))
            .map(str::to_string)
            .expect("printed")
    };
    let (url, key) = (value("UNS_BASE_URL"), value("UNS_API_KEY"));
    assert!(url.starts_with("http://127.0.0.1:"), "{url}");
    let out: Output = support::launch("bash")
        .arg("-c")
        .arg(r#"curl -sS -H "Authorization: Bearer $UNS_API_KEY" "$UNS_BASE_URL/api/v1/dlq" | jq '.entries | length'"#)
        .env("UNS_BASE_URL", &url)
        .env("UNS_API_KEY", &key)
        .output()
        .expect("curl");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "1",
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .expect("kill");
    let status = child.wait().expect("wait");
    assert!(status.success(), "{status:?}");
}

/// The kept-running demo stops on SIGTERM as on Ctrl-C, even the moment it prints how
/// to reach it: before, only Ctrl-C was watched, and only once it served, so a TERM
/// killed it by the signal's default without stopping its worker.
#[test]
fn keep_running_stops_on_sigterm_the_moment_it_serves() {
    let dir = tempfile::tempdir().expect("dir");
    let mut command = unsctl();
    command
        .arg("--db")
        .arg(dir.path().join("uns.db"))
        .args(["repro", "provider-rejected", "--keep-running"])
        .stdout(Stdio::null());
    let (status, said) = support::terminated_once_it_says(command, "export UNS_BASE_URL=");
    assert!(status.success(), "{status}: {said}");
}

#[test]
fn the_ci_sweep_finds_no_unsafe_verdict() {
    let out = unsctl()
        .args([
            "sweep",
            "--schedules",
            "200",
            "--seed",
            "20261129",
            "--verify",
            "--remediate",
            "-o",
            "json",
        ])
        .output()
        .expect("sweep");
    support::the_sweep_was_safe(&out, 200);
}

/// Repro runs a worker against its fakes: pointed at a store holding anything it did
/// not make (a real store, by a slip of `--db`), that worker would claim the store's due
/// notifications and "deliver" them to a fake, and their recipients would never get
/// them. It refuses such a store before it writes or claims anything (exit 4), names
/// what it found, and goes on writing into a store of its own making. A PostgreSQL URL
/// is a usage error that says how to get the cases there, its password not repeated.
#[test]
fn repro_never_touches_a_store_it_did_not_make() {
    let (_dir, db, first, _) = repro("lease-lost-delivered");
    let again = unsctl()
        .arg("--db")
        .arg(&db)
        .args(["repro", "provider-rejected", "-o", "json"])
        .output()
        .expect("repro");
    support::succeeded(&again);

    let submitted = unsctl()
        .arg("--db")
        .arg(&db)
        .args(["runtime", "submit", "--channel", "email"])
        .args([
            "--recipient",
            "someone@customer.example",
            "--subject",
            "invoice",
        ])
        .output()
        .expect("submit");
    support::succeeded(&submitted);
    let real = String::from_utf8_lossy(&submitted.stdout)
        .split_whitespace()
        .find(|word| word.starts_with("n-"))
        .expect("the new id")
        .to_string();
    let before = std::fs::read(&db).expect("store");
    let out = unsctl()
        .arg("--db")
        .arg(&db)
        .args(["repro", "smtp-unknown"])
        .output()
        .expect("repro");
    let said = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(4), "{said}");
    assert!(
        said.contains(&real) && said.contains("did not make"),
        "{said}"
    );
    assert_eq!(
        std::fs::read(&db).expect("store"),
        before,
        "nothing written"
    );
    let kinds: Vec<String> = kinds(&db, &real).into_iter().map(|(k, _)| k).collect();
    assert!(
        !kinds.iter().any(|k| k.contains("ATTEMPT")),
        "never claimed: {kinds:?}"
    );
    assert!(first["notification_id"].is_string());

    let out = unsctl()
        .args([
            "--db",
            "postgres://uns:hunter2-secret@127.0.0.1:1/uns",
            "repro",
            "all",
        ])
        .output()
        .expect("repro");
    let said = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{said}");
    assert!(
        said.contains("store copy") && !said.contains("hunter2"),
        "{said}"
    );
}
