//! The standard headers of a request (SEP-2243: `Mcp-Method`, `Mcp-Name`, and for a
//! `tools/call` an `Mcp-Param-<Name>` for each parameter marked `#[mcp_header("Name")]`),
//! checked against its body by the HTTP transport before its method runs.
//!
//! A gateway routes, rate-limits and denies on these headers without reading the body, so a
//! header that disagrees with the body would let a call past a rule written for another. A
//! header sent is therefore checked whatever revision the request names, or with none; only a
//! 2026-07-28 request, whose revision defines them, must send them all.

use std::borrow::Cow;
use std::collections::HashMap;

use axum::http::{HeaderMap, HeaderName};
use rmcp::ErrorData as McpError;
use rmcp::model::JsonObject;
use serde_json::Value;

use crate::registry::Registry;

/// The headers read on every request, named once (a name given as text is parsed at each
/// lookup).
pub(super) const PROTOCOL_VERSION: HeaderName = HeaderName::from_static("mcp-protocol-version");
const METHOD: HeaderName = HeaderName::from_static("mcp-method");
const NAME: HeaderName = HeaderName::from_static("mcp-name");

/// The first revision whose requests carry the standard headers.
const STANDARD_HEADERS: &str = "2026-07-28";

/// A header value that could not travel as a bare header is sent as `=?base64?<b64>?=`.
const BASE64_PREFIX: &str = "=?base64?";
const BASE64_SUFFIX: &str = "?=";

/// A tool parameter that travels in a header as well (`x-mcp-header` in the tool's input
/// schema): read from the schema once, when the server is made, not at each call.
#[derive(Debug, Clone)]
pub(super) struct ParamHeader {
    /// The parameter's name in the arguments.
    parameter: String,
    /// `Mcp-Param-<Name>`, as errors spell it.
    shown: String,
    /// The header's name; none when `<Name>` is no name a header can have (so no header has it).
    name: Option<HeaderName>,
}

/// The parameters of each tool (by id) that travel in headers, for the tools that have any.
pub(super) type ParamHeaders = HashMap<String, Box<[ParamHeader]>>;

/// The parameters of every tool of `registry` that travel in headers.
pub(super) fn param_headers(registry: &Registry) -> ParamHeaders {
    (registry.tools().iter())
        .filter_map(|tool| {
            let marked = of_schema(&tool.definition().input_schema);
            (!marked.is_empty()).then(|| (tool.id().to_owned(), marked.into_boxed_slice()))
        })
        .collect()
}

/// The parameters an input schema marks with `x-mcp-header`.
fn of_schema(input_schema: &Value) -> Vec<ParamHeader> {
    let Some(properties) = input_schema.get("properties").and_then(Value::as_object) else {
        return Vec::new();
    };
    (properties.iter())
        .filter_map(|(parameter, schema)| {
            let header = schema.get("x-mcp-header").and_then(Value::as_str)?;
            let shown = format!("Mcp-Param-{header}");
            Some(ParamHeader {
                parameter: parameter.clone(),
                name: HeaderName::try_from(shown.as_str()).ok(),
                shown,
            })
        })
        .collect()
}

/// Checks a request's standard headers against its body: `Mcp-Method` names its method, and
/// `Mcp-Name` the name, URI or task id of a method that has one. Required from 2026-07-28,
/// where the revision defines them (`initialize` excepted, though one it sends must agree). A
/// `tools/call`'s headers are checked whatever revision it names, `Mcp-Param-*` among them
/// (`tool`: the called tool's arguments and the parameters it marked, when it names a tool). A
/// mismatch is MCP's header-mismatch error (-32020, HTTP 400), and nothing runs.
pub(super) fn check(
    headers: &HeaderMap,
    method: &str,
    name: Option<&str>,
    tool: Option<(Option<&JsonObject>, &[ParamHeader])>,
) -> Result<(), McpError> {
    let required = headers
        .get(PROTOCOL_VERSION)
        .and_then(|version| version.to_str().ok())
        .is_some_and(|version| version >= STANDARD_HEADERS);
    let call = method == "tools/call";
    if !required && !call {
        return Ok(());
    }
    let mismatch = |reason: String| Err(McpError::header_mismatch(reason, None));
    match single(headers, METHOD, "mcp-method")?.as_deref() {
        Some(header) if header != method => {
            return mismatch(format!(
                "Mcp-Method header `{header}` does not match body method `{method}`"
            ));
        }
        None if required && method != "initialize" => {
            return mismatch("missing required Mcp-Method header".into());
        }
        _ => {}
    }
    if let Some(name) = name {
        match single(headers, NAME, "mcp-name")?.as_deref() {
            Some(header) if header != name => {
                return mismatch(format!(
                    "Mcp-Name header `{header}` does not match body value `{name}`"
                ));
            }
            None if required => {
                return mismatch(format!("missing required Mcp-Name header for `{method}`"));
            }
            _ => {}
        }
    }
    let Some((arguments, marked)) = tool else {
        return Ok(());
    };
    for ParamHeader {
        parameter,
        shown,
        name,
    } in marked
    {
        let body = arguments
            .and_then(|arguments| arguments.get(parameter))
            .and_then(primitive);
        let Some(name) = name else {
            if body.is_some() && required {
                return mismatch(format!("missing {shown} header for `{parameter}`"));
            }
            continue;
        };
        match (single(headers, name.clone(), shown)?, body) {
            (Some(header), Some(body)) if *header != body => {
                return mismatch(format!(
                    "{shown} header `{header}` does not match body value `{body}`"
                ));
            }
            (Some(_), None) => {
                return mismatch(format!(
                    "unexpected {shown} header for absent or null `{parameter}`"
                ));
            }
            (None, Some(_)) if required => {
                return mismatch(format!("missing {shown} header for `{parameter}`"));
            }
            _ => {}
        }
    }
    Ok(())
}

/// The one value of a header, decoded; two values are refused, since an intermediary may pick
/// the other one.
/// (`shown`: the name as errors spell it.)
fn single<'h>(
    headers: &'h HeaderMap,
    name: HeaderName,
    shown: &str,
) -> Result<Option<Cow<'h, str>>, McpError> {
    let mismatch = |reason: String| McpError::header_mismatch(reason, None);
    let mut values = headers.get_all(&name).iter();
    let Some(value) = values.next() else {
        return Ok(None);
    };
    if values.next().is_some() {
        return Err(mismatch(format!("duplicate {shown} header")));
    }
    let value = value
        .to_str()
        .map_err(|_| mismatch(format!("{shown} header contains invalid characters")))?;
    let Some(encoded) = value
        .strip_prefix(BASE64_PREFIX)
        .and_then(|inner| inner.strip_suffix(BASE64_SUFFIX))
    else {
        return Ok(Some(Cow::Borrowed(value)));
    };
    use base64::Engine;
    base64::engine::general_purpose::STANDARD
        .decode(encoded)
        .ok()
        .and_then(|bytes| String::from_utf8(bytes).ok())
        .map(|text| Some(Cow::Owned(text)))
        .ok_or_else(|| mismatch(format!("{shown} header is not valid Base64")))
}

/// A parameter's value as its header carries it; none for null or a value no header carries.
fn primitive(value: &Value) -> Option<String> {
    match value {
        Value::String(text) => Some(text.clone()),
        Value::Bool(flag) => Some(flag.to_string()),
        Value::Number(number) => Some(number.to_string()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(*name, value.parse().unwrap());
        }
        map
    }

    fn arguments(value: Value) -> JsonObject {
        value.as_object().unwrap().clone()
    }

    #[test]
    fn a_base64_wrapped_value_is_compared_decoded() {
        let schema = json!({"properties": {"city": {"type": "string", "x-mcp-header": "City"}}});
        // "Zürich" cannot travel bare.
        let wrapped = headers(&[("mcp-param-city", "=?base64?WsO8cmljaA==?=")]);
        let zurich = arguments(json!({"city": "Zürich"}));
        assert!(
            check(
                &wrapped,
                "tools/call",
                Some("T"),
                Some((Some(&zurich), &of_schema(&schema)[..]))
            )
            .is_ok()
        );
        let bern = arguments(json!({"city": "Bern"}));
        assert!(
            check(
                &wrapped,
                "tools/call",
                Some("T"),
                Some((Some(&bern), &of_schema(&schema)[..]))
            )
            .is_err()
        );
        let broken = headers(&[("mcp-param-city", "=?base64?%%%?=")]);
        assert!(
            check(
                &broken,
                "tools/call",
                Some("T"),
                Some((Some(&zurich), &of_schema(&schema)[..]))
            )
            .is_err()
        );
    }

    #[test]
    fn a_repeated_header_is_refused_even_when_one_value_agrees() {
        let twice = headers(&[("mcp-name", "T"), ("mcp-name", "U")]);
        assert!(check(&twice, "tools/call", Some("T"), None).is_err());
    }
}
