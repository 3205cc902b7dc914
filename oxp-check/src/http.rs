//! The checker's HTTP: every request to the server, with the credentials and headers it was
//! given, and every answer read whole, its JSON body parsed when it has one.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use hmac::{Hmac, KeyInit, Mac};
use reqwest::Method;
use reqwest::header::HeaderMap;
use serde_json::{Value, json};
use sha2::Sha256;

use crate::Options;

/// One answer, read whole.
#[derive(Debug)]
pub(crate) struct Reply {
    pub status: u16,
    pub headers: HeaderMap,
    /// The body parsed as JSON; `None` when it is empty or not JSON.
    pub json: Option<Value>,
    pub text: String,
}

impl Reply {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    /// The JSON body, or `Null`.
    pub fn body(&self) -> &Value {
        self.json.as_ref().unwrap_or(&Value::Null)
    }

    /// `"400 {…}"`: what a failure says the server answered.
    pub fn said(&self) -> String {
        let body = match &self.json {
            Some(json) => crate::report::excerpt(json),
            None if self.text.is_empty() => "an empty body".into(),
            None => {
                let text: String = self.text.chars().take(120).collect();
                format!("a non-JSON body: {text:?}")
            }
        };
        format!("{} with {body}", self.status)
    }
}

/// Whom requests are sent as: nobody, or the credential the options give.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum As {
    Anonymous,
    Authenticated,
}

pub(crate) struct Http {
    client: reqwest::Client,
    base: String,
    headers: Vec<(String, String)>,
    credential: Option<(String, String)>,
    /// Every answer that lacked `OXP-Version`: `GET /tools → 200`.
    pub unversioned: Vec<String>,
    pub answers: usize,
}

impl Http {
    pub fn new(options: &Options) -> Result<Http, String> {
        let client = reqwest::Client::builder()
            .timeout(options.timeout)
            .user_agent(concat!("oxp-check/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| format!("cannot make an HTTP client: {e}"))?;
        let credential = if let Some(key) = &options.api_key {
            Some(("OXP-API-Key".to_owned(), key.clone()))
        } else if let Some(token) = &options.bearer {
            Some(("Authorization".to_owned(), format!("Bearer {token}")))
        } else {
            options.jwt_secret.as_ref().map(|secret| {
                let token = hs256(
                    &claims(options, Duration::from_secs(300)),
                    secret.as_bytes(),
                );
                ("Authorization".to_owned(), format!("Bearer {token}"))
            })
        };
        Ok(Http {
            client,
            base: options.url.trim_end_matches('/').to_owned(),
            headers: options.headers.clone(),
            credential,
            unversioned: Vec::new(),
            answers: 0,
        })
    }

    pub fn has_credential(&self) -> bool {
        self.credential.is_some()
    }

    pub fn request(&self, method: Method, path: &str, who: As) -> reqwest::RequestBuilder {
        let mut request = self.client.request(method, format!("{}{path}", self.base));
        for (name, value) in &self.headers {
            request = request.header(name, value);
        }
        if let (As::Authenticated, Some((name, value))) = (who, &self.credential) {
            request = request.header(name, value);
        }
        request
    }

    /// An absolute URL the server gave (a `check_url`), with the same headers and credential.
    pub fn request_url(&self, url: &str) -> reqwest::RequestBuilder {
        let url = if url.starts_with('/') {
            format!("{}{url}", self.base)
        } else {
            url.to_owned()
        };
        let mut request = self.client.get(url);
        for (name, value) in &self.headers {
            request = request.header(name, value);
        }
        if let Some((name, value)) = &self.credential {
            request = request.header(name, value);
        }
        request
    }

    pub async fn send(&mut self, request: reqwest::RequestBuilder) -> Result<Reply, String> {
        let built = request.build().map_err(|e| e.to_string())?;
        let what = format!("{} {}", built.method(), built.url().path());
        let response = self
            .client
            .execute(built)
            .await
            .map_err(|e| format!("{what}: {}", error_chain(&e)))?;
        let status = response.status().as_u16();
        let headers = response.headers().clone();
        let bytes = response
            .bytes()
            .await
            .map_err(|e| format!("{what}: reading the body: {}", error_chain(&e)))?;
        let text = String::from_utf8_lossy(&bytes).into_owned();
        let json = serde_json::from_slice(&bytes).ok();
        self.answers += 1;
        if !headers.contains_key("oxp-version") {
            self.unversioned.push(format!("{what} → {status}"));
        }
        Ok(Reply {
            status,
            headers,
            json,
            text,
        })
    }

    /// `POST /tools/call` with `body` as its JSON, authenticated.
    pub async fn call(&mut self, body: &Value) -> Result<Reply, String> {
        let request = self.request(Method::POST, "/tools/call", As::Authenticated);
        self.send(request.json(body)).await
    }
}

fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// The claims of a token the server should accept: a subject, `exp` a few minutes ahead (the
/// spec's SHOULD is at most 15), and the audience when one was given.
pub(crate) fn claims(options: &Options, lifetime: Duration) -> Value {
    let mut claims = json!({"sub": "oxp-check", "iat": now(), "exp": now() + lifetime.as_secs()});
    if let Some(audience) = &options.jwt_audience {
        claims["aud"] = json!(audience);
    }
    claims
}

/// A JWT signed with HS256 (oxp-notes §1 A.61): `header.payload.signature`, base64url.
pub(crate) fn hs256(claims: &Value, secret: &[u8]) -> String {
    signed(&json!({"alg": "HS256", "typ": "JWT"}), claims, secret)
}

/// A token with `header` (whatever it claims) and an HS256 signature.
pub(crate) fn signed(header: &Value, claims: &Value, secret: &[u8]) -> String {
    let signing_input = format!(
        "{}.{}",
        URL_SAFE_NO_PAD.encode(header.to_string()),
        URL_SAFE_NO_PAD.encode(claims.to_string())
    );
    let mut mac = Hmac::<Sha256>::new_from_slice(secret).expect("HMAC takes a key of any length");
    mac.update(signing_input.as_bytes());
    let signature = URL_SAFE_NO_PAD.encode(mac.finalize().into_bytes());
    format!("{signing_input}.{signature}")
}

/// A token as `alg: none` sends it: no signature at all.
pub(crate) fn unsigned(claims: &Value) -> String {
    format!(
        "{}.{}.",
        URL_SAFE_NO_PAD.encode(json!({"alg": "none", "typ": "JWT"}).to_string()),
        URL_SAFE_NO_PAD.encode(claims.to_string())
    )
}

/// The current time, for claims.
pub(crate) fn seconds_now() -> u64 {
    now()
}
