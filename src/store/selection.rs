//! Which entries and events a command reads or acts on: by channel, error text and time.
//! Both backends apply the same selection in SQL, so they return the same rows.

use crate::db::Dialect;
use crate::model::Channel;
use serde::{Deserialize, Serialize};

/// A selection, typed at the edge: times are unix seconds by now.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Selection {
    /// Entries that have this channel; events about it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub channel: Option<Channel>,
    /// Substrings of the error (any letter case), the entry's own or any channel's: any
    /// of them matches.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub error: Vec<String>,
    /// Entries dead-lettered (last changed) at or after this; events at or after it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since: Option<f64>,
    /// And before this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub until: Option<f64>,
    /// Not entries that have this channel; not events about it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_channel: Option<Channel>,
    /// Not entries whose error, their own or any channel's, contains any of these (any
    /// letter case).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub not_error: Vec<String>,
    /// Not these entries (whole ids).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub exclude: Vec<String>,
    /// Entries with a channel whose reply code, as triage classes it, is any of these
    /// (`5.1.1`, `550`, `HTTP 400`). Read from the verdict where the entries are
    /// triaged, on either backend, never sent to a route.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub error_code: Vec<String>,
    /// Not entries with a channel whose reply code is any of these (read as `error_code`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub not_error_code: Vec<String>,
    /// Substrings of the message's subject (any letter case): any of them matches.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub subject: Vec<String>,
    /// Substrings of the message's recipient (any letter case): any of them matches.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub recipient: Vec<String>,
}

/// The selection parameters of the DLQ and event routes, as their query strings spell
/// them (`Selection::query` writes them).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct SelectionQuery {
    #[serde(default)]
    pub channel: Option<String>,
    /// `error` repeats: every value, filled in by the route.
    #[serde(skip)]
    pub error: Vec<String>,
    #[serde(default)]
    pub since: Option<String>,
    #[serde(default)]
    pub until: Option<String>,
    #[serde(default)]
    pub not_channel: Option<String>,
    /// `not_error` repeats: every value, filled in by the route.
    #[serde(skip)]
    pub not_error: Vec<String>,
    /// `exclude` repeats: every value, filled in by the route (a query keeps only the
    /// first value of a key).
    #[serde(skip)]
    pub exclude: Vec<String>,
    /// `subject` repeats: every value, filled in by the route.
    #[serde(skip)]
    pub subject: Vec<String>,
    /// `to` (the recipient) repeats: every value, filled in by the route.
    #[serde(skip)]
    pub to: Vec<String>,
}

/// The longest error text a selection takes.
pub const MAX_ERROR_TEXT: usize = 1024;

/// The most error texts and codes one selection names.
pub const MAX_TEXTS: usize = 32;

/// The most ids one selection excludes.
pub const MAX_EXCLUDED: usize = 1000;

/// Why an id typed to be left out names no one notification. The CLI's `--exclude` and
/// the API's `exclude` refuse it alike, never passing it over.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NotExcluded {
    /// No id starts with it: an exclusion that leaves out nothing is a mistake.
    Nothing,
    /// Several do.
    Several(Vec<String>),
}

/// The candidates a refusal of an ambiguous exclusion names.
pub const EXCLUDED_SHOWN: usize = 10;

impl NotExcluded {
    /// The refusal of `typed`, given as `given` (`--exclude`, `exclude`), among the ids
    /// `what` names (`DLQ entry's`).
    pub fn refusal(&self, given: &str, typed: &str, what: &str) -> String {
        use crate::render::sanitize::clean;
        match self {
            NotExcluded::Nothing => {
                format!("{given} {}: no {what} id starts with it", clean(typed))
            }
            NotExcluded::Several(many) => format!(
                "{given} {} is ambiguous: it starts {}",
                clean(typed),
                many.iter()
                    .take(EXCLUDED_SHOWN)
                    .map(|id| clean(id).into_owned())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        }
    }
}

/// The id an exclusion typed as `typed` leaves out, among `found`, the ids that start
/// with it (a few past one suffice): a whole id names itself, a prefix the one id it
/// starts.
pub fn excluded_id(typed: &str, found: &[String]) -> Result<String, NotExcluded> {
    if found.iter().any(|id| id == typed) {
        return Ok(typed.to_string());
    }
    match found {
        [one] => Ok(one.clone()),
        [] => Err(NotExcluded::Nothing),
        many => Err(NotExcluded::Several(many.to_vec())),
    }
}

/// Why a text filter as given cannot stand: empty, or only spaces. Every text holds it,
/// so such a filter (a variable left unset in `--error "$TEXT"`) would pick every entry,
/// or leave every one out, where the operator meant to name some: refused on the
/// command line, the screen and the API alike, never dropped.
pub fn blank_text(text: &str) -> Option<&'static str> {
    text.trim().is_empty().then_some(
        "an empty text (or one of spaces) is in every text, so it would pick every entry or leave out every one; leave the filter out to mean every entry",
    )
}

/// A text filter as given on the command line: itself, or why it is refused
/// ([`blank_text`]).
pub fn filter_text(text: &str) -> Result<String, String> {
    match blank_text(text) {
        Some(why) => Err(why.to_string()),
        None => Ok(text.to_string()),
    }
}

impl Selection {
    /// The notifications of `channel` (any, without one) whose error holds one of
    /// `error`'s texts (each refused at the edge when blank: [`blank_text`]).
    pub fn of_channel_and_error(channel: Option<Channel>, error: &[String]) -> Self {
        Selection {
            channel,
            error: error.to_vec(),
            ..Selection::default()
        }
    }

    pub fn is_empty(&self) -> bool {
        self == &Selection::default()
    }

    /// The query string of the matching API routes.
    pub fn query(&self) -> Vec<(&'static str, String)> {
        let mut pairs = Vec::new();
        if let Some(channel) = self.channel {
            pairs.push(("channel", channel.to_string()));
        }
        pairs.extend(self.error.iter().map(|e| ("error", e.clone())));
        if let Some(since) = self.since {
            pairs.push(("since", since.to_string()));
        }
        if let Some(until) = self.until {
            pairs.push(("until", until.to_string()));
        }
        if let Some(channel) = self.not_channel {
            pairs.push(("not_channel", channel.to_string()));
        }
        pairs.extend(self.not_error.iter().map(|e| ("not_error", e.clone())));
        pairs.extend(self.exclude.iter().map(|id| ("exclude", id.clone())));
        pairs.extend(self.subject.iter().map(|t| ("subject", t.clone())));
        pairs.extend(self.recipient.iter().map(|t| ("to", t.clone())));
        pairs
    }

    /// Whether anything is excluded.
    pub fn excludes(&self) -> bool {
        self.not_channel.is_some() || !self.not_error.is_empty() || !self.exclude.is_empty()
    }

    /// The selection's tests on a triaged entry, exact where the store's conditions are
    /// a superset: a reply code it asks for or leaves out, and error texts matched against
    /// the entry's own error and each channel's.
    pub fn keeps_verdict(&self, verdict: &crate::triage::Verdict) -> bool {
        let has_code = |codes: &[String]| {
            verdict
                .channels
                .iter()
                .any(|c| codes.iter().any(|code| c.has_code(code)))
        };
        let errors: Vec<String> = verdict
            .error_message
            .iter()
            .chain(verdict.channels.iter().filter_map(|c| c.cause.as_ref()))
            .map(|e| e.to_lowercase())
            .collect();
        let says = |texts: &[String]| {
            texts
                .iter()
                .any(|t| errors.iter().any(|e| e.contains(&t.to_lowercase())))
        };
        (self.error_code.is_empty() || has_code(&self.error_code))
            && !has_code(&self.not_error_code)
            && (self.error.is_empty() || says(&self.error))
            && !says(&self.not_error)
    }

    /// Reads the selection from an API route's query: times as RFC 3339, unix seconds or
    /// a duration back from `now`.
    pub fn from_query(query: &SelectionQuery, now: f64) -> Result<Self, String> {
        let instant = |flag: &str, text: &Option<String>| {
            text.as_deref()
                .map(|t| crate::clock::parse_instant(t, now))
                .transpose()
                .map_err(|err| format!("{flag}: {err}"))
        };
        for (key, texts) in [
            ("error", &query.error),
            ("not_error", &query.not_error),
            ("subject", &query.subject),
            ("to", &query.to),
        ] {
            if let Some(why) = texts.iter().find_map(|text| blank_text(text)) {
                return Err(format!("{key}: {why}"));
            }
        }
        let selection = Selection {
            channel: query
                .channel
                .as_deref()
                .map(str::parse::<Channel>)
                .transpose()
                .map_err(|err| format!("channel: {err}"))?,
            error: query.error.clone(),
            since: instant("since", &query.since)?,
            until: instant("until", &query.until)?,
            not_channel: query
                .not_channel
                .as_deref()
                .map(str::parse::<Channel>)
                .transpose()
                .map_err(|err| format!("not_channel: {err}"))?,
            not_error: query.not_error.clone(),
            exclude: query.exclude.clone(),
            error_code: Vec::new(),
            not_error_code: Vec::new(),
            subject: query.subject.clone(),
            recipient: query.to.clone(),
        };
        selection.check()?;
        Ok(selection)
    }

    /// Refuses what cannot select anything sensible.
    pub fn check(&self) -> Result<(), String> {
        if self
            .error
            .iter()
            .chain(&self.not_error)
            .chain(&self.subject)
            .chain(&self.recipient)
            .any(|e| e.len() > MAX_ERROR_TEXT)
        {
            return Err(format!(
                "the error text to match is at most {MAX_ERROR_TEXT} bytes"
            ));
        }
        Window {
            since: self.since,
            until: self.until,
        }
        .check()?;
        if self.error.len()
            + self.not_error.len()
            + self.error_code.len()
            + self.not_error_code.len()
            + self.subject.len()
            + self.recipient.len()
            > MAX_TEXTS
        {
            return Err(format!(
                "at most {MAX_TEXTS} error texts and codes in one selection"
            ));
        }
        if self.channel.is_some() && self.channel == self.not_channel {
            return Err("a channel both selected and left out selects nothing".into());
        }
        if self.exclude.len() > MAX_EXCLUDED {
            return Err(format!("at most {MAX_EXCLUDED} ids can be left out"));
        }
        for id in &self.exclude {
            crate::model::NotificationId::parse(id).map_err(|err| format!("exclude: {err}"))?;
        }
        Ok(())
    }

    /// SQL conditions on `uns_notifications n` for DLQ entries, and their parameters.
    /// The channel test is a superset (it also keeps rows whose channels cannot be read:
    /// those are shown, marked, in every selection); [`Selection::keeps_channels`] is exact.
    pub fn dlq_sql(&self, dialect: Dialect) -> (String, Vec<rusqlite::types::Value>) {
        use rusqlite::types::Value;
        let postgres = dialect == Dialect::Postgres;
        let mut sql = String::new();
        let mut params = Vec::new();
        if let Some(channel) = self.channel {
            sql.push_str(if postgres {
                " AND (upper(n.channels) LIKE ? OR n.channels_json IS NULL)"
            } else {
                " AND (upper(n.channels) LIKE ? OR NOT json_valid(n.channels))"
            });
            params.push(Value::Text(format!("%{channel}%")));
        }
        if !self.error.is_empty() {
            // The entry's own error, or any channel's (a superset: the verdict's test,
            // `keeps_verdict`, is exact).
            let one = if postgres {
                "(instr(lower(n.error_message), lower(?)) > 0 OR EXISTS (
                SELECT 1 FROM uns_events r WHERE r.notification_id = n.id
                  AND r.kind = 'CHANNEL_ATTEMPT_RESULT'
                  AND instr(lower(r.payload_json ->> 'error'), lower(?)) > 0))"
            } else {
                "(instr(lower(n.error_message), lower(?)) > 0 OR EXISTS (
                SELECT 1 FROM uns_events r WHERE r.notification_id = n.id
                  AND r.kind = 'CHANNEL_ATTEMPT_RESULT' AND json_valid(r.payload)
                  AND instr(lower(json_extract(r.payload, '$.error')), lower(?)) > 0))"
            };
            let any = vec![one; self.error.len()];
            sql.push_str(&format!(" AND ({})", any.join(" OR ")));
            for e in &self.error {
                params.push(Value::Text(e.clone()));
                params.push(Value::Text(e.clone()));
            }
        }
        for (texts, path) in [
            (&self.subject, "$.subject"),
            (&self.recipient, "$.recipient"),
        ] {
            if texts.is_empty() {
                continue;
            }
            let one = format!(
                "instr(lower({}), lower(?)) > 0",
                dialect.json_text("n.payload", path)
            );
            sql.push_str(&format!(" AND ({})", vec![one; texts.len()].join(" OR ")));
            params.extend(texts.iter().map(|t| Value::Text(t.clone())));
        }
        if let Some(since) = self.since {
            sql.push_str(" AND n.updated_at >= ?");
            params.push(Value::Real(since));
        }
        if let Some(until) = self.until {
            sql.push_str(" AND n.updated_at < ?");
            params.push(Value::Real(until));
        }
        // Left out: a row whose channels cannot be read is never left out by its channel
        // (it is shown, marked, in every selection); one without an error message never
        // contains the text.
        if let Some(channel) = self.not_channel {
            sql.push_str(if postgres {
                " AND NOT (n.channels_json IS NOT NULL AND upper(n.channels) LIKE ?)"
            } else {
                " AND NOT (json_valid(n.channels) AND upper(n.channels) LIKE ?)"
            });
            params.push(Value::Text(format!("%{channel}%")));
        }
        for error in &self.not_error {
            sql.push_str(
                " AND (n.error_message IS NULL OR instr(lower(n.error_message), lower(?)) = 0)",
            );
            params.push(Value::Text(error.clone()));
        }
        if !self.exclude.is_empty() {
            sql.push_str(&format!(
                " AND n.id NOT IN ({})",
                vec!["?"; self.exclude.len()].join(", ")
            ));
            params.extend(self.exclude.iter().map(|id| Value::Text(id.clone())));
        }
        (sql, params)
    }

    /// The exact channel tests on a row's stored channel names.
    pub fn keeps_channels(&self, names: &[String], unreadable: bool) -> bool {
        if unreadable || (self.channel.is_none() && self.not_channel.is_none()) {
            return true;
        }
        match crate::model::ChannelSet::parse(names) {
            Ok(set) => {
                self.channel.is_none_or(|c| set.contains(c))
                    && self.not_channel.is_none_or(|c| !set.contains(c))
            }
            Err(_) => true,
        }
    }

    /// SQL conditions on `uns_events e` for the event search, and their parameters.
    pub fn events_sql(&self, dialect: Dialect) -> (String, Vec<rusqlite::types::Value>) {
        use rusqlite::types::Value;
        let postgres = dialect == Dialect::Postgres;
        // The event's channel, and its error (or error message), as text.
        let (channel, error) = if postgres {
            (
                "upper(trim(e.payload_json ->> 'channel'))",
                "coalesce(e.payload_json ->> 'error', e.payload_json ->> 'error_message')",
            )
        } else {
            (
                "CASE WHEN json_valid(e.payload) THEN upper(trim(json_extract(e.payload, '$.channel'))) END",
                "CASE WHEN json_valid(e.payload) THEN coalesce(json_extract(e.payload, '$.error'), json_extract(e.payload, '$.error_message')) END",
            )
        };
        let mut sql = String::new();
        let mut params = Vec::new();
        if let Some(channel_named) = self.channel {
            sql.push_str(&format!(" AND {channel} = ?"));
            params.push(Value::Text(channel_named.to_string()));
        }
        if !self.error.is_empty() {
            let one = format!("instr(lower({error}), lower(?)) > 0");
            sql.push_str(&format!(
                " AND ({})",
                vec![one; self.error.len()].join(" OR ")
            ));
            params.extend(self.error.iter().map(|e| Value::Text(e.clone())));
        }
        if let Some(since) = self.since {
            sql.push_str(" AND e.at >= ?");
            params.push(Value::Real(since));
        }
        if let Some(until) = self.until {
            sql.push_str(" AND e.at < ?");
            params.push(Value::Real(until));
        }
        if let Some(not_channel) = self.not_channel {
            sql.push_str(&format!(" AND {channel} IS DISTINCT FROM ?"));
            params.push(Value::Text(not_channel.to_string()));
        }
        for not_error in &self.not_error {
            sql.push_str(&format!(
                " AND coalesce(instr(lower({error}), lower(?)), 0) = 0"
            ));
            params.push(Value::Text(not_error.clone()));
        }
        if !self.exclude.is_empty() {
            sql.push_str(&format!(
                " AND e.notification_id NOT IN ({})",
                vec!["?"; self.exclude.len()].join(", ")
            ));
            params.extend(self.exclude.iter().map(|id| Value::Text(id.clone())));
        }
        (sql, params)
    }
}

/// When the channel attempts a reconciliation looks at were made: `[since, until)`, either
/// end open.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Window {
    pub since: Option<f64>,
    pub until: Option<f64>,
}

impl Window {
    /// The condition on `uns_events a` that keeps the starts of attempts made in the
    /// window, after a condition on its kind, and its parameters: one rule for the walk
    /// of [`Rows::Attempted`] and for [`crate::store::Store::window_starts`].
    pub fn starts_sql(&self) -> (String, Vec<rusqlite::types::Value>) {
        use rusqlite::types::Value;
        let mut sql = String::new();
        let mut params = Vec::new();
        if let Some(since) = self.since {
            sql.push_str(" AND a.at >= ?");
            params.push(Value::Real(since));
        }
        if let Some(until) = self.until {
            sql.push_str(" AND a.at < ?");
            params.push(Value::Real(until));
        }
        (sql, params)
    }

    /// An open end keeps no rule; two ends keep [`crate::clock::ordered`].
    pub fn check(&self) -> Result<(), String> {
        match (self.since, self.until) {
            (Some(since), Some(until)) => crate::clock::ordered(since, until),
            _ => Ok(()),
        }
    }
}

/// Which notifications a walk or a page reads.
#[derive(Debug, Clone, Copy)]
pub enum Rows<'s> {
    /// The selected DLQ entries (triage, the DLQ page).
    Dlq(&'s Selection),
    /// Every notification with a channel attempt started in the window, in the DLQ or
    /// not, narrowed by the selection's channel and error text (reconcile). Their rows
    /// carry only the message's recipient: nothing else of the message is read.
    Attempted {
        selection: &'s Selection,
        window: Window,
    },
}

/// How the window of [`Rows::Attempted`] is asked of SQLite: both keep the same rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Attempts {
    /// The window's starts are all read first, by the index of kinds by time: a cost
    /// of the window's size, once per statement (a walk).
    AllAtOnce,
    /// Each row's own starts, by the index of events by notification: a cost of the
    /// rows looked at (a page of notifications that lie together, SQLite only).
    RowByRow,
}

/// Which of a notification's events a walk hands on with it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Events<'k> {
    /// Every one: the whole history.
    All,
    /// At least those of these kinds: all a question reads, so a backend may leave the
    /// rest unread (one that cannot hands on every event, which answers the same).
    Kinds(&'k [crate::model::Kind]),
}

impl Events<'_> {
    /// The condition on `uns_events e` that keeps these events (empty: every event).
    /// The kinds are unsctl's own names, so they stand in the text as literals.
    pub fn join_sql(self) -> String {
        match self {
            Events::All => String::new(),
            Events::Kinds([]) => " AND 1 = 0".to_string(),
            Events::Kinds(kinds) => {
                let names: Vec<String> = kinds
                    .iter()
                    .map(|kind| format!("'{}'", kind.as_str()))
                    .collect();
                format!(" AND e.kind IN ({})", names.join(", "))
            }
        }
    }
}

/// A triage shows what the message was (its subject and email recipient), never the
/// rest of it: the two, cut to a line's length, are all that is read of the payload.
pub fn message_only(dialect: Dialect) -> &'static str {
    match dialect {
        Dialect::Sqlite => {
            "CASE WHEN json_valid(n.payload) THEN json_object(\
    'subject', CASE WHEN json_type(n.payload, '$.subject') = 'text' \
        THEN substr(json_extract(n.payload, '$.subject'), 1, 400) END, \
    'recipient', CASE WHEN json_type(n.payload, '$.recipient') = 'text' \
        THEN substr(json_extract(n.payload, '$.recipient'), 1, 400) END) END"
        }
        Dialect::Postgres => {
            "CASE WHEN n.payload_json IS NOT NULL THEN json_build_object(\
    'subject', CASE WHEN jsonb_typeof(n.payload_json -> 'subject') = 'string' \
        THEN substr(n.payload_json ->> 'subject', 1, 400) END, \
    'recipient', CASE WHEN jsonb_typeof(n.payload_json -> 'recipient') = 'string' \
        THEN substr(n.payload_json ->> 'recipient', 1, 400) END)::text END"
        }
    }
}

/// The message's recipient, when it is a text, and nothing else of it.
fn recipient_only(dialect: Dialect) -> &'static str {
    match dialect {
        Dialect::Sqlite => {
            "CASE WHEN json_valid(n.payload) AND json_type(n.payload, '$.recipient') = 'text' \
    THEN json_object('recipient', json_extract(n.payload, '$.recipient')) END"
        }
        Dialect::Postgres => {
            "CASE WHEN jsonb_typeof(n.payload_json -> 'recipient') = 'string' \
    THEN json_build_object('recipient', n.payload_json ->> 'recipient')::text END"
        }
    }
}

impl Rows<'_> {
    pub fn selection(&self) -> &Selection {
        match self {
            Rows::Dlq(selection) | Rows::Attempted { selection, .. } => selection,
        }
    }

    /// The condition on `uns_notifications n`, and its parameters.
    pub fn where_sql(&self, dialect: Dialect) -> (String, Vec<rusqlite::types::Value>) {
        self.where_sql_as(dialect, Attempts::AllAtOnce)
    }

    /// [`Rows::where_sql`], with the window of [`Rows::Attempted`] asked as `attempts`
    /// says; the rows it keeps are the same.
    pub fn where_sql_as(
        &self,
        dialect: Dialect,
        attempts: Attempts,
    ) -> (String, Vec<rusqlite::types::Value>) {
        match self {
            Rows::Dlq(selection) => {
                let (filter, params) = selection.dlq_sql(dialect);
                (format!("n.dead_letter = 1{filter}"), params)
            }
            Rows::Attempted { selection, window } => {
                let (filter, filter_params) = selection.dlq_sql(dialect);
                let mut sql = String::from(match attempts {
                    Attempts::AllAtOnce => {
                        "n.id IN (SELECT a.notification_id FROM uns_events a
                          WHERE a.kind = 'CHANNEL_ATTEMPT_STARTED'"
                    }
                    // `+` keeps SQLite off the index of kinds by time, which would read
                    // the whole window for every row. A scalar subquery, not EXISTS,
                    // which SQLite turns into a join that then sorts the events again.
                    Attempts::RowByRow => {
                        "(SELECT 1 FROM uns_events a
                          WHERE a.notification_id = n.id AND +a.kind = 'CHANNEL_ATTEMPT_STARTED'"
                    }
                });
                let (within, mut params) = window.starts_sql();
                sql.push_str(&within);
                sql.push_str(match attempts {
                    Attempts::AllAtOnce => ")",
                    Attempts::RowByRow => " LIMIT 1) IS NOT NULL",
                });
                sql.push_str(&filter);
                params.extend(filter_params);
                (sql, params)
            }
        }
    }

    /// The notification columns to read: reconcile reads only the recipient of a message.
    pub fn notification_columns(&self, dialect: Dialect) -> std::borrow::Cow<'static, str> {
        use crate::runtime::queries::NOTIFICATION_COLUMNS;
        match self {
            Rows::Dlq(_) => NOTIFICATION_COLUMNS.into(),
            Rows::Attempted { .. } => NOTIFICATION_COLUMNS
                .replace("n.payload", recipient_only(dialect))
                .into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{NotExcluded, excluded_id};

    #[test]
    fn an_excluded_id_is_itself_or_the_one_it_starts_and_never_none_or_several() {
        let ids = |list: &[&str]| list.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            excluded_id("n-ab", &ids(&["n-ab", "n-abc"])),
            Ok("n-ab".into())
        );
        assert_eq!(excluded_id("n-a", &ids(&["n-abc"])), Ok("n-abc".into()));
        assert_eq!(excluded_id("n-a", &[]), Err(NotExcluded::Nothing));
        assert_eq!(
            excluded_id("n-a", &ids(&["n-ab", "n-ac"])),
            Err(NotExcluded::Several(ids(&["n-ab", "n-ac"])))
        );
    }
}
