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
mod body;
mod browsers;
mod dialect;
mod discovery;
mod guard;
mod handlers;
mod listen;
mod playground;
mod respond;

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::middleware;
use axum::routing::get;

pub use auth::{
    AuthError, Caller, ForeignUser, Grant, Principal, ResourceMetadata, ServerAuth, TokenVerifier,
};
pub use listen::ConnectionLimits;

use crate::call::Pipeline;
use crate::registry::Registry;
use browsers::{Browsers, LOOPBACK_HOSTS};
use handlers::{
    authenticate, call_tool, check_authorization, health, list_tools, method_not_allowed, not_found,
};

#[doc(inline)]
pub use crate::fronts::DEFAULT_MAX_BODY_BYTES;

/// How long a request's body may take to arrive, by default, once its reader first waits on it.
///
/// ```
/// use oxp_runtime::server::{Server, DEFAULT_BODY_TIMEOUT};
/// # let registry = oxp_runtime::Registry::builder().build().unwrap();
/// // Clients on slow links: twice the default.
/// let server = Server::new(registry).body_timeout(DEFAULT_BODY_TIMEOUT * 2);
/// let app = axum::Router::new().nest("/oxp", server.router());
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
/// use oxp_runtime::{server::Server, tool, Registry};
/// use tower::ServiceExt;
///
/// /// Add two numbers.
/// #[tool(toolkit = "Calculator", version = "1.0.0")]
/// async fn add(a: f64, b: f64) -> f64 { a + b }
///
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let server = Server::new(Registry::builder().tool(add::TOOL).build().unwrap());
/// let router: axum::Router = server.router();
/// let call = axum::http::Request::post("/tools/call")
///     .header("OXP-Version", "1.0")
///     .header("Content-Type", "application/json")
///     .body(axum::body::Body::from(r#"{"tool_id": "Calculator.Add", "input": {"a": 1, "b": 2}}"#))
///     .unwrap();
/// let response = router.oneshot(call).await.unwrap();
/// assert_eq!(response.status(), 200);
/// # });
/// ```
#[derive(Debug, Clone)]
pub struct Server {
    pipeline: Pipeline,
    auth: ServerAuth,
    max_body_bytes: usize,
    langchain_compat: bool,
    trust_user_id: bool,
    public_url: Option<String>,
    playground: bool,
    browsers: Browsers,
    body_timeout: Duration,
    connections: ConnectionLimits,
    /// The open connections of every listener this server (and its clones) serves.
    budget: listen::ConnectionBudget,
    /// Routers nested under paths, behind the same guard and authentication.
    nested: Vec<(String, Router)>,
    /// Services answering at one path each, behind the same guard and authentication (MCP at
    /// `/mcp`), each routed already: a router holds a service of any type.
    mounted: Vec<(String, Router<Arc<AppState>>)>,
    /// Whether the router answers `GET /metrics` (when the pipeline keeps metrics).
    metrics_route: bool,
    /// The MCP Server Card, checked, served with the AI Catalog when set.
    card: Option<crate::card::ServerCard>,
}

/// The playground: one self-contained page (no CDN, no build step).
const PLAYGROUND: &str = include_str!("playground.html");

impl Server {
    /// A server for every tool of `registry`, with authentication off and the default limits.
    ///
    /// ```no_run
    /// use oxp_runtime::{server::Server, Registry};
    ///
    /// # async fn run() -> std::io::Result<()> {
    /// let server = Server::new(Registry::from_inventory().expect("the tools register"));
    /// let listener = tokio::net::TcpListener::bind("127.0.0.1:8000").await?;
    /// let ctrl_c = async { tokio::signal::ctrl_c().await.unwrap() };
    /// server.serve(listener, ctrl_c, std::time::Duration::from_secs(30)).await?;
    /// # Ok(()) }
    /// ```
    pub fn new(registry: Registry) -> Self {
        Server::from_pipeline(Pipeline::new(registry))
    }

    /// A server over an already configured pipeline: its time limits, concurrency limits,
    /// idempotency store and authorization provider are the pipeline's (see [`Pipeline`]), and
    /// another front nested with [`nest`](Self::nest) shares them by sharing the pipeline.
    ///
    /// ```
    /// # use oxp_runtime::{server::*, Registry};
    /// # let registry = Registry::builder().build().unwrap();
    /// let pipeline = oxp_runtime::call::Pipeline::new(registry).default_timeout(std::time::Duration::from_secs(5));
    /// # #[cfg(feature = "mcp")] {
    /// // MCP beside OXP, both through the one pipeline (its limits and idempotency shared;
    /// // the `mcp` feature).
    /// let mcp = oxp_runtime::mcp::McpServer::new(pipeline.clone()).into_router();
    /// let app: axum::Router = Server::from_pipeline(pipeline).nest("/mcp", mcp).router();
    /// # }
    /// ```
    pub fn from_pipeline(pipeline: Pipeline) -> Self {
        Server {
            pipeline,
            auth: ServerAuth::default(),
            max_body_bytes: DEFAULT_MAX_BODY_BYTES,
            langchain_compat: false,
            trust_user_id: false,
            public_url: None,
            playground: false,
            browsers: Browsers::default(),
            body_timeout: DEFAULT_BODY_TIMEOUT,
            connections: ConnectionLimits::default(),
            budget: listen::ConnectionBudget::default(),
            nested: Vec::new(),
            mounted: Vec::new(),
            metrics_route: true,
            card: None,
        }
    }

    /// Publishes `card` (see [`crate::card`]) at `/mcp/server-card` and
    /// `/.well-known/mcp/server-card.json`, with `/.well-known/ai-catalog.json` pointing at it:
    /// public, answered to pages of any origin (CORS), before authentication, with a strong
    /// `ETag`. The card's endpoint is the [`public_url`](Self::public_url) + `/mcp` unless the
    /// card names one. A card that cannot be served is refused here, naming the field.
    ///
    /// ```
    /// use oxp_runtime::{server::Server, Registry};
    ///
    /// let card = oxp_runtime::server_card!().name("com.example/calc").description("Adds.");
    /// let server = Server::new(Registry::builder().build().unwrap())
    ///     .public_url("https://tools.example.com")
    ///     .server_card(card)
    ///     .unwrap();
    /// # let _ = server;
    /// // No description: refused, saying where to write one.
    /// let bare = oxp_runtime::card::ServerCard::new("calc", "1.0.0").name("com.example/calc");
    /// let error = Server::new(Registry::builder().build().unwrap()).server_card(bare).unwrap_err();
    /// assert_eq!(error.field, "description");
    /// ```
    pub fn server_card(
        mut self,
        card: crate::card::ServerCard,
    ) -> Result<Self, crate::card::CardError> {
        card.clone()
            .with_public_url(self.public_url.as_deref())
            .to_json()?;
        self.card = Some(card);
        Ok(self)
    }

    /// Whether the router answers `GET /metrics` (behind its authentication, like `/tools`);
    /// on by default when the pipeline keeps metrics. Turn it off to serve them elsewhere, on a
    /// port of their own with [`metrics_router`](Self::metrics_router) (`OXP_METRICS_ADDR`).
    ///
    /// ```
    /// use tower::ServiceExt;
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// # let registry = oxp_runtime::Registry::builder().build().unwrap();
    /// let server = oxp_runtime::server::Server::new(registry).metrics_route(false);
    /// let metrics = server.metrics_router().expect("the pipeline keeps metrics");
    /// let scrape = || axum::http::Request::get("/metrics").body(axum::body::Body::empty()).unwrap();
    /// assert_eq!(metrics.oneshot(scrape()).await.unwrap().status(), 200);
    /// assert_eq!(server.router().oneshot(scrape()).await.unwrap().status(), 404);
    /// # });
    /// ```
    pub fn metrics_route(mut self, on: bool) -> Self {
        self.metrics_route = on;
        self
    }

    /// A router with nothing but `GET /metrics`, unauthenticated but behind the main port's
    /// guard (foreign browser origins refused, bodies capped), for a listener of its own (the
    /// usual way to keep metrics off the public port; [`serve_metrics`](Self::serve_metrics)
    /// serves it with the connection limits too); `None` when the pipeline keeps no metrics.
    ///
    /// ```
    /// use oxp_runtime::{call::Pipeline, server::Server, Registry};
    /// let registry = || Registry::builder().build().unwrap();
    /// assert!(Server::new(registry()).metrics_router().is_some());
    /// assert!(Server::from_pipeline(Pipeline::new(registry()).metrics(false)).metrics_router().is_none());
    /// ```
    pub fn metrics_router(&self) -> Option<Router> {
        let pipeline = self.pipeline.clone();
        pipeline.metrics_handle()?;
        let route = Router::new().route(
            "/metrics",
            get(move || std::future::ready(handlers::scrape(&pipeline))),
        );
        // The guard of the main port: browsers kept out, bodies capped and timed.
        let state = self.clone().state();
        Some(
            route
                .fallback(not_found)
                .method_not_allowed_fallback(method_not_allowed)
                .layer(guard::GuardLayer(state.clone()))
                .with_state(state),
        )
    }

    /// Serves [`metrics_router`](Self::metrics_router) on a listener of its own, with the
    /// timeouts and guard of the main port, until `stop` completes; its connections come from
    /// the same budget as those of [`serve`](Self::serve) (at most an eighth of it). Does
    /// nothing when the pipeline keeps no metrics.
    ///
    /// ```no_run
    /// # async fn run() -> std::io::Result<()> {
    /// # let registry = oxp_runtime::Registry::builder().build().unwrap();
    /// let server = oxp_runtime::server::Server::new(registry).metrics_route(false);
    /// let metrics = tokio::net::TcpListener::bind("127.0.0.1:9090").await?;
    /// tokio::spawn(server.clone().serve_metrics(metrics, std::future::pending()));
    /// let listener = tokio::net::TcpListener::bind("127.0.0.1:8000").await?;
    /// server.serve(listener, std::future::pending(), std::time::Duration::from_secs(30)).await?;
    /// # Ok(()) }
    /// ```
    pub async fn serve_metrics(
        self,
        listener: tokio::net::TcpListener,
        stop: impl std::future::Future<Output = ()> + Send + 'static,
    ) -> std::io::Result<()> {
        let server = self.for_listener(listener.local_addr()?);
        let Some(router) = server.metrics_router() else {
            return Ok(());
        };
        let places = server.budget.places(&server.connections, true);
        listen::serve(
            listener,
            router,
            &server.connections,
            places,
            stop,
            Duration::from_millis(500),
        )
        .await;
        Ok(())
    }

    /// The server as a listener on `addr` serves it: pages of the listener's own origins may
    /// call it, and it answers only to its own names — the listener's addresses, the loopback
    /// names where it listens on loopback, its public URL's host and the hosts allowed — so a
    /// page on another name that resolves to one of its addresses (DNS rebinding) can neither
    /// call it nor read it.
    fn for_listener(mut self, addr: std::net::SocketAddr) -> Self {
        let names = Browsers::listener_hosts(addr);
        self.browsers
            .origins
            .extend(Browsers::listener_origins(addr));
        let hosts = self.browsers.hosts.get_or_insert_with(Vec::new);
        hosts.extend(names);
        hosts.extend(self.public_url.as_deref().map(Browsers::host_of));
        self
    }

    /// Serves `router` under `path`, behind the server's guard and authentication: how another
    /// front shares the port (one with a single endpoint can be [`mount`](Self::mount)ed). With
    /// a [`TokenVerifier`] that publishes RFC 9728 metadata (OAuth's), `path` is a protected
    /// resource of its own: its metadata is served at `/.well-known/oauth-protected-resource{path}`
    /// and refusals under `path` point to it.
    ///
    /// ```
    /// use oxp_runtime::{call::Pipeline, server::{Server, ServerAuth}, Registry};
    /// use tower::ServiceExt;
    ///
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// let pipeline = Pipeline::new(Registry::builder().build().unwrap());
    /// let status = axum::Router::new().route("/", axum::routing::get(|| async { "up" }));
    /// let app = Server::from_pipeline(pipeline)
    ///     .auth(ServerAuth::default().api_key("k_0123456789abcdef0123456789abcdef"))
    ///     .nest("/status", status)
    ///     .router();
    /// // The nested router is behind the server's authentication.
    /// let request = axum::http::Request::get("/status").body(axum::body::Body::empty()).unwrap();
    /// assert_eq!(app.oneshot(request).await.unwrap().status(), 401);
    /// # });
    /// ```
    #[must_use]
    pub fn nest(mut self, path: &str, router: Router) -> Self {
        self.nested.push((path.to_owned(), router));
        self
    }

    /// Serves `service` at exactly `path`, behind the server's guard and authentication: a
    /// front with one endpoint shares the port this way, without the nesting a router needs
    /// (`serve()` mounts MCP's streamable HTTP at `/mcp` so). Its RFC 9728 metadata, if any, is
    /// its own, as [`nest`](Self::nest) says.
    ///
    /// ```
    /// use oxp_runtime::{call::Pipeline, server::{Server, ServerAuth}, Registry};
    /// use tower::ServiceExt;
    ///
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// let pipeline = Pipeline::new(Registry::builder().build().unwrap());
    /// let status = axum::routing::get(|| async { "up" });
    /// let app = Server::from_pipeline(pipeline)
    ///     .auth(ServerAuth::default().api_key("k_0123456789abcdef0123456789abcdef"))
    ///     .mount("/status", status)
    ///     .router();
    /// // The service is behind the server's authentication.
    /// let request = axum::http::Request::get("/status").body(axum::body::Body::empty()).unwrap();
    /// assert_eq!(app.oneshot(request).await.unwrap().status(), 401);
    /// # });
    /// ```
    #[must_use]
    pub fn mount<S>(mut self, path: &str, service: S) -> Self
    where
        S: tower_service::Service<axum::extract::Request, Error = std::convert::Infallible>
            + Clone
            + Send
            + Sync
            + 'static,
        S::Response: axum::response::IntoResponse,
        S::Future: Send + 'static,
    {
        // A method router, as every route of the server's own is: a request then goes
        // through one box fewer than to a service routed as such.
        let route = Router::new().route(path, axum::routing::any_service(service));
        self.mounted.push((path.to_owned(), route));
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
    /// # async {
    /// let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    /// server.serve(listener, std::future::pending(), std::time::Duration::from_secs(30)).await?;
    /// # Ok::<(), std::io::Error>(()) };
    /// ```
    #[must_use]
    pub fn connection_limits(mut self, limits: ConnectionLimits) -> Self {
        self.connections = limits;
        self.budget = listen::ConnectionBudget::default();
        self
    }

    /// Origins whose pages may call this server from a browser, besides its own: the origin of
    /// [`public_url`](Self::public_url), and, when [`serve`](Self::serve) serves it, its
    /// listener's addresses (every interface's for `0.0.0.0`). Never the origin a request's
    /// own `Host` names: a DNS-rebound page names its own. A request with any other `Origin` is
    /// answered `403` on every route, `/mcp` included: a web page the user happens to visit
    /// must not drive tools (CSRF). Written `scheme://host[:port]`.
    ///
    /// ```
    /// use oxp_runtime::{server::Server, Registry};
    /// use tower::ServiceExt;
    ///
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// let app = Server::new(Registry::builder().build().unwrap())
    ///     .allowed_origins(["https://agent.example.com"])
    ///     .router();
    /// let from = |origin: &str| {
    ///     axum::http::Request::get("/health").header("origin", origin).body(axum::body::Body::empty()).unwrap()
    /// };
    /// assert_eq!(app.clone().oneshot(from("https://agent.example.com")).await.unwrap().status(), 200);
    /// assert_eq!(app.oneshot(from("https://evil.example")).await.unwrap().status(), 403);
    /// # });
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
    /// resolves to the server's address (DNS rebinding) from calling or reading it.
    /// [`serve`](Self::serve) turns it on by itself, adding its listener's addresses (every
    /// interface's for `0.0.0.0`) and the host of [`public_url`](Self::public_url): a server
    /// reached by another name (behind a proxy that keeps the client's `Host`) lists it here.
    ///
    /// ```
    /// use oxp_runtime::{server::Server, Registry};
    /// use tower::ServiceExt;
    ///
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// let app = Server::new(Registry::builder().build().unwrap())
    ///     .allowed_hosts(["my-laptop.local"])
    ///     .router();
    /// let to = |host: &str| {
    ///     axum::http::Request::get("/health").header("host", host).body(axum::body::Body::empty()).unwrap()
    /// };
    /// assert_eq!(app.clone().oneshot(to("localhost:8000")).await.unwrap().status(), 200);
    /// assert_eq!(app.clone().oneshot(to("my-laptop.local:8000")).await.unwrap().status(), 200);
    /// assert_eq!(app.oneshot(to("rebound.evil.example")).await.unwrap().status(), 403);
    /// # });
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

    /// How long a request's body may take to arrive, from the first time its reader waits on
    /// it; a slower one is answered `400`. Default [`DEFAULT_BODY_TIMEOUT`].
    ///
    /// ```
    /// # use oxp_runtime::{server::*, Registry};
    /// # let registry = Registry::builder().build().unwrap();
    /// let server = Server::new(registry).body_timeout(std::time::Duration::from_secs(5));
    /// let app = axum::Router::new().nest("/oxp", server.router());
    /// ```
    #[must_use]
    pub fn body_timeout(mut self, timeout: Duration) -> Self {
        self.body_timeout = timeout;
        self
    }

    /// Serves the playground page at `GET /`: pick a tool, fill a form built from its input
    /// schema, call it, see the value, the tool error or the 400/422 with the offending fields,
    /// and the exact request, response and a curl command; read a resource, fill a prompt's
    /// arguments and see its messages, or read a skill (through the playground's own routes
    /// under `/playground/`, since OXP 1.0 has no resources, prompts or skills). Task tools,
    /// and any tool or prompt on the user's "over MCP", go to the `/mcp` nested beside it, where
    /// the page answers the questions they ask. The page itself holds no data; its requests go
    /// through the server's authentication like any other, and show a caller only what its
    /// scopes reach. Off by default; `serve()` turns it on for loopback addresses
    /// (`OXP_PLAYGROUND` decides otherwise).
    ///
    /// ```
    /// use oxp_runtime::{server::Server, Registry};
    /// use tower::ServiceExt;
    ///
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// let app = Server::new(Registry::builder().build().unwrap()).playground(true).router();
    /// let page = axum::http::Request::get("/").body(axum::body::Body::empty()).unwrap();
    /// let page = app.oneshot(page).await.unwrap();
    /// assert_eq!(page.status(), 200);
    /// assert_eq!(page.headers()["content-type"], "text/html; charset=utf-8");
    /// # });
    /// ```
    #[must_use]
    pub fn playground(mut self, on: bool) -> Self {
        self.playground = on;
        self
    }

    /// How callers authenticate (off by default).
    ///
    /// ```
    /// use oxp_runtime::{server::{Server, ServerAuth}, Registry};
    /// use tower::ServiceExt;
    ///
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// let key = "k_0123456789abcdef0123456789abcdef";
    /// let app = Server::new(Registry::builder().build().unwrap())
    ///     .auth(ServerAuth::default().api_key(key))
    ///     .router();
    /// let list = |key: Option<&str>| {
    ///     let request = axum::http::Request::get("/tools");
    ///     let request = match key { Some(key) => request.header("oxp-api-key", key), None => request };
    ///     request.body(axum::body::Body::empty()).unwrap()
    /// };
    /// assert_eq!(app.clone().oneshot(list(None)).await.unwrap().status(), 401);
    /// assert_eq!(app.oneshot(list(Some(key))).await.unwrap().status(), 200);
    /// # });
    /// ```
    #[must_use]
    pub fn auth(mut self, auth: ServerAuth) -> Self {
        self.auth = auth;
        self
    }

    /// Checks bearer tokens with `verifier`, beside the API keys and HS256 secret of
    /// [`auth`](Self::auth) (call it after `auth`, which replaces them all): see
    /// [`TokenVerifier`] for an app's own, and `ServerAuth::oauth` for an identity provider's.
    ///
    /// ```
    /// use oxp_runtime::__private::BoxFuture;
    /// use oxp_runtime::server::{AuthError, Caller, Server, TokenVerifier};
    ///
    /// #[derive(Debug)]
    /// struct NoOne;
    /// impl TokenVerifier for NoOne {
    ///     fn verify<'a>(&'a self, _: &'a str, _: Option<std::net::IpAddr>) -> BoxFuture<'a, Result<Caller, AuthError>> {
    ///         Box::pin(async { Err(AuthError::invalid("No token is good here.")) })
    ///     }
    /// }
    /// # let registry = oxp_runtime::Registry::builder().build().unwrap();
    /// let app: axum::Router = Server::new(registry).token_verifier(NoOne).router();
    /// ```
    #[must_use]
    pub fn token_verifier(mut self, verifier: impl TokenVerifier) -> Self {
        self.auth = self.auth.token_verifier(verifier);
        self
    }

    /// The largest request body accepted, on every route; larger ones get a `413` with a JSON
    /// body (at once, when the declared `Content-Length` says so).
    ///
    /// ```
    /// use oxp_runtime::{server::Server, Registry};
    /// use tower::ServiceExt;
    ///
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// let app = Server::new(Registry::builder().build().unwrap()).max_body_bytes(1024).router();
    /// let call = axum::http::Request::post("/tools/call")
    ///     .header("content-type", "application/json")
    ///     .body(axum::body::Body::from(vec![b' '; 4096]))
    ///     .unwrap();
    /// assert_eq!(app.oneshot(call).await.unwrap().status(), 413);
    /// # });
    /// ```
    #[must_use]
    pub fn max_body_bytes(mut self, bytes: usize) -> Self {
        self.max_body_bytes = bytes;
        self
    }

    /// The URL clients reach this server at, for `check_url`s (behind a proxy); by default it
    /// is read from each request's `Host` and `X-Forwarded-Proto`.
    ///
    /// ```
    /// # use oxp_runtime::{server::*, Registry};
    /// # let registry = Registry::builder().build().unwrap();
    /// // Behind a proxy that serves this router at https://tools.example.com/oxp.
    /// let server = Server::new(registry).public_url("https://tools.example.com/oxp");
    /// let app = axum::Router::new().nest("/oxp", server.router());
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
    /// use oxp_runtime::{server::Server, Registry};
    /// use tower::ServiceExt;
    ///
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// let app = Server::new(Registry::builder().build().unwrap()).langchain_compat(true).router();
    /// // LangChain's clients get the bare list they expect.
    /// let list = axum::http::Request::get("/tools")
    ///     .header("user-agent", "universal-tool-sdk-py/0.1")
    ///     .body(axum::body::Body::empty())
    ///     .unwrap();
    /// let body = app.oneshot(list).await.unwrap().into_body();
    /// let body = axum::body::to_bytes(body, 1 << 20).await.unwrap();
    /// assert_eq!(&body[..], b"[]");
    /// # });
    /// ```
    #[must_use]
    pub fn langchain_compat(mut self, on: bool) -> Self {
        self.langchain_compat = on;
        self
    }

    /// Trusts callers with a token to name the user a call is made for (`OXP_TRUST_USER_ID`):
    /// for a gateway that signs in its own users and calls as itself. Off by default: under a
    /// token with a subject (OAuth, HS256), a tool is told the token's subject on every front,
    /// and an OXP call whose `context.user_id` names someone else is a `403` (see
    /// [`Principal::call_user`]). Callers with an API key name the user either way.
    ///
    /// ```
    /// use oxp_runtime::{server::Server, Registry};
    /// let server = Server::new(Registry::builder().build().unwrap()).trust_user_id(true);
    /// ```
    #[must_use]
    pub fn trust_user_id(mut self, on: bool) -> Self {
        self.trust_user_id = on;
        self
    }

    /// Reconfigures the pipeline calls run through (crate-internal: `ServerConfig::apply` sets
    /// the pipeline's parts from the environment on a server it is handed).
    pub(crate) fn map_pipeline(mut self, configure: impl FnOnce(Pipeline) -> Pipeline) -> Self {
        self.pipeline = configure(self.pipeline);
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
        let server = self.for_listener(listener.local_addr()?);
        let pipeline = server.pipeline.clone();
        let limits = server.connections.clone();
        let places = server.budget.places(&limits, false);
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
        listen::serve(
            listener,
            router,
            &limits,
            places,
            stop,
            Duration::from_millis(500),
        )
        .await;
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
    pub fn router(mut self) -> Router {
        let playground = self.playground;
        let fronts = self.front_paths();
        let nested = std::mem::take(&mut self.nested);
        let mounted = std::mem::take(&mut self.mounted);
        let metrics_route = self.metrics_route;
        let card = self.card.clone();
        let public_url = self.public_url.clone();
        let state = self.state_for(&fronts);
        let with_metrics = metrics_route && state.pipeline.metrics_handle().is_some();
        let protected = Router::new()
            .route("/tools", get(list_tools))
            .route("/tools/call", axum::routing::post(call_tool))
            .route("/authorization/{check_id}", get(check_authorization));
        // What the playground shows beside each tool (OXP's definitions have no room for it),
        // and the resources and prompts OXP has no place for, behind the same authentication
        // as the list.
        let protected = if playground {
            protected
                .route("/playground/hints", get(playground::hints))
                .route("/playground/resources", get(playground::resources))
                .route(
                    "/playground/resources/read",
                    axum::routing::post(playground::read_resource),
                )
                .route("/playground/prompts", get(playground::prompts))
                .route(
                    "/playground/prompts/get",
                    axum::routing::post(playground::get_prompt),
                )
                .route("/playground/skills", get(playground::skills))
                .route(
                    "/playground/skills/read",
                    axum::routing::post(playground::read_skill),
                )
        } else {
            protected
        };
        let protected = if with_metrics {
            protected.route("/metrics", get(handlers::metrics))
        } else {
            protected
        };
        // Other fronts on the same port (MCP), behind the same authentication.
        let protected = nested
            .into_iter()
            .fold(protected, |routes, (path, router)| {
                routes.nest_service(&path, router)
            });
        let protected =
            (mounted.into_iter()).fold(protected, |routes, (_, route)| routes.merge(route));
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
        // RFC 9728: public, so a client that was refused can learn where to get a token.
        let open = (state.metadata.routes.iter()).fold(open, |open, (path, document)| {
            let document = document.clone();
            open.route(
                path,
                get(move || std::future::ready(handlers::resource_metadata(document))),
            )
        });
        let open = if playground {
            open.route("/", get(playground::page))
        } else {
            open
        };
        // Checked by `server_card`; only a public URL set after it can still break the card.
        let open =
            match card.map(|card| discovery::routes(open.clone(), &card, public_url.as_deref())) {
                Some(Ok(with_card)) => with_card,
                Some(Err(error)) => {
                    tracing::error!("serving no MCP Server Card: {error}");
                    open
                }
                None => open,
            };
        open.method_not_allowed_fallback(method_not_allowed)
            .merge(protected)
            .layer(guard::GuardLayer(state.clone()))
            .with_state(state)
    }
}

impl Server {
    /// The paths other fronts are [`nest`](Self::nest)ed and [`mount`](Self::mount)ed at: each
    /// a protected resource of its own (RFC 9728).
    fn front_paths(&self) -> Vec<String> {
        let nested = self.nested.iter().map(|(path, _)| path);
        let mounted = self.mounted.iter().map(|(path, _)| path);
        nested.chain(mounted).cloned().collect()
    }

    /// What every request's handling shares.
    fn state(self) -> Arc<AppState> {
        let fronts = self.front_paths();
        self.state_for(&fronts)
    }

    /// [`state`](Self::state), with the fronts at `fronts` (taken out of the server already).
    fn state_for(self, fronts: &[String]) -> Arc<AppState> {
        let mut browsers = self.browsers;
        if let Some(url) = &self.public_url {
            browsers.origins.push(Browsers::origin_of(url));
        }
        let metadata = match self.auth.verifier() {
            Some(verifier) => {
                let mut resources = vec![""];
                for front in fronts.iter().map(|f| f.trim_end_matches('/')) {
                    if !resources.contains(&front) {
                        resources.push(front);
                    }
                }
                verifier.attach(&self.pipeline, &resources);
                resource_metadata(&**verifier, &self.pipeline, &resources)
            }
            None => Metadata::default(),
        };
        Arc::new(AppState {
            discovery: self.card.is_some(),
            metadata,
            pipeline: self.pipeline,
            auth: self.auth,
            max_body_bytes: self.max_body_bytes,
            body_timeout: self.body_timeout,
            langchain_compat: self.langchain_compat,
            trust_user_id: self.trust_user_id,
            public_check_url: self.public_url.map(|url| format!("{url}/authorization/")),
            browsers,
        })
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
    /// Whether a caller with a token may name another user ([`Server::trust_user_id`]).
    trust_user_id: bool,
    /// `{public_url}/authorization/`, made once: where `check_url`s point when configured.
    public_check_url: Option<String>,
    /// The RFC 9728 metadata of the server and its fronts, made once.
    metadata: Metadata,
    /// Whether the discovery documents are served, and so open to pages of any origin.
    discovery: bool,
}

impl AppState {
    /// Where 401 and 403 answers for `path` send clients to learn how to get a token: the
    /// RFC 9728 metadata of the front `path` is under (the longest such front's), else of the
    /// server; `None` when the verifier publishes none.
    fn metadata_url(&self, path: &str) -> Option<Arc<str>> {
        let under = |front: &str| {
            path.strip_prefix(front)
                .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
        };
        (self.metadata.urls.iter())
            .filter(|(front, _)| front.is_empty() || under(front))
            .max_by_key(|(front, _)| front.len())
            .map(|(_, url)| url.clone())
    }
}

/// The RFC 9728 metadata a server publishes (none without a verifier that has any).
#[derive(Default)]
struct Metadata {
    /// Where each protected resource's is, by the path the resource is at (`""` for the
    /// server, then each front's): what challenges point to.
    urls: Vec<(String, Arc<str>)>,
    /// Each path a document is served at, with the document.
    routes: Vec<(String, axum::body::Bytes)>,
}

/// The RFC 9728 metadata `verifier` publishes for each of `resources` (the server's `""`, then
/// each front's path): where each is (for challenges), and the paths to serve each document at —
/// where its URL points on this server (so a challenge never points at a 404, whatever path the
/// public URL has) and the host-level `/.well-known/oauth-protected-resource{path}`.
fn resource_metadata(
    verifier: &dyn TokenVerifier,
    pipeline: &Pipeline,
    resources: &[&str],
) -> Metadata {
    // What a caller is told it may ask for: the scopes every call needs, and each tool's,
    // resource's and prompt's.
    let mut scopes: Vec<String> = verifier.required_scopes().to_vec();
    let registry = pipeline.registry();
    let each = (registry.tools().iter().map(|t| t.descriptor().scopes))
        .chain(registry.resources().iter().map(|r| r.descriptor().scopes))
        .chain(registry.prompts().iter().map(|p| p.descriptor().scopes));
    for scope in each.flatten() {
        if !scopes.iter().any(|s| s == scope) {
            scopes.push((*scope).to_owned());
        }
    }
    let mut urls: Vec<(String, Arc<str>)> = Vec::new();
    let mut routes: Vec<(String, axum::body::Bytes)> = Vec::new();
    for &resource in resources {
        let Some(metadata) = verifier.resource_metadata(resource, &scopes) else {
            continue;
        };
        let document = axum::body::Bytes::from(
            serde_json::to_vec(&metadata.document).expect("JSON serializes"),
        );
        let host_level = format!("/.well-known/oauth-protected-resource{resource}");
        for path in [url_path(&metadata.url), Some(host_level.as_str())] {
            // A path no route can name is never a route (OAuth refuses it at start-up).
            let Some(path) = path.filter(|p| routable(p)) else {
                continue;
            };
            if !routes.iter().any(|(p, _)| p == path) {
                routes.push((path.to_owned(), document.clone()));
            }
        }
        urls.push((resource.to_owned(), metadata.url.into()));
    }
    Metadata { urls, routes }
}

/// The path of an absolute URL (`None` for a host-only one).
fn url_path(url: &str) -> Option<&str> {
    let (_, rest) = url.split_once("://")?;
    rest.find('/').map(|i| &rest[i..])
}

/// Whether a route can name `path` as it is: plain URL characters (none of a route's `{}` or
/// `*`), no empty segment.
fn routable(path: &str) -> bool {
    path.starts_with('/')
        && path
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-._~/%!$&'()+,;=".contains(&b))
        && !path.contains("//")
}
