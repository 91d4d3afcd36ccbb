//! The OpenAPI 3.1 document, generated from the routes themselves.
//!
//! A route can only be added through [`Routes`]: its `get`/`post`/`put`/`patch`/`delete`/`options`
//! methods take the path, the handler and the route's [`Op`] (summary, credential, permission,
//! parameters, request and response schemas, error statuses) together, so a route without an
//! operation cannot be written. Each area's `routes()` returns its `Routes`; `http::router_with`
//! merges them into one axum router and one list of [`Operation`]s, from which [`document`] builds
//! the document served at `GET /api/v1/openapi.json`.
//!
//! Schemas are JSON Schema draft 2020-12 (OpenAPI 3.1's dialect): derived from the wire types with
//! `schemars` (`Op::ok::<T>()`, which honours their serde attributes), or written by hand next to
//! the handler where the handler builds its answer with `json!` (`Op::ok_json(json!({…}))`). A
//! route whose shape is not described yet says so (`Op::ok_any()`): its operation, parameters,
//! credential and errors are documented, its success body is "any JSON".

mod document;
pub mod shapes;

use std::convert::Infallible;
use std::sync::Arc;

use axum::Router;
use axum::extract::Request;
use axum::handler::Handler;
use axum::http::Method;
use axum::response::IntoResponse;
use axum::routing::{self, MethodRouter, Route};
use schemars::{JsonSchema, SchemaGenerator};
use serde_json::Value;
use tower::{Layer, Service};

use crate::app::App;
pub use document::{ApiDocument, document};

/// A schema made by the generator (so derived types land in `components/schemas`).
pub type SchemaFn = fn(&mut SchemaGenerator) -> Value;

fn reference<T: JsonSchema>(g: &mut SchemaGenerator) -> Value {
    g.subschema_for::<T>().to_value()
}

fn inline<T: JsonSchema>(g: &mut SchemaGenerator) -> Value {
    T::json_schema(g).to_value()
}

/// What a body looks like.
#[derive(Clone)]
pub enum Shape {
    /// Derived from a Rust type.
    Typed(SchemaFn),
    /// Written by hand (JSON Schema 2020-12; `$ref`s into `#/components/schemas/…` allowed).
    Json(Value),
    /// Not described by a schema yet: any JSON value (docs/api.md has the prose).
    Undescribed,
}

/// Who may call a route.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Auth {
    /// No credential.
    Public,
    /// The dashboard session, a personal token or a service credential (`Ctx`).
    Member,
    /// The dashboard session only (`SessionCtx`): a bearer credential is a 401.
    Session,
    /// As [`Auth::Member`], or the agent's REST channel credential (`scr_…`).
    MemberOrChannel,
    /// An agent channel credential (`scr_…`; `/mcp`: an MCP channel credential).
    Channel,
    /// A converse session token (from `POST /mcp/converse/session`).
    Converse,
    /// The usage administration token (`EE_USAGE_ADMIN_TOKEN`).
    UsageAdmin,
    /// A public chat launch token in the path; the visitor's session token in the
    /// `x-service-public-session` header where the route needs a session.
    Visitor,
}

/// One response of an operation.
#[derive(Clone)]
pub struct Reply {
    pub status: u16,
    pub media: &'static str,
    pub shape: Option<Shape>,
    pub description: &'static str,
}

/// One operation: everything the document says about a method on a path.
#[derive(Clone)]
pub struct Op {
    pub summary: &'static str,
    pub description: Option<&'static str>,
    pub tag: Option<&'static str>,
    pub auth: Auth,
    pub permission: Option<&'static str>,
    pub query: Option<SchemaFn>,
    pub headers: Vec<(&'static str, bool, &'static str)>,
    pub body: Option<(&'static str, Shape, bool)>,
    pub replies: Vec<Reply>,
    pub errors: Vec<u16>,
}

impl Op {
    /// An operation for a member's credential (session, personal token or service credential);
    /// change that with the credential methods below.
    pub fn new(summary: &'static str) -> Op {
        Op {
            summary,
            description: None,
            tag: None,
            auth: Auth::Member,
            permission: None,
            query: None,
            headers: Vec::new(),
            body: None,
            replies: Vec::new(),
            errors: Vec::new(),
        }
    }

    /// More prose than the summary.
    pub fn about(mut self, text: &'static str) -> Op {
        self.description = Some(text);
        self
    }
    /// Files the operation under another tag than its area's.
    pub fn tag(mut self, tag: &'static str) -> Op {
        self.tag = Some(tag);
        self
    }
    pub fn auth(mut self, auth: Auth) -> Op {
        self.auth = auth;
        self
    }
    pub fn public(self) -> Op {
        self.auth(Auth::Public)
    }
    pub fn session(self) -> Op {
        self.auth(Auth::Session)
    }
    /// The permission the route checks (`details.permission` of its 403).
    pub fn perm(mut self, permission: &'static str) -> Op {
        self.permission = Some(permission);
        self
    }
    /// The query parameters: the properties of `Q`'s schema.
    pub fn query<Q: JsonSchema>(mut self) -> Op {
        self.query = Some(inline::<Q>);
        self
    }
    /// A request header the route reads.
    pub fn header(mut self, name: &'static str, required: bool, description: &'static str) -> Op {
        self.headers.push((name, required, description));
        self
    }
    /// A JSON body of type `B`.
    pub fn body<B: JsonSchema>(mut self) -> Op {
        self.body = Some(("application/json", Shape::Typed(reference::<B>), true));
        self
    }
    /// A JSON body that may be left out (no body means the defaults).
    pub fn optional_body<B: JsonSchema>(mut self) -> Op {
        self.body = Some(("application/json", Shape::Typed(reference::<B>), false));
        self
    }
    /// A JSON body described by hand.
    pub fn body_json(mut self, schema: Value) -> Op {
        self.body = Some(("application/json", Shape::Json(schema), true));
        self
    }
    /// A JSON body whose schema is built by `f`.
    pub fn body_with(mut self, f: SchemaFn) -> Op {
        self.body = Some(("application/json", Shape::Typed(f), true));
        self
    }
    /// A JSON body whose shape is not described yet.
    pub fn body_any(mut self) -> Op {
        self.body = Some(("application/json", Shape::Undescribed, true));
        self
    }
    /// A body of another media type (a multipart form, an image), described by hand.
    pub fn body_media(mut self, media: &'static str, schema: Value) -> Op {
        self.body = Some((media, Shape::Json(schema), true));
        self
    }

    fn reply(mut self, status: u16, media: &'static str, shape: Option<Shape>, description: &'static str) -> Op {
        self.replies.push(Reply { status, media, shape, description });
        self
    }
    /// 200 with a `T`.
    pub fn ok<T: JsonSchema>(self) -> Op {
        self.reply(200, "application/json", Some(Shape::Typed(reference::<T>)), "OK")
    }
    /// 201 with a `T`.
    pub fn created<T: JsonSchema>(self) -> Op {
        self.reply(201, "application/json", Some(Shape::Typed(reference::<T>)), "Created")
    }
    /// 202 with a `T`.
    pub fn accepted<T: JsonSchema>(self) -> Op {
        self.reply(202, "application/json", Some(Shape::Typed(reference::<T>)), "Accepted")
    }
    /// `status` with a `T`.
    pub fn answers<T: JsonSchema>(self, status: u16, description: &'static str) -> Op {
        self.reply(status, "application/json", Some(Shape::Typed(reference::<T>)), description)
    }
    /// 200 with a body described by hand.
    pub fn ok_json(self, schema: Value) -> Op {
        self.reply(200, "application/json", Some(Shape::Json(schema)), "OK")
    }
    /// `status` with a body described by hand.
    pub fn answers_json(self, status: u16, description: &'static str, schema: Value) -> Op {
        self.reply(status, "application/json", Some(Shape::Json(schema)), description)
    }
    /// 200 with a schema built by `f` (which may refer to derived types: `shapes::of::<T>(g)`).
    pub fn ok_with(self, f: SchemaFn) -> Op {
        self.reply(200, "application/json", Some(Shape::Typed(f)), "OK")
    }
    /// `status` with a schema built by `f`.
    pub fn answers_with(self, status: u16, description: &'static str, f: SchemaFn) -> Op {
        self.reply(status, "application/json", Some(Shape::Typed(f)), description)
    }
    /// 200 with JSON whose shape is not described yet.
    pub fn ok_any(self) -> Op {
        self.reply(200, "application/json", Some(Shape::Undescribed), "OK")
    }
    /// `status` with JSON whose shape is not described yet.
    pub fn answers_any(self, status: u16, description: &'static str) -> Op {
        self.reply(status, "application/json", Some(Shape::Undescribed), description)
    }
    /// 204, no body.
    pub fn no_content(self) -> Op {
        self.reply(204, "", None, "No Content")
    }
    /// `status` with a body of another media type (text, HTML, an image, an event stream).
    pub fn media(self, status: u16, media: &'static str, description: &'static str) -> Op {
        self.reply(status, media, None, description)
    }
    /// 200 with a `text/event-stream` (server-sent events).
    pub fn events(self, description: &'static str) -> Op {
        self.reply(200, "text/event-stream", None, description)
    }
    /// Error statuses the route answers besides those every route of its kind does (see
    /// `document`: credentials, parameters and bodies imply theirs).
    pub fn errors(mut self, statuses: &[u16]) -> Op {
        self.errors.extend_from_slice(statuses);
        self
    }
}

/// A documented route: the method, the path as axum spells it, and its operation.
#[derive(Clone)]
pub struct Operation {
    pub method: Method,
    pub path: String,
    pub tag: &'static str,
    pub op: Op,
}

/// Routes with their operations. The only way to add a route to the API (`http::router_with`
/// takes these, not bare axum routers).
pub struct Routes {
    tag: &'static str,
    router: Router<Arc<App>>,
    ops: Vec<Operation>,
}

macro_rules! method {
    ($($(#[$doc:meta])* $name:ident => $method:ident, $routing:ident;)+) => {
        $(
            $(#[$doc])*
            pub fn $name<H, T>(self, path: &str, handler: H, op: Op) -> Routes
            where
                H: Handler<T, Arc<App>>,
                T: 'static,
            {
                self.add(Method::$method, path, routing::$routing(handler), op)
            }
        )+
    };
}

impl Routes {
    /// An area's routes; `tag` groups its operations in the document.
    pub fn new(tag: &'static str) -> Routes {
        Routes { tag, router: Router::new(), ops: Vec::new() }
    }

    method! {
        /// `GET path` answered by `handler`, documented by `op`.
        get => GET, get;
        /// `POST path`.
        post => POST, post;
        /// `PUT path`.
        put => PUT, put;
        /// `PATCH path`.
        patch => PATCH, patch;
        /// `DELETE path`.
        delete => DELETE, delete;
        /// `OPTIONS path` (CORS preflights).
        options => OPTIONS, options;
    }

    fn add(mut self, method: Method, path: &str, route: MethodRouter<Arc<App>>, op: Op) -> Routes {
        self.router = self.router.route(path, route);
        let tag = op.tag.unwrap_or(self.tag);
        self.ops.push(Operation { method, path: path.to_string(), tag, op });
        self
    }

    /// A whole service mounted at `path` (and below it), answering the listed methods.
    pub fn service<S>(mut self, path: &str, service: S, ops: Vec<(Method, Op)>) -> Routes
    where
        S: Service<Request, Error = Infallible> + Clone + Send + Sync + 'static,
        S::Response: IntoResponse,
        S::Future: Send + 'static,
    {
        self.router = self.router.nest_service(path, service);
        for (method, op) in ops {
            let tag = op.tag.unwrap_or(self.tag);
            self.ops.push(Operation { method, path: path.to_string(), tag, op });
        }
        self
    }

    /// Another area's routes, with their operations.
    pub fn merge(mut self, other: Routes) -> Routes {
        self.router = self.router.merge(other.router);
        self.ops.extend(other.ops);
        self
    }

    /// A middleware around these routes (as `axum::Router::layer`).
    pub fn layer<L>(mut self, layer: L) -> Routes
    where
        L: Layer<Route> + Clone + Send + Sync + 'static,
        L::Service: Service<Request> + Clone + Send + Sync + 'static,
        <L::Service as Service<Request>>::Response: IntoResponse + 'static,
        <L::Service as Service<Request>>::Error: Into<Infallible> + 'static,
        <L::Service as Service<Request>>::Future: Send + 'static,
    {
        self.router = self.router.layer(layer);
        self
    }

    /// The axum router and the operations it serves.
    pub fn into_parts(self) -> (Router<Arc<App>>, Vec<Operation>) {
        (self.router, self.ops)
    }
}
