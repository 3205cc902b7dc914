//! The requirements step: `user_id`, then secrets, then authorization (oxp-notes §1 R, §3.21–23).

use crate::authorization::ChallengeRequest;
use crate::context::ToolContext;
use crate::protocol::{
    CallContext, MissingRequirements, ServerErrorResponse, ToolAuthorizationChallenge,
};
use crate::registry::RegisteredTool;

use super::{CallMeta, Pipeline};

/// What a call lacked: the requirements step's answer when it refuses.
pub(super) struct Missing {
    user_id: Option<String>,
    lacks_user_id: bool,
    secrets: Vec<String>,
    authorization: Vec<&'static crate::descriptor::AuthorizationSpec>,
}

impl Pipeline {
    /// The `400` for a call that lacks requirements, with challenges when a provider mints them.
    pub(super) async fn missing(
        &self,
        tool: &RegisteredTool,
        missing: Missing,
        meta: &CallMeta,
    ) -> ServerErrorResponse {
        let mut challenges = Vec::new();
        if let Some(provider) = &self.authorization {
            for spec in &missing.authorization {
                let request = ChallengeRequest {
                    provider_id: spec.id,
                    scopes: spec.scopes,
                    user_id: missing.user_id.as_deref(),
                    tool_id: tool.id(),
                };
                if let Some(challenge) = provider.challenge(request).await {
                    challenges.push(ToolAuthorizationChallenge {
                        id: spec.id.to_owned(),
                        url: challenge.url,
                        check_url: meta
                            .check_url_base
                            .as_ref()
                            .map(|base| format!("{base}{}", challenge.check_id)),
                    });
                }
            }
        }
        let mut lacking = Vec::new();
        if missing.lacks_user_id {
            lacking.push("a user_id".to_owned());
        }
        if !missing.secrets.is_empty() {
            lacking.push(format!("the secrets {}", missing.secrets.join(", ")));
        }
        if !missing.authorization.is_empty() {
            let ids: Vec<&str> = missing.authorization.iter().map(|a| a.id).collect();
            lacking.push(format!("authorization for {}", ids.join(", ")));
        }
        ServerErrorResponse {
            message: format!(
                "Tool '{}' cannot run without {}",
                tool.name(),
                lacking.join(" and ")
            ),
            developer_message: Some(format!(
                "{} requires these in the call's context",
                tool.id()
            )),
            missing_requirements: Some(Box::new(MissingRequirements {
                authorization: challenges,
                secrets: missing.secrets,
                user_id: missing.lacks_user_id,
                authorization_providers: missing
                    .authorization
                    .iter()
                    .map(|a| a.id.to_owned())
                    .collect(),
            })),
        }
    }
}

/// Checks `user_id`, then secrets, then authorization, and builds the tool's context.
pub(super) fn requirements(
    tool: &RegisteredTool,
    context: CallContext,
    call_id: String,
) -> Result<ToolContext, Missing> {
    let descriptor = tool.descriptor();
    let user_id = context.user_id.filter(|u| !u.is_empty());
    let lacks_user_id = descriptor.user_id && user_id.is_none();

    let mut tool_context = ToolContext::new(call_id);
    for secret in context.secrets {
        // An empty value is no secret: a tool that requires one gets a real value or none.
        if descriptor.secrets.contains(&secret.id.as_str()) && !secret.value.expose().is_empty() {
            tool_context = tool_context.with_secret(secret.id, secret.value.expose());
        }
    }
    let secrets: Vec<String> = descriptor
        .secrets
        .iter()
        .filter(|id| tool_context.secret(id).is_none())
        .map(|id| (*id).to_owned())
        .collect();

    for grant in context.authorization {
        let required = descriptor.authorization.iter().any(|a| a.id == grant.id);
        if required && !grant.token.expose().is_empty() {
            tool_context = tool_context.with_authorization_token(grant.id, grant.token.expose());
        }
    }
    let authorization: Vec<_> = descriptor
        .authorization
        .iter()
        .filter(|a| tool_context.authorization_token(a.id).is_none())
        .collect();

    if lacks_user_id || !secrets.is_empty() || !authorization.is_empty() {
        return Err(Missing {
            user_id,
            lacks_user_id,
            secrets,
            authorization,
        });
    }
    Ok(match user_id {
        Some(user_id) => tool_context.with_user_id(user_id),
        None => tool_context,
    })
}
