//! Resources and prompts in the lockfile. They have no versions, so what was published holds
//! for as long as they are served: a locked resource (by its URI or template) or prompt (by its
//! name) must not disappear, a prompt's locked argument must not go nor become required, and a
//! new argument must be optional, and neither may need a scope it did not; descriptions, titles,
//! new optional arguments and scopes dropped are allowed.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::diff::{Class, caller_scopes};
use super::{Part, Review, Violation};
use crate::registry::Registry;

/// What the lock records of each resource, by URI.
pub(super) fn resources(registry: &Registry) -> BTreeMap<String, Value> {
    registry
        .resources()
        .iter()
        .map(|resource| {
            let d = resource.descriptor();
            let parameters: Vec<&str> = d.arguments.iter().map(|a| a.name).collect();
            let mut locked = json!({
                "name": d.name,
                "description": d.description,
                "mime_type": d.mime_type,
                "parameters": parameters,
            });
            super::with_scopes(&mut locked, d.scopes);
            (d.uri.to_owned(), locked)
        })
        .collect()
}

/// What the lock records of each prompt, by name.
pub(super) fn prompts(registry: &Registry) -> BTreeMap<String, Value> {
    registry
        .prompts()
        .iter()
        .map(|prompt| {
            let d = prompt.descriptor();
            let arguments: Vec<Value> = d
                .arguments
                .iter()
                .zip(prompt.required())
                .map(|(a, required)| json!({"name": a.name, "required": required}))
                .collect();
            let mut locked = json!({"description": d.description, "arguments": arguments});
            super::with_scopes(&mut locked, d.scopes);
            (d.name.to_owned(), locked)
        })
        .collect()
}

fn finding(id: String, part: Part, pointer: &str, change: String, rule: &str) -> Violation {
    Violation {
        tool_id: id,
        part,
        pointer: pointer.to_owned(),
        change,
        rule: rule.to_owned(),
    }
}

const FOREVER: &str = "a resource or prompt has no version to publish a change under: what was published holds while it is served";

/// Reviews the resources and prompts of `current` against `locked`.
pub(super) fn compare(
    locked: (&BTreeMap<String, Value>, &BTreeMap<String, Value>),
    current: (&BTreeMap<String, Value>, &BTreeMap<String, Value>),
    allow_removal: bool,
    review: &mut Review,
) {
    for (kind, part, old_all, new_all) in [
        ("resource", Part::Resource, locked.0, current.0),
        ("prompt", Part::Prompt, locked.1, current.1),
    ] {
        for (key, old) in old_all {
            let id = format!("{kind} {key}");
            let Some(new) = new_all.get(key) else {
                if allow_removal {
                    review.notices.push(finding(
                        id,
                        part,
                        "",
                        "removed".into(),
                        "retired by --allow-removal",
                    ));
                } else {
                    review.violations.push(finding(
                        id,
                        part,
                        "",
                        "removed".into(),
                        "a locked resource or prompt must not disappear while clients may still ask for it; serve it, or retire it with --allow-removal",
                    ));
                }
                continue;
            };
            if old["mime_type"] != new["mime_type"] {
                review.violations.push(finding(
                    id.clone(),
                    part,
                    "/mime_type",
                    format!("media type {} → {}", old["mime_type"], new["mime_type"]),
                    FOREVER,
                ));
            }
            if part == Part::Prompt {
                arguments(&id, old, new, review);
            }
            for d in caller_scopes(old, new) {
                if d.class == Class::Breaking {
                    review.violations.push(finding(
                        id.clone(),
                        part,
                        &d.pointer,
                        d.change,
                        FOREVER,
                    ));
                } else {
                    review.notices.push(finding(
                        id.clone(),
                        part,
                        &d.pointer,
                        d.change,
                        "allowed: it refuses no caller that was served",
                    ));
                }
            }
            if old["description"] != new["description"] {
                review.notices.push(finding(
                    id,
                    part,
                    "/description",
                    "description changed".into(),
                    "allowed: a description is not a contract",
                ));
            }
        }
        for key in new_all.keys().filter(|key| !old_all.contains_key(*key)) {
            review.notices.push(finding(
                format!("{kind} {key}"),
                part,
                "",
                "new, not yet locked: run `<bin> lock`".into(),
                "allowed: a new resource or prompt",
            ));
        }
    }
}

fn arguments(id: &str, old: &Value, new: &Value, review: &mut Review) {
    let list = |v: &Value| -> Vec<(String, bool)> {
        v["arguments"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|a| {
                (
                    a["name"].as_str().unwrap_or_default().to_owned(),
                    a["required"].as_bool().unwrap_or(false),
                )
            })
            .collect()
    };
    let (old, new) = (list(old), list(new));
    for (name, was_required) in &old {
        let pointer = format!("/arguments/{name}");
        match new.iter().find(|(n, _)| n == name) {
            None => review.violations.push(finding(
                id.to_owned(),
                Part::Prompt,
                &pointer,
                format!("argument `{name}` removed"),
                FOREVER,
            )),
            Some((_, true)) if !was_required => review.violations.push(finding(
                id.to_owned(),
                Part::Prompt,
                &pointer,
                format!("argument `{name}` became required"),
                FOREVER,
            )),
            Some(_) => {}
        }
    }
    for (name, required) in new.iter().filter(|(n, _)| !old.iter().any(|(o, _)| o == n)) {
        let pointer = format!("/arguments/{name}");
        if *required {
            review.violations.push(finding(
                id.to_owned(),
                Part::Prompt,
                &pointer,
                format!("new required argument `{name}`"),
                FOREVER,
            ));
        } else {
            review.notices.push(finding(
                id.to_owned(),
                Part::Prompt,
                &pointer,
                format!("new optional argument `{name}`"),
                "allowed: clients that do not send it still get the prompt",
            ));
        }
    }
}
