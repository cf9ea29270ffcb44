//! Channel adapters against real peers: Postfix's smtp-sink and the loopback fakes.

use crate::support;

use serde_json::json;
use std::time::{Duration, Instant};
use support::SmtpSink;
use unsctl::lab::fakes::{Behavior, Fakes};
use unsctl::model::{Channel, ProviderOutcome};
use unsctl::runtime::adapters::email::{EmailAdapter, EmailConfig};
use unsctl::runtime::adapters::webhook::{Provider, WebhookAdapter};
use unsctl::runtime::adapters::{Adapter, DeliveryRequest};
use unsctl::runtime::engine::DeliveryResult;

const RECIPIENT: &str = "oncall@example.com";

fn request<'a>(
    payload: &'a serde_json::Value,
    channel: Channel,
    lease: Duration,
) -> DeliveryRequest<'a> {
    DeliveryRequest {
        notification_id: "n-test",
        cycle: 2,
        attempt: 5,
        channel,
        payload,
        lease_deadline: Instant::now() + lease,
        min_io_timeout: Duration::from_millis(200),
    }
}

fn payload() -> serde_json::Value {
    json!({"recipient": RECIPIENT, "subject": "Disk full", "body": "db-1 is at 99%"})
}

fn email(relay: String, lease: Duration, held: bool) -> DeliveryResult {
    let payload = payload();
    let adapter = EmailAdapter::new(EmailConfig::new(relay));
    adapter.deliver(&request(&payload, Channel::Email, lease), &move || held)
}

/// One EMAIL case, run against smtp-sink and against the fake SMTP server.
struct Case {
    name: &'static str,
    sink_flags: &'static [&'static str],
    fake: Behavior,
    lease: Duration,
    outcome: ProviderOutcome,
    /// Whether the peer really took the message.
    received: bool,
    smtp_code: Option<u64>,
}

const CASES: &[Case] = &[
    Case {
        name: "accept",
        sink_flags: &[],
        fake: Behavior::Accept,
        lease: Duration::from_secs(10),
        outcome: ProviderOutcome::Accepted,
        received: true,
        smtp_code: Some(250),
    },
    // The peer answers the final dot only after a minute (the sink) or never (the fake):
    // an UNKNOWN outcome within the test can only come from the lease's own timeout. The
    // lease is long enough for every step before the data on a loaded machine.
    Case {
        name: "reply to the final dot delayed past the budget",
        sink_flags: &["-W", ".:60"],
        fake: Behavior::Hold,
        lease: Duration::from_secs(3),
        outcome: ProviderOutcome::Unknown,
        received: true,
        smtp_code: None,
    },
    Case {
        name: "DATA refused",
        sink_flags: &["-f", "DATA"],
        fake: Behavior::Reject(554),
        lease: Duration::from_secs(10),
        outcome: ProviderOutcome::Rejected,
        received: false,
        smtp_code: None,
    },
    Case {
        name: "connection dropped before data",
        sink_flags: &["-q", "RCPT"],
        fake: Behavior::Drop,
        lease: Duration::from_secs(10),
        outcome: ProviderOutcome::Rejected,
        received: false,
        smtp_code: None,
    },
];

fn check(case: &Case, peer: &str, result: &DeliveryResult, received: usize) {
    let context = format!("{} against {peer}: {result:?}", case.name);
    assert_eq!(result.outcome, case.outcome, "{context}");
    assert_eq!(received, usize::from(case.received), "{context}");
    assert_eq!(
        result.metadata["message_id"], "<n-test.2.5@uns.local>",
        "{context}"
    );
    if let Some(code) = case.smtp_code {
        assert_eq!(result.metadata["smtp_code"], code, "{context}");
    }
    match case.outcome {
        ProviderOutcome::Accepted => {
            assert_eq!(result.message_id.as_deref(), Some("<n-test.2.5@uns.local>"))
        }
        ProviderOutcome::Unknown => {
            assert_eq!(result.metadata["stage"], "message", "{context}");
            assert!(!result.retryable, "{context}");
        }
        ProviderOutcome::Rejected => assert!(result.message_id.is_none(), "{context}"),
    }
}

#[test]
fn email_cases_against_smtp_sink() {
    for case in CASES {
        let sink = SmtpSink::start(case.sink_flags);
        let result = email(sink.addr.to_string(), case.lease, true);
        // smtp-sink opens a dump file per transaction; only a message with its data counts.
        let received: Vec<String> = sink
            .received()
            .into_iter()
            .filter(|dump| dump.contains("Message-ID: <n-test.2.5@uns.local>"))
            .collect();
        check(case, "smtp-sink", &result, received.len());
        for message in &received {
            assert!(message.contains(RECIPIENT), "{message}");
            assert!(message.contains("db-1 is at 99%"), "{message}");
        }
    }
}

#[test]
fn email_cases_against_the_fake_give_the_same_outcomes() {
    for case in CASES {
        let fakes = Fakes::start().expect("fakes");
        fakes.control.script(RECIPIENT, &[case.fake]);
        let result = email(fakes.smtp.to_string(), case.lease, true);
        let ledger = fakes.control.ledger();
        check(case, "the fake SMTP server", &result, ledger.len());
        for accepted in ledger {
            assert_eq!(accepted.notification_id.as_deref(), Some("n-test"));
            assert_eq!(
                accepted.message_id.as_deref(),
                Some("<n-test.2.5@uns.local>")
            );
        }
    }
}

#[test]
fn email_is_not_sent_when_the_lease_is_already_gone() {
    let sink = SmtpSink::start(&[]);
    let result = email(sink.addr.to_string(), Duration::from_secs(10), false);
    assert_eq!(result.outcome, ProviderOutcome::Rejected);
    assert_eq!(result.metadata["stage"], "lease_check");
    only_the_probe_arrived(&sink);
}

#[test]
fn email_to_a_closed_port_is_rejected_and_retryable() {
    let port = support::free_port();
    let result = email(format!("127.0.0.1:{port}"), Duration::from_secs(5), true);
    assert_eq!(result.outcome, ProviderOutcome::Rejected);
    assert_eq!(result.metadata["stage"], "connect");
    assert!(result.retryable);
}

#[test]
fn email_permanent_refusal_carries_the_smtp_code() {
    let fakes = Fakes::start().expect("fakes");
    fakes
        .control
        .script(RECIPIENT, &[Behavior::Reject(554), Behavior::Reject(451)]);
    let permanent = email(fakes.smtp.to_string(), Duration::from_secs(5), true);
    assert_eq!(
        (permanent.outcome, permanent.retryable),
        (ProviderOutcome::Rejected, false)
    );
    assert_eq!(permanent.metadata["smtp_code"], 554);
    let transient = email(fakes.smtp.to_string(), Duration::from_secs(5), true);
    assert_eq!(
        (transient.outcome, transient.retryable),
        (ProviderOutcome::Rejected, true)
    );
    assert_eq!(transient.metadata["smtp_code"], 451);
    assert!(fakes.control.ledger().is_empty());
}

fn webhook(fakes: &Fakes, channel: Channel, lease: Duration) -> DeliveryResult {
    let provider = match channel {
        Channel::Slack => Provider::Slack {
            webhook_url: fakes.slack_url(),
        },
        _ => Provider::PagerDuty {
            events_url: fakes.pagerduty_url(),
            routing_key: "R0UT1NG".into(),
        },
    };
    let adapter = WebhookAdapter::new(provider).expect("client");
    let payload = payload();
    adapter.deliver(&request(&payload, channel, lease), &|| true)
}

#[test]
fn slack_and_pagerduty_accept_with_idempotency_keys() {
    let fakes = Fakes::start().expect("fakes");
    let slack = webhook(&fakes, Channel::Slack, Duration::from_secs(5));
    assert_eq!(slack.outcome, ProviderOutcome::Accepted, "{slack:?}");
    assert_eq!(slack.message_id.as_deref(), Some("n-test:SLACK:2"));
    let pagerduty = webhook(&fakes, Channel::Pagerduty, Duration::from_secs(5));
    assert_eq!(
        pagerduty.outcome,
        ProviderOutcome::Accepted,
        "{pagerduty:?}"
    );
    assert_eq!(pagerduty.message_id.as_deref(), Some("n-test"));
    assert_eq!(pagerduty.metadata["http_status"], 202);

    let ledger = fakes.control.ledger();
    assert_eq!(ledger.len(), 2);
    assert_eq!(ledger[0].idempotency_key.as_deref(), Some("n-test:SLACK:2"));
    assert!(
        ledger[0].body["text"]
            .as_str()
            .unwrap_or("")
            .contains("n-test:SLACK:2")
    );
    assert_eq!(
        ledger[1].idempotency_key.as_deref(),
        Some("n-test:PAGERDUTY:2")
    );
    assert_eq!(ledger[1].body["event_action"], "trigger");
    assert_eq!(ledger[1].body["dedup_key"], "n-test");
    assert_eq!(ledger[1].body["routing_key"], "R0UT1NG");
}

#[test]
fn http_answers_and_silences_map_to_outcomes() {
    let fakes = Fakes::start().expect("fakes");
    fakes.control.script(
        "n-test",
        &[
            Behavior::Reject(503),
            Behavior::Reject(400),
            Behavior::Hang,
            Behavior::Drop,
        ],
    );
    let busy = webhook(&fakes, Channel::Slack, Duration::from_secs(5));
    assert_eq!(
        (busy.outcome, busy.retryable),
        (ProviderOutcome::Rejected, true),
        "{busy:?}"
    );
    assert_eq!(busy.metadata["http_status"], 503);
    let bad = webhook(&fakes, Channel::Slack, Duration::from_secs(5));
    assert_eq!(
        (bad.outcome, bad.retryable),
        (ProviderOutcome::Rejected, false),
        "{bad:?}"
    );

    // The fake never answers: an outcome at all means the lease bounded the wait (long
    // enough that the request surely went out first).
    let hung = webhook(&fakes, Channel::Pagerduty, Duration::from_secs(3));
    assert_eq!(hung.outcome, ProviderOutcome::Unknown, "{hung:?}");
    assert_eq!(hung.metadata["timeout"], true, "{hung:?}");
    let dropped = webhook(&fakes, Channel::Slack, Duration::from_secs(5));
    assert_eq!(dropped.outcome, ProviderOutcome::Unknown, "{dropped:?}");

    // Only the hung request was really taken by the provider.
    let ledger = fakes.control.ledger();
    assert_eq!(ledger.len(), 1);
    assert_eq!(ledger[0].channel, Channel::Pagerduty);
}

#[test]
fn http_to_a_closed_port_is_rejected() {
    let port = support::free_port();
    let adapter = WebhookAdapter::new(Provider::Slack {
        webhook_url: format!("http://127.0.0.1:{port}/services/x"),
    })
    .expect("client");
    let payload = payload();
    let result = adapter.deliver(
        &request(&payload, Channel::Slack, Duration::from_secs(2)),
        &|| true,
    );
    assert_eq!(result.outcome, ProviderOutcome::Rejected, "{result:?}");
    assert_eq!(result.metadata["stage"], "connect");
}

/// Sends one ordinary message through `sink` and checks it is the only one there. The
/// sink writes a message down before it answers, so once the probe is accepted anything
/// sent before it would be there too: no waiting on the clock.
fn only_the_probe_arrived(sink: &SmtpSink) {
    let probe = email_with(EmailConfig::new(sink.addr.to_string()));
    assert_eq!(probe.outcome, ProviderOutcome::Accepted, "{probe:?}");
    assert_eq!(sink.received().len(), 1, "only the probe arrived");
}

fn email_with(config: EmailConfig) -> DeliveryResult {
    let payload = payload();
    EmailAdapter::new(config).deliver(
        &request(&payload, Channel::Email, Duration::from_secs(10)),
        &|| true,
    )
}

#[test]
fn email_logs_in_when_credentials_are_configured() {
    let sink = SmtpSink::start(&[]);
    let mut config = EmailConfig::new(sink.addr.to_string());
    config.credentials = Some(("uns".into(), "secret".into()));
    let result = email_with(config.clone());
    assert_eq!(result.outcome, ProviderOutcome::Accepted, "{result:?}");

    let refusing = SmtpSink::start(&["-f", "AUTH"]);
    config.relay = refusing.addr.to_string();
    let refused = email_with(config);
    assert_eq!(refused.outcome, ProviderOutcome::Rejected, "{refused:?}");
    assert_eq!(refused.metadata["stage"], "auth");
    // The probe does not log in, so the refusing relay takes it.
    only_the_probe_arrived(&refusing);
}

/// A login goes only over STARTTLS or to a relay written as this machine. `127.1` is
/// 127.0.0.1 to the resolver but not written as a loopback address, so the sink (which
/// offers no STARTTLS and takes any login) stands here for a relay across a network.
#[test]
fn email_sends_no_password_in_clear_text_to_a_relay_not_on_this_machine() {
    let sink = SmtpSink::start(&[]);
    let mut config = EmailConfig::new(format!("127.1:{}", sink.addr.port()));
    config.credentials = Some(("uns".into(), "secret".into()));
    let refused = email_with(config.clone());
    assert_eq!(refused.outcome, ProviderOutcome::Rejected, "{refused:?}");
    assert_eq!(refused.metadata["stage"], "auth");
    assert!(!refused.retryable, "{refused:?}");
    let said = refused.error.clone().unwrap_or_default();
    assert!(said.contains("no login in clear text"), "{said}");
    only_the_probe_arrived(&sink);
    // Without a login to send, the same relay takes the message.
    config.credentials = None;
    assert_eq!(email_with(config).outcome, ProviderOutcome::Accepted);
}

#[test]
fn email_refuses_clear_text_when_starttls_is_required_but_not_offered() {
    use unsctl::runtime::adapters::email::StartTls;
    let sink = SmtpSink::start(&[]);
    let mut config = EmailConfig::new(sink.addr.to_string());
    config.starttls = StartTls::Required;
    let result = email_with(config.clone());
    assert_eq!(result.outcome, ProviderOutcome::Rejected, "{result:?}");
    assert_eq!(result.metadata["stage"], "starttls");
    only_the_probe_arrived(&sink);
    // Opportunistic falls back to clear text when the relay offers no STARTTLS.
    config.starttls = StartTls::Opportunistic;
    assert_eq!(email_with(config).outcome, ProviderOutcome::Accepted);
}

/// A relay that never answers the final dot, nor the QUIT that follows: the call ends
/// within the budget it states (the time its error names, and a bounded goodbye), not
/// twice it.
#[test]
fn a_hung_email_call_ends_within_the_budget_it_states() {
    let fakes = Fakes::start().expect("fakes");
    fakes.control.script(RECIPIENT, &[Behavior::Hang]);
    let lease = Duration::from_secs(4);
    let started = Instant::now();
    let result = email(fakes.smtp.to_string(), lease, true);
    let took = started.elapsed();
    assert_eq!(result.outcome, ProviderOutcome::Unknown, "{result:?}");
    let error = result.error.clone().unwrap_or_default();
    // "none to the end of data within 3.9 s": the budget the error states.
    let stated: f64 = error
        .split("within ")
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no budget in {error:?}"));
    // The budget and a bounded goodbye, with room for a loaded machine; twice the budget
    // (a QUIT waited for as long as the data) is far past it.
    assert!(
        took.as_secs_f64() < stated * 1.5,
        "the call took {took:?} though its error says {stated} s: {error}"
    );
}

/// A webhook on loopback that reads each request and sends `response` back, as written;
/// its URL, at `path`.
fn webhook_answering(response: String, path: &str) -> String {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("addr");
    std::thread::spawn(move || {
        for mut stream in listener.incoming().flatten() {
            let mut buffer = [0u8; 16 << 10];
            let _ = stream.read(&mut buffer);
            let _ = stream.write_all(response.as_bytes());
        }
    });
    format!("http://{addr}{path}")
}

/// A webhook answering with a redirect to `target`.
fn redirecting(status: &str, target: &str) -> String {
    webhook_answering(
        format!(
            "HTTP/1.1 {status}\r\nlocation: {target}\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
        ),
        "/services/x",
    )
}

/// A redirect is never followed: the payload and PagerDuty's routing key go to no host
/// the operator did not configure, and a page that answers 200 after a redirect is not
/// taken for the provider's acceptance. The attempt is REJECTED, naming where it was sent.
#[test]
fn a_webhook_that_redirects_is_rejected_and_never_followed() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let elsewhere = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let elsewhere_addr = elsewhere.local_addr().expect("addr");
    let asked = std::sync::Arc::new(AtomicUsize::new(0));
    let counted = asked.clone();
    std::thread::spawn(move || {
        use std::io::{Read, Write};
        for mut stream in elsewhere.incoming().flatten() {
            counted.fetch_add(1, Ordering::SeqCst);
            let mut buffer = [0u8; 16 << 10];
            let _ = stream.read(&mut buffer);
            let _ = stream
                .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: close\r\n\r\nok");
        }
    });
    let target = format!("http://{elsewhere_addr}/login");
    let payload = payload();
    for status in [
        "307 Temporary Redirect",
        "308 Permanent Redirect",
        "302 Found",
    ] {
        for channel in [Channel::Slack, Channel::Pagerduty] {
            let url = redirecting(status, &target);
            let provider = match channel {
                Channel::Slack => Provider::Slack { webhook_url: url },
                _ => Provider::PagerDuty {
                    events_url: url,
                    routing_key: "R0UT1NG".into(),
                },
            };
            let adapter = WebhookAdapter::new(provider).expect("client");
            let result = adapter
                .deliver(&request(&payload, channel, Duration::from_secs(5)), &|| {
                    true
                });
            assert_eq!(
                (result.outcome, result.retryable),
                (ProviderOutcome::Rejected, false),
                "{status} {channel}: {result:?}"
            );
            let error = result.error.clone().unwrap_or_default();
            assert!(
                error.contains(&format!("redirected to http://{elsewhere_addr}"))
                    && error.contains("not followed"),
                "{status} {channel}: {error}"
            );
        }
    }
    assert_eq!(asked.load(Ordering::SeqCst), 0, "a redirect was followed");
}

/// A webhook that answers every request with `status` and `body`.
fn answering(status: &str, body: &str) -> String {
    webhook_answering(
        format!(
            "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
            body.len()
        ),
        "/v2/enqueue",
    )
}

/// PagerDuty's answer names the dedup key recorded as the message id, read strictly: an
/// answer naming the key twice says two things, so the key sent stands in, as it does
/// for an answer that names none.
#[test]
fn pagerduty_records_the_dedup_key_its_answer_names_once() {
    let payload = payload();
    for (body, recorded) in [
        (
            r#"{"status":"success","message":"Event processed","dedup_key":"n-test"}"#,
            "n-test",
        ),
        (
            r#"{"status":"success","message":"Event processed","dedup_key":"pd-assigned"}"#,
            "pd-assigned",
        ),
        (
            r#"{"status":"success","dedup_key":"elsewhere","dedup_key":"n-test"}"#,
            "n-test",
        ),
        (
            r#"{"status":"success","dedup_key":"n-test","dedup_key":"elsewhere"}"#,
            "n-test",
        ),
        (r#"{"status":"success","dedup_key":7}"#, "n-test"),
        ("not json", "n-test"),
    ] {
        let adapter = WebhookAdapter::new(Provider::PagerDuty {
            events_url: answering("202 Accepted", body),
            routing_key: "R0UT1NG".into(),
        })
        .expect("client");
        let result = adapter.deliver(
            &request(&payload, Channel::Pagerduty, Duration::from_secs(5)),
            &|| true,
        );
        assert_eq!(
            result.outcome,
            ProviderOutcome::Accepted,
            "{body}: {result:?}"
        );
        assert_eq!(result.message_id.as_deref(), Some(recorded), "{body}");
    }
}
