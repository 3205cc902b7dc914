//! OXP 1.0 wire types, exactly as `spec/oxp-1.0-openapi.json` shapes them. Serde only: no logic.

use std::fmt;

use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};

use crate::error::ToolError;

#[doc(hidden)]
pub mod unique;

/// A string that must never be logged: its `Debug` prints `"<redacted>"`.
///
/// Serialization still carries the real value, because the wire needs it.
///
/// ```
/// use oxp_runtime::protocol::Sensitive;
///
/// let token = Sensitive::new("hunter2");
/// assert_eq!(token.expose(), "hunter2");
/// assert_eq!(format!("{token:?}"), "<redacted>");
/// ```
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Sensitive(String);

impl Sensitive {
    /// Wraps a secret value.
    ///
    /// ```
    /// let s = oxp_runtime::protocol::Sensitive::new(String::from("v"));
    /// assert_eq!(s.expose(), "v");
    /// ```
    pub fn new(value: impl Into<String>) -> Self {
        Sensitive(value.into())
    }

    /// The value itself: call this only where the value is used, never to log it.
    ///
    /// ```
    /// assert!(oxp_runtime::protocol::Sensitive::new("").expose().is_empty());
    /// ```
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Sensitive {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
}

/// A tool as `GET /tools` lists it (`ToolDefinition`, a closed object).
///
/// All six fields are always emitted (oxp-notes §3.9): `output_schema` is `null` for a tool that
/// returns nothing.
///
/// ```
/// use oxp_runtime::{tool, Registry};
///
/// /// Read a repository's issues.
/// #[tool(toolkit = "Github", version = "1.0.0", user_id, secret = "GITHUB_APP_KEY", authorization(id = "github", scopes = ["repo"]))]
/// async fn issues(repo: String) -> Vec<String> { vec![repo] }
///
/// let registry = Registry::builder().tool(issues::TOOL).build().unwrap();
/// let definition = registry.tools()[0].definition();
/// assert_eq!((definition.id.as_str(), definition.name.as_str()), ("Github.Issues@1.0.0", "Github_Issues"));
/// assert_eq!(definition.input_schema["required"], serde_json::json!(["repo"]));
/// ```
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolDefinition {
    /// `Toolkit.Name@x.y.z`.
    pub id: String,
    /// `Toolkit_Name`, the LLM-safe function name.
    pub name: String,
    /// What the tool does, for people and models.
    pub description: String,
    /// `x.y.z`.
    pub version: String,
    /// The JSON Schema of the tool's input object.
    pub input_schema: Value,
    /// The JSON Schema of the tool's value, or `null` when it returns nothing.
    pub output_schema: Option<Value>,
    /// What a call must carry in its `context`; absent when nothing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requirements: Option<ToolRequirements>,
}

/// `ToolDefinition.requirements`.
///
/// ```
/// use oxp_runtime::{tool, Registry};
///
/// /// Read a repository's issues.
/// #[tool(toolkit = "Github", version = "1.0.0", user_id, secret = "GITHUB_APP_KEY", authorization(id = "github", scopes = ["repo"]))]
/// async fn issues(repo: String) -> Vec<String> { vec![repo] }
///
/// let registry = Registry::builder().tool(issues::TOOL).build().unwrap();
/// let definition = registry.tools()[0].definition();
/// let requirements = definition.requirements.as_ref().unwrap();
/// assert!(requirements.user_id);
/// assert_eq!(requirements.secrets[0].id, "GITHUB_APP_KEY");
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolRequirements {
    /// Authorization providers whose tokens the call must carry.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub authorization: Vec<AuthorizationRequirement>,
    /// Secrets the call must carry.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub secrets: Vec<SecretRequirement>,
    /// Whether the call must carry a `user_id`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub user_id: bool,
}

impl ToolRequirements {
    /// Whether nothing is required.
    ///
    /// ```
    /// assert!(oxp_runtime::protocol::ToolRequirements::default().is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.authorization.is_empty() && self.secrets.is_empty() && !self.user_id
    }
}

/// One authorization provider a tool needs a token from.
///
/// ```
/// use oxp_runtime::{tool, Registry};
///
/// /// Read a repository's issues.
/// #[tool(toolkit = "Github", version = "1.0.0", user_id, secret = "GITHUB_APP_KEY", authorization(id = "github", scopes = ["repo"]))]
/// async fn issues(repo: String) -> Vec<String> { vec![repo] }
///
/// let registry = Registry::builder().tool(issues::TOOL).build().unwrap();
/// let definition = registry.tools()[0].definition();
/// let authorization = &definition.requirements.as_ref().unwrap().authorization[0];
/// assert_eq!(authorization.id, "github");
/// assert_eq!(authorization.oauth2.as_ref().unwrap().scopes, ["repo"]);
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuthorizationRequirement {
    /// The provider's id, e.g. `google`.
    pub id: String,
    /// The OAuth 2.0 scopes the token must grant.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub oauth2: Option<OAuth2Requirement>,
}

/// `requirements.authorization[].oauth2`.
///
/// ```
/// let requirement: oxp_runtime::protocol::OAuth2Requirement = serde_json::from_str(r#"{"scopes": ["repo"]}"#).unwrap();
/// assert_eq!(requirement.scopes, ["repo"]);
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct OAuth2Requirement {
    /// The scopes the token must grant.
    #[serde(default)]
    pub scopes: Vec<String>,
}

/// One secret a tool needs.
///
/// ```
/// let secret: oxp_runtime::protocol::SecretRequirement = serde_json::from_str(r#"{"id": "GITHUB_APP_KEY"}"#).unwrap();
/// assert_eq!(secret.id, "GITHUB_APP_KEY");
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SecretRequirement {
    /// The secret's id, e.g. `TWILIO_API_KEY`.
    pub id: String,
}

/// The body of `POST /tools/call` (`CallToolRequest`, a closed object).
///
/// ```
/// use oxp_runtime::protocol::CallToolRequest;
///
/// let req: CallToolRequest = serde_json::from_str(
///     r#"{"tool_id": "Calculator.Add", "input": {"a": 1, "b": 2}}"#,
/// ).unwrap();
/// assert_eq!(req.tool_id, "Calculator.Add");
/// assert!(serde_json::from_str::<CallToolRequest>(r#"{"tool_id": "A.B", "foo": 1}"#).is_err());
/// // A key twice is refused, never read as one of its values.
/// assert!(serde_json::from_str::<CallToolRequest>(r#"{"tool_id": "A.B", "tool_id": "A.C"}"#).is_err());
/// assert!(serde_json::from_str::<CallToolRequest>(r#"{"tool_id": "A.B", "input": {"a": 1, "a": 2}}"#).is_err());
/// ```
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CallToolRequest {
    /// `Toolkit.Name`, `Toolkit.Name@x` or `Toolkit.Name@x.y.z`.
    pub tool_id: String,
    /// The idempotency key; the server generates one when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call_id: Option<String>,
    /// A trace id to correlate the call with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace_id: Option<String>,
    /// The tool's input object; absent means `{}`. Kept as any JSON value (an explicit `null`
    /// included) so that a non-object input is answered `422` by validation, not `400` by parsing;
    /// an object in it with a key twice is refused, not read as its last value.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "present_unique"
    )]
    pub input: Option<Value>,
    /// Secrets, tokens and the user id the tool requires.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<CallContext>,
}

/// `CallToolRequest.context` (an open object: unknown keys are kept, not rejected).
///
/// ```
/// let context: oxp_runtime::protocol::CallContext = serde_json::from_value(serde_json::json!({
///     "user_id": "ada",
///     "secrets": [{"id": "API_KEY", "value": "s3cr3t"}],
///     "authorization": [{"id": "github", "token": "gho_abc"}]
/// })).unwrap();
/// assert_eq!(context.user_id.as_deref(), Some("ada"));
/// // Values never show in `Debug` output (or logs).
/// assert!(!format!("{context:?}").contains("s3cr3t"));
/// ```
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct CallContext {
    /// Tokens, one per authorization provider.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub authorization: Vec<AuthorizationToken>,
    /// Secret values.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub secrets: Vec<ToolSecret>,
    /// The user the call is made for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_id: Option<String>,
    /// Keys this version of the protocol does not define.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `context.authorization[]`: a token for one provider.
///
/// ```
/// let context: oxp_runtime::protocol::CallContext = serde_json::from_value(serde_json::json!({
///     "user_id": "ada",
///     "secrets": [{"id": "API_KEY", "value": "s3cr3t"}],
///     "authorization": [{"id": "github", "token": "gho_abc"}]
/// })).unwrap();
/// assert_eq!(context.authorization[0].token.expose(), "gho_abc");
/// ```
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AuthorizationToken {
    /// The provider's id.
    pub id: String,
    /// The token.
    pub token: Sensitive,
    /// Keys this version of the protocol does not define.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `context.secrets[]` (`ToolSecret`).
///
/// ```
/// let context: oxp_runtime::protocol::CallContext = serde_json::from_value(serde_json::json!({
///     "user_id": "ada",
///     "secrets": [{"id": "API_KEY", "value": "s3cr3t"}],
///     "authorization": [{"id": "github", "token": "gho_abc"}]
/// })).unwrap();
/// assert_eq!(context.secrets[0].value.expose(), "s3cr3t");
/// ```
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ToolSecret {
    /// The secret's id.
    pub id: String,
    /// The secret's value.
    pub value: Sensitive,
    /// Keys this version of the protocol does not define.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// The result of a call that reached the tool (`CallToolResponse`).
///
/// Success and failure are two variants of [`CallResult`], so a response can never carry both
/// a `value` and an `error`.
///
/// ```
/// use oxp_runtime::protocol::{CallResult, CallToolResponse};
///
/// let ok = CallToolResponse { call_id: "c1".into(), duration: None, result: CallResult::Success { value: Some(15.into()) } };
/// assert_eq!(serde_json::to_string(&ok).unwrap(), r#"{"call_id":"c1","success":true,"value":15}"#);
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct CallToolResponse {
    /// The client's `call_id`, or the one the server generated.
    pub call_id: String,
    /// How long the tool ran, in milliseconds.
    pub duration: Option<f64>,
    /// What came of it.
    pub result: CallResult,
}

/// Whether a call succeeded, and with what.
///
/// ```
/// use oxp_runtime::protocol::{CallResult, CallToolResponse};
/// let response: CallToolResponse =
///     serde_json::from_str(r#"{"call_id": "c1", "success": true, "value": 5}"#).unwrap();
/// assert_eq!(response.result, CallResult::Success { value: Some(5.into()) });
/// let failed: CallToolResponse = serde_json::from_str(
///     r#"{"call_id": "c2", "success": false, "error": {"message": "No such doorbell"}}"#,
/// ).unwrap();
/// assert!(matches!(failed.result, CallResult::Failure { .. }));
/// ```
#[derive(Clone, Debug, PartialEq)]
pub enum CallResult {
    /// `success: true`; `value` absent when the tool returns nothing.
    Success {
        /// The tool's value.
        value: Option<Value>,
    },
    /// `success: false` with the tool's error.
    Failure {
        /// The error.
        error: ToolError,
    },
}

/// The wire shape of a [`CallToolResponse`]: owned when read, borrowed when written (every
/// answer is written through it, so nothing is copied).
#[derive(Serialize, Deserialize)]
#[serde(
    deny_unknown_fields,
    bound(deserialize = "S: Deserialize<'de>, V: Deserialize<'de>, E: Deserialize<'de>")
)]
struct RawCallToolResponse<S = String, V = Value, E = ToolError> {
    call_id: S,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    duration: Option<f64>,
    success: bool,
    // `Some(Value::Null)` is an explicit null value; `None` is no value at all.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "present"
    )]
    value: Option<V>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    error: Option<E>,
}

fn present<'de, D: Deserializer<'de>, V: Deserialize<'de>>(d: D) -> Result<Option<V>, D::Error> {
    V::deserialize(d).map(Some)
}

/// [`present`], read with a repeated key refused at any depth.
fn present_unique<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Value>, D::Error> {
    present(d).map(|read| read.map(|unique::Unique(value)| value))
}

impl Serialize for CallToolResponse {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let (success, value, error) = match &self.result {
            CallResult::Success { value } => (true, value.as_ref(), None),
            CallResult::Failure { error } => (false, None, Some(error)),
        };
        RawCallToolResponse::<&str, &Value, &ToolError> {
            call_id: &self.call_id,
            duration: self.duration,
            success,
            value,
            error,
        }
        .serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for CallToolResponse {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let raw: RawCallToolResponse = RawCallToolResponse::deserialize(deserializer)?;
        let result = match (raw.success, raw.value, raw.error) {
            (true, value, None) => CallResult::Success { value },
            (false, None, Some(error)) => CallResult::Failure { error },
            (true, _, Some(_)) => return Err(D::Error::custom("a successful call has no `error`")),
            (false, Some(_), _) => return Err(D::Error::custom("a failed call has no `value`")),
            (false, None, None) => return Err(D::Error::custom("a failed call needs an `error`")),
        };
        Ok(CallToolResponse {
            call_id: raw.call_id,
            duration: raw.duration,
            result,
        })
    }
}

/// A `400` body (`ServerErrorResponse`): any failure before the tool ran, other than invalid input.
///
/// ```
/// let body: oxp_runtime::protocol::ServerErrorResponse = serde_json::from_str(
///     r#"{"message": "Tool 'Mail_Send' cannot run without a user_id", "missing_requirements": {"user_id": true}}"#,
/// ).unwrap();
/// assert!(body.missing_requirements.unwrap().user_id);
/// ```
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ServerErrorResponse {
    /// For the user.
    pub message: String,
    /// For the developer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub developer_message: Option<String>,
    /// What the call lacked, when it lacked requirements.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub missing_requirements: Option<Box<MissingRequirements>>,
}

/// `ServerErrorResponse.missing_requirements`.
///
/// ```
/// let missing: oxp_runtime::protocol::MissingRequirements =
///     serde_json::from_str(r#"{"secrets": ["SMTP_PASSWORD"]}"#).unwrap();
/// assert_eq!((missing.secrets.len(), missing.user_id, missing.authorization.len()), (1, false, 0));
/// ```
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct MissingRequirements {
    /// Challenges the user must complete.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub authorization: Vec<ToolAuthorizationChallenge>,
    /// The ids of the missing secrets (an extension the open object allows: oxp-notes §3.21).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub secrets: Vec<String>,
    /// Whether the call lacked a user id.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub user_id: bool,
    /// The ids of the authorization providers whose tokens were missing, whether or not a
    /// challenge could be made for them (an extension the open object allows): a server with
    /// no authorization provider still says, in a field a program reads, what is missing.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub authorization_providers: Vec<String>,
}

/// `ToolAuthorizationChallenge` (closed).
///
/// ```
/// let challenge: oxp_runtime::protocol::ToolAuthorizationChallenge = serde_json::from_str(
///     r#"{"id": "github", "url": "https://auth.example.com/authorize?c=1", "check_url": "https://tools.example.com/authorization/1"}"#,
/// ).unwrap();
/// assert_eq!(challenge.id, "github");
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolAuthorizationChallenge {
    /// The provider's id.
    pub id: String,
    /// Where the user completes the authorization.
    pub url: String,
    /// Where the client polls for completion.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub check_url: Option<String>,
}

/// A `422` body (`ValidationErrorResponse`): the input did not match the tool's input schema.
///
/// ```
/// let body: oxp_runtime::protocol::ValidationErrorResponse = serde_json::from_str(
///     r#"{"message": "The input is invalid", "parameter_errors": {"a": "1.5 is not an integer"}}"#,
/// ).unwrap();
/// assert_eq!(body.parameter_errors["a"], "1.5 is not an integer");
/// ```
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ValidationErrorResponse {
    /// For the user.
    pub message: String,
    /// One message per top-level parameter that failed.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub parameter_errors: std::collections::BTreeMap<String, String>,
}
