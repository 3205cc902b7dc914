//! The two ways a request may say which OXP it speaks (oxp-notes §3.1, §3.5, §3.6): the
//! OpenAPI envelope `{"$schema", "request"}`, answered `{"$schema", "result"}`; and the bare
//! `CallToolRequest` with an `OXP-Version` header, answered bare.

use std::borrow::Cow;

use axum::http::{HeaderMap, HeaderName};
use serde::Deserialize;
use serde_json::{Map, Value};

use crate::protocol::unique::{DUPLICATE_KEY, Unique, is_duplicate_key};
use crate::protocol::{CallToolRequest, ServerErrorResponse};

/// The `$schema` a response carries when the request did not say.
pub(crate) const DEFAULT_SCHEMA: &str = "urn:oxp:1.0";
/// The `OXP-Version` every response carries.
pub(crate) const OXP_VERSION: &str = "1.0";

/// The header that carries [`OXP_VERSION`] (a `HeaderName` made once, not parsed per lookup).
pub(crate) const OXP_VERSION_HEADER: HeaderName = HeaderName::from_static("oxp-version");
/// The only major version this server speaks.
const MAJOR: u64 = 1;

/// How a call was sent, and so how it is answered.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Dialect {
    /// `{"$schema", "request"}`; the `$schema` to echo.
    Envelope(Cow<'static, str>),
    /// A bare `CallToolRequest`.
    Bare,
}

/// A `400` before the tool is even looked up.
fn bad_request(message: &str, developer_message: impl Into<String>) -> ServerErrorResponse {
    ServerErrorResponse {
        message: message.to_owned(),
        developer_message: Some(developer_message.into()),
        missing_requirements: None,
    }
}

/// The major version a `$schema` value names: `urn:oxp:M.m`, `otc://M.m`, or an http(s) URL of
/// the spec ending in `/http/M.m/openapi.json`.
pub(crate) fn schema_major(schema: &str) -> Option<u64> {
    let version = if let Some(v) = schema.strip_prefix("urn:oxp:") {
        v
    } else if let Some(v) = schema.strip_prefix("otc://") {
        v
    } else if schema.starts_with("https://") || schema.starts_with("http://") {
        schema
            .strip_suffix("/openapi.json")?
            .rsplit_once("/http/")?
            .1
    } else {
        return None;
    };
    let (major, minor) = version.split_once('.')?;
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    if !digits(major) || !digits(minor) {
        return None;
    }
    major.parse().ok()
}

/// The major version of an `OXP-Version` header: `1`, `1.x` or `1.x.y`.
fn header_major(value: &str) -> Option<u64> {
    let parts: Vec<&str> = value.trim().split('.').collect();
    if parts.len() > 3
        || parts
            .iter()
            .any(|p| p.is_empty() || !p.bytes().all(|b| b.is_ascii_digit()))
    {
        return None;
    }
    parts[0].parse().ok()
}

/// Checks the `OXP-Version` header, if sent; returns its major version.
pub(crate) fn check_version_header(
    headers: &HeaderMap,
) -> Result<Option<u64>, ServerErrorResponse> {
    let Some(value) = headers.get(OXP_VERSION_HEADER) else {
        return Ok(None);
    };
    let major = value.to_str().ok().and_then(header_major).ok_or_else(|| {
        bad_request(
            "The OXP-Version header is not a version.",
            "OXP-Version must look like 1, 1.0 or 1.0.0",
        )
    })?;
    if major != MAJOR {
        return Err(unsupported(&format!("OXP-Version {major}")));
    }
    Ok(Some(major))
}

fn unsupported(what: &str) -> ServerErrorResponse {
    bad_request(
        "The requested version of OXP is not supported.",
        format!("{what} was requested; this server speaks OXP 1.x"),
    )
}

/// Checks a `$schema` value and returns it, to be echoed.
pub(crate) fn check_schema(value: &Value) -> Result<String, ServerErrorResponse> {
    let Value::String(schema) = value else {
        return Err(bad_request(
            "The `$schema` value must be a string.",
            "`$schema` is a URI such as urn:oxp:1.0",
        ));
    };
    check_schema_str(schema)?;
    Ok(schema.clone())
}

fn check_schema_str(schema: &str) -> Result<(), ServerErrorResponse> {
    if schema == DEFAULT_SCHEMA {
        return Ok(()); // what nearly every call says, without parsing it
    }
    match schema_major(schema) {
        Some(MAJOR) => Ok(()),
        Some(major) => Err(unsupported(&format!("`$schema` {schema} (OXP {major})"))),
        None => Err(bad_request(
            "The `$schema` value is not an OXP version URI.",
            format!("`{schema}` is not urn:oxp:M.m, otc://M.m, or the spec's openapi.json URL"),
        )),
    }
}

/// The envelope, read straight into its types in one pass: the fast path for well-formed calls.
/// Every object in it is read with a repeated key refused — the envelope's own keys here, the
/// request's fields by serde's derive, `input` by [`Unique`] — except `context`, whose open
/// objects serde's `flatten` reads keeping the last of two keys (see [`read_typed`]).
struct Envelope<'a> {
    schema: Option<Cow<'a, str>>,
    request: CallToolRequest,
}

impl<'de> Deserialize<'de> for Envelope<'de> {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visit;
        impl<'de> serde::de::Visitor<'de> for Visit {
            type Value = Envelope<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("the OXP envelope, {\"request\": {…}}")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<Envelope<'de>, A::Error> {
                let (mut schema, mut request) = (None, None);
                // `$schema` may be `null`, so whether it came is kept apart from its value;
                // only keys OXP does not define (rare) need a list.
                let (mut had_schema, mut others) = (false, Vec::<Cow<'de, str>>::new());
                let repeated = || serde::de::Error::custom(DUPLICATE_KEY);
                while let Some(Key(key)) = map.next_key::<Key<'de>>()? {
                    match &*key {
                        "$schema" if !had_schema => {
                            had_schema = true;
                            schema = map.next_value::<Option<Key<'de>>>()?.map(|k| k.0);
                        }
                        "request" if request.is_none() => request = Some(map.next_value()?),
                        "$schema" | "request" => return Err(repeated()),
                        _ if others.contains(&key) => return Err(repeated()),
                        // Keys OXP does not define are let be, once each.
                        _ => {
                            drop(map.next_value::<Unique>()?);
                            others.push(key);
                        }
                    }
                }
                let request = request.ok_or_else(|| serde::de::Error::missing_field("request"))?;
                Ok(Envelope { schema, request })
            }
        }
        deserializer.deserialize_map(Visit)
    }
}

/// A well-formed call, read in one pass; `None` for the slow way to say what is wrong.
fn read_typed(body: &[u8]) -> Option<(Dialect, CallToolRequest)> {
    let (dialect, request) = if let Ok(envelope) = serde_json::from_slice::<Envelope>(body) {
        if let Some(schema) = &envelope.schema {
            check_schema_str(schema).ok()?;
        }
        (Dialect::Envelope(echo(envelope.schema)), envelope.request)
    } else {
        (
            Dialect::Bare,
            serde_json::from_slice::<CallToolRequest>(body).ok()?,
        )
    };
    // A context's open objects are read by serde's `flatten`, which keeps the last of two
    // keys: a call that carries one is checked whole (its secrets cost a second reading).
    if request.context.is_some() && serde_json::from_slice::<Unique>(body).is_err() {
        return None;
    }
    Some((dialect, request))
}

fn echo(schema: Option<Cow<'_, str>>) -> Cow<'static, str> {
    match schema {
        None => Cow::Borrowed(DEFAULT_SCHEMA),
        Some(schema) if schema == DEFAULT_SCHEMA => Cow::Borrowed(DEFAULT_SCHEMA),
        Some(schema) => Cow::Owned(schema.into_owned()),
    }
}

/// Reads a `POST /tools/call` body: its dialect and its request. Every failure here is a `400`.
///
/// `lenient` is the LangChain compatibility of oxp-notes §3.11–§3.12: a request-level `user_id`
/// moves into `context`, `inputs` is read as `input`, and other unknown fields are dropped
/// (and logged) instead of refused.
pub(crate) fn read_call(
    headers: &HeaderMap,
    body: &[u8],
    lenient: bool,
) -> Result<(Dialect, CallToolRequest), ServerErrorResponse> {
    check_content_type(headers)?;
    check_version_header(headers)?;
    if body.iter().all(u8::is_ascii_whitespace) {
        return Err(bad_request(
            "The request body is empty.",
            "POST /tools/call takes {\"request\": {\"tool_id\": …}} or a bare CallToolRequest",
        ));
    }
    if !lenient {
        if let Some(read) = read_typed(body) {
            return Ok(read);
        }
    }
    // The slow way, which finds the exact error to report. serde_json's recursion limit (128)
    // turns absurd nesting into an error, not a crash.
    let value = match serde_json::from_slice::<Unique>(body) {
        Ok(Unique(value)) => value,
        // Which of two values counts is a parser's choice, and a proxy that checked one of
        // them may not be the parser that runs the other: refused, never picked from.
        Err(e) if is_duplicate_key(&e) => {
            return Err(bad_request(
                "The request body has a key twice in one object.",
                "every key of a JSON object must be unique (RFC 8259 §4 says SHOULD; this server says MUST)",
            ));
        }
        Err(e) => {
            return Err(bad_request(
                "The request body is not valid JSON.",
                describe(&e),
            ));
        }
    };
    let Value::Object(mut body) = value else {
        return Err(bad_request(
            "The request body must be a JSON object.",
            "POST /tools/call takes {\"request\": {\"tool_id\": …}} or a bare CallToolRequest",
        ));
    };
    let (dialect, request) = if body.contains_key("request") {
        let schema = match body.get("$schema") {
            Some(schema) => Cow::Owned(check_schema(schema)?),
            None => Cow::Borrowed(DEFAULT_SCHEMA),
        };
        let request = body.remove("request").unwrap_or_default();
        if !request.is_object() {
            return Err(bad_request(
                "The `request` must be a JSON object.",
                "`request` is a CallToolRequest: {\"tool_id\": …, \"input\": {…}}",
            ));
        }
        (Dialect::Envelope(schema), request)
    } else if body.contains_key("tool_id") {
        (Dialect::Bare, Value::Object(body))
    } else {
        return Err(bad_request(
            "The request names no tool.",
            "the body has neither `request` (the envelope) nor `tool_id` (a bare CallToolRequest)",
        ));
    };
    let request = if lenient { normalize(request) } else { request };
    let request: CallToolRequest = serde_json::from_value(request)
        .map_err(|e| bad_request("The request is not a valid CallToolRequest.", describe(&e)))?;
    Ok((dialect, request))
}

/// What went wrong reading a request, without the value that was wrong: serde's own messages
/// quote it (`invalid type: string "sk-live-…"`), and a malformed `context` holds secrets.
/// Field names are kept; they are the schema's, or the client's own keys.
fn describe(error: &serde_json::Error) -> String {
    let text = error.to_string();
    let about_fields = ["missing field", "unknown field", "duplicate field"]
        .iter()
        .any(|prefix| text.starts_with(prefix));
    if !error.is_data() || about_fields {
        return text;
    }
    let at = match error.line() {
        0 => String::new(),
        line => format!(" at line {line} column {}", error.column()),
    };
    format!("a value has the wrong type or form{at} (see the CallToolRequest schema)")
}

/// An object key, borrowed from the body when it has no escapes.
struct Key<'de>(Cow<'de, str>);

impl<'de> Deserialize<'de> for Key<'de> {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visit;
        impl<'de> serde::de::Visitor<'de> for Visit {
            type Value = Key<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a key")
            }
            fn visit_borrowed_str<E>(self, key: &'de str) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Borrowed(key)))
            }
            fn visit_str<E>(self, key: &str) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Owned(key.to_owned())))
            }
        }
        deserializer.deserialize_str(Visit)
    }
}

/// The lenient reading of a request object (see [`read_call`]).
fn normalize(request: Value) -> Value {
    const KNOWN: [&str; 5] = ["tool_id", "call_id", "trace_id", "input", "context"];
    let Value::Object(mut fields) = request else {
        return request;
    };
    if let Some(inputs) = fields.remove("inputs") {
        fields.entry("input").or_insert(inputs);
    }
    if let Some(user_id) = fields.remove("user_id") {
        let context = fields
            .entry("context")
            .or_insert_with(|| Value::Object(Map::new()));
        if let Value::Object(context) = context {
            context.entry("user_id").or_insert(user_id);
        }
    }
    let unknown: Vec<String> = fields
        .keys()
        .filter(|k| !KNOWN.contains(&k.as_str()))
        .cloned()
        .collect();
    for key in unknown {
        tracing::debug!(field = ?key, "ignoring an unknown request field (LangChain compatibility)");
        fields.remove(&key);
    }
    Value::Object(fields)
}

/// JSON or `application/*+json`, with any parameters. Anything else is a `400`, since every
/// pre-call error MUST be one — and so is a missing header, which oxp-notes §3.14 tolerated:
/// a web page's `fetch(url, {mode: "no-cors", body: blob})` sends none, and a call it could
/// make without asking the browser first is a call any site could make (CSRF).
fn check_content_type(headers: &HeaderMap) -> Result<(), ServerErrorResponse> {
    let Some(value) = headers.get(axum::http::header::CONTENT_TYPE) else {
        return Err(bad_request(
            "The request body must be JSON.",
            "send `Content-Type: application/json`",
        ));
    };
    if value == "application/json" {
        return Ok(()); // what nearly every call says, without taking it apart
    }
    let media = value.to_str().unwrap_or_default();
    let media = media.split(';').next().unwrap_or_default().trim();
    // Compared without case and without allocating (`to_str` guarantees visible ASCII).
    let starts = |prefix: &str| {
        media
            .get(..prefix.len())
            .is_some_and(|head| head.eq_ignore_ascii_case(prefix))
    };
    let ends = |suffix: &str| {
        media
            .get(media.len().saturating_sub(suffix.len())..)
            .is_some_and(|tail| tail.eq_ignore_ascii_case(suffix))
    };
    if media.eq_ignore_ascii_case("application/json") || (starts("application/") && ends("+json")) {
        Ok(())
    } else {
        Err(bad_request(
            "The request body must be JSON.",
            format!(
                "Content-Type `{}` is not application/json",
                media.to_ascii_lowercase()
            ),
        ))
    }
}

/// Adds `$schema` to a top-level body (an error body, a list, an envelope).
pub(crate) fn with_schema(body: Value, schema: Option<&str>) -> Value {
    match (body, schema) {
        (Value::Object(fields), Some(schema)) => {
            let mut with = Map::with_capacity(fields.len() + 1);
            with.insert("$schema".into(), Value::String(schema.to_owned()));
            with.extend(fields);
            Value::Object(with)
        }
        (body, _) => body,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schema_forms() {
        assert_eq!(schema_major("urn:oxp:1.0"), Some(1));
        assert_eq!(schema_major("urn:oxp:1.1"), Some(1));
        assert_eq!(schema_major("otc://1.0"), Some(1));
        assert_eq!(schema_major("urn:oxp:2.0"), Some(2));
        assert_eq!(
            schema_major(
                "https://github.com/OpenToolCalling/Specification/tree/main/spec/http/1.0/openapi.json"
            ),
            Some(1)
        );
        for bad in [
            "",
            "foo",
            "urn:oxp:1",
            "urn:oxp:1.x",
            "otc://",
            "https://x/openapi.json",
        ] {
            assert_eq!(schema_major(bad), None, "{bad}");
        }
    }

    fn json_headers() -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert("content-type", "application/json".parse().unwrap());
        headers
    }

    #[test]
    fn a_call_is_read_in_either_dialect() {
        let bare = br#"{"tool_id": "Calculator.Add", "input": {"a": 1, "b": 2}}"#;
        let (dialect, _) = read_call(&json_headers(), bare, false).unwrap();
        assert_eq!(dialect, Dialect::Bare);
        let envelope = br#"{"$schema": "urn:oxp:1.0", "request": {"tool_id": "Calculator.Add", "input": {"a": 1}}}"#;
        let (dialect, request) = read_call(&json_headers(), envelope, false).unwrap();
        assert!(matches!(dialect, Dialect::Envelope(_)));
        assert_eq!(request.tool_id, "Calculator.Add");
        assert!(read_call(&json_headers(), b"[]", false).is_err());
        // No Content-Type: refused, as a browser's no-cors POST would send it.
        assert!(read_call(&HeaderMap::new(), envelope, false).is_err());
    }

    #[test]
    fn only_major_version_1_is_spoken() {
        let mut headers = HeaderMap::new();
        headers.insert("oxp-version", "2.0".parse().unwrap());
        assert!(check_version_header(&headers).is_err());
        assert_eq!(check_schema(&"urn:oxp:1.1".into()).unwrap(), "urn:oxp:1.1");
        assert!(check_schema(&"urn:oxp:2.0".into()).is_err());
    }

    #[test]
    fn an_answer_carries_the_schema_it_was_asked_in() {
        let body = with_schema(serde_json::json!({"message": "no"}), Some("urn:oxp:1.0"));
        assert_eq!(body["$schema"], "urn:oxp:1.0");
    }

    #[test]
    fn version_header_forms() {
        for good in ["1", "1.0", "1.0.0", "1.2"] {
            assert_eq!(header_major(good), Some(1), "{good}");
        }
        for bad in ["", "v1", "1.0.0.0", "1.x", "one"] {
            assert_eq!(header_major(bad), None, "{bad}");
        }
    }
}
