//! Resources and prompts: what a server offers besides tools, written like tools.
//!
//! A **resource** is data a model or a user reads by URI (a file, a record, a schema):
//! `#[resource(uri = "…")]` on a function that returns it. The URI is fixed
//! (`"config://app"`), or a template whose `{params}` are the function's parameters
//! (`"file:///logs/{date}"`). A **prompt** is a template a user picks from the host's menu:
//! `#[prompt]` on a function whose parameters are its arguments and which returns its messages.
//! Both stay plain functions a unit test calls, are registered like tools (every one linked into
//! the binary with [`Registry::from_inventory`](crate::Registry::from_inventory), or one by one
//! with [`RegistryBuilder::resource`](crate::RegistryBuilder::resource) and
//! [`RegistryBuilder::prompt`](crate::RegistryBuilder::prompt)), and run through the same
//! pipeline as a call: the concurrency limit, the time limit, panics contained, the result cap,
//! metrics by resource and prompt. MCP serves them (`resources/*`, `prompts/*`,
//! `completion/complete`); OXP 1.0 has no such primitives.
//!
//! ```
//! use oxp_runtime::prompt::Message;
//! use oxp_runtime::{prompt, resource, Registry};
//!
//! /// The application's settings.
//! #[resource(uri = "config://app", mime_type = "application/json")]
//! fn app_config() -> String {
//!     r#"{"theme": "dark"}"#.into()
//! }
//!
//! /// One day of the server's log.
//! #[resource(uri = "file:///logs/{date}")]
//! async fn log_of(
//!     /// The day, `YYYY-MM-DD`.
//!     date: String,
//! ) -> String {
//!     format!("no entries on {date}")
//! }
//!
//! /// Review a piece of code.
//! #[prompt(title = "Code review")]
//! fn review(
//!     /// The code to review.
//!     code: String,
//!     /// What to pay attention to.
//!     focus: Option<String>,
//! ) -> Vec<Message> {
//!     let focus = focus.unwrap_or_else(|| "correctness".into());
//!     vec![Message::user(format!("Review this code for {focus}:\n{code}"))]
//! }
//!
//! # tokio::runtime::Runtime::new().unwrap().block_on(async {
//! // Still plain functions…
//! assert_eq!(log_of("2026-01-01".into()).await, "no entries on 2026-01-01");
//! // …and registered resources and prompts.
//! let registry = Registry::builder()
//!     .resource(app_config::RESOURCE)
//!     .resource(log_of::RESOURCE)
//!     .prompt(review::PROMPT)
//!     .build()
//!     .unwrap();
//! assert_eq!(registry.resources().len(), 2);
//! assert_eq!(registry.prompts()[0].descriptor().name, "review");
//! # });
//! ```

use schemars::{Schema, SchemaGenerator};
use serde_json::Value;

use crate::content::{Content, Resource};
use crate::descriptor::{Invoke, InvokeError, InvokeResult};
use crate::error::ToolError;

/// Says that the resource at `uri` changed: every MCP client connected to this process that
/// subscribed to exactly this URI (`resources/subscribe`) is sent
/// `notifications/resources/updated`, and reads it again if it wants the new contents.
///
/// Call it wherever the data behind a resource changes — a tool that wrote it, a watcher, a
/// timer. It never blocks and never fails, and with no one subscribed it only checks that.
/// Notifications reach clients on a connection (stdio, `<bin> mcp`); stateless HTTP has no
/// stream to carry them, so `/mcp` does not declare `resources.subscribe` (see
/// [the guide](https://docs.rs/oxp-runtime/latest/oxp_runtime/guide/resources_prompts_skills/index.html#subscriptions-served-over-stdio-acknowledged-over-http)).
/// A template's resource is named by the URI read
/// (`file:///logs/monday`), not the template.
///
/// ```
/// use std::sync::Mutex;
/// use oxp_runtime::{resource, tool};
///
/// static NOTE: Mutex<String> = Mutex::new(String::new());
///
/// /// Today's note.
/// #[resource(uri = "notes://today")]
/// fn today() -> String {
///     NOTE.lock().unwrap().clone()
/// }
///
/// /// Rewrite today's note.
/// #[tool(toolkit = "Notes", version = "1.0.0")]
/// fn write_note(text: String) {
///     *NOTE.lock().unwrap() = text;
///     oxp_runtime::resource::changed("notes://today");
/// }
///
/// write_note("buy milk".into());
/// assert_eq!(today(), "buy milk");
/// ```
pub fn changed(uri: impl Into<String>) {
    let changes = changes_sender();
    if changes.receiver_count() > 0 {
        // An error only says no one listens any more.
        let _ = changes.send(uri.into().into());
    }
}

/// Changes not yet taken by a listener that fell behind; past this it is told it lagged.
const CHANGES_QUEUE: usize = 256;

fn changes_sender() -> &'static tokio::sync::broadcast::Sender<std::sync::Arc<str>> {
    static CHANGES: std::sync::OnceLock<tokio::sync::broadcast::Sender<std::sync::Arc<str>>> =
        std::sync::OnceLock::new();
    CHANGES.get_or_init(|| tokio::sync::broadcast::channel(CHANGES_QUEUE).0)
}

/// Every URI [`changed`] is given from now on, for the MCP front's subscriptions.
#[doc(hidden)]
pub fn changes() -> tokio::sync::broadcast::Receiver<std::sync::Arc<str>> {
    changes_sender().subscribe()
}

/// One parameter of a resource template or argument of a prompt, as the attribute writes it.
///
/// ```
/// use oxp_runtime::resource;
///
/// /// A user's profile.
/// #[resource(uri = "users://{id}/profile")]
/// fn profile(
///     /// The user's id.
///     id: u64,
/// ) -> String {
///     format!("user {id}")
/// }
///
/// let argument = &profile::RESOURCE.arguments[0];
/// assert_eq!((argument.name, argument.description), ("id", "The user's id."));
/// ```
#[derive(Clone, Copy)]
pub struct Argument {
    /// Its name: the template's `{name}`, the prompt argument's name.
    pub name: &'static str,
    /// Its `///` doc, or empty.
    pub description: &'static str,
    /// Its type's schema, and whether it may be left out (an `Option`).
    pub schema: fn(&mut SchemaGenerator) -> (Schema, bool),
    /// `#[complete(fn)]`: the values to offer for what the user typed so far.
    pub complete: Option<fn(&str) -> Vec<String>>,
}

impl std::fmt::Debug for Argument {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Argument")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

/// A resource, as `#[resource]` registers it: `fn_name::RESOURCE`.
///
/// ```
/// use oxp_runtime::resource;
///
/// /// The application's settings.
/// #[resource(uri = "config://app", name = "settings", mime_type = "application/json")]
/// fn app_config() -> String { "{}".into() }
///
/// let descriptor = app_config::RESOURCE;
/// assert_eq!((descriptor.uri, descriptor.name), ("config://app", "settings"));
/// assert_eq!(descriptor.description, "The application's settings.");
/// assert_eq!(descriptor.mime_type, Some("application/json"));
/// ```
#[derive(Clone, Copy)]
pub struct ResourceDescriptor {
    /// The fixed URI, or the URI template (RFC 6570, level 1: `{name}`).
    pub uri: &'static str,
    /// Its name (`name = "…"`, else the fn's name).
    pub name: &'static str,
    /// A human-readable name for UIs (`title = "…"`).
    pub title: Option<&'static str>,
    /// The fn's doc comment.
    pub description: &'static str,
    /// The media type of what it returns (`mime_type = "…"`).
    pub mime_type: Option<&'static str>,
    /// The template's parameters, in the fn's order.
    pub arguments: &'static [Argument],
    /// OAuth scopes a caller's access token must grant to see and read it
    /// (`scopes = ["files:read"]`), as a tool's `scopes`: callers without them do not find it
    /// in `resources/list` or `resources/templates/list`, and a read is answered `403 insufficient_scope`.
    pub scopes: &'static [&'static str],
    /// Its own time limit, overriding the server's default (`timeout_ms = …`).
    pub timeout_ms: Option<u64>,
    /// Reads it: the glue takes `{"uri": "…", "arguments": {"name": "value"}}` and returns
    /// the contents (a list of [`content::Resource`](crate::content::Resource)).
    pub read: Invoke,
    /// `module_path!()` where the fn is.
    pub module_path: &'static str,
    /// The fn's name in Rust.
    pub fn_name: &'static str,
    /// `file!()`.
    pub file: &'static str,
    /// `line!()`.
    pub line: u32,
}

impl ResourceDescriptor {
    /// Where the fn is defined, for error messages: `crate::module::fn_name (src/lib.rs:12)`.
    ///
    /// ```
    /// /// Settings.
    /// #[oxp_runtime::resource(uri = "config://app")]
    /// fn settings() -> String { "{}".into() }
    /// assert!(settings::RESOURCE.location().contains("::settings ("));
    /// ```
    pub fn location(&self) -> String {
        format!(
            "{}::{} ({}:{})",
            self.module_path, self.fn_name, self.file, self.line
        )
    }

    /// Whether the URI is a template (it has parameters).
    ///
    /// ```
    /// /// A day's log.
    /// #[oxp_runtime::resource(uri = "file:///logs/{day}")]
    /// fn log(day: String) -> String { day }
    /// assert!(log::RESOURCE.is_template());
    /// ```
    pub fn is_template(&self) -> bool {
        !self.arguments.is_empty()
    }
}

impl std::fmt::Debug for ResourceDescriptor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ResourceDescriptor")
            .field("uri", &self.uri)
            .field("at", &self.location())
            .finish_non_exhaustive()
    }
}

inventory::collect!(ResourceDescriptor);

/// A prompt, as `#[prompt]` registers it: `fn_name::PROMPT`.
///
/// ```
/// use oxp_runtime::prompt;
///
/// /// Greet someone.
/// #[prompt(name = "greet", title = "Greeting")]
/// fn greeting(
///     /// Whom to greet.
///     name: String,
/// ) -> String {
///     format!("Say hello to {name}.")
/// }
///
/// let descriptor = greeting::PROMPT;
/// assert_eq!((descriptor.name, descriptor.title), ("greet", Some("Greeting")));
/// assert_eq!(descriptor.arguments[0].name, "name");
/// ```
#[derive(Clone, Copy)]
pub struct PromptDescriptor {
    /// Its name (`name = "…"`, else the fn's name).
    pub name: &'static str,
    /// A human-readable name for UIs (`title = "…"`).
    pub title: Option<&'static str>,
    /// The fn's doc comment.
    pub description: &'static str,
    /// Its arguments, in the fn's order.
    pub arguments: &'static [Argument],
    /// OAuth scopes a caller's access token must grant to see and render it
    /// (`scopes = ["files:read"]`), as a tool's `scopes`: callers without them do not find it
    /// in `prompts/list`, and a get is answered `403 insufficient_scope`.
    pub scopes: &'static [&'static str],
    /// Its own time limit, overriding the server's default (`timeout_ms = …`).
    pub timeout_ms: Option<u64>,
    /// Renders it: the glue takes `{"arguments": {"name": "value"}}` and returns the
    /// messages (a list of [`prompt::Message`](crate::prompt::Message)).
    pub get: Invoke,
    /// `module_path!()` where the fn is.
    pub module_path: &'static str,
    /// The fn's name in Rust.
    pub fn_name: &'static str,
    /// `file!()`.
    pub file: &'static str,
    /// `line!()`.
    pub line: u32,
}

impl PromptDescriptor {
    /// Where the fn is defined, for error messages: `crate::module::fn_name (src/lib.rs:12)`.
    ///
    /// ```
    /// /// Greet.
    /// #[oxp_runtime::prompt]
    /// fn greet() -> String { "Say hello.".into() }
    /// assert!(greet::PROMPT.location().contains("::greet ("));
    /// ```
    pub fn location(&self) -> String {
        format!(
            "{}::{} ({}:{})",
            self.module_path, self.fn_name, self.file, self.line
        )
    }
}

impl std::fmt::Debug for PromptDescriptor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PromptDescriptor")
            .field("name", &self.name)
            .field("at", &self.location())
            .finish_non_exhaustive()
    }
}

inventory::collect!(PromptDescriptor);

/// What a `#[resource]` fn may return: text (`String`, `&'static str`), bytes (`Vec<u8>`, sent
/// base64 with the attribute's `mime_type`), a [`Resource`] or a list of them, [`Contents`]
/// (each block as a resource's contents), or a `Result` of one of these.
///
/// ```
/// use oxp_runtime::content::{Content, Resource};
/// use oxp_runtime::resource::ResourceOutput;
///
/// let text = "hello".into_contents("note://a", None).unwrap();
/// assert!(matches!(&text[0], Resource::Text { text, mime_type, .. }
///     if text == "hello" && mime_type.as_deref() == Some("text/plain")));
/// let bytes = vec![1u8, 2].into_contents("blob://b", Some("image/png")).unwrap();
/// assert!(matches!(&bytes[0], Resource::Blob { blob, .. } if blob == "AQI="));
/// ```
///
/// [`Contents`]: crate::content::Contents
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be returned from a resource",
    label = "a #[resource] returns text, bytes or resource contents",
    note = "return `String` (text), `Vec<u8>` (bytes, with `mime_type = \"…\"` on the attribute), \
            `content::Resource`, `Vec<content::Resource>`, `content::Contents`, or a `Result` of one"
)]
pub trait ResourceOutput {
    /// The contents read from `uri`, with the attribute's media type if it gave one.
    fn into_contents(self, uri: &str, mime_type: Option<&str>) -> Result<Vec<Resource>, ToolError>;
}

fn text_contents(uri: &str, mime_type: Option<&str>, text: String) -> Vec<Resource> {
    vec![Resource::Text {
        uri: uri.to_owned(),
        mime_type: Some(mime_type.unwrap_or("text/plain").to_owned()),
        text,
    }]
}

impl ResourceOutput for String {
    fn into_contents(self, uri: &str, mime_type: Option<&str>) -> Result<Vec<Resource>, ToolError> {
        Ok(text_contents(uri, mime_type, self))
    }
}

impl ResourceOutput for &'static str {
    fn into_contents(self, uri: &str, mime_type: Option<&str>) -> Result<Vec<Resource>, ToolError> {
        Ok(text_contents(uri, mime_type, self.to_owned()))
    }
}

impl ResourceOutput for Vec<u8> {
    fn into_contents(self, uri: &str, mime_type: Option<&str>) -> Result<Vec<Resource>, ToolError> {
        Ok(vec![Resource::Blob {
            uri: uri.to_owned(),
            mime_type: Some(mime_type.unwrap_or("application/octet-stream").to_owned()),
            blob: base64::Engine::encode(&base64::engine::general_purpose::STANDARD, self),
        }])
    }
}

impl ResourceOutput for Resource {
    fn into_contents(self, _: &str, _: Option<&str>) -> Result<Vec<Resource>, ToolError> {
        Ok(vec![self])
    }
}

impl ResourceOutput for Vec<Resource> {
    fn into_contents(self, _: &str, _: Option<&str>) -> Result<Vec<Resource>, ToolError> {
        Ok(self)
    }
}

impl<S> ResourceOutput for crate::content::Contents<S> {
    /// Text as text, images and audio as blobs of their type, resources as they are; a link is
    /// not contents (a resource that points elsewhere returns that resource's contents).
    fn into_contents(self, uri: &str, mime_type: Option<&str>) -> Result<Vec<Resource>, ToolError> {
        self.content
            .into_iter()
            .map(|block| match block {
                Content::Text { text } => Ok(text_contents(uri, mime_type, text).remove(0)),
                Content::Image { data, mime_type } | Content::Audio { data, mime_type } => {
                    Ok(Resource::Blob {
                        uri: uri.to_owned(),
                        mime_type: Some(mime_type),
                        blob: data,
                    })
                }
                Content::Resource { resource } => Ok(resource),
                Content::ResourceLink { .. } => Err(ToolError::new(
                    "A resource's contents cannot be a link: return the linked resource's contents.",
                )),
            })
            .collect()
    }
}

impl<T: ResourceOutput, E: Into<ToolError>> ResourceOutput for Result<T, E> {
    fn into_contents(self, uri: &str, mime_type: Option<&str>) -> Result<Vec<Resource>, ToolError> {
        self.map_err(Into::into)?.into_contents(uri, mime_type)
    }
}

/// An argument as the registry checked it: whether it is required, and its enum's values.
#[derive(Debug, Clone)]
pub(crate) struct CheckedArgument {
    pub(crate) required: bool,
    #[doc(hidden)]
    pub variants: Vec<String>,
}

fn check_arguments(arguments: &'static [Argument]) -> Vec<CheckedArgument> {
    let mut generator = crate::schema::input_generator();
    arguments
        .iter()
        .map(|argument| {
            let (schema, optional) = (argument.schema)(&mut generator);
            // An enum's schema may be a reference into the generator's definitions.
            let schema = match schema.get("$ref").and_then(Value::as_str) {
                Some(reference) => reference
                    .rsplit('/')
                    .next()
                    .and_then(|name| generator.definitions().get(name))
                    .and_then(|found| Schema::try_from(found.clone()).ok())
                    .unwrap_or(schema),
                None => schema,
            };
            CheckedArgument {
                required: !optional,
                variants: enum_values(&schema),
            }
        })
        .collect()
}

/// A resource that passed the registry's checks.
///
/// ```
/// use oxp_runtime::{resource, Registry};
///
/// /// A day's log.
/// #[resource(uri = "file:///logs/{day}")]
/// fn log(day: String) -> String { day }
///
/// let registry = Registry::builder().resource(log::RESOURCE).build().unwrap();
/// let registered = &registry.resources()[0];
/// assert_eq!(registered.descriptor().uri, "file:///logs/{day}");
/// assert!(registered.matches("file:///logs/monday").is_some());
/// ```
#[derive(Debug)]
pub struct RegisteredResource {
    descriptor: &'static ResourceDescriptor,
    template: Template,
    arguments: Vec<CheckedArgument>,
}

impl RegisteredResource {
    /// `descriptor` as the registry accepted it, served by `template` (parsed from its URI).
    pub(crate) fn new(descriptor: &'static ResourceDescriptor, template: Template) -> Self {
        RegisteredResource {
            descriptor,
            template,
            arguments: check_arguments(descriptor.arguments),
        }
    }

    /// What `#[resource]` registered.
    ///
    /// ```
    /// /// Settings.
    /// #[oxp_runtime::resource(uri = "config://app")]
    /// fn settings() -> String { "{}".into() }
    /// let registry = oxp_runtime::Registry::builder().resource(settings::RESOURCE).build().unwrap();
    /// assert_eq!(registry.resources()[0].descriptor().fn_name, "settings");
    /// ```
    pub fn descriptor(&self) -> &'static ResourceDescriptor {
        self.descriptor
    }

    /// The template's values when this resource serves `uri`.
    ///
    /// ```
    /// /// A user.
    /// #[oxp_runtime::resource(uri = "users://{id}")]
    /// fn user(id: u32) -> String { id.to_string() }
    /// let registry = oxp_runtime::Registry::builder().resource(user::RESOURCE).build().unwrap();
    /// assert_eq!(registry.resources()[0].matches("users://7").unwrap()["id"], "7");
    /// ```
    pub fn matches(&self, uri: &str) -> Option<serde_json::Map<String, Value>> {
        self.template.matches(uri)
    }

    /// The values completion offers for the template parameter `name`, given what was typed.
    #[doc(hidden)]
    pub fn complete(&self, name: &str, typed: &str) -> Option<(Vec<String>, usize)> {
        complete_argument(self.descriptor.arguments, &self.arguments, name, typed)
    }
}

/// A prompt that passed the registry's checks.
///
/// ```
/// use oxp_runtime::{prompt, Registry};
///
/// /// Greet someone.
/// #[prompt]
/// fn greet(name: String, title: Option<String>) -> String { format!("Greet {name}.") }
///
/// let registry = Registry::builder().prompt(greet::PROMPT).build().unwrap();
/// let registered = registry.prompt("greet").unwrap();
/// assert_eq!(registered.required(), [true, false]);
/// ```
#[derive(Debug)]
pub struct RegisteredPrompt {
    descriptor: &'static PromptDescriptor,
    arguments: Vec<CheckedArgument>,
}

impl RegisteredPrompt {
    /// `descriptor` as the registry accepted it.
    pub(crate) fn new(descriptor: &'static PromptDescriptor) -> Self {
        RegisteredPrompt {
            descriptor,
            arguments: check_arguments(descriptor.arguments),
        }
    }

    /// What `#[prompt]` registered.
    ///
    /// ```
    /// /// Greet.
    /// #[oxp_runtime::prompt]
    /// fn greet() -> String { "Say hello.".into() }
    /// let registry = oxp_runtime::Registry::builder().prompt(greet::PROMPT).build().unwrap();
    /// assert_eq!(registry.prompts()[0].descriptor().description, "Greet.");
    /// ```
    pub fn descriptor(&self) -> &'static PromptDescriptor {
        self.descriptor
    }

    /// Whether each argument is required (not an `Option`), in order.
    ///
    /// ```
    /// /// Greet.
    /// #[oxp_runtime::prompt]
    /// fn greet(name: Option<String>) -> String { "Say hello.".into() }
    /// let registry = oxp_runtime::Registry::builder().prompt(greet::PROMPT).build().unwrap();
    /// assert_eq!(registry.prompts()[0].required(), [false]);
    /// ```
    pub fn required(&self) -> Vec<bool> {
        self.arguments.iter().map(|a| a.required).collect()
    }

    /// The values completion offers for the argument `name`, given what was typed.
    #[doc(hidden)]
    pub fn complete(&self, name: &str, typed: &str) -> Option<(Vec<String>, usize)> {
        complete_argument(self.descriptor.arguments, &self.arguments, name, typed)
    }
}

fn complete_argument(
    arguments: &[Argument],
    checked: &[CheckedArgument],
    name: &str,
    typed: &str,
) -> Option<(Vec<String>, usize)> {
    let i = arguments.iter().position(|a| a.name == name)?;
    Some(complete(arguments[i].complete, &checked[i].variants, typed))
}

/// The value of a template parameter or prompt argument: a string on the wire, read as the
/// parameter's type (a JSON string first, then the text as JSON, so `"42"` is a `u64` and
/// `"true"` a `bool`). An absent one is `null`, which only an `Option` takes.
pub(crate) fn argument<T: serde::de::DeserializeOwned>(
    input: &Value,
    name: &str,
) -> Result<T, InvokeError> {
    let missing = || {
        InvokeError::Input(<serde_json::Error as serde::de::Error>::custom(format!(
            "the argument `{name}` is required"
        )))
    };
    match input.get("arguments").and_then(|a| a.get(name)) {
        None | Some(Value::Null) => serde_json::from_value(Value::Null).map_err(|_| missing()),
        Some(Value::String(text)) => serde_json::from_value(Value::String(text.clone()))
            .or_else(|first| serde_json::from_str(text).map_err(|_| first))
            .map_err(|e| {
                InvokeError::Input(<serde_json::Error as serde::de::Error>::custom(format!(
                    "the argument `{name}`: {e}"
                )))
            }),
        Some(other) => serde_json::from_value(other.clone()).map_err(InvokeError::Input),
    }
}

/// What the glue of a resource makes of the fn's return.
pub(crate) fn contents<T: ResourceOutput>(
    returned: T,
    uri: &str,
    mime_type: Option<&str>,
) -> InvokeResult {
    let contents = returned.into_contents(uri, mime_type)?;
    if contents.is_empty() {
        return Err(ToolError::new("The resource returned no contents.").into());
    }
    serde_json::to_value(contents)
        .map(Some)
        .map_err(InvokeError::Output)
}

/// A URI template (RFC 6570 level 1: literal text and `{name}`), matched against URIs.
#[derive(Debug, Clone)]
pub(crate) struct Template {
    parts: Vec<Part>,
}

#[derive(Debug, Clone, PartialEq)]
enum Part {
    Literal(String),
    Variable(String),
}

impl Template {
    /// Parses `uri`; the problem, in words, when its braces do not pair or a name is not one.
    pub(crate) fn parse(uri: &str) -> Result<Template, String> {
        let mut parts = Vec::new();
        let mut rest = uri;
        while let Some(open) = rest.find('{') {
            if rest[..open].contains('}') {
                return Err(format!("the URI `{uri}` has a `}}` without its `{{`"));
            }
            if open > 0 {
                parts.push(Part::Literal(rest[..open].to_owned()));
            }
            let after = &rest[open + 1..];
            let Some(close) = after.find('}') else {
                return Err(format!("the URI `{uri}` has a `{{` without its `}}`"));
            };
            let name = &after[..close];
            if name.is_empty() || !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
                return Err(format!(
                    "`{{{name}}}` in the URI `{uri}` is not a parameter: write `{{name}}` with a parameter's name"
                ));
            }
            if matches!(parts.last(), Some(Part::Variable(_))) {
                return Err(format!(
                    "the URI `{uri}` has two parameters with nothing between them: put a literal (`/`, `-`) between `{{…}}`s so a URI can be split"
                ));
            }
            parts.push(Part::Variable(name.to_owned()));
            rest = &after[close + 1..];
        }
        if rest.contains('}') {
            return Err(format!("the URI `{uri}` has a `}}` without its `{{`"));
        }
        if !rest.is_empty() {
            parts.push(Part::Literal(rest.to_owned()));
        }
        Ok(Template { parts })
    }

    /// The parameters' names, in order.
    pub(crate) fn variables(&self) -> impl Iterator<Item = &str> {
        self.parts.iter().filter_map(|part| match part {
            Part::Variable(name) => Some(name.as_str()),
            Part::Literal(_) => None,
        })
    }

    /// The values of the parameters when `uri` matches: each one a non-empty run up to the
    /// next literal, without `/` (a path segment), percent-decoded.
    pub(crate) fn matches(&self, uri: &str) -> Option<serde_json::Map<String, Value>> {
        let mut values = serde_json::Map::new();
        let mut rest = uri;
        let mut parts = self.parts.iter().peekable();
        while let Some(part) = parts.next() {
            match part {
                Part::Literal(text) => rest = rest.strip_prefix(text.as_str())?,
                Part::Variable(name) => {
                    let end = match parts.peek() {
                        Some(Part::Literal(next)) => rest.find(next.as_str())?,
                        _ => rest.len(),
                    };
                    let value = &rest[..end];
                    if value.is_empty() || value.contains('/') {
                        return None;
                    }
                    values.insert(name.clone(), Value::String(percent_decode(value)?));
                    rest = &rest[end..];
                }
            }
        }
        rest.is_empty().then_some(values)
    }
}

/// `text` percent-decoded, if every `%` starts an escape of two hex digits and the bytes are
/// UTF-8: a URI with a malformed escape matches nothing (the crate would pass one through as it
/// is).
fn percent_decode(text: &str) -> Option<String> {
    let malformed = text.match_indices('%').any(|(at, _)| {
        !(text.as_bytes().get(at + 1..at + 3))
            .is_some_and(|hex| hex.iter().all(u8::is_ascii_hexdigit))
    });
    if malformed {
        return None;
    }
    let decoded = percent_encoding::percent_decode_str(text)
        .decode_utf8()
        .ok()?;
    Some(decoded.into_owned())
}

/// The values an argument's type allows, when it is an enum of strings (`enum`, or `oneOf`
/// of `const`s as schemars writes documented variants): what completion offers without a
/// `#[complete]` fn.
pub(crate) fn enum_values(schema: &Schema) -> Vec<String> {
    let value = schema.as_value();
    let strings = |list: &Value| -> Vec<String> {
        list.as_array()
            .into_iter()
            .flatten()
            .filter_map(|v| v.as_str().map(str::to_owned))
            .collect()
    };
    if let Some(list) = value.get("enum") {
        return strings(list);
    }
    for key in ["oneOf", "anyOf"] {
        if let Some(Value::Array(options)) = value.get(key) {
            let consts: Vec<String> = options
                .iter()
                .flat_map(|option| {
                    option
                        .get("const")
                        .and_then(Value::as_str)
                        .map(|s| vec![s.to_owned()])
                        .or_else(|| option.get("enum").map(strings))
                        .unwrap_or_default()
                })
                .collect();
            if !consts.is_empty() {
                return consts;
            }
        }
    }
    Vec::new()
}

/// The most values a completion answer carries (MCP's limit).
#[doc(hidden)]
pub const MAX_COMPLETIONS: usize = 100;

/// The values offered for `typed` so far: the author's fn's, or the enum's that start with
/// it; at most [`MAX_COMPLETIONS`], and how many there were.
#[doc(hidden)]
pub fn complete(
    complete: Option<fn(&str) -> Vec<String>>,
    variants: &[String],
    typed: &str,
) -> (Vec<String>, usize) {
    let mut values: Vec<String> = match complete {
        Some(complete) => complete(typed),
        None => variants
            .iter()
            .filter(|v| v.starts_with(typed))
            .cloned()
            .collect(),
    };
    let total = values.len();
    values.truncate(MAX_COMPLETIONS);
    (values, total)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_template_matches_its_uris_and_no_others() {
        let template = Template::parse("test://template/{id}/data").unwrap();
        assert_eq!(template.variables().collect::<Vec<_>>(), ["id"]);
        let values = template.matches("test://template/123/data").unwrap();
        assert_eq!(values["id"], "123");
        assert!(template.matches("test://template/123/other").is_none());
        assert!(template.matches("test://template//data").is_none());
        assert!(template.matches("test://template/1/2/data").is_none());
        let two = Template::parse("file:///{dir}/{name}.txt").unwrap();
        let values = two.matches("file:///logs/a%20b.txt").unwrap();
        assert_eq!(
            (&values["dir"], &values["name"]),
            (&"logs".into(), &"a b".into())
        );
        let fixed = Template::parse("config://app").unwrap();
        assert!(fixed.matches("config://app").unwrap().is_empty());
        assert!(fixed.matches("config://apps").is_none());
    }

    /// A value is decoded only when every escape is two hex digits and the bytes are UTF-8.
    #[test]
    fn a_value_is_percent_decoded_or_matches_nothing() {
        let template = Template::parse("file:///{name}").unwrap();
        let name = |uri: &str| template.matches(uri).map(|values| values["name"].clone());
        assert_eq!(name("file:///a%2Fb%C3%A9%e2%82%ac"), Some("a/bé€".into()));
        assert_eq!(
            name("file:///a+b"),
            Some("a+b".into()),
            "`+` is no space in a URI"
        );
        for malformed in ["%", "a%2", "a%zz", "a%+5", "%%41", "%C3", "%FF"] {
            assert_eq!(name(&format!("file:///{malformed}")), None, "{malformed}");
        }
    }

    #[test]
    fn a_malformed_template_is_refused_in_words() {
        assert!(
            Template::parse("a://{x")
                .unwrap_err()
                .contains("without its `}`")
        );
        assert!(
            Template::parse("a://x}")
                .unwrap_err()
                .contains("without its `{`")
        );
        assert!(
            Template::parse("a://{x-y}")
                .unwrap_err()
                .contains("not a parameter")
        );
        assert!(
            Template::parse("a://{x}{y}")
                .unwrap_err()
                .contains("nothing between")
        );
    }

    #[test]
    fn arguments_are_read_as_their_types() {
        let input = serde_json::json!({"arguments": {"n": "42", "s": "42", "b": "true"}});
        assert_eq!(argument::<u64>(&input, "n").unwrap(), 42);
        assert_eq!(argument::<String>(&input, "s").unwrap(), "42");
        assert!(argument::<bool>(&input, "b").unwrap());
        assert_eq!(argument::<Option<u8>>(&input, "absent").unwrap(), None);
        let missing = argument::<String>(&input, "absent").unwrap_err();
        assert!(
            matches!(missing, InvokeError::Input(e) if e.to_string().contains("`absent` is required"))
        );
    }

    #[test]
    fn completion_filters_an_enum_by_what_was_typed_and_caps_the_answer() {
        let variants = vec!["python".into(), "perl".into(), "rust".into()];
        assert_eq!(complete(None, &variants, "p").0, ["python", "perl"]);
        fn many(_: &str) -> Vec<String> {
            (0..150).map(|i| i.to_string()).collect()
        }
        let (values, total) = complete(Some(many), &[], "");
        assert_eq!((values.len(), total), (MAX_COMPLETIONS, 150));
    }
}
