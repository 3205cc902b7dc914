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
        let problem = if let Some(problem) = crate::rules::skill_name_problem(descriptor.name) {
            Some(problem)
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::skill::SkillFile;

    const FILES: &[SkillFile] = &[SkillFile {
        path: "SKILL.md",
        bytes: b"---\nname: x\n---\n",
    }];

    /// A skill written by hand is held to the rule `skills!` checks, in the same words.
    #[test]
    fn a_hand_written_skill_is_held_to_the_name_rule() {
        static BAD: SkillDescriptor = SkillDescriptor {
            name: "Pdf--Tools",
            description: "Fill forms.",
            frontmatter: r#"{"name": "Pdf--Tools", "description": "Fill forms."}"#,
            files: FILES,
            source: "skills/Pdf--Tools/SKILL.md",
        };
        static GOOD: SkillDescriptor = SkillDescriptor {
            name: "pdf-tools",
            description: "Fill forms.",
            frontmatter: r#"{"name": "pdf-tools", "description": "Fill forms."}"#,
            files: FILES,
            source: "skills/pdf-tools/SKILL.md",
        };
        let mut problems = Vec::new();
        let registered = register(&[&BAD, &GOOD], &mut problems);
        assert_eq!(registered.len(), 1);
        assert_eq!(
            problems.iter().map(ToString::to_string).collect::<Vec<_>>(),
            [
                "skills/Pdf--Tools/SKILL.md: the name `Pdf--Tools` may only have lowercase \
              letters, digits and hyphens"
            ]
        );
    }
}
