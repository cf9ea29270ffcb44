//! `unsctl apply plan.json`: carry out a triage plan, skipping entries that moved since.

use super::act;
use super::args::{AuditArgs, ConfirmArgs};
use super::backend;
use super::backend::Invocation;
use super::error::{CliError, CliResult, ExitKind};
use crate::model::NotificationId;
use crate::remediation::{Action, Claim};
use crate::session::Intent;
use crate::session::outcome::{Blocked, Stale, Unplanned};
use crate::triage::PlanAction;
use anyhow::Context;
use std::io::Read;
use std::path::PathBuf;

/// The largest plan read, in bytes (a triage of about 300,000 entries).
pub const MAX_PLAN_BYTES: u64 = 256 << 20;

/// Apply a plan written by `unsctl dlq triage -o json` (dry run unless --confirm)
///
/// Each entry's `action` (resolve, replay or verify) is carried out; an entry whose
/// history moved since the plan was made is skipped as stale. A VERIFY entry is only
/// acted on once someone sets its action and adds an "attestation" to it. An entry with
/// no `last_event_id` cannot be checked against the store and is refused. A plan is read
/// up to 256 MiB (about 300,000 entries): past that, nothing is done. An entry whose id
/// is empty or longer than 256 bytes is refused; the others still run.
///
/// Example: unsctl dlq triage -o json > plan.json
/// Example: unsctl apply plan.json --confirm
/// Example: unsctl apply plan.json --confirm --wait
#[derive(Debug, clap::Args)]
#[command(verbatim_doc_comment)]
pub struct Args {
    /// The plan file (`-` for standard input)
    pub plan: PathBuf,
    #[command(flatten)]
    pub audit: AuditArgs,
    #[command(flatten)]
    pub confirm: ConfirmArgs,
    #[command(flatten)]
    pub pace: crate::cli::args::PaceArgs,
    #[command(flatten)]
    pub wait: crate::cli::args::WaitArgs,
}

#[derive(Debug, serde::Deserialize)]
struct Plan {
    entries: Vec<PlanEntry>,
    /// The store it was made on, in a plan of one context.
    #[serde(default)]
    store: Option<String>,
    /// Each context's store, in a plan made with `--all-contexts`.
    #[serde(default)]
    contexts: Vec<PlanContext>,
    /// What the triage that made the plan left out (`--exclude`, `--not-channel`,
    /// `--not-error`).
    #[serde(default)]
    excluded: Option<Excluded>,
}

/// A plan's `excluded`: the ids it leaves out, which no edit of its entries brings back.
#[derive(Debug, Default, serde::Deserialize, serde::Serialize)]
pub struct Excluded {
    #[serde(default)]
    pub ids: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_channel: Option<crate::model::Channel>,
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        deserialize_with = "one_or_many"
    )]
    pub not_error: Vec<String>,
}

/// A plan's `not_error`: a list, or one text as plans made before it could repeat.
fn one_or_many<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<Vec<String>, D::Error> {
    #[derive(serde::Deserialize)]
    #[serde(untagged)]
    enum Texts {
        One(String),
        Many(Vec<String>),
    }
    Ok(
        match <Option<Texts> as serde::Deserialize>::deserialize(deserializer)? {
            None => Vec::new(),
            Some(Texts::One(text)) => vec![text],
            Some(Texts::Many(texts)) => texts,
        },
    )
}

impl Excluded {
    /// Why `verdict`'s entry is one the plan's selection leaves out, if it is: a channel
    /// `--not-channel` names, an error message `--not-error` matches (any letter case).
    fn leaves_out(&self, verdict: &crate::triage::Verdict) -> Option<String> {
        if let Some(channel) = self.not_channel
            && verdict.channel(channel).is_some()
        {
            return Some(format!("--not-channel {channel}"));
        }
        let error = verdict
            .error_message
            .as_deref()
            .unwrap_or_default()
            .to_lowercase();
        self.not_error
            .iter()
            .find(|text| error.contains(&text.to_lowercase()))
            .map(|text| format!("--not-error {}", crate::render::sanitize::quoted(text)))
    }

    /// What `selection` leaves out, if anything.
    pub fn of(selection: &crate::store::Selection) -> Option<Self> {
        selection.excludes().then(|| Self {
            ids: selection.exclude.clone(),
            not_channel: selection.not_channel,
            not_error: selection.not_error.clone(),
        })
    }
}

#[derive(Debug, serde::Deserialize)]
struct PlanContext {
    context: String,
    #[serde(default)]
    store: Option<String>,
}

/// Refuses a plan made on another store than the one `store` is now: a context edited to
/// name a copy, a server moved to another file. Without an identity on either side
/// (an empty store, a plan from an older unsctl), nothing can be compared: a note says so.
fn same_store(store: &dyn crate::store::Store, planned: Option<&str>) -> CliResult {
    let Some(planned) = planned else {
        return Ok(());
    };
    match store.identity()? {
        Some(now) if now == planned => Ok(()),
        Some(now) => Err(CliError::new(
            ExitKind::Refused,
            format!(
                "this plan was made on another store (identity {}); {} is {now}",
                crate::render::sanitize::clean(planned),
                crate::render::sanitize::clean(&store.describe())
            ),
        )
        .hint("make the plan again against the store you mean: `unsctl dlq triage -o json > plan.json`")),
        None => {
            crate::render::output::status(&format!(
                "note: {} cannot say which store it is; the plan's entries are checked one by one",
                crate::render::sanitize::clean(&store.describe())
            ));
            Ok(())
        }
    }
}

/// What `apply` reads of a plan entry; everything else in it is for people.
#[derive(Debug, PartialEq, serde::Deserialize)]
struct PlanEntry {
    id: String,
    action: PlanAction,
    /// The newest event the plan was based on; the entry is stale if it moved.
    #[serde(default)]
    last_event_id: Option<serde_json::Value>,
    /// What the operator wrote down they checked (needed to act on a VERIFY entry).
    #[serde(default)]
    attestation: Option<String>,
    /// The context the entry was read from, in a plan made with `--all-contexts`.
    #[serde(default)]
    context: Option<String>,
}

/// Counts the bytes read, so a plan past the limit is told apart from a broken one.
struct Counted<R> {
    inner: R,
    read: u64,
}

impl<R: Read> Read for Counted<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.read += n as u64;
        Ok(n)
    }
}

fn read_plan(path: &PathBuf) -> CliResult<Plan> {
    let name = path.display().to_string();
    let source: Box<dyn Read> = if path.as_os_str() == "-" {
        Box::new(std::io::stdin())
    } else {
        let file =
            std::fs::File::open(path).with_context(|| format!("cannot open the plan {name}"))?;
        let meta = file
            .metadata()
            .with_context(|| format!("cannot read the plan {name}"))?;
        if meta.is_dir() {
            return Err(CliError::error(format!(
                "{name} is a directory, not a plan"
            )));
        }
        if meta.is_file() && meta.len() > MAX_PLAN_BYTES {
            return Err(too_large(&name));
        }
        Box::new(file)
    };
    parse_plan(source, MAX_PLAN_BYTES, &name)
}

/// Parses a plan from `source` as it streams in, reading at most `limit` bytes (a pipe
/// or a device has no size to check first).
fn parse_plan(source: impl Read, limit: u64, name: &str) -> CliResult<Plan> {
    let mut counted = Counted {
        inner: std::io::BufReader::new(source.take(limit + 1)),
        read: 0,
    };
    let parsed: Result<Plan, _> = serde_json::from_reader(&mut counted);
    match parsed {
        Ok(plan) => Ok(plan),
        Err(_) if counted.read > limit => Err(too_large(name)),
        Err(err) => Err(CliError::from(
            anyhow::Error::new(err).context(format!("{name}: not a triage plan")),
        )
        .hint("write one with `unsctl dlq triage -o json > plan.json`")),
    }
}

fn too_large(name: &str) -> CliError {
    CliError::error(format!(
        "{name}: larger than {} MiB, the most a plan may hold",
        MAX_PLAN_BYTES >> 20
    ))
    .hint("split the selection, e.g. `unsctl dlq triage --branch replay -o json`")
}

fn planned(
    store: &dyn crate::store::Store,
    entry: PlanEntry,
    operator: &str,
    audit: &AuditArgs,
    excluded: Option<&Excluded>,
) -> CliResult<Intent> {
    let action = match entry.action {
        PlanAction::Resolve => Action::Resolve,
        PlanAction::Replay => Action::Replay,
        PlanAction::Verify => Action::Resolve,
    };
    if NotificationId::parse(&entry.id).is_err() {
        return Ok(Intent::blocked(
            &entry.id.chars().take(64).collect::<String>(),
            action,
            None,
            Blocked::Unplanned(Unplanned::NotAnId),
        ));
    }
    let attestation = entry
        .attestation
        .as_deref()
        .map(str::trim)
        .filter(|a| !a.is_empty());
    let verified = attestation.map(|_| match action {
        Action::Resolve => Claim::Delivered,
        Action::Replay => Claim::NotDelivered,
    });
    let request = act::base_request(operator, audit, attestation, verified);
    let mut intent = crate::session::intent(store, &entry.id, action, &request)?;
    // An entry added by hand is held to every exclusion the plan records, not only its
    // ids: the selection the operator approved left it out.
    let left_out = excluded
        .zip(intent.verdict.as_ref())
        .and_then(|(e, v)| e.leaves_out(v));
    if let Some(why) = left_out {
        intent.preview = Err(Blocked::Unplanned(Unplanned::Excluded(
            entry.id.clone(),
            why,
        )));
        return Ok(intent);
    }
    if entry.action == PlanAction::Verify {
        intent.verb = "verify";
        intent.preview = Err(Blocked::Unplanned(Unplanned::LeftAsVerify(
            entry.id.clone(),
        )));
        return Ok(intent);
    }
    let Some(planned_event) = entry
        .last_event_id
        .as_ref()
        .and_then(serde_json::Value::as_i64)
    else {
        if intent.preview.is_ok() {
            intent.preview = Err(Blocked::Unplanned(Unplanned::NoBase(entry.id.clone())));
        }
        return Ok(intent);
    };
    // The plan's view is what the operator approved: act only if it is still the newest.
    // An entry someone else acted on since has moved too, and reads as stale.
    intent.request.expected_last_event_id = Some(planned_event);
    let newest = intent.verdict.as_ref().and_then(|v| v.last_event_id);
    if intent.verdict.is_some() && newest != Some(planned_event) {
        intent.preview = Err(Blocked::Stale(Stale::SincePlan {
            id: entry.id.clone(),
            newest,
            planned: planned_event,
        }));
    }
    Ok(intent)
}

pub fn run(global: &Invocation, args: Args) -> CliResult {
    act::check_force(&args.audit)?;
    let mut plan = read_plan(&args.plan)?;
    if let Some(excluded) = &plan.excluded {
        // An entry the plan's own triage left out is never acted on, whoever added it.
        plan.entries.retain(|entry| {
            let left_out = excluded.ids.contains(&entry.id);
            if left_out {
                crate::render::output::status(&format!(
                    "{}  skipped: the plan excludes it (--exclude), yet it is in the entries",
                    crate::render::sanitize::clean(&entry.id)
                ));
            }
            !left_out
        });
    }
    if plan.entries.is_empty() {
        crate::render::output::status("The plan has no entries: nothing to do.");
        return Ok(());
    }
    if plan.entries.iter().all(|e| e.context.is_none()) {
        let store = backend::for_action(global, args.confirm.confirm)?;
        same_store(store.as_ref(), plan.store.as_deref())?;
        return apply_in(
            store.as_ref(),
            plan.entries,
            plan.excluded.as_ref(),
            &args,
            global,
        );
    }
    // A plan made across contexts acts context by context, each with its own prompt.
    if global.db.is_some() || global.api.is_some() || global.context.is_some() {
        return Err(CliError::usage(
            "this plan names the context of each entry; leave out --db, --api and --context",
        ));
    }
    if plan.entries.iter().any(|e| e.context.is_none()) {
        return Err(CliError::usage(
            "this plan names a context for some entries and not for others; make it again with `unsctl dlq triage --all-contexts -o json`",
        ));
    }
    let config = backend::required_config()?;
    // In the order contexts first appear, found by name: linear in the plan's size.
    let mut groups: Vec<(String, Vec<PlanEntry>)> = Vec::new();
    let mut index: std::collections::HashMap<String, usize> = Default::default();
    for entry in plan.entries {
        let name = entry.context.clone().unwrap_or_default();
        match index.get(&name) {
            Some(&at) => groups[at].1.push(entry),
            None => {
                index.insert(name.clone(), groups.len());
                groups.push((name, vec![entry]));
            }
        }
    }
    let planned_stores: std::collections::HashMap<&str, &str> = plan
        .contexts
        .iter()
        .filter_map(|c| Some((c.context.as_str(), c.store.as_deref()?)))
        .collect();
    let mut first_error = None;
    for (name, entries) in groups {
        crate::render::output::status(&format!(
            "\ncontext {}: {}",
            crate::render::sanitize::clean(&name),
            crate::render::output::counted(entries.len() as i64, "plan entry"),
        ));
        let acted = backend::from_context(&config, &name)
            .and_then(|resolved| backend::open_resolved(resolved, args.confirm.confirm))
            .and_then(|store| {
                same_store(store.as_ref(), planned_stores.get(name.as_str()).copied())?;
                apply_in(
                    store.as_ref(),
                    entries,
                    plan.excluded.as_ref(),
                    &args,
                    global,
                )
            });
        if let Err(err) = acted {
            crate::render::output::status(&format!(
                "context {}: {}",
                crate::render::sanitize::clean(&name),
                crate::render::sanitize::clean(&err.message)
            ));
            first_error.get_or_insert(err);
        }
    }
    first_error.map_or(Ok(()), Err)
}

/// Carries out `entries` against one store, with one prompt that names it.
fn apply_in(
    store: &dyn crate::store::Store,
    entries: Vec<PlanEntry>,
    excluded: Option<&Excluded>,
    args: &Args,
    global: &Invocation,
) -> CliResult {
    let out = global.output();
    let operator = global.operator(args.audit.operator.as_deref());
    let intents = once_each(entries)
        .into_iter()
        .map(|entry| match entry {
            Ok(entry) => planned(store, entry, &operator, &args.audit, excluded),
            Err(refused) => Ok(refused),
        })
        .collect::<CliResult<Vec<_>>>()?;
    super::canary::carry_out(
        store,
        intents,
        &args.confirm,
        &args.wait,
        args.pace.pace(),
        &out,
        "apply the plan to",
    )
}

/// Each id once. The same entry written twice is one; an id listed with different
/// actions or bases is refused, every time it appears: which one was meant cannot be told.
fn once_each(entries: Vec<PlanEntry>) -> Vec<Result<PlanEntry, Intent>> {
    let mut kept: Vec<Result<PlanEntry, Intent>> = Vec::with_capacity(entries.len());
    let mut seen: std::collections::HashMap<String, usize> = Default::default();
    for entry in entries {
        let Some(&first) = seen.get(&entry.id) else {
            seen.insert(entry.id.clone(), kept.len());
            kept.push(Ok(entry));
            continue;
        };
        let same = matches!(&kept[first], Ok(earlier) if *earlier == entry);
        if same {
            continue;
        }
        let why = || Blocked::Unplanned(Unplanned::ListedTwice(entry.id.clone()));
        let action = |a: PlanAction| match a {
            PlanAction::Replay => Action::Replay,
            _ => Action::Resolve,
        };
        if let Ok(earlier) = &kept[first] {
            kept[first] = Err(Intent::blocked(
                &earlier.id,
                action(earlier.action),
                None,
                why(),
            ));
        }
        kept.push(Err(Intent::blocked(
            &entry.id,
            action(entry.action),
            None,
            why(),
        )));
    }
    kept
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A stream without end (a pipe, `/dev/zero`, `yes`) is read only up to the limit.
    #[test]
    fn a_stream_past_the_limit_is_refused_after_reading_the_limit() {
        let mut endless = std::io::repeat(b' ');
        let mut read = Counted {
            inner: &mut endless,
            read: 0,
        };
        let err = match parse_plan(&mut read, 4096, "/dev/stdin") {
            Err(err) => err,
            Ok(_) => panic!("an endless stream is not a plan"),
        };
        assert!(err.message.contains("larger than"), "{}", err.message);
        assert!(read.read <= 4096 + 8192, "read {} bytes", read.read);

        let plan = br#"{"entries": [], "summary": {}}"#;
        assert!(parse_plan(&plan[..], 4096, "plan.json").is_ok());
        let err = match parse_plan(&[0u8; 16][..], 4096, "zeros") {
            Err(err) => err,
            Ok(_) => panic!("zeros are not a plan"),
        };
        assert!(err.message.contains("not a triage plan"), "{}", err.message);
    }
}
