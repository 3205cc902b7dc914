//! What the HTTP fronts on one port hand each other: the OXP server authenticates every
//! request, and a front mounted beside its routes (MCP) reads what it found. Kept here, below
//! both, so that neither front imports the other.

/// The default cap on a request body, every front's.
///
/// ```
/// use oxp_runtime::server::{Server, DEFAULT_MAX_BODY_BYTES};
/// # let registry = oxp_runtime::Registry::builder().build().unwrap();
/// // Tools that take documents inline: four times the default.
/// let server = Server::new(registry).max_body_bytes(4 * DEFAULT_MAX_BODY_BYTES);
/// let app = axum::Router::new().nest("/oxp", server.router());
/// ```
pub const DEFAULT_MAX_BODY_BYTES: usize = 1024 * 1024;

/// How the server's authentication refuses a caller whose [`Grant`](crate::principal::Grant)
/// lacks scopes that a front finds a request needs once it has read it (MCP names them in its
/// message): the `403` with the challenge naming them. The authentication leaves it beside a
/// limited grant in the request's extensions, so that no front builds another's challenge.
#[cfg(feature = "mcp")]
#[derive(Clone)]
pub(crate) struct ScopeRefusal(std::sync::Arc<Refuse>);

/// The refusal of a request that needs these scopes.
#[cfg(feature = "mcp")]
type Refuse = dyn Fn(&[&str]) -> axum::response::Response + Send + Sync;

#[cfg(feature = "mcp")]
impl ScopeRefusal {
    pub(crate) fn new(
        refuse: impl Fn(&[&str]) -> axum::response::Response + Send + Sync + 'static,
    ) -> Self {
        ScopeRefusal(std::sync::Arc::new(refuse))
    }

    /// The refusal of a request that needs `needed`.
    pub(crate) fn refuse(&self, needed: &[&str]) -> axum::response::Response {
        (self.0)(needed)
    }
}
