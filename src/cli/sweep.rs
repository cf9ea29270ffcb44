//! `unsctl sweep`: random fault schedules through the real runtime, triage checked
//! against what the providers really accepted.

use super::GlobalArgs;
use super::error::{CliError, CliResult};
use crate::render::output::{print, print_json, status};
use crate::sweep;

/// Run random fault schedules and count unsafe verdicts (must be zero)
///
/// Example: unsctl sweep --schedules 1000 --seed 7
#[derive(Debug, clap::Args)]
pub struct Args {
    /// How many schedules (one notification each)
    #[arg(long, default_value_t = 1000)]
    pub schedules: usize,
    /// The seed (printed, so a run can be repeated exactly; default: random)
    #[arg(long)]
    pub seed: Option<u64>,
    /// Worker threads
    #[arg(long, default_value_t = 48)]
    pub concurrency: usize,
}

pub fn run(global: &GlobalArgs, args: Args) -> CliResult {
    let seed = args.seed.unwrap_or_else(rand::random);
    let dir = tempfile::tempdir()?;
    status(&format!(
        "sweep: {} schedules, seed {seed} (repeat with --seed {seed})",
        args.schedules
    ));
    let started = std::time::Instant::now();
    let counts = sweep::run(
        &dir.path().join("sweep.db"),
        args.schedules,
        seed,
        args.concurrency.max(1),
    )
    .map_err(|err| CliError::error(err.to_string()))?;
    if global.output().json() {
        print_json(&counts)?;
    } else {
        let lines = [
            format!("schedules            {}", counts.schedules),
            format!("seed                 {}", counts.seed),
            format!("delivered            {}", counts.delivered),
            format!("dead-lettered        {}", counts.dead_lettered),
            format!("unfinished           {}", counts.unfinished),
            format!("  RESOLVE            {}", counts.resolve),
            format!(
                "  VERIFY             {} (truth: {} all accepted, {} none, {} some)",
                counts.verify,
                counts.verify_all_accepted,
                counts.verify_none_accepted,
                counts.verify_some_accepted
            ),
            format!("  REPLAY             {}", counts.replay),
            format!(
                "unsafe RESOLVE       {}   (must be 0)",
                counts.unsafe_resolve
            ),
            format!(
                "unsafe REPLAY        {}   (must be 0)",
                counts.unsafe_replay
            ),
            format!(
                "false DELIVERED      {}   (must be 0)",
                counts.false_delivered
            ),
            format!("duplicated (symptom) {}", counts.duplicated),
            format!(
                "time                 {:.1} s",
                started.elapsed().as_secs_f64()
            ),
        ];
        print(&lines.join("\n"))?;
        for failure in &counts.failures {
            status(&format!("unsafe: {failure}"));
        }
    }
    if counts.safe() {
        Ok(())
    } else {
        Err(CliError::error(format!(
            "unsafe verdicts found with seed {seed}"
        )))
    }
}
