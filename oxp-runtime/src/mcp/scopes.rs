//! The scopes an MCP request needs of its caller: a tool's to call it, a resource's to read it
//! (or subscribe to it: reading later), a prompt's to get it, and what a completion completes
//! (it offers that thing's values). Each version of a tool is listed, and called, with its own
//! scopes: the name resolves as `tools/call` will run it.
//!
//! Checked by the HTTP transport as soon as it has read the message, and refused there with the
//! `403` MCP's authorization spec puts at the HTTP level, before anything runs.

use rmcp::model::{ClientRequest, Reference};

use crate::registry::Registry;

/// What `request` needs, none twice.
#[allow(deprecated)] // resources/subscribe: earlier revisions' clients still send it
pub(super) fn needed(registry: &Registry, request: &ClientRequest) -> Vec<&'static str> {
    let scopes: &[&'static str] = match request {
        ClientRequest::CallToolRequest(call) => registry
            .resolve_mcp_name(&call.params.name)
            .map_or(&[], |tool| tool.descriptor().scopes),
        ClientRequest::ReadResourceRequest(read) => resource(registry, &read.params.uri),
        ClientRequest::SubscribeRequest(subscribe) => resource(registry, &subscribe.params.uri),
        ClientRequest::UnsubscribeRequest(unsubscribe) => {
            resource(registry, &unsubscribe.params.uri)
        }
        ClientRequest::GetPromptRequest(get) => prompt(registry, &get.params.name),
        ClientRequest::CompleteRequest(complete) => match &complete.params.r#ref {
            Reference::Prompt(reference) => prompt(registry, &reference.name),
            // A completion names the template itself, not a URI made from it.
            Reference::Resource(reference) => (registry.resources().iter())
                .find(|r| r.descriptor().uri == reference.uri)
                .map_or(&[], |r| r.descriptor().scopes),
            // A kind of reference a newer rmcp knows: nothing of this server's.
            _ => &[],
        },
        _ => &[],
    };
    let mut needed = scopes.to_vec();
    needed.sort_unstable();
    needed.dedup();
    needed
}

fn resource(registry: &Registry, uri: &str) -> &'static [&'static str] {
    (registry.resolve_resource(uri)).map_or(&[], |(resource, _)| resource.descriptor().scopes)
}

fn prompt(registry: &Registry, name: &str) -> &'static [&'static str] {
    (registry.prompt(name)).map_or(&[], |prompt| prompt.descriptor().scopes)
}
