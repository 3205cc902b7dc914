//! `resources/list`, `resources/templates/list` and `resources/read`: the registry's
//! `#[resource]`s, read through the pipeline (its limits, time limit, panic containment and
//! result cap), with the caching hints `tools/list` has.

use std::time::Duration;

use rmcp::ErrorData as McpError;
use rmcp::model::{
    CacheScope, ListResourceTemplatesResult, ListResourcesResult, ReadResourceRequestParams,
    ReadResourceResult, Resource, ResourceContents, ResourceTemplate,
};

use crate::call::{CallMeta, Front, Pipeline, ReadError};
use crate::principal::Grant;
use crate::registry::Registry;
use crate::resource::ResourceDescriptor;
use crate::time::millis;

use super::exchange::Exchange;

/// The resources `grant`'s scopes reach, as `tools/list` shows tools.
fn reachable<'a>(
    registry: &'a Registry,
    grant: &'a Grant,
) -> impl Iterator<Item = &'static ResourceDescriptor> + 'a {
    registry
        .resources()
        .iter()
        .map(|r| r.descriptor())
        .filter(|d| grant.allows(d.scopes))
}

/// The fixed resources the caller's scopes reach.
pub(super) fn list(registry: &Registry, grant: &Grant, ttl: Duration) -> ListResourcesResult {
    let resources = reachable(registry, grant)
        .filter(|d| !d.is_template())
        .map(|d| {
            let mut resource = Resource::new(d.uri, d.name);
            describe(d, &mut resource.title, &mut resource.description);
            resource.mime_type = d.mime_type.map(str::to_owned);
            resource
        })
        .collect();
    // Private, as `tools/list`: a server behind authentication answers its callers only.
    ListResourcesResult::with_all_items(resources)
        .with_ttl_ms(millis(ttl))
        .with_cache_scope(CacheScope::Private)
}

/// The URI templates the caller's scopes reach.
pub(super) fn templates(
    registry: &Registry,
    grant: &Grant,
    ttl: Duration,
) -> ListResourceTemplatesResult {
    let templates = reachable(registry, grant)
        .filter(|d| d.is_template())
        .map(|d| {
            let mut template = ResourceTemplate::new(d.uri, d.name);
            describe(d, &mut template.title, &mut template.description);
            template.mime_type = d.mime_type.map(str::to_owned);
            template
        })
        .collect();
    ListResourceTemplatesResult::with_all_items(templates)
        .with_ttl_ms(millis(ttl))
        .with_cache_scope(CacheScope::Private)
}

fn describe(d: &ResourceDescriptor, title: &mut Option<String>, description: &mut Option<String>) {
    *title = d.title.map(str::to_owned);
    *description = Some(d.description.to_owned()).filter(|text| !text.is_empty());
}

/// Reads a resource; a URI no resource serves is SEP-2164's not-found (`-32602`, the URI in
/// `data`).
pub(super) async fn read(
    pipeline: &Pipeline,
    request: ReadResourceRequestParams,
    exchange: &Exchange,
) -> Result<ReadResourceResult, McpError> {
    let meta = CallMeta {
        front: Front::Mcp,
        ..CallMeta::default()
    };
    let uri = request.uri;
    // A cancelled request's read is dropped (its run ends as a call's would).
    let read = tokio::select! {
        read = pipeline.read_resource(&uri, &meta) => read,
        () = exchange.cancelled() => {
            return Err(McpError::internal_error("the read was cancelled", None));
        }
    };
    let contents = read.map_err(|error| error_of(error, "resource", &uri))?;
    let contents = contents
        .into_iter()
        .map(|resource| {
            serde_json::to_value(resource)
                .and_then(serde_json::from_value::<ResourceContents>)
                .map_err(|e| McpError::internal_error(e.to_string(), None))
        })
        .collect::<Result<Vec<_>, _>>()?;
    // A function's answer may change with every read: fresh for no time, and the caller's.
    Ok(ReadResourceResult::new(contents)
        .with_ttl_ms(0)
        .with_cache_scope(CacheScope::Private))
}

/// A read's or a get's failure as MCP's error: what is not there, or an argument that does
/// not fit, is the caller's (`-32602`); the function's own failure is the server's.
pub(super) fn error_of(error: ReadError, what: &str, key: &str) -> McpError {
    let data = |key_name: &str| Some(serde_json::json!({ key_name: key }));
    match error {
        ReadError::NotFound if what == "resource" => {
            McpError::invalid_params(format!("Resource not found: {key}"), data("uri"))
        }
        ReadError::NotFound => {
            McpError::invalid_params(format!("Prompt not found: {key}"), data("name"))
        }
        ReadError::InvalidArguments(why) => McpError::invalid_params(why, None),
        ReadError::Failed(error) => McpError::internal_error(error.for_model(), None),
        ReadError::Unavailable(why) => McpError::internal_error(why, None),
        other => McpError::internal_error(other.to_string(), None),
    }
}
