//! Walking a JSON Schema by its keywords, for the provider projections: which values are
//! subschemas (and so walked), and which are data (enum values, defaults) and left alone.

use serde_json::{Map, Value};

/// Keywords whose value is one subschema.
const ONE: [&str; 8] = [
    "items",
    "additionalProperties",
    "not",
    "if",
    "then",
    "else",
    "contains",
    "propertyNames",
];
/// Keywords whose value is a list of subschemas.
const LIST: [&str; 4] = ["anyOf", "oneOf", "allOf", "prefixItems"];
/// Keywords whose value maps names to subschemas.
const MAP: [&str; 3] = ["properties", "patternProperties", "dependentSchemas"];

/// Calls `f` on every subschema of `schema` (not on `schema` itself), mutably.
pub(crate) fn for_each_subschema(
    schema: &mut Map<String, Value>,
    mut f: impl FnMut(&mut Map<String, Value>),
) {
    for (key, value) in schema.iter_mut() {
        let key = key.as_str();
        if ONE.contains(&key) {
            if let Value::Object(sub) = value {
                f(sub);
            }
        } else if LIST.contains(&key) {
            for sub in value.as_array_mut().into_iter().flatten() {
                if let Value::Object(sub) = sub {
                    f(sub);
                }
            }
        } else if MAP.contains(&key) {
            for sub in value
                .as_object_mut()
                .into_iter()
                .flat_map(|m| m.values_mut())
            {
                if let Value::Object(sub) = sub {
                    f(sub);
                }
            }
        }
    }
}

/// How many object and array levels a schema nests (a flat object of scalars is 1).
pub(crate) fn depth(schema: &Value) -> usize {
    let Value::Object(map) = schema else { return 0 };
    let own = usize::from(is_container(map));
    let mut deepest = 0;
    let mut copy = map.clone();
    for_each_subschema(&mut copy, |sub| {
        deepest = deepest.max(depth(&Value::Object(sub.clone())));
    });
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
