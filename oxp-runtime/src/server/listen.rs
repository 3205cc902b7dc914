//! Connections: how many, and for how long. Most of what a hostile client can do to a server
//! happens here, before authentication: hold sockets open (idle, or trickling a header line
//! every few seconds), send headers without end, open many HTTP/2 streams, or never read the
//! answer. Each is bounded; `/health` keeps answering while it happens.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll};
use std::time::Duration;

use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::sync::Semaphore;

/// The limits on connections [`Server::serve`](super::Server::serve) enforces. Start from
/// [`ConnectionLimits::default`] and change what you need.
///
/// ```
/// use oxp_runtime::server::{ConnectionLimits, Server};
/// # let registry = oxp_runtime::Registry::builder().build().unwrap();
/// let mut limits = ConnectionLimits::default();
/// limits.max_connections = Some(2_000);
/// limits.header_timeout = std::time::Duration::from_secs(5);
/// let server = Server::new(registry).connection_limits(limits);
/// # async {
/// let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
/// server.serve(listener, std::future::pending(), std::time::Duration::from_secs(30)).await?;
/// # Ok::<(), std::io::Error>(()) };
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ConnectionLimits {
    /// Open connections at most (`OXP_MAX_CONNECTIONS`), over every listener of the server and
    /// its clones (a metrics listener holds at most an eighth of them); one over it is closed at
    /// once. `None`: chosen at start from the process's file limit, leaving headroom (at most
    /// 10,000).
    pub max_connections: Option<usize>,
    /// How long a request's head may take to arrive, and how long an HTTP/1 connection may
    /// sit idle between requests (`OXP_HEADER_TIMEOUT_MS`, 10 s).
    pub header_timeout: Duration,
    /// How long a write may wait on a client that does not read (`OXP_WRITE_TIMEOUT_MS`,
    /// 30 s); then the connection is closed and the answer it held freed.
    pub write_timeout: Duration,
    /// The largest request head, in bytes (`OXP_MAX_HEADER_BYTES`, 64 KiB; at least 8 KiB);
    /// a larger one is answered `431`.
    pub max_header_bytes: usize,
    /// HTTP/2 streams at once per connection (64; with the `http2` feature).
    pub max_streams: u32,
    /// HTTP/2 keep-alive pings: sent after this long without a frame, and the connection
    /// closed when one is not answered within as long again (20 s; with the `http2` feature).
    pub keep_alive_interval: Duration,
    /// Request-body bytes one connection may have in flight at once, over all its requests
    /// (8 MiB): HTTP/2 carries many requests on one connection, and each body is held whole
    /// until its call is read. Over it, a request is answered `413`.
    pub max_buffered_bytes: usize,
}

impl Default for ConnectionLimits {
    fn default() -> Self {
        ConnectionLimits {
            max_connections: None,
            header_timeout: Duration::from_secs(10),
            write_timeout: Duration::from_secs(30),
            max_header_bytes: 64 * 1024,
            max_streams: 64,
            keep_alive_interval: Duration::from_secs(20),
            max_buffered_bytes: 8 * 1024 * 1024,
        }
    }
}

/// What speaks HTTP on a connection: HTTP/1.1, and with the `http2` feature HTTP/2 as well
/// (hyper-util's `auto` tells them apart by the first bytes a client sends).
#[cfg(not(feature = "http2"))]
type Protocols = hyper::server::conn::http1::Builder;
#[cfg(feature = "http2")]
type Protocols = hyper_util::server::conn::auto::Builder<hyper_util::rt::TokioExecutor>;

/// hyper's own floor for its read buffer, which bounds a request head.
const MIN_HEADER_BYTES: usize = 8 * 1024;
/// The most connections chosen by default, and the file descriptors kept free below the
/// process's limit (for the listener, logs, Redis, and a `/health` check in the worst case).
const DEFAULT_MAX_CONNECTIONS: usize = 10_000;
const FILE_HEADROOM: usize = 256;

impl ConnectionLimits {
    /// The connection cap in force: the configured one, or one under the file limit.
    pub(crate) fn max_connections(&self) -> usize {
        self.max_connections.unwrap_or_else(|| {
            let files = open_file_limit().unwrap_or(1024);
            files
                .saturating_sub(FILE_HEADROOM)
                .clamp(64, DEFAULT_MAX_CONNECTIONS)
        })
    }

    #[cfg(not(feature = "http2"))]
    fn builder(&self) -> Protocols {
        let mut builder = hyper::server::conn::http1::Builder::new();
        builder
            .timer(TokioTimer::new())
            .header_read_timeout(self.header_timeout)
            .max_buf_size(self.max_header_bytes.max(MIN_HEADER_BYTES));
        builder
    }

    #[cfg(feature = "http2")]
    fn builder(&self) -> Protocols {
        let mut builder = Protocols::new(hyper_util::rt::TokioExecutor::new());
        builder
            .http1()
            .timer(TokioTimer::new())
            .header_read_timeout(self.header_timeout)
            .max_buf_size(self.max_header_bytes.max(MIN_HEADER_BYTES));
        builder
            .http2()
            .timer(TokioTimer::new())
            .max_concurrent_streams(self.max_streams)
            .max_header_list_size(u32::try_from(self.max_header_bytes).unwrap_or(u32::MAX))
            .keep_alive_interval(self.keep_alive_interval)
            .keep_alive_timeout(self.keep_alive_interval)
            // Unread request data a client may push per stream and per connection: the
            // flow-control windows are the buffers.
            .initial_stream_window_size(256 * 1024)
            .initial_connection_window_size(1024 * 1024)
            .max_pending_accept_reset_streams(64);
        builder
    }
}

/// The connections one process holds open, over all its listeners: one budget, since they all
/// draw on one file limit (two listeners each capped near it would together exhaust it, and the
/// main port would fail to accept `/health`). The main listener draws on the budget alone; a
/// listener beside it (`/metrics` on a port of its own) holds at most an eighth of it, so however
/// many connections that one is sent, the main port keeps the rest. Clones share the budget.
#[derive(Clone, Debug, Default)]
pub(crate) struct ConnectionBudget(Arc<OnceLock<(Arc<Semaphore>, usize)>>);

/// What a listener takes a connection's places from.
pub(crate) struct Places {
    shared: Arc<Semaphore>,
    /// A side listener's own cap, within the shared budget.
    own: Option<Arc<Semaphore>>,
}

/// A connection's places, given back when it closes (dropped).
struct Place {
    _shared: tokio::sync::OwnedSemaphorePermit,
    _own: Option<tokio::sync::OwnedSemaphorePermit>,
}

impl ConnectionBudget {
    /// The places of the main listener (`side` false) or of one beside it, the budget sized by
    /// `limits` when first drawn on.
    pub(crate) fn places(&self, limits: &ConnectionLimits, side: bool) -> Places {
        let (shared, total) = self.0.get_or_init(|| {
            let total = limits.max_connections();
            (Arc::new(Semaphore::new(total)), total)
        });
        let own = side.then(|| Arc::new(Semaphore::new((total / 8).max(1))));
        Places {
            shared: shared.clone(),
            own,
        }
    }
}

impl Places {
    /// A place for one more connection, or none when the listener or the process is full.
    fn take(&self) -> Option<Place> {
        let own = match &self.own {
            Some(own) => Some(own.clone().try_acquire_owned().ok()?),
            None => None,
        };
        let shared = self.shared.clone().try_acquire_owned().ok()?;
        Some(Place {
            _shared: shared,
            _own: own,
        })
    }
}

/// The soft limit on open files, if the platform says.
fn open_file_limit() -> Option<usize> {
    #[cfg(unix)]
    {
        let mut limit = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: `getrlimit` writes the struct it is given and nothing else.
        if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } == 0 {
            return usize::try_from(limit.rlim_cur).ok();
        }
    }
    None
}

/// Serves `router` on `listener` until `stop` completes, then closes connections gracefully
/// within `close`; each connection holds one of `places` while open.
pub(crate) async fn serve(
    listener: tokio::net::TcpListener,
    router: axum::Router,
    limits: &ConnectionLimits,
    places: Places,
    stop: impl Future<Output = ()>,
    close: Duration,
) {
    let builder = Arc::new(limits.builder());
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    let (write_timeout, header_timeout) = (limits.write_timeout, limits.header_timeout);
    let mut stop = std::pin::pin!(stop);
    loop {
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(error) => {
                    // Out of file descriptors, most likely: wait a moment rather than spin.
                    tracing::warn!(%error, "could not accept a connection");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            () = &mut stop => break,
        };
        // Over the cap: closed at once, so the backlog does not fill with waiting sockets.
        let Some(place) = places.take() else {
            tracing::debug!("closed a connection over the connection cap");
            continue;
        };
        let _ = stream.set_nodelay(true);
        let budget = Arc::new(BodyBudget::new(limits.max_buffered_bytes));
        let service = TowerToHyperService::new(PerConnection {
            router: router.clone(),
            budget: budget.clone(),
            peer,
        });
        let builder = builder.clone();
        let watcher = graceful.watcher();
        tokio::spawn(async move {
            // A connection that sends nothing at all: hyper's header timeout starts only once
            // a request is being read (and, with `http2`, the protocol known), which takes a
            // first byte.
            let mut first = [0u8; 1];
            let first_byte = stream.peek(&mut first);
            if !matches!(
                tokio::time::timeout(header_timeout, first_byte).await,
                Ok(Ok(1..))
            ) {
                return;
            }
            let io = TokioIo::new(WriteDeadline::new(stream, write_timeout, budget));
            let _ = watcher.watch(builder.serve_connection(io, service)).await;
            drop(place);
        });
    }
    drop(listener);
    let _ = tokio::time::timeout(close, graceful.shutdown()).await;
}

/// Request-body bytes a connection has in flight, against its budget; and whether a request
/// on it was answered without its body being read (see [`WriteDeadline::poll_shutdown`]).
#[derive(Debug)]
pub(crate) struct BodyBudget {
    held: AtomicUsize,
    max: usize,
    unread: AtomicBool,
}

impl BodyBudget {
    fn new(max: usize) -> Self {
        BodyBudget {
            held: AtomicUsize::new(0),
            max,
            unread: AtomicBool::new(false),
        }
    }

    /// A request was answered before its body was read: the client may still be sending it.
    pub(crate) fn left_unread(&self) {
        self.unread.store(true, Ordering::Release);
    }

    pub(crate) fn has_unread(&self) -> bool {
        self.unread.load(Ordering::Acquire)
    }

    /// Takes `bytes` from the budget, or nothing if that would exceed it.
    pub(crate) fn take(&self, bytes: usize) -> bool {
        self.held
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |held| {
                held.checked_add(bytes).filter(|total| *total <= self.max)
            })
            .is_ok()
    }

    pub(crate) fn give_back(&self, bytes: usize) {
        self.held.fetch_sub(bytes, Ordering::AcqRel);
    }
}

/// The router, with each request told its connection's body budget.
#[derive(Clone)]
struct PerConnection {
    router: axum::Router,
    budget: Arc<BodyBudget>,
    /// The client's address, as axum's `ConnectInfo` (what authentication limits per client).
    peer: std::net::SocketAddr,
}

impl<B> tower_service::Service<axum::http::Request<B>> for PerConnection
where
    B: http_body::Body<Data = axum::body::Bytes> + Send + 'static,
    B::Error: Into<axum::BoxError>,
{
    type Response = axum::response::Response;
    type Error = std::convert::Infallible;
    type Future = <axum::Router as tower_service::Service<axum::http::Request<B>>>::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        tower_service::Service::<axum::http::Request<B>>::poll_ready(&mut self.router, cx)
    }

    fn call(&mut self, mut request: axum::http::Request<B>) -> Self::Future {
        request.extensions_mut().insert(self.budget.clone());
        request
            .extensions_mut()
            .insert(axum::extract::ConnectInfo(self.peer));
        self.router.call(request)
    }
}

/// A socket whose writes may wait on the peer for at most `limit` each: a client that never
/// reads cannot pin its answer (and its connection) forever.
struct WriteDeadline {
    stream: TcpStream,
    limit: Duration,
    waiting: Option<Pin<Box<tokio::time::Sleep>>>,
    /// The connection's budget, which also says whether a body was left unread.
    budget: Arc<BodyBudget>,
    /// While closing (see `poll_shutdown`).
    lingering: Option<Lingering>,
}

/// A close under way: how long, and how much more, unread input is drained, and whether our
/// side is shut yet.
struct Lingering {
    deadline: Pin<Box<tokio::time::Sleep>>,
    left: usize,
    shut: bool,
}

/// A lingering close, as nginx does: after the server has answered (a `413` to a body it did not
/// read, say), it reads away what the client still sends, for at most this long and this much.
/// Closing with unread input would send a reset, which can destroy the answer in the client's
/// buffers before it reads it. Our side is shut first, except after a request whose body was
/// left unread: a client still writing that body may take the early end of the connection for
/// a failed request (hyper's does, now and then) before it reads the answer, so its body is
/// read away first and our side shut once it is done (or the bounds are reached).
const LINGER: Duration = Duration::from_secs(2);
const LINGER_BYTES: usize = 4 * 1024 * 1024;

impl WriteDeadline {
    fn new(stream: TcpStream, limit: Duration, budget: Arc<BodyBudget>) -> Self {
        WriteDeadline {
            stream,
            limit,
            waiting: None,
            budget,
            lingering: None,
        }
    }

    /// After a write returned `Pending`: starts the clock if it was not running, and fails
    /// once it runs out.
    fn poll_expired(&mut self, cx: &mut Context<'_>) -> Poll<io::Error> {
        let limit = self.limit;
        let waiting = self
            .waiting
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(limit)));
        match waiting.as_mut().poll(cx) {
            Poll::Ready(()) => {
                // At debug: a client decides how often this happens.
                if let Ok(peer) = self.stream.peer_addr() {
                    tracing::debug!(
                        "the write deadline closed the connection of {peer} (its answer was \
                         not read in time)"
                    );
                }
                Poll::Ready(io::Error::new(
                    io::ErrorKind::TimedOut,
                    "the client did not read its answer in time",
                ))
            }
            Poll::Pending => Poll::Pending,
        }
    }

    fn written<T>(
        &mut self,
        cx: &mut Context<'_>,
        poll: Poll<io::Result<T>>,
    ) -> Poll<io::Result<T>> {
        match poll {
            Poll::Ready(done) => {
                self.waiting = None;
                Poll::Ready(done)
            }
            Poll::Pending => self.poll_expired(cx).map(Err),
        }
    }
}

impl AsyncRead for WriteDeadline {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_read(cx, buf)
    }
}

impl AsyncWrite for WriteDeadline {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let poll = Pin::new(&mut self.stream).poll_write(cx, buf);
        self.written(cx, poll)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let poll = Pin::new(&mut self.stream).poll_write_vectored(cx, bufs);
        self.written(cx, poll)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let poll = Pin::new(&mut self.stream).poll_flush(cx);
        self.written(cx, poll)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = &mut *self;
        let lingering = this.lingering.get_or_insert_with(|| Lingering {
            deadline: Box::pin(tokio::time::sleep(LINGER)),
            left: LINGER_BYTES,
            shut: false,
        });
        if !lingering.shut && !this.budget.has_unread() {
            std::task::ready!(Pin::new(&mut this.stream).poll_shutdown(cx))?;
            lingering.shut = true;
        }
        let mut buffer = [0u8; 8 * 1024];
        loop {
            let mut read = ReadBuf::new(&mut buffer);
            match Pin::new(&mut this.stream).poll_read(cx, &mut read) {
                // The client closed its side, or the socket failed: nothing left to protect.
                Poll::Ready(Ok(())) if read.filled().is_empty() => break,
                Poll::Ready(Err(_)) => return Poll::Ready(Ok(())),
                Poll::Ready(Ok(())) => match lingering.left.checked_sub(read.filled().len()) {
                    Some(rest) => lingering.left = rest,
                    None => break,
                },
                Poll::Pending => match lingering.deadline.as_mut().poll(cx) {
                    Poll::Ready(()) => break,
                    Poll::Pending => return Poll::Pending,
                },
            }
        }
        // Drained, or out of patience: shut our side if that was put off (a failure now, the
        // client having gone, changes nothing).
        if !lingering.shut {
            let _ = std::task::ready!(Pin::new(&mut this.stream).poll_shutdown(cx));
        }
        Poll::Ready(Ok(()))
    }
}
