//! A server whose tool asks its user before it runs, served by `oxp_runtime::serve()` as
//! `cargo run` serves the example (every `OXP_*` setting read from the environment): the replica
//! tests of `tests/mcp.rs` start two and send each round of one call to the other.
//!
//! `Files.Empty` answers with the number of times it ran in this process, so a test tells a run
//! from a replayed answer.

use std::sync::atomic::{AtomicU64, Ordering};

use oxp_runtime::tool;

static RUNS: AtomicU64 = AtomicU64::new(0);

/// Empty a bin, once the user says yes.
#[tool(toolkit = "Files", version = "1.0.0", confirm = "Empty the bin {bin}?")]
fn empty(
    /// The bin.
    bin: String,
) -> String {
    let run = RUNS.fetch_add(1, Ordering::SeqCst) + 1;
    format!("emptied {bin} (run {run} of {})", std::process::id())
}

#[tokio::main]
async fn main() {
    oxp_runtime::serve().await
}
