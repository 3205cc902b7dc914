//! The fixture tools of the conformance suite (oxp-notes §4), built with `#[tool]` like any user's.

use oxp_runtime::{Registry, RegistryBuilder, ToolContext, ToolError, tool};

#[cfg(doctest)]
#[doc = include_str!("readme_authors.md")]
pub struct ReadmeAuthors;

#[cfg(test)]
mod readme {
    /// The guide's "What authors ask" shows the block `readme_authors.md` compiles, word for
    /// word.
    #[test]
    fn readme_shows_the_compiled_example() {
        let compiled = include_str!("readme_authors.md");
        let block = &compiled[compiled.find("```rust").expect("a rust block")..];
        assert!(
            include_str!("../oxp-runtime/guide/writing_tools.md").contains(block),
            "the guide's example under \"What authors ask\" differs from tests/readme_authors.md"
        );
    }
}

/// Every fixture tool, for a registry or a server under test.
pub fn all_tools() -> RegistryBuilder {
    [
        calculator_add::TOOL,
        which_0_9_0::TOOL,
        which_1_0_0::TOOL,
        which_1_2_0::TOOL,
        which_1_10_0::TOOL,
        get_timestamp::TOOL,
        util_null::TOOL,
        ring::TOOL,
        panic::TOOL,
        slow::TOOL,
        send::TOOL,
        get_emails::TOOL,
        bump::TOOL,
        leaky_fail::TOOL,
        leaky_panic::TOOL,
        sleep::TOOL,
        block::TOOL,
        record::TOOL,
        fifty::TOOL,
        flaky::TOOL,
        hold::TOOL,
        hold_thread::TOOL,
        big_text::TOOL,
    ]
    .into_iter()
    .fold(Registry::builder(), RegistryBuilder::tool)
}

/// Add two numbers.
#[tool(toolkit = "Calculator", name = "Add", version = "1.0.0")]
pub async fn calculator_add(
    /// The first addend.
    a: f64,
    /// The second addend.
    b: f64,
) -> f64 {
    a + b
}

macro_rules! which {
    ($($fn_name:ident => $version:literal),* $(,)?) => {$(
        /// Return this tool's own version.
        #[tool(toolkit = "Math", name = "Which", version = $version)]
        pub fn $fn_name() -> String {
            $version.to_owned()
        }
    )*};
}

/// Get the current Unix timestamp, in seconds.
#[tool(toolkit = "System", version = "1.0.0")]
pub fn get_timestamp() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// Do nothing, and return nothing.
#[tool(toolkit = "Util", name = "Null", version = "1.0.0")]
pub async fn util_null() {}

/// Ring a doorbell.
#[tool(toolkit = "Doorbell", version = "0.1.0")]
pub async fn ring(
    /// The doorbell to ring.
    doorbell_id: String,
) -> Result<(), ToolError> {
    Err(ToolError::new("Doorbell ID not found")
        .developer_message(format!(
            "The doorbell with ID '{doorbell_id}' does not exist."
        ))
        .can_retry(true)
        .additional_prompt_content("ids: doorbell42,doorbell84")
        .retry_after_ms(500))
}

/// Panic, to show that a panicking tool is contained.
#[tool(toolkit = "Util", version = "1.0.0")]
pub async fn panic() -> String {
    panic!("the fixture panicked on purpose")
}

/// Sleep longer than this tool's own timeout.
#[tool(toolkit = "Util", version = "1.0.0", timeout_ms = 50)]
pub async fn slow() -> String {
    tokio_sleep_forever().await;
    unreachable!()
}

async fn tokio_sleep_forever() {
    std::future::pending::<()>().await
}

/// Send an SMS.
#[tool(toolkit = "SMS", version = "0.1.2", secret = "TWILIO_API_KEY")]
pub async fn send(
    ctx: &ToolContext,
    /// The recipient.
    to: String,
    /// The text.
    body: String,
) -> Result<String, ToolError> {
    let key = ctx
        .secret("TWILIO_API_KEY")
        .ok_or_else(|| ToolError::new("No Twilio key"))?;
    Ok(format!(
        "sent {} chars to {to} with a {}-char key",
        body.len(),
        key.len()
    ))
}

/// An email.
#[derive(serde::Serialize, schemars::JsonSchema)]
pub struct Email {
    /// Who sent it.
    pub from: String,
    /// The subject line.
    pub subject: String,
}

/// Read the user's latest emails.
#[tool(
    toolkit = "Gmail",
    version = "1.2.0",
    user_id,
    authorization(id = "google", scopes = ["https://www.googleapis.com/auth/gmail.readonly"])
)]
pub async fn get_emails(ctx: &ToolContext, n_emails: Option<u32>) -> Result<Vec<Email>, ToolError> {
    let user = ctx.user_id().unwrap_or_default();
    Ok((0..n_emails.unwrap_or(2))
        .map(|i| Email {
            from: format!("sender{i}@example.com"),
            subject: format!("Hello {user}"),
        })
        .collect())
}

which! {
    which_0_9_0 => "0.9.0",
    which_1_0_0 => "1.0.0",
    which_1_2_0 => "1.2.0",
    which_1_10_0 => "1.10.0",
}

/// How many times `Counter.Bump` has run in this process.
pub static BUMPS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Count a run, to prove when a tool did (or did not) run.
#[tool(toolkit = "Counter", version = "1.0.0", secret = "COUNTER_KEY")]
pub async fn bump(
    /// How much to add; must be at least 1.
    #[schemars(range(min = 1))]
    by: u64,
) -> u64 {
    BUMPS.fetch_add(by, std::sync::atomic::Ordering::SeqCst) + by
}

/// Fail with the secret in every error field, as careless code does.
#[tool(
    toolkit = "Leaky",
    name = "Fail",
    version = "1.0.0",
    secret = "LEAKY_KEY"
)]
pub async fn leaky_fail(ctx: &ToolContext) -> Result<(), ToolError> {
    let key = ctx.secret("LEAKY_KEY").unwrap_or_default();
    Err(ToolError::new(format!("rejected key {key}"))
        .developer_message(format!("GET https://api.example.com/?key={key} failed"))
        .additional_prompt_content(format!("try again with {key}")))
}

/// Panic with the secret in the message, as careless code does.
#[tool(
    toolkit = "Leaky",
    name = "Panic",
    version = "1.0.0",
    secret = "LEAKY_KEY"
)]
pub fn leaky_panic(ctx: &ToolContext) -> String {
    panic!("bad key {}", ctx.secret("LEAKY_KEY").unwrap_or_default())
}

/// Sleep, then answer: a slow tool that finishes.
#[tool(toolkit = "Util", version = "1.0.0")]
pub async fn sleep(
    /// How long, in milliseconds.
    ms: u64,
) -> u64 {
    tokio::time::sleep(std::time::Duration::from_millis(ms)).await;
    ms
}

/// Block a thread for a while: a stuck sync tool.
#[tool(toolkit = "Util", version = "1.0.0", timeout_ms = 200)]
pub fn block(
    /// How long, in milliseconds.
    ms: u64,
) -> u64 {
    std::thread::sleep(std::time::Duration::from_millis(ms));
    ms
}

/// How many times each `call_id` ran `Once.Record`.
pub static RUNS: std::sync::LazyLock<std::sync::Mutex<std::collections::HashMap<String, u32>>> =
    std::sync::LazyLock::new(Default::default);

/// How many times a tool recording into [`RUNS`] ran for `call_id`.
pub fn runs(call_id: &str) -> u32 {
    RUNS.lock().unwrap().get(call_id).copied().unwrap_or(0)
}

/// How many times each `call_id` started `Once.Record` (counted before its pause, so that a run
/// cut off mid-way still counts as started).
pub static STARTS: std::sync::LazyLock<std::sync::Mutex<std::collections::HashMap<String, u32>>> =
    std::sync::LazyLock::new(Default::default);

/// How many times `Once.Record` started for `call_id`.
pub fn starts(call_id: &str) -> u32 {
    STARTS.lock().unwrap().get(call_id).copied().unwrap_or(0)
}

/// Record a run under this call's id, after a pause; returns the runs so far for the id.
#[tool(toolkit = "Once", version = "1.0.0")]
pub async fn record(
    ctx: &ToolContext,
    /// How long to take, in milliseconds.
    ms: u64,
) -> u32 {
    *STARTS
        .lock()
        .unwrap()
        .entry(ctx.call_id().to_owned())
        .or_default() += 1;
    tokio::time::sleep(std::time::Duration::from_millis(ms)).await;
    let mut runs = RUNS.lock().unwrap();
    let count = runs.entry(ctx.call_id().to_owned()).or_default();
    *count += 1;
    *count
}

/// One level of the wide input: ten fields.
#[derive(serde::Deserialize, schemars::JsonSchema)]
pub struct Wide {
    /// A name.
    pub name: String,
    /// A count.
    pub count: u32,
    /// A ratio.
    pub ratio: f64,
    /// A flag.
    pub flag: bool,
    /// Tags.
    pub tags: Vec<String>,
    /// A note.
    pub note: Option<String>,
    /// A code.
    pub code: String,
    /// A size.
    pub size: u64,
    /// A score.
    pub score: f32,
    /// A level.
    pub level: i32,
}

/// Fifty fields: five nested groups of ten.
#[derive(serde::Deserialize, schemars::JsonSchema)]
pub struct FiftyFields {
    /// First group.
    pub a: Wide,
    /// Second group.
    pub b: Wide,
    /// Third group.
    pub c: Wide,
    /// Fourth group.
    pub d: Wide,
    /// Fifth group.
    pub e: Wide,
}

/// Take a fifty-field nested input; return the sum of its counts.
#[tool(toolkit = "Bench", version = "1.0.0")]
pub async fn fifty(oxp_runtime::Input(all): oxp_runtime::Input<FiftyFields>) -> u64 {
    [all.a, all.b, all.c, all.d, all.e]
        .iter()
        .map(|w| u64::from(w.count))
        .sum()
}

/// Fail the first time for a call_id (retryably, asking for 100 ms), succeed after.
#[tool(toolkit = "Flaky", name = "Once", version = "1.0.0")]
pub async fn flaky(ctx: &ToolContext) -> Result<u32, ToolError> {
    let count = {
        let mut runs = RUNS.lock().unwrap();
        let count = runs.entry(ctx.call_id().to_owned()).or_default();
        *count += 1;
        *count
    };
    if count == 1 {
        Err(ToolError::new("Busy, try again")
            .can_retry(true)
            .retry_after_ms(100))
    } else {
        Ok(count)
    }
}

/// A gauge of runs in progress, with the most seen at once: what a test of the limits observes
/// from inside the tools.
pub struct Gauge {
    live: std::sync::atomic::AtomicU64,
    peak: std::sync::atomic::AtomicU64,
    finished: std::sync::atomic::AtomicU64,
}

impl Gauge {
    const fn new() -> Self {
        use std::sync::atomic::AtomicU64;
        Gauge {
            live: AtomicU64::new(0),
            peak: AtomicU64::new(0),
            finished: AtomicU64::new(0),
        }
    }

    /// Counts a run in until the returned guard drops (also when its future is dropped).
    pub fn enter(&'static self) -> impl Drop {
        use std::sync::atomic::Ordering::SeqCst;
        struct Out(&'static Gauge);
        impl Drop for Out {
            fn drop(&mut self) {
                self.0.live.fetch_sub(1, SeqCst);
                self.0.finished.fetch_add(1, SeqCst);
            }
        }
        let now = self.live.fetch_add(1, SeqCst) + 1;
        self.peak.fetch_max(now, SeqCst);
        Out(self)
    }

    /// Runs in progress now.
    pub fn live(&self) -> u64 {
        self.live.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// The most runs seen in progress at once.
    pub fn peak(&self) -> u64 {
        self.peak.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Runs that ended (finished, failed or dropped).
    pub fn finished(&self) -> u64 {
        self.finished.load(std::sync::atomic::Ordering::SeqCst)
    }
}

/// Runs of `Gauge.Hold`.
pub static HOLDS: Gauge = Gauge::new();
/// Runs of `Gauge.HoldThread` (threads, for a sync tool).
pub static THREADS: Gauge = Gauge::new();

/// Hold a place for a while (async), counted in [`HOLDS`].
#[tool(toolkit = "Gauge", name = "Hold", version = "1.0.0")]
pub async fn hold(
    /// How long, in milliseconds.
    ms: u64,
) -> u64 {
    let _in = HOLDS.enter();
    tokio::time::sleep(std::time::Duration::from_millis(ms)).await;
    ms
}

/// Hold a blocking thread for a while (sync, time limit 100 ms), counted in [`THREADS`].
#[tool(
    toolkit = "Gauge",
    name = "HoldThread",
    version = "1.0.0",
    timeout_ms = 100
)]
pub fn hold_thread(
    /// How long, in milliseconds.
    ms: u64,
) -> u64 {
    let _in = THREADS.enter();
    std::thread::sleep(std::time::Duration::from_millis(ms));
    ms
}

/// Return a string of `n` bytes.
#[tool(toolkit = "Util", name = "BigText", version = "1.0.0")]
pub async fn big_text(
    /// How many bytes.
    n: usize,
) -> String {
    "x".repeat(n)
}
