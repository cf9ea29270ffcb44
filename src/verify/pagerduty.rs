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
    /// An incident that groups alerts carries no incident_key of its own: the list names
    /// it because one of its alerts has the key asked for. Its alerts with that key, as
    /// its alert list gave them, or why they could not be read.
    #[serde(skip)]
    pub grouped: Option<Result<Vec<Alert>, String>>,
}

/// One alert of an incident that groups alerts, as much of it as the evidence names.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Alert {
    #[serde(default)]
    pub id: Option<String>,
    /// The dedup key of the trigger that made it.
    #[serde(default)]
    pub alert_key: Option<String>,
    #[serde(default)]
    pub status: Option<String>,
    /// RFC 3339.
    #[serde(default)]
    pub created_at: Option<String>,
}

impl Alert {
    fn describe(&self) -> String {
        let clean = crate::render::sanitize::cleaned;
        format!(
            "alert {} created {}, status {}",
            clean(self.id.as_deref().unwrap_or("(no id)")),
            clean(self.created_at.as_deref().unwrap_or("(no time)")),
            clean(self.status.as_deref().unwrap_or("unknown"))
        )
    }
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
    /// `incident P123 (#7) created ..., status ...`, for evidence; an incident that groups
    /// alerts names its alerts with the key too.
    pub fn describe(&self) -> String {
        let clean = crate::render::sanitize::cleaned;
        let alerts = match &self.grouped {
            Some(Ok(alerts)) if !alerts.is_empty() => format!(
                " (it groups alerts; with the key: {})",
                alerts
                    .iter()
                    .map(Alert::describe)
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            _ => String::new(),
        };
        format!(
            "incident {}{} created {}, status {}{alerts}",
            clean(self.id.as_deref().unwrap_or("(no id)")),
            self.incident_number
                .map(|n| format!(" (#{n})"))
                .unwrap_or_default(),
            clean(self.created_at.as_deref().unwrap_or("(no time)")),
            clean(self.status.as_deref().unwrap_or("unknown"))
        )
    }

    /// When the trigger it proves reached PagerDuty: its alert's time for an incident
    /// that groups alerts (the first alert with the key), else its own.
    pub fn proof_time(&self) -> Option<f64> {
        let alert = match &self.grouped {
            Some(Ok(alerts)) => alerts.iter().find_map(|a| a.created_at.as_deref()),
            _ => None,
        };
        alert.or(self.created_at.as_deref()).and_then(parse_time)
    }

    fn open(&self) -> bool {
        matches!(self.status.as_deref(), Some("triggered" | "acknowledged"))
    }

    /// Whether it holds a trigger with dedup key `key`: as its own key, or as the key of
    /// an alert it groups.
    fn holds(&self, key: &str) -> bool {
        self.incident_key.as_deref() == Some(key)
            || matches!(&self.grouped, Some(Ok(alerts)) if !alerts.is_empty())
    }

    /// Whether a trigger with `key` sent now folds into it: it is open under that key,
    /// or it groups an alert with that key that is still open.
    fn open_for(&self, key: &str) -> bool {
        if self.incident_key.as_deref() == Some(key) {
            return self.open();
        }
        matches!(&self.grouped, Some(Ok(alerts))
            if alerts.iter().any(|a| a.status.as_deref() == Some("triggered")))
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
        None => return grouped_standing(incident, key, (from, to), now),
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

/// How an incident that groups alerts (so carries no incident_key) bears on a trigger
/// with dedup key `key` inside `[from, to]`: by its alerts with that key, each read as an
/// incident of its own would be.
fn grouped_standing(incident: &Incident, key: &str, (from, to): (f64, f64), now: f64) -> Standing {
    let what = incident.describe();
    let alerts = match &incident.grouped {
        None => {
            return Standing::Doubt(format!(
                "{what} carries no incident_key, and its alerts were not read: the answer is not about this key"
            ));
        }
        Some(Err(why)) => {
            return Standing::Doubt(format!(
                "{what} carries no incident_key, and the alerts it may group could not be read, so whether the answer is about this key cannot be told: {why}"
            ));
        }
        Some(Ok(alerts)) => alerts,
    };
    let mut doubts = Vec::new();
    for alert in alerts
        .iter()
        .filter(|a| a.alert_key.as_deref() == Some(key))
    {
        let as_incident = Incident {
            id: incident.id.clone(),
            incident_number: incident.incident_number,
            incident_key: alert.alert_key.clone(),
            status: alert.status.clone(),
            created_at: alert.created_at.clone(),
            last_status_change_at: None,
            html_url: None,
            service: None,
            grouped: None,
        };
        match standing(&as_incident, key, (from, to), now) {
            Standing::Doubt(why) => doubts.push(format!("{}: {why}", alert.describe())),
            found => return found,
        }
    }
    if doubts.is_empty() {
        return Standing::Doubt(format!(
            "{what} carries no incident_key, and no alert it groups has dedup key {key}: the answer is not about this key"
        ));
    }
    Standing::Doubt(format!(
        "{what} carries no incident_key; of the alerts it groups with the key, {}",
        doubts.join("; ")
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

/// One page of an incident's alert list, in the same documented, complete shape.
#[derive(Deserialize)]
struct AlertPage {
    alerts: Vec<Alert>,
    more: bool,
}

/// A page of a list the API pages by offset.
trait Listing: serde::de::DeserializeOwned {
    type Item;
    /// What the list holds, for errors.
    const WHAT: &'static str;
    fn take(self) -> (Vec<Self::Item>, bool);
    fn id(item: &Self::Item) -> Option<&String>;
}

impl Listing for Page {
    type Item = Incident;
    const WHAT: &'static str = "incidents";
    fn take(self) -> (Vec<Incident>, bool) {
        (self.incidents, self.more)
    }
    fn id(item: &Incident) -> Option<&String> {
        item.id.as_ref()
    }
}

impl Listing for AlertPage {
    type Item = Alert;
    const WHAT: &'static str = "alerts";
    fn take(self) -> (Vec<Alert>, bool) {
        (self.alerts, self.more)
    }
    fn id(item: &Alert) -> Option<&String> {
        item.id.as_ref()
    }
}

/// Most pages read for one list: an incident key names few incidents.
const MAX_PAGES: usize = 20;
const PAGE: usize = 100;
/// Most incidents that group alerts whose alerts are read for one key.
const MAX_GROUPED: usize = 10;

/// Every incident the API gives for `key`, over all dates, with the alerts of those that
/// group alerts; which of them are proof is for [`standing`] to say.
pub fn incidents(client: &Client, config: &Api, key: &str) -> Result<Vec<Incident>, String> {
    let base = config.api_url.trim_end_matches('/');
    let deadline = http::Deadline::after(config.timeout);
    let url = format!("{base}/incidents");
    let query = [
        ("incident_key", key.to_string()),
        ("date_range", "all".to_string()),
    ];
    let mut found = every_page::<Page>(client, config, &url, &query, &deadline)?;
    let mut asked = 0;
    for incident in found.iter_mut().filter(|i| i.incident_key.is_none()) {
        // The id goes into the path: only an id of the API's own shape is asked about.
        let id = incident.id.clone().filter(|id| {
            (1..=64).contains(&id.len()) && id.bytes().all(|b| b.is_ascii_alphanumeric())
        });
        incident.grouped = Some(match id {
            None => Err("its id is not one the API can be asked about".into()),
            Some(_) if asked >= MAX_GROUPED => Err(format!(
                "more than {MAX_GROUPED} incidents group alerts for one key; not all were read"
            )),
            Some(id) => {
                asked += 1;
                let url = format!("{base}/incidents/{id}/alerts");
                let query = [("alert_key", key.to_string())];
                every_page::<AlertPage>(client, config, &url, &query, &deadline).map(|alerts| {
                    alerts
                        .into_iter()
                        .filter(|a| a.alert_key.as_deref() == Some(key))
                        .collect()
                })
            }
        });
    }
    Ok(found)
}

/// Every item of the list at `url`, page after page by offset, all within `deadline`.
fn every_page<L: Listing>(
    client: &Client,
    config: &Api,
    url: &str,
    query: &[(&str, String)],
    deadline: &http::Deadline,
) -> Result<Vec<L::Item>, String> {
    let what = L::WHAT;
    let mut found: Vec<L::Item> = Vec::new();
    // The next page starts after the items this one listed, never after as many as were
    // asked for: an API that sends fewer per page than the limit asked (its own maximum
    // is lower) would otherwise have the ones between skipped, unseen. An item listed
    // twice on one page holds one place, so places are counted by id; counting too few
    // only reads some again.
    let mut offset = 0;
    for _ in 0..MAX_PAGES {
        let mut asked = query.to_vec();
        asked.extend([
            ("limit", PAGE.to_string()),
            ("offset", offset.to_string()),
            ("total", "false".to_string()),
        ]);
        let request = client
            .get(url)
            .query(&asked)
            .header("Authorization", format!("Token token={}", config.token))
            .header("Accept", "application/vnd.pagerduty+json;version=2");
        let (items, more) = http::json::<L>(request, "PagerDuty", deadline)?.take();
        let empty = items.is_empty();
        offset += places::<L>(&items).min(PAGE);
        // An item is its id: one listed again (offset paging shifts as items are added)
        // is still one item, never a second one.
        for item in items {
            let listed =
                L::id(&item).is_some_and(|id| found.iter().any(|seen| L::id(seen) == Some(id)));
            if !listed {
                found.push(item);
            }
        }
        if !more {
            return Ok(found);
        }
        if empty {
            return Err(format!(
                "PagerDuty said there were more {what} but sent an empty page: not every page could be read"
            ));
        }
    }
    Err(format!(
        "PagerDuty: more than {offset} {what} for one key, over {MAX_PAGES} pages; not all were read"
    ))
}

/// How many places of the list `page` holds at least: its items, one listed twice
/// counted once.
fn places<L: Listing>(page: &[L::Item]) -> usize {
    let mut ids = std::collections::HashSet::new();
    page.iter()
        .filter(|item| L::id(item).is_none_or(|id| ids.insert(id)))
        .count()
}

/// What a trigger with `key` sent now does, by the incidents PagerDuty lists for it:
/// merged into the one open, or a new incident (a new page).
pub fn replay_outcome(client: &Client, config: &Api, key: &str) -> String {
    let listed = match incidents(client, config, key) {
        Ok(listed) => listed,
        Err(err) => return format!("cannot tell whether it merges or pages again: {err}"),
    };
    if let Some(Err(why)) = listed
        .iter()
        .find_map(|i| i.grouped.as_ref().filter(|g| g.is_err()))
    {
        return format!("cannot tell whether it merges or pages again: {why}");
    }
    let mine: Vec<&Incident> = listed.iter().filter(|i| i.holds(key)).collect();
    match mine.iter().find(|i| i.open_for(key)) {
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
