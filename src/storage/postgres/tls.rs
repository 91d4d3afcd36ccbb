//! TLS to PostgreSQL, set by the database URL's `sslmode` and `sslrootcert` as libpq reads them
//! (docs/scale-out.md, section 3): `disable` (plain), `prefer` (the default: encrypted when the
//! server offers it, the server not checked), `require` (encrypted or refused; the server not
//! checked unless `sslrootcert` is given, then as `verify-ca`), `verify-ca` (the server's
//! certificate must chain to the root `sslrootcert` names, which it needs) and `verify-full` (and
//! name the host connected to; trusted roots: the PEM file `sslrootcert` names, else the public
//! web roots built in). `sslcert` and `sslkey` (PEM files, the key unencrypted) are this node's
//! client certificate, for a server that signs clients in by certificate.
//! Over a Unix socket there is no TLS (PostgreSQL offers none there; libpq ignores `sslmode`).
//!
//! One connector serves every connection Steward makes: the pooled ones (`wire.rs`), the
//! listening line and the synchronous client of migrations and copies.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::WebPkiSupportedAlgorithms;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{CertificateError, DigitallySignedStruct, RootCertStore, SignatureScheme};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio_postgres::config::SslMode;
use tokio_postgres::tls::{ChannelBinding, MakeTlsConnect, TlsConnect};

use crate::error::{Error, Result};

/// How the server is checked once the connection is encrypted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Check {
    /// Not at all (`prefer`, `require`): encrypted against a passive listener only.
    Nothing,
    /// Its certificate chains to a trusted root (`verify-ca`).
    Chain,
    /// And names the host (`verify-full`).
    ChainAndName,
}

/// The connector: `None` inside when TLS is off (`sslmode=disable`).
#[derive(Clone)]
pub struct Tls(Option<Arc<rustls::ClientConfig>>);

impl std::fmt::Debug for Tls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_some() { "Tls(on)" } else { "Tls(off)" })
    }
}

/// The TLS parameters of a database URL, taken out of it.
#[derive(Debug, Default)]
pub struct Stripped {
    /// The URL without them (for tokio-postgres, which reads none of them but `sslmode`, and not
    /// its `verify-*` values).
    pub bare: String,
    pub mode: Option<String>,
    /// `sslrootcert`: the PEM file of the roots the server's certificate must chain to.
    pub root: Option<String>,
    /// `sslcert` and `sslkey`: this node's client certificate (its chain) and key, PEM files.
    pub cert: Option<String>,
    pub key: Option<String>,
}

/// Reads `sslmode`, `sslrootcert`, `sslcert` and `sslkey` out of `url`: the URL without them,
/// the mode to give tokio-postgres, and the connector.
pub fn settings(url: &str) -> Result<(String, SslMode, Tls)> {
    let Stripped { bare, mode, root, cert, key } = strip(url);
    let (ssl, check) = match mode.as_deref().unwrap_or("prefer") {
        "disable" => return Ok((bare, SslMode::Disable, Tls(None))),
        "allow" | "prefer" => (SslMode::Prefer, None),
        "require" => (SslMode::Require, None),
        "verify-ca" => (SslMode::Require, Some(Check::Chain)),
        "verify-full" => (SslMode::Require, Some(Check::ChainAndName)),
        other => {
            return Err(Error::invalid(format!(
                "sslmode={other} is not one Steward knows: disable, prefer, require, verify-ca or verify-full"
            )));
        }
    };
    // libpq: `require` with a root certificate checks the chain
    let check = match (check, &root) {
        (Some(c), _) => c,
        (None, Some(_)) if ssl == SslMode::Require => Check::Chain,
        (None, _) => Check::Nothing,
    };
    let roots = match (&root, check) {
        (_, Check::Nothing) => None,
        (Some(path), _) => Some(roots_from(path)?),
        // a chain to any public root, whatever name it is for, proves nothing (libpq refuses too)
        (None, Check::Chain) => {
            return Err(Error::invalid(
                "sslmode=verify-ca needs sslrootcert: the file of the authority that signed the server's certificate (or use verify-full)",
            ));
        }
        (None, Check::ChainAndName) => Some(RootCertStore { roots: webpki_roots::TLS_SERVER_ROOTS.to_vec() }),
    };
    let identity = match (cert, key) {
        (None, None) => None,
        (Some(cert), Some(key)) => Some(identity_from(&cert, &key)?),
        _ => return Err(Error::invalid("sslcert and sslkey go together: the client certificate and its key")),
    };
    Ok((bare, ssl, Tls(Some(client_config(check, roots, identity)?))))
}

/// A client certificate (with its chain) and its key, from PEM files (the key unencrypted:
/// PKCS#8, PKCS#1 or SEC1, as PostgreSQL's own tools write them).
fn identity_from(cert: &str, key: &str) -> Result<Identity> {
    use rustls::pki_types::pem::PemObject;
    let chain = certs_from("sslcert", cert)?;
    let key = PrivateKeyDer::from_pem_file(key)
        .map_err(|e| Error::invalid(format!("sslkey {key}: {e} (an unencrypted PEM key is needed)")))?;
    Ok((chain, key))
}

/// `url` without its TLS parameters (`sslmode`, `sslrootcert`, `sslcert`, `sslkey`), and their
/// values.
pub fn strip(url: &str) -> Stripped {
    let (base, query) = url.split_once('?').unwrap_or((url, ""));
    let mut out = Stripped::default();
    let mut kept = Vec::new();
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        // keys are compared decoded, as tokio-postgres reads them (`ssl%6Dode` is `sslmode`)
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        match decode(key).as_str() {
            "sslmode" => out.mode = Some(decode(value)),
            "sslrootcert" => out.root = Some(decode(value)),
            "sslcert" => out.cert = Some(decode(value)),
            "sslkey" => out.key = Some(decode(value)),
            _ => kept.push(pair),
        }
    }
    out.bare = if kept.is_empty() { base.to_string() } else { format!("{base}?{}", kept.join("&")) };
    out
}

/// A URL query value, percent-decoded (a path may hold `%2F`) as tokio-postgres decodes the
/// rest: an escape that is not one stays as written, `+` is a plus.
fn decode(v: &str) -> String {
    percent_encoding::percent_decode_str(v).decode_utf8_lossy().into_owned()
}

/// The certificates in the PEM file `path`, the URL's parameter `param` (at least one).
fn certs_from(param: &str, path: &str) -> Result<Vec<CertificateDer<'static>>> {
    use rustls::pki_types::pem::PemObject;
    let certs = CertificateDer::pem_file_iter(path)
        .and_then(|certs| certs.collect::<std::result::Result<Vec<_>, _>>())
        .map_err(|e| Error::invalid(format!("{param} {path}: {e}")))?;
    if certs.is_empty() {
        return Err(Error::invalid(format!("{param} {path}: no certificate in the file")));
    }
    Ok(certs)
}

fn roots_from(path: &str) -> Result<RootCertStore> {
    let mut roots = RootCertStore::empty();
    for cert in certs_from("sslrootcert", path)? {
        roots.add(cert).map_err(|e| Error::invalid(format!("sslrootcert {path}: {e}")))?;
    }
    Ok(roots)
}

/// A client certificate chain and its key.
type Identity = (Vec<CertificateDer<'static>>, PrivateKeyDer<'static>);

fn client_config(
    check: Check,
    roots: Option<RootCertStore>,
    identity: Option<Identity>,
) -> Result<Arc<rustls::ClientConfig>> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let algorithms = provider.signature_verification_algorithms;
    let chain = match roots {
        Some(roots) => Some(
            rustls::client::WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider.clone())
                .build()
                .map_err(|e| Error::invalid(format!("the PostgreSQL TLS roots cannot be used: {e}")))?,
        ),
        None => None,
    };
    let verifier = Arc::new(Verifier { check, chain, algorithms });
    let builder = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| Error::internal_msg(format!("TLS: {e}")))?
        .dangerous()
        .with_custom_certificate_verifier(verifier);
    let mut config = match identity {
        None => builder.with_no_client_auth(),
        Some((chain, key)) => builder
            .with_client_auth_cert(chain, key)
            .map_err(|e| Error::invalid(format!("the client certificate (sslcert, sslkey) cannot be used: {e}")))?,
    };
    // PostgreSQL's protocol name (17 and later check it when given; earlier ones ignore it)
    config.alpn_protocols = vec![b"postgresql".to_vec()];
    Ok(Arc::new(config))
}

/// Checks the server as [`Check`] says; the handshake's signatures are always verified.
#[derive(Debug)]
struct Verifier {
    check: Check,
    chain: Option<Arc<rustls::client::WebPkiServerVerifier>>,
    algorithms: WebPkiSupportedAlgorithms,
}

impl ServerCertVerifier for Verifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp: &[u8],
        now: UnixTime,
    ) -> std::result::Result<ServerCertVerified, rustls::Error> {
        let Some(chain) = self.chain.as_ref().filter(|_| self.check != Check::Nothing) else {
            return Ok(ServerCertVerified::assertion());
        };
        match chain.verify_server_cert(end_entity, intermediates, server_name, ocsp, now) {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) if self.check == Check::Chain => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.algorithms.supported_schemes()
    }
}

/// The connector for one host.
pub struct Connect {
    config: Option<Arc<rustls::ClientConfig>>,
    name: Option<ServerName<'static>>,
}

impl<S> MakeTlsConnect<S> for Tls
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    type Stream = TlsStream<S>;
    type TlsConnect = Connect;
    type Error = io::Error;

    fn make_tls_connect(&mut self, host: &str) -> io::Result<Connect> {
        Ok(self.connect_to(host))
    }
}

impl Tls {
    /// The connector for `host` (a name or an address; TLS needs one, so a Unix socket's empty
    /// host leaves it off).
    pub fn connect_to(&self, host: &str) -> Connect {
        let name = ServerName::try_from(host.to_string()).ok();
        Connect { config: self.0.clone().filter(|_| name.is_some()), name }
    }
}

impl<S> TlsConnect<S> for Connect
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    type Stream = TlsStream<S>;
    type Error = io::Error;
    type Future = Pin<Box<dyn Future<Output = io::Result<TlsStream<S>>> + Send>>;

    fn connect(self, stream: S) -> Self::Future {
        Box::pin(async move {
            let (Some(config), Some(name)) = (self.config, self.name) else {
                return Err(io::Error::other("TLS is off for this connection"));
            };
            let tls = tokio_rustls::TlsConnector::from(config).connect(name, stream).await?;
            Ok(TlsStream(Box::new(tls)))
        })
    }
}

/// An encrypted connection to PostgreSQL.
pub struct TlsStream<S>(Box<tokio_rustls::client::TlsStream<S>>);

impl<S: AsyncRead + AsyncWrite + Unpin> tokio_postgres::tls::TlsStream for TlsStream<S> {
    fn channel_binding(&self) -> ChannelBinding {
        ChannelBinding::none()
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> AsyncRead for TlsStream<S> {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut *self.0).poll_read(cx, buf)
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> AsyncWrite for TlsStream<S> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut *self.0).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut *self.0).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut *self.0).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_urls_tls_settings_are_read_and_taken_out() {
        let (url, mode, tls) = settings("postgres://u@h/d").unwrap();
        assert_eq!((url.as_str(), mode), ("postgres://u@h/d", SslMode::Prefer));
        assert!(tls.0.is_some(), "prefer: encrypted when offered");
        let (url, mode, tls) = settings("postgres://u@h/d?application_name=x&sslmode=disable").unwrap();
        assert_eq!((url.as_str(), mode), ("postgres://u@h/d?application_name=x", SslMode::Disable));
        assert!(tls.0.is_none());
        let (url, mode, _) = settings("postgres://u@h/d?sslmode=verify-full").unwrap();
        assert_eq!((url.as_str(), mode), ("postgres://u@h/d", SslMode::Require));
        assert!(settings("postgres://u@h/d?sslmode=sometimes").is_err());
        let missing = settings("postgres://u@h/d?sslmode=require&sslrootcert=%2Fnowhere%2Froot.pem").unwrap_err();
        assert!(missing.message.contains("/nowhere/root.pem"), "{}", missing.message);
        // an escaped key is the key
        let (url, mode, _) = settings("postgres://u@h/d?ssl%6Dode=require").unwrap();
        assert_eq!((url.as_str(), mode), ("postgres://u@h/d", SslMode::Require));
        // a chain to any public root proves nothing without the name
        let e = settings("postgres://u@h/d?sslmode=verify-ca").unwrap_err();
        assert!(e.message.contains("sslrootcert"), "{}", e.message);
        // a client certificate: both files, taken out of the URL, read when the URL is
        let e = settings("postgres://u@h/d?sslcert=%2Fa.crt").unwrap_err();
        assert!(e.message.contains("sslkey"), "{}", e.message);
        let e = settings("postgres://u@h/d?sslcert=%2Fnowhere%2Fc.crt&sslkey=%2Fnowhere%2Fc.key").unwrap_err();
        assert!(e.message.contains("/nowhere/c.crt"), "{}", e.message);
        let s = strip("postgres://u@h/d?sslcert=c.crt&application_name=x&sslkey=c.key");
        assert_eq!(
            (s.bare.as_str(), s.cert.as_deref(), s.key.as_deref()),
            ("postgres://u@h/d?application_name=x", Some("c.crt"), Some("c.key"))
        );
    }

    #[test]
    fn percent_decoding_keeps_what_is_not_an_escape() {
        assert_eq!(decode("%2Fa%20b%zz%4"), "/a b%zz%4");
        assert_eq!(decode("%C3%A9t%C3%A9"), "été");
        assert_eq!(decode("%+1"), "%+1", "only two hex digits make an escape");
    }

    proptest::proptest! {
        #[test]
        fn decoding_undoes_percent_encoding_and_never_panics(s in "\\PC*", junk in "[%0-9a-fA-Fz]*") {
            let encoded: String = s.bytes().map(|b| format!("%{b:02X}")).collect();
            proptest::prop_assert_eq!(decode(&encoded), s);
            let _ = decode(&junk);
            let bare = strip(&format!("postgres://u@h/d?{junk}")).bare;
            proptest::prop_assert!(bare.starts_with("postgres://u@h/d"));
        }
    }
}
