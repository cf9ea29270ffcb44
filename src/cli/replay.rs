//! `unsctl replay`: replay DLQ entries in a new cycle, for the channels not delivered.

use super::error::{CliError, CliResult};
use super::remediate::{self, AuditArgs, ConfirmArgs, Intent};
use super::{GlobalArgs, backend};
use crate::store::sqlite::Action;
use crate::triage::Branch;

/// Replay DLQ entries (dry run unless --confirm)
///
/// Example: unsctl --db uns.db replay n-0192c3d4 --confirm
/// Example: unsctl --db uns.db replay --branch replay --confirm --yes --reason "webhook fixed"
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The entries to replay
    #[arg(required_unless_present = "branch", conflicts_with = "branch")]
    pub ids: Vec<String>,
    /// Every entry of this branch instead of ids (only `replay` is allowed)
    #[arg(long, value_parser = ["replay"])]
    pub branch: Option<String>,
    /// Only these channels (default: every channel not DELIVERED)
    #[arg(long, value_delimiter = ',')]
    pub channels: Vec<String>,
    /// Attest that you checked out of band and the message did not arrive (VERIFY entries)
    #[arg(long)]
    pub verified_not_delivered: bool,
    #[command(flatten)]
    pub audit: AuditArgs,
    #[command(flatten)]
    pub confirm: ConfirmArgs,
}

pub fn run(global: &GlobalArgs, args: Args) -> CliResult {
    remediate::check_force(&args.audit)?;
    let out = global.output();
    let store = backend::for_action(global, args.confirm.confirm)?;
    let verdicts = match &args.branch {
        Some(_) => remediate::entries_of(store.as_ref(), Branch::Replay)?,
        None => args
            .ids
            .iter()
            .map(|id| remediate::verdict(store.as_ref(), id))
            .collect::<CliResult<Vec<_>>>()?,
    };
    let attestation = args
        .verified_not_delivered
        .then_some("verified out of band: not delivered");
    let mut request = remediate::base_request(&args.audit, attestation);
    if !args.channels.is_empty() {
        for channel in &args.channels {
            channel
                .parse::<crate::model::Channel>()
                .map_err(|err| CliError::usage(err.to_string()))?;
        }
        request.channels = Some(
            args.channels
                .iter()
                .map(|c| c.to_ascii_uppercase())
                .collect(),
        );
    }
    let intents = verdicts
        .into_iter()
        .map(|verdict| Intent::new(Action::Replay, verdict, request.clone()))
        .collect();
    remediate::carry_out(store.as_ref(), intents, &args.confirm, &out, "replay")
}
