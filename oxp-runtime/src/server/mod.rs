//! The OXP 1.0 HTTP front: `GET /health`, `GET /tools`, `POST /tools/call`, and `GET` on
//! authorization `check_url`s — and any other front nested on the same port ([`Server::nest`]:
//! `serve()` puts MCP's streamable HTTP at `/mcp`).
//! It only translates; every step of a call is [`Pipeline`]'s.
//!
//! ```no_run
//! use oxp_runtime::{server::{Server, ServerAuth}, Registry};
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let server = Server::new(Registry::from_inventory()?)
//!     .auth(ServerAuth::default().jwt_secret(std::env::var("JWT_SECRET")?));
//! // Nest it into an existing axum app…
//! let app = axum::Router::new().nest("/oxp", server.router());
//! // …or serve it alone.
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:8000").await?;
//! axum::serve(listener, app).await?;
//! # Ok(()) }
//! ```

mod auth;
pub mod dialect;
mod guard;
mod listen;

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::rejection::PathRejection;
use axum::extract::{OriginalUri, Path, Request, State};
use axum::http::header::{CONTENT_TYPE, HOST, USER_AGENT};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, Uri};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde::Serialize;
use serde_json::{Value, json};

pub use auth::{AuthError, Principal, ServerAuth};
pub use listen::ConnectionLimits;

use crate::authorization::AuthorizationProvider;
use crate::call::{CallMeta, CallOutcome, Pipeline};
use crate::idempotency::IdempotencyStore;
use crate::registry::Registry;
use dialect::{DEFAULT_SCHEMA, Dialect};
use guard::{BodyFailure, Browsers, LOOPBACK_HOSTS};

/// The default cap on a request body.
///
/// ```
/// use oxp_runtime::server::{Server, DEFAULT_MAX_BODY_BYTES};
/// # let registry = oxp_runtime::Registry::builder().build().unwrap();
/// let server = Server::new(registry).max_body_bytes(4 * DEFAULT_MAX_BODY_BYTES);
/// # let _ = server;
/// ```
pub const DEFAULT_MAX_BODY_BYTES: usize = 1024 * 1024;

/// How long a request's body may take to arrive, by default, from the request's start.
///
/// ```
/// use oxp_runtime::server::{Server, DEFAULT_BODY_TIMEOUT};
/// # let registry = oxp_runtime::Registry::builder().build().unwrap();
/// let server = Server::new(registry).body_timeout(DEFAULT_BODY_TIMEOUT * 2);
/// # let _ = server;
/// ```
pub const DEFAULT_BODY_TIMEOUT: Duration = Duration::from_secs(30);

/// User agents of LangChain's OXP clients, which expect a bare array from `GET /tools`
/// (oxp-notes §3.3).
const LANGCHAIN_USER_AGENTS: [&str; 3] = [
    "universal-tool-sdk-py/",
    "open-tool-sdk-py/",
    "langchain-tool-sdk",
];

/// An OXP server over a registry.
///
/// ```
/// use oxp_runtime::{server::Server, Registry};
///
/// let server = Server::new(Registry::builder().build().unwrap()).max_body_bytes(64 * 1024);
/// let router: axum::Router = server.router();
/// # let _ = router;
/// ```
#[derive(Debug, Clone)]
pub struct Server {
    pipeline: Pipeline,
    auth: ServerAuth,
    max_body_bytes: usize,
    langchain_compat: bool,
    public_url: Option<String>,
    playground: bool,
    browsers: Browsers,
    body_timeout: Duration,
    connections: ConnectionLimits,
    /// Routers nested under paths, behind the same guard and authentication (MCP at `/mcp`).
    nested: Vec<(String, Router)>,
}

/// The playground: one self-contained page (no CDN, no build step).
const PLAYGROUND: &str = include_str!("playground.html");

impl Server {
    /// A server for every tool of `registry`, with authentication off and the default limits.
    ///
    /// ```
    /// # let registry = oxp_runtime::Registry::builder().build().unwrap();
    /// let server = oxp_runtime::server::Server::new(registry);
    /// # let _ = server;
    /// ```
    pub fn new(registry: Registry) -> Self {
        Server::from_pipeline(Pipeline::new(registry))
    }

    /// A server over an already configured pipeline.
    ///
    /// ```
    /// # use oxp_runtime::{server::*, Registry};
    /// # let registry = Registry::builder().build().unwrap();
    /// let pipeline = oxp_runtime::call::Pipeline::new(registry).default_timeout(std::time::Duration::from_secs(5));
    /// let server = Server::from_pipeline(pipeline);
    /// # let _ = server;
    /// ```
    pub fn from_pipeline(pipeline: Pipeline) -> Self {
        Server {
            pipeline,
            auth: ServerAuth::default(),
            max_body_bytes: DEFAULT_MAX_BODY_BYTES,
            langchain_compat: false,
            public_url: None,
            playground: false,
            browsers: Browsers::default(),
            body_timeout: DEFAULT_BODY_TIMEOUT,
            connections: ConnectionLimits::default(),
            nested: Vec::new(),
        }
    }

    /// Serves `router` under `path`, behind the server's guard and authentication: how another
    /// front shares the port. `serve()` nests MCP's streamable HTTP at `/mcp` this way.
    ///
    /// ```
    /// use oxp_runtime::{call::Pipeline, mcp::McpServer, server::Server, Registry};
    /// # let registry = Registry::builder().build().unwrap();
    /// let pipeline = Pipeline::new(registry);
    /// let mcp = McpServer::new(pipeline.clone()).into_router();
    /// let server = Server::from_pipeline(pipeline).nest("/mcp", mcp);
    /// # let _ = server;
    /// ```
    #[must_use]
    pub fn nest(mut self, path: &str, router: Router) -> Self {
        self.nested.push((path.to_owned(), router));
        self
    }

    /// How many connections [`serve`](Self::serve) keeps open and for how long (see
    /// [`ConnectionLimits`] for each limit and its default).
    ///
    /// ```
    /// use oxp_runtime::server::{ConnectionLimits, Server};
    /// # let registry = oxp_runtime::Registry::builder().build().unwrap();
    /// let mut limits = ConnectionLimits::default();
    /// limits.write_timeout = std::time::Duration::from_secs(10);
    /// let server = Server::new(registry).connection_limits(limits);
    /// # let _ = server;
    /// ```
    #[must_use]
    pub fn connection_limits(mut self, limits: ConnectionLimits) -> Self {
        self.connections = limits;
        self
    }

    /// Origins whose pages may call this server from a browser, besides its own (and the
    /// origin of [`public_url`](Self::public_url)). A request with any other `Origin` is
    /// answered `403` on every route, `/mcp` included: a web page the user happens to visit
    /// must not drive tools (CSRF). Written `scheme://host[:port]`.
    ///
    /// ```
    /// # use oxp_runtime::{server::*, Registry};
    /// # let registry = Registry::builder().build().unwrap();
    /// let server = Server::new(registry).allowed_origins(["https://agent.example.com"]);
    /// # let _ = server;
    /// ```
    #[must_use]
    pub fn allowed_origins<S: AsRef<str>>(mut self, origins: impl IntoIterator<Item = S>) -> Self {
        self.browsers
            .origins
            .extend(origins.into_iter().map(|o| Browsers::origin_of(o.as_ref())));
        self
    }

    /// Answers only requests whose `Host` is `localhost`, `127.0.0.1`, `[::1]` or one of
    /// `hosts` (any port); others get a `403`. This is what keeps a page on a name that
    /// resolves to 127.0.0.1 (DNS rebinding) out of a server on a developer's machine, and
    /// [`serve`](Self::serve) turns it on by itself for a loopback listener.
    ///
    /// ```
    /// # use oxp_runtime::{server::*, Registry};
    /// # let registry = Registry::builder().build().unwrap();
    /// let server = Server::new(registry).allowed_hosts(["my-laptop.local"]);
    /// # let _ = server;
    /// ```
    #[must_use]
    pub fn allowed_hosts<S: AsRef<str>>(mut self, hosts: impl IntoIterator<Item = S>) -> Self {
        let listed = self
            .browsers
            .hosts
            .get_or_insert_with(|| LOOPBACK_HOSTS.map(String::from).to_vec());
        listed.extend(hosts.into_iter().map(|h| h.as_ref().to_ascii_lowercase()));
        self
    }

    /// How long a request's body may take to arrive (from the request's start); a slower one
    /// is answered `400`. Default [`DEFAULT_BODY_TIMEOUT`].
    ///
    /// ```
    /// # use oxp_runtime::{server::*, Registry};
    /// # let registry = Registry::builder().build().unwrap();
    /// let server = Server::new(registry).body_timeout(std::time::Duration::from_secs(5));
    /// # let _ = server;
    /// ```
    #[must_use]
    pub fn body_timeout(mut self, timeout: Duration) -> Self {
        self.body_timeout = timeout;
        self
    }

    /// Serves the playground page at `GET /`: pick a tool, fill a form built from its input
    /// schema, call it, see the value, the tool error or the 400/422 with the offending fields,
    /// and the exact request, response and a curl command. The page itself holds no data; its
    /// calls go through the server's authentication like any other. Off by default; `serve()`
    /// turns it on for loopback addresses (`OXP_PLAYGROUND` decides otherwise).
    ///
    /// ```
    /// # use oxp_runtime::{server::*, Registry};
    /// # let registry = Registry::builder().build().unwrap();
    /// let server = Server::new(registry).playground(true);
    /// # let _ = server;
    /// ```
    #[must_use]
    pub fn playground(mut self, on: bool) -> Self {
        self.playground = on;
        self
    }

    /// How callers authenticate (off by default).
    ///
    /// ```
    /// # use oxp_runtime::{server::*, Registry};
    /// # let registry = Registry::builder().build().unwrap();
    /// let server = Server::new(registry).auth(ServerAuth::default().api_key("k_0123456789abcdef0123456789abcdef"));
    /// # let _ = server;
    /// ```
    #[must_use]
    pub fn auth(mut self, auth: ServerAuth) -> Self {
        self.auth = auth;
        self
    }

    /// The largest request body accepted, on every route; larger ones get a `413` with a JSON
    /// body (at once, when the declared `Content-Length` says so).
    ///
    /// ```
    /// # use oxp_runtime::{server::*, Registry};
    /// # let registry = Registry::builder().build().unwrap();
    /// let server = Server::new(registry).max_body_bytes(256 * 1024);
    /// # let _ = server;
    /// ```
    #[must_use]
    pub fn max_body_bytes(mut self, bytes: usize) -> Self {
        self.max_body_bytes = bytes;
        self
    }

    /// The time limit for tools that set no `timeout_ms` of their own.
    ///
    /// ```
    /// # use oxp_runtime::{server::*, Registry};
    /// # let registry = Registry::builder().build().unwrap();
    /// let server = Server::new(registry).default_timeout(std::time::Duration::from_secs(30));
    /// # let _ = server;
    /// ```
    #[must_use]
    pub fn default_timeout(mut self, timeout: Duration) -> Self {
        self.pipeline = self.pipeline.default_timeout(timeout);
        self
    }

    /// The largest result a tool may return (see [`Pipeline::max_result_bytes`]).
    ///
    /// ```
    /// # use oxp_runtime::{server::*, Registry};
    /// # let registry = Registry::builder().build().unwrap();
    /// let server = Server::new(registry).max_result_bytes(4 * 1024 * 1024);
    /// # let _ = server;
    /// ```
    #[must_use]
    pub fn max_result_bytes(mut self, bytes: usize) -> Self {
        self.pipeline = self.pipeline.max_result_bytes(bytes);
        self
    }

    /// The provider that mints authorization challenges (with `check_url`s on this server).
    ///
    /// ```
    /// # use oxp_runtime::{server::*, Registry};
    /// # let registry = Registry::builder().build().unwrap();
    /// use oxp_runtime::authorization::InMemoryAuthorization;
    /// let server = Server::new(registry).authorization(InMemoryAuthorization::new("https://auth.example.com/authorize"));
    /// # let _ = server;
    /// ```
    #[must_use]
    pub fn authorization(mut self, provider: impl AuthorizationProvider) -> Self {
        self.pipeline = self.pipeline.authorization(provider);
        self
    }

    /// The URL clients reach this server at, for `check_url`s (behind a proxy); by default it
    /// is read from each request's `Host` and `X-Forwarded-Proto`.
    ///
    /// ```
    /// # use oxp_runtime::{server::*, Registry};
    /// # let registry = Registry::builder().build().unwrap();
    /// let server = Server::new(registry).public_url("https://tools.example.com/oxp");
    /// # let _ = server;
    /// ```
    #[must_use]
    pub fn public_url(mut self, url: impl Into<String>) -> Self {
        self.public_url = Some(url.into().trim_end_matches('/').to_owned());
        self
    }

    /// Compatibility with LangChain's clients (`universal-tool-client`, `langchain-tool-client`):
    /// a bare array from `GET /tools` for their user agents, `call_id`/`success`/`value`/`error`
    /// copied to the top of the envelope, and tools callable by wire name (oxp-notes §3.2, §3.3,
    /// §3.19). Off by default: strict OXP.
    ///
    /// ```
    /// # use oxp_runtime::{server::*, Registry};
    /// # let registry = Registry::builder().build().unwrap();
    /// let server = Server::new(registry).langchain_compat(true);
    /// # let _ = server;
    /// ```
    #[must_use]
    pub fn langchain_compat(mut self, on: bool) -> Self {
        self.langchain_compat = on;
        self
    }

    /// At most `max_calls` calls at once (`None`: no limit; over it, a call is answered at once
    /// as temporarily unavailable), and at most `max_blocking` sync tools on blocking threads.
    ///
    /// ```
    /// # use oxp_runtime::{server::*, Registry};
    /// # let registry = Registry::builder().build().unwrap();
    /// let server = Server::new(registry).limits(Some(512), 64);
    /// # let _ = server;
    /// ```
    #[must_use]
    pub fn limits(mut self, max_calls: Option<usize>, max_blocking: usize) -> Self {
        self.pipeline = self.pipeline.limits(max_calls, max_blocking);
        self
    }

    /// Where answers to calls with a `call_id` are kept (in memory by default); `None` turns
    /// idempotency off.
    ///
    /// ```
    /// # use oxp_runtime::{server::*, Registry};
    /// # let registry = Registry::builder().build().unwrap();
    /// use oxp_runtime::idempotency::InMemoryIdempotency;
    /// let server = Server::new(registry).idempotency(None::<InMemoryIdempotency>); // off
    /// # let _ = server;
    /// ```
    #[must_use]
    pub fn idempotency(mut self, store: Option<impl IdempotencyStore>) -> Self {
        self.pipeline = self.pipeline.idempotency(store);
        self
    }

    /// The pipeline calls run through (for its [`stats`](Pipeline::stats), say).
    ///
    /// ```
    /// # use oxp_runtime::{server::*, Registry};
    /// # let registry = Registry::builder().build().unwrap();
    /// let server = Server::new(registry);
    /// assert_eq!(server.pipeline().stats().active, 0);
    /// ```
    pub fn pipeline(&self) -> &Pipeline {
        &self.pipeline
    }

    /// Serves on `listener` until `shutdown` completes, then drains: `/health` answers 503, new
    /// calls are answered as temporarily unavailable, and calls in flight finish and are
    /// answered — for at most `grace`.
    ///
    /// ```no_run
    /// # async fn run() -> std::io::Result<()> {
    /// use oxp_runtime::{server::{Server, Shutdown}, Registry};
    ///
    /// let server = Server::new(Registry::from_inventory().unwrap());
    /// let listener = tokio::net::TcpListener::bind("127.0.0.1:8000").await?;
    /// let ctrl_c = async { tokio::signal::ctrl_c().await.unwrap() };
    /// let ended = server.serve(listener, ctrl_c, std::time::Duration::from_secs(30)).await?;
    /// assert_eq!(ended, Shutdown::Drained);
    /// # Ok(()) }
    /// ```
    pub async fn serve(
        self,
        listener: tokio::net::TcpListener,
        shutdown: impl std::future::Future<Output = ()> + Send + 'static,
        grace: Duration,
    ) -> std::io::Result<Shutdown> {
        let mut server = self;
        if server.browsers.hosts.is_none() && listener.local_addr()?.ip().is_loopback() {
            server = server.allowed_hosts(std::iter::empty::<&str>());
        }
        let pipeline = server.pipeline.clone();
        let limits = server.connections.clone();
        let router = server.router();
        let outcome = std::sync::OnceLock::new();
        let stop = async {
            shutdown.await;
            tracing::info!("shutting down: draining calls in flight");
            pipeline.drain();
            let ended = if pipeline.wait_idle(grace).await {
                Shutdown::Drained
            } else {
                Shutdown::GraceExpired {
                    active: pipeline.stats().active,
                }
            };
            let _ = outcome.set(ended);
        };
        // Every call is answered once drained: connections get a moment to flush and close,
        // but a client that holds one open is not waited for.
        listen::serve(listener, router, &limits, stop, Duration::from_millis(500)).await;
        Ok(outcome.get().copied().unwrap_or(Shutdown::Drained))
    }

    /// The axum router, to serve or to nest into an app.
    ///
    /// ```
    /// use tower::ServiceExt;
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// # let registry = oxp_runtime::Registry::builder().build().unwrap();
    /// let app = axum::Router::new().nest("/oxp", oxp_runtime::server::Server::new(registry).router());
    /// let request = axum::http::Request::get("/oxp/health").body(axum::body::Body::empty()).unwrap();
    /// assert_eq!(app.oneshot(request).await.unwrap().status(), 200);
    /// # });
    /// ```
    pub fn router(self) -> Router {
        let playground = self.playground;
        let mut browsers = self.browsers;
        if let Some(url) = &self.public_url {
            browsers.origins.push(Browsers::origin_of(url));
        }
        let state = Arc::new(AppState {
            pipeline: self.pipeline,
            auth: self.auth,
            max_body_bytes: self.max_body_bytes,
            body_timeout: self.body_timeout,
            langchain_compat: self.langchain_compat,
            public_check_url: self.public_url.map(|url| format!("{url}/authorization/")),
            browsers,
        });
        let protected = Router::new()
            .route("/tools", get(list_tools))
            .route("/tools/call", axum::routing::post(call_tool))
            .route("/authorization/{check_id}", get(check_authorization));
        // Other fronts on the same port (MCP), behind the same authentication.
        let protected = self
            .nested
            .into_iter()
            .fold(protected, |routes, (path, router)| {
                routes.nest_service(&path, router)
            });
        let protected = protected
            .fallback(not_found)
            .method_not_allowed_fallback(method_not_allowed);
        // With authentication off there is nothing to check: no layer at all, no cost per call.
        let protected = if state.auth.is_enabled() {
            protected.route_layer(middleware::from_fn_with_state(state.clone(), authenticate))
        } else {
            protected
        };
        let open = Router::new().route("/health", get(health));
        let open = if playground {
            open.route("/", get(playground_page))
        } else {
            open
        };
        open.method_not_allowed_fallback(method_not_allowed)
            .merge(protected)
            .layer(middleware::from_fn_with_state(state.clone(), guard::guard))
            .with_state(state)
    }
}

/// How [`Server::serve`] ended.
///
/// ```no_run
/// # async fn run() -> std::io::Result<()> {
/// use oxp_runtime::server::{Server, Shutdown};
/// # let registry = oxp_runtime::Registry::builder().build().unwrap();
/// let listener = tokio::net::TcpListener::bind("127.0.0.1:8000").await?;
/// let stop = async { tokio::signal::ctrl_c().await.unwrap() };
/// match Server::new(registry).serve(listener, stop, std::time::Duration::from_secs(10)).await? {
///     Shutdown::Drained => {}
///     Shutdown::GraceExpired { active } => eprintln!("{active} calls were cut off"),
/// }
/// # Ok(()) }
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shutdown {
    /// Every call was answered.
    Drained,
    /// The grace period ran out with calls still active.
    GraceExpired {
        /// How many.
        active: u64,
    },
}

struct AppState {
    pipeline: Pipeline,
    auth: ServerAuth,
    max_body_bytes: usize,
    body_timeout: Duration,
    browsers: Browsers,
    langchain_compat: bool,
    /// `{public_url}/authorization/`, made once: where `check_url`s point when configured.
    public_check_url: Option<String>,
}

/// Appends the JSON array of every tool definition, from the JSON the registry keeps of each:
/// the list is written per request (it is asked for rarely, and only the `$schema` around it
/// varies), not kept whole beside the registry.
fn push_items(registry: &Registry, body: &mut String) {
    let tools = registry.tools();
    body.reserve(
        tools
            .iter()
            .map(|t| t.definition_json().len() + 1)
            .sum::<usize>()
            + 1,
    );
    body.push('[');
    for (i, tool) in tools.iter().enumerate() {
        if i > 0 {
            body.push(',');
        }
        body.push_str(tool.definition_json());
    }
    body.push(']');
}

async fn authenticate(
    State(state): State<Arc<AppState>>,
    mut request: Request,
    next: Next,
) -> Response {
    match state.auth.authenticate(request.headers()) {
        Ok(principal) => {
            request.extensions_mut().insert(principal);
            next.run(request).await
        }
        Err(error) => {
            tracing::info!(path = ?request.uri().path(), reason = %error, "refused an unauthenticated request");
            error.into_response()
        }
    }
}

fn json_response(status: StatusCode, body: &impl Serialize) -> Response {
    let mut bytes = Vec::with_capacity(256);
    serde_json::to_writer(&mut bytes, body).expect("wire types serialize");
    json_bytes(status, bytes)
}

fn json_bytes(status: StatusCode, bytes: impl Into<Bytes>) -> Response {
    response(status, "application/json", bytes.into())
}

/// Every response the server builds itself goes through here. (`OXP-Version` is the guard's to
/// add, to every answer alike: these, axum's own rejections, and the nested fronts'.)
fn response(status: StatusCode, content_type: &'static str, body: impl Into<Body>) -> Response {
    let mut response = Response::new(body.into());
    *response.status_mut() = status;
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    response
}

async fn playground_page() -> Response {
    let mut response = response(StatusCode::OK, "text/html; charset=utf-8", PLAYGROUND);
    let headers = response.headers_mut();
    // Everything the page needs is inline; it talks only to this server.
    headers.insert(
        "content-security-policy",
        HeaderValue::from_static(
            "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'; img-src 'self' data:",
        ),
    );
    response
}

/// §1 H.11–13: 200 when ready, no authentication.
async fn health(State(state): State<Arc<AppState>>) -> Response {
    if state.pipeline.is_draining() {
        // §1 H.13: MAY 503 when not ready; a load balancer stops sending new calls here.
        return json_bytes(
            StatusCode::SERVICE_UNAVAILABLE,
            &br#"{"status":"draining"}"#[..],
        );
    }
    json_bytes(StatusCode::OK, &br#"{"status":"ok"}"#[..])
}

/// §1 L: the tool list. A body is allowed and ignored, except a recognized `$schema`
/// (oxp-notes §3.4): a malformed body is never an error.
async fn list_tools(State(state): State<Arc<AppState>>, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    let headers = parts.headers;
    let body = match axum::body::to_bytes(body, state.max_body_bytes).await {
        Ok(body) => body,
        Err(error) => return body_failure(&error, state.max_body_bytes),
    };
    let schema = serde_json::from_slice::<Value>(&body)
        .ok()
        .and_then(|b| b.get("$schema").cloned())
        .and_then(|s| dialect::check_schema(&s).ok());
    let registry = state.pipeline.registry();
    let mut body = String::new();
    if state.langchain_compat && is_langchain(&headers) {
        push_items(registry, &mut body);
        return json_bytes(StatusCode::OK, body);
    }
    let echo = schema.as_deref().unwrap_or(DEFAULT_SCHEMA);
    let echo = serde_json::to_string(echo).expect("a string serializes");
    body.push_str(&format!(r#"{{"$schema":{echo},"items":"#));
    push_items(registry, &mut body);
    // The OTC drafts called the list `tools`; a client that says `otc://` gets both keys.
    if schema.as_deref().is_some_and(|s| s.starts_with("otc://")) {
        body.push_str(r#","tools":"#);
        push_items(registry, &mut body);
    }
    body.push('}');
    json_bytes(StatusCode::OK, body)
}

fn is_langchain(headers: &HeaderMap) -> bool {
    headers
        .get(USER_AGENT)
        .and_then(|ua| ua.to_str().ok())
        .is_some_and(|ua| LANGCHAIN_USER_AGENTS.iter().any(|p| ua.starts_with(p)))
}

/// §1 C, E: one call. Size → dialect and shape → the pipeline → the answer in the caller's dialect.
///
/// A plain `fn` returning the future (rather than an `async fn`, which keeps storage for its
/// arguments besides its locals): the future is moved into axum's box on every call.
fn call_tool(
    State(state): State<Arc<AppState>>,
    request: Request,
) -> impl std::future::Future<Output = Response> {
    // The request taken apart rather than through extractors, which would copy the headers.
    let (parts, body) = request.into_parts();
    async move {
        let body = match axum::body::to_bytes(body, state.max_body_bytes).await {
            Ok(body) => body,
            Err(error) => return body_failure(&error, state.max_body_bytes),
        };
        let (dialect, request) =
            match dialect::read_call(&parts.headers, &body, state.langchain_compat) {
                Ok(read) => read,
                Err(error) => {
                    let dialect = dialect_guess(&parts.headers, &body);
                    return answer(&dialect, StatusCode::BAD_REQUEST, &error, false);
                }
            };
        let meta = call_meta(&state, &parts);
        let outcome = state.pipeline.call_with(request, &meta).await;
        respond(&dialect, outcome, state.langchain_compat)
    }
}

/// What the pipeline needs to know of a call besides its body.
fn call_meta(state: &AppState, parts: &axum::http::request::Parts) -> CallMeta {
    CallMeta {
        // Only an authenticated principal scopes idempotency; `None` is "anonymous".
        principal: parts
            .extensions
            .get::<Principal>()
            .filter(|p| **p != Principal::Anonymous)
            .map(ToString::to_string),
        // Only a server that mints challenges needs the URLs they point back to.
        check_url_base: state.pipeline.authorization_provider().map(|_| {
            let original = parts
                .extensions
                .get::<OriginalUri>()
                .map_or(&parts.uri, |o| &o.0);
            check_url_base(state, &parts.headers, original, &parts.uri)
        }),
        resolve_wire_names: state.langchain_compat,
    }
}

fn too_large(limit: usize) -> Response {
    error_response(
        StatusCode::PAYLOAD_TOO_LARGE,
        "The request body is too large.",
        &format!("the limit is {limit} bytes"),
    )
}

/// A body that could not be read: over the cap is a `413`; too slow or cut off, a `400`.
fn body_failure(error: &axum::Error, limit: usize) -> Response {
    match BodyFailure::of(error) {
        BodyFailure::TooLarge => too_large(limit),
        BodyFailure::OverBudget => error_response(
            StatusCode::PAYLOAD_TOO_LARGE,
            "This connection is sending too many request bodies at once.",
            "the bodies in flight on one connection are capped (ConnectionLimits::max_buffered_bytes)",
        ),
        BodyFailure::TooSlow => error_response(
            StatusCode::BAD_REQUEST,
            "The request body did not arrive in time.",
            "the whole body must arrive within the server's body timeout (OXP_BODY_TIMEOUT_MS)",
        ),
        BodyFailure::Broken => error_response(
            StatusCode::BAD_REQUEST,
            "The request body could not be read.",
            "the connection failed or the body's framing was broken mid-way",
        ),
    }
}

/// An error the server answers before any tool is involved, in the `ServerErrorResponse` shape.
fn error_response(status: StatusCode, message: &str, developer_message: &str) -> Response {
    json_response(
        status,
        &json!({ "message": message, "developer_message": developer_message }),
    )
}

/// The HTTP answer to a call's outcome.
fn respond(dialect: &Dialect, outcome: CallOutcome, compat: bool) -> Response {
    match &outcome {
        CallOutcome::Completed(response) => answer(dialect, StatusCode::OK, response, compat),
        CallOutcome::Rejected(error) => answer(dialect, StatusCode::BAD_REQUEST, error, false),
        CallOutcome::Unavailable {
            error,
            retry_after_ms,
        } => {
            // The SDKs' retry logic reads these (oxp-notes §5): wait, then try again.
            let mut response = answer(dialect, StatusCode::BAD_REQUEST, error, false);
            let headers = response.headers_mut();
            headers.insert("retry-after-ms", HeaderValue::from(*retry_after_ms));
            headers.insert("x-should-retry", HeaderValue::from_static("true"));
            response
        }
        CallOutcome::Invalid(error) => {
            answer(dialect, StatusCode::UNPROCESSABLE_ENTITY, error, false)
        }
    }
}

/// Error bodies go back in the dialect the request looked like, even when it did not parse:
/// an `OXP-Version` header without an envelope means bare.
fn dialect_guess(headers: &HeaderMap, body: &[u8]) -> Dialect {
    let parsed = serde_json::from_slice::<Value>(body).ok();
    let enveloped = parsed.as_ref().is_some_and(|v| v.get("request").is_some());
    if headers.contains_key("oxp-version") && !enveloped {
        return Dialect::Bare;
    }
    let schema = parsed
        .as_ref()
        .and_then(|v| v.get("$schema").and_then(Value::as_str))
        .filter(|s| dialect::schema_major(s) == Some(1));
    Dialect::Envelope(std::borrow::Cow::Owned(
        schema.unwrap_or(DEFAULT_SCHEMA).to_owned(),
    ))
}

/// Writes a call's answer: a `200` result wrapped in the envelope (or bare), and `400`/`422`
/// bodies at the top level with `$schema` added in the envelope dialect (oxp-notes §2, §3.36).
fn answer(dialect: &Dialect, status: StatusCode, body: &impl Serialize, compat: bool) -> Response {
    /// The common answer, written straight out with no intermediate `Value`.
    #[derive(Serialize)]
    struct Enveloped<'a, T> {
        #[serde(rename = "$schema")]
        schema: &'a str,
        result: &'a T,
    }
    let value = match dialect {
        Dialect::Bare => return json_response(status, body),
        Dialect::Envelope(schema) if status == StatusCode::OK && !compat => {
            return json_response(
                status,
                &Enveloped {
                    schema,
                    result: body,
                },
            );
        }
        _ => serde_json::to_value(body).expect("wire types serialize"),
    };
    let value = match dialect {
        Dialect::Bare => value,
        Dialect::Envelope(schema) if status == StatusCode::OK => {
            let mut envelope = serde_json::Map::new();
            envelope.insert("$schema".into(), Value::String(schema.to_string()));
            if compat {
                // LangChain's clients read `success`/`value` at the top (oxp-notes §3.2); the
                // envelope is open, so the copies keep it schema-valid.
                if let Value::Object(result) = &value {
                    for (k, v) in result {
                        envelope.insert(k.clone(), v.clone());
                    }
                }
            }
            envelope.insert("result".into(), value);
            Value::Object(envelope)
        }
        Dialect::Envelope(schema) => dialect::with_schema(value, Some(schema)),
    };
    json_response(status, &value)
}

/// Where `check_url`s point: the configured public URL, or this request's own origin and the
/// prefix the router is nested under.
fn check_url_base(state: &AppState, headers: &HeaderMap, original: &Uri, uri: &Uri) -> String {
    if let Some(base) = &state.public_check_url {
        return base.clone();
    }
    let prefix = original.path().strip_suffix(uri.path()).unwrap_or_default();
    let host = headers
        .get(HOST)
        .and_then(|h| h.to_str().ok())
        .unwrap_or("localhost");
    let scheme = headers
        .get("x-forwarded-proto")
        .and_then(|h| h.to_str().ok())
        .unwrap_or("http");
    format!("{scheme}://{host}{prefix}/authorization/")
}

/// §1 R.56: `GET check_url` → `{"status": "pending"|"completed"|"failed"}`; unknown → 404.
async fn check_authorization(
    State(state): State<Arc<AppState>>,
    check_id: Result<Path<String>, PathRejection>,
) -> Response {
    // An id that does not even decode (`%FF`) is no challenge this server minted.
    let status = match (state.pipeline.authorization_provider(), check_id) {
        (Some(provider), Ok(Path(check_id))) => provider.status(&check_id).await,
        _ => None,
    };
    match status {
        Some(status) => json_response(StatusCode::OK, &json!({ "status": status })),
        None => json_response(
            StatusCode::NOT_FOUND,
            &json!({ "message": "No such authorization challenge." }),
        ),
    }
}

async fn not_found(method: Method, uri: Uri) -> Response {
    json_response(
        StatusCode::NOT_FOUND,
        &json!({ "message": format!("No route for {method} {}", uri.path()) }),
    )
}

async fn method_not_allowed(method: Method, uri: Uri) -> Response {
    json_response(
        StatusCode::METHOD_NOT_ALLOWED,
        &json!({ "message": format!("{method} is not allowed on {}", uri.path()) }),
    )
}
