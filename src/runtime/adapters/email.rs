//! EMAIL over real SMTP (lettre's connection API), with every step's timeout taken from
//! the lease and a clear line between "refused before the data" and "no answer after".

use super::{Adapter, DeliveryRequest, LeaseCheck};
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

/// Whether `pem` holds a certificate the adapter can trust, or why not.
pub fn check_ca(pem: &[u8]) -> Result<(), String> {
    Certificate::from_pem(pem)
        .map(|_| ())
        .map_err(|err| format!("not a PEM certificate: {err}"))
}

pub struct EmailAdapter {
    config: EmailConfig,
}

/// A step that failed: REJECTED before the data went out, UNKNOWN after. The result
/// itself carries which.
type Failure = DeliveryResult;

impl EmailAdapter {
    pub fn new(config: EmailConfig) -> Self {
        super::init_tls();
        Self { config }
    }

    fn send(
        &self,
        request: &DeliveryRequest<'_>,
        message_id: &str,
    ) -> Result<DeliveryResult, Failure> {
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
        let hello = ClientId::Domain(self.config.hello_name.clone());
        let before_data =
            |stage: &'static str| move |err: lettre::transport::smtp::Error| rejection(stage, &err);

        let mut conn = SmtpConnection::connect(
            self.config.relay.as_str(),
            Some(request.step_timeout()),
            &hello,
            None,
            None,
        )
        .map_err(before_data("connect"))?;
        let offers_tls = conn.can_starttls();
        let upgrade = match self.config.starttls {
            StartTls::Never => false,
            StartTls::Opportunistic => offers_tls,
            StartTls::Required => true,
        };
        if upgrade {
            let host = self
                .config
                .relay
                .rsplit_once(':')
                .map_or(self.config.relay.as_str(), |(host, _)| host);
            let tls = match &self.config.ca_pem {
                Some(pem) => Certificate::from_pem(pem).and_then(|ca| {
                    TlsParameters::builder(host.to_string())
                        .certificate_store(CertificateStore::None)
                        .add_root_certificate(ca)
                        .build_rustls()
                }),
                None => TlsParameters::new(host.to_string()),
            }
            .map_err(before_data("starttls"))?;
            set_timeout(&mut conn, request, "starttls")?;
            conn.starttls(&tls, &hello)
                .map_err(before_data("starttls"))?;
        }
        if let Some((user, password)) = &self.config.credentials {
            set_timeout(&mut conn, request, "auth")?;
            conn.auth(
                &[Mechanism::Plain, Mechanism::Login],
                &Credentials::new(user.clone(), password.clone()),
            )
            .map_err(before_data("auth"))?;
        }
        set_timeout(&mut conn, request, "mail")?;
        conn.command(Mail::new(envelope.from().cloned(), vec![]))
            .map_err(before_data("mail"))?;
        for recipient in envelope.to() {
            set_timeout(&mut conn, request, "rcpt")?;
            conn.command(Rcpt::new(recipient.clone(), vec![]))
                .map_err(before_data("rcpt"))?;
        }
        set_timeout(&mut conn, request, "data")?;
        conn.command(Data).map_err(before_data("data"))?;

        // From here the relay may hold the whole message: only an explicit reply tells.
        set_timeout(&mut conn, request, "message").map_err(|failure| {
            DeliveryResult::unknown(failure.error.unwrap_or_default()).with("stage", "message")
        })?;
        match conn.message(&message.formatted()) {
            Ok(response) => {
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
            Err(err) if err.status().is_some() => Err(rejection("message", &err)),
            Err(err) => {
                conn.abort();
                Err(DeliveryResult::unknown(format!(
                    "no reply after the message data was sent: {err}"
                ))
                .with("stage", "message")
                .with("timeout", err.is_timeout() || is_io_timeout(&err)))
            }
        }
    }
}

fn set_timeout(
    conn: &mut SmtpConnection,
    request: &DeliveryRequest<'_>,
    stage: &'static str,
) -> Result<(), Failure> {
    conn.set_timeout(Some(request.step_timeout()))
        .map_err(|err| {
            DeliveryResult::rejected(format!("{stage}: {err}"), true).with("stage", stage)
        })
}

fn is_io_timeout(err: &lettre::transport::smtp::Error) -> bool {
    let text = err.to_string();
    text.contains("timed out") || text.contains("Resource temporarily unavailable")
}

/// A failure before the data went out: the relay cannot have accepted the message.
fn rejection(stage: &'static str, err: &lettre::transport::smtp::Error) -> DeliveryResult {
    let mut result = DeliveryResult::rejected(format!("{stage}: {err}"), !err.is_permanent())
        .with("stage", stage);
    if let Some(code) = err.status() {
        let code: u16 = code.into();
        result = result.with("smtp_code", code);
    }
    result
}

impl Adapter for EmailAdapter {
    fn deliver(&self, request: &DeliveryRequest<'_>, lease: &dyn LeaseCheck) -> DeliveryResult {
        let message_id = request.message_id();
        if !lease.held() {
            return DeliveryResult::rejected(
                "lease expired before the send was prepared; nothing was sent",
                true,
            )
            .with("stage", "lease_check")
            .with("message_id_planned", message_id);
        }
        let result = self
            .send(request, &message_id)
            .unwrap_or_else(|failure| failure);
        result
            .with("message_id", message_id)
            .with("relay", self.config.relay.clone())
    }
}
