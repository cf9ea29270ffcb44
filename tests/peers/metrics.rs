//! `/metrics` and the alert rules, checked by Prometheus's own tools: `promtool` on the
//! rules and on a real scrape, and a real Prometheus server that must fire the
//! lease-loss alert while `repro lease-lost-delivered` runs against the runtime it scrapes.

use crate::support;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::Duration;
use unsctl::lab::fakes::Fakes;
use unsctl::lab::repro::{self, Scenario};
use unsctl::runtime::metrics::Metrics;

fn tool(name: &str) -> PathBuf {
    unsctl::runtime::adapters::init_tls();
    let path = PathBuf::from("/usr/bin").join(name);
    assert!(
        path.exists(),
        "{} is missing: install Debian's prometheus package (./test does)",
        path.display()
    );
    path
}

fn alerts_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tsg/alerts")
}

fn run(command: &mut Command) -> (bool, String) {
    let out = command.output().expect("run");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

#[test]
fn promtool_accepts_the_rules_and_every_alert_has_a_passing_test() {
    let promtool = tool("promtool");
    let (ok, text) = run(Command::new(&promtool)
        .args(["check", "rules", "uns.rules.yml"])
        .current_dir(alerts_dir()));
    assert!(ok, "{text}");
    assert!(text.contains("SUCCESS: 6 rules found"), "{text}");
    let (ok, text) = run(Command::new(&promtool)
        .args(["test", "rules", "uns.rules.test.yml"])
        .current_dir(alerts_dir()));
    assert!(ok, "{text}");
    // Every alert is exercised by the test file.
    let tests = std::fs::read_to_string(alerts_dir().join("uns.rules.test.yml")).expect("tests");
    for alert in unsctl::tsg::alerts() {
        assert!(
            tests.contains(&format!("alertname: {}", alert.alert)),
            "{} has no promtool test",
            alert.alert
        );
    }
}

/// A new store, the provider fakes, and a server with no worker of its own whose
/// `/metrics` shows `metrics`, which a worker elsewhere in this process counts into.
struct Counted {
    _dir: tempfile::TempDir,
    db: std::path::PathBuf,
    fakes: Fakes,
    metrics: Arc<Metrics>,
    server: unsctl::server::RunningServer,
}

impl Counted {
    fn start() -> Self {
        let dir = tempfile::tempdir().expect("dir");
        let db = dir.path().join("uns.db");
        unsctl::runtime::schema::open(&db, unsctl::runtime::schema::OpenMode::Create)
            .expect("store");
        let fakes = Fakes::start().expect("fakes");
        let metrics = Arc::new(Metrics::new(repro::LEASE_SECONDS));
        let server = unsctl::server::start(unsctl::server::ServerConfig {
            metrics: Some(metrics.clone()),
            ..unsctl::server::ServerConfig::api_only(
                db.clone(),
                Some(unsctl::server::Keys::single(support::KEY).expect("key")),
            )
        })
        .expect("server");
        Self {
            _dir: dir,
            db,
            fakes,
            metrics,
            server,
        }
    }
}

/// `GET /metrics`, with `accept` as the Accept header; the content type and the text.
fn scrape(addr: std::net::SocketAddr, accept: Option<&str>) -> (String, String) {
    unsctl::runtime::adapters::init_tls();
    let client = reqwest::blocking::Client::new();
    let mut request = client.get(format!("http://{addr}/metrics"));
    if let Some(accept) = accept {
        request = request.header("Accept", accept);
    }
    let response = request.send().expect("scrape");
    assert!(response.status().is_success());
    let content_type = response
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    (content_type, response.text().expect("body"))
}

fn sample(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find_map(|line| line.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
}

#[test]
fn a_real_scrape_counts_each_transition_and_passes_promtool() {
    let Counted {
        _dir,
        db,
        fakes,
        metrics,
        server,
    } = Counted::start();
    let (_, before) = scrape(server.addr, None);
    assert_eq!(
        sample(&before, "uns_lease_lost_total"),
        Some(0.0),
        "{before}"
    );
    let reports = repro::run_counted(
        &db,
        &[
            Scenario::LeaseLostDelivered,
            Scenario::SmtpUnknown,
            Scenario::ProviderRejected,
        ],
        None,
        &fakes,
        Some(metrics),
    )
    .expect("repro");
    // The store gauges are cached for two seconds; a fresh server reads them now.
    let reader = support::server(&db);
    let (_, gauges) = scrape(reader.addr, None);
    let (content_type, text) = scrape(server.addr, None);
    assert!(
        content_type.starts_with("text/plain; version=0.0.4"),
        "{content_type}"
    );
    assert_eq!(sample(&text, "uns_lease_seconds"), Some(1.0), "{text}");
    // Every lease loss and provider call the store recorded was counted once.
    let conn = rusqlite::Connection::open(&db).expect("open");
    let lost: i64 = conn
        .query_row(
            "SELECT COUNT(*) FROM uns_events WHERE kind = 'LEASE_LOST'",
            [],
            |r| r.get(0),
        )
        .expect("count");
    assert!(lost >= 1);
    assert_eq!(
        sample(&text, "uns_lease_lost_total"),
        Some(lost as f64),
        "{text}"
    );
    let mut recorded = conn
        .prepare(
            "SELECT json_extract(payload, '$.channel'), json_extract(payload, '$.metadata.provider_outcome'), COUNT(*)
             FROM uns_events WHERE kind = 'CHANNEL_ATTEMPT_RESULT' GROUP BY 1, 2",
        )
        .expect("sql");
    let counts: Vec<(String, String, i64)> = recorded
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .expect("query")
        .map(|r| r.expect("row"))
        .collect();
    assert!(counts.len() >= 3, "{counts:?}");
    for (channel, outcome, n) in &counts {
        assert_eq!(
            sample(
                &text,
                &format!(
                    "uns_channel_attempts_total{{channel=\"{channel}\",outcome=\"{outcome}\"}}"
                )
            ),
            Some(*n as f64),
            "{channel} {outcome}: {text}"
        );
    }
    assert!(
        counts
            .iter()
            .any(|(c, o, _)| c == "EMAIL" && o == "UNKNOWN"),
        "{counts:?}"
    );
    assert!(
        counts
            .iter()
            .any(|(c, o, _)| c == "SLACK" && o == "REJECTED"),
        "{counts:?}"
    );
    // Three rows dead-lettered: two found with their lease gone and no budget left
    // (the unknown email outcomes), one out of budget on Slack's 500s.
    let dead: f64 = text
        .lines()
        .filter(|l| l.starts_with("uns_dead_lettered_total{"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum();
    assert_eq!(dead, 3.0, "{text}");
    assert_eq!(
        sample(
            &text,
            "uns_dead_lettered_total{reason=\"recovery_exhausted\"}"
        ),
        Some(2.0),
        "{text}"
    );
    assert_eq!(
        sample(
            &text,
            "uns_dead_lettered_total{reason=\"budget_exhausted\"}"
        ),
        Some(1.0),
        "{text}"
    );
    // The late EMAIL call outlived the 1 s lease: the histogram shows it past the lease.
    let within_lease = sample(
        &text,
        "uns_provider_call_seconds_bucket{le=\"1.0\",channel=\"EMAIL\"}",
    );
    let all = sample(&text, "uns_provider_call_seconds_count{channel=\"EMAIL\"}");
    assert!(within_lease < all, "{text}");
    assert_eq!(
        sample(
            &text,
            "uns_provider_call_seconds_bucket{le=\"+Inf\",channel=\"EMAIL\"}"
        ),
        all,
        "{text}"
    );
    assert_eq!(sample(&gauges, "uns_dlq_entries"), Some(3.0), "{gauges}");
    assert_eq!(
        sample(&gauges, "uns_oldest_due_seconds"),
        Some(0.0),
        "{gauges}"
    );
    assert_eq!(
        sample(&gauges, "uns_notifications{status=\"DEAD\"}"),
        Some(3.0),
        "{gauges}"
    );
    // No id, recipient or payload ever reaches a label.
    for report in &reports {
        assert!(
            !text.contains(&report.notification_id) && !gauges.contains(&report.notification_id)
        );
    }
    assert!(!text.contains("@repro.uns.local"));

    let mut check = Command::new(tool("promtool"))
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("promtool");
    use std::io::Write;
    check
        .stdin
        .take()
        .expect("stdin")
        .write_all(text.as_bytes())
        .expect("write");
    let out = check.wait_with_output().expect("promtool");
    assert!(
        out.status.success() && out.stdout.is_empty() && out.stderr.is_empty(),
        "promtool check metrics: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );

    let (content_type, open) = scrape(
        server.addr,
        Some("application/openmetrics-text;version=1.0.0"),
    );
    assert!(
        content_type.starts_with("application/openmetrics-text"),
        "{content_type}"
    );
    assert!(open.ends_with("# EOF\n"), "{open}");
    assert!(open.contains("# TYPE uns_lease_lost counter"), "{open}");
}

struct Prometheus {
    child: Child,
    url: String,
    _dir: tempfile::TempDir,
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Prometheus {
    /// A private Prometheus on loopback that scrapes `target` every second and evaluates
    /// the shipped rules every second.
    fn start(target: std::net::SocketAddr) -> Self {
        let dir = tempfile::tempdir().expect("dir");
        let rules = alerts_dir().join("uns.rules.yml");
        let config = format!(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n  external_labels:\n    runbook_base: https://docs.example.com/uns\nrule_files:\n  - {}\nscrape_configs:\n  - job_name: uns\n    static_configs:\n      - targets: ['{target}']\n",
            rules.display()
        );
        std::fs::write(dir.path().join("prometheus.yml"), config).expect("config");
        let port = support::free_port();
        let child = Command::new(tool("prometheus"))
            .arg(format!(
                "--config.file={}",
                dir.path().join("prometheus.yml").display()
            ))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.path().join("data").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.path().join("prometheus.log")).expect("log"))
            .spawn()
            .expect("start prometheus");
        let url = format!("http://127.0.0.1:{port}");
        support::wait_for_port(format!("127.0.0.1:{port}").parse().expect("addr"));
        Self {
            child,
            url,
            _dir: dir,
        }
    }

    fn get(&self, path: &str) -> serde_json::Value {
        reqwest::blocking::get(format!("{}{path}", self.url))
            .and_then(|r| r.json())
            .unwrap_or_default()
    }

    /// Polls until `done` holds for what `path` answers (at most 60 s).
    fn wait_until(
        &self,
        path: &str,
        what: &str,
        done: impl Fn(&serde_json::Value) -> bool,
    ) -> serde_json::Value {
        let mut answer = serde_json::Value::Null;
        let shown = support::wait_for(Duration::from_secs(60), || {
            answer = self.get(path);
            done(&answer)
        });
        assert!(
            shown,
            "Prometheus never showed {what}; last answer: {answer}"
        );
        answer
    }
}

#[test]
fn a_real_prometheus_fires_the_lease_loss_alert_with_its_runbook() {
    let Counted {
        _dir,
        db,
        fakes,
        metrics,
        server,
    } = Counted::start();
    let prometheus = Prometheus::start(server.addr);
    // The counter must be seen at zero first, or the loss is not an increase.
    prometheus.wait_until(
        "/api/v1/query?query=uns_lease_lost_total%20%3D%3D%200",
        "the runtime scraped with no lease lost",
        |a| a["data"]["result"].as_array().is_some_and(|r| r.len() == 1),
    );
    let quiet = prometheus.get("/api/v1/alerts");
    assert_eq!(
        quiet["data"]["alerts"].as_array().map(Vec::len),
        Some(0),
        "{quiet}"
    );

    repro::run_counted(
        &db,
        &[Scenario::LeaseLostDelivered],
        None,
        &fakes,
        Some(metrics),
    )
    .expect("repro lease-lost-delivered");

    let firing = prometheus.wait_until("/api/v1/alerts", "UnsLeaseLost firing", |a| {
        a["data"]["alerts"].as_array().is_some_and(|alerts| {
            alerts
                .iter()
                .any(|x| x["labels"]["alertname"] == "UnsLeaseLost" && x["state"] == "firing")
        })
    });
    let alert = firing["data"]["alerts"]
        .as_array()
        .and_then(|alerts| {
            alerts
                .iter()
                .find(|x| x["labels"]["alertname"] == "UnsLeaseLost")
        })
        .cloned()
        .unwrap_or_default();
    assert_eq!(
        alert["annotations"]["runbook_url"],
        "https://docs.example.com/uns/tsg/TSG-02.md#who-got-duplicates-and-what-never-arrived",
        "rooted at the runbook_base label Prometheus was given: {alert}"
    );
    assert_eq!(
        alert["labels"]["instance"],
        server.addr.to_string(),
        "{alert}"
    );
    // The provider's late acceptance is not an unknown outcome: that alert stays quiet.
    assert!(
        !firing.to_string().contains("UnsProviderOutcomeUnknown"),
        "{firing}"
    );
}
