//! The outbound HTTP client: every hop cleared by the [`Guard`], connected to the address that was
//! checked, redirects followed by hand (at most 3, each re-checked), connect and total timeouts,
//! and a capped response read.

use std::io::Read;
use std::time::{Duration, Instant};

use reqwest::Url;
use reqwest::blocking::Client;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};

use super::config::DeliveryConfig;
use super::guard::Guard;

/// Most redirects followed.
pub const MAX_REDIRECTS: usize = 3;

/// What a request came back with.
#[derive(Debug, Clone)]
pub struct Answer {
    pub status: u16,
    /// `Retry-After`, in seconds or as an HTTP date, when the server sent one.
    pub retry_after: Option<Duration>,
    pub duration: Duration,
    /// The first bytes of the body (at most the configured cap), for diagnostics only.
    pub body_prefix: Vec<u8>,
}

/// Why a request got no answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Failure {
    /// The guard refused a hop; nothing was sent to it.
    Refused(String),
    /// Connecting, TLS, or reading failed, or the time ran out.
    Transport(String),
    /// The URL or a header was malformed.
    Invalid(String),
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::Refused(m) => write!(f, "refused: {m}"),
            Failure::Transport(m) => write!(f, "transport: {m}"),
            Failure::Invalid(m) => write!(f, "invalid: {m}"),
        }
    }
}

/// A refusal raised inside the client's resolver (found again in the error's source chain).
#[derive(Debug)]
struct Refusal(String);

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Refusal {}

/// A lookup that failed (temporarily, as far as we know): retried, unlike a refusal.
#[derive(Debug)]
struct LookupFailed(String);

impl std::fmt::Display for LookupFailed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for LookupFailed {}

/// The client's only resolver: looks a host up once and hands the connection exactly the
/// addresses the guard cleared, so no second lookup can switch them (DNS rebinding).
struct GuardedResolver {
    guard: Guard,
}

impl reqwest::dns::Resolve for GuardedResolver {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let guard = self.guard.clone();
        let host = name.as_str().to_string();
        Box::pin(async move {
            let addrs: Vec<std::net::SocketAddr> = tokio::net::lookup_host((host.as_str(), 0))
                .await
                .map_err(|e| {
                    Box::new(LookupFailed(format!("{host} did not resolve: {e}")))
                        as Box<dyn std::error::Error + Send + Sync>
                })?
                .collect();
            guard
                .check_resolved(&host, &addrs)
                .map_err(|m| Box::new(Refusal(m)) as Box<dyn std::error::Error + Send + Sync>)?;
            Ok(Box::new(addrs.into_iter()) as reqwest::dns::Addrs)
        })
    }
}

/// The guarded client, built once from the deployment settings and shared by every delivery.
pub struct Outbound {
    guard: Guard,
    cfg: DeliveryConfig,
    /// Extra roots from `ca_file`, read at start so a bad file fails then.
    roots: Vec<reqwest::Certificate>,
    /// Built on first use, on a blocking thread (building and dropping the blocking client must
    /// not happen on an async thread).
    client: std::sync::OnceLock<Client>,
    /// The same client with a public-only resolver, for redirect hops to another origin: the
    /// allow-list admits the URL the operator saved, never where a server sends us.
    public_client: std::sync::OnceLock<Client>,
}

impl Drop for Outbound {
    /// The blocking client owns a small runtime, which must not be dropped on an async thread (an
    /// `App` may be dropped anywhere): it is dropped on a thread of its own.
    fn drop(&mut self) {
        let clients = [self.client.take(), self.public_client.take()];
        if clients.iter().any(Option::is_some) {
            let _ = std::thread::Builder::new().name("steward-outbound-drop".into()).spawn(move || drop(clients));
        }
    }
}

impl Outbound {
    pub fn new(cfg: &DeliveryConfig) -> crate::Result<Outbound> {
        let guard = Guard::new(&cfg.allow).map_err(crate::Error::internal_msg)?;
        let mut roots = Vec::new();
        if let Some(path) = &cfg.ca_file {
            let pem = std::fs::read(path)
                .map_err(|e| crate::Error::internal_msg(format!("delivery CA file {}: {e}", path.display())))?;
            roots = reqwest::Certificate::from_pem_bundle(&pem)
                .map_err(|e| crate::Error::internal_msg(format!("delivery CA file {}: {e}", path.display())))?;
        }
        Ok(Outbound {
            guard,
            cfg: cfg.clone(),
            roots,
            client: std::sync::OnceLock::new(),
            public_client: std::sync::OnceLock::new(),
        })
    }

    /// The blocking client whose resolver is `guard`'s (`public`: the public-only guard).
    fn client(&self, public: bool) -> Result<&Client, Failure> {
        let (cell, guard) =
            if public { (&self.public_client, Guard::default()) } else { (&self.client, self.guard.clone()) };
        if let Some(c) = cell.get() {
            return Ok(c);
        }
        let mut b = Client::builder()
            .no_proxy()
            .redirect(reqwest::redirect::Policy::none())
            .connect_timeout(self.cfg.connect_timeout)
            .timeout(self.cfg.timeout)
            .user_agent(concat!("Steward/", env!("CARGO_PKG_VERSION")))
            .dns_resolver(std::sync::Arc::new(GuardedResolver { guard }));
        for r in &self.roots {
            b = b.add_root_certificate(r.clone());
        }
        let c = b.build().map_err(|e| Failure::Transport(format!("client: {e}")))?;
        // a racing first use builds a second client; the loser drops it here, on this blocking thread
        let _ = cell.set(c);
        cell.get().ok_or_else(|| Failure::Transport("client unavailable".into()))
    }

    pub fn guard(&self) -> &Guard {
        &self.guard
    }

    /// An async client with the same guard (the only resolver), roots and connect timeout, no
    /// redirects and no overall timeout (for streamed protocols such as MCP; callers bound their
    /// own calls).
    pub fn streaming_client(&self) -> Result<reqwest::Client, Failure> {
        let mut b = reqwest::Client::builder()
            .no_proxy()
            .redirect(reqwest::redirect::Policy::none())
            .connect_timeout(self.cfg.connect_timeout)
            .user_agent(concat!("Steward/", env!("CARGO_PKG_VERSION")))
            .dns_resolver(std::sync::Arc::new(GuardedResolver { guard: self.guard.clone() }));
        for r in &self.roots {
            b = b.add_root_certificate(r.clone());
        }
        b.build().map_err(|e| Failure::Transport(format!("client: {e}")))
    }

    /// POSTs `body` as JSON to `url` with `headers`, following redirects the guard clears
    /// (307/308 repeat the POST; 301/302/303 continue as a GET without the body).
    pub fn post_json(&self, url: &str, body: &[u8], headers: &[(&str, String)]) -> Result<Answer, Failure> {
        let started = Instant::now();
        let mut url = Url::parse(url).map_err(|e| Failure::Invalid(format!("URL: {e}")))?;
        let mut hmap = HeaderMap::new();
        hmap.insert(reqwest::header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
        for (k, v) in headers {
            let name =
                HeaderName::from_bytes(k.as_bytes()).map_err(|e| Failure::Invalid(format!("header {k}: {e}")))?;
            let value = HeaderValue::from_str(v).map_err(|e| Failure::Invalid(format!("header {k}: {e}")))?;
            hmap.insert(name, value);
        }
        let saved = url.origin();
        let mut post = true;
        for hop in 0..=MAX_REDIRECTS {
            // the allow-list admits the saved URL's origin; a hop elsewhere is public-only, both in
            // its URL and in the addresses its name resolves to
            let elsewhere = url.origin() != saved;
            let guard = if elsewhere { &Guard::default() } else { &self.guard };
            guard
                .check_url(&url)
                .map_err(|m| Failure::Refused(if elsewhere { format!("redirect: {m}") } else { m }))?;
            let client = self.client(elsewhere)?;
            let left = self
                .cfg
                .timeout
                .checked_sub(started.elapsed())
                .filter(|d| !d.is_zero())
                .ok_or_else(|| Failure::Transport("timed out".into()))?;
            let req = if post {
                client.post(url.clone()).headers(hmap.clone()).body(body.to_vec())
            } else {
                client.get(url.clone())
            };
            let resp = req.timeout(left).send().map_err(|e| match failure_of(&e) {
                Failure::Refused(m) if elsewhere => Failure::Refused(format!("redirect: {m}")),
                f => f,
            })?;
            let status = resp.status().as_u16();
            if matches!(status, 301 | 302 | 303 | 307 | 308) {
                let loc = resp
                    .headers()
                    .get(reqwest::header::LOCATION)
                    .and_then(|v| v.to_str().ok())
                    .ok_or_else(|| Failure::Transport(format!("{status} without a Location")))?;
                if hop == MAX_REDIRECTS {
                    return Err(Failure::Transport(format!("more than {MAX_REDIRECTS} redirects")));
                }
                url = url.join(loc).map_err(|e| Failure::Invalid(format!("redirect Location: {e}")))?;
                post = post && matches!(status, 307 | 308);
                continue;
            }
            let retry_after = resp
                .headers()
                .get(reqwest::header::RETRY_AFTER)
                .and_then(|v| v.to_str().ok())
                .and_then(parse_retry_after);
            let mut body_prefix = Vec::new();
            let cap = self.cfg.max_response_bytes as u64;
            resp.take(cap)
                .read_to_end(&mut body_prefix)
                .map_err(|e| Failure::Transport(format!("reading the answer: {e}")))?;
            return Ok(Answer { status, retry_after, duration: started.elapsed(), body_prefix });
        }
        Err(Failure::Transport(format!("more than {MAX_REDIRECTS} redirects")))
    }
}

/// One page the crawler asked for (one hop: a redirect is answered as it is, with its
/// `Location`, for the crawler to judge).
#[derive(Debug, Clone)]
pub struct PageAnswer {
    pub status: u16,
    pub headers: HeaderMap,
    /// At most the `max_bytes` asked for.
    pub body: Vec<u8>,
    /// The server had more than `max_bytes` to send.
    pub truncated: bool,
}

impl Outbound {
    /// GETs one web page for the crawler through the guard (the allow-list applies: the operator
    /// saved this site), following no redirect, reading at most `max_bytes` of the body.
    pub fn get_page(
        &self,
        url: &Url,
        headers: &[(HeaderName, String)],
        max_bytes: usize,
    ) -> Result<PageAnswer, Failure> {
        self.guard.check_url(url).map_err(Failure::Refused)?;
        let mut req = self.client(false)?.get(url.clone());
        for (k, v) in headers {
            let value = HeaderValue::from_str(v).map_err(|e| Failure::Invalid(format!("header {k}: {e}")))?;
            req = req.header(k, value);
        }
        let resp = req.send().map_err(|e| failure_of(&e))?;
        let status = resp.status().as_u16();
        let headers = resp.headers().clone();
        let mut body = Vec::new();
        resp.take(max_bytes as u64 + 1)
            .read_to_end(&mut body)
            .map_err(|e| Failure::Transport(format!("reading the page: {e}")))?;
        let truncated = body.len() > max_bytes;
        body.truncate(max_bytes);
        Ok(PageAnswer { status, headers, body, truncated })
    }

    /// Whether a redirect to another origin names a public address (checked without a lookup:
    /// the crawler follows none, but says why; a name is not resolved on its behalf).
    pub fn check_public(&self, url: &Url) -> Result<(), String> {
        Guard::default().check_url(url)
    }
}

/// A client error as a [`Failure`]: the guard's refusal when the resolver raised one.
fn failure_of(e: &reqwest::Error) -> Failure {
    let mut src: Option<&dyn std::error::Error> = std::error::Error::source(e);
    while let Some(s) = src {
        if let Some(r) = s.downcast_ref::<Refusal>() {
            return Failure::Refused(r.0.clone());
        }
        if let Some(l) = s.downcast_ref::<LookupFailed>() {
            return Failure::Transport(l.0.clone());
        }
        src = s.source();
    }
    Failure::Transport(describe(e))
}

/// A transport error in a line, without the URL's query (which may carry a token).
fn describe(e: &reqwest::Error) -> String {
    let kind = if e.is_timeout() {
        "timed out"
    } else if e.is_connect() {
        "could not connect"
    } else {
        "request failed"
    };
    let mut src: Option<&dyn std::error::Error> = std::error::Error::source(e);
    let mut detail = String::new();
    while let Some(s) = src {
        detail = s.to_string();
        src = s.source();
    }
    if detail.is_empty() { kind.to_string() } else { format!("{kind}: {detail}") }
}

/// `Retry-After`: seconds, or an HTTP date (as a delay from now).
pub fn parse_retry_after(v: &str) -> Option<Duration> {
    let v = v.trim();
    if let Ok(s) = v.parse::<u64>() {
        return Some(Duration::from_secs(s));
    }
    let at = chrono::DateTime::parse_from_rfc2822(v).ok()?;
    let secs = (at.timestamp() - chrono::Utc::now().timestamp()).max(0);
    Some(Duration::from_secs(secs as u64))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_reads_seconds_and_dates() {
        assert_eq!(parse_retry_after("7"), Some(Duration::from_secs(7)));
        assert_eq!(parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT"), Some(Duration::ZERO));
        assert_eq!(parse_retry_after("soon"), None);
    }

    #[test]
    fn a_refused_host_sends_nothing() {
        let o = Outbound::new(&DeliveryConfig::default()).unwrap();
        let e = o.post_json("https://127.0.0.1:1/hook", b"{}", &[]).unwrap_err();
        assert!(matches!(e, Failure::Refused(_)), "{e}");
        let e = o.post_json("not a url", b"{}", &[]).unwrap_err();
        assert!(matches!(e, Failure::Invalid(_)), "{e}");
        // a name that does not resolve may resolve later: retried, not refused
        let e = o.post_json("https://no-such-host.invalid/hook", b"{}", &[]).unwrap_err();
        assert!(matches!(e, Failure::Transport(_)), "{e}");
    }
}
