//! A request's run, as the transport holds it: polled inline while the client waits, and, if
//! the client hangs up first, cancelled and left to end on its own. Cancelling is not dropping:
//! the run sees `notifications/cancelled`'s signal, and a tool that asked to finish does
//! (`ctx.finish_when_cancelled()`), as it would over a connection.

use std::pin::Pin;
use std::task::{Context, Poll};

use axum::http::HeaderMap;
use rmcp::model::ServerJsonRpcMessage;

use crate::signals::Cancellation;

type Run = Pin<Box<dyn Future<Output = Answered> + Send>>;

/// What a run ends with. The message is boxed: the answer passes up through the run, the
/// answer's future and the select that waits on it, each moving it whole.
pub(super) struct Answered {
    pub(super) message: Box<ServerJsonRpcMessage>,
    /// The request's header map, emptied: the answer's headers go in it. hyper reads the
    /// connection's next request into an answer's map, so one sized for a request's headers
    /// serves both without an allocation.
    pub(super) headers: HeaderMap,
}

/// A run and the signal that cancels it.
pub(super) struct Answer {
    /// Until it answers.
    run: Option<Run>,
    cancel: Cancellation,
}

impl Answer {
    pub(super) fn new(
        run: impl Future<Output = Answered> + Send + 'static,
        cancel: Cancellation,
    ) -> Self {
        Answer {
            run: Some(Box::pin(run)),
            cancel,
        }
    }
}

impl Future for Answer {
    type Output = Answered;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Answered> {
        let Some(run) = self.run.as_mut() else {
            return Poll::Pending; // answered already: never polled again
        };
        let answer = std::task::ready!(run.as_mut().poll(cx));
        self.run = None;
        Poll::Ready(answer)
    }
}

impl Drop for Answer {
    /// The client is gone before the answer: the run is told, and ends beside the server (at
    /// its next await point, or where the tool chooses to).
    fn drop(&mut self) {
        if let Some(run) = self.run.take() {
            self.cancel.cancel();
            if let Ok(runtime) = tokio::runtime::Handle::try_current() {
                runtime.spawn(run);
            }
        }
    }
}
