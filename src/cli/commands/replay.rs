//! `unsctl replay`: replay DLQ entries in a new cycle, for the channels not delivered.

use crate::cli::act;
use crate::cli::args::SelectArgs;
use crate::cli::backend;
use crate::cli::backend::Invocation;
use crate::cli::error::{CliError, CliResult};
use crate::cli::selection;
use crate::model::{Channel, ChannelSet};
use crate::remediation::{Action, Claim};
use crate::session::Intent;
use crate::triage::Branch;

/// Replay DLQ entries (dry run unless --confirm)
///
/// Example: unsctl replay n-0192c3d4 --confirm
/// Example: unsctl replay n-0192c3d4 --channels slack --confirm
/// Example: unsctl replay --branch replay --confirm --yes --reason "webhook fixed"
/// Example: unsctl replay --branch replay --channel slack --since 1h --confirm
/// Example: unsctl replay n-0192c3d4 --confirm --wait
/// Example: unsctl replay --branch replay --rate 200/s --confirm --reason "relay back" --wait
#[derive(Debug, clap::Args)]
#[command(verbatim_doc_comment)]
pub struct Args {
    /// The entries to replay
    #[arg(required_unless_present = "branch", conflicts_with = "branch", value_parser = crate::cli::values::parse_id)]
    pub ids: Vec<String>,
    /// Every entry of this branch instead of ids (only `replay` is allowed), narrowed by
    /// the selection flags
    #[arg(long, ignore_case = true, value_parser = ["replay"])]
    pub branch: Option<String>,
    #[command(flatten)]
    pub select: SelectArgs,
    /// Only these channels, comma-separated, any case (default: every channel not DELIVERED)
    #[arg(long, value_delimiter = ',', value_parser = crate::cli::values::channel())]
    pub channels: Vec<Channel>,
    /// Attest that you checked out of band and the uncertain message did not arrive
    #[arg(long, conflicts_with = "verified_delivered")]
    pub verified_not_delivered: bool,
    /// Attest that the uncertain message did arrive: replay only what was never sent
    #[arg(long)]
    pub verified_delivered: bool,
    #[command(flatten)]
    pub action: crate::cli::args::ActionArgs,
}

pub fn run(global: &Invocation, args: Args) -> CliResult {
    act::check_force(&args.action.audit)?;
    let out = global.output();
    let store = backend::for_action(global, args.action.confirm.confirm)?;
    let (attestation, verified) = if args.verified_not_delivered {
        (
            Some("verified out of band: not delivered"),
            Some(Claim::NotDelivered),
        )
    } else if args.verified_delivered {
        (
            Some("verified out of band: delivered"),
            Some(Claim::Delivered),
        )
    } else {
        (None, None)
    };
    let operator = global.operator(args.action.audit.operator.as_deref())?;
    let mut request = act::base_request(&operator, &args.action.audit, attestation, verified);
    if !args.channels.is_empty() {
        request.channels = Some(args.channels.iter().copied().collect::<ChannelSet>());
    }
    if !args.ids.is_empty() && args.select.narrows() {
        return Err(CliError::usage(
            "name entries by id, or select them with --branch replay and the selection flags, not both",
        ));
    }
    let ids: Vec<String> = match &args.branch {
        Some(_) => selection::verdicts(
            store.as_ref(),
            &args.select.resolved(store.as_ref(), true)?,
            &selection::of_branch(Some(Branch::Replay)),
            args.select.limit,
        )?
        .into_iter()
        .map(|verdict| verdict.id)
        .collect(),
        None => crate::session::ids::expand_ids(store.as_ref(), &args.ids)?,
    };
    let intents: Vec<Intent> =
        crate::session::intents(store.as_ref(), &ids, Action::Replay, &request)?;
    let pagerduty = crate::cli::args::pagerduty_api();
    let how = crate::cli::canary::How {
        confirm: &args.action.confirm,
        wait: &args.action.wait,
        pace: args.action.pace.pace(),
        verb: "replay",
        pagerduty: pagerduty.as_ref(),
    };
    crate::cli::canary::carry_out(store.as_ref(), intents, &how, &out)
}
