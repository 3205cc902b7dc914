//! [`ServerConfig`]: every `OXP_*` variable, read into typed configuration and applied to a
//! server.

use std::fmt;
use std::net::SocketAddr;
use std::time::Duration;

use crate::idempotency::InMemoryIdempotency;
use crate::registry::{Registry, RegistryError};
use crate::server::{
    ConnectionLimits, DEFAULT_BODY_TIMEOUT, DEFAULT_MAX_BODY_BYTES, Server, ServerAuth,
};

/// The default address: loopback only, so nothing is exposed by accident.
///
/// ```
/// let config = oxp_runtime::app::ServerConfig::from_lookup(|_| None).unwrap();
/// assert_eq!(config.addr.to_string(), oxp_runtime::app::DEFAULT_ADDR);
/// ```
pub const DEFAULT_ADDR: &str = "127.0.0.1:8000";

/// How logs are written.
///
/// ```
/// use oxp_runtime::app::{LogFormat, ServerConfig};
/// let config = ServerConfig::from_lookup(|name| (name == "OXP_LOG_FORMAT").then(|| "json".to_owned())).unwrap();
/// assert_eq!(config.log_format, LogFormat::Json);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum LogFormat {
    /// Human-readable lines.
    #[default]
    Pretty,
    /// One JSON object per line.
    Json,
}

/// Everything [`serve`](super::serve) reads from the environment.
///
/// | variable | default | meaning |
/// |---|---|---|
/// | `OXP_ADDR` | `127.0.0.1:8000` | address to listen on |
/// | `OXP_JWT_SECRET` | – | accept HS256 JWT bearer tokens signed with this secret |
/// | `OXP_JWT_AUDIENCE` | – | comma-separated audiences a token's `aud` may name |
/// | `OXP_API_KEYS` | – | comma-separated API keys |
/// | `OXP_OAUTH_ISSUER` | – | accept access tokens of these identity providers (comma-separated issuer URLs; cargo feature `oauth`; needs `OXP_PUBLIC_URL`) |
/// | `OXP_OAUTH_JWKS_URL` | from each issuer's metadata | the key set's URL, instead of discovering it |
/// | `OXP_OAUTH_AUDIENCE` | `OXP_PUBLIC_URL` and its `/mcp` | comma-separated audiences a token's `aud` must name one of |
/// | `OXP_OAUTH_SCOPES` | – | comma- or space-separated scopes every request needs |
/// | `OXP_OAUTH_STRICT_TOKEN_TYPE` | `false` | accept only `typ: at+jwt` tokens (refuses plain `JWT` and ID tokens) |
/// | `OXP_OAUTH_INTROSPECTION_URL` | – | check opaque tokens at this RFC 7662 endpoint, as `OXP_OAUTH_CLIENT_ID` with `OXP_OAUTH_CLIENT_SECRET` |
/// | `OXP_OAUTH_CA_FILE` | – | a PEM file of certificates to trust besides Mozilla's roots when fetching from the provider |
/// | `OXP_OAUTH_SCOPE_HIERARCHY` | – | comma-separated `broader>narrower` pairs: a token granting the first is granted the second |
/// | `OXP_MAX_BODY_BYTES` | `1048576` | request body cap, every route |
/// | `OXP_BODY_TIMEOUT_MS` | `30000` | how long a request body may take to arrive |
/// | `OXP_MAX_RESULT_BYTES` | `16777216` | the largest result a tool may return (as JSON) |
/// | `OXP_TOOL_TIMEOUT_MS` | `60000` | time limit for tools without their own `timeout_ms` (`0`: none) |
/// | `OXP_TOOLS` | every tool | which tools to expose on every front: `Toolkit.*`, `Toolkit.Name`, `Toolkit.Name@1`, `tag:NAME`, `resource:URI`, `prompt:NAME`, `-` to exclude, comma-separated |
/// | `OXP_PUBLIC_URL` | – | the URL clients reach the server at (for `check_url`s and the MCP Server Card's endpoint; its origin is allowed) |
/// | `OXP_ALLOWED_ORIGINS` | – | comma-separated origins whose pages may call the server, besides its own |
/// | `OXP_ALLOWED_HOSTS` | – | host names the server answers to besides its listening addresses, the loopback names on loopback and `OXP_PUBLIC_URL`'s host |
/// | `OXP_MAX_CONCURRENT_CALLS` | 512 per core | tool runs at once (a run outlives its client's hang-up); over it, "temporarily unavailable"; `0`: no limit |
/// | `OXP_MAX_BLOCKING_TOOLS` | `64` | sync tools running at once on blocking threads |
/// | `OXP_MAX_CONNECTIONS` | under the file limit, ≤ 10000 | open connections; one over it is closed at once |
/// | `OXP_HEADER_TIMEOUT_MS` | `10000` | how long a request head may take; also the idle keep-alive timeout |
/// | `OXP_WRITE_TIMEOUT_MS` | `30000` | how long a write may wait on a client that does not read |
/// | `OXP_MAX_HEADER_BYTES` | `65536` | the largest request head (`431` above it) |
/// | `OXP_SHUTDOWN_GRACE_MS` | `30000` | how long shutdown waits for runs in flight |
/// | `OXP_IDEMPOTENCY_TTL_MS` | `600000` | how long an answer is kept for a repeated `call_id` (`0`: off) |
/// | `OXP_IDEMPOTENCY_CAPACITY` | `10000` | how many answers and task records are kept in memory; task records in Redis |
/// | `OXP_IDEMPOTENCY_MAX_BYTES` | `67108864` | how many bytes of answers and task records are kept in memory; of task records in Redis |
/// | `OXP_MCP_LIST_TTL_MS` | `300000` | how long an MCP client may keep the tool list (`ttlMs`) |
/// | `OXP_STATE_KEY` | made at start-up | the key (32 bytes or more) that seals MCP request states of tools that ask; **required for replicas**: the same on every one |
/// | `OXP_STATE_TTL_MS` | `OXP_IDEMPOTENCY_TTL_MS`'s | how long a call that asks may wait for its answers, counted from the first answer; at most `OXP_IDEMPOTENCY_TTL_MS` |
/// | `OXP_TASK_TTL_MS` | `3600000` | how long an MCP task (and its result) is kept from its creation, its `ttlMs`; at least `OXP_STATE_TTL_MS` (see `tasks`) |
/// | `OXP_TASKS_PER_CALLER` | a tenth of `OXP_IDEMPOTENCY_CAPACITY` | one caller's (principal and user's) share of the store: that many MCP task records, and the same fraction of `OXP_IDEMPOTENCY_MAX_BYTES` for their bytes |
/// | `OXP_LEASE_MS` | `30000` (at least `100`) | how long a run's lease holds without its process renewing it (every tenth, at most every second): a task whose process died is `failed` this long after, and a `call_id` run in Redis answered as interrupted |
/// | `OXP_CANNOT_ASK` | `refuse` | what a tool that asks does for an MCP caller that cannot answer, unless it says (`refuse`, `hide`, `relay`; see `ask::CannotAsk`) |
/// | `OXP_TRUST_USER_ID` | `false` | callers with a token (OAuth, HS256) may name another user in `context.user_id` (a trusted gateway); off: the user is the token's `sub` |
/// | `OXP_MCP_SINGLE_TENANT` | `false` | MCP callers over HTTP act as `OXP_USER_ID`, with `OXP_TOKEN_*` |
/// | `OXP_REDIS_URL` | – | keep answers in Redis instead (cargo feature `redis`), shared by replicas |
/// | `OXP_LANGCHAIN_COMPAT` | `false` | LangChain client compatibility |
/// | `OXP_PLAYGROUND` | on for loopback addresses | the playground page at `GET /` |
/// | `OXP_METRICS` | `true` | count and time calls for `GET /metrics` (Prometheus) |
/// | `OXP_METRICS_ADDR` | – | serve `/metrics` on this address instead, without authentication (`127.0.0.1:9100`) |
/// | `OXP_LOG` | `info` | log filter (`debug`, `oxp_runtime=trace,info`, …); dependencies (rmcp, hyper, …) stay at `warn` unless named (`info,rmcp=info`) |
/// | `OXP_LOG_FORMAT` | `pretty` | `pretty` or `json` |
///
/// ```
/// use oxp_runtime::app::ServerConfig;
///
/// let config = ServerConfig::from_lookup(|name| match name {
///     "OXP_ADDR" => Some("127.0.0.1:9000".into()),
///     "OXP_API_KEYS" => Some("key-one, key-two".into()),
///     _ => None,
/// })
/// .unwrap();
/// assert_eq!(config.addr.port(), 9000);
/// assert!(config.auth.is_enabled());
/// assert!(ServerConfig::from_lookup(|n| (n == "OXP_MAX_BODY_BYTES").then(|| "lots".into())).is_err());
/// ```
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct ServerConfig {
    /// `OXP_ADDR`.
    pub addr: SocketAddr,
    /// `OXP_JWT_SECRET`, `OXP_JWT_AUDIENCE`, `OXP_API_KEYS`, `OXP_OAUTH_*`.
    pub auth: ServerAuth,
    /// `OXP_MAX_BODY_BYTES`.
    pub max_body_bytes: usize,
    /// `OXP_BODY_TIMEOUT_MS`.
    pub body_timeout: Duration,
    /// `OXP_MAX_RESULT_BYTES`.
    pub max_result_bytes: usize,
    /// `OXP_TOOL_TIMEOUT_MS` (`None`: no limit for tools without their own).
    pub tool_timeout: Option<Duration>,
    /// `OXP_ALLOWED_ORIGINS`.
    pub allowed_origins: Vec<String>,
    /// `OXP_ALLOWED_HOSTS`.
    pub allowed_hosts: Vec<String>,
    /// `OXP_MAX_CONNECTIONS`, `OXP_HEADER_TIMEOUT_MS`, `OXP_WRITE_TIMEOUT_MS`,
    /// `OXP_MAX_HEADER_BYTES`.
    pub connections: ConnectionLimits,
    /// `OXP_IDEMPOTENCY_MAX_BYTES`.
    pub idempotency_max_bytes: u64,
    /// `OXP_MCP_SINGLE_TENANT`.
    pub mcp_single_tenant: bool,
    /// `OXP_MCP_LIST_TTL_MS`.
    pub mcp_list_ttl: Duration,
    /// `OXP_STATE_KEY` (`None`: the server makes one at start-up).
    pub state_key: Option<crate::protocol::Sensitive>,
    /// `OXP_STATE_TTL_MS`.
    pub state_ttl: Duration,
    /// `OXP_CANNOT_ASK`.
    pub cannot_ask: crate::ask::CannotAsk,
    /// `OXP_TASK_TTL_MS`.
    pub task_ttl: Duration,
    /// `OXP_LEASE_MS`.
    pub lease: Duration,
    /// `OXP_PUBLIC_URL`.
    pub public_url: Option<String>,
    /// `OXP_TOOLS`: the tool selection ([`RegistryBuilder::select`](crate::RegistryBuilder::select));
    /// set but empty is an error when the registry is built.
    pub tools: Option<String>,
    /// `OXP_LANGCHAIN_COMPAT`.
    pub langchain_compat: bool,
    /// `OXP_TRUST_USER_ID`.
    pub trust_user_id: bool,
    /// `OXP_MAX_CONCURRENT_CALLS` (`None`: no limit, from `0`; unset:
    /// [`default_max_calls`](crate::call::default_max_calls)).
    pub max_concurrent_calls: Option<usize>,
    /// `OXP_MAX_BLOCKING_TOOLS`.
    pub max_blocking_tools: usize,
    /// `OXP_SHUTDOWN_GRACE_MS`.
    pub shutdown_grace: Duration,
    /// `OXP_IDEMPOTENCY_TTL_MS` (`None`: idempotency off).
    pub idempotency_ttl: Option<Duration>,
    /// `OXP_IDEMPOTENCY_CAPACITY`.
    pub idempotency_capacity: u64,
    /// `OXP_TASKS_PER_CALLER` (unset: a tenth of `OXP_IDEMPOTENCY_CAPACITY`).
    pub tasks_per_caller: u64,
    /// `OXP_REDIS_URL`.
    pub redis_url: Option<String>,
    /// `OXP_PLAYGROUND` (default: on when `addr` is a loopback address).
    pub playground: bool,
    /// `OXP_METRICS`.
    pub metrics: bool,
    /// `OXP_METRICS_ADDR`: where `/metrics` is served instead of on `addr`.
    pub metrics_addr: Option<SocketAddr>,
    /// `OXP_LOG`.
    pub log: String,
    /// `OXP_LOG_FORMAT`.
    pub log_format: LogFormat,
}

/// An environment variable with a value the server cannot use.
///
/// ```
/// let error = oxp_runtime::app::ServerConfig::from_lookup(|name| (name == "OXP_ADDR").then(|| "nowhere".to_owned())).unwrap_err();
/// assert_eq!(error.variable, "OXP_ADDR");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    /// The variable.
    pub variable: &'static str,
    /// What is wrong, and what to write. Never the value itself (it may be a secret).
    pub problem: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.variable, self.problem)
    }
}

impl std::error::Error for ConfigError {}

/// The `OXP_OAUTH_*` variables, each an error when it cannot be used.
const OAUTH_VARIABLES: [&str; 10] = [
    "OXP_OAUTH_ISSUER",
    "OXP_OAUTH_JWKS_URL",
    "OXP_OAUTH_AUDIENCE",
    "OXP_OAUTH_SCOPES",
    "OXP_OAUTH_STRICT_TOKEN_TYPE",
    "OXP_OAUTH_INTROSPECTION_URL",
    "OXP_OAUTH_CLIENT_ID",
    "OXP_OAUTH_CLIENT_SECRET",
    "OXP_OAUTH_CA_FILE",
    "OXP_OAUTH_SCOPE_HIERARCHY",
];

/// Adds the resource server `OXP_OAUTH_*` configures, if it does.
#[cfg(feature = "oauth")]
fn oauth_from_lookup(
    auth: ServerAuth,
    get: &dyn Fn(&str) -> Option<String>,
    list: &dyn Fn(&str) -> Vec<String>,
) -> Result<ServerAuth, ConfigError> {
    use crate::oauth::OAuth;
    let issuers = list("OXP_OAUTH_ISSUER");
    if issuers.is_empty() {
        return match OAUTH_VARIABLES[1..].iter().find(|v| get(v).is_some()) {
            Some(variable) => Err(ConfigError {
                variable,
                problem:
                    "is set but OXP_OAUTH_ISSUER is not: name the identity provider's issuer URL"
                        .into(),
            }),
            None => Ok(auth),
        };
    }
    let Some(resource) = get("OXP_PUBLIC_URL") else {
        return Err(ConfigError {
            variable: "OXP_PUBLIC_URL",
            problem: "must be set with OXP_OAUTH_ISSUER: it is the URL clients reach this server at, which tokens must be issued for (`https://tools.example.com`)".into(),
        });
    };
    let mut oauth = OAuth::new(resource).audience(list("OXP_OAUTH_AUDIENCE"));
    for issuer in issuers {
        oauth = oauth.issuer(issuer);
    }
    if let Some(url) = get("OXP_OAUTH_JWKS_URL") {
        oauth = oauth.jwks_url(url);
    }
    // Providers and docs write scope lists with spaces (the claim's own form) or commas.
    let scopes = get("OXP_OAUTH_SCOPES").unwrap_or_default();
    oauth = oauth.scopes(scopes.split([',', ' ']).filter(|s| !s.is_empty()));
    oauth = oauth.strict_token_type(match get("OXP_OAUTH_STRICT_TOKEN_TYPE").as_deref() {
        None | Some("false" | "0") => false,
        Some("true" | "1") => true,
        Some(_) => {
            return Err(ConfigError {
                variable: "OXP_OAUTH_STRICT_TOKEN_TYPE",
                problem: "must be `true` or `false`".into(),
            });
        }
    });
    match (
        get("OXP_OAUTH_INTROSPECTION_URL"),
        get("OXP_OAUTH_CLIENT_ID"),
        get("OXP_OAUTH_CLIENT_SECRET"),
    ) {
        (Some(url), Some(id), Some(secret)) => oauth = oauth.introspection(url, id, secret),
        (None, None, None) => {}
        (None, _, _) => {
            return Err(ConfigError {
                variable: "OXP_OAUTH_INTROSPECTION_URL",
                problem: "must be set with OXP_OAUTH_CLIENT_ID and OXP_OAUTH_CLIENT_SECRET: they are the client it introspects as".into(),
            });
        }
        (Some(_), None, _) => {
            return Err(ConfigError {
                variable: "OXP_OAUTH_CLIENT_ID",
                problem: "must be set with OXP_OAUTH_INTROSPECTION_URL: the client the server introspects tokens as".into(),
            });
        }
        (Some(_), _, None) => {
            return Err(ConfigError {
                variable: "OXP_OAUTH_CLIENT_SECRET",
                problem: "must be set with OXP_OAUTH_INTROSPECTION_URL: the secret of the client the server introspects tokens as".into(),
            });
        }
    }
    for rule in list("OXP_OAUTH_SCOPE_HIERARCHY") {
        let Some((broader, narrower)) = rule.split_once('>') else {
            return Err(ConfigError {
                variable: "OXP_OAUTH_SCOPE_HIERARCHY",
                problem: format!(
                    "`{rule}` is not `broader>narrower`: write e.g. `files:admin>files:write,files:write>files:read`"
                ),
            });
        };
        oauth = oauth.scope_implies(broader.trim(), [narrower.trim()]);
    }
    if let Some(path) = get("OXP_OAUTH_CA_FILE") {
        let pem = std::fs::read(&path).map_err(|error| ConfigError {
            variable: "OXP_OAUTH_CA_FILE",
            problem: format!("`{path}` cannot be read: {error}"),
        })?;
        oauth = oauth.ca_certificates(pem);
    }
    oauth.check().map_err(|error| ConfigError {
        variable: error.setting.variable(),
        problem: error.problem,
    })?;
    Ok(auth.oauth(oauth))
}

/// Without the `oauth` feature, an `OXP_OAUTH_*` variable is a mistake to say, not to ignore:
/// the server would otherwise run without the authentication its operator asked for.
#[cfg(not(feature = "oauth"))]
fn oauth_from_lookup(
    auth: ServerAuth,
    get: &dyn Fn(&str) -> Option<String>,
    _list: &dyn Fn(&str) -> Vec<String>,
) -> Result<ServerAuth, ConfigError> {
    match OAUTH_VARIABLES.iter().find(|v| get(v).is_some()) {
        Some(variable) => Err(ConfigError {
            variable,
            problem: "needs the `oauth` cargo feature: `oxp-runtime = { version = \"0.1\", features = [\"oauth\"] }`".into(),
        }),
        None => Ok(auth),
    }
}

impl ServerConfig {
    /// Reads the process environment.
    ///
    /// ```no_run
    /// use oxp_runtime::{app::ServerConfig, server::Server, Registry};
    ///
    /// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
    /// // Your own main, configured as `serve()` is: from OXP_PORT, OXP_JWT_SECRET, ….
    /// let config = ServerConfig::from_env()?;
    /// let server = config.apply(Server::new(Registry::from_inventory()?)).await?;
    /// let listener = tokio::net::TcpListener::bind(config.addr).await?;
    /// server.serve(listener, std::future::pending(), config.shutdown_grace).await?;
    /// # Ok(()) }
    /// ```
    pub fn from_env() -> Result<Self, ConfigError> {
        ServerConfig::from_lookup(|name| std::env::var(name).ok())
    }

    /// Reads variables through `lookup` (for tests, or another source of settings).
    ///
    /// ```
    /// use std::collections::HashMap;
    /// let env = HashMap::from([("OXP_ADDR", "127.0.0.1:9000"), ("OXP_TOOL_TIMEOUT_MS", "5000")]);
    /// let config = oxp_runtime::app::ServerConfig::from_lookup(|name| env.get(name).map(|v| v.to_string())).unwrap();
    /// assert_eq!(config.tool_timeout, Some(std::time::Duration::from_secs(5)));
    /// ```
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        let get = |name: &str| {
            lookup(name)
                .map(|v| v.trim().to_owned())
                .filter(|v| !v.is_empty())
        };
        let list = |name: &str| -> Vec<String> {
            get(name)
                .map(|v| {
                    v.split(',')
                        .map(str::trim)
                        .filter(|s| !s.is_empty())
                        .map(str::to_owned)
                        .collect()
                })
                .unwrap_or_default()
        };
        let number = |variable: &'static str| -> Result<Option<u64>, ConfigError> {
            get(variable)
                .map(|v| {
                    v.parse::<u64>().map_err(|_| ConfigError {
                        variable,
                        problem: "must be a whole number".into(),
                    })
                })
                .transpose()
        };

        let addr = get("OXP_ADDR").unwrap_or_else(|| DEFAULT_ADDR.to_owned());
        let addr: SocketAddr = addr.parse().map_err(|_| ConfigError {
            variable: "OXP_ADDR",
            problem: format!("`{addr}` is not an address like 127.0.0.1:8000"),
        })?;

        let mut auth = ServerAuth::default();
        if let Some(secret) = get("OXP_JWT_SECRET") {
            auth = auth
                .jwt_secret(secret)
                .jwt_audience(list("OXP_JWT_AUDIENCE"));
        } else if get("OXP_JWT_AUDIENCE").is_some() {
            return Err(ConfigError {
                variable: "OXP_JWT_AUDIENCE",
                problem: "is set but OXP_JWT_SECRET is not: set both".into(),
            });
        }
        for key in list("OXP_API_KEYS") {
            auth = auth.api_key(key);
        }
        auth = oauth_from_lookup(auth, &get, &list)?;

        let log = get("OXP_LOG").unwrap_or_else(|| "info".to_owned());
        if let Err(error) = tracing_subscriber::EnvFilter::try_new(&log) {
            return Err(ConfigError {
                variable: "OXP_LOG",
                problem: format!(
                    "`{log}` is not a log filter ({error}); write a level (`info`) or \
                     directives (`oxp_runtime=debug,info`)"
                ),
            });
        }
        let log_format = match get("OXP_LOG_FORMAT").as_deref() {
            None | Some("pretty") => LogFormat::Pretty,
            Some("json") => LogFormat::Json,
            Some(other) => {
                return Err(ConfigError {
                    variable: "OXP_LOG_FORMAT",
                    problem: format!("`{other}` is not `pretty` or `json`"),
                });
            }
        };
        // A switch, `default` when unset.
        let switch = |variable: &'static str, default: bool| -> Result<bool, ConfigError> {
            match get(variable).as_deref() {
                None => Ok(default),
                Some("0" | "false" | "off") => Ok(false),
                Some("1" | "true" | "on") => Ok(true),
                Some(other) => Err(ConfigError {
                    variable,
                    problem: format!("`{other}` is not true or false"),
                }),
            }
        };
        let playground = switch("OXP_PLAYGROUND", addr.ip().is_loopback())?;
        // Every number has a range: a value past it is a mistake to report, never a panic
        // deep in the runtime (a semaphore's permit count, a timer's deadline) or a silent cap.
        let bounded =
            |variable: &'static str, min: u64, max: u64| -> Result<Option<u64>, ConfigError> {
                match number(variable)? {
                    Some(n) if n < min || n > max => Err(ConfigError {
                        variable,
                        problem: format!("must be from {min} to {max}"),
                    }),
                    n => Ok(n),
                }
            };
        /// Ten years: the longest any duration setting may be.
        const MAX_MS: u64 = 10 * 365 * 24 * 3600 * 1000;
        let millis = |variable: &'static str, min: u64| -> Result<Option<Duration>, ConfigError> {
            Ok(bounded(variable, min, MAX_MS)?.map(Duration::from_millis))
        };
        let size = |n: u64| usize::try_from(n).unwrap_or(usize::MAX);
        let langchain_compat = switch("OXP_LANGCHAIN_COMPAT", false)?;
        let max_body_bytes =
            bounded("OXP_MAX_BODY_BYTES", 1, 1 << 40)?.map_or(DEFAULT_MAX_BODY_BYTES, size);
        let idempotency_ttl = match millis("OXP_IDEMPOTENCY_TTL_MS", 0)? {
            Some(Duration::ZERO) => None,
            Some(ttl) => Some(ttl),
            None => Some(crate::idempotency::DEFAULT_TTL),
        };
        let redis_url = get("OXP_REDIS_URL");
        if redis_url.is_some() && !cfg!(feature = "redis") {
            return Err(ConfigError {
                variable: "OXP_REDIS_URL",
                problem: "needs oxp-runtime's `redis` cargo feature: add `features = [\"redis\"]`"
                    .into(),
            });
        }
        let mut connections = ConnectionLimits {
            max_connections: bounded("OXP_MAX_CONNECTIONS", 1, 10_000_000)?.map(size),
            ..Default::default()
        };
        if let Some(timeout) = millis("OXP_HEADER_TIMEOUT_MS", 1)? {
            connections.header_timeout = timeout;
        }
        if let Some(timeout) = millis("OXP_WRITE_TIMEOUT_MS", 1)? {
            connections.write_timeout = timeout;
        }
        if let Some(bytes) = bounded("OXP_MAX_HEADER_BYTES", 8 * 1024, 16 * 1024 * 1024)? {
            connections.max_header_bytes = size(bytes);
        }
        let metrics = switch("OXP_METRICS", true)?;
        let metrics_addr = match get("OXP_METRICS_ADDR") {
            None => None,
            Some(_) if !metrics => {
                return Err(ConfigError {
                    variable: "OXP_METRICS_ADDR",
                    problem: "is set but OXP_METRICS is false: unset one".into(),
                });
            }
            Some(addr) => Some(addr.parse::<SocketAddr>().map_err(|_| ConfigError {
                variable: "OXP_METRICS_ADDR",
                problem: format!("`{addr}` is not an address like 127.0.0.1:9100"),
            })?),
        };
        if metrics_addr == Some(addr) {
            return Err(ConfigError {
                variable: "OXP_METRICS_ADDR",
                problem: "is the same address as OXP_ADDR: pick another port".into(),
            });
        }
        // MCP keeps no sessions (any replica answers any request), so these have nothing to
        // limit, and a setting that would do nothing is a mistake to report.
        for variable in ["OXP_MCP_MAX_SESSIONS", "OXP_MCP_SESSION_IDLE_MS"] {
            if get(variable).is_some() {
                return Err(ConfigError {
                    variable,
                    problem: "MCP over HTTP keeps no sessions (every request is served on its \
                              own, by any replica): unset it"
                        .into(),
                });
            }
        }
        let state_key = get("OXP_STATE_KEY");
        if state_key.as_ref().is_some_and(|key| key.len() < 32) {
            return Err(ConfigError {
                variable: "OXP_STATE_KEY",
                problem: "is shorter than 32 bytes: use 32 random bytes or more (`openssl rand \
                          -base64 48`)"
                    .into(),
            });
        }
        let state_key = state_key.map(crate::protocol::Sensitive::new);
        let cannot_ask = match get("OXP_CANNOT_ASK") {
            None => crate::ask::CannotAsk::default(),
            Some(choice) => choice.parse().map_err(|_| ConfigError {
                variable: "OXP_CANNOT_ASK",
                problem: format!("is not one of {}", crate::rules::CANNOT_ASK.join(", ")),
            })?,
        };
        // A call that asks completes once because its end is kept in the idempotency store:
        // a state that outlived that record could run the call's last round again.
        let state_ttl = millis("OXP_STATE_TTL_MS", 1)?
            .unwrap_or(idempotency_ttl.unwrap_or(crate::idempotency::DEFAULT_TTL));
        if let Some(kept) = idempotency_ttl.filter(|kept| state_ttl > *kept) {
            return Err(ConfigError {
                variable: "OXP_STATE_TTL_MS",
                problem: format!(
                    "is longer than OXP_IDEMPOTENCY_TTL_MS ({} ms): a call that asks is kept from \
                     running twice only while its end is remembered, so a request state may \
                     live at most as long",
                    kept.as_millis()
                ),
            });
        }
        // The round that makes a task is kept from running twice by the task's record: a
        // state that outlived it could make the task again.
        let task_ttl = millis("OXP_TASK_TTL_MS", 1)?.unwrap_or(crate::tasks::DEFAULT_TTL);
        if task_ttl < state_ttl {
            return Err(ConfigError {
                variable: "OXP_TASK_TTL_MS",
                problem: format!(
                    "is shorter than OXP_STATE_TTL_MS ({} ms): a call that asks before it becomes \
                     a task is kept from making it twice only while the task is kept, so a task \
                     must live at least as long as a request state",
                    state_ttl.as_millis()
                ),
            });
        }
        let idempotency_capacity = bounded("OXP_IDEMPOTENCY_CAPACITY", 1, 100_000_000)?
            .unwrap_or(crate::idempotency::DEFAULT_CAPACITY);
        let tool_timeout = match millis("OXP_TOOL_TIMEOUT_MS", 0)? {
            Some(Duration::ZERO) => None,
            Some(timeout) => Some(timeout),
            None => Some(crate::call::DEFAULT_TOOL_TIMEOUT),
        };
        Ok(ServerConfig {
            max_concurrent_calls: match bounded("OXP_MAX_CONCURRENT_CALLS", 0, 10_000_000)? {
                None => Some(crate::call::default_max_calls()),
                Some(0) => None,
                Some(n) => Some(size(n)),
            },
            max_blocking_tools: bounded("OXP_MAX_BLOCKING_TOOLS", 1, 100_000)?
                .map_or(crate::call::DEFAULT_MAX_BLOCKING, size),
            shutdown_grace: millis("OXP_SHUTDOWN_GRACE_MS", 0)?.unwrap_or(Duration::from_secs(30)),
            idempotency_ttl,
            idempotency_capacity,
            tasks_per_caller: bounded("OXP_TASKS_PER_CALLER", 1, 100_000_000)?
                .unwrap_or((idempotency_capacity / crate::idempotency::CALLERS_SHARING).max(1)),
            idempotency_max_bytes: bounded("OXP_IDEMPOTENCY_MAX_BYTES", 1, 1 << 40)?
                .unwrap_or(crate::idempotency::DEFAULT_MAX_BYTES),
            redis_url,
            addr,
            auth,
            max_body_bytes,
            body_timeout: millis("OXP_BODY_TIMEOUT_MS", 1)?.unwrap_or(DEFAULT_BODY_TIMEOUT),
            max_result_bytes: bounded("OXP_MAX_RESULT_BYTES", 1, 1 << 40)?
                .map_or(crate::call::DEFAULT_MAX_RESULT_BYTES, size),
            tool_timeout,
            public_url: get("OXP_PUBLIC_URL"),
            tools: lookup("OXP_TOOLS"),
            allowed_origins: list("OXP_ALLOWED_ORIGINS"),
            allowed_hosts: list("OXP_ALLOWED_HOSTS"),
            connections,
            mcp_single_tenant: switch("OXP_MCP_SINGLE_TENANT", false)?,
            mcp_list_ttl: millis("OXP_MCP_LIST_TTL_MS", 0)?.unwrap_or(Duration::from_secs(300)),
            state_key,
            state_ttl,
            cannot_ask,
            task_ttl,
            lease: millis("OXP_LEASE_MS", 100)?.unwrap_or(crate::tasks::DEFAULT_LEASE),
            langchain_compat,
            trust_user_id: switch("OXP_TRUST_USER_ID", false)?,
            playground,
            metrics,
            metrics_addr,
            log,
            log_format,
        })
    }

    /// The registry these settings serve: every `#[tool]` in the binary, narrowed by `OXP_TOOLS`.
    ///
    /// ```standalone_crate
    /// use oxp_runtime::{app::ServerConfig, tool};
    ///
    /// /// Add.
    /// #[tool(toolkit = "Calculator", version = "1.0.0")]
    /// fn add(a: f64, b: f64) -> f64 { a + b }
    ///
    /// /// Ping.
    /// #[tool(toolkit = "Util", version = "1.0.0")]
    /// fn ping() {}
    ///
    /// let config = ServerConfig::from_lookup(|name| (name == "OXP_TOOLS").then(|| "-Util.*".into())).unwrap();
    /// assert_eq!(config.registry().unwrap().tools().len(), 1);
    /// ```
    pub fn registry(&self) -> Result<Registry, RegistryError> {
        let builder = Registry::builder().all();
        let Some(selection) = &self.tools else {
            return builder.build();
        };
        // A selection's problem names the variable and its value: the operator set it.
        builder.select(selection).build().map_err(|mut error| {
            for problem in &mut error.problems {
                if let crate::registry::RegistryProblem::Selection { what } = problem {
                    *what = format!("OXP_TOOLS=`{selection}`: {what}");
                }
            }
            error
        })
    }

    /// Applies the settings to a server. Connecting to Redis (with `OXP_REDIS_URL`) is the one
    /// part that can fail.
    ///
    /// ```
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// use oxp_runtime::{app::ServerConfig, server::Server};
    /// # let registry = oxp_runtime::Registry::builder().build().unwrap();
    /// let config = ServerConfig::from_lookup(|name| (name == "OXP_MAX_BODY_BYTES").then(|| "4096".into())).unwrap();
    /// let server = config.apply(Server::new(registry)).await.unwrap();
    /// let app: axum::Router = server.router();
    /// # });
    /// ```
    pub async fn apply(&self, server: Server) -> Result<Server, ConfigError> {
        // The identity provider first: unreachable or misconfigured, the server does not start.
        #[cfg(feature = "oauth")]
        self.auth.ready().await.map_err(|error| ConfigError {
            variable: error.setting.variable(),
            problem: error.problem,
        })?;
        #[cfg(feature = "oauth")]
        if let Some(oauth) = self.auth.oauth_verifier() {
            let oauth = oauth.config();
            tracing::info!(
                issuers = ?oauth.issuers(),
                audiences = ?oauth.audiences(),
                "accepting access tokens of the identity provider (OAuth)"
            );
        }
        // The pipeline first, whole: the fronts nested below share it as it is then.
        let store = self.idempotency_store().await?;
        let mut server = server
            .map_pipeline(|pipeline| {
                let pipeline = pipeline
                    .limits(self.max_concurrent_calls, self.max_blocking_tools)
                    .max_result_bytes(self.max_result_bytes)
                    .default_timeout(self.tool_timeout.unwrap_or(Duration::ZERO))
                    .metrics(self.metrics);
                match store {
                    Some(store) => pipeline.idempotency(Some(store)),
                    None => pipeline.idempotency(None::<InMemoryIdempotency>),
                }
            })
            .auth(self.auth.clone())
            .max_body_bytes(self.max_body_bytes)
            .langchain_compat(self.langchain_compat)
            .trust_user_id(self.trust_user_id)
            .playground(self.playground)
            .body_timeout(self.body_timeout)
            .allowed_origins(&self.allowed_origins)
            .connection_limits(self.connections.clone())
            .metrics_route(self.metrics_addr.is_none());
        if !self.allowed_hosts.is_empty() {
            server = server.allowed_hosts(&self.allowed_hosts);
        }
        if let Some(url) = &self.public_url {
            server = server.public_url(url);
        }
        #[cfg(feature = "mcp")]
        {
            // MCP on the same port, over the same pipeline (limits, idempotency, the lot).
            let mcp = self.mcp(server.pipeline().clone())?;
            server = server.nest("/mcp", mcp.into_router());
        }
        Ok(server)
    }

    /// The MCP server these settings make over `pipeline`, over HTTP and stdio alike: its
    /// state key and lifetime, what a tool that asks does for a caller that cannot answer, the
    /// operator's context, its limits.
    #[cfg(feature = "mcp")]
    pub(crate) fn mcp(
        &self,
        pipeline: crate::call::Pipeline,
    ) -> Result<crate::mcp::McpServer, ConfigError> {
        self.check_task_lifetimes(pipeline.registry())?;
        let context = super::commands::context_from_env(pipeline.registry());
        let key = self
            .state_key
            .as_ref()
            .map(|key| key.expose().as_bytes().to_vec());
        let mcp = crate::mcp::McpServer::new(pipeline);
        let mcp = match key {
            Some(key) => mcp.state_key(key, self.state_ttl),
            None => mcp.state_ttl(self.state_ttl),
        }
        .map_err(|problem| ConfigError {
            variable: "OXP_STATE_KEY",
            problem,
        })?;
        Ok(mcp
            .with_context(context)
            .single_tenant(self.mcp_single_tenant)
            .cannot_ask(self.cannot_ask)
            .max_body_bytes(self.max_body_bytes)
            .list_ttl(self.mcp_list_ttl)
            .tasks(self.task_ttl, self.lease))
    }

    /// A task tool must end within its task's time to live: a run longer than that would find
    /// its task gone (its record expired) and its result would have nowhere to go.
    #[cfg(feature = "mcp")]
    fn check_task_lifetimes(&self, registry: &crate::Registry) -> Result<(), ConfigError> {
        let long = (registry.tools().iter())
            .filter(|tool| tool.hints().task.is_some())
            .find_map(|tool| {
                let limit = (tool.descriptor().timeout_ms)
                    .map(Duration::from_millis)
                    .or(self.tool_timeout);
                match limit {
                    Some(limit) if limit < self.task_ttl => None,
                    Some(limit) => Some(format!(
                        "is {} ms, and the task tool {} may run {} ms (its timeout_ms, or \
                         OXP_TOOL_TIMEOUT_MS): its task would be forgotten before it ends. Set \
                         OXP_TASK_TTL_MS above the longest task tool's time limit",
                        self.task_ttl.as_millis(),
                        tool.id(),
                        limit.as_millis()
                    )),
                    None => Some(format!(
                        "is {} ms, and the task tool {} has no time limit (OXP_TOOL_TIMEOUT_MS=0 \
                         and no timeout_ms): its task could be forgotten before it ends. Give it \
                         a timeout_ms below OXP_TASK_TTL_MS",
                        self.task_ttl.as_millis(),
                        tool.id()
                    )),
                }
            });
        match long {
            Some(problem) => Err(ConfigError {
                variable: "OXP_TASK_TTL_MS",
                problem,
            }),
            None => Ok(()),
        }
    }

    /// Where answers to repeated `call_id`s are kept: nowhere (`OXP_IDEMPOTENCY_TTL_MS=0`),
    /// Redis (`OXP_REDIS_URL`), or memory.
    async fn idempotency_store(
        &self,
    ) -> Result<Option<Box<dyn crate::idempotency::IdempotencyStore>>, ConfigError> {
        let Some(ttl) = self.idempotency_ttl else {
            return Ok(None);
        };
        #[cfg(feature = "redis")]
        if let Some(url) = &self.redis_url {
            let store = crate::idempotency::RedisIdempotency::connect(url, ttl)
                .await
                .map_err(|e| ConfigError {
                    variable: "OXP_REDIS_URL",
                    problem: format!("cannot connect: {e}"),
                })?;
            let store = (store.lease(self.lease))
                .records(self.idempotency_capacity, self.idempotency_max_bytes)
                .records_per_caller(self.tasks_per_caller);
            return Ok(Some(Box::new(store)));
        }
        let store = InMemoryIdempotency::new(self.idempotency_capacity, ttl)
            .max_bytes(self.idempotency_max_bytes)
            .records_per_caller(self.tasks_per_caller);
        Ok(Some(Box::new(store)))
    }

    /// Installs the global log subscriber (once; later calls do nothing).
    ///
    /// ```
    /// let config = oxp_runtime::app::ServerConfig::from_lookup(|_| None).unwrap();
    /// config.init_logging();
    /// ```
    ///
    /// With the `otel` feature, call spans are also exported over OTLP (see
    /// [`otel`](crate::otel)), at `info` whatever `OXP_LOG` says: quieter logs do not lose
    /// traces.
    pub fn init_logging(&self) {
        use tracing_subscriber::Layer;
        use tracing_subscriber::layer::SubscriberExt;
        use tracing_subscriber::util::SubscriberInitExt;
        let lines = match self.log_format {
            LogFormat::Pretty => tracing_subscriber::fmt::layer().boxed(),
            LogFormat::Json => tracing_subscriber::fmt::layer().json().boxed(),
        };
        // A tool's events also reach the MCP client whose call it serves, under the same filter.
        let logs = lines
            .and_then(mcp_log_layer())
            .with_filter(self.log_filter());
        let subscriber = tracing_subscriber::registry().with(logs);
        #[cfg(feature = "otel")]
        let subscriber = subscriber.with(
            crate::otel::layer()
                .map(|layer| layer.with_filter(tracing_subscriber::filter::LevelFilter::INFO)),
        );
        let _ = subscriber.try_init();
    }

    /// `log` as a filter, with the [`QUIET_DEPENDENCIES`] it does not name held at `warn`.
    /// [`from_lookup`](Self::from_lookup) refuses a bad one; a config built by hand with one
    /// logs at `info`, and says so on stderr rather than quietly.
    pub(crate) fn log_filter(&self) -> tracing_subscriber::EnvFilter {
        let directives = with_quiet_dependencies(&self.log);
        tracing_subscriber::EnvFilter::try_new(&directives).unwrap_or_else(|error| {
            eprintln!(
                "the log filter `{}` is invalid ({error}); logging at info",
                self.log
            );
            tracing_subscriber::EnvFilter::new(with_quiet_dependencies("info"))
        })
    }
}

/// Dependencies that log per request or per connection below `warn` (rmcp three `info` lines for
/// every MCP request; hyper, h2 and the rest at `debug` and `trace`): held at `warn` whatever
/// level `OXP_LOG` sets, so that a server logs its own lines and its tools', until the operator
/// names one (`OXP_LOG=info,rmcp=info`). Their warnings and errors always reach the log.
const QUIET_DEPENDENCIES: [&str; 16] = [
    "rmcp",
    "hyper",
    "hyper_util",
    "h2",
    "tower",
    "tower_http",
    "axum",
    "reqwest",
    "redis",
    "tonic",
    "opentelemetry",
    "opentelemetry_sdk",
    "opentelemetry_otlp",
    "opentelemetry_http",
    "rustls",
    "jsonschema",
];

/// `log`'s directives, and `<dependency>=warn` for each of the [`QUIET_DEPENDENCIES`] it does
/// not name as a target (a more specific directive, `rmcp::service=info`, wins over it anyway).
fn with_quiet_dependencies(log: &str) -> String {
    let directives: Vec<&str> = log
        .split(',')
        .map(str::trim)
        .filter(|d| !d.is_empty())
        .collect();
    let named = |dependency: &str| {
        directives
            .iter()
            .any(|d| d.split(['=', '[']).next() == Some(dependency))
    };
    let mut all: Vec<String> = directives.iter().map(|d| (*d).to_owned()).collect();
    all.extend(
        QUIET_DEPENDENCIES
            .iter()
            .filter(|dependency| !named(dependency))
            .map(|dependency| format!("{dependency}=warn")),
    );
    all.join(",")
}

/// The layer that sends a tool's events to its MCP client, where MCP is built in.
pub(crate) fn mcp_log_layer<S>() -> Option<impl tracing_subscriber::Layer<S>>
where
    S: tracing::Subscriber,
{
    #[cfg(feature = "mcp")]
    return Some(crate::mcp::log_layer());
    #[cfg(not(feature = "mcp"))]
    return None::<tracing_subscriber::layer::Identity>;
}

#[cfg(test)]
mod tests {
    use super::ServerConfig;

    #[test]
    fn dependencies_are_held_at_warn_unless_named() {
        let quiet = super::with_quiet_dependencies("info");
        assert!(quiet.starts_with("info,rmcp=warn,hyper=warn,"), "{quiet}");
        let asked = super::with_quiet_dependencies("debug, rmcp=info,h2[conn]=trace");
        assert!(
            asked.starts_with("debug,rmcp=info,h2[conn]=trace,hyper=warn"),
            "{asked}"
        );
        assert!(
            !asked.contains("rmcp=warn") && !asked.contains("h2=warn"),
            "{asked}"
        );
        assert!(tracing_subscriber::EnvFilter::try_new(asked).is_ok());
    }

    #[test]
    fn a_bad_log_filter_is_a_configuration_error_not_a_quiet_default() {
        let with_log = |filter: &str| {
            let filter = filter.to_owned();
            ServerConfig::from_lookup(move |n| (n == "OXP_LOG").then(|| filter.clone()))
        };
        let error = with_log("oxp_runtime=loud").unwrap_err();
        assert_eq!(error.variable, "OXP_LOG");
        assert!(
            error
                .to_string()
                .contains("`oxp_runtime=loud` is not a log filter"),
            "{error}"
        );
        assert_eq!(
            with_log("oxp_runtime=debug,warn").unwrap().log,
            "oxp_runtime=debug,warn"
        );
        assert_eq!(ServerConfig::from_lookup(|_| None).unwrap().log, "info");
    }

    #[test]
    fn a_task_outlives_the_request_states_that_make_it() {
        let with = |vars: &'static [(&'static str, &'static str)]| {
            ServerConfig::from_lookup(move |n| {
                (vars.iter())
                    .find(|(k, _)| *k == n)
                    .map(|(_, v)| (*v).to_owned())
            })
        };
        let error = with(&[("OXP_TASK_TTL_MS", "1000"), ("OXP_STATE_TTL_MS", "5000")]).unwrap_err();
        assert_eq!(error.variable, "OXP_TASK_TTL_MS");
        assert!(
            error.to_string().contains("OXP_STATE_TTL_MS (5000 ms)"),
            "{error}"
        );
        let fine = with(&[("OXP_TASK_TTL_MS", "5000"), ("OXP_STATE_TTL_MS", "5000")]).unwrap();
        assert_eq!(fine.task_ttl.as_millis(), 5000);
        assert_eq!(
            with(&[("OXP_LEASE_MS", "10")]).unwrap_err().variable,
            "OXP_LEASE_MS"
        );
    }

    /// A task tool whose time limit outlasts its task would end to find its task forgotten.
    #[cfg(feature = "mcp")]
    #[test]
    fn a_task_tool_that_may_outlive_its_task_is_a_configuration_error() {
        /// Index everything.
        #[crate::tool(
            toolkit = "Search",
            version = "1.0.0",
            task = "optional",
            timeout_ms = 4000
        )]
        async fn reindex() {}

        let registry = crate::Registry::builder()
            .tool(reindex::TOOL)
            .build()
            .unwrap();
        let with = |pairs: &'static [(&'static str, &'static str)]| {
            ServerConfig::from_lookup(move |n| {
                (pairs.iter())
                    .find(|(k, _)| *k == n)
                    .map(|(_, v)| v.to_string())
            })
            .unwrap()
        };
        let short = with(&[("OXP_TASK_TTL_MS", "3000"), ("OXP_STATE_TTL_MS", "1000")]);
        let error = short.check_task_lifetimes(&registry).unwrap_err();
        assert_eq!(error.variable, "OXP_TASK_TTL_MS");
        assert!(
            error.to_string().contains("Search.Reindex@1.0.0"),
            "{error}"
        );
        let unlimited = with(&[("OXP_TOOL_TIMEOUT_MS", "0")]);
        assert!(
            unlimited.check_task_lifetimes(&registry).is_ok(),
            "its own timeout_ms holds"
        );
        assert!(with(&[]).check_task_lifetimes(&registry).is_ok());
    }

    #[test]
    fn metrics_settings_are_checked() {
        let with = |pairs: &'static [(&'static str, &'static str)]| {
            ServerConfig::from_lookup(move |n| {
                pairs
                    .iter()
                    .find(|(k, _)| *k == n)
                    .map(|(_, v)| v.to_string())
            })
        };
        let config = with(&[]).unwrap();
        assert!(
            config.metrics && config.metrics_addr.is_none(),
            "on, on the main port"
        );
        let config = with(&[("OXP_METRICS_ADDR", "127.0.0.1:9100")]).unwrap();
        assert_eq!(config.metrics_addr.unwrap().port(), 9100);
        assert!(!with(&[("OXP_METRICS", "false")]).unwrap().metrics);
        for (pairs, says) in [
            (&[("OXP_METRICS", "maybe")][..], "is not true or false"),
            (&[("OXP_METRICS_ADDR", "nowhere")][..], "is not an address"),
            (
                &[("OXP_METRICS_ADDR", "127.0.0.1:8000")][..],
                "the same address as OXP_ADDR",
            ),
            (
                &[
                    ("OXP_METRICS", "false"),
                    ("OXP_METRICS_ADDR", "127.0.0.1:9100"),
                ][..],
                "OXP_METRICS is false",
            ),
        ] {
            let error = with(pairs).unwrap_err();
            assert!(error.to_string().contains(says), "{pairs:?}: {error}");
            assert!(error.variable.starts_with("OXP_METRICS"), "{error}");
        }
    }
}
