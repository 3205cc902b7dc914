//! A running call's line to its caller: progress the tool reports, and the caller's cancellation.
//! A front that can carry them (MCP) puts [`CallSignals`] in the call's
//! [`CallMeta`](crate::call::CallMeta); the tool sees them through its
//! [`ToolContext`](crate::ToolContext), where, without a front that carries them, reporting
//! progress costs nothing and a call is never cancelled.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use tokio::sync::Notify;

/// One progress report: `done` of `total` (when known), with a message for people.
///
/// ```
/// use oxp_runtime::signals::{CallSignals, Progress};
/// let signals = CallSignals::new().on_progress(|p: Progress| {
///     let share = p.total.map(|t| p.done as f64 / t as f64);
///     println!("{:?} done: {}", share, p.message.unwrap_or_default());
/// });
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Progress {
    /// Work done so far; it should grow with every report.
    pub done: u64,
    /// The whole work, when known.
    pub total: Option<u64>,
    /// What is happening, for people.
    pub message: Option<String>,
}

type ProgressSink = Arc<dyn Fn(Progress) + Send + Sync>;

/// What a front passes to a call so the tool can report progress and learn of cancellation.
///
/// ```
/// use oxp_runtime::signals::{CallSignals, Cancellation};
/// use std::sync::{Arc, Mutex};
///
/// let reports = Arc::new(Mutex::new(Vec::new()));
/// let cancellation = Cancellation::new();
/// let sink = reports.clone();
/// let signals = CallSignals::new()
///     .on_progress(move |p| sink.lock().unwrap().push(p.done))
///     .cancelled_by(&cancellation);
/// // The tool's side, through its context:
/// let ctx = oxp_runtime::ToolContext::new("c1").with_signals(signals);
/// ctx.progress(1, Some(3), Some("downloading"));
/// assert_eq!(*reports.lock().unwrap(), [1]);
/// cancellation.cancel();
/// assert!(ctx.is_cancelled());
/// ```
#[derive(Clone, Default)]
pub struct CallSignals {
    progress: Option<ProgressSink>,
    cancel: Option<Arc<Cancel>>,
    asking: Option<crate::ask::Round>,
    first_wait: Option<Arc<FirstWait>>,
}

/// Set when the tool first waits on anything (its future first returns pending, or a sync
/// tool's blocking thread starts): what tells a call whose asks are ordinary rounds from one
/// that becomes an MCP task, from inside the tool's run, whatever the call waited for around it
/// (a store's I/O, a place to run).
#[derive(Default)]
#[doc(hidden)]
pub struct FirstWait {
    waited: AtomicBool,
    notify: Notify,
}

impl FirstWait {
    pub(crate) fn mark(&self) {
        self.waited.store(true, Ordering::SeqCst);
        self.notify.notify_waiters();
    }

    #[doc(hidden)]
    pub fn waited(&self) -> bool {
        self.waited.load(Ordering::SeqCst)
    }

    /// Returns once the tool has waited.
    #[doc(hidden)]
    pub async fn wait(&self) {
        loop {
            let notified = self.notify.notified();
            if self.waited() {
                return;
            }
            notified.await;
        }
    }
}

impl fmt::Debug for CallSignals {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CallSignals")
            .field("progress", &self.progress.is_some())
            .field("cancellable", &self.cancel.is_some())
            .field("asking", &self.asking)
            .finish()
    }
}

impl CallSignals {
    /// No progress, no cancellation.
    ///
    /// ```
    /// let ctx = oxp_runtime::ToolContext::new("c1").with_signals(oxp_runtime::signals::CallSignals::new());
    /// ctx.progress(1, None, None); // goes nowhere, costs nothing
    /// assert!(!ctx.is_cancelled());
    /// ```
    pub const fn new() -> Self {
        CallSignals {
            progress: None,
            cancel: None,
            asking: None,
            first_wait: None,
        }
    }

    /// `first_wait` is marked when the tool first waits.
    #[doc(hidden)]
    pub fn on_first_wait(mut self, first_wait: &Arc<FirstWait>) -> Self {
        self.first_wait = Some(first_wait.clone());
        self
    }

    pub(crate) fn first_wait(&self) -> Option<Arc<FirstWait>> {
        self.first_wait.clone()
    }

    /// The tool's asks go to `round`: its answers are returned, the rest recorded (see
    /// [`ask`](crate::ask)).
    ///
    /// ```
    /// use oxp_runtime::{ask::Round, signals::CallSignals};
    /// let round = Round::new(Default::default(), |_| true);
    /// let signals = CallSignals::new().asking(&round);
    /// ```
    #[must_use]
    pub fn asking(mut self, round: &crate::ask::Round) -> Self {
        self.asking = Some(round.clone());
        self
    }

    pub(crate) fn round(&self) -> Option<crate::ask::Round> {
        self.asking.clone()
    }

    /// Calls `sink` with each report. It runs on the tool's thread, inside `ctx.progress`:
    /// it must not block (hand the report on, as the MCP front does).
    ///
    /// ```
    /// let signals = oxp_runtime::signals::CallSignals::new().on_progress(|p| println!("{} done", p.done));
    /// ```
    #[must_use]
    pub fn on_progress(mut self, sink: impl Fn(Progress) + Send + Sync + 'static) -> Self {
        self.progress = Some(Arc::new(sink));
        self
    }

    /// The call is cancelled when `cancellation` is.
    ///
    /// ```
    /// use oxp_runtime::signals::{CallSignals, Cancellation};
    /// let cancellation = Cancellation::new();
    /// let signals = CallSignals::new().cancelled_by(&cancellation);
    /// ```
    #[must_use]
    pub fn cancelled_by(mut self, cancellation: &Cancellation) -> Self {
        self.cancel = Some(cancellation.0.clone());
        self
    }

    pub(crate) fn report(&self, progress: impl FnOnce() -> Progress) {
        if let Some(sink) = &self.progress {
            sink(progress());
        }
    }

    pub(crate) fn is_cancelled(&self) -> bool {
        self.cancel
            .as_ref()
            .is_some_and(|c| c.cancelled.load(Ordering::Acquire))
    }

    pub(crate) async fn cancelled(&self) {
        match &self.cancel {
            Some(cancel) => cancel.wait().await,
            None => std::future::pending().await,
        }
    }

    /// The cancellation these signals carry, if any.
    pub(crate) fn cancellation(&self) -> Option<Cancellation> {
        self.cancel.clone().map(Cancellation)
    }

    pub(crate) fn finish_when_cancelled(&self) {
        if let Some(cancel) = &self.cancel {
            cancel.finish.store(true, Ordering::Release);
        }
    }
}

/// The caller's side of a cancellation: a front cancels, the tool's context sees it.
///
/// ```
/// use oxp_runtime::signals::Cancellation;
///
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let cancellation = Cancellation::new();
/// let run = async { std::future::pending::<()>().await }; // a tool that never ends
/// cancellation.cancel();
/// tokio::select! {
///     _ = run => unreachable!(),
///     _ = cancellation.dropping() => {} // the front stops driving the run
/// }
/// # });
/// ```
#[derive(Clone, Debug, Default)]
pub struct Cancellation(Arc<Cancel>);

#[derive(Debug, Default)]
struct Cancel {
    cancelled: AtomicBool,
    /// The tool asked to finish even when cancelled.
    finish: AtomicBool,
    notify: Notify,
}

impl Cancel {
    async fn wait(&self) {
        loop {
            let notified = self.notify.notified();
            if self.cancelled.load(Ordering::Acquire) {
                return;
            }
            notified.await;
        }
    }
}

impl Cancellation {
    /// Not cancelled yet.
    ///
    /// ```
    /// assert!(!oxp_runtime::signals::Cancellation::new().is_cancelled());
    /// ```
    pub fn new() -> Self {
        Cancellation::default()
    }

    /// Cancels: the tool's `ctx.cancelled()` resolves and `ctx.is_cancelled()` turns true.
    ///
    /// ```
    /// let cancellation = oxp_runtime::signals::Cancellation::new();
    /// cancellation.cancel();
    /// assert!(cancellation.is_cancelled());
    /// ```
    pub fn cancel(&self) {
        self.0.cancelled.store(true, Ordering::Release);
        self.0.notify.notify_waiters();
    }

    /// Whether [`cancel`](Self::cancel) was called.
    ///
    /// ```
    /// assert!(!oxp_runtime::signals::Cancellation::new().is_cancelled());
    /// ```
    pub fn is_cancelled(&self) -> bool {
        self.0.cancelled.load(Ordering::Acquire)
    }

    /// Resolves once [`cancel`](Self::cancel) is called, whatever the tool asked.
    ///
    /// ```
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// let cancellation = oxp_runtime::signals::Cancellation::new();
    /// cancellation.cancel();
    /// cancellation.cancelled().await;
    /// # });
    /// ```
    pub async fn cancelled(&self) {
        self.0.wait().await;
    }

    /// Resolves when the front should stop driving the run: once cancelled, unless the tool
    /// asked to finish (`ctx.finish_when_cancelled()`), in which case never.
    ///
    /// ```
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// let cancellation = oxp_runtime::signals::Cancellation::new();
    /// cancellation.cancel();
    /// cancellation.dropping().await;
    /// # });
    /// ```
    pub async fn dropping(&self) {
        self.0.wait().await;
        if self.0.finish.load(Ordering::Acquire) {
            std::future::pending::<()>().await;
        }
    }
}
