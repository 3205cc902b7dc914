//! The `OXP_*` variables, written once: [`SETTINGS`] lists each with its default, its kind and
//! what it means. The parser ([`ServerConfig::from_lookup`](super::ServerConfig::from_lookup))
//! reads each through its entry here (its name, its range, its default), the rustdoc table of
//! [`SETTINGS`] and [`ServerConfig`](super::ServerConfig) is made of the same entries at compile
//! time ([`SETTINGS_TABLE`]), and `docs/settings.md`, the guide's copy, is held to that table by
//! a test.

use std::borrow::Cow;
use std::time::Duration;

use super::ConfigError;

/// One `OXP_*` variable.
///
/// ```
/// let addr = oxp_runtime::app::SETTINGS.iter().find(|s| s.name == "OXP_ADDR").unwrap();
/// assert_eq!(addr.default, oxp_runtime::app::SettingDefault::Value("127.0.0.1:8000"));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Setting {
    /// The variable's name.
    pub name: &'static str,
    /// What an unset (or empty) variable means.
    pub default: SettingDefault,
    /// What its value is.
    pub kind: SettingKind,
    /// The cargo feature it needs, if any: set without it, it is a configuration error.
    pub feature: Option<&'static str>,
    /// What it does, in Markdown (one line).
    pub meaning: &'static str,
}

/// What an unset `OXP_*` variable means.
///
/// ```
/// use oxp_runtime::app::{SETTINGS, SettingDefault};
/// let lease = SETTINGS.iter().find(|s| s.name == "OXP_LEASE_MS").unwrap();
/// assert_eq!(lease.default, SettingDefault::Value("30000"));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum SettingDefault {
    /// Nothing: the feature it turns on stays off.
    Unset,
    /// The same as the variable set to this value.
    Value(&'static str),
    /// Worked out when the settings are read (from another setting, the machine or the
    /// address), as this Markdown says.
    Derived(&'static str),
}

/// What an `OXP_*` variable's value is. Surrounding spaces are trimmed, and an empty value is
/// the same as none.
///
/// ```
/// use oxp_runtime::app::{SETTINGS, SettingKind};
/// let cap = SETTINGS.iter().find(|s| s.name == "OXP_MAX_HEADER_BYTES").unwrap();
/// assert_eq!(cap.kind, SettingKind::Number { min: 8192, max: 16777216 });
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum SettingKind {
    /// Text: a URL, a path, a filter, a selection.
    Text,
    /// A secret, never shown in an error or a log.
    Secret,
    /// Comma-separated values.
    List,
    /// Comma-separated secrets, never shown in an error or a log.
    SecretList,
    /// A socket address, like `127.0.0.1:8000`.
    Address,
    /// `true` or `false` (also `1`/`0`, `on`/`off`).
    Switch,
    /// A whole number from `min` to `max`.
    Number {
        /// The smallest accepted.
        min: u64,
        /// The largest accepted.
        max: u64,
    },
    /// A duration in milliseconds, from `min` to ten years.
    Millis {
        /// The shortest accepted.
        min: u64,
    },
    /// One of these words.
    OneOf(&'static [&'static str]),
    /// No longer read: setting it is an error that says why.
    Retired,
}

/// Ten years: the longest any duration setting may be.
pub(crate) const MAX_MS: u64 = 10 * 365 * 24 * 3600 * 1000;

/// The Markdown of a [`SettingDefault`], at compile time.
macro_rules! default_markdown {
    (unset) => {
        "–"
    };
    (value $value:literal) => {
        concat!("`", $value, "`")
    };
    (derived $text:literal) => {
        $text
    };
}

pub(crate) use default_markdown;

macro_rules! default_value {
    (unset) => {
        SettingDefault::Unset
    };
    (value $value:literal) => {
        SettingDefault::Value($value)
    };
    (derived $text:literal) => {
        SettingDefault::Derived($text)
    };
}

macro_rules! feature_value {
    () => {
        None
    };
    ($feature:literal) => {
        Some($feature)
    };
}

/// Each entry: its meaning as doc comments, then `NAME(kind, default)` or
/// `NAME(kind, default, feature "f")`, where default is `unset`, `value "v"` or `derived "text"`.
/// Makes a `pub(crate) const` per variable (what the parser reads), [`SETTINGS`], and the
/// `settings_table!()` macro that [`SETTINGS_TABLE`] and the rustdoc tables are.
macro_rules! settings {
    ($(
        $(#[doc = $meaning:literal])+
        $name:ident($kind:expr, $default:ident $($default_text:literal)? $(, feature $feature:literal)?);
    )*) => {
        $(
            #[doc = concat!("`", stringify!($name), "`:", $($meaning),+)]
            pub(crate) const $name: Setting = Setting {
                name: stringify!($name),
                default: default_value!($default $($default_text)?),
                kind: {
                    #[allow(unused_imports)]
                    use SettingKind::*;
                    $kind
                },
                feature: feature_value!($($feature)?),
                meaning: concat!($($meaning),+).trim_ascii_start(),
            };
        )*

        /// Every `OXP_*` variable, in the order of the table.
        const ALL: &[Setting] = &[$($name),*];

        /// The settings table in Markdown, made at compile time of the same entries.
        macro_rules! settings_table {
            () => {
                concat!(
                    "| variable | default | meaning |\n|---|---|---|\n",
                    $(
                        "| `", stringify!($name), "` | ",
                        $crate::app::settings::default_markdown!($default $($default_text)?),
                        " |", $($meaning),+,
                        $(" (cargo feature `", $feature, "`)",)?
                        " |\n",
                    )*
                )
            };
        }
    };
}

settings! {
    /// address to listen on
    OXP_ADDR(Address, value "127.0.0.1:8000");
    /// comma-separated API keys, accepted in `OXP-API-Key`, `OTC-API-Key`, `X-API-Key` or as a
    /// bearer token
    OXP_API_KEYS(SecretList, unset);
    /// accept HS256 JWT bearer tokens signed with this secret (`exp` required, 60 s leeway;
    /// `none`/RS*/ES* refused)
    OXP_JWT_SECRET(Secret, unset);
    /// comma-separated audiences; a token carrying an `aud` must name one (the spec's MUST: with
    /// no list, a token with `aud` is refused); needs `OXP_JWT_SECRET`
    OXP_JWT_AUDIENCE(List, unset);
    /// accept access tokens of these identity providers: comma-separated issuer URLs, each
    /// matched exactly against `iss`; needs `OXP_PUBLIC_URL`; see docs/oauth.md
    OXP_OAUTH_ISSUER(List, unset, feature "oauth");
    /// the key set's URL, instead of RFC 8414 / OpenID discovery
    OXP_OAUTH_JWKS_URL(Text, derived "from each issuer's metadata", feature "oauth");
    /// comma-separated audiences; a token's `aud` must name one (a token with no `aud` is
    /// refused)
    OXP_OAUTH_AUDIENCE(List, derived "`OXP_PUBLIC_URL` and its `/mcp`", feature "oauth");
    /// scopes every request needs (comma- or space-separated); without them, 403
    /// `insufficient_scope`
    OXP_OAUTH_SCOPES(List, unset, feature "oauth");
    /// accept only tokens typed `at+jwt` (RFC 9068), refusing plain `JWT` and ID tokens (`true`
    /// or `false`, `1` or `0`)
    OXP_OAUTH_STRICT_TOKEN_TYPE(Switch, value "false", feature "oauth");
    /// check opaque (non-JWT) tokens at this RFC 7662 endpoint, as the client
    /// `OXP_OAUTH_CLIENT_ID` / `OXP_OAUTH_CLIENT_SECRET` (all three together); active answers
    /// kept ≤ 1 minute and never past `exp`, inactive ones never
    OXP_OAUTH_INTROSPECTION_URL(Text, unset, feature "oauth");
    /// the client the server introspects tokens as, at `OXP_OAUTH_INTROSPECTION_URL`
    OXP_OAUTH_CLIENT_ID(Text, unset, feature "oauth");
    /// the secret of the client `OXP_OAUTH_CLIENT_ID`
    OXP_OAUTH_CLIENT_SECRET(Secret, unset, feature "oauth");
    /// a PEM file of CA certificates to trust besides Mozilla's roots when fetching from the
    /// provider (an intranet Keycloak)
    OXP_OAUTH_CA_FILE(Text, unset, feature "oauth");
    /// comma-separated `broader>narrower` pairs (`files:admin>files:write`): a token granting
    /// the broader scope is granted the narrower ones, transitively
    OXP_OAUTH_SCOPE_HIERARCHY(List, unset, feature "oauth");
    /// request body cap on every route, `/mcp` included (413 above it; at once when
    /// `Content-Length` says so); from 1 byte to 1 TiB
    OXP_MAX_BODY_BYTES(Number { min: 1, max: 1 << 40 }, value "1048576");
    /// a request body must arrive whole within this, once the server first waits on it (else
    /// 400)
    OXP_BODY_TIMEOUT_MS(Millis { min: 1 }, value "30000");
    /// the largest result a tool may return, as JSON; a larger one is `success: false` saying
    /// so
    OXP_MAX_RESULT_BYTES(Number { min: 1, max: 1 << 40 }, value "16777216");
    /// the URL clients reach the server at, for authorization `check_url`s behind a proxy and
    /// the MCP Server Card's endpoint (`…/mcp`); its origin is allowed; with
    /// `OXP_OAUTH_ISSUER`, the resource tokens must be issued for (required then)
    OXP_PUBLIC_URL(Text, unset);
    /// comma-separated origins (`https://app.example.com`) whose web pages may call the server;
    /// a request with any other `Origin` is a 403 on every route but the public discovery
    /// documents (MCP Server Card, AI Catalog)
    OXP_ALLOWED_ORIGINS(List, derived "– (only the server's own origins: `http://` and each \
        address it listens on, every interface's for `0.0.0.0`, and `OXP_PUBLIC_URL`'s; never \
        the one a request's `Host` names)");
    /// the server answers only to its own names as `Host` (any port): the addresses it listens
    /// on (every interface's for `0.0.0.0`), `localhost`, `127.0.0.1` and `[::1]` where it
    /// listens on loopback, and `OXP_PUBLIC_URL`'s host, so a page on a rebound name can neither
    /// call nor read it (403 on every route, GETs and `/health` included); more names here (a
    /// name a proxy passes through as `Host`)
    OXP_ALLOWED_HOSTS(List, unset);
    /// which tools every front exposes (OXP, MCP, `tools`, `dispatch`; `lock` records all):
    /// `Toolkit.*`, `Toolkit.Name`, `Toolkit.Name@1` (major 1), `tag:NAME`, `-` before one to
    /// exclude, e.g. `tag:math,-Util.*`; resources and prompts by their own items,
    /// `resource:URI` (as registered) and `prompt:NAME`, a kind with no inclusion served whole;
    /// an item that matches nothing, or no tool left, is a start-up error
    /// (`Registry::builder().all().select("…")` in code)
    OXP_TOOLS(Text, derived "every tool");
    /// compatibility with LangChain's clients: bare list for their user agents, top-level
    /// `success`/`value`, calls by wire name, request-level `user_id`
    OXP_LANGCHAIN_COMPAT(Switch, value "false");
    /// time limit for tools without their own `timeout_ms` (expiry: `success: false`,
    /// `can_retry: true`); `0` for none
    OXP_TOOL_TIMEOUT_MS(Millis { min: 0 }, value "60000");
    /// `0` for no limit; tool runs at once; over it, an immediate 400 "temporarily unavailable"
    /// with `Retry-After-Ms` and `x-should-retry: true`. A run holds its place until it ends,
    /// whether or not its client still waits
    OXP_MAX_CONCURRENT_CALLS(Number { min: 0, max: 10_000_000 },
        derived "512 per core the process may use");
    /// sync tools running at once on blocking threads; a timed-out one is answered at once but
    /// holds its place until its thread returns, so stuck tools never take more threads than
    /// this
    OXP_MAX_BLOCKING_TOOLS(Number { min: 1, max: 100_000 }, value "64");
    /// open connections, over the main port and `OXP_METRICS_ADDR` together (the metrics port
    /// holds at most an eighth); one over it is closed at once
    OXP_MAX_CONNECTIONS(Number { min: 1, max: 10_000_000 },
        derived "under the file limit (at most 10000)");
    /// how long a request head may take to arrive, and how long a connection may sit idle
    /// between requests
    OXP_HEADER_TIMEOUT_MS(Millis { min: 1 }, value "10000");
    /// how long a write may wait on a client that does not read its answer
    OXP_WRITE_TIMEOUT_MS(Millis { min: 1 }, value "30000");
    /// the largest request head (431 above it), from 8 KiB to 16 MiB
    OXP_MAX_HEADER_BYTES(Number { min: 8 * 1024, max: 16 * 1024 * 1024 }, value "65536");
    /// on SIGTERM/Ctrl-C: `/health` turns 503, new calls are refused as temporarily
    /// unavailable, runs in flight finish; exit 0 when drained
    OXP_SHUTDOWN_GRACE_MS(Millis { min: 0 }, value "30000");
    /// a repeated `call_id` (per principal and user) with the same request within this time
    /// gets the first answer without running the tool again; with another request it is a 400;
    /// `0` turns it off
    OXP_IDEMPOTENCY_TTL_MS(Millis { min: 0 }, value "600000");
    /// answers and MCP task records kept in memory; task records in Redis, across replicas
    OXP_IDEMPOTENCY_CAPACITY(Number { min: 1, max: 100_000_000 }, value "10000");
    /// bytes of answers and task records kept in memory (the oldest finished answer goes first;
    /// a running one, or a task's record, never); bytes of task records in Redis
    OXP_IDEMPOTENCY_MAX_BYTES(Number { min: 1, max: 1 << 40 }, value "67108864");
    /// how long an MCP client may keep the tool list before asking again (`ttlMs`,
    /// `cacheScope: "private"`)
    OXP_MCP_LIST_TTL_MS(Millis { min: 0 }, value "300000");
    /// the key, 32 bytes or more, that seals the `requestState` of MCP calls whose tools ask
    /// (see the guide's `asking` page) and the session ids of earlier revisions' clients
    /// that can be asked; **required for replicas**: give every one the same key, or a call's
    /// next round on another replica is refused ("sealed with another key"); change it with
    /// `OXP_STATE_KEYS_PREVIOUS`
    OXP_STATE_KEY(Secret, derived "made at start-up (a start-up line says so)");
    /// earlier state keys, comma-separated, each 32 bytes or more (a key with a comma cannot be
    /// listed): what they sealed still opens, while `OXP_STATE_KEY` seals. A state names its
    /// key, so the key changes without breaking calls in flight, each step rolled out to every
    /// replica before the next: (a) add the new key here; (b) make it `OXP_STATE_KEY`, with the
    /// old one here; (c) once `OXP_STATE_TTL_MS` has passed, drop the old one (what it sealed is
    /// then refused as "sealed with another key"; a session id it sealed makes its client
    /// initialize again); needs `OXP_STATE_KEY`
    OXP_STATE_KEYS_PREVIOUS(SecretList, unset);
    /// what a tool that asks does for an MCP caller that cannot answer, unless it says:
    /// `refuse`, `hide` or `relay` (see the guide's `asking` page)
    OXP_CANNOT_ASK(OneOf(&crate::rules::CANNOT_ASK), value "refuse");
    /// how long a call that asks may wait for its answers, from the first answer; at most
    /// `OXP_IDEMPOTENCY_TTL_MS`
    OXP_STATE_TTL_MS(Millis { min: 1 }, derived "`OXP_IDEMPOTENCY_TTL_MS`'s");
    /// one caller's (a principal and user's) share of the store: how many MCP task records it
    /// may have kept at once, and the same fraction of `OXP_IDEMPOTENCY_MAX_BYTES` for their
    /// bytes; past it, that caller's new task is refused, saying so. Its `call_id` answers may
    /// use room no one else needs, and are what goes first when another caller needs it
    OXP_TASKS_PER_CALLER(Number { min: 1, max: 100_000_000 },
        derived "a tenth of `OXP_IDEMPOTENCY_CAPACITY`");
    /// how long an MCP task and its result are kept from its creation (its `ttlMs`); at least
    /// `OXP_STATE_TTL_MS` (see the guide's `tasks` page)
    OXP_TASK_TTL_MS(Millis { min: 1 }, value "3600000");
    /// how long a run's lease holds without its process renewing it: a task whose process died
    /// is `failed`, and a `call_id` run in Redis answered as interrupted, this long after (see
    /// the guide's `tasks` page); at least `100`
    OXP_LEASE_MS(Millis { min: 100 }, value "30000");
    /// let callers with a token (OAuth, HS256) name another user in `context.user_id`: for a
    /// gateway that signs in its own users and calls as itself. Off, the user a tool is told is
    /// the token's `sub` on every front, and an OXP call naming someone else is a 403; API-key
    /// callers name the user either way
    OXP_TRUST_USER_ID(Switch, value "false");
    /// let MCP callers over HTTP act as `OXP_USER_ID` with the `OXP_TOKEN_*` tokens (only for a
    /// server its operator alone calls)
    OXP_MCP_SINGLE_TENANT(Switch, value "false");
    /// the user of calls made over stdio (`mcp`, `dispatch`) and, with `OXP_MCP_SINGLE_TENANT`,
    /// over MCP's HTTP; beside it, a token for authorization provider `p` from
    /// `OXP_TOKEN_<P>` (upper-cased, `-` as `_`) and each secret a tool declares from the
    /// variable of its name
    OXP_USER_ID(Text, unset);
    /// keep answers in Redis instead, shared by replicas behind a load balancer
    OXP_REDIS_URL(Text, unset, feature "redis");
    /// the playground page at `GET /`
    OXP_PLAYGROUND(Switch, derived "on for loopback addresses");
    /// count and time calls for `GET /metrics` (see docs/observability.md)
    OXP_METRICS(Switch, value "true");
    /// serve `/metrics` on this address instead (`127.0.0.1:9100`), without authentication but
    /// with the main port's timeouts and browser guard, its connections counted in
    /// `OXP_MAX_CONNECTIONS`; not on the main port
    OXP_METRICS_ADDR(Address, unset);
    /// log filter, e.g. `debug` or `oxp_runtime=trace`. At `info` a server logs its start-up,
    /// shutdown, warnings and errors, and of its calls only those whose tool timed out or
    /// panicked: nothing for what a client's request decides (a successful call, a tool's own
    /// error, invalid input, an unknown tool, a request refused at the door), which is at
    /// `debug` and counted in `/metrics`. Dependencies (rmcp, hyper, h2, tower, axum, reqwest,
    /// redis, OpenTelemetry, …) stay at `warn` whatever the level, unless named:
    /// `OXP_LOG=info,rmcp=info` shows rmcp's own lines
    OXP_LOG(Text, value "info");
    /// `pretty` or `json`
    OXP_LOG_FORMAT(OneOf(&["pretty", "json"]), value "pretty");
    /// no longer read, and refused when set: MCP over HTTP keeps no sessions
    OXP_MCP_MAX_SESSIONS(Retired, unset);
    /// no longer read, and refused when set: MCP over HTTP keeps no sessions
    OXP_MCP_SESSION_IDLE_MS(Retired, unset);
}

/// Every `OXP_*` variable [`serve`](super::serve) reads, with its default and meaning, in the
/// order of the guide's table (`docs/settings.md`):
///
#[doc = settings_table!()]
///
/// ```
/// // Every variable is read through its entry here, and nothing else is.
/// let names: Vec<&str> = oxp_runtime::app::SETTINGS.iter().map(|s| s.name).collect();
/// assert!(names.contains(&"OXP_STATE_KEYS_PREVIOUS"));
/// assert!(names.iter().all(|name| name.starts_with("OXP_")));
/// ```
pub static SETTINGS: &[Setting] = ALL;

/// [`SETTINGS`] as a Markdown table (variable, default, meaning), made at compile time: the
/// table of `docs/settings.md`.
///
/// ```
/// let table = oxp_runtime::app::SETTINGS_TABLE;
/// assert!(table.starts_with("| variable | default | meaning |\n"));
/// assert!(table.contains("| `OXP_ADDR` | `127.0.0.1:8000` | address to listen on |\n"));
/// ```
pub const SETTINGS_TABLE: &str = settings_table!();

pub(crate) use settings_table;

/// The environment as the parser reads it: a setting at a time, by its entry in [`SETTINGS`],
/// trimmed, an empty value as none.
pub(crate) struct Env<'a> {
    lookup: &'a dyn Fn(&str) -> Option<String>,
}

impl<'a> Env<'a> {
    pub(crate) fn new(lookup: &'a dyn Fn(&str) -> Option<String>) -> Self {
        Env { lookup }
    }

    /// The value exactly as set, spaces and all.
    pub(crate) fn raw(&self, setting: &Setting) -> Option<String> {
        (self.lookup)(setting.name)
    }

    /// The value, if set.
    pub(crate) fn set(&self, setting: &Setting) -> Option<String> {
        self.raw(setting)
            .map(|v| v.trim().to_owned())
            .filter(|v| !v.is_empty())
    }

    pub(crate) fn is_set(&self, setting: &Setting) -> bool {
        self.set(setting).is_some()
    }

    /// The comma-separated values, if set; empty ones left out.
    pub(crate) fn list(&self, setting: &Setting) -> Vec<String> {
        self.set(setting)
            .map(|v| {
                v.split(',')
                    .map(str::trim)
                    .filter(|s| !s.is_empty())
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The value as set, else the default's: an error only for an entry without a value for
    /// its default, which the parser never reads this way.
    pub(crate) fn text(&self, setting: &Setting) -> Result<Cow<'static, str>, ConfigError> {
        match (self.set(setting), setting.default) {
            (Some(value), _) => Ok(Cow::Owned(value)),
            (None, SettingDefault::Value(value)) => Ok(Cow::Borrowed(value)),
            (None, _) => Err(ConfigError {
                variable: setting.name,
                problem: "must be set".into(),
            }),
        }
    }

    /// A switch as set, else its default.
    pub(crate) fn switch(&self, setting: &Setting) -> Result<bool, ConfigError> {
        switch(setting, &self.text(setting)?)
    }

    /// A switch, if set.
    pub(crate) fn switch_if_set(&self, setting: &Setting) -> Result<Option<bool>, ConfigError> {
        (self.set(setting).map(|v| switch(setting, &v))).transpose()
    }

    /// A number in its range, as set, else its default.
    pub(crate) fn number(&self, setting: &Setting) -> Result<u64, ConfigError> {
        number(setting, &self.text(setting)?)
    }

    /// A number in its range, if set.
    pub(crate) fn number_if_set(&self, setting: &Setting) -> Result<Option<u64>, ConfigError> {
        (self.set(setting).map(|v| number(setting, &v))).transpose()
    }

    /// A duration in its range, as set, else its default.
    pub(crate) fn millis(&self, setting: &Setting) -> Result<Duration, ConfigError> {
        self.number(setting).map(Duration::from_millis)
    }

    /// A duration in its range, if set.
    pub(crate) fn millis_if_set(&self, setting: &Setting) -> Result<Option<Duration>, ConfigError> {
        Ok(self.number_if_set(setting)?.map(Duration::from_millis))
    }
}

fn switch(setting: &Setting, value: &str) -> Result<bool, ConfigError> {
    match value {
        "0" | "false" | "off" => Ok(false),
        "1" | "true" | "on" => Ok(true),
        other => Err(ConfigError {
            variable: setting.name,
            problem: format!("`{other}` is not true or false"),
        }),
    }
}

/// Every number has a range: a value past it is a mistake to report, never a panic deep in the
/// runtime (a semaphore's permit count, a timer's deadline) or a silent cap.
fn number(setting: &Setting, value: &str) -> Result<u64, ConfigError> {
    let (min, max) = match setting.kind {
        SettingKind::Number { min, max } => (min, max),
        SettingKind::Millis { min } => (min, MAX_MS),
        _ => (0, u64::MAX),
    };
    let n = value.parse::<u64>().map_err(|_| ConfigError {
        variable: setting.name,
        problem: "must be a whole number".into(),
    })?;
    if n < min || n > max {
        return Err(ConfigError {
            variable: setting.name,
            problem: format!("must be from {min} to {max}"),
        });
    }
    Ok(n)
}

/// A secret list's entries, each checked by `check` with its place (from 1, counting empty
/// entries, so that the place is the one an operator counts in what they wrote).
pub(crate) fn secret_list(
    env: &Env<'_>,
    setting: &Setting,
    check: impl Fn(usize, &str) -> Result<(), String>,
) -> Result<Vec<crate::protocol::Sensitive>, ConfigError> {
    let Some(value) = env.set(setting) else {
        return Ok(Vec::new());
    };
    let mut secrets = Vec::new();
    for (at, entry) in value.split(',').map(str::trim).enumerate() {
        if entry.is_empty() {
            continue;
        }
        check(at + 1, entry).map_err(|problem| ConfigError {
            variable: setting.name,
            problem,
        })?;
        secrets.push(crate::protocol::Sensitive::new(entry.to_owned()));
    }
    Ok(secrets)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_name_is_unique_and_every_value_default_is_in_range() {
        let mut names: Vec<&str> = SETTINGS.iter().map(|s| s.name).collect();
        names.sort_unstable();
        let count = names.len();
        names.dedup();
        assert_eq!(names.len(), count, "a variable listed twice");
        for setting in SETTINGS {
            assert!(!setting.meaning.is_empty(), "{}", setting.name);
            let SettingDefault::Value(value) = setting.default else {
                continue;
            };
            match setting.kind {
                SettingKind::Number { .. } | SettingKind::Millis { .. } => {
                    number(setting, value).unwrap();
                }
                SettingKind::Switch => {
                    switch(setting, value).unwrap();
                }
                SettingKind::OneOf(words) => assert!(words.contains(&value), "{}", setting.name),
                _ => {}
            }
        }
    }

    #[test]
    fn the_table_has_a_row_per_setting_in_order() {
        let rows: Vec<&str> = SETTINGS_TABLE.lines().skip(2).collect();
        assert_eq!(rows.len(), SETTINGS.len());
        for (row, setting) in rows.iter().zip(SETTINGS) {
            assert!(
                row.starts_with(&format!("| `{}` | ", setting.name)),
                "{row}"
            );
            assert!(row.contains(setting.meaning), "{row}");
            if let Some(feature) = setting.feature {
                assert!(
                    row.ends_with(&format!("(cargo feature `{feature}`) |")),
                    "{row}"
                );
            }
        }
    }
}
