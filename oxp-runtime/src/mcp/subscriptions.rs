//! `resources/subscribe` and `resources/unsubscribe` (the revisions before 2026-07-28): a
//! client on a connection (stdio) is sent `notifications/resources/updated` for each URI it
//! subscribed to, when [`crate::resource::changed`] names it.
//!
//! A subscription lives with its connection, in the process that holds the connection — the one
//! place its notifications can be sent. Over stateless HTTP no stream outlives a request, so
//! `/mcp` acknowledges a subscription of a URI it serves (the request was valid) but keeps
//! nothing and sends nothing, and does not declare `resources.subscribe`: a client that checks
//! the capability does not rely on notifications that cannot come.

use std::collections::HashSet;
use std::sync::{Arc, Mutex, PoisonError};

use rmcp::model::{ClientConfig, ResourceUpdatedNotificationParam};
use rmcp::{ErrorData as McpError, Peer, RoleServer};
use tokio::sync::broadcast::error::RecvError;

use crate::call::ReadError;
use crate::registry::Registry;

use super::exchange::{Back, Exchange};

/// The URIs each connection served by one [`super::McpServer`] subscribed to.
#[derive(Clone, Default)]
pub(super) struct Subscriptions(Arc<Mutex<Vec<Connection>>>);

/// One connection's subscriptions, known by what its client sent at `initialize` (one `Arc`
/// per connection), and shared with the task that sends its notifications.
struct Connection {
    client: Arc<ClientConfig>,
    uris: Arc<Mutex<HashSet<String>>>,
}

/// The answer to a subscription of a URI nothing serves: a read's not-found, the one rule for
/// both.
fn served(registry: &Registry, uri: &str) -> Result<(), McpError> {
    let found = registry.resolve_resource(uri).is_some()
        || (uri.starts_with(super::skills::SCHEME) && super::skills::read(registry, uri).is_some());
    if found {
        Ok(())
    } else {
        Err(super::resources::error_of(
            ReadError::NotFound,
            "resource",
            uri,
        ))
    }
}

impl Subscriptions {
    /// `resources/subscribe`: from now on, `uri`'s changes reach the caller's connection.
    pub(super) fn subscribe(
        &self,
        registry: &Registry,
        uri: String,
        exchange: &Exchange,
    ) -> Result<(), McpError> {
        served(registry, &uri)?;
        let Back::Connection(peer) = &exchange.back else {
            return Ok(());
        };
        let client = initialized(exchange)?;
        let mut connections = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(known) = (connections.iter()).find(|c| Arc::ptr_eq(&c.client, &client)) {
            lock(&known.uris).insert(uri);
            return Ok(());
        }
        let uris = Arc::new(Mutex::new(HashSet::from([uri])));
        // Listening starts before the answer is sent: a change made right after it is seen.
        let changes = crate::resource::changes();
        tokio::spawn(notify(
            self.clone(),
            client.clone(),
            uris.clone(),
            changes,
            peer.clone(),
        ));
        connections.push(Connection { client, uris });
        Ok(())
    }

    /// `resources/unsubscribe`: `uri`'s changes no longer reach the caller's connection. A URI it
    /// never subscribed to is no error (the result is the same: no notifications).
    pub(super) fn unsubscribe(
        &self,
        registry: &Registry,
        uri: &str,
        exchange: &Exchange,
    ) -> Result<(), McpError> {
        served(registry, uri)?;
        if exchange.over_http() {
            return Ok(());
        }
        let client = initialized(exchange)?;
        let connections = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(known) = (connections.iter()).find(|c| Arc::ptr_eq(&c.client, &client)) {
            lock(&known.uris).remove(uri);
        }
        Ok(())
    }

    fn forget(&self, client: &Arc<ClientConfig>) {
        let mut connections = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        connections.retain(|c| !Arc::ptr_eq(&c.client, client));
    }
}

/// What the connection's client sent at `initialize`: the connection's identity.
fn initialized(exchange: &Exchange) -> Result<Arc<ClientConfig>, McpError> {
    exchange.connection_info().ok_or_else(|| {
        McpError::invalid_request("initialize the connection before subscribing", None)
    })
}

fn lock(uris: &Mutex<HashSet<String>>) -> std::sync::MutexGuard<'_, HashSet<String>> {
    uris.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Sends one connection its notifications until the connection is gone (seen at the first
/// send after it closed).
async fn notify(
    subscriptions: Subscriptions,
    client: Arc<ClientConfig>,
    uris: Arc<Mutex<HashSet<String>>>,
    mut changes: tokio::sync::broadcast::Receiver<Arc<str>>,
    peer: Peer<RoleServer>,
) {
    loop {
        let updated: Vec<String> = match changes.recv().await {
            Ok(uri) => lock(&uris).get(&*uri).cloned().into_iter().collect(),
            // Changes were missed: any subscribed resource may be among them, and a client
            // told once too often only reads again.
            Err(RecvError::Lagged(_)) => lock(&uris).iter().cloned().collect(),
            Err(RecvError::Closed) => break,
        };
        for uri in updated {
            let sent = peer
                .notify_resource_updated(ResourceUpdatedNotificationParam::new(uri))
                .await;
            if sent.is_err() {
                subscriptions.forget(&client);
                return;
            }
        }
    }
    subscriptions.forget(&client);
}
