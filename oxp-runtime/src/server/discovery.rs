//! The public discovery documents (see [`crate::card`]): the MCP Server Card at
//! `/mcp/server-card` and `/.well-known/mcp/server-card.json`, and the AI Catalog at
//! `/.well-known/ai-catalog.json`.
//!
//! They are the one exception to the guard's refusal of foreign `Origin`s: MCP forbids
//! answering a page of another origin because a page could act as its visitor on the server;
//! these documents are the same for everyone, read-only, carry no credentials and are answered
//! before authentication, so a page reading them learns only what any client may (SEP-2127
//! requires `Access-Control-Allow-Origin: *` for browser-based clients). The `Host` check
//! against DNS rebinding stays.

use axum::body::{Body, Bytes};
use axum::http::header::{
    ACCESS_CONTROL_ALLOW_HEADERS, ACCESS_CONTROL_ALLOW_METHODS, ACCESS_CONTROL_ALLOW_ORIGIN,
    ACCESS_CONTROL_EXPOSE_HEADERS, ACCESS_CONTROL_MAX_AGE, CACHE_CONTROL, CONTENT_TYPE, ETAG,
    IF_NONE_MATCH,
};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode};
use axum::response::Response;
use axum::routing::get;
use serde_json::Value;
use sha2::Digest;

use crate::card::{CATALOG_MEDIA_TYPE, CardError, MEDIA_TYPE, ServerCard};

/// The location MCP reserves for a card, beside the streamable-HTTP endpoint.
pub(crate) const CARD_PATH: &str = "/mcp/server-card";
/// Where clients written against SEP-2127's drafts look.
pub(crate) const LEGACY_CARD_PATH: &str = "/.well-known/mcp/server-card.json";
/// Domain discovery.
pub(crate) const CATALOG_PATH: &str = "/.well-known/ai-catalog.json";

/// An hour, as SEP-2127 suggests: a card changes with a deployment, and the `ETag` makes a
/// stale one cheap to check.
const CACHE: &str = "public, max-age=3600";

/// Whether a request may come from a page of any origin: a read of a discovery document.
pub(crate) fn is_public(method: &Method, path: &str) -> bool {
    matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS)
        && matches!(path, CARD_PATH | LEGACY_CARD_PATH | CATALOG_PATH)
}

/// A document, its body and strong `ETag` made once.
#[derive(Clone)]
struct Document {
    body: Bytes,
    etag: HeaderValue,
    content_type: &'static str,
}

impl Document {
    fn new(value: &Value, content_type: &'static str) -> Document {
        let body = serde_json::to_vec(value).expect("JSON serializes");
        // Strong: the bytes are the same wherever the same card is served, so any replica's
        // answer validates any other's.
        let digest = sha2::Sha256::digest(&body);
        let hex: String = digest[..16].iter().map(|b| format!("{b:02x}")).collect();
        let etag = HeaderValue::from_str(&format!("\"{hex}\"")).expect("hex is a header value");
        Document {
            body: Bytes::from(body),
            etag,
            content_type,
        }
    }

    fn answer(&self, request: &HeaderMap) -> Response {
        let fresh = request
            .get_all(IF_NONE_MATCH)
            .iter()
            .filter_map(|value| value.to_str().ok())
            .any(|value| matches(value, &self.etag));
        let mut response = if fresh {
            let mut response = Response::new(Body::empty());
            *response.status_mut() = StatusCode::NOT_MODIFIED;
            response
        } else {
            let mut response = Response::new(Body::from(self.body.clone()));
            response
                .headers_mut()
                .insert(CONTENT_TYPE, HeaderValue::from_static(self.content_type));
            response
        };
        let headers = response.headers_mut();
        headers.insert(ETAG, self.etag.clone());
        headers.insert(CACHE_CONTROL, HeaderValue::from_static(CACHE));
        cors(headers);
        headers.insert(
            ACCESS_CONTROL_EXPOSE_HEADERS,
            HeaderValue::from_static("ETag"),
        );
        response
    }
}

/// Whether `If-None-Match` names `etag` (RFC 9110 §13.1.2: `*`, or a list compared weakly).
fn matches(if_none_match: &str, etag: &HeaderValue) -> bool {
    let etag = etag.to_str().unwrap_or_default();
    if_none_match
        .split(',')
        .map(str::trim)
        .any(|tag| tag == "*" || tag.strip_prefix("W/").unwrap_or(tag) == etag)
}

fn cors(headers: &mut HeaderMap) {
    headers.insert(ACCESS_CONTROL_ALLOW_ORIGIN, HeaderValue::from_static("*"));
    headers.insert(
        ACCESS_CONTROL_ALLOW_METHODS,
        HeaderValue::from_static("GET, HEAD"),
    );
    headers.insert(
        ACCESS_CONTROL_ALLOW_HEADERS,
        HeaderValue::from_static("Accept, Content-Type, If-None-Match"),
    );
}

/// A browser's preflight before a `GET` with `If-None-Match`.
fn preflight() -> Response {
    let mut response = Response::new(Body::empty());
    *response.status_mut() = StatusCode::NO_CONTENT;
    let headers = response.headers_mut();
    cors(headers);
    headers.insert(ACCESS_CONTROL_MAX_AGE, HeaderValue::from_static("86400"));
    response
}

/// `router` with the card's routes, the card's endpoint under `public_url` unless it names
/// one; the catalog points at the card there, or carries it inline without a public URL.
pub(crate) fn routes<S: Clone + Send + Sync + 'static>(
    router: axum::Router<S>,
    card: &ServerCard,
    public_url: Option<&str>,
) -> Result<axum::Router<S>, CardError> {
    let card = card.clone().with_public_url(public_url);
    let card_url = public_url.map(|url| format!("{}{CARD_PATH}", url.trim_end_matches('/')));
    let document = Document::new(&card.to_json()?, MEDIA_TYPE);
    let catalog = Document::new(&card.catalog(card_url.as_deref())?, CATALOG_MEDIA_TYPE);
    let serve = |document: Document| {
        get(move |headers: HeaderMap| {
            let document = document.clone();
            async move { document.answer(&headers) }
        })
        .options(|| async { preflight() })
    };
    Ok(router
        .route(CARD_PATH, serve(document.clone()))
        .route(LEGACY_CARD_PATH, serve(document))
        .route(CATALOG_PATH, serve(catalog)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn if_none_match_is_compared_weakly_in_a_list() {
        let etag = HeaderValue::from_static("\"abc\"");
        for (header, expected) in [
            ("\"abc\"", true),
            ("W/\"abc\"", true),
            ("\"x\", \"abc\"", true),
            ("*", true),
            ("\"abcd\"", false),
            ("abc", false),
            ("", false),
        ] {
            assert_eq!(matches(header, &etag), expected, "{header}");
        }
    }
}
