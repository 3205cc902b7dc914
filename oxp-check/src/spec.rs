//! The shapes the spec gives every answer: the component schemas of OXP 1.0's OpenAPI document,
//! vendored (with its license) so the checker needs nothing but the server it checks.

use std::sync::OnceLock;

use jsonschema::Validator;
use serde_json::Value;

/// `spec/http/1.0/openapi.json` of OpenExecProtocol/Specification at 4ebed7f: OXP 1.0.
pub const OPENAPI: &str = include_str!("../spec/oxp-1.0-openapi.json");

/// The shapes checked, by JSON pointer into [`OPENAPI`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Shape {
    /// `GET /tools` 200: `{"$schema"?, "items": [ToolDefinition]}`.
    List,
    /// `POST /tools/call` 200 in the envelope: `{"$schema"?, "result": CallToolResponse}`.
    CallEnvelope,
    /// A bare `CallToolResponse`.
    CallResponse,
    /// `ServerErrorResponse`, the body of every 400.
    ServerError,
    /// `ValidationErrorResponse`, the body of a 422.
    ValidationError,
    /// `ToolDefinition`, one listed tool.
    ToolDefinition,
}

impl Shape {
    const ALL: [Shape; 6] = [
        Shape::List,
        Shape::CallEnvelope,
        Shape::CallResponse,
        Shape::ServerError,
        Shape::ValidationError,
        Shape::ToolDefinition,
    ];

    fn pointer(self) -> &'static str {
        match self {
            Shape::List => "#/paths/~1tools/get/responses/200/content/application~1json/schema",
            Shape::CallEnvelope => {
                "#/paths/~1tools~1call/post/responses/200/content/application~1json/schema"
            }
            Shape::CallResponse => "#/components/schemas/CallToolResponse",
            Shape::ServerError => "#/components/schemas/ServerErrorResponse",
            Shape::ValidationError => "#/components/schemas/ValidationErrorResponse",
            Shape::ToolDefinition => "#/components/schemas/ToolDefinition",
        }
    }

    /// The schema's name, as a failure says it.
    pub(crate) fn name(self) -> &'static str {
        self.pointer().rsplit('/').next().unwrap_or_default()
    }

    /// Every way `body` departs from the shape, one line each (empty: it conforms).
    pub(crate) fn errors(self, body: &Value) -> Vec<String> {
        // Every body the spec gives is an object; `GET /tools`'s schema forgets to say so.
        if !body.is_object() {
            return vec![format!(
                "{} is not a JSON object",
                crate::report::excerpt(body)
            )];
        }
        let validator = &validators()[Shape::ALL.iter().position(|s| *s == self).unwrap_or(0)];
        validator
            .iter_errors(body)
            .map(|e| {
                let at = e.instance_path().to_string();
                if at.is_empty() {
                    e.to_string()
                } else {
                    format!("{e} at {at}")
                }
            })
            .collect()
    }

    /// `Ok` when `body` conforms; else the first few departures, for a failure's detail.
    pub(crate) fn check(self, body: &Value) -> Result<(), String> {
        let errors = self.errors(body);
        if errors.is_empty() {
            return Ok(());
        }
        let shown: Vec<&str> = errors.iter().take(3).map(String::as_str).collect();
        let more = errors.len().saturating_sub(shown.len());
        let more = if more > 0 {
            format!(" (and {more} more)")
        } else {
            String::new()
        };
        Err(format!(
            "the body is not a {}: {}{more}; body: {}",
            if self == Shape::List || self == Shape::CallEnvelope {
                "spec-shaped answer"
            } else {
                self.name()
            },
            shown.join("; "),
            crate::report::excerpt(body)
        ))
    }
}

fn validators() -> &'static [Validator] {
    static VALIDATORS: OnceLock<Vec<Validator>> = OnceLock::new();
    VALIDATORS.get_or_init(|| {
        let mut spec: Value = serde_json::from_str(OPENAPI).expect("the vendored spec is JSON");
        // The spec's known bug (oxp-notes §2): `CallToolResponse` is closed at the top while
        // `value` and `error` are declared only inside its `oneOf`, so a strict validator
        // rejects every response that has either. Declared at the top as well, the allowed keys
        // are {call_id, duration, success, value, error}, as intended; the `oneOf` still checks
        // their types and that exactly one branch applies.
        let properties = &mut spec["components"]["schemas"]["CallToolResponse"]["properties"];
        properties["value"] = Value::Bool(true);
        properties["error"] = Value::Bool(true);
        Shape::ALL
            .iter()
            .map(|shape| {
                let mut root = spec.clone();
                root["$ref"] = Value::String(shape.pointer().to_owned());
                jsonschema::draft202012::options()
                    .should_validate_formats(true)
                    .build(&root)
                    .expect("the vendored spec's schemas compile")
            })
            .collect()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_shapes_accept_the_spec_and_refuse_departures() {
        let ok = json!({"call_id": "c", "success": true, "value": 1, "duration": 0.5});
        assert_eq!(Shape::CallResponse.errors(&ok), Vec::<String>::new());
        let both = json!({"call_id": "c", "success": false, "value": 1});
        assert!(!Shape::CallResponse.errors(&both).is_empty());
        assert!(Shape::ServerError.check(&json!({"detail": "x"})).is_err());
        assert!(Shape::List.check(&json!({"items": []})).is_ok());
        assert!(Shape::List.check(&json!([])).is_err());
        let tool = json!({"id": "A.B@1.0", "name": "A_B", "description": "d", "version": "1.0.0"});
        assert!(
            Shape::ToolDefinition.check(&tool).is_err(),
            "`@1.0` is no ToolId"
        );
    }
}
