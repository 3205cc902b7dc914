//! The validation step: the input against the tool's compiled schema, errors keyed by parameter.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::protocol::ValidationErrorResponse;
use crate::registry::RegisteredTool;

/// Validates the input against the tool's compiled schema; `None` when it is valid.
pub(super) fn validate(tool: &RegisteredTool, input: &Value) -> Option<ValidationErrorResponse> {
    // The common case first: `is_valid` stops at nothing and builds no error.
    if tool.validator().is_valid(input) {
        return None;
    }
    let mut parameter_errors: BTreeMap<String, String> = BTreeMap::new();
    let mut general = Vec::new();
    for error in tool.validator().iter_errors(input) {
        let pointer = error.instance_path().as_str();
        let (parameter, text) = match first_segment(pointer) {
            Some(parameter) => (
                Some(parameter.clone()),
                if pointer == format!("/{}", escape(&parameter)) {
                    error.to_string()
                } else {
                    format!("at {pointer}: {error}")
                },
            ),
            None => match error.kind() {
                jsonschema::error::ValidationErrorKind::Required { property } => (
                    property.as_str().map(str::to_owned),
                    "is required".to_owned(),
                ),
                jsonschema::error::ValidationErrorKind::AdditionalProperties { unexpected } => {
                    for name in unexpected {
                        parameter_errors
                            .entry(name.clone())
                            .or_insert_with(|| "is not a parameter of this tool".to_owned());
                    }
                    continue;
                }
                _ => (None, error.to_string()),
            },
        };
        match parameter {
            Some(parameter) => {
                let entry = parameter_errors.entry(parameter).or_default();
                if !entry.is_empty() {
                    entry.push_str("; ");
                }
                entry.push_str(&text);
            }
            None => general.push(text),
        }
    }
    if parameter_errors.is_empty() && general.is_empty() {
        return None;
    }
    let mut message = format!("Invalid input for tool '{}'", tool.name());
    if !general.is_empty() {
        message.push_str(": ");
        message.push_str(&general.join("; "));
    } else {
        let names: Vec<&str> = parameter_errors.keys().map(String::as_str).collect();
        message.push_str(&format!(" (parameters: {})", names.join(", ")));
    }
    Some(ValidationErrorResponse {
        message,
        parameter_errors,
    })
}

/// The top-level parameter a JSON pointer starts with (`/address/zip` → `address`).
fn first_segment(pointer: &str) -> Option<String> {
    let segment = pointer.strip_prefix('/')?.split('/').next()?;
    Some(segment.replace("~1", "/").replace("~0", "~"))
}

fn escape(name: &str) -> String {
    name.replace('~', "~0").replace('/', "~1")
}
