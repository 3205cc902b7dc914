//! What every request passes before a route sees it, `/mcp` and `/health` included: browsers
//! kept out (a foreign `Origin`, or a foreign `Host` on a loopback server: CSRF and DNS
//! rebinding), the body capped (a declared length over the cap is refused before a byte is
//! read; a streamed one is cut off at the cap) and given a deadline; and `OXP-Version` on every
//! answer, axum's own rejections included.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::Request;
use axum::http::header::{CONNECTION, CONTENT_LENGTH, HOST, ORIGIN, TRANSFER_ENCODING};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::Response;
use http_body::Frame;
use http_body_util::{LengthLimitError, Limited};
use tower_service::Service;

use super::AppState;
use super::dialect::{OXP_VERSION, OXP_VERSION_HEADER};
use super::listen::BodyBudget;

/// The host names a loopback server answers to by default: a page on another name that
/// resolves to 127.0.0.1 (DNS rebinding) is not one of them.
pub(crate) const LOOPBACK_HOSTS: [&str; 3] = ["localhost", "127.0.0.1", "[::1]"];

/// Who may reach the server from a browser, and under which names.
#[derive(Clone, Debug, Default)]
pub(crate) struct Browsers {
    /// Origins allowed (`scheme://host[:port]`, lowercase): the server's own, as its
    /// configuration and listener give them, and those it was told to allow. Never taken from
    /// a request.
    pub(crate) origins: Vec<String>,
    /// `Some`: only these host names (lowercase, without port) are answered.
    pub(crate) hosts: Option<Vec<String>>,
}

/// Why a request was turned away before any route saw it.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Refused {
    Origin,
    Host,
}

impl Browsers {
    /// The normal form an origin is compared in: lowercase, no trailing slash, no path.
    pub(crate) fn origin_of(url: &str) -> String {
        let url = url.trim().trim_end_matches('/').to_ascii_lowercase();
        match url.split_once("://") {
            Some((scheme, rest)) => {
                let authority = rest.split('/').next().unwrap_or_default();
                format!("{scheme}://{authority}")
            }
            None => url,
        }
    }

    pub(crate) fn check(&self, headers: &HeaderMap) -> Result<(), Refused> {
        let host = headers.get(HOST).and_then(|h| h.to_str().ok());
        if let (Some(allowed), Some(host)) = (&self.hosts, host) {
            let name = host_name(host);
            if !allowed.iter().any(|a| a.eq_ignore_ascii_case(name)) {
                return Err(Refused::Host);
            }
        }
        let Some(origin) = headers.get(ORIGIN) else {
            return Ok(()); // not a browser, or a same-origin GET
        };
        // Duplicate `Origin` headers are no browser's: refused rather than picked from.
        if headers.get_all(ORIGIN).iter().nth(1).is_some() {
            return Err(Refused::Origin);
        }
        // Compared without allocating: every call from a browser page passes here.
        let origin = origin.to_str().map_err(|_| Refused::Origin)?.trim();
        let origin = origin.strip_suffix('/').unwrap_or(origin);
        // Never the request's own `Host`: a rebound page names its own host there, and beyond
        // loopback no `Host` check stands in its way.
        if self.origins.iter().any(|o| o.eq_ignore_ascii_case(origin)) {
            Ok(())
        } else {
            Err(Refused::Origin)
        }
    }

    /// The origins a page served by this listener has: `http://` and each address it answers
    /// on (every interface's when it binds all of them; on loopback, the loopback names too),
    /// with its port (none besides for port 80, which browsers leave out).
    pub(crate) fn listener_origins(addr: std::net::SocketAddr) -> Vec<String> {
        let port = addr.port();
        let mut hosts: Vec<String> = Vec::new();
        let name = |ip: std::net::IpAddr| match ip {
            std::net::IpAddr::V4(v4) => v4.to_string(),
            std::net::IpAddr::V6(v6) => format!("[{v6}]"),
        };
        if addr.ip().is_unspecified() {
            // `0.0.0.0` answers on every IPv4 address, `[::]` on every address.
            let v6 = addr.is_ipv6();
            if let Ok(interfaces) = if_addrs::get_if_addrs() {
                hosts.extend(
                    interfaces
                        .iter()
                        .map(|i| i.ip())
                        .filter(|ip| v6 || ip.is_ipv4())
                        .map(name),
                );
            }
            hosts.extend(LOOPBACK_HOSTS.map(String::from));
        } else if addr.ip().is_loopback() {
            hosts.extend(LOOPBACK_HOSTS.map(String::from));
        } else {
            hosts.push(name(addr.ip()));
        }
        hosts.sort();
        hosts.dedup();
        let mut origins = Vec::with_capacity(hosts.len() * 2);
        for host in hosts {
            origins.push(format!("http://{host}:{port}"));
            if port == 80 {
                origins.push(format!("http://{host}"));
            }
        }
        origins
    }
}

/// `example.com` of `example.com:8000`, `[::1]` of `[::1]:8000`.
fn host_name(host: &str) -> &str {
    if let Some(end) = host.find(']') {
        return &host[..=end];
    }
    host.rsplit_once(':').map_or(host, |(name, _)| name)
}

/// The guard, as a layer over the whole router. Written out rather than made with axum's
/// `middleware::from_fn`, which boxes every request's future and clones the router behind it:
/// every call passes here.
#[derive(Clone)]
pub(crate) struct GuardLayer(pub(crate) Arc<AppState>);

impl<S> tower_layer::Layer<S> for GuardLayer {
    type Service = Guard<S>;

    fn layer(&self, inner: S) -> Guard<S> {
        Guard {
            inner,
            state: self.0.clone(),
        }
    }
}

#[derive(Clone)]
pub(crate) struct Guard<S> {
    inner: S,
    state: Arc<AppState>,
}

impl<S> Service<Request> for Guard<S>
where
    S: Service<Request, Response = Response, Error = Infallible>,
{
    type Response = Response;
    type Error = Infallible;
    type Future = Guarded<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request) -> Self::Future {
        let state = self.state.clone();
        let stage = match refusal(&state, &request) {
            None => {
                let (limit, deadline) = (state.max_body_bytes, state.body_timeout);
                let budget = request.extensions().get::<Arc<BodyBudget>>().cloned();
                let reader = budget.clone();
                let request = request
                    .map(|body| Body::new(Timed::new(Limited::new(body, limit), deadline, reader)));
                Stage::Passed {
                    future: self.inner.call(request),
                    budget,
                }
            }
            Some(mut response) => {
                if has_body(request.headers()) {
                    // Answered before the body was read: the connection closes after this
                    // answer, once that body is read away (see `listen::WriteDeadline`).
                    if let Some(budget) = request.extensions().get::<Arc<BodyBudget>>() {
                        budget.left_unread();
                    }
                    response
                        .headers_mut()
                        .insert(CONNECTION, HeaderValue::from_static("close"));
                }
                Stage::Refused {
                    response: Some(response),
                }
            }
        };
        Guarded { stage, state }
    }
}

pin_project_lite::pin_project! {
    /// A request past the guard, or the answer it was turned away with.
    pub(crate) struct Guarded<F> {
        #[pin]
        stage: Stage<F>,
        state: Arc<AppState>,
    }
}

pin_project_lite::pin_project! {
    #[project = StageProjection]
    enum Stage<F> {
        /// `budget` tells whether the handler answered with the body cut off part-way.
        Passed { #[pin] future: F, budget: Option<Arc<BodyBudget>> },
        Refused { response: Option<Response> },
    }
}

impl<F: Future<Output = Result<Response, Infallible>>> Future for Guarded<F> {
    type Output = Result<Response, Infallible>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let mut response = match this.stage.project() {
            StageProjection::Passed { future, budget } => {
                let Ok(mut response) = std::task::ready!(future.poll(cx));
                // A body cut off as it was read (over the cap, too slow, over the budget) is
                // still being sent: as for one refused unread, the connection closes after
                // this answer, once the rest is read away.
                if budget.as_ref().is_some_and(|budget| budget.has_unread()) {
                    response
                        .headers_mut()
                        .insert(CONNECTION, HeaderValue::from_static("close"));
                }
                response
            }
            StageProjection::Refused { response } => response
                .take()
                .expect("a guarded request polled after it was answered"),
        };
        if let Some(metrics) = this.state.pipeline.metrics_handle() {
            // Whichever layer turned the request away (this guard, authentication, a handler
            // reading the body, a nested front), its status says why.
            let reason = match response.status() {
                StatusCode::UNAUTHORIZED => Some(crate::metrics::Refusal::Auth),
                StatusCode::FORBIDDEN => Some(crate::metrics::Refusal::Origin),
                StatusCode::PAYLOAD_TOO_LARGE => Some(crate::metrics::Refusal::BodySize),
                _ => None,
            };
            if let Some(reason) = reason {
                metrics.refused(reason);
            }
        }
        response
            .headers_mut()
            .insert(OXP_VERSION_HEADER, HeaderValue::from_static(OXP_VERSION));
        Poll::Ready(Ok(response))
    }
}

/// The answer to a request turned away at the door, if it is.
fn refusal(state: &AppState, request: &Request) -> Option<Response> {
    if let Err(refused) = state.browsers.check(request.headers()) {
        let (message, detail) = match refused {
            Refused::Origin => (
                "Requests from this origin are not allowed.",
                "the request's Origin is not the server's own nor in OXP_ALLOWED_ORIGINS",
            ),
            Refused::Host => (
                "Requests for this host are not allowed.",
                "a loopback server answers only to localhost, 127.0.0.1 and [::1] (and OXP_ALLOWED_HOSTS)",
            ),
        };
        tracing::info!(
            path = ?request.uri().path(),
            reason = ?refused,
            "refused a request from a browser context"
        );
        return Some(super::respond::error_response(
            StatusCode::FORBIDDEN,
            message,
            detail,
        ));
    }
    let limit = state.max_body_bytes;
    declared_length(request.headers())
        .is_some_and(|length| length > limit as u64)
        .then(|| super::respond::too_large(limit))
}

/// Whether a request comes with a body (a length over zero, or chunked).
fn has_body(headers: &HeaderMap) -> bool {
    declared_length(headers).is_some_and(|length| length > 0)
        || headers.contains_key(TRANSFER_ENCODING)
}

fn declared_length(headers: &HeaderMap) -> Option<u64> {
    headers
        .get(CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse().ok())
}

/// A body that must arrive whole within its deadline — counted from the first time it keeps a
/// reader waiting (a body that came with its head never starts a timer) — and whose bytes count
/// against its connection's budget while it is read.
struct Timed<B> {
    inner: B,
    limit: Duration,
    deadline: Option<Pin<Box<tokio::time::Sleep>>>,
    budget: Option<Arc<BodyBudget>>,
    taken: usize,
}

impl<B> Timed<B> {
    fn new(inner: B, limit: Duration, budget: Option<Arc<BodyBudget>>) -> Self {
        Timed {
            inner,
            limit,
            deadline: None,
            budget,
            taken: 0,
        }
    }

    /// A reader waits for the body: ready with `TooSlow` once the deadline passes. The timer is
    /// made only for a body that keeps a reader waiting.
    fn wait(&mut self, cx: &mut Context<'_>) -> Poll<Cut> {
        let limit = self.limit;
        let deadline = self
            .deadline
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(limit)));
        deadline.as_mut().poll(cx).map(|()| Cut::TooSlow)
    }
}

impl<B> Drop for Timed<B> {
    fn drop(&mut self) {
        if let Some(budget) = &self.budget {
            budget.give_back(self.taken);
        }
    }
}

/// Why the guard cut a body off (beside the length limit, which `Limited` reports itself).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Cut {
    /// The body did not arrive within its deadline.
    TooSlow,
    /// The connection's requests hold more body bytes at once than its budget allows.
    OverBudget,
}

impl std::fmt::Display for Cut {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Cut::TooSlow => "the request body did not arrive in time",
            Cut::OverBudget => "the connection's requests hold too many body bytes at once",
        })
    }
}

impl std::error::Error for Cut {}

impl<B> http_body::Body for Timed<B>
where
    B: http_body::Body<Data = Bytes> + Unpin,
    B::Error: Into<axum::BoxError>,
{
    type Data = Bytes;
    type Error = axum::BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::BoxError>>> {
        let this = &mut *self;
        let cut = match Pin::new(&mut this.inner).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => {
                let bytes = frame.data_ref().map_or(0, Bytes::len);
                match &this.budget {
                    Some(budget) if !budget.take(bytes) => Box::new(Cut::OverBudget),
                    _ => {
                        this.taken += bytes;
                        return Poll::Ready(Some(Ok(frame)));
                    }
                }
            }
            // Over the cap (`Limited`), or the connection failed.
            Poll::Ready(Some(Err(error))) => error.into(),
            Poll::Ready(None) => return Poll::Ready(None),
            Poll::Pending => match this.wait(cx) {
                Poll::Ready(cut) => Box::new(cut),
                Poll::Pending => return Poll::Pending,
            },
        };
        // The rest of the body may still be on its way.
        if let Some(budget) = &this.budget {
            budget.left_unread();
        }
        Poll::Ready(Some(Err(cut)))
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

/// Why reading a body failed: over the cap or the connection's budget (`413`), too slow, or
/// broken (`400`).
pub(crate) enum BodyFailure {
    TooLarge,
    OverBudget,
    TooSlow,
    Broken,
}

impl BodyFailure {
    pub(crate) fn of(error: &axum::Error) -> Self {
        let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(error);
        while let Some(error) = cause {
            if error.is::<LengthLimitError>() {
                return BodyFailure::TooLarge;
            }
            match error.downcast_ref::<Cut>() {
                Some(Cut::TooSlow) => return BodyFailure::TooSlow,
                Some(Cut::OverBudget) => return BodyFailure::OverBudget,
                None => {}
            }
            cause = error.source();
        }
        BodyFailure::Broken
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(*name, HeaderValue::from_static(value));
        }
        map
    }

    #[test]
    fn origins_and_hosts() {
        let mut origins = Browsers::listener_origins("127.0.0.1:8000".parse().unwrap());
        origins.push("https://app.example.com".into());
        let local = Browsers {
            origins,
            hosts: Some(LOOPBACK_HOSTS.map(String::from).to_vec()),
        };
        assert_eq!(local.check(&headers(&[("host", "127.0.0.1:8000")])), Ok(()));
        assert_eq!(local.check(&headers(&[("host", "[::1]:8000")])), Ok(()));
        assert_eq!(local.check(&headers(&[("host", "LOCALHOST")])), Ok(()));
        assert_eq!(
            local.check(&headers(&[("host", "evil.example:8000")])),
            Err(Refused::Host)
        );
        // The listener's own origin; a listed one; others not.
        let own = [
            ("host", "127.0.0.1:8000"),
            ("origin", "http://127.0.0.1:8000"),
        ];
        assert_eq!(local.check(&headers(&own)), Ok(()));
        let listed = [
            ("host", "127.0.0.1:8000"),
            ("origin", "https://app.example.com/"),
        ];
        assert_eq!(local.check(&headers(&listed)), Ok(()));
        for foreign in ["https://evil.example", "null", "http://localhost:3000"] {
            let h = headers(&[("host", "localhost:8000"), ("origin", foreign)]);
            assert_eq!(local.check(&h), Err(Refused::Origin), "{foreign}");
        }
        let twice = [
            ("host", "127.0.0.1:8000"),
            ("origin", "http://127.0.0.1:8000"),
            ("origin", "http://127.0.0.1:8000"),
        ];
        assert_eq!(local.check(&headers(&twice)), Err(Refused::Origin));
        // No Host check off loopback; the Origin check still holds.
        let public = Browsers::default();
        assert_eq!(
            public.check(&headers(&[("host", "tools.example.com")])),
            Ok(())
        );
        let h = headers(&[
            ("host", "tools.example.com"),
            ("origin", "https://evil.example"),
        ]);
        assert_eq!(public.check(&h), Err(Refused::Origin));
        // A rebound page names its own host in both headers: not the server's origin.
        let rebound = headers(&[
            ("host", "evil.example:8000"),
            ("origin", "http://evil.example:8000"),
        ]);
        assert_eq!(public.check(&rebound), Err(Refused::Origin));
    }

    #[test]
    fn a_listener_s_origins() {
        let local = Browsers::listener_origins("127.0.0.1:8000".parse().unwrap());
        for own in [
            "http://127.0.0.1:8000",
            "http://localhost:8000",
            "http://[::1]:8000",
        ] {
            assert!(local.iter().any(|o| o == own), "{own} in {local:?}");
        }
        let all = Browsers::listener_origins("0.0.0.0:80".parse().unwrap());
        assert!(all.iter().any(|o| o == "http://127.0.0.1:80"), "{all:?}");
        assert!(all.iter().any(|o| o == "http://127.0.0.1"), "{all:?}");
        assert!(!all.iter().any(|o| o.contains("evil")));
        let one = Browsers::listener_origins("10.1.2.3:8080".parse().unwrap());
        assert_eq!(one, ["http://10.1.2.3:8080"]);
    }

    #[test]
    fn origin_normal_form() {
        assert_eq!(
            Browsers::origin_of("HTTPS://Tools.Example.com:8443/oxp/"),
            "https://tools.example.com:8443"
        );
    }
}
