//! PagerDuty's REST API, asked for the incidents a dedup key opened (`GET /incidents`
//! with `incident_key`), page by page, as the real API pages them.

use super::http::{self, Client};
use serde::Deserialize;

/// PagerDuty's REST API, unless the operator names another.
pub const DEFAULT_API_URL: &str = "https://api.pagerduty.com";

/// Where the REST API is, the token to ask it with, and how long one lookup may take.
#[derive(Debug, Clone)]
pub struct Api {
    /// `https://api.pagerduty.com` unless set (`UNS_PAGERDUTY_API_URL`).
    pub api_url: String,
    /// `UNS_PAGERDUTY_API_TOKEN`; never printed.
    pub token: String,
    /// One lookup's deadline, over all its pages and retries (`--provider-timeout`).
    pub timeout: std::time::Duration,
}

/// One incident, as much of it as the evidence names. Every field is optional here, so
/// that an answer missing one is named for what it lacks rather than refused whole.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Incident {
    #[serde(default)]
    pub id: Option<String>,
    #[serde(default)]
    pub incident_number: Option<i64>,
    #[serde(default)]
    pub incident_key: Option<String>,
    #[serde(default)]
    pub status: Option<String>,
    /// RFC 3339.
    #[serde(default)]
    pub created_at: Option<String>,
    /// RFC 3339: when it was acknowledged or resolved last.
    #[serde(default)]
    pub last_status_change_at: Option<String>,
    #[serde(default)]
    pub html_url: Option<String>,
    /// The service it was opened on: who was paged.
    #[serde(default)]
    pub service: Option<Reference>,
}

/// A reference to another PagerDuty object, as the API nests one.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Reference {
    #[serde(default)]
    pub id: Option<String>,
    #[serde(default)]
    pub summary: Option<String>,
}

impl Incident {
    /// `incident P123 (#7) created ..., status ...`, for evidence.
    pub fn describe(&self) -> String {
        let clean = |t: &str| crate::render::sanitize::clean(t).into_owned();
        format!(
            "incident {}{} created {}, status {}",
            clean(self.id.as_deref().unwrap_or("(no id)")),
            self.incident_number
                .map(|n| format!(" (#{n})"))
                .unwrap_or_default(),
            clean(self.created_at.as_deref().unwrap_or("(no time)")),
            clean(self.status.as_deref().unwrap_or("unknown"))
        )
    }

    fn open(&self) -> bool {
        matches!(self.status.as_deref(), Some("triggered" | "acknowledged"))
    }
}

/// What one incident says about an attempt's window.
#[derive(Debug, Clone, PartialEq)]
pub enum Standing {
    /// Opened by a trigger inside the window.
    Opened,
    /// Opened before the window and open through all of it: a trigger inside the window
    /// was folded into it.
    MergedInto,
    /// Not proof, and not nothing either: why.
    Doubt(String),
}

/// An RFC 3339 time and nothing else (no durations, no unix seconds).
pub fn parse_time(text: &str) -> Option<f64> {
    // Digits first: a duration or a word jiff might take in some other sense is no time.
    if !text.starts_with(|c: char| c.is_ascii_digit()) {
        return None;
    }
    let at: jiff::Timestamp = text.parse().ok()?;
    Some(at.as_nanosecond() as f64 / 1e9)
}

/// How `incident` bears on a trigger with dedup key `key` inside `[from, to]`.
pub fn standing(incident: &Incident, key: &str, (from, to): (f64, f64), now: f64) -> Standing {
    let what = incident.describe();
    match incident.incident_key.as_deref() {
        None => {
            return Standing::Doubt(format!(
                "{what} carries no incident_key: the answer is not about this key"
            ));
        }
        Some(other) if other != key => {
            return Standing::Doubt(format!(
                "{what} has incident_key {:?}, not {key}: the answer is not about this key",
                crate::render::sanitize::clean(other)
            ));
        }
        Some(_) => {}
    }
    let Some(created) = incident.created_at.as_deref().and_then(parse_time) else {
        return Standing::Doubt(format!("{what}: created_at is not an RFC 3339 time"));
    };
    if created > now + 1.0 {
        return Standing::Doubt(format!("{what}: created in the future, so not a record"));
    }
    // PagerDuty stamps `created_at` to the second: one of the window's first second
    // counts as the window's.
    if created + 1.0 >= from && created <= to {
        return Standing::Opened;
    }
    if created > to {
        return Standing::Doubt(format!(
            "{what}: created after the attempt's window, by a later trigger"
        ));
    }
    // Opened before the window: a trigger inside it was merged if it stayed open.
    let changed = incident
        .last_status_change_at
        .as_deref()
        .and_then(parse_time);
    let resolved = incident.status.as_deref() == Some("resolved");
    if incident.open() || (resolved && changed.is_some_and(|at| at >= to)) {
        return Standing::MergedInto;
    }
    Standing::Doubt(format!(
        "only {what}, opened before the attempt's window and not shown open through it: whether this attempt's trigger reached PagerDuty cannot be told"
    ))
}

/// One page of the incident list in its documented, complete shape: an `incidents`
/// array and a boolean `more`. Neither has a default, so a body missing either (`{}`, an
/// error object, another API's answer) is no page at all, never an empty last one.
#[derive(Deserialize)]
struct Page {
    incidents: Vec<Incident>,
    more: bool,
}

/// Most pages read for one key: an incident key names few incidents.
const MAX_PAGES: usize = 20;
const PAGE: usize = 100;

/// Every incident the API gives for `key`, over all dates; which of them are proof is
/// for [`standing`] to say.
pub fn incidents(client: &Client, config: &Api, key: &str) -> Result<Vec<Incident>, String> {
    let url = format!("{}/incidents", config.api_url.trim_end_matches('/'));
    let deadline = http::Deadline::after(config.timeout);
    let mut found = Vec::new();
    // The next page starts after the incidents this one listed, never after as many as
    // were asked for: an API that sends fewer per page than the limit asked (its own
    // maximum is lower) would otherwise have the ones between skipped, unseen. An
    // incident listed twice on one page holds one place, so places are counted by id;
    // counting too few only reads some again.
    let mut offset = 0;
    for _ in 0..MAX_PAGES {
        let query = [
            ("incident_key", key.to_string()),
            ("date_range", "all".to_string()),
            ("limit", PAGE.to_string()),
            ("offset", offset.to_string()),
            ("total", "false".to_string()),
        ];
        let request = client
            .get(&url)
            .query(&query)
            .header("Authorization", format!("Token token={}", config.token))
            .header("Accept", "application/vnd.pagerduty+json;version=2");
        let body: Page = http::json(request, "PagerDuty", &deadline)?;
        let empty = body.incidents.is_empty();
        offset += places(&body.incidents).min(PAGE);
        // An incident is its id: one listed again (offset paging shifts as incidents
        // open) is still one incident, never a second page.
        for incident in body.incidents {
            let listed =
                incident.id.is_some() && found.iter().any(|seen: &Incident| seen.id == incident.id);
            if !listed {
                found.push(incident);
            }
        }
        if !body.more {
            return Ok(found);
        }
        if empty {
            return Err(
                "PagerDuty said there were more incidents but sent an empty page: not every page could be read".into(),
            );
        }
    }
    Err(format!(
        "PagerDuty: more than {offset} incidents for one key, over {MAX_PAGES} pages; not all were read"
    ))
}

/// How many places of the list `page` holds at least: its incidents, one listed twice
/// counted once.
fn places(page: &[Incident]) -> usize {
    let mut ids = std::collections::HashSet::new();
    page.iter()
        .filter(|incident| incident.id.as_ref().is_none_or(|id| ids.insert(id)))
        .count()
}

/// What a trigger with `key` sent now does, by the incidents PagerDuty lists for it:
/// merged into the one open, or a new incident (a new page).
pub fn replay_outcome(client: &Client, config: &Api, key: &str) -> String {
    let listed = match incidents(client, config, key) {
        Ok(listed) => listed,
        Err(err) => return format!("cannot tell whether it merges or pages again: {err}"),
    };
    let mine: Vec<&Incident> = listed
        .iter()
        .filter(|i| i.incident_key.as_deref() == Some(key))
        .collect();
    match mine.iter().find(|i| i.open()) {
        Some(open) => format!(
            "merged into open incident {}{}: no new page",
            crate::render::sanitize::clean(open.id.as_deref().unwrap_or("(no id)")),
            open.incident_number
                .map(|n| format!(" (#{n})"))
                .unwrap_or_default()
        ),
        None if mine.is_empty() => "opens a new incident: no incident under its dedup key".into(),
        None => format!(
            "opens a new incident (a new page): its {} resolved",
            if mine.len() == 1 {
                "incident was".to_string()
            } else {
                format!("{} incidents were", mine.len())
            }
        ),
    }
}
