//! An answer's bytes. The answer nearly every `tools/call` gets (a result of plain text blocks,
//! with or without a structured value) is written out directly, in the order and spelling rmcp's
//! `Serialize` gives it; every other message goes through that `Serialize`. The tests hold the
//! two to the same bytes.

use rmcp::model::{
    CallToolResult, ContentBlock, NumberOrString, ServerJsonRpcMessage, ServerResult,
};

/// The JSON of `message`.
pub(super) fn message(message: &ServerJsonRpcMessage) -> Vec<u8> {
    // Room for a typical answer at once, rather than growing through five sizes to it.
    let mut body = Vec::with_capacity(256);
    if !plain_call_result(&mut body, message) {
        // A message of MCP's own types always serializes.
        serde_json::to_writer(&mut body, message).expect("an MCP message serializes");
    }
    body
}

/// Writes `message` if it is the answer to a call whose result is text blocks alone (no
/// `_meta`, no annotations); writes nothing and says `false` otherwise.
fn plain_call_result(out: &mut Vec<u8>, message: &ServerJsonRpcMessage) -> bool {
    let ServerJsonRpcMessage::Response(response) = message else {
        return false;
    };
    let ServerResult::CallToolResult(result) = &response.result else {
        return false;
    };
    if !plain(result) {
        return false;
    }
    out.extend_from_slice(br#"{"jsonrpc":"2.0","id":"#);
    match &response.id {
        NumberOrString::Number(number) => {
            serde_json::to_writer(&mut *out, number).expect("a number serializes")
        }
        NumberOrString::String(string) => string_into(out, string),
    }
    out.extend_from_slice(br#","result":{"#);
    if let Some(result_type) = &result.result_type {
        out.extend_from_slice(br#""resultType":"#);
        string_into(out, result_type.as_str());
        out.push(b',');
    }
    out.extend_from_slice(br#""content":["#);
    for (i, block) in result.content.iter().enumerate() {
        let ContentBlock::Text(text) = block else {
            unreachable!("checked by `plain`")
        };
        if i > 0 {
            out.push(b',');
        }
        out.extend_from_slice(br#"{"type":"text","text":"#);
        string_into(out, &text.text);
        out.push(b'}');
    }
    out.push(b']');
    if let Some(structured) = &result.structured_content {
        out.extend_from_slice(br#","structuredContent":"#);
        serde_json::to_writer(&mut *out, structured).expect("a JSON value serializes");
    }
    if let Some(is_error) = result.is_error {
        out.extend_from_slice(if is_error {
            br#","isError":true"#
        } else {
            br#","isError":false"#
        });
    }
    out.extend_from_slice(b"}}");
    true
}

/// A result with nothing but text blocks, each without `_meta` or annotations.
fn plain(result: &CallToolResult) -> bool {
    result.meta.is_none()
        && result.content.iter().all(|block| {
            matches!(block, ContentBlock::Text(text) if text.meta.is_none() && text.annotations.is_none())
        })
}

/// A JSON string, escaped as serde_json escapes it.
fn string_into(out: &mut Vec<u8>, string: &str) {
    serde_json::to_writer(&mut *out, string).expect("a string serializes");
}

#[cfg(test)]
mod tests {
    use rmcp::model::{
        Annotations, CallToolResult, ContentBlock, ErrorData, NumberOrString, ResultType,
        ServerJsonRpcMessage, ServerResult, TextContent,
    };
    use serde_json::json;

    use super::message;

    fn rmcp_bytes(message: &ServerJsonRpcMessage) -> Vec<u8> {
        serde_json::to_vec(message).unwrap()
    }

    fn answer(id: NumberOrString, result: CallToolResult) -> ServerJsonRpcMessage {
        ServerJsonRpcMessage::response(ServerResult::CallToolResult(result), id)
    }

    /// Every answer is the bytes rmcp's `Serialize` writes: the ones written directly and the
    /// ones that fall back alike.
    #[test]
    fn the_bytes_are_rmcps() {
        let texts = [
            "15",
            "",
            "quote \" backslash \\ newline \n tab \t nul \u{0} del \u{7f}",
            "unicode é 漢字 🦀 \u{2028}",
        ];
        let structured = [
            None,
            Some(json!(15)),
            Some(json!(-3.5)),
            Some(json!(null)),
            Some(json!("s\"")),
            Some(json!({"b": [1, {"c": null}], "a": "x"})),
        ];
        let ids = [
            NumberOrString::Number(0),
            NumberOrString::Number(1),
            NumberOrString::Number(-42),
            NumberOrString::Number(i64::MAX),
            NumberOrString::Number(i64::MIN),
            NumberOrString::String("a\"b".into()),
        ];
        let mut cases = Vec::new();
        for id in &ids {
            for text in texts {
                for value in &structured {
                    for is_error in [None, Some(false), Some(true)] {
                        for result_type in [None, Some(ResultType::COMPLETE)] {
                            let mut result =
                                CallToolResult::success(vec![ContentBlock::text(text)]);
                            result.structured_content = value.clone();
                            result.is_error = is_error;
                            result.result_type = result_type;
                            cases.push(answer(id.clone(), result));
                        }
                    }
                }
            }
        }
        // No blocks, several blocks, and the shapes that fall back.
        let mut several =
            CallToolResult::success(vec![ContentBlock::text("a"), ContentBlock::text("b")]);
        several.structured_content = Some(json!({"k": 1}));
        cases.push(answer(NumberOrString::Number(7), several));
        cases.push(answer(
            NumberOrString::Number(7),
            CallToolResult::success(Vec::new()),
        ));
        cases.push(answer(
            NumberOrString::Number(7),
            CallToolResult::structured(json!({"k": 1})),
        ));
        let mut annotated = TextContent::new("a");
        annotated.annotations = Some(Annotations::default());
        cases.push(answer(
            NumberOrString::Number(7),
            CallToolResult::success(vec![ContentBlock::Text(annotated)]),
        ));
        let mut with_meta = CallToolResult::success(vec![ContentBlock::text("a")]);
        with_meta.meta = Some(Default::default());
        cases.push(answer(NumberOrString::Number(7), with_meta));
        cases.push(answer(
            NumberOrString::Number(7),
            CallToolResult::success(vec![ContentBlock::image("aGk=", "image/png")]),
        ));
        cases.push(ServerJsonRpcMessage::error(
            ErrorData::invalid_params("no", None),
            Some(NumberOrString::Number(3)),
        ));
        cases.push(ServerJsonRpcMessage::response(
            ServerResult::empty(()),
            NumberOrString::Number(3),
        ));
        for case in &cases {
            assert_eq!(
                String::from_utf8(message(case)).unwrap(),
                String::from_utf8(rmcp_bytes(case)).unwrap(),
                "{case:?}"
            );
        }
    }
}
