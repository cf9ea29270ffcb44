//! The runtime's HTTP API, served for real on 127.0.0.1:0 over a temporary store.

use crate::support;

use reqwest::StatusCode;
use reqwest::blocking::{Client, RequestBuilder};
use serde_json::{Value, json};
use std::collections::BTreeSet;
use support::{KEY, replay_entry, resolve_entry, server, verify_entry};
use unsctl::runtime::schema::{self, OpenMode};

struct Api {
    _dir: tempfile::TempDir,
    conn: rusqlite::Connection,
    server: unsctl::server::RunningServer,
    client: Client,
}

impl Api {
    fn new() -> Self {
        let dir = tempfile::tempdir().expect("dir");
        let db = dir.path().join("uns.db");
        let conn = schema::open(&db, OpenMode::Create).expect("store");
        let server = server(&db);
        unsctl::runtime::adapters::init_tls();
        Self {
            _dir: dir,
            conn,
            server,
            client: Client::new(),
        }
    }

    fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.server.addr)
    }

    fn send(&self, request: RequestBuilder) -> (StatusCode, Value) {
        let response = request.send().expect("request");
        let status = response.status();
        let text = response.text().expect("body");
        let body =
            serde_json::from_str(&text).unwrap_or_else(|_| panic!("not JSON ({status}): {text}"));
        (status, body)
    }

    fn get(&self, path: &str) -> (StatusCode, Value) {
        self.send(self.client.get(self.url(path)).bearer_auth(KEY))
    }

    fn post(&self, path: &str, body: Value) -> (StatusCode, Value) {
        self.send(
            self.client
                .post(self.url(path))
                .bearer_auth(KEY)
                .json(&body),
        )
    }

    /// `n` REPLAY entries, a second apart.
    fn replay_entries(&self, n: u32) -> Vec<String> {
        (0..n)
            .map(|n| replay_entry(&self.conn, 1000.0 + f64::from(n)))
            .collect()
    }

    /// unsctl's own client of this API, with the key.
    fn store(&self) -> unsctl::store::http::HttpStore {
        unsctl::store::http::HttpStore::new(&self.url(""), Some(KEY.to_string())).expect("store")
    }

    fn count(&self, id: &str, kind: &str) -> i64 {
        self.conn
            .query_row(
                "SELECT COUNT(*) FROM uns_events WHERE notification_id = ?1 AND kind = ?2",
                [id, kind],
                |row| row.get(0),
            )
            .expect("count")
    }
}

const GUARDED: &[(&str, &str)] = &[
    ("POST", "/api/v1/notifications"),
    ("GET", "/api/v1/runtime/notifications/n-x"),
    ("POST", "/api/v1/runtime/notifications/n-x/replay"),
    ("GET", "/api/v1/runtime/events?kind=LEASE_LOST"),
    ("GET", "/api/v1/dlq"),
    ("DELETE", "/api/v1/dlq/n-x"),
    ("GET", "/api/v1/runtime/reconcile"),
];

#[test]
fn every_api_route_needs_the_key_and_healthz_does_not() {
    let api = Api::new();
    let (status, body) = api.send(api.client.get(api.url("/healthz")));
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["status"], "ok");
    for (method, path) in GUARDED {
        let method = reqwest::Method::from_bytes(method.as_bytes()).expect("method");
        for key in [None, Some("wrong-key"), Some("test-key-012345678")] {
            let mut request = api.client.request(method.clone(), api.url(path));
            if let Some(key) = key {
                request = request.bearer_auth(key);
            }
            let (status, body) = api.send(request);
            assert_eq!(
                status,
                StatusCode::UNAUTHORIZED,
                "{method} {path} with {key:?}"
            );
            let error = body["error"].as_str().unwrap_or_default();
            assert!(!error.is_empty() && !error.contains(KEY), "{error}");
        }
        // Two keys, the right one among them: which acts cannot be told, so neither does.
        let request = api
            .client
            .request(method.clone(), api.url(path))
            .header("authorization", format!("Bearer {KEY}"))
            .header("authorization", "Bearer wrong-key");
        let (status, body) = api.send(request);
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{method} {path}: {body}");
        assert!(
            body["error"]
                .as_str()
                .unwrap_or_default()
                .contains("more than one Authorization header"),
            "{body}"
        );
    }
}

#[test]
fn submit_coalesces_on_the_idempotency_key_and_validates() {
    let api = Api::new();
    let submission = json!({"channels": ["EMAIL", "slack"], "recipient": "ops@example.com",
                            "subject": "Disk full", "idempotency_key": "order-7"});
    let (status, first) = api.post("/api/v1/notifications", submission.clone());
    assert_eq!(status, StatusCode::CREATED, "{first}");
    assert_eq!(first["created"], true);
    let (status, again) = api.post("/api/v1/notifications", submission);
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        (again["id"].clone(), again["created"].clone()),
        (first["id"].clone(), json!(false))
    );
    let rows: i64 = api
        .conn
        .query_row("SELECT COUNT(*) FROM uns_notifications", [], |r| r.get(0))
        .expect("count");
    assert_eq!(rows, 1);

    let bad = [
        json!({"channels": ["SMS"]}),
        json!({"channels": []}),
        json!({"channels": ["EMAIL"], "recipient": "not an address"}),
        json!({"channels": ["SLACK"], "colour": "blue"}),
        json!({"channels": "SLACK"}),
    ];
    for body in bad {
        let (status, answer) = api.post("/api/v1/notifications", body.clone());
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body} -> {answer}");
        assert!(answer["error"].is_string());
    }
    let (status, answer) = api.send(
        api.client
            .post(api.url("/api/v1/notifications"))
            .bearer_auth(KEY)
            .header("content-type", "application/json")
            .body("{\"channels\": [\"SLACK\""),
    );
    assert_eq!(status, StatusCode::BAD_REQUEST, "{answer}");
    let huge = json!({"channels": ["SLACK"], "body": "x".repeat(200_000)});
    let (status, answer) = api.post("/api/v1/notifications", huge);
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE, "{answer}");
    assert!(answer["error"].is_string());
    let rows: i64 = api
        .conn
        .query_row("SELECT COUNT(*) FROM uns_notifications", [], |r| r.get(0))
        .expect("count");
    assert_eq!(rows, 1, "no bad request changed the store");
}

#[test]
fn the_notification_document_and_event_search() {
    let api = Api::new();
    let id = resolve_entry(&api.conn, 1000.0);
    let (status, doc) = api.get(&format!("/api/v1/runtime/notifications/{id}"));
    assert_eq!(status, StatusCode::OK);
    assert_eq!(doc["id"], json!(id));
    assert_eq!(doc["status"], "DEAD");
    assert_eq!(doc["dead_letter"], true);
    let kinds: Vec<&str> = doc["events"]
        .as_array()
        .expect("events")
        .iter()
        .filter_map(|e| e["kind"].as_str())
        .collect();
    assert_eq!(
        kinds,
        [
            "SUBMITTED",
            "ATTEMPT_STARTED",
            "CHANNEL_ATTEMPT_STARTED",
            "CHANNEL_ATTEMPT_RESULT",
            "LEASE_LOST",
            "DEAD_LETTERED"
        ]
    );
    for event in doc["events"].as_array().expect("events") {
        let keys: BTreeSet<&str> = event
            .as_object()
            .expect("object")
            .keys()
            .map(String::as_str)
            .collect();
        assert_eq!(keys, BTreeSet::from(["id", "at", "kind", "payload"]));
    }

    let (status, missing) = api.get("/api/v1/runtime/notifications/n-does-not-exist");
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert!(
        missing["error"]
            .as_str()
            .unwrap_or_default()
            .contains("n-does-not-exist")
    );

    replay_entry(&api.conn, 2000.0);
    let (status, found) =
        api.get("/api/v1/runtime/events?kind=LEASE_LOST&kind=CHANNEL_ATTEMPT_RESULT&limit=10");
    assert_eq!(status, StatusCode::OK);
    let events = found["events"].as_array().expect("events");
    assert_eq!(events.len(), 3);
    let times: Vec<f64> = events.iter().filter_map(|e| e["at"].as_f64()).collect();
    assert!(
        times.windows(2).all(|w| w[0] >= w[1]),
        "newest first: {times:?}"
    );
    for event in events {
        for key in [
            "notification_id",
            "status",
            "dead_letter",
            "attempts",
            "cycle",
            "payload",
        ] {
            assert!(event.get(key).is_some(), "{key} missing in {event}");
        }
    }
    let (status, _) = api.get("/api/v1/runtime/events?limit=0");
    assert_eq!(status, StatusCode::BAD_REQUEST);
    let (status, body) = api.get("/api/v1/no/such/route");
    assert_eq!(
        (status, body["error"].is_string()),
        (StatusCode::NOT_FOUND, true)
    );
}

#[test]
fn the_dlq_pages_with_an_opaque_cursor() {
    let api = Api::new();
    let mut expected = api.replay_entries(23);
    expected.sort();
    let mut seen = Vec::new();
    let mut cursor: Option<String> = None;
    let mut pages = 0;
    loop {
        let path = match &cursor {
            Some(c) => format!("/api/v1/dlq?limit=10&include=events&cursor={c}"),
            None => "/api/v1/dlq?limit=10&include=events".to_string(),
        };
        let (status, page) = api.get(&path);
        assert_eq!(status, StatusCode::OK, "{page}");
        pages += 1;
        for entry in page["entries"].as_array().expect("entries") {
            assert_eq!(entry["dead_letter"], true);
            assert!(
                entry["events"].as_array().is_some_and(|e| e.len() == 5),
                "{entry}"
            );
            seen.push(entry["id"].as_str().expect("id").to_string());
        }
        match page["next_cursor"].as_str() {
            Some(next) => cursor = Some(next.to_string()),
            None => break,
        }
    }
    assert_eq!(pages, 3);
    assert_eq!(seen, expected);
    let (_, plain) = api.get("/api/v1/dlq?limit=5");
    assert!(plain["entries"][0].get("events").is_none());
    let (status, _) = api.get("/api/v1/dlq?cursor=not-a-cursor");
    assert_eq!(status, StatusCode::BAD_REQUEST);
    // A key of one value said twice is refused, on every route that reads one: reading
    // either value would answer a question nobody asked.
    for path in [
        "/api/v1/dlq?limit=5&limit=10",
        "/api/v1/dlq?channel=email&channel=slack",
        "/api/v1/runtime/events?since=1h&since=2h",
        "/api/v1/runtime/reconcile?until=1&until=2",
        "/api/v1/runtime/pulse?since=0&until=60&step=60&step=30",
        "/api/v1/runtime/notes?since=0&since=1",
    ] {
        let (status, body) = api.get(path);
        assert_eq!(status, StatusCode::BAD_REQUEST, "{path}: {body}");
        assert!(
            body["error"]
                .as_str()
                .is_some_and(|e| e.contains("more than once")),
            "{path}: {body}"
        );
    }
    // The keys that take many values still do.
    let (status, body) = api.get("/api/v1/dlq?error=nothing-like-it&error=HTTP");
    assert_eq!(status, StatusCode::OK, "{body}");
    assert!(!body["entries"].as_array().expect("entries").is_empty());
    // A filter under a key the route does not read is refused, never left out: the
    // answer would hold every entry, and a caller acting on each would reach them all.
    let (status, body) = api.get("/api/v1/dlq?channel=PAGERDUTY");
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["entries"].as_array().map(Vec::len), Some(0), "{body}");
    for (path, key) in [
        ("/api/v1/dlq?chanel=PAGERDUTY", "chanel"),
        ("/api/v1/dlq?limit=5&not_chanel=SLACK", "not_chanel"),
        ("/api/v1/runtime/events?kind=LEASE_LOST&ids=n-x", "ids"),
        ("/api/v1/runtime/reconcile?sinse=1h", "sinse"),
        (
            "/api/v1/runtime/notifications?id_prefix=n-&channel=EMAIL",
            "channel",
        ),
        ("/api/v1/runtime/stats?windows=60", "windows"),
        (
            "/api/v1/runtime/pulse?since=0&until=60&step=60&channel=EMAIL",
            "channel",
        ),
        ("/api/v1/runtime/notes?from=0", "from"),
    ] {
        let (status, body) = api.get(path);
        assert_eq!(status, StatusCode::BAD_REQUEST, "{path}: {body}");
        let error = body["error"].as_str().unwrap_or_default();
        assert!(
            error.contains(&format!("{key:?} is not a query key of this route")),
            "{path}: {body}"
        );
    }
    // `exclude` takes a unique prefix, as --exclude does; one that names no notification,
    // or several, is refused rather than leaving out nothing.
    let first = expected[0].clone();
    let (status, body) = api.get(&format!("/api/v1/dlq?limit=1000&exclude={}", &first[..20]));
    assert_eq!(status, StatusCode::OK, "{body}");
    let left: Vec<&str> = body["entries"]
        .as_array()
        .expect("entries")
        .iter()
        .filter_map(|e| e["id"].as_str())
        .collect();
    assert_eq!(left.len(), expected.len() - 1, "{body}");
    assert!(!left.contains(&first.as_str()), "{body}");
    for (path, said) in [
        (
            "/api/v1/dlq?exclude=n-zzzz".to_string(),
            "no notification's id starts with it",
        ),
        (
            "/api/v1/dlq?exclude=n-".to_string(),
            "is ambiguous: it starts n-",
        ),
        (
            "/api/v1/runtime/events?exclude=n-zzzz".to_string(),
            "no notification's id",
        ),
        (
            "/api/v1/runtime/reconcile?exclude=n-zzzz".to_string(),
            "no notification's id",
        ),
    ] {
        let (status, body) = api.get(&path);
        assert_eq!(status, StatusCode::BAD_REQUEST, "{path}: {body}");
        assert!(
            body["error"].as_str().is_some_and(|e| e.contains(said)),
            "{path}: {body}"
        );
    }
    let (_, body) = api.get("/api/v1/dlq?chanel=PAGERDUTY");
    assert!(
        body["error"]
            .as_str()
            .is_some_and(|e| e.contains("channel") && e.contains("not_channel")),
        "the keys it takes are named: {body}"
    );
}

#[test]
fn the_reconcile_route_pages_every_attempted_notification_in_its_window() {
    let api = Api::new();
    // Dead letters and a delivered row, each attempted at its own time.
    let mut early: Vec<String> = (0..12)
        .map(|n| replay_entry(&api.conn, 1000.0 + f64::from(n)))
        .collect();
    early.push(support::play(
        &api.conn,
        1020.0,
        &[unsctl::model::Channel::Email],
        &[unsctl::runtime::engine::DeliveryResult::accepted(None)],
        3,
    ));
    early.sort();
    let late = verify_entry(&api.conn, 5000.0);
    let walk = |query: &str| -> (Vec<String>, usize, std::collections::BTreeSet<String>) {
        let mut seen = Vec::new();
        let mut kinds = std::collections::BTreeSet::new();
        let mut cursor: Option<String> = None;
        let mut pages = 0;
        loop {
            let path = match &cursor {
                Some(c) => format!("/api/v1/runtime/reconcile?limit=5&{query}&cursor={c}"),
                None => format!("/api/v1/runtime/reconcile?limit=5&{query}"),
            };
            let (status, page) = api.get(&path);
            assert_eq!(status, StatusCode::OK, "{page}");
            pages += 1;
            for entry in page["entries"].as_array().expect("entries") {
                assert!(
                    entry["events"].as_array().is_some_and(|e| !e.is_empty()),
                    "{entry}"
                );
                // Of the message, only the recipient.
                assert_eq!(
                    entry["payload"],
                    json!({"recipient": "ops@example.com"}),
                    "{entry}"
                );
                seen.push(entry["id"].as_str().expect("id").to_string());
                for event in entry["events"].as_array().expect("events") {
                    kinds.insert(event["kind"].as_str().expect("kind").to_string());
                }
            }
            match page["next_cursor"].as_str() {
                Some(next) => cursor = Some(next.to_string()),
                None => break,
            }
        }
        (seen, pages, kinds)
    };
    // The delivered row is in it: reconcile looks past the DLQ.
    let (seen, pages, every_kind) = walk("until=2000");
    assert_eq!(seen, early);
    assert_eq!(pages, 3);
    let (seen, _, _) = walk("since=4000");
    assert_eq!(seen, vec![late.clone()]);
    let (seen, _, _) = walk("channel=EMAIL&since=0");
    assert_eq!(seen.len(), 2, "{seen:?}");
    // Only the kinds asked for, of the very same notifications.
    let asked = ["CHANNEL_ATTEMPT_RESULT", "CHANNEL_ATTEMPT_STARTED"];
    let (seen, pages, kinds) =
        walk("until=2000&kind=CHANNEL_ATTEMPT_STARTED&kind=CHANNEL_ATTEMPT_RESULT");
    assert_eq!((seen, pages), (early.clone(), 3));
    assert_eq!(kinds, asked.map(str::to_string).into(), "{every_kind:?}");
    assert!(every_kind.len() > asked.len(), "{every_kind:?}");
    // The client asks for them: a walk over the API of the attempts' events alone.
    let store = api.store();
    let (mut ids, mut handed) = (Vec::new(), BTreeSet::new());
    unsctl::store::Store::each_attempted(
        &store,
        &unsctl::store::Selection::default(),
        unsctl::store::Window {
            since: None,
            until: Some(2000.0),
        },
        unsctl::store::Events::Kinds(unsctl::history::ATTEMPT_KINDS),
        &mut |row, events| {
            ids.push(row.id);
            handed.extend(events.iter().map(|e| e.kind.to_string()));
            Ok(())
        },
    )
    .expect("walk");
    assert_eq!(ids, early);
    assert_eq!(handed, asked.map(str::to_string).into());
    // A selection's own times cannot be asked beside the window's: the route reads both
    // keys as the window, so the client refuses rather than send either twice.
    let refused = unsctl::store::Store::each_attempted(
        &store,
        &unsctl::store::Selection {
            since: Some(1000.0),
            ..Default::default()
        },
        unsctl::store::Window {
            since: Some(1500.0),
            until: Some(2000.0),
        },
        unsctl::store::Events::All,
        &mut |_, _| Ok(()),
    )
    .expect_err("a selection's own times");
    assert!(refused.to_string().contains("window"), "{refused}");
    for bad in [
        "limit=0",
        "limit=1001",
        "since=5000&until=4000",
        "channel=FAX",
        "cursor=nope",
        "kind=CHANNEL_ATTEMPT_STARTED&kind=PROVIDER_CALLBACK",
    ] {
        let (status, body) = api.get(&format!("/api/v1/runtime/reconcile?{bad}"));
        assert_eq!(status, StatusCode::BAD_REQUEST, "{bad}: {body}");
    }
}

/// A list of notifications read over the API (read ahead, several at once) gives for each
/// id exactly what reading it alone gives, however the list is walked: in order, passing
/// over some or many, an id it does not hold, one already passed, one named twice, one
/// that does not exist.
#[test]
fn a_list_read_over_the_api_answers_for_each_id_as_reading_it_alone() {
    let api = Api::new();
    let mut ids = api.replay_entries(150);
    ids.insert(70, "n-0000000000000000000000000000dead".to_string());
    ids.push(ids[3].clone());
    let store = api.store();
    let alone = |id: &str| format!("{:?}", unsctl::store::Store::notification(&store, id));
    let walks: Vec<(&str, Vec<String>)> = vec![
        ("in order", ids.clone()),
        ("every other", ids.iter().step_by(2).cloned().collect()),
        ("passing over many", [&ids[..2], &ids[100..]].concat()),
        (
            "off the list and back",
            vec![
                ids[5].clone(),
                "n-elsewhere".to_string(),
                ids[1].clone(),
                ids[6].clone(),
                ids[151].clone(),
            ],
        ),
    ];
    for (how, walk) in walks {
        let mut read = unsctl::store::Store::documents(&store, &ids);
        for id in &walk {
            assert_eq!(format!("{:?}", read(id)), alone(id), "{how}: {id}");
        }
    }
}

#[test]
fn resolve_then_a_second_resolve_conflicts_with_state_and_time() {
    let api = Api::new();
    let id = resolve_entry(&api.conn, 1000.0);
    let (status, done) = api.send(
        api.client
            .delete(api.url(&format!("/api/v1/dlq/{id}")))
            .bearer_auth(KEY),
    );
    assert_eq!(status, StatusCode::OK, "{done}");
    assert_eq!(done["action"], "resolved");
    let (status, again) = api.send(
        api.client
            .delete(api.url(&format!("/api/v1/dlq/{id}")))
            .bearer_auth(KEY),
    );
    assert_eq!(status, StatusCode::CONFLICT);
    assert_eq!(again["conflict"]["status"], "RESOLVED");
    assert!(again["conflict"]["since"].as_f64().is_some());
    assert!(
        again["error"]
            .as_str()
            .unwrap_or_default()
            .contains("RESOLVED")
    );
    assert_eq!(api.count(&id, "DLQ_RESOLVED"), 1);
    let (status, _) = api.send(
        api.client
            .delete(api.url("/api/v1/dlq/n-missing"))
            .bearer_auth(KEY),
    );
    assert_eq!(status, StatusCode::NOT_FOUND);
}

/// A claimed operator the record could not say as the person who acted is a 400 on every
/// route that records one, and nothing is written: one that names a key would read as
/// that key's act ("mallory (key admin) (key intern)"), a line break as two lines.
#[test]
fn a_claim_that_would_make_the_record_name_someone_else_is_refused() {
    let api = Api::new();
    let id = replay_entry(&api.conn, 1000.0);
    let long = "o".repeat(201);
    for claim in [
        "mallory (key admin)",
        "eve\nroot",
        "\u{1b}[2Jeve",
        long.as_str(),
    ] {
        let asked = [
            api.client
                .post(api.url(&format!("/api/v1/runtime/notifications/{id}/replay"))),
            api.client.delete(api.url(&format!("/api/v1/dlq/{id}"))),
            api.client.post(api.url(unsctl::api::RUNTIME_NOTES)),
        ];
        for (request, body) in asked.into_iter().zip([
            json!({"operator": claim}),
            json!({"operator": claim, "force": true, "reason": "x"}),
            json!({"operator": claim, "text": "relay restarted"}),
        ]) {
            let route = format!("{request:?}");
            let (status, said) = api.send(request.bearer_auth(KEY).json(&body));
            assert_eq!(status, StatusCode::BAD_REQUEST, "{route} {claim:?}: {said}");
            assert!(
                said["error"]
                    .as_str()
                    .unwrap_or_default()
                    .contains("operator cannot be recorded"),
                "{said}"
            );
        }
    }
    assert_eq!(api.count(&id, "REPLAYED"), 0);
    assert_eq!(api.count(&id, "DLQ_RESOLVED"), 0);
    let notes: i64 = api
        .conn
        .query_row("SELECT COUNT(*) FROM uns_notes", [], |r| r.get(0))
        .expect("notes");
    assert_eq!(notes, 0);
    // A name with parentheses of its own, or beyond ASCII, is a name.
    let (status, said) = api.post(
        &format!("/api/v1/runtime/notifications/{id}/replay"),
        json!({"operator": "José (SRE)"}),
    );
    assert_eq!(status, StatusCode::OK, "{said}");
}

#[test]
fn replay_records_the_audit_and_guardrails_refuse_unsafe_calls() {
    let api = Api::new();
    let replayable = replay_entry(&api.conn, 1000.0);
    let (status, done) = api.post(
        &format!("/api/v1/runtime/notifications/{replayable}/replay"),
        json!({"operator": "alice", "reason": "webhook fixed", "ticket": "INC-1"}),
    );
    assert_eq!(status, StatusCode::OK, "{done}");
    assert_eq!(
        (
            done["action"].clone(),
            done["cycle"].clone(),
            done["channels"].clone()
        ),
        (json!("replayed"), json!(2), json!(["SLACK"]))
    );
    let payload: String = api
        .conn
        .query_row(
            "SELECT payload FROM uns_events WHERE notification_id = ?1 AND kind = 'REPLAYED'",
            [&replayable],
            |r| r.get(0),
        )
        .expect("audit");
    let payload: Value = serde_json::from_str(&payload).expect("json");
    // The server records its key's name; the client's claim is kept beside it.
    assert_eq!(payload["operator"], "default");
    assert_eq!(payload["claimed_operator"], "alice");
    assert_eq!(payload["ticket"], "INC-1");
    assert_eq!(payload["triage"]["branch"], "REPLAY");

    let resolvable = resolve_entry(&api.conn, 2000.0);
    let (status, refused) = api.post(
        &format!("/api/v1/runtime/notifications/{resolvable}/replay"),
        json!({}),
    );
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{refused}");
    assert!(
        refused["error"]
            .as_str()
            .unwrap_or_default()
            .contains("duplicate")
    );
    let uncertain = verify_entry(&api.conn, 3000.0);
    let (status, _) = api.post(
        &format!("/api/v1/runtime/notifications/{uncertain}/replay"),
        json!({}),
    );
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    let (status, _) = api.post(
        &format!("/api/v1/runtime/notifications/{uncertain}/replay"),
        json!({"attestation": "relay log shows no delivery", "channels": ["EMAIL"]}),
    );
    assert_eq!(status, StatusCode::OK);
    let (status, bad) = api.post(
        &format!("/api/v1/runtime/notifications/{resolvable}/replay"),
        json!({"channels": ["FAX"], "force": true, "reason": "x"}),
    );
    assert_eq!(status, StatusCode::BAD_REQUEST, "{bad}");
    let (status, bad) = api.post(
        &format!("/api/v1/runtime/notifications/{resolvable}/replay"),
        json!({"operator": 7}),
    );
    assert_eq!(status, StatusCode::BAD_REQUEST, "{bad}");
    // A body that names a key twice says two things: refused, never read as its last.
    let (status, bad) = api.send(
        api.client
            .post(api.url(&format!(
                "/api/v1/runtime/notifications/{resolvable}/replay"
            )))
            .bearer_auth(KEY)
            .header("content-type", "application/json")
            .body(r#"{"force": false, "reason": "x", "force": true}"#),
    );
    assert_eq!(status, StatusCode::BAD_REQUEST, "{bad}");
    assert!(
        bad["error"]
            .as_str()
            .unwrap_or_default()
            .contains("\"force\" is given twice"),
        "{bad}"
    );
    assert_eq!(api.count(&resolvable, "REPLAYED"), 0);
}

/// A note's body is read as a remediation's is: a key it does not know is refused, not
/// dropped, so a misspelt fix time never leaves a plain note that a report reads as no fix.
#[test]
fn a_note_naming_a_key_it_does_not_know_is_refused_and_not_kept() {
    let api = Api::new();
    let notes = || -> i64 {
        api.conn
            .query_row("SELECT COUNT(*) FROM uns_notes", [], |row| row.get(0))
            .expect("count")
    };
    let (status, bad) = api.post(
        "/api/v1/runtime/notes",
        json!({"text": "relay restarted", "fixedAt": 1000.0}),
    );
    assert_eq!(status, StatusCode::BAD_REQUEST, "{bad}");
    let said = bad["error"].as_str().unwrap_or_default();
    assert!(said.contains("fixedAt"), "{bad}");
    assert_eq!(notes(), 0);
    // The text is checked where the note is written, whoever sends it: none, or too much.
    let long = "x".repeat(unsctl::remediation::note::MAX_TEXT + 1);
    for (text, words) in [(" \n ", "needs some text"), (&long[..], "at most 2000")] {
        let (status, bad) = api.post("/api/v1/runtime/notes", json!({ "text": text }));
        assert_eq!(status, StatusCode::BAD_REQUEST, "{bad}");
        let said = bad["error"].as_str().unwrap_or_default();
        assert!(said.contains(words), "{bad}");
    }
    assert_eq!(notes(), 0);
    let (status, kept) = api.post(
        "/api/v1/runtime/notes",
        json!({"text": "relay restarted", "fixed_at": 1000.0}),
    );
    assert_eq!(status, StatusCode::OK, "{kept}");
    assert_eq!(kept["payload"]["fixed_at"].as_f64(), Some(1000.0));
    assert_eq!(notes(), 1);
}

/// A kind named many times is still one kind: the search never widens to every kind.
#[test]
fn a_kind_named_a_hundred_times_is_searched_as_one() {
    let api = Api::new();
    let _ = replay_entry(&api.conn, 1000.0);
    let _ = verify_entry(&api.conn, 2000.0);
    let query = "kind=DEAD_LETTERED&".repeat(100);
    let (status, body) = api.get(&format!("/api/v1/runtime/events?{query}limit=100"));
    assert_eq!(status, StatusCode::OK, "{body}");
    let kinds: BTreeSet<String> = body["events"]
        .as_array()
        .map(|events| {
            events
                .iter()
                .filter_map(|e| e["kind"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default();
    assert_eq!(
        kinds,
        BTreeSet::from(["DEAD_LETTERED".to_string()]),
        "{body}"
    );
    assert_eq!(body["events"].as_array().map(Vec::len), Some(2), "{body}");
}

/// Every input has a stated bound, and past it the answer is a JSON error that says which;
/// nothing is acted on.
#[test]
fn bodies_and_ids_past_their_limits_are_refused_with_the_limit_named() {
    let api = Api::new();
    let replayable = replay_entry(&api.conn, 1000.0);
    // A valid object, padded past 64 KiB.
    let padded = format!(
        "{{\"reason\": \"webhook fixed\"{}}}",
        " ".repeat(unsctl::server::BODY_LIMIT)
    );
    for path in [
        format!("/api/v1/runtime/notifications/{replayable}/replay"),
        "/api/v1/notifications".to_string(),
    ] {
        let (status, body) = api.send(
            api.client
                .post(api.url(&path))
                .bearer_auth(KEY)
                .header("content-type", "application/json")
                .body(padded.clone()),
        );
        assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE, "{path}: {body}");
        assert_eq!(body["kind"], "too_large", "{body}");
        assert!(
            body["error"]
                .as_str()
                .unwrap_or_default()
                .contains("64 KiB"),
            "{body}"
        );
    }
    assert_eq!(api.count(&replayable, "REPLAYED"), 0);
    let long = "n".repeat(unsctl::model::MAX_ID_BYTES + 1);
    for path in [
        format!("/api/v1/runtime/notifications/{long}"),
        format!("/api/v1/runtime/notifications/{long}/replay"),
    ] {
        let (status, body) = if path.ends_with("replay") {
            api.post(&path, json!({}))
        } else {
            api.get(&path)
        };
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
        assert!(
            body["error"]
                .as_str()
                .unwrap_or_default()
                .contains("256 bytes"),
            "{body}"
        );
    }
}

#[test]
fn two_concurrent_replays_of_one_entry_make_exactly_one() {
    let api = Api::new();
    for round in 0..5 {
        let id = replay_entry(&api.conn, 1000.0 + f64::from(round));
        let url = api.url(&format!("/api/v1/runtime/notifications/{id}/replay"));
        let barrier = std::sync::Arc::new(std::sync::Barrier::new(2));
        let handles: Vec<_> = (0..2)
            .map(|n| {
                let (url, barrier, client) = (url.clone(), barrier.clone(), api.client.clone());
                std::thread::spawn(move || {
                    barrier.wait();
                    client
                        .post(url)
                        .bearer_auth(KEY)
                        .json(&json!({"operator": format!("op{n}")}))
                        .send()
                        .map(|r| r.status())
                })
            })
            .collect();
        let mut statuses: Vec<StatusCode> = handles
            .into_iter()
            .map(|h| h.join().expect("thread").expect("request"))
            .collect();
        statuses.sort();
        assert_eq!(statuses, [StatusCode::OK, StatusCode::CONFLICT]);
        assert_eq!(api.count(&id, "REPLAYED"), 1);
    }
}

#[test]
fn the_server_refuses_to_start_open_on_a_public_address() {
    let dir = tempfile::tempdir().expect("dir");
    let config = |listen: &str, key: Option<&str>| unsctl::server::ServerConfig {
        listen: listen.parse().expect("addr"),
        ..unsctl::server::ServerConfig::api_only(
            dir.path().join("uns.db"),
            key.map(|k| unsctl::server::Keys::single(k).expect("key")),
        )
    };
    let refused = unsctl::server::start(config("0.0.0.0:0", None));
    assert!(matches!(
        refused,
        Err(unsctl::server::ServeError::InsecureNotLoopback(_))
    ));
    let open = unsctl::server::start(config("127.0.0.1:0", None))
        .expect("loopback without a key is allowed");
    unsctl::runtime::adapters::init_tls();
    let status = Client::new()
        .get(format!("http://{}/api/v1/dlq", open.addr))
        .send()
        .expect("get")
        .status();
    assert_eq!(status, StatusCode::OK);
}

fn limited(db: &std::path::Path, limits: unsctl::server::Limits) -> unsctl::server::RunningServer {
    unsctl::server::start(unsctl::server::ServerConfig {
        limits,
        ..unsctl::server::ServerConfig::api_only(
            db.to_path_buf(),
            Some(unsctl::server::Keys::single(KEY).expect("key")),
        )
    })
    .expect("server")
}

/// Reads until the server closes the connection; what it sent, and whether it closed.
fn until_closed(stream: &mut std::net::TcpStream) -> (String, bool) {
    use std::io::Read;
    stream
        .set_read_timeout(Some(std::time::Duration::from_secs(15)))
        .expect("timeout");
    let mut received = Vec::new();
    let mut buffer = [0u8; 1024];
    loop {
        match stream.read(&mut buffer) {
            Ok(0) => return (String::from_utf8_lossy(&received).into_owned(), true),
            Ok(n) => received.extend_from_slice(&buffer[..n]),
            Err(err) if err.kind() == std::io::ErrorKind::ConnectionReset => {
                return (String::from_utf8_lossy(&received).into_owned(), true);
            }
            Err(_) => return (String::from_utf8_lossy(&received).into_owned(), false),
        }
    }
}

#[test]
fn silent_trickling_and_idle_clients_are_closed_by_the_limits() {
    use std::io::Write;
    use std::time::Duration;
    let dir = tempfile::tempdir().expect("dir");
    let db = dir.path().join("uns.db");
    drop(schema::open(&db, OpenMode::Create).expect("store"));
    let server = limited(
        &db,
        unsctl::server::Limits {
            max_connections: 64,
            header_timeout: Duration::from_millis(300),
            idle_timeout: Duration::from_secs(30),
            request_timeout: Duration::from_millis(500),
        },
    );
    // Silent: connects and says nothing.
    let mut silent = std::net::TcpStream::connect(server.addr).expect("connect");
    // Trickling: half a request line, and no more.
    let mut trickling = std::net::TcpStream::connect(server.addr).expect("connect");
    trickling
        .write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
        .expect("write");
    // Idle: one request, then keeps the connection open and quiet.
    let mut idle = std::net::TcpStream::connect(server.addr).expect("connect");
    idle.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        .expect("write");
    for (name, stream) in [
        ("silent", &mut silent),
        ("trickling", &mut trickling),
        ("idle", &mut idle),
    ] {
        let (_, closed) = until_closed(stream);
        assert!(closed, "{name}: the server closed the connection");
    }
    // A body that trickles in: the request is answered 408, as JSON.
    let mut slow_body = std::net::TcpStream::connect(server.addr).expect("connect");
    write!(
        slow_body,
        "POST /api/v1/notifications HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {KEY}\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n{{\"channels\""
    )
    .expect("write");
    let (answer, _) = until_closed(&mut slow_body);
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    assert!(answer.contains(r#""kind":"timeout""#), "{answer}");
    // A wrong method gets the JSON error too.
    let client = Client::new();
    let response = client
        .put(format!("http://{}/api/v1/dlq", server.addr))
        .bearer_auth(KEY)
        .send()
        .expect("put");
    assert_eq!(response.status(), StatusCode::METHOD_NOT_ALLOWED);
    let body: Value = response.json().expect("json body");
    assert!(body["error"].is_string(), "{body}");
    // A path id past the limit is refused before any store work.
    let long = "n".repeat(300);
    let (status, body) = {
        let response = client
            .get(format!(
                "http://{}/api/v1/runtime/notifications/{long}",
                server.addr
            ))
            .bearer_auth(KEY)
            .send()
            .expect("get");
        (response.status(), response.json::<Value>().expect("json"))
    };
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
}

/// One keep-alive request on `stream`, with the key when `key`; its answer's head.
fn ask(stream: &mut std::net::TcpStream, key: bool) -> String {
    use std::io::{Read, Write};
    let auth = if key {
        format!("Authorization: Bearer {KEY}\r\n")
    } else {
        String::new()
    };
    write!(
        stream,
        "GET /api/v1/dlq?limit=1 HTTP/1.1\r\nHost: uns\r\n{auth}\r\n"
    )
    .expect("write");
    stream
        .set_read_timeout(Some(std::time::Duration::from_secs(15)))
        .expect("timeout");
    let mut received = Vec::new();
    let mut buffer = [0u8; 4096];
    loop {
        let n = stream.read(&mut buffer).expect("read");
        assert!(n > 0, "closed: {}", String::from_utf8_lossy(&received));
        received.extend_from_slice(&buffer[..n]);
        let text = String::from_utf8_lossy(&received).into_owned();
        if let Some((head, body)) = text.split_once("\r\n\r\n") {
            let length: usize = head
                .lines()
                .find_map(|l| {
                    l.to_ascii_lowercase()
                        .strip_prefix("content-length: ")
                        .map(str::to_string)
                })
                .and_then(|n| n.trim().parse().ok())
                .unwrap_or(0);
            if body.len() >= length {
                return head.to_string();
            }
        }
    }
}

/// A server on an empty store that takes `cap` connections at once, with a header
/// timeout longer than any test here waits.
fn capped(cap: usize) -> (tempfile::TempDir, unsctl::server::RunningServer) {
    let dir = tempfile::tempdir().expect("dir");
    let db = dir.path().join("uns.db");
    drop(schema::open(&db, OpenMode::Create).expect("store"));
    let server = limited(
        &db,
        unsctl::server::Limits {
            max_connections: cap,
            header_timeout: std::time::Duration::from_secs(20),
            ..unsctl::server::Limits::default()
        },
    );
    (dir, server)
}

#[test]
fn past_the_connection_cap_the_answer_is_a_json_503() {
    let (_dir, server) = capped(2);
    // Two clients with the key, their connections kept alive: the cap is theirs.
    let mut held: Vec<std::net::TcpStream> = (0..2)
        .map(|_| std::net::TcpStream::connect(server.addr).expect("connect"))
        .collect();
    for stream in &mut held {
        assert!(ask(stream, true).starts_with("HTTP/1.1 200"));
    }
    let mut third = std::net::TcpStream::connect(server.addr).expect("connect");
    let (answer, closed) = until_closed(&mut third);
    assert!(closed, "{answer}");
    assert!(answer.starts_with("HTTP/1.1 503"), "{answer}");
    assert!(answer.contains("too many connections"), "{answer}");
    drop(held);
}

/// Connections that never send a request, or only ones without a key, cannot crowd out a
/// client with one: at the cap, a new connection takes the place of the oldest of them.
#[test]
fn idle_and_keyless_connections_make_room_for_a_client_with_a_key() {
    let (_dir, server) = capped(3);
    let mut keyed = std::net::TcpStream::connect(server.addr).expect("connect");
    assert!(ask(&mut keyed, true).starts_with("HTTP/1.1 200"));
    let mut idle = std::net::TcpStream::connect(server.addr).expect("connect");
    let mut keyless = std::net::TcpStream::connect(server.addr).expect("connect");
    assert!(ask(&mut keyless, false).starts_with("HTTP/1.1 401"));
    // The cap is reached; a new client with the key still gets in, twice.
    let mut newcomers = Vec::new();
    for _ in 0..2 {
        let mut newcomer = std::net::TcpStream::connect(server.addr).expect("connect");
        let head = ask(&mut newcomer, true);
        assert!(head.starts_with("HTTP/1.1 200"), "{head}");
        newcomers.push(newcomer);
    }
    // The idle and the keyless connections made the room; the keyed one is still served.
    assert!(until_closed(&mut idle).1, "the idle connection was closed");
    assert!(
        until_closed(&mut keyless).1,
        "the keyless connection was closed"
    );
    assert!(ask(&mut keyed, true).starts_with("HTTP/1.1 200"));
}

/// The server's own verify route says which of the records it was given it could not
/// read, beside the answers that could not rest on them: a caller without unsctl must
/// not take an unreadable log for doubt about each message.
#[test]
fn the_servers_verify_says_which_records_it_could_not_read() {
    let dir = tempfile::tempdir().expect("dir");
    let db = dir.path().join("uns.db");
    let conn = schema::open(&db, OpenMode::Create).expect("store");
    let id = verify_entry(&conn, 1000.0);
    let log = dir.path().join("gone").join("mail.log");
    let mut config = unsctl::server::ServerConfig::api_only(
        db.clone(),
        Some(unsctl::server::Keys::single(KEY).expect("key")),
    );
    config.verify.relay_logs = vec![log.clone()];
    let server = unsctl::server::start(config).expect("server starts");
    unsctl::runtime::adapters::init_tls();
    let response = Client::new()
        .post(format!(
            "http://{}/api/v1/runtime/notifications/{id}/verify",
            server.addr
        ))
        .bearer_auth(KEY)
        .json(&json!({}))
        .send()
        .expect("request");
    assert_eq!(response.status(), StatusCode::OK);
    let body: Value = response.json().expect("json");
    assert_eq!(body["summary"]["CANNOT_TELL"], 1, "{body:#}");
    let unread: Vec<&str> = body["unread"]
        .as_array()
        .map(|lines| lines.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    assert_eq!(unread.len(), 1, "{body:#}");
    assert!(
        unread[0].starts_with(&log.display().to_string()),
        "{body:#}"
    );
}
