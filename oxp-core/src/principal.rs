//! [`Principal`]: who made a request, as the HTTP front's authentication found it. It sits below
//! the fronts, which all read it (the OXP server scopes idempotency by it, MCP makes the JWT's
//! subject the user), so that no front imports another for it.

use std::fmt;

use sha2::{Digest, Sha256};

/// Who made a request, once authenticated: scopes idempotency and sealed request states, and
/// shows in logs (never the credential itself).
///
/// ```
/// use axum::http::{HeaderMap, HeaderValue};
/// use oxp_runtime::server::{Principal, ServerAuth};
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let key = "k_0123456789abcdef0123456789abcdef";
/// let auth = ServerAuth::default().api_key(key);
/// let mut headers = HeaderMap::new();
/// headers.insert("x-api-key", HeaderValue::from_static(key));
/// let caller = auth.authenticate(&headers).await.unwrap();
/// assert_eq!(caller.principal, Principal::api_key(key));
/// # });
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Principal {
    /// Authentication is off.
    Anonymous,
    /// An HS256 JWT's `sub` (a token without a string `sub` is refused).
    Jwt(String),
    /// The API key that matched, by its identity ([`Principal::api_key`]): a digest, so the
    /// same key is the same caller whatever its place in the configured list.
    ApiKey(String),
    /// An OAuth access token's issuer and `sub` (the `oauth` feature): a subject is unique only
    /// within its issuer, so both name the caller.
    OAuth {
        /// The `iss` claim, one of the configured issuers.
        issuer: String,
        /// The `sub` claim.
        subject: String,
    },
}

impl Principal {
    /// The principal of an API key: 32 hex digits of a SHA-256 of the key under a label of its
    /// own, stable across restarts and reorderings of `OXP_API_KEYS`, and no use to someone
    /// who reads it in a log (a key is random; the digest cannot be turned back into it).
    ///
    /// ```
    /// use oxp_runtime::server::Principal;
    /// let one = Principal::api_key("k_0123456789abcdef0123456789abcdef");
    /// assert_eq!(one, Principal::api_key("k_0123456789abcdef0123456789abcdef"));
    /// assert_ne!(one, Principal::api_key("k_another_key_0123456789abcdef0123"));
    /// assert!(!one.to_string().contains("0123456789abcdef0123456789abcdef"));
    /// ```
    pub fn api_key(key: impl AsRef<[u8]>) -> Self {
        Principal::ApiKey(digest_hex(&[b"oxp api key identity v1", key.as_ref()]))
    }

    /// The user a tool is told of (`ToolContext::user_id`) when the caller is the user: a
    /// token's `sub` (HS256 or OAuth); `None` for an API key or no authentication, which name
    /// no user. An OAuth subject is its issuer's: servers trusting several unrelated issuers
    /// should know their subjects do not collide (Entra's v1 and v2 issuers of one tenant give
    /// one user the same `sub`).
    ///
    /// ```
    /// use oxp_runtime::server::Principal;
    /// let caller = Principal::OAuth { issuer: "https://id.example".into(), subject: "alice".into() };
    /// assert_eq!(caller.user_id(), Some("alice"));
    /// assert_eq!(Principal::api_key("k_0123456789abcdef0123456789abcdef").user_id(), None);
    /// ```
    pub fn user_id(&self) -> Option<&str> {
        match self {
            Principal::Jwt(subject) | Principal::OAuth { subject, .. } => Some(subject),
            Principal::Anonymous | Principal::ApiKey(_) => None,
        }
    }

    /// The user a call is made for, on every front: the one place that decides it.
    ///
    /// Under a principal with a subject (an HS256 or OAuth token), the user is the token's:
    /// `asserted` (what the caller named, OXP's `context.user_id`) may be absent or the
    /// subject itself, and anything else is refused with [`ForeignUser`], unless the operator
    /// trusts the caller to assert users (`trust_asserted`, `OXP_TRUST_USER_ID`: a gateway that
    /// signs in its own users and calls as itself). Without a subject (an API key, no
    /// authentication) the caller is the operator's own credential and names the user itself.
    ///
    /// ```
    /// use oxp_runtime::server::{ForeignUser, Principal};
    /// let alice = Principal::OAuth { issuer: "https://id.example".into(), subject: "alice".into() };
    /// assert_eq!(alice.call_user(None, false), Ok(Some("alice".into())));
    /// assert_eq!(alice.call_user(Some("alice".into()), false), Ok(Some("alice".into())));
    /// assert_eq!(alice.call_user(Some("bob".into()), false), Err(ForeignUser));
    /// assert_eq!(alice.call_user(Some("bob".into()), true), Ok(Some("bob".into())));
    /// let key = Principal::api_key("k_0123456789abcdef0123456789abcdef");
    /// assert_eq!(key.call_user(Some("bob".into()), false), Ok(Some("bob".into())));
    /// ```
    pub fn call_user(
        &self,
        asserted: Option<String>,
        trust_asserted: bool,
    ) -> Result<Option<String>, ForeignUser> {
        match (self.user_id(), asserted) {
            (None, asserted) => Ok(asserted),
            (Some(_), Some(asserted)) if trust_asserted => Ok(Some(asserted)),
            (Some(subject), None) => Ok(Some(subject.to_owned())),
            (Some(subject), Some(asserted)) if asserted == subject => Ok(Some(asserted)),
            (Some(_), Some(_)) => Err(ForeignUser),
        }
    }

    /// The subject's digest, for logs: who it is stays out of them, which caller it was can
    /// still be followed. `None` for [`Principal::Anonymous`].
    ///
    /// ```
    /// use oxp_runtime::server::Principal;
    /// let caller = Principal::OAuth { issuer: "https://id.example".into(), subject: "alice".into() };
    /// let hash = caller.subject_hash().unwrap();
    /// assert_eq!(hash.len(), 32);
    /// assert!(!hash.contains("alice"));
    /// ```
    pub fn subject_hash(&self) -> Option<String> {
        match self {
            Principal::Anonymous => None,
            Principal::Jwt(subject) => Some(digest_hex(&[b"jwt", subject.as_bytes()])),
            Principal::ApiKey(id) => Some(id.clone()),
            Principal::OAuth { issuer, subject } => Some(digest_hex(&[
                b"oauth",
                issuer.as_bytes(),
                subject.as_bytes(),
            ])),
        }
    }
}

/// A call that names a user other than its token's subject, refused by
/// [`Principal::call_user`]: a caller with a token for one user cannot act as another.
///
/// ```
/// let refused = oxp_runtime::server::ForeignUser;
/// assert!(refused.to_string().contains("OXP_TRUST_USER_ID"));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ForeignUser;

impl fmt::Display for ForeignUser {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(
            "The call's user is its token's subject: `context.user_id` may only name that \
             subject. A gateway that asserts its own users' ids needs the server's \
             OXP_TRUST_USER_ID=1.",
        )
    }
}

impl std::error::Error for ForeignUser {}

/// Lowercase hex of the first 16 bytes of SHA-256 over `parts`, each preceded by its length so
/// that no two lists of parts hash alike.
fn digest_hex(parts: &[&[u8]]) -> String {
    let mut hasher = Sha256::new();
    for part in parts {
        hasher.update((part.len() as u64).to_be_bytes());
        hasher.update(part);
    }
    let digest = hasher.finalize();
    let mut hex = String::with_capacity(32);
    for byte in &digest[..16] {
        hex.push_str(&format!("{byte:02x}"));
    }
    hex
}

impl fmt::Display for Principal {
    /// The form idempotency keys, sealed states and logs use: `anonymous`, `jwt:<sub>`,
    /// `key:<identity>`, `oauth:<digest of issuer and sub>`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Principal::Anonymous => f.write_str("anonymous"),
            Principal::Jwt(subject) => write!(f, "jwt:{subject}"),
            Principal::ApiKey(id) => write!(f, "key:{id}"),
            Principal::OAuth { .. } => {
                write!(f, "oauth:{}", self.subject_hash().unwrap_or_default())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_is_named_by_what_it_is_not_where_it_is_listed() {
        let key = "k_0123456789abcdef0123456789abcdef";
        let id = Principal::api_key(key).to_string();
        // Pinned (an independent computation: SHA-256 over each part's big-endian u64 length and
        // bytes): a change of the digest would orphan every stored answer and sealed state.
        assert_eq!(id, "key:e4458b389c1b005c628cc80c4c8c9f94");
        assert_eq!(id.len(), 4 + 32);
        assert!(!id.contains(key));
        // Two callers of different issuers with one `sub` are two principals.
        let a = Principal::OAuth {
            issuer: "https://a".into(),
            subject: "x".into(),
        };
        let b = Principal::OAuth {
            issuer: "https://b".into(),
            subject: "x".into(),
        };
        assert_ne!(a.to_string(), b.to_string());
    }
}

/// What a caller may use by scopes: OAuth callers what their token's scopes grant; every other
/// caller (API keys and HS256 tokens are the operator's own credentials, and with
/// authentication off there is no one to tell apart) every tool.
///
/// ```
/// use oxp_runtime::server::Grant;
/// let grant = Grant::scopes(["files:read"]);
/// assert!(grant.allows(&["files:read"]));
/// assert!(!grant.allows(&["files:read", "files:write"]));
/// assert!(Grant::All.allows(&["files:write"]));
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Grant {
    /// No scope limits the caller.
    #[default]
    All,
    /// The scopes of the caller's token.
    Scopes(std::sync::Arc<[String]>),
}

impl Grant {
    /// A grant of these scopes.
    ///
    /// ```
    /// assert!(oxp_runtime::server::Grant::scopes(["a"]).allows(&["a"]));
    /// ```
    pub fn scopes<S: Into<String>>(scopes: impl IntoIterator<Item = S>) -> Self {
        Grant::Scopes(scopes.into_iter().map(Into::into).collect())
    }

    /// Whether every one of `needed` is granted.
    ///
    /// ```
    /// assert!(oxp_runtime::server::Grant::scopes(["a", "b"]).allows(&["b"]));
    /// ```
    pub fn allows(&self, needed: &[&str]) -> bool {
        match self {
            Grant::All => true,
            Grant::Scopes(granted) => needed.iter().all(|n| granted.iter().any(|g| g == n)),
        }
    }
}
