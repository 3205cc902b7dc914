//! Which tools a server exposes: `OXP_TOOLS` and [`RegistryBuilder::select`](crate::RegistryBuilder::select).
//!
//! A comma-separated list of `Toolkit.*`, `Toolkit.Name`, `Toolkit.Name@1` (major 1),
//! `Toolkit.Name@1.2` (1.2.x), `Toolkit.Name@1.2.3`, and `tag:NAME` for tools, `resource:URI`
//! (the URI or template as registered) and `prompt:NAME`; `-` before any of them excludes. Each
//! kind is selected by its own items: with no inclusion of a kind, all of that kind are
//! included first; exclusions apply last, so `tag:math,-Calculator.Div` is the math tools but
//! one (and every resource and prompt), and `-prompt:review` is everything but one prompt.

use crate::descriptor::ToolDescriptor;
use crate::resource::{PromptDescriptor, ResourceDescriptor};
use crate::rules;

/// A parsed selection.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Selection {
    items: Vec<Item>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct Item {
    text: String,
    exclude: bool,
    pattern: Pattern,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Pattern {
    Toolkit(String),
    Tool {
        toolkit: String,
        name: String,
        /// Major, then minor and patch when given.
        version: Vec<u64>,
    },
    Tag(String),
    Resource(String),
    Prompt(String),
}

/// What an item selects among.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Tool,
    Resource,
    Prompt,
}

impl Pattern {
    fn kind(&self) -> Kind {
        match self {
            Pattern::Resource(_) => Kind::Resource,
            Pattern::Prompt(_) => Kind::Prompt,
            _ => Kind::Tool,
        }
    }
}

impl Selection {
    pub(crate) fn parse(text: &str) -> Result<Selection, String> {
        let items = text
            .split(',')
            .map(str::trim)
            .filter(|item| !item.is_empty())
            .map(Item::parse)
            .collect::<Result<Vec<_>, _>>()?;
        if items.is_empty() {
            return Err(format!(
                "the tool selection `{text}` names nothing: write e.g. `Calculator.*,tag:math,-Util.*`"
            ));
        }
        Ok(Selection { items })
    }

    /// The tools selected, in their order; an error when an item matches no tool (a typo would
    /// otherwise hide or expose tools silently) or no tool is left.
    pub(crate) fn apply(
        &self,
        descriptors: Vec<&'static ToolDescriptor>,
    ) -> Result<Vec<&'static ToolDescriptor>, String> {
        let had = !descriptors.is_empty();
        let selected = self.select(Kind::Tool, "tool", descriptors, |p, d| p.matches(d))?;
        if had && selected.is_empty() {
            return Err("the tool selection leaves no tool to serve".into());
        }
        Ok(selected)
    }

    /// The resources selected (`resource:URI` items), in their order.
    pub(crate) fn apply_resources(
        &self,
        descriptors: Vec<&'static ResourceDescriptor>,
    ) -> Result<Vec<&'static ResourceDescriptor>, String> {
        self.select(
            Kind::Resource,
            "resource",
            descriptors,
            |p, d| matches!(p, Pattern::Resource(uri) if uri == d.uri),
        )
    }

    /// The prompts selected (`prompt:NAME` items), in their order.
    pub(crate) fn apply_prompts(
        &self,
        descriptors: Vec<&'static PromptDescriptor>,
    ) -> Result<Vec<&'static PromptDescriptor>, String> {
        self.select(
            Kind::Prompt,
            "prompt",
            descriptors,
            |p, d| matches!(p, Pattern::Prompt(name) if name == d.name),
        )
    }

    /// The descriptors of one kind that its items select: an item that matches none of them is
    /// an error.
    fn select<D: Copy>(
        &self,
        kind: Kind,
        what: &str,
        descriptors: Vec<D>,
        matches: impl Fn(&Pattern, D) -> bool,
    ) -> Result<Vec<D>, String> {
        let items: Vec<&Item> = self
            .items
            .iter()
            .filter(|i| i.pattern.kind() == kind)
            .collect();
        if let Some(unused) = items
            .iter()
            .find(|item| !descriptors.iter().any(|d| matches(&item.pattern, *d)))
        {
            return Err(format!(
                "`{}` in the tool selection matches no {what}",
                unused.text
            ));
        }
        let included = |d: D| {
            let mut includes = items.iter().filter(|i| !i.exclude).peekable();
            includes.peek().is_none() || includes.any(|i| matches(&i.pattern, d))
        };
        let excluded = |d: D| items.iter().any(|i| i.exclude && matches(&i.pattern, d));
        Ok(descriptors
            .into_iter()
            .filter(|d| included(*d) && !excluded(*d))
            .collect())
    }
}

impl Item {
    fn parse(text: &str) -> Result<Item, String> {
        let (exclude, pattern) = match text.strip_prefix('-') {
            Some(rest) => (true, rest.trim()),
            None => (false, text),
        };
        let bad = |why: &str| {
            Err(format!(
                "`{text}` in the tool selection: {why} (items are `Toolkit.*`, `Toolkit.Name`, `Toolkit.Name@1`, `tag:NAME`, `resource:URI`, `prompt:NAME`, each optionally after `-`)"
            ))
        };
        let pattern = if let Some(uri) = pattern.strip_prefix("resource:") {
            if uri.is_empty() {
                return bad("a resource needs its URI");
            }
            Pattern::Resource(uri.to_owned())
        } else if let Some(name) = pattern.strip_prefix("prompt:") {
            if name.is_empty() {
                return bad("a prompt needs its name");
            }
            Pattern::Prompt(name.to_owned())
        } else if let Some(tag) = pattern.strip_prefix("tag:") {
            if tag.is_empty() {
                return bad("a tag needs a name");
            }
            Pattern::Tag(tag.to_owned())
        } else {
            let (path, version) = match pattern.split_once('@') {
                Some((path, version)) => (path, Some(version)),
                None => (pattern, None),
            };
            let Some((toolkit, name)) = path.split_once('.') else {
                return bad("no `.` between toolkit and name");
            };
            if !rules::is_segment(toolkit) {
                return bad("the toolkit is letters, digits and underscores");
            }
            if name == "*" {
                if version.is_some() {
                    return bad("a whole toolkit has no version");
                }
                Pattern::Toolkit(toolkit.to_owned())
            } else {
                if !rules::is_segment(name) {
                    return bad("the name is letters, digits and underscores, or `*`");
                }
                let version = match version {
                    None => Vec::new(),
                    Some(v) => match v
                        .split('.')
                        .map(str::parse::<u64>)
                        .collect::<Result<Vec<_>, _>>()
                    {
                        Ok(parts) if (1..=3).contains(&parts.len()) => parts,
                        _ => return bad("the version is `1`, `1.2` or `1.2.3`"),
                    },
                };
                Pattern::Tool {
                    toolkit: toolkit.to_owned(),
                    name: name.to_owned(),
                    version,
                }
            }
        };
        Ok(Item {
            text: text.to_owned(),
            exclude,
            pattern,
        })
    }
}

impl Pattern {
    fn matches(&self, d: &ToolDescriptor) -> bool {
        match self {
            Pattern::Resource(_) | Pattern::Prompt(_) => false,
            Pattern::Toolkit(toolkit) => d.toolkit == toolkit,
            Pattern::Tag(tag) => d.hints.tags.contains(&tag.as_str()),
            Pattern::Tool {
                toolkit,
                name,
                version,
            } => {
                let parts = d.version.split('.').map(str::parse::<u64>);
                d.toolkit == toolkit
                    && d.name == name
                    && version
                        .iter()
                        .zip(parts)
                        .all(|(want, have)| have == Ok(*want))
            }
        }
    }
}
