//! `unsctl apply plan.json`: carry out a triage plan, skipping entries that moved since.

use crate::cli::act;
use crate::cli::args::AuditArgs;
use crate::cli::backend;
use crate::cli::backend::Invocation;
use crate::cli::error::{CliError, CliResult, ExitKind};
use crate::cli::plan::{Excluded, PlanEntry, read_plan};
use crate::model::NotificationId;
use crate::remediation::{Action, Claim};
use crate::session::Intent;
use crate::session::outcome::{Blocked, Stale, Unplanned};
use crate::triage::PlanAction;
use std::path::PathBuf;

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
    pub action: crate::cli::args::ActionArgs,
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

fn planned(
    read: &mut crate::store::Documents<'_>,
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
    let mut intent = crate::session::intent_of(&entry.id, read(&entry.id), action, &request)?;
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
    // Event ids start at 1: anything else was not written by a triage.
    let Some(planned_event) = entry
        .last_event_id
        .as_ref()
        .and_then(serde_json::Value::as_i64)
        .filter(|id| *id >= 1)
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

/// A plan's entries under their context, in the order contexts first appear, found by
/// name: linear in the plan's size.
fn by_context(entries: Vec<PlanEntry>) -> Vec<(String, Vec<PlanEntry>)> {
    let mut groups: Vec<(String, Vec<PlanEntry>)> = Vec::new();
    let mut index: std::collections::HashMap<String, usize> = Default::default();
    for entry in entries {
        let name = entry.context.clone().unwrap_or_default();
        match index.get(&name) {
            Some(&at) => groups[at].1.push(entry),
            None => {
                index.insert(name.clone(), groups.len());
                groups.push((name, vec![entry]));
            }
        }
    }
    groups
}

pub fn run(global: &Invocation, args: Args) -> CliResult {
    act::check_force(&args.action.audit)?;
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
        let store = backend::for_action(global, args.action.confirm.confirm)?;
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
    let groups = by_context(plan.entries);
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
        let acted = global
            .context(&config, &name)
            .and_then(|resolved| backend::open_resolved(resolved, args.action.confirm.confirm))
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
    let operator = global.operator(args.action.audit.operator.as_deref())?;
    let entries = once_each(entries);
    // The entries are read as the store reads a list: several at once over the API.
    let ids: Vec<String> = entries
        .iter()
        .filter_map(|entry| entry.as_ref().ok())
        .filter(|entry| NotificationId::parse(&entry.id).is_ok())
        .map(|entry| entry.id.clone())
        .collect();
    let mut read = store.documents(&ids);
    let intents = entries
        .into_iter()
        .map(|entry| match entry {
            Ok(entry) => planned(&mut read, entry, &operator, &args.action.audit, excluded),
            Err(refused) => Ok(refused),
        })
        .collect::<CliResult<Vec<_>>>()?;
    let pagerduty = crate::cli::args::pagerduty_api();
    let how = crate::cli::canary::How {
        confirm: &args.action.confirm,
        wait: &args.action.wait,
        pace: args.action.pace.pace(),
        verb: "apply the plan to",
        pagerduty: pagerduty.as_ref(),
    };
    crate::cli::canary::carry_out(store, intents, &how, &out)
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
