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
    CallToolRequest, CallToolRequestParams, ClientCapabilities, ClientJsonRpcMessage,
    ClientNotification, ClientRequest, JsonObject, JsonRpcNotification, ProtocolVersion, RequestId,
    RequestMetaObject,
};
use serde::Deserialize;
use serde::de::{DeserializeSeed, Error as _, IgnoredAny, MapAccess, Visitor};
use serde_json::Value;
use serde_json::value::RawValue;

/// A message read from a POST's body.
// The large variant is the message nearly every POST is: boxing it would add an allocation to
// the common path to save stack on the rare ones.
#[allow(clippy::large_enum_variant)]
pub(super) enum Message {
    /// A request, boxed as the dispatch takes it. `meta`: its `_meta`, if it was read out
    /// already (the transport takes every request's out before it dispatches); rmcp's reading
    /// leaves it in the request.
    Request {
        id: RequestId,
        request: Box<ClientRequest>,
        meta: Option<Meta>,
    },
    /// A notification: accepted, and nothing changes.
    Notification(Box<JsonRpcNotification<ClientNotification>>),
    /// A client's answer to a request of the server's own: a response or an error.
    Answer(Box<ClientJsonRpcMessage>),
}

/// The message `bytes` hold: JSON-RPC's parse error for what is not JSON, invalid request for
/// JSON that is no single MCP message (a batch among them: batches left MCP with 2025-06-18,
/// and the revisions that had them were served without them by rmcp's transport too).
pub(super) fn message(bytes: &Bytes) -> Result<Message, McpError> {
    if (bytes.iter()).find(|byte| !byte.is_ascii_whitespace()) == Some(&b'[') {
        return Err(McpError::invalid_request(
            "Invalid Request: JSON-RPC batches are not accepted; send each message in its own \
             request",
            None,
        ));
    }
    if let Some((id, request, meta)) = tool_call(bytes) {
        return Ok(Message::Request {
            id,
            request,
            meta: Some(meta),
        });
    }
    let message = serde_json::from_slice(bytes).map_err(|error| {
        if error.is_syntax() || error.is_eof() {
            McpError::parse_error(format!("Parse error: {error}"), None)
        } else {
            McpError::invalid_request(format!("Invalid Request: {error}"), None)
        }
    })?;
    Ok(match message {
        ClientJsonRpcMessage::Request(request) => Message::Request {
            id: request.id,
            request: Box::new(request.request),
            meta: None,
        },
        ClientJsonRpcMessage::Notification(notification) => {
            Message::Notification(Box::new(notification))
        }
        answer => Message::Answer(Box::new(answer)),
    })
}

/// A JSON-RPC message with its parts unread, but for a `tools/call`'s params when its method
/// comes first (as clients write it): those are read in the same pass, into the place
/// [`EnvelopeSeed`] gives them (a call is large, and each level of a parse would move it).
struct Envelope<'a> {
    jsonrpc: Option<&'a str>,
    id: Option<RequestId>,
    method: Option<&'a str>,
    params: Params<'a>,
    /// A `result` or an `error`: a response, not a request.
    answer: bool,
}

enum Params<'a> {
    Absent,
    /// Read into the call's place.
    Read,
    Unread(&'a RawValue),
}

/// A request's `_meta`. The two keys every 2026-07-28 request carries are read into their
/// types as the body is parsed when both are well-formed, and then are not in the map (the
/// keys alone would be two allocations, the revision a third); otherwise they stay in the
/// map, where they are read as from rmcp's.
#[derive(Debug, Default)]
pub(super) struct Meta {
    pub(super) map: RequestMetaObject,
    pub(super) standard: Option<Standard>,
}

/// `io.modelcontextprotocol/protocolVersion` and `io.modelcontextprotocol/clientCapabilities`,
/// read as rmcp's `RequestMetaObject::protocol_version` and `client_capabilities` read them.
#[derive(Debug)]
pub(super) struct Standard {
    pub(super) revision: ProtocolVersion,
    pub(super) capabilities: ClientCapabilities,
}

/// The keys of `_meta`'s two standard fields.
pub(super) const META_REVISION: &str = "io.modelcontextprotocol/protocolVersion";
const META_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";

impl Meta {
    /// A `_meta` rmcp read (the keys are in its map).
    pub(super) fn of(map: RequestMetaObject) -> Self {
        Meta {
            map,
            standard: None,
        }
    }
}

/// A `tools/call`'s params, read as rmcp's derived `Deserialize` reads
/// `CallToolRequestParams` (unknown keys ignored, `null` as absent), but for `_meta`; a key
/// that escapes or comes twice is an error here, and the call is left to rmcp's reading.
struct Call {
    params: CallToolRequestParams,
    meta: Meta,
}

impl<'de> Deserialize<'de> for Call {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_map(CallVisitor)
    }
}

struct CallVisitor;

impl<'de> Visitor<'de> for CallVisitor {
    type Value = Call;

    fn expecting(&self, formatter: &mut std::fmt::Formatter) -> std::fmt::Result {
        formatter.write_str("a tools/call's params")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Call, A::Error> {
        let mut name: Option<String> = None;
        let mut arguments: Option<Option<JsonObject>> = None;
        let mut responses: Option<Option<rmcp::model::InputResponses>> = None;
        let mut state: Option<Option<String>> = None;
        let mut meta: Option<Option<Meta>> = None;
        while let Some(key) = map.next_key::<&'de str>()? {
            match key {
                "name" if name.is_none() => name = Some(map.next_value()?),
                "arguments" if arguments.is_none() => arguments = Some(map.next_value()?),
                "inputResponses" if responses.is_none() => responses = Some(map.next_value()?),
                "requestState" if state.is_none() => state = Some(map.next_value()?),
                "_meta" if meta.is_none() => meta = Some(map.next_value_seed(MetaSeed)?),
                "name" | "arguments" | "inputResponses" | "requestState" | "_meta" => {
                    return Err(A::Error::custom(format!("duplicate field `{key}`")));
                }
                // Read as strictly as rmcp's reading reads it (a `Value`): skipping would let
                // through what is no JSON (a lone surrogate, a number out of range, invalid
                // UTF-8, nesting past serde_json's limit), which the other reading refuses.
                _ => {
                    map.next_value::<Value>()?;
                }
            }
        }
        let name = name.ok_or_else(|| A::Error::missing_field("name"))?;
        let mut params = CallToolRequestParams::new(name);
        params.arguments = arguments.flatten();
        params.input_responses = responses.flatten();
        params.request_state = state.flatten();
        Ok(Call {
            params,
            meta: meta.flatten().unwrap_or_default(),
        })
    }
}

/// `_meta`: `null`, or an object.
struct MetaSeed;

impl<'de> DeserializeSeed<'de> for MetaSeed {
    type Value = Option<Meta>;

    fn deserialize<D: serde::Deserializer<'de>>(
        self,
        deserializer: D,
    ) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_option(self)
    }
}

impl<'de> Visitor<'de> for MetaSeed {
    type Value = Option<Meta>;

    fn expecting(&self, formatter: &mut std::fmt::Formatter) -> std::fmt::Result {
        formatter.write_str("a _meta object")
    }

    fn visit_none<E>(self) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_unit<E>(self) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_some<D: serde::Deserializer<'de>>(
        self,
        deserializer: D,
    ) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_map(self)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut rest = serde_json::Map::new();
        let (mut revision, mut capabilities) = (None::<Value>, None::<Value>);
        while let Some(key) = map.next_key::<&'de str>()? {
            match key {
                META_REVISION if revision.is_none() => revision = Some(map.next_value()?),
                META_CAPABILITIES if capabilities.is_none() => {
                    capabilities = Some(map.next_value()?)
                }
                META_REVISION | META_CAPABILITIES => {
                    return Err(A::Error::custom(format!("duplicate field `{key}`")));
                }
                _ => {
                    rest.insert(key.to_owned(), map.next_value()?);
                }
            }
        }
        // A revision this server knows and capabilities that read: anything else is read from
        // the map, as before this reading.
        let known = revision
            .as_ref()
            .and_then(Value::as_str)
            .and_then(super::known);
        let standard = match (known, &capabilities) {
            (Some(revision), Some(capabilities)) => ClientCapabilities::deserialize(capabilities)
                .ok()
                .map(|capabilities| Standard {
                    revision: revision.clone(),
                    capabilities,
                }),
            _ => None,
        };
        if standard.is_none() {
            // Left where rmcp's reading leaves them, to be read as from its map.
            rest.extend(revision.map(|value| (META_REVISION.to_owned(), value)));
            rest.extend(capabilities.map(|value| (META_CAPABILITIES.to_owned(), value)));
        }
        Ok(Some(Meta {
            map: RequestMetaObject(rmcp::model::MetaObject(rest)),
            standard,
        }))
    }
}

/// Reads an [`Envelope`], a `tools/call`'s params into `call`.
struct EnvelopeSeed<'c> {
    call: &'c mut Option<Call>,
}

impl<'de> DeserializeSeed<'de> for EnvelopeSeed<'_> {
    type Value = Envelope<'de>;

    fn deserialize<D: serde::Deserializer<'de>>(
        self,
        deserializer: D,
    ) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for EnvelopeSeed<'_> {
    type Value = Envelope<'de>;

    fn expecting(&self, formatter: &mut std::fmt::Formatter) -> std::fmt::Result {
        formatter.write_str("a JSON-RPC message")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Envelope<'de>, A::Error> {
        let mut envelope = Envelope {
            jsonrpc: None,
            id: None,
            method: None,
            params: Params::Absent,
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
                "params" if matches!(envelope.params, Params::Absent) => {
                    envelope.params = if envelope.method == Some("tools/call") {
                        *self.call = Some(map.next_value()?);
                        Params::Read
                    } else {
                        Params::Unread(map.next_value()?)
                    };
                }
                "result" | "error" => {
                    map.next_value::<IgnoredAny>()?;
                    envelope.answer = true;
                }
                "jsonrpc" | "id" | "method" | "params" => {
                    return Err(A::Error::custom(format!("duplicate field `{key}`")));
                }
                // As in a call's params: read, not skipped.
                _ => {
                    map.next_value::<Value>()?;
                }
            }
        }
        Ok(envelope)
    }
}

/// A `tools/call` request read straight into its types: its id, the request, and its `_meta`
/// (empty when it has none); `None` for anything else.
fn tool_call(bytes: &[u8]) -> Option<(RequestId, Box<ClientRequest>, Meta)> {
    let mut call = None;
    let mut deserializer = serde_json::Deserializer::from_slice(bytes);
    let envelope = (EnvelopeSeed { call: &mut call })
        .deserialize(&mut deserializer)
        .ok()?;
    // As `serde_json::from_slice`: nothing but whitespace after the message.
    deserializer.end().ok()?;
    let plain = envelope.jsonrpc == Some("2.0") && !envelope.answer;
    if !plain || envelope.method != Some("tools/call") {
        return None;
    }
    let id = envelope.id?;
    let Call { params, meta } = match envelope.params {
        Params::Read => call?,
        // Its params came before its method.
        Params::Unread(raw) => serde_json::from_str::<Call>(raw.get()).ok()?,
        Params::Absent => return None,
    };
    let request = ClientRequest::CallToolRequest(CallToolRequest::new(params));
    Some((id, Box::new(request), meta))
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
        let standard = json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {"elicitation": {"form": {}}}});
        let metas = [
            json!(null),
            json!({}),
            standard.clone(),
            json!({"progressToken": "p", "traceparent": "00-ab-cd-01",
                "io.modelcontextprotocol/protocolVersion": "2025-11-25",
                "io.modelcontextprotocol/clientCapabilities": {}}),
            // Read from the map as before: an unknown revision, capabilities that do not
            // read, one key without the other, a revision that is no string.
            json!({"io.modelcontextprotocol/protocolVersion": "2099-01-01",
                "io.modelcontextprotocol/clientCapabilities": {}}),
            json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": "all"}),
            json!({"progressToken": 4, "io.modelcontextprotocol/protocolVersion": "2026-07-28"}),
            json!({"io.modelcontextprotocol/protocolVersion": 20260728,
                "io.modelcontextprotocol/clientCapabilities": {}}),
        ];
        let mut calls = vec![
            json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                "params": {"name": "calc_add", "arguments": {"a": 1, "b": 2}}}),
            json!({"jsonrpc": "2.0", "id": "x-7", "method": "tools/call",
                "params": {"name": "t", "_meta": {"progressToken": "p",
                    "io.modelcontextprotocol/protocolVersion": "2026-07-28"},
                    "requestState": "s", "inputResponses": {"k": {"action": "accept"}}}}),
            json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "t"}}),
            json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "t",
                "arguments": null, "requestState": null, "inputResponses": null, "extra": [1]}}),
        ];
        for meta in metas {
            calls.push(json!({"jsonrpc": "2.0", "id": 9, "method": "tools/call",
                "params": {"name": "calc_add", "arguments": {"a": 1}, "_meta": meta}}));
        }
        for body in calls {
            let bytes = serde_json::to_vec(&body).unwrap();
            let (id, request, meta) = tool_call(&bytes).expect("read fast");
            let mut ours = rmcp::model::JsonRpcRequest::new(id, *request);
            let ClientJsonRpcMessage::Request(theirs) = rmcp(&body) else {
                panic!("{body}");
            };
            assert_eq!(ours.id, theirs.id);
            // What the transport reads of `_meta` is what it would read of rmcp's.
            let their_meta = theirs.request.get_meta();
            let Meta { mut map, standard } = meta;
            match standard {
                Some(standard) => {
                    assert_eq!(
                        Some(standard.revision),
                        their_meta.protocol_version(),
                        "{body}"
                    );
                    assert_eq!(
                        Some(standard.capabilities),
                        their_meta.client_capabilities(),
                        "{body}"
                    );
                    for key in [META_REVISION, META_CAPABILITIES] {
                        assert!(!map.contains_key(key), "{body}");
                        map.insert(key.into(), their_meta[key].clone());
                    }
                }
                None => assert!(
                    their_meta.protocol_version().is_none()
                        || their_meta.client_capabilities().is_none()
                        || super::super::known(their_meta.protocol_version().unwrap().as_str())
                            .is_none(),
                    "{body}"
                ),
            }
            assert_eq!(map.0, their_meta.0, "{body}");
            // Put back where rmcp keeps it (an empty `_meta` too), the two requests are the
            // same.
            let sent = body["params"]
                .get("_meta")
                .is_some_and(|meta| !meta.is_null());
            if sent {
                *ours.request.get_meta_mut() = map;
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

    /// What JSON can say that a `json!` body cannot: a revision spelled with an escape, a
    /// capability said twice (rmcp's map keeps the last).
    #[test]
    fn an_escaped_revision_or_a_capability_said_twice_is_read_as_rmcp_reads_it() {
        let bodies = [
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","_meta":{"io.modelcontextprotocol/protocolVersion":"2026\u002d07-28","io.modelcontextprotocol/clientCapabilities":{}}}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"elicitation":{"url":{}},"elicitation":{"form":{}}}}}}"#,
        ];
        for body in bodies {
            let (_, _, meta) = tool_call(body.as_bytes()).expect("read fast");
            let ClientJsonRpcMessage::Request(theirs) = serde_json::from_str(body).unwrap() else {
                panic!("{body}");
            };
            let their_meta = theirs.request.get_meta();
            match meta.standard {
                Some(standard) => {
                    assert_eq!(Some(standard.revision), their_meta.protocol_version());
                    assert_eq!(
                        Some(standard.capabilities),
                        their_meta.client_capabilities(),
                        "{body}"
                    );
                }
                None => assert_eq!(meta.map.0, their_meta.0, "{body}"),
            }
        }
    }

    /// What is no JSON is refused wherever it sits, as rmcp's reading refuses it: a member the
    /// call does not use is read, not skipped.
    #[test]
    fn what_is_no_json_is_refused_wherever_it_sits() {
        let body = |envelope: &[u8], params: &[u8], capabilities: &[u8]| {
            [
                &br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","#[..],
                envelope,
                br#""params":{"#,
                params,
                br#""name":"t","arguments":{"a":1},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":"#,
                capabilities,
                b"}}}",
            ]
            .concat()
        };
        assert!(message(&Bytes::from(body(b"", b"", b"{}"))).is_ok());
        let deep = format!(r#""x":{}1{},"#, "[".repeat(200), "]".repeat(200));
        let nothings: [&[u8]; 5] = [
            br#""x":1E400,"#,
            br#""x":"\udc00","#,
            b"\"x\":\"\xff\",",
            deep.as_bytes(),
            br#""x":{"y":1E400},"#,
        ];
        for nothing in nothings {
            let shown = String::from_utf8_lossy(nothing);
            for bytes in [body(nothing, b"", b"{}"), body(b"", nothing, b"{}")] {
                assert!(
                    serde_json::from_slice::<ClientJsonRpcMessage>(&bytes).is_err(),
                    "{shown}"
                );
                assert!(message(&Bytes::from(bytes)).is_err(), "{shown}");
            }
        }
        let capabilities = body(b"", b"", br#"{"x":1E400}"#);
        assert!(message(&Bytes::from(capabilities)).is_err());
    }

    #[test]
    fn standard_keys_said_twice_are_left_to_rmcp() {
        let twice = br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/protocolVersion":"2025-06-18"}}}"#;
        assert!(tool_call(twice).is_none());
    }

    #[test]
    fn params_before_the_method_are_read_as_well() {
        let body = br#"{"params":{"name":"t","arguments":{"a":1}},"method":"tools/call","id":3,"jsonrpc":"2.0"}"#;
        let Some((_, request, _)) = tool_call(body) else {
            panic!("not read");
        };
        let ClientRequest::CallToolRequest(call) = *request else {
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
