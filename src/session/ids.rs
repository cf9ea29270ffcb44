//! What the operator typed as an id, turned into ids: a whole id or a unique prefix,
//! for the ids a command names and for the ones `--exclude` leaves out alike.

use crate::exit::{ExitKind, Failure as CliError, Result as CliResult};
use crate::store::selection::{NotExcluded, excluded_id};
use crate::store::{Selection, Store};

/// The shortest id prefix accepted.
pub const MIN_PREFIX: usize = 4;

/// Turns what the operator typed into ids, as git does with commits: a whole id, or a
/// unique prefix of one. An ambiguous prefix is a usage error that lists the candidates;
/// no match is "not found". Every notification is a candidate, in the DLQ or not.
///
/// A prefix that matches nothing is kept as typed, so a bulk command reports that one
/// entry as not found and carries on with the rest.
/// The full ids `typed` names, each once (two prefixes of one id are one entry), in the
/// order first named.
pub fn expand_ids(store: &dyn Store, typed: &[String]) -> CliResult<Vec<String>> {
    // Every prefix long enough is looked up first, all at once where the store can; each
    // is then taken in the order typed, so the first that is refused is the one said.
    let asked: Vec<&str> = typed
        .iter()
        .filter(|t| too_short(t).is_none())
        .map(String::as_str)
        .collect();
    let mut answers = store
        .ids_with_prefixes(&asked, false, SHOWN + 1)
        .into_iter();
    let mut ids: Vec<String> = Vec::with_capacity(typed.len());
    for t in typed {
        if let Some(err) = too_short(t) {
            return Err(err);
        }
        let found = answers.next().ok_or_else(|| {
            crate::store::StoreError::Other(format!("no answer came for {t:?}"))
        })??;
        let id = match pick(t, &found) {
            Err(err) if err.kind == ExitKind::NotFound => t.clone(),
            other => other?,
        };
        if !ids.contains(&id) {
            ids.push(id);
        }
    }
    Ok(ids)
}

/// Candidates listed, at most, when a prefix is ambiguous.
const SHOWN: usize = 10;

/// One rule for every command: a prefix names the one notification, in the DLQ or not,
/// whose id it starts; what the command then does with a row outside the DLQ is its own
/// refusal, never a "not found" or a different choice than another command would make.
pub fn expand_id(store: &dyn Store, typed: &str) -> CliResult<String> {
    if let Some(err) = too_short(typed) {
        return Err(err);
    }
    pick(typed, &store.ids_with_prefix(typed, false, SHOWN + 1)?)
}

/// The usage error for what is too short to name an id, if `typed` is.
fn too_short(typed: &str) -> Option<CliError> {
    (typed.chars().count() < MIN_PREFIX).then(|| {
        CliError::usage(format!(
            "{:?} is too short to name an id: type at least {MIN_PREFIX} characters",
            crate::render::sanitize::clean(typed)
        ))
    })
}

/// The id `typed` names, of the ids `found` that start with it.
fn pick(typed: &str, found: &[String]) -> CliResult<String> {
    use crate::render::sanitize::clean;
    if found.iter().any(|id| id == typed) {
        return Ok(typed.to_string());
    }
    let what = "notification";
    match found {
        [] => Err(CliError::new(
            ExitKind::NotFound,
            format!("no {what} id starts with {}", clean(typed)),
        )),
        [one] => Ok(one.clone()),
        many => {
            let listed: Vec<String> = many
                .iter()
                .take(SHOWN)
                .map(|id| clean(id).into_owned())
                .collect();
            let more = if many.len() > SHOWN { ", and more" } else { "" };
            Err(CliError::usage(format!(
                "{} is ambiguous: it starts {} {what} ids: {}{more}",
                clean(typed),
                if many.len() > SHOWN {
                    format!("more than {SHOWN}")
                } else {
                    many.len().to_string()
                },
                listed.join(", ")
            ))
            .hint("type more of the id"))
        }
    }
}

/// `selection` with each id `--exclude` names expanded from its prefix (`dlq_only`: among
/// the DLQ's entries, as the selection is). A prefix that matches nothing, or a DLQ
/// entry the selection does not pick, is a usage error naming it, never a silent no-op;
/// an ambiguous one lists its candidates.
pub fn with_exclusions(
    store: &dyn Store,
    selection: Selection,
    dlq_only: bool,
) -> CliResult<Selection> {
    exclusions(store, selection, dlq_only, true)
}

/// The same for one context of several (`--all-contexts`): an id lives in one context,
/// so a prefix that matches nothing here excludes nothing here.
pub fn with_exclusions_here(
    store: &dyn Store,
    selection: Selection,
    dlq_only: bool,
) -> CliResult<Selection> {
    exclusions(store, selection, dlq_only, false)
}

fn exclusions(
    store: &dyn Store,
    mut selection: Selection,
    dlq_only: bool,
    every_one_matches: bool,
) -> CliResult<Selection> {
    let mut expanded: Vec<String> = Vec::with_capacity(selection.exclude.len());
    let asked: Vec<&str> = selection.exclude.iter().map(String::as_str).collect();
    let mut answers = store
        .ids_with_prefixes(&asked, dlq_only, SHOWN + 1)
        .into_iter();
    for typed in &selection.exclude {
        // Never an exclusion passed over: an answer missing is an error, not a skip.
        let found = answers.next().ok_or_else(|| {
            crate::store::StoreError::Other(format!("no answer came for --exclude {typed:?}"))
        })??;
        let id = match excluded_id(typed, &found) {
            Ok(id) => id,
            Err(NotExcluded::Nothing) if !every_one_matches => continue,
            Err(not) => {
                let what = if dlq_only {
                    "DLQ entry's"
                } else {
                    "notification's"
                };
                let hint = match not {
                    NotExcluded::Several(_) => "type more of the id",
                    NotExcluded::Nothing => {
                        "an exclusion that leaves out nothing is a mistake: check the id"
                    }
                };
                return Err(CliError::usage(not.refusal("--exclude", typed, what)).hint(hint));
            }
        };
        if !expanded.contains(&id) {
            expanded.push(id);
        }
    }
    if every_one_matches && dlq_only {
        outside_the_selection(store, &selection, &expanded)?;
    }
    selection.exclude = expanded;
    Ok(selection)
}

/// Refuses an excluded DLQ entry that `selection` does not pick: excluding it leaves out
/// nothing, so the exclusion meant another entry. Found by the walk the commands read the
/// selection with, ended as soon as every excluded entry was met.
fn outside_the_selection(store: &dyn Store, selection: &Selection, ids: &[String]) -> CliResult {
    let whole = Selection {
        exclude: Vec::new(),
        ..selection.clone()
    };
    // Without a filter, every DLQ entry is in the selection.
    if ids.is_empty() || whole.is_empty() {
        return Ok(());
    }
    let mut unmet: Vec<&String> = ids.iter().collect();
    let walked = store.each_triaged(&whole, &mut |triaged| {
        unmet.retain(|id| **id != triaged.row.id);
        if unmet.is_empty() {
            Err(crate::store::StoreError::Stopped)
        } else {
            Ok(())
        }
    });
    match walked {
        Ok(()) | Err(crate::store::StoreError::Stopped) => {}
        Err(err) => return Err(err.into()),
    }
    match unmet.first() {
        None => Ok(()),
        Some(id) => Err(CliError::usage(format!(
            "--exclude {}: that DLQ entry is not in the selection, so excluding it leaves out nothing",
            crate::render::sanitize::clean(id)
        ))
        .hint("an exclusion that leaves out nothing is a mistake: check the id and the filters")),
    }
}

/// The most ids [`short_ids`] shortens: each costs a look-up or two.
const SHORTENED: usize = 200;

/// The shortest id prefix shown.
const SHORTEST: usize = 12;

/// Each of `ids` as the shortest prefix (at least 12 characters) that names it alone in
/// the whole store, as every command takes it: for a table at 80 columns. Past a few
/// hundred ids, or where the store cannot say, an id stays whole.
pub fn short_ids<'a>(
    store: &dyn Store,
    ids: impl IntoIterator<Item = &'a str>,
    out: &crate::render::output::Output,
) -> std::collections::HashMap<String, String> {
    // Off a terminal (a pipe, a file, `-o wide`) every id stays whole: what a script reads.
    if out.fit_width().is_none() {
        return std::collections::HashMap::new();
    }
    let mut distinct: Vec<&str> = ids.into_iter().collect();
    distinct.sort_unstable();
    distinct.dedup();
    let mut short = std::collections::HashMap::new();
    if distinct.len() > SHORTENED {
        return short;
    }
    for id in distinct {
        let mut keep = SHORTEST;
        let shown = loop {
            let Some((end, _)) = id.char_indices().nth(keep) else {
                break id.to_string();
            };
            let prefix = &id[..end];
            match store.ids_with_prefix(prefix, false, 2) {
                Ok(found) if found.len() == 1 && found[0] == id => break prefix.to_string(),
                Ok(found) if found.is_empty() => break id.to_string(),
                Ok(_) => keep += 2,
                Err(_) => break id.to_string(),
            }
        };
        short.insert(id.to_string(), shown);
    }
    short
}
