//! Server authentication (oxp-notes §1 A, §3.7, §3.31, §3.32): HS256 JWT bearer tokens, API
//! keys and (cargo feature `oauth`) an identity provider's access tokens, off unless configured.
//! `/health` and the RFC 9728 metadata never reach this.

use std::borrow::Cow;
use std::fmt;
use std::sync::Arc;

use axum::http::header::{AUTHORIZATION, RETRY_AFTER, WWW_AUTHENTICATE};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use ctutils::CtEq;
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
    #[cfg(feature = "oauth")]
    oauth: Option<Arc<crate::oauth::Verifier>>,
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
            .field("api_keys", &self.api_keys.len());
        #[cfg(feature = "oauth")]
        debug.field("oauth", &self.oauth.as_ref().map(|o| o.config()));
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
        super::hs256::install();
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

    /// Accepts access tokens of an identity provider, checked as [`OAuth`](crate::oauth::OAuth)
    /// says (cargo feature `oauth`). Call [`ready`](Self::ready) at start-up to find its keys
    /// before the first request (and to fail then, rather than on every request, if they
    /// cannot be had).
    ///
    /// ```
    /// use oxp_runtime::{oauth::OAuth, server::ServerAuth};
    /// let auth = ServerAuth::default()
    ///     .api_key("k_0123456789abcdef0123456789abcdef")
    ///     .oauth(OAuth::new("https://tools.example.com").issuer("https://login.example.com"));
    /// assert!(auth.is_enabled());
    /// ```
    #[cfg(feature = "oauth")]
    #[cfg_attr(docsrs, doc(cfg(feature = "oauth")))]
    #[must_use]
    pub fn oauth(mut self, config: crate::oauth::OAuth) -> Self {
        self.oauth = Some(Arc::new(crate::oauth::Verifier::new(config)));
        self
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
    #[cfg(feature = "oauth")]
    #[cfg_attr(docsrs, doc(cfg(feature = "oauth")))]
    pub async fn ready(&self) -> Result<(), crate::oauth::OAuthError> {
        match &self.oauth {
            Some(oauth) => oauth.ready().await,
            None => Ok(()),
        }
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
        self.jwt.is_some() || !self.api_keys.is_empty() || self.has_oauth()
    }

    /// Whether OAuth access tokens are accepted (and challenges point to RFC 9728 metadata).
    pub(crate) fn has_oauth(&self) -> bool {
        #[cfg(feature = "oauth")]
        return self.oauth.is_some();
        #[cfg(not(feature = "oauth"))]
        false
    }

    #[cfg(feature = "oauth")]
    pub(crate) fn oauth_verifier(&self) -> Option<&Arc<crate::oauth::Verifier>> {
        self.oauth.as_ref()
    }

    /// The scopes every request needs (OAuth's; none without it).
    pub(crate) fn required_scopes(&self) -> Vec<String> {
        #[cfg(feature = "oauth")]
        if let Some(oauth) = &self.oauth {
            return oauth.config().required_scopes().to_vec();
        }
        Vec::new()
    }

    /// Where 401 and 403 answers for `path` send clients to learn how to get a token: the
    /// RFC 9728 metadata of `/mcp` for MCP's paths, of the server otherwise.
    pub(crate) fn metadata_url(&self, path: &str) -> Option<Arc<str>> {
        #[cfg(feature = "oauth")]
        if let Some(oauth) = &self.oauth {
            let resource = if path == "/mcp" || path.starts_with("/mcp/") {
                "/mcp"
            } else {
                ""
            };
            return Some(oauth.metadata_url(resource).into());
        }
        let _ = path;
        None
    }

    /// The paths RFC 9728 metadata is served at, each with whether it is `/mcp`'s: where
    /// [`metadata_url`](Self::metadata_url) points (under the resource's own path, when
    /// `OXP_PUBLIC_URL` has one), and the host-level locations besides. Empty without OAuth.
    pub(crate) fn metadata_paths(&self) -> Vec<(String, bool)> {
        #[cfg(feature = "oauth")]
        if let Some(oauth) = &self.oauth {
            let mut paths: Vec<(String, bool)> = Vec::new();
            let candidates = [
                (oauth.metadata_path(""), false),
                (oauth.metadata_path("/mcp"), true),
                (
                    Some("/.well-known/oauth-protected-resource".to_owned()),
                    false,
                ),
                (
                    Some("/.well-known/oauth-protected-resource/mcp".to_owned()),
                    true,
                ),
            ];
            // A path no route can name is refused at start-up (`ready`); never a route here.
            for (path, mcp) in candidates {
                let Some(path) = path else {
                    continue;
                };
                if !paths.iter().any(|(p, _)| *p == path) {
                    paths.push((path, mcp));
                }
            }
            return paths;
        }
        Vec::new()
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

    /// [`authenticate`](Self::authenticate), for a request from `client`: OAuth holds back a
    /// client that has sent too many forged tokens (`429`) before looking at its token (see
    /// [`OAuth::forged_tokens_per_client`](crate::oauth::OAuth::forged_tokens_per_client)).
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
        #[cfg(not(feature = "oauth"))]
        let _ = client;
        #[cfg(feature = "oauth")]
        if let Some(oauth) = &self.oauth {
            // An HS256 token goes to the shared secret, when there is one; every other token
            // to the identity provider's keys, which refuse HS* themselves.
            if self.jwt.is_none() || !is_hs256(token) {
                return match oauth.verify_from(token, client).await {
                    Ok(verified) => Ok(Caller {
                        principal: verified.principal,
                        grant: Grant::Scopes(verified.scopes.into()),
                    }),
                    Err(refusal) => Err(AuthError::from_refusal(refusal)),
                };
            }
        }
        match &self.jwt {
            Some(jwt) => jwt.verify(token).map(all),
            None => Err(AuthError::invalid("The API key is not valid.")),
        }
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
#[cfg(feature = "oauth")]
fn is_hs256(token: &str) -> bool {
    jsonwebtoken::decode_header(token).is_ok_and(|h| h.alg == Algorithm::HS256)
}

impl Jwt {
    fn verify(&self, token: &str) -> Result<Principal, AuthError> {
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
    #[cfg_attr(not(feature = "oauth"), allow(dead_code))]
    Unavailable(u64),
    /// Valid, but short of these scopes (all the request needs).
    InsufficientScope(Vec<String>),
    /// Too many forged tokens from this client: try again after this many seconds.
    #[cfg_attr(not(feature = "oauth"), allow(dead_code))]
    HeldBack(u64),
    /// Too many introspections under way: the client's own (`429`), or all (`503`).
    #[cfg_attr(not(feature = "oauth"), allow(dead_code))]
    Busy { per_client: bool },
}

impl AuthError {
    fn missing(message: &'static str) -> Self {
        AuthError {
            kind: Kind::Missing,
            message: Cow::Borrowed(message),
            metadata: None,
            scopes: Vec::new(),
        }
    }

    pub(crate) fn invalid(message: &'static str) -> Self {
        AuthError {
            kind: Kind::Invalid,
            message: Cow::Borrowed(message),
            metadata: None,
            scopes: Vec::new(),
        }
    }

    /// `403 insufficient_scope`: the caller's token lacks one of `needed`, every scope the
    /// request needs.
    pub(crate) fn insufficient_scope(needed: Vec<String>) -> Self {
        AuthError {
            message: Cow::Owned(format!(
                "The token lacks a scope this request needs; it needs: {}.",
                needed.join(" ")
            )),
            kind: Kind::InsufficientScope(needed),
            metadata: None,
            scopes: Vec::new(),
        }
    }

    #[cfg(feature = "oauth")]
    fn from_refusal(refusal: crate::oauth::Refusal) -> Self {
        use crate::oauth::Refusal;
        match refusal {
            Refusal::Invalid(message) | Refusal::Forged(message) => AuthError::invalid(message),
            Refusal::InsufficientScope(needed) => AuthError::insufficient_scope(needed),
            Refusal::HeldBack(wait) => {
                let seconds = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
                AuthError {
                    kind: Kind::HeldBack(seconds.max(1)),
                    message: Cow::Borrowed(
                        "Too many invalid tokens from this client: wait before sending another.",
                    ),
                    metadata: None,
                    scopes: Vec::new(),
                }
            }
            Refusal::Unavailable(_) => AuthError {
                kind: Kind::Unavailable(crate::oauth::FAILURE_RETRY.as_secs().max(1)),
                message: Cow::Borrowed(
                    "The identity provider's signing keys cannot be fetched now, so this token \
                     cannot be checked; try again shortly.",
                ),
                metadata: None,
                scopes: Vec::new(),
            },
            Refusal::Busy { per_client } => AuthError {
                kind: Kind::Busy { per_client },
                message: Cow::Borrowed(if per_client {
                    "Too many of this client's tokens are being checked at the identity \
                     provider at once: wait for them before sending another."
                } else {
                    "Too many tokens are being checked at the identity provider at once; \
                     try again shortly."
                }),
                metadata: None,
                scopes: Vec::new(),
            },
        }
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
            jwt.verify(&token).map_err(|refused| refused.to_string())
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
        let refused = auth
            .jwt
            .as_ref()
            .unwrap()
            .verify(&format!("{hs384}.{rest}"));
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
