//! PagerDuty's REST API, asked for the incidents a dedup key opened (`GET /incidents`
//! with `incident_key`), page by page, as the real API pages them.

use super::http::{self, Client};
use serde::Deserialize;

/// Where the REST API is and the token to ask it with.
#[derive(Debug, Clone)]
pub struct Config {
    /// `https://api.pagerduty.com` unless set (`UNS_PAGERDUTY_API_URL`).
    pub api_url: String,
    /// `UNS_PAGERDUTY_API_TOKEN`; never printed.
    pub token: String,
}

/// One incident, as much of it as the evidence names.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Incident {
    pub id: String,
    #[serde(default)]
    pub incident_number: Option<i64>,
    #[serde(default)]
    pub incident_key: Option<String>,
    #[serde(default)]
    pub status: Option<String>,
    /// RFC 3339.
    pub created_at: String,
    #[serde(default)]
    pub html_url: Option<String>,
}

#[derive(Deserialize)]
struct Page {
    #[serde(default)]
    incidents: Vec<Incident>,
    #[serde(default)]
    more: bool,
}

/// Most pages read for one key: an incident key names few incidents.
const MAX_PAGES: usize = 20;
const PAGE: usize = 100;

/// Every incident whose `incident_key` is `key`, over all dates.
pub fn incidents(client: &Client, config: &Config, key: &str) -> Result<Vec<Incident>, String> {
    let url = format!("{}/incidents", config.api_url.trim_end_matches('/'));
    let mut found = Vec::new();
    for page in 0..MAX_PAGES {
        let query = [
            ("incident_key", key.to_string()),
            ("date_range", "all".to_string()),
            ("limit", PAGE.to_string()),
            ("offset", (page * PAGE).to_string()),
            ("total", "false".to_string()),
        ];
        let request = client
            .get(&url)
            .query(&query)
            .header("Authorization", format!("Token token={}", config.token))
            .header("Accept", "application/vnd.pagerduty+json;version=2");
        let body: Page = http::json(request, "PagerDuty")?;
        // The filter is the server's; a stray incident of another key is not evidence.
        found.extend(
            body.incidents
                .into_iter()
                .filter(|i| i.incident_key.as_deref().is_none_or(|k| k == key)),
        );
        if !body.more {
            return Ok(found);
        }
    }
    Err(format!(
        "PagerDuty: more than {} incidents for one key; not all were read",
        MAX_PAGES * PAGE
    ))
}
