//! One request as MCP's methods see it, whichever transport brought it: its `_meta`, the
//! revision it speaks, what its client declared, its HTTP parts, its cancellation, and the way
//! back to its client. The transports make one ([`Exchange::http`] in `http/`,
//! [`Exchange::connection`] for rmcp's connections: stdio) and the methods read only this, so a
//! rule about a request is written once for both.

use std::sync::Arc;

use axum::http::request::Parts;
use rmcp::model::{ClientCapabilities, ProtocolVersion, RequestMetaObject, ServerNotification};
use rmcp::service::RequestContext;
use rmcp::{Peer, RoleServer};
use tokio_util::sync::CancellationToken;

use crate::principal::{Grant, Principal};
use crate::signals::Cancellation;

/// One request, read once by its transport.
pub(crate) struct Exchange {
    /// The request's `_meta`.
    pub(crate) meta: RequestMetaObject,
    /// The revision `_meta` names, read once.
    pub(crate) requested: Option<ProtocolVersion>,
    /// Whether `_meta` has every field a self-contained (2026-07-28) request must carry, read
    /// once.
    pub(crate) complete: bool,
    /// The HTTP request's parts, where the OXP server's authentication left the caller's
    /// principal and grant; none over a connection.
    pub(crate) http: Option<Parts>,
    /// The revision the request speaks: its own (`_meta`, 2026-07-28 on), else the one its
    /// connection initialized with, or its `MCP-Protocol-Version` header over HTTP.
    pub(crate) version: Option<ProtocolVersion>,
    /// What its client declared it can do: in the request's `_meta` (2026-07-28 on), at
    /// `initialize` on a connection, or in the `initialize` an HTTP client sealed into the
    /// session id it sends back (see `http/session.rs`); none where nothing says.
    pub(crate) capabilities: Option<ClientCapabilities>,
    /// What cancels it: `notifications/cancelled` on a connection, the client hanging up
    /// before its answer over HTTP.
    pub(crate) cancelled: Option<Cancel>,
    /// The way back to the client, for notifications and the server's own requests.
    pub(crate) back: Back,
}

/// What cancels a request.
pub(crate) enum Cancel {
    /// rmcp's token for a request on one of its connections.
    Token(CancellationToken),
    /// Over HTTP: the signal its calls run with, so a run needs no token of its own and no
    /// task watching one.
    Signal(Cancellation),
}

/// Where a request's notifications and the server's requests go.
#[derive(Clone)]
pub(crate) enum Back {
    /// A connection (stdio): rmcp's peer.
    Connection(Peer<RoleServer>),
    /// This HTTP request's own stream, opened on the first message.
    Stream(super::http::Stream),
}

/// The client is gone: nothing more reaches it.
#[derive(Debug)]
pub(crate) struct Gone;

impl Exchange {
    /// A request on one of rmcp's connections.
    pub(crate) fn connection(context: RequestContext<RoleServer>) -> Self {
        let version = context.protocol_version();
        let capabilities = context.client_capabilities();
        let requested = context.meta.protocol_version();
        let complete = (context.meta)
            .missing_required_keys(&ProtocolVersion::V_2026_07_28)
            .is_empty();
        Exchange {
            meta: context.meta,
            requested,
            complete,
            // A request rmcp's own HTTP service hands over keeps its parts there.
            http: context.extensions.get::<Parts>().cloned(),
            version,
            capabilities,
            cancelled: Some(Cancel::Token(context.ct)),
            back: Back::Connection(context.peer),
        }
    }

    /// Whether the request speaks 2026-07-28 or later.
    pub(crate) fn newest(&self) -> bool {
        (self.version.as_ref())
            .is_some_and(|v| v.as_str() >= ProtocolVersion::V_2026_07_28.as_str())
    }

    /// Whether the request came over HTTP.
    pub(crate) fn over_http(&self) -> bool {
        self.http.is_some()
    }

    /// The caller the OXP server's authentication found; none over a connection.
    pub(crate) fn principal(&self) -> Option<&Principal> {
        principal_in(self.http.as_ref()?)
    }

    /// The caller's principal as a call names it: none for an anonymous one.
    pub(crate) fn caller(&self) -> Option<String> {
        caller_name(self.principal())
    }

    /// What the caller's scopes let it see and use: over HTTP, the grant the OXP server's
    /// authentication left; everything on a connection.
    pub(crate) fn grant(&self) -> Grant {
        (self.http.as_ref())
            .and_then(|parts| parts.extensions.get::<Grant>())
            .cloned()
            .unwrap_or_default()
    }

    /// Waits until the request is cancelled (never, where nothing can cancel it).
    pub(crate) async fn cancelled(&self) {
        match &self.cancelled {
            Some(Cancel::Token(token)) => token.cancelled().await,
            Some(Cancel::Signal(signal)) => signal.cancelled().await,
            None => std::future::pending().await,
        }
    }

    /// The signal its calls run with, where the transport made one (over HTTP).
    pub(crate) fn signal(&self) -> Option<&Cancellation> {
        match &self.cancelled {
            Some(Cancel::Signal(signal)) => Some(signal),
            _ => None,
        }
    }

    /// What the client sent at `initialize` on its connection: the connection's identity.
    pub(crate) fn connection_info(&self) -> Option<Arc<rmcp::model::ClientConfig>> {
        match &self.back {
            Back::Connection(peer) => peer.peer_info(),
            Back::Stream(_) => None,
        }
    }
}

/// The caller the OXP server's authentication left in a request's HTTP parts.
pub(crate) fn principal_in(parts: &Parts) -> Option<&Principal> {
    parts.extensions.get::<Principal>()
}

/// `principal` as a call, a task or a request state names its caller: none for an anonymous
/// one.
pub(crate) fn caller_name(principal: Option<&Principal>) -> Option<String> {
    principal
        .filter(|p| **p != Principal::Anonymous)
        .map(ToString::to_string)
}

impl Back {
    /// Sends the client a notification.
    pub(crate) async fn notify(&self, notification: ServerNotification) -> Result<(), Gone> {
        match self {
            Back::Connection(peer) => peer.send_notification(notification).await.map_err(|_| Gone),
            Back::Stream(stream) => stream.notify(notification).await,
        }
    }
}
