//! How the registry checks skills: what [`skills!`](https://docs.rs/oxp-runtime/latest/oxp_runtime/macro.skills.html) embeds
//! ([`crate::skill`]) comes in, what passed comes out, and each refusal goes to the builder's
//! list of problems.

use super::problems::RegistryProblem;
use crate::skill::{RegisteredSkill, SkillDescriptor};

/// Checks every skill again at start-up (a descriptor may be written by hand): a name by the
/// Agent Skills rule, a description, a `SKILL.md`, a frontmatter that says the same; no name
/// twice. Each problem names the skill's `SKILL.md`.
pub(crate) fn register(
    descriptors: &[&'static SkillDescriptor],
    problems: &mut Vec<RegistryProblem>,
) -> Vec<RegisteredSkill> {
    let mut registered: Vec<RegisteredSkill> = Vec::new();
    for &descriptor in descriptors {
        let invalid = |what: String| RegistryProblem::Invalid {
            at: descriptor.source.to_owned(),
            what,
        };
        let frontmatter = match serde_json::from_str::<serde_json::Value>(descriptor.frontmatter) {
            Ok(serde_json::Value::Object(map)) => map,
            _ => {
                problems.push(invalid("its frontmatter is not an object".into()));
                continue;
            }
        };
        let name_ok = !descriptor.name.is_empty()
            && descriptor.name.chars().count() <= 64
            && descriptor
                .name
                .chars()
                .all(|c| c.is_lowercase() || c.is_numeric() || c == '-')
            && !descriptor.name.starts_with('-')
            && !descriptor.name.ends_with('-')
            && !descriptor.name.contains("--");
        let problem = if !name_ok {
            Some(format!(
                "the skill name `{}` breaks the Agent Skills rule: 1 to 64 lowercase letters, digits and single hyphens, not first or last",
                descriptor.name
            ))
        } else if descriptor.description.trim().is_empty() {
            Some("the skill needs a description".to_owned())
        } else if frontmatter.get("name").and_then(|v| v.as_str()) != Some(descriptor.name)
            || frontmatter.get("description").and_then(|v| v.as_str())
                != Some(descriptor.description)
        {
            Some("the frontmatter's name and description are not the skill's".to_owned())
        } else if !descriptor.files.iter().any(|f| f.path == "SKILL.md") {
            Some("the skill has no SKILL.md".to_owned())
        } else {
            None
        };
        if let Some(what) = problem {
            problems.push(invalid(what));
            continue;
        }
        if let Some(first) = registered
            .iter()
            .find(|s| s.descriptor().name == descriptor.name)
        {
            problems.push(RegistryProblem::Duplicate {
                what: format!("the skill `{}`", descriptor.name),
                first: first.descriptor().source.to_owned(),
                second: descriptor.source.to_owned(),
            });
            continue;
        }
        registered.push(RegisteredSkill::new(descriptor, frontmatter));
    }
    registered.sort_by_key(|s| s.descriptor().name);
    registered
}
