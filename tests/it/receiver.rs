//! A real HTTPS webhook receiver on 127.0.0.1 for delivery tests: its own CA (the test points
//! Steward's `delivery.ca_file` at it), a leaf certificate for `127.0.0.1` and `localhost`, a
//! scripted reply per request (200 once the script is empty) and a record of every request.

use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use axum::body::Bytes;
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::IntoResponse;
use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair, KeyUsagePurpose};
use serde_json::Value;
use tokio_rustls::rustls;

/// One request the receiver saw.
#[derive(Debug, Clone)]
pub struct Hit {
    pub path: String,
    pub headers: HeaderMap,
    pub body: Value,
    /// The body as sent (signatures are over these bytes).
    pub raw: Vec<u8>,
    /// When the request had been read (the answer follows at once unless delayed).
    pub at: std::time::Instant,
}

/// A scripted reply.
#[derive(Debug, Clone)]
pub struct Reply {
    pub status: u16,
    pub headers: Vec<(&'static str, String)>,
    /// Hold the answer this long (a slow receiver).
    pub delay_ms: u64,
    /// The answer's body (`ok` when none).
    pub body: Option<String>,
}

impl Reply {
    pub fn status(status: u16) -> Reply {
        Reply { status, headers: Vec::new(), delay_ms: 0, body: None }
    }
    /// Answers `v` as JSON.
    pub fn json(mut self, v: Value) -> Reply {
        self.headers.push(("content-type", "application/json".into()));
        self.body = Some(v.to_string());
        self
    }
    pub fn header(mut self, k: &'static str, v: impl Into<String>) -> Reply {
        self.headers.push((k, v.into()));
        self
    }
}

#[derive(Default)]
struct Shared {
    script: Mutex<VecDeque<Reply>>,
    default: Mutex<Option<Reply>>,
    hits: Mutex<Vec<Hit>>,
    notify: tokio::sync::Notify,
}

pub struct Receiver {
    /// `https://127.0.0.1:PORT`
    pub base: String,
    /// The CA certificate (PEM) that signed the receiver's certificate.
    pub ca_file: PathBuf,
    shared: Arc<Shared>,
    _dir: tempfile::TempDir,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Receiver {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// A test certificate authority and a server certificate it signed for 127.0.0.1, localhost and
/// `names`, in PEM and DER; and a client certificate it signed for [`CLIENT_NAME`], in PEM.
pub struct TestPki {
    pub ca_pem: String,
    pub cert_pem: String,
    pub key_pem: String,
    pub cert_der: rustls::pki_types::CertificateDer<'static>,
    pub key_der: rustls::pki_types::PrivateKeyDer<'static>,
    pub client_cert_pem: String,
    pub client_key_pem: String,
}

/// The common name of [`TestPki`]'s client certificate (a PostgreSQL role's name).
pub const CLIENT_NAME: &str = "steward_cert";

pub fn test_pki(names: &[String]) -> TestPki {
    let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.distinguished_name.push(rcgen::DnType::CommonName, "Steward test CA");
    ca.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::DigitalSignature];
    let ca_key = KeyPair::generate().unwrap();
    let ca_cert = ca.self_signed(&ca_key).unwrap();
    let issuer = Issuer::new(ca, ca_key);
    let mut all = vec!["127.0.0.1".to_string(), "localhost".to_string()];
    all.extend(names.iter().cloned());
    let mut leaf = CertificateParams::new(all).unwrap();
    leaf.distinguished_name.push(rcgen::DnType::CommonName, "localhost");
    leaf.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ServerAuth];
    let leaf_key = KeyPair::generate().unwrap();
    let leaf_cert = leaf.signed_by(&leaf_key, &issuer).unwrap();
    let mut client = CertificateParams::new(Vec::<String>::new()).unwrap();
    client.distinguished_name.push(rcgen::DnType::CommonName, CLIENT_NAME);
    client.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ClientAuth];
    let client_key = KeyPair::generate().unwrap();
    let client_cert = client.signed_by(&client_key, &issuer).unwrap();
    TestPki {
        client_cert_pem: client_cert.pem(),
        client_key_pem: client_key.serialize_pem(),
        ca_pem: ca_cert.pem(),
        cert_pem: leaf_cert.pem(),
        key_pem: leaf_key.serialize_pem(),
        cert_der: leaf_cert.der().clone(),
        key_der: rustls::pki_types::PrivateKeyDer::Pkcs8(leaf_key.serialize_der().into()),
    }
}

impl Receiver {
    pub async fn start() -> Receiver {
        Receiver::start_for(&[]).await
    }

    /// A receiver whose certificate also names `names` (host names that resolve to this machine).
    pub async fn start_for(names: &[String]) -> Receiver {
        let dir = tempfile::tempdir().unwrap();
        let TestPki { ca_pem, cert_der: cert, key_der: key, .. } = test_pki(names);
        let ca_file = dir.path().join("ca.pem");
        std::fs::write(&ca_file, ca_pem).unwrap();
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let tls = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(vec![cert], key)
            .unwrap();
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(tls));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("https://{}", listener.local_addr().unwrap());
        let shared = Arc::new(Shared::default());
        let s = shared.clone();
        let router = axum::Router::new().fallback(move |uri: Uri, headers: HeaderMap, body: Bytes| {
            let s = s.clone();
            async move { record(&s, uri, headers, body).await }
        });
        let task = tokio::spawn(async move {
            loop {
                let Ok((tcp, _)) = listener.accept().await else { return };
                let (acceptor, router) = (acceptor.clone(), router.clone());
                tokio::spawn(async move {
                    let Ok(tls) = acceptor.accept(tcp).await else { return };
                    let svc = hyper_util::service::TowerToHyperService::new(router);
                    let _ = hyper_util::server::conn::auto::Builder::new(hyper_util::rt::TokioExecutor::new())
                        .serve_connection(hyper_util::rt::TokioIo::new(tls), svc)
                        .await;
                });
            }
        });
        Receiver { base, ca_file, shared, _dir: dir, task }
    }

    /// Queues the reply to the next request (after those already queued).
    pub fn push(&self, r: Reply) {
        self.shared.script.lock().unwrap().push_back(r);
    }

    /// The reply once the script is empty (200 unless set).
    pub fn set_default(&self, r: Reply) {
        *self.shared.default.lock().unwrap() = Some(r);
    }

    pub fn hits(&self) -> Vec<Hit> {
        self.shared.hits.lock().unwrap().clone()
    }

    /// Waits until at least `n` requests arrived.
    pub async fn wait_for(&self, n: usize) {
        loop {
            let notified = self.shared.notify.notified();
            if self.shared.hits.lock().unwrap().len() >= n {
                return;
            }
            notified.await;
        }
    }
}

async fn record(s: &Shared, uri: Uri, headers: HeaderMap, body: Bytes) -> impl IntoResponse + use<> {
    let reply = s.script.lock().unwrap().pop_front().or_else(|| s.default.lock().unwrap().clone());
    let reply = reply.unwrap_or(Reply::status(200));
    if reply.delay_ms > 0 {
        tokio::time::sleep(std::time::Duration::from_millis(reply.delay_ms)).await;
    }
    let at = std::time::Instant::now();
    let raw = body.to_vec();
    let body = serde_json::from_slice(&body).unwrap_or(Value::Null);
    s.hits.lock().unwrap().push(Hit { path: uri.path().to_string(), headers, body, raw, at });
    s.notify.notify_waiters();
    let mut h = HeaderMap::new();
    for (k, v) in &reply.headers {
        h.insert(*k, v.parse().unwrap());
    }
    (StatusCode::from_u16(reply.status).unwrap(), h, reply.body.unwrap_or_else(|| "ok".into()))
}
