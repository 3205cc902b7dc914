//! A request's run, as the transport holds it: polled inline while the client waits, and, if
//! the client hangs up first, cancelled and left to end on its own. Cancelling is not dropping:
//! the run sees `notifications/cancelled`'s signal, and a tool that asked to finish does
//! (`ctx.finish_when_cancelled()`), as it would over a connection.

use std::pin::Pin;
use std::task::{Context, Poll};

use rmcp::model::ServerJsonRpcMessage;
use tokio_util::sync::CancellationToken;

type Run = Pin<Box<dyn Future<Output = ServerJsonRpcMessage> + Send>>;

/// A run and the token that cancels it.
pub(super) struct Answer {
    /// Until it answers.
    run: Option<Run>,
    cancel: CancellationToken,
}

impl Answer {
    pub(super) fn new(
        run: impl Future<Output = ServerJsonRpcMessage> + Send + 'static,
        cancel: CancellationToken,
    ) -> Self {
        Answer {
            run: Some(Box::pin(run)),
            cancel,
        }
    }
}

impl Future for Answer {
    type Output = ServerJsonRpcMessage;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<ServerJsonRpcMessage> {
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
