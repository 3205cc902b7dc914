//! Tools that run as MCP tasks (and a tool and a prompt that ask)
//! (`cargo run -p oxp-runtime --example task_server`), served by `oxp_runtime::serve()` as
//! `cargo run` serves the example, every `OXP_*` setting read from the environment. The guide's
//! "Long-running tools" page is built around it; `tests/tasks.rs` starts one or two, with Redis,
//! and drives tasks across them, kills them mid-run and floods them; `tests/playground.rs`
//! drives its tools from the page.
//!
//! Each tool's answer names its run's number in this process and the process, so a test tells
//! a run from a kept answer, and one replica's run from another's.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use oxp_runtime::{ToolContext, ToolError, prompt, schemars, serde, tool};

static RUNS: AtomicU64 = AtomicU64::new(0);

fn run() -> String {
    let run = RUNS.fetch_add(1, Ordering::SeqCst) + 1;
    format!("run {run} of {}", std::process::id())
}

/// Count to `steps`, a step every `step_ms`, reporting each.
#[tool(toolkit = "Jobs", version = "1.0.0", task = "optional")]
async fn count(ctx: &ToolContext, steps: u64, step_ms: u64) -> String {
    let run = run();
    for step in 1..=steps {
        tokio::time::sleep(Duration::from_millis(step_ms)).await;
        ctx.progress(step, Some(steps), Some("counting"));
    }
    format!("counted to {steps} ({run})")
}

/// Report that it holds, then hold until cancelled.
#[tool(toolkit = "Jobs", version = "1.0.0", task = "required")]
async fn hold(ctx: &ToolContext) -> String {
    tokio::task::yield_now().await;
    ctx.progress(1, Some(1), Some("holding"));
    ctx.cancelled().await;
    "let go".into()
}

/// Ship items, each once the user says yes to it (asked inside the task).
#[tool(toolkit = "Jobs", version = "1.0.0", task = "required")]
async fn ship(ctx: &ToolContext, items: Vec<String>) -> Result<String, ToolError> {
    tokio::task::yield_now().await;
    for item in &items {
        ctx.confirm("ship", &format!("Ship {item}?"))?;
    }
    Ok(format!("shipped {} ({})", items.join(", "), run()))
}

/// A name.
#[derive(serde::Deserialize, schemars::JsonSchema)]
#[serde(crate = "oxp_runtime::serde")]
#[schemars(crate = "oxp_runtime::schemars")]
struct Name {
    /// Who to welcome.
    name: String,
}

/// Ask the user's name first, then welcome them as a task.
#[tool(toolkit = "Jobs", version = "1.0.0", task = "required")]
async fn welcome(ctx: &ToolContext) -> Result<String, ToolError> {
    let Name { name } = ctx.ask("user_name", "What is your name?")?;
    tokio::time::sleep(Duration::from_millis(1)).await;
    Ok(format!("Welcome, {name} ({})", run()))
}

/// Ask the user's name, then whether to go on, both before anything else; then introduce them
/// as a task.
#[tool(toolkit = "Jobs", version = "1.0.0", task = "required")]
async fn introduce(ctx: &ToolContext) -> Result<String, ToolError> {
    let Name { name } = ctx.ask("user_name", "What is your name?")?;
    ctx.confirm("proceed", &format!("Introduce {name}?"))?;
    tokio::time::sleep(Duration::from_millis(1)).await;
    Ok(format!("Introduced {name} ({})", run()))
}

/// Archive a box, once the user says yes: not a task, for the playground's "Call over MCP".
#[tool(toolkit = "Jobs", version = "1.0.0", confirm = "Archive {name}?")]
async fn archive(name: String) -> String {
    format!("archived {name}")
}

/// A team.
#[derive(serde::Deserialize, schemars::JsonSchema)]
#[serde(crate = "oxp_runtime::serde")]
#[schemars(crate = "oxp_runtime::schemars")]
struct Team {
    /// Which team's stand-up.
    team: String,
}

/// Open a stand-up, asking the user for the team first.
#[prompt]
fn standup(ctx: &ToolContext) -> Result<String, ToolError> {
    let Team { team } = ctx.ask("team", "Which team?")?;
    Ok(format!("Run the {team} stand-up."))
}

/// Fail unexpectedly.
#[tool(toolkit = "Jobs", version = "1.0.0", task = "optional")]
async fn crash() -> String {
    tokio::task::yield_now().await;
    panic!("the job broke")
}

/// Answer `bytes` characters.
#[tool(toolkit = "Jobs", version = "1.0.0", task = "optional")]
async fn large(bytes: usize) -> String {
    tokio::task::yield_now().await;
    "x".repeat(bytes)
}

/// Ask for approval first, on a blocking thread (a plain `fn`): always a task, its question the
/// task's.
#[tool(toolkit = "Jobs", version = "1.0.0", task = "optional")]
fn approve(ctx: &ToolContext, what: String) -> Result<String, ToolError> {
    ctx.confirm("approve", &format!("Approve {what}?"))?;
    Ok(format!("approved {what} ({})", run()))
}

/// Grind on a blocking thread for `ms`.
#[tool(toolkit = "Jobs", version = "1.0.0", task = "optional")]
fn grind(ms: u64) -> String {
    std::thread::sleep(Duration::from_millis(ms));
    format!("ground ({})", run())
}

#[tokio::main]
async fn main() {
    oxp_runtime::serve().await;
}
