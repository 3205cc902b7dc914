//! The MCP front (cargo feature `mcp`, on by default): the same registry over the Model Context
//! Protocol — streamable HTTP at `/mcp` on the OXP server (oxp's own transport, `http/`), and
//! stdio through `<bin> mcp` (rmcp's connection, `connection.rs`). Both hand each request to one
//! dispatch (`McpServer::handle`, `methods.rs`) through an `Exchange`, what a request carries
//! whichever transport brought it; rmcp provides the model types. Like every front it only
//! translates: calls run through the one [`Pipeline`], so requirements, validation, timeouts,
//! idempotency and redaction behave exactly as over OXP.
//!
//! **Stateless, on any replica.** Over HTTP no server keeps anything between requests, so a
//! load balancer may send each request to any replica. An earlier revision's client that
//! declared what it can answer at `initialize` is given an `Mcp-Session-Id` that seals what it
//! declared (see `http/session.rs`), and nothing else. A call that sends nothing before its
//! result is answered `application/json`; one that reports progress, logs, or asks its client
//! is answered as an SSE stream carrying them, then its result.
//!
//! **Names and versions.** `tools/list` shows each tool's latest version under its wire name
//! (`Calculator_Add`), and every older version under `<wire name>__v<x>_<y>_<z>`
//! (`Calculator_Add__v1_0_0`), since MCP tool names carry no version. A call resolves those
//! names and no others.
//!
//! **Requirements MCP cannot carry.** MCP has no place for secrets, authorization tokens or a
//! user id, so they come from the server side: [`McpServer::with_context`] (`serve()` fills it
//! from the environment: each secret from the variable of its own name, the user from
//! `OXP_USER_ID`, a token for provider `p` from `OXP_TOKEN_<P>`). A call whose tool still lacks
//! one is refused with an error that names it — never run without it.
//!
//! **Over HTTP, callers are themselves.** Secrets are the server's own configuration and are
//! used for every caller. The user and the authorization tokens are someone's: over stdio (one
//! local user) they come from the context, but over HTTP the user is the authenticated caller
//! (a JWT's `sub`) and the context's user and tokens are not used — else anyone holding an API
//! key would act as the operator, with the operator's tokens. A server with one user opts back
//! in with [`McpServer::single_tenant`] (`OXP_MCP_SINGLE_TENANT`).
//!
//! ```
//! use oxp_runtime::{call::Pipeline, mcp::McpServer, server::Server, Registry};
//!
//! // One pipeline for both fronts: they share its limits and idempotency.
//! let pipeline = Pipeline::new(Registry::builder().build().unwrap());
//! let mcp = McpServer::new(pipeline.clone()).into_router();
//! let app = Server::from_pipeline(pipeline).nest("/mcp", mcp).router();
//! # let _: axum::Router = app;
//! ```

mod asking;
mod call;
mod connection;
mod exchange;
mod fallback;
mod headers;
mod http;
mod logging;
mod methods;
mod prompts;
mod resources;
mod scopes;
mod skills;
mod subscriptions;
mod tasks;

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use futures_util::future::Either;
use rmcp::model::{
    CallToolResult, ContentBlock as Content, JsonObject, ProgressNotificationParam, ProgressToken,
    Tool, ToolAnnotations,
};
use rmcp::{ErrorData as McpError, ServiceExt};
use serde_json::Value;

use crate::ask::{Capability, Round};
use crate::call::{CallMeta, CallOutcome, Pipeline};
use crate::principal::Principal;
use crate::protocol::{CallContext, CallResult, CallToolRequest};
use crate::registry::{RegisteredTool, Registry};
use crate::signals::{CallSignals, Cancellation};
use exchange::{Back, Exchange};

/// How long a client may keep a `tools/list` answer, by default.
///
/// ```
/// assert_eq!(oxp_runtime::mcp::DEFAULT_LIST_TTL.as_secs(), 300);
/// ```
pub const DEFAULT_LIST_TTL: Duration = Duration::from_secs(300);

/// The dialect of a schema MCP gets as written.
const JSON_SCHEMA_2020_12: &str = "https://json-schema.org/draft/2020-12/schema";

/// An MCP server over a pipeline.
///
/// ```
/// use oxp_runtime::{call::Pipeline, mcp::McpServer, tool, Registry};
///
/// /// Add two numbers.
/// #[tool(toolkit = "Calculator", version = "1.0.0")]
/// async fn add(a: f64, b: f64) -> f64 { a + b }
///
/// let pipeline = Pipeline::new(Registry::builder().tool(add::TOOL).build().unwrap());
/// let server = McpServer::new(pipeline);
/// assert_eq!(server.tools()[0].name, "Calculator_Add");
/// ```
#[derive(Clone)]
pub struct McpServer {
    pipeline: Pipeline,
    context: Arc<CallContext>,
    single_tenant: bool,
    /// The largest request body read, the OXP server's cap when nested in it.
    max_body_bytes: usize,
    /// How long a client may keep a `tools/list` answer (2026-07-28's `ttlMs`).
    list_ttl: Duration,
    /// Seals the request state of calls that ask (SEP-2322).
    sealer: crate::seal::Sealer,
    /// What a tool that asks does for a caller that cannot answer, unless it says.
    cannot_ask: crate::ask::CannotAsk,
    /// Made on the first `tools/list`: a full copy of every schema in MCP's types, which a
    /// server that never sees an MCP client should not hold (about 3 KB per tool).
    tools: Arc<OnceLock<Vec<Tool>>>,
    /// The same for clients on a revision that takes any output schema (2026-07-28 on).
    tools_any_output: Arc<OnceLock<Vec<Tool>>>,
    /// The level the client chose with `logging/setLevel`: over stdio, where one process
    /// serves one client; over HTTP a request names its own (2026-07-28) or gets the default.
    log_level: logging::SessionLevel,
    /// How this server keeps tasks and leases their runs.
    tasks: tasks::TaskConfig,
    /// The resources each connection (stdio) subscribed to; nothing over HTTP.
    subscriptions: subscriptions::Subscriptions,
    /// The tool parameters that travel in headers as well, read from the schemas once.
    param_headers: Arc<headers::ParamHeaders>,
}

impl std::fmt::Debug for McpServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpServer")
            .field("tools", &self.pipeline.registry().tools().len())
            .finish_non_exhaustive()
    }
}

impl McpServer {
    /// An MCP server for every tool of the pipeline's registry, with no secrets, tokens or user
    /// of its own until [`with_context`](Self::with_context) gives them (see the module docs).
    ///
    /// ```
    /// use oxp_runtime::{call::Pipeline, mcp::McpServer, tool, Registry};
    ///
    /// /// Add two numbers.
    /// #[tool(toolkit = "Calculator", version = "1.0.0")]
    /// async fn add(a: f64, b: f64) -> f64 { a + b }
    ///
    /// let pipeline = Pipeline::new(Registry::builder().tool(add::TOOL).build().unwrap());
    /// let server = McpServer::new(pipeline);
    /// assert_eq!(server.tools()[0].name, "Calculator_Add");
    /// ```
    pub fn new(pipeline: Pipeline) -> Self {
        McpServer {
            context: Arc::default(),
            single_tenant: false,
            max_body_bytes: crate::fronts::DEFAULT_MAX_BODY_BYTES,
            list_ttl: DEFAULT_LIST_TTL,
            sealer: crate::seal::Sealer::new(None, crate::seal::DEFAULT_TTL)
                .expect("the system's random source works"),
            cannot_ask: crate::ask::CannotAsk::default(),
            tools: Arc::default(),
            tools_any_output: Arc::default(),
            log_level: logging::SessionLevel::default(),
            tasks: tasks::TaskConfig::default(),
            subscriptions: subscriptions::Subscriptions::default(),
            param_headers: Arc::new(headers::param_headers(pipeline.registry())),
            pipeline,
        }
    }

    /// How long tasks are kept (from their creation) and how long a run's lease holds without renewal
    /// (`OXP_TASK_TTL_MS`, `OXP_LEASE_MS`); see [`tasks`](crate::tasks). Keep the same on every
    /// replica.
    ///
    /// ```
    /// # let pipeline = oxp_runtime::call::Pipeline::new(oxp_runtime::Registry::builder().build().unwrap());
    /// use std::time::Duration;
    /// // Reports that take hours, kept a day; a replica that dies is found out in ten seconds.
    /// let server = oxp_runtime::mcp::McpServer::new(pipeline)
    ///     .tasks(Duration::from_secs(24 * 3600), Duration::from_secs(10));
    /// ```
    #[must_use]
    pub fn tasks(mut self, ttl: Duration, lease: Duration) -> Self {
        self.tasks = tasks::TaskConfig { ttl, lease };
        self
    }

    /// Uses the context's user and authorization tokens for HTTP callers too: for a server that
    /// only its operator calls. Off by default (see the module docs).
    ///
    /// ```
    /// # let pipeline = oxp_runtime::call::Pipeline::new(oxp_runtime::Registry::builder().build().unwrap());
    /// // A desktop server its operator alone calls: the operator's GitHub token serves HTTP callers too.
    /// let context = serde_json::from_value(serde_json::json!({
    ///     "authorization": [{"id": "github", "token": std::env::var("GITHUB_TOKEN").unwrap_or_default()}]
    /// })).unwrap();
    /// let app: axum::Router = oxp_runtime::mcp::McpServer::new(pipeline)
    ///     .with_context(context)
    ///     .single_tenant(true)
    ///     .into_router();
    /// ```
    #[must_use]
    pub fn single_tenant(mut self, on: bool) -> Self {
        self.single_tenant = on;
        self
    }

    /// The largest request body read over HTTP; a larger one is answered `413`. Default
    /// [`DEFAULT_MAX_BODY_BYTES`](crate::server::DEFAULT_MAX_BODY_BYTES). Nested in the OXP
    /// server (as `serve()` nests it), the server's own cap applies first, with the answers it
    /// gives on every route.
    ///
    /// ```
    /// # let pipeline = oxp_runtime::call::Pipeline::new(oxp_runtime::Registry::builder().build().unwrap());
    /// let server = oxp_runtime::mcp::McpServer::new(pipeline).max_body_bytes(64 * 1024);
    /// let app: axum::Router = axum::Router::new().nest("/mcp", server.into_router());
    /// ```
    #[must_use]
    pub fn max_body_bytes(mut self, bytes: usize) -> Self {
        self.max_body_bytes = bytes;
        self
    }

    /// How long a client may keep a `tools/list` answer before asking again (its `ttlMs`, with
    /// `cacheScope: "private"`). Default [`DEFAULT_LIST_TTL`]: the list changes only when the
    /// server is deployed anew.
    ///
    /// ```
    /// # let pipeline = oxp_runtime::call::Pipeline::new(oxp_runtime::Registry::builder().build().unwrap());
    /// // Tools deployed often: clients ask again after a minute.
    /// let server = oxp_runtime::mcp::McpServer::new(pipeline)
    ///     .list_ttl(std::time::Duration::from_secs(60));
    /// ```
    #[must_use]
    pub fn list_ttl(mut self, ttl: Duration) -> Self {
        self.list_ttl = ttl;
        self
    }

    /// The key that seals the request state of calls that ask their user or client (see
    /// [`ask`](crate::ask)), at least 32 bytes, and how long a state is good for. Replicas
    /// behind one load balancer need the same key to continue each other's calls
    /// (`OXP_STATE_KEY`); without one, the server makes its own at start-up. Default lifetime: the
    /// idempotency store's default, 10 minutes.
    ///
    /// ```
    /// # let pipeline = oxp_runtime::call::Pipeline::new(oxp_runtime::Registry::builder().build().unwrap());
    /// let key = b"a shared secret of 32 bytes or more!".to_vec();
    /// let server = oxp_runtime::mcp::McpServer::new(pipeline)
    ///     .state_key(key, std::time::Duration::from_secs(600))
    ///     .expect("a key of 32 bytes or more");
    /// assert!(oxp_runtime::mcp::McpServer::new(
    ///     oxp_runtime::call::Pipeline::new(oxp_runtime::Registry::builder().build().unwrap()),
    /// ).state_key(b"short".to_vec(), std::time::Duration::from_secs(60)).is_err());
    /// ```
    pub fn state_key(mut self, key: Vec<u8>, ttl: Duration) -> Result<Self, String> {
        self.sealer = crate::seal::Sealer::new(Some(&key), ttl)?;
        Ok(self)
    }

    /// Earlier state keys (`OXP_STATE_KEYS_PREVIOUS`), each at least 32 bytes: what they
    /// sealed still opens, while the key of [`state_key`](Self::state_key) (call that first)
    /// seals. A state names the key that sealed it, so replicas rotate their key without
    /// breaking a call in flight: add the new key here on every replica, then make it the
    /// state key with the old one here, then drop the old one.
    ///
    /// ```
    /// # let pipeline = oxp_runtime::call::Pipeline::new(oxp_runtime::Registry::builder().build().unwrap());
    /// let server = oxp_runtime::mcp::McpServer::new(pipeline)
    ///     .state_key(b"the new key, of 32 bytes or more!!".to_vec(), std::time::Duration::from_secs(600))?
    ///     .previous_state_keys([b"the old key, of 32 bytes or more!!".to_vec()])?;
    /// # Ok::<(), String>(())
    /// ```
    pub fn previous_state_keys(
        mut self,
        keys: impl IntoIterator<Item = Vec<u8>>,
    ) -> Result<Self, String> {
        let keys: Vec<Vec<u8>> = keys.into_iter().collect();
        self.sealer = (self.sealer).with_previous_keys(keys.iter().map(Vec::as_slice))?;
        Ok(self)
    }

    /// How long a call that asks may wait for its answers, keeping the key (the one given to
    /// [`state_key`](Self::state_key), or the one the server made). Keep it within the
    /// idempotency store's time-to-live: a call's end is remembered that long, and a state
    /// that outlives it could run its call's last round again.
    ///
    /// ```
    /// # let pipeline = oxp_runtime::call::Pipeline::new(oxp_runtime::Registry::builder().build().unwrap());
    /// let server = oxp_runtime::mcp::McpServer::new(pipeline)
    ///     .state_ttl(std::time::Duration::from_secs(300))
    ///     .unwrap();
    /// ```
    pub fn state_ttl(mut self, ttl: Duration) -> Result<Self, String> {
        self.sealer = self.sealer.with_ttl(ttl);
        Ok(self)
    }

    /// What a tool that asks does for a caller whose client cannot answer, unless the tool says
    /// (`#[tool(cannot_ask = "…")]`); `OXP_CANNOT_ASK`. Default: refuse. Hiding applies to tools
    /// known to ask (a `confirm = "…"`, or a `cannot_ask` of their own); relaying to `confirm`
    /// questions only.
    ///
    /// ```
    /// # let pipeline = oxp_runtime::call::Pipeline::new(oxp_runtime::Registry::builder().build().unwrap());
    /// use oxp_runtime::ask::CannotAsk;
    /// // Claude.ai connectors cannot ask: they do not see the tools that would need to.
    /// let server = oxp_runtime::mcp::McpServer::new(pipeline).cannot_ask(CannotAsk::Hide);
    /// ```
    #[must_use]
    pub fn cannot_ask(mut self, default: crate::ask::CannotAsk) -> Self {
        self.cannot_ask = default;
        self
    }

    /// The secrets, tokens and user id every call gets, instead of the environment's.
    ///
    /// ```
    /// use oxp_runtime::{call::Pipeline, mcp::McpServer, tool, Registry};
    ///
    /// /// Add two numbers.
    /// #[tool(toolkit = "Calculator", version = "1.0.0")]
    /// async fn add(a: f64, b: f64) -> f64 { a + b }
    ///
    /// let pipeline = Pipeline::new(Registry::builder().tool(add::TOOL).build().unwrap());
    /// let context = serde_json::from_value(serde_json::json!({"user_id": "ada"})).unwrap();
    /// let server = McpServer::new(pipeline).with_context(context);
    /// # async {
    /// server.serve_stdio().await?; // every call made for ada
    /// # Ok::<(), Box<dyn std::error::Error + Send + Sync>>(()) };
    /// ```
    #[must_use]
    pub fn with_context(mut self, context: CallContext) -> Self {
        self.context = Arc::new(context);
        self
    }

    /// The tools as `tools/list` shows them.
    ///
    /// ```
    /// use oxp_runtime::{call::Pipeline, mcp::McpServer, tool, Registry};
    ///
    /// /// Add two numbers.
    /// #[tool(toolkit = "Calculator", version = "1.0.0")]
    /// async fn add(a: f64, b: f64) -> f64 { a + b }
    ///
    /// let pipeline = Pipeline::new(Registry::builder().tool(add::TOOL).build().unwrap());
    /// let server = McpServer::new(pipeline);
    /// let tool = &server.tools()[0];
    /// assert_eq!(tool.input_schema["required"], serde_json::json!(["a", "b"]));
    /// ```
    pub fn tools(&self) -> &[Tool] {
        self.tools_for(false)
    }

    /// The tool list for a client that may (`any_output`) or may not take non-object output
    /// schemas.
    /// A call of a tool that asks, by a caller that cannot answer, counted by what it got.
    fn count(&self, fallback: crate::metrics::Fallback) {
        if let Some(metrics) = self.pipeline.metrics_handle() {
            metrics.fallback(fallback);
        }
    }

    /// Whether this request's client can answer a question to its user: it declared
    /// elicitation where it can be asked.
    fn caller_can_answer(&self, exchange: &Exchange) -> bool {
        asking::supports(exchange.capabilities.as_ref())(Capability::Elicitation)
    }

    fn tools_for(&self, any_output: bool) -> &[Tool] {
        let cache = if any_output {
            &self.tools_any_output
        } else {
            &self.tools
        };
        cache.get_or_init(|| tools(self.pipeline.registry(), any_output, self.cannot_ask))
    }

    /// The streamable HTTP transport as a tower service, to nest at a path of your choosing:
    /// the same as [`into_router`](Self::into_router).
    ///
    /// ```
    /// use oxp_runtime::{call::Pipeline, mcp::McpServer, tool, Registry};
    ///
    /// /// Add two numbers.
    /// #[tool(toolkit = "Calculator", version = "1.0.0")]
    /// async fn add(a: f64, b: f64) -> f64 { a + b }
    ///
    /// let pipeline = Pipeline::new(Registry::builder().tool(add::TOOL).build().unwrap());
    /// # #[allow(deprecated)]
    /// let service = McpServer::new(pipeline).streamable_http_service();
    /// let app: axum::Router = axum::Router::new().nest_service("/agents/mcp", service);
    /// ```
    #[deprecated(
        note = "this was rmcp's transport, which built a service per request; oxp's own \
                replaces it: nest `McpServer::into_router()` where this was"
    )]
    pub fn streamable_http_service(&self) -> axum::Router {
        self.clone().into_router()
    }

    /// MCP's streamable HTTP transport as an axum router, answering at its root: what the OXP
    /// server nests at `/mcp`. It checks what MCP's transport asks of a request (method, media
    /// types, the revision's headers, body cap); Origin and Host are the OXP server's guard's
    /// to check, before a request gets here.
    ///
    /// ```
    /// # let pipeline = oxp_runtime::call::Pipeline::new(oxp_runtime::Registry::builder().build().unwrap());
    /// let app: axum::Router = axum::Router::new()
    ///     .nest("/mcp", oxp_runtime::mcp::McpServer::new(pipeline).into_router());
    /// # async {
    /// let listener = tokio::net::TcpListener::bind("127.0.0.1:8000").await?;
    /// axum::serve(listener, app).await?;
    /// # Ok::<(), std::io::Error>(()) };
    /// ```
    pub fn into_router(self) -> axum::Router {
        http::router(self)
    }

    /// The same transport as the service of one path (it answers at whatever path it is
    /// routed to): what the OXP server [`mount`](crate::server::Server::mount)s at `/mcp`,
    /// without the nesting a router needs.
    ///
    /// ```
    /// # let pipeline = oxp_runtime::call::Pipeline::new(oxp_runtime::Registry::builder().build().unwrap());
    /// let app: axum::Router = axum::Router::new()
    ///     .route_service("/mcp", oxp_runtime::mcp::McpServer::new(pipeline).into_service());
    /// ```
    pub fn into_service(self) -> McpService {
        McpService::new(self)
    }

    /// Serves MCP over stdin/stdout until the client disconnects.
    ///
    /// ```no_run
    /// # async fn run() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    /// use oxp_runtime::{call::Pipeline, mcp::McpServer, Registry};
    /// McpServer::new(Pipeline::new(Registry::from_inventory()?)).serve_stdio().await
    /// # }
    /// ```
    pub async fn serve_stdio(self) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
        let running = self.serve(rmcp::transport::stdio()).await?;
        running.waiting().await?;
        Ok(())
    }

    /// The tool an MCP name names ([`Registry::resolve_mcp_name`]).
    fn resolve(&self, name: &str) -> Option<&RegisteredTool> {
        self.pipeline.registry().resolve_mcp_name(name)
    }

    /// The parameters of the tool an MCP name names that travel in headers as well; none for
    /// a name no tool has.
    fn param_headers(&self, name: &str) -> &[headers::ParamHeader] {
        if self.param_headers.is_empty() {
            return &[];
        }
        (self.resolve(name))
            .and_then(|tool| self.param_headers.get(tool.id()))
            .map_or(&[], |marked| marked)
    }
}

/// Every tool: the latest version under its wire name, older ones with a version suffix.
fn tools(registry: &Registry, any_output: bool, cannot_ask: crate::ask::CannotAsk) -> Vec<Tool> {
    registry
        .listed_names()
        .map(|(tool, name)| {
            let mut listed = mcp_tool(tool, name, any_output);
            if fallback::policy(tool, cannot_ask) == crate::ask::CannotAsk::Relay {
                fallback::add_confirmation_argument(Arc::make_mut(&mut listed.input_schema));
            }
            listed
        })
        .collect()
}

/// The `_meta` key of `always_load`: Claude Code loads the tool up front instead of deferring it.
const ALWAYS_LOAD: &str = "anthropic/alwaysLoad";
/// The `_meta` key of `search_hint`: words Claude Code's tool search matches.
const SEARCH_HINT: &str = "anthropic/searchHint";

fn mcp_tool(tool: &RegisteredTool, name: String, any_output: bool) -> Tool {
    let definition = tool.definition();
    let object = |schema: &Value| -> JsonObject {
        match schema {
            Value::Object(map) => map.clone(),
            _ => JsonObject::new(),
        }
    };
    // MCP takes JSON Schema 2020-12 as written (SEP-1613): a schema written with definitions
    // keeps them, and its references, under the dialect's `$schema`. Every other front gets
    // the policy's self-contained form, which is what MCP gets for every other tool.
    let written = (tool.descriptor().input_schema)();
    let input = if written.get("$defs").is_some() {
        let mut written = object(&written.to_value());
        written.insert("$schema".into(), JSON_SCHEMA_2020_12.into());
        written
    } else {
        object(&definition.input_schema)
    };
    let mut mcp = Tool::new(
        name,
        tool.description_for_models().into_owned(),
        Arc::new(input),
    );
    // Only what the tool stated: a host applies the spec's defaults to the rest.
    let hints = tool.hints();
    mcp.title = hints.title.map(str::to_owned);
    let stated = [
        hints.read_only,
        hints.destructive,
        hints.idempotent,
        hints.open_world,
    ];
    if hints.title.is_some() || stated.iter().any(Option::is_some) {
        mcp.annotations = Some(ToolAnnotations::from_raw(
            hints.title.map(str::to_owned),
            hints.read_only,
            hints.destructive,
            hints.idempotent,
            hints.open_world,
        ));
    }
    // MCP has no tool-search primitive; hosts that defer tools read these per tool.
    let mut search = JsonObject::new();
    if hints.always_load {
        search.insert(ALWAYS_LOAD.into(), Value::Bool(true));
    }
    if let Some(hint) = hints.search_hint {
        search.insert(SEARCH_HINT.into(), hint.into());
    }
    if !search.is_empty() {
        mcp.meta = Some(rmcp::model::MetaObject(search));
    }
    // Before 2026-07-28 MCP's `outputSchema` must describe an object (structured content is an
    // object); from it (SEP-2106) any schema. Before, other values are returned as text only.
    // A tool returning `Contents` declares the schema of its structured part, if it has one.
    let output =
        definition.output_schema.as_ref().and_then(
            |output| match crate::content::structured_schema(output) {
                Some(structured) => structured,
                None => Some(output),
            },
        );
    if let Some(output) = output {
        if any_output || output.get("type") == Some(&Value::String("object".into())) {
            mcp.output_schema = Some(Arc::new(object(output)));
        }
    }
    mcp
}

pub use http::McpService;
pub use logging::log_layer;

/// How often progress reaches an MCP client at most: the latest report in each interval wins,
/// so a tool reporting in a tight loop cannot flood the client.
const PROGRESS_INTERVAL: Duration = Duration::from_millis(50);

/// Hands a call's progress reports to `notifications/progress` without ever blocking the tool:
/// the tool's report replaces any not sent yet; a task sends them.
struct ProgressForwarder {
    shared: Arc<ProgressShared>,
    task: tokio::task::JoinHandle<()>,
}

#[derive(Default)]
struct ProgressShared {
    latest: std::sync::Mutex<Option<crate::signals::Progress>>,
    ready: tokio::sync::Notify,
    done: std::sync::atomic::AtomicBool,
}

impl ProgressForwarder {
    fn start(back: Back, token: ProgressToken) -> Self {
        let shared = Arc::new(ProgressShared::default());
        let task = tokio::spawn({
            let shared = shared.clone();
            async move {
                loop {
                    let ready = shared.ready.notified();
                    let report = shared
                        .latest
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .take();
                    if let Some(report) = report {
                        let mut param =
                            ProgressNotificationParam::new(token.clone(), report.done as f64);
                        param.total = report.total.map(|t| t as f64);
                        param.message = report.message;
                        let notification = rmcp::model::ProgressNotification::new(param);
                        if back.notify(notification.into()).await.is_err() {
                            return; // the client is gone
                        }
                        tokio::time::sleep(PROGRESS_INTERVAL).await;
                        continue;
                    }
                    if shared.done.load(std::sync::atomic::Ordering::Acquire) {
                        return;
                    }
                    ready.await;
                }
            }
        });
        ProgressForwarder { shared, task }
    }

    fn sink(&self) -> impl Fn(crate::signals::Progress) + Send + Sync + 'static {
        let shared = self.shared.clone();
        move |report| {
            *shared.latest.lock().unwrap_or_else(|e| e.into_inner()) = Some(report);
            shared.ready.notify_one();
        }
    }

    /// Sends what is left, then stops (within a second: a stuck client does not hold the
    /// answer back).
    async fn finish(self) {
        self.shared
            .done
            .store(true, std::sync::atomic::Ordering::Release);
        self.shared.ready.notify_one();
        let _ = tokio::time::timeout(Duration::from_secs(1), self.task).await;
    }
}

fn text_error(text: impl Into<String>) -> CallToolResult {
    CallToolResult::error(vec![Content::text(text.into())])
}

impl McpServer {
    /// The key of the task `id` for this request's caller: the principal and user a call of
    /// theirs would run with, so another caller's id finds nothing.
    fn task_key_for(&self, exchange: &Exchange, id: &str) -> crate::idempotency::IdempotencyKey {
        self.key_of(exchange.principal(), exchange.over_http(), id)
    }

    /// The key of `id` for a caller: its principal and the user its calls run with.
    fn key_of(
        &self,
        principal: Option<&Principal>,
        over_http: bool,
        id: &str,
    ) -> crate::idempotency::IdempotencyKey {
        let user = if over_http && !self.single_tenant {
            principal.and_then(|p| p.call_user(None, false).ok().flatten())
        } else {
            self.context.user_id.clone()
        };
        let principal = exchange::caller_name(principal);
        Self::task_key(principal.as_deref(), user, id)
    }
}

impl McpServer {
    /// Runs one call with what MCP carries besides it: progress to the client that asked for
    /// it, its cancellation, the tool's log messages. Progress and logs all precede the answer;
    /// a cancelled call is answered with an error, never with the tool's result.
    ///
    /// An `async fn`, so that its future is made where it is awaited rather than moved there.
    async fn run(
        &self,
        call: CallToolRequest,
        principal: Option<String>,
        round: &Round,
        exchange: &Exchange,
    ) -> Result<CallOutcome, McpError> {
        // Over HTTP the request's own signal; on a connection one that watches rmcp's token.
        let (cancellation, watched) = match exchange.signal() {
            Some(signal) => (signal.clone(), false),
            None => (Cancellation::new(), true),
        };
        let progress = (exchange.meta.get_progress_token())
            .map(|token| ProgressForwarder::start(exchange.back.clone(), token));
        let mut signals = CallSignals::new().cancelled_by(&cancellation).asking(round);
        if let Some(progress) = &progress {
            signals = signals.on_progress(progress.sink());
        }
        let meta = CallMeta {
            principal,
            signals,
            front: crate::call::Front::Mcp,
            // W3C trace context in `_meta`, as OpenTelemetry's MCP conventions carry it.
            traceparent: cfg!(feature = "otel")
                .then(|| exchange.meta.get("traceparent")?.as_str())
                .flatten()
                .map(str::to_owned),
            ..CallMeta::default()
        };
        let (call, log) = self.call_log(call, exchange);
        let run = self.pipeline.call_with(call, &meta);
        let (run, flush) = match log {
            // Boxed: a call the client asked to hear the logs of is rare, and the scope would
            // otherwise size every call's future.
            Some((log, flush)) => (Either::Left(Box::pin(log.scope(run))), Some(flush)),
            None => (Either::Right(run), None),
        };
        let outcome = if watched {
            // `notifications/cancelled` cancels rmcp's token for this request; the run sees
            // it. Boxed: only a connection's calls are watched.
            let watch = async {
                exchange.cancelled().await;
                cancellation.cancel();
                std::future::pending::<()>().await
            };
            Box::pin(async move {
                tokio::select! {
                    outcome = run => outcome,
                    () = watch => unreachable!("the watch never ends"),
                }
            })
            .await
        } else {
            run.await
        };
        if let Some(flush) = flush {
            flush.done().await;
        }
        if let Some(progress) = progress {
            progress.finish().await;
        }
        if cancellation.is_cancelled() {
            // rmcp answers every request; the tool's own answer is not what it sends.
            return Err(McpError::new(
                rmcp::model::ErrorCode::INTERNAL_ERROR,
                "the call was cancelled",
                None,
            ));
        }
        Ok(outcome)
    }

    /// The call's log, if its client hears one, and the call given back. Apart from
    /// [`run`](Self::run) so that its future holds no borrow of the call, which would keep a
    /// second copy of the call in it.
    fn call_log(
        &self,
        call: CallToolRequest,
        exchange: &Exchange,
    ) -> (CallToolRequest, Option<(logging::CallLog, logging::Flush)>) {
        let log = logging::CallLog::open(
            logging::call_level(exchange, &self.log_level),
            exchange.back.clone(),
            || call.context.as_ref().map(secret_values).unwrap_or_default(),
        );
        (call, log)
    }
}

/// A [`Contents`](crate::content::Contents) value as MCP's result: its blocks are already in
/// MCP's shape; its structured value goes beside them (an object always, any value from
/// 2026-07-28, as for any tool).
fn blocks(value: Value, any_output: bool) -> CallToolResult {
    let Value::Object(mut parts) = value else {
        return text_error("the tool's result is not the content it declared");
    };
    let content = parts
        .remove("content")
        .and_then(|blocks| serde_json::from_value::<Vec<Content>>(blocks).ok());
    let Some(content) = content else {
        return text_error("the tool's result is not the content it declared");
    };
    let mut result = CallToolResult::success(content);
    result.structured_content = parts
        .remove("structuredContent")
        .filter(|structured| any_output || structured.is_object());
    result
}

/// The values of a call's secrets and tokens, scrubbed from what its log messages carry.
fn secret_values(context: &CallContext) -> Vec<String> {
    let secrets = context.secrets.iter().map(|s| s.value.expose());
    let tokens = context.authorization.iter().map(|a| a.token.expose());
    secrets.chain(tokens).map(str::to_owned).collect()
}

/// A call's outcome as MCP answers it: a value as structured content (an object always, any
/// value from 2026-07-28) with its text, [`Contents`](crate::content::Contents) as its blocks;
/// every failure as a tool error the model can read.
fn mcp_result(
    outcome: CallOutcome,
    any_output: bool,
    per_caller: bool,
    contents: bool,
) -> CallToolResult {
    match outcome {
        CallOutcome::Completed(response) => match response.result {
            CallResult::Success { value: Some(value) } if contents => blocks(value, any_output),
            CallResult::Success { value: None } => CallToolResult::success(Vec::new()),
            CallResult::Success {
                value: Some(value @ Value::Object(_)),
            } => CallToolResult::structured(value),
            CallResult::Success { value: Some(value) } => {
                let text = match &value {
                    Value::String(text) => text.clone(),
                    other => other.to_string(),
                };
                let mut result = CallToolResult::success(vec![Content::text(text)]);
                if any_output {
                    result.structured_content = Some(value);
                }
                result
            }
            CallResult::Failure { error } => text_error(error.for_model()),
        },
        // Input errors are tool errors in MCP, so the model can correct itself.
        CallOutcome::Invalid(invalid) => {
            let mut text = invalid.message;
            for (parameter, problem) in invalid.parameter_errors {
                text.push_str(&format!("\n- `{parameter}`: {problem}"));
            }
            text_error(text)
        }
        CallOutcome::Rejected(rejected) => {
            let mut text = rejected.message;
            if let Some(missing) = rejected.missing_requirements {
                for secret in missing.secrets {
                    text.push_str(&format!(
                        "\nThe server provides the secret `{secret}` from its environment variable `{secret}`."
                    ));
                }
                if missing.user_id && per_caller {
                    text.push_str("\nThe user is the caller: authenticate with a token whose `sub` names the user.");
                } else if missing.user_id {
                    text.push_str("\nThe server provides the user id from `OXP_USER_ID`.");
                }
            }
            text_error(text)
        }
        CallOutcome::Unavailable { error, .. } => text_error(error.message),
    }
}
