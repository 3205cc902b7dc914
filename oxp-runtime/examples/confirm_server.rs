//! Tools that ask their user before they run (`cargo run -p oxp-runtime --example confirm_server`),
//! served by `oxp_runtime::serve()` as `cargo run` serves the example, every `OXP_*` setting read
//! from the environment. The guide's "Asking mid-call" page is built around it; the replica tests
//! of `tests/mcp.rs` start two and send each round of one call to the other.
//!
//! Each tool answers with the number of times it ran in this process, so a test tells a run from
//! a replayed answer.

use std::sync::atomic::{AtomicU64, Ordering};

use oxp_runtime::{ToolContext, ToolError, schemars, serde, tool};

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

/// Purge a bin, then its backups, each once the user says yes to that question.
#[tool(toolkit = "Files", version = "1.0.0", confirm = "Purge the bin {bin}?")]
fn purge(ctx: &ToolContext, bin: String) -> Result<String, ToolError> {
    ctx.confirm("backups", &format!("Also delete every backup of {bin}?"))?;
    let run = RUNS.fetch_add(1, Ordering::SeqCst) + 1;
    Ok(format!("purged {bin} and its backups (run {run})"))
}

/// Delete files, each once the user says yes to it.
#[tool(toolkit = "Files", version = "1.0.0")]
fn delete_each(ctx: &ToolContext, paths: Vec<String>) -> Result<String, ToolError> {
    let mut deleted = Vec::new();
    for path in &paths {
        ctx.confirm("delete", &format!("Delete {path}?"))?;
        deleted.push(path.clone());
    }
    let run = RUNS.fetch_add(1, Ordering::SeqCst) + 1;
    Ok(format!("deleted {} (run {run})", deleted.join(", ")))
}

/// A rating.
#[derive(serde::Deserialize, schemars::JsonSchema)]
#[serde(crate = "oxp_runtime::serde")]
#[schemars(crate = "oxp_runtime::schemars")]
struct Rating {
    /// One to five stars.
    #[schemars(range(min = 1, max = 5))]
    stars: u8,
}

/// Rate a stay as the user says.
#[tool(toolkit = "Hotel", version = "1.0.0")]
fn rate(ctx: &ToolContext, stay: String) -> Result<String, ToolError> {
    let Rating { stars } = ctx.ask("rating", "How many stars?")?;
    let run = RUNS.fetch_add(1, Ordering::SeqCst) + 1;
    Ok(format!("{stay}: {stars} stars (run {run})"))
}

/// Shred a document once the user says yes, the question relayed through the model when the
/// client cannot ask.
#[tool(
    toolkit = "Files",
    version = "1.0.0",
    confirm = "Shred {doc}?",
    cannot_ask = "relay"
)]
fn shred(doc: String) -> String {
    let run = RUNS.fetch_add(1, Ordering::SeqCst) + 1;
    format!("shredded {doc} (run {run})")
}

/// Wipe a disk once the user says yes; unseen by callers that cannot ask.
#[tool(
    toolkit = "Files",
    version = "1.0.0",
    confirm = "Wipe {disk}?",
    cannot_ask = "hide"
)]
fn wipe(disk: String) -> String {
    let run = RUNS.fetch_add(1, Ordering::SeqCst) + 1;
    format!("wiped {disk} (run {run})")
}

#[tokio::main]
async fn main() {
    oxp_runtime::serve().await
}
