//! Pins the JSON the schema policy (`oxp_runtime::schema`) emits for every shape a tool meets.

use std::collections::BTreeMap;

use oxp_runtime::{Input, Registry, RegistryError, tool};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// A postal address.
#[derive(Deserialize, Serialize, JsonSchema)]
pub struct Address {
    /// The street and number.
    pub street: String,
    /// The postal code, if known.
    pub zip: Option<String>,
}

/// How urgent something is.
#[derive(Deserialize, Serialize, JsonSchema)]
pub enum Priority {
    /// Whenever.
    Low,
    /// Now.
    High,
}

/// Everything a tool input can hold.
#[derive(Deserialize, JsonSchema)]
pub struct Everything {
    /// A small unsigned integer.
    pub small: u8,
    /// A large signed integer.
    pub large: i64,
    /// A float.
    pub ratio: f64,
    /// A nested struct.
    pub address: Address,
    /// An optional nested struct.
    pub billing: Option<Address>,
    /// A list.
    pub tags: Vec<String>,
    /// A map.
    pub counts: BTreeMap<String, u32>,
    /// An enum.
    pub priority: Priority,
}

/// Take everything.
#[tool(toolkit = "Policy", version = "1.0.0")]
pub fn everything(Input(_all): Input<Everything>) -> Address {
    Address {
        street: "x".into(),
        zip: None,
    }
}

/// Take nothing, return nothing.
#[tool(toolkit = "Policy", version = "1.0.0")]
pub async fn unit() {}

/// Take optional parameters.
#[tool(toolkit = "Policy", version = "1.0.0")]
pub async fn optional(
    /// How many.
    n: Option<u32>,
    #[serde(default = "default_label")]
    #[schemars(length(min = 1))]
    /// A label.
    label: String,
) -> Option<u32> {
    let _ = label;
    n
}

fn default_label() -> String {
    "none".into()
}

/// A tree: recursive, so it cannot be inlined.
#[derive(Deserialize, JsonSchema)]
pub struct Tree {
    /// The children.
    pub children: Vec<Tree>,
}

/// Take a tree.
#[tool(toolkit = "Policy", version = "1.0.0")]
pub async fn tree(root: Tree) -> usize {
    root.children.len()
}

fn definition(tool: &'static oxp_runtime::ToolDescriptor) -> (Value, Option<Value>) {
    let registry = Registry::builder().tool(tool).build().unwrap();
    let d = registry.tools()[0].definition().clone();
    (d.input_schema, d.output_schema)
}

/// Walks a schema and fails on anything the policy forbids.
fn assert_clean(value: &Value) {
    match value {
        Value::Object(map) => {
            for key in ["$ref", "$defs", "definitions", "$schema"] {
                assert!(!map.contains_key(key), "`{key}` in {value}");
            }
            if let Some(Value::String(format)) = map.get("format") {
                assert!(
                    ![
                        "int8", "int16", "int32", "int64", "uint", "uint8", "uint16", "uint32",
                        "uint64", "float", "double"
                    ]
                    .contains(&format.as_str()),
                    "non-standard format {format}"
                );
            }
            map.values().for_each(assert_clean);
        }
        Value::Array(items) => items.iter().for_each(assert_clean),
        _ => {}
    }
}

#[test]
fn nested_structs_enums_options_lists_maps_and_numbers_are_inlined_and_standard() {
    let (input, output) = definition(everything::TOOL);
    assert_clean(&input);
    let address = json!({
        "description": "A nested struct.",
        "type": "object",
        "properties": {
            "street": {"description": "The street and number.", "type": "string"},
            "zip": {"description": "The postal code, if known.", "type": "string"}
        },
        "required": ["street"]
    });
    assert_eq!(
        input,
        json!({
            "description": "Everything a tool input can hold.",
            "type": "object",
            "properties": {
                "small": {"description": "A small unsigned integer.", "type": "integer", "minimum": 0, "maximum": 255},
                "large": {"description": "A large signed integer.", "type": "integer"},
                "ratio": {"description": "A float.", "type": "number"},
                "address": address,
                "billing": {
                    "description": "An optional nested struct.",
                    "type": "object",
                    "properties": {
                        "street": {"description": "The street and number.", "type": "string"},
                        "zip": {"description": "The postal code, if known.", "type": "string"}
                    },
                    "required": ["street"]
                },
                "tags": {"description": "A list.", "type": "array", "items": {"type": "string"}},
                "counts": {
                    "description": "A map.",
                    "type": "object",
                    "additionalProperties": {"type": "integer", "minimum": 0}
                },
                "priority": {
                    "description": "An enum.",
                    "oneOf": [
                        {"description": "Whenever.", "type": "string", "const": "Low"},
                        {"description": "Now.", "type": "string", "const": "High"}
                    ]
                }
            },
            "required": ["small", "large", "ratio", "address", "tags", "counts", "priority"]
        })
    );
    // The output follows the serialize contract: `zip` is always written, so it may be null.
    let output = output.unwrap();
    assert_clean(&output);
    assert_eq!(
        output["properties"]["zip"]["type"],
        json!(["string", "null"])
    );
}

#[test]
fn generated_inputs_are_closed_and_options_are_not_required_nor_nullable() {
    let (input, output) = definition(optional::TOOL);
    assert_eq!(
        input,
        json!({
            "type": "object",
            "additionalProperties": false,
            "properties": {
                "n": {"description": "How many.", "type": "integer", "minimum": 0},
                "label": {"description": "A label.", "type": "string", "minLength": 1, "default": "none"}
            }
        })
    );
    assert_eq!(
        output,
        Some(json!({"type": ["integer", "null"], "minimum": 0}))
    );
}

#[test]
fn unit_tools_take_an_empty_object_and_return_null_schema() {
    let (input, output) = definition(unit::TOOL);
    assert_eq!(
        input,
        json!({"type": "object", "additionalProperties": false})
    );
    assert_eq!(output, None);
}

#[test]
fn recursive_types_are_a_clear_registration_error() {
    let error: RegistryError = Registry::builder().tool(tree::TOOL).build().unwrap_err();
    let text = error.to_string();
    assert!(text.contains("Policy.Tree@1.0.0"), "{text}");
    assert!(text.contains("`Tree` is recursive"), "{text}");
    assert!(text.contains("schema_policy::tree"), "{text}");
}

// ---- Plain parameters: a table in the expansion, the derive's schema at run time ----------

/// Every kind of plain parameter, described by the runtime from the expansion's table.
#[tool(toolkit = "Policy", version = "1.0.0")]
#[allow(clippy::too_many_arguments)] // a tool with many parameters is ordinary
pub async fn plain_kinds(
    /// A small unsigned integer.
    small: u8,
    /// # A title
    ///
    /// And a description over
    ///   two lines, the second indented.
    titled: i64,
    undocumented: f64,
    /// An optional nested struct.
    billing: Option<Address>,
    /// An optional list.
    tags: Option<Vec<String>>,
    /// A map.
    counts: BTreeMap<String, u32>,
    /// An enum.
    priority: Priority,
    /// Anything at all.
    anything: serde_json::Value,
    /// A keyword.
    r#type: String,
) {
    let _ = (
        small,
        titled,
        undocumented,
        billing,
        tags,
        counts,
        priority,
        anything,
        r#type,
    );
}

// What `#[derive(JsonSchema)]` makes of the same parameters as a struct's fields.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct PlainKinds {
    /// A small unsigned integer.
    small: u8,
    /// # A title
    ///
    /// And a description over
    ///   two lines, the second indented.
    titled: i64,
    undocumented: f64,
    /// An optional nested struct.
    billing: Option<Address>,
    /// An optional list.
    tags: Option<Vec<String>>,
    /// A map.
    counts: BTreeMap<String, u32>,
    /// An enum.
    priority: Priority,
    /// Anything at all.
    anything: serde_json::Value,
    /// A keyword.
    r#type: String,
}

#[test]
fn plain_parameters_get_the_schema_a_derived_struct_would() {
    use oxp_runtime::schema::{finalize_input, input_schema};
    let (input, _) = definition(plain_kinds::TOOL);
    assert_eq!(input, finalize_input(input_schema::<PlainKinds>()).unwrap());
    // The doc comment's parts land where the derive puts them.
    assert_eq!(input["properties"]["titled"]["title"], "A title");
    assert_eq!(
        input["properties"]["titled"]["description"],
        "And a description over\n  two lines, the second indented."
    );
    assert!(
        input["properties"]["undocumented"]
            .get("description")
            .is_none()
    );
    assert_eq!(
        input["required"],
        json!([
            "small",
            "titled",
            "undocumented",
            "counts",
            "priority",
            "anything",
            "type"
        ])
    );
}
