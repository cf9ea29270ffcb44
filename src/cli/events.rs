//! `unsctl events`: the runbook's cross-notification query, newest first.

use super::error::{CliError, CliResult};
use super::{GlobalArgs, backend};
use crate::model::Kind;
use crate::render::output::{print, print_json, status, table, table_text};
use crate::render::views;

/// Find events of some kinds across all notifications, newest first
///
/// Example: unsctl --db uns.db events --kind LEASE_LOST --kind CHANNEL_ATTEMPT_RESULT --limit 25
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Event kinds to show (repeat; default LEASE_LOST and CHANNEL_ATTEMPT_RESULT)
    #[arg(long = "kind", value_name = "KIND", value_parser = parse_kind)]
    pub kinds: Vec<Kind>,
    /// How many rows at most
    #[arg(long, default_value_t = 25)]
    pub limit: usize,
}

fn parse_kind(text: &str) -> Result<Kind, String> {
    text.parse()
}

pub fn run(global: &GlobalArgs, args: Args) -> CliResult {
    let out = global.output();
    if args.limit == 0 || args.limit > 10_000 {
        return Err(CliError::usage("--limit must be between 1 and 10000"));
    }
    let kinds: Vec<Kind> = if args.kinds.is_empty() {
        vec![Kind::LeaseLost, Kind::ChannelAttemptResult]
    } else {
        args.kinds.clone()
    };
    let store = backend::reader(global)?;
    let response = store.events(&kinds, args.limit)?;
    if out.json() {
        print_json(&response)?;
        return Ok(());
    }
    if response.events.is_empty() {
        status(&format!(
            "no {} events in {}",
            kinds
                .iter()
                .map(|k| k.as_str())
                .collect::<Vec<_>>()
                .join(" or "),
            store.describe()
        ));
        return Ok(());
    }
    let mut rows = table(&[
        "NOTIFICATION",
        "STATUS",
        "DLQ",
        "ATTEMPTS",
        "CYCLE",
        "EVENT",
        "TIME",
        "KIND",
        "CHANNEL",
        "DETAIL",
    ]);
    for row in &response.events {
        let event = crate::model::Event {
            id: row.id,
            at: row.at,
            kind: row.kind.clone(),
            payload: row.payload.clone(),
            unreadable: row.unreadable.clone(),
        };
        rows.add_row(vec![
            views::shown(&row.notification_id),
            views::shown(&row.status),
            if row.dead_letter {
                "yes".into()
            } else {
                "no".into()
            },
            row.attempts.to_string(),
            row.cycle.to_string(),
            row.id.to_string(),
            out.time(row.at),
            views::shown(&row.kind),
            views::shown(row.payload["channel"].as_str().unwrap_or("")),
            views::detail(&event, &out),
        ]);
    }
    print(&table_text(&rows))?;
    Ok(())
}
