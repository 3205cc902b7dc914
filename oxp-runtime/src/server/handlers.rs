//! The routes' handlers: each reads its request, asks the pipeline or the registry, and hands
//! what came of it to [`super::respond`].

use std::sync::Arc;

use axum::extract::rejection::PathRejection;
use axum::extract::{OriginalUri, Path, Request, State};
use axum::http::header::{HOST, USER_AGENT};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, Uri};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::dialect::{self, DEFAULT_SCHEMA};
use super::respond::{
    answer, body_failure, dialect_guess, json_bytes, json_response, respond, response,
};
use super::{AppState, LANGCHAIN_USER_AGENTS, PLAYGROUND, Principal};
use crate::call::CallMeta;
use crate::registry::Registry;

/// Appends the JSON array of every tool definition, from the JSON the registry keeps of each:
/// the list is written per request (it is asked for rarely, and only the `$schema` around it
/// varies), not kept whole beside the registry.
fn push_items(registry: &Registry, body: &mut String) {
    let tools = registry.tools();
    body.reserve(
        tools
            .iter()
            .map(|t| t.definition_json().len() + 1)
            .sum::<usize>()
            + 1,
    );
    body.push('[');
    for (i, tool) in tools.iter().enumerate() {
        if i > 0 {
            body.push(',');
        }
        body.push_str(tool.definition_json());
    }
    body.push(']');
}

pub(super) async fn authenticate(
    State(state): State<Arc<AppState>>,
    mut request: Request,
    next: Next,
) -> Response {
    match state.auth.authenticate(request.headers()) {
        Ok(principal) => {
            request.extensions_mut().insert(principal);
            next.run(request).await
        }
        Err(error) => {
            tracing::info!(path = ?request.uri().path(), reason = %error, "refused an unauthenticated request");
            error.into_response()
        }
    }
}

pub(super) async fn playground_page() -> Response {
    let mut response = response(StatusCode::OK, "text/html; charset=utf-8", PLAYGROUND);
    let headers = response.headers_mut();
    // Everything the page needs is inline; it talks only to this server.
    headers.insert(
        "content-security-policy",
        HeaderValue::from_static(
            "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'; img-src 'self' data:",
        ),
    );
    response
}

/// Each tool's hints by id, for the playground's badges, confirmation and examples: written
/// once, when the router is built.
pub(super) async fn playground_hints(State(state): State<Arc<AppState>>) -> Response {
    json_bytes(StatusCode::OK, state.playground_hints.clone())
}

/// The body [`playground_hints`] answers with.
pub(super) fn playground_hints_json(registry: &crate::registry::Registry) -> axum::body::Bytes {
    let hints: serde_json::Map<String, serde_json::Value> = registry
        .tools()
        .iter()
        .map(|tool| {
            let h = tool.hints();
            let value = serde_json::json!({
                "title": h.title,
                "read_only": h.read_only,
                "destructive": h.destructive,
                "idempotent": h.idempotent,
                "open_world": h.open_world,
                "tags": h.tags,
                "examples": tool.examples(),
                "deprecated": h.deprecated,
            });
            (tool.id().to_owned(), value)
        })
        .collect();
    serde_json::to_vec(&hints).expect("JSON serializes").into()
}

/// `GET /metrics` on the server's own port, behind its authentication.
pub(super) async fn metrics(State(state): State<Arc<AppState>>) -> Response {
    scrape(&state.pipeline)
}

/// `GET /metrics`'s answer: every metric in the OpenMetrics text format.
pub(super) fn scrape(pipeline: &crate::call::Pipeline) -> Response {
    match pipeline.metrics_text() {
        Some(text) => response(StatusCode::OK, crate::metrics::CONTENT_TYPE, text),
        None => json_response(
            StatusCode::NOT_FOUND,
            &json!({ "message": "Metrics are off on this server (OXP_METRICS=false)." }),
        ),
    }
}

/// §1 H.11–13: 200 when ready, no authentication.
pub(super) async fn health(State(state): State<Arc<AppState>>) -> Response {
    if state.pipeline.is_draining() {
        // §1 H.13: MAY 503 when not ready; a load balancer stops sending new calls here.
        return json_bytes(
            StatusCode::SERVICE_UNAVAILABLE,
            &br#"{"status":"draining"}"#[..],
        );
    }
    json_bytes(StatusCode::OK, &br#"{"status":"ok"}"#[..])
}

/// §1 L: the tool list. A body is allowed and ignored, except a recognized `$schema`
/// (oxp-notes §3.4): a malformed body is never an error.
pub(super) async fn list_tools(State(state): State<Arc<AppState>>, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    let headers = parts.headers;
    let body = match axum::body::to_bytes(body, state.max_body_bytes).await {
        Ok(body) => body,
        Err(error) => return body_failure(&error, state.max_body_bytes),
    };
    let schema = serde_json::from_slice::<Value>(&body)
        .ok()
        .and_then(|b| b.get("$schema").cloned())
        .and_then(|s| dialect::check_schema(&s).ok());
    let registry = state.pipeline.registry();
    let mut body = String::new();
    if state.langchain_compat && is_langchain(&headers) {
        push_items(registry, &mut body);
        return json_bytes(StatusCode::OK, body);
    }
    let echo = schema.as_deref().unwrap_or(DEFAULT_SCHEMA);
    let echo = serde_json::to_string(echo).expect("a string serializes");
    body.push_str(&format!(r#"{{"$schema":{echo},"items":"#));
    push_items(registry, &mut body);
    // The OTC drafts called the list `tools`; a client that says `otc://` gets both keys.
    if schema.as_deref().is_some_and(|s| s.starts_with("otc://")) {
        body.push_str(r#","tools":"#);
        push_items(registry, &mut body);
    }
    body.push('}');
    json_bytes(StatusCode::OK, body)
}

fn is_langchain(headers: &HeaderMap) -> bool {
    headers
        .get(USER_AGENT)
        .and_then(|ua| ua.to_str().ok())
        .is_some_and(|ua| LANGCHAIN_USER_AGENTS.iter().any(|p| ua.starts_with(p)))
}

/// §1 C, E: one call. Size → dialect and shape → the pipeline → the answer in the caller's dialect.
///
/// A plain `fn` returning the future (rather than an `async fn`, which keeps storage for its
/// arguments besides its locals): the future is moved into axum's box on every call.
pub(super) fn call_tool(
    State(state): State<Arc<AppState>>,
    request: Request,
) -> impl std::future::Future<Output = Response> {
    // The request taken apart rather than through extractors, which would copy the headers.
    let (parts, body) = request.into_parts();
    async move {
        let body = match axum::body::to_bytes(body, state.max_body_bytes).await {
            Ok(body) => body,
            Err(error) => return body_failure(&error, state.max_body_bytes),
        };
        let (dialect, request) =
            match dialect::read_call(&parts.headers, &body, state.langchain_compat) {
                Ok(read) => read,
                Err(error) => {
                    let dialect = dialect_guess(&parts.headers, &body);
                    return answer(&dialect, StatusCode::BAD_REQUEST, &error, false);
                }
            };
        let meta = call_meta(&state, &parts);
        let outcome = state.pipeline.call_with(request, &meta).await;
        respond(&dialect, outcome, state.langchain_compat)
    }
}

/// What the pipeline needs to know of a call besides its body.
fn call_meta(state: &AppState, parts: &axum::http::request::Parts) -> CallMeta {
    CallMeta {
        // Only an authenticated principal scopes idempotency; `None` is "anonymous".
        principal: parts
            .extensions
            .get::<Principal>()
            .filter(|p| **p != Principal::Anonymous)
            .map(ToString::to_string),
        // Only a server that mints challenges needs the URLs they point back to.
        check_url_base: state.pipeline.authorization_provider().map(|_| {
            let original = parts
                .extensions
                .get::<OriginalUri>()
                .map_or(&parts.uri, |o| &o.0);
            check_url_base(state, &parts.headers, original, &parts.uri)
        }),
        resolve_wire_names: state.langchain_compat,
        // OXP carries no progress, and a hang-up cancels nothing: a retry with the call_id
        // gets the answer.
        signals: crate::signals::CallSignals::new(),
        front: crate::call::Front::Oxp,
        // Read only where it is used: a call pays for no copy of a header nothing reads.
        traceparent: cfg!(feature = "otel")
            .then(|| parts.headers.get("traceparent")?.to_str().ok())
            .flatten()
            .map(str::to_owned),
    }
}

/// Where `check_url`s point: the configured public URL, or this request's own origin and the
/// prefix the router is nested under.
fn check_url_base(state: &AppState, headers: &HeaderMap, original: &Uri, uri: &Uri) -> String {
    if let Some(base) = &state.public_check_url {
        return base.clone();
    }
    let prefix = original.path().strip_suffix(uri.path()).unwrap_or_default();
    let host = headers
        .get(HOST)
        .and_then(|h| h.to_str().ok())
        .unwrap_or("localhost");
    let scheme = headers
        .get("x-forwarded-proto")
        .and_then(|h| h.to_str().ok())
        .unwrap_or("http");
    format!("{scheme}://{host}{prefix}/authorization/")
}

/// §1 R.56: `GET check_url` → `{"status": "pending"|"completed"|"failed"}`; unknown → 404.
pub(super) async fn check_authorization(
    State(state): State<Arc<AppState>>,
    check_id: Result<Path<String>, PathRejection>,
) -> Response {
    // An id that does not even decode (`%FF`) is no challenge this server minted.
    let status = match (state.pipeline.authorization_provider(), check_id) {
        (Some(provider), Ok(Path(check_id))) => provider.status(&check_id).await,
        _ => None,
    };
    match status {
        Some(status) => json_response(StatusCode::OK, &json!({ "status": status })),
        None => json_response(
            StatusCode::NOT_FOUND,
            &json!({ "message": "No such authorization challenge." }),
        ),
    }
}

pub(super) async fn not_found(method: Method, uri: Uri) -> Response {
    json_response(
        StatusCode::NOT_FOUND,
        &json!({ "message": format!("No route for {method} {}", uri.path()) }),
    )
}

pub(super) async fn method_not_allowed(method: Method, uri: Uri) -> Response {
    json_response(
        StatusCode::METHOD_NOT_ALLOWED,
        &json!({ "message": format!("{method} is not allowed on {}", uri.path()) }),
    )
}

/// Reads a request's body whole before a nested front (MCP) sees it: a body over the cap, too
/// slow or broken gets the answer it gets on every route (`413`, `400`), never the front's own
/// reading of the guard's cut (rmcp answers any body error `500`).
pub(super) async fn whole_body(
    State(state): State<Arc<AppState>>,
    request: Request,
    next: Next,
) -> Response {
    let (parts, body) = request.into_parts();
    // The guard's limit applies as the body is read; this reads no further than it.
    match axum::body::to_bytes(body, usize::MAX).await {
        Ok(bytes) => {
            next.run(Request::from_parts(parts, axum::body::Body::from(bytes)))
                .await
        }
        Err(error) => super::respond::body_failure(&error, state.max_body_bytes),
    }
}
