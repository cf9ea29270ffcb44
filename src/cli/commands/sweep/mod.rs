//! `unsctl sweep`: random fault schedules through the real runtime, triage checked
//! against what the providers really accepted, and (with `--remediate`) every next step
//! and every operator mistake checked against it too.

mod operators;

use crate::cli::backend::Invocation;
use crate::cli::error::{CliError, CliResult};
use crate::db::Place;
use crate::lab::sweep;
use crate::render::output::{Output, View, print, status};
use anyhow::Context;

/// Run random fault schedules and count unsafe verdicts (must be zero)
///
/// Runs on a scratch store of its own, or on the empty PostgreSQL database `--db` itself
/// names; never on a store with notifications in it (its worker would take them).
///
/// Example: unsctl sweep --schedules 1000 --seed 7
#[derive(Debug, clap::Args)]
pub struct Args {
    /// How many schedules (one notification each), at most 100,000
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub schedules: u32,
    /// The seed (printed, so a run can be repeated exactly; default: random)
    #[arg(long)]
    pub seed: Option<u64>,
    /// Worker threads, at most 256
    #[arg(long, default_value_t = 48, value_parser = clap::value_parser!(u16).range(1..=256))]
    pub concurrency: u16,
    /// Go on past triage: run every next step as printed, make every operator mistake,
    /// run the worker again, and count duplicates and drops the actions caused
    #[arg(long)]
    pub remediate: bool,
    /// Ask the fakes' records about every VERIFY entry (as `unsctl verify` does), record
    /// the answers, check each against the ledger, and judge again
    #[arg(long)]
    pub verify: bool,
}

/// `sweep -o json`: the triage counts, plus what remediation caused when it ran.
#[derive(serde::Serialize)]
struct Report<'a> {
    #[serde(flatten)]
    counts: &'a sweep::Counts,
    remediated: bool,
    duplicates_caused: Option<usize>,
    drops_caused: Option<usize>,
    refusals: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    remediation: Option<&'a operators::Remediation>,
    #[serde(skip_serializing_if = "Option::is_none")]
    verify_before: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    verify_after: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    verification: Option<&'a sweep::Verification>,
    /// Seconds the sweep took, for a person.
    #[serde(skip)]
    took: f64,
}

impl View for Report<'_> {
    fn show(&self, _: &Output) -> std::io::Result<()> {
        print(&counts_text(self.counts, self.took))?;
        if let Some(v) = self.verification {
            print_verification(v, self.counts)?;
        }
        if let Some(r) = self.remediation {
            print(&remediation_text(r))?;
        }
        for failure in &self.counts.failures {
            status(&format!("unsafe: {failure}"));
        }
        for failure in self.remediation.iter().flat_map(|r| &r.failures) {
            status(&format!("remediation: {failure}"));
        }
        Ok(())
    }
}

pub fn run(global: &Invocation, args: Args) -> CliResult {
    let seed = args.seed.unwrap_or_else(rand::random);
    let dir = tempfile::tempdir().context("cannot make the sweep's temporary store")?;
    status(&format!(
        "sweep: {} schedules, seed {seed} (repeat with --seed {seed})",
        args.schedules
    ));
    let started = std::time::Instant::now();
    // Its own file, unless --db itself names an empty PostgreSQL database to sweep on:
    // never a store the environment or a context names, which is the one being worked
    // on (the library refuses any store with notifications in it as well).
    let named = global
        .db
        .clone()
        .filter(|db| db.to_str().is_some_and(crate::db::pg::is_url))
        .map(crate::cli::backend::db_backend);
    let place = match named {
        Some(crate::store::place::Backend::Postgres(target)) => Place::Postgres(target),
        _ => Place::File(dir.path().join("sweep.db")),
    };
    let run = sweep::Sweep::run(
        &place,
        args.schedules as usize,
        seed,
        usize::from(args.concurrency),
    )
    .map_err(crate::cli::error::lab_failure)?;
    let counts = run
        .judge()
        .map_err(|err| CliError::error(err.to_string()))?;
    let verification = if args.verify {
        Some(
            run.verify(&counts)
                .map_err(|err| CliError::error(err.to_string()))?,
        )
    } else {
        None
    };
    let remediation = if args.remediate {
        let binary = std::env::current_exe()?;
        Some(operators::run(&run, &binary, dir.path()).map_err(CliError::error)?)
    } else {
        None
    };
    global.output().emit(&Report {
        counts: &counts,
        remediated: remediation.is_some(),
        duplicates_caused: remediation.as_ref().map(|r| r.duplicates_caused),
        drops_caused: remediation.as_ref().map(|r| r.drops_caused),
        refusals: remediation.as_ref().map(|r| r.refusals),
        remediation: remediation.as_ref(),
        verify_before: verification.as_ref().map(|v| v.verify_before),
        verify_after: verification.as_ref().map(|v| v.verify_after),
        verification: verification.as_ref(),
        took: started.elapsed().as_secs_f64(),
    })?;
    if verification.as_ref().is_some_and(|v| !v.safe()) {
        return Err(CliError::error(format!(
            "verify gave an answer the ledger contradicts, or left an unsafe verdict, with seed {seed}"
        )));
    }
    if remediation.as_ref().is_some_and(|r| !r.safe()) {
        return Err(CliError::error(format!(
            "remediation caused duplicates or drops, or a mistake acted, with seed {seed}"
        )));
    }
    if counts.safe() {
        Ok(())
    } else {
        Err(CliError::error(format!(
            "unsafe verdicts found with seed {seed}"
        )))
    }
}

/// "3 DUPLICATED, 10 ONCE".
fn classes(counts: &std::collections::BTreeMap<crate::reconcile::Class, usize>) -> String {
    counts
        .iter()
        .map(|(class, n)| format!("{n} {class}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The sweep's counts, as the table prints them.
fn counts_text(counts: &sweep::Counts, seconds: f64) -> String {
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
            "reconcile            {} duplicated channels in the ledger; missed {}, false {}, false MISSING {}   (must be 0)",
            counts.duplicates_in_ledger,
            counts.duplicates_missed,
            counts.duplicates_false,
            counts.missing_false
        ),
        format!("  with records       {}", classes(&counts.reconciled)),
        format!(
            "  history alone      {}",
            classes(&counts.reconciled_history_only)
        ),
        format!("time                 {:.1} s", seconds),
    ];
    lines.join("\n")
}

/// What `--verify` found, and why it could not tell where it could not.
fn print_verification(v: &sweep::Verification, counts: &sweep::Counts) -> std::io::Result<()> {
    let share = |n: usize| {
        if counts.dead_lettered == 0 {
            0.0
        } else {
            100.0 * n as f64 / counts.dead_lettered as f64
        }
    };
    let answer = |o| v.answers.get(&o).copied().unwrap_or(0);
    let lines = [
        format!(
            "verify answers       {} DELIVERED, {} NOT_DELIVERED, {} CANNOT_TELL",
            answer(crate::verify::Delivery::Delivered),
            answer(crate::verify::Delivery::NotDelivered),
            answer(crate::verify::Delivery::CannotTell)
        ),
        format!("  wrong by ledger    {}   (must be 0)", v.wrong_answers),
        format!("  recorded           {} VERIFIED events", v.recorded),
        format!(
            "VERIFY before        {} ({:.1}% of dead letters)",
            v.verify_before,
            share(v.verify_before)
        ),
        format!(
            "VERIFY after         {} ({:.1}%)",
            v.verify_after,
            share(v.verify_after)
        ),
        format!(
            "unsafe after         {} RESOLVE, {} REPLAY   (must be 0)",
            v.after.unsafe_resolve, v.after.unsafe_replay
        ),
    ];
    print(&lines.join("\n"))?;
    for failure in &v.failures {
        status(&format!("verify: {failure}"));
    }
    for why in &v.cannot_tell {
        status(&format!("cannot tell: {why}"));
    }
    Ok(())
}

/// What `--remediate` did and caused.
fn remediation_text(r: &operators::Remediation) -> String {
    let lines = [
        format!(
            "next steps run       {} ({} failed)",
            r.next_steps, r.next_steps_failed
        ),
        format!("  resolved           {}", r.resolved),
        format!(
            "  replayed           {} ({} then delivered)",
            r.replayed, r.replays_delivered
        ),
        format!("mistakes tried       {}", r.careless_attempts),
        format!("  refused            {}", r.refusals),
        format!("  acted anyway       {}   (must be 0)", r.careless_acted),
        format!("duplicates caused    {}   (must be 0)", r.duplicates_caused),
        format!("drops caused         {}   (must be 0)", r.drops_caused),
    ];
    lines.join("\n")
}
