//! The troubleshooting guide's own commands, run exactly as written, against a store the
//! real runtime produced and the live API over it.

use crate::support;

use serde_json::Value;
use std::collections::BTreeSet;
use std::path::Path;
use unsctl::lab::fakes::Fakes;
use unsctl::lab::repro::{self, Scenario};

/// Runs a shell snippet with the guide's environment.
fn sh(script: &str, env: &[(&str, String)]) -> String {
    let output = support::launch("bash")
        .arg("-c")
        .arg(format!("set -euo pipefail\n{script}"))
        .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
        .output()
        .expect("bash");
    assert!(
        output.status.success(),
        "{script}\nstderr: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).expect("utf-8")
}

fn json_stream(text: &str) -> Vec<Value> {
    serde_json::Deserializer::from_str(text)
        .into_iter::<Value>()
        .map(|v| v.expect("json"))
        .collect()
}

fn keys(value: &Value) -> BTreeSet<String> {
    value
        .as_object()
        .map(|m| m.keys().cloned().collect())
        .unwrap_or_default()
}

#[test]
fn the_guides_commands_work_verbatim() {
    let dir = tempfile::tempdir().expect("dir");
    let db = dir.path().join("uns.db");
    let fakes = Fakes::start().expect("fakes");
    let reports = repro::run(
        &db,
        &[Scenario::LeaseLostDelivered, Scenario::ProviderRejected],
        None,
        &fakes,
    )
    .expect("repro");
    let id_of = |scenario| {
        reports
            .iter()
            .find(|r| r.scenario == scenario)
            .map(|r| r.notification_id.clone())
            .expect("scenario ran")
    };
    let delivered = id_of(Scenario::LeaseLostDelivered);
    let rejected = id_of(Scenario::ProviderRejected);
    let server = support::server(&db);
    let env = |id: &str| {
        vec![
            ("UNS_BASE_URL", format!("http://{}", server.addr)),
            ("UNS_API_KEY", support::KEY.to_string()),
            ("UNS_DB_FILE", db.display().to_string()),
            ("NOTIF_ID", id.to_string()),
        ]
    };

    // Step 3.1: the event sequence of one notification.
    let events = json_stream(&sh(
        r#"curl -sS -H "Authorization: Bearer $UNS_API_KEY" \
  "$UNS_BASE_URL/api/v1/runtime/notifications/$NOTIF_ID" \
  | jq '.events[] | {at, kind, payload}'"#,
        &env(&delivered),
    ));
    let find = |kind: &str| {
        events
            .iter()
            .find(|e| e["kind"] == kind)
            .unwrap_or_else(|| panic!("{kind} missing"))
    };
    for event in &events {
        assert_eq!(
            keys(event),
            ["at", "kind", "payload"]
                .iter()
                .map(|s| s.to_string())
                .collect()
        );
        assert!(event["at"].as_f64().is_some());
    }
    let started = find("CHANNEL_ATTEMPT_STARTED");
    for key in [
        "attempt",
        "channel",
        "cycle",
        "cycle_attempt",
        "lease_token",
        "provider_effect_may_have_occurred",
    ] {
        assert!(
            started["payload"].get(key).is_some(),
            "CHANNEL_ATTEMPT_STARTED lacks {key}"
        );
    }
    assert_eq!(
        started["payload"]["provider_effect_may_have_occurred"],
        true
    );
    let result = find("CHANNEL_ATTEMPT_RESULT");
    for key in [
        "attempt",
        "channel",
        "cycle",
        "cycle_attempt",
        "lease_token",
        "message_id",
        "success",
    ] {
        assert!(
            result["payload"].get(key).is_some(),
            "CHANNEL_ATTEMPT_RESULT lacks {key}"
        );
    }
    assert_eq!(result["payload"]["success"], true);
    let lost = find("LEASE_LOST");
    for key in [
        "attempt",
        "lease_token",
        "provider_effect_may_have_occurred",
    ] {
        assert!(lost["payload"].get(key).is_some(), "LEASE_LOST lacks {key}");
    }
    assert_eq!(lost["payload"]["provider_effect_may_have_occurred"], true);
    assert_eq!(
        lost["payload"]["lease_token"],
        result["payload"]["lease_token"]
    );

    // Step 3.2: the cross-notification query, with the sqlite3 shell.
    let rows = sh(
        r#"sqlite3 "$UNS_DB_FILE" "
  SELECT n.id, n.status, n.dead_letter, n.attempts, n.cycle, e.kind, e.at, e.payload
  FROM uns_events e
  JOIN uns_notifications n ON n.id = e.notification_id
  WHERE e.kind IN ('LEASE_LOST', 'CHANNEL_ATTEMPT_RESULT')
  ORDER BY e.at DESC
  LIMIT 25;
""#,
        &env(&delivered),
    );
    let lines: Vec<&str> = rows.lines().collect();
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with(&format!("{delivered}|DEAD|1|1|1|LEASE_LOST|"))),
        "{rows}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with(&format!("{rejected}|DEAD|1|2|1|CHANNEL_ATTEMPT_RESULT|"))),
        "{rows}"
    );

    // Step 4.1 branch 1: resolve the DLQ entry.
    let resolved: Value = serde_json::from_str(&sh(
        r#"ENTRY_ID="$NOTIF_ID" # In RuntimeDLQ, entry_id === notification_id
curl -sS -X DELETE -H "Authorization: Bearer $UNS_API_KEY" \
  "$UNS_BASE_URL/api/v1/dlq/$ENTRY_ID""#,
        &env(&delivered),
    ))
    .expect("json");
    assert_eq!(resolved["action"], "resolved", "{resolved}");

    // Step 4.1 branch 3: replay.
    let replayed: Value = serde_json::from_str(&sh(
        r#"curl -sS -X POST -H "Authorization: Bearer $UNS_API_KEY" "$UNS_BASE_URL/api/v1/runtime/notifications/$NOTIF_ID/replay""#,
        &env(&rejected),
    ))
    .expect("json");
    assert_eq!(replayed["action"], "replayed", "{replayed}");
    assert_eq!(replayed["channels"], serde_json::json!(["SLACK"]));
}

/// Every long flag of `command` and of its subcommands, with the subcommands by name.
fn flags_of(command: &clap::Command) -> BTreeSet<String> {
    command
        .get_arguments()
        .filter_map(|a| a.get_long().map(|l| format!("--{l}")))
        .collect()
}

/// Every backticked `unsctl ...` command in the guides names commands and flags unsctl
/// has, and every backticked `--flag` in their text is one of unsctl's: a renamed or
/// removed flag fails here, not at 3 a.m.
#[test]
fn every_command_and_flag_the_guides_name_is_one_unsctl_has() {
    use clap::CommandFactory;
    let root = unsctl::cli::Cli::command();
    let mut all_flags = flags_of(&root);
    let mut stack: Vec<&clap::Command> = vec![&root];
    while let Some(command) = stack.pop() {
        all_flags.extend(flags_of(command));
        stack.extend(command.get_subcommands());
    }
    let guides = Path::new(env!("CARGO_MANIFEST_DIR")).join("tsg");
    let mut checked = 0;
    for entry in std::fs::read_dir(&guides).expect("tsg/") {
        let path = entry.expect("entry").path();
        if path.extension().and_then(|e| e.to_str()) != Some("md") {
            continue;
        }
        let text = std::fs::read_to_string(&path).expect("guide");
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default()
            .to_string();
        // The code spans of the prose (fenced blocks are run by the peers' runbook test).
        let mut in_fence = false;
        let mut spans = Vec::new();
        for line in text.lines() {
            if line.trim_start().starts_with("```") {
                in_fence = !in_fence;
                continue;
            }
            if in_fence {
                continue;
            }
            spans.extend(line.split('`').skip(1).step_by(2).map(str::to_string));
        }
        for span in spans {
            if let Some(rest) = span.strip_prefix("unsctl ") {
                // Walk the subcommands the words name; the flags must be theirs or global.
                let mut command = &root;
                let mut known = flags_of(&root);
                for word in rest.split_whitespace() {
                    if let Some(sub) = command.find_subcommand(word) {
                        command = sub;
                        known.extend(flags_of(command));
                    } else if word.starts_with("--") {
                        let flag = word.split('=').next().unwrap_or(word);
                        assert!(
                            known.contains(flag),
                            "{name}: `{span}`: {flag} is not a flag of `{}`",
                            command.get_name()
                        );
                        checked += 1;
                    }
                }
                checked += 1;
            } else if span.starts_with("--") {
                for word in span.split_whitespace().filter(|w| w.starts_with("--")) {
                    assert!(
                        all_flags.contains(word),
                        "{name}: `{span}`: unsctl has no {word}"
                    );
                    checked += 1;
                }
            }
        }
    }
    assert!(checked >= 40, "checked only {checked}");
}
