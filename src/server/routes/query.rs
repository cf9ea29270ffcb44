//! Query strings, read into each route's own struct by serde: a key the route does not
//! read is refused ([`Query::parse_for`]), and every value is a string that the route
//! parses with its own words of refusal. A key a route takes more than once (`kind`,
//! `include`, the selection's texts and ids) is read with [`Query::all`]; any other key
//! given twice is refused, as the CLI refuses its flag twice: `channel=EMAIL&channel=SLACK`
//! says two things, and reading one of them would answer a question nobody asked.

use crate::server::errors::ApiError;
use serde::Deserialize;
use serde::de::DeserializeOwned;
use std::collections::HashSet;

/// One request's query string, decoded.
pub(crate) struct Query {
    pairs: Vec<(String, String)>,
}

impl Query {
    pub(crate) fn parse(raw: &Option<String>) -> Self {
        Self {
            pairs: form_urlencoded::parse(raw.as_deref().unwrap_or_default().as_bytes())
                .into_owned()
                .collect(),
        }
    }

    /// The query of a route that reads only `keys`; any other key is refused. A filter
    /// whose key is misspelled (`chanel=SLACK`) or unknown to this server would otherwise
    /// be left out, and the answer would hold more than was asked: a caller that acts on
    /// every entry of it (a `curl` loop resolving each) would reach entries it never meant.
    pub(crate) fn parse_for(raw: &Option<String>, keys: &[&[&str]]) -> Result<Self, ApiError> {
        let query = Self::parse(raw);
        let known = |key: &str| keys.iter().any(|set| set.contains(&key));
        if let Some((key, _)) = query.pairs.iter().find(|(key, _)| !known(key)) {
            let mut taken: Vec<&str> = keys.iter().flat_map(|set| set.iter().copied()).collect();
            taken.sort_unstable();
            taken.dedup();
            return Err(ApiError::invalid(format!(
                "{:?} is not a query key of this route, which takes {}",
                crate::render::sanitize::clean(key),
                if taken.is_empty() {
                    "none".to_string()
                } else {
                    taken.join(", ")
                }
            )));
        }
        Ok(query)
    }

    /// The route's struct, from the keys that take one value; a key that repeats is read
    /// with [`Query::all`], and any other given twice is refused.
    pub(crate) fn typed<T: DeserializeOwned>(&self) -> Result<T, ApiError> {
        let mut seen = HashSet::new();
        let mut single = Vec::with_capacity(self.pairs.len());
        for (key, value) in &self.pairs {
            if REPEATED.contains(&key.as_str()) {
                continue;
            }
            if !seen.insert(key.as_str()) {
                return Err(twice(key));
            }
            single.push((key, value));
        }
        let single = form_urlencoded::Serializer::new(String::new())
            .extend_pairs(single)
            .finish();
        serde_urlencoded::from_str(&single)
            .map_err(|err| ApiError::invalid(format!("query: {err}")))
    }

    /// The one value of `key`, if given; given twice, refused.
    pub(crate) fn one<'a>(&'a self, key: &'a str) -> Result<Option<&'a str>, ApiError> {
        let mut values = self.all(key);
        match (values.next(), values.next()) {
            (_, Some(_)) => Err(twice(key)),
            (value, None) => Ok(value),
        }
    }

    /// Every value of `key`, in order.
    pub(crate) fn all<'a>(&'a self, key: &'a str) -> impl Iterator<Item = &'a str> {
        self.pairs
            .iter()
            .filter(move |(k, _)| k == key)
            .map(|(_, value)| value.as_str())
    }
}

/// The keys a route reads every value of, with [`Query::all`]: `kind` and `include`, and
/// the selection's texts and ids (any of them matches).
const REPEATED: &[&str] = &[
    "kind",
    "include",
    "error",
    "not_error",
    "exclude",
    "subject",
    "to",
];

fn twice(key: &str) -> ApiError {
    ApiError::invalid(format!(
        "{} is given more than once: it takes one value",
        crate::render::sanitize::clean(key)
    ))
}

/// The keys of a selection (DESIGN §5), read by every route that takes one.
pub(crate) const SELECTION: &[&str] = &[
    "channel",
    "error",
    "since",
    "until",
    "not_channel",
    "not_error",
    "exclude",
    "subject",
    "to",
];

/// The keys of `GET /api/v1/dlq` beside the selection.
pub(crate) const DLQ: &[&str] = &["cursor", "limit", "include"];

/// The keys of `GET /api/v1/runtime/reconcile` beside the selection.
pub(crate) const RECONCILE: &[&str] = &["cursor", "limit", "include", "kind"];

/// The keys of `GET /api/v1/runtime/events` beside the selection.
pub(crate) const EVENTS: &[&str] = &["after", "limit", "kind"];

/// The keys of `GET /api/v1/runtime/notifications`.
pub(crate) const PREFIX: &[&str] = &["id_prefix", "dlq", "limit"];

/// The keys of `GET /api/v1/runtime/stats`.
pub(crate) const STATS: &[&str] = &["window", "until"];

/// The keys of `GET /api/v1/runtime/pulse`.
pub(crate) const PULSE: &[&str] = &["since", "until", "step"];

/// The keys of `GET /api/v1/runtime/notes`.
pub(crate) const NOTES: &[&str] = &["since", "until"];

/// Every `kind` given (none: every kind); a name this build does not know is refused.
pub(crate) fn kinds(query: &Query) -> Result<Vec<crate::model::Kind>, ApiError> {
    query
        .all("kind")
        .map(str::parse::<crate::model::Kind>)
        .collect::<Result<Vec<_>, _>>()
        .map_err(ApiError::invalid)
}

/// `limit`: 1 to `max`, `default` when not given.
pub(crate) fn limit(text: Option<&str>, default: usize, max: usize) -> Result<usize, ApiError> {
    match text {
        None => Ok(default),
        Some(value) => match value.parse::<usize>() {
            Ok(limit) if (1..=max).contains(&limit) => Ok(limit),
            _ => Err(ApiError::invalid(format!(
                "limit must be a number from 1 to {max}"
            ))),
        },
    }
}

/// `GET /api/v1/runtime/notifications?id_prefix=P&dlq=true&limit=N`.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct PrefixQuery {
    #[serde(default)]
    pub id_prefix: Option<String>,
    #[serde(default)]
    pub dlq: Option<String>,
    #[serde(default)]
    pub limit: Option<String>,
}

/// `GET /api/v1/runtime/events?kind=K&after=ID&limit=N` and the selection; `kind` repeats.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct EventsQuery {
    #[serde(default)]
    pub after: Option<String>,
    #[serde(default)]
    pub limit: Option<String>,
    #[serde(flatten)]
    pub selection: crate::store::selection::SelectionQuery,
}

/// `GET /api/v1/dlq?cursor=C&limit=N&include=events` and the selection; `include` repeats.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct DlqQuery {
    #[serde(default)]
    pub cursor: Option<String>,
    #[serde(default)]
    pub limit: Option<String>,
    #[serde(flatten)]
    pub selection: crate::store::selection::SelectionQuery,
}

/// `GET /api/v1/runtime/stats?window=SECONDS`.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct StatsQuery {
    #[serde(default)]
    pub window: Option<String>,
    /// The window's end (default: now): RFC 3339 or unix seconds.
    #[serde(default)]
    pub until: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_the_route_does_not_read_is_refused_and_its_own_are_taken() {
        let keys: &[&[&str]] = &[DLQ, SELECTION];
        let taken = Query::parse_for(&Some("limit=5&channel=email&error=a&error=b".into()), keys)
            .expect("its own keys");
        assert_eq!(taken.all("error").collect::<Vec<_>>(), ["a", "b"]);
        assert!(Query::parse_for(&None, keys).is_ok());
        for (raw, key) in [
            ("chanel=email", "\"chanel\""),
            ("limit=5&Channel=email", "\"Channel\""),
            ("limit=5&kind=LEASE_LOST", "\"kind\""),
            ("%1b%5b31m=x", "[31m"),
        ] {
            let refused = Query::parse_for(&Some(raw.into()), keys).err().expect(raw);
            assert_eq!(refused.0, axum::http::StatusCode::BAD_REQUEST, "{raw}");
            assert!(
                refused.1.error.contains("is not a query key of this route")
                    && refused.1.error.contains("not_channel"),
                "{raw}: {}",
                refused.1.error
            );
            assert!(refused.1.error.contains(key), "{raw}: {}", refused.1.error);
            assert!(
                !refused.1.error.contains('\u{1b}'),
                "{raw}: {}",
                refused.1.error
            );
        }
        let none = Query::parse_for(&Some("x=1".into()), &[])
            .err()
            .expect("no keys");
        assert!(
            none.1.error.ends_with("which takes none"),
            "{}",
            none.1.error
        );
    }

    #[test]
    fn a_key_of_one_value_given_twice_is_refused_and_repeated_keys_are_read_whole() {
        let raw = Some(
            "kind=LEASE_LOST&limit=5&channel=email&kind=REPLAYED&other=x&error=a&error=b".into(),
        );
        let query = Query::parse(&raw);
        let asked: EventsQuery = query.typed().expect("typed");
        assert_eq!(asked.limit.as_deref(), Some("5"));
        assert_eq!(query.all("error").collect::<Vec<_>>(), ["a", "b"]);
        for twice in [
            "limit=5&limit=9",
            "channel=email&channel=slack",
            "since=1&since=1",
        ] {
            let query = Query::parse(&Some(twice.into()));
            let refused = query.typed::<EventsQuery>().expect_err(twice);
            assert_eq!(refused.0, axum::http::StatusCode::BAD_REQUEST, "{twice}");
            let key = twice.split('=').next().expect("key");
            assert!(
                refused.1.error.contains(key),
                "{twice}: {}",
                refused.1.error
            );
            assert!(query.one(key).is_err(), "{twice}");
        }
        assert_eq!(query.one("limit").ok().flatten(), Some("5"));
        assert_eq!(query.one("after").ok().flatten(), None);
        assert_eq!(asked.selection.channel.as_deref(), Some("email"));
        assert_eq!(asked.after, None);
        assert_eq!(
            query.all("kind").collect::<Vec<_>>(),
            ["LEASE_LOST", "REPLAYED"]
        );
        let spaced: PrefixQuery = Query::parse(&Some("id_prefix=n-01%20a&dlq=true".into()))
            .typed()
            .expect("typed");
        assert_eq!(spaced.id_prefix.as_deref(), Some("n-01 a"));
        assert_eq!(spaced.dlq.as_deref(), Some("true"));
        assert!(limit(Some("0"), 10, 100).is_err());
        assert!(limit(Some("101"), 10, 100).is_err());
        assert_eq!(limit(None, 10, 100).ok(), Some(10));
        assert_eq!(limit(Some("100"), 10, 100).ok(), Some(100));
    }
}
