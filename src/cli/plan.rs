//! A triage plan (`dlq triage -o json`), as `apply` reads it back: its entries, the
//! store and contexts it was made on, and what its selection left out. The one place
//! both the triage that writes a plan and the apply that reads it take its types from.

use crate::cli::error::{CliError, CliResult};
use crate::triage::PlanAction;
use anyhow::Context;
use std::io::Read;
use std::path::PathBuf;

/// The largest plan read, in bytes (a triage of about 300,000 entries).
pub const MAX_PLAN_BYTES: u64 = 256 << 20;

#[derive(Debug, serde::Deserialize)]
pub struct Plan {
    pub entries: Vec<PlanEntry>,
    /// The store it was made on, in a plan of one context.
    #[serde(default)]
    pub store: Option<String>,
    /// Each context's store, in a plan made with `--all-contexts`.
    #[serde(default)]
    pub contexts: Vec<PlanContext>,
    /// What the triage that made the plan left out (`--exclude`, `--not-channel`,
    /// `--not-error`).
    #[serde(default)]
    pub excluded: Option<Excluded>,
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
    /// `--not-channel` names, an error `--not-error` matches (the entry's or a channel's, any letter case).
    pub fn leaves_out(&self, verdict: &crate::triage::Verdict) -> Option<String> {
        if let Some(channel) = self.not_channel
            && verdict.channel(channel).is_some()
        {
            return Some(format!("--not-channel {channel}"));
        }
        // The selection's own rule: the entry's error or any channel's.
        self.not_error
            .iter()
            .find(|text| {
                !crate::store::Selection {
                    not_error: vec![(*text).clone()],
                    ..Default::default()
                }
                .keeps_verdict(verdict)
            })
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
pub struct PlanContext {
    pub context: String,
    #[serde(default)]
    pub store: Option<String>,
}

/// What `apply` reads of a plan entry; everything else in it is for people.
#[derive(Debug, PartialEq, serde::Deserialize)]
pub struct PlanEntry {
    pub id: String,
    pub action: PlanAction,
    /// The newest event the plan was based on; the entry is stale if it moved.
    #[serde(default)]
    pub last_event_id: Option<serde_json::Value>,
    /// What the operator wrote down they checked (needed to act on a VERIFY entry).
    #[serde(default)]
    pub attestation: Option<String>,
    /// The context the entry was read from, in a plan made with `--all-contexts`.
    #[serde(default)]
    pub context: Option<String>,
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

pub fn read_plan(path: &PathBuf) -> CliResult<Plan> {
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
pub fn parse_plan(source: impl Read, limit: u64, name: &str) -> CliResult<Plan> {
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
