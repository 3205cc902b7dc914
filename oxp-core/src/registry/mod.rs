//! The registry: every tool of the binary (or a chosen list), checked once, indexed by id, with its
//! published definition and its compiled input validator.

use std::collections::{BTreeSet, HashMap};
use std::fmt;
use std::sync::OnceLock;

use crate::descriptor::ToolDescriptor;
use crate::protocol::{
    AuthorizationRequirement, OAuth2Requirement, SecretRequirement, ToolDefinition,
    ToolRequirements,
};
use crate::resource::{PromptDescriptor, ResourceDescriptor};
pub use crate::resource::{RegisteredPrompt, RegisteredResource};
use crate::selection::Selection;
use crate::version::{ParseError, ToolId, ToolVersion, VersionRequest};
use crate::{rules, schema};

mod problems;
mod resources;
mod skills;

pub(crate) use problems::scopes_problem;
pub use problems::{RegistryError, RegistryProblem};

/// The longest wire name OXP (and every model provider) accepts.
///
/// ```
/// assert_eq!(oxp_runtime::registry::MAX_NAME_LEN, 64);
/// ```
pub const MAX_NAME_LEN: usize = rules::MAX_NAME_LEN;
/// The longest description a tool may have (the provider limit of seed 003 §7).
///
/// ```
/// assert_eq!(oxp_runtime::registry::MAX_DESCRIPTION_LEN, 1024);
/// ```
pub const MAX_DESCRIPTION_LEN: usize = rules::MAX_DESCRIPTION_LEN;

/// A lookup table keyed by id, path or wire name. Built once and only read after, so a fast
/// hash serves (no key a caller sends is ever inserted): std's SipHash cost ~200 instructions
/// more per call (callgrind).
type Index<V> = HashMap<String, V, foldhash::fast::RandomState>;

/// A tool that passed every registration check.
///
/// ```
/// use oxp_runtime::{tool, Registry};
///
/// /// Add two integers.
/// #[tool(toolkit = "Calculator", version = "1.0.0")]
/// async fn add(a: i64, b: i64) -> i64 { a + b }
///
/// let registry = Registry::builder().tool(add::TOOL).build().unwrap();
/// let tool = registry.resolve("Calculator.Add").unwrap();
/// assert_eq!((tool.id(), tool.definition().name.as_str()), ("Calculator.Add@1.0.0", "Calculator_Add"));
/// assert!(tool.validator().is_valid(&serde_json::json!({"a": 1, "b": 2})));
/// ```
pub struct RegisteredTool {
    descriptor: &'static ToolDescriptor,
    version: ToolVersion,
    /// `Toolkit.Name@x.y.z`.
    id: String,
    /// `Toolkit_Name`.
    name: String,
    /// The definition as `GET /tools` sends it. Between uses, this is all a tool keeps of it:
    /// as a `Value`, a small tool's schemas take ~4 KB (a map is a 600-byte B-tree node even
    /// with one key), as JSON ~0.5 KB — for a server of 1,000 tools, most of its heap.
    json: Box<str>,
    /// Parsed from `json` when first asked for (the providers' and MCP's tool lists).
    definition: OnceLock<ToolDefinition>,
    /// Compiled at registration to check the schema, then dropped, and compiled for keeps on
    /// the first call: a compiled validator takes a few KB, and most tools of a large server
    /// are never called by a given process.
    validator: OnceLock<jsonschema::Validator>,
    /// `#[tool(example = …)]`, parsed and checked against the input schema at registration.
    examples: Box<[serde_json::Value]>,
}

impl RegisteredTool {
    /// What `#[tool]` registered.
    ///
    /// ```
    /// use oxp_runtime::{tool, Registry};
    ///
    /// /// Say hi.
    /// #[tool(toolkit = "Greeter", version = "1.2.0")]
    /// fn hi() -> String { "hi".into() }
    ///
    /// let registry = Registry::builder().tool(hi::TOOL).build().unwrap();
    /// assert_eq!(registry.tools()[0].descriptor().fn_name, "hi");
    /// ```
    pub fn descriptor(&self) -> &'static ToolDescriptor {
        self.descriptor
    }

    /// Whether a call of it can ask its caller anything: it has a `confirm` question, or it
    /// takes its [`ToolContext`](crate::ToolContext), where the questions are asked.
    ///
    /// ```
    /// use oxp_runtime::{Registry, ToolContext, tool};
    ///
    /// /// Add two integers.
    /// #[tool(toolkit = "Calc", version = "1.0.0")]
    /// async fn add(a: i64, b: i64) -> i64 { a + b }
    ///
    /// /// Delete a file.
    /// #[tool(toolkit = "Files", version = "1.0.0")]
    /// fn delete(ctx: &ToolContext, path: String) -> bool { ctx.confirm("delete", &path).is_ok() }
    ///
    /// let registry = Registry::builder().tool(add::TOOL).tool(delete::TOOL).build().unwrap();
    /// let asks: Vec<bool> = registry.tools().iter().map(|t| t.may_ask()).collect();
    /// assert_eq!(asks, [false, true]);
    /// ```
    pub fn may_ask(&self) -> bool {
        self.descriptor.takes_context || self.descriptor.hints.confirm.is_some()
    }

    /// What the tool tells hosts about itself (title, behaviour, tags, examples, deprecation).
    ///
    /// ```
    /// use oxp_runtime::{tool, Registry};
    ///
    /// /// Delete a file.
    /// #[tool(toolkit = "Files", version = "1.0.0", destructive, deprecated = "use Files.Trash")]
    /// fn delete(path: String) {}
    ///
    /// let registry = Registry::builder().tool(delete::TOOL).build().unwrap();
    /// let hints = registry.tools()[0].hints();
    /// assert_eq!((hints.destructive, hints.deprecated), (Some(true), Some("use Files.Trash")));
    /// ```
    pub fn hints(&self) -> &'static crate::descriptor::ToolHints {
        &self.descriptor.hints
    }

    /// The tool's input examples (`#[tool(example = …)]`), each checked against its input
    /// schema when the registry was built.
    ///
    /// ```
    /// use oxp_runtime::{tool, Registry};
    ///
    /// /// Add two numbers.
    /// #[tool(toolkit = "Calculator", version = "1.0.0", example = r#"{"a": 1, "b": 2}"#)]
    /// fn add(a: f64, b: f64) -> f64 { a + b }
    ///
    /// let registry = Registry::builder().tool(add::TOOL).build().unwrap();
    /// assert_eq!(registry.tools()[0].examples(), [serde_json::json!({"a": 1, "b": 2})]);
    /// ```
    pub fn examples(&self) -> &[serde_json::Value] {
        &self.examples
    }

    /// The description MCP hosts and models read: the tool's own, after `Deprecated: …` when the
    /// tool is (so a model prefers another without anyone renaming it).
    ///
    /// ```
    /// use oxp_runtime::{tool, Registry};
    ///
    /// /// Add two numbers.
    /// #[tool(toolkit = "Calculator", version = "1.0.0", deprecated = "use Calculator.Add@2")]
    /// fn add(a: f64, b: f64) -> f64 { a + b }
    ///
    /// let registry = Registry::builder().tool(add::TOOL).build().unwrap();
    /// assert_eq!(registry.tools()[0].description_for_models(), "Deprecated: use Calculator.Add@2. Add two numbers.");
    /// ```
    pub fn description_for_models(&self) -> std::borrow::Cow<'_, str> {
        let description = &self.definition().description;
        match self.descriptor.hints.deprecated {
            Some(why) => {
                let why = why.trim().trim_end_matches('.');
                format!("Deprecated: {why}. {description}").into()
            }
            None => description.as_str().into(),
        }
    }

    /// `Toolkit.Name@x.y.z`.
    ///
    /// ```
    /// use oxp_runtime::{tool, Registry};
    ///
    /// /// Say hi.
    /// #[tool(toolkit = "Greeter", version = "1.2.0")]
    /// fn hi() -> String { "hi".into() }
    ///
    /// let registry = Registry::builder().tool(hi::TOOL).build().unwrap();
    /// assert_eq!(registry.tools()[0].id(), "Greeter.Hi@1.2.0");
    /// ```
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The wire name, `Toolkit_Name`: what models and MCP clients call the tool.
    ///
    /// ```
    /// use oxp_runtime::{tool, Registry};
    ///
    /// /// Say hi.
    /// #[tool(toolkit = "Greeter", version = "1.2.0")]
    /// fn hi() -> String { "hi".into() }
    ///
    /// let registry = Registry::builder().tool(hi::TOOL).build().unwrap();
    /// assert_eq!(registry.tools()[0].name(), "Greeter_Hi");
    /// ```
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The tool's version.
    ///
    /// ```
    /// use oxp_runtime::{tool, Registry};
    ///
    /// /// Say hi.
    /// #[tool(toolkit = "Greeter", version = "1.2.0")]
    /// fn hi() -> String { "hi".into() }
    ///
    /// let registry = Registry::builder().tool(hi::TOOL).build().unwrap();
    /// assert_eq!(registry.tools()[0].version().minor, 2);
    /// ```
    pub fn version(&self) -> ToolVersion {
        self.version
    }

    /// The definition `GET /tools` publishes.
    ///
    /// ```
    /// use oxp_runtime::{tool, Registry};
    ///
    /// /// Say hi.
    /// #[tool(toolkit = "Greeter", version = "1.2.0")]
    /// fn hi() -> String { "hi".into() }
    ///
    /// let registry = Registry::builder().tool(hi::TOOL).build().unwrap();
    /// assert_eq!(registry.tools()[0].definition().version, "1.2.0");
    /// ```
    pub fn definition(&self) -> &ToolDefinition {
        self.definition.get_or_init(|| {
            serde_json::from_str(&self.json).expect("the registry wrote this definition")
        })
    }

    /// The definition as JSON, exactly as `GET /tools` lists it.
    ///
    /// ```
    /// use oxp_runtime::{tool, Registry};
    ///
    /// /// Say hi.
    /// #[tool(toolkit = "Greeter", version = "1.2.0")]
    /// fn hi() -> String { "hi".into() }
    ///
    /// let registry = Registry::builder().tool(hi::TOOL).build().unwrap();
    /// let json: serde_json::Value = serde_json::from_str(registry.tools()[0].definition_json()).unwrap();
    /// assert_eq!(json["id"], "Greeter.Hi@1.2.0");
    /// ```
    pub fn definition_json(&self) -> &str {
        &self.json
    }

    /// The input validator: checked at registration, compiled for keeps on first use.
    ///
    /// ```
    /// use oxp_runtime::{tool, Registry};
    ///
    /// /// Say hi.
    /// #[tool(toolkit = "Greeter", version = "1.2.0")]
    /// fn hi() -> String { "hi".into() }
    ///
    /// let registry = Registry::builder().tool(hi::TOOL).build().unwrap();
    /// assert!(registry.tools()[0].validator().is_valid(&serde_json::json!({})));
    /// ```
    pub fn validator(&self) -> &jsonschema::Validator {
        /// Only the input schema, read from the definition's JSON: a call's first use should
        /// not keep the whole definition parsed.
        #[derive(serde::Deserialize)]
        struct InputSchema {
            input_schema: serde_json::Value,
        }
        self.validator.get_or_init(|| {
            let definition = serde_json::from_str::<InputSchema>(&self.json)
                .expect("the registry wrote this definition");
            compile(definition.input_schema)
                .expect("the input schema compiled at registration, and compiling is deterministic")
        })
    }
}

impl fmt::Debug for RegisteredTool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RegisteredTool")
            .field("id", &self.id)
            .field("at", &self.descriptor.location())
            .finish_non_exhaustive()
    }
}

/// The tools a server serves.
///
/// ```
/// use oxp_runtime::{tool, Registry};
///
/// /// Add two numbers.
/// #[tool(toolkit = "Calculator", version = "1.0.0")]
/// async fn add(a: i64, b: i64) -> i64 { a + b }
///
/// /// Add two numbers, as floats.
/// #[tool(toolkit = "Calculator", name = "Add", version = "1.10.0")]
/// async fn add_floats(a: f64, b: f64) -> f64 { a + b }
///
/// let registry = Registry::builder().tool(add::TOOL).tool(add_floats::TOOL).build().unwrap();
/// assert_eq!(registry.resolve("Calculator.Add").unwrap().id(), "Calculator.Add@1.10.0");
/// assert_eq!(registry.resolve("Calculator.Add@1").unwrap().id(), "Calculator.Add@1.0.0");
/// assert!(registry.resolve("Calculator.Add@2").is_err());
/// ```
#[derive(Debug)]
pub struct Registry {
    tools: Vec<RegisteredTool>,
    /// `Toolkit.Name@x.y.z` → index into `tools`: the exact ids clients send most, found
    /// without parsing.
    by_id: Index<usize>,
    /// `Toolkit.Name` → indexes into `tools`, in ascending version order.
    by_path: Index<Vec<usize>>,
    /// `Toolkit_Name` → `Toolkit.Name`.
    by_wire_name: Index<String>,
    /// Resources, fixed URIs before templates, each group by URI.
    resources: Vec<RegisteredResource>,
    /// Prompts, by name.
    prompts: Vec<RegisteredPrompt>,
    /// Skills, by name.
    skills: Vec<crate::skill::RegisteredSkill>,
}

impl Registry {
    /// Every `#[tool]` linked into the binary.
    ///
    /// ```standalone_crate
    /// use oxp_runtime::{tool, Registry};
    ///
    /// /// Say hello.
    /// #[tool(toolkit = "Greeter", version = "1.0.0")]
    /// async fn hello(name: String) -> String {
    ///     format!("Hello, {name}!")
    /// }
    ///
    /// // No list to keep: every `#[tool]` in the binary is found.
    /// let registry = Registry::from_inventory().unwrap();
    /// assert_eq!(registry.tools().len(), 1);
    /// assert_eq!(registry.tools()[0].id(), "Greeter.Hello@1.0.0");
    /// ```
    pub fn from_inventory() -> Result<Registry, RegistryError> {
        Registry::builder().all().build()
    }

    /// A builder, starting empty.
    ///
    /// ```
    /// let empty = oxp_runtime::Registry::builder().build().unwrap();
    /// assert!(empty.tools().is_empty());
    /// ```
    pub fn builder() -> RegistryBuilder {
        RegistryBuilder::default()
    }

    /// Every tool, ordered by toolkit, name, then version.
    ///
    /// ```
    /// use oxp_runtime::{tool, Registry};
    ///
    /// /// Say hi.
    /// #[tool(toolkit = "Greeter", version = "1.2.0")]
    /// fn hi() -> String { "hi".into() }
    ///
    /// let registry = Registry::builder().tool(hi::TOOL).build().unwrap();
    /// assert_eq!(registry.tools().len(), 1);
    /// ```
    pub fn tools(&self) -> &[RegisteredTool] {
        &self.tools
    }

    /// Each tool with the name MCP lists it by: its wire name for the latest version, with the
    /// version as a suffix (`Calculator_Add__v1_0_0`) for an older one. Versions of one tool sit
    /// together, the latest last.
    #[doc(hidden)]
    pub fn listed_names(&self) -> impl Iterator<Item = (&RegisteredTool, String)> {
        let all = &self.tools;
        all.iter().enumerate().map(move |(i, tool)| {
            let latest = all.get(i + 1).is_none_or(|next| next.name() != tool.name());
            (tool, listed_name(tool, latest))
        })
    }

    /// The tool an MCP name names: a wire name's latest version, or an older version under the
    /// name [`listed_names`](Self::listed_names) gives it. No other spelling resolves (not the
    /// latest version's versioned name, not `__v01_0_0`), so a rule written against a listed
    /// name — a gateway's deny list, the scope check, the header checks — covers every call
    /// that reaches the tool, and reaches the version the call runs.
    #[doc(hidden)]
    pub fn resolve_mcp_name(&self, name: &str) -> Option<&RegisteredTool> {
        if let Some(tool) = self.resolve_wire_name(name) {
            return Some(tool);
        }
        let (wire_name, version) = name.rsplit_once(VERSION_MARK)?;
        let latest = self.resolve_wire_name(wire_name)?;
        let version: ToolVersion = version.replace('_', ".").parse().ok()?;
        let descriptor = latest.descriptor();
        let id = format!("{}.{}@{version}", descriptor.toolkit, descriptor.name);
        let tool = self.resolve(&id).ok()?;
        (tool.id() != latest.id() && listed_name(tool, false) == name).then_some(tool)
    }

    /// Every resource: fixed URIs first, then templates, each by URI.
    ///
    /// ```
    /// use oxp_runtime::{resource, Registry};
    ///
    /// /// A day's log.
    /// #[resource(uri = "file:///logs/{day}")]
    /// fn log(day: String) -> String { day }
    ///
    /// /// Settings.
    /// #[resource(uri = "config://app")]
    /// fn settings() -> String { "{}".into() }
    ///
    /// let registry = Registry::builder().resource(log::RESOURCE).resource(settings::RESOURCE).build().unwrap();
    /// let uris: Vec<&str> = registry.resources().iter().map(|r| r.descriptor().uri).collect();
    /// assert_eq!(uris, ["config://app", "file:///logs/{day}"]);
    /// ```
    pub fn resources(&self) -> &[RegisteredResource] {
        &self.resources
    }

    /// Every prompt, by name.
    ///
    /// ```
    /// use oxp_runtime::{prompt, Registry};
    ///
    /// /// Greet.
    /// #[prompt]
    /// fn greet() -> String { "Say hello.".into() }
    ///
    /// let registry = Registry::builder().prompt(greet::PROMPT).build().unwrap();
    /// assert_eq!(registry.prompts()[0].descriptor().name, "greet");
    /// ```
    pub fn prompts(&self) -> &[RegisteredPrompt] {
        &self.prompts
    }

    /// Every skill, by name.
    ///
    /// ```
    /// let registry = oxp_runtime::Registry::builder().build().unwrap();
    /// assert!(registry.skills().is_empty());
    /// ```
    pub fn skills(&self) -> &[crate::skill::RegisteredSkill] {
        &self.skills
    }

    /// The resource that serves `uri` (a fixed URI before a template), and the template's
    /// values.
    ///
    /// ```
    /// use oxp_runtime::{resource, Registry};
    ///
    /// /// A day's log.
    /// #[resource(uri = "file:///logs/{day}")]
    /// fn log(day: String) -> String { day }
    ///
    /// let registry = Registry::builder().resource(log::RESOURCE).build().unwrap();
    /// let (found, values) = registry.resolve_resource("file:///logs/monday").unwrap();
    /// assert_eq!((found.descriptor().fn_name, &values["day"]), ("log", &serde_json::json!("monday")));
    /// assert!(registry.resolve_resource("file:///other").is_none());
    /// ```
    pub fn resolve_resource(
        &self,
        uri: &str,
    ) -> Option<(
        &RegisteredResource,
        serde_json::Map<String, serde_json::Value>,
    )> {
        self.resources
            .iter()
            .find_map(|resource| resource.matches(uri).map(|values| (resource, values)))
    }

    /// The prompt named `name`.
    ///
    /// ```
    /// use oxp_runtime::{prompt, Registry};
    ///
    /// /// Greet.
    /// #[prompt]
    /// fn greet() -> String { "Say hello.".into() }
    ///
    /// let registry = Registry::builder().prompt(greet::PROMPT).build().unwrap();
    /// assert!(registry.prompt("greet").is_some() && registry.prompt("other").is_none());
    /// ```
    pub fn prompt(&self, name: &str) -> Option<&RegisteredPrompt> {
        self.prompts.iter().find(|p| p.descriptor().name == name)
    }

    /// Every tool's definition, as `GET /tools` lists them.
    ///
    /// ```
    /// use oxp_runtime::{tool, Registry};
    ///
    /// /// Say hi.
    /// #[tool(toolkit = "Greeter", version = "1.2.0")]
    /// fn hi() -> String { "hi".into() }
    ///
    /// let registry = Registry::builder().tool(hi::TOOL).build().unwrap();
    /// assert_eq!(registry.definitions().next().unwrap().name, "Greeter_Hi");
    /// ```
    pub fn definitions(&self) -> impl Iterator<Item = &ToolDefinition> {
        self.tools.iter().map(RegisteredTool::definition)
    }

    /// Finds the tool a `tool_id` names: `Toolkit.Name` is the numerically latest version,
    /// `@x` exactly `x.0.0`, `@x.y.z` exactly that version.
    ///
    /// ```
    /// use oxp_runtime::{tool, Registry};
    ///
    /// /// Add two integers.
    /// #[tool(toolkit = "Calculator", version = "1.0.0")]
    /// async fn add(a: i64, b: i64) -> i64 { a + b }
    ///
    /// let registry = Registry::builder().tool(add::TOOL).build().unwrap();
    /// assert_eq!(registry.resolve("Calculator.Add@1").unwrap().id(), "Calculator.Add@1.0.0");
    /// assert!(registry.resolve("Calculator.Add@2.0.0").is_err());
    /// ```
    pub fn resolve(&self, tool_id: &str) -> Result<&RegisteredTool, ResolveError> {
        if let Some(&i) = self.by_id.get(tool_id) {
            return Ok(&self.tools[i]);
        }
        let id = ToolId::parse(tool_id).map_err(|reason| ResolveError::InvalidId {
            tool_id: tool_id.to_owned(),
            reason,
        })?;
        let path = &tool_id[..id.toolkit.len() + 1 + id.name.len()];
        let Some(versions) = self.by_path.get(path) else {
            return Err(ResolveError::UnknownTool {
                wire_name: format!("{}_{}", id.toolkit, id.name),
                tool_id: tool_id.to_owned(),
            });
        };
        let found = match id.version {
            VersionRequest::Latest => versions.last(),
            VersionRequest::Exact(wanted) => {
                versions.iter().find(|&&i| self.tools[i].version == wanted)
            }
            VersionRequest::Unavailable => None,
        };
        found.map(|&i| &self.tools[i]).ok_or_else(|| {
            let first = &self.tools[versions[0]];
            ResolveError::VersionUnavailable {
                wire_name: first.name.clone(),
                tool_id: tool_id.to_owned(),
                available: versions
                    .iter()
                    .map(|&i| self.tools[i].version.to_string())
                    .collect(),
            }
        })
    }

    /// Finds the latest version of the tool whose wire name (`Toolkit_Name`) is `name`, as model
    /// providers and some clients call tools.
    ///
    /// ```
    /// use oxp_runtime::{tool, Registry};
    ///
    /// /// Say hi.
    /// #[tool(toolkit = "Greeter", version = "1.2.0")]
    /// fn hi() -> String { "hi".into() }
    ///
    /// let registry = Registry::builder().tool(hi::TOOL).build().unwrap();
    /// assert_eq!(registry.resolve_wire_name("Greeter_Hi").unwrap().id(), "Greeter.Hi@1.2.0");
    /// ```
    pub fn resolve_wire_name(&self, name: &str) -> Option<&RegisteredTool> {
        let path = self.by_wire_name.get(name)?;
        self.by_path
            .get(path)
            .and_then(|versions| versions.last())
            .map(|&i| &self.tools[i])
    }

    /// Where `tool` (one of this registry's) sits in [`tools`](Self::tools): the index the
    /// metrics find its series by, without hashing its id per call.
    pub(crate) fn place_of(&self, tool: &RegisteredTool) -> usize {
        let offset = (tool as *const RegisteredTool as usize)
            .wrapping_sub(self.tools.as_ptr() as usize)
            / std::mem::size_of::<RegisteredTool>();
        debug_assert!(offset < self.tools.len(), "a tool of another registry");
        offset
    }
}

/// Why a `tool_id` names no tool. Each is a `400` on the wire.
///
/// ```
/// use oxp_runtime::{tool, Registry};
/// use oxp_runtime::registry::ResolveError;
///
/// /// Add two integers.
/// #[tool(toolkit = "Calculator", version = "1.0.0")]
/// async fn add(a: i64, b: i64) -> i64 { a + b }
///
/// let registry = Registry::builder().tool(add::TOOL).build().unwrap();
/// let Err(ResolveError::VersionUnavailable { available, .. }) = registry.resolve("Calculator.Add@2") else { panic!() };
/// assert_eq!(available, ["1.0.0"]);
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ResolveError {
    /// The id does not match the `ToolId` grammar.
    InvalidId {
        /// What the client sent.
        tool_id: String,
        /// What is wrong with it.
        reason: ParseError,
    },
    /// No tool has that toolkit and name.
    UnknownTool {
        /// What the client sent.
        tool_id: String,
        /// `Toolkit_Name`.
        wire_name: String,
    },
    /// The tool exists, but not at that version.
    VersionUnavailable {
        /// What the client sent.
        tool_id: String,
        /// `Toolkit_Name`.
        wire_name: String,
        /// The versions that do exist, ascending.
        available: Vec<String>,
    },
}

impl fmt::Display for ResolveError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ResolveError::InvalidId { tool_id, reason } => {
                write!(f, "Invalid tool id '{tool_id}': {reason}")
            }
            ResolveError::UnknownTool { wire_name, .. } => {
                write!(f, "Tool '{wire_name}' was not found")
            }
            ResolveError::VersionUnavailable {
                wire_name,
                tool_id,
                available,
            } => write!(
                f,
                "Tool '{wire_name}' has no version matching '{tool_id}'; available: {}",
                available.join(", ")
            ),
        }
    }
}

impl std::error::Error for ResolveError {}

/// Collects tools and checks them into a [`Registry`].
///
/// ```
/// use oxp_runtime::{tool, Registry};
///
/// /// Add two integers.
/// #[tool(toolkit = "Calculator", version = "1.0.0")]
/// async fn add(a: i64, b: i64) -> i64 { a + b }
///
/// // Only the tools named, rather than every #[tool] in the binary.
/// let registry = Registry::builder().tool(add::TOOL).build().unwrap();
/// assert_eq!(registry.tools().len(), 1);
/// ```
#[derive(Debug, Default)]
pub struct RegistryBuilder {
    descriptors: Vec<&'static ToolDescriptor>,
    resources: Vec<&'static ResourceDescriptor>,
    prompts: Vec<&'static PromptDescriptor>,
    skills: Vec<&'static crate::skill::SkillDescriptor>,
    selection: Option<String>,
}

impl RegistryBuilder {
    /// Adds one tool: `#[tool] fn add` defines `add::TOOL`.
    ///
    /// ```
    /// use oxp_runtime::{tool, Registry};
    ///
    /// /// Say hello.
    /// #[tool(toolkit = "Greeter", version = "1.0.0")]
    /// fn hello() -> String { "hello".into() }
    ///
    /// let registry = Registry::builder().tool(hello::TOOL).build().unwrap();
    /// assert_eq!(registry.tools()[0].id(), "Greeter.Hello@1.0.0");
    /// ```
    #[must_use]
    pub fn tool(mut self, descriptor: &'static ToolDescriptor) -> Self {
        self.descriptors.push(descriptor);
        self
    }

    /// Adds one resource: `#[resource] fn log` defines `log::RESOURCE`.
    ///
    /// ```
    /// use oxp_runtime::{resource, Registry};
    ///
    /// /// Settings.
    /// #[resource(uri = "config://app")]
    /// fn settings() -> String { "{}".into() }
    ///
    /// let registry = Registry::builder().resource(settings::RESOURCE).build().unwrap();
    /// assert_eq!(registry.resources().len(), 1);
    /// ```
    #[must_use]
    pub fn resource(mut self, descriptor: &'static ResourceDescriptor) -> Self {
        self.resources.push(descriptor);
        self
    }

    /// Adds one prompt: `#[prompt] fn greet` defines `greet::PROMPT`.
    ///
    /// ```
    /// use oxp_runtime::{prompt, Registry};
    ///
    /// /// Greet.
    /// #[prompt]
    /// fn greet() -> String { "Say hello.".into() }
    ///
    /// let registry = Registry::builder().prompt(greet::PROMPT).build().unwrap();
    /// assert_eq!(registry.prompts().len(), 1);
    /// ```
    #[must_use]
    pub fn prompt(mut self, descriptor: &'static PromptDescriptor) -> Self {
        self.prompts.push(descriptor);
        self
    }

    /// Adds one skill (what [`skills!`](https://docs.rs/oxp-runtime/latest/oxp_runtime/macro.skills.html) embeds is found by [`all`](Self::all)).
    ///
    /// ```
    /// use oxp_runtime::skill::{SkillDescriptor, SkillFile};
    ///
    /// static SKILL: SkillDescriptor = SkillDescriptor {
    ///     name: "greeting",
    ///     description: "Greet people warmly.",
    ///     frontmatter: r#"{"name": "greeting", "description": "Greet people warmly."}"#,
    ///     files: &[SkillFile { path: "SKILL.md", bytes: b"Greet warmly." }],
    ///     source: "skills/greeting/SKILL.md",
    /// };
    /// let registry = oxp_runtime::Registry::builder().skill(&SKILL).build().unwrap();
    /// assert_eq!(registry.skills().len(), 1);
    /// ```
    #[must_use]
    pub fn skill(mut self, descriptor: &'static crate::skill::SkillDescriptor) -> Self {
        self.skills.push(descriptor);
        self
    }

    /// Adds every skill [`skills!`](https://docs.rs/oxp-runtime/latest/oxp_runtime/macro.skills.html) embedded in the binary, and nothing else.
    ///
    /// ```
    /// let registry = oxp_runtime::Registry::builder().all_skills().build().unwrap();
    /// # let _ = registry;
    /// ```
    #[must_use]
    pub fn all_skills(mut self) -> Self {
        self.skills
            .extend(inventory::iter::<crate::skill::SkillDescriptor>);
        self
    }

    /// Adds every `#[tool]`, `#[resource]`, `#[prompt]` and skill linked into the binary.
    ///
    /// ```standalone_crate
    /// use oxp_runtime::{tool, Registry};
    ///
    /// /// Say hello.
    /// #[tool(toolkit = "Greeter", version = "1.0.0")]
    /// async fn hello(name: String) -> String {
    ///     format!("Hello, {name}!")
    /// }
    ///
    /// /// A tool in another module of the binary: found all the same.
    /// mod elsewhere {
    ///     /// Say goodbye.
    ///     #[oxp_runtime::tool(toolkit = "Greeter", version = "1.0.0")]
    ///     pub async fn goodbye() -> String {
    ///         "Goodbye!".into()
    ///     }
    /// }
    ///
    /// let registry = Registry::builder().all().build().unwrap();
    /// let ids: Vec<&str> = registry.tools().iter().map(|t| t.id()).collect();
    /// assert_eq!(ids, ["Greeter.Goodbye@1.0.0", "Greeter.Hello@1.0.0"]);
    /// ```
    #[must_use]
    pub fn all(mut self) -> Self {
        self.descriptors.extend(inventory::iter::<ToolDescriptor>);
        self.resources.extend(inventory::iter::<ResourceDescriptor>);
        self.prompts.extend(inventory::iter::<PromptDescriptor>);
        self.skills
            .extend(inventory::iter::<crate::skill::SkillDescriptor>);
        self
    }

    /// Keeps only the tools `selection` names (what `OXP_TOOLS` says for `serve()`): a
    /// comma-separated list of `Toolkit.*`, `Toolkit.Name`, `Toolkit.Name@1` (major 1),
    /// `Toolkit.Name@1.2.3`, `tag:NAME`, each excluding with a `-` before it. With no inclusion,
    /// everything is included first; exclusions apply last. An item that matches no tool, or a
    /// selection that leaves none, is a build error. Resources and prompts are selected the
    /// same way by their own items, `resource:URI` (as registered) and `prompt:NAME`: a kind
    /// the selection has no inclusion of is served whole.
    ///
    /// ```
    /// use oxp_runtime::{prompt, resource, Registry};
    ///
    /// /// Settings.
    /// #[resource(uri = "config://app")]
    /// fn settings() -> String { "{}".into() }
    ///
    /// /// Secrets.
    /// #[resource(uri = "config://secrets")]
    /// fn secrets() -> String { "{}".into() }
    ///
    /// /// Greet.
    /// #[prompt]
    /// fn greet() -> String { "Say hello.".into() }
    ///
    /// let all = || Registry::builder().resource(settings::RESOURCE).resource(secrets::RESOURCE).prompt(greet::PROMPT);
    /// let registry = all().select("-resource:config://secrets").build().unwrap();
    /// assert_eq!(registry.resources().len(), 1);
    /// assert_eq!(registry.prompts().len(), 1, "prompts are not named: all are served");
    /// assert!(all().select("prompt:other").build().is_err(), "matches no prompt");
    /// ```
    ///
    /// ```
    /// use oxp_runtime::{tool, Registry};
    ///
    /// /// Add.
    /// #[tool(toolkit = "Calculator", version = "1.0.0", tags = ["math"])]
    /// fn add(a: f64, b: f64) -> f64 { a + b }
    ///
    /// /// Divide.
    /// #[tool(toolkit = "Calculator", version = "1.0.0", tags = ["math"])]
    /// fn div(a: f64, b: f64) -> f64 { a / b }
    ///
    /// /// Ping.
    /// #[tool(toolkit = "Util", version = "1.0.0")]
    /// fn ping() {}
    ///
    /// let all = || Registry::builder().tool(add::TOOL).tool(div::TOOL).tool(ping::TOOL);
    /// let registry = all().select("tag:math,-Calculator.Div").build().unwrap();
    /// let ids: Vec<&str> = registry.tools().iter().map(|t| t.id()).collect();
    /// assert_eq!(ids, ["Calculator.Add@1.0.0"]);
    /// assert_eq!(all().select("-Util.*").build().unwrap().tools().len(), 2);
    /// assert!(all().select("Mail.*").build().is_err(), "matches no tool");
    /// ```
    #[must_use]
    pub fn select(mut self, selection: &str) -> Self {
        self.selection = Some(selection.to_owned());
        self
    }

    /// Checks every tool and builds the registry, or reports every problem found at once.
    ///
    /// ```
    /// use oxp_runtime::{tool, Registry};
    ///
    /// /// Add two integers.
    /// #[tool(toolkit = "Calculator", version = "1.0.0")]
    /// async fn add(a: i64, b: i64) -> i64 { a + b }
    ///
    /// let registry = Registry::builder().tool(add::TOOL).build().unwrap();
    /// assert_eq!(registry.tools().len(), 1);
    /// ```
    pub fn build(self) -> Result<Registry, RegistryError> {
        let (descriptors, resources, prompts) =
            match &self.selection {
                None => (self.descriptors, self.resources, self.prompts),
                Some(text) => select(text, self.descriptors, self.resources, self.prompts)
                    .map_err(|what| RegistryError {
                        problems: vec![RegistryProblem::Selection { what }],
                    })?,
            };
        // Every problem is collected before any is reported, in this order: resources, prompts,
        // skills, then tools.
        let mut problems = Vec::new();
        let resources = resources::register_resources(&resources, &mut problems);
        let prompts = resources::register_prompts(&prompts, &mut problems);
        let skills = skills::register(&self.skills, &mut problems);
        let tools = register_tools(descriptors, &mut problems);
        let (by_path, by_wire_name) = index(&tools, &mut problems);
        if !problems.is_empty() {
            return Err(RegistryError { problems });
        }
        log_contents(&tools, resources.len(), prompts.len(), skills.len());
        let by_id = tools
            .iter()
            .enumerate()
            .map(|(i, tool)| (tool.id().to_owned(), i))
            .collect();
        Ok(Registry {
            tools,
            by_id,
            by_path,
            by_wire_name,
            resources,
            prompts,
            skills,
        })
    }
}

/// What a selection keeps: tools, resources, prompts.
type Selected = (
    Vec<&'static ToolDescriptor>,
    Vec<&'static ResourceDescriptor>,
    Vec<&'static PromptDescriptor>,
);

/// The tools, resources and prompts the selection `text` (`OXP_TOOLS`) keeps, or why it cannot
/// be applied.
fn select(
    text: &str,
    tools: Vec<&'static ToolDescriptor>,
    resources: Vec<&'static ResourceDescriptor>,
    prompts: Vec<&'static PromptDescriptor>,
) -> Result<Selected, String> {
    let selection = Selection::parse(text)?;
    Ok((
        selection.apply(tools)?,
        selection.apply_resources(resources)?,
        selection.apply_prompts(prompts)?,
    ))
}

/// Checks each tool by itself ([`register`]), then that no id is registered twice. The tools
/// come out by toolkit, name and version, the order the indexes rely on.
fn register_tools(
    descriptors: Vec<&'static ToolDescriptor>,
    problems: &mut Vec<RegistryProblem>,
) -> Vec<RegisteredTool> {
    let mut tools = Vec::new();
    for descriptor in descriptors {
        match register(descriptor) {
            Ok(tool) => tools.push(tool),
            Err(problem) => problems.push(problem),
        }
    }
    tools.sort_by(|a, b| {
        (a.descriptor.toolkit, a.descriptor.name, a.version).cmp(&(
            b.descriptor.toolkit,
            b.descriptor.name,
            b.version,
        ))
    });
    for pair in tools.windows(2) {
        if pair[0].id == pair[1].id {
            problems.push(RegistryProblem::DuplicateId {
                id: pair[0].id.clone(),
                first: pair[0].descriptor.location(),
                second: pair[1].descriptor.location(),
            });
        }
    }
    tools
}

/// The indexes by `Toolkit.Name` and by wire name, checking on the way that no two tools share
/// a wire name and that every version of a tool goes by the same one.
fn index(
    tools: &[RegisteredTool],
    problems: &mut Vec<RegistryProblem>,
) -> (Index<Vec<usize>>, Index<String>) {
    let mut by_path: Index<Vec<usize>> = Index::default();
    let mut by_wire_name: Index<String> = Index::default();
    for (i, tool) in tools.iter().enumerate() {
        let path = format!("{}.{}", tool.descriptor.toolkit, tool.descriptor.name);
        let owner = by_wire_name
            .entry(tool.name.clone())
            .or_insert_with(|| path.clone());
        if *owner != path {
            problems.push(RegistryProblem::WireNameCollision {
                wire_name: tool.name.clone(),
                first: owner.clone(),
                second: path.clone(),
                at: tool.descriptor.location(),
            });
        }
        // Every version of a tool goes by one name (MCP names the older ones after it).
        if let Some(&first) = by_path.get(&path).and_then(|versions| versions.first())
            && tools[first].name != tool.name
        {
            problems.push(RegistryProblem::Invalid {
                at: tool.descriptor.location(),
                what: format!(
                    "`{path}@{}` has the wire name `{}` but `{path}@{}` has `{}`: every version of a tool goes by one wire name, so give each the same `wire_name`",
                    tool.version, tool.name, tools[first].version, tools[first].name
                ),
            });
        }
        by_path.entry(path).or_default().push(i);
    }
    (by_path, by_wire_name)
}

/// Says at start-up what the registry serves.
fn log_contents(tools: &[RegisteredTool], resources: usize, prompts: usize, skills: usize) {
    let toolkits: BTreeSet<&str> = tools.iter().map(|t| t.descriptor.toolkit).collect();
    tracing::info!(
        target: "oxp_runtime::registry",
        "{} tool{} in toolkit{} {}",
        tools.len(),
        if tools.len() == 1 { "" } else { "s" },
        if toolkits.len() == 1 { "" } else { "s" },
        toolkits.into_iter().collect::<Vec<_>>().join(", ")
    );
    if resources + prompts + skills > 0 {
        let count = |n: usize, one: &str| format!("{n} {one}{}", if n == 1 { "" } else { "s" });
        tracing::info!(
            target: "oxp_runtime::registry",
            "{}, {} and {} (served over MCP)",
            count(resources, "resource"),
            count(prompts, "prompt"),
            count(skills, "skill")
        );
    }
}

/// The rules `#[tool]` checks at compile time where its input is literal, checked again for
/// descriptors made by hand or from a crate version, by the same [`rules`] in the same words.
///
/// One check after another in the order the attribute's keys are documented, each a call to
/// its rule and the problem it names: kept in one function so that it reads as that list.
fn register(descriptor: &'static ToolDescriptor) -> Result<RegisteredTool, RegistryProblem> {
    let problem = |what: String| RegistryProblem::Invalid {
        at: descriptor.location(),
        what,
    };
    let check = |found: Option<String>| found.map_or(Ok(()), |what| Err(problem(what)));
    check(rules::segment_problem("toolkit", descriptor.toolkit))?;
    check(rules::segment_problem("name", descriptor.name))?;
    check(match descriptor.wire_name {
        Some(exact) => rules::exact_wire_name_problem(exact),
        None => rules::wire_name_problem(descriptor.toolkit, descriptor.name),
    })?;
    check(rules::version_problem(descriptor.version))?;
    check(rules::description_problem(descriptor.description))?;
    check(
        descriptor
            .hints
            .search_hint
            .and_then(rules::search_hint_problem),
    )?;
    check(scopes_problem(descriptor.scopes))?;
    let version: ToolVersion = descriptor
        .version
        .parse()
        .map_err(|e: ParseError| problem(e.to_string()))?;
    let wire_name = descriptor.wire_name.map_or_else(
        || format!("{}_{}", descriptor.toolkit, descriptor.name),
        str::to_owned,
    );
    let description = descriptor.description.trim();
    let id = format!("{}.{}@{version}", descriptor.toolkit, descriptor.name);
    let schema_problem = |error: schema::SchemaError| RegistryProblem::Schema {
        id: id.clone(),
        at: descriptor.location(),
        error,
    };
    let input_schema =
        schema::finalize_input((descriptor.input_schema)()).map_err(schema_problem)?;
    let output_schema = match descriptor.output_schema {
        Some(output) => schema::finalize_output(output()).map_err(schema_problem)?,
        None => None,
    };
    check(header_problem(&input_schema))?;
    check(confirm_problem(descriptor.hints.confirm, &input_schema))?;
    let validator = compile(input_schema.clone())
        .map_err(|e| problem(format!("the input schema does not compile: {e}")))?;
    let mut examples = Vec::with_capacity(descriptor.hints.examples.len());
    for (i, example) in descriptor.hints.examples.iter().enumerate() {
        let what = |why: String| {
            problem(format!(
                "example {} does not fit the input schema: {why}",
                i + 1
            ))
        };
        let value: serde_json::Value =
            serde_json::from_str(example).map_err(|e| what(format!("not JSON ({e})")))?;
        if let Some(error) = validator.iter_errors(&value).next() {
            let at = error.instance_path().to_string();
            return Err(what(format!(
                "{} {error}",
                if at.is_empty() { "/" } else { &at }
            )));
        }
        examples.push(value);
    }

    let requirements = ToolRequirements {
        authorization: descriptor
            .authorization
            .iter()
            .map(|a| AuthorizationRequirement {
                id: a.id.to_owned(),
                oauth2: (!a.scopes.is_empty()).then(|| OAuth2Requirement {
                    scopes: a.scopes.iter().map(|s| (*s).to_owned()).collect(),
                }),
            })
            .collect(),
        secrets: descriptor
            .secrets
            .iter()
            .map(|id| SecretRequirement {
                id: (*id).to_owned(),
            })
            .collect(),
        user_id: descriptor.user_id,
    };
    let definition = ToolDefinition {
        id,
        name: wire_name,
        description: description.to_owned(),
        version: version.to_string(),
        input_schema,
        output_schema,
        requirements: (!requirements.is_empty()).then_some(requirements),
    };
    let json = serde_json::to_string(&definition).expect("a tool definition serializes");
    Ok(RegisteredTool {
        descriptor,
        version,
        id: definition.id,
        name: definition.name,
        json: json.into_boxed_str(),
        definition: OnceLock::new(),
        validator: OnceLock::new(),
        examples: examples.into_boxed_slice(),
    })
}

/// What is wrong with a `confirm = "…"` question, if anything: a `{name}` that is not one of
/// the input's properties, or an unmatched brace. (`#[tool]` says so at compile time for
/// parameters it sees; an `Input<T>`'s fields are known only here.)
fn confirm_problem(template: Option<&str>, input_schema: &serde_json::Value) -> Option<String> {
    let template = template?;
    let names = match crate::rules::placeholders(template) {
        Ok(names) => names,
        Err(problem) => return Some(format!("in `confirm = \"{template}\"`: {problem}")),
    };
    let properties = input_schema.get("properties").and_then(|p| p.as_object());
    names
        .into_iter()
        .find(|name| properties.is_none_or(|p| !p.contains_key(*name)))
        .map(|name| {
            format!("`confirm = \"{template}\"` names `{{{name}}}`, which is not a parameter")
        })
}

/// What is wrong with the parameters mirrored into headers (`#[mcp_header("X")]`, the schema
/// keyword `x-mcp-header`), if anything: a header carries one primitive value (SEP-2243), and
/// two parameters cannot share one (header names ignore case).
fn header_problem(input_schema: &serde_json::Value) -> Option<String> {
    let properties = input_schema.get("properties")?.as_object()?;
    let mut seen: Vec<(String, &str)> = Vec::new();
    for (parameter, schema) in properties {
        let Some(header) = schema.get("x-mcp-header") else {
            continue;
        };
        let Some(header) = header.as_str() else {
            return Some(format!("`{parameter}`'s x-mcp-header is not a string"));
        };
        let primitive = matches!(
            schema.get("type").and_then(serde_json::Value::as_str),
            Some("string" | "integer" | "number" | "boolean")
        );
        if !primitive {
            return Some(format!(
                "`{parameter}` is mirrored into the `Mcp-Param-{header}` header, which carries one \
                 string, number or boolean; take `#[mcp_header]` off it, or make it one of those"
            ));
        }
        let key = header.to_ascii_lowercase();
        if let Some((_, other)) = seen.iter().find(|(seen, _)| *seen == key) {
            return Some(format!(
                "`{other}` and `{parameter}` are both mirrored into `Mcp-Param-{header}`: give each its own header"
            ));
        }
        seen.push((key, parameter));
    }
    None
}

fn compile(input_schema: serde_json::Value) -> Result<jsonschema::Validator, String> {
    jsonschema::draft202012::options()
        .should_validate_formats(true)
        .build(&schema::for_validation(input_schema))
        .map_err(|e| e.to_string())
}

/// What MCP puts between an older version's wire name and its version: `Calculator_Add__v1_0_0`.
pub(crate) const VERSION_MARK: &str = "__v";

/// The name MCP lists `tool` by: its wire name if it is the `latest` version, with the version
/// as a suffix otherwise.
pub(crate) fn listed_name(tool: &RegisteredTool, latest: bool) -> String {
    if latest {
        return tool.name().to_owned();
    }
    let v = tool.version();
    format!(
        "{}{VERSION_MARK}{}_{}_{}",
        tool.name(),
        v.major,
        v.minor,
        v.patch
    )
}
