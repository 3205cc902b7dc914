//! A POST's body as one MCP message, in rmcp's model types.
//!
//! rmcp reads a message by trying each kind it could be (request, response, notification,
//! error, and each method's shape) against a buffered copy of the body, building an error for
//! every kind that does not fit: on a plain `tools/call` that costs as much as the rest of the
//! request. So the message this transport is there for is read straight into its types, and
//! any other message, or a call this reading does not take whole, by rmcp's own reading: the
//! two agree on every call (a unit test holds them to it), and what rmcp refuses is refused.

use std::borrow::Cow;

use axum::body::Bytes;
use rmcp::ErrorData as McpError;
use rmcp::model::{
    CallToolRequest, CallToolRequestParams, ClientJsonRpcMessage, ClientRequest, RequestId,
};
use serde::Deserialize;
use serde_json::value::RawValue;

/// The message `bytes` hold: JSON-RPC's parse error for what is not JSON, invalid request for
/// JSON that is no single MCP message (a batch among them: batches left MCP with 2025-06-18,
/// and the revisions that had them were served without them by rmcp's transport too).
pub(super) fn message(bytes: &Bytes) -> Result<ClientJsonRpcMessage, McpError> {
    if (bytes.iter()).find(|byte| !byte.is_ascii_whitespace()) == Some(&b'[') {
        return Err(McpError::invalid_request(
            "Invalid Request: JSON-RPC batches are not accepted; send each message in its own \
             request",
            None,
        ));
    }
    if let Some(call) = tool_call(bytes) {
        return Ok(call);
    }
    serde_json::from_slice(bytes).map_err(|error| {
        if error.is_syntax() || error.is_eof() {
            McpError::parse_error(format!("Parse error: {error}"), None)
        } else {
            McpError::invalid_request(format!("Invalid Request: {error}"), None)
        }
    })
}

/// A JSON-RPC message with its parts unread.
#[derive(Deserialize)]
struct Envelope<'a> {
    #[serde(borrow)]
    jsonrpc: Cow<'a, str>,
    id: Option<RequestId>,
    #[serde(borrow)]
    method: Option<Cow<'a, str>>,
    #[serde(borrow)]
    params: Option<&'a RawValue>,
    #[serde(borrow)]
    result: Option<&'a RawValue>,
    #[serde(borrow)]
    error: Option<&'a RawValue>,
}

/// A `tools/call` request read straight into its types, its `_meta` where rmcp keeps it (the
/// request's extensions); `None` for anything else.
fn tool_call(bytes: &[u8]) -> Option<ClientJsonRpcMessage> {
    let envelope: Envelope<'_> = serde_json::from_slice(bytes).ok()?;
    let plain = envelope.jsonrpc == "2.0" && envelope.result.is_none() && envelope.error.is_none();
    if !plain || envelope.method.as_deref() != Some("tools/call") {
        return None;
    }
    let id = envelope.id?;
    let mut params: CallToolRequestParams = serde_json::from_str(envelope.params?.get()).ok()?;
    let meta = params.meta.take();
    let mut request = CallToolRequest::new(params);
    if let Some(meta) = meta {
        request.extensions.insert(meta);
    }
    Some(ClientJsonRpcMessage::request(
        ClientRequest::CallToolRequest(request),
        id,
    ))
}

#[cfg(test)]
mod tests {
    use rmcp::model::GetMeta;
    use serde_json::json;

    use super::*;

    /// rmcp's own reading of a message.
    fn rmcp(body: &serde_json::Value) -> ClientJsonRpcMessage {
        serde_json::from_value(body.clone()).unwrap()
    }

    #[test]
    fn a_call_is_read_as_rmcp_reads_it() {
        let calls = [
            json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                "params": {"name": "calc_add", "arguments": {"a": 1, "b": 2}}}),
            json!({"jsonrpc": "2.0", "id": "x-7", "method": "tools/call",
                "params": {"name": "t", "_meta": {"progressToken": "p",
                    "io.modelcontextprotocol/protocolVersion": "2026-07-28"},
                    "requestState": "s", "inputResponses": {"k": {"action": "accept"}}}}),
            json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "t"}}),
        ];
        for body in calls {
            let bytes = serde_json::to_vec(&body).unwrap();
            let ours = tool_call(&bytes).expect("read fast");
            let (ClientJsonRpcMessage::Request(ours), ClientJsonRpcMessage::Request(theirs)) =
                (ours, rmcp(&body))
            else {
                panic!("{body}");
            };
            assert_eq!(ours.id, theirs.id);
            assert_eq!(
                ours.request.get_meta().0,
                theirs.request.get_meta().0,
                "{body}"
            );
            let (ClientRequest::CallToolRequest(a), ClientRequest::CallToolRequest(b)) =
                (&ours.request, &theirs.request)
            else {
                panic!("{body}");
            };
            assert_eq!(a.params, b.params, "{body}");
            assert_eq!(
                serde_json::to_value(&ours).unwrap(),
                serde_json::to_value(&theirs).unwrap()
            );
        }
    }

    #[test]
    fn anything_else_is_left_to_rmcp() {
        let others = [
            json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}),
            json!({"jsonrpc": "2.0", "method": "tools/call", "params": {"name": "t"}}),
            json!({"jsonrpc": "1.0", "id": 1, "method": "tools/call", "params": {"name": "t"}}),
            json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": 7}}),
            json!({"jsonrpc": "2.0", "id": 1, "result": {}}),
        ];
        for body in others {
            assert!(
                tool_call(&serde_json::to_vec(&body).unwrap()).is_none(),
                "{body}"
            );
        }
    }
}
