//! `unsctl sweep --remediate`: the sweep goes on past triage. One operator runs each
//! printed next step exactly as printed; a careless one makes every mistake the
//! guardrails exist for (odd spellings, duplicates, foreign channels, force without a
//! reason, resolving over a failed channel, edited and stale plans, stray answers in the
//! interactive walk), through the real binary on both backends and straight at the API.
//! Then the worker runs again and the fakes' ledger says what the actions caused.

use crate::cli::args::AuditArgs;
use crate::cli::guided::{self, Scripted};
use crate::cli::selection;
use crate::lab::sweep::Sweep;
use crate::model::{Channel, ChannelSet, Kind};
use crate::render::output::{ColorChoice, Format, Output};
use crate::runtime::queries;
use crate::server::{self, Keys, ServerConfig};
use crate::session::outcome::Outcome;
use crate::store::direct::DirectStore;
use crate::triage::{Branch, ChannelState, Verdict};
use serde::Serialize;
use serde_json::Value;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The key of the API the sweep serves its store on.
const KEY: &str = "sweep-key-0123456789abcdef";

/// What the two operators did, and what it caused.
#[derive(Debug, Default, Clone, Serialize)]
pub struct Remediation {
    /// Next steps run as printed, and how many did not exit 0.
    pub next_steps: usize,
    pub next_steps_failed: usize,
    pub resolved: usize,
    pub replayed: usize,
    /// Replayed rows the worker then delivered.
    pub replays_delivered: usize,
    /// Mistakes tried, and how many of them acted anyway.
    pub careless_attempts: usize,
    pub careless_acted: usize,
    /// Mistakes refused (by a guardrail, a usage error, a stale check, or no confirmation).
    pub refusals: usize,
    /// Copies a provider accepted beyond the first, caused by an unforced action. Must be 0.
    pub duplicates_caused: usize,
    /// Unforced resolves of a notification some provider never accepted. Must be 0.
    pub drops_caused: usize,
    /// The first few surprises, to debug from.
    pub failures: Vec<String>,
}

impl Remediation {
    pub fn safe(&self) -> bool {
        self.duplicates_caused == 0 && self.drops_caused == 0 && self.careless_acted == 0
    }

    fn fail(&mut self, failure: String) {
        if self.failures.len() < 20 {
            self.failures.push(failure);
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Backend {
    Sqlite,
    Http,
}

struct Operator<'a> {
    binary: &'a Path,
    /// `--db`'s value: the sweep's file, or its database's URL.
    db: std::ffi::OsString,
    api: String,
}

/// One command line and the exit code it must end with.
#[derive(Clone)]
struct Step {
    backend: Backend,
    args: Vec<String>,
    expect: i32,
}

/// An exit code and what went to stdout.
type Ran = std::io::Result<(i32, Vec<u8>)>;

impl Operator<'_> {
    fn run(&self, backend: Backend, args: &[String]) -> Ran {
        let mut command = Command::new(self.binary);
        for name in [
            "UNS_DB_FILE",
            "UNS_BASE_URL",
            "UNS_API_KEY",
            "UNS_CONTEXT",
            "NO_COLOR",
        ] {
            command.env_remove(name);
        }
        match backend {
            Backend::Sqlite => command.arg("--db").arg(&self.db),
            Backend::Http => command.args(["--api", &self.api]).env("UNS_API_KEY", KEY),
        };
        let out = command
            .args(args)
            .env("UNS_OPERATOR", "sweep-operator")
            .stdin(Stdio::null())
            .stderr(Stdio::null())
            .output()?;
        Ok((out.status.code().unwrap_or(-1), out.stdout))
    }

    fn api(&self, method: &str, path: &str, body: &str) -> Option<u16> {
        let client = reqwest::blocking::Client::new();
        let url = format!("{}{path}", self.api);
        let request = match method {
            "DELETE" => client.delete(url),
            _ => client.post(url),
        };
        request
            .bearer_auth(KEY)
            .header("content-type", "application/json")
            .body(body.to_string())
            .send()
            .ok()
            .map(|r| r.status().as_u16())
    }
}

fn args(list: &[&str]) -> Vec<String> {
    list.iter().map(|a| a.to_string()).collect()
}

/// A spelling of `channel` a careless operator might type.
fn odd(channel: Channel, n: usize) -> String {
    let lower = channel.as_str().to_ascii_lowercase();
    match n % 3 {
        0 => format!(" {lower}"),
        1 => format!("{}\t", channel.as_str()),
        _ => format!("{lower} "),
    }
}

/// The mistakes to try on one entry, with the exit code each must end in.
fn mistakes(verdict: &Verdict, has: &ChannelSet, n: usize) -> Vec<Step> {
    let id = verdict.id.as_str();
    // Each mistake on one backend and its twin on the other, in turns.
    let (backend, other) = match n.is_multiple_of(2) {
        true => (Backend::Sqlite, Backend::Http),
        false => (Backend::Http, Backend::Sqlite),
    };
    let mut list = Vec::new();
    let mut add = |backend, words: Vec<String>, expect| {
        let mut words = words;
        words.extend(args(&["--confirm", "--yes"]));
        list.push(Step {
            backend,
            args: words,
            expect,
        });
    };
    let delivered = verdict.in_state(ChannelState::Delivered);
    for (k, channel) in delivered.iter().enumerate() {
        let spelled = odd(channel, n + k);
        add(
            backend,
            vec![
                "replay".into(),
                id.into(),
                "--channels".into(),
                spelled.clone(),
            ],
            4,
        );
        add(
            other,
            vec![
                "replay".into(),
                id.into(),
                "--channels".into(),
                format!("{spelled},{spelled}"),
            ],
            4,
        );
    }
    if let Some(foreign) = Channel::ALL.into_iter().find(|c| !has.contains(*c)) {
        add(
            backend,
            args(&["replay", id, "--channels", foreign.as_str()]),
            4,
        );
    }
    add(other, args(&["replay", id, "--channels", "fax"]), 2);
    add(backend, args(&["replay", id, "--force"]), 4);
    add(
        other,
        args(&["dlq", "resolve", id, "--force", "--reason", " "]),
        4,
    );
    if verdict.branch != Branch::Resolve {
        add(backend, args(&["dlq", "resolve", id]), 4);
    }
    if !verdict.unsent().is_empty() {
        add(
            other,
            args(&["dlq", "resolve", id, "--verified-delivered"]),
            4,
        );
    }
    match verdict.branch {
        Branch::Resolve | Branch::Verify => add(backend, args(&["replay", id]), 4),
        Branch::Replay => {}
    }
    if verdict.branch == Branch::Verify && !verdict.in_state(ChannelState::Uncertain).is_empty() {
        let all = has.joined(",");
        add(
            other,
            args(&["replay", id, "--channels", &all, "--verified-delivered"]),
            4,
        );
    }
    list
}

/// The same mistakes, straight at the API: (method, route, body, status).
fn api_mistakes(verdict: &Verdict, has: &ChannelSet) -> Vec<(&'static str, String, String, u16)> {
    let id = &verdict.id;
    let replay = format!("/api/v1/runtime/notifications/{id}/replay");
    let resolve = format!("/api/v1/dlq/{id}");
    let mut list = vec![
        ("POST", replay.clone(), "[]".to_string(), 400),
        (
            "POST",
            replay.clone(),
            r#"{"channels": ["FAX"]}"#.to_string(),
            400,
        ),
    ];
    for channel in verdict.in_state(ChannelState::Delivered).iter() {
        let lower = channel.as_str().to_ascii_lowercase();
        list.push((
            "POST",
            replay.clone(),
            format!(r#"{{"channels": [" {lower}"]}}"#),
            422,
        ));
        list.push((
            "POST",
            replay.clone(),
            format!(r#"{{"force": true, "channels": ["{channel}"]}}"#),
            422,
        ));
    }
    if let Some(foreign) = Channel::ALL.into_iter().find(|c| !has.contains(*c)) {
        list.push((
            "POST",
            replay.clone(),
            format!(r#"{{"channels": ["{foreign}"]}}"#),
            422,
        ));
    }
    if verdict.branch != Branch::Resolve {
        list.push((
            "DELETE",
            resolve,
            r#"{"triage": {"branch": "RESOLVE", "channels": []}}"#.to_string(),
            422,
        ));
    }
    list
}

/// Stray answers for the interactive walk, entry by entry; none of them may act.
fn stray_script(entries: usize) -> Vec<String> {
    let scripts: [&[&str]; 4] = [
        &["j", "k", " y"],
        &["replay", "y"],
        &["resolve", "it arrived, I think", "yes please"],
        &["2", "sure"],
    ];
    (0..entries)
        .flat_map(|n| scripts[n % scripts.len()].iter().map(|a| a.to_string()))
        .collect()
}

/// A copy of the plan with every action turned into the wrong one, and one entry that
/// has lost its last_event_id.
fn edited(plan: &Value) -> Value {
    let mut plan = plan.clone();
    if let Some(entries) = plan["entries"].as_array_mut() {
        for (n, entry) in entries.iter_mut().enumerate() {
            let wrong = match entry["branch"].as_str() {
                Some("RESOLVE") => "replay",
                Some("REPLAY") => "resolve",
                _ => "replay",
            };
            entry["action"] = wrong.into();
            if n == 0 {
                entry["last_event_id"] = Value::Null;
                entry["action"] = match entry["branch"].as_str() {
                    Some("RESOLVE") => "resolve",
                    _ => "replay",
                }
                .into();
            }
        }
    }
    plan
}

fn write_plan(dir: &Path, name: &str, plan: &Value) -> std::io::Result<PathBuf> {
    let path = dir.join(name);
    std::fs::write(&path, plan.to_string())?;
    Ok(path)
}

/// Plays both operators over the sweep's dead letters, runs the worker again, and
/// counts what their actions caused according to the providers' own ledger.
pub fn run(sweep: &Sweep, binary: &Path, work: &Path) -> Result<Remediation, String> {
    crate::runtime::adapters::init_tls();
    let server = server::start(ServerConfig::api_only(
        sweep.db.clone(),
        Some(Keys::single(KEY).map_err(|e| e.to_string())?),
    ))
    .map_err(|err| err.to_string())?;
    let operator = Operator {
        binary,
        db: sweep.db.argument(),
        api: format!("http://{}", server.addr),
    };
    let mut report = Remediation::default();
    let store = DirectStore::open(&sweep.db, true).map_err(|e| e.to_string())?;
    let verdicts =
        selection::verdicts(&store, &Default::default(), &|_| true, None).map_err(|e| e.message)?;
    let row_channels: HashMap<String, ChannelSet> = verdicts
        .iter()
        .filter_map(|v| {
            let row = queries::read_notification(&sweep.conn.db(), &v.id).ok()??;
            Some((v.id.clone(), row.channel_set().ok()?))
        })
        .collect();
    let (code, plan) = operator
        .run(Backend::Sqlite, &args(&["dlq", "triage", "-o", "json"]))
        .map_err(|e| e.to_string())?;
    let plan: Value =
        serde_json::from_slice(&plan).map_err(|e| format!("triage plan ({code}): {e}"))?;

    careless_commands(&operator, &verdicts, &row_channels, &mut report);
    careless_api(&operator, &verdicts, &row_channels, &mut report);
    // An edited plan: every action the wrong one, one entry without its last_event_id.
    let edited = write_plan(work, "edited.json", &edited(&plan)).map_err(|e| e.to_string())?;
    careless_plan(&operator, &edited, &mut report)?;
    stray_walk(&store, &verdicts, &mut report)?;

    // The careful operator fixed the cause (branch 3 of the runbook): the providers now
    // answer at once, so a duplicate from here on can only come from a remediation.
    sweep.fakes.control.clear_scripts();
    // Then runs each printed next step, as printed.
    let before = sweep.accepted();
    careful_next_steps(&operator, &verdicts, &mut report);
    // The plan made before anyone acted is stale now: nothing in it may act.
    let stale = write_plan(work, "stale.json", &plan).map_err(|e| e.to_string())?;
    careless_plan(&operator, &stale, &mut report)?;
    server.stop();

    sweep.run_replays().map_err(|e| e.to_string())?;
    count_effects(sweep, &verdicts, &before, &mut report)?;
    Ok(report)
}

/// The careless operator, before anyone has acted: each mistake of `mistakes` through the
/// binary, two at a time, each of which must be refused with its exit code.
fn careless_commands(
    operator: &Operator,
    verdicts: &[Verdict],
    row_channels: &HashMap<String, ChannelSet>,
    report: &mut Remediation,
) {
    let attempts: Vec<(String, Step)> = verdicts
        .iter()
        .enumerate()
        .flat_map(|(n, verdict)| {
            let has = row_channels.get(&verdict.id).cloned().unwrap_or_default();
            mistakes(verdict, &has, n)
                .into_iter()
                .map(|a| (verdict.id.clone(), a))
                .collect::<Vec<_>>()
        })
        .collect();
    // Two at a time: the entries are independent, and the machine has two cores.
    let results: Vec<(String, Step, Ran)> = std::thread::scope(|scope| {
        let half = attempts.len().div_ceil(2).max(1);
        let operator = &operator;
        let handles: Vec<_> = attempts
            .chunks(half)
            .map(|chunk| {
                scope.spawn(move || {
                    chunk
                        .iter()
                        .map(|(id, a)| (id.clone(), a.clone(), operator.run(a.backend, &a.args)))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap_or_default())
            .collect()
    });
    for (id, attempt, result) in results {
        report.careless_attempts += 1;
        match result {
            Ok((0, _)) => {
                report.careless_acted += 1;
                report.fail(format!(
                    "{id}: {:?} {} acted",
                    attempt.backend,
                    attempt.args.join(" ")
                ));
            }
            Ok((code, _)) => {
                report.refusals += 1;
                if code != attempt.expect {
                    report.fail(format!(
                        "{id}: {:?} {} exited {code}, expected {}",
                        attempt.backend,
                        attempt.args.join(" "),
                        attempt.expect
                    ));
                }
            }
            Err(err) => report.fail(format!("{id}: cannot run unsctl: {err}")),
        }
    }
}

/// The same mistakes straight at the API, each refused with its status.
fn careless_api(
    operator: &Operator,
    verdicts: &[Verdict],
    row_channels: &HashMap<String, ChannelSet>,
    report: &mut Remediation,
) {
    for verdict in verdicts {
        let has = row_channels.get(&verdict.id).cloned().unwrap_or_default();
        for (method, route, body, status) in api_mistakes(verdict, &has) {
            report.careless_attempts += 1;
            match operator.api(method, &route, &body) {
                Some(code) if (200..300).contains(&code) => {
                    report.careless_acted += 1;
                    report.fail(format!("API {method} {route} {body} acted"));
                }
                Some(code) => {
                    report.refusals += 1;
                    if code != status {
                        report.fail(format!(
                            "API {method} {route} {body}: {code}, expected {status}"
                        ));
                    }
                }
                None => report.fail(format!("API {method} {route}: no answer")),
            }
        }
    }
}

/// Stray answers in the interactive walk, through the walk's own code: none may act.
fn stray_walk(
    store: &DirectStore,
    verdicts: &[Verdict],
    report: &mut Remediation,
) -> Result<(), String> {
    let mut stray = Scripted::new(stray_script(verdicts.len()));
    let quiet = Output::new(Format::Table, ColorChoice::Never);
    let walked = guided::walk(
        store,
        verdicts.to_vec(),
        &AuditArgs::default(),
        &crate::identity::operator(None, None),
        &crate::verify::Sources::default(),
        &mut stray,
        &quiet,
    )
    .map_err(|e| e.message)?;
    for decision in walked {
        report.careless_attempts += 1;
        match decision.outcome {
            Outcome::Done { .. } => {
                report.careless_acted += 1;
                report.fail(format!("{}: stray interactive input acted", decision.id));
            }
            _ => report.refusals += 1,
        }
    }
    Ok(())
}

/// The careful operator runs each printed next step as printed (every third replay with
/// its channels spelt sloppily), half of them over the API.
fn careful_next_steps(operator: &Operator, verdicts: &[Verdict], report: &mut Remediation) {
    for (n, verdict) in verdicts.iter().enumerate() {
        if verdict.branch == Branch::Verify {
            continue;
        }
        // The command of the step; a reason it leaves for the operator to write is theirs.
        let command = verdict
            .next_step
            .command_text()
            .replace("--reason 'what was fixed'", "--reason fixed");
        // Read as the shell a person pastes it into would read it.
        let mut words: Vec<String> = shlex::split(&command)
            .unwrap_or_default()
            .into_iter()
            .skip(1)
            .collect();
        // Every third replay names its channels sloppily: any case, padded, twice.
        if verdict.branch == Branch::Replay
            && n.is_multiple_of(3)
            && let Some(at) = words.iter().position(|w| w == "--channels")
            && let Some(list) = words.get_mut(at + 1)
        {
            *list = list
                .split(',')
                .flat_map(|c| [format!(" {}", c.to_ascii_lowercase()), c.to_string()])
                .collect::<Vec<_>>()
                .join(",");
        }
        words.push("--yes".into());
        let backend = if n.is_multiple_of(2) {
            Backend::Http
        } else {
            Backend::Sqlite
        };
        report.next_steps += 1;
        match operator.run(backend, &words) {
            Ok((0, _)) => match verdict.branch {
                Branch::Resolve => report.resolved += 1,
                _ => report.replayed += 1,
            },
            Ok((code, _)) => {
                report.next_steps_failed += 1;
                report.fail(format!(
                    "{}: `{}` exited {code}",
                    verdict.id, verdict.next_step
                ));
            }
            Err(err) => report.fail(format!("cannot run unsctl: {err}")),
        }
    }
}

/// What the remediation caused, by the providers' own ledger: duplicates, messages
/// dropped by a resolve, and replays that were delivered.
fn count_effects(
    sweep: &Sweep,
    verdicts: &[Verdict],
    before: &HashMap<(String, Channel), usize>,
    report: &mut Remediation,
) -> Result<(), String> {
    let after = sweep.accepted();
    for ((id, channel), &count) in &after {
        let earlier = before.get(&(id.clone(), *channel)).copied().unwrap_or(0);
        let caused = count.saturating_sub(earlier.max(1));
        if count > earlier && caused > 0 {
            report.duplicates_caused += caused;
            report.fail(format!(
                "{id}: {channel} accepted {count} times, {earlier} before remediation"
            ));
        }
    }
    for verdict in verdicts {
        let row = queries::read_notification(&sweep.conn.db(), &verdict.id)
            .map_err(|e| e.to_string())?
            .ok_or_else(|| format!("{} vanished", verdict.id))?;
        let audits =
            queries::read_events(&sweep.conn.db(), &verdict.id).map_err(|e| e.to_string())?;
        let resolved_unforced = audits.iter().any(|e| {
            e.kind == Kind::DlqResolved && e.payload_value()["forced"] != Value::Bool(true)
        });
        let channels = row.channel_set().unwrap_or_default();
        if resolved_unforced
            && channels
                .iter()
                .any(|c| after.get(&(verdict.id.clone(), c)).copied().unwrap_or(0) == 0)
        {
            report.drops_caused += 1;
            report.fail(format!(
                "{}: resolved though a provider never accepted it",
                verdict.id
            ));
        }
        let replayed = audits.iter().any(|e| e.kind == Kind::Replayed);
        if replayed && row.status == crate::model::Status::Delivered {
            report.replays_delivered += 1;
        }
    }
    Ok(())
}

/// Applies a plan that must not act: every entry is refused or skipped as stale.
fn careless_plan(operator: &Operator, plan: &Path, report: &mut Remediation) -> Result<(), String> {
    let plan = plan.display().to_string();
    let (code, out) = operator
        .run(
            Backend::Sqlite,
            &args(&["apply", &plan, "--confirm", "--yes", "-o", "json"]),
        )
        .map_err(|e| e.to_string())?;
    let results: Value = serde_json::from_slice(&out).unwrap_or(Value::Null);
    let Some(results) = results["results"].as_array() else {
        if code != 0 {
            report.fail(format!("apply {plan}: exit {code} without results"));
        }
        return Ok(());
    };
    for result in results {
        report.careless_attempts += 1;
        if result["outcome"] == "done" {
            report.careless_acted += 1;
            report.fail(format!("apply {plan}: {} acted", result["id"]));
        } else {
            report.refusals += 1;
        }
    }
    Ok(())
}
