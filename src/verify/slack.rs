//! Slack's `conversations.history`, read with message metadata for one channel and a
//! window of time, page by page. Incoming webhooks cannot be read back; the adapter
//! tags each message it posts with metadata (`event_type: uns_notification`, the
//! Idempotency-Key in its payload), and that is what is looked for here.

use super::http::{self, Client};
use serde::Deserialize;
use serde_json::Value;

use crate::runtime::adapters::webhook::SLACK_EVENT_TYPE as EVENT_TYPE;

/// Slack's Web API, unless the operator names another.
pub const DEFAULT_API_URL: &str = "https://slack.com/api";

#[derive(Debug, Clone)]
pub struct Api {
    /// `https://slack.com/api` unless set (`UNS_SLACK_API_URL`).
    pub api_url: String,
    /// `UNS_SLACK_BOT_TOKEN` (`channels:history`); never printed.
    pub token: String,
    /// The channel the webhook posts to (`UNS_SLACK_CHANNEL`, an id such as C0123456).
    pub channel: String,
    /// The webhook's bot or app id (`UNS_SLACK_BOT_ID`), when known: a message by anyone
    /// else is not proof.
    pub bot_id: Option<String>,
    /// One lookup's deadline, over all its pages and retries (`--provider-timeout`).
    pub timeout: std::time::Duration,
}

/// A message carrying our metadata.
#[derive(Debug, Clone, PartialEq)]
pub struct Tagged {
    pub ts: String,
    pub idempotency_key: String,
    pub bot_id: Option<String>,
    pub app_id: Option<String>,
    pub user: Option<String>,
}

impl Tagged {
    /// Whether the bot or app `id` posted it.
    pub fn posted_by(&self, id: &str) -> bool {
        self.bot_id.as_deref() == Some(id) || self.app_id.as_deref() == Some(id)
    }

    /// Who the message says posted it.
    pub fn poster(&self) -> Option<&str> {
        self.bot_id
            .as_deref()
            .or(self.app_id.as_deref())
            .or(self.user.as_deref())
    }
}

/// A Slack `ts` (`1700000000.123456`) as unix seconds; nothing else is one.
pub fn parse_ts(ts: &str) -> Option<f64> {
    let (seconds, micros) = ts.split_once('.')?;
    let digits = |t: &str| !t.is_empty() && t.len() <= 12 && t.bytes().all(|b| b.is_ascii_digit());
    if !digits(seconds) || !digits(micros) {
        return None;
    }
    ts.parse().ok()
}

/// What reading a window found.
#[derive(Debug, Clone, PartialEq)]
pub struct Window {
    pub tagged: Vec<Tagged>,
    /// Messages that carry our metadata's event type but no Idempotency-Key that can be
    /// read: any one of them may be the post an attempt made.
    pub unreadable: Vec<Unreadable>,
    /// Messages read in all.
    pub read: usize,
}

/// A message tagged as one of ours whose Idempotency-Key cannot be read.
#[derive(Debug, Clone, PartialEq)]
pub struct Unreadable {
    /// Its ts as written (JSON, when it is not a string).
    pub ts: String,
}

impl Window {
    /// Adds a page's messages, once each.
    fn take(
        &mut self,
        messages: &[Value],
        seen: &mut std::collections::HashSet<String>,
    ) -> Result<(), String> {
        if messages.iter().any(|message| !message.is_object()) {
            return Err(
                "Slack said ok, but its history page lists something that is not a message (not a JSON object)".into(),
            );
        }
        // A message is its ts in the channel: one listed again (a page repeated, a
        // cursor that stepped back) is still one message, never a second copy. Only a
        // ts that is a string names a message: two without one are two messages.
        for message in messages {
            if let Some(ts) = message["ts"].as_str()
                && !seen.insert(ts.to_string())
            {
                continue;
            }
            self.read += 1;
            match tagged(message) {
                Tag::Ours(found) => self.tagged.push(found),
                Tag::Unreadable(found) => self.unreadable.push(found),
                Tag::Other => {}
            }
        }
        Ok(())
    }

    /// Why no absence inside `[from, to]` can be proven from this window: each message
    /// tagged as ours there (or at a time that cannot be read) whose key cannot be read.
    pub fn doubts_within(&self, (from, to): (f64, f64)) -> Vec<String> {
        self.unreadable
            .iter()
            .filter(|message| parse_ts(&message.ts).is_none_or(|at| at >= from && at <= to))
            .map(|message| {
                format!(
                    "message ts {} carries unsctl's metadata but no Idempotency-Key that can be read: it may be this attempt's post",
                    crate::render::sanitize::clean(&message.ts)
                )
            })
            .collect()
    }
}

/// What every answer of the Web API says first: whether it is an answer at all.
#[derive(Deserialize)]
struct Said {
    ok: bool,
    #[serde(default)]
    error: Option<String>,
}

/// A page of `conversations.history` in its documented, complete shape: a `messages`
/// array and a boolean `has_more`. Neither has a default, so `{"ok":true}` alone, or
/// `messages: null`, is no page, never an empty last one.
#[derive(Deserialize)]
struct Page {
    messages: Vec<Value>,
    has_more: bool,
    #[serde(default)]
    response_metadata: Option<Cursor>,
}

#[derive(Deserialize)]
struct Cursor {
    #[serde(default)]
    next_cursor: Option<String>,
}

const MAX_PAGES: usize = 50;
const PAGE: usize = 200;

/// Every message of the channel between `oldest` and `latest` (unix seconds) that
/// carries our metadata.
pub fn history(client: &Client, config: &Api, oldest: f64, latest: f64) -> Result<Window, String> {
    let url = format!(
        "{}/conversations.history",
        config.api_url.trim_end_matches('/')
    );
    let mut window = Window {
        tagged: Vec::new(),
        unreadable: Vec::new(),
        read: 0,
    };
    let deadline = http::Deadline::after(config.timeout);
    let mut cursor: Option<String> = None;
    let mut seen = std::collections::HashSet::new();
    for _ in 0..MAX_PAGES {
        let mut query = vec![
            ("channel", config.channel.clone()),
            ("oldest", format!("{oldest:.6}")),
            ("latest", format!("{latest:.6}")),
            ("inclusive", "true".to_string()),
            ("include_all_metadata", "true".to_string()),
            ("limit", PAGE.to_string()),
        ];
        if let Some(cursor) = &cursor {
            query.push(("cursor", cursor.clone()));
        }
        let request = client.get(&url).query(&query).bearer_auth(&config.token);
        let answer: serde_json::Map<String, Value> = http::json(request, "Slack", &deadline)?;
        let said = Said::deserialize(&answer).map_err(|err| {
            format!("Slack answered with a body that is not its API's answer: {err}")
        })?;
        if !said.ok {
            return Err(format!(
                "Slack: {}",
                crate::render::sanitize::clean(
                    said.error.as_deref().unwrap_or("the answer was not ok")
                )
            ));
        }
        let page = Page::deserialize(&answer).map_err(|err| {
            format!("Slack said ok, but its answer is not a complete history page: {err}")
        })?;
        let empty = page.messages.is_empty();
        window.take(&page.messages, &mut seen)?;
        cursor = page
            .response_metadata
            .and_then(|m| m.next_cursor)
            .filter(|c| !c.is_empty());
        if !page.has_more {
            return Ok(window);
        }
        if cursor.is_none() {
            return Err(
                "Slack said there were more messages but gave no cursor to read them: not every page could be read".into(),
            );
        }
        if empty {
            return Err(
                "Slack said there were more messages but sent an empty page: not every page could be read".into(),
            );
        }
    }
    Err(format!(
        "Slack: more than {} messages in the window; not all were read",
        MAX_PAGES * PAGE
    ))
}

/// What a message's metadata says of it.
enum Tag {
    Ours(Tagged),
    Unreadable(Unreadable),
    Other,
}

fn tagged(message: &Value) -> Tag {
    let metadata = &message["metadata"];
    if metadata["event_type"] != EVENT_TYPE {
        return Tag::Other;
    }
    let text = |field: &Value| field.as_str().map(str::to_string);
    // A ts that is not a string is kept as written, so the message is named, not lost.
    let ts = text(&message["ts"]).unwrap_or_else(|| message["ts"].to_string());
    let Some(key) = metadata["event_payload"]["idempotency_key"].as_str() else {
        return Tag::Unreadable(Unreadable { ts });
    };
    Tag::Ours(Tagged {
        ts,
        idempotency_key: key.to_string(),
        bot_id: text(&message["bot_id"]),
        app_id: text(&message["app_id"]),
        user: text(&message["user"]),
    })
}

/// Whether `message` is proof that a post with Idempotency-Key `key` reached the channel
/// by the rules of evidence (DESIGN §7): its exact key, a `ts` that is a Slack time inside
/// `[from, to]`, and, where the webhook's bot is known, posted by it. Its time, or why not.
pub fn proof(
    message: &Tagged,
    key: &str,
    config: &Api,
    (from, to): (f64, f64),
) -> Result<f64, String> {
    let clean = crate::render::sanitize::cleaned;
    let ts = clean(&message.ts);
    if message.idempotency_key != key {
        return Err(format!("message ts {ts} carries another Idempotency-Key"));
    }
    let Some(at) = parse_ts(&message.ts) else {
        return Err(format!(
            "a message carries Idempotency-Key {key}, but its ts {ts:?} is not a Slack time"
        ));
    };
    if at < from || at > to {
        return Err(format!(
            "message ts {ts} carries Idempotency-Key {key} but was posted at {}, outside the attempt's window {} to {}",
            crate::clock::rfc3339(at),
            crate::clock::rfc3339(from),
            crate::clock::rfc3339(to)
        ));
    }
    if let Some(bot) = &config.bot_id
        && !message.posted_by(bot)
    {
        return Err(format!(
            "message ts {ts} carries Idempotency-Key {key} but was posted by {}, not the webhook's bot {}",
            clean(message.poster().unwrap_or("nobody named")),
            clean(bot)
        ));
    }
    Ok(at)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn window() -> Window {
        Window {
            tagged: Vec::new(),
            unreadable: Vec::new(),
            read: 0,
        }
    }

    fn ours(key: Value) -> Value {
        json!({"event_type": EVENT_TYPE, "event_payload": {"idempotency_key": key}})
    }

    /// A message is its ts: the same ts again is one message, but messages without a
    /// string ts are each their own, so one cannot hide another's tag.
    #[test]
    fn only_a_string_ts_makes_two_listings_one_message() {
        let mut seen = std::collections::HashSet::new();
        let mut found = window();
        let page = [
            json!({"text": "someone's"}),
            json!({"metadata": ours(json!("n-1:SLACK:1"))}),
            json!({"ts": 5, "metadata": ours(json!("n-2:SLACK:1"))}),
            json!({"ts": 5, "metadata": ours(json!("n-3:SLACK:1"))}),
            json!({"ts": "1.000001", "metadata": ours(json!("n-4:SLACK:1"))}),
        ];
        found.take(&page, &mut seen).expect("a page");
        found
            .take(
                &[json!({"ts": "1.000001", "metadata": ours(json!("n-5:SLACK:1"))})],
                &mut seen,
            )
            .expect("a page");
        let keys: Vec<&str> = found
            .tagged
            .iter()
            .map(|t| t.idempotency_key.as_str())
            .collect();
        assert_eq!(
            keys,
            ["n-1:SLACK:1", "n-2:SLACK:1", "n-3:SLACK:1", "n-4:SLACK:1"]
        );
        assert_eq!(found.read, 5);
    }

    #[test]
    fn a_tag_without_a_readable_key_is_kept_as_unreadable() {
        let mut found = window();
        let page = [
            json!({"ts": "1.000001", "metadata": ours(json!(7))}),
            json!({"ts": "2.000001", "metadata": {"event_type": EVENT_TYPE}}),
            json!({"ts": "3.000001", "metadata": {"event_type": "other", "event_payload": {}}}),
        ];
        found
            .take(&page, &mut std::collections::HashSet::new())
            .expect("a page");
        let ts: Vec<&str> = found.unreadable.iter().map(|u| u.ts.as_str()).collect();
        assert_eq!(ts, ["1.000001", "2.000001"]);
        assert_eq!(found.doubts_within((1.5, 2.5)).len(), 1);
        assert!(found.doubts_within((4.0, 5.0)).is_empty());
        let refused = found.take(&[json!("text")], &mut std::collections::HashSet::new());
        assert!(refused.is_err_and(|err| err.contains("not a message")));
    }
}
