//! The skills extension (SEP-2640): `skills/list`, `skills/get`, and each skill's files as
//! `skill://<name>/<path>` resources (its `SKILL.md` listed by `resources/list`).

use std::time::Duration;

use rmcp::ErrorData as McpError;
use rmcp::model::{
    CacheScope, GetSkillRequestParams, GetSkillResult, ListSkillsResult, Resource,
    ResourceContents, Skill, SkillFrontmatter, SkillResource, SkillResources,
};

use crate::registry::Registry;
use crate::skill::RegisteredSkill;
use crate::time::millis;

/// The scheme of a skill's files.
pub(super) const SCHEME: &str = "skill://";

fn entry(skill: &RegisteredSkill) -> Skill {
    let descriptor = skill.descriptor();
    let mut frontmatter = SkillFrontmatter::new(descriptor.name, descriptor.description);
    for (key, value) in skill.frontmatter() {
        if key != "name" && key != "description" {
            frontmatter = frontmatter.with_field(key.clone(), value.clone());
        }
    }
    let files = skill
        .files()
        .map(|(uri, digest, size)| SkillResource::new(uri.clone(), digest.clone(), size))
        .collect();
    Skill::new(skill.uri(), frontmatter, SkillResources::Files(files))
}

/// Every skill, with its manifest. The skills are compiled in: a list lasts as long as the
/// server's other lists.
pub(super) fn list(registry: &Registry, ttl: Duration) -> ListSkillsResult {
    ListSkillsResult::with_all_items(registry.skills().iter().map(entry).collect())
        .with_ttl_ms(millis(ttl))
        .with_cache_scope(CacheScope::Private)
}

/// One skill by its `SKILL.md` URI; `-32602` for a URI that is not one.
pub(super) fn get(
    registry: &Registry,
    request: &GetSkillRequestParams,
    ttl: Duration,
) -> Result<GetSkillResult, McpError> {
    registry
        .skills()
        .iter()
        .find(|skill| skill.uri() == request.uri)
        .map(|skill| {
            GetSkillResult::new(entry(skill))
                .with_ttl_ms(millis(ttl))
                .with_cache_scope(CacheScope::Private)
        })
        .ok_or_else(|| {
            McpError::invalid_params(
                format!("Skill not found: {}", request.uri),
                Some(serde_json::json!({ "uri": request.uri })),
            )
        })
}

/// Each skill's `SKILL.md`, as `resources/list` shows it: named and described by its frontmatter.
pub(super) fn resources(registry: &Registry) -> impl Iterator<Item = Resource> + '_ {
    registry.skills().iter().map(|skill| {
        let descriptor = skill.descriptor();
        let mut resource = Resource::new(skill.uri(), descriptor.name);
        resource.description = Some(descriptor.description.to_owned());
        resource.mime_type = Some("text/markdown".to_owned());
        resource
    })
}

/// A skill file's contents (`skill.rs` decides text or bytes); `None` when no skill has it.
pub(super) fn read(registry: &Registry, uri: &str) -> Option<ResourceContents> {
    use crate::content::Resource as Read;
    let (contents, mime_type) = match crate::skill::read(registry.skills(), uri)? {
        Read::Text {
            uri,
            mime_type,
            text,
            ..
        } => (ResourceContents::text(text, uri), mime_type),
        Read::Blob {
            uri,
            mime_type,
            blob,
            ..
        } => (ResourceContents::blob(blob, uri), mime_type),
        // A kind of contents MCP has no field for.
        _ => return None,
    };
    Some(match mime_type {
        Some(mime_type) => contents.with_mime_type(mime_type),
        None => contents,
    })
}

/// `resources/directory/read`: the direct children of a skill's folder (`skill://<name>`) or of
/// a folder in it (`skill://<name>/<dir>`), subfolders as `inode/directory`; `-32602` for a URI
/// that is no folder of a skill.
pub(super) fn directory(
    registry: &Registry,
    uri: &str,
    ttl: Duration,
) -> Result<rmcp::model::ReadResourceDirectoryResult, McpError> {
    let not_a_directory = || {
        McpError::invalid_params(
            format!("Not a directory: {uri}"),
            Some(serde_json::json!({ "uri": uri })),
        )
    };
    let trimmed = uri.trim_end_matches('/');
    let skill = registry
        .skills()
        .iter()
        .find(|skill| {
            let root = crate::skill::file_uri(skill.descriptor().name, "");
            let root = root.trim_end_matches('/');
            trimmed == root || trimmed.starts_with(&format!("{root}/"))
        })
        .ok_or_else(not_a_directory)?;
    let name = skill.descriptor().name;
    let root = crate::skill::file_uri(name, "");
    // The folder's path inside the skill, as the files' paths have it ("" for the skill's own).
    let inside = trimmed
        .strip_prefix(root.trim_end_matches('/'))
        .unwrap_or_default()
        .trim_start_matches('/');
    let folder = skill
        .descriptor()
        .files
        .iter()
        .map(|file| file.path)
        .find_map(|path| {
            // A file's path and URI encode its segments alike: compare them encoded.
            let encoded = crate::skill::file_uri(name, path);
            let encoded_path = encoded.strip_prefix(&root).unwrap_or_default();
            let prefix = if inside.is_empty() {
                String::new()
            } else {
                format!("{inside}/")
            };
            encoded_path.starts_with(&prefix).then_some(prefix)
        })
        .ok_or_else(not_a_directory)?;
    let mut children: Vec<Resource> = Vec::new();
    for file in skill.descriptor().files {
        let uri = crate::skill::file_uri(name, file.path);
        let Some(rest) = uri
            .strip_prefix(&root)
            .and_then(|path| path.strip_prefix(folder.as_str()))
        else {
            continue;
        };
        match rest.split_once('/') {
            None => {
                let mut child = Resource::new(uri.clone(), rest);
                child.mime_type = Some(crate::skill::media_type(file.path, file.bytes).to_owned());
                child.size = Some(file.bytes.len() as u64);
                children.push(child);
            }
            Some((subfolder, _)) => {
                let uri = format!("{root}{folder}{subfolder}");
                if !children.iter().any(|c| c.uri == uri) {
                    let mut child = Resource::new(uri, subfolder);
                    child.mime_type = Some(rmcp::model::DIRECTORY_MIME_TYPE.to_owned());
                    children.push(child);
                }
            }
        }
    }
    Ok(rmcp::model::ListResourcesResult::with_all_items(children)
        .with_ttl_ms(millis(ttl))
        .with_cache_scope(CacheScope::Private))
}
