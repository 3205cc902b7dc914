//! Inputs for a tool the checker knows only from its `input_schema`: one the schema accepts
//! (to call the tool), and one it refuses (to see a 422). Each is confirmed against the schema
//! itself before it is sent, so a schema this cannot read costs a skip, never a wrong verdict.

use serde_json::{Map, Value, json};

/// The schema compiled as the server should read it (draft 2020-12 unless it says otherwise).
fn validator(schema: &Value) -> Option<jsonschema::Validator> {
    jsonschema::options().build(schema).ok()
}

/// An input `schema` accepts, if one can be made from it.
pub(crate) fn valid(schema: &Value) -> Option<Value> {
    let validator = validator(schema)?;
    // `input` is an object (CallToolRequest): `{}` when the schema says nothing more.
    [example(schema, schema, 0), Some(json!({}))]
        .into_iter()
        .flatten()
        .find(|input| input.is_object() && validator.is_valid(input))
}

/// A second accepted input that differs from [`valid`]'s (one scalar changed, however deep),
/// if one can be made.
pub(crate) fn another_valid(schema: &Value, first: &Value) -> Option<Value> {
    let validator = validator(schema)?;
    variants(first, 0)
        .into_iter()
        .find(|other| validator.is_valid(other))
}

/// `value` with one scalar changed, for each scalar in it (the first few hundred).
fn variants(value: &Value, depth: usize) -> Vec<Value> {
    match value {
        Value::String(s) => vec![Value::String(format!("{s}y"))],
        Value::Number(n) => vec![json!(n.as_f64().unwrap_or(0.0) as i64 + 1)],
        Value::Bool(b) => vec![Value::Bool(!b)],
        Value::Object(fields) if depth < 16 => fields
            .iter()
            .flat_map(|(key, child)| {
                variants(child, depth + 1).into_iter().map(move |other| {
                    let mut next = fields.clone();
                    next.insert(key.clone(), other);
                    Value::Object(next)
                })
            })
            .take(256)
            .collect(),
        Value::Array(items) if depth < 16 => items
            .iter()
            .enumerate()
            .flat_map(|(i, child)| {
                variants(child, depth + 1).into_iter().map(move |other| {
                    let mut next = items.clone();
                    next[i] = other;
                    Value::Array(next)
                })
            })
            .take(256)
            .collect(),
        _ => Vec::new(),
    }
}

/// An object input `schema` refuses (a required field left out, a field of the wrong type, or
/// an unknown field where none is allowed), and what is wrong with it.
pub(crate) fn invalid(schema: &Value) -> Option<(Value, String)> {
    let validator = validator(schema)?;
    let base = valid(schema)?;
    let Value::Object(fields) = &base else {
        return None;
    };
    let schema = resolve(schema, schema);
    let mut tries: Vec<(Value, String)> = Vec::new();
    for name in schema["required"].as_array().into_iter().flatten() {
        if let Some(name) = name.as_str() {
            let mut without = fields.clone();
            without.remove(name);
            tries.push((Value::Object(without), format!("without `{name}`")));
        }
    }
    if let Some(properties) = schema["properties"].as_object() {
        for (name, property) in properties {
            let wrong = match resolve(property, schema)["type"].as_str() {
                Some("string") => json!(12345),
                Some("number" | "integer") => json!("not a number"),
                Some("boolean") => json!("not a boolean"),
                Some("object" | "array") => json!("not structured"),
                _ => continue,
            };
            let mut with = fields.clone();
            with.insert(name.clone(), wrong);
            tries.push((Value::Object(with), format!("`{name}` of the wrong type")));
        }
    }
    let mut extra = fields.clone();
    extra.insert("oxp_check_unknown".into(), json!(1));
    tries.push((Value::Object(extra), "an unknown field".into()));
    tries
        .into_iter()
        .find(|(input, _)| !validator.is_valid(input))
}

/// A local `$ref` (`#/…`) followed into `root`; anything else as it is.
fn resolve<'a>(schema: &'a Value, root: &'a Value) -> &'a Value {
    match schema["$ref"].as_str().and_then(|r| r.strip_prefix('#')) {
        Some(pointer) => root.pointer(pointer).unwrap_or(schema),
        None => schema,
    }
}

/// A value `schema` plausibly accepts: its `const`, first `enum` value, `default`, or the
/// smallest value of its type within its bounds; objects with their required properties.
fn example(schema: &Value, root: &Value, depth: usize) -> Option<Value> {
    if depth > 16 {
        return None;
    }
    let schema = resolve(schema, root);
    let Value::Object(keywords) = schema else {
        // `true` or `{}` accepts anything.
        return Some(json!("x"));
    };
    if let Some(value) = keywords.get("const") {
        return Some(value.clone());
    }
    if let Some(first) = keywords.get("enum").and_then(|e| e.as_array()?.first()) {
        return Some(first.clone());
    }
    if let Some(default) = keywords.get("default") {
        return Some(default.clone());
    }
    for union in ["anyOf", "oneOf"] {
        if let Some(branches) = keywords.get(union).and_then(Value::as_array) {
            return branches.iter().find_map(|b| example(b, root, depth + 1));
        }
    }
    let ty = match keywords.get("type") {
        Some(Value::String(ty)) => ty.as_str(),
        Some(Value::Array(types)) => types
            .iter()
            .filter_map(Value::as_str)
            .find(|t| *t != "null")
            .unwrap_or("null"),
        _ if keywords.contains_key("properties") => "object",
        _ => return Some(json!("x")),
    };
    let bound = |key: &str| keywords.get(key).and_then(Value::as_f64);
    Some(match ty {
        "object" => {
            let mut fields = Map::new();
            let properties = keywords.get("properties");
            for name in keywords
                .get("required")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
            {
                let property = properties
                    .and_then(|p| p.get(name))
                    .unwrap_or(&Value::Bool(true));
                fields.insert(name.to_owned(), example(property, root, depth + 1)?);
            }
            Value::Object(fields)
        }
        "array" => {
            let count = bound("minItems").unwrap_or(0.0) as usize;
            let items = keywords.get("items").unwrap_or(&Value::Bool(true));
            let item = example(items, root, depth + 1)?;
            Value::Array(vec![item; count])
        }
        "string" => {
            let length = bound("minLength").unwrap_or(1.0).max(1.0) as usize;
            Value::String("x".repeat(length))
        }
        "integer" => {
            let low = bound("minimum")
                .or(bound("exclusiveMinimum").map(|m| m + 1.0))
                .unwrap_or(1.0);
            let high = bound("maximum").unwrap_or(f64::MAX);
            json!(low.ceil().min(high) as i64)
        }
        "number" => {
            let low = bound("minimum")
                .or(bound("exclusiveMinimum").map(|m| m + 1.0))
                .unwrap_or(1.0);
            json!(low.min(bound("maximum").unwrap_or(f64::MAX)))
        }
        "boolean" => Value::Bool(true),
        _ => Value::Null,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inputs_are_made_from_the_schema_and_confirmed_by_it() {
        let schema = json!({
            "type": "object",
            "properties": {
                "a": {"type": "number", "description": "x"},
                "n": {"type": "integer", "minimum": 3},
                "mode": {"$ref": "#/$defs/Mode"},
                "tags": {"type": "array", "items": {"type": "string"}, "minItems": 1}
            },
            "required": ["a", "n", "mode", "tags"],
            "additionalProperties": false,
            "$defs": {"Mode": {"enum": ["fast", "slow"]}}
        });
        let input = valid(&schema).unwrap();
        assert_eq!(
            input,
            json!({"a": 1.0, "n": 3, "mode": "fast", "tags": ["x"]})
        );
        let (bad, why) = invalid(&schema).unwrap();
        assert_eq!(why, "without `a`");
        assert!(!jsonschema::is_valid(&schema, &bad));
        let other = another_valid(&schema, &input).unwrap();
        assert_ne!(other, input);
        let nested = json!({"type": "object", "properties": {"w": {"type": "object",
            "properties": {"n": {"type": "integer"}}, "required": ["n"]}}, "required": ["w"]});
        let first = valid(&nested).unwrap();
        assert_eq!(another_valid(&nested, &first), Some(json!({"w": {"n": 2}})));
        // No inputs: `{}` is valid and nothing can be invalid but an unknown field, if closed.
        assert_eq!(valid(&json!({})), Some(json!({})));
        assert!(invalid(&json!({})).is_none());
        let closed = json!({"type": "object", "additionalProperties": false});
        assert_eq!(invalid(&closed).unwrap().1, "an unknown field");
        // A schema nothing satisfies is said so, not guessed at.
        assert_eq!(
            valid(&json!({"type": "object", "required": ["a"], "properties": {"a": false}})),
            None
        );
    }
}
