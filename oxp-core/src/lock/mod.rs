//! The published surface of a tool server, kept in the repository: `tools.lock` holds every
//! tool id the binary serves with its definition as `GET /tools` sends it (and the scopes a
//! caller's token needs, which the definition has no room for), and [`Lock::check`] refuses a
//! change that breaks what was published.
//!
//! The rules: a locked version is immutable (its input schema, output schema, requirements and
//! the scopes a caller's token needs; descriptions may change); a locked version must not
//! disappear (unless retired on purpose); a new version is judged against the highest locked
//! version below it — a breaking change needs a new major version (a new minor for `0.y.z`), an
//! additive one at least a new minor. That is what lets a caller ask for `Calculator.Add@1` or
//! the latest and trust the answer.
//!
//! Resources and prompts are recorded beside the tools (by URI and by name; the keys are written
//! only by a server that has them). Without versions, what was published holds while they are
//! served: none disappears unless retired, a resource keeps its media type, a prompt keeps its
//! arguments (none removed or made required, no new required one), and neither needs a scope
//! it did not need.
//!
//! Keep the check in `cargo test`:
//!
//! ```no_run
//! #[test]
//! fn published_tools_still_hold() {
//!     let registry = oxp_runtime::Registry::from_inventory().unwrap();
//!     let violations = oxp_runtime::lock::Lock::read("tools.lock").unwrap().check(&registry);
//!     assert!(violations.is_empty(), "{}", oxp_runtime::lock::lines(&violations));
//! }
//! ```

mod diff;
mod resources_prompts;

use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;

use serde_json::{Map, Value, json};

pub use diff::Class;
use diff::{Difference, Direction};

use crate::registry::Registry;
use crate::version::{ToolId, ToolVersion};

/// The format of the file, written into it so that a later one can read an older one.
const FORMAT: u64 = 2;

/// The first format that records the scopes a caller's token needs (absent: none needed); a
/// file of an earlier one is still read, and written back as it was.
const SCOPES_FORMAT: u64 = 2;

/// A tools lockfile: tool ids and their definitions.
///
/// ```
/// use oxp_runtime::{lock::Lock, tool, Registry};
///
/// /// Add two numbers.
/// #[tool(toolkit = "Calculator", version = "1.0.0")]
/// async fn add(a: f64, b: f64) -> f64 { a + b }
///
/// let registry = Registry::builder().tool(add::TOOL).build().unwrap();
/// let lock = Lock::of(&registry);
/// let text = lock.to_text();
/// assert!(text.contains("\"Calculator.Add@1.0.0\""));
/// // Read back, it holds exactly what the registry serves: nothing to report.
/// assert!(Lock::parse(&text).unwrap().check(&registry).is_empty());
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct Lock {
    tools: BTreeMap<String, Value>,
    /// Resources by URI (or template): their name, description, media type and parameters.
    resources: BTreeMap<String, Value>,
    /// Prompts by name: their description and arguments.
    prompts: BTreeMap<String, Value>,
    /// Whether the scopes a caller's token needs are recorded (no `scopes` then means none);
    /// not in a file of format 1.
    scopes_recorded: bool,
}

impl Default for Lock {
    /// An empty lock, of the current format.
    fn default() -> Lock {
        Lock {
            tools: BTreeMap::new(),
            resources: BTreeMap::new(),
            prompts: BTreeMap::new(),
            scopes_recorded: true,
        }
    }
}

/// Which part of a tool a finding is about.
///
/// ```
/// use oxp_runtime::lock::Part;
/// assert_eq!(Part::Requirements.to_string(), "requirements");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Part {
    /// The input schema.
    Input,
    /// The output schema.
    Output,
    /// Secrets, user id, authorization.
    Requirements,
    /// The OAuth scopes a caller's token needs (`scopes = [..]`).
    Scopes,
    /// The tool's own description.
    Description,
    /// The tool as a whole (a version gone).
    Tool,
    /// A resource (by its URI or template).
    Resource,
    /// A prompt (by its name).
    Prompt,
}

impl fmt::Display for Part {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Part::Input => "input",
            Part::Output => "output",
            Part::Requirements => "requirements",
            Part::Scopes => "scopes",
            Part::Description => "description",
            Part::Tool => "tool",
            Part::Resource => "resource",
            Part::Prompt => "prompt",
        })
    }
}

/// A change that breaks what was published: one line of `lock --check`.
///
/// ```
/// use oxp_runtime::lock::{Part, Violation};
/// let violation = Violation {
///     tool_id: "Calculator.Add@1.0.0".into(),
///     part: Part::Input,
///     pointer: "/properties/b".into(),
///     change: "type number → string".into(),
///     rule: "a published version is immutable; publish it as Calculator.Add@2.0.0".into(),
/// };
/// assert_eq!(
///     violation.to_string(),
///     "Calculator.Add@1.0.0: input /properties/b: type number → string — a published version is immutable; publish it as Calculator.Add@2.0.0",
/// );
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Violation {
    /// The tool id, with its version; `resource <URI>` or `prompt <name>` for those.
    pub tool_id: String,
    /// What part of it.
    pub part: Part,
    /// Where, as a JSON pointer into the part (empty for the whole part).
    pub pointer: String,
    /// What changed.
    pub change: String,
    /// The rule it breaks and what to do.
    pub rule: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: ", self.tool_id)?;
        // A finding about the whole tool says so by its change ("removed", "new, …"); one
        // about a resource or prompt names it in its id already.
        if !matches!(self.part, Part::Tool | Part::Resource | Part::Prompt) {
            write!(f, "{}", self.part)?;
            if !self.pointer.is_empty() {
                write!(f, " {}", self.pointer)?;
            }
            write!(f, ": ")?;
        } else if self.part != Part::Tool && !self.pointer.is_empty() {
            write!(f, "{}: ", self.pointer)?;
        }
        write!(f, "{} — {}", self.change, self.rule)
    }
}

/// The violations, a line each (for an assertion's message).
///
/// ```
/// assert_eq!(oxp_runtime::lock::lines(&[]), "");
/// ```
pub fn lines(violations: &[Violation]) -> String {
    violations.iter().map(|v| format!("{v}\n")).collect()
}

/// Everything a check found: what breaks the published surface, and what is allowed but worth
/// saying (description changes, new versions not locked yet, versions retired on purpose).
///
/// ```
/// use oxp_runtime::lock::Lock;
/// let locked = Lock::parse(r#"{"format": 1, "tools": {"Mail.Send@1.0.0": {"description": "Send."}}}"#).unwrap();
/// let reworded = Lock::parse(r#"{"format": 1, "tools": {"Mail.Send@1.0.0": {"description": "Send a mail."}}}"#).unwrap();
/// let review = locked.compare(&reworded, false);
/// assert!(review.violations.is_empty());
/// assert_eq!(review.notices.len(), 1, "allowed, and said");
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Review {
    /// What breaks the published surface.
    pub violations: Vec<Violation>,
    /// What is allowed, in the same shape (its `rule` says why it is allowed).
    pub notices: Vec<Violation>,
}

/// Why a lockfile could not be read or written.
///
/// ```
/// use oxp_runtime::lock::{Lock, LockError};
/// assert!(matches!(Lock::read("/no/such/tools.lock"), Err(LockError::Io(_))));
/// assert!(matches!(Lock::parse("[]"), Err(LockError::Format(_))));
/// ```
#[derive(Debug)]
#[non_exhaustive]
pub enum LockError {
    /// The file could not be read or written.
    Io(std::io::Error),
    /// The file is not a lockfile this version reads.
    Format(String),
}

impl fmt::Display for LockError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LockError::Io(error) => write!(f, "{error}"),
            LockError::Format(what) => write!(f, "not a tools lockfile: {what}"),
        }
    }
}

impl std::error::Error for LockError {}

impl Lock {
    /// The lock of what `registry` serves now.
    ///
    /// ```
    /// let registry = oxp_runtime::Registry::builder().build().unwrap();
    /// assert!(oxp_runtime::lock::Lock::of(&registry).is_empty());
    /// ```
    pub fn of(registry: &Registry) -> Lock {
        let tools = registry
            .tools()
            .iter()
            .map(|tool| {
                let definition = tool.definition();
                let mut value = serde_json::to_value(definition).expect("a definition is JSON");
                with_scopes(&mut value, tool.descriptor().scopes);
                (definition.id.clone(), value)
            })
            .collect();
        Lock {
            tools,
            resources: resources_prompts::resources(registry),
            prompts: resources_prompts::prompts(registry),
            scopes_recorded: true,
        }
    }

    /// Reads `path`.
    ///
    /// ```no_run
    /// let lock = oxp_runtime::lock::Lock::read("tools.lock")?;
    /// println!("{} tools locked", lock.len());
    /// # Ok::<(), oxp_runtime::lock::LockError>(())
    /// ```
    pub fn read(path: impl AsRef<Path>) -> Result<Lock, LockError> {
        let text = std::fs::read_to_string(path.as_ref()).map_err(LockError::Io)?;
        Lock::parse(&text)
    }

    /// Reads a lockfile's text.
    ///
    /// ```
    /// use oxp_runtime::lock::Lock;
    /// assert!(Lock::parse(r#"{"format": 2, "tools": {}}"#).unwrap().is_empty());
    /// assert!(Lock::parse(r#"{"format": 1, "tools": {}}"#).unwrap().is_empty(), "read, scopes unrecorded");
    /// assert!(Lock::parse(r#"{"format": 9, "tools": {}}"#).is_err());
    /// ```
    pub fn parse(text: &str) -> Result<Lock, LockError> {
        let value: Value =
            serde_json::from_str(text).map_err(|e| LockError::Format(e.to_string()))?;
        let format = value["format"]
            .as_u64()
            .filter(|f| (1..=FORMAT).contains(f));
        let Some(format) = format else {
            return Err(LockError::Format(format!(
                "`format` is {}, this version reads 1 to {FORMAT}",
                value["format"]
            )));
        };
        let Some(tools) = value["tools"].as_object() else {
            return Err(LockError::Format("`tools` is not an object".into()));
        };
        let mut locked = BTreeMap::new();
        for (id, definition) in tools {
            if split(id).is_none() || ToolId::parse(id).is_err() {
                return Err(LockError::Format(format!(
                    "`{id}` is not a tool id with its version"
                )));
            }
            if !definition.is_object() {
                return Err(LockError::Format(format!("`{id}` has no definition")));
            }
            locked.insert(id.clone(), definition.clone());
        }
        // Resources and prompts, by URI and by name (absent from a lock of tools alone).
        let read = |key: &str| -> Result<BTreeMap<String, Value>, LockError> {
            match &value[key] {
                Value::Null => Ok(BTreeMap::new()),
                Value::Object(entries) if entries.values().all(Value::is_object) => {
                    Ok(entries.clone().into_iter().collect())
                }
                _ => Err(LockError::Format(format!(
                    "`{key}` is not an object of objects"
                ))),
            }
        };
        let (resources, prompts) = (read("resources")?, read("prompts")?);
        // Scopes read wrong would read as none needed: a list of strings, or absent.
        let entries = (locked.iter())
            .chain(&resources)
            .chain(&prompts)
            .map(|(key, entry)| (key, &entry["scopes"]));
        for (key, scopes) in entries {
            let listed = scopes
                .as_array()
                .is_some_and(|s| s.iter().all(Value::is_string));
            if !scopes.is_null() && !listed {
                return Err(LockError::Format(format!(
                    "`{key}`'s `scopes` is not a list of strings"
                )));
            }
        }
        Ok(Lock {
            tools: locked,
            resources,
            prompts,
            scopes_recorded: format >= SCOPES_FORMAT,
        })
    }

    /// The file's text: ids sorted, every object's keys sorted, two-space indents, a final
    /// newline — the same tools always make the same bytes, so a review diff shows only changes.
    ///
    /// ```
    /// let registry = oxp_runtime::Registry::builder().build().unwrap();
    /// assert_eq!(oxp_runtime::lock::Lock::of(&registry).to_text(), "{\n  \"format\": 2,\n  \"tools\": {}\n}\n");
    /// ```
    pub fn to_text(&self) -> String {
        let tools: Map<String, Value> = self
            .tools
            .iter()
            .map(|(id, d)| (id.clone(), sorted(d)))
            .collect();
        // A lock read from a file that did not record scopes says so still: written as format 2,
        // its silence would read as "no scopes needed".
        let format = if self.scopes_recorded { FORMAT } else { 1 };
        let mut file = json!({ "format": format, "tools": tools });
        // Only a server that has them writes them: a lock of tools alone reads as it always did.
        for (key, entries) in [("resources", &self.resources), ("prompts", &self.prompts)] {
            if !entries.is_empty() {
                file[key] = Value::Object(entries.clone().into_iter().collect());
            }
        }
        let file = sorted(&file);
        let mut text = serde_json::to_string_pretty(&file).expect("JSON serializes");
        text.push('\n');
        text
    }

    /// Writes the file to `path`.
    ///
    /// ```no_run
    /// let registry = oxp_runtime::Registry::from_inventory().unwrap();
    /// oxp_runtime::lock::Lock::of(&registry).write("tools.lock")?;
    /// # Ok::<(), oxp_runtime::lock::LockError>(())
    /// ```
    pub fn write(&self, path: impl AsRef<Path>) -> Result<(), LockError> {
        std::fs::write(path.as_ref(), self.to_text()).map_err(LockError::Io)
    }

    /// How many tool versions are locked.
    ///
    /// ```
    /// assert_eq!(oxp_runtime::lock::Lock::default().len(), 0);
    /// ```
    pub fn len(&self) -> usize {
        self.tools.len()
    }

    /// Whether nothing is locked.
    ///
    /// ```
    /// assert!(oxp_runtime::lock::Lock::default().is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.tools.is_empty()
    }

    /// The definition locked under `id`, as `GET /tools` sent it.
    ///
    /// ```
    /// assert!(oxp_runtime::lock::Lock::default().definition("Calculator.Add@1.0.0").is_none());
    /// ```
    pub fn definition(&self, id: &str) -> Option<&Value> {
        self.tools.get(id)
    }

    /// The locked ids, sorted.
    ///
    /// ```
    /// assert_eq!(oxp_runtime::lock::Lock::default().ids().count(), 0);
    /// ```
    pub fn ids(&self) -> impl Iterator<Item = &str> {
        self.tools.keys().map(String::as_str)
    }

    /// What in `registry` breaks the locked surface (a version removed included).
    ///
    /// ```
    /// use oxp_runtime::{lock::Lock, tool, Registry};
    ///
    /// /// Add two numbers.
    /// #[tool(toolkit = "Calculator", version = "1.0.0")]
    /// async fn add(a: f64, b: f64) -> f64 { a + b }
    ///
    /// /// Add two numbers.
    /// #[tool(toolkit = "Calculator", name = "Add", version = "1.0.0")]
    /// async fn add_text(a: f64, b: String) -> f64 { a }
    ///
    /// let published = Lock::of(&Registry::builder().tool(add::TOOL).build().unwrap());
    /// let changed = Registry::builder().tool(add_text::TOOL).build().unwrap();
    /// let violations = published.check(&changed);
    /// assert_eq!(
    ///     violations[0].to_string(),
    ///     "Calculator.Add@1.0.0: input /properties/b: type number → string — a published version is immutable; publish it as Calculator.Add@2.0.0",
    /// );
    /// ```
    pub fn check(&self, registry: &Registry) -> Vec<Violation> {
        self.review(registry, false).violations
    }

    /// [`check`](Self::check), with what is allowed listed too; `allow_removal` retires locked
    /// versions the registry no longer serves instead of refusing their removal.
    ///
    /// ```
    /// use oxp_runtime::{lock::Lock, Registry};
    /// # use oxp_runtime::tool;
    /// # /// Add two numbers.
    /// # #[tool(toolkit = "Calculator", version = "1.0.0")]
    /// # async fn add(a: f64, b: f64) -> f64 { a + b }
    ///
    /// let published = Lock::of(&Registry::builder().tool(add::TOOL).build().unwrap());
    /// let empty = Registry::builder().build().unwrap();
    /// assert_eq!(published.review(&empty, false).violations.len(), 1);
    /// let retired = published.review(&empty, true);
    /// assert!(retired.violations.is_empty());
    /// assert!(retired.notices[0].to_string().contains("retired"));
    /// ```
    pub fn review(&self, registry: &Registry, allow_removal: bool) -> Review {
        self.compare(&Lock::of(registry), allow_removal)
    }

    /// [`review`](Self::review) against another lock instead of a registry: e.g. the main
    /// branch's `tools.lock` against a pull request's.
    ///
    /// ```
    /// use oxp_runtime::lock::Lock;
    ///
    /// let main = Lock::parse(r#"{"format": 1, "tools": {"Mail.Send@1.0.0": {
    ///     "input_schema": {"type": "object", "properties": {"to": {"type": "string"}}, "required": ["to"]}}}}"#).unwrap();
    /// let branch = Lock::parse(r#"{"format": 1, "tools": {"Mail.Send@1.1.0": {
    ///     "input_schema": {"type": "object", "properties": {"to": {"type": "string"}, "cc": {"type": "string"}}, "required": ["to", "cc"]}}}}"#).unwrap();
    /// let review = main.compare(&branch, true);
    /// assert_eq!(
    ///     review.violations[0].to_string(),
    ///     "Mail.Send@1.1.0: input /properties/cc: new required property `cc` — a breaking change needs a new major version (judged against the locked Mail.Send@1.0.0); publish it as Mail.Send@2.0.0",
    /// );
    /// ```
    pub fn compare(&self, current: &Lock, allow_removal: bool) -> Review {
        if self.scopes_recorded != current.scopes_recorded {
            // One side was written before scopes were recorded: what it does not say cannot
            // have changed, so neither side's scopes are compared.
            return self
                .without_scopes()
                .compare(&current.without_scopes(), allow_removal);
        }
        let mut review = Review::default();
        for (id, old) in &self.tools {
            match current.tools.get(id) {
                Some(new) => immutable(id, old, new, &mut review),
                None if allow_removal => review.notices.push(Violation {
                    tool_id: id.clone(),
                    part: Part::Tool,
                    pointer: String::new(),
                    change: "removed".into(),
                    rule: "retired by --allow-removal".into(),
                }),
                None => review.violations.push(Violation {
                    tool_id: id.clone(),
                    part: Part::Tool,
                    pointer: String::new(),
                    change: "removed".into(),
                    rule: "a locked version must not disappear while callers may still ask for it; serve it, or retire it with --allow-removal".into(),
                }),
            }
        }
        for (id, new) in current
            .tools
            .iter()
            .filter(|(id, _)| !self.tools.contains_key(*id))
        {
            match self.base_of(id) {
                Some((base_id, base)) => successor(id, new, base_id, base, &mut review),
                None => review.notices.push(unlocked(id, "a new tool".into())),
            }
        }
        resources_prompts::compare(
            (&self.resources, &self.prompts),
            (&current.resources, &current.prompts),
            allow_removal,
            &mut review,
        );
        review
    }

    /// This lock as a file of format 1 would say it: no scopes recorded.
    fn without_scopes(&self) -> Lock {
        let strip = |entries: &BTreeMap<String, Value>| -> BTreeMap<String, Value> {
            let mut entries = entries.clone();
            for entry in entries.values_mut() {
                if let Some(entry) = entry.as_object_mut() {
                    entry.remove("scopes");
                }
            }
            entries
        };
        Lock {
            tools: strip(&self.tools),
            resources: strip(&self.resources),
            prompts: strip(&self.prompts),
            scopes_recorded: false,
        }
    }

    /// The highest locked version of `id`'s toolkit and name below `id`'s version.
    fn base_of(&self, id: &str) -> Option<(&str, &Value)> {
        let (path, version) = split(id)?;
        self.tools
            .iter()
            .filter_map(|(locked, definition)| {
                let (p, v) = split(locked)?;
                (p == path && v < version).then_some((v, locked.as_str(), definition))
            })
            .max_by_key(|(v, _, _)| *v)
            .map(|(_, locked, definition)| (locked, definition))
    }
}

/// Records the scopes a caller's token needs beside what is locked (OXP's definitions have no
/// room for them), sorted; written only when there are some, so a lock of a server without
/// scopes reads as it always did.
fn with_scopes(locked: &mut Value, scopes: &[&str]) {
    if !scopes.is_empty() {
        let mut scopes = scopes.to_vec();
        scopes.sort_unstable();
        scopes.dedup();
        locked["scopes"] = json!(scopes);
    }
}

/// `Toolkit.Name` and the version of an exact id.
fn split(id: &str) -> Option<(&str, ToolVersion)> {
    let (path, version) = id.split_once('@')?;
    Some((path, version.parse().ok()?))
}

/// What differs between two definitions of a tool, by part.
fn differences(old: &Value, new: &Value) -> Vec<(Part, Difference)> {
    let empty = json!({});
    let mut found: Vec<(Part, Difference)> = Vec::new();
    let schema = |v: &Value, key: &str| v.get(key).filter(|s| !s.is_null()).cloned();
    for (part, key, direction) in [
        (Part::Input, "input_schema", Direction::Input),
        (Part::Output, "output_schema", Direction::Output),
    ] {
        let (o, n) = (schema(old, key), schema(new, key));
        found.extend(
            diff::schemas(o.as_ref(), n.as_ref(), direction)
                .into_iter()
                .map(|d| (part, d)),
        );
    }
    let requirements = |v: &Value| {
        v.get("requirements")
            .filter(|r| !r.is_null())
            .unwrap_or(&empty)
            .clone()
    };
    found.extend(
        diff::requirements(&requirements(old), &requirements(new))
            .into_iter()
            .map(|d| (Part::Requirements, d)),
    );
    found.extend(
        diff::caller_scopes(old, new)
            .into_iter()
            .map(|d| (Part::Scopes, d)),
    );
    if old["description"] != new["description"] {
        found.push((
            Part::Description,
            Difference {
                pointer: String::new(),
                change: "changed".into(),
                class: Class::Description,
            },
        ));
    }
    found
}

/// A locked version against what is served under its id now.
fn immutable(id: &str, old: &Value, new: &Value, review: &mut Review) {
    let Some((path, version)) = split(id) else {
        return;
    };
    for (part, d) in differences(old, new) {
        let finding = |rule: String| Violation {
            tool_id: id.to_owned(),
            part,
            pointer: d.pointer.clone(),
            change: d.change.clone(),
            rule,
        };
        if d.class == Class::Description {
            review.notices.push(finding(
                "allowed: a published version's descriptions may change".into(),
            ));
        } else {
            let next = next_version(version, d.class);
            review.violations.push(finding(format!(
                "a published version is immutable; publish it as {path}@{next}"
            )));
        }
    }
}

/// A version not locked yet against the highest locked one below it.
fn successor(id: &str, new: &Value, base_id: &str, base: &Value, review: &mut Review) {
    let (Some((path, version)), Some((_, base_version))) = (split(id), split(base_id)) else {
        return;
    };
    let bump = bump(base_version, version);
    let mut broke = false;
    for (part, d) in differences(base, new) {
        let needed = needed(base_version, d.class);
        if bump < needed {
            broke = true;
            let next = next_version(base_version, d.class);
            let what = match d.class {
                Class::Breaking if base_version.major == 0 => {
                    "a breaking change to a 0.y.z tool needs a new minor version"
                }
                Class::Breaking => "a breaking change needs a new major version",
                Class::Additive => "an additive change needs at least a new minor version",
                Class::Description => "a description change needs at least a new patch version",
            };
            review.violations.push(Violation {
                tool_id: id.to_owned(),
                part,
                pointer: d.pointer,
                change: d.change,
                rule: format!(
                    "{what} (judged against the locked {base_id}); publish it as {path}@{next}"
                ),
            });
        }
    }
    if !broke {
        review.notices.push(unlocked(
            id,
            format!("its changes since {base_id} fit the version"),
        ));
    }
}

fn unlocked(id: &str, why_valid: String) -> Violation {
    Violation {
        tool_id: id.to_owned(),
        part: Part::Tool,
        pointer: String::new(),
        change: "new, not yet locked: run `<bin> lock`".into(),
        rule: why_valid,
    }
}

/// How far a version moved from its base.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Bump {
    Patch,
    Minor,
    Major,
}

fn bump(base: ToolVersion, new: ToolVersion) -> Bump {
    if new.major > base.major {
        Bump::Major
    } else if new.minor > base.minor {
        Bump::Minor
    } else {
        Bump::Patch
    }
}

/// The least bump a change of `class` needs from `base` (for `0.y.z`, a new minor is a new
/// major: cargo's reading, which callers of `@0.y` rely on).
fn needed(base: ToolVersion, class: Class) -> Bump {
    match class {
        Class::Breaking if base.major == 0 => Bump::Minor,
        Class::Breaking => Bump::Major,
        Class::Additive => Bump::Minor,
        Class::Description => Bump::Patch,
    }
}

/// The version to publish a change of `class` as, after `base`.
fn next_version(base: ToolVersion, class: Class) -> ToolVersion {
    let ToolVersion {
        major,
        minor,
        patch,
    } = base;
    let (major, minor, patch) = match needed(base, class) {
        Bump::Major => (major + 1, 0, 0),
        Bump::Minor => (major, minor + 1, 0),
        Bump::Patch => (major, minor, patch + 1),
    };
    ToolVersion {
        major,
        minor,
        patch,
    }
}

/// `value` with every object's keys in order, whatever serde_json's map keeps.
fn sorted(value: &Value) -> Value {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            Value::Object(
                keys.into_iter()
                    .map(|k| (k.clone(), sorted(&map[k])))
                    .collect(),
            )
        }
        Value::Array(items) => Value::Array(items.iter().map(sorted).collect()),
        other => other.clone(),
    }
}
