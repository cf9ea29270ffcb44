//! Values as typed on the command line, parsed into types before any command runs.

use crate::model::MAX_ID_BYTES;

/// An id argument: 1 to 256 bytes, no whitespace or control characters.
pub fn parse_id(text: &str) -> Result<String, String> {
    if text.is_empty() {
        return Err("an id cannot be empty".into());
    }
    if text.len() > MAX_ID_BYTES {
        return Err(format!(
            "an id is at most {MAX_ID_BYTES} bytes; this one is {}",
            text.len()
        ));
    }
    if text.chars().any(|c| c.is_control() || c.is_whitespace()) {
        return Err("an id holds no spaces or control characters".into());
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_bounded_and_printable() {
        assert!(parse_id("n-01a2290d4b65729fba573b68b0fccf93").is_ok());
        assert!(parse_id("").is_err());
        assert!(parse_id(&"n".repeat(257)).is_err());
        assert!(parse_id("n-1\x1b[2J").is_err());
        assert!(parse_id("n 1").is_err());
    }
}
