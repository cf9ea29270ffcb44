//! The bundled runtime on loopback for the tests: a store, the real API server with its
//! in-process worker, and the provider fakes it delivers to.

use serde_json::json;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;
use unsctl::clock::{Clock, SystemClock};
use unsctl::db::Db;
use unsctl::lab::fakes::Fakes;
use unsctl::lab::repro;
use unsctl::model::Channel;
use unsctl::runtime::engine::{self, NewNotification};
use unsctl::runtime::schema::{self, OpenMode};

const WAIT: Duration = Duration::from_secs(30);

pub struct Runtime {
    _dir: tempfile::TempDir,
    pub db: PathBuf,
    pub fakes: Fakes,
    pub server: unsctl::server::RunningServer,
}

impl Runtime {
    /// The real server and worker (`lease_seconds` a lease), delivering to the fakes.
    pub fn start(lease_seconds: f64) -> Self {
        let dir = tempfile::tempdir().expect("dir");
        let db = dir.path().join("uns.db");
        schema::open(&db, OpenMode::Create).expect("store");
        let fakes = Fakes::start().expect("fakes");
        let server = unsctl::server::start(unsctl::server::ServerConfig {
            verify: Default::default(),
            db: db.clone().into(),
            listen: "127.0.0.1:0".parse().expect("addr"),
            keys: Some(unsctl::server::Keys::single(super::KEY).expect("key")),
            worker: Some((
                unsctl::runtime::worker::WorkerConfig {
                    lease_seconds,
                    ..repro::worker_config(2)
                },
                repro::fake_adapters(&fakes).expect("adapters"),
            )),
            default_max_attempts: 1,
            metrics: None,
            limits: unsctl::server::Limits::default(),
        })
        .expect("server");
        Runtime {
            _dir: dir,
            db,
            fakes,
            server,
        }
    }

    /// The two ways to reach it: the store directly, and the API.
    pub fn backends(&self) -> [Vec<String>; 2] {
        super::BACKENDS.map(|b| b.flags(&self.db, &self.server))
    }

    /// A Slack notification with one attempt, written straight into the store.
    pub fn submit(&self, subject: &str) -> String {
        self.submit_to(&[Channel::Slack], subject)
    }

    /// A notification on `channels` with one attempt, written straight into the store.
    pub fn submit_to(&self, channels: &[Channel], subject: &str) -> String {
        let conn = rusqlite::Connection::open(&self.db).expect("open");
        engine::submit(
            &Db::Sqlite(&conn),
            SystemClock.now(),
            &NewNotification {
                channels: channels.iter().copied().collect(),
                payload: json!({"recipient": "ops@example.com", "subject": subject, "body": "b"}),
                idempotency_key: None,
                max_attempts: 1,
            },
        )
        .expect("submit")
        .id
    }

    pub fn status(&self, id: &str) -> (String, bool) {
        super::status(&self.db, id)
    }

    pub fn wait_dead(&self, id: &str) {
        super::wait_until(&format!("{id} to reach the DLQ"), WAIT, || {
            self.status(id).1
        });
    }

    pub fn unsctl(&self, backend: &[String], args: &[&str]) -> Command {
        let mut command = super::unsctl();
        command
            .args(backend)
            .args(args)
            .env("UNS_API_KEY", super::KEY)
            .env("UNS_OPERATOR", "follow-test")
            .stdin(Stdio::null());
        command
    }
}
