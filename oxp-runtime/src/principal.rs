//! [`Principal`]: who made a request, as the HTTP front's authentication found it. It sits below
//! the fronts, which all read it (the OXP server scopes idempotency by it, MCP makes the JWT's
//! subject the user), so that no front imports another for it.

use std::fmt;

/// Who made a request, once authenticated: scopes idempotency and shows in logs (never the
/// credential itself).
///
/// ```
/// use axum::http::{HeaderMap, HeaderValue};
/// use oxp_runtime::server::{Principal, ServerAuth};
/// let auth = ServerAuth::default().api_key("k_0123456789abcdef0123456789abcdef");
/// let mut headers = HeaderMap::new();
/// headers.insert("x-api-key", HeaderValue::from_static("k_0123456789abcdef0123456789abcdef"));
/// assert_eq!(auth.authenticate(&headers).unwrap(), Principal::ApiKey(0));
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Principal {
    /// Authentication is off.
    Anonymous,
    /// A JWT's `sub` (a token without a string `sub` is refused).
    Jwt(String),
    /// The index of the API key that matched.
    ApiKey(usize),
}

impl fmt::Display for Principal {
    /// The form idempotency keys and logs use: `anonymous`, `jwt:<sub>`, `key:<index>`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Principal::Anonymous => f.write_str("anonymous"),
            Principal::Jwt(subject) => write!(f, "jwt:{subject}"),
            Principal::ApiKey(index) => write!(f, "key:{index}"),
        }
    }
}
