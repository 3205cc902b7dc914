//! Authorization challenges: when a call lacks a token a tool requires, the app's
//! [`AuthorizationProvider`] tells the client where the user can grant it.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use std::time::{Duration, Instant};

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
/// use oxp_runtime::authorization::Challenge;
///
/// // What a provider returns from `challenge` when the user has not signed in yet.
/// let challenge = Challenge {
///     url: "https://auth.example.com/authorize?state=c1".into(),
///     check_id: "c1".into(),
/// };
/// // The pipeline answers `authorization_required` with it, and a check_url under `/authorization/c1`.
/// assert!(challenge.url.ends_with(&challenge.check_id));
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
/// [`complete`](Self::complete) or [`fail`](Self::fail) is called. It keeps at most
/// [`DEFAULT_MAX_CHALLENGES`] challenges, each for [`DEFAULT_CHALLENGE_TTL`] (see
/// [`limits`](Self::limits)): every call that lacks a token mints one, so an unbounded map would
/// grow with every such call.
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
    challenges: Mutex<Challenges>,
    max: usize,
    ttl: Duration,
}

/// Challenges by check id, and their ids oldest first (all live equally long, so the oldest
/// is also the first to expire).
#[derive(Debug, Default)]
struct Challenges {
    by_id: HashMap<String, (AuthorizationStatus, Instant)>,
    order: VecDeque<String>,
}

/// How many challenges an [`InMemoryAuthorization`] keeps by default.
///
/// ```
/// assert_eq!(oxp_runtime::authorization::DEFAULT_MAX_CHALLENGES, 10_000);
/// ```
pub const DEFAULT_MAX_CHALLENGES: usize = 10_000;
/// How long an [`InMemoryAuthorization`] keeps a challenge by default.
///
/// ```
/// assert_eq!(oxp_runtime::authorization::DEFAULT_CHALLENGE_TTL.as_secs(), 900);
/// ```
pub const DEFAULT_CHALLENGE_TTL: Duration = Duration::from_secs(900);

impl Challenges {
    fn expire(&mut self, now: Instant, ttl: Duration, max: usize) {
        while let Some(oldest) = self.order.front() {
            let expired = self
                .by_id
                .get(oldest)
                .is_none_or(|(_, made)| now.duration_since(*made) >= ttl);
            if !expired && self.order.len() <= max {
                break;
            }
            if let Some(id) = self.order.pop_front() {
                self.by_id.remove(&id);
            }
        }
    }
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
            challenges: Mutex::default(),
            max: DEFAULT_MAX_CHALLENGES,
            ttl: DEFAULT_CHALLENGE_TTL,
        }
    }

    /// Keeps at most `max` challenges (the oldest go first), each for `ttl`; a forgotten one is
    /// unknown to [`status`](AuthorizationProvider::status), which a client reads as expired.
    ///
    /// ```
    /// use oxp_runtime::authorization::InMemoryAuthorization;
    /// let provider = InMemoryAuthorization::new("https://auth.example.com/authorize")
    ///     .limits(1_000, std::time::Duration::from_secs(300));
    /// assert_eq!(provider.len(), 0);
    /// ```
    #[must_use]
    pub fn limits(mut self, max: usize, ttl: Duration) -> Self {
        self.max = max.max(1);
        self.ttl = ttl;
        self
    }

    /// How many challenges it keeps now.
    ///
    /// ```
    /// let provider = oxp_runtime::authorization::InMemoryAuthorization::new("https://a.example/authorize");
    /// assert_eq!(provider.len(), 0);
    /// ```
    pub fn len(&self) -> usize {
        self.lock().by_id.len()
    }

    /// Whether it keeps none.
    ///
    /// ```
    /// let provider = oxp_runtime::authorization::InMemoryAuthorization::new("https://a.example/authorize");
    /// assert!(provider.is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Challenges> {
        let mut challenges = self.challenges.lock().unwrap_or_else(|e| e.into_inner());
        challenges.expire(Instant::now(), self.ttl, self.max);
        challenges
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
        match self.lock().by_id.get_mut(check_id) {
            Some((current, _)) => {
                *current = status;
                true
            }
            None => false,
        }
    }
}

impl AuthorizationProvider for InMemoryAuthorization {
    fn challenge<'a>(&'a self, request: ChallengeRequest<'a>) -> BoxFuture<'a, Option<Challenge>> {
        let check_id = crate::random::uuid_v4().simple();
        {
            let mut challenges = self.lock();
            challenges.by_id.insert(
                check_id.clone(),
                (AuthorizationStatus::Pending, Instant::now()),
            );
            challenges.order.push_back(check_id.clone());
            challenges.expire(Instant::now(), self.ttl, self.max);
        }
        let url = format!(
            "{}?provider={}&challenge={check_id}",
            self.authorize_url, request.provider_id
        );
        Box::pin(async move { Some(Challenge { url, check_id }) })
    }

    fn status<'a>(&'a self, check_id: &'a str) -> BoxFuture<'a, Option<AuthorizationStatus>> {
        let status = self.lock().by_id.get(check_id).map(|(status, _)| *status);
        Box::pin(async move { status })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request() -> ChallengeRequest<'static> {
        ChallengeRequest {
            provider_id: "google",
            scopes: &[],
            user_id: None,
            tool_id: "Gmail.GetEmails@1.0.0",
        }
    }

    #[tokio::test]
    async fn challenges_are_bounded_by_count_and_time() {
        let provider = InMemoryAuthorization::new("https://a.example/authorize")
            .limits(3, Duration::from_millis(50));
        let mut ids = Vec::new();
        for _ in 0..10 {
            ids.push(provider.challenge(request()).await.unwrap().check_id);
        }
        assert_eq!(provider.len(), 3);
        assert_eq!(
            provider.status(&ids[0]).await,
            None,
            "the oldest went first"
        );
        assert_eq!(
            provider.status(&ids[9]).await,
            Some(AuthorizationStatus::Pending)
        );
        tokio::time::sleep(Duration::from_millis(80)).await;
        assert_eq!(provider.status(&ids[9]).await, None, "expired");
        assert!(provider.is_empty());
    }
}
