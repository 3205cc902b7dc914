//! The schema policy: the one place that decides what every tool schema looks like.
//!
//! Clients break on details, so every schema the registry publishes is:
//! - self-contained: every `$ref` inlined, no `$defs`/`definitions` (OXP excludes them), which
//!   makes recursive types a registration error rather than a schema no client can read;
//! - free of a `$schema` key (the schemas are dialect 2020-12 by the protocol's definition);
//! - free of non-standard `format`s (`int64`, `uint8`, `double`, …), keeping the standard ones;
//! - for inputs, an object, closed (`additionalProperties: false`) when `#[tool]` generated it,
//!   with `Option` fields merely not required instead of `anyOf [T, null]`;
//! - inputs follow serde's deserialize contract, outputs its serialize contract.
//!
//! ```
//! use oxp_runtime::schema;
//! # use oxp_runtime::__private::schemars;
//!
//! #[derive(schemars::JsonSchema)]
//! # #[schemars(crate = "oxp_runtime::__private::schemars")]
//! struct Point { x: u8, y: Option<f64> }
//!
//! let input = schema::finalize_input(schema::input_schema::<Point>()).unwrap();
//! assert_eq!(input["properties"]["x"], serde_json::json!({"type": "integer", "minimum": 0, "maximum": 255}));
//! assert_eq!(input["properties"]["y"], serde_json::json!({"type": "number"}));
//! assert_eq!(input["required"], serde_json::json!(["x"]));
//! ```

use std::fmt;

use schemars::generate::{Contract, SchemaGenerator, SchemaSettings};
use schemars::transform::{RestrictFormats, Transform, transform_subschemas};
use schemars::{JsonSchema, Schema};
use serde_json::Value;

fn settings() -> SchemaSettings {
    SchemaSettings::draft2020_12()
        .with(|s| s.inline_subschemas = true)
        // Reads the root's `$schema` to know which formats are standard; `$schema` goes later.
        .with_transform(RestrictFormats::default())
}

/// The schema of `T` as a tool input (serde's deserialize contract), before [`finalize_input`].
///
/// ```
/// #[derive(schemars::JsonSchema)]
/// struct Point { x: i64, y: i64 }
///
/// let schema = oxp_runtime::schema::finalize_input(oxp_runtime::schema::input_schema::<Point>()).unwrap();
/// assert_eq!(schema["type"], "object");
/// ```
pub fn input_schema<T: JsonSchema>() -> Schema {
    settings()
        .for_deserialize()
        .into_generator()
        .into_root_schema_for::<T>()
}

/// The generator [`input_schema`] uses, for a root schema built by hand (`#[tool]`'s plain
/// parameters); [`finish_root`] does the rest of what `into_root_schema_for` does.
pub(crate) fn input_generator() -> SchemaGenerator {
    settings().for_deserialize().into_generator()
}

/// What schemars does to a root schema once its own part is made: the meta-schema (which the
/// format policy reads), the definitions collected on the way, the transforms.
pub(crate) fn finish_root(mut generator: SchemaGenerator, mut schema: Schema) -> Schema {
    if let Some(meta_schema) = generator.settings().meta_schema.clone() {
        schema.insert("$schema".to_owned(), meta_schema.into());
    }
    let definitions = generator.take_definitions(false);
    if !definitions.is_empty() {
        schema.insert("$defs".to_owned(), definitions.into());
    }
    for transform in generator.transforms_mut() {
        transform.transform(&mut schema);
    }
    schema
}

/// The schema of `T` as a tool output (serde's serialize contract), before [`finalize_output`].
///
/// ```
/// let schema = oxp_runtime::schema::finalize_output(oxp_runtime::schema::output_schema::<Vec<String>>()).unwrap();
/// assert_eq!(schema.unwrap()["type"], "array");
/// ```
pub fn output_schema<T: JsonSchema>() -> Schema {
    let mut settings = settings();
    settings.contract = Contract::Serialize;
    settings.into_generator().into_root_schema_for::<T>()
}

/// A schema the policy cannot publish.
///
/// ```
/// #[derive(schemars::JsonSchema)]
/// struct Node { children: Vec<Node> }
///
/// let error = oxp_runtime::schema::finalize_input(oxp_runtime::schema::input_schema::<Node>()).unwrap_err();
/// assert!(error.to_string().contains("recursive"), "{error}");
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum SchemaError {
    /// A `$ref` survived inlining: the type refers to itself.
    Recursive {
        /// The type (or definition) that recurses.
        definition: String,
    },
    /// The input schema does not describe a JSON object.
    InputNotObject {
        /// The schema's `type`, or how it was described instead.
        found: String,
    },
}

impl fmt::Display for SchemaError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SchemaError::Recursive { definition } => write!(
                f,
                "the type `{definition}` is recursive, and OXP schemas cannot use `$ref`, so it \
                 cannot be inlined; bound the recursion (e.g. a fixed depth of nested structs) or \
                 take the recursive part as `serde_json::Value`"
            ),
            SchemaError::InputNotObject { found } => write!(
                f,
                "a tool's input must be a JSON object, but this input schema is {found}; take a \
                 struct with named fields in `Input<T>`, or list the values as parameters"
            ),
        }
    }
}

impl std::error::Error for SchemaError {}

/// Applies the policy to an input schema and returns the JSON the registry publishes.
///
/// ```
/// #[derive(schemars::JsonSchema)]
/// struct Point { x: i64, y: Option<i64> }
///
/// let schema = oxp_runtime::schema::finalize_input(oxp_runtime::schema::input_schema::<Point>()).unwrap();
/// assert_eq!(schema["required"], serde_json::json!(["x"]));
/// assert!(schema.get("$schema").is_none() && schema.get("title").is_none());
/// ```
pub fn finalize_input(schema: Schema) -> Result<Value, SchemaError> {
    let mut schema = finalize(schema)?;
    StripOptionalNull.transform(&mut schema);
    let value = schema.to_value();
    match value.get("type") {
        Some(Value::String(t)) if t == "object" => Ok(value),
        Some(other) => Err(SchemaError::InputNotObject {
            found: format!("of type {other}"),
        }),
        None => Err(SchemaError::InputNotObject {
            found: format!("`{value}`"),
        }),
    }
}

/// Applies the policy to an output schema; `None` means "returns nothing" (`output_schema: null`).
///
/// ```
/// let schema = oxp_runtime::schema::finalize_output(oxp_runtime::schema::output_schema::<i64>()).unwrap().unwrap();
/// assert_eq!(schema["type"], "integer");
/// ```
pub fn finalize_output(schema: Schema) -> Result<Option<Value>, SchemaError> {
    let mut schema = finalize(schema)?;
    if schema.get(crate::content::CONTENTS_MARK) == Some(&Value::Bool(true)) {
        // `Contents` leaves out what it does not have (`skip_serializing_if`): its optional
        // fields are absent, never null, and `Contents<()>` has no structured part at all.
        StripOptionalNull.transform(&mut schema);
        if let Some(Value::Object(properties)) = schema.get_mut("properties") {
            let is_null = |s: &Value| s.get("type").and_then(Value::as_str) == Some("null");
            if properties.get("structuredContent").is_some_and(is_null) {
                properties.remove("structuredContent");
            }
        }
    }
    let value = schema.to_value();
    Ok(match value.get("type") {
        Some(Value::String(t)) if t == "null" => None,
        _ => Some(value),
    })
}

fn finalize(mut schema: Schema) -> Result<Schema, SchemaError> {
    schema.remove("$schema");
    // The root title is the Rust type's name (`__OxpInput` for generated inputs): noise to a model.
    schema.remove("title");
    // With inlining on, schemars keeps a definition only for a type that refers to itself; a
    // schema written by hand may keep any. A reference to one that does not refer to itself is
    // replaced by the definition; what is left (a type that refers to itself) is reported below,
    // so the definitions themselves can go.
    if let Some(Value::Object(definitions)) = schema.remove("$defs") {
        Inline {
            definitions: &definitions,
            within: Vec::new(),
        }
        .transform(&mut schema);
    }
    let mut refs = FindRefs(None);
    refs.transform(&mut schema);
    if let Some(reference) = refs.0 {
        let definition = reference
            .rsplit('/')
            .next()
            .unwrap_or(&reference)
            .to_owned();
        return Err(SchemaError::Recursive { definition });
    }
    Ok(schema)
}

/// A published schema as its validator needs it: without the annotations (`title`,
/// `description`, `examples`, `default`, `$comment`), which do not validate, and of which the
/// validator would keep a copy per subschema (~0.6 KB for each documented property).
pub(crate) fn for_validation(schema: Value) -> Value {
    if !schema.is_object() {
        return schema; // `true`/`false` have nothing to strip; anything else, the compiler refuses
    }
    let mut schema = Schema::try_from(schema).expect("an object is a schema");
    StripAnnotations.transform(&mut schema);
    schema.to_value()
}

struct StripAnnotations;

impl Transform for StripAnnotations {
    fn transform(&mut self, schema: &mut Schema) {
        for annotation in ["title", "description", "examples", "default", "$comment"] {
            schema.remove(annotation);
        }
        transform_subschemas(self, schema);
    }
}

/// Replaces each `{"$ref": "#/$defs/name", …}` by the definition (the reference's own keywords
/// beside it kept), definitions within definitions too, except one inside itself: that `$ref` is
/// left for [`FindRefs`] to report (a type that refers to itself has no inlined form).
struct Inline<'a> {
    definitions: &'a serde_json::Map<String, Value>,
    /// The definitions being inlined, outermost first.
    within: Vec<&'a str>,
}

impl<'a> Transform for Inline<'a> {
    fn transform(&mut self, schema: &mut Schema) {
        let target = schema
            .get("$ref")
            .and_then(Value::as_str)
            .and_then(|r| r.strip_prefix("#/$defs/"))
            .and_then(|name| self.definitions.get_key_value(name));
        if let Some((name, Value::Object(definition))) = target {
            if !self.within.contains(&name.as_str()) {
                if let Some(object) = schema.as_object_mut() {
                    object.remove("$ref");
                    for (key, value) in definition {
                        object.entry(key.clone()).or_insert_with(|| value.clone());
                    }
                }
                self.within.push(name);
                self.transform(schema);
                self.within.pop();
                return;
            }
        }
        transform_subschemas(self, schema);
    }
}

/// Finds the first `$ref` in any subschema.
struct FindRefs(Option<String>);

impl Transform for FindRefs {
    fn transform(&mut self, schema: &mut Schema) {
        if self.0.is_none() {
            if let Some(Value::String(r)) = schema.get("$ref") {
                self.0 = Some(r.clone());
                return;
            }
        }
        transform_subschemas(self, schema);
    }
}

/// `Option<T>` fields are "may be omitted", not "may be null": drops `null` from the type of every
/// property that is not required.
struct StripOptionalNull;

impl Transform for StripOptionalNull {
    fn transform(&mut self, schema: &mut Schema) {
        let required = schema.as_object().map(required).unwrap_or_default();
        if let Some(Value::Object(properties)) = schema.get_mut("properties") {
            for (name, property) in properties.iter_mut() {
                if !required.contains(name) {
                    strip_null(property);
                }
            }
        }
        transform_subschemas(self, schema);
    }
}

fn strip_null(property: &mut Value) {
    let Some(obj) = property.as_object_mut() else {
        return;
    };
    // `{"type": ["integer", "null"]}` → `{"type": "integer"}`
    if let Some(Value::Array(types)) = obj.get_mut("type") {
        types.retain(|t| t != "null");
        if types.len() == 1 {
            let only = types.remove(0);
            obj.insert("type".into(), only);
        }
        return;
    }
    // `{"anyOf": [S, {"type": "null"}], "description": ..}` → S with the description kept.
    collapse_nullable(obj);
    // `{"enum": ["a", "b", null]}` (an optional unit enum)
    if let Some(Value::Array(values)) = obj.get_mut("enum") {
        values.retain(|v| !v.is_null());
    }
}

/// The names an object schema lists as `required` (none when it lists none): the one reading
/// of `required`, for the schema policy and the providers' projections.
pub(crate) fn required(schema: &serde_json::Map<String, Value>) -> Vec<String> {
    match schema.get("required") {
        Some(Value::Array(names)) => names
            .iter()
            .filter_map(|n| n.as_str().map(str::to_owned))
            .collect(),
        _ => Vec::new(),
    }
}

/// `{"anyOf": [S, {"type": "null"}], ..}` becomes S, merged into the object (its own keys, a
/// description say, win); `true` if it was such a union. The one reading of "S or null", for the
/// schema policy (which drops the null: `Option` is "not required") and the providers' projections
/// (Gemini marks it `nullable`).
pub(crate) fn collapse_nullable(obj: &mut serde_json::Map<String, Value>) -> bool {
    let is_null = |s: &Value| s.get("type").and_then(Value::as_str) == Some("null");
    let nullable = matches!(
        obj.get("anyOf"),
        Some(Value::Array(branches)) if branches.len() == 2 && branches.iter().any(is_null)
    );
    if !nullable {
        return false;
    }
    let Some(Value::Array(branches)) = obj.remove("anyOf") else {
        unreachable!("matched above")
    };
    if let Some(Value::Object(kept)) = branches.into_iter().find(|b| !is_null(b)) {
        for (k, v) in kept {
            obj.entry(k).or_insert(v);
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::for_validation;
    use super::{SchemaError, finalize_input};

    #[test]
    fn validation_schemas_lose_annotations_but_keep_properties_named_like_them() {
        let published = json!({
            "type": "object",
            "description": "The input.",
            "properties": {
                "description": {"type": "string", "description": "A text.", "default": "none"},
                "title": {"type": "integer", "minimum": 1, "title": "T", "examples": [2]},
                "tags": {"type": "array", "items": {"type": "string", "description": "A tag."}}
            },
            "required": ["description"],
            "additionalProperties": false
        });
        assert_eq!(
            for_validation(published),
            json!({
                "type": "object",
                "properties": {
                    "description": {"type": "string"},
                    "title": {"type": "integer", "minimum": 1},
                    "tags": {"type": "array", "items": {"type": "string"}}
                },
                "required": ["description"],
                "additionalProperties": false
            })
        );
        assert_eq!(for_validation(json!(true)), json!(true));
    }

    /// A schema written by hand with definitions is inlined for OXP (its keywords beside the
    /// reference kept); a definition that refers to itself, even twice, is reported at once.
    #[test]
    fn written_definitions_are_inlined_and_recursion_reported() {
        let written = json!({
            "type": "object",
            "$defs": {
                "address": {"type": "object", "properties": {"city": {"$ref": "#/$defs/city"}}},
                "city": {"type": "string"}
            },
            "properties": {"home": {"$ref": "#/$defs/address", "description": "Where."}}
        });
        let inlined = finalize_input(schemars::Schema::try_from(written).unwrap()).unwrap();
        assert_eq!(
            inlined["properties"]["home"],
            json!({"description": "Where.", "type": "object",
                "properties": {"city": {"type": "string"}}})
        );
        assert!(inlined.get("$defs").is_none());
        let tree = json!({
            "type": "object",
            "$defs": {"node": {"type": "object", "properties": {
                "left": {"$ref": "#/$defs/node"}, "right": {"$ref": "#/$defs/node"}}}},
            "properties": {"root": {"$ref": "#/$defs/node"}}
        });
        let error = finalize_input(schemars::Schema::try_from(tree).unwrap()).unwrap_err();
        assert!(matches!(error, SchemaError::Recursive { ref definition } if definition == "node"));
    }
}
