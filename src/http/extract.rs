//! Extractors whose rejections are error envelopes: JSON bodies, paths, queries, the caller's
//! identity and workspace, client info.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::rejection::{JsonRejection, PathRejection, QueryRejection};
use axum::extract::{ConnectInfo, FromRequest, FromRequestParts, Request};
use axum::http::request::Parts;
use axum::http::{Method, header};
use serde::de::DeserializeOwned;

use crate::app::App;
use crate::audit::Actor;
use crate::auth::accounts::ClientInfo;
use crate::auth::{self, Credentials, Perm, Principal};
use crate::error::{Error, ErrorCode};

pub const SESSION_COOKIE: &str = "steward_session";
pub const WORKSPACE_HEADER: &str = "x-workspace-id";

/// The request id assigned by the outer middleware.
#[derive(Debug, Clone)]
pub struct RequestId(pub String);

/// A JSON body; malformed JSON, wrong types, a wrong content type and oversize bodies all answer
/// with the envelope.
pub struct Json<T>(pub T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequest<S> for Json<T> {
    type Rejection = Error;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        match axum::Json::<T>::from_request(req, state).await {
            Ok(axum::Json(v)) => Ok(Json(v)),
            Err(rej) => Err(json_rejection(rej)),
        }
    }
}

pub fn json_rejection(rej: JsonRejection) -> Error {
    match rej {
        JsonRejection::JsonDataError(e) => {
            // serde's message names the field path and the expected type
            let detail = std::error::Error::source(&e).map(|s| s.to_string()).unwrap_or_else(|| e.body_text());
            Error::invalid(format!("the request body does not match what this route expects: {detail}"))
        }
        JsonRejection::JsonSyntaxError(e) => {
            let detail = std::error::Error::source(&e).map(|s| s.to_string()).unwrap_or_else(|| e.body_text());
            Error::new(ErrorCode::MalformedJson, format!("the request body is not valid JSON: {detail}"))
        }
        JsonRejection::MissingJsonContentType(_) => {
            Error::new(ErrorCode::UnsupportedMediaType, "send the body as JSON with Content-Type: application/json")
        }
        JsonRejection::BytesRejection(e) => {
            if e.status().as_u16() == 413 {
                Error::new(ErrorCode::PayloadTooLarge, "the request body is too large (the limit is 1 MB)")
            } else {
                Error::invalid(format!("could not read the request body: {}", e.body_text()))
            }
        }
        other => Error::invalid(other.body_text()),
    }
}

/// A JSON body that may be absent: no body (or only whitespace) is `T::default()`; anything else
/// must be JSON that matches `T`, sent as `application/json` (a form or text body is 415, as with
/// [`Json`], which also keeps a cross-site form from posting it), with the same errors as [`Json`].
pub struct OptionalJson<T>(pub T);

impl<T: DeserializeOwned + Default, S: Send + Sync> FromRequest<S> for OptionalJson<T> {
    type Rejection = Error;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        let json_type = req
            .headers()
            .get(axum::http::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.split(';').next())
            .map(|m| {
                let m = m.trim().to_ascii_lowercase();
                m == "application/json" || (m.starts_with("application/") && m.ends_with("+json"))
            });
        let bytes = axum::body::Bytes::from_request(req, state).await.map_err(|e| {
            if e.status().as_u16() == 413 {
                Error::new(ErrorCode::PayloadTooLarge, "the request body is too large (the limit is 1 MB)")
            } else {
                Error::invalid(format!("could not read the request body: {}", e.body_text()))
            }
        })?;
        if bytes.iter().all(u8::is_ascii_whitespace) {
            return Ok(OptionalJson(T::default()));
        }
        if json_type == Some(false) {
            return Err(Error::new(
                ErrorCode::UnsupportedMediaType,
                "send the body as JSON with Content-Type: application/json",
            ));
        }
        serde_json::from_slice(&bytes).map(OptionalJson).map_err(body_error)
    }
}

/// The envelope for a body that does not parse as `T`: syntax errors are `malformed_json`, shape
/// errors `invalid_request`, each with serde's description (it names the field).
fn body_error(e: serde_json::Error) -> Error {
    if e.is_syntax() || e.is_eof() {
        Error::new(ErrorCode::MalformedJson, format!("the request body is not valid JSON: {e}"))
    } else {
        Error::invalid(format!("the request body does not match what this route expects: {e}"))
    }
}

/// Path parameters.
pub struct Path<T>(pub T);

impl<T: DeserializeOwned + Send, S: Send + Sync> FromRequestParts<S> for Path<T> {
    type Rejection = Error;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        match axum::extract::Path::<T>::from_request_parts(parts, state).await {
            Ok(axum::extract::Path(v)) => Ok(Path(v)),
            Err(PathRejection::FailedToDeserializePathParams(e)) => Err(Error::invalid(e.body_text())),
            Err(e) => Err(Error::invalid(e.body_text())),
        }
    }
}

/// Query parameters.
pub struct Query<T>(pub T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequestParts<S> for Query<T> {
    type Rejection = Error;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        match axum::extract::Query::<T>::from_request_parts(parts, state).await {
            Ok(axum::extract::Query(v)) => Ok(Query(v)),
            Err(QueryRejection::FailedToDeserializeQueryString(e)) => {
                Err(Error::invalid(format!("invalid query parameters: {}", e.body_text())))
            }
            Err(e) => Err(Error::invalid(e.body_text())),
        }
    }
}

fn cookie(parts: &Parts, name: &str) -> Option<String> {
    for v in parts.headers.get_all(header::COOKIE) {
        let Ok(s) = v.to_str() else { continue };
        for pair in s.split(';') {
            if let Some((k, val)) = pair.trim().split_once('=')
                && k == name
                && !val.is_empty()
            {
                return Some(val.to_string());
            }
        }
    }
    None
}

/// The bearer token of `Authorization: Bearer <token>` (none without the header; 401 for another
/// scheme or an unreadable value).
pub fn bearer(headers: &axum::http::HeaderMap) -> Result<Option<String>, Error> {
    let Some(v) = headers.get(header::AUTHORIZATION) else { return Ok(None) };
    let s = v.to_str().map_err(|_| Error::unauthorized("the Authorization header is not valid"))?;
    match s.split_once(' ') {
        Some((scheme, token)) if scheme.eq_ignore_ascii_case("bearer") && !token.trim().is_empty() => {
            Ok(Some(token.trim().to_string()))
        }
        _ => Err(Error::unauthorized("use Authorization: Bearer <token>")),
    }
}

fn credentials(parts: &Parts) -> Result<Credentials, Error> {
    Ok(Credentials { bearer: bearer(&parts.headers)?, session: cookie(parts, SESSION_COOKIE) })
}

fn request_id(parts: &Parts) -> Option<String> {
    parts.extensions.get::<RequestId>().map(|r| r.0.clone())
}

/// Refuses cookie-authenticated state changes unless the request shows it came from this site: an
/// `Origin` naming this host, or, when a client sent no `Origin`, `Sec-Fetch-Site: same-origin`.
/// A state change with neither header is refused: every browser sends one of them, so only a
/// request that hides where it came from lacks both.
fn check_same_origin(parts: &Parts) -> Result<(), Error> {
    if matches!(parts.method, Method::GET | Method::HEAD | Method::OPTIONS) {
        return Ok(());
    }
    let refused = || Error::forbidden("cross-site requests with the dashboard session are refused");
    let Some(origin) = parts.headers.get(header::ORIGIN).and_then(|v| v.to_str().ok()) else {
        let site = parts.headers.get("sec-fetch-site").and_then(|v| v.to_str().ok());
        return if site == Some("same-origin") {
            Ok(())
        } else {
            Err(Error::forbidden(
                "a state change with the dashboard session needs the Origin header (or Sec-Fetch-Site: same-origin)",
            ))
        };
    };
    let host = parts.headers.get(header::HOST).and_then(|v| v.to_str().ok()).unwrap_or("");
    let origin_host = origin.split_once("://").map(|(_, h)| h).unwrap_or(origin);
    if origin == "null" || origin_host != host {
        return Err(refused());
    }
    Ok(())
}

/// An authenticated caller (session, personal token or service credential) with its workspace.
pub struct Ctx {
    pub p: Principal,
    pub request_id: Option<String>,
}

impl Ctx {
    pub fn require(&self, perm: Perm) -> Result<(), Error> {
        self.p.require(perm)
    }
    pub fn actor(&self) -> Actor {
        self.p.actor(self.request_id.clone())
    }
}

async fn authenticate(parts: &Parts, app: &Arc<App>) -> Result<Principal, Error> {
    let creds = credentials(parts)?;
    if creds.bearer.is_none() && creds.session.is_some() {
        check_same_origin(parts)?;
    }
    let ws = parts.headers.get(WORKSPACE_HEADER).and_then(|v| v.to_str().ok()).map(|s| s.trim().to_string());
    if let Some(p) = auth::cached(app, &creds, ws.as_deref()) {
        return Ok(p);
    }
    app.blocking(move |app| auth::authenticate(app, &creds, ws.as_deref())).await
}

impl FromRequestParts<Arc<App>> for Ctx {
    type Rejection = Error;

    async fn from_request_parts(parts: &mut Parts, app: &Arc<App>) -> Result<Self, Self::Rejection> {
        let p = authenticate(parts, app).await?;
        Ok(Ctx { p, request_id: request_id(parts) })
    }
}

/// The caller of an agent's chat route: the usual [`Ctx`], or a REST channel credential
/// (`Authorization: Bearer scr_…`), checked by the route against its path's agent.
pub enum ChatCaller {
    Ctx(Ctx),
    Channel { secret: String, request_id: Option<String> },
}

impl FromRequestParts<Arc<App>> for ChatCaller {
    type Rejection = Error;

    async fn from_request_parts(parts: &mut Parts, app: &Arc<App>) -> Result<Self, Self::Rejection> {
        if let Some(b) = credentials(parts)?.bearer.filter(|b| b.starts_with(crate::converse::REST_PREFIX)) {
            return Ok(ChatCaller::Channel { secret: b, request_id: request_id(parts) });
        }
        Ctx::from_request_parts(parts, app).await.map(ChatCaller::Ctx)
    }
}

/// A caller signed in to the dashboard. A bearer credential on such a route is a 401, even when a
/// session cookie is also present.
pub struct SessionCtx(pub Ctx);

impl FromRequestParts<Arc<App>> for SessionCtx {
    type Rejection = Error;

    async fn from_request_parts(parts: &mut Parts, app: &Arc<App>) -> Result<Self, Self::Rejection> {
        if parts.headers.contains_key(header::AUTHORIZATION) {
            return Err(auth::session_only_error());
        }
        let p = authenticate(parts, app).await?;
        p.require_session()?;
        Ok(SessionCtx(Ctx { p, request_id: request_id(parts) }))
    }
}

/// The client's address and user agent. Behind a trusted proxy (`trust_proxy`) the address is the
/// right-most `X-Forwarded-For` entry: the one the proxy appended. Entries to its left come from
/// the client and can say anything.
pub struct Client(pub ClientInfo);

/// The address a trusted proxy appended: the last entry of the last `X-Forwarded-For` header.
pub fn forwarded_for(headers: &axum::http::HeaderMap) -> Option<String> {
    let last = headers.get_all("x-forwarded-for").iter().next_back()?.to_str().ok()?;
    let addr = last.rsplit(',').next()?.trim();
    (!addr.is_empty()).then(|| addr.to_string())
}

/// The client's address (see [`Client`]) from a request's headers and extensions.
pub fn client_addr(app: &App, headers: &axum::http::HeaderMap, ext: &axum::http::Extensions) -> Option<String> {
    let forwarded = if app.config.trust_proxy { forwarded_for(headers) } else { None };
    forwarded.or_else(|| ext.get::<ConnectInfo<SocketAddr>>().map(|c| c.0.ip().to_string()))
}

impl FromRequestParts<Arc<App>> for Client {
    type Rejection = Error;

    async fn from_request_parts(parts: &mut Parts, app: &Arc<App>) -> Result<Self, Self::Rejection> {
        let addr = client_addr(app, &parts.headers, &parts.extensions);
        let user_agent = parts.headers.get(header::USER_AGENT).and_then(|v| v.to_str().ok()).map(|s| s.to_string());
        Ok(Client(ClientInfo { addr, user_agent }))
    }
}

#[cfg(test)]
mod tests {
    use axum::http::{HeaderMap, HeaderValue};

    use super::forwarded_for;

    #[test]
    fn the_proxy_appended_entry_is_the_right_most_one() {
        let mut h = HeaderMap::new();
        assert_eq!(forwarded_for(&h), None);
        // the client sent "1.1.1.1, 2.2.2.2"; the proxy appended the real peer 203.0.113.9
        h.insert("x-forwarded-for", HeaderValue::from_static("1.1.1.1, 2.2.2.2, 203.0.113.9"));
        assert_eq!(forwarded_for(&h).as_deref(), Some("203.0.113.9"));
        h.append("x-forwarded-for", HeaderValue::from_static(" 198.51.100.7 "));
        assert_eq!(forwarded_for(&h).as_deref(), Some("198.51.100.7"));
        h.insert("x-forwarded-for", HeaderValue::from_static("1.1.1.1, "));
        assert_eq!(forwarded_for(&h), None);
    }
}
