//! GETs to an identity provider (its metadata and key set): HTTPS only, plain HTTP to a loopback
//! host only (a developer's or a test's provider), no redirect followed, a time cap on the whole
//! exchange and a size cap on the body. What a provider sends is read as JSON and nothing else.

use std::time::Duration;

use axum::body::Bytes;
use axum::http::{Request, StatusCode, Uri, header};
use http_body_util::{BodyExt, Full, Limited};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;

type Https = hyper_rustls::HttpsConnector<HttpConnector>;

/// One client per verifier: connections to the provider are kept and reused.
#[derive(Clone)]
pub(crate) struct Fetcher {
    client: Client<Https, Full<Bytes>>,
    timeout: Duration,
    max_bytes: usize,
}

/// What came back: the JSON body and how long the provider says it may be kept.
pub(crate) struct Fetched {
    pub(crate) json: serde_json::Value,
    pub(crate) max_age: Option<Duration>,
}

impl Fetcher {
    /// A client trusting Mozilla's roots and `extra_roots` (an operator's CA).
    pub(crate) fn new(
        timeout: Duration,
        max_bytes: usize,
        extra_roots: &[rustls::pki_types::CertificateDer<'static>],
    ) -> Self {
        let mut roots = rustls::RootCertStore {
            roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
        };
        // Each was checked when the configuration was (`ca_certificates`).
        let _ = roots.add_parsable_certificates(extra_roots.iter().cloned());
        let config = rustls::ClientConfig::builder_with_provider(
            rustls::crypto::ring::default_provider().into(),
        )
        .with_safe_default_protocol_versions()
        .expect("ring's provider supports rustls' default protocol versions")
        .with_root_certificates(roots)
        .with_no_client_auth();
        let tls = hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config(config)
            // Plain HTTP is refused by `check_url` before a request is made, except to loopback.
            .https_or_http()
            .enable_http1()
            .build();
        Fetcher {
            client: Client::builder(TokioExecutor::new()).build(tls),
            timeout,
            max_bytes,
        }
    }

    /// GETs `url` and reads its body as JSON. The error says what went wrong in words an
    /// operator can act on, naming the URL (configuration, never a secret).
    pub(crate) async fn get_json(&self, url: &str) -> Result<Fetched, String> {
        let request = Request::get(check_url(url)?)
            .header(header::ACCEPT, "application/json")
            .header(header::USER_AGENT, "oxp-runtime")
            .body(Full::default())
            .map_err(|e| format!("{url}: {e}"))?;
        self.exchange(url, request).await
    }

    /// POSTs a form to `url` with HTTP Basic client authentication (RFC 6749 §2.3.1: each part
    /// form-encoded first) and reads the answer as JSON: RFC 7662 introspection.
    pub(crate) async fn post_form_json(
        &self,
        url: &str,
        form: &[(&str, &str)],
        client: (&str, &str),
    ) -> Result<Fetched, String> {
        use base64::Engine;
        let body = form
            .iter()
            .map(|(name, value)| format!("{}={}", form_encode(name), form_encode(value)))
            .collect::<Vec<_>>()
            .join("&");
        let basic = base64::engine::general_purpose::STANDARD.encode(format!(
            "{}:{}",
            form_encode(client.0),
            form_encode(client.1)
        ));
        let request = Request::post(check_url(url)?)
            .header(header::ACCEPT, "application/json")
            .header(header::USER_AGENT, "oxp-runtime")
            .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
            .header(header::AUTHORIZATION, format!("Basic {basic}"))
            .body(Full::new(Bytes::from(body)))
            .map_err(|e| format!("{url}: {e}"))?;
        self.exchange(url, request).await
    }

    async fn exchange(&self, url: &str, request: Request<Full<Bytes>>) -> Result<Fetched, String> {
        let exchange = async {
            let response = self
                .client
                .request(request)
                .await
                .map_err(|e| format!("{url} could not be reached: {}", error_chain(&e)))?;
            let status = response.status();
            if status.is_redirection() {
                // A key set is where the configuration says it is: a redirect could hand the
                // server keys from anywhere.
                return Err(format!(
                    "{url} answered {status} (a redirect); redirects are not followed: configure the final URL"
                ));
            }
            if status != StatusCode::OK {
                return Err(format!("{url} answered {status}"));
            }
            let max_age = response
                .headers()
                .get(header::CACHE_CONTROL)
                .and_then(|v| v.to_str().ok())
                .and_then(max_age);
            let body = Limited::new(response.into_body(), self.max_bytes)
                .collect()
                .await
                .map_err(|e| {
                    if e.is::<http_body_util::LengthLimitError>() {
                        format!("{url} sent more than {} bytes", self.max_bytes)
                    } else {
                        format!("{url}: the body could not be read: {e}")
                    }
                })?
                .to_bytes();
            let json = serde_json::from_slice(&body)
                .map_err(|e| format!("{url} did not answer JSON: {e}"))?;
            Ok(Fetched { json, max_age })
        };
        match tokio::time::timeout(self.timeout, exchange).await {
            Ok(result) => result,
            Err(_) => Err(format!(
                "{url} did not answer within {} ms",
                self.timeout.as_millis()
            )),
        }
    }
}

/// `application/x-www-form-urlencoded`: every byte but the unreserved ones as `%XX`.
fn form_encode(value: &str) -> String {
    use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};
    const ENCODED: &AsciiSet = &NON_ALPHANUMERIC
        .remove(b'-')
        .remove(b'.')
        .remove(b'_')
        .remove(b'~');
    utf8_percent_encode(value, ENCODED).to_string()
}

/// The URL as a request target, if it may be fetched: `https`, or `http` to a loopback host.
pub(crate) fn check_url(url: &str) -> Result<Uri, String> {
    let uri: Uri = url
        .parse()
        .map_err(|_| format!("`{url}` is not an absolute URL"))?;
    let host = uri
        .host()
        .ok_or_else(|| format!("`{url}` is not an absolute URL"))?;
    match uri.scheme_str() {
        Some("https") => Ok(uri),
        Some("http") if is_loopback(host) => Ok(uri),
        Some("http") => Err(format!(
            "`{url}` is plain HTTP: keys and metadata are fetched over HTTPS (plain HTTP only to localhost)"
        )),
        _ => Err(format!("`{url}` is not an https:// URL")),
    }
}

fn is_loopback(host: &str) -> bool {
    let host = host.trim_start_matches('[').trim_end_matches(']');
    host.eq_ignore_ascii_case("localhost")
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// `max-age` of a `Cache-Control` value; `no-store`/`no-cache` count as zero.
fn max_age(value: &str) -> Option<Duration> {
    let mut age = None;
    for directive in value.split(',').map(str::trim) {
        let lower = directive.to_ascii_lowercase();
        if lower == "no-store" || lower == "no-cache" {
            return Some(Duration::ZERO);
        }
        if let Some(seconds) = lower.strip_prefix("max-age=") {
            age = seconds
                .trim_matches('"')
                .parse::<u64>()
                .ok()
                .map(Duration::from_secs);
        }
    }
    age
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_https_or_loopback_http_is_fetched() {
        assert!(check_url("https://id.example.com/jwks").is_ok());
        assert!(check_url("http://127.0.0.1:9000/jwks").is_ok());
        assert!(check_url("http://localhost/jwks").is_ok());
        assert!(check_url("http://[::1]:8080/jwks").is_ok());
        assert!(check_url("http://id.example.com/jwks").is_err());
        assert!(check_url("http://127.0.0.1.evil.example/jwks").is_err());
        assert!(check_url("ftp://id.example.com/jwks").is_err());
        assert!(check_url("/jwks").is_err());
    }

    #[test]
    fn form_encoding() {
        assert_eq!(form_encode("a b+c/=é"), "a%20b%2Bc%2F%3D%C3%A9");
        assert_eq!(form_encode("token-1.x_y~z"), "token-1.x_y~z");
    }

    #[test]
    fn cache_control_max_age() {
        assert_eq!(
            max_age("public, max-age=3600"),
            Some(Duration::from_secs(3600))
        );
        assert_eq!(max_age("no-store"), Some(Duration::ZERO));
        assert_eq!(max_age("public"), None);
    }
}
