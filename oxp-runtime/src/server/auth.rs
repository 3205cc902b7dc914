//! Server authentication (oxp-notes §1 A, §3.7, §3.31, §3.32): HS256 JWT bearer tokens, API
//! keys and a [`TokenVerifier`] (an identity provider's access tokens with the `oauth` feature, or
//! the app's own), off unless configured. `/health` and the RFC 9728 metadata never reach this.

use std::borrow::Cow;
use std::fmt;
use std::sync::Arc;

use axum::http::header::{AUTHORIZATION, RETRY_AFTER, WWW_AUTHENTICATE};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use ctutils::CtEq;
use futures_util::future::BoxFuture;
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use serde_json::Value;

pub use crate::principal::{ForeignUser, Grant, Principal};

/// The headers an API key may come in: the current name first, then the OTC and RFC ones.
const API_KEY_HEADERS: [&str; 3] = ["oxp-api-key", "otc-api-key", "x-api-key"];
/// Clock skew allowed on `exp` and `nbf`, in seconds.
const LEEWAY_SECONDS: u64 = 60;

/// How callers prove who they are. Empty (the default) means no authentication.
///
/// ```
/// use oxp_runtime::server::ServerAuth;
///
/// let auth = ServerAuth::default()
///     .jwt_secret("a-shared-secret-of-at-least-32-bytes!")
///     .jwt_audience(["my-agent"])
///     .api_key("k_0123456789abcdef0123456789abcdef");
/// assert!(auth.is_enabled());
/// assert!(!ServerAuth::default().is_enabled());
/// ```
#[derive(Clone, Default)]
pub struct ServerAuth {
    jwt: Option<Jwt>,
    /// Each key and the principal it authenticates (its identity, not its place in the list).
    api_keys: Vec<(Vec<u8>, Principal)>,
    /// Checks the bearer tokens that are neither an API key nor (with a secret) HS256.
    verifier: Option<Arc<dyn TokenVerifier>>,
}

/// Checks bearer tokens the server's own API keys and HS256 secret do not: an identity
/// provider's access tokens (what `ServerAuth::oauth` installs, with the `oauth` feature), or
/// an app's own scheme. Plugged in with [`ServerAuth::token_verifier`] (or
/// [`Server::token_verifier`](super::Server::token_verifier)); the server asks it about every
/// `Authorization: Bearer` token that is not one of its API keys, and, when an HS256 secret is
/// configured too, about every token whose header does not say HS256.
///
/// A refusal is an [`AuthError`], answered as it says (`401`, `403 insufficient_scope`…);
/// its message is sent to the client, so it never repeats the token.
///
/// ```
/// use std::collections::HashMap;
/// use oxp_runtime::__private::BoxFuture;
/// use oxp_runtime::server::{AuthError, Caller, Grant, Principal, Server, ServerAuth, TokenVerifier};
/// use tower::ServiceExt;
///
/// /// API keys kept in the app's own table, each with the scopes it grants.
/// #[derive(Debug)]
/// struct KeyTable(HashMap<String, Vec<String>>);
///
/// impl TokenVerifier for KeyTable {
///     fn verify<'a>(
///         &'a self,
///         token: &'a str,
///         _client: Option<std::net::IpAddr>,
///     ) -> BoxFuture<'a, Result<Caller, AuthError>> {
///         let found = self.0.get(token).map(|scopes| Caller {
///             // A digest of the key: the same key is the same caller, and no log shows it.
///             principal: Principal::api_key(token),
///             grant: Grant::Scopes(scopes.clone().into()),
///         });
///         Box::pin(async move { found.ok_or(AuthError::invalid("The key is not known.")) })
///     }
/// }
///
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let table = KeyTable(HashMap::from([("t-ada".into(), vec!["tools".into()])]));
/// let app = Server::new(oxp_runtime::Registry::builder().build().unwrap())
///     .token_verifier(table)
///     .router();
/// let list = |token: &str| {
///     axum::http::Request::get("/tools")
///         .header("authorization", format!("Bearer {token}"))
///         .body(axum::body::Body::empty())
///         .unwrap()
/// };
/// assert_eq!(app.clone().oneshot(list("t-ada")).await.unwrap().status(), 200);
/// assert_eq!(app.oneshot(list("t-bob")).await.unwrap().status(), 401);
/// # });
/// ```
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a `TokenVerifier`",
    note = "implement `oxp_runtime::server::TokenVerifier` for it: `verify` checks one bearer token"
)]
pub trait TokenVerifier: std::any::Any + fmt::Debug + Send + Sync {
    /// Checks `token` (the bearer token, without its scheme), sent from `client` when the
    /// server knows the address: who it is from and what it may use, or why it is refused.
    fn verify<'a>(
        &'a self,
        token: &'a str,
        client: Option<std::net::IpAddr>,
    ) -> BoxFuture<'a, Result<Caller, AuthError>>;

    /// The scopes every request needs: named in each `401`'s challenge and in every
    /// `403 insufficient_scope`. None by default.
    fn required_scopes(&self) -> &[String] {
        &[]
    }

    /// The RFC 9728 metadata of the protected resource at `path` (`""` for the server itself,
    /// else the path a front is [mounted](super::Server::mount) or [nested](super::Server::nest)
    /// at), listing `scopes`; `None` (the default) publishes none. With metadata, the server
    /// serves it (at `/.well-known/oauth-protected-resource{path}` and where `url` points on this
    /// server), and every `401` and `403` for that resource points to it in `resource_metadata`.
    fn resource_metadata(&self, path: &str, scopes: &[String]) -> Option<ResourceMetadata> {
        let _ = (path, scopes);
        None
    }

    /// Called when a server over `pipeline` is built with this verifier. `resources` are the
    /// paths of the protected resources it serves: `""` for the server itself, then each
    /// front's (`/mcp` for MCP), those [`resource_metadata`](Self::resource_metadata) is asked
    /// about; a verifier that checks what a token was issued for accepts them. Does nothing by
    /// default.
    fn attach(&self, pipeline: &crate::call::Pipeline, resources: &[&str]) {
        let _ = (pipeline, resources);
    }
}

/// A protected resource's RFC 9728 metadata, as a [`TokenVerifier`] publishes it.
///
/// ```
/// use oxp_runtime::server::ResourceMetadata;
/// let metadata = ResourceMetadata {
///     url: "https://tools.example.com/.well-known/oauth-protected-resource/mcp".into(),
///     document: serde_json::json!({
///         "resource": "https://tools.example.com/mcp",
///         "authorization_servers": ["https://login.example.com"],
///     }),
/// };
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct ResourceMetadata {
    /// Where clients find it: the `resource_metadata` of challenges. When its path is one a
    /// route can name, the server serves the document there too.
    pub url: String,
    /// The document (`resource`, `authorization_servers`, `scopes_supported`…).
    pub document: Value,
}

#[derive(Clone)]
struct Jwt {
    key: DecodingKey,
    audiences: Vec<String>,
}

/// Who a request is from, and what scopes let it use.
///
/// ```
/// use axum::http::HeaderMap;
/// use oxp_runtime::server::{Caller, Grant, Principal, ServerAuth};
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let caller = ServerAuth::default().authenticate(&HeaderMap::new()).await.unwrap();
/// assert_eq!(caller, Caller { principal: Principal::Anonymous, grant: Grant::All });
/// # });
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Caller {
    /// Who.
    pub principal: Principal,
    /// What scopes allow.
    pub grant: Grant,
}

impl fmt::Debug for ServerAuth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut debug = f.debug_struct("ServerAuth");
        debug
            .field("jwt", &self.jwt.is_some())
            .field(
                "jwt_audiences",
                &self.jwt.as_ref().map(|j| j.audiences.clone()),
            )
            .field("api_keys", &self.api_keys.len())
            .field("verifier", &self.verifier);
        debug.finish()
    }
}

impl ServerAuth {
    /// Accepts `Authorization: Bearer <jwt>` signed with HS256 and this shared secret.
    ///
    /// ```
    /// let auth = oxp_runtime::server::ServerAuth::default().jwt_secret("a-secret-of-at-least-32-bytes-please");
    /// assert!(auth.is_enabled());
    /// ```
    #[must_use]
    pub fn jwt_secret(mut self, secret: impl AsRef<[u8]>) -> Self {
        // Before any token is checked: a `Jwt` exists only through here.
        crate::hs256::install();
        let audiences = self.jwt.take().map(|j| j.audiences).unwrap_or_default();
        self.jwt = Some(Jwt {
            key: DecodingKey::from_secret(secret.as_ref()),
            audiences,
        });
        self
    }

    /// The audiences (client ids) a JWT's `aud` may name. A token with an `aud` outside this list
    /// is refused — with no list at all, any token that carries an `aud` is (the spec: "if `aud`
    /// is present, the server MUST validate it against its allowed-client list").
    ///
    /// Call after [`jwt_secret`](Self::jwt_secret).
    ///
    /// ```
    /// let auth = oxp_runtime::server::ServerAuth::default()
    ///     .jwt_secret("a-secret-of-at-least-32-bytes-please")
    ///     .jwt_audience(["agent-1", "agent-2"]);
    /// # let registry = oxp_runtime::Registry::builder().build().unwrap();
    /// let server = oxp_runtime::server::Server::new(registry).auth(auth);
    /// ```
    #[must_use]
    pub fn jwt_audience<S: Into<String>>(mut self, audiences: impl IntoIterator<Item = S>) -> Self {
        if let Some(jwt) = &mut self.jwt {
            jwt.audiences.extend(audiences.into_iter().map(Into::into));
        }
        self
    }

    /// Accepts this API key, in `OXP-API-Key`, `OTC-API-Key`, `X-API-Key` or as a bearer token.
    /// Its caller is [`Principal::api_key`]: the same key is the same caller wherever it is
    /// listed.
    ///
    /// ```
    /// let auth = oxp_runtime::server::ServerAuth::default().api_key("k_0123456789abcdef0123456789abcdef").api_key("k_second_key_also_32_characters_long");
    /// assert!(!auth.has_short_api_key());
    /// ```
    #[must_use]
    pub fn api_key(mut self, key: impl Into<String>) -> Self {
        let key = key.into();
        if !key.is_empty() {
            let principal = Principal::api_key(&key);
            self.api_keys.push((key.into_bytes(), principal));
        }
        self
    }

    /// Checks bearer tokens with `verifier` (beside API keys and an HS256 secret, which are
    /// checked first): the seam an identity provider's checks (`oauth`, with the `oauth`
    /// feature) or an app's own plug into. A second call replaces the first.
    ///
    /// ```
    /// use oxp_runtime::__private::BoxFuture;
    /// use oxp_runtime::server::{AuthError, Caller, ServerAuth, TokenVerifier};
    ///
    /// #[derive(Debug)]
    /// struct NoOne;
    /// impl TokenVerifier for NoOne {
    ///     fn verify<'a>(&'a self, _: &'a str, _: Option<std::net::IpAddr>) -> BoxFuture<'a, Result<Caller, AuthError>> {
    ///         Box::pin(async { Err(AuthError::invalid("No token is good here.")) })
    ///     }
    /// }
    /// assert!(ServerAuth::default().token_verifier(NoOne).is_enabled());
    /// ```
    #[must_use]
    pub fn token_verifier(mut self, verifier: impl TokenVerifier) -> Self {
        self.verifier = Some(Arc::new(verifier));
        self
    }

    /// The verifier [`token_verifier`](Self::token_verifier) installed.
    pub(crate) fn verifier(&self) -> Option<&Arc<dyn TokenVerifier>> {
        self.verifier.as_ref()
    }

    /// Whether an API key is shorter than the 32 bytes the spec recommends (A.60).
    ///
    /// ```
    /// assert!(oxp_runtime::server::ServerAuth::default().api_key("short").has_short_api_key());
    /// ```
    pub fn has_short_api_key(&self) -> bool {
        self.api_keys.iter().any(|(k, _)| k.len() < 32)
    }

    /// Whether any method is configured.
    ///
    /// ```
    /// assert!(!oxp_runtime::server::ServerAuth::default().is_enabled());
    /// ```
    pub fn is_enabled(&self) -> bool {
        self.jwt.is_some() || !self.api_keys.is_empty() || self.has_verifier()
    }

    /// Whether a [`TokenVerifier`] checks bearer tokens (and a token in the URL is refused).
    pub(crate) fn has_verifier(&self) -> bool {
        self.verifier.is_some()
    }

    /// The scopes every request needs (the verifier's; none without one).
    pub(crate) fn required_scopes(&self) -> Vec<String> {
        (self.verifier.as_ref()).map_or_else(Vec::new, |v| v.required_scopes().to_vec())
    }

    /// Checks a request's headers. With authentication off, every request is
    /// [`Principal::Anonymous`] and the `Authorization` header is ignored (MUST, §1 A.59).
    ///
    /// ```
    /// use axum::http::{HeaderMap, HeaderValue};
    /// use oxp_runtime::server::{Principal, ServerAuth};
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// let auth = ServerAuth::default().api_key("k_0123456789abcdef0123456789abcdef");
    /// let mut headers = HeaderMap::new();
    /// headers.insert("authorization", HeaderValue::from_static("Bearer wrong"));
    /// assert!(auth.authenticate(&headers).await.is_err());
    /// # });
    /// ```
    pub async fn authenticate(&self, headers: &HeaderMap) -> Result<Caller, AuthError> {
        self.authenticate_from(headers, None).await
    }

    /// [`authenticate`](Self::authenticate), for a request from `client`, which the
    /// [`TokenVerifier`] is told: OAuth's holds back a client that has sent too many forged
    /// tokens (`429`) before looking at its token (see `OAuth::forged_tokens_per_client`).
    ///
    /// ```
    /// use axum::http::HeaderMap;
    /// use oxp_runtime::server::ServerAuth;
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// let auth = ServerAuth::default().api_key("k_0123456789abcdef0123456789abcdef");
    /// let client = "203.0.113.7".parse().ok();
    /// assert_eq!(auth.authenticate_from(&HeaderMap::new(), client).await.unwrap_err().status(), 401);
    /// # });
    /// ```
    pub async fn authenticate_from(
        &self,
        headers: &HeaderMap,
        client: Option<std::net::IpAddr>,
    ) -> Result<Caller, AuthError> {
        let all = |principal| Caller {
            principal,
            grant: Grant::All,
        };
        if !self.is_enabled() {
            return Ok(all(Principal::Anonymous));
        }
        // One credential per request: with two, which one counts would be a proxy's or a
        // parser's guess, and one of them could be smuggled past the other.
        let credentials = API_KEY_HEADERS
            .iter()
            .chain([&AUTHORIZATION.as_str()])
            .map(|name| headers.get_all(*name).iter().count())
            .sum::<usize>();
        if credentials > 1 {
            return Err(AuthError::invalid(
                "Send one credential: a single Authorization or API key header.",
            ));
        }
        for name in API_KEY_HEADERS {
            if let Some(value) = headers.get(name) {
                return self
                    .match_api_key(value.as_bytes())
                    .map(all)
                    .ok_or(AuthError::invalid("The API key is not valid."));
            }
        }
        let Some(authorization) = headers.get(AUTHORIZATION) else {
            return Err(AuthError::missing(
                "Authentication is required: send a bearer token or an API key.",
            ));
        };
        // RFC 9110 §11.1: the scheme is case-insensitive.
        let token = authorization
            .to_str()
            .ok()
            .and_then(|v| v.split_once(' '))
            .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
            .map(|(_, token)| token.trim())
            .filter(|token| !token.is_empty())
            .ok_or(AuthError::invalid(
                "The Authorization header must be `Bearer <token>`.",
            ))?;
        if let Some(principal) = self.match_api_key(token.as_bytes()) {
            return Ok(all(principal));
        }
        // An HS256 token goes to the shared secret, when there is one; every other token to
        // the verifier (an identity provider's keys refuse HS* themselves).
        let verifier: &dyn TokenVerifier = match (&self.jwt, &self.verifier) {
            (Some(_), Some(verifier)) if !is_hs256(token) => &**verifier,
            (Some(jwt), _) => jwt,
            (None, Some(verifier)) => &**verifier,
            (None, None) => return Err(AuthError::invalid("The API key is not valid.")),
        };
        verifier.verify(token, client).await
    }

    fn match_api_key(&self, candidate: &[u8]) -> Option<Principal> {
        // Compare against every key, in constant time each, so timing tells nothing.
        let mut found = None;
        for (key, principal) in &self.api_keys {
            if key.as_slice().ct_eq(candidate).to_bool() {
                found = Some(principal);
            }
        }
        found.cloned()
    }
}

/// Whether a JWT's header says HS256 (read unverified, to pick who checks it).
fn is_hs256(token: &str) -> bool {
    jsonwebtoken::decode_header(token).is_ok_and(|h| h.alg == Algorithm::HS256)
}

/// The shared secret's check.
impl TokenVerifier for Jwt {
    fn verify<'a>(
        &'a self,
        token: &'a str,
        _client: Option<std::net::IpAddr>,
    ) -> BoxFuture<'a, Result<Caller, AuthError>> {
        let checked = self.check(token).map(|principal| Caller {
            principal,
            grant: Grant::All,
        });
        Box::pin(std::future::ready(checked))
    }
}

impl fmt::Debug for Jwt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Never the key.
        f.debug_struct("Jwt")
            .field("audiences", &self.audiences)
            .finish_non_exhaustive()
    }
}

impl Jwt {
    fn check(&self, token: &str) -> Result<Principal, AuthError> {
        // HS256 only: `none`, RS* and ES* are refused by the algorithm list (§3.32).
        let mut validation = Validation::new(Algorithm::HS256);
        validation.leeway = LEEWAY_SECONDS;
        validation.validate_nbf = true;
        validation.set_required_spec_claims(&["exp"]);
        // An `aud` (a string or a list of them) must name one of the audiences, and with none
        // configured no `aud` is let in; a token without one is (the spec: "if `aud` is
        // present, the server MUST validate it against its allowed-client list").
        validation.aud =
            (!self.audiences.is_empty()).then(|| self.audiences.iter().cloned().collect());
        let data =
            jsonwebtoken::decode::<serde_json::Map<String, Value>>(token, &self.key, &validation)
                .map_err(|e| match e.kind() {
                jsonwebtoken::errors::ErrorKind::ExpiredSignature => {
                    AuthError::invalid("The token has expired.")
                }
                jsonwebtoken::errors::ErrorKind::MissingRequiredClaim(_) => {
                    AuthError::invalid("The token must have an `exp` claim.")
                }
                jsonwebtoken::errors::ErrorKind::InvalidAudience => {
                    AuthError::invalid("The token's audience is not allowed.")
                }
                _ => AuthError::invalid("The token is not valid."),
            })?;
        // RFC 7515 §4.1.11: a `crit` header names extensions the recipient MUST understand,
        // and this server understands none.
        if data.header.crit.is_some() {
            return Err(AuthError::invalid(
                "The token names critical header extensions this server does not support.",
            ));
        }
        let claims = data.claims;
        // `jsonwebtoken` passes over an `aud` it cannot read (a number, a list holding one)
        // as if there were none.
        let readable = |aud: &Value| match aud {
            Value::String(_) => true,
            Value::Array(auds) => auds.iter().all(Value::is_string),
            _ => false,
        };
        if claims.get("aud").is_some_and(|aud| !readable(aud)) {
            return Err(AuthError::invalid("The token's `aud` is not valid."));
        }
        // The subject is who the caller is: idempotency and MCP users are scoped by it, so a
        // token that names no one cannot be let in as a shared anyone.
        match claims.get("sub") {
            Some(Value::String(subject)) if !subject.is_empty() => {
                Ok(Principal::Jwt(subject.clone()))
            }
            _ => Err(AuthError::invalid(
                "The token must have a `sub` claim naming its subject.",
            )),
        }
    }
}

/// Why a request was not let in: answered with a JSON `{"message"}` and a `WWW-Authenticate`
/// challenge. `401` for a missing or bad credential (with `resource_metadata` pointing to the
/// RFC 9728 metadata when OAuth is on, and `error="invalid_token"` when a token was sent), `403`
/// `insufficient_scope` naming every scope needed, `503` when the identity provider's keys
/// cannot be had. The message never repeats the credential.
///
/// ```
/// use axum::http::HeaderMap;
/// use axum::response::IntoResponse;
/// use oxp_runtime::server::ServerAuth;
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let auth = ServerAuth::default().api_key("k_0123456789abcdef0123456789abcdef");
/// let error = auth.authenticate(&HeaderMap::new()).await.unwrap_err();
/// let response = error.into_response();
/// assert_eq!(response.status(), 401);
/// assert_eq!(response.headers()["www-authenticate"], "Bearer");
/// # });
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AuthError {
    kind: Kind,
    message: Cow<'static, str>,
    /// RFC 9728 metadata of the resource, when OAuth is on.
    metadata: Option<Arc<str>>,
    /// The scopes every request needs, named in a 401's challenge (OAuth only).
    scopes: Vec<String>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Kind {
    /// No credential.
    Missing,
    /// A credential that is not valid.
    Invalid,
    /// The identity provider cannot be asked now: try again after this many seconds.
    Unavailable(u64),
    /// Valid, but short of these scopes (all the request needs).
    InsufficientScope(Vec<String>),
    /// Too many forged tokens from this client: try again after this many seconds.
    HeldBack(u64),
    /// Too many introspections under way: the client's own (`429`), or all (`503`).
    Busy { per_client: bool },
}

impl AuthError {
    fn missing(message: &'static str) -> Self {
        AuthError::new(Kind::Missing, Cow::Borrowed(message))
    }

    fn new(kind: Kind, message: Cow<'static, str>) -> Self {
        AuthError {
            kind,
            message,
            metadata: None,
            scopes: Vec::new(),
        }
    }

    /// `401`: the credential is not valid, for the reason `message` gives the client (a fixed
    /// text, so it cannot repeat the credential).
    ///
    /// ```
    /// let error = oxp_runtime::server::AuthError::invalid("The token has expired.");
    /// assert_eq!(error.status(), 401);
    /// assert_eq!(error.to_string(), "The token has expired.");
    /// ```
    pub fn invalid(message: &'static str) -> Self {
        AuthError::new(Kind::Invalid, Cow::Borrowed(message))
    }

    /// `403 insufficient_scope`: the caller's token lacks one of `needed`, every scope the
    /// request needs.
    ///
    /// ```
    /// let error = oxp_runtime::server::AuthError::insufficient_scope(vec!["tools".into()]);
    /// assert_eq!(error.status(), 403);
    /// ```
    pub fn insufficient_scope(needed: Vec<String>) -> Self {
        let message = format!(
            "The token lacks a scope this request needs; it needs: {}.",
            needed.join(" ")
        );
        AuthError::new(Kind::InsufficientScope(needed), Cow::Owned(message))
    }

    /// `503` with `Retry-After: seconds`: what checks the token cannot be asked now.
    #[cfg_attr(not(feature = "oauth"), allow(dead_code))]
    pub(crate) fn unavailable(seconds: u64, message: &'static str) -> Self {
        AuthError::new(Kind::Unavailable(seconds), Cow::Borrowed(message))
    }

    /// `429` with `Retry-After: seconds`: the client sent too many forged tokens.
    #[cfg_attr(not(feature = "oauth"), allow(dead_code))]
    pub(crate) fn held_back(seconds: u64, message: &'static str) -> Self {
        AuthError::new(Kind::HeldBack(seconds), Cow::Borrowed(message))
    }

    /// Too many tokens being checked elsewhere at once: the client's own (`429`), or all
    /// (`503`); `Retry-After: 1` either way.
    #[cfg_attr(not(feature = "oauth"), allow(dead_code))]
    pub(crate) fn busy(per_client: bool, message: &'static str) -> Self {
        AuthError::new(Kind::Busy { per_client }, Cow::Borrowed(message))
    }

    /// Points the challenge at the resource's RFC 9728 metadata.
    pub(crate) fn with_metadata(mut self, metadata: Option<Arc<str>>) -> Self {
        self.metadata = metadata;
        self
    }

    /// Names the scopes every request needs in a 401's challenge.
    pub(crate) fn with_scopes(mut self, scopes: Vec<String>) -> Self {
        self.scopes = scopes;
        self
    }

    /// The status it is answered with.
    ///
    /// ```
    /// use axum::http::HeaderMap;
    /// use oxp_runtime::server::ServerAuth;
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// let auth = ServerAuth::default().api_key("k_0123456789abcdef0123456789abcdef");
    /// assert_eq!(auth.authenticate(&HeaderMap::new()).await.unwrap_err().status(), 401);
    /// # });
    /// ```
    pub fn status(&self) -> StatusCode {
        match self.kind {
            Kind::Missing | Kind::Invalid => StatusCode::UNAUTHORIZED,
            Kind::Unavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
            Kind::InsufficientScope(_) => StatusCode::FORBIDDEN,
            Kind::HeldBack(_) | Kind::Busy { per_client: true } => StatusCode::TOO_MANY_REQUESTS,
            Kind::Busy { per_client: false } => StatusCode::SERVICE_UNAVAILABLE,
        }
    }

    /// The reason label it is counted under in `oxp_refusals_total`.
    pub(crate) fn reason(&self) -> crate::metrics::Refusal {
        use crate::metrics::Refusal;
        match (&self.kind, &self.metadata) {
            (Kind::InsufficientScope(_), _) => Refusal::InsufficientScope,
            (Kind::Unavailable(_), _) => Refusal::KeysUnavailable,
            (Kind::HeldBack(_), _) => Refusal::InvalidTokensHeldBack,
            (Kind::Busy { .. }, _) => Refusal::IntrospectionsBusy,
            (Kind::Invalid, Some(_)) => Refusal::InvalidToken,
            _ => Refusal::Auth,
        }
    }

    /// The `WWW-Authenticate` value (RFC 6750 §3), every parameter quoted.
    fn challenge(&self) -> Option<String> {
        let mut params: Vec<(&str, String)> = Vec::new();
        match &self.kind {
            Kind::Missing => {}
            Kind::Invalid if self.metadata.is_some() => {
                params.push(("error", "invalid_token".into()));
                params.push(("error_description", self.message.to_string()));
            }
            Kind::Invalid => {}
            Kind::Unavailable(_) | Kind::HeldBack(_) | Kind::Busy { .. } => return None,
            Kind::InsufficientScope(needed) => {
                params.push(("error", "insufficient_scope".into()));
                params.push(("scope", needed.join(" ")));
                params.push(("error_description", self.message.to_string()));
            }
        }
        if let Some(url) = &self.metadata {
            params.insert(0, ("resource_metadata", url.to_string()));
            // MCP: a 401 SHOULD name the scopes to ask for (those every request needs).
            if matches!(self.kind, Kind::Missing | Kind::Invalid) && !self.scopes.is_empty() {
                params.push(("scope", self.scopes.join(" ")));
            }
        }
        let mut value = String::from("Bearer");
        for (i, (name, v)) in params.iter().enumerate() {
            value.push_str(if i == 0 { " " } else { ", " });
            value.push_str(name);
            value.push_str("=\"");
            value.push_str(&quote(v));
            value.push('"');
        }
        Some(value)
    }
}

/// A quoted-string's content (RFC 9110 §5.6.4) that nothing can break out of: `"` and `\`
/// escaped, control characters and non-ASCII dropped (so no CR/LF can end the header).
fn quote(value: &str) -> String {
    let mut quoted = String::with_capacity(value.len());
    for c in value.chars() {
        match c {
            '"' | '\\' => {
                quoted.push('\\');
                quoted.push(c);
            }
            ' '..='~' => quoted.push(c),
            _ => {}
        }
    }
    quoted
}

impl fmt::Display for AuthError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for AuthError {}

impl IntoResponse for AuthError {
    fn into_response(self) -> Response {
        let mut response = super::respond::json_response(
            self.status(),
            &serde_json::json!({ "message": self.message }),
        );
        let headers = response.headers_mut();
        if let Some(challenge) = self.challenge()
            && let Ok(value) = HeaderValue::from_str(&challenge)
        {
            headers.insert(WWW_AUTHENTICATE, value);
        }
        match self.kind {
            Kind::Unavailable(seconds) | Kind::HeldBack(seconds) => {
                headers.insert(RETRY_AFTER, HeaderValue::from(seconds));
            }
            // An introspection under way ends within the fetch timeout; a second is a fair try.
            Kind::Busy { .. } => {
                headers.insert(RETRY_AFTER, HeaderValue::from(1));
            }
            _ => {}
        }
        response.extensions_mut().insert(self.reason());
        response
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// HS256 tokens go through `jsonwebtoken`'s `Validation`, and each refusal is in the words
    /// of the check that failed.
    #[test]
    fn hs256_tokens_are_refused_in_the_words_of_the_check_they_fail() {
        use jsonwebtoken::{EncodingKey, Header};
        use serde_json::json;
        let secret = "a-shared-secret-of-at-least-32-bytes!";
        let checked = |auth: &ServerAuth, header: Header, claims: Value, key: &str| {
            let key = EncodingKey::from_secret(key.as_bytes());
            let token = jsonwebtoken::encode(&header, &claims, &key).unwrap();
            let jwt = auth.jwt.as_ref().unwrap();
            jwt.check(&token).map_err(|refused| refused.to_string())
        };
        let auth = ServerAuth::default()
            .jwt_secret(secret)
            .jwt_audience(["agent-1"]);
        let check = |claims: Value| checked(&auth, Header::default(), claims, secret);
        let now = jsonwebtoken::get_current_timestamp();
        let ada = Ok(Principal::Jwt("ada".into()));
        assert_eq!(check(json!({"sub": "ada", "exp": now + 60})), ada);
        assert_eq!(
            check(json!({"sub": "ada", "exp": now + 60, "aud": "agent-1"})),
            ada
        );
        assert_eq!(
            check(json!({"sub": "ada", "exp": now + 60, "aud": ["x", "agent-1"]})),
            ada
        );
        assert_eq!(
            check(json!({"sub": "ada", "exp": now - 30})),
            ada,
            "within the leeway"
        );
        let refused = [
            (
                json!({"sub": "ada", "exp": now - 120}),
                "The token has expired.",
            ),
            (json!({"sub": "ada"}), "The token must have an `exp` claim."),
            (
                json!({"sub": "ada", "exp": now + 600, "nbf": now + 300}),
                "The token is not valid.",
            ),
            (
                json!({"sub": "ada", "exp": now + 60, "aud": ["agent-2"]}),
                "The token's audience is not allowed.",
            ),
            (
                json!({"sub": "ada", "exp": now + 60, "aud": 7}),
                "The token's `aud` is not valid.",
            ),
            (
                json!({"sub": "ada", "exp": now + 60, "aud": ["agent-1", 7]}),
                "The token's `aud` is not valid.",
            ),
            (
                json!({"exp": now + 60}),
                "The token must have a `sub` claim naming its subject.",
            ),
            (
                json!({"sub": "", "exp": now + 60}),
                "The token must have a `sub` claim naming its subject.",
            ),
        ];
        for (claims, says) in refused {
            assert_eq!(check(claims.clone()), Err(says.to_owned()), "{claims}");
        }
        let good = json!({"sub": "ada", "exp": now + 60});
        let critical = Header {
            crit: Some(vec!["exp".into()]),
            ..Header::default()
        };
        assert_eq!(
            checked(&auth, critical, good.clone(), secret),
            Err("The token names critical header extensions this server does not support.".into())
        );
        let another_secret = checked(&auth, Header::default(), good.clone(), "another secret");
        assert_eq!(another_secret, Err("The token is not valid.".into()));
        // Another algorithm named in the header (the signature HS256's, as a forger would).
        let token = jsonwebtoken::encode(
            &Header::default(),
            &good,
            &EncodingKey::from_secret(secret.as_bytes()),
        )
        .unwrap();
        let (_, rest) = token.split_once('.').unwrap();
        use base64::Engine;
        let hs384 = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(r#"{"alg":"HS384"}"#);
        let refused = auth.jwt.as_ref().unwrap().check(&format!("{hs384}.{rest}"));
        assert_eq!(refused.unwrap_err().to_string(), "The token is not valid.");
        // No audiences configured: a token without `aud` is let in, one with any is not.
        let open = ServerAuth::default().jwt_secret(secret);
        let check = |claims: Value| checked(&open, Header::default(), claims, secret);
        assert_eq!(check(json!({"sub": "ada", "exp": now + 60})), ada);
        assert_eq!(
            check(json!({"sub": "ada", "exp": now + 60, "aud": "agent-1"})),
            Err("The token's audience is not allowed.".into())
        );
    }

    #[test]
    fn challenge_parameters_cannot_be_broken_out_of() {
        assert_eq!(
            quote("a\"b\\c\r\nSet-Cookie: x"),
            "a\\\"b\\\\cSet-Cookie: x"
        );
        let error = AuthError::insufficient_scope(vec!["files:write".into(), "tools".into()])
            .with_metadata(Some(
                "https://h/.well-known/oauth-protected-resource".into(),
            ));
        assert_eq!(
            error.challenge().unwrap(),
            "Bearer resource_metadata=\"https://h/.well-known/oauth-protected-resource\", \
             error=\"insufficient_scope\", scope=\"files:write tools\", error_description=\"The \
             token lacks a scope this request needs; it needs: files:write tools.\""
        );
    }
}
