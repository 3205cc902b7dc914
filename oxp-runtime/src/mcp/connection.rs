//! MCP on a connection (stdio, through rmcp's service loop): each request becomes an
//! [`Exchange`] and goes to the one dispatch, [`McpServer::handle`]. rmcp keeps the
//! connection: the handshake, request ids, `notifications/cancelled`, and the server's own
//! requests on the same stream.

use std::borrow::Cow;

use rmcp::model::{ClientNotification, ClientRequest, ProtocolVersion, ServerConfig, ServerResult};
use rmcp::service::{NotificationContext, RequestContext};
use rmcp::{ErrorData as McpError, RoleServer, Service};

use super::McpServer;
use super::exchange::Exchange;

impl Service<RoleServer> for McpServer {
    async fn handle_request(
        &self,
        request: ClientRequest,
        context: RequestContext<RoleServer>,
    ) -> Result<ServerResult, McpError> {
        let exchange = Exchange::connection(context);
        self.handle(Box::new(request), &exchange).await
    }

    /// Notifications change nothing here: `notifications/cancelled` is rmcp's (it cancels
    /// the request's token, which the run watches).
    async fn handle_notification(
        &self,
        _notification: ClientNotification,
        _context: NotificationContext<RoleServer>,
    ) -> Result<(), McpError> {
        Ok(())
    }

    fn get_info(&self) -> ServerConfig {
        self.info()
    }

    fn supported_protocol_versions(&self) -> Cow<'static, [ProtocolVersion]> {
        Cow::Borrowed(super::methods::supported_versions())
    }
}
