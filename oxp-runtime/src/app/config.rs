//! [`ServerConfig`]: every `OXP_*` variable, read into typed configuration and applied to a
//! server. Each variable is read through its entry in [`SETTINGS`](super::SETTINGS) (its name,
//! its range, its default), a concern at a time: the address, authentication, logs, limits,
//! the store, and the calls that ask. How the state key is rotated is in [`ServerConfig`]'s
//! docs ("Rotating `OXP_STATE_KEY`"), beside the table.

use std::fmt;
use std::net::SocketAddr;
use std::time::Duration;

use super::settings::{self as var, Env, Setting};
use crate::idempotency::InMemoryIdempotency;
use crate::protocol::Sensitive;
use crate::registry::{Registry, RegistryError};
use crate::server::{ConnectionLimits, Server, ServerAuth};

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

/// Everything [`serve`](super::serve) reads from the environment: every variable, its default
/// and what it means, is in [`SETTINGS`](super::SETTINGS), whose table the guide's
/// `docs/settings.md` copies. A value a variable cannot take is a [`ConfigError`] naming it.
///
#[doc = super::settings::settings_table!()]
///
/// # Rotating `OXP_STATE_KEY`
///
/// The state key seals what a call that asks hands its client between rounds (and the MCP
/// session ids of earlier revisions' clients that can be asked); a state names the key that
/// sealed it, by an id derived from the key. `OXP_STATE_KEY` seals, and each key in
/// `OXP_STATE_KEYS_PREVIOUS` (comma-separated) still opens what it sealed. To change the key
/// without breaking a call in flight, roll out each step to every replica before the next:
///
/// 1. add the new key to `OXP_STATE_KEYS_PREVIOUS`;
/// 2. make the new key `OXP_STATE_KEY`, and the old one `OXP_STATE_KEYS_PREVIOUS`;
/// 3. once `OXP_STATE_TTL_MS` has passed, drop the old key from `OXP_STATE_KEYS_PREVIOUS`.
///
/// Replicas one step apart open each other's states; a state sealed with a key no longer held
/// is refused as "sealed with another key".
///
/// ```
/// // Step 2 on one replica: the new key seals, the old one still opens.
/// let config = oxp_runtime::app::ServerConfig::from_lookup(|name| match name {
///     "OXP_STATE_KEY" => Some("the new state key of 32 bytes or more".into()),
///     "OXP_STATE_KEYS_PREVIOUS" => Some("the old state key of 32 bytes or more".into()),
///     _ => None,
/// })
/// .unwrap();
/// assert_eq!(config.previous_state_keys.len(), 1);
/// ```
///
/// # Reading the environment
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
    pub state_key: Option<Sensitive>,
    /// `OXP_STATE_KEYS_PREVIOUS`: earlier state keys, which open what they sealed but seal
    /// nothing (see "Rotating `OXP_STATE_KEY`" above).
    pub previous_state_keys: Vec<Sensitive>,
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

/// Adds the resource server `OXP_OAUTH_*` configures, if it does.
#[cfg(feature = "oauth")]
fn oauth_from_env(auth: ServerAuth, env: &Env<'_>) -> Result<ServerAuth, ConfigError> {
    use crate::oauth::OAuth;
    let issuers = env.list(&var::OXP_OAUTH_ISSUER);
    if issuers.is_empty() {
        return match oauth_settings().skip(1).find(|s| env.is_set(s)) {
            Some(setting) => Err(ConfigError {
                variable: setting.name,
                problem:
                    "is set but OXP_OAUTH_ISSUER is not: name the identity provider's issuer URL"
                        .into(),
            }),
            None => Ok(auth),
        };
    }
    let Some(resource) = env.set(&var::OXP_PUBLIC_URL) else {
        return Err(ConfigError {
            variable: var::OXP_PUBLIC_URL.name,
            problem: "must be set with OXP_OAUTH_ISSUER: it is the URL clients reach this server at, which tokens must be issued for (`https://tools.example.com`)".into(),
        });
    };
    let mut oauth = OAuth::new(resource).audience(env.list(&var::OXP_OAUTH_AUDIENCE));
    for issuer in issuers {
        oauth = oauth.issuer(issuer);
    }
    if let Some(url) = env.set(&var::OXP_OAUTH_JWKS_URL) {
        oauth = oauth.jwks_url(url);
    }
    // Providers and docs write scope lists with spaces (the claim's own form) or commas.
    let scopes = env.set(&var::OXP_OAUTH_SCOPES).unwrap_or_default();
    oauth = oauth.scopes(scopes.split([',', ' ']).filter(|s| !s.is_empty()));
    // Stricter than other switches: the words identity providers' docs use, no `on`/`off`.
    oauth = oauth.strict_token_type(
        match env.text(&var::OXP_OAUTH_STRICT_TOKEN_TYPE)?.as_ref() {
            "false" | "0" => false,
            "true" | "1" => true,
            _ => {
                return Err(ConfigError {
                    variable: var::OXP_OAUTH_STRICT_TOKEN_TYPE.name,
                    problem: "must be `true` or `false`".into(),
                });
            }
        },
    );
    oauth = oauth_introspection(oauth, env)?;
    for rule in env.list(&var::OXP_OAUTH_SCOPE_HIERARCHY) {
        let Some((broader, narrower)) = rule.split_once('>') else {
            return Err(ConfigError {
                variable: var::OXP_OAUTH_SCOPE_HIERARCHY.name,
                problem: format!(
                    "`{rule}` is not `broader>narrower`: write e.g. `files:admin>files:write,files:write>files:read`"
                ),
            });
        };
        oauth = oauth.scope_implies(broader.trim(), [narrower.trim()]);
    }
    if let Some(path) = env.set(&var::OXP_OAUTH_CA_FILE) {
        let pem = std::fs::read(&path).map_err(|error| ConfigError {
            variable: var::OXP_OAUTH_CA_FILE.name,
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

/// Opaque tokens checked at `OXP_OAUTH_INTROSPECTION_URL`, as the client its two companions
/// name: all three, or none.
#[cfg(feature = "oauth")]
fn oauth_introspection(
    oauth: crate::oauth::OAuth,
    env: &Env<'_>,
) -> Result<crate::oauth::OAuth, ConfigError> {
    let problem = |setting: &Setting, problem: &str| ConfigError {
        variable: setting.name,
        problem: problem.into(),
    };
    match (
        env.set(&var::OXP_OAUTH_INTROSPECTION_URL),
        env.set(&var::OXP_OAUTH_CLIENT_ID),
        env.set(&var::OXP_OAUTH_CLIENT_SECRET),
    ) {
        (Some(url), Some(id), Some(secret)) => Ok(oauth.introspection(url, id, secret)),
        (None, None, None) => Ok(oauth),
        (None, _, _) => Err(problem(
            &var::OXP_OAUTH_INTROSPECTION_URL,
            "must be set with OXP_OAUTH_CLIENT_ID and OXP_OAUTH_CLIENT_SECRET: they are the client it introspects as",
        )),
        (Some(_), None, _) => Err(problem(
            &var::OXP_OAUTH_CLIENT_ID,
            "must be set with OXP_OAUTH_INTROSPECTION_URL: the client the server introspects tokens as",
        )),
        (Some(_), _, None) => Err(problem(
            &var::OXP_OAUTH_CLIENT_SECRET,
            "must be set with OXP_OAUTH_INTROSPECTION_URL: the secret of the client the server introspects tokens as",
        )),
    }
}

/// Without the `oauth` feature, an `OXP_OAUTH_*` variable is a mistake to say, not to ignore:
/// the server would otherwise run without the authentication its operator asked for.
#[cfg(not(feature = "oauth"))]
fn oauth_from_env(auth: ServerAuth, env: &Env<'_>) -> Result<ServerAuth, ConfigError> {
    match oauth_settings().find(|s| env.is_set(s)) {
        Some(setting) => Err(ConfigError {
            variable: setting.name,
            problem: "needs the `oauth` cargo feature: `oxp-runtime = { version = \"0.1\", features = [\"oauth\"] }`".into(),
        }),
        None => Ok(auth),
    }
}

/// The `OXP_OAUTH_*` variables, `OXP_OAUTH_ISSUER` first: each an error when it cannot be used.
fn oauth_settings() -> impl Iterator<Item = &'static Setting> {
    (super::SETTINGS.iter()).filter(|s| s.feature == Some("oauth"))
}

/// `setting`'s address (its default's when unset), or an error showing one `like`.
fn address(env: &Env<'_>, setting: &Setting, like: &str) -> Result<SocketAddr, ConfigError> {
    let value = env.text(setting)?;
    value.parse().map_err(|_| ConfigError {
        variable: setting.name,
        problem: format!("`{value}` is not an address like {like}"),
    })
}

/// Who may call: HS256 tokens, API keys, an identity provider's tokens.
fn auth(env: &Env<'_>) -> Result<ServerAuth, ConfigError> {
    let mut auth = ServerAuth::default();
    if let Some(secret) = env.set(&var::OXP_JWT_SECRET) {
        auth = auth
            .jwt_secret(secret)
            .jwt_audience(env.list(&var::OXP_JWT_AUDIENCE));
    } else if env.is_set(&var::OXP_JWT_AUDIENCE) {
        return Err(ConfigError {
            variable: var::OXP_JWT_AUDIENCE.name,
            problem: "is set but OXP_JWT_SECRET is not: set both".into(),
        });
    }
    for key in env.list(&var::OXP_API_KEYS) {
        auth = auth.api_key(key);
    }
    oauth_from_env(auth, env)
}

/// The log filter, checked here so that a typo is an error rather than a quiet default, and
/// the log's format.
fn logging(env: &Env<'_>) -> Result<(String, LogFormat), ConfigError> {
    let log = env.text(&var::OXP_LOG)?.into_owned();
    if let Err(error) = tracing_subscriber::EnvFilter::try_new(&log) {
        return Err(ConfigError {
            variable: var::OXP_LOG.name,
            problem: format!(
                "`{log}` is not a log filter ({error}); write a level (`info`) or \
                 directives (`oxp_runtime=debug,info`)"
            ),
        });
    }
    let log_format = match env.text(&var::OXP_LOG_FORMAT)?.as_ref() {
        "pretty" => LogFormat::Pretty,
        "json" => LogFormat::Json,
        other => {
            return Err(ConfigError {
                variable: var::OXP_LOG_FORMAT.name,
                problem: format!("`{other}` is not `pretty` or `json`"),
            });
        }
    };
    Ok((log, log_format))
}

/// A size in bytes or a count, as the platform holds it (saturating where it cannot).
fn size(n: u64) -> usize {
    usize::try_from(n).unwrap_or(usize::MAX)
}

/// A duration where `0` turns the feature off.
fn zero_is_off(duration: Duration) -> Option<Duration> {
    (!duration.is_zero()).then_some(duration)
}

/// The accept loop's limits: connections, how long a head and a write may take, how large a
/// head may be.
fn connections(env: &Env<'_>) -> Result<ConnectionLimits, ConfigError> {
    Ok(ConnectionLimits {
        max_connections: env.number_if_set(&var::OXP_MAX_CONNECTIONS)?.map(size),
        header_timeout: env.millis(&var::OXP_HEADER_TIMEOUT_MS)?,
        write_timeout: env.millis(&var::OXP_WRITE_TIMEOUT_MS)?,
        max_header_bytes: size(env.number(&var::OXP_MAX_HEADER_BYTES)?),
        ..Default::default()
    })
}

/// `OXP_REDIS_URL`, in a binary that can use it.
fn redis_url(env: &Env<'_>) -> Result<Option<String>, ConfigError> {
    let redis_url = env.set(&var::OXP_REDIS_URL);
    if redis_url.is_some() && !cfg!(feature = "redis") {
        return Err(ConfigError {
            variable: var::OXP_REDIS_URL.name,
            problem: "needs oxp-runtime's `redis` cargo feature: add `features = [\"redis\"]`"
                .into(),
        });
    }
    Ok(redis_url)
}

/// Whether calls are counted, and where `/metrics` is served when not on `addr`.
fn metrics(env: &Env<'_>, addr: SocketAddr) -> Result<(bool, Option<SocketAddr>), ConfigError> {
    let metrics = env.switch(&var::OXP_METRICS)?;
    let metrics_addr = match env.is_set(&var::OXP_METRICS_ADDR) {
        false => None,
        true if !metrics => {
            return Err(ConfigError {
                variable: var::OXP_METRICS_ADDR.name,
                problem: "is set but OXP_METRICS is false: unset one".into(),
            });
        }
        true => Some(address(env, &var::OXP_METRICS_ADDR, "127.0.0.1:9100")?),
    };
    if metrics_addr == Some(addr) {
        return Err(ConfigError {
            variable: var::OXP_METRICS_ADDR.name,
            problem: "is the same address as OXP_ADDR: pick another port".into(),
        });
    }
    Ok((metrics, metrics_addr))
}

/// A retired variable is refused: MCP keeps no sessions (any replica answers any request), so
/// the session limits have nothing to limit, and a setting that would do nothing is a mistake
/// to report.
fn refuse_retired(env: &Env<'_>) -> Result<(), ConfigError> {
    let retired = (super::SETTINGS.iter()).filter(|s| s.kind == var::SettingKind::Retired);
    match retired.into_iter().find(|s| env.is_set(s)) {
        Some(setting) => Err(ConfigError {
            variable: setting.name,
            problem: "MCP over HTTP keeps no sessions (every request is served on its own, by \
                      any replica): unset it"
                .into(),
        }),
        None => Ok(()),
    }
}

/// What `OXP_STATE_KEY` and each of `OXP_STATE_KEYS_PREVIOUS` must be.
const SHORT_STATE_KEY: &str =
    "is shorter than 32 bytes: use 32 random bytes or more (`openssl rand -base64 48`)";

/// The keys that seal and open request states: the one that seals, and earlier ones that still
/// open (see [`ServerConfig`]'s "Rotating `OXP_STATE_KEY`").
fn state_keys(env: &Env<'_>) -> Result<(Option<Sensitive>, Vec<Sensitive>), ConfigError> {
    let state_key = env.set(&var::OXP_STATE_KEY);
    if state_key.as_ref().is_some_and(|key| key.len() < 32) {
        return Err(ConfigError {
            variable: var::OXP_STATE_KEY.name,
            problem: SHORT_STATE_KEY.into(),
        });
    }
    let previous = var::secret_list(env, &var::OXP_STATE_KEYS_PREVIOUS, |at, key| {
        match key.len() < 32 {
            true => Err(format!("entry {at} {SHORT_STATE_KEY}")),
            false => Ok(()),
        }
    })?;
    if !previous.is_empty() && state_key.is_none() {
        return Err(ConfigError {
            variable: var::OXP_STATE_KEYS_PREVIOUS.name,
            problem: "is set but OXP_STATE_KEY is not: earlier keys open states only beside the \
                      key that seals them (see rotating the state key in docs/settings.md)"
                .into(),
        });
    }
    Ok((state_key.map(Sensitive::new), previous))
}

/// How long what a call that asks establishes is kept: its request states, and the task it may
/// become.
fn asking_lifetimes(
    env: &Env<'_>,
    idempotency_ttl: Option<Duration>,
) -> Result<(Duration, Duration), ConfigError> {
    // A call that asks completes once because its end is kept in the idempotency store:
    // a state that outlived that record could run the call's last round again.
    let state_ttl = env
        .millis_if_set(&var::OXP_STATE_TTL_MS)?
        .unwrap_or(idempotency_ttl.unwrap_or(crate::idempotency::DEFAULT_TTL));
    if let Some(kept) = idempotency_ttl.filter(|kept| state_ttl > *kept) {
        return Err(ConfigError {
            variable: var::OXP_STATE_TTL_MS.name,
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
    let task_ttl = env.millis(&var::OXP_TASK_TTL_MS)?;
    if task_ttl < state_ttl {
        return Err(ConfigError {
            variable: var::OXP_TASK_TTL_MS.name,
            problem: format!(
                "is shorter than OXP_STATE_TTL_MS ({} ms): a call that asks before it becomes \
                 a task is kept from making it twice only while the task is kept, so a task \
                 must live at least as long as a request state",
                state_ttl.as_millis()
            ),
        });
    }
    Ok((state_ttl, task_ttl))
}

/// What a tool that asks does for a caller that cannot answer, unless it says.
fn cannot_ask(env: &Env<'_>) -> Result<crate::ask::CannotAsk, ConfigError> {
    env.text(&var::OXP_CANNOT_ASK)?
        .parse()
        .map_err(|_| ConfigError {
            variable: var::OXP_CANNOT_ASK.name,
            problem: format!("is not one of {}", crate::rules::CANNOT_ASK.join(", ")),
        })
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
        let env = Env::new(&lookup);
        let addr = address(&env, &var::OXP_ADDR, "127.0.0.1:8000")?;
        let auth = auth(&env)?;
        let (log, log_format) = logging(&env)?;
        let playground =
            (env.switch_if_set(&var::OXP_PLAYGROUND)?).unwrap_or_else(|| addr.ip().is_loopback());
        let langchain_compat = env.switch(&var::OXP_LANGCHAIN_COMPAT)?;
        let max_body_bytes = size(env.number(&var::OXP_MAX_BODY_BYTES)?);
        let idempotency_ttl = zero_is_off(env.millis(&var::OXP_IDEMPOTENCY_TTL_MS)?);
        let redis_url = redis_url(&env)?;
        let connections = connections(&env)?;
        let (metrics, metrics_addr) = metrics(&env, addr)?;
        refuse_retired(&env)?;
        let (state_key, previous_state_keys) = state_keys(&env)?;
        let cannot_ask = cannot_ask(&env)?;
        let (state_ttl, task_ttl) = asking_lifetimes(&env, idempotency_ttl)?;
        let idempotency_capacity = env.number(&var::OXP_IDEMPOTENCY_CAPACITY)?;
        let tool_timeout = zero_is_off(env.millis(&var::OXP_TOOL_TIMEOUT_MS)?);
        Ok(ServerConfig {
            max_concurrent_calls: match env.number_if_set(&var::OXP_MAX_CONCURRENT_CALLS)? {
                None => Some(crate::call::default_max_calls()),
                Some(0) => None,
                Some(n) => Some(size(n)),
            },
            max_blocking_tools: size(env.number(&var::OXP_MAX_BLOCKING_TOOLS)?),
            shutdown_grace: env.millis(&var::OXP_SHUTDOWN_GRACE_MS)?,
            idempotency_ttl,
            idempotency_capacity,
            tasks_per_caller: env
                .number_if_set(&var::OXP_TASKS_PER_CALLER)?
                .unwrap_or((idempotency_capacity / crate::idempotency::CALLERS_SHARING).max(1)),
            idempotency_max_bytes: env.number(&var::OXP_IDEMPOTENCY_MAX_BYTES)?,
            redis_url,
            addr,
            auth,
            max_body_bytes,
            body_timeout: env.millis(&var::OXP_BODY_TIMEOUT_MS)?,
            max_result_bytes: size(env.number(&var::OXP_MAX_RESULT_BYTES)?),
            tool_timeout,
            public_url: env.set(&var::OXP_PUBLIC_URL),
            tools: env.raw(&var::OXP_TOOLS),
            allowed_origins: env.list(&var::OXP_ALLOWED_ORIGINS),
            allowed_hosts: env.list(&var::OXP_ALLOWED_HOSTS),
            connections,
            mcp_single_tenant: env.switch(&var::OXP_MCP_SINGLE_TENANT)?,
            mcp_list_ttl: env.millis(&var::OXP_MCP_LIST_TTL_MS)?,
            state_key,
            previous_state_keys,
            state_ttl,
            cannot_ask,
            task_ttl,
            lease: env.millis(&var::OXP_LEASE_MS)?,
            langchain_compat,
            trust_user_id: env.switch(&var::OXP_TRUST_USER_ID)?,
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
            server = server.mount("/mcp", mcp.into_service());
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
        let mut mcp = match key {
            Some(key) => mcp.state_key(key, self.state_ttl),
            None => mcp.state_ttl(self.state_ttl),
        }
        .map_err(|problem| ConfigError {
            variable: var::OXP_STATE_KEY.name,
            problem,
        })?;
        if !self.previous_state_keys.is_empty() {
            let previous =
                (self.previous_state_keys.iter()).map(|key| key.expose().as_bytes().to_vec());
            mcp = mcp
                .previous_state_keys(previous)
                .map_err(|problem| ConfigError {
                    variable: var::OXP_STATE_KEYS_PREVIOUS.name,
                    problem,
                })?;
        }
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
    fn check_task_lifetimes(
        &self,
        registry: &crate::registry::Registry,
    ) -> Result<(), ConfigError> {
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
    use std::time::Duration;

    use super::ServerConfig;

    fn with(pairs: &[(&'static str, &str)]) -> Result<ServerConfig, super::ConfigError> {
        let pairs: Vec<(&str, String)> =
            (pairs.iter()).map(|(k, v)| (*k, (*v).to_owned())).collect();
        ServerConfig::from_lookup(move |n| {
            (pairs.iter())
                .find(|(k, _)| *k == n)
                .map(|(_, v)| v.clone())
        })
    }

    /// The list is the parser's: every variable it reads is listed, and every listed one is
    /// read (but `OXP_USER_ID`, which the stdio context reads on its own).
    #[test]
    fn the_parser_reads_exactly_the_listed_variables() {
        let asked = std::sync::Mutex::new(std::collections::BTreeSet::new());
        ServerConfig::from_lookup(|name| {
            asked.lock().unwrap().insert(name.to_owned());
            None
        })
        .unwrap();
        let asked = asked.into_inner().unwrap();
        let listed: std::collections::BTreeSet<String> = (super::super::SETTINGS.iter())
            .map(|s| s.name.to_owned())
            .collect();
        let unlisted: Vec<&String> = asked.difference(&listed).collect();
        assert!(
            unlisted.is_empty(),
            "read but not in SETTINGS: {unlisted:?}"
        );
        let unread: Vec<&String> = listed.difference(&asked).collect();
        assert_eq!(unread, ["OXP_USER_ID"], "in SETTINGS but never read");
    }

    /// An unset variable is what the builders do without it: the table's defaults are the
    /// runtime's own.
    #[test]
    fn unset_variables_take_the_builders_defaults() {
        let config = with(&[]).unwrap();
        let limits = crate::server::ConnectionLimits::default();
        assert_eq!(config.addr.to_string(), super::DEFAULT_ADDR);
        assert_eq!(config.max_body_bytes, crate::server::DEFAULT_MAX_BODY_BYTES);
        assert_eq!(config.body_timeout, crate::server::DEFAULT_BODY_TIMEOUT);
        assert_eq!(
            config.max_result_bytes,
            crate::call::DEFAULT_MAX_RESULT_BYTES
        );
        assert_eq!(config.tool_timeout, Some(crate::call::DEFAULT_TOOL_TIMEOUT));
        assert_eq!(config.max_blocking_tools, crate::call::DEFAULT_MAX_BLOCKING);
        assert_eq!(config.connections.header_timeout, limits.header_timeout);
        assert_eq!(config.connections.write_timeout, limits.write_timeout);
        assert_eq!(config.connections.max_header_bytes, limits.max_header_bytes);
        assert_eq!(config.connections.max_connections, limits.max_connections);
        assert_eq!(
            config.idempotency_ttl,
            Some(crate::idempotency::DEFAULT_TTL)
        );
        assert_eq!(
            config.idempotency_capacity,
            crate::idempotency::DEFAULT_CAPACITY
        );
        assert_eq!(
            config.idempotency_max_bytes,
            crate::idempotency::DEFAULT_MAX_BYTES
        );
        assert_eq!(config.task_ttl, crate::tasks::DEFAULT_TTL);
        assert_eq!(config.lease, crate::tasks::DEFAULT_LEASE);
        assert_eq!(config.state_ttl, crate::idempotency::DEFAULT_TTL);
        assert_eq!(config.shutdown_grace, Duration::from_secs(30));
        assert_eq!(config.mcp_list_ttl, Duration::from_secs(300));
        assert_eq!(config.cannot_ask, crate::ask::CannotAsk::default());
        assert_eq!(config.log_format, super::LogFormat::default());
        assert_eq!(
            config.max_concurrent_calls,
            Some(crate::call::default_max_calls())
        );
        assert!(config.state_key.is_none() && config.previous_state_keys.is_empty());
        // Each listed value default reads as if it were set to it (an `OXP_OAUTH_*` one is
        // read only beside an issuer).
        for setting in super::super::SETTINGS {
            let crate::app::SettingDefault::Value(value) = setting.default else {
                continue;
            };
            if setting.feature == Some("oauth") {
                continue;
            }
            let set = with(&[(setting.name, value)]).unwrap();
            assert_eq!(
                format!("{set:?}"),
                format!("{config:?}"),
                "{}",
                setting.name
            );
        }
    }

    #[test]
    fn previous_state_keys_are_checked_by_place_and_never_shown() {
        let key = "the current state key of 32 bytes or more";
        let old = "an earlier state key of 32 bytes or more";
        let config = with(&[
            ("OXP_STATE_KEY", key),
            ("OXP_STATE_KEYS_PREVIOUS", &format!(" {old} ,{key},")),
        ])
        .unwrap();
        let previous: Vec<&str> = (config.previous_state_keys.iter())
            .map(|k| k.expose())
            .collect();
        assert_eq!(previous, [old, key]);
        assert!(!format!("{config:?}").contains(old), "redacted in Debug");
        let error = with(&[
            ("OXP_STATE_KEY", key),
            (
                "OXP_STATE_KEYS_PREVIOUS",
                &format!("{old},secret-but-short"),
            ),
        ])
        .unwrap_err();
        assert_eq!(error.variable, "OXP_STATE_KEYS_PREVIOUS");
        assert!(
            error
                .problem
                .starts_with("entry 2 is shorter than 32 bytes"),
            "{error}"
        );
        assert!(!error.to_string().contains("secret-but-short"), "{error}");
        let error = with(&[("OXP_STATE_KEYS_PREVIOUS", old)]).unwrap_err();
        assert_eq!(error.variable, "OXP_STATE_KEYS_PREVIOUS");
        assert!(error.problem.contains("OXP_STATE_KEY is not"), "{error}");
        assert!(!error.to_string().contains(old), "{error}");
    }

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

        let registry = crate::registry::Registry::builder()
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
