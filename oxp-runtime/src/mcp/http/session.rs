//! What an earlier revision's HTTP client declared at `initialize`, carried by the client
//! itself. Before 2026-07-28 a client says once, at `initialize`, what it can answer
//! (elicitation, sampling, roots), and its later requests do not repeat it. A server without a
//! session table cannot remember that; instead, when a client declared something the server's
//! tools may ask, the answer to its `initialize` carries an `Mcp-Session-Id` that seals what it
//! declared under the state key, and every request it sends with that id is read with those
//! capabilities, on any replica that shares the key. Nothing is stored anywhere: the id is the
//! session. An id this server cannot open (another key, tampered) is answered `404`, as the
//! transport's spec answers a session that ended, and the client initializes again.

use rmcp::model::{ClientCapabilities, InitializeRequestParams};
use serde::{Deserialize, Serialize};

use crate::seal::Sealer;

/// The header that carries a session's id.
pub(super) const HEADER: &str = "mcp-session-id";

/// Separates session ids from every other seal of the same key.
const DOMAIN: &[u8] = b"oxp mcp session v1";

/// What a session id carries.
#[derive(Serialize, Deserialize)]
struct Session {
    /// What the client declared it can answer: elicitation, sampling and roots alone.
    capabilities: ClientCapabilities,
    /// Unique to this `initialize`, as the spec asks of a session id.
    nonce: String,
}

/// The id for a client that initialized with `initialize`, if it declared something a tool
/// may ask of it: a client that can answer nothing needs no session.
pub(super) fn open_for(sealer: &Sealer, initialize: &InitializeRequestParams) -> Option<String> {
    let declared = &initialize.capabilities;
    let mut capabilities = ClientCapabilities::default();
    capabilities.elicitation = declared.elicitation.clone();
    capabilities.sampling = declared.sampling.clone();
    capabilities.roots = declared.roots.clone();
    let asks = capabilities.elicitation.is_some()
        || capabilities.sampling.is_some()
        || capabilities.roots.is_some();
    asks.then(|| {
        let session = Session {
            capabilities,
            nonce: crate::random::uuid_v4().simple().to_string(),
        };
        sealer.seal_value(DOMAIN, &session)
    })
}

/// What the client of session `id` declared, if this server issued `id`.
pub(super) fn capabilities(sealer: &Sealer, id: &str) -> Option<ClientCapabilities> {
    sealer
        .open_value::<Session>(DOMAIN, id)
        .map(|session| session.capabilities)
}
