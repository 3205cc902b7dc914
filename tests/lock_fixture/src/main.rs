//! A tool server in two variants for `tests/lock.rs`: built plain, it serves what gets locked;
//! built with `--features v2`, it breaks a published version and drops another.

use oxp_runtime::tool;

/// Add two numbers.
#[cfg(not(feature = "v2"))]
#[tool(toolkit = "Calculator", name = "Add", version = "1.0.0")]
async fn add(a: f64, b: f64) -> f64 {
    a + b
}

/// Add two numbers.
#[cfg(feature = "v2")]
#[tool(toolkit = "Calculator", name = "Add", version = "1.0.0")]
async fn add(a: f64, b: String) -> f64 {
    a + b.len() as f64
}

/// Echo the text.
#[cfg(not(feature = "v2"))]
#[tool(toolkit = "Legacy", name = "Echo", version = "1.0.0")]
async fn echo(text: String) -> String {
    text
}

#[tokio::main]
async fn main() {
    oxp_runtime::serve().await
}
