//! The guardrails on resolve and replay, as one pure check. The transitions run it inside
//! their own transaction on a verdict computed there, so no caller (CLI, API, plan,
//! interactive walk) can skip it or feed it a verdict of its own.

use crate::model::command::{self, pasted};
use crate::model::{Channel, ChannelSet};
use crate::triage::{Branch, ChannelState, Verdict};
use serde::{Deserialize, Serialize};

/// Resolve or replay.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Action {
    Resolve,
    Replay,
}

impl Action {
    pub fn as_str(self) -> &'static str {
        match self {
            Action::Resolve => "resolve",
            Action::Replay => "replay",
        }
    }

    /// The past tense the API answers with.
    pub fn done(self) -> &'static str {
        match self {
            Action::Resolve => "resolved",
            Action::Replay => "replayed",
        }
    }
}

/// What an operator says they found out of band about the UNCERTAIN channels.
pub use crate::model::payload::Claim;

/// A request to resolve or replay, as the API takes it and the CLI builds it. Channels
/// are typed when the body is parsed: any case, trimmed, duplicates collapsed, and an
/// unknown name is a 400.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Request {
    /// Who the client says is acting. The server records its key's name as the operator
    /// and keeps this as `claimed_operator`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operator: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ticket: Option<String>,
    /// What the operator checked out of band (needed to act on a VERIFY entry).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attestation: Option<String>,
    /// What that check found about the UNCERTAIN channels.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verified: Option<Claim>,
    /// Replay only; default: every channel not DELIVERED (without the UNCERTAIN ones when
    /// `verified` is DELIVERED).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub channels: Option<ChannelSet>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub force: bool,
    /// Refuse as stale unless this is still the entry's newest event.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expected_last_event_id: Option<i64>,
    /// Replay only: when the new cycle is due, in unix seconds (default: now), so that a
    /// bulk replay meets a pace; earlier than now is now, and at most a week ahead.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub due_at: Option<f64>,
    /// The pace the replay is part of, in words (`200/s`, `over 30m`), for the audit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pace: Option<String>,
    /// The front end acting, when not the command line (`tui`), kept in the audit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub via: Option<crate::model::payload::Via>,
    /// Accepted for old clients and ignored: the verdict recorded is always the one
    /// computed where the change is made.
    #[serde(default, skip_serializing)]
    pub triage: Option<Ignored>,
}

/// Any JSON value, accepted and dropped.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Ignored;

impl<'de> Deserialize<'de> for Ignored {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        serde::de::IgnoredAny::deserialize(deserializer)?;
        Ok(Ignored)
    }
}

fn text(value: &Option<String>) -> Option<&str> {
    value.as_deref().map(str::trim).filter(|t| !t.is_empty())
}

impl Request {
    pub fn reason(&self) -> Option<&str> {
        text(&self.reason)
    }

    pub fn attestation(&self) -> Option<&str> {
        text(&self.attestation)
    }

    fn attested(&self) -> bool {
        self.attestation().is_some() || self.verified.is_some()
    }
}

/// Whose terms a remedy is said in: each front end names its own flags or keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Terms {
    CommandLine,
    Screen,
}

/// Why a guardrail refused, typed so the CLI and the API can each say what would allow
/// it in their own terms.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "guardrail", rename_all = "snake_case")]
pub enum Refusal {
    /// `force` without a reason: the audit record must say why.
    ForceWithoutReason { id: String },
    /// A reason that is the placeholder of a printed step, pasted unchanged: the audit
    /// record would say what nobody wrote.
    PlaceholderReason { id: String, reason: String },
    /// A channel the notification does not have.
    ForeignChannel {
        id: String,
        named: ChannelSet,
        has: ChannelSet,
    },
    /// Replaying an entry whose every channel was accepted.
    ReplayDelivered { id: String },
    /// Replaying channels a provider already accepted.
    ReplayDeliveredChannels { id: String, channels: ChannelSet },
    /// Acting on a VERIFY entry before anyone checked out of band.
    Unverified {
        id: String,
        action: Action,
        uncertain: ChannelSet,
    },
    /// Resolving while some channel was never delivered. `permanent` names those whose
    /// last rejection was permanent, with the reply: replaying them is pointless until the
    /// cause is fixed, so giving up on purpose is a real choice, and needs its reason.
    ResolveUnsent {
        id: String,
        unsent: ChannelSet,
        #[serde(default, skip_serializing_if = "ChannelSet::is_empty")]
        permanent: ChannelSet,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cause: Option<String>,
    },
    /// Resolving what the attestation says did not arrive: that drops it.
    ResolveAttestedUndelivered { id: String },
    /// Replaying what the attestation says did arrive: that sends a duplicate.
    ReplayAttestedDelivered { id: String, channels: ChannelSet },
    /// Nothing left to replay.
    NothingToReplay { id: String },
    /// Replaying a channel refused permanently without saying what was fixed: unchanged,
    /// it is refused again.
    PermanentWithoutReason {
        id: String,
        channels: ChannelSet,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cause: Option<String>,
    },
    /// The row's channels cannot be read: no replay can be delivered safely.
    UnreadableChannels { id: String, why: String },
    /// `channels` given for a resolve, which always covers the whole entry.
    ChannelsOnResolve { id: String },
}

impl Refusal {
    /// Whether `force` with a reason overrides it.
    pub fn overridable(&self) -> bool {
        matches!(
            self,
            Refusal::ReplayDelivered { .. }
                | Refusal::ReplayDeliveredChannels { .. }
                | Refusal::Unverified { .. }
                | Refusal::ResolveUnsent { .. }
                | Refusal::UnreadableChannels { .. }
        )
    }

    /// What went wrong, in words that fit both the CLI and the API.
    pub fn why(&self) -> String {
        match self {
            Refusal::ForceWithoutReason { id } => {
                format!("{id}: a forced action needs a reason, so the audit record says why")
            }
            Refusal::PlaceholderReason { id, reason } => format!(
                "{id}: the reason {reason:?} is the placeholder of the step unsctl printed: the audit record must say why in a person's own words"
            ),
            Refusal::ForeignChannel { id, named, has } => format!(
                "{id} has no {} channel (its channels: {})",
                named.joined(", "),
                has.joined(", ")
            ),
            Refusal::ReplayDelivered { id } => format!(
                "{id} is RESOLVE: every channel was accepted, so a replay sends a duplicate"
            ),
            Refusal::ReplayDeliveredChannels { id, channels } => format!(
                "{id}: {} already DELIVERED; replaying it sends a duplicate",
                channels.joined(", ")
            ),
            Refusal::Unverified {
                id,
                action,
                uncertain,
            } => {
                let what = if uncertain.is_empty() {
                    "the outcome".to_string()
                } else {
                    uncertain.joined(", ")
                };
                match action {
                    Action::Replay => format!(
                        "{id} is VERIFY: {what} may already have arrived, and nobody has checked"
                    ),
                    Action::Resolve => {
                        format!("{id} is VERIFY: nobody has confirmed that {what} arrived")
                    }
                }
            }
            Refusal::ResolveUnsent {
                id,
                unsent,
                permanent,
                cause,
            } if !permanent.is_empty() && permanent == unsent => format!(
                "{id}: {} was never delivered, and was refused permanently ({}): replaying it is pointless until the cause is fixed, and resolving drops a message nobody received",
                unsent.joined(", "),
                cause.as_deref().unwrap_or("no reply recorded")
            ),
            Refusal::ResolveUnsent { id, unsent, .. } => format!(
                "{id}: {} was never delivered; resolving drops a message nobody received",
                unsent.joined(", ")
            ),
            Refusal::ResolveAttestedUndelivered { id } => {
                format!("{id}: the attestation says it did not arrive, so resolving drops it")
            }
            Refusal::ReplayAttestedDelivered { id, channels } => format!(
                "{id}: the attestation says {} arrived, so replaying it sends a duplicate",
                channels.joined(", ")
            ),
            Refusal::NothingToReplay { id } => format!("{id}: no channel left to replay"),
            Refusal::PermanentWithoutReason {
                id,
                channels,
                cause,
            } => format!(
                "{id}: {} was refused permanently{}: replayed unchanged it is refused again, so the replay must say what was fixed",
                channels.joined(","),
                cause
                    .as_deref()
                    .map(|c| format!(" ({c:?})"))
                    .unwrap_or_default()
            ),
            Refusal::UnreadableChannels { id, why } => {
                format!("{id}: its channels cannot be read ({why})")
            }
            Refusal::ChannelsOnResolve { id } => {
                format!("{id}: a resolve covers the whole entry and takes no channels")
            }
        }
    }

    /// What would allow it, in CLI flags.
    pub fn cli_remedy(&self) -> String {
        match self {
            Refusal::ForceWithoutReason { .. } => "add --reason TEXT".into(),
            Refusal::PlaceholderReason { .. } => {
                "give the reason in your own words: --reason TEXT".into()
            }
            Refusal::ForeignChannel { has, .. } => {
                format!("name only its channels: --channels {}", has.joined(","))
            }
            Refusal::ReplayDelivered { id } => format!(
                "resolve it with {}, or pass --force --reason",
                pasted(&["dlq", "resolve"], id, &["--confirm"])
            ),
            Refusal::ReplayDeliveredChannels { .. } => {
                "leave it out of --channels, or pass --force --reason".into()
            }
            Refusal::Unverified { id, action, .. } => {
                let flag = match action {
                    Action::Replay => "--verified-not-delivered",
                    Action::Resolve => "--verified-delivered",
                };
                format!(
                    "check out of band first ({} says what to look for), then pass {flag}, or --force --reason",
                    pasted(&["inspect"], id, &[])
                )
            }
            Refusal::ResolveUnsent {
                id,
                unsent,
                permanent,
                ..
            } if !permanent.is_empty() && permanent == unsent => format!(
                "fix the cause, then replay it ({}); or give it up on purpose: {}",
                replay_when_fixed(id, unsent),
                pasted(
                    &["dlq", "resolve"],
                    id,
                    &[
                        "--force",
                        "--reason",
                        &command::placeholder(command::WHY_GIVEN_UP),
                        "--confirm"
                    ]
                )
            ),
            Refusal::ResolveUnsent { id, unsent, .. } => format!(
                "replay it instead ({}), or pass --force --reason to drop it on purpose",
                pasted(
                    &["replay"],
                    id,
                    &["--channels", &unsent.joined(","), "--confirm"]
                )
            ),
            Refusal::ResolveAttestedUndelivered { id } => format!(
                "replay it instead: {}",
                pasted(&["replay"], id, &["--verified-not-delivered", "--confirm"])
            ),
            Refusal::ReplayAttestedDelivered { channels, .. } => format!(
                "leave {} out of --channels (with --verified-delivered only FAILED and NOT_ATTEMPTED channels are replayed)",
                channels.joined(",")
            ),
            Refusal::NothingToReplay { .. } => {
                "name channels with --channels (delivered ones need --force --reason)".into()
            }
            Refusal::PermanentWithoutReason { id, channels, .. } => format!(
                "fix the cause first, then {}",
                replay_when_fixed(id, channels)
            ),
            Refusal::UnreadableChannels { .. } => {
                "repair the row, or resolve it with --force --reason".into()
            }
            Refusal::ChannelsOnResolve { .. } => "leave out --channels".into(),
        }
    }

    /// What would allow it, in the live screen's own keys and fields (its dialog ticks
    /// channels and "forced", and takes a reason), never a command to paste elsewhere.
    pub fn screen_remedy(&self) -> String {
        const FORCED: &str = "tick forced and give a reason";
        match self {
            Refusal::ForceWithoutReason { .. } => {
                "type a reason: the audit record must say why".into()
            }
            Refusal::PlaceholderReason { .. } => "type the reason in your own words".into(),
            Refusal::ForeignChannel { has, .. } => {
                format!("tick only its channels ({})", has.joined(", "))
            }
            Refusal::ReplayDelivered { .. } => format!("resolve it instead (r), or {FORCED}"),
            Refusal::ReplayDeliveredChannels { channels, .. } => {
                format!("untick {}, or {FORCED}", channels.joined(", "))
            }
            Refusal::Unverified { .. } => format!(
                "verify it first (v asks the providers' records and records the answer), or {FORCED}"
            ),
            Refusal::ResolveUnsent {
                unsent, permanent, ..
            } if !permanent.is_empty() && permanent == unsent => format!(
                "fix the cause, then replay it (p) with a reason that says what was fixed; or give it up on purpose: {FORCED}"
            ),
            Refusal::ResolveUnsent { .. } => {
                format!("replay it instead (p), or give it up on purpose: {FORCED}")
            }
            Refusal::ResolveAttestedUndelivered { .. } => "replay it instead (p)".into(),
            Refusal::ReplayAttestedDelivered { channels, .. } => {
                format!("untick {}", channels.joined(", "))
            }
            Refusal::NothingToReplay { .. } => {
                "tick a channel (a delivered one needs forced and a reason)".into()
            }
            Refusal::PermanentWithoutReason { .. } => {
                "fix the cause first, then give a reason that says what was fixed".into()
            }
            Refusal::UnreadableChannels { .. } => {
                format!("repair the row, or give it up: resolve (r), {FORCED}")
            }
            Refusal::ChannelsOnResolve { .. } => "a resolve covers every channel".into(),
        }
    }

    /// What would allow it, in `terms`.
    pub fn remedy(&self, terms: Terms) -> String {
        match terms {
            Terms::CommandLine => self.cli_remedy(),
            Terms::Screen => self.screen_remedy(),
        }
    }

    /// What would allow it, in the API's fields and routes.
    pub fn api_remedy(&self) -> String {
        match self {
            Refusal::ForceWithoutReason { .. } => {
                "send a non-empty \"reason\" with \"force\": true".into()
            }
            Refusal::PlaceholderReason { .. } => "send a \"reason\" in your own words".into(),
            Refusal::ForeignChannel { has, .. } => format!(
                "send only its channels in \"channels\": {}",
                serde_json::to_string(has).unwrap_or_default()
            ),
            Refusal::ReplayDelivered { id } => format!(
                "resolve it with DELETE /api/v1/dlq/{id}, or send \"force\": true with a \"reason\""
            ),
            Refusal::ReplayDeliveredChannels { .. } => {
                "leave it out of \"channels\", or send \"force\": true with a \"reason\"".into()
            }
            Refusal::Unverified { id, action, .. } => {
                let verified = match action {
                    Action::Replay => "NOT_DELIVERED",
                    Action::Resolve => "DELIVERED",
                };
                format!(
                    "check out of band first (GET /api/v1/runtime/notifications/{id} lists the events), then send an \"attestation\" saying what you checked and \"verified\": \"{verified}\", or \"force\": true with a \"reason\""
                )
            }
            Refusal::ResolveUnsent { id, .. } => format!(
                "replay it with POST /api/v1/runtime/notifications/{id}/replay, or send \"force\": true with a \"reason\" to drop it on purpose"
            ),
            Refusal::ResolveAttestedUndelivered { id } => format!(
                "replay it instead with POST /api/v1/runtime/notifications/{id}/replay and \"verified\": \"NOT_DELIVERED\""
            ),
            Refusal::ReplayAttestedDelivered { channels, .. } => format!(
                "leave {} out of \"channels\"",
                serde_json::to_string(channels).unwrap_or_default()
            ),
            Refusal::NothingToReplay { .. } => {
                "name channels in \"channels\" (delivered ones need \"force\" and a \"reason\")"
                    .into()
            }
            Refusal::PermanentWithoutReason { .. } => {
                "fix the cause first, then send a \"reason\" that says what was fixed".into()
            }
            Refusal::UnreadableChannels { .. } => {
                "repair the row, or resolve it with \"force\": true and a \"reason\"".into()
            }
            Refusal::ChannelsOnResolve { .. } => "leave out \"channels\"".into(),
        }
    }
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}; {}", self.why(), self.cli_remedy())
    }
}

impl std::error::Error for Refusal {}

/// An action the guardrails let through.
#[derive(Debug, Clone, PartialEq)]
pub struct Approved {
    pub action: Action,
    /// The channels a replay covers (empty for a resolve).
    pub channels: ChannelSet,
    /// The guardrails `force` overrode, for the audit record.
    pub overridden: Vec<String>,
}

/// Checks `action` on the entry `verdict` describes, whose row lists `row_channels`.
pub fn check(
    verdict: &Verdict,
    row_channels: &Result<ChannelSet, String>,
    action: Action,
    request: &Request,
) -> Result<Approved, Refusal> {
    if request.force && request.reason().is_none() {
        return Err(Refusal::ForceWithoutReason {
            id: verdict.id.clone(),
        });
    }
    if let Some(placeholder) = request.reason().and_then(command::placeholder_of) {
        return Err(Refusal::PlaceholderReason {
            id: verdict.id.clone(),
            reason: placeholder.to_string(),
        });
    }
    let mut guard = Guard {
        force: request.force,
        overridden: Vec::new(),
    };
    let channels = match action {
        Action::Resolve => {
            check_resolve(verdict, row_channels, request, &mut guard)?;
            ChannelSet::new()
        }
        Action::Replay => replay_channels(verdict, row_channels, request, &mut guard)?,
    };
    Ok(Approved {
        action,
        channels,
        overridden: guard.overridden,
    })
}

/// The guardrails `--force` may override, and the ones it did.
struct Guard {
    force: bool,
    overridden: Vec<String>,
}

impl Guard {
    /// Refuses, unless forced and the refusal is one force may override.
    fn check(&mut self, refusal: Refusal) -> Result<(), Refusal> {
        if self.force && refusal.overridable() {
            self.overridden.push(refusal.why());
            Ok(())
        } else {
            Err(refusal)
        }
    }
}

/// An action on a VERIFY entry that nobody attested.
fn unverified(verdict: &Verdict, request: &Request, action: Action) -> Option<Refusal> {
    (verdict.branch == Branch::Verify && !request.attested()).then(|| Refusal::Unverified {
        id: verdict.id.clone(),
        action,
        uncertain: verdict.in_state(ChannelState::Uncertain),
    })
}

fn check_resolve(
    verdict: &Verdict,
    row_channels: &Result<ChannelSet, String>,
    request: &Request,
    guard: &mut Guard,
) -> Result<(), Refusal> {
    let id = || verdict.id.clone();
    if request.channels.is_some() {
        return Err(Refusal::ChannelsOnResolve { id: id() });
    }
    if request.verified == Some(Claim::NotDelivered) {
        return Err(Refusal::ResolveAttestedUndelivered { id: id() });
    }
    if let Err(why) = row_channels {
        guard.check(Refusal::UnreadableChannels {
            id: id(),
            why: why.clone(),
        })?;
    }
    let unsent = verdict.unsent();
    if !unsent.is_empty() {
        let refused: Vec<&crate::triage::ChannelVerdict> =
            verdict.channels.iter().filter(|c| c.permanent).collect();
        guard.check(Refusal::ResolveUnsent {
            id: id(),
            unsent,
            permanent: refused.iter().map(|c| c.channel).collect(),
            cause: refused
                .iter()
                .filter_map(|c| {
                    let cause = crate::triage::short_cause(c.cause.as_deref()?);
                    Some(format!("{} {cause}", c.channel))
                })
                .reduce(|a, b| format!("{a}; {b}")),
        })?;
    }
    match unverified(verdict, request, Action::Resolve) {
        Some(refusal) => guard.check(refusal),
        None => Ok(()),
    }
}

/// The channels a replay covers, once every guardrail has let it through.
fn replay_channels(
    verdict: &Verdict,
    row_channels: &Result<ChannelSet, String>,
    request: &Request,
    guard: &mut Guard,
) -> Result<ChannelSet, Refusal> {
    let id = || verdict.id.clone();
    let has = match row_channels {
        Ok(has) => has.clone(),
        Err(why) => {
            return Err(Refusal::UnreadableChannels {
                id: id(),
                why: why.clone(),
            });
        }
    };
    if let Some(named) = &request.channels {
        let foreign = named.without(&has);
        if !foreign.is_empty() {
            return Err(Refusal::ForeignChannel {
                id: id(),
                named: foreign,
                has,
            });
        }
    }
    if verdict.branch == Branch::Resolve {
        guard.check(Refusal::ReplayDelivered { id: id() })?;
    }
    let channels = match &request.channels {
        Some(named) => named.clone(),
        None if request.verified == Some(Claim::Delivered) => verdict.unsent(),
        None => verdict.undelivered(),
    };
    if channels.is_empty() {
        return Err(Refusal::NothingToReplay { id: id() });
    }
    let permanent: ChannelSet = verdict
        .channels
        .iter()
        .filter(|c| c.permanent && channels.contains(c.channel))
        .map(|c| c.channel)
        .collect();
    if !permanent.is_empty() && request.reason().is_none() {
        return Err(Refusal::PermanentWithoutReason {
            id: id(),
            cause: verdict
                .channels
                .iter()
                .find(|c| c.permanent && channels.contains(c.channel))
                .and_then(|c| c.cause.as_deref())
                .map(crate::triage::short_cause),
            channels: permanent,
        });
    }
    if request.verified == Some(Claim::Delivered) {
        let uncertain = verdict.in_state(ChannelState::Uncertain);
        let resent: ChannelSet = channels.iter().filter(|c| uncertain.contains(*c)).collect();
        if !resent.is_empty() {
            return Err(Refusal::ReplayAttestedDelivered {
                id: id(),
                channels: resent,
            });
        }
    }
    if verdict.branch != Branch::Resolve {
        let delivered: ChannelSet = channels
            .iter()
            .filter(|c| is_delivered(verdict, *c))
            .collect();
        if !delivered.is_empty() {
            guard.check(Refusal::ReplayDeliveredChannels {
                id: id(),
                channels: delivered,
            })?;
        }
    }
    if let Some(refusal) = unverified(verdict, request, Action::Replay) {
        guard.check(refusal)?;
    }
    Ok(channels)
}

fn is_delivered(verdict: &Verdict, channel: Channel) -> bool {
    verdict
        .channel(channel)
        .is_some_and(|c| c.state == ChannelState::Delivered)
}

/// The replay of `channels` once their cause is fixed, saying what was, ready to paste.
fn replay_when_fixed(id: &str, channels: &ChannelSet) -> String {
    pasted(
        &["replay"],
        id,
        &[
            "--channels",
            &channels.joined(","),
            "--reason",
            &command::placeholder(command::WHAT_WAS_FIXED),
            "--confirm",
        ],
    )
}
