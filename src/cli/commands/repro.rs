//! `unsctl repro <scenario>` and `unsctl demo`: the runbook's cases, reproduced for real.

use crate::cli::backend::Invocation;
use crate::cli::error::{CliError, CliResult, lab_failure};
use crate::cli::selection::Listed;
use crate::lab::fakes::Fakes;
use crate::lab::repro::{self, Scenario, ScenarioReport};
use crate::model::command::word;
use crate::render::output::{Output, print, status, status_commands};
use crate::render::table::print_all;
use crate::render::views;
use crate::server::{self, Keys, ServerConfig};
use crate::store::direct::DirectStore;
use crate::triage::Verdict;
use anyhow::Context;
use std::path::{Path, PathBuf};

/// Reproduce a runbook case with the real worker, a 1 s lease and fault-injecting fakes
///
/// Example: unsctl repro lease-lost-delivered --db /tmp/uns.db
/// Example: unsctl repro all --keep-running
#[derive(Debug, clap::Args)]
#[command(verbatim_doc_comment)]
pub struct ReproArgs {
    /// Which case (or `all`)
    #[arg(value_parser = crate::cli::values::Listed::new(parse_scenarios, scenario_names))]
    pub scenario: ScenarioChoice,
    /// Then serve the API on loopback so the runbook's curl commands can be tried
    #[arg(long)]
    pub keep_running: bool,
}

#[derive(Debug, Clone)]
pub struct ScenarioChoice(pub Vec<Scenario>);

fn scenario_names() -> Vec<&'static str> {
    std::iter::once("all")
        .chain(Scenario::ALL.iter().map(|s| s.name()))
        .collect()
}

fn parse_scenarios(text: &str) -> Result<ScenarioChoice, String> {
    let text = text.trim().to_ascii_lowercase();
    if text == "all" {
        return Ok(ScenarioChoice(Scenario::ALL.to_vec()));
    }
    Scenario::ALL
        .iter()
        .find(|s| s.name() == text)
        .map(|s| ScenarioChoice(vec![*s]))
        .ok_or_else(|| {
            let names: Vec<&str> = Scenario::ALL.iter().map(|s| s.name()).collect();
            format!(
                "unknown scenario {text:?}: expected all, {}",
                names.join(", ")
            )
        })
}

/// Reproduce every runbook case in a temporary store and triage it
///
/// Example: unsctl demo
#[derive(Debug, clap::Args)]
pub struct DemoArgs {
    /// Keep the temporary store (and its relay log) to explore afterwards
    #[arg(long)]
    pub keep: bool,
}

/// Removes the demo's scratch folder when the demo ends, unless it is kept.
struct Scratch {
    dir: PathBuf,
    keep: bool,
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if !self.keep {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

/// How to run unsctl from here: `unsctl` when it is on the PATH, else this binary's path.
fn invocation() -> String {
    let on_path = std::env::var_os("PATH")
        .is_some_and(|path| std::env::split_paths(&path).any(|dir| dir.join("unsctl").is_file()));
    if on_path {
        return "unsctl".into();
    }
    // The path is this machine's, not unsctl's own words: quoted as one.
    std::env::current_exe()
        .ok()
        .and_then(|exe| word("the program's path", &exe.display().to_string()).ok())
        .unwrap_or_else(|| "unsctl".into())
}

/// `value` as one shell word, or a placeholder saying why it cannot be one.
fn shell(what: &str, value: &str) -> String {
    word(what, value).unwrap_or_else(|err| format!("<{err}>"))
}

fn scratch_store() -> CliResult<PathBuf> {
    let dir = std::env::temp_dir().join(format!(
        "unsctl-repro-{}-{}",
        std::process::id(),
        uuid::Uuid::new_v4().simple()
    ));
    std::fs::create_dir_all(&dir)?;
    Ok(dir.join("uns.db"))
}

fn reproduce(db: &Path, scenarios: &[Scenario]) -> CliResult<(Vec<ScenarioReport>, Fakes)> {
    let fakes = Fakes::start().context("cannot start the provider fakes")?;
    let binary = std::env::current_exe()?;
    let reports = repro::run(db, scenarios, Some(&binary), &fakes).map_err(lab_failure)?;
    Ok((reports, fakes))
}

fn verdicts(db: &Path) -> CliResult<Vec<Listed>> {
    let store = DirectStore::open_read_only(db)?;
    crate::cli::selection::listed(&store, &Default::default(), &|_| true, None)
}

fn report_text(reports: &[ScenarioReport], out: &Output) -> String {
    let mut lines = Vec::new();
    for report in reports {
        let scenario = report.scenario;
        lines.push(format!(
            "{} {}",
            out.bold(scenario.name()),
            out.dim(&report.notification_id)
        ));
        lines.push(format!("  what happened: {}", scenario.story()));
        let place = if report.dead_letter {
            "in the DLQ"
        } else {
            "not in the DLQ"
        };
        lines.push(format!("  row:           {} ({place})", report.status));
        if let Some(error) = &report.error_message {
            lines.push(format!("  error:         {error}"));
        }
        let copies: Vec<String> = ["EMAIL", "SLACK", "PAGERDUTY"]
            .iter()
            .filter_map(|channel| {
                let n = report
                    .ledger
                    .iter()
                    .filter(|a| a.channel.as_str() == *channel)
                    .count();
                (n > 0).then(|| {
                    format!(
                        "{channel} accepted {}",
                        crate::render::output::counted(n as i64, "copy")
                    )
                })
            })
            .collect();
        let ledger = if copies.is_empty() {
            "nothing accepted".to_string()
        } else {
            copies.join(", ")
        };
        lines.push(format!("  fakes' ledger: {ledger}"));
        lines.push(format!("  expected:      {}", scenario.expected()));
        let triage = match report.branch {
            Some(branch) => views::branch_text(branch, out),
            None => "(not in the DLQ: nothing to triage)".into(),
        };
        lines.push(format!("  triage:        {triage}"));
        for answer in &report.verify {
            lines.push(format!(
                "  verify:        {} attempt {}: {} ({}): {}",
                answer.channel,
                answer.attempt,
                answer.answer,
                answer.source,
                out.clean(&answer.evidence)
            ));
        }
        for item in &report.reconcile {
            lines.push(format!(
                "  reconcile:     {} {}, {}{}",
                item.channel,
                item.class,
                crate::render::output::counted(item.copies as i64, "copy"),
                reconcile_references(item, out)
            ));
        }
        lines.push(String::new());
    }
    // Each value wraps under itself, at word boundaries, never inside an id or a path.
    lines
        .iter()
        .flat_map(|line| {
            let hang = if line.starts_with("  ") && line.contains(": ") {
                LABEL_WIDTH
            } else {
                2
            };
            crate::render::output::wrapped(line, out, hang)
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Where the values of the story's labelled lines start ("  what happened: ").
const LABEL_WIDTH: usize = 17;

/// ": queue ids A, B" for the copies the providers' records name.
fn reconcile_references(item: &crate::reconcile::Reconciled, out: &Output) -> String {
    let named: Vec<String> = item
        .evidence
        .iter()
        .filter(|e| e.what == crate::reconcile::What::Copy)
        .filter_map(|e| {
            if !e.queue_ids.is_empty() {
                Some(format!("queue id {}", e.queue_ids.join(",")))
            } else if let Some(incident) = &e.incident {
                Some(format!("incident {incident}"))
            } else {
                e.message_ts.as_ref().map(|ts| format!("message ts {ts}"))
            }
        })
        .collect();
    if named.is_empty() {
        String::new()
    } else {
        format!(" ({})", out.clean(&named.join("; ")))
    }
}

/// `repro`/`demo -o json`: `{"scenarios", "store", "triage": {"entries", "summary"}}`.
#[derive(serde::Serialize)]
struct Reproduced<'a> {
    scenarios: &'a [ScenarioReport],
    store: &'a Path,
    triage: Triaged<'a>,
}

#[derive(serde::Serialize)]
struct Triaged<'a> {
    entries: &'a [Verdict],
    #[serde(skip)]
    listed: &'a [Listed],
    summary: std::collections::BTreeMap<crate::triage::Branch, usize>,
}

impl crate::render::output::View for Reproduced<'_> {
    const SORTED: bool = true;

    fn show(&self, out: &Output) -> std::io::Result<()> {
        print(&report_text(self.scenarios, out))?;
        triage_table(self.triage.listed, out)?;
        status(&summary_line(self.triage.entries));
        Ok(())
    }
}

fn print_reports(db: &Path, reports: &[ScenarioReport], out: &Output) -> CliResult<Vec<Verdict>> {
    let listed = verdicts(db)?;
    let verdicts: Vec<Verdict> = listed.iter().map(|l| l.verdict.clone()).collect();
    out.emit(&Reproduced {
        scenarios: reports,
        store: db,
        triage: Triaged {
            summary: crate::triage::summary(&verdicts),
            entries: &verdicts,
            listed: &listed,
        },
    })?;
    Ok(verdicts)
}

pub fn run_repro(global: &Invocation, args: ReproArgs) -> CliResult {
    let out = global.output();
    let db = match &global.db {
        Some(path) if path.to_str().is_some_and(crate::db::pg::is_url) => {
            return Err(CliError::usage(format!(
                "repro writes its cases into a SQLite file, not {}",
                crate::db::pg::shown(&path.to_string_lossy())
            ))
            .hint("to try them on PostgreSQL: `unsctl repro all --db FILE`, then `unsctl store copy --from FILE --to URL`"));
        }
        Some(path) => path.clone(),
        None => scratch_store()?,
    };
    status(&format!(
        "reproducing {} into {} ...",
        names(&args.scenario.0),
        db.display()
    ));
    let (reports, fakes) = reproduce(&db, &args.scenario.0)?;
    print_reports(&db, &reports, &out)?;
    status(&format!("store left at {}", db.display()));
    if args.keep_running {
        keep_running(global, &db, &fakes)?;
    }
    Ok(())
}

fn names(scenarios: &[Scenario]) -> String {
    scenarios
        .iter()
        .map(|s| s.name())
        .collect::<Vec<_>>()
        .join(", ")
}

/// Serves the reproduced store on loopback, with the fakes as providers, until Ctrl-C.
fn keep_running(global: &Invocation, db: &Path, fakes: &Fakes) -> CliResult {
    crate::cli::args::init_logging(global);
    let key = uuid::Uuid::new_v4().simple().to_string();
    let config = ServerConfig {
        db: db.into(),
        verify: repro::fake_sources(fakes, 1.0),
        listen: "127.0.0.1:0"
            .parse()
            .map_err(|_| CliError::error("bad listen address"))?,
        keys: Some(Keys::single(&key).map_err(|err| CliError::error(err.to_string()))?),
        worker: Some((
            repro::worker_config(4),
            repro::fake_adapters(fakes).map_err(lab_failure)?,
        )),
        default_max_attempts: 3,
        metrics: None,
        limits: crate::server::Limits::default(),
    };
    // Watched before it serves (see StopSignals): Ctrl-C (or SIGTERM) stops it as asked.
    let mut signals = crate::interrupt::StopSignals::watch()?;
    let server = server::start(config).map_err(|err| CliError::error(err.to_string()))?;
    status(&format!(
        "\nServing the API on http://{addr} (Ctrl-C to stop). In another shell:\n\n  export UNS_BASE_URL=http://{addr} UNS_API_KEY={key} UNS_DB_FILE={db}\n  curl -sS -H \"Authorization: Bearer $UNS_API_KEY\" \"$UNS_BASE_URL/api/v1/dlq\" | jq .\n  unsctl --api \"$UNS_BASE_URL\" dlq triage\n",
        addr = server.addr,
        db = db.display()
    ));
    let _ = signals.wait();
    server.stop();
    Ok(())
}

/// What to try next on the store the demo kept: each a label and the command.
fn kept_store_steps(
    unsctl: &str,
    db: &Path,
    maillog: &Path,
    verdicts: &[crate::triage::Verdict],
) -> Vec<(String, String)> {
    let example = |branch| {
        verdicts
            .iter()
            .find(|v: &&crate::triage::Verdict| v.branch == branch)
            .map(|v| v.id.clone())
    };
    let db_text = db.display().to_string();
    let mut next = Vec::new();
    next.push((
        "every command below reads this store".into(),
        format!("export UNS_DB_FILE={}", shell("the store's path", &db_text)),
    ));
    next.push(("the table above".into(), format!("{unsctl} dlq triage")));
    if let Some(id) = example(crate::triage::Branch::Verify) {
        next.push((
            "a VERIFY entry: what to look for".into(),
            format!("{unsctl} inspect {}", shell("the id", &id)),
        ));
        next.push((
            "ask the relay's log; add --record --confirm to write the answers down".into(),
            format!(
                "{unsctl} verify --relay-log {}",
                shell("the log's path", &maillog.display().to_string())
            ),
        ));
    }
    if let Some(id) = example(crate::triage::Branch::Resolve) {
        next.push((
            "dry run: what resolve would do".into(),
            format!("{unsctl} dlq resolve {}", shell("the id", &id)),
        ));
    }
    next.push((
        "the runbook's cross-notification query".into(),
        format!("{unsctl} events --kind LEASE_LOST"),
    ));
    next.push((
        "when done".into(),
        format!(
            "rm -r {}",
            shell(
                "the folder",
                &db.parent()
                    .map(|d| d.display().to_string())
                    .unwrap_or_default()
            )
        ),
    ));
    next
}

pub fn run_demo(global: &Invocation, args: DemoArgs) -> CliResult {
    let out = global.output();
    let started = std::time::Instant::now();
    let db = scratch_store()?;
    let _scratch = Scratch {
        dir: db.parent().map(Path::to_path_buf).unwrap_or_default(),
        keep: args.keep,
    };
    status(&format!(
        "Reproducing every runbook case with the real worker (1 s lease) against fault-injecting fakes\ninto {} ...\n",
        db.display()
    ));
    let (reports, fakes) = reproduce(&db, &Scenario::ALL)?;
    // The fakes go when the demo ends; their relay log stays next to the store.
    let maillog = db.with_file_name("maillog");
    std::fs::copy(&fakes.maillog, &maillog)?;
    drop(fakes);
    let verdicts = print_reports(&db, &reports, &out)?;
    if out.for_people() {
        let db_text = db.display().to_string();
        let unsctl = invocation();
        status(&format!(
            "\nDone in {:.1} s.",
            started.elapsed().as_secs_f64()
        ));
        if unsctl != "unsctl" {
            status(&format!(
                "unsctl is not on your PATH: `cargo install --path .` puts it there; below it is called as {unsctl}."
            ));
        }
        let mut next: Vec<(String, String)> = Vec::new();
        if !args.keep {
            status("The temporary store was removed. To explore it, keep it:");
            status_commands(&[(
                "the same, the store kept".into(),
                format!("{unsctl} demo --keep"),
            )]);
            status("Or try:");
        } else {
            status(&format!("The store is kept in {db_text}. Try next:"));
            next = kept_store_steps(&unsctl, &db, &maillog, &verdicts);
        }
        next.push((
            "the same, with the API up for curl".into(),
            format!("{unsctl} repro all --keep-running"),
        ));
        next.push(("the runbook".into(), format!("{unsctl} tsg show TSG-02")));
        status_commands(&next);
    }
    Ok(())
}

/// The triage table of a whole DLQ whose verdicts are all at hand (the demo's), laid out
/// as `dlq triage` lays out the incident's: on a terminal, ids cut to their unique
/// prefixes, which leaves room for the cause.
fn triage_table(listed: &[Listed], out: &Output) -> std::io::Result<()> {
    let mut sorted: Vec<&Listed> = listed.iter().collect();
    sorted.sort_by(|a, b| a.verdict.id.cmp(&b.verdict.id));
    let mut short = views::ShortIds::default();
    let rows = sorted
        .iter()
        .enumerate()
        .map(|(n, entry)| match out.fit_width() {
            Some(_) => {
                let following = sorted.get(n + 1).map(|l| l.verdict.id.as_str());
                entry.cells(&short.next(&entry.verdict.id, following))
            }
            None => entry.cells(&entry.verdict.id),
        })
        .collect();
    print_all(
        &crate::render::columns::columns(&crate::render::columns::dlq()),
        rows,
        out,
    )
}

/// How many entries each branch has, in one line.
fn summary_line(verdicts: &[Verdict]) -> String {
    views::summary_counts(&crate::triage::summary(verdicts))
}
