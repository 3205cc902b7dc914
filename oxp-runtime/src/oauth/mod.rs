//! An OAuth 2.1 resource server (cargo feature `oauth`): access tokens issued by an identity
//! provider for this server, checked as RFC 9068, RFC 8707 and the MCP authorization spec say,
//! with the provider's keys fetched from its JWKS and rotated without a restart.
//!
//! [`OAuth`] is the configuration; [`ServerAuth::oauth`](crate::server::ServerAuth::oauth) puts it
//! beside API keys and HS256 secrets (a request is accepted by whichever credential it presents)
//! as the server's [`TokenVerifier`], and the server then answers RFC 9728 metadata at
//! `/.well-known/oauth-protected-resource` (and `…{path}` for a front mounted at `path`, `…/mcp`
//! for MCP) and challenges every 401 with where to find it.
//!
//! ```
//! use oxp_runtime::oauth::OAuth;
//! use oxp_runtime::server::ServerAuth;
//!
//! let auth = ServerAuth::default().oauth(
//!     OAuth::new("https://tools.example.com")
//!         .issuer("https://login.example.com/realms/acme")
//!         .scopes(["tools"]),
//! );
//! assert!(auth.is_enabled());
//! ```
//!
//! Tokens are decoded and verified by `jsonwebtoken` (`decode` with a `Validation`), its
//! cryptography ring's (RS256/384/512, PS256/384/512, ES256/384, EdDSA with Ed25519; installed
//! as the process's `jsonwebtoken` provider unless one already is); JWKs are read by its types.
//! The checks, in order: the token's size; its header (`alg` from the list above, never `none`
//! or `HS*`; no `crit`; `typ` `at+jwt`, or `JWT`/none unless
//! [strict](OAuth::strict_token_type)); its `iss`, exactly one of the issuers; the key its `kid`
//! names in that issuer's set, which must be of the `alg`'s kind (and of its own `alg`, when it
//! declares one); then `jsonwebtoken`'s: the signature, `exp` (required), `nbf`, `iss`, with a
//! small leeway; then `iat` (not in the future, with the same leeway); `aud` (required, one of
//! the audiences); `sub` (required); the scopes (`scope` or `scp`, a string or an array of
//! strings).

pub(crate) mod crypto;
mod fetch;
mod jwks;
mod keys;
mod limit;

use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use jsonwebtoken::{Algorithm, Validation};
use serde_json::{Map, Value};

use crate::principal::{Grant, Principal};
use crate::server::{AuthError, Caller, ResourceMetadata, ServerAuth, TokenVerifier};
use fetch::Fetcher;
use jwks::KeySet;

/// The longest token accepted, in bytes: real access tokens are a few kilobytes (Entra's with
/// group claims among the largest); anything longer is refused before it is decoded.
///
/// ```
/// // A header of this size is well within the server's own cap on request heads.
/// assert!(oxp_runtime::oauth::MAX_TOKEN_BYTES < 64 * 1024);
/// ```
pub const MAX_TOKEN_BYTES: usize = 16 * 1024;

/// The most a metadata document or key set may weigh.
const MAX_DOCUMENT_BYTES: usize = 256 * 1024;

/// The configuration of the resource server: this server's URL (what tokens must be issued
/// for), the identity providers it trusts, and what every call needs.
///
/// ```
/// use std::time::Duration;
/// use oxp_runtime::oauth::OAuth;
///
/// let oauth = OAuth::new("https://tools.example.com")
///     // Entra ID's v1 and v2 issuers of one tenant, each with its own metadata.
///     .issuer("https://sts.windows.net/0000-tenant/")
///     .issuer("https://login.microsoftonline.com/0000-tenant/v2.0")
///     // Entra names the API by its application id URI rather than the URL.
///     .audience(["api://oxp-tools"])
///     .scopes(["tools.call"])
///     .leeway(Duration::from_secs(30));
/// assert_eq!(oauth.audiences(), ["api://oxp-tools"]);
/// ```
#[derive(Clone, Debug)]
pub struct OAuth {
    resource: String,
    issuers: Vec<String>,
    jwks_url: Option<String>,
    audiences: Vec<String>,
    scopes: Vec<String>,
    strict_typ: bool,
    introspection: Option<Introspection>,
    /// Forged tokens per client: a burst, then a rate per second (a burst of 0: no limit).
    forged_limit: (u32, u32),
    /// Roots trusted besides Mozilla's, for a provider whose certificate a private CA signed.
    ca_certificates: Vec<rustls::pki_types::CertificateDer<'static>>,
    /// Whether `ca_certificates` was given text holding no certificate.
    ca_certificates_invalid: bool,
    /// (broader, narrower): a token granting the first is granted the second.
    scope_hierarchy: Vec<(String, String)>,
    tuning: Tuning,
}

/// Where opaque tokens are checked (RFC 7662), and as which client.
#[derive(Clone, Debug)]
struct Introspection {
    url: String,
    client_id: String,
    client_secret: crate::protocol::Sensitive,
}

/// The longest a positive introspection answer is kept (never beyond the token's own `exp`):
/// a token revoked at the provider is refused here at most this much later.
const INTROSPECTION_CACHE_TTL: Duration = Duration::from_secs(60);
/// The most introspection answers kept.
const INTROSPECTION_CACHE_ENTRIES: usize = 10_000;

/// The longest the server waits before asking a provider that failed again (shorter when the
/// refetch interval is): a provider that comes back is used again within seconds.
pub(crate) const FAILURE_RETRY: Duration = Duration::from_secs(5);

#[derive(Clone, Debug)]
pub(crate) struct Tuning {
    pub(crate) refetch_interval: Duration,
    pub(crate) default_ttl: Duration,
    pub(crate) min_ttl: Duration,
    pub(crate) max_ttl: Duration,
    fetch_timeout: Duration,
    leeway: Duration,
}

impl Tuning {
    /// How long after a failed fetch (of keys or of metadata) the provider is asked again.
    pub(crate) fn failure_retry(&self) -> Duration {
        self.refetch_interval.min(FAILURE_RETRY)
    }
}

impl OAuth {
    /// A resource server at `resource`, the URL clients reach this server at
    /// (`OXP_PUBLIC_URL`): its canonical form (no trailing slash) is what RFC 9728 metadata
    /// names, and, unless [`audience`](Self::audience) says otherwise, tokens must name it, its
    /// `/mcp`, or the path of a front the server mounts or nests (whose own metadata names it)
    /// in `aud`. A host-only resource is matched with or without a trailing slash
    /// (some clients add one); any other is matched exactly.
    ///
    /// ```
    /// let oauth = oxp_runtime::oauth::OAuth::new("https://tools.example.com/");
    /// assert_eq!(oauth.resource(), "https://tools.example.com");
    /// assert_eq!(oauth.audiences(), ["https://tools.example.com", "https://tools.example.com/mcp"]);
    /// ```
    pub fn new(resource: impl Into<String>) -> Self {
        OAuth {
            resource: resource.into().trim_end_matches('/').to_owned(),
            issuers: Vec::new(),
            jwks_url: None,
            audiences: Vec::new(),
            scopes: Vec::new(),
            strict_typ: false,
            introspection: None,
            forged_limit: (limit::BURST, limit::PER_SECOND),
            ca_certificates: Vec::new(),
            ca_certificates_invalid: false,
            scope_hierarchy: Vec::new(),
            tuning: Tuning {
                refetch_interval: Duration::from_secs(5),
                default_ttl: Duration::from_secs(600),
                min_ttl: Duration::from_secs(60),
                max_ttl: Duration::from_secs(24 * 3600),
                fetch_timeout: Duration::from_secs(5),
                leeway: Duration::from_secs(60),
            },
        }
    }

    /// Trusts tokens whose `iss` is exactly `issuer` (`OXP_OAUTH_ISSUER`, comma-separated);
    /// its keys are found through its metadata (RFC 8414 first, then OpenID Connect discovery),
    /// whose `issuer` must be the same string. Repeat for several.
    ///
    /// ```
    /// let oauth = oxp_runtime::oauth::OAuth::new("https://tools.example.com")
    ///     .issuer("https://acme.okta.com/oauth2/default");
    /// assert_eq!(oauth.issuers(), ["https://acme.okta.com/oauth2/default"]);
    /// ```
    #[must_use]
    pub fn issuer(mut self, issuer: impl Into<String>) -> Self {
        self.issuers.push(issuer.into());
        self
    }

    /// The key set's URL (`OXP_OAUTH_JWKS_URL`), instead of discovering it: one set for every
    /// issuer.
    ///
    /// ```
    /// let oauth = oxp_runtime::oauth::OAuth::new("https://tools.example.com")
    ///     .issuer("https://accounts.google.com")
    ///     .jwks_url("https://www.googleapis.com/oauth2/v3/certs");
    /// ```
    #[must_use]
    pub fn jwks_url(mut self, url: impl Into<String>) -> Self {
        self.jwks_url = Some(url.into());
        self
    }

    /// The audiences a token's `aud` must name one of (`OXP_OAUTH_AUDIENCE`), replacing the
    /// default (the resource URL and its `/mcp`). Name this server only: a token for another
    /// client or API (Keycloak's `account`) must not be let in.
    ///
    /// ```
    /// let oauth = oxp_runtime::oauth::OAuth::new("https://tools.example.com").audience(["api://tools"]);
    /// assert_eq!(oauth.audiences(), ["api://tools"]);
    /// ```
    #[must_use]
    pub fn audience<S: Into<String>>(mut self, audiences: impl IntoIterator<Item = S>) -> Self {
        self.audiences.extend(audiences.into_iter().map(Into::into));
        self
    }

    /// Scopes every request needs (`OXP_OAUTH_SCOPES`), besides those of the tool it calls;
    /// a token without one is answered `403 insufficient_scope`.
    ///
    /// ```
    /// let oauth = oxp_runtime::oauth::OAuth::new("https://tools.example.com").scopes(["tools"]);
    /// assert_eq!(oauth.required_scopes(), ["tools"]);
    /// ```
    #[must_use]
    pub fn scopes<S: Into<String>>(mut self, scopes: impl IntoIterator<Item = S>) -> Self {
        self.scopes.extend(scopes.into_iter().map(Into::into));
        self
    }

    /// A token granting `broader` is granted each of `narrower` too (and what they imply in
    /// turn): the scope hierarchy of the deployment (`OXP_OAUTH_SCOPE_HIERARCHY`,
    /// `files:admin>files:write,files:write>files:read`), which a provider's tokens do not spell
    /// out. Repeat for several.
    ///
    /// ```
    /// let oauth = oxp_runtime::oauth::OAuth::new("https://tools.example.com")
    ///     .scope_implies("files:admin", ["files:write", "files:read"])
    ///     .scope_implies("files:write", ["files:read"]);
    /// ```
    #[must_use]
    pub fn scope_implies<S: Into<String>>(
        mut self,
        broader: impl Into<String>,
        narrower: impl IntoIterator<Item = S>,
    ) -> Self {
        let broader = broader.into();
        for narrower in narrower {
            self.scope_hierarchy
                .push((broader.clone(), narrower.into()));
        }
        self
    }

    /// Accepts only tokens whose `typ` is `at+jwt` (RFC 9068), refusing plain `JWT` and ID
    /// tokens; off by default, as several providers (Entra ID, Google) type access tokens `JWT`.
    ///
    /// ```
    /// let oauth = oxp_runtime::oauth::OAuth::new("https://tools.example.com").strict_token_type(true);
    /// ```
    #[must_use]
    pub fn strict_token_type(mut self, on: bool) -> Self {
        self.strict_typ = on;
        self
    }

    /// Checks tokens that are not JWTs (opaque ones) at the provider's RFC 7662 introspection
    /// endpoint (`OXP_OAUTH_INTROSPECTION_URL`, `OXP_OAUTH_CLIENT_ID`, `OXP_OAUTH_CLIENT_SECRET`),
    /// authenticated as this client with HTTP Basic. The answer is checked as a JWT's claims are
    /// (`iss` if it names one, `aud`, `exp`, `nbf`, `sub`, the scopes); an active token's answer is
    /// kept for at most a minute and never past its `exp`, keyed by a digest of the token; an
    /// inactive one is never kept. An answer without `iss` is refused when several issuers are
    /// trusted, and one for a token that is not an access token (`token_type`, Hydra's
    /// `token_use`, Keycloak's `typ`) is refused. Requests with one token share its
    /// introspection under way; at most 32 are under way at once, 4 per client. JWTs are still
    /// checked against the key set.
    ///
    /// ```
    /// let oauth = oxp_runtime::oauth::OAuth::new("https://tools.example.com")
    ///     .issuer("https://login.example.com")
    ///     .introspection("https://login.example.com/oauth2/introspect", "oxp-tools", "s3cr3t");
    /// assert!(!format!("{oauth:?}").contains("s3cr3t"));
    /// ```
    #[must_use]
    pub fn introspection(
        mut self,
        url: impl Into<String>,
        client_id: impl Into<String>,
        client_secret: impl Into<String>,
    ) -> Self {
        self.introspection = Some(Introspection {
            url: url.into(),
            client_id: client_id.into(),
            client_secret: crate::protocol::Sensitive::new(client_secret),
        });
        self
    }

    /// How many forged tokens a client (an IP address; an IPv6 /64) may send: `burst` at once,
    /// then `per_second` (default 30, then 1 a second). Forged is what no trusted issuer made:
    /// malformed, a refused header, an unknown key, a bad signature, inactive at introspection.
    /// Beyond that, its tokens that do not parse, name a key the server does not have, or would
    /// have to be introspected are answered `429` with `Retry-After` before any work (no fetch,
    /// no introspection), while a token signed by a key the server has is still verified: many
    /// users share an address, and a forger among them must not lock the others out. Good
    /// tokens, and genuine ones that fail a claim (expired), cost nothing.
    /// A burst of 0 turns the limit off. Clients are told apart by the connection's address
    /// (`Server::serve`, or axum's `ConnectInfo`); behind a proxy, that is the proxy's.
    ///
    /// ```
    /// let oauth = oxp_runtime::oauth::OAuth::new("https://tools.example.com")
    ///     .forged_tokens_per_client(100, 5);
    /// ```
    #[must_use]
    pub fn forged_tokens_per_client(mut self, burst: u32, per_second: u32) -> Self {
        self.forged_limit = (burst, per_second);
        self
    }

    /// Trusts the certificates of this PEM text (`OXP_OAUTH_CA_FILE`, a file of them) besides
    /// Mozilla's roots when fetching metadata, keys and introspection answers: for a provider
    /// (an intranet Keycloak) whose certificate a private CA signed. Text without a certificate
    /// is a configuration error.
    ///
    /// ```
    /// let oauth = oxp_runtime::oauth::OAuth::new("https://tools.example.com")
    ///     .issuer("https://sso.corp.example/realms/acme")
    ///     .ca_certificates("not PEM");
    /// # let auth = oxp_runtime::server::ServerAuth::default().oauth(oauth);
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// assert_eq!(auth.ready().await.unwrap_err().setting, oxp_runtime::oauth::Setting::CaFile);
    /// # });
    /// ```
    #[must_use]
    pub fn ca_certificates(mut self, pem: impl AsRef<[u8]>) -> Self {
        use rustls::pki_types::pem::PemObject;
        let certificates: Vec<_> =
            rustls::pki_types::CertificateDer::pem_slice_iter(pem.as_ref()).collect();
        // Unreadable text is kept as no certificate at all, which `check` refuses.
        self.ca_certificates = certificates
            .into_iter()
            .collect::<Result<Vec<_>, _>>()
            .unwrap_or_default();
        if self.ca_certificates.is_empty() {
            self.ca_certificates_invalid = true;
        }
        self
    }

    /// The clock skew allowed on `exp`, `nbf` and `iat` (default 60 s).
    ///
    /// ```
    /// let oauth = oxp_runtime::oauth::OAuth::new("https://tools.example.com")
    ///     .leeway(std::time::Duration::from_secs(10));
    /// ```
    #[must_use]
    pub fn leeway(mut self, leeway: Duration) -> Self {
        self.tuning.leeway = leeway;
        self
    }

    /// The least time between two fetches of a key set made because a token named a `kid`
    /// the set lacks (default 5 s), in each of two slots: one for `kid`s seen for the first
    /// time, one for `kid`s seen again (a key rotated in is named by every token it signs, a
    /// forger's random `kid`s each once), so a flood of random `kid`s cannot keep a rotated
    /// key out. However many such tokens arrive, and at once, the provider is asked at most
    /// twice per interval. After a failed fetch, it is asked again after this interval or
    /// 5 s, whichever is shorter.
    ///
    /// ```
    /// let oauth = oxp_runtime::oauth::OAuth::new("https://tools.example.com")
    ///     .key_refetch_interval(std::time::Duration::from_secs(30));
    /// ```
    #[must_use]
    pub fn key_refetch_interval(mut self, interval: Duration) -> Self {
        // At most a day: keys a provider rotated in must be found again some day.
        self.tuning.refetch_interval = interval.min(Duration::from_secs(24 * 3600));
        self
    }

    /// How long one fetch of metadata or keys may take, whole (default 5 s).
    ///
    /// ```
    /// let oauth = oxp_runtime::oauth::OAuth::new("https://tools.example.com")
    ///     .fetch_timeout(std::time::Duration::from_secs(2));
    /// ```
    #[must_use]
    pub fn fetch_timeout(mut self, timeout: Duration) -> Self {
        self.tuning.fetch_timeout = timeout;
        self
    }

    /// The resource URL, canonical.
    ///
    /// ```
    /// assert_eq!(oxp_runtime::oauth::OAuth::new("https://h/").resource(), "https://h");
    /// ```
    pub fn resource(&self) -> &str {
        &self.resource
    }

    /// The trusted issuers.
    ///
    /// ```
    /// assert!(oxp_runtime::oauth::OAuth::new("https://h").issuers().is_empty());
    /// ```
    pub fn issuers(&self) -> &[String] {
        &self.issuers
    }

    /// The audiences a token must name one of: those set, or the resource and its `/mcp` (and,
    /// once a server is built, the resource of each front it mounts or nests).
    ///
    /// ```
    /// assert_eq!(oxp_runtime::oauth::OAuth::new("https://h").audiences().len(), 2);
    /// ```
    pub fn audiences(&self) -> Vec<String> {
        if self.audiences.is_empty() {
            vec![self.resource.clone(), format!("{}/mcp", self.resource)]
        } else {
            self.audiences.clone()
        }
    }

    /// The scopes every request needs.
    ///
    /// ```
    /// assert!(oxp_runtime::oauth::OAuth::new("https://h").required_scopes().is_empty());
    /// ```
    pub fn required_scopes(&self) -> &[String] {
        &self.scopes
    }

    /// What is wrong with this configuration, if anything, and which setting it is.
    pub(crate) fn check(&self) -> Result<(), OAuthError> {
        let bad = |setting, problem: String| Err(OAuthError { setting, problem });
        if !self.resource.starts_with("https://") && fetch::check_url(&self.resource).is_err() {
            return bad(
                Setting::Resource,
                format!(
                    "`{}` is not an https:// URL (plain http only on localhost)",
                    self.resource
                ),
            );
        }
        if !routable(resource_path(&self.resource)) {
            return bad(
                Setting::Resource,
                format!(
                    "`{}` has a path the metadata cannot be served under: only letters, digits and `-._~/%!$&'()+,;=`, no empty segment, no query or fragment",
                    self.resource
                ),
            );
        }
        if self.issuers.is_empty() {
            return bad(Setting::Issuer, "names no issuer".into());
        }
        if self.ca_certificates_invalid {
            return bad(
                Setting::CaFile,
                "holds no PEM certificate (-----BEGIN CERTIFICATE-----)".into(),
            );
        }
        for issuer in &self.issuers {
            if let Err(problem) = fetch::check_url(issuer) {
                return bad(Setting::Issuer, problem);
            }
        }
        if let Some(url) = &self.jwks_url
            && let Err(problem) = fetch::check_url(url)
        {
            return bad(Setting::JwksUrl, problem);
        }
        if let Some(introspection) = &self.introspection {
            if let Err(problem) = fetch::check_url(&introspection.url) {
                return bad(Setting::Introspection, problem);
            }
            if introspection.client_id.is_empty() || introspection.client_secret.expose().is_empty()
            {
                return bad(
                    Setting::Introspection,
                    "needs the client id and secret the server introspects as (OXP_OAUTH_CLIENT_ID, OXP_OAUTH_CLIENT_SECRET)".into(),
                );
            }
        }
        for scope in &self.scopes {
            if let Some(problem) = crate::rules::scope_problem(scope) {
                return bad(Setting::Scopes, problem);
            }
        }
        for (broader, narrower) in &self.scope_hierarchy {
            for scope in [broader, narrower] {
                if let Some(problem) = crate::rules::scope_problem(scope) {
                    return bad(Setting::ScopeHierarchy, problem);
                }
            }
        }
        Ok(())
    }
}

/// Which setting an [`OAuthError`] is about.
///
/// ```
/// use oxp_runtime::oauth::{OAuth, Setting};
/// use oxp_runtime::server::ServerAuth;
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let auth = ServerAuth::default().oauth(OAuth::new("https://h").issuer("http://id.example"));
/// assert_eq!(auth.ready().await.unwrap_err().setting, Setting::Issuer);
/// # });
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Setting {
    /// The resource URL (`OXP_PUBLIC_URL`).
    Resource,
    /// An issuer or its metadata (`OXP_OAUTH_ISSUER`).
    Issuer,
    /// The key set (`OXP_OAUTH_JWKS_URL`, or the `jwks_uri` an issuer's metadata names).
    JwksUrl,
    /// The scopes (`OXP_OAUTH_SCOPES`).
    Scopes,
    /// Token introspection (`OXP_OAUTH_INTROSPECTION_URL` and its client).
    Introspection,
    /// The certificates trusted besides Mozilla's roots (`OXP_OAUTH_CA_FILE`).
    CaFile,
    /// Which scopes imply which (`OXP_OAUTH_SCOPE_HIERARCHY`).
    ScopeHierarchy,
}

impl Setting {
    /// The environment variable of this setting.
    ///
    /// ```
    /// assert_eq!(oxp_runtime::oauth::Setting::Issuer.variable(), "OXP_OAUTH_ISSUER");
    /// ```
    pub fn variable(self) -> &'static str {
        match self {
            Setting::Resource => "OXP_PUBLIC_URL",
            Setting::Issuer => "OXP_OAUTH_ISSUER",
            Setting::JwksUrl => "OXP_OAUTH_JWKS_URL",
            Setting::Scopes => "OXP_OAUTH_SCOPES",
            Setting::Introspection => "OXP_OAUTH_INTROSPECTION_URL",
            Setting::CaFile => "OXP_OAUTH_CA_FILE",
            Setting::ScopeHierarchy => "OXP_OAUTH_SCOPE_HIERARCHY",
        }
    }
}

/// Why the resource server cannot start: a setting that is wrong, or a provider that cannot be
/// reached or answers something unusable.
///
/// ```
/// use oxp_runtime::oauth::OAuth;
/// use oxp_runtime::server::ServerAuth;
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let auth = ServerAuth::default().oauth(OAuth::new("https://h"));
/// let error = auth.ready().await.unwrap_err();
/// assert!(error.to_string().starts_with("OXP_OAUTH_ISSUER: "));
/// # });
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OAuthError {
    /// The setting.
    pub setting: Setting,
    /// What is wrong, naming URLs (never a token or secret).
    pub problem: String,
}

impl std::fmt::Display for OAuthError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.setting.variable(), self.problem)
    }
}

impl std::error::Error for OAuthError {}

/// Why a token was refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// `401 invalid_token`: a token whose claims fail a check, once its signature was verified
    /// (expired, another audience…): a real token, and nothing to hold its client back for.
    Invalid(&'static str),
    /// `401 invalid_token`: a token that is no genuine one of a trusted issuer (malformed, a
    /// refused header, an unknown key, a bad signature, inactive at introspection): counted
    /// against its client's allowance.
    Forged(&'static str),
    /// `503`: the keys a token needs cannot be had (the reason is logged, not sent).
    Unavailable(String),
    /// `403 insufficient_scope`: every scope the request needs.
    InsufficientScope(Vec<String>),
    /// `429`: the client sent too many forged tokens; it may try again after this.
    HeldBack(Duration),
    /// Too many introspections under way: the client's own (`429`), or all (`503`).
    Busy { per_client: bool },
}

impl Refusal {
    pub(crate) fn invalid(message: &'static str) -> Self {
        Refusal::Invalid(message)
    }

    pub(crate) fn forged(message: &'static str) -> Self {
        Refusal::Forged(message)
    }
}

/// A verified token's caller and what it may do.
#[derive(Clone, Debug)]
pub(crate) struct Verified {
    pub(crate) principal: Principal,
    pub(crate) scopes: Vec<String>,
    /// The token's `exp`, in seconds since the epoch.
    exp: u64,
}

/// A JWS as it reads before any key is looked at.
struct Parsed {
    alg: Algorithm,
    /// The claims, not yet verified: their `iss` picks the key set, and once `jsonwebtoken`
    /// refuses them (after the signature), they name what was wrong.
    claims: Map<String, Value>,
    /// The issuer's place in the configuration.
    place: usize,
    kid: Option<String>,
}

/// Introspections under way at once, across every client: past it, a token no kept answer
/// covers is answered `503`, so a slow or failing endpoint cannot gather requests without end.
const INTROSPECTIONS_AT_ONCE: usize = 32;
/// Introspections under way at once for one client (an address): past it, `429`.
const INTROSPECTIONS_PER_CLIENT: usize = 4;

/// The introspections under way: how many in all, and per client.
#[derive(Default)]
struct Introspections {
    under_way: Mutex<(usize, std::collections::HashMap<std::net::IpAddr, usize>)>,
}

/// A place among the introspections under way, given back when dropped.
struct Slot<'a> {
    of: &'a Introspections,
    client: Option<std::net::IpAddr>,
}

impl Introspections {
    fn under_way(
        &self,
    ) -> std::sync::MutexGuard<'_, (usize, std::collections::HashMap<std::net::IpAddr, usize>)>
    {
        self.under_way.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A place for one more introspection for `client`, if the caps leave one.
    fn enter(&self, client: Option<std::net::IpAddr>) -> Result<Slot<'_>, Refusal> {
        let client = client.map(limit::key);
        let mut under_way = self.under_way();
        if under_way.0 >= INTROSPECTIONS_AT_ONCE {
            return Err(Refusal::Busy { per_client: false });
        }
        if let Some(client) = client {
            let mine = under_way.1.get(&client).copied().unwrap_or_default();
            if mine >= INTROSPECTIONS_PER_CLIENT {
                return Err(Refusal::Busy { per_client: true });
            }
            under_way.1.insert(client, mine + 1);
        }
        under_way.0 += 1;
        Ok(Slot { of: self, client })
    }
}

impl Drop for Slot<'_> {
    fn drop(&mut self) {
        let mut under_way = self.of.under_way();
        under_way.0 -= 1;
        if let Some(client) = self.client
            && let Some(mine) = under_way.1.get_mut(&client)
        {
            *mine -= 1;
            if *mine == 0 {
                under_way.1.remove(&client);
            }
        }
    }
}

/// What came of an introspection, as `/metrics` counts it.
#[derive(Clone, Copy)]
pub(crate) enum Introspected {
    /// The token is active and its answer passed every check.
    Active,
    /// The token is not active.
    Inactive,
    /// Active, but its answer failed a check (`aud`, `exp`, the type, the issuer).
    Refused,
    /// The endpoint could not be reached, or answered something unusable.
    Failed,
    /// Not asked: too many introspections were under way.
    Busy,
}

impl Introspected {
    pub(crate) const ALL: [Introspected; 5] = [
        Introspected::Active,
        Introspected::Inactive,
        Introspected::Refused,
        Introspected::Failed,
        Introspected::Busy,
    ];

    pub(crate) fn label(self) -> &'static str {
        match self {
            Introspected::Active => "active",
            Introspected::Inactive => "inactive",
            Introspected::Refused => "refused",
            Introspected::Failed => "error",
            Introspected::Busy => "busy",
        }
    }
}

/// The configuration in use: discovered key sets, the client that fetches them, metrics.
pub(crate) struct Verifier {
    config: OAuth,
    /// What a token's `aud` must name one of: the configured audiences, or the resource and
    /// the paths of the fronts it is served at (`/mcp` from the start), as servers are built.
    audiences: std::sync::RwLock<Vec<String>>,
    fetcher: Fetcher,
    /// One key set per issuer, in `config.issuers`' order, once discovered.
    sets: Mutex<Option<Arc<[Arc<KeySet>]>>>,
    /// Held while discovering: once at a time.
    discovering: tokio::sync::Mutex<()>,
    /// Why discovery last failed, and when it may be tried again.
    discovery_failure: Mutex<Option<(String, std::time::Instant)>>,
    /// Forged tokens per client.
    limit: limit::FailureLimit,
    /// Active introspection answers by a digest of their token, until when each may be used.
    introspected: Mutex<std::collections::HashMap<[u8; 32], (Verified, std::time::Instant)>>,
    /// The introspection under way for each token (by digest), which other requests with the
    /// same token wait for instead of asking again.
    flights: Mutex<std::collections::HashMap<[u8; 32], Arc<Flight>>>,
    /// The introspections under way, capped.
    introspections: Introspections,
    /// Where key-set fetches are counted: the server's metrics once it has attached them, and
    /// until then here (start-up fetches come before the server exists).
    fetch_counts: Arc<Mutex<FetchCounts>>,
}

/// One token's introspection, shared by the requests that wait for it.
type Flight = tokio::sync::OnceCell<Result<Verified, Refusal>>;

/// Where key-set fetches and introspections are counted, and until metrics are attached, how
/// many of each there were.
#[derive(Default)]
struct FetchCounts {
    metrics: Option<crate::metrics::Metrics>,
    before: [u64; 2],
    introspections_before: [u64; Introspected::ALL.len()],
}

impl std::fmt::Debug for Verifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Verifier")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl Verifier {
    pub(crate) fn new(config: OAuth) -> Self {
        let fetcher = Fetcher::new(
            config.tuning.fetch_timeout,
            MAX_DOCUMENT_BYTES,
            &config.ca_certificates,
        );
        // Before any token is checked: a `Verifier` exists only through here.
        crypto::install();
        let (burst, per_second) = config.forged_limit;
        Verifier {
            limit: limit::FailureLimit::new(burst, per_second),
            audiences: std::sync::RwLock::new(config.audiences()),
            config,
            fetcher,
            sets: Mutex::new(None),
            discovering: tokio::sync::Mutex::new(()),
            discovery_failure: Mutex::new(None),
            fetch_counts: Arc::default(),
            introspected: Mutex::default(),
            flights: Mutex::default(),
            introspections: Introspections::default(),
        }
    }

    pub(crate) fn config(&self) -> &OAuth {
        &self.config
    }

    /// Checks the configuration, discovers every issuer's key set and fetches each once.
    pub(crate) async fn ready(&self) -> Result<(), OAuthError> {
        self.config.check()?;
        let sets = self.key_sets().await.map_err(|problem| OAuthError {
            setting: Setting::Issuer,
            problem,
        })?;
        for set in sets.iter() {
            set.load(&self.fetcher, &self.config.tuning)
                .await
                .map_err(|problem| OAuthError {
                    setting: Setting::JwksUrl,
                    problem,
                })?;
        }
        Ok(())
    }

    /// Counts key-set fetches in `metrics` from now on, with those made before.
    pub(crate) fn attach_metrics(&self, metrics: &crate::metrics::Metrics) {
        let mut counts = self.fetch_counts.lock().unwrap_or_else(|e| e.into_inner());
        if counts.metrics.is_some() {
            return;
        }
        for (i, ok) in [true, false].into_iter().enumerate() {
            for _ in 0..counts.before[i] {
                metrics.key_set_fetched(ok);
            }
        }
        for (i, result) in Introspected::ALL.into_iter().enumerate() {
            for _ in 0..counts.introspections_before[i] {
                metrics.introspected(result as usize);
            }
        }
        counts.metrics = Some(metrics.clone());
    }

    /// Counts an introspection in the metrics (or until they are attached, here).
    fn introspected(&self, result: Introspected) {
        let mut counts = self.fetch_counts.lock().unwrap_or_else(|e| e.into_inner());
        match &counts.metrics {
            Some(metrics) => metrics.introspected(result as usize),
            None => counts.introspections_before[result as usize] += 1,
        }
    }

    fn on_fetch(&self) -> Arc<dyn Fn(bool) + Send + Sync> {
        let counts = self.fetch_counts.clone();
        Arc::new(move |ok| {
            let mut counts = counts.lock().unwrap_or_else(|e| e.into_inner());
            match &counts.metrics {
                Some(metrics) => metrics.key_set_fetched(ok),
                None => counts.before[usize::from(!ok)] += 1,
            }
        })
    }

    /// The key sets, discovering them the first time (and again after a failure, at most once
    /// per refetch interval).
    async fn key_sets(&self) -> Result<Arc<[Arc<KeySet>]>, String> {
        if let Some(sets) = &*self.sets.lock().unwrap_or_else(|e| e.into_inner()) {
            return Ok(sets.clone());
        }
        let _once = self.discovering.lock().await;
        if let Some(sets) = &*self.sets.lock().unwrap_or_else(|e| e.into_inner()) {
            return Ok(sets.clone());
        }
        if let Some((why, at)) = &*self
            .discovery_failure
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            && at.elapsed() < self.config.tuning.failure_retry()
        {
            return Err(why.clone());
        }
        let result = self.discover().await;
        match &result {
            Ok(sets) => {
                *self.sets.lock().unwrap_or_else(|e| e.into_inner()) = Some(sets.clone());
            }
            Err(why) => {
                *self
                    .discovery_failure
                    .lock()
                    .unwrap_or_else(|e| e.into_inner()) =
                    Some((why.clone(), std::time::Instant::now()));
            }
        }
        result
    }

    async fn discover(&self) -> Result<Arc<[Arc<KeySet>]>, String> {
        if let Some(url) = &self.config.jwks_url {
            let set = Arc::new(KeySet::new(url.clone(), self.on_fetch()));
            return Ok(self.config.issuers.iter().map(|_| set.clone()).collect());
        }
        let mut sets = Vec::new();
        for issuer in &self.config.issuers {
            let url = self.jwks_uri(issuer).await?;
            sets.push(Arc::new(KeySet::new(url, self.on_fetch())));
        }
        Ok(sets.into())
    }

    /// The `jwks_uri` of an issuer's metadata: RFC 8414's well-known location first, then
    /// OpenID Connect's.
    async fn jwks_uri(&self, issuer: &str) -> Result<String, String> {
        let mut failures = Vec::new();
        for url in metadata_urls(issuer) {
            match self.fetcher.get_json(&url).await {
                Ok(fetched) => {
                    // RFC 8414 §3.3, OIDC Discovery §4.3: the metadata is the issuer's own
                    // only if it names the same issuer.
                    let named = fetched.json.get("issuer").and_then(Value::as_str);
                    if named != Some(issuer) {
                        failures.push(format!(
                            "{url} names issuer {named:?}, not `{issuer}` (set OXP_OAUTH_ISSUER to exactly the issuer the provider names)"
                        ));
                        continue;
                    }
                    let Some(jwks) = fetched.json.get("jwks_uri").and_then(Value::as_str) else {
                        failures.push(format!("{url} names no `jwks_uri`"));
                        continue;
                    };
                    fetch::check_url(jwks)?;
                    return Ok(jwks.to_owned());
                }
                Err(why) => failures.push(why),
            }
        }
        Err(format!(
            "no metadata for issuer `{issuer}`: {}",
            failures.join("; ")
        ))
    }

    /// Checks an access token from `client` (when known). A client that has spent its
    /// allowance of forged tokens is held back (`429`) only for tokens that do not parse, name
    /// a key the server does not have, or would have to be introspected: a token signed by a
    /// key at hand is verified whoever sent it, so one forger behind a shared address (NAT, a
    /// proxy, a host's relay) does not lock out the users beside it.
    pub(crate) async fn verify_from(
        &self,
        token: &str,
        client: Option<std::net::IpAddr>,
    ) -> Result<Verified, Refusal> {
        let held = client.and_then(|client| self.limit.held_back(client));
        let result = self.verify(token, client, held).await;
        // Only what no genuine token does counts: a host that relays many users' tokens from one
        // address sends expired ones all day, and must not be held back for them.
        if let (Some(client), Err(Refusal::Forged(_))) = (client, &result) {
            self.limit.refused(client);
        }
        result
    }

    /// Checks an access token; `held` is how long its client is held back for, if it is.
    async fn verify(
        &self,
        token: &str,
        client: Option<std::net::IpAddr>,
        held: Option<Duration>,
    ) -> Result<Verified, Refusal> {
        let parsed = match self.parse(token) {
            Ok(Some(parsed)) => parsed,
            Ok(None) => return self.introspect(token, client, held).await,
            Err(refusal) => return Err(held.map_or(refusal, Refusal::HeldBack)),
        };
        let Parsed {
            alg,
            claims,
            place,
            kid,
        } = parsed;
        let sets = self.key_sets().await.map_err(Refusal::Unavailable)?;
        let found = sets[place]
            .find(
                kid.as_deref(),
                &self.fetcher,
                &self.config.tuning,
                held.is_none(),
            )
            .await;
        let key = match (found, held) {
            (jwks::Found::Unknown { .. }, Some(wait)) => return Err(Refusal::HeldBack(wait)),
            (found, _) => found.into_key()?,
        };
        if !key.fits(alg) {
            return Err(Refusal::forged(
                "The token's algorithm does not match its key.",
            ));
        }
        let issuer = &self.config.issuers[place];
        let verified = jsonwebtoken::decode::<Map<String, Value>>(
            token,
            &key.decoding,
            &self.validation(alg, issuer),
        )
        .map_err(|error| refused_by_jsonwebtoken(&error, &claims))?;
        self.grant(&verified.claims, issuer)
    }

    /// What `jsonwebtoken` checks of a token signed with `alg` by `issuer`: the signature, then
    /// `exp` (required), `nbf` and `iss`, the times with the leeway.
    fn validation(&self, alg: Algorithm, issuer: &str) -> Validation {
        let mut validation = Validation::new(alg);
        // `jsonwebtoken` takes the leeway from the time now: no more than that, or it wraps.
        validation.leeway =
            (self.config.tuning.leeway.as_secs()).min(jsonwebtoken::get_current_timestamp());
        validation.validate_nbf = true;
        validation.set_issuer(&[issuer]);
        // `aud` names this server in the audience's own spelling of a URL, matched in `grant`
        // as an introspection answer's is.
        validation.validate_aud = false;
        validation
    }

    /// What a JWS says of itself before any key is looked at; `None` for a token that is not
    /// one, when opaque tokens are introspected.
    fn parse(&self, token: &str) -> Result<Option<Parsed>, Refusal> {
        if token.len() > MAX_TOKEN_BYTES {
            return Err(Refusal::forged("The token is too large."));
        }
        let mut parts = token.split('.');
        let jws = match (parts.next(), parts.next(), parts.next(), parts.next()) {
            (Some(header), Some(payload), Some(_signature), None) => {
                decode_object(header).ok().map(|decoded| (decoded, payload))
            }
            _ => None,
        };
        let Some((header, payload)) = jws else {
            if self.config.introspection.is_some() {
                return Ok(None);
            }
            return Err(Refusal::forged(
                "The token is not a signed JWT (three base64url parts).",
            ));
        };
        let alg = check_header(&header, self.config.strict_typ)?;
        let claims = decode_object(payload)?;
        // The issuer picks the key set; it is trusted only once the signature is.
        let place = match claims.get("iss") {
            Some(Value::String(iss)) => self.config.issuers.iter().position(|i| i == iss),
            _ => None,
        }
        .ok_or(Refusal::forged("The token's issuer is not trusted here."))?;
        let kid = match header.get("kid") {
            None => None,
            Some(Value::String(kid)) => Some(kid.clone()),
            Some(_) => return Err(Refusal::forged("The token's `kid` is not a string.")),
        };
        Ok(Some(Parsed {
            alg,
            claims,
            place,
            kid,
        }))
    }

    /// Checks an opaque token at the introspection endpoint, or in the answers kept. Tokens
    /// asked about at once share one introspection; introspections under way are capped in
    /// all and per client (past the first, `503`; past the second, `429`).
    async fn introspect(
        &self,
        token: &str,
        client: Option<std::net::IpAddr>,
        held: Option<Duration>,
    ) -> Result<Verified, Refusal> {
        use sha2::{Digest, Sha256};
        let digest: [u8; 32] = Sha256::digest(token.as_bytes()).into();
        if let Some(verified) = self.kept_answer(&digest) {
            return Ok(verified);
        }
        if let Some(wait) = held {
            return Err(Refusal::HeldBack(wait));
        }
        let flight = {
            let mut flights = self.flights.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(flight) = flights.get(&digest) {
                tracing::trace!("a request waits for its token's introspection under way");
                flight.clone()
            } else {
                flights.entry(digest).or_default().clone()
            }
        };
        let answer = flight
            .get_or_try_init(|| async {
                let _slot = self.introspections.enter(client).inspect_err(|_| {
                    self.introspected(Introspected::Busy);
                })?;
                let answer = self.ask_provider(token).await;
                self.count_introspection(&answer);
                if let Ok(verified) = &answer {
                    self.keep_answer(digest, verified);
                }
                Ok::<_, Refusal>(answer)
            })
            .await
            .cloned();
        {
            let mut flights = self.flights.lock().unwrap_or_else(|e| e.into_inner());
            if flights
                .get(&digest)
                .is_some_and(|kept| Arc::ptr_eq(kept, &flight))
            {
                flights.remove(&digest);
            }
        }
        answer?
    }

    /// An active answer kept for the token of `digest`, if one still may be used.
    fn kept_answer(&self, digest: &[u8; 32]) -> Option<Verified> {
        let now = std::time::Instant::now();
        let mut kept = self.introspected.lock().unwrap_or_else(|e| e.into_inner());
        match kept.get(digest) {
            Some((verified, until)) if *until > now => Some(verified.clone()),
            Some(_) => {
                kept.remove(digest);
                None
            }
            None => None,
        }
    }

    /// Keeps an active answer for at most [`INTROSPECTION_CACHE_TTL`], never past its `exp`.
    fn keep_answer(&self, digest: [u8; 32], verified: &Verified) {
        let now = std::time::Instant::now();
        let left = verified.exp.saturating_sub(unix_now());
        let keep = INTROSPECTION_CACHE_TTL.min(Duration::from_secs(left));
        if keep.is_zero() {
            return;
        }
        let mut kept = self.introspected.lock().unwrap_or_else(|e| e.into_inner());
        if kept.len() >= INTROSPECTION_CACHE_ENTRIES {
            kept.retain(|_, (_, until)| *until > now);
        }
        if kept.len() < INTROSPECTION_CACHE_ENTRIES {
            kept.insert(digest, (verified.clone(), now + keep));
        }
    }

    fn count_introspection(&self, answer: &Result<Verified, Refusal>) {
        let result = match answer {
            Ok(_) => Introspected::Active,
            Err(Refusal::Forged(_)) => Introspected::Inactive,
            Err(Refusal::Unavailable(_)) => Introspected::Failed,
            Err(_) => Introspected::Refused,
        };
        self.introspected(result);
    }

    /// One introspection (RFC 7662) of `token`, its answer checked.
    async fn ask_provider(&self, token: &str) -> Result<Verified, Refusal> {
        let Some(introspection) = &self.config.introspection else {
            return Err(Refusal::forged("The token is not a JWT."));
        };
        let answer = self
            .fetcher
            .post_form_json(
                &introspection.url,
                &[("token", token), ("token_type_hint", "access_token")],
                (
                    &introspection.client_id,
                    introspection.client_secret.expose(),
                ),
            )
            .await
            .map_err(|why| {
                tracing::warn!(error = %why, "the token could not be introspected");
                Refusal::Unavailable(why)
            })?
            .json;
        let Value::Object(claims) = answer else {
            return Err(Refusal::Unavailable(
                "the introspection answer is not a JSON object".into(),
            ));
        };
        // RFC 7662 §2.2: `active` is the answer; an inactive token is never kept, so that one
        // that becomes valid (or a mistake corrected) is asked about again.
        if claims.get("active") != Some(&Value::Bool(true)) {
            return Err(Refusal::forged("The token is not active."));
        }
        check_introspected_type(&claims)?;
        // The endpoint is the issuer's; an answer that names another issuer is not trusted, and
        // one that names none is the only issuer's: with several, a subject could be filed
        // under another issuer's user of the same `sub`.
        let issuer = match (claims.get("iss"), self.config.issuers.as_slice()) {
            (None, [only]) => only.as_str(),
            (None, _) => {
                return Err(Refusal::invalid(
                    "The introspection answer names no issuer (`iss`), and this server trusts \
                     several: it cannot tell whose user the token is.",
                ));
            }
            (Some(Value::String(iss)), issuers) => issuers
                .iter()
                .find(|i| *i == iss)
                .ok_or(Refusal::invalid("The token's issuer is not trusted here."))?,
            (Some(_), _) => {
                return Err(Refusal::invalid("The token's issuer is not trusted here."));
            }
        };
        self.check_times(&claims)?;
        self.grant(&claims, issuer)
    }

    /// Checks an introspection answer's `exp` (required) and `nbf` as `jsonwebtoken` checks a
    /// JWT's, with the leeway: an answer is no JWT, and `jsonwebtoken` checks claims only as it
    /// decodes one.
    fn check_times(&self, claims: &Map<String, Value>) -> Result<(), Refusal> {
        let now = unix_now();
        let leeway = self.config.tuning.leeway.as_secs();
        let exp = time(claims, "exp")?.ok_or(MISSING_EXP)?;
        if now > exp.saturating_add(leeway) {
            return Err(EXPIRED);
        }
        if time(claims, "nbf")?.is_some_and(|nbf| nbf > now.saturating_add(leeway)) {
            return Err(NOT_YET_VALID);
        }
        Ok(())
    }

    /// What a token whose signature (or introspection), `exp` and `nbf` were found good grants,
    /// if its other claims let it in: `iat` not in the future, `aud` naming this server (a URL
    /// in any case of scheme and host), `sub` naming someone, and the scopes every request
    /// needs (a broader one standing for those it implies).
    fn grant(&self, claims: &Map<String, Value>, issuer: &str) -> Result<Verified, Refusal> {
        let now = unix_now();
        let leeway = self.config.tuning.leeway.as_secs();
        let exp = time(claims, "exp")?.ok_or(MISSING_EXP)?;
        if time(claims, "iat")?.is_some_and(|iat| iat > now.saturating_add(leeway)) {
            return Err(Refusal::invalid(
                "The token was issued in the future (`iat`).",
            ));
        }
        let audiences: Vec<&str> = match claims.get("aud") {
            None => {
                return Err(Refusal::invalid(
                    "The token must name this server in `aud`.",
                ));
            }
            Some(Value::String(aud)) => vec![aud],
            Some(Value::Array(auds)) => auds
                .iter()
                .map(|a| {
                    a.as_str()
                        .ok_or(Refusal::invalid("The token's `aud` is not valid."))
                })
                .collect::<Result<_, _>>()?,
            Some(_) => return Err(Refusal::invalid("The token's `aud` is not valid.")),
        };
        let issued_here = {
            let ours = self.audiences.read().unwrap_or_else(|e| e.into_inner());
            (audiences.iter()).any(|aud| ours.iter().any(|ours| same_resource(aud, ours)))
        };
        if !issued_here {
            return Err(Refusal::invalid(
                "The token was not issued for this server (`aud`).",
            ));
        }
        let subject = match claims.get("sub") {
            Some(Value::String(sub)) if !sub.is_empty() => sub.clone(),
            _ => {
                return Err(Refusal::invalid(
                    "The token must have a `sub` claim naming its subject.",
                ));
            }
        };
        let mut scopes = Vec::new();
        for name in ["scope", "scp"] {
            match claims.get(name) {
                None => {}
                Some(Value::String(list)) => {
                    scopes.extend(list.split(' ').filter(|s| !s.is_empty()).map(str::to_owned));
                }
                Some(Value::Array(list)) => {
                    for scope in list {
                        let Value::String(scope) = scope else {
                            return Err(Refusal::invalid("The token's scopes must be strings."));
                        };
                        scopes.push(scope.clone());
                    }
                }
                Some(_) => return Err(Refusal::invalid("The token's scopes must be strings.")),
            }
        }
        // A broader scope stands for the narrower ones it implies (MCP: "servers MUST account
        // for scope hierarchies"), transitively.
        let mut grew = true;
        while grew {
            grew = false;
            for (broader, narrower) in &self.config.scope_hierarchy {
                if scopes.contains(broader) && !scopes.contains(narrower) {
                    scopes.push(narrower.clone());
                    grew = true;
                }
            }
        }
        let missing: Vec<&String> = self
            .config
            .scopes
            .iter()
            .filter(|needed| !scopes.contains(needed))
            .collect();
        if !missing.is_empty() {
            return Err(Refusal::InsufficientScope(self.config.scopes.clone()));
        }
        Ok(Verified {
            principal: Principal::OAuth {
                issuer: issuer.to_owned(),
                subject,
            },
            scopes,
            exp,
        })
    }

    /// RFC 9728 metadata for the resource at `path` (`""`, or where a front is mounted: `"/mcp"`),
    /// listing `scopes`.
    pub(crate) fn metadata(&self, path: &str, scopes: &[String]) -> Value {
        serde_json::json!({
            "resource": format!("{}{path}", self.config.resource),
            "authorization_servers": self.config.issuers,
            "scopes_supported": scopes,
            "bearer_methods_supported": ["header"],
        })
    }

    /// Where the metadata of the resource at `path` is (RFC 9728 §3.1: the well-known segment
    /// goes between the host and the resource's path).
    pub(crate) fn metadata_url(&self, path: &str) -> String {
        let resource = format!("{}{path}", self.config.resource);
        insert_well_known(&resource, "oauth-protected-resource")
    }
}

#[cfg_attr(docsrs, doc(cfg(feature = "oauth")))]
impl ServerAuth {
    /// Accepts access tokens of an identity provider, checked as [`OAuth`] says: the
    /// [`TokenVerifier`] it installs (replacing any other). Call [`ready`](Self::ready) at
    /// start-up to find its keys before the first request (and to fail then, rather than on
    /// every request, if they cannot be had).
    ///
    /// ```
    /// use oxp_runtime::{oauth::OAuth, server::ServerAuth};
    /// let auth = ServerAuth::default()
    ///     .api_key("k_0123456789abcdef0123456789abcdef")
    ///     .oauth(OAuth::new("https://tools.example.com").issuer("https://login.example.com"));
    /// assert!(auth.is_enabled());
    /// ```
    #[must_use]
    pub fn oauth(self, config: OAuth) -> Self {
        self.token_verifier(Verifier::new(config))
    }

    /// Checks the OAuth configuration, discovers each issuer's key set and fetches it: the
    /// start-up check, naming the setting at fault. Does nothing without
    /// [`oauth`](Self::oauth).
    ///
    /// ```
    /// use oxp_runtime::{oauth::{OAuth, Setting}, server::ServerAuth};
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// assert!(ServerAuth::default().ready().await.is_ok());
    /// let plain = ServerAuth::default().oauth(OAuth::new("https://h").issuer("https://id").jwks_url("http://keys.example"));
    /// assert_eq!(plain.ready().await.unwrap_err().setting, Setting::JwksUrl);
    /// # });
    /// ```
    pub async fn ready(&self) -> Result<(), OAuthError> {
        match self.oauth_verifier() {
            Some(oauth) => oauth.ready().await,
            None => Ok(()),
        }
    }

    /// The identity provider's verifier, when [`oauth`](Self::oauth) installed one.
    pub(crate) fn oauth_verifier(&self) -> Option<&Verifier> {
        let verifier: &dyn std::any::Any = &**self.verifier()?;
        verifier.downcast_ref()
    }
}

impl TokenVerifier for Verifier {
    fn verify<'a>(
        &'a self,
        token: &'a str,
        client: Option<std::net::IpAddr>,
    ) -> futures_util::future::BoxFuture<'a, Result<Caller, AuthError>> {
        Box::pin(async move {
            match self.verify_from(token, client).await {
                Ok(verified) => Ok(Caller {
                    principal: verified.principal,
                    grant: Grant::Scopes(verified.scopes.into()),
                }),
                Err(refusal) => Err(refusal.into_auth_error()),
            }
        })
    }

    fn required_scopes(&self) -> &[String] {
        self.config.required_scopes()
    }

    fn resource_metadata(&self, path: &str, scopes: &[String]) -> Option<ResourceMetadata> {
        Some(ResourceMetadata {
            url: self.metadata_url(path),
            document: self.metadata(path, scopes),
        })
    }

    fn attach(&self, pipeline: &crate::call::Pipeline, resources: &[&str]) {
        if let Some(metrics) = pipeline.metrics_handle() {
            self.attach_metrics(metrics);
        }
        // Tokens for a front's own resource, which its metadata names, are for this server.
        if self.config.audiences.is_empty() {
            let mut audiences = self.audiences.write().unwrap_or_else(|e| e.into_inner());
            for path in resources {
                let resource = format!("{}{path}", self.config.resource);
                if !audiences.contains(&resource) {
                    audiences.push(resource);
                }
            }
        }
    }
}

impl Refusal {
    /// How the server answers it.
    fn into_auth_error(self) -> AuthError {
        match self {
            Refusal::Invalid(message) | Refusal::Forged(message) => AuthError::invalid(message),
            Refusal::InsufficientScope(needed) => AuthError::insufficient_scope(needed),
            Refusal::HeldBack(wait) => {
                let seconds = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
                AuthError::held_back(
                    seconds.max(1),
                    "Too many invalid tokens from this client: wait before sending another.",
                )
            }
            Refusal::Unavailable(_) => AuthError::unavailable(
                FAILURE_RETRY.as_secs().max(1),
                "The identity provider's signing keys cannot be fetched now, so this token \
                 cannot be checked; try again shortly.",
            ),
            Refusal::Busy { per_client } => AuthError::busy(
                per_client,
                if per_client {
                    "Too many of this client's tokens are being checked at the identity \
                     provider at once: wait for them before sending another."
                } else {
                    "Too many tokens are being checked at the identity provider at once; \
                     try again shortly."
                },
            ),
        }
    }
}

/// The path of a URL (`""` for a host-only one).
fn resource_path(url: &str) -> &str {
    url.split_once("://")
        .and_then(|(_, rest)| rest.find('/').map(|i| &rest[i..]))
        .unwrap_or_default()
}

/// Whether the resource's metadata can be served under `path` (RFC 9728 §3.1): plain URL
/// characters a route can name as they are, and no empty segment.
fn routable(path: &str) -> bool {
    path.bytes()
        .all(|b| b.is_ascii_alphanumeric() || b"-._~/%!$&'()+,;=".contains(&b))
        && !path.contains("//")
}

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

const MISSING_EXP: Refusal = Refusal::Invalid("The token must have an `exp` claim.");
const NOT_A_TIME: Refusal = Refusal::Invalid("A time claim of the token is not a number.");
const EXPIRED: Refusal = Refusal::Invalid("The token has expired.");
const NOT_YET_VALID: Refusal = Refusal::Invalid("The token is not valid yet (`nbf`).");

/// A time claim in seconds since the epoch, if there is one.
fn time(claims: &Map<String, Value>, name: &str) -> Result<Option<u64>, Refusal> {
    match claims.get(name) {
        None => Ok(None),
        Some(value) => value
            .as_u64()
            .or_else(|| value.as_f64().filter(|f| *f >= 0.0).map(|f| f as u64))
            .map(Some)
            .ok_or(NOT_A_TIME),
    }
}

/// Why `jsonwebtoken` refused a token whose header and `iss` were found good, in the words of
/// the check that failed. `claims` are the token's, read before its signature was checked
/// (and the bytes `jsonwebtoken` read after): they tell a missing `exp` from one that is no
/// number.
fn refused_by_jsonwebtoken(
    error: &jsonwebtoken::errors::Error,
    claims: &Map<String, Value>,
) -> Refusal {
    use jsonwebtoken::errors::ErrorKind;
    match error.kind() {
        ErrorKind::InvalidSignature => Refusal::forged("The token's signature is not valid."),
        // The header and payload were read already: only the signature is left to be bad.
        ErrorKind::Base64(_) => Refusal::forged("The token's signature is not base64url."),
        // A header field of a type the JOSE header does not allow (`x5c` not a list, say).
        ErrorKind::Json(_) => Refusal::forged("The token is not a JWT (JSON objects)."),
        ErrorKind::ExpiredSignature => EXPIRED,
        ErrorKind::ImmatureSignature => NOT_YET_VALID,
        ErrorKind::MissingRequiredClaim(_) if !claims.contains_key("exp") => MISSING_EXP,
        ErrorKind::MissingRequiredClaim(_) | ErrorKind::InvalidClaimFormat(_) => NOT_A_TIME,
        ErrorKind::InvalidIssuer => Refusal::invalid("The token's issuer is not trusted here."),
        // The key and the algorithm were matched before: only a process-wide provider that is
        // not ours (an app's own, lacking the algorithm) gets here.
        other => {
            tracing::warn!(error = ?other, "jsonwebtoken could not check a token's signature");
            Refusal::forged("The token's signature is not valid.")
        }
    }
}

fn decode_object(part: &str) -> Result<Map<String, Value>, Refusal> {
    let bytes = URL_SAFE_NO_PAD
        .decode(part)
        .map_err(|_| Refusal::forged("The token is not a JWT (base64url parts)."))?;
    serde_json::from_slice(&bytes)
        .map_err(|_| Refusal::forged("The token is not a JWT (JSON objects)."))
}

/// Refuses an introspection answer for a token that is not an access token: RFC 7662's
/// `token_type` (`Bearer`, or a provider's `access_token`), ORY Hydra's `token_use`, Keycloak's
/// `typ` (`Bearer`; `Refresh`, `Offline` and `ID` are other tokens). A refresh or ID token of
/// the user is genuine, and still no credential for this server.
fn check_introspected_type(claims: &Map<String, Value>) -> Result<(), Refusal> {
    const NOT_ACCESS: Refusal =
        Refusal::Invalid("The token is not an access token (the introspection answer says so).");
    let field = |name: &str| match claims.get(name) {
        None => Ok(None),
        Some(Value::String(value)) => Ok(Some(value.to_ascii_lowercase())),
        Some(_) => Err(NOT_ACCESS),
    };
    let access = |value: Option<String>, accepted: &[&str]| match value {
        Some(value) if !accepted.contains(&value.as_str()) => Err(NOT_ACCESS),
        _ => Ok(()),
    };
    access(
        field("token_type")?,
        &[
            "bearer",
            "access_token",
            "urn:ietf:params:oauth:token-type:access_token",
        ],
    )?;
    access(field("token_use")?, &["access_token"])?;
    access(
        field("typ")?,
        &["bearer", "at+jwt", "application/at+jwt", "jwt"],
    )
}

/// The header's algorithm, if the header may be accepted at all.
fn check_header(header: &Map<String, Value>, strict_typ: bool) -> Result<Algorithm, Refusal> {
    let alg = header
        .get("alg")
        .and_then(Value::as_str)
        .unwrap_or_default();
    if alg.eq_ignore_ascii_case("none") {
        return Err(Refusal::forged(
            "Unsigned tokens (`alg: none`) are refused.",
        ));
    }
    if alg.starts_with("HS") {
        return Err(Refusal::forged(
            "Tokens of an identity provider must be signed with its public key, not a shared secret (`HS*`).",
        ));
    }
    let alg = alg
        .parse::<Algorithm>()
        .ok()
        .filter(|a| keys::ALLOWED.contains(a))
        .ok_or(Refusal::forged("The token's algorithm is not accepted."))?;
    // RFC 7515 §4.1.11: extensions the recipient must understand; this server understands none.
    if header.contains_key("crit") {
        return Err(Refusal::forged(
            "The token names critical header extensions this server does not support.",
        ));
    }
    let typ = match header.get("typ") {
        None => None,
        Some(Value::String(typ)) => Some(typ.to_ascii_lowercase()),
        Some(_) => return Err(Refusal::forged("The token's `typ` is not valid.")),
    };
    let typ = typ
        .as_deref()
        .map(|t| t.strip_prefix("application/").unwrap_or(t));
    match typ {
        Some("at+jwt") => {}
        None | Some("jwt") if !strict_typ => {}
        _ => {
            return Err(Refusal::forged(
                "The token is not an access token (`typ` must be `at+jwt`).",
            ));
        }
    }
    Ok(alg)
}

/// Whether an `aud` names our resource: the same URL, the scheme and host compared without
/// case (MCP: "SHOULD accept uppercase scheme and host components"), the path exactly; a
/// host-only URL is the same with or without one trailing slash (`https://h` and `https://h/`;
/// but `https://h/mcp/` is not `https://h/mcp`). Anything that is not a URL (a client id,
/// Entra's `api://…`) is compared exactly.
fn same_resource(aud: &str, ours: &str) -> bool {
    if aud == ours {
        return true;
    }
    fn parts(url: &str) -> Option<(String, &str)> {
        let (scheme, rest) = url.split_once("://")?;
        if !scheme.eq_ignore_ascii_case("https") && !scheme.eq_ignore_ascii_case("http") {
            return None;
        }
        let (authority, path) = match rest.find('/') {
            Some(i) => rest.split_at(i),
            None => (rest, ""),
        };
        let path = if path == "/" { "" } else { path };
        Some((format!("{scheme}://{authority}").to_ascii_lowercase(), path))
    }
    match (parts(aud), parts(ours)) {
        (Some(a), Some(o)) => a == o,
        _ => false,
    }
}

/// `https://h/p` → `https://h/.well-known/{name}/p`.
fn insert_well_known(url: &str, name: &str) -> String {
    let (scheme, rest) = url.split_once("://").unwrap_or(("https", url));
    let (host, path) = match rest.find('/') {
        Some(i) => (&rest[..i], rest[i..].trim_end_matches('/')),
        None => (rest, ""),
    };
    format!("{scheme}://{host}/.well-known/{name}{path}")
}

/// Where an issuer's metadata may be: RFC 8414's path-inserted location, then OpenID Connect's
/// appended one.
fn metadata_urls(issuer: &str) -> [String; 2] {
    [
        insert_well_known(issuer, "oauth-authorization-server"),
        format!(
            "{}/.well-known/openid-configuration",
            issuer.trim_end_matches('/')
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn well_known_locations() {
        assert_eq!(
            metadata_urls("https://id.example/realms/acme"),
            [
                "https://id.example/.well-known/oauth-authorization-server/realms/acme",
                "https://id.example/realms/acme/.well-known/openid-configuration",
            ]
        );
        assert_eq!(
            metadata_urls("https://sts.windows.net/tid/")[1],
            "https://sts.windows.net/tid/.well-known/openid-configuration"
        );
        assert_eq!(
            insert_well_known("https://h:8443/mcp", "oauth-protected-resource"),
            "https://h:8443/.well-known/oauth-protected-resource/mcp"
        );
        assert_eq!(
            insert_well_known("https://h", "oauth-protected-resource"),
            "https://h/.well-known/oauth-protected-resource"
        );
    }

    #[test]
    fn only_a_routable_resource_path_is_served() {
        assert!(routable(""));
        assert!(routable("/oxp/v1"));
        for path in ["/{id}", "/a//b", "/:x", "/a b", "/a?b"] {
            assert!(!routable(path), "{path}");
        }
        let error = OAuth::new("https://h/{tenant}")
            .issuer("https://id")
            .check();
        assert_eq!(error.unwrap_err().setting, Setting::Resource);
    }

    /// A front's RFC 9728 metadata follows the path it is mounted at: its document, and the
    /// `resource_metadata` of a 401 on its path, name that path (and no `/mcp` is made up); a
    /// token for that resource, as the metadata tells clients to get, is for this server.
    #[tokio::test]
    async fn a_front_mounted_elsewhere_has_metadata_at_its_own_path() {
        use tower::ServiceExt;
        let auth = ServerAuth::default()
            .oauth(OAuth::new("https://tools.example.com").issuer("https://id.example"));
        let claims = serde_json::json!({
            "sub": "ada",
            "exp": unix_now() + 60,
            "aud": "https://tools.example.com/agents/mcp",
        });
        let claims = claims.as_object().unwrap();
        let verifier = auth.oauth_verifier().unwrap();
        let grant = || {
            verifier
                .grant(claims, "https://id.example")
                .map(|v| v.principal)
        };
        assert_eq!(
            grant().unwrap_err(),
            Refusal::invalid("The token was not issued for this server (`aud`).")
        );
        let app = crate::server::Server::new(crate::registry::Registry::builder().build().unwrap())
            .auth(auth.clone())
            .mount("/agents/mcp", axum::routing::post(|| async { "answered" }))
            .router();
        let ada = Principal::OAuth {
            issuer: "https://id.example".into(),
            subject: "ada".into(),
        };
        assert_eq!(grant(), Ok(ada));
        let request = |method: &str, path: &str| {
            let request = axum::http::Request::builder().method(method).uri(path);
            request.body(axum::body::Body::empty()).unwrap()
        };
        let well_known = "https://tools.example.com/.well-known/oauth-protected-resource";
        let document = |path: &str| {
            let app = app.clone();
            let request = request("GET", path);
            async move {
                let response = app.oneshot(request).await.unwrap();
                assert_eq!(response.status(), 200);
                let body = axum::body::to_bytes(response.into_body(), 1 << 16).await;
                serde_json::from_slice::<Value>(&body.unwrap()).unwrap()
            }
        };
        let front = document("/.well-known/oauth-protected-resource/agents/mcp").await;
        assert_eq!(front["resource"], "https://tools.example.com/agents/mcp");
        assert_eq!(front["authorization_servers"][0], "https://id.example");
        let server = document("/.well-known/oauth-protected-resource").await;
        assert_eq!(server["resource"], "https://tools.example.com");
        let challenge = |method: &str, path: &str| {
            let app = app.clone();
            let request = request(method, path);
            async move {
                let response = app.oneshot(request).await.unwrap();
                assert_eq!(response.status(), 401);
                response.headers()["www-authenticate"]
                    .to_str()
                    .unwrap()
                    .to_owned()
            }
        };
        assert_eq!(
            challenge("POST", "/agents/mcp").await,
            format!("Bearer resource_metadata=\"{well_known}/agents/mcp\"")
        );
        assert_eq!(
            challenge("GET", "/tools").await,
            format!("Bearer resource_metadata=\"{well_known}\"")
        );
        // Nothing is mounted at `/mcp`: it has no metadata of its own.
        let mcp = app.oneshot(request("GET", "/.well-known/oauth-protected-resource/mcp"));
        assert_eq!(mcp.await.unwrap().status(), 404);
    }

    #[test]
    fn one_trailing_slash_policy() {
        assert!(same_resource("https://h/", "https://h"));
        assert!(same_resource("https://h", "https://h/"));
        assert!(!same_resource("https://h/mcp/", "https://h/mcp"));
        assert!(!same_resource("https://h.evil", "https://h"));
        assert!(!same_resource("account", "https://h"));
        assert!(same_resource(
            "HTTPS://H.example:8443/mcp",
            "https://h.example:8443/mcp"
        ));
        assert!(!same_resource(
            "https://h.example/MCP",
            "https://h.example/mcp"
        ));
        assert!(!same_resource(
            "https://h.example:8443",
            "https://h.example"
        ));
        assert!(!same_resource("api://Tools", "api://tools"));
    }

    /// What `jsonwebtoken` refuses of a token whose header and issuer were found good is named
    /// in the words of the check that failed, with the configured leeway however large.
    #[test]
    fn jsonwebtoken_refusals_are_named_by_the_check_that_failed() {
        use jsonwebtoken::{DecodingKey, EncodingKey, Header};
        use ring::signature::{Ed25519KeyPair, KeyPair};
        use serde_json::json;
        let oauth = |leeway| OAuth::new("https://h").issuer("https://id").leeway(leeway);
        let verifier = Verifier::new(oauth(Duration::from_secs(60)));
        let pkcs8 = Ed25519KeyPair::generate_pkcs8(&ring::rand::SystemRandom::new()).unwrap();
        let public = Ed25519KeyPair::from_pkcs8(pkcs8.as_ref()).unwrap();
        let public = URL_SAFE_NO_PAD.encode(public.public_key().as_ref());
        let decoding = DecodingKey::from_ed_components(&public).unwrap();
        let sign = |claims: &Value| {
            let key = EncodingKey::from_ed_der(pkcs8.as_ref());
            jsonwebtoken::encode(&Header::new(Algorithm::EdDSA), claims, &key).unwrap()
        };
        let check = |verifier: &Verifier, token: &str, claims: &Value| {
            let validation = verifier.validation(Algorithm::EdDSA, "https://id");
            jsonwebtoken::decode::<Map<String, Value>>(token, &decoding, &validation)
                .map(|_| ())
                .map_err(|error| refused_by_jsonwebtoken(&error, claims.as_object().unwrap()))
        };
        let now = unix_now();
        let good = json!({"iss": "https://id", "exp": now + 60});
        assert_eq!(check(&verifier, &sign(&good), &good), Ok(()));
        let with = |name: &str, value: Value| {
            let mut claims = good.clone();
            claims[name] = value;
            claims
        };
        let without_exp = json!({"iss": "https://id"});
        let cases = [
            (without_exp, MISSING_EXP),
            (with("exp", json!("soon")), NOT_A_TIME),
            (with("nbf", json!("now")), NOT_A_TIME),
            (with("exp", json!(now - 120)), EXPIRED),
            (with("nbf", json!(now + 300)), NOT_YET_VALID),
            (
                with("iss", json!("https://other")),
                Refusal::invalid("The token's issuer is not trusted here."),
            ),
        ];
        for (claims, refusal) in cases {
            assert_eq!(
                check(&verifier, &sign(&claims), &claims),
                Err(refusal),
                "{claims}"
            );
        }
        let token = sign(&good);
        let (signed, signature) = token.rsplit_once('.').unwrap();
        let flipped = if signature.starts_with('A') { "B" } else { "A" };
        let forged = format!("{signed}.{flipped}{}", &signature[1..]);
        assert_eq!(
            check(&verifier, &forged, &good),
            Err(Refusal::forged("The token's signature is not valid."))
        );
        assert_eq!(
            check(&verifier, &format!("{signed}.*"), &good),
            Err(Refusal::forged("The token's signature is not base64url."))
        );
        // A leeway past the time since the epoch lets every token's times pass, as if it had no
        // end, and takes nothing below zero.
        let lenient = Verifier::new(oauth(Duration::from_secs(u64::MAX)));
        let old = with("exp", json!(1));
        assert_eq!(check(&lenient, &sign(&old), &old), Ok(()));
    }

    #[test]
    fn header_checks() {
        let header = |json: Value| check_header(json.as_object().unwrap(), false);
        use serde_json::json;
        assert!(header(json!({"alg": "none"})).is_err());
        assert!(header(json!({"alg": "HS256"})).is_err());
        assert!(header(json!({"alg": "ES512"})).is_err());
        assert!(header(json!({"alg": "RS256", "crit": ["exp"]})).is_err());
        assert!(header(json!({"alg": "RS256", "typ": "dpop+jwt"})).is_err());
        assert_eq!(
            header(json!({"alg": "RS256", "typ": "JWT"})),
            Ok(Algorithm::RS256)
        );
        assert_eq!(
            header(json!({"alg": "ES256", "typ": "Application/AT+JWT"})),
            Ok(Algorithm::ES256)
        );
        assert_eq!(header(json!({"alg": "EdDSA"})), Ok(Algorithm::EdDSA));
        let strict = |json: Value| check_header(json.as_object().unwrap(), true);
        assert!(strict(json!({"alg": "RS256", "typ": "JWT"})).is_err());
        assert!(strict(json!({"alg": "RS256"})).is_err());
        assert!(strict(json!({"alg": "RS256", "typ": "at+JWT"})).is_ok());
    }
}
