//! EMAIL over real SMTP (lettre's connection API), with every step's timeout taken from
//! the lease and a clear line between "refused before the data" and "no answer after".

use super::{Adapter, DeliveryRequest, LeaseCheck};
use crate::model::payload::{SMTP_FROM, SMTP_GREETING};
use crate::runtime::engine::DeliveryResult;
use lettre::address::Envelope;
use lettre::message::header::ContentType;
use lettre::transport::smtp::authentication::{Credentials, Mechanism};
use lettre::transport::smtp::client::{
    Certificate, CertificateStore, SmtpConnection, TlsParameters,
};
use lettre::transport::smtp::commands::{Data, Mail, Rcpt};
use lettre::transport::smtp::extension::ClientId;
use lettre::{Address, Message};

/// When to upgrade the connection with STARTTLS.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum StartTls {
    #[default]
    Never,
    /// Upgrade when the server offers it.
    Opportunistic,
    /// Refuse to send in clear text.
    Required,
}

#[derive(Debug, Clone)]
pub struct EmailConfig {
    /// `host:port` of the relay (`UNS_SMTP_HOST`).
    pub relay: String,
    pub from: String,
    pub starttls: StartTls,
    pub credentials: Option<(String, String)>,
    pub hello_name: String,
    /// A CA (PEM) to trust instead of the public roots, for a relay with a private CA.
    pub ca_pem: Option<Vec<u8>>,
}

impl EmailConfig {
    pub fn new(relay: impl Into<String>) -> Self {
        Self {
            relay: relay.into(),
            from: "uns@uns.local".into(),
            starttls: StartTls::Never,
            credentials: None,
            hello_name: "uns.local".into(),
            ca_pem: None,
        }
    }
}

/// What a relay said when greeted, and how long connecting and EHLO took.
#[derive(Debug, Clone, PartialEq)]
pub struct Greeting {
    /// The name its greeting gave.
    pub name: String,
    pub seconds: f64,
}

/// Greets `relay` (`host:port`) and says goodbye: no login, no message. All that may be
/// asked of a relay a store or a record named, which gets no credentials (DESIGN §5).
pub fn greet(relay: &str, timeout: std::time::Duration) -> Result<Greeting, String> {
    super::init_tls();
    let started = std::time::Instant::now();
    let hello = ClientId::Domain("uns.local".into());
    let mut conn = SmtpConnection::connect(relay, Some(timeout), &hello, None, None)
        .map_err(|err| err.to_string())?;
    let seconds = started.elapsed().as_secs_f64();
    let name = conn.server_info().name().to_string();
    let _ = conn.quit();
    Ok(Greeting { name, seconds })
}

/// Whether a login may go over a connection to `relay` (`host:port`): only over one
/// STARTTLS encrypted, or to the loopback address (a relay on this machine, where no one
/// on a path between can read it). A relay set up without STARTTLS, or a path that strips
/// it from the relay's answer, gets no password in clear text. The worker and `doctor`
/// both ask here.
pub fn login_allowed(encrypted: bool, relay: &str) -> Result<(), String> {
    if encrypted || on_loopback(relay) {
        return Ok(());
    }
    Err(format!(
        "no login in clear text to {relay}: the connection is not encrypted (set UNS_SMTP_STARTTLS=required, or reach the relay on this machine)"
    ))
}

/// Whether `relay`'s host (`host:port`) is this machine.
fn on_loopback(relay: &str) -> bool {
    is_this_machine(relay.rsplit_once(':').map_or(relay, |(host, _)| host))
}

/// Whether `host` is `localhost` or a loopback address, written as an address (an IPv6
/// one in brackets or not): where no one on a path between reads what is sent to it.
pub(crate) fn is_this_machine(host: &str) -> bool {
    let host = host
        .strip_prefix('[')
        .and_then(|host| host.strip_suffix(']'))
        .unwrap_or(host);
    host.eq_ignore_ascii_case("localhost")
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.to_canonical().is_loopback())
}

/// Whether `pem` holds a certificate the adapter can trust, or why not.
pub fn check_ca(pem: &[u8]) -> Result<(), String> {
    Certificate::from_pem(pem)
        .map(|_| ())
        .map_err(|err| format!("not a PEM certificate: {err}"))
}

pub struct EmailAdapter {
    config: EmailConfig,
    secrets: crate::redact::Secrets,
}

/// A step that failed: REJECTED before the data went out, UNKNOWN after. The result
/// itself carries which.
type Failure = DeliveryResult;

impl EmailAdapter {
    pub fn new(config: EmailConfig) -> Self {
        super::init_tls();
        let mut secrets = crate::redact::Secrets::new();
        if let Some((_, password)) = &config.credentials {
            secrets.add(password);
        }
        Self { config, secrets }
    }

    /// The message and its envelope; a bad address is a rejection before any call.
    fn prepare(
        &self,
        request: &DeliveryRequest<'_>,
        message_id: &str,
    ) -> Result<(Message, Envelope), Failure> {
        let prepare = |why: String| DeliveryResult::rejected(why, false).with("stage", "prepare");
        let recipient = request.text("recipient").unwrap_or_default();
        let to: Address = recipient
            .parse()
            .map_err(|_| prepare(format!("invalid recipient address {recipient:?}")))?;
        let from: Address = self
            .config
            .from
            .parse()
            .map_err(|_| prepare(format!("invalid sender address {:?}", self.config.from)))?;
        let message = Message::builder()
            .message_id(Some(message_id.to_string()))
            .from(from.clone().into())
            .to(to.clone().into())
            .subject(request.text("subject").unwrap_or("(no subject)"))
            .header(ContentType::TEXT_PLAIN)
            .body(request.text("body").unwrap_or_default().to_string())
            .map_err(|err| prepare(format!("cannot build message: {err}")))?;
        let envelope = Envelope::new(Some(from), vec![to])
            .map_err(|err| prepare(format!("invalid envelope: {err}")))?;
        Ok((message, envelope))
    }

    /// STARTTLS to the relay's host name, trusting only the configured CA when one is.
    fn tls_parameters(&self) -> Result<TlsParameters, lettre::transport::smtp::Error> {
        let host = self
            .config
            .relay
            .rsplit_once(':')
            .map_or(self.config.relay.as_str(), |(host, _)| host);
        match &self.config.ca_pem {
            Some(pem) => Certificate::from_pem(pem).and_then(|ca| {
                TlsParameters::builder(host.to_string())
                    .certificate_store(CertificateStore::None)
                    .add_root_certificate(ca)
                    .build_rustls()
            }),
            None => TlsParameters::new(host.to_string()),
        }
    }

    /// Whether to say STARTTLS to a relay that does (or does not) offer it.
    fn upgrades(&self, offered: bool) -> bool {
        match self.config.starttls {
            StartTls::Never => false,
            StartTls::Opportunistic => offered,
            StartTls::Required => true,
        }
    }

    fn send(
        &self,
        request: &DeliveryRequest<'_>,
        message_id: &str,
        greeted: &std::cell::RefCell<Option<String>>,
    ) -> Result<DeliveryResult, Failure> {
        let (message, envelope) = self.prepare(request, message_id)?;
        let hello = ClientId::Domain(self.config.hello_name.clone());
        // The socket timeout of the step in flight, for the words of a timeout.
        let armed = std::cell::Cell::new(request.step_timeout());
        let before_data = |stage: &'static str| {
            let armed = &armed;
            move |err: lettre::transport::smtp::Error| rejection(stage, &err, armed.get())
        };

        let mut conn = SmtpConnection::connect(
            self.config.relay.as_str(),
            Some(armed.get()),
            &hello,
            None,
            None,
        )
        .map_err(before_data("connect"))?;
        // Which relay answered, by the name it gave: a log from another host cannot
        // prove that this attempt's message never reached it (DESIGN §7).
        greeted.replace(Some(conn.server_info().name().to_string()));
        if self.upgrades(conn.can_starttls()) {
            let tls = self.tls_parameters().map_err(before_data("starttls"))?;
            armed.set(set_timeout(&mut conn, request, "starttls")?);
            conn.starttls(&tls, &hello)
                .map_err(before_data("starttls"))?;
        }
        if let Some((user, password)) = &self.config.credentials {
            login_allowed(conn.is_encrypted(), &self.config.relay).map_err(|why| {
                DeliveryResult::rejected(format!("auth: {why}"), false).with("stage", "auth")
            })?;
            armed.set(set_timeout(&mut conn, request, "auth")?);
            conn.auth(
                &[Mechanism::Plain, Mechanism::Login],
                &Credentials::new(user.clone(), password.clone()),
            )
            .map_err(before_data("auth"))?;
        }
        armed.set(set_timeout(&mut conn, request, "mail")?);
        conn.command(Mail::new(envelope.from().cloned(), vec![]))
            .map_err(before_data("mail"))?;
        for recipient in envelope.to() {
            armed.set(set_timeout(&mut conn, request, "rcpt")?);
            conn.command(Rcpt::new(recipient.clone(), vec![]))
                .map_err(before_data("rcpt"))?;
        }
        armed.set(set_timeout(&mut conn, request, "data")?);
        conn.command(Data).map_err(before_data("data"))?;

        // From here the relay may hold the whole message: only an explicit reply tells.
        let message_timeout = set_timeout(&mut conn, request, "message").map_err(|failure| {
            DeliveryResult::unknown(failure.error.unwrap_or_default()).with("stage", "message")
        })?;
        match conn.message(&message.formatted()) {
            Ok(response) => {
                // The message is accepted: a relay slow to say goodbye must not hold the
                // result back.
                let _ = conn.set_timeout(Some(QUIT_BUDGET));
                let _ = conn.quit();
                let code: u16 = response.code().into();
                Ok(DeliveryResult::accepted(Some(message_id.to_string()))
                    .with("smtp_code", code)
                    .with(
                        "smtp_reply",
                        response.message().collect::<Vec<_>>().join(" "),
                    )
                    .with("stage", "message"))
            }
            Err(err) if err.status().is_some() => Err(rejection("message", &err, message_timeout)),
            Err(err) => {
                // lettre says QUIT on abort and waits for the answer: a relay that never
                // answered the data will not answer that either, so the wait is bounded,
                // and the call ends within the time it states.
                let _ = conn.set_timeout(Some(QUIT_BUDGET));
                conn.abort();
                let timeout = err.is_timeout() || is_io_timeout(&err);
                let what = if timeout {
                    format!(
                        "none to the end of data within {:.1} s",
                        message_timeout.as_secs_f64()
                    )
                } else {
                    err.to_string()
                };
                Err(DeliveryResult::unknown(format!(
                    "no reply after the message data was sent: {what}"
                ))
                .with("stage", "message")
                .with("timeout", timeout)
                .with("io_error", err.to_string()))
            }
        }
    }
}

/// The most a QUIT may take, after the message was answered or given up on.
const QUIT_BUDGET: std::time::Duration = std::time::Duration::from_millis(250);

/// Arms the socket timeout for the next step with the time left on the lease, and says
/// what it was.
fn set_timeout(
    conn: &mut SmtpConnection,
    request: &DeliveryRequest<'_>,
    stage: &'static str,
) -> Result<std::time::Duration, Failure> {
    let timeout = request.step_timeout();
    conn.set_timeout(Some(timeout)).map_err(|err| {
        DeliveryResult::rejected(format!("{stage}: {err}"), true).with("stage", stage)
    })?;
    Ok(timeout)
}

/// What a step is called in a sentence.
fn step_name(stage: &str) -> &str {
    match stage {
        "connect" => "the connection",
        "ehlo" => "EHLO",
        "starttls" => "STARTTLS",
        "auth" => "the login",
        "mail" => "MAIL FROM",
        "rcpt" => "RCPT TO",
        "data" => "DATA",
        other => other,
    }
}

fn is_io_timeout(err: &lettre::transport::smtp::Error) -> bool {
    let text = err.to_string();
    text.contains("timed out") || text.contains("Resource temporarily unavailable")
}

/// A failure before the data went out: the relay cannot have accepted the message. A
/// timeout is worded as one, not as the socket's "Resource temporarily unavailable".
fn rejection(
    stage: &'static str,
    err: &lettre::transport::smtp::Error,
    timeout: std::time::Duration,
) -> DeliveryResult {
    let text = if err.is_timeout() || is_io_timeout(err) {
        format!(
            "{stage}: no reply to {} within {:.1} s",
            step_name(stage),
            timeout.as_secs_f64()
        )
    } else {
        format!("{stage}: {err}")
    };
    let mut result = DeliveryResult::rejected(text, !err.is_permanent()).with("stage", stage);
    if let Some(code) = err.status() {
        let code: u16 = code.into();
        result = result.with("smtp_code", code);
    }
    result
}

impl Adapter for EmailAdapter {
    fn secrets(&self) -> &crate::redact::Secrets {
        &self.secrets
    }

    fn started(&self) -> serde_json::Map<String, serde_json::Value> {
        let mut details = serde_json::Map::new();
        details.insert(SMTP_FROM.into(), self.config.from.clone().into());
        // Which relay the call went to, so doctor can measure the one in use.
        details.insert("smtp_relay".into(), self.config.relay.clone().into());
        details
    }

    fn send(&self, request: &DeliveryRequest<'_>, lease: &dyn LeaseCheck) -> DeliveryResult {
        let message_id = request.message_id();
        if !lease.held() {
            return DeliveryResult::rejected(
                "lease expired before the send was prepared; nothing was sent",
                true,
            )
            .with("stage", "lease_check")
            .with("message_id_planned", message_id);
        }
        let greeted = std::cell::RefCell::new(None);
        let result = self
            .send(request, &message_id, &greeted)
            .unwrap_or_else(|failure| failure);
        let result = result
            .with("message_id", message_id)
            .with("relay", self.config.relay.clone());
        match greeted.into_inner() {
            Some(name) => result.with(SMTP_GREETING, name),
            None => result,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_login_goes_only_over_tls_or_to_this_machine() {
        for relay in [
            "relay.example.com:587",
            "10.0.0.5:25",
            "[2001:db8::1]:25",
            "localhost.:25",
            "relay:25",
        ] {
            let refused = login_allowed(false, relay).expect_err(relay);
            assert!(
                refused.contains("clear text") && refused.contains(relay),
                "{refused}"
            );
            assert_eq!(login_allowed(true, relay), Ok(()), "{relay}");
        }
        for relay in [
            "127.0.0.1:25",
            "127.0.0.2:2525",
            "localhost:25",
            "LOCALHOST:25",
            "[::1]:25",
            "[::ffff:127.0.0.1]:25",
        ] {
            assert_eq!(login_allowed(false, relay), Ok(()), "{relay}");
        }
    }
}
