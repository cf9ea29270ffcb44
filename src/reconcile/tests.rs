//! The counting rules, case by case: what makes a copy on each channel, what leaves an
//! attempt in doubt, and what a provider's record may and may not prove.

use super::records::Records;
use super::{Class, Reconciled, What, reconcile};
use crate::history::{Attempt, ChannelHistory, History, Parts, Resolution, Verification};
use crate::model::ProviderOutcome;
use crate::model::{Channel, ChannelSet, Status, Stored};
use crate::verify::{Sources, pagerduty, slack};
use std::collections::HashMap;

const T0: f64 = 1_764_590_400.0;
/// An hour after T0: every window is past.
const NOW: f64 = T0 + 3600.0;
const ID: &str = "n-0001";

fn attempt(cycle: i64, number: i64, started: f64, recorded: ProviderOutcome) -> Attempt {
    let mut attempt = Attempt::stated(
        Channel::Email,
        cycle,
        number,
        (started, started + 60.0),
        recorded,
        number * 10,
    );
    attempt.sender = Some("uns@uns.local".into());
    attempt.error = (recorded != ProviderOutcome::Accepted).then(|| "timed out".to_string());
    attempt
}

fn history(status: Status, channel: Channel, attempts: Vec<Attempt>) -> History {
    let attempts = attempts
        .into_iter()
        .map(|mut attempt: Attempt| {
            attempt.channel = channel;
            attempt
        })
        .collect();
    let mut by_channel = Parts::default();
    by_channel.insert(
        channel,
        ChannelHistory {
            attempts,
            verifications: Vec::new(),
        },
    );
    History {
        id: ID.into(),
        status: Stored::Known(status),
        dead_letter: status == Status::Dead,
        cycle: 1,
        recipient: Some("ops@example.com".into()),
        channels: ChannelSet::from_iter([channel]),
        by_channel,
        ..History::blank()
    }
}

fn sources() -> Sources {
    Sources {
        skew: 5.0,
        ..Sources::default()
    }
}

fn one(history: &History, records: &Records) -> Reconciled {
    let mut all = reconcile(history, records, None, NOW);
    assert_eq!(all.len(), 1, "{all:?}");
    all.remove(0)
}

fn class(history: &History, records: &Records) -> (Class, usize, usize) {
    let item = one(history, records);
    (item.class, item.copies, item.unknown_attempts)
}

fn no_records() -> Records {
    Records::none(sources())
}

#[test]
fn the_history_alone_counts_accepted_attempts_and_leaves_the_unknown_in_doubt() {
    use ProviderOutcome::*;
    let cases = [
        (Status::Delivered, vec![Accepted], (Class::Once, 1, 0)),
        (
            Status::Delivered,
            vec![Accepted, Accepted],
            (Class::Duplicated, 2, 0),
        ),
        (
            Status::Delivered,
            vec![Unknown, Accepted],
            (Class::MaybeDuplicated, 1, 1),
        ),
        (Status::Dead, vec![Unknown], (Class::Unsettled, 0, 1)),
        (
            Status::Dead,
            vec![Rejected, Rejected],
            (Class::Missing, 0, 0),
        ),
        (Status::Pending, vec![Rejected], (Class::Unsettled, 0, 0)),
    ];
    for (status, outcomes, expected) in cases {
        let attempts = outcomes
            .iter()
            .enumerate()
            .map(|(n, o)| attempt(1, n as i64 + 1, T0 + 100.0 * n as f64, *o))
            .collect();
        let h = history(status, Channel::Email, attempts);
        assert_eq!(
            class(&h, &no_records()),
            expected,
            "{status:?} {outcomes:?}"
        );
    }
}

#[test]
fn a_resolved_entry_without_a_copy_is_missing_and_says_who_resolved_it() {
    let mut h = history(
        Status::Resolved,
        Channel::Slack,
        vec![attempt(1, 1, T0, ProviderOutcome::Rejected)],
    );
    h.resolution = Some(Resolution {
        event_id: 42,
        at: T0 + 500.0,
        operator: "alice (key default)".into(),
        reason: Some("INC-7: channel archived".into()),
        given_up: [Channel::Slack].into_iter().collect(),
    });
    let item = one(&h, &no_records());
    assert_eq!(item.class, Class::Missing);
    let settled = item
        .evidence
        .iter()
        .find(|e| e.what == What::Settled)
        .expect("settled");
    assert!(
        settled
            .text
            .contains("given up on purpose by alice (key default)"),
        "{}",
        settled.text
    );
    assert!(
        settled.text.contains("INC-7: channel archived"),
        "{}",
        settled.text
    );
    assert_eq!(settled.event_ids, vec![42]);
}

#[test]
fn recorded_verifications_settle_an_attempt_either_way() {
    let mut h = history(
        Status::Delivered,
        Channel::Email,
        vec![
            attempt(1, 1, T0, ProviderOutcome::Unknown),
            attempt(1, 2, T0 + 100.0, ProviderOutcome::Accepted),
        ],
    );
    let verified = |delivered: bool| Verification {
        channel: Channel::Email,
        event_id: 99,
        at: T0 + 900.0,
        cycle: 1,
        attempts: vec![1],
        delivered,
        source: "relay-log".into(),
    };
    let part = h.by_channel.get_mut(&Channel::Email).expect("email");
    part.verifications.push(verified(true));
    assert_eq!(class(&h, &no_records()), (Class::Duplicated, 2, 0));
    let part = h.by_channel.get_mut(&Channel::Email).expect("email");
    part.verifications = vec![verified(false)];
    assert_eq!(class(&h, &no_records()), (Class::Once, 1, 0));
}

fn incident(n: i64, created: f64, status: &str) -> pagerduty::Incident {
    pagerduty::Incident {
        id: Some(format!("PINC{n}")),
        incident_number: Some(n),
        incident_key: Some(ID.into()),
        status: Some(status.into()),
        created_at: Some(crate::clock::rfc3339(created.floor())),
        last_status_change_at: Some(crate::clock::rfc3339(created.floor())),
        html_url: None,
        service: Some(pagerduty::Reference {
            id: Some("PSVC".into()),
            summary: Some("checkout on-call".into()),
        }),
        grouped: None,
    }
}

fn with_incidents(incidents: Result<Vec<pagerduty::Incident>, String>) -> Records {
    let sources = Sources {
        pagerduty: Some(pagerduty::Api {
            api_url: "http://127.0.0.1:9".into(),
            token: "pd-secret-token".into(),
            timeout: crate::verify::http::DEFAULT_TIMEOUT,
        }),
        ..sources()
    };
    Records::read_already(sources, None, HashMap::from([(ID.to_string(), incidents)]))
}

#[test]
fn pagerduty_counts_incidents_not_triggers() {
    let two_triggers = history(
        Status::Delivered,
        Channel::Pagerduty,
        vec![
            attempt(1, 1, T0, ProviderOutcome::Accepted),
            attempt(2, 2, T0 + 600.0, ProviderOutcome::Accepted),
        ],
    );
    // Without the incident list, the second trigger may have merged or paged again.
    assert_eq!(
        class(&two_triggers, &no_records()),
        (Class::MaybeDuplicated, 1, 1)
    );
    // One incident, still open: the second trigger was merged into it. One page.
    let merged = with_incidents(Ok(vec![incident(1, T0 + 1.0, "triggered")]));
    let item = one(&two_triggers, &merged);
    assert_eq!((item.class, item.copies), (Class::Once, 1));
    assert_eq!(item.recipient.as_deref(), Some("checkout on-call"));
    assert!(
        item.evidence
            .iter()
            .any(|e| e.what == What::Note && e.text.contains("merged into an incident")),
        "{item:?}"
    );
    // Resolved between the two: the second trigger opened another incident. Two pages.
    let paged_twice = with_incidents(Ok(vec![
        incident(1, T0 + 1.0, "resolved"),
        incident(2, T0 + 601.0, "triggered"),
    ]));
    let item = one(&two_triggers, &paged_twice);
    assert_eq!((item.class, item.copies), (Class::Duplicated, 2));
    let incidents: Vec<&str> = item
        .evidence
        .iter()
        .filter_map(|e| e.incident.as_deref())
        .collect();
    assert_eq!(incidents, ["PINC1 (#1)", "PINC2 (#2)"]);
}

/// A report judges as of its window's end, which can come before a trigger's window (its
/// lease and the skew) is past: PagerDuty's list cannot rule out an incident yet, but the
/// VERIFIED DELIVERED event recorded it, and the trigger it lists, the cycle's only one,
/// made that incident. One copy; a second trigger of the cycle stays in doubt.
#[test]
fn a_trigger_verified_delivered_is_its_incident_before_its_window_is_past() {
    let verified = |attempts: Vec<i64>| Verification {
        channel: Channel::Pagerduty,
        event_id: 77,
        at: T0 + 70.0,
        cycle: 1,
        attempts,
        delivered: true,
        source: "pagerduty".into(),
    };
    let mut one_trigger = history(
        Status::Resolved,
        Channel::Pagerduty,
        vec![attempt(1, 1, T0, ProviderOutcome::Unknown)],
    );
    one_trigger
        .by_channel
        .get_mut(&Channel::Pagerduty)
        .expect("pagerduty")
        .verifications
        .push(verified(vec![1]));
    let listed = with_incidents(Ok(vec![incident(1, T0 + 1.0, "triggered")]));
    let before_the_window_ends = T0 + 30.0;
    let item = reconcile(&one_trigger, &listed, None, before_the_window_ends).remove(0);
    assert_eq!(
        (item.class, item.copies, item.unknown_attempts),
        (Class::Once, 1, 0),
        "{item:?}"
    );
    // Without any list at all, the record alone says the same.
    assert_eq!(class(&one_trigger, &no_records()), (Class::Once, 1, 0));

    let mut two_triggers = history(
        Status::Resolved,
        Channel::Pagerduty,
        vec![
            attempt(1, 1, T0, ProviderOutcome::Unknown),
            attempt(1, 2, T0 + 62.0, ProviderOutcome::Unknown),
        ],
    );
    two_triggers
        .by_channel
        .get_mut(&Channel::Pagerduty)
        .expect("pagerduty")
        .verifications
        .push(verified(vec![1, 2]));
    let item = reconcile(&two_triggers, &listed, None, before_the_window_ends).remove(0);
    assert_eq!(
        (item.class, item.copies, item.unknown_attempts),
        (Class::MaybeDuplicated, 1, 1),
        "a second trigger may have paged again: {item:?}"
    );
}

#[test]
fn a_pagerduty_record_that_is_not_proof_leaves_doubt_and_never_leaks_the_token() {
    let unknown = history(
        Status::Dead,
        Channel::Pagerduty,
        vec![attempt(1, 1, T0, ProviderOutcome::Unknown)],
    );
    // An incident under another key, and one created a day before: neither is this
    // notification's page, and neither lets its absence be proven.
    let mut other_key = incident(1, T0 + 1.0, "triggered");
    other_key.incident_key = Some("n-9999".into());
    let records = with_incidents(Ok(vec![other_key, incident(2, T0 - 86_400.0, "resolved")]));
    assert_eq!(class(&unknown, &records), (Class::Unsettled, 0, 1));
    // The API failing with the token in its words: doubt, and the token is not repeated.
    let records = with_incidents(Err("401 for token pd-secret-token".into()));
    let item = one(&unknown, &records);
    assert_eq!((item.class, item.unknown_attempts), (Class::Unsettled, 1));
    let text = serde_json::to_string(&item).expect("json");
    assert!(!text.contains("pd-secret-token"), "{text}");
    // The whole list read, and no incident: the unknown trigger never paged.
    let records = with_incidents(Ok(Vec::new()));
    assert_eq!(class(&unknown, &records), (Class::Missing, 0, 0));
}

/// PagerDuty's alert grouping: the trigger became an alert of an incident another key
/// opened a day before. The incident has no incident_key; its alert with this key, made
/// inside the trigger's window, is the one copy, at the alert's time.
#[test]
fn an_alert_grouped_into_another_incident_is_the_triggers_copy() {
    let unknown = history(
        Status::Dead,
        Channel::Pagerduty,
        vec![attempt(1, 1, T0, ProviderOutcome::Unknown)],
    );
    let alert_at = (T0 + 1.0).floor();
    let mut grouping = incident(1, T0 - 86_400.0, "triggered");
    grouping.incident_key = None;
    grouping.grouped = Some(Ok(vec![pagerduty::Alert {
        id: Some("PALERT1".into()),
        alert_key: Some(ID.into()),
        status: Some("triggered".into()),
        created_at: Some(crate::clock::rfc3339(alert_at)),
    }]));
    let item = one(&unknown, &with_incidents(Ok(vec![grouping.clone()])));
    assert_eq!((item.class, item.copies), (Class::Once, 1), "{item:?}");
    assert!(
        item.evidence.iter().any(|e| e.at == Some(alert_at)),
        "the copy at the alert's time: {item:?}"
    );
    // Its alerts unread: the incident may hold the copy, so nothing is proven missing.
    grouping.grouped = Some(Err("PagerDuty answered HTTP 500".into()));
    assert_eq!(
        class(&unknown, &with_incidents(Ok(vec![grouping]))),
        (Class::Unsettled, 0, 1)
    );
}

fn tagged(ts: f64, key: &str, bot: &str) -> slack::Tagged {
    slack::Tagged {
        ts: format!("{ts:.6}"),
        idempotency_key: key.into(),
        bot_id: Some(bot.into()),
        app_id: None,
        user: None,
    }
}

fn with_slack(tagged: Vec<slack::Tagged>) -> Records {
    let sources = Sources {
        slack: Some(slack::Api {
            api_url: "http://127.0.0.1:9".into(),
            token: "xoxb-secret".into(),
            channel: "C0ALERTS".into(),
            bot_id: Some("B0UNS".into()),
            timeout: crate::verify::http::DEFAULT_TIMEOUT,
        }),
        ..sources()
    };
    let read = tagged.len();
    Records::read_already(
        sources,
        Some(Ok(slack::Window {
            tagged,
            unreadable: Vec::new(),
            read,
        })),
        HashMap::new(),
    )
}

#[test]
fn slack_counts_messages_with_the_cycles_key_posted_by_the_webhooks_bot() {
    let key = format!("{ID}:SLACK:1");
    let h = history(
        Status::Dead,
        Channel::Slack,
        vec![
            attempt(1, 1, T0, ProviderOutcome::Unknown),
            attempt(1, 2, T0 + 70.0, ProviderOutcome::Unknown),
        ],
    );
    // Both attempts of the cycle posted: two messages with the key, both the bot's.
    let records = with_slack(vec![
        tagged(T0 + 2.0, &key, "B0UNS"),
        tagged(T0 + 71.0, &key, "B0UNS"),
    ]);
    let item = one(&h, &records);
    assert_eq!(
        (item.class, item.copies, item.unknown_attempts),
        (Class::Duplicated, 2, 0)
    );
    assert_eq!(item.recipient.as_deref(), Some("C0ALERTS"));
    // One of them posted by someone else: not proof, and the doubt stays.
    let records = with_slack(vec![
        tagged(T0 + 2.0, &key, "B0UNS"),
        tagged(T0 + 71.0, &key, "U0EVE"),
    ]);
    assert_eq!(class(&h, &records), (Class::MaybeDuplicated, 1, 1));
    // Another cycle's key, or no message at all in a history read whole: never posted.
    let records = with_slack(vec![tagged(T0 + 2.0, &format!("{ID}:SLACK:2"), "B0UNS")]);
    assert_eq!(class(&h, &records), (Class::Missing, 0, 0));
}

#[test]
fn an_email_attempt_is_one_copy_however_its_records_agree() {
    // Accepted, and also VERIFIED DELIVERED: one attempt, one copy.
    let mut h = history(
        Status::Delivered,
        Channel::Email,
        vec![attempt(1, 1, T0, ProviderOutcome::Accepted)],
    );
    h.by_channel
        .get_mut(&Channel::Email)
        .expect("email")
        .verifications
        .push(Verification {
            channel: Channel::Email,
            event_id: 7,
            at: T0 + 10.0,
            cycle: 1,
            attempts: vec![1],
            delivered: true,
            source: "relay-log".into(),
        });
    let item = one(&h, &no_records());
    assert_eq!((item.class, item.copies), (Class::Once, 1));
    assert_eq!(item.evidence[0].sources, ["history"]);
    assert!(item.evidence[0].event_ids.contains(&7));
}

/// The hint for what is in doubt names only the records not given, for the channels in
/// doubt: never a log or a token the operator already gave.
#[test]
fn the_records_not_given_are_named_for_the_channels_in_doubt_alone() {
    use crate::model::ChannelSet;
    let every: ChannelSet = [Channel::Email, Channel::Slack, Channel::Pagerduty]
        .into_iter()
        .collect();
    assert_eq!(
        no_records().not_given(&every),
        [
            "--relay-log",
            "UNS_SLACK_BOT_TOKEN and UNS_SLACK_CHANNEL",
            "UNS_PAGERDUTY_API_TOKEN"
        ]
    );
    let pagerduty_given = with_incidents(Ok(Vec::new()));
    assert_eq!(
        pagerduty_given.not_given(&every),
        ["--relay-log", "UNS_SLACK_BOT_TOKEN and UNS_SLACK_CHANNEL"]
    );
    let only_pagerduty: ChannelSet = [Channel::Pagerduty].into_iter().collect();
    assert!(pagerduty_given.not_given(&only_pagerduty).is_empty());
    let only_email: ChannelSet = [Channel::Email].into_iter().collect();
    assert_eq!(no_records().not_given(&only_email), ["--relay-log"]);
}

/// Every case of the runbook as `repro all` left it, in a store on disk.
fn every_case_store(dir: &std::path::Path) -> crate::store::direct::DirectStore {
    let db = dir.join("uns.db");
    rusqlite::Connection::open(&db)
        .expect("store")
        .execute_batch(include_str!("../../fixtures/every-case.sql"))
        .expect("fixture");
    crate::store::direct::DirectStore::open_read_only(&db).expect("open")
}

/// Reconciling runs beside the walk that reads the histories: every notification comes
/// to the visitor once, in id order, and a visitor that fails stops it with its own
/// error, called no more.
#[test]
fn a_visitor_sees_each_notification_in_order_and_its_failure_stops_the_walk() {
    let dir = tempfile::tempdir().expect("dir");
    let store = every_case_store(dir.path());
    let asked = super::Asked::default();
    let reconciliation = super::Reconciliation::read(&store, &asked, sources(), NOW).expect("read");
    let mut ids = Vec::new();
    let read = reconciliation
        .each(&store, &mut |item| {
            ids.push(item.id);
            Ok(())
        })
        .expect("each");
    let mut distinct = ids.clone();
    distinct.dedup();
    assert_eq!(read, distinct.len(), "{ids:?}");
    assert!(read >= 6, "{ids:?}");
    assert!(ids.is_sorted(), "{ids:?}");
    let mut seen = 0;
    let failed = reconciliation.each(&store, &mut |_| {
        seen += 1;
        if seen == 2 {
            return Err(crate::store::StoreError::Other("the disk is full".into()));
        }
        Ok(())
    });
    assert!(
        matches!(&failed, Err(crate::store::StoreError::Other(why)) if why == "the disk is full"),
        "{failed:?}"
    );
    assert_eq!(seen, 2);
    // Stopped is a visitor's way to end early: no failure, and no item after it.
    let mut seen = 0;
    let stopped = reconciliation.each(&store, &mut |_| {
        seen += 1;
        if seen == 3 {
            return Err(crate::store::StoreError::Stopped);
        }
        Ok(())
    });
    assert!(stopped.is_ok(), "{stopped:?}");
    assert_eq!(seen, 3);
}

/// What the first walk collects from `store`, reading the histories with `events`: the
/// needs (or the walk's error), and the kinds of the events it was handed whose kind
/// could be read, with how many.
fn needs_read_with(
    store: &dyn crate::store::Store,
    sources: &Sources,
    events: crate::store::Events,
) -> (
    Result<super::records::Needs, String>,
    std::collections::BTreeMap<String, usize>,
) {
    let mut needs = super::records::Needs::default();
    let mut reader = crate::history::Reader::default();
    let mut kinds = std::collections::BTreeMap::new();
    let walked = super::walk(
        store,
        &super::Asked::default(),
        events,
        &mut |row, stored| {
            // A kind cell that is not text is read as text, and said to be unreadable.
            for event in stored
                .iter()
                .filter(|e| !e.unreadable.iter().any(|p| p.starts_with("kind")))
            {
                *kinds.entry(event.kind.to_string()).or_default() += 1;
            }
            let observed = stored.iter().map(crate::store::StoredEvent::observed);
            needs.add(reader.read_history(row, observed), sources);
            Ok(())
        },
    );
    (walked.map(|()| needs).map_err(|err| err.to_string()), kinds)
}

/// Stores to read histories from, each named, as SQL: every case of the fixture, the
/// same with events whose kind only looks like an attempt's, and each hostile store.
fn stores_of_every_shape() -> Vec<(String, String)> {
    // Kinds that only look like a start, each with a payload a start would have: no
    // reading takes them for an attempt, so leaving them unread changes nothing.
    let look_alikes = "
        INSERT INTO uns_events (notification_id, at, kind, payload)
        SELECT id, at - 30, kind_, json_object('channel', 'EMAIL', 'cycle', 1,
               'attempt', 7, 'lease_token', 'x')
        FROM (SELECT notification_id AS id, min(at) AS at FROM uns_events GROUP BY 1)
        CROSS JOIN (SELECT CAST('CHANNEL_ATTEMPT_STARTED' AS BLOB) AS kind_
                    UNION ALL SELECT 'channel_attempt_started'
                    UNION ALL SELECT 'CHANNEL_ATTEMPT_STARTED '
                    UNION ALL SELECT 'ATTEMPT_STARTED');";
    let mut stores: Vec<(String, String)> = vec![
        (
            "every-case".into(),
            include_str!("../../fixtures/every-case.sql").into(),
        ),
        (
            "every-case with look-alike kinds".into(),
            format!(
                "{}{look_alikes}",
                include_str!("../../fixtures/every-case.sql")
            ),
        ),
    ];
    let hostile = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/hostile");
    let base = std::fs::read_to_string(hostile.join("base.sql")).expect("base");
    for entry in std::fs::read_dir(&hostile).expect("hostile fixtures") {
        let path = entry.expect("entry").path();
        if path.extension().is_some_and(|e| e == "sql") && !path.ends_with("base.sql") {
            let patch = std::fs::read_to_string(&path).expect("patch");
            stores.push((path.display().to_string(), format!("{base}\n{patch}")));
        }
    }
    stores
}

/// The store `sql` makes (`name` says which, when it cannot be made), in `dir`.
fn store_of(name: &str, sql: &str, dir: &std::path::Path) -> crate::store::direct::DirectStore {
    let db = dir.join("uns.db");
    rusqlite::Connection::open(&db)
        .expect("store")
        .execute_batch(sql)
        .unwrap_or_else(|err| panic!("{name}: {err}"));
    crate::store::direct::DirectStore::open_read_only(&db)
        .unwrap_or_else(|err| panic!("{name}: {err}"))
}

/// The first walk reads only the events the attempts are read from, and asks the
/// records exactly what a reading of every event would: on every case of the fixture,
/// on each hostile store, and with events whose kind only looks like an attempt's.
#[test]
fn the_first_walk_reads_the_attempts_events_alone_and_asks_the_same() {
    let relay_only = Sources {
        relay_logs: vec!["/nonexistent/maillog".into()],
        ..sources()
    };
    let every_record = Sources {
        slack: Some(slack::Api {
            api_url: "http://127.0.0.1:9".into(),
            token: "xoxb-secret".into(),
            channel: "C0ALERTS".into(),
            bot_id: None,
            timeout: crate::verify::http::DEFAULT_TIMEOUT,
        }),
        pagerduty: Some(pagerduty::Api {
            api_url: "http://127.0.0.1:9".into(),
            token: "pd-secret-token".into(),
            timeout: crate::verify::http::DEFAULT_TIMEOUT,
        }),
        ..relay_only.clone()
    };
    let stores = stores_of_every_shape();
    let mut compared = 0;
    for (name, sql) in &stores {
        let dir = tempfile::tempdir().expect("dir");
        let store = store_of(name, sql, dir.path());
        for sources in [&relay_only, &every_record] {
            let crate::store::Events::Kinds(asked) = super::records::Needs::events(sources) else {
                panic!("the first walk asks for every event");
            };
            let (all, every_kind) = needs_read_with(&store, sources, crate::store::Events::All);
            let (alone, kinds) =
                needs_read_with(&store, sources, crate::store::Events::Kinds(asked));
            assert_eq!(alone, all, "{name}");
            // The store reads no other kind, and every event of those kinds.
            let wanted = |kind: &str| asked.iter().any(|k| k.as_str() == kind);
            let expected: std::collections::BTreeMap<String, usize> = every_kind
                .iter()
                .filter(|(kind, _)| wanted(kind))
                .map(|(kind, count)| (kind.clone(), *count))
                .collect();
            assert_eq!(kinds, expected, "{name}");
            assert!(
                every_kind.keys().any(|kind| !wanted(kind)),
                "{name}: {every_kind:?}"
            );
            compared += 1;
        }
    }
    assert_eq!(compared, 2 * stores.len());
    assert!(
        stores.len() >= 15,
        "every hostile store is read: {}",
        stores.len()
    );
}

/// The notifications a walk of `window` reads from `store`, with each EMAIL attempt:
/// when it started and its Message-ID.
fn walked(
    store: &dyn crate::store::Store,
    window: crate::store::Window,
) -> Vec<(String, Vec<(f64, String)>)> {
    let asked = super::Asked {
        window,
        ..super::Asked::default()
    };
    let mut reader = crate::history::Reader::default();
    let mut walked = Vec::new();
    super::walk(
        store,
        &asked,
        crate::store::Events::All,
        &mut |row, stored| {
            let observed = stored.iter().map(crate::store::StoredEvent::observed);
            let history = reader.read_history(row, observed);
            let email = history
                .by_channel
                .get(&Channel::Email)
                .map(|part| {
                    part.attempts
                        .iter()
                        .filter(|a| a.attempt >= 0)
                        .map(|a| {
                            let id = crate::model::MessageId::new(&history.id, a.cycle, a.attempt);
                            (a.started, id.to_string())
                        })
                        .collect()
                })
                .unwrap_or_default();
            walked.push((history.id.clone(), email));
            Ok(())
        },
    )
    .expect("walk");
    walked
}

/// The starts of a window, read by the index of kinds by time, name every notification
/// the walk of that window reads, so the relay logs searched for their attempts before
/// any history is read hold every attempt the walk then asks about: on every case of the
/// fixture, each hostile store, and events whose kind only looks like a start's, over the
/// whole history and over its later half.
#[test]
fn the_starts_of_a_window_name_every_notification_its_walk_reads() {
    let mut compared = 0;
    for (name, sql) in &stores_of_every_shape() {
        let dir = tempfile::tempdir().expect("dir");
        let store = store_of(name, sql, dir.path());
        let whole = crate::store::Store::window_starts(&store, crate::store::Window::default())
            .expect("starts")
            .expect("a store on disk reads them");
        let mut times = whole.at.clone();
        times.sort_by(f64::total_cmp);
        let later = crate::store::Window {
            since: times.get(times.len() / 2).copied(),
            until: None,
        };
        for window in [crate::store::Window::default(), later] {
            let starts = crate::store::Store::window_starts(&store, window)
                .expect("starts")
                .expect("starts");
            let wanted = crate::verify::relay_log::Wanted::Notifications(std::sync::Arc::new(
                starts.notifications.clone(),
            ));
            for (id, email) in walked(&store, window) {
                assert!(starts.notifications.contains(&id), "{name}: {id}");
                for (_, message_id) in email {
                    assert!(wanted.contains(&message_id), "{name}: {message_id}");
                }
                compared += 1;
            }
        }
    }
    assert!(compared >= 20, "{compared}");
}

/// A relay log for every EMAIL attempt of `walked`, in syslog's layout: the relay's lines
/// a minute apart over all of them, and the message of every other attempt committed a
/// second after it started.
fn relay_log_of(walked: &[(String, Vec<(f64, String)>)], path: &std::path::Path) {
    // Syslog's stamps, which carry no year: each takes the one nearest its pass's time.
    let line = |at: f64, program: &str, text: &str| {
        let layout = crate::verify::relay_log::layouts::Layout::CLASSIC;
        layout.line(at, "relay", &format!("postfix/{program}"), text) + "\n"
    };
    let attempts: Vec<&(f64, String)> = walked.iter().flat_map(|(_, email)| email).collect();
    let first = attempts.iter().map(|a| a.0).fold(f64::INFINITY, f64::min);
    let last = attempts
        .iter()
        .map(|a| a.0)
        .fold(f64::NEG_INFINITY, f64::max);
    let mut lines = Vec::new();
    let mut at = first - 600.0;
    while at < last + 7200.0 {
        lines.push((
            at,
            line(at, "anvil[9]", "statistics: max cache size 1 at x"),
        ));
        at += 60.0;
    }
    for (n, (started, message_id)) in attempts.iter().enumerate().step_by(2) {
        let (at, queue) = (started + 1.0, format!("4A1B2C3D{n:02X}"));
        lines.push((at, line(at, "smtpd[1]", "connect from uns[127.0.0.1]")));
        lines.push((
            at,
            line(at, "smtpd[1]", &format!("{queue}: client=uns[127.0.0.1]")),
        ));
        lines.push((
            at,
            line(
                at,
                "cleanup[2]",
                &format!("{queue}: message-id={message_id}"),
            ),
        ));
        lines.push((
            at,
            line(
                at,
                "qmgr[3]",
                &format!("{queue}: from=<uns@uns.local>, size=400, nrcpt=1 (queue active)"),
            ),
        ));
    }
    lines.sort_by(|a, b| a.0.total_cmp(&b.0));
    let text: String = lines.into_iter().map(|(_, line)| line).collect();
    std::fs::write(path, text).expect("log");
}

/// A window's relay log searched for every attempt of the notifications that made its
/// starts, before any history is read, answers every notification as the search for the
/// Message-IDs a first walk collected does, evidence and all: an attempt of one of them
/// made 100 days before the window too, whose syslog stamps the first walk's search read
/// in a pass of its own.
#[test]
fn a_window_searched_before_its_histories_are_read_answers_as_a_first_walk_does() {
    let dir = tempfile::tempdir().expect("dir");
    let store = every_case_store(dir.path());
    let whole = walked(&store, crate::store::Window::default());
    let first = whole
        .iter()
        .flat_map(|(_, email)| email)
        .map(|a| a.0)
        .fold(f64::INFINITY, f64::min);
    let (early, far) = (&whole[0].0, first - 100.0 * 86_400.0);
    rusqlite::Connection::open(dir.path().join("uns.db"))
        .expect("store")
        .execute(
            "INSERT INTO uns_events (notification_id, at, kind, payload) VALUES (?1, ?2,
             'CHANNEL_ATTEMPT_STARTED', json_object('attempt', 1, 'channel', 'EMAIL',
             'cycle', 0, 'lease_token', 'early', 'smtp_from', 'uns@uns.local'))",
            rusqlite::params![early, far],
        )
        .expect("an early attempt");
    let window = crate::store::Window {
        since: Some(first - 1.0),
        until: None,
    };
    let walked = walked(&store, window);
    assert!(
        walked
            .iter()
            .flat_map(|(_, email)| email)
            .any(|a| a.0 == far),
        "{walked:?}"
    );
    let log = dir.path().join("maillog");
    relay_log_of(&walked, &log);
    let now = walked
        .iter()
        .flat_map(|(_, email)| email)
        .map(|a| a.0)
        .fold(0.0, f64::max)
        + 86_400.0;
    let sources = Sources {
        relay_logs: vec![log],
        smtp_from: vec!["uns@uns.local".into()],
        zone: crate::verify::relay_log::Zone::Fixed(0),
        ..sources()
    };
    let asked = super::Asked {
        window,
        ..super::Asked::default()
    };
    let searched_first = super::Reconciliation::read(&store, &asked, sources.clone(), now)
        .expect("read")
        .all(&store)
        .expect("all");
    let (needs, _) = needs_read_with(&store, &sources, crate::store::Events::All);
    let walked_first = super::Reconciliation {
        window: asked.window,
        records: Records::gather(needs.expect("needs"), sources, now),
        asked,
        now,
    }
    .all(&store)
    .expect("all");
    assert_eq!(searched_first, walked_first);
    // The log was read, and settled copies: the comparison is not of two empty answers.
    let by_log = searched_first
        .iter()
        .flat_map(|item| &item.evidence)
        .filter(|e| e.sources.contains(&"relay-log") && !e.queue_ids.is_empty())
        .count();
    assert!(by_log >= 1, "{searched_first:#?}");
    // The early attempt was answered from the log, whose stamps took their own year.
    let early_word: Vec<&str> = searched_first
        .iter()
        .filter(|item| &item.id == early)
        .flat_map(|item| &item.evidence)
        .filter(|e| e.cycle == Some(0))
        .map(|e| e.text.as_str())
        .collect();
    assert!(!early_word.is_empty(), "{searched_first:#?}");
    assert!(
        early_word.iter().all(|text| !text.contains("150 days")),
        "{early_word:?}"
    );
}

/// A notification of the window with an attempt far from the window's starts: the log's
/// stamps without a year were read by the window's time, so that attempt is not answered
/// from them, and says why; one of a notification the search did not look for says so.
#[test]
fn an_attempt_far_from_the_windows_starts_is_not_answered_from_the_log() {
    let dir = tempfile::tempdir().expect("dir");
    let log = dir.path().join("maillog");
    std::fs::write(&log, "").expect("log");
    let starts = crate::store::WindowStarts {
        notifications: [ID.to_string()].into_iter().collect(),
        at: vec![T0],
    };
    let sources = Sources {
        relay_logs: vec![log],
        ..sources()
    };
    let records = Records::gather_for_window(starts, sources);
    let word = |id: &str, started: f64| {
        let message_id = crate::model::MessageId::new(id, 0, 1).to_string();
        let attempt = attempt(0, 1, started, ProviderOutcome::Unknown);
        records.relay(&message_id, &attempt, NOW).expect("a log")
    };
    let far = word(ID, T0 - 160.0 * 86_400.0);
    assert_eq!(far.outcome, crate::verify::Delivery::CannotTell);
    assert!(far.text.contains("more than 150 days"), "{}", far.text);
    let near = word(ID, T0 - 140.0 * 86_400.0);
    assert!(!near.text.contains("150 days"), "{}", near.text);
    assert!(!near.text.contains("searched"), "{}", near.text);
    let other = word("n-0002", T0);
    assert_eq!(other.outcome, crate::verify::Delivery::CannotTell);
    assert!(
        other.text.contains("after the relay log was searched"),
        "{}",
        other.text
    );
}
