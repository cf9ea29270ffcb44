//! Every `-o json` document a command prints through a view, snapshotted whole: a
//! change to any key, value or order shows in review. Stores are seeded at a fixed
//! time; ids, paths and ages are filtered to placeholders.

use crate::support;

use std::path::{Path, PathBuf};
use unsctl::runtime::schema::{self, OpenMode};

const NOW: f64 = 1_761_192_000.0;

struct Fleet {
    dir: tempfile::TempDir,
    config: PathBuf,
    ids: Vec<String>,
}

/// Two contexts reading stores directly (eu: a RESOLVE and a VERIFY entry; us: a
/// REPLAY entry), and one API context whose key variable is named.
fn fleet() -> Fleet {
    let dir = tempfile::tempdir().expect("dir");
    let seed = |name: &str, entries: &[fn(&rusqlite::Connection, f64) -> String]| {
        let db = dir.path().join(format!("{name}.db"));
        let conn = schema::open(&db, OpenMode::Create).expect("store");
        let ids: Vec<String> = entries
            .iter()
            .enumerate()
            .map(|(n, entry)| entry(&conn, NOW + 100.0 * n as f64))
            .collect();
        (db, ids)
    };
    let (eu, mut ids) = seed("eu", &[support::resolve_entry, support::verify_entry]);
    let (us, more) = seed("us", &[support::replay_entry]);
    ids.extend(more);
    let config = dir.path().join("config.toml");
    std::fs::write(
        &config,
        format!(
            "current_context = \"eu\"\noperator = \"documents-test\"\n\n[contexts.eu]\ndb = \"{}\"\n\n[contexts.us]\ndb = \"{}\"\n\n[contexts.ap]\napi = \"http://127.0.0.1:9/\"\napi_key_env = \"UNS_KEY_AP\"\n",
            eu.display(),
            us.display()
        ),
    )
    .expect("config");
    set_private(&config);
    Fleet { dir, config, ids }
}

fn set_private(path: &Path) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).expect("chmod");
}

impl Fleet {
    /// `-o json` of `args`, after the exit code, which must be `exit`.
    fn run(&self, exit: i32, args: &[&str]) -> String {
        let out = support::unsctl()
            .env("UNSCTL_CONFIG", &self.config)
            .args(["-o", "json"])
            .args(args)
            .output()
            .expect("unsctl");
        assert_eq!(
            out.status.code(),
            Some(exit),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        format!(
            "exit: {}\n{}",
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout)
        )
    }

    fn settings(&self) -> insta::Settings {
        let mut settings = support::snapshot_settings(&self.ids);
        settings.add_filter(
            &support::regex_escape(&self.dir.path().display().to_string()),
            "[DIR]",
        );
        // Ages and durations measured against the wall clock.
        settings.add_filter(
            r"\b\d+(\.\d+)?(ms|[smhd])( \d+(ms|[smhd]))*\b( ago)?",
            "[AGE]",
        );
        settings.add_filter(
            r#""(age_seconds|seconds|oldest_due_seconds)": [0-9.e+-]+"#,
            r#""$1": [N]"#,
        );
        settings.add_filter(r"unsctl [0-9]+\.[0-9]+\.[0-9]+", "unsctl [VERSION]");
        settings
    }
}

#[test]
fn the_documents_of_the_config_and_the_guides() {
    let fleet = fleet();
    fleet.settings().bind(|| {
        insta::assert_snapshot!("context_list", fleet.run(0, &["context", "list"]));
        insta::assert_snapshot!("context_show", fleet.run(0, &["context", "show"]));
        insta::assert_snapshot!("context_show_ap", fleet.run(0, &["context", "show", "ap"]));
        insta::assert_snapshot!("tsg_list", fleet.run(0, &["tsg", "list"]));
        insta::assert_snapshot!("tsg_alerts", fleet.run(0, &["tsg", "alerts"]));
    });
    // The guide's own Markdown, whole: its id and title, and the text the binary holds.
    let shown: serde_json::Value = serde_json::from_str(
        fleet
            .run(0, &["tsg", "show", "TSG-02"])
            .split_once('\n')
            .expect("exit line")
            .1,
    )
    .expect("json");
    assert_eq!(shown["id"], "TSG-02");
    assert!(shown["title"].as_str().is_some_and(|t| !t.is_empty()));
    let guide =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("tsg/TSG-02.md"))
            .expect("guide");
    assert_eq!(shown["markdown"], guide.as_str());
}

#[test]
fn the_documents_of_a_fleet() {
    let fleet = fleet();
    let down = ["--context", "eu"];
    fleet.settings().bind(|| {
        // ap has no key in the environment: a partial answer, exit 1, the others shown.
        insta::assert_snapshot!(
            "events_all_contexts",
            fleet.run(1, &["--all-contexts", "events", "--limit", "5"])
        );
        insta::assert_snapshot!(
            "doctor_all_contexts",
            fleet.run(1, &["--all-contexts", "doctor"])
        );
        insta::assert_snapshot!("doctor", fleet.run(0, &[down[0], down[1], "doctor"]));
    });
}

#[test]
fn the_documents_of_a_bulk_action_and_of_verify() {
    let fleet = fleet();
    fleet.settings().bind(|| {
        insta::assert_snapshot!(
            "resolve_dry_run",
            fleet.run(
                4,
                &[
                    "--context",
                    "eu",
                    "dlq",
                    "resolve",
                    &fleet.ids[0],
                    &fleet.ids[1]
                ]
            )
        );
        insta::assert_snapshot!(
            "replay_done",
            fleet.run(
                0,
                &[
                    "--context",
                    "us",
                    "replay",
                    &fleet.ids[2],
                    "--confirm",
                    "--yes",
                    "--reason",
                    "fixed the webhook"
                ]
            )
        );
        insta::assert_snapshot!("verify", fleet.run(0, &["--context", "eu", "verify"]));
    });
}

#[test]
fn the_documents_of_a_reconciliation() {
    let fleet = fleet();
    fleet.settings().bind(|| {
        insta::assert_snapshot!("reconcile", fleet.run(0, &["--context", "eu", "reconcile"]));
        // ap has no key: a partial answer, exit 1, eu and us reconciled.
        insta::assert_snapshot!(
            "reconcile_all_contexts",
            fleet.run(1, &["--all-contexts", "reconcile"])
        );
    });
}
