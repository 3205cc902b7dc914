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
use super::{AppState, AuthError, Grant, LANGCHAIN_USER_AGENTS, Principal};
use crate::call::CallMeta;
use crate::metrics_text::MetricsText;
use crate::registry::Registry;

/// Appends the JSON array of every tool definition, from the JSON the registry keeps of each:
/// the list is written per request (it is asked for rarely, and only the `$schema` around it
/// varies), not kept whole beside the registry.
fn push_items(registry: &Registry, grant: &Grant, body: &mut String) {
    // Each caller sees only the tools its scopes let it call.
    let tools = || {
        registry
            .tools()
            .iter()
            .filter(|t| grant.allows(t.descriptor().scopes))
    };
    body.reserve(
        tools()
            .map(|t| t.definition_json().len() + 1)
            .sum::<usize>()
            + 1,
    );
    body.push('[');
    for (i, tool) in tools().enumerate() {
        if i > 0 {
            body.push(',');
        }
        body.push_str(tool.definition_json());
    }
    body.push(']');
}

/// The `403 insufficient_scope` for a caller whose grant lacks some of `tool_scopes`, naming
/// every scope the request needs: those every request needs, and the tool's (the resource's,
/// the prompt's).
pub(super) fn missing_scope(
    state: &AppState,
    grant: &Grant,
    tool_scopes: &[&str],
    path: &str,
) -> Option<Response> {
    if grant.allows(tool_scopes) {
        return None;
    }
    Some(insufficient_scope(state, tool_scopes, path))
}

/// The `403` of a caller without `tool_scopes`: the challenge names them with the server's own.
fn insufficient_scope(state: &AppState, tool_scopes: &[&str], path: &str) -> Response {
    let mut needed = state.auth.required_scopes();
    for scope in tool_scopes {
        if !needed.iter().any(|n| n == scope) {
            needed.push((*scope).to_owned());
        }
    }
    let error = AuthError::insufficient_scope(needed).with_metadata(state.metadata_url(path));
    // At debug, as every refusal a client can repeat at will.
    tracing::debug!(path, reason = %error, status = 403, "refused a call");
    error.into_response()
}

pub(super) async fn authenticate(
    State(state): State<Arc<AppState>>,
    mut request: Request,
    next: Next,
) -> Response {
    let refused = |error: AuthError, path: &str| {
        let error = error
            .with_metadata(state.metadata_url(path))
            .with_scopes(state.auth.required_scopes());
        // The reason and the path only: never the credential, nor a claim of it. At debug: a
        // client decides how often this happens (a scanner, a broken key).
        tracing::debug!(path, reason = %error, status = error.status().as_u16(), "refused a request");
        error.into_response()
    };
    // A token in the URL ends up in logs and histories (RFC 6750 §2.3, OAuth 2.1 §5.1.1).
    if state.auth.has_verifier() && request.uri().query().is_some_and(names_access_token) {
        return refused(
            AuthError::invalid("Send the token in the Authorization header, never in the URL."),
            request.uri().path(),
        );
    }
    let client = request
        .extensions()
        .get::<axum::extract::ConnectInfo<std::net::SocketAddr>>()
        .map(|info| info.0.ip());
    match state
        .auth
        .authenticate_from(request.headers(), client)
        .await
    {
        Ok(caller) => {
            // A front that reads which scopes a request needs (MCP) refuses it in our words.
            #[cfg(feature = "mcp")]
            if caller.grant != Grant::All {
                let (state, path) = (state.clone(), request.uri().path().to_owned());
                let refusal = crate::fronts::ScopeRefusal::new(move |needed| {
                    insufficient_scope(&state, needed, &path)
                });
                request.extensions_mut().insert(refusal);
            }
            request.extensions_mut().insert(caller.principal);
            request.extensions_mut().insert(caller.grant);
            next.run(request).await
        }
        Err(error) => refused(error, request.uri().path()),
    }
}

/// `GET /metrics` on the server's own port, behind its authentication.
pub(super) async fn metrics(State(state): State<Arc<AppState>>) -> Response {
    scrape(&state.pipeline)
}

/// `GET /metrics`'s answer: every metric in the OpenMetrics text format.
pub(super) fn scrape(pipeline: &crate::call::Pipeline) -> Response {
    match pipeline.metrics_text() {
        Some(text) => response(StatusCode::OK, crate::metrics_text::CONTENT_TYPE, text),
        None => json_response(
            StatusCode::NOT_FOUND,
            &json!({ "message": "Metrics are off on this server (OXP_METRICS=false)." }),
        ),
    }
}

/// `GET /.well-known/oauth-protected-resource[/{front}]` (RFC 9728): a resource's metadata,
/// public and cacheable.
pub(super) fn resource_metadata(document: axum::body::Bytes) -> Response {
    let mut response = json_bytes(StatusCode::OK, document);
    response.headers_mut().insert(
        axum::http::header::CACHE_CONTROL,
        HeaderValue::from_static("public, max-age=3600"),
    );
    response
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
    let grant = parts.extensions.get::<Grant>().cloned().unwrap_or_default();
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
        push_items(registry, &grant, &mut body);
        return json_bytes(StatusCode::OK, body);
    }
    let echo = schema.as_deref().unwrap_or(DEFAULT_SCHEMA);
    let echo = serde_json::to_string(echo).expect("a string serializes");
    body.push_str(&format!(r#"{{"$schema":{echo},"items":"#));
    push_items(registry, &grant, &mut body);
    // The OTC drafts called the list `tools`; a client that says `otc://` gets both keys.
    if schema.as_deref().is_some_and(|s| s.starts_with("otc://")) {
        body.push_str(r#","tools":"#);
        push_items(registry, &grant, &mut body);
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
        let (dialect, mut request) =
            match dialect::read_call(&parts.headers, &body, state.langchain_compat) {
                Ok(read) => read,
                Err(error) => {
                    let dialect = dialect_guess(&parts.headers, &body);
                    return answer(&dialect, StatusCode::BAD_REQUEST, &error, false);
                }
            };
        if let Some(grant) = parts.extensions.get::<Grant>()
            && let Some(tool) = resolve(&state, &request.tool_id)
            && let Some(refused) =
                missing_scope(&state, grant, tool.descriptor().scopes, parts.uri.path())
        {
            return refused;
        }
        if let Some(principal) = parts.extensions.get::<Principal>() {
            let asserted = request.context.as_mut().and_then(|c| c.user_id.take());
            match principal.call_user(asserted, state.trust_user_id) {
                Ok(None) => {}
                Ok(user) => request.context.get_or_insert_default().user_id = user,
                Err(foreign) => {
                    tracing::debug!(reason = %foreign, status = 403, "refused a call");
                    let body = json!({
                        "message": foreign.to_string(),
                        "developer_message": "context.user_id names a user other than the \
                                              bearer token's subject (sub)",
                    });
                    let mut refused = answer(&dialect, StatusCode::FORBIDDEN, &body, false);
                    refused
                        .extensions_mut()
                        .insert(crate::metrics::Refusal::ForeignUser);
                    return refused;
                }
            }
        }
        let meta = call_meta(&state, &parts);
        let outcome = state.pipeline.call_with(request, &meta).await;
        respond(&dialect, outcome, state.langchain_compat)
    }
}

/// What the pipeline needs to know of a call besides its body.
pub(super) fn call_meta(state: &AppState, parts: &axum::http::request::Parts) -> CallMeta {
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

/// The tool a call names, as the pipeline will resolve it.
fn resolve<'a>(state: &'a AppState, tool_id: &str) -> Option<&'a crate::registry::RegisteredTool> {
    let registry = state.pipeline.registry();
    registry.resolve(tool_id).ok().or_else(|| {
        state
            .langchain_compat
            .then(|| registry.resolve_wire_name(tool_id))
            .flatten()
    })
}

/// Whether a query string carries a parameter named `access_token` however it is spelled:
/// separated by `&` or `;`, any case, percent-encoded.
fn names_access_token(query: &str) -> bool {
    query.split(['&', ';']).any(|parameter| {
        let name = parameter.split('=').next().unwrap_or_default();
        // A malformed escape is passed through as `%`, and `+` (a space in a form) stays `+`:
        // neither is in `access_token`, so neither name can be taken for it.
        let decoded: Vec<u8> = percent_encoding::percent_decode_str(name).collect();
        decoded.eq_ignore_ascii_case(b"access_token")
    })
}

#[cfg(test)]
mod query_tests {
    #[test]
    fn a_token_in_the_query_is_found_however_it_is_spelled() {
        for query in [
            "access_token=x",
            "a=1&access_token=x",
            "a=1;access_token=x",
            "ACCESS_TOKEN=x",
            "access%5Ftoken=x",
            "access%5ftoken",
        ] {
            assert!(super::names_access_token(query), "{query}");
        }
        for query in [
            "a=1",
            "access_tokens=x",
            "x=access_token",
            "access%5",
            "access+token=x",
            "access_token%=x",
            "access%5ftoken%",
        ] {
            assert!(!super::names_access_token(query), "{query}");
        }
    }
}
