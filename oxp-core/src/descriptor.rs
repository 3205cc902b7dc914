//! [`ToolDescriptor`]: the static, type-erased record `#[tool]` emits for each function.
//!
//! Everything generic over the user's types lives in the few fn pointers here; the registry and
//! the call pipeline are compiled once, in this crate, and never monomorphised per tool.

use futures_util::future::BoxFuture;
use serde_json::Value;

use crate::context::ToolContext;
use crate::error::ToolError;

/// Takes a whole struct as the tool's input object, for tools with many fields.
///
/// The struct's own fields (and their doc comments and serde attributes) become the input schema.
///
/// ```
/// use oxp_runtime::{tool, Input};
/// # use oxp_runtime::__private::{serde, schemars};
///
/// /// A message to send.
/// #[derive(serde::Deserialize, schemars::JsonSchema)]
/// # #[serde(crate = "oxp_runtime::__private::serde")]
/// # #[schemars(crate = "oxp_runtime::__private::schemars")]
/// struct Sms {
///     /// The recipient, in E.164 form.
///     to: String,
///     /// The text.
///     body: String,
/// }
///
/// /// Send an SMS.
/// #[tool(toolkit = "SMS", version = "0.1.2")]
/// fn send(Input(sms): Input<Sms>) -> usize {
///     sms.body.len() + sms.to.len()
/// }
///
/// assert_eq!(send(Input(Sms { to: "+1".into(), body: "hi".into() })), 4);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Input<T>(pub T);

/// Why invoking a tool's glue failed before or after the tool's own code.
///
/// ```
/// use oxp_runtime::{InvokeError, ToolError};
/// let error: InvokeError = ToolError::new("No such doorbell").into();
/// assert!(matches!(error, InvokeError::Tool(_)));
/// ```
#[derive(Debug)]
pub enum InvokeError {
    /// The input passed the schema but serde still refused it (a custom `Deserialize`).
    Input(serde_json::Error),
    /// The tool returned an error.
    Tool(ToolError),
    /// The tool's value could not be serialized.
    Output(serde_json::Error),
}

impl From<ToolError> for InvokeError {
    fn from(error: ToolError) -> Self {
        InvokeError::Tool(error)
    }
}

/// What invoking a tool's glue produces: its value (`None` for a unit return) or why not.
///
/// ```
/// use oxp_runtime::{InvokeError, InvokeResult, ToolError};
///
/// // What the glue of `fn ring() -> Result<u32, ToolError>` makes of each return.
/// fn glue(returned: Result<u32, ToolError>) -> InvokeResult {
///     Ok(Some(serde_json::to_value(returned?).map_err(InvokeError::Output)?))
/// }
/// assert_eq!(glue(Ok(5)).unwrap(), Some(5.into()));
/// assert!(matches!(glue(Err(ToolError::new("No bell"))), Err(InvokeError::Tool(_))));
/// ```
pub type InvokeResult = Result<Option<Value>, InvokeError>;

/// How a tool runs: on the async workers, or (for a plain `fn`) on the blocking pool.
///
/// ```
/// use oxp_runtime::{tool, Invoke};
///
/// /// Runs on the blocking pool.
/// #[tool(toolkit = "Files", version = "1.0.0")]
/// fn size(path: String) -> u64 { std::fs::metadata(path).map(|m| m.len()).unwrap_or(0) }
///
/// assert!(matches!(size::TOOL.invoke, Invoke::Blocking(_)));
/// ```
#[derive(Clone, Copy)]
pub enum Invoke {
    /// An `async fn`.
    Async(fn(ToolContext, Value) -> BoxFuture<'static, InvokeResult>),
    /// A plain `fn`, run off the async workers.
    Blocking(fn(ToolContext, Value) -> InvokeResult),
}

/// One authorization requirement, as written in `#[tool(authorization(id = .., scopes = [..]))]`.
///
/// ```
/// use oxp_runtime::tool;
///
/// /// List repositories.
/// #[tool(toolkit = "Github", version = "1.0.0", authorization(id = "github", scopes = ["repo"]))]
/// async fn repos() -> Vec<String> { Vec::new() }
///
/// let spec = &repos::TOOL.authorization[0];
/// assert_eq!((spec.id, spec.scopes), ("github", &["repo"][..]));
/// ```
#[derive(Clone, Copy, Debug)]
pub struct AuthorizationSpec {
    /// The provider's id.
    pub id: &'static str,
    /// The OAuth 2.0 scopes.
    pub scopes: &'static [&'static str],
}

/// A tool, as `#[tool]` registers it. Built by the macro; read by the registry.
///
/// You rarely touch one directly: `#[tool] fn add` also defines `add::TOOL`, which
/// [`RegistryBuilder::tool`](crate::RegistryBuilder::tool) takes to serve a chosen subset.
///
/// ```
/// use oxp_runtime::tool;
///
/// /// Add two integers.
/// #[tool(toolkit = "Calculator", version = "1.0.0", timeout_ms = 500)]
/// async fn add(a: i64, b: i64) -> i64 { a + b }
///
/// let descriptor = add::TOOL;
/// assert_eq!((descriptor.toolkit, descriptor.name, descriptor.version), ("Calculator", "Add", "1.0.0"));
/// assert_eq!(descriptor.timeout_ms, Some(500));
/// assert_eq!(descriptor.fn_name, "add");
/// ```
#[derive(Clone, Copy)]
pub struct ToolDescriptor {
    /// The toolkit (`Calculator`).
    pub toolkit: &'static str,
    /// The tool's name within the toolkit (`Add`).
    pub name: &'static str,
    /// The exact name on the wire (`wire_name = "greet"`): OXP's `name`, MCP's tool name and
    /// the models' function name; `None` for `Toolkit_Name`.
    pub wire_name: Option<&'static str>,
    /// `x.y.z`.
    pub version: &'static str,
    /// The fn's doc comment.
    pub description: &'static str,
    /// Whether a `user_id` is required.
    pub user_id: bool,
    /// Required secret ids.
    pub secrets: &'static [&'static str],
    /// Required authorization.
    pub authorization: &'static [AuthorizationSpec],
    /// The tool's own timeout, overriding the server's default.
    pub timeout_ms: Option<u64>,
    /// OAuth scopes a caller's access token must grant to see and call the tool
    /// (`scopes = ["files:write"]`): callers without them get neither in `tools/list` nor
    /// `GET /tools`, and a call is answered `403 insufficient_scope`.
    pub scopes: &'static [&'static str],
    /// What the tool tells hosts about itself: title, behaviour, tags, examples, deprecation.
    pub hints: ToolHints,
    /// The input schema, before the schema policy runs.
    pub input_schema: fn() -> schemars::Schema,
    /// The output schema, or `None` for a unit return.
    pub output_schema: Option<fn() -> schemars::Schema>,
    /// Runs the tool.
    pub invoke: Invoke,
    /// Whether the fn takes the call's [`ToolContext`](crate::ToolContext): only such a tool
    /// asks its caller anything beyond its `confirm` question.
    pub takes_context: bool,
    /// Where the fn is: `module_path!()`.
    pub module_path: &'static str,
    /// The fn's name in Rust.
    pub fn_name: &'static str,
    /// `file!()`.
    pub file: &'static str,
    /// `line!()`.
    pub line: u32,
}

impl ToolDescriptor {
    /// Where the fn is defined, for error messages: `crate::module::fn_name (src/lib.rs:12)`.
    ///
    /// ```
    /// use oxp_runtime::tool;
    ///
    /// /// Add two integers.
    /// #[tool(toolkit = "Calculator", version = "1.0.0")]
    /// async fn add(a: i64, b: i64) -> i64 { a + b }
    ///
    /// let location = add::TOOL.location(); // `module::add (src/file.rs:line)`
    /// assert!(location.contains("::add ("), "{location}");
    /// ```
    pub fn location(&self) -> String {
        format!(
            "{}::{} ({}:{})",
            self.module_path, self.fn_name, self.file, self.line
        )
    }
}

impl std::fmt::Debug for ToolDescriptor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolDescriptor")
            .field("toolkit", &self.toolkit)
            .field("name", &self.name)
            .field("version", &self.version)
            .field("at", &self.location())
            .finish_non_exhaustive()
    }
}

inventory::collect!(ToolDescriptor);

/// What a tool tells hosts about itself besides its schemas, as `#[tool]` states it: a title for
/// UIs, how it behaves (MCP's annotations: an MCP host runs a read-only tool without asking, and
/// takes a tool that says nothing for a destructive one), tags for selecting tools, input
/// examples, and whether it is deprecated. A behaviour the tool did not state is `None`, and is
/// not sent: hosts apply the spec's defaults.
///
/// ```
/// use oxp_runtime::tool;
///
/// /// Add two numbers.
/// #[tool(toolkit = "Calculator", version = "1.0.0", title = "Add numbers", read_only,
///        idempotent, open_world = false, tags = ["math"], example = r#"{"a": 1, "b": 2}"#)]
/// async fn add(a: f64, b: f64) -> f64 { a + b }
///
/// let hints = add::TOOL.hints;
/// assert_eq!(hints.title, Some("Add numbers"));
/// assert_eq!((hints.read_only, hints.destructive, hints.open_world), (Some(true), None, Some(false)));
/// assert_eq!((hints.tags, hints.examples), (&["math"][..], &[r#"{"a": 1, "b": 2}"#][..]));
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ToolHints {
    /// A human-readable name for UIs (`title = "Add numbers"`).
    pub title: Option<&'static str>,
    /// Does not change its environment (`read_only`).
    pub read_only: Option<bool>,
    /// May destroy or overwrite data (`destructive`); meaningful only when not read-only.
    pub destructive: Option<bool>,
    /// A second call with the same input has no further effect (`idempotent`).
    pub idempotent: Option<bool>,
    /// Talks to the outside world: web, email, third-party APIs (`open_world`).
    pub open_world: Option<bool>,
    /// Free labels, for selecting tools (`tags = ["math"]`, `OXP_TOOLS=tag:math`).
    pub tags: &'static [&'static str],
    /// Input examples as JSON text (`example = r#"{…}"#`, repeatable); the registry checks each
    /// against the input schema.
    pub examples: &'static [&'static str],
    /// Why not to use it any more (`deprecated = "use Calculator.Add@2"`): still served, marked
    /// for hosts and models, and logged when called.
    pub deprecated: Option<&'static str>,
    /// The question its caller's user must say yes to before it runs
    /// (`confirm = "Delete {path}?"`, `{param}` standing for the parameter's value); see
    /// [`ask`](crate::ask).
    pub confirm: Option<&'static str>,
    /// What it does for a caller that cannot answer its questions (`cannot_ask = "hide"`);
    /// `None`: the server's default. See [`CannotAsk`](crate::ask::CannotAsk).
    pub cannot_ask: Option<crate::ask::CannotAsk>,
    /// Whether it may, or must, run as an MCP task (`task = "optional"`); `None`: never. See
    /// [`tasks`](crate::tasks).
    pub task: Option<crate::tasks::TaskSupport>,
    /// Hosts that defer tools until their tool search finds them load this one up front
    /// (`always_load`); MCP's `_meta["anthropic/alwaysLoad"]`.
    pub always_load: bool,
    /// Words a host's tool search matches beside the name and description
    /// (`search_hint = "pdf invoice"`); MCP's `_meta["anthropic/searchHint"]`.
    pub search_hint: Option<&'static str>,
}

impl ToolHints {
    /// A tool that states nothing.
    ///
    /// ```
    /// assert_eq!(oxp_runtime::ToolHints::NONE, oxp_runtime::ToolHints::default());
    /// ```
    pub const NONE: ToolHints = ToolHints {
        title: None,
        read_only: None,
        destructive: None,
        idempotent: None,
        open_world: None,
        tags: &[],
        examples: &[],
        deprecated: None,
        confirm: None,
        cannot_ask: None,
        task: None,
        always_load: false,
        search_hint: None,
    };

    /// Hints from `#[tool]`'s expansion (the struct is `#[non_exhaustive]` so it may grow).
    #[doc(hidden)]
    #[allow(clippy::too_many_arguments)]
    pub const fn __new(
        title: Option<&'static str>,
        read_only: Option<bool>,
        destructive: Option<bool>,
        idempotent: Option<bool>,
        open_world: Option<bool>,
        tags: &'static [&'static str],
        examples: &'static [&'static str],
        deprecated: Option<&'static str>,
        confirm: Option<&'static str>,
        cannot_ask: Option<crate::ask::CannotAsk>,
        task: Option<crate::tasks::TaskSupport>,
    ) -> ToolHints {
        ToolHints {
            title,
            read_only,
            destructive,
            idempotent,
            open_world,
            tags,
            examples,
            deprecated,
            confirm,
            cannot_ask,
            task,
            always_load: false,
            search_hint: None,
        }
    }

    /// The tool-search hints from `#[tool]`'s expansion.
    #[doc(hidden)]
    pub const fn __search(
        mut self,
        always_load: bool,
        search_hint: Option<&'static str>,
    ) -> ToolHints {
        self.always_load = always_load;
        self.search_hint = search_hint;
        self
    }
}
