//! Authorization challenges: when a call lacks a token a tool requires, the app's
//! [`AuthorizationProvider`] tells the client where the user can grant it.

use std::collections::HashMap;
use std::sync::Mutex;

use futures_util::future::BoxFuture;
use serde::{Deserialize, Serialize};

/// What the pipeline asks a provider for: a challenge for one authorization requirement.
///
/// ```
/// use oxp_runtime::authorization::{AuthorizationProvider, ChallengeRequest, InMemoryAuthorization};
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let provider = InMemoryAuthorization::new("https://auth.example.com/authorize");
/// let request = ChallengeRequest { provider_id: "github", scopes: &["repo"], user_id: Some("ada"), tool_id: "Github.Repos@1.0.0" };
/// let challenge = provider.challenge(request).await.unwrap();
/// assert!(challenge.url.starts_with("https://auth.example.com/authorize"));
/// # });
/// ```
#[derive(Clone, Copy, Debug)]
pub struct ChallengeRequest<'a> {
    /// The authorization provider's id, as the tool declares it (`google`).
    pub provider_id: &'a str,
    /// The OAuth 2.0 scopes the tool needs.
    pub scopes: &'a [&'static str],
    /// The user the call is for, if it says.
    pub user_id: Option<&'a str>,
    /// The tool, `Toolkit.Name@x.y.z`.
    pub tool_id: &'a str,
}

/// A challenge the user must complete.
///
/// ```
/// let challenge = oxp_runtime::authorization::Challenge {
///     url: "https://auth.example.com/authorize?state=c1".into(),
///     check_id: "c1".into(),
/// };
/// # let _ = challenge;
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Challenge {
    /// Where the user grants the authorization.
    pub url: String,
    /// An opaque id; the server's `check_url` for the challenge ends with it.
    pub check_id: String,
}

/// Where a challenge stands: `AuthorizationChallengeCheckResponse.status`.
///
/// ```
/// use oxp_runtime::authorization::AuthorizationStatus;
/// assert_eq!(serde_json::to_value(AuthorizationStatus::Completed).unwrap(), "completed");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AuthorizationStatus {
    /// The user has not finished.
    Pending,
    /// The user granted it; the client may retry the call with its token.
    Completed,
    /// The user refused, or it expired.
    Failed,
}

/// Mints authorization challenges and reports their status. Implement it for your OAuth flow.
///
/// ```
/// use oxp_runtime::authorization::{AuthorizationProvider, AuthorizationStatus, Challenge, ChallengeRequest};
/// use oxp_runtime::__private::BoxFuture;
///
/// struct AlwaysPending;
///
/// impl AuthorizationProvider for AlwaysPending {
///     fn challenge<'a>(&'a self, request: ChallengeRequest<'a>) -> BoxFuture<'a, Option<Challenge>> {
///         let url = format!("https://auth.example.com/{}", request.provider_id);
///         Box::pin(async move { Some(Challenge { url, check_id: "c1".into() }) })
///     }
///     fn status<'a>(&'a self, _check_id: &'a str) -> BoxFuture<'a, Option<AuthorizationStatus>> {
///         Box::pin(async { Some(AuthorizationStatus::Pending) })
///     }
/// }
/// ```
pub trait AuthorizationProvider: Send + Sync + 'static {
    /// A challenge for this requirement, or `None` if this provider does not handle it (the
    /// call is then refused with a message only).
    fn challenge<'a>(&'a self, request: ChallengeRequest<'a>) -> BoxFuture<'a, Option<Challenge>>;

    /// The status of a challenge, or `None` if `check_id` is unknown.
    fn status<'a>(&'a self, check_id: &'a str) -> BoxFuture<'a, Option<AuthorizationStatus>>;
}

/// An in-memory provider, for tests and examples: challenges are pending until
/// [`complete`](Self::complete) or [`fail`](Self::fail) is called.
///
/// ```
/// use oxp_runtime::authorization::{AuthorizationProvider, AuthorizationStatus, ChallengeRequest, InMemoryAuthorization};
///
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let provider = InMemoryAuthorization::new("https://auth.example.com/authorize");
/// let request = ChallengeRequest { provider_id: "google", scopes: &[], user_id: Some("u1"), tool_id: "Gmail.GetEmails@1.2.0" };
/// let challenge = provider.challenge(request).await.unwrap();
/// assert!(challenge.url.starts_with("https://auth.example.com/authorize?provider=google"));
/// assert_eq!(provider.status(&challenge.check_id).await, Some(AuthorizationStatus::Pending));
/// provider.complete(&challenge.check_id);
/// assert_eq!(provider.status(&challenge.check_id).await, Some(AuthorizationStatus::Completed));
/// # });
/// ```
#[derive(Debug)]
pub struct InMemoryAuthorization {
    authorize_url: String,
    challenges: Mutex<HashMap<String, AuthorizationStatus>>,
}

impl InMemoryAuthorization {
    /// A provider whose challenge URLs start with `authorize_url`.
    ///
    /// ```
    /// use oxp_runtime::authorization::{AuthorizationProvider, AuthorizationStatus, ChallengeRequest, InMemoryAuthorization};
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// let provider = InMemoryAuthorization::new("https://auth.example.com/authorize");
    /// let request = ChallengeRequest { provider_id: "github", scopes: &[], user_id: None, tool_id: "Github.Repos@1.0.0" };
    /// let challenge = provider.challenge(request).await.unwrap();
    /// provider.complete(&challenge.check_id);
    /// assert_eq!(provider.status(&challenge.check_id).await, Some(AuthorizationStatus::Completed));
    /// # });
    /// ```
    pub fn new(authorize_url: impl Into<String>) -> Self {
        InMemoryAuthorization {
            authorize_url: authorize_url.into(),
            challenges: Mutex::new(HashMap::new()),
        }
    }

    /// Marks a challenge completed; `false` if it is unknown.
    ///
    /// ```
    /// use oxp_runtime::authorization::{AuthorizationProvider, AuthorizationStatus, ChallengeRequest, InMemoryAuthorization};
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// let provider = InMemoryAuthorization::new("https://auth.example.com/authorize");
    /// let request = ChallengeRequest { provider_id: "github", scopes: &[], user_id: None, tool_id: "Github.Repos@1.0.0" };
    /// let challenge = provider.challenge(request).await.unwrap();
    /// provider.complete(&challenge.check_id);
    /// assert_eq!(provider.status(&challenge.check_id).await, Some(AuthorizationStatus::Completed));
    /// # });
    /// ```
    pub fn complete(&self, check_id: &str) -> bool {
        self.set(check_id, AuthorizationStatus::Completed)
    }

    /// Marks a challenge failed; `false` if it is unknown.
    ///
    /// ```
    /// use oxp_runtime::authorization::{AuthorizationProvider, AuthorizationStatus, ChallengeRequest, InMemoryAuthorization};
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// let provider = InMemoryAuthorization::new("https://auth.example.com/authorize");
    /// let request = ChallengeRequest { provider_id: "github", scopes: &[], user_id: None, tool_id: "Github.Repos@1.0.0" };
    /// let challenge = provider.challenge(request).await.unwrap();
    /// provider.complete(&challenge.check_id);
    /// assert_eq!(provider.status(&challenge.check_id).await, Some(AuthorizationStatus::Completed));
    /// # });
    /// ```
    pub fn fail(&self, check_id: &str) -> bool {
        self.set(check_id, AuthorizationStatus::Failed)
    }

    fn set(&self, check_id: &str, status: AuthorizationStatus) -> bool {
        let mut challenges = self.challenges.lock().unwrap_or_else(|e| e.into_inner());
        match challenges.get_mut(check_id) {
            Some(current) => {
                *current = status;
                true
            }
            None => false,
        }
    }
}

impl AuthorizationProvider for InMemoryAuthorization {
    fn challenge<'a>(&'a self, request: ChallengeRequest<'a>) -> BoxFuture<'a, Option<Challenge>> {
        let check_id = uuid::Uuid::new_v4().simple().to_string();
        self.challenges
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(check_id.clone(), AuthorizationStatus::Pending);
        let url = format!(
            "{}?provider={}&challenge={check_id}",
            self.authorize_url, request.provider_id
        );
        Box::pin(async move { Some(Challenge { url, check_id }) })
    }

    fn status<'a>(&'a self, check_id: &'a str) -> BoxFuture<'a, Option<AuthorizationStatus>> {
        let status = self
            .challenges
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(check_id)
            .copied();
        Box::pin(async move { status })
    }
}
