//! How the registry checks resources and prompts: what `#[resource]` and `#[prompt]` emit
//! ([`crate::resource`]) comes in, what passed comes out, and each refusal goes to the builder's
//! list of problems.

use super::problems::{RegistryProblem, scopes_problem};
use crate::resource::{
    PromptDescriptor, RegisteredPrompt, RegisteredResource, ResourceDescriptor, Template,
};
use crate::rules;

/// Checks every resource: its URI a template whose parameters are exactly the fn's, a
/// description, no URI served twice. Fixed URIs come first, each group by URI.
pub(crate) fn register_resources(
    descriptors: &[&'static ResourceDescriptor],
    problems: &mut Vec<RegistryProblem>,
) -> Vec<RegisteredResource> {
    let mut registered: Vec<RegisteredResource> = Vec::new();
    for &descriptor in descriptors {
        let invalid = |what: String| RegistryProblem::Invalid {
            at: descriptor.location(),
            what,
        };
        let template = match Template::parse(descriptor.uri) {
            Ok(template) => template,
            Err(what) => {
                problems.push(invalid(what));
                continue;
            }
        };
        let variables: Vec<&str> = template.variables().collect();
        let names: Vec<&str> = descriptor.arguments.iter().map(|a| a.name).collect();
        if variables.len() != names.len() || !names.iter().all(|n| variables.contains(n)) {
            problems.push(invalid(format!(
                "the URI `{}` has the parameters {variables:?} but the fn takes {names:?}: name each parameter once in the URI",
                descriptor.uri
            )));
            continue;
        }
        let problem = rules::description_problem(descriptor.description)
            .or_else(|| scopes_problem(descriptor.scopes));
        if let Some(what) = problem {
            problems.push(invalid(what));
            continue;
        }
        if let Some(first) = registered
            .iter()
            .find(|r| r.descriptor().uri == descriptor.uri)
        {
            problems.push(RegistryProblem::Duplicate {
                what: format!("the resource `{}`", descriptor.uri),
                first: first.descriptor().location(),
                second: descriptor.location(),
            });
            continue;
        }
        registered.push(RegisteredResource::new(descriptor, template));
    }
    registered.sort_by(|a, b| {
        (a.descriptor().is_template(), a.descriptor().uri)
            .cmp(&(b.descriptor().is_template(), b.descriptor().uri))
    });
    registered
}

/// Checks every prompt: a name, a description, no name given twice. By name.
pub(crate) fn register_prompts(
    descriptors: &[&'static PromptDescriptor],
    problems: &mut Vec<RegistryProblem>,
) -> Vec<RegisteredPrompt> {
    let mut registered: Vec<RegisteredPrompt> = Vec::new();
    for &descriptor in descriptors {
        let problem = if descriptor.name.trim().is_empty() {
            Some("a prompt needs a name: `#[prompt(name = \"review\")]`".to_owned())
        } else {
            rules::description_problem(descriptor.description)
                .or_else(|| scopes_problem(descriptor.scopes))
        };
        if let Some(what) = problem {
            problems.push(RegistryProblem::Invalid {
                at: descriptor.location(),
                what,
            });
            continue;
        }
        if let Some(first) = registered
            .iter()
            .find(|p| p.descriptor().name == descriptor.name)
        {
            problems.push(RegistryProblem::Duplicate {
                what: format!("the prompt `{}`", descriptor.name),
                first: first.descriptor().location(),
                second: descriptor.location(),
            });
            continue;
        }
        registered.push(RegisteredPrompt::new(descriptor));
    }
    registered.sort_by_key(|p| p.descriptor().name);
    registered
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Scopes written by hand (not through the attribute, which checks them as it compiles)
    /// are checked at start-up by the tool's rule, in its words.
    #[test]
    fn a_malformed_scope_of_a_resource_or_prompt_is_a_start_up_error() {
        static RESOURCE: ResourceDescriptor = ResourceDescriptor {
            uri: "audit://all",
            description: "The audit log.",
            scopes: &["audit read"],
            ..crate::__private::FALLBACK_RESOURCE
        };
        static PROMPT: PromptDescriptor = PromptDescriptor {
            name: "review",
            description: "Review a change.",
            scopes: &[""],
            ..crate::__private::FALLBACK_PROMPT
        };
        let resource = super::super::Registry::builder()
            .resource(&RESOURCE)
            .build();
        let message = resource.unwrap_err().to_string();
        assert!(
            message.contains("the scope `audit read` holds ' '"),
            "{message}"
        );
        let prompt = super::super::Registry::builder().prompt(&PROMPT).build();
        let message = prompt.unwrap_err().to_string();
        assert!(message.contains("a scope cannot be empty"), "{message}");
    }
}
