//! A POST's body as one MCP message, in rmcp's model types.
//!
//! rmcp reads a message by trying each kind it could be (request, response, notification,
//! error, and each method's shape) against a buffered copy of the body, building an error for
//! every kind that does not fit: on a plain `tools/call` that costs as much as the rest of the
//! request. So the message this transport is there for is read straight into its types, and
//! any other message, or a call this reading does not take whole, by rmcp's own reading: the
//! two agree on every call (a unit test holds them to it), and what rmcp refuses is refused.

use axum::body::Bytes;
use rmcp::ErrorData as McpError;
use rmcp::model::{
    CallToolRequest, CallToolRequestParams, ClientJsonRpcMessage, ClientRequest, RequestId,
    RequestMetaObject,
};
use serde::Deserialize;
use serde_json::value::RawValue;

/// The message `bytes` hold: JSON-RPC's parse error for what is not JSON, invalid request for
/// JSON that is no single MCP message (a batch among them: batches left MCP with 2025-06-18,
/// and the revisions that had them were served without them by rmcp's transport too).
///
/// A call read straight into its types comes with its `_meta` beside it, taken out already
/// (the transport takes every request's out before it dispatches); rmcp's reading leaves it
/// in the request.
pub(super) fn message(
    bytes: &Bytes,
) -> Result<(ClientJsonRpcMessage, Option<RequestMetaObject>), McpError> {
    if (bytes.iter()).find(|byte| !byte.is_ascii_whitespace()) == Some(&b'[') {
        return Err(McpError::invalid_request(
            "Invalid Request: JSON-RPC batches are not accepted; send each message in its own \
             request",
            None,
        ));
    }
    if let Some((call, meta)) = tool_call(bytes) {
        return Ok((call, Some(meta)));
    }
    let message = serde_json::from_slice(bytes).map_err(|error| {
        if error.is_syntax() || error.is_eof() {
            McpError::parse_error(format!("Parse error: {error}"), None)
        } else {
            McpError::invalid_request(format!("Invalid Request: {error}"), None)
        }
    })?;
    Ok((message, None))
}

/// A JSON-RPC message with its parts unread, but for a `tools/call`'s params when its method
/// comes first (as clients write it): those are read in the same pass.
struct Envelope<'a> {
    jsonrpc: Option<&'a str>,
    id: Option<RequestId>,
    method: Option<&'a str>,
    params: Option<Params<'a>>,
    /// A `result` or an `error`: a response, not a request.
    answer: bool,
}

// One per request, on the stack for the length of a parse: boxing the call would cost the
// allocation this reading saves.
#[allow(clippy::large_enum_variant)]
enum Params<'a> {
    Call(CallToolRequestParams),
    Unread(&'a RawValue),
}

impl<'de> Deserialize<'de> for Envelope<'de> {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_map(EnvelopeVisitor)
    }
}

struct EnvelopeVisitor;

impl<'de> serde::de::Visitor<'de> for EnvelopeVisitor {
    type Value = Envelope<'de>;

    fn expecting(&self, formatter: &mut std::fmt::Formatter) -> std::fmt::Result {
        formatter.write_str("a JSON-RPC message")
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(
        self,
        mut map: A,
    ) -> Result<Envelope<'de>, A::Error> {
        use serde::de::Error;
        let mut envelope = Envelope {
            jsonrpc: None,
            id: None,
            method: None,
            params: None,
            answer: false,
        };
        // A key that escapes, or comes twice, is left to rmcp's reading (an error here).
        while let Some(key) = map.next_key::<&'de str>()? {
            match key {
                "jsonrpc" if envelope.jsonrpc.is_none() => {
                    envelope.jsonrpc = Some(map.next_value()?)
                }
                "id" if envelope.id.is_none() => envelope.id = Some(map.next_value()?),
                "method" if envelope.method.is_none() => envelope.method = Some(map.next_value()?),
                "params" if envelope.params.is_none() => {
                    envelope.params = Some(if envelope.method == Some("tools/call") {
                        Params::Call(map.next_value()?)
                    } else {
                        Params::Unread(map.next_value()?)
                    });
                }
                "result" | "error" => {
                    map.next_value::<serde::de::IgnoredAny>()?;
                    envelope.answer = true;
                }
                "jsonrpc" | "id" | "method" | "params" => {
                    return Err(A::Error::custom(format!("duplicate field `{key}`")));
                }
                _ => {
                    map.next_value::<serde::de::IgnoredAny>()?;
                }
            }
        }
        Ok(envelope)
    }
}

/// A `tools/call` request read straight into its types, and its `_meta` (empty when it has
/// none); `None` for anything else.
fn tool_call(bytes: &[u8]) -> Option<(ClientJsonRpcMessage, RequestMetaObject)> {
    let envelope: Envelope<'_> = serde_json::from_slice(bytes).ok()?;
    let plain = envelope.jsonrpc == Some("2.0") && !envelope.answer;
    if !plain || envelope.method != Some("tools/call") {
        return None;
    }
    let id = envelope.id?;
    let mut params = match envelope.params? {
        Params::Call(params) => params,
        // Its params came before its method.
        Params::Unread(raw) => serde_json::from_str::<CallToolRequestParams>(raw.get()).ok()?,
    };
    let meta = params.meta.take().unwrap_or_default();
    let request = ClientRequest::CallToolRequest(CallToolRequest::new(params));
    Some((ClientJsonRpcMessage::request(request, id), meta))
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
            let (ours, meta) = tool_call(&bytes).expect("read fast");
            let (ClientJsonRpcMessage::Request(mut ours), ClientJsonRpcMessage::Request(theirs)) =
                (ours, rmcp(&body))
            else {
                panic!("{body}");
            };
            assert_eq!(ours.id, theirs.id);
            assert_eq!(meta.0, theirs.request.get_meta().0, "{body}");
            // Put back where rmcp keeps it, the two requests are the same.
            if !meta.0.0.is_empty() {
                *ours.request.get_meta_mut() = meta;
            }
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
    fn params_before_the_method_are_read_as_well() {
        let body = br#"{"params":{"name":"t","arguments":{"a":1}},"method":"tools/call","id":3,"jsonrpc":"2.0"}"#;
        let Some((ClientJsonRpcMessage::Request(request), _)) = tool_call(body) else {
            panic!("not read");
        };
        let ClientRequest::CallToolRequest(call) = request.request else {
            panic!("not a call");
        };
        assert_eq!(call.params.name, "t");
    }

    #[test]
    fn a_repeated_or_escaped_key_is_left_to_rmcp() {
        let twice = br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","method":"tools/list","params":{"name":"t"}}"#;
        assert!(tool_call(twice).is_none());
        let escaped =
            br#"{"jsonrpc":"2.0","id":1,"\u006dethod":"tools/call","params":{"name":"t"}}"#;
        assert!(tool_call(escaped).is_none());
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
