//! The runbooks cannot drift from the tool: every `sh` block of `tsg/*.md` runs, as
//! written, under a real terminal, against a store made by `unsctl repro all` with the
//! API up, and must succeed and print what its `# prints:` lines say.

use crate::support;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use unsctl::lab::fakes::Fakes;
use unsctl::lab::repro::{self, Scenario};
use unsctl::store::direct::DirectStore;

/// How long one block may run before it counts as hung (they take seconds).
const BLOCK_DEADLINE: std::time::Duration = std::time::Duration::from_secs(180);

struct Block {
    guide: String,
    line: usize,
    bind: Option<String>,
    script: String,
    prints: Vec<String>,
}

fn blocks(dir: &Path) -> Vec<Block> {
    let mut found = Vec::new();
    let mut guides: Vec<PathBuf> = std::fs::read_dir(dir)
        .expect("tsg/")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().and_then(|e| e.to_str()) == Some("md"))
        .collect();
    guides.sort();
    for guide in guides {
        let text = std::fs::read_to_string(&guide).expect("guide");
        let mut bind = None;
        let mut current: Option<Block> = None;
        for (n, line) in text.lines().enumerate() {
            if let Some(block) = current.as_mut() {
                if line.trim_start().starts_with("```") {
                    found.push(current.take().expect("block"));
                } else {
                    if let Some(expected) = line.trim().strip_prefix("# prints:") {
                        block.prints.push(expected.trim().to_string());
                    }
                    block.script.push_str(line);
                    block.script.push('\n');
                }
                continue;
            }
            if let Some(rest) = line.trim().strip_prefix("<!-- runbook:") {
                bind = rest
                    .trim_end_matches("-->")
                    .trim()
                    .strip_prefix("NOTIF_ID=")
                    .map(str::to_string);
            } else if line.trim() == "```sh" {
                current = Some(Block {
                    guide: guide
                        .file_name()
                        .and_then(|f| f.to_str())
                        .unwrap_or_default()
                        .to_string(),
                    line: n + 1,
                    bind: bind.take(),
                    script: String::new(),
                    prints: Vec::new(),
                });
            } else if !line.trim().is_empty() {
                bind = None;
            }
        }
    }
    found
}

/// The text a person reads: terminal colour sequences removed (jq colours on a terminal).
fn strip_ansi(text: &str) -> String {
    let mut plain = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' && chars.peek() == Some(&'[') {
            for next in chars.by_ref() {
                if next.is_ascii_alphabetic() {
                    break;
                }
            }
            continue;
        }
        plain.push(c);
    }
    plain
}

#[test]
fn every_shell_block_in_the_runbooks_runs_and_prints_what_it_says() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let blocks = blocks(&root.join("tsg"));
    assert!(blocks.len() >= 15, "found only {} blocks", blocks.len());

    let dir = tempfile::tempdir().expect("dir");
    let pristine = dir.path().join("pristine.db");
    let fakes = Fakes::start().expect("fakes");
    let binary = PathBuf::from(env!("CARGO_BIN_EXE_unsctl"));
    repro::run(&pristine, &Scenario::ALL, Some(&binary), &fakes).expect("repro all");
    rusqlite::Connection::open(&pristine)
        .expect("db")
        .execute_batch("PRAGMA wal_checkpoint(TRUNCATE)")
        .expect("checkpoint");
    let store = DirectStore::open_read_only(&pristine).expect("store");
    let mut by_branch = std::collections::HashMap::new();
    let mut visit = |triaged: unsctl::store::Triaged| {
        let verdict = triaged.verdict;
        by_branch
            .entry(verdict.branch.as_str().to_string())
            .or_insert(verdict.id);
        Ok(())
    };
    unsctl::store::Store::each_triaged(&store, &Default::default(), &mut visit).expect("triage");
    // The runbook's psql blocks read the same store copied into PostgreSQL, named as a
    // PostgreSQL deployment names it, by a URL in UNS_DB_FILE.
    let database = support::postgres::cluster().database();
    database.copy_from(&pristine);
    let path = format!(
        "{}:{}",
        binary.parent().expect("bin dir").display(),
        std::env::var("PATH").unwrap_or_default()
    );

    for (n, block) in blocks.iter().enumerate() {
        let work = dir.path().join(format!("block-{n}"));
        std::fs::create_dir_all(&work).expect("dir");
        let db = work.join("uns.db");
        std::fs::copy(&pristine, &db).expect("copy store");
        // The API server asks the fakes' records, as `runtime serve --relay-log` would.
        let server = unsctl::server::start(unsctl::server::ServerConfig {
            verify: repro::fake_sources(&fakes, 1.0),
            ..unsctl::server::ServerConfig::api_only(
                db.clone(),
                Some(unsctl::server::Keys::single(support::KEY).expect("key")),
            )
        })
        .expect("server");
        let script = work.join("block.sh");
        std::fs::write(&script, &block.script).expect("script");
        let notif_id = block
            .bind
            .as_ref()
            .map(|branch| {
                by_branch
                    .get(branch)
                    .cloned()
                    .unwrap_or_else(|| panic!("no {branch} entry"))
            })
            .unwrap_or_default();
        // `script` gives the block a real terminal, so prompts are answered as a person would.
        let mut child = support::launch("script")
            .args([
                "-qec",
                &format!("bash -eo pipefail {}", script.display()),
                "/dev/null",
            ])
            .current_dir(&work)
            .env("PATH", &path)
            .env(
                "UNS_DB_FILE",
                if block.script.contains("psql ") {
                    database.url.clone().into()
                } else {
                    db.clone().into_os_string()
                },
            )
            .env("PGPASSWORD", support::postgres::PASSWORD)
            .env("UNS_BASE_URL", format!("http://{}", server.addr))
            .env("UNS_API_KEY", support::KEY)
            .env("NOTIF_ID", &notif_id)
            .env("NO_COLOR", "1")
            .env("TERM", "xterm")
            .env("UNS_OPERATOR", "runbook-test")
            .env("UNS_RELAY_LOG", &fakes.maillog)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("script (util-linux)");
        // Answers for any prompt; stdin stays open until the block ends, since `script`
        // lingers for two seconds after its input reaches end of file.
        let mut stdin = child.stdin.take().expect("stdin");
        let _ = stdin.write_all(b"yes\nyes\nyes\n");
        // A block that waits on something (a pager, a prompt it was not given) fails
        // here rather than hanging the suite; blocks take seconds.
        let pid = child.id();
        let (ended, ends) = std::sync::mpsc::channel::<()>();
        let watchdog = std::thread::spawn(move || {
            let hung = ends.recv_timeout(BLOCK_DEADLINE).is_err();
            if hung {
                let _ = std::process::Command::new("kill")
                    .args(["-KILL", &pid.to_string()])
                    .status();
            }
            hung
        });
        let out = child.wait_with_output().expect("wait");
        let _ = ended.send(());
        let hung = watchdog.join().expect("the watchdog");
        drop(stdin);
        let printed = strip_ansi(&String::from_utf8_lossy(&out.stdout).replace('\r', ""));
        let context = format!(
            "{}:{} ({})\n{}\n--- output\n{printed}{}",
            block.guide,
            block.line,
            block.bind.as_deref().unwrap_or("-"),
            block.script,
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(!hung, "the block hung for {BLOCK_DEADLINE:?}: {context}");
        assert!(out.status.success(), "the block failed: {context}");
        for expected in &block.prints {
            assert!(
                printed.contains(expected.as_str()),
                "{expected:?} not printed: {context}"
            );
        }
        server.stop();
    }
}
