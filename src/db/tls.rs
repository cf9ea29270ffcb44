//! How a PostgreSQL connection is protected, as libpq's `sslmode` names it (DESIGN §12:
//! the URL's environment decides, never the store).
//!
//! - `disable`: no TLS.
//! - `allow`, `prefer` (the default): TLS when the server offers it, its certificate not
//!   checked, as libpq does; a server that offers none is spoken to in the clear.
//! - `require`: TLS or nothing, the certificate not checked (libpq's meaning).
//! - `verify-ca`: TLS, the certificate signed by a root the operator trusts.
//! - `verify-full`: as `verify-ca`, and issued for the host the URL names.
//!
//! The roots for the two `verify-` modes are libpq's: `sslrootcert=FILE` (PEM), or
//! `sslrootcert=system` for the machine's trusted roots, else `~/.postgresql/root.crt`;
//! without one they refuse to connect rather than trust anything. A password goes only
//! through a session the mode accepted, and with SCRAM it is bound to the TLS channel the
//! client saw, so a peer in the middle learns nothing it can replay.

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, RootCertStore, SignatureScheme};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// libpq's `sslmode`, parsed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SslMode {
    Disable,
    Prefer,
    Require,
    VerifyCa,
    VerifyFull,
}

impl SslMode {
    pub fn parse(text: &str) -> Result<Self, String> {
        Ok(match text {
            "disable" => SslMode::Disable,
            "allow" | "prefer" => SslMode::Prefer,
            "require" => SslMode::Require,
            "verify-ca" => SslMode::VerifyCa,
            "verify-full" => SslMode::VerifyFull,
            other => {
                return Err(format!(
                    "sslmode {other:?} is not one of disable, allow, prefer, require, verify-ca, verify-full"
                ));
            }
        })
    }

    /// The mode the client library negotiates with.
    pub fn negotiated(self) -> postgres::config::SslMode {
        match self {
            SslMode::Disable => postgres::config::SslMode::Disable,
            SslMode::Prefer => postgres::config::SslMode::Prefer,
            SslMode::Require | SslMode::VerifyCa | SslMode::VerifyFull => {
                postgres::config::SslMode::Require
            }
        }
    }
}

/// What the operator asked of TLS: the URL's `sslmode`, `sslrootcert`, `sslcert` and
/// `sslkey`, else `PGSSLMODE`, `PGSSLROOTCERT`, `PGSSLCERT` and `PGSSLKEY`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Asked {
    pub mode: Option<String>,
    pub root_cert: Option<String>,
    /// The client's certificate (PEM), for a server that authenticates by it.
    pub cert: Option<String>,
    /// The certificate's private key (PEM), readable by its owner alone.
    pub key: Option<String>,
}

impl Asked {
    /// Each setting of `self`, else `fallback`'s (the URL's over the environment's).
    pub fn or(self, fallback: &Asked) -> Asked {
        Asked {
            mode: self.mode.or_else(|| fallback.mode.clone()),
            root_cert: self.root_cert.or_else(|| fallback.root_cert.clone()),
            cert: self.cert.or_else(|| fallback.cert.clone()),
            key: self.key.or_else(|| fallback.key.clone()),
        }
    }
}

/// `url` without the TLS parameters the client library does not read (they are ours to
/// apply), and what they asked.
pub fn split_url(url: &str) -> (String, Asked) {
    let Some((base, query)) = url.split_once('?') else {
        return (url.to_string(), Asked::default());
    };
    let mut asked = Asked::default();
    let mut kept = Vec::new();
    for pair in query.split('&') {
        match pair.split_once('=') {
            Some(("sslmode", value)) => asked.mode = Some(percent_decoded(value)),
            Some(("sslrootcert", value)) => asked.root_cert = Some(percent_decoded(value)),
            Some(("sslcert", value)) => asked.cert = Some(percent_decoded(value)),
            Some(("sslkey", value)) => asked.key = Some(percent_decoded(value)),
            _ => kept.push(pair),
        }
    }
    let url = if kept.is_empty() {
        base.to_string()
    } else {
        format!("{base}?{}", kept.join("&"))
    };
    (url, asked)
}

/// A URL parameter's value, its `%XX` escapes decoded (libpq's reading: `+` stays).
fn percent_decoded(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        match bytes[i] {
            b'%' if i + 2 < bytes.len() => match (hex(bytes[i + 1]), hex(bytes[i + 2])) {
                (Some(high), Some(low)) => {
                    out.push((high * 16 + low) as u8);
                    i += 3;
                    continue;
                }
                _ => out.push(b'%'),
            },
            byte => out.push(byte),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The connector for `asked` (its mode `mode`): `None` for `disable`. The client's
/// certificate, when there is one, is offered in every mode that speaks TLS, as libpq
/// offers it; only its signature goes over the wire, never its key.
pub fn connector(
    mode: SslMode,
    asked: &Asked,
) -> Result<Option<tokio_postgres_rustls::MakeRustlsConnect>, String> {
    if mode == SslMode::Disable {
        return Ok(None);
    }
    let identity = client_identity(asked.cert.as_deref(), asked.key.as_deref())?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|err| format!("TLS: {err}"))?;
    let verifier: Arc<dyn ServerCertVerifier> = match mode {
        SslMode::Disable | SslMode::Prefer | SslMode::Require => Arc::new(Unchecked(provider)),
        SslMode::VerifyCa | SslMode::VerifyFull => {
            let roots = Arc::new(roots(asked.root_cert.as_deref())?);
            let webpki = rustls::client::WebPkiServerVerifier::builder_with_provider(
                roots,
                provider.clone(),
            )
            .build()
            .map_err(|err| format!("TLS: {err}"))?;
            if mode == SslMode::VerifyCa {
                Arc::new(AnyName(webpki))
            } else {
                webpki
            }
        }
    };
    let builder = builder
        .dangerous()
        .with_custom_certificate_verifier(verifier);
    let config = match identity {
        None => builder.with_no_client_auth(),
        Some(identity) => builder
            .with_client_auth_cert(identity.chain, identity.key)
            .map_err(|err| format!("sslcert {}: {err}", identity.cert.display()))?,
    };
    Ok(Some(tokio_postgres_rustls::MakeRustlsConnect::new(config)))
}

/// A client's certificate chain and its key, as read from their files.
struct Identity {
    cert: PathBuf,
    chain: Vec<CertificateDer<'static>>,
    key: PrivateKeyDer<'static>,
}

/// The client certificate libpq would offer: `cert` and `key` as named, else
/// `~/.postgresql/postgresql.crt` and `.key` when the certificate is there. A file
/// named and missing is an error (a typo must not quietly drop the credential); so is a
/// key others may read, which libpq refuses too.
fn client_identity(cert: Option<&str>, key: Option<&str>) -> Result<Option<Identity>, String> {
    let home = || std::env::var_os("HOME").map(|home| Path::new(&home).join(".postgresql"));
    let cert = match cert {
        Some(file) => PathBuf::from(file),
        None => match home().map(|dir| dir.join("postgresql.crt")) {
            Some(file) if file.exists() => file,
            _ => return Ok(None),
        },
    };
    let key = match key {
        Some(file) => PathBuf::from(file),
        None => home()
            .map(|dir| dir.join("postgresql.key"))
            .ok_or("sslcert is given but no sslkey, and there is no home to look in")?,
    };
    let chain = CertificateDer::pem_file_iter(&cert)
        .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
        .map_err(|err| format!("sslcert {}: {err}", cert.display()))?;
    if chain.is_empty() {
        return Err(format!("sslcert {}: no certificate in it", cert.display()));
    }
    let meta = std::fs::metadata(&key).map_err(|err| {
        format!(
            "sslkey {}: {err} (the key of sslcert {})",
            key.display(),
            cert.display()
        )
    })?;
    {
        use std::os::unix::fs::{MetadataExt, PermissionsExt};
        let mode = meta.permissions().mode();
        let allowed = if meta.uid() == 0 { 0o037 } else { 0o077 };
        if mode & allowed != 0 {
            return Err(format!(
                "sslkey {}: others may read it (mode {:03o}); make it u=rw (0600), or u=rw,g=r (0640) when root owns it",
                key.display(),
                mode & 0o777
            ));
        }
    }
    let key_der = PrivateKeyDer::from_pem_file(&key).map_err(|err| {
        format!(
            "sslkey {}: {err} (a PEM key, not encrypted: sslpassword is not read)",
            key.display()
        )
    })?;
    Ok(Some(Identity {
        cert,
        chain,
        key: key_der,
    }))
}

/// The roots the `verify-` modes trust, as libpq finds them.
fn roots(root_cert: Option<&str>) -> Result<RootCertStore, String> {
    let mut store = RootCertStore::empty();
    let file = match root_cert {
        Some("system") => {
            let found = rustls_native_certs::load_native_certs();
            let (added, _) = store.add_parsable_certificates(found.certs);
            if added == 0 {
                return Err("sslrootcert=system, but this machine trusts no root".into());
            }
            return Ok(store);
        }
        Some(file) => PathBuf::from(file),
        None => {
            let default = std::env::var_os("HOME")
                .map(|home| Path::new(&home).join(".postgresql/root.crt"))
                .filter(|file| file.exists());
            default.ok_or(
                "sslmode verify-ca and verify-full need the roots to trust: sslrootcert=FILE, \
                 sslrootcert=system or ~/.postgresql/root.crt",
            )?
        }
    };
    let certs = CertificateDer::pem_file_iter(&file)
        .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
        .map_err(|err| format!("sslrootcert {}: {err}", file.display()))?;
    let (added, _) = store.add_parsable_certificates(certs);
    if added == 0 {
        return Err(format!(
            "sslrootcert {}: no certificate in it",
            file.display()
        ));
    }
    Ok(store)
}

/// `require` and `prefer` as libpq means them: the session encrypted, the certificate
/// not checked; the handshake's signatures still are, so the channel is the one SCRAM
/// binds the password to.
#[derive(Debug)]
struct Unchecked(Arc<rustls::crypto::CryptoProvider>);

impl ServerCertVerifier for Unchecked {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// `verify-ca`: the chain checked against the roots, the name the certificate was
/// issued for not.
#[derive(Debug)]
struct AnyName(Arc<rustls::client::WebPkiServerVerifier>);

impl ServerCertVerifier for AnyName {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        match self
            .0
            .verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)
        {
            Err(rustls::Error::InvalidCertificate(
                rustls::CertificateError::NotValidForName
                | rustls::CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tls_parameters_are_taken_out_of_the_url_and_the_rest_kept() {
        let (url, asked) = split_url(
            "postgres://uns@db:5432/uns?connect_timeout=3&sslmode=verify-full&sslrootcert=%2Fetc%2Fca.pem",
        );
        assert_eq!(url, "postgres://uns@db:5432/uns?connect_timeout=3");
        assert_eq!(asked.mode.as_deref(), Some("verify-full"));
        assert_eq!(asked.root_cert.as_deref(), Some("/etc/ca.pem"));
        assert_eq!(
            split_url("postgres://uns@db/uns?sslmode=require").0,
            "postgres://uns@db/uns"
        );
        assert_eq!(percent_decoded("a%2"), "a%2");
        assert_eq!(percent_decoded("%zz%41"), "%zzA");
    }

    #[test]
    fn every_libpq_mode_is_read_and_anything_else_refused() {
        assert_eq!(SslMode::parse("allow"), Ok(SslMode::Prefer));
        assert_eq!(SslMode::parse("verify-ca"), Ok(SslMode::VerifyCa));
        assert!(SslMode::parse("Require").is_err());
        assert!(SslMode::parse("").is_err());
    }

    #[test]
    fn a_verify_mode_without_roots_refuses_rather_than_trusting_anything() {
        let asked = Asked {
            root_cert: Some("/nonexistent/root.crt".into()),
            ..Asked::default()
        };
        let err = connector(SslMode::VerifyFull, &asked)
            .err()
            .expect("refused");
        assert!(err.contains("/nonexistent/root.crt"), "{err}");
    }
}
