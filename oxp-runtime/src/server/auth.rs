//! Server authentication (oxp-notes §1 A, §3.7, §3.31, §3.32): HS256 JWT bearer tokens and API
//! keys, off unless configured. `/health` never reaches this.

use std::fmt;

use axum::http::header::{AUTHORIZATION, WWW_AUTHENTICATE};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use ctutils::CtEq;
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use serde_json::Value;

pub use crate::principal::Principal;

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
    api_keys: Vec<Vec<u8>>,
}

#[derive(Clone)]
struct Jwt {
    key: DecodingKey,
    audiences: Vec<String>,
}

impl fmt::Debug for ServerAuth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ServerAuth")
            .field("jwt", &self.jwt.is_some())
            .field(
                "jwt_audiences",
                &self.jwt.as_ref().map(|j| j.audiences.clone()),
            )
            .field("api_keys", &self.api_keys.len())
            .finish()
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
    ///
    /// ```
    /// let auth = oxp_runtime::server::ServerAuth::default().api_key("k_0123456789abcdef0123456789abcdef").api_key("k_second_key_also_32_characters_long");
    /// assert!(!auth.has_short_api_key());
    /// ```
    #[must_use]
    pub fn api_key(mut self, key: impl Into<String>) -> Self {
        let key = key.into();
        if !key.is_empty() {
            self.api_keys.push(key.into_bytes());
        }
        self
    }

    /// Whether an API key is shorter than the 32 bytes the spec recommends (A.60).
    ///
    /// ```
    /// assert!(oxp_runtime::server::ServerAuth::default().api_key("short").has_short_api_key());
    /// ```
    pub fn has_short_api_key(&self) -> bool {
        self.api_keys.iter().any(|k| k.len() < 32)
    }

    /// Whether any method is configured.
    ///
    /// ```
    /// assert!(!oxp_runtime::server::ServerAuth::default().is_enabled());
    /// ```
    pub fn is_enabled(&self) -> bool {
        self.jwt.is_some() || !self.api_keys.is_empty()
    }

    /// Checks a request's headers. With authentication off, every request is
    /// [`Principal::Anonymous`] and the `Authorization` header is ignored (MUST, §1 A.59).
    ///
    /// ```
    /// use axum::http::{HeaderMap, HeaderValue};
    /// use oxp_runtime::server::{Principal, ServerAuth};
    /// let auth = ServerAuth::default().api_key("k_0123456789abcdef0123456789abcdef");
    /// let mut headers = HeaderMap::new();
    /// headers.insert("authorization", HeaderValue::from_static("Bearer wrong"));
    /// assert!(auth.authenticate(&headers).is_err());
    /// ```
    pub fn authenticate(&self, headers: &HeaderMap) -> Result<Principal, AuthError> {
        if !self.is_enabled() {
            return Ok(Principal::Anonymous);
        }
        // One credential per request: with two, which one counts would be a proxy's or a
        // parser's guess, and one of them could be smuggled past the other.
        let credentials = API_KEY_HEADERS
            .iter()
            .chain([&AUTHORIZATION.as_str()])
            .map(|name| headers.get_all(*name).iter().count())
            .sum::<usize>();
        if credentials > 1 {
            return Err(AuthError(
                "Send one credential: a single Authorization or API key header.",
            ));
        }
        for name in API_KEY_HEADERS {
            if let Some(value) = headers.get(name) {
                return self
                    .match_api_key(value.as_bytes())
                    .map(Principal::ApiKey)
                    .ok_or(AuthError("The API key is not valid."));
            }
        }
        let Some(authorization) = headers.get(AUTHORIZATION) else {
            return Err(AuthError(
                "Authentication is required: send a bearer token or an API key.",
            ));
        };
        let token = authorization
            .to_str()
            .ok()
            .and_then(|v| {
                v.strip_prefix("Bearer ")
                    .or_else(|| v.strip_prefix("bearer "))
            })
            .map(str::trim)
            .ok_or(AuthError(
                "The Authorization header must be `Bearer <token>`.",
            ))?;
        if let Some(index) = self.match_api_key(token.as_bytes()) {
            return Ok(Principal::ApiKey(index));
        }
        match &self.jwt {
            Some(jwt) => jwt.verify(token),
            None => Err(AuthError("The API key is not valid.")),
        }
    }

    fn match_api_key(&self, candidate: &[u8]) -> Option<usize> {
        // Compare against every key, in constant time each, so timing tells nothing.
        let mut found = None;
        for (i, key) in self.api_keys.iter().enumerate() {
            if key.as_slice().ct_eq(candidate).to_bool() {
                found = Some(i);
            }
        }
        found
    }
}

impl Jwt {
    fn verify(&self, token: &str) -> Result<Principal, AuthError> {
        // HS256 only: `none`, RS* and ES* are refused by the algorithm list (§3.32).
        let mut validation = Validation::new(Algorithm::HS256);
        validation.leeway = LEEWAY_SECONDS;
        validation.validate_nbf = true;
        validation.set_required_spec_claims(&["exp"]);
        // `aud` is checked below, where "absent is fine, present must match" is expressible.
        validation.validate_aud = false;
        let data =
            jsonwebtoken::decode::<serde_json::Map<String, Value>>(token, &self.key, &validation)
                .map_err(|e| match e.kind() {
                jsonwebtoken::errors::ErrorKind::ExpiredSignature => {
                    AuthError("The token has expired.")
                }
                jsonwebtoken::errors::ErrorKind::MissingRequiredClaim(_) => {
                    AuthError("The token must have an `exp` claim.")
                }
                _ => AuthError("The token is not valid."),
            })?;
        // RFC 7515 §4.1.11: a `crit` header names extensions the recipient MUST understand,
        // and this server understands none.
        if data.header.crit.is_some() {
            return Err(AuthError(
                "The token names critical header extensions this server does not support.",
            ));
        }
        let claims = data.claims;
        let audiences: Vec<&str> = match claims.get("aud") {
            None => Vec::new(),
            Some(Value::String(aud)) => vec![aud.as_str()],
            Some(Value::Array(auds)) => auds.iter().filter_map(Value::as_str).collect(),
            Some(_) => return Err(AuthError("The token's `aud` is not valid.")),
        };
        if claims.contains_key("aud")
            && !audiences
                .iter()
                .any(|aud| self.audiences.iter().any(|allowed| allowed == aud))
        {
            return Err(AuthError("The token's audience is not allowed."));
        }
        // The subject is who the caller is: idempotency and MCP users are scoped by it, so a
        // token that names no one cannot be let in as a shared anyone.
        match claims.get("sub") {
            Some(Value::String(subject)) if !subject.is_empty() => {
                Ok(Principal::Jwt(subject.clone()))
            }
            _ => Err(AuthError(
                "The token must have a `sub` claim naming its subject.",
            )),
        }
    }
}

/// Why a request was not authenticated: answered `401` with `{"message"}` and
/// `WWW-Authenticate: Bearer`. The message never repeats the credential.
///
/// ```
/// use axum::http::{HeaderMap, HeaderValue};
/// use oxp_runtime::server::{Principal, ServerAuth};
/// use axum::response::IntoResponse;
/// let error = ServerAuth::default().api_key("k_0123456789abcdef0123456789abcdef").authenticate(&HeaderMap::new()).unwrap_err();
/// assert_eq!(error.into_response().status(), 401);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AuthError(&'static str);

impl fmt::Display for AuthError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.0)
    }
}

impl std::error::Error for AuthError {}

impl IntoResponse for AuthError {
    fn into_response(self) -> Response {
        let mut response = super::respond::json_response(
            StatusCode::UNAUTHORIZED,
            &serde_json::json!({ "message": self.0 }),
        );
        response
            .headers_mut()
            .insert(WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        response
    }
}
