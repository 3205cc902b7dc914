//! The paths `#[tool]`'s expansion uses. Each helper is generic only where it must touch the
//! user's types; everything else is in the runtime, compiled once.

pub use futures_util::future::BoxFuture;
pub use inventory;
pub use schemars;
pub use serde;
pub use serde_json;

pub use crate::ask::CannotAsk;
pub use crate::context::ToolContext;
pub use crate::descriptor::{
    AuthorizationSpec, Input, Invoke, InvokeError, InvokeResult, ToolDescriptor, ToolHints,
};
pub use crate::error::ToolError;
pub use crate::schema::{input_schema, output_schema};
pub use crate::tasks::TaskSupport;

use schemars::{Schema, SchemaGenerator, json_schema};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

/// What a tool parameter must be. The blanket impl is the whole definition; the trait exists so
/// that a wrong type gets a message in our words.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be a tool parameter",
    label = "this type needs `Deserialize` and `JsonSchema`",
    note = "a #[tool] parameter is read from JSON and described by a JSON Schema: add \
            `#[derive(serde::Deserialize, schemars::JsonSchema)]` to the type, or use a type that has both"
)]
pub trait ToolParameter: DeserializeOwned + schemars::JsonSchema {}
impl<T: DeserializeOwned + schemars::JsonSchema> ToolParameter for T {}

/// What a tool's value must be.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be returned from a tool",
    label = "this type needs `Serialize` and `JsonSchema`",
    note = "a #[tool] value is sent as JSON and described by a JSON Schema: add \
            `#[derive(serde::Serialize, schemars::JsonSchema)]` to the type, or return a type that has both"
)]
pub trait ToolOutput {}
impl<T: Serialize + schemars::JsonSchema> ToolOutput for T {}

/// What a tool's error type must be.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be a tool's error type",
    label = "this type does not convert into `ToolError`",
    note = "return `Result<T, ToolError>`, or an error type that implements `std::error::Error` \
            (it converts into `ToolError` with its text in `developer_message`)"
)]
pub trait IntoToolError: Into<ToolError> {}
impl<E: Into<ToolError>> IntoToolError for E {}

/// Compile-time checks, called from a fn the expansion never runs.
pub const fn assert_parameter<T: ToolParameter>() {}
/// See [`assert_parameter`].
pub const fn assert_output<T: ToolOutput + ?Sized>() {}
/// See [`assert_parameter`].
pub const fn assert_error<E: IntoToolError>() {}

/// Reads the generated input struct from the validated input.
pub fn decode<T: DeserializeOwned>(input: Value) -> Result<T, InvokeError> {
    serde_json::from_value(input).map_err(InvokeError::Input)
}

/// An async tool whose input could not be read: its future, already finished (non-generic,
/// so the expansion compiles no future per tool for it).
pub fn failed(error: InvokeError) -> BoxFuture<'static, InvokeResult> {
    Box::pin(std::future::ready(Err(error)))
}

pin_project_lite::pin_project! {
    /// An async tool's future, its output encoded: see [`boxed`].
    struct Encoded<F, E> {
        #[pin]
        future: F,
        encode: E,
    }
}

impl<F: Future, E: Fn(F::Output) -> InvokeResult> Future for Encoded<F, E> {
    type Output = InvokeResult;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<InvokeResult> {
        let this = self.project();
        this.future.poll(cx).map(this.encode)
    }
}

/// An async tool's future, boxed, its output encoded by `encode` ([`value`], [`result`], …;
/// a fn item, which costs no storage and is called directly).
pub fn boxed<F, E>(future: F, encode: E) -> BoxFuture<'static, InvokeResult>
where
    F: Future + Send + 'static,
    E: Fn(F::Output) -> InvokeResult + Send + 'static,
{
    Box::pin(Encoded { future, encode })
}

/// A tool that returns a value.
pub fn value<T: Serialize>(value: T) -> InvokeResult {
    serde_json::to_value(value)
        .map(Some)
        .map_err(InvokeError::Output)
}

/// A tool that returns nothing.
pub fn unit(_: ()) -> InvokeResult {
    Ok(None)
}

/// A tool that returns `Result<T, E>`.
pub fn result<T: Serialize, E: Into<ToolError>>(result: Result<T, E>) -> InvokeResult {
    value(result.map_err(|e| InvokeError::Tool(e.into()))?)
}

/// A tool that returns `Result<(), E>`.
pub fn unit_result<E: Into<ToolError>>(result: Result<(), E>) -> InvokeResult {
    result
        .map(|()| None)
        .map_err(|e| InvokeError::Tool(e.into()))
}

/// One plain parameter of a `#[tool]` fn: its part of the input schema. The expansion lists a
/// tool's parameters in a constant table, so no schema code is compiled (or run) per tool.
pub struct Param {
    /// The parameter's name, as the input object has it.
    pub name: &'static str,
    /// Its doc's `# Title` line, or empty.
    pub title: &'static str,
    /// Its doc, or empty.
    pub description: &'static str,
    /// [`param::<T>`](param) for the parameter's type.
    pub schema: fn(&mut SchemaGenerator) -> (Schema, bool),
}

/// The schema of a parameter of type `T`, and whether it may be left out: exactly when reading
/// it from an absent field succeeds, as [`Fields::take`] does (`Option<T>`, or an alias of one).
pub fn param<T: ToolParameter>(generator: &mut SchemaGenerator) -> (Schema, bool) {
    let optional = T::deserialize(Missing("")).is_ok();
    (generator.subschema_for::<T>(), optional)
}

/// The input schema of a tool with plain parameters: what `#[derive(JsonSchema)]` makes of a
/// struct of them with `deny_unknown_fields` (kept equal by a test in `tests/schema_policy.rs`).
pub fn params_schema(params: &[Param]) -> Schema {
    let mut generator = crate::schema::input_generator();
    let mut schema = json_schema!({"type": "object", "additionalProperties": false});
    let mut properties = serde_json::Map::new();
    let mut required = Vec::new();
    for param in params {
        let (mut property, optional) = (param.schema)(&mut generator);
        for (key, text) in [("title", param.title), ("description", param.description)] {
            if !text.is_empty() {
                property.insert(key.to_owned(), text.into());
            }
        }
        properties.insert(param.name.to_owned(), property.to_value());
        if !optional {
            required.push(Value::from(param.name));
        }
    }
    if !properties.is_empty() {
        schema.insert("properties".to_owned(), properties.into());
    }
    if !required.is_empty() {
        schema.insert("required".to_owned(), required.into());
    }
    crate::schema::finish_root(generator, schema)
}

/// A tool's input object, read one parameter at a time.
///
/// The expansion reads each parameter with [`take`](Self::take), which is generic only over the
/// parameter's type: every `i64` parameter of every tool shares one instance. A derived
/// `Deserialize` for each tool's input struct would instead compile a visitor per tool, and
/// that per-tool code is most of what `#[tool]` costs to build. (Parameters with `#[serde]`
/// attributes still go through a derived `Deserialize`, which understands them.)
pub struct Fields {
    object: serde_json::Map<String, Value>,
    /// The parameter names, for the error about one the tool does not have.
    expected: &'static [&'static str],
    /// How many parameters were read in place (left in `object`) rather than taken out.
    read_in_place: usize,
}

impl Fields {
    /// The input, which must be an object.
    pub fn new(input: Value, expected: &'static [&'static str]) -> Result<Fields, InvokeError> {
        match input {
            Value::Object(object) => Ok(Fields {
                object,
                expected,
                read_in_place: 0,
            }),
            other => Err(InvokeError::Input(serde::de::Error::invalid_type(
                unexpected(&other),
                &"an object of the tool's parameters",
            ))),
        }
    }

    /// The parameter `name`: absent is `None` for an `Option`, and "missing field" otherwise,
    /// as a derived `Deserialize` has it.
    pub fn take<T: ToolParameter>(&mut self, name: &'static str) -> Result<T, InvokeError> {
        let read = match self.object.get(name) {
            None => return T::deserialize(Missing(name)).map_err(InvokeError::Input),
            // A number, a bool or null owns nothing worth moving: read it where it is, which
            // spares taking it out of the map (most of this fn's cost for an `i64`).
            Some(value @ (Value::Number(_) | Value::Bool(_) | Value::Null)) => {
                self.read_in_place += 1;
                T::deserialize(value)
            }
            // Strings, arrays and objects are moved into the parameter, not copied.
            Some(_) => T::deserialize(self.object.remove(name).expect("just found")),
        };
        // Named, as the derived `Deserialize` of a struct does not.
        read.map_err(|e| {
            InvokeError::Input(serde::de::Error::custom(format_args!("`{name}`: {e}")))
        })
    }

    /// Refuses parameters the tool does not have (the input schema is closed, so a validated
    /// input has none; this keeps a direct call honest too).
    pub fn finish(self) -> Result<(), InvokeError> {
        if self.object.len() == self.read_in_place {
            return Ok(()); // all that is left was read in place
        }
        match self
            .object
            .keys()
            .find(|key| !self.expected.contains(&key.as_str()))
        {
            None => Ok(()),
            Some(unknown) => Err(InvokeError::Input(serde::de::Error::unknown_field(
                unknown,
                self.expected,
            ))),
        }
    }
}

/// A tool's plain parameters, as the tuple of their types: read from the input in one call.
///
/// Implemented for tuples of up to 16 [`ToolParameter`]s. The expansion calls
/// [`decode_params`] with a tool's tuple, so the reading code is generic only over the
/// parameter types: compiled once for every tool with the same ones, and outside the user's
/// module, where an edit of a tool's body does not compile it again.
pub trait Params: Sized {
    /// Takes each parameter from `fields`, the `i`th named `names[i]`.
    fn take_all(fields: &mut Fields, names: &'static [&'static str]) -> Result<Self, InvokeError>;
}

macro_rules! params_tuple {
    ($($ty:ident $index:tt),*) => {
        impl<$($ty: ToolParameter),*> Params for ($($ty,)*) {
            #[allow(unused_variables)]
            fn take_all(
                fields: &mut Fields,
                names: &'static [&'static str],
            ) -> Result<Self, InvokeError> {
                Ok(($(fields.take::<$ty>(names[$index])?,)*))
            }
        }
    };
}

params_tuple!();
params_tuple!(A 0);
params_tuple!(A 0, B 1);
params_tuple!(A 0, B 1, C 2);
params_tuple!(A 0, B 1, C 2, D 3);
params_tuple!(A 0, B 1, C 2, D 3, E 4);
params_tuple!(A 0, B 1, C 2, D 3, E 4, F 5);
params_tuple!(A 0, B 1, C 2, D 3, E 4, F 5, G 6);
params_tuple!(A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7);
params_tuple!(A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7, I 8);
params_tuple!(A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7, I 8, J 9);
params_tuple!(A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7, I 8, J 9, K 10);
params_tuple!(A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7, I 8, J 9, K 10, L 11);
params_tuple!(A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7, I 8, J 9, K 10, L 11, M 12);
params_tuple!(A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7, I 8, J 9, K 10, L 11, M 12, N 13);
params_tuple!(A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7, I 8, J 9, K 10, L 11, M 12, N 13, O 14);
params_tuple!(A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7, I 8, J 9, K 10, L 11, M 12, N 13, O 14, P 15);

/// Reads a tool's plain parameters, named `names` in order, from its input: as
/// [`Fields::new`], one [`Fields::take`] each, then [`Fields::finish`].
///
/// ```
/// use oxp_runtime::__private::decode_params;
/// let (a, label): (i64, Option<String>) =
///     decode_params(serde_json::json!({"a": 1}), &["a", "label"]).unwrap();
/// assert_eq!((a, label), (1, None));
/// assert!(decode_params::<(i64,)>(serde_json::json!({"a": 1, "b": 2}), &["a"]).is_err());
/// ```
pub fn decode_params<P: Params>(
    input: Value,
    names: &'static [&'static str],
) -> Result<P, InvokeError> {
    let mut fields = Fields::new(input, names)?;
    let params = P::take_all(&mut fields, names)?;
    fields.finish()?;
    Ok(params)
}

fn unexpected(value: &Value) -> serde::de::Unexpected<'_> {
    use serde::de::Unexpected;
    match value {
        Value::Null => Unexpected::Unit,
        Value::Bool(b) => Unexpected::Bool(*b),
        Value::Number(_) => Unexpected::Other("a number"),
        Value::String(s) => Unexpected::Str(s),
        Value::Array(_) => Unexpected::Seq,
        Value::Object(_) => Unexpected::Map,
    }
}

/// What an absent parameter deserializes from: `None` for an `Option`, "missing field `name`"
/// for anything else (serde's derive does the same with a private helper).
struct Missing(&'static str);

impl<'de> serde::Deserializer<'de> for Missing {
    type Error = serde_json::Error;

    fn deserialize_any<V: serde::de::Visitor<'de>>(self, _: V) -> Result<V::Value, Self::Error> {
        Err(serde::de::Error::missing_field(self.0))
    }

    fn deserialize_option<V: serde::de::Visitor<'de>>(
        self,
        visitor: V,
    ) -> Result<V::Value, Self::Error> {
        visitor.visit_none()
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
        unit unit_struct newtype_struct seq tuple tuple_struct map struct enum identifier
        ignored_any
    }
}

/// What `add::TOOL` is when `#[tool]` on `add` reported a compile error: a descriptor that only
/// has to type-check (the crate does not build), so that uses of `add::TOOL` elsewhere do not
/// fail a second time and bury the real error — thiserror's fallback, here.
pub const FALLBACK: ToolDescriptor = ToolDescriptor {
    toolkit: "",
    name: "",
    wire_name: None,
    version: "0.0.0",
    description: "",
    user_id: false,
    secrets: &[],
    authorization: &[],
    timeout_ms: None,
    scopes: &[],
    hints: ToolHints::NONE,
    input_schema: fallback_schema,
    output_schema: None,
    invoke: Invoke::Blocking(fallback_invoke),
    takes_context: true,
    module_path: "",
    fn_name: "",
    file: "",
    line: 0,
};

fn fallback_schema() -> Schema {
    unreachable!("a tool whose #[tool] failed to compile is never registered")
}

fn fallback_invoke(_: ToolContext, _: Value) -> InvokeResult {
    unreachable!("a tool whose #[tool] failed to compile is never called")
}

pub use crate::resource::{Argument, PromptDescriptor, ResourceDescriptor};

/// What a `#[resource]` fn must return.
pub const fn assert_resource_output<T: crate::resource::ResourceOutput>() {}
/// What a `#[prompt]` fn must return.
pub const fn assert_prompt_output<T: crate::prompt::PromptOutput>() {}

/// A template parameter or prompt argument, read from the glue's input as `T`.
pub fn argument<T: ToolParameter>(input: &Value, name: &str) -> Result<T, InvokeError> {
    crate::resource::argument(input, name)
}

/// The URI a resource's glue was asked to read.
pub fn resource_uri(input: &Value) -> String {
    input
        .get("uri")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned()
}

/// A resource's return, as its contents read from `uri`.
pub fn resource_contents<T: crate::resource::ResourceOutput>(
    returned: T,
    uri: &str,
    mime_type: Option<&str>,
) -> InvokeResult {
    crate::resource::contents(returned, uri, mime_type)
}

/// A prompt's return, as its messages.
pub fn prompt_messages<T: crate::prompt::PromptOutput>(returned: T) -> InvokeResult {
    crate::prompt::messages(returned)
}

/// The placeholder `fn_name::RESOURCE` of a `#[resource]` that did not compile.
pub const FALLBACK_RESOURCE: ResourceDescriptor = ResourceDescriptor {
    uri: "",
    name: "",
    title: None,
    description: "",
    mime_type: None,
    arguments: &[],
    scopes: &[],
    timeout_ms: None,
    read: Invoke::Blocking(fallback_invoke),
    module_path: "",
    fn_name: "",
    file: "",
    line: 0,
};

/// The placeholder `fn_name::PROMPT` of a `#[prompt]` that did not compile.
pub const FALLBACK_PROMPT: PromptDescriptor = PromptDescriptor {
    name: "",
    title: None,
    description: "",
    arguments: &[],
    scopes: &[],
    timeout_ms: None,
    get: Invoke::Blocking(fallback_invoke),
    module_path: "",
    fn_name: "",
    file: "",
    line: 0,
};

pub use crate::skill::{SkillDescriptor, SkillFile};
