//! `unsctl dlq resolve`: entries leave the DLQ and keep their history.

use crate::cli::act;
use crate::cli::args::{AuditArgs, ConfirmArgs};
use crate::cli::backend;
use crate::cli::backend::Invocation;
use crate::cli::error::CliResult;
use crate::remediation::{Action, Claim};

/// Resolve DLQ entries: they leave the DLQ and keep their history (dry run unless --confirm)
///
/// Example: unsctl dlq resolve n-0192c3d4 --confirm
/// Example: unsctl dlq resolve n-0192c3d4 --verified-delivered --ticket INC-42 --confirm
/// Example: unsctl dlq resolve --branch resolve --since 2h --confirm
#[derive(Debug, clap::Args)]
#[command(verbatim_doc_comment)]
pub struct Args {
    /// The entries to resolve
    #[arg(required_unless_present = "branch", conflicts_with = "branch", value_parser = crate::cli::values::parse_id)]
    pub ids: Vec<String>,
    /// Every entry of this branch instead of ids (only `resolve` is allowed), narrowed by
    /// the selection flags
    #[arg(long, ignore_case = true, value_parser = ["resolve"])]
    pub branch: Option<String>,
    #[command(flatten)]
    pub select: crate::cli::args::SelectArgs,
    /// Attest that you checked out of band and the message arrived (VERIFY entries)
    #[arg(long)]
    pub verified_delivered: bool,
    #[command(flatten)]
    pub audit: AuditArgs,
    #[command(flatten)]
    pub confirm: ConfirmArgs,
}

pub fn run(global: &Invocation, args: Args) -> CliResult {
    act::check_force(&args.audit)?;
    let out = global.output();
    let store = backend::for_action(global, args.confirm.confirm)?;
    let operator = global.operator(args.audit.operator.as_deref())?;
    let request = match args.verified_delivered {
        true => act::base_request(
            &operator,
            &args.audit,
            Some("verified out of band: delivered"),
            Some(Claim::Delivered),
        ),
        false => act::base_request(&operator, &args.audit, None, None),
    };
    if !args.ids.is_empty() && args.select.narrows() {
        return Err(crate::cli::error::CliError::usage(
            "name entries by id, or select them with --branch resolve and the selection flags, not both",
        ));
    }
    let ids: Vec<String> = match &args.branch {
        Some(_) => crate::cli::selection::verdicts(
            store.as_ref(),
            &args.select.resolved(store.as_ref(), true)?,
            &crate::cli::selection::of_branch(Some(crate::triage::Branch::Resolve)),
            args.select.limit,
        )?
        .into_iter()
        .map(|v| v.id)
        .collect(),
        None => crate::session::ids::expand_ids(store.as_ref(), &args.ids)?,
    };
    let intents = crate::session::intents(store.as_ref(), &ids, Action::Resolve, &request)?;
    act::carry_out(
        store.as_ref(),
        intents,
        &args.confirm,
        &out,
        "resolve",
        None,
    )
}
