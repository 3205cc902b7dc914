//! MCP's streamable HTTP transport, oxp's own: `POST /mcp` with one JSON-RPC message, for every
//! revision and without sessions, so any replica answers any request.
//!
//! From the socket to the tool: the OXP server's guard (Origin, Host, body cap, slow clients)
//! and authentication run first, then [`serve`] here checks what HTTP carries (the method, the
//! media types, the revision's headers), reads the message into rmcp's model types, makes the
//! request's [`Exchange`] and hands it to [`McpServer::handle`], the one dispatch stdio uses
//! too. The answer is JSON unless the method sent something first (progress, a log message, a
//! request of the server's own): then the response is an SSE stream of what it sent, its
//! answer last ([`stream`]).
//!
//! Notifications are accepted (`202`) and change nothing: without sessions, no request
//! outlives its own response for one to refer to.

mod answer;
mod asks;
mod encode;
mod read;
mod session;
mod stream;

pub(crate) use stream::Stream;

use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::extract::Request;
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header, request::Parts};
use axum::response::{IntoResponse, Response};
use futures_util::FutureExt;
use futures_util::future::Either;
use rmcp::ErrorData as McpError;
use rmcp::model::{
    ClientNotification, ClientRequest, ConstString, ErrorCode, GetMeta, ProtocolVersion, RequestId,
    RequestMetaObject, ServerJsonRpcMessage,
};
use serde::Deserialize;

use self::answer::{Answer, Answered};
use self::stream::Progress;
use super::McpServer;
use super::exchange::{Back, Cancel, Exchange};
use super::headers::{self, PROTOCOL_VERSION};
use super::scopes;
use crate::fronts::ScopeRefusal;
use crate::principal::Grant;
use crate::signals::Cancellation;

/// The transport as an axum router, its one route at `/`.
pub(super) fn router(server: McpServer) -> axum::Router {
    axum::Router::new().route("/", axum::routing::any_service(McpService::new(server)))
}

/// MCP's streamable HTTP transport as a [`tower_service::Service`]: it answers at whatever
/// path it is routed to (see [`McpServer::into_service`]).
///
/// A plain service rather than an axum handler: a router clones the service it routes to for
/// each request, and this one is a reference count.
///
/// ```
/// # let pipeline = oxp_runtime::call::Pipeline::new(oxp_runtime::Registry::builder().build().unwrap());
/// use oxp_runtime::mcp::{McpServer, McpService};
///
/// let service: McpService = McpServer::new(pipeline).into_service();
/// let app: axum::Router = axum::Router::new().route("/mcp", axum::routing::any_service(service));
/// ```
#[derive(Clone, Debug)]
pub struct McpService(Arc<McpServer>);

impl McpService {
    pub(super) fn new(server: McpServer) -> Self {
        McpService(Arc::new(server))
    }
}

impl tower_service::Service<Request> for McpService {
    type Response = Response;
    type Error = std::convert::Infallible;
    type Future = futures_util::future::BoxFuture<'static, Result<Response, Self::Error>>;

    fn poll_ready(
        &mut self,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), Self::Error>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request) -> Self::Future {
        Box::pin(serve(self.0.clone(), request).map(Ok))
    }
}

/// One HTTP request to `/mcp`.
///
/// Its future is allocated per request, so it is built to hold only what its two awaits
/// need: the checks that need no body come first, outside it, and what the body says is
/// decided at once ([`next`]) before the one await a request makes.
fn serve(
    server: Arc<McpServer>,
    request: Request,
) -> impl Future<Output = Response> + Send + 'static {
    if let Some(refused) = refused_before_the_body(&request) {
        return Either::Left(std::future::ready(refused));
    }
    let (parts, body) = request.into_parts();
    Either::Right(async move {
        let bytes = match axum::body::to_bytes(body, server.max_body_bytes).await {
            Ok(bytes) => bytes,
            Err(error) => return body_failure(&error, server.max_body_bytes),
        };
        let next = next(server, parts, &bytes);
        match next {
            Next::Answered(response) => response,
            Next::Running(running) => running.respond().await,
            Next::Reply(reply) => reply.await,
        }
    })
}

/// What HTTP says of a request before its body is read: a method other than POST, or media
/// types that are not MCP's.
fn refused_before_the_body(request: &Request) -> Option<Response> {
    if request.method() != Method::POST {
        let allow = [(header::ALLOW, "POST")];
        return Some((StatusCode::METHOD_NOT_ALLOWED, allow, "Method Not Allowed").into_response());
    }
    let (status, text) = media_types(request.headers()).err()?;
    Some(plain(status, text))
}

/// What a request's body leads to.
enum Next {
    /// Answered at once: refused, or a notification accepted.
    Answered(Response),
    /// A request whose method runs.
    Running(Running),
    /// A client's reply to a request of the server's own.
    Reply(futures_util::future::BoxFuture<'static, Response>),
}

/// The message `bytes` hold, begun.
fn next(server: Arc<McpServer>, parts: Parts, bytes: &Bytes) -> Next {
    let error = |error| {
        let message = ServerJsonRpcMessage::error(error, None);
        Next::Answered(json(&message, StatusCode::BAD_REQUEST))
    };
    match read::message(bytes) {
        Ok(read::Message::Request { id, request, meta }) => {
            if let Some(refused) = out_of_scope(&server, &request, &parts) {
                return Next::Answered(refused);
            }
            match begin(server, id, request, meta, parts) {
                Begun::Running(running) => Next::Running(running),
                Begun::Refused(refused) => Next::Answered(refused),
            }
        }
        Ok(read::Message::Notification(notification)) => {
            let method = notification_method(&notification.notification);
            match method.map_or(Ok(()), |m| headers::check(&parts.headers, m, None, None)) {
                Ok(()) => Next::Answered(StatusCode::ACCEPTED.into_response()),
                Err(refused) => error(refused),
            }
        }
        Ok(read::Message::Answer(answer)) => {
            Next::Reply(Box::pin(
                async move { server.answered(&parts, *answer).await },
            ))
        }
        Err(refused) => error(refused),
    }
}

/// The `403` of a request whose caller's grant lacks a scope it needs (MCP's authorization
/// spec puts it at the HTTP level), in the words of the server's authentication.
fn out_of_scope(server: &McpServer, request: &ClientRequest, parts: &Parts) -> Option<Response> {
    let refusal = parts.extensions.get::<ScopeRefusal>()?;
    let grant = parts.extensions.get::<Grant>()?;
    let needed = scopes::needed(server.pipeline.registry(), request);
    (!grant.allows(&needed)).then(|| refusal.refuse(&needed))
}

/// A request: the revision's checks, then its method, started; or the answer that refuses it.
/// `meta`: its `_meta`, if it was read out already.
///
/// Not async: everything up to the run is decided at once, so the request's future holds only
/// what [`Running`] keeps while it waits (the run itself has its own allocation).
fn begin(
    server: Arc<McpServer>,
    id: RequestId,
    mut request: Box<ClientRequest>,
    meta: Option<read::Meta>,
    parts: Parts,
) -> Begun {
    let refused = |error: McpError| {
        Begun::Refused(json(
            &ServerJsonRpcMessage::error(error, Some(id.clone())),
            StatusCode::BAD_REQUEST,
        ))
    };
    let read::Meta {
        map: meta,
        standard,
    } = meta.unwrap_or_else(|| read::Meta::of(std::mem::take(request.get_meta_mut())));
    let (own, mut declared) = match standard {
        Some(standard) => (Some(standard.revision), Some(standard.capabilities)),
        None => (own_revision(&meta), meta.client_capabilities()),
    };
    let header = match header_revision(&parts.headers, &request, own.as_ref()) {
        Ok(header) => header,
        Err(Refusal::Plain(status, text)) => return Begun::Refused(plain(status, text)),
        Err(Refusal::JsonRpc(error)) => return refused(error),
    };
    let (method, name) = method_and_name(&request);
    let tool = match &*request {
        ClientRequest::CallToolRequest(call) => Some((
            call.params.arguments.as_ref(),
            server.param_headers(&call.params.name),
        )),
        _ => None,
    };
    if let Err(error) = headers::check(&parts.headers, method, name, tool) {
        return refused(error);
    }
    let revision = match revision(header, &request, &meta, own.clone()) {
        Ok(revision) => revision,
        Err(error) => return refused(error),
    };
    // A request that names its revision itself (or opens with `server/discover`) is answered
    // with the status its error calls for; the revisions before keep JSON-RPC's 200.
    let statuses = own.is_some() || matches!(*request, ClientRequest::DiscoverRequest(_));
    // With the revision, what the client declared in `_meta` is what 2026-07-28 requires of
    // every request's `_meta` (rmcp's `missing_required_keys`).
    let complete = own.is_some() && declared.is_some();
    let newest = revision.as_str() >= ProtocolVersion::V_2026_07_28.as_str();
    // What the client declared: in the request (2026-07-28 on), in `initialize`, or, before,
    // in the session id `initialize` gave it.
    let mut session = None;
    let capabilities = match &*request {
        _ if newest => declared.take(),
        ClientRequest::InitializeRequest(initialize) => {
            if server.pipeline.store().is_some() {
                session = session::open_for(&server.sealer, &initialize.params);
            }
            Some(initialize.params.capabilities.clone())
        }
        _ => match parts.headers.get(session::HEADER).map(HeaderValue::to_str) {
            None => None,
            Some(id) => match id
                .ok()
                .and_then(|id| session::capabilities(&server.sealer, id))
            {
                Some(capabilities) => Some(capabilities),
                None => {
                    return Begun::Refused(plain(
                        StatusCode::NOT_FOUND,
                        "Not Found: this server issued no such session (it may have been issued \
                         under another state key); initialize again",
                    ));
                }
            },
        },
    };
    let stream = Stream::default();
    let cancel = Cancellation::new();
    let exchange = Exchange {
        meta,
        requested: own,
        complete,
        http: Some(parts),
        version: Some(revision),
        capabilities,
        cancelled: Some(Cancel::Signal(cancel.clone())),
        back: Back::Stream(stream.clone()),
    };
    let run = async move {
        let result = server.handle(request, &exchange).await;
        let message = Box::new(match result {
            Ok(result) => ServerJsonRpcMessage::response(result, id),
            Err(error) => ServerJsonRpcMessage::error(error, Some(id)),
        });
        let mut headers = exchange.http.map(|parts| parts.headers).unwrap_or_default();
        headers.clear();
        Answered { message, headers }
    };
    Begun::Running(Running {
        answer: Answer::new(run, cancel),
        stream,
        statuses,
        complete,
        session,
    })
}

/// A request begun: running, or refused before its method ran.
enum Begun {
    Running(Running),
    Refused(Response),
}

/// A request whose method runs, and what its answer needs once it has one.
struct Running {
    answer: Answer,
    stream: Stream,
    /// Whether its errors are answered with the status they call for (see [`status_of`]).
    statuses: bool,
    /// Whether its `_meta` had all 2026-07-28 requires.
    complete: bool,
    /// The session id an `initialize` is answered with.
    session: Option<String>,
}

impl Running {
    /// The answer as JSON or, if the method sends something first, as a stream.
    async fn respond(self) -> Response {
        let Running {
            mut answer,
            stream,
            statuses,
            complete,
            session,
        } = self;
        tokio::select! {
            // The answer first: most are ready at the first poll, and then nothing waits on
            // the stream.
            biased;
            answered = &mut answer => match stream.sent() {
                // It sent something as it ended: that goes first, on a stream.
                Some(sent) => stream::response(Progress::Answered(answered.message), sent),
                None => {
                    let Answered { message, headers } = answered;
                    let status = if statuses { status_of(&message, !complete) } else { StatusCode::OK };
                    let mut response = json_in(&message, status, headers);
                    if let Some(session) = session.and_then(|id| HeaderValue::from_str(&id).ok()) {
                        response.headers_mut().insert(session::HEADER, session);
                    }
                    response
                }
            },
            sent = stream.opened() => stream::response(Progress::Running(answer), sent),
        }
    }
}

/// Why a request is refused before its method runs: in plain text where rmcp's transport has
/// always answered so, else as a JSON-RPC error.
enum Refusal {
    Plain(StatusCode, String),
    JsonRpc(McpError),
}

/// The `MCP-Protocol-Version` header, checked first: it must be readable, agree with what
/// `initialize` asks for, and name a revision this server knows unless the request names its
/// own in `_meta` (which is then checked against it, after the standard headers).
fn header_revision<'h>(
    headers: &'h HeaderMap,
    request: &ClientRequest,
    own: Option<&ProtocolVersion>,
) -> Result<Option<&'h str>, Refusal> {
    let header = match headers.get(PROTOCOL_VERSION).map(HeaderValue::to_str) {
        None => return Ok(None),
        Some(Ok(header)) => header,
        Some(Err(_)) => {
            return Err(Refusal::Plain(
                StatusCode::BAD_REQUEST,
                "Bad Request: Invalid MCP-Protocol-Version header encoding".into(),
            ));
        }
    };
    if let ClientRequest::InitializeRequest(initialize) = request {
        let asked = &initialize.params.protocol_version;
        if header != asked.as_str() {
            return Err(Refusal::JsonRpc(McpError::invalid_request(
                format!(
                    "Invalid Request: MCP-Protocol-Version header ({header}) does not match \
                     initialize params.protocolVersion ({asked})"
                ),
                None,
            )));
        }
    } else if own.is_none() && known(header).is_none() {
        return Err(Refusal::Plain(
            StatusCode::BAD_REQUEST,
            format!("Bad Request: Unsupported MCP-Protocol-Version: {header}"),
        ));
    }
    Ok(Some(header))
}

/// The revision a request names itself in `_meta`, read once, as the constant it names if it
/// is one (so neither reading it nor copying it allocates); what rmcp's
/// `RequestMetaObject::protocol_version` reads.
fn own_revision(meta: &RequestMetaObject) -> Option<ProtocolVersion> {
    let value = meta.get(read::META_REVISION)?;
    match value.as_str().map(known) {
        Some(Some(known)) => Some(known.clone()),
        _ => ProtocolVersion::deserialize(value).ok(),
    }
}

fn known(version: &str) -> Option<&'static ProtocolVersion> {
    (ProtocolVersion::KNOWN_VERSIONS.iter()).find(|known| known.as_str() == version)
}

/// The revision a request speaks: the one `initialize` asks for, the request's own (`_meta`,
/// which must agree with the header), or the header's (2025-03-26 without one, as the
/// transport's spec says). A request of 2026-07-28 or later carries `_meta`'s revision too.
fn revision(
    header: Option<&str>,
    request: &ClientRequest,
    meta: &RequestMetaObject,
    own: Option<ProtocolVersion>,
) -> Result<ProtocolVersion, McpError> {
    if let ClientRequest::InitializeRequest(initialize) = request {
        return Ok(initialize.params.protocol_version.clone());
    }
    match (own, header) {
        (Some(own), Some(header)) if header != own.as_str() => Err(McpError::header_mismatch(
            format!(
                "MCP-Protocol-Version header ({header}) does not match request _meta \
                 protocolVersion ({own})"
            ),
            None,
        )),
        (Some(own), Some(_)) => Ok(own),
        (Some(_), None) => Err(McpError::header_mismatch(
            "request _meta protocolVersion requires MCP-Protocol-Version header",
            None,
        )),
        (None, Some(header))
            if header >= ProtocolVersion::V_2026_07_28.as_str()
                || matches!(request, ClientRequest::DiscoverRequest(_)) =>
        {
            let missing = meta.missing_required_keys(&ProtocolVersion::V_2026_07_28);
            Err(McpError::invalid_params(
                format!(
                    "Invalid params: request _meta is missing or has malformed required fields: {}",
                    missing.join(", ")
                ),
                None,
            ))
        }
        (None, header) => Ok(header
            .and_then(known)
            .cloned()
            .unwrap_or(ProtocolVersion::V_2025_03_26)),
    }
}

/// A request's method, and the name, URI or task id its `Mcp-Name` header carries.
fn method_and_name(request: &ClientRequest) -> (&str, Option<&str>) {
    let name = match request {
        ClientRequest::CallToolRequest(call) => Some(call.params.name.as_ref()),
        ClientRequest::GetPromptRequest(get) => Some(get.params.name.as_str()),
        ClientRequest::ReadResourceRequest(read) => Some(read.params.uri.as_str()),
        #[allow(deprecated)]
        ClientRequest::SubscribeRequest(subscribe) => Some(subscribe.params.uri.as_str()),
        #[allow(deprecated)]
        ClientRequest::UnsubscribeRequest(unsubscribe) => Some(unsubscribe.params.uri.as_str()),
        ClientRequest::GetTaskRequest(get) => Some(get.params.task_id.as_str()),
        ClientRequest::UpdateTaskRequest(update) => Some(update.params.task_id.as_str()),
        ClientRequest::CancelTaskRequest(cancel) => Some(cancel.params.task_id.as_str()),
        _ => None,
    };
    (request.method(), name)
}

fn notification_method(notification: &ClientNotification) -> Option<&str> {
    Some(match notification {
        ClientNotification::CancelledNotification(n) => n.method.as_str(),
        ClientNotification::ProgressNotification(n) => n.method.as_str(),
        ClientNotification::InitializedNotification(n) => n.method.as_str(),
        ClientNotification::RootsListChangedNotification(n) => n.method.as_str(),
        ClientNotification::CustomNotification(n) => n.method.as_str(),
        _ => return None,
    })
}

/// The status of an answer to a request that names its revision: the errors a client must
/// fix before asking again are `400`, an unknown method `404`.
fn status_of(message: &ServerJsonRpcMessage, malformed: bool) -> StatusCode {
    let ServerJsonRpcMessage::Error(error) = message else {
        return StatusCode::OK;
    };
    match error.error.code {
        ErrorCode::UNSUPPORTED_PROTOCOL_VERSION
        | ErrorCode::MISSING_REQUIRED_CLIENT_CAPABILITY
        | ErrorCode::HEADER_MISMATCH => StatusCode::BAD_REQUEST,
        ErrorCode::INVALID_PARAMS if malformed => StatusCode::BAD_REQUEST,
        ErrorCode::METHOD_NOT_FOUND => StatusCode::NOT_FOUND,
        _ => StatusCode::OK,
    }
}

/// A POST must take both JSON and SSE, and send JSON.
fn media_types(headers: &HeaderMap) -> Result<(), (StatusCode, &'static str)> {
    if !accepts_both(headers) {
        return Err((
            StatusCode::NOT_ACCEPTABLE,
            "Not Acceptable: Client must accept both application/json and text/event-stream",
        ));
    }
    let sends_json = (headers.get(header::CONTENT_TYPE))
        .and_then(|value| value.to_str().ok())
        .is_some_and(|value| {
            if value == "application/json" {
                return true;
            }
            let essence = value.split_once(';').map_or(value, |(essence, _)| essence);
            essence.trim().eq_ignore_ascii_case("application/json")
        });
    if !sends_json {
        return Err((
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "Unsupported Media Type: Content-Type must be application/json",
        ));
    }
    Ok(())
}

/// Whether `Accept` takes both JSON and SSE. The spellings clients send are recognised
/// whole; any other is parsed.
fn accepts_both(headers: &HeaderMap) -> bool {
    const COMMON: [&[u8]; 4] = [
        b"application/json, text/event-stream",
        b"text/event-stream, application/json",
        b"application/json,text/event-stream",
        b"text/event-stream,application/json",
    ];
    let mut values = headers.get_all(header::ACCEPT).iter();
    if let (Some(only), None) = (values.next(), values.next())
        && COMMON.contains(&only.as_bytes())
    {
        return true;
    }
    let (mut json, mut sse) = (false, false);
    for essence in accepted(headers) {
        json |= essence.eq_ignore_ascii_case("application/json");
        sse |= essence.eq_ignore_ascii_case("text/event-stream");
    }
    json && sse
}

/// The media types an `Accept` header takes: each range's essence, without those weighted
/// `q=0` (a malformed weight does not exclude its range).
fn accepted(headers: &HeaderMap) -> impl Iterator<Item = &str> {
    headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
        .filter_map(|range| {
            let mut parameters = range.split(';');
            let essence = parameters.next()?.trim();
            let refused = parameters.any(|parameter| {
                parameter.split_once('=').is_some_and(|(name, weight)| {
                    name.trim().eq_ignore_ascii_case("q") && zero(weight.trim())
                })
            });
            (!refused).then_some(essence)
        })
}

/// Whether a weight is exactly zero (`0`, `0.`, `0.000`); RFC 9110 allows three decimals.
fn zero(weight: &str) -> bool {
    let (whole, fraction) = weight.split_once('.').unwrap_or((weight, ""));
    whole == "0" && fraction.len() <= 3 && fraction.bytes().all(|digit| digit == b'0')
}

/// A body over the cap is `413`; one that broke off, `400`.
fn body_failure(error: &axum::Error, cap: usize) -> Response {
    let too_large = std::error::Error::source(error)
        .is_some_and(|source| source.is::<http_body_util::LengthLimitError>());
    if too_large {
        plain(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!("Payload Too Large: request body exceeds {cap} bytes"),
        )
    } else {
        plain(
            StatusCode::BAD_REQUEST,
            format!("Bad Request: the body could not be read: {error}"),
        )
    }
}

fn plain(status: StatusCode, text: impl Into<String>) -> Response {
    (status, text.into()).into_response()
}

fn json(message: &ServerJsonRpcMessage, status: StatusCode) -> Response {
    json_in(message, status, HeaderMap::new())
}

/// `message` as JSON, its headers in `headers` (empty; see [`Answered::headers`]).
fn json_in(message: &ServerJsonRpcMessage, status: StatusCode, headers: HeaderMap) -> Response {
    let mut response = Response::new(Body::from(encode::message(message)));
    *response.status_mut() = status;
    *response.headers_mut() = headers;
    (response.headers_mut()).insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The revision read from `_meta` is the one rmcp's own reading gives, for every shape the
    /// field can take.
    #[test]
    fn own_revision_reads_as_rmcp_does() {
        let values = [
            serde_json::json!("2026-07-28"),
            serde_json::json!("2025-06-18"),
            serde_json::json!("2099-01-01"),
            serde_json::json!(20260728),
            serde_json::json!(null),
            serde_json::json!({"v": "2026-07-28"}),
        ];
        for value in values {
            let mut meta = RequestMetaObject::default();
            meta.insert(read::META_REVISION.into(), value.clone());
            assert_eq!(own_revision(&meta), meta.protocol_version(), "{value}");
        }
        assert_eq!(own_revision(&RequestMetaObject::default()), None);
    }
}
