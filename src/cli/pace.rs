//! `--rate N/s` and `--spread DURATION`: a bulk replay into a provider that just came
//! back, made due at a pace the worker then meets, instead of all at once.

use super::act::Intent;
use super::error::{CliError, CliResult};
use crate::remediation::Action;

/// The most replays a second a pace asks for.
const MAX_RATE: f64 = 10_000.0;

/// How the replays of one run are spread out
#[derive(Debug, Clone, Default, clap::Args)]
pub struct PaceArgs {
    /// Make the replays due at most N a second (also N/m, N/h): the worker sends them at
    /// that pace, not all at once
    #[arg(long, value_name = "N/s", value_parser = parse_rate, conflicts_with = "spread")]
    pub rate: Option<f64>,
    /// Make the replays due evenly over DURATION (90s, 30m, 2h), the last at its end
    #[arg(long, value_name = "DURATION", value_parser = super::values::parse_span)]
    pub spread: Option<f64>,
}

/// A pace, typed.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Pace {
    /// Replays a second.
    Rate(f64),
    /// Seconds from the first replay's due time to the last's.
    Spread(f64),
}

impl PaceArgs {
    pub fn pace(&self) -> Option<Pace> {
        match (self.rate, self.spread) {
            (Some(rate), _) => Some(Pace::Rate(rate)),
            (None, Some(spread)) => Some(Pace::Spread(spread)),
            (None, None) => None,
        }
    }
}

/// `200/s`, `12/m`, `100/h` or a bare number (a second), more than 0.
pub fn parse_rate(text: &str) -> Result<f64, String> {
    let text = text.trim();
    let (number, per) = text.split_once('/').unwrap_or((text, "s"));
    let value: f64 = number
        .trim()
        .parse()
        .map_err(|_| format!("{text:?}: expected a rate such as 200/s or 30/m"))?;
    let seconds = match per.trim() {
        "s" | "sec" => 1.0,
        "m" | "min" => 60.0,
        "h" => 3600.0,
        other => return Err(format!("{other:?}: the unit is s, m or h")),
    };
    let rate = value / seconds;
    if rate.is_finite() && rate > 0.0 && rate <= MAX_RATE {
        Ok(rate)
    } else {
        Err(format!(
            "{text:?}: more than 0 and at most {MAX_RATE} a second"
        ))
    }
}

impl Pace {
    /// Seconds after the first that replay `k` of `n` is due.
    pub fn offset(self, k: usize, n: usize) -> f64 {
        match self {
            Pace::Rate(rate) => k as f64 / rate,
            Pace::Spread(_) if n <= 1 => 0.0,
            Pace::Spread(spread) => spread * k as f64 / (n - 1) as f64,
        }
    }

    /// In words, for the prompt and the audit: `200/s`, `evenly over 30m`.
    pub fn describe(self) -> String {
        match self {
            Pace::Rate(rate) if rate >= 1.0 => format!("{}/s", trim(rate)),
            Pace::Rate(rate) => format!("{}/m", trim(rate * 60.0)),
            Pace::Spread(spread) => {
                format!("evenly over {}", crate::render::time::duration(spread))
            }
        }
    }
}

fn trim(n: f64) -> String {
    let text = format!("{n:.2}");
    text.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// Gives each replay `intents` will carry out its place in `pace`, in order; entries the
/// preview refused take no place.
pub fn apply(intents: &mut [Intent], pace: Option<Pace>) -> CliResult {
    let Some(pace) = pace else {
        return Ok(());
    };
    let paced: Vec<&mut Intent> = intents
        .iter_mut()
        .filter(|i| i.action == Action::Replay && i.preview.is_ok())
        .collect();
    let n = paced.len();
    let last = pace.offset(n.saturating_sub(1), n);
    if last > crate::remediation::MAX_DUE_AHEAD {
        return Err(CliError::usage(format!(
            "at {}, the last of {n} replays would be due in {}: more than a week",
            pace.describe(),
            crate::render::time::duration(last)
        )));
    }
    for (k, intent) in paced.into_iter().enumerate() {
        intent.offset = Some(pace.offset(k, n));
        intent.request.pace = Some(pace.describe());
    }
    Ok(())
}

/// The pace of `intents` in words, and about when its last replay will be due (unix
/// seconds, counted from now: the first runs right after this).
pub fn expected(intents: &[Intent]) -> Option<(String, f64)> {
    let planned = super::act::planned(intents)?;
    let now = crate::clock::Clock::now(&crate::clock::SystemClock);
    Some((planned.words.to_string(), now + planned.last))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_read_as_people_write_them_and_nonsense_is_refused() {
        assert_eq!(parse_rate("200/s"), Ok(200.0));
        assert_eq!(parse_rate("200"), Ok(200.0));
        assert_eq!(parse_rate("30/m"), Ok(0.5));
        assert_eq!(parse_rate(" 3600 / h "), Ok(1.0));
        for bad in ["0/s", "-1/s", "fast", "1/d", "NaN", "inf/s", "20000/s"] {
            assert!(parse_rate(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_pace_puts_the_last_replay_where_it_says() {
        assert_eq!(Pace::Rate(200.0).offset(0, 10_000), 0.0);
        assert_eq!(Pace::Rate(200.0).offset(9_999, 10_000), 49.995);
        assert_eq!(Pace::Spread(600.0).offset(9, 10), 600.0);
        assert_eq!(Pace::Spread(600.0).offset(0, 1), 0.0);
        assert_eq!(Pace::Rate(200.0).describe(), "200/s");
        assert_eq!(Pace::Rate(0.5).describe(), "30/m");
    }
}
