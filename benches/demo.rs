//! How long `unsctl demo` takes, start to finish, on a fresh directory (target < 15 s).
//!
//! cargo bench --bench demo

use std::process::Command;
use std::time::{Duration, Instant};

const RUNS: usize = 3;

fn main() -> anyhow::Result<()> {
    let mut times = Vec::new();
    for _ in 0..RUNS {
        let dir = tempfile::tempdir()?;
        let started = Instant::now();
        let out = Command::new(env!("CARGO_BIN_EXE_unsctl"))
            .arg("demo")
            .env("TMPDIR", dir.path())
            .current_dir(dir.path())
            .output()?;
        let elapsed = started.elapsed();
        anyhow::ensure!(
            out.status.success(),
            "demo failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        times.push(elapsed);
    }
    times.sort();
    let median = times[RUNS / 2];
    println!(
        "demo: {RUNS} runs, median {:.2} s (min {:.2} s, max {:.2} s)   (target < 15 s)",
        median.as_secs_f64(),
        times[0].as_secs_f64(),
        times[RUNS - 1].as_secs_f64()
    );
    anyhow::ensure!(median < Duration::from_secs(15), "the demo took {median:?}");
    Ok(())
}
