//! A request's way back to its client over HTTP: nothing until the method sends something (a
//! progress report, a log message, a request of the server's own), then an SSE stream that
//! carries it, and the answer last. A request that sends nothing is answered with JSON and
//! never makes a channel.
//!
//! The stream's body drives the method's future itself, so no task is spawned: while the
//! client reads, the method runs; a client that hangs up drops the body, and with it the run,
//! as a JSON request's run is dropped with its response.

use std::pin::Pin;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::{HeaderValue, Response, header};
use rmcp::model::{ServerJsonRpcMessage, ServerNotification};
use tokio::sync::{Notify, mpsc};

use super::super::exchange::Gone;
use super::answer::Answer;

/// Messages waiting for a slow client before the method waits for it.
const QUEUE: usize = 32;

/// How often an open stream sends a comment while the method is quiet, so that proxies keep it.
const KEEP_ALIVE: Duration = Duration::from_secs(15);

/// One request's stream, opened by the first message sent.
#[derive(Clone, Default)]
pub(crate) struct Stream(Arc<Shared>);

#[derive(Default)]
struct Shared {
    sender: OnceLock<mpsc::Sender<ServerJsonRpcMessage>>,
    receiver: Mutex<Option<mpsc::Receiver<ServerJsonRpcMessage>>>,
    opened: Notify,
}

impl Stream {
    /// Sends `message` on the stream, opening it if this is the first.
    pub(super) async fn send(&self, message: ServerJsonRpcMessage) -> Result<(), Gone> {
        let mut opening = false;
        let sender = self.0.sender.get_or_init(|| {
            let (sender, receiver) = mpsc::channel(QUEUE);
            *self
                .0
                .receiver
                .lock()
                .unwrap_or_else(PoisonError::into_inner) = Some(receiver);
            opening = true;
            sender
        });
        if opening {
            // Once the sender is there for `sent` to see; a permit if the transport is not
            // waiting yet, so it sees the opening when it looks.
            self.0.opened.notify_one();
        }
        sender.send(message).await.map_err(|_| Gone)
    }

    pub(crate) async fn notify(&self, notification: ServerNotification) -> Result<(), Gone> {
        self.send(ServerJsonRpcMessage::notification(notification))
            .await
    }

    /// Waits until the method sends its first message, and takes what it sends.
    pub(super) async fn opened(&self) -> mpsc::Receiver<ServerJsonRpcMessage> {
        loop {
            if let Some(receiver) = self.sent() {
                return receiver;
            }
            self.0.opened.notified().await;
        }
    }

    /// What the method sent, if it sent anything: taken once.
    pub(super) fn sent(&self) -> Option<mpsc::Receiver<ServerJsonRpcMessage>> {
        // Nothing was ever sent (most requests): no lock. A first send in progress elsewhere
        // wakes `opened` once its sender is set.
        self.0.sender.get()?;
        (self.0.receiver.lock())
            .unwrap_or_else(PoisonError::into_inner)
            .take()
    }
}

/// How far the request is: running, or answered.
pub(super) enum Progress {
    Running(Answer),
    Answered(Box<ServerJsonRpcMessage>),
}

/// The SSE response that carries what the method sent, then its answer.
pub(super) fn response(
    progress: Progress,
    receiver: mpsc::Receiver<ServerJsonRpcMessage>,
) -> Response<Body> {
    let (answer, last) = match progress {
        Progress::Running(answer) => (Some(answer), None),
        Progress::Answered(message) => (None, Some(message)),
    };
    let events = Events {
        answer,
        receiver,
        last,
        keep_alive: tokio::time::interval_at(tokio::time::Instant::now() + KEEP_ALIVE, KEEP_ALIVE),
    };
    let mut response = Response::new(Body::from_stream(events));
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    headers.insert("x-accel-buffering", HeaderValue::from_static("no"));
    response
}

/// The stream's events: what the method sent, in order, then its answer.
struct Events {
    /// The method, until it answers.
    answer: Option<Answer>,
    receiver: mpsc::Receiver<ServerJsonRpcMessage>,
    /// The answer, sent once everything the method sent before it has gone.
    last: Option<Box<ServerJsonRpcMessage>>,
    keep_alive: tokio::time::Interval,
}

fn event(message: &ServerJsonRpcMessage) -> Bytes {
    let mut bytes = b"data: ".to_vec();
    // A message of MCP's own types always serializes.
    serde_json::to_writer(&mut bytes, message).expect("an MCP message serializes");
    bytes.extend_from_slice(b"\n\n");
    Bytes::from(bytes)
}

impl futures_util::Stream for Events {
    type Item = Result<Bytes, std::convert::Infallible>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        // What the method sent goes first: its answer follows everything it sent.
        if let Poll::Ready(Some(message)) = this.receiver.poll_recv(cx) {
            return Poll::Ready(Some(Ok(event(&message))));
        }
        if let Some(answer) = this.answer.as_mut()
            && let Poll::Ready(answered) = Pin::new(answer).poll(cx)
        {
            this.answer = None;
            this.last = Some(answered.message);
            // Anything it sent just before answering is in the queue already.
            if let Ok(message) = this.receiver.try_recv() {
                return Poll::Ready(Some(Ok(event(&message))));
            }
        }
        if this.answer.is_none() {
            if let Ok(message) = this.receiver.try_recv() {
                return Poll::Ready(Some(Ok(event(&message))));
            }
            return Poll::Ready(this.last.take().map(|last| Ok(event(&last))));
        }
        if this.keep_alive.poll_tick(cx).is_ready() {
            return Poll::Ready(Some(Ok(Bytes::from_static(b": keep-alive\n\n"))));
        }
        Poll::Pending
    }
}
