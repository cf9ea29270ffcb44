//! The `/` filter: the selection of DESIGN §5 written as words
//! (`channel:slack error:"5.1.1" !error:"HTTP 400" branch:verify since:1h`), read into
//! the same `SelectArgs` the command line fills, and checked by the same code.

use crate::cli::args::SelectArgs;
use crate::store::Selection;
use crate::triage::Branch;

/// A filter as typed, and what it selects.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Filter {
    pub text: String,
    pub selection: Selection,
    pub branch: Option<Branch>,
}

/// The words a filter knows, for the help and the error.
pub const KEYS: &str =
    "channel: !channel: error: !error: code: branch: since: until: !id: (a bare word is error:)";

impl Filter {
    /// Reads `text`; an unknown key, a bad value or an unclosed quote is an error that
    /// says which.
    pub fn parse(text: &str) -> Result<Self, String> {
        let mut args = SelectArgs::default();
        let mut branch = None;
        for (negated, key, value) in words(text)? {
            match (negated, key.to_ascii_lowercase().as_str()) {
                (false, "channel") => args.channel = Some(channel(&value)?),
                (true, "channel") => args.not_channel = Some(channel(&value)?),
                (false, "error" | "") => args.error.push(value),
                (true, "error" | "") => args.not_error.push(value),
                (false, "code") => args.error_code.push(value),
                (false, "branch") => {
                    branch = Some(
                        value
                            .parse::<Branch>()
                            .map_err(|_| format!("branch:{value}: resolve, verify or replay"))?,
                    );
                }
                (false, "since") => args.since = Some(value),
                (false, "until") => args.until = Some(value),
                (true, "id") => args.exclude.push(value),
                (negated, other) => {
                    return Err(format!(
                        "{}{other}: not a filter word; the words are {KEYS}",
                        if negated { "!" } else { "" }
                    ));
                }
            }
        }
        let selection = args.selection().map_err(|err| err.message)?;
        Ok(Self {
            text: text.trim().to_string(),
            selection,
            branch,
        })
    }
}

fn channel(value: &str) -> Result<crate::model::Channel, String> {
    value
        .trim()
        .to_ascii_uppercase()
        .parse()
        .map_err(|_| format!("channel:{value}: email, slack or pagerduty"))
}

/// `(negated, key, value)` for each word of `text`: `key:value`, `key:"a value"`, a
/// leading `!`, or a bare word (key "").
fn words(text: &str) -> Result<Vec<(bool, String, String)>, String> {
    let mut found = Vec::new();
    let mut chars = text.chars().peekable();
    loop {
        while chars.peek().is_some_and(|c| c.is_whitespace()) {
            chars.next();
        }
        let Some(&first) = chars.peek() else {
            break;
        };
        let negated = first == '!';
        if negated {
            chars.next();
        }
        let mut key = String::new();
        let mut value = String::new();
        let mut in_value = false;
        while let Some(&c) = chars.peek() {
            if c.is_whitespace() {
                break;
            }
            chars.next();
            match c {
                ':' if !in_value => in_value = true,
                '"' => {
                    let mut closed = false;
                    for c in chars.by_ref() {
                        if c == '"' {
                            closed = true;
                            break;
                        }
                        if in_value {
                            value.push(c);
                        } else {
                            key.push(c);
                        }
                    }
                    if !closed {
                        return Err("a quote is not closed".into());
                    }
                }
                c if in_value => value.push(c),
                c => key.push(c),
            }
        }
        if in_value {
            found.push((negated, key, value));
        } else {
            found.push((negated, String::new(), key));
        }
    }
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Channel;

    #[test]
    fn the_selection_reads_as_written() {
        let filter = Filter::parse(
            r#"channel:slack error:"5.1.1" !error:"HTTP 400" branch:verify code:550"#,
        )
        .expect("filter");
        assert_eq!(filter.selection.channel, Some(Channel::Slack));
        assert_eq!(filter.selection.error, ["5.1.1"]);
        assert_eq!(filter.selection.not_error, ["HTTP 400"]);
        assert_eq!(filter.selection.error_code, ["550"]);
        assert_eq!(filter.branch, Some(Branch::Verify));
        assert!(
            Filter::parse("since:1h")
                .expect("since")
                .selection
                .since
                .is_some()
        );
        assert_eq!(
            Filter::parse("timeout").expect("bare").selection.error,
            ["timeout"]
        );
        for bad in [
            "channel:fax",
            "branch:maybe",
            "colour:red",
            "error:\"open",
            "since:yesterday-ish",
        ] {
            assert!(Filter::parse(bad).is_err(), "{bad}");
        }
    }
}
