//! Walking a JSON Schema for the provider projections (with schemars' walk), its depth, and the
//! nulls a strict-mode model sends for optional properties.

use schemars::Schema;
use schemars::transform::transform_subschemas;
use serde_json::{Map, Value};

/// Calls `f` on every subschema of `schema` (not on `schema` itself), mutably: schemars' own
/// walk, which knows which keywords hold subschemas and which hold data (enum values,
/// defaults).
pub(crate) fn for_each_subschema(
    schema: &mut Map<String, Value>,
    mut f: impl FnMut(&mut Map<String, Value>),
) {
    let mut value = Value::Object(std::mem::take(schema));
    if let Ok(walked) = <&mut Schema>::try_from(&mut value) {
        transform_subschemas(
            &mut |sub: &mut Schema| {
                if let Some(sub) = sub.as_object_mut() {
                    f(sub);
                }
            },
            walked,
        );
    }
    if let Value::Object(map) = value {
        *schema = map;
    }
}

/// An input schema as a model is shown it: without `x-mcp-header` (`#[mcp_header]`), which
/// tells MCP clients which header mirrors a parameter and means nothing to a model (and which a
/// provider's strict mode might refuse as an unknown keyword).
#[doc(hidden)]
pub fn for_model(schema: &Value) -> Value {
    let mut schema = schema.clone();
    if let Some(Value::Object(properties)) = schema.get_mut("properties") {
        for property in properties.values_mut() {
            if let Value::Object(property) = property {
                property.remove("x-mcp-header");
            }
        }
    }
    schema
}

/// How many object and array levels a schema nests (a flat object of scalars is 1). The walk
/// is mutable, so it goes over one copy of the schema, made once.
pub(crate) fn depth(schema: &Value) -> usize {
    match schema.clone() {
        Value::Object(mut map) => depth_of(&mut map),
        _ => 0,
    }
}

fn depth_of(schema: &mut Map<String, Value>) -> usize {
    let own = usize::from(is_container(schema));
    let mut deepest = 0;
    for_each_subschema(schema, |sub| deepest = deepest.max(depth_of(sub)));
    own + deepest
}

fn is_container(schema: &Map<String, Value>) -> bool {
    let is = |t: &str| match schema.get("type") {
        Some(Value::String(s)) => s == t,
        Some(Value::Array(types)) => types.iter().any(|x| x == t),
        _ => false,
    };
    is("object") || is("array") || schema.contains_key("properties") || schema.contains_key("items")
}

/// Removes `null` values of properties the schema does not require, recursively: a model in
/// OpenAI's strict mode sends `null` for an optional property it leaves out (every property is
/// listed as required there, optional ones as nullable), and the tool's own schema says
/// "may be omitted", not "may be null".
pub(crate) fn strip_optional_nulls(value: &mut Value, schema: &Value) {
    let (Value::Object(fields), Value::Object(schema)) = (value, schema) else {
        return;
    };
    let required = crate::schema::required(schema);
    let properties = schema.get("properties").and_then(Value::as_object);
    fields.retain(|name, v| !v.is_null() || required.contains(name));
    if let Some(properties) = properties {
        for (name, field) in fields.iter_mut() {
            if let Some(sub) = properties.get(name) {
                strip_optional_nulls(field, sub);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn data_that_looks_like_a_schema_is_not_walked() {
        // An enum value or a default is data, however much it looks like a schema.
        let schema = json!({"type": "object", "properties": {
            "x": {"enum": [{"type": "object", "properties": {"y": {"type": "object"}}}]},
            "z": {"default": {"type": "array", "items": {"type": "array"}}}
        }});
        assert_eq!(depth(&schema), 1);
    }

    #[test]
    fn depth_counts_containers() {
        assert_eq!(
            depth(&json!({"type": "object", "properties": {"a": {"type": "integer"}}})),
            1
        );
        let nested = json!({"type": "object", "properties": {"a": {"type": "array", "items": {"type": "object", "properties": {}}}}});
        assert_eq!(depth(&nested), 3);
    }

    #[test]
    fn optional_nulls_go_required_ones_stay() {
        let schema = json!({"type": "object", "required": ["a"], "properties": {
            "a": {"type": ["integer", "null"]}, "b": {"type": "integer"},
            "c": {"type": "object", "properties": {"d": {"type": "string"}}}
        }});
        let mut value = json!({"a": null, "b": null, "c": {"d": null}});
        strip_optional_nulls(&mut value, &schema);
        assert_eq!(value, json!({"a": null, "c": {}}));
    }
}
