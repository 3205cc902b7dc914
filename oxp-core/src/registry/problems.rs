//! What the registry refuses, in the words a developer reads at start-up: every problem with the
//! tools, resources, prompts and skills given to a builder, each naming where it is defined.

use std::fmt;

use crate::{rules, schema};

/// The first of `scopes` (a tool's, a resource's or a prompt's) that is no scope token, and why.
pub(crate) fn scopes_problem(scopes: &[&str]) -> Option<String> {
    scopes.iter().find_map(|scope| rules::scope_problem(scope))
}

/// Everything wrong with the tools given to a [`RegistryBuilder`](super::RegistryBuilder).
///
/// ```
/// use oxp_runtime::{tool, Registry};
///
/// /// One.
/// #[tool(toolkit = "Dup", name = "Same", version = "1.0.0")]
/// fn one() {}
///
/// /// Two.
/// #[tool(toolkit = "Dup", name = "Same", version = "1.0.0")]
/// fn two() {}
///
/// let error = Registry::builder().tool(one::TOOL).tool(two::TOOL).build().unwrap_err();
/// assert_eq!(error.problems.len(), 1);
/// assert!(error.to_string().contains("Dup.Same@1.0.0"));
/// ```
#[derive(Debug)]
pub struct RegistryError {
    /// Each problem, naming the fn it is about.
    pub problems: Vec<RegistryProblem>,
}

/// One problem with one tool (or a pair of them).
///
/// ```
/// use oxp_runtime::{registry::RegistryProblem, tool, Registry};
///
/// /// One.
/// #[tool(toolkit = "Dup", name = "Same", version = "1.0.0")]
/// fn one() {}
///
/// /// Two.
/// #[tool(toolkit = "Dup", name = "Same", version = "1.0.0")]
/// fn two() {}
///
/// let error = Registry::builder().tool(one::TOOL).tool(two::TOOL).build().unwrap_err();
/// assert!(matches!(&error.problems[0], RegistryProblem::DuplicateId { .. }));
/// ```
#[derive(Debug)]
#[non_exhaustive]
pub enum RegistryProblem {
    /// Two fns register the same id.
    DuplicateId {
        /// The id.
        id: String,
        /// One fn.
        first: String,
        /// The other.
        second: String,
    },
    /// Two different tools would have the same wire name (`A_B.C` and `A.B_C`).
    WireNameCollision {
        /// The shared wire name.
        wire_name: String,
        /// One `Toolkit.Name`.
        first: String,
        /// The other.
        second: String,
        /// Where the second is defined.
        at: String,
    },
    /// A name, version or description breaks the rules.
    Invalid {
        /// Where the fn is.
        at: String,
        /// What is wrong.
        what: String,
    },
    /// The tool selection (`OXP_TOOLS`, [`RegistryBuilder::select`](super::RegistryBuilder::select)) is malformed, names a tool
    /// that is not there, or leaves none.
    Selection {
        /// What is wrong.
        what: String,
    },
    /// Two resources serve the same URI, or two prompts have the same name.
    Duplicate {
        /// The URI or the name.
        what: String,
        /// One fn.
        first: String,
        /// The other.
        second: String,
    },
    /// A schema breaks the schema policy.
    Schema {
        /// The tool.
        id: String,
        /// Where the fn is.
        at: String,
        /// What is wrong.
        error: schema::SchemaError,
    },
}

impl fmt::Display for RegistryProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RegistryProblem::DuplicateId { id, first, second } => write!(
                f,
                "the tool id `{id}` is registered twice: by {first} and by {second}; give one of \
                 them another `version` or `name`"
            ),
            RegistryProblem::WireNameCollision {
                wire_name,
                first,
                second,
                at,
            } => write!(
                f,
                "`{first}` and `{second}` (at {at}) share the wire name `{wire_name}`; rename one"
            ),
            RegistryProblem::Invalid { at, what } => write!(f, "{at}: {what}"),
            RegistryProblem::Duplicate {
                what,
                first,
                second,
            } => write!(
                f,
                "{what} is registered twice: by {first} and by {second}; rename one of them"
            ),
            RegistryProblem::Selection { what } => f.write_str(what),
            RegistryProblem::Schema { id, at, error } => write!(f, "{id} at {at}: {error}"),
        }
    }
}

impl fmt::Display for RegistryError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} problem(s) with the registered tools:",
            self.problems.len()
        )?;
        for problem in &self.problems {
            write!(f, "\n  - {problem}")?;
        }
        Ok(())
    }
}

impl std::error::Error for RegistryError {}
