//! Values as typed on the command line, parsed into types before any command runs.

use crate::model::NotificationId;
use crate::runtime::adapters::email::StartTls;
use crate::session::pace::{self, Pace, Rate};
use crate::triage::Branch;
use crate::verify::relay_log::Zone;

/// An id argument, by the one id rule (`NotificationId`).
pub fn parse_id(text: &str) -> Result<String, String> {
    NotificationId::parse(text)
        .map(String::from)
        .map_err(|err| err.to_string())
}

/// A text to filter by, refused when empty or only spaces
/// ([`crate::store::selection::blank_text`]).
pub fn parse_text(text: &str) -> Result<String, String> {
    crate::store::selection::filter_text(text)
}

/// What an operator says for the record (a reason, a ticket, who they are), refused when
/// empty or only spaces: the record would say nothing where they meant it to say
/// something (a variable left unset in `--reason "$WHY"`).
pub fn parse_said(text: &str) -> Result<String, String> {
    if text.trim().is_empty() {
        return Err("empty: the record would say nothing; say it, or leave the flag out".into());
    }
    Ok(text.to_string())
}

/// A channel name as typed: any case, surrounding whitespace trimmed.
pub fn parse_channel(text: &str) -> Result<crate::model::Channel, String> {
    text.parse()
        .map_err(|err: crate::model::UnknownChannel| err.to_string())
}

/// A value parsed by our own function (any case, trimmed, the spellings it allows) that
/// still tells clap, and so the shell completions and `--help`, which values there are.
#[derive(Clone)]
pub struct Listed<T> {
    parse: fn(&str) -> Result<T, String>,
    names: fn() -> Vec<&'static str>,
}

impl<T> Listed<T> {
    pub const fn new(
        parse: fn(&str) -> Result<T, String>,
        names: fn() -> Vec<&'static str>,
    ) -> Self {
        Self { parse, names }
    }
}

impl<T: Clone + Send + Sync + 'static> clap::builder::TypedValueParser for Listed<T> {
    type Value = T;

    fn parse_ref(
        &self,
        cmd: &clap::Command,
        arg: Option<&clap::Arg>,
        value: &std::ffi::OsStr,
    ) -> Result<T, clap::Error> {
        let text = value.to_str().ok_or_else(|| {
            clap::Error::raw(
                clap::error::ErrorKind::InvalidUtf8,
                "the value is not UTF-8\n",
            )
            .with_cmd(cmd)
        })?;
        (self.parse)(text).map_err(|why| {
            let name = arg
                .map(|a| a.get_id().to_string())
                .unwrap_or_else(|| "value".into());
            let names = (self.names)();
            // Our parsers usually list the values themselves.
            let listed = names
                .iter()
                .all(|n| why.to_lowercase().contains(&n.to_lowercase()));
            let hint = if listed {
                String::new()
            } else {
                format!(" (one of: {})", names.join(", "))
            };
            clap::Error::raw(
                clap::error::ErrorKind::InvalidValue,
                format!(
                    "invalid {name} {:?}: {why}{hint}\n",
                    crate::render::sanitize::clean(text)
                ),
            )
            .with_cmd(cmd)
        })
    }

    fn possible_values(
        &self,
    ) -> Option<Box<dyn Iterator<Item = clap::builder::PossibleValue> + '_>> {
        Some(Box::new(
            (self.names)()
                .into_iter()
                .map(clap::builder::PossibleValue::new),
        ))
    }
}

pub fn channel_names() -> Vec<&'static str> {
    vec!["email", "slack", "pagerduty"]
}

/// `--channel`/`--channels`: completed and listed, parsed in any case.
pub fn channel() -> Listed<crate::model::Channel> {
    Listed::new(parse_channel, channel_names)
}

/// A request deadline, for clap: see [`crate::clock::parse_deadline`].
pub fn parse_deadline(text: &str) -> Result<std::time::Duration, String> {
    crate::clock::parse_deadline(text)
}

pub fn parse_zone(text: &str) -> Result<Zone, String> {
    Zone::parse(text)
}

/// A threshold or a lease in seconds: a finite number above 0 (a NaN would make every
/// comparison with it false, so a check against it would never fire).
pub fn parse_positive_seconds(text: &str) -> Result<f64, String> {
    match text.trim().parse::<f64>() {
        Ok(seconds) if seconds.is_finite() && seconds > 0.0 => Ok(seconds),
        _ => Err(format!("{text:?}: a number of seconds above 0")),
    }
}

/// A length of time in the one grammar every duration flag reads: `90s`, `2m`, `1h30m`,
/// `2d`, `1w`, or plain seconds.
pub fn parse_duration(text: &str) -> Result<f64, String> {
    let text = text.trim();
    let seconds = text
        .parse::<f64>()
        .ok()
        .or_else(|| crate::clock::parse_duration(text))
        .ok_or_else(|| format!("{text:?}: expected a duration such as 90s, 2m, 1h30m or 2d"))?;
    if seconds.is_finite() && seconds >= 0.0 {
        Ok(seconds)
    } else {
        Err(format!("{text:?}: a duration is 0 or more"))
    }
}

/// A margin or a gap (`--clock-skew`, `--max-log-gap`): a duration of at most a day.
pub fn parse_span(text: &str) -> Result<f64, String> {
    let seconds = parse_duration(text)?;
    if seconds <= 86_400.0 {
        Ok(seconds)
    } else {
        Err(format!("{:?}: between 0s and 24h", text.trim()))
    }
}

/// A span that must be more than nothing for its flag to mean anything
/// (`--max-log-gap`, `--provider-timeout`, `--quiet-after`): at least a second, at most a
/// day. With 0 every second between two lines would be a hole, every lookup out of time
/// before it began, and an incident whose last lease loss came a second ago not happening.
pub fn parse_some_span(text: &str) -> Result<f64, String> {
    let seconds = parse_span(text)?;
    if seconds >= 1.0 {
        Ok(seconds)
    } else {
        Err(format!("{:?}: at least 1s", text.trim()))
    }
}

/// `--rate`: `200/s`, `12/m`, `100/h`, `1/d` or a bare number (a second), within the
/// bounds a pace keeps.
pub fn parse_rate(text: &str) -> Result<Rate, String> {
    Rate::parse(text)
}

/// `--spread`: a duration of the one grammar (`90s`, `30m`, `2h`, `2d`), at most a week.
pub fn parse_spread(text: &str) -> Result<Pace, String> {
    pace::spread(parse_duration(text)?).map_err(|why| format!("{:?}: {why}", text.trim()))
}

pub fn parse_starttls(text: &str) -> Result<StartTls, String> {
    match text.to_ascii_lowercase().as_str() {
        "never" | "off" => Ok(StartTls::Never),
        "opportunistic" | "auto" => Ok(StartTls::Opportunistic),
        "required" | "on" => Ok(StartTls::Required),
        _ => Err(format!(
            "{text:?}: expected never, opportunistic or required"
        )),
    }
}

/// `--branch`: resolve, verify or replay, any case.
pub fn parse_branch(text: &str) -> Result<Branch, String> {
    text.parse()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_read_as_people_write_them_and_nonsense_is_refused() {
        let per_second = |text: &str| parse_rate(text).map(Rate::per_second);
        assert_eq!(per_second("200/s"), Ok(200.0));
        assert_eq!(per_second("200"), Ok(200.0));
        assert_eq!(per_second("30/m"), Ok(0.5));
        assert_eq!(per_second(" 3600 / h "), Ok(1.0));
        assert_eq!(per_second("1/d"), Ok(1.0 / 86_400.0));
        for bad in [
            "0/s", "-1/s", "fast", "1/w", "NaN", "inf/s", "20000/s", "1e-300", "0.5/d",
        ] {
            assert!(parse_rate(bad).is_err(), "{bad}");
        }
        assert_eq!(parse_spread("2d"), Ok(Pace::Spread(172_800.0)));
        assert!(parse_spread("8d").is_err());
    }

    #[test]
    fn zones_and_spans_parse_or_say_why() {
        assert_eq!(parse_zone("local"), Ok(Zone::Local));
        assert_eq!(parse_zone("UTC"), Ok(Zone::Fixed(0)));
        assert_eq!(parse_zone("+02:00"), Ok(Zone::Fixed(7200)));
        assert_eq!(parse_zone("-05:30"), Ok(Zone::Fixed(-19800)));
        assert_eq!(
            parse_zone("Europe/Paris"),
            Ok(Zone::Named("Europe/Paris".into()))
        );
        assert!(parse_zone("Europe/Nowhere").is_err());
        assert!(parse_zone("+25:00").is_err());
        assert_eq!(parse_span("2m"), Ok(120.0));
        assert_eq!(parse_span("90"), Ok(90.0));
        assert_eq!(parse_span("0.5s"), Ok(0.5));
        assert!(parse_span("2d").is_err());
        assert!(parse_span("-1s").is_err());
        assert_eq!(parse_some_span("1s"), Ok(1.0));
        assert_eq!(parse_some_span("5m"), Ok(300.0));
        for nothing in ["0", "0s", "0.5s"] {
            assert!(parse_some_span(nothing).is_err_and(|e| e.contains("at least 1s")));
        }
        assert!(parse_some_span("2d").is_err());
    }

    #[test]
    fn ids_are_bounded_and_printable() {
        assert!(parse_id("n-01a2290d4b65729fba573b68b0fccf93").is_ok());
        assert!(parse_id("").is_err());
        assert!(parse_id(&"n".repeat(257)).is_err());
        assert!(parse_id("n-1\x1b[2J").is_err());
        assert!(parse_id("n-1\nrm").is_err());
        assert!(parse_id("n-1\u{202e}").is_err());
        assert!(parse_id(" n-1").is_err());
        // A store may hold any text as an id: one with inner spaces can be named.
        assert!(parse_id("n 1").is_ok());
    }
}
