//! Ground truth after remediation: on a store the real worker produced against the fakes,
//! resolving and replaying as triage says sends nothing new on a channel it called
//! DELIVERED, and exactly one new copy on each replayed channel.

use crate::support;
use unsctl::db::Db;

use std::collections::HashMap;
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use unsctl::clock::SystemClock;
use unsctl::lab::fakes::Fakes;
use unsctl::lab::repro::{self, Scenario};
use unsctl::model::Channel;
use unsctl::runtime::schema::{self, OpenMode};
use unsctl::runtime::worker::Worker;
use unsctl::store::direct;
use unsctl::triage::{self, Branch, ChannelState};

fn unsctl(db: &std::path::Path, args: &[&str]) -> std::process::Output {
    support::unsctl()
        .arg("--db")
        .arg(db)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("unsctl")
}

#[test]
fn remediation_never_duplicates_a_delivered_channel() {
    let dir = tempfile::tempdir().expect("dir");
    let db = dir.path().join("uns.db");
    let fakes = Fakes::start().expect("fakes");
    let scenarios = [
        Scenario::MixedChannels,
        Scenario::LeaseLostDelivered,
        Scenario::ProviderRejected,
    ];
    let reports = repro::run(&db, &scenarios, None, &fakes).expect("repro");
    let conn = schema::open(&db, OpenMode::ReadOnly).expect("store");
    let count = |id: &str| -> HashMap<Channel, usize> {
        let mut counts = HashMap::new();
        for channel in Channel::ALL {
            counts.insert(channel, fakes.control.accepted_count(channel, id));
        }
        counts
    };

    let mut expectations = Vec::new();
    for report in &reports {
        let id = report.notification_id.as_str();
        let doc = direct::notification_doc(&Db::Sqlite(&conn), id).expect("doc");
        let verdict = triage::triage_events(&doc.row, &doc.events);
        let before = count(id);
        let out = match verdict.branch {
            Branch::Resolve => {
                let refused = unsctl(&db, &["replay", id, "--confirm", "--yes"]);
                assert_eq!(
                    refused.status.code(),
                    Some(4),
                    "replaying a RESOLVE entry is refused"
                );
                unsctl(&db, &["dlq", "resolve", id, "--confirm", "--yes"])
            }
            Branch::Replay => unsctl(
                &db,
                &[
                    "replay",
                    id,
                    "--reason",
                    "cause fixed",
                    "--confirm",
                    "--yes",
                ],
            ),
            Branch::Verify => panic!("no VERIFY scenario here"),
        };
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        expectations.push((id.to_string(), verdict, before));
    }

    let worker = Worker::new(
        unsctl::runtime::writer::Database::open(&db).expect("store"),
        Arc::new(SystemClock),
        repro::fake_adapters(&fakes).expect("adapters"),
        repro::worker_config(4),
    );
    let stop = Arc::new(AtomicBool::new(false));
    let threads = worker.spawn(stop.clone());
    let settled = support::wait_for(Duration::from_secs(60), || {
        let pending: i64 = conn
            .query_row(
                "SELECT COUNT(*) FROM uns_notifications WHERE status IN ('PENDING', 'LEASED')",
                [],
                |r| r.get(0),
            )
            .expect("count");
        pending == 0
    });
    stop.store(true, Ordering::SeqCst);
    for thread in threads {
        thread.join().expect("worker");
    }
    assert!(
        settled,
        "a notification was still due or leased after a minute"
    );

    for (id, verdict, before) in expectations {
        let after = count(&id);
        for channel in &verdict.channels {
            let name: Channel = channel.channel;
            let (was, now) = (before[&name], after[&name]);
            match channel.state {
                ChannelState::Delivered => {
                    assert_eq!(now, was, "{id}: {name} was DELIVERED and got another copy")
                }
                _ => assert_eq!(now, was + 1, "{id}: {name} was replayed once"),
            }
        }
        let status: String = conn
            .query_row(
                "SELECT status FROM uns_notifications WHERE id = ?1",
                [&id],
                |r| r.get(0),
            )
            .expect("status");
        let expected = if verdict.branch == Branch::Resolve {
            "RESOLVED"
        } else {
            "DELIVERED"
        };
        assert_eq!(status, expected, "{id}");
    }
}
