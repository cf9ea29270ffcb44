//! `--rate N/s` and `--spread DURATION`: a bulk replay into a provider that just came
//! back, made due at a pace the worker then meets, instead of all at once.

use super::Intent;
use crate::remediation::Action;

/// The most replays a second a pace asks for.
const MAX_RATE: f64 = 10_000.0;

/// The fewest a pace asks for: one a day. Slower than that is no pace for an outage, and
/// a week (the furthest a replay may be made due) would hold seven.
const MIN_RATE: f64 = 1.0 / 86_400.0;

/// The longest a spread may take: as far ahead as a replay may be made due.
const MAX_SPREAD: f64 = crate::remediation::MAX_DUE_AHEAD;

/// A rate as the operator wrote it: so many per second, minute, hour or day.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rate {
    count: f64,
    /// The unit's seconds, and its letter.
    per: (f64, char),
}

impl Rate {
    pub fn per_second(self) -> f64 {
        self.count / self.per.0
    }
}

/// A pace, typed.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Pace {
    Rate(Rate),
    /// Seconds from the first replay's due time to the last's.
    Spread(f64),
}

impl Rate {
    /// `count` a unit of `per` seconds (its letter beside it), if between one a day and
    /// 10,000 a second.
    pub fn new(count: f64, per: (f64, char)) -> Result<Self, String> {
        let rate = Rate { count, per };
        let per_second = rate.per_second();
        if count.is_finite() && (MIN_RATE..=MAX_RATE).contains(&per_second) {
            Ok(rate)
        } else {
            Err(format!("at least 1/d and at most {MAX_RATE}/s"))
        }
    }
}

impl Rate {
    /// `200/s`, `12/m`, `100/h`, `1/d` or a bare number (a second), within the bounds a
    /// pace keeps.
    pub fn parse(text: &str) -> Result<Self, String> {
        let text = text.trim();
        let (number, per) = text.split_once('/').unwrap_or((text, "s"));
        let count: f64 = number
            .trim()
            .parse()
            .map_err(|_| format!("{text:?}: expected a rate such as 200/s or 30/m"))?;
        let per = match per.trim() {
            "s" | "sec" => (1.0, 's'),
            "m" | "min" => (60.0, 'm'),
            "h" => (3600.0, 'h'),
            "d" => (86_400.0, 'd'),
            other => return Err(format!("{other:?}: the unit is s, m, h or d")),
        };
        Rate::new(count, per).map_err(|why| format!("{text:?}: {why}"))
    }
}

impl Pace {
    /// A pace as the live screen's field takes it: a rate (`200/s`, `30/m`) or a spread
    /// (`over 30m`, or a bare duration `30m`); empty is no pace.
    pub fn parse(text: &str) -> Result<Option<Self>, String> {
        let text = text.trim();
        if text.is_empty() {
            return Ok(None);
        }
        if text.contains('/') {
            return Rate::parse(text).map(|rate| Some(Pace::Rate(rate)));
        }
        let span = text.strip_prefix("over").unwrap_or(text).trim();
        let seconds = crate::clock::parse_duration(span).ok_or_else(|| {
            format!("{text:?}: a rate such as 200/s, or a spread such as over 30m")
        })?;
        spread(seconds)
            .map(Some)
            .map_err(|why| format!("{text:?}: {why}"))
    }
}

/// A spread of `seconds`, if it ends no further ahead than a replay may be due.
pub fn spread(seconds: f64) -> Result<Pace, String> {
    if seconds <= MAX_SPREAD {
        Ok(Pace::Spread(seconds))
    } else {
        Err("at most a week, as far ahead as a replay may be due".to_string())
    }
}

impl Pace {
    /// Seconds after the first that replay `k` of `n` is due.
    pub fn offset(self, k: usize, n: usize) -> f64 {
        match self {
            Pace::Rate(rate) => k as f64 / rate.per_second(),
            Pace::Spread(_) if n <= 1 => 0.0,
            Pace::Spread(spread) => spread * k as f64 / (n - 1) as f64,
        }
    }

    /// In words, for the prompt and the audit, as the operator wrote it: `200/s`,
    /// `1/h`, `evenly over 30m`.
    pub fn describe(self) -> String {
        match self {
            Pace::Rate(rate) => format!("{}/{}", trim(rate.count), rate.per.1),
            Pace::Spread(spread) => {
                format!("evenly over {}", crate::render::time::duration(spread))
            }
        }
    }
}

/// A count as it reads best: `200`, `0.5`, `1.25`.
fn trim(n: f64) -> String {
    let text = format!("{n:.3}");
    text.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// Gives each replay `intents` will carry out its place in `pace`, in order; entries the
/// preview refused take no place.
pub fn apply(intents: &mut [Intent], pace: Option<Pace>) -> Result<(), String> {
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
        return Err(format!(
            "at {}, the last of {n} replays would be due in {}: more than a week",
            pace.describe(),
            crate::render::time::duration(last)
        ));
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
    let planned = super::planned(intents)?;
    let now = crate::clock::Clock::now(&crate::clock::SystemClock);
    Some((planned.words.to_string(), now + planned.last))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pace_puts_the_last_replay_where_it_says() {
        let rate = |text: &str| {
            let (count, unit) = text.split_once('/').unwrap_or((text, "s"));
            let per = match unit {
                "m" => (60.0, 'm'),
                "h" => (3600.0, 'h'),
                "d" => (86_400.0, 'd'),
                _ => (1.0, 's'),
            };
            Pace::Rate(Rate::new(count.parse().expect("a count"), per).expect("rate"))
        };
        assert_eq!(rate("200/s").offset(0, 10_000), 0.0);
        assert_eq!(rate("200/s").offset(9_999, 10_000), 49.995);
        assert_eq!(Pace::Spread(600.0).offset(9, 10), 600.0);
        assert_eq!(Pace::Spread(600.0).offset(0, 1), 0.0);
        // Described as written, whatever its unit.
        assert_eq!(rate("200/s").describe(), "200/s");
        assert_eq!(rate("30/m").describe(), "30/m");
        assert_eq!(rate("1/h").describe(), "1/h");
        assert_eq!(rate("2/d").describe(), "2/d");
        assert_eq!(rate("0.5").describe(), "0.5/s");
    }
}
