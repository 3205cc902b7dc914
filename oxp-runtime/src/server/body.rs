//! A request body as the guard hands it on: capped (`Limited`), given a deadline from the
//! first time its reader waits, and counted against its connection's budget; and why reading
//! one failed, for the answer every route gives (`413`, `400`).

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::Bytes;
use axum::http::HeaderMap;
use axum::http::header::{CONTENT_LENGTH, TRANSFER_ENCODING};
use http_body::Frame;
use http_body_util::LengthLimitError;

use super::listen::BodyBudget;

/// Whether a request comes with a body (a length over zero, or chunked).
pub(super) fn has_body(headers: &HeaderMap) -> bool {
    declared_length(headers).is_some_and(|length| length > 0)
        || headers.contains_key(TRANSFER_ENCODING)
}

pub(super) fn declared_length(headers: &HeaderMap) -> Option<u64> {
    headers
        .get(CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse().ok())
}

/// A body that must arrive whole within its deadline — counted from the first time it keeps a
/// reader waiting (a body that came with its head never starts a timer) — and whose bytes count
/// against its connection's budget while it is read.
pub(super) struct Timed<B> {
    inner: B,
    limit: Duration,
    deadline: Option<Pin<Box<tokio::time::Sleep>>>,
    budget: Option<Arc<BodyBudget>>,
    taken: usize,
}

impl<B> Timed<B> {
    pub(super) fn new(inner: B, limit: Duration, budget: Option<Arc<BodyBudget>>) -> Self {
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
