//! The guardrails on resolve and replay, as one pure check shared by the API server, the
//! CLI's direct-SQLite path and every dry run.

use crate::api::ActionRequest;
use crate::store::sqlite::Action;
use crate::triage::{Branch, ChannelState, Verdict};

/// Why an action was refused, and what would allow it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{why}; {allow}")]
pub struct Refusal {
    pub why: String,
    pub allow: String,
}

fn forced_with_reason(request: &ActionRequest) -> bool {
    request.force
        && request
            .reason
            .as_deref()
            .is_some_and(|r| !r.trim().is_empty())
}

fn attested(request: &ActionRequest) -> bool {
    request
        .attestation
        .as_deref()
        .is_some_and(|a| !a.trim().is_empty())
}

/// Checks `action` on the entry `verdict` describes; for a replay, returns the channels
/// it will cover (the request's, else every channel not DELIVERED).
pub fn check(
    verdict: &Verdict,
    action: Action,
    request: &ActionRequest,
) -> Result<Vec<String>, Refusal> {
    let id = &verdict.id;
    match (action, verdict.branch) {
        (Action::Resolve, Branch::Resolve) => Ok(Vec::new()),
        (Action::Resolve, Branch::Verify) if attested(request) || forced_with_reason(request) => {
            Ok(Vec::new())
        }
        (Action::Resolve, Branch::Verify) => Err(Refusal {
            why: format!(
                "{id} is VERIFY: no one has confirmed that {} arrived",
                uncertain(verdict)
            ),
            allow: "check out of band, then pass --verified-delivered (or --force --reason)".into(),
        }),
        (Action::Resolve, Branch::Replay) if forced_with_reason(request) => Ok(Vec::new()),
        (Action::Resolve, Branch::Replay) => Err(Refusal {
            why: format!(
                "{id} is REPLAY: resolving it drops a message nobody received ({})",
                verdict.undelivered().join(", ")
            ),
            allow: "replay it instead, or pass --force --reason to drop it on purpose".into(),
        }),
        (Action::Replay, branch) => {
            if branch == Branch::Resolve && !forced_with_reason(request) {
                return Err(Refusal {
                    why: format!(
                        "{id} is RESOLVE: every channel was accepted, so a replay sends a duplicate"
                    ),
                    allow: format!(
                        "resolve it with `unsctl dlq resolve {id} --confirm`, or pass --force --reason"
                    ),
                });
            }
            if branch == Branch::Verify && !attested(request) && !forced_with_reason(request) {
                return Err(Refusal {
                    why: format!("{id} is VERIFY: {} may already have arrived", uncertain(verdict)),
                    allow: "check out of band, then pass --verified-not-delivered (or --force --reason)".into(),
                });
            }
            let channels = match &request.channels {
                Some(requested) => requested.iter().map(|c| c.to_ascii_uppercase()).collect(),
                None => verdict.undelivered(),
            };
            let delivered: Vec<&String> = channels
                .iter()
                .filter(|c| {
                    verdict
                        .channel(c)
                        .is_some_and(|v| v.state == ChannelState::Delivered)
                })
                .collect();
            if !delivered.is_empty() && !request.force {
                return Err(Refusal {
                    why: format!(
                        "{id}: {} already DELIVERED; replaying it sends a duplicate",
                        delivered
                            .iter()
                            .map(|c| c.as_str())
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                    allow: "leave it out of --channels, or pass --force --reason".into(),
                });
            }
            if channels.is_empty() {
                return Err(Refusal {
                    why: format!("{id}: no channel left to replay"),
                    allow: "name channels with --channels (and --force for delivered ones)".into(),
                });
            }
            Ok(channels)
        }
    }
}

fn uncertain(verdict: &Verdict) -> String {
    let names: Vec<&str> = verdict
        .channels
        .iter()
        .filter(|c| c.state == ChannelState::Uncertain)
        .map(|c| c.channel.as_str())
        .collect();
    if names.is_empty() {
        "the outcome".into()
    } else {
        names.join(", ")
    }
}
