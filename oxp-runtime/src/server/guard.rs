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

use axum::body::Body;
use axum::extract::Request;
use axum::http::header::CONNECTION;
use axum::http::{HeaderValue, StatusCode};
use axum::response::Response;
use http_body_util::Limited;
use tower_service::Service;

use super::AppState;
use super::body::{Timed, declared_length, has_body};
use super::browsers::Refused;
use super::dialect::{OXP_VERSION, OXP_VERSION_HEADER};
use super::listen::BodyBudget;

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
            // Authentication says which refusal it is (a 403 may be a missing scope).
            let said = response
                .extensions()
                .get::<crate::metrics::Refusal>()
                .copied();
            let reason = said.or(match response.status() {
                StatusCode::UNAUTHORIZED => Some(crate::metrics::Refusal::Auth),
                StatusCode::FORBIDDEN => Some(crate::metrics::Refusal::Origin),
                StatusCode::PAYLOAD_TOO_LARGE => Some(crate::metrics::Refusal::BodySize),
                _ => None,
            });
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
    let checked = match state.browsers.check(request.headers()) {
        // Public documents, the same for every reader: see `discovery`.
        Err(Refused::Origin)
            if state.discovery
                && super::discovery::is_public(request.method(), request.uri().path()) =>
        {
            Ok(())
        }
        checked => checked,
    };
    if let Err(refused) = checked {
        let (message, detail) = match refused {
            Refused::Origin => (
                "Requests from this origin are not allowed.",
                "the request's Origin is not the server's own nor in OXP_ALLOWED_ORIGINS",
            ),
            Refused::Host => (
                "Requests for this host are not allowed.",
                "the server answers only to its own names: the addresses it listens on (localhost \
                 too on loopback), OXP_PUBLIC_URL's host and OXP_ALLOWED_HOSTS",
            ),
        };
        // At debug: a client decides how often this happens (a page can send it in a loop).
        tracing::debug!(
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
