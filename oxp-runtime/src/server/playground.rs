//! The playground's own routes: the page, and what it shows besides OXP's tools — each tool's
//! hints, and the server's resources, prompts and skills, which OXP 1.0 has no place for. Each
//! is behind the server's authentication. The hints, resources and prompts show a caller only
//! what its scopes reach, as `GET /tools` and MCP's lists do, and a read or a get outside them
//! is the same `403`; skills, like MCP's `skills/list`, are every caller's. Reads and gets run
//! through the pipeline as MCP's do. (The page's questions and tasks go to `/mcp` itself.)
//!
//! ```text
//! GET  /playground/hints            {"<tool id>": {"title", "read_only", …, "examples", "task"}}
//! GET  /playground/resources        {"resources": [..], "templates": [..]}
//! POST /playground/resources/read   {"uri"}                → {"contents": [..]}
//! GET  /playground/prompts          {"prompts": [..]}
//! POST /playground/prompts/get      {"name", "arguments"}  → {"description", "messages": [..]}
//! GET  /playground/skills           {"skills": [{"name", "description", "uri", "files"}]}
//! POST /playground/skills/read      {"uri"}                → {"contents": [..]}
//! ```
//! A read or a get that fails answers `404` (no such resource or prompt), `400` (an argument
//! missing or not of its type), `503` (the server is at its limit), or `200` with
//! `{"error": {"message"}}` when the function itself failed — as a tool's failure is a `200`.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode};
use axum::response::Response;
use serde_json::{Map, Value, json};

use super::handlers::{call_meta, missing_scope};
use super::respond::{body_failure, json_response, response};
use super::{AppState, Grant, PLAYGROUND};
use crate::call::ReadError;
use crate::resource::Argument;

pub(super) async fn page() -> Response {
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

/// The caller's grant, as authentication left it (everything without authentication).
fn grant_of(request: &Request) -> Grant {
    request
        .extensions()
        .get::<Grant>()
        .cloned()
        .unwrap_or_default()
}

/// `GET /playground/hints`: what the playground shows beside each tool, for the tools the
/// caller's scopes reach (those `GET /tools` lists).
pub(super) async fn hints(State(state): State<Arc<AppState>>, request: Request) -> Response {
    let grant = grant_of(&request);
    let hints: Map<String, Value> = state
        .pipeline
        .registry()
        .listed_names()
        .filter(|(tool, _)| grant.allows(tool.descriptor().scopes))
        .map(|(tool, mcp_name)| {
            let h = tool.hints();
            let value = json!({
                // What `/mcp` calls this version by: the page's MCP calls name it so.
                "mcp_name": mcp_name,
                "title": h.title,
                "read_only": h.read_only,
                "destructive": h.destructive,
                "idempotent": h.idempotent,
                "open_world": h.open_world,
                "tags": h.tags,
                "examples": tool.examples(),
                "deprecated": h.deprecated,
                // An MCP task tool: the page calls it over `/mcp` as a task and follows it.
                "task": h.task.map(|task| match task {
                    crate::tasks::TaskSupport::Optional => "optional",
                    crate::tasks::TaskSupport::Required => "required",
                    // A kind this page does not know yet: called as a task or not, as it likes.
                    _ => "optional",
                }),
            });
            (tool.id().to_owned(), value)
        })
        .collect();
    json_response(StatusCode::OK, &Value::Object(hints))
}

/// A resource's parameters or a prompt's arguments, with whether each is required.
fn arguments(arguments: &[Argument], required: &[bool]) -> Vec<Value> {
    arguments
        .iter()
        .zip(required)
        .map(|(a, required)| {
            json!({ "name": a.name, "description": a.description, "required": required })
        })
        .collect()
}

/// `GET /playground/resources`: the fixed resources and the templates the caller's scopes
/// reach, each with what `resources/list` says of it and a template's parameters.
pub(super) async fn resources(State(state): State<Arc<AppState>>, request: Request) -> Response {
    let grant = grant_of(&request);
    let (mut fixed, mut templates) = (Vec::new(), Vec::new());
    for resource in state.pipeline.registry().resources() {
        let d = resource.descriptor();
        if !grant.allows(d.scopes) {
            continue;
        }
        // A template's parameters are all in its URI: each is required.
        let required = vec![true; d.arguments.len()];
        let listed = json!({
            "uri": d.uri,
            "name": d.name,
            "title": d.title,
            "description": d.description,
            "mime_type": d.mime_type,
            "parameters": arguments(d.arguments, &required),
        });
        if d.is_template() {
            templates.push(listed);
        } else {
            fixed.push(listed);
        }
    }
    json_response(
        StatusCode::OK,
        &json!({ "resources": fixed, "templates": templates }),
    )
}

/// `GET /playground/prompts`: the prompts the caller's scopes reach, with their arguments.
pub(super) async fn prompts(State(state): State<Arc<AppState>>, request: Request) -> Response {
    let grant = grant_of(&request);
    let prompts: Vec<Value> = state
        .pipeline
        .registry()
        .prompts()
        .iter()
        .filter(|p| grant.allows(p.descriptor().scopes))
        .map(|p| {
            let d = p.descriptor();
            json!({
                "name": d.name,
                "title": d.title,
                "description": d.description,
                "arguments": arguments(d.arguments, &p.required()),
            })
        })
        .collect();
    json_response(StatusCode::OK, &json!({ "prompts": prompts }))
}

/// `GET /playground/skills`: the skills the server ships (SEP-2640), each with its `SKILL.md`'s
/// URI and its files. Like MCP's `skills/list`, they are every authenticated caller's.
pub(super) async fn skills(State(state): State<Arc<AppState>>) -> Response {
    let skills: Vec<Value> = (state.pipeline.registry().skills().iter())
        .map(|skill| {
            let d = skill.descriptor();
            let files: Vec<Value> = skill
                .files()
                .map(|(uri, _, size)| json!({ "uri": uri, "size": size }))
                .collect();
            json!({
                "name": d.name,
                "description": d.description,
                "uri": skill.uri(),
                "files": files,
            })
        })
        .collect();
    json_response(StatusCode::OK, &json!({ "skills": skills }))
}

/// `POST /playground/skills/read` `{"uri"}`: one of a skill's files, as MCP's `resources/read`
/// answers it; `404` for a URI no skill has.
pub(super) async fn read_skill(State(state): State<Arc<AppState>>, request: Request) -> Response {
    let body = request.into_body();
    let uri = match body_uri(&state, body, "file", "skill://greeting/SKILL.md").await {
        Ok(uri) => uri,
        Err(refused) => return refused,
    };
    let uri = uri.as_str();
    match crate::skill::read(state.pipeline.registry().skills(), uri) {
        Some(contents) => json_response(StatusCode::OK, &json!({ "contents": [contents] })),
        None => failure(ReadError::NotFound, &format!("skill has the file `{uri}`")),
    }
}

/// The JSON object a `POST` carries, or the `400` (`413`) saying why there is none.
async fn body_object(
    state: &AppState,
    body: axum::body::Body,
) -> Result<Map<String, Value>, Response> {
    let bytes = axum::body::to_bytes(body, state.max_body_bytes)
        .await
        .map_err(|error| body_failure(&error, state.max_body_bytes))?;
    match serde_json::from_slice(&bytes) {
        Ok(Value::Object(object)) => Ok(object),
        _ => Err(message(
            StatusCode::BAD_REQUEST,
            "The body must be a JSON object.".into(),
        )),
    }
}

/// The `uri` a read's body names, or the `400` (`413`) saying how to name the `what` to read.
async fn body_uri(
    state: &AppState,
    body: axum::body::Body,
    what: &str,
    example: &str,
) -> Result<String, Response> {
    let object = body_object(state, body).await?;
    match object.get("uri").and_then(Value::as_str) {
        Some(uri) => Ok(uri.to_owned()),
        None => Err(message(
            StatusCode::BAD_REQUEST,
            format!("Name the {what} to read: {{\"uri\": \"{example}\"}}."),
        )),
    }
}

fn message(status: StatusCode, message: String) -> Response {
    json_response(status, &json!({ "message": message }))
}

/// A read's or a get's failure: what is not there `404`, an argument `400`, an overloaded
/// server `503`, the function's own failure `200` with its error.
fn failure(error: ReadError, what: &str) -> Response {
    match error {
        ReadError::NotFound => message(StatusCode::NOT_FOUND, format!("No {what}.")),
        ReadError::InvalidArguments(why) => message(StatusCode::BAD_REQUEST, why),
        ReadError::Failed(error) => json_response(
            StatusCode::OK,
            &json!({ "error": { "message": error.for_model() } }),
        ),
        ReadError::Unavailable(why) => message(StatusCode::SERVICE_UNAVAILABLE, why),
        other => message(StatusCode::INTERNAL_SERVER_ERROR, other.to_string()),
    }
}

/// `POST /playground/resources/read` `{"uri"}`: the contents, through the pipeline.
pub(super) async fn read_resource(
    State(state): State<Arc<AppState>>,
    request: Request,
) -> Response {
    let (parts, body) = request.into_parts();
    let uri = match body_uri(&state, body, "resource", "config://app").await {
        Ok(uri) => uri,
        Err(refused) => return refused,
    };
    let uri = uri.as_str();
    let registry = state.pipeline.registry();
    if let Some(grant) = parts.extensions.get::<Grant>()
        && let Some((resource, _)) = registry.resolve_resource(uri)
        && let Some(refused) = missing_scope(
            &state,
            grant,
            resource.descriptor().scopes,
            parts.uri.path(),
        )
    {
        return refused;
    }
    let meta = call_meta(&state, &parts);
    match state.pipeline.read_resource(uri, &meta).await {
        Ok(contents) => json_response(StatusCode::OK, &json!({ "contents": contents })),
        Err(error) => failure(error, &format!("resource serves `{uri}`")),
    }
}

/// `POST /playground/prompts/get` `{"name", "arguments"}`: the messages, through the
/// pipeline. A prompt that asks the user something cannot be answered here: its question
/// comes back as its error (the page's "Get over MCP" answers it, as a host would).
pub(super) async fn get_prompt(State(state): State<Arc<AppState>>, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    let object = match body_object(&state, body).await {
        Ok(object) => object,
        Err(refused) => return refused,
    };
    let Some(name) = object.get("name").and_then(Value::as_str) else {
        return message(
            StatusCode::BAD_REQUEST,
            "Name the prompt to render: {\"name\": \"review\", \"arguments\": {}}.".into(),
        );
    };
    let arguments = match object.get("arguments") {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(arguments)) => arguments.clone(),
        Some(_) => {
            return message(
                StatusCode::BAD_REQUEST,
                "`arguments` is an object of strings: {\"code\": \"fn main() {}\"}.".into(),
            );
        }
    };
    let Some(prompt) = state.pipeline.registry().prompt(name) else {
        return failure(ReadError::NotFound, &format!("prompt is named `{name}`"));
    };
    if let Some(grant) = parts.extensions.get::<Grant>()
        && let Some(refused) =
            missing_scope(&state, grant, prompt.descriptor().scopes, parts.uri.path())
    {
        return refused;
    }
    let meta = call_meta(&state, &parts);
    match state.pipeline.get_prompt(name, arguments, &meta).await {
        Ok(messages) => json_response(
            StatusCode::OK,
            &json!({ "description": prompt.descriptor().description, "messages": messages }),
        ),
        Err(error) => failure(error, &format!("prompt is named `{name}`")),
    }
}
