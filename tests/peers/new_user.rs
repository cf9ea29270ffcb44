//! A new user on a fresh clone: the README's first two commands, as written.
//!
//! What only this test shows: a fresh clone builds and runs the demo (the README's first
//! command, a release build), and the README's test command installs what it needs and
//! starts the suite. It does not run the whole suite again: `.ci/run` already runs it on
//! a fresh clone; here the test command runs one quick group of tests. Slow all the same
//! (the release build), so it is ignored by `cargo test` and run by `.ci/run` with
//! `cargo test --release --test peers new_user -- --ignored`.
//!
//! CI runs on a fresh clone, built in release by the README's test command: `.ci/run`
//! names that checkout in `UNS_FRESH_CLONE` when it is as clean as a clone, and the
//! commands below run there as written and find their build done. Without the variable
//! the test clones and builds on its own.

use std::path::Path;
use std::process::Command;

fn readme_commands(readme: &str) -> Vec<String> {
    let mut commands = Vec::new();
    let mut in_block = false;
    for line in readme.lines() {
        match line.trim() {
            "```sh" => in_block = true,
            "```" => in_block = false,
            command if in_block && !command.is_empty() => commands.push(command.to_string()),
            _ => {}
        }
    }
    commands
}

fn run(command: &str, dir: &Path, target: &Path) -> (bool, String) {
    let out = crate::support::launch_as_user("bash")
        .arg("-c")
        .arg(command)
        .current_dir(dir)
        .env("CARGO_TARGET_DIR", target)
        .output()
        .expect("bash");
    (
        out.status.success(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

#[test]
#[ignore = "slow: run by .ci/run"]
fn the_readme_works_on_a_fresh_clone() {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    let readme = std::fs::read_to_string(repo.join("README.md")).expect("README");
    let commands = readme_commands(&readme);
    assert_eq!(
        &commands[..2],
        ["cargo run --release -- demo", "./test"],
        "the README's first two commands"
    );
    let ci = std::fs::read_to_string(repo.join(".ci/run")).expect(".ci/run");
    assert!(
        ci.lines().any(|l| {
            let l = l.trim();
            l == commands[1] || l.starts_with(&format!("{} ", commands[1]))
        }),
        ".ci/run runs the README's test command"
    );

    let dir = tempfile::tempdir().expect("dir");
    let prepared = std::env::var_os("UNS_FRESH_CLONE").is_some();
    let clone = match std::env::var_os("UNS_FRESH_CLONE") {
        Some(prepared) => {
            let clone = std::path::PathBuf::from(prepared);
            let status = Command::new("git")
                .args(["status", "--porcelain", "--untracked-files=all"])
                .current_dir(&clone)
                .output()
                .expect("git status");
            assert!(
                status.status.success() && status.stdout.is_empty(),
                "UNS_FRESH_CLONE is a clean clone: {}",
                String::from_utf8_lossy(&status.stdout)
            );
            let head = |dir: &Path| {
                let out = Command::new("git")
                    .args(["rev-parse", "HEAD"])
                    .current_dir(dir)
                    .output()
                    .expect("git rev-parse");
                String::from_utf8_lossy(&out.stdout).trim().to_string()
            };
            assert_eq!(
                head(&clone),
                head(repo),
                "UNS_FRESH_CLONE is of this commit"
            );
            clone
        }
        None => {
            let clone = dir.path().join("unsctl");
            let status = Command::new("git")
                .args(["clone", "--quiet", "--no-hardlinks"])
                .arg(repo)
                .arg(&clone)
                .status()
                .expect("git clone");
            assert!(status.success());
            clone
        }
    };
    // Share the build cache, as a second checkout on the same machine would.
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| repo.join("target"));

    let (ok, output) = run(&commands[0], &clone, &target);
    assert!(ok, "{}:\n{output}", commands[0]);
    assert!(
        output.contains("5 entries: 1 RESOLVE, 2 VERIFY, 2 REPLAY"),
        "{output}"
    );
    assert!(output.contains("demo --keep"), "{output}");
    // The suite's release build is the demo's: a dependency whose features differ
    // between the two (a dev-dependency turning on more of a crate the library uses)
    // would rebuild the library here, minutes of CI for nothing.
    if prepared {
        let compiled: Vec<&str> = output
            .lines()
            .filter(|l| l.trim_start().starts_with("Compiling "))
            .collect();
        assert!(
            compiled.is_empty(),
            "the demo found the suite's build done, yet compiled: {compiled:?}"
        );
    }

    // The test command as written, narrowed by its own arguments (they go to `cargo
    // test`) to one quick group: it installs what is missing, builds and starts the suite.
    let quick = format!("{} {QUICK_GROUP}", commands[1]);
    let (ok, output) = run(&quick, &clone, &target);
    assert!(ok, "{quick}:\n{output}");
    let passed = output
        .lines()
        .filter(|l| l.starts_with("test result: ok."))
        .filter_map(|l| l.split(' ').nth(3)?.parse::<u32>().ok())
        .sum::<u32>();
    assert!(passed >= 5, "the group ran: {output}");
    assert!(!output.contains("FAILED"), "{output}");
}

/// The tests the new user's test command runs: the engine's transitions, over real
/// store files, in a few seconds (the test command builds in release, as the demo does).
const QUICK_GROUP: &str = "--test runtime engine::";
