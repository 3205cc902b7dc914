use oxp_runtime::tool;

/// Wait.
#[tool(toolkit = "Clock", version = "1.0.0", timeout_ms = "30s")]
async fn wait() {}

/// Wait less.
#[tool(toolkit = "Clock", version = "1.0.0", timeout_ms = 0)]
async fn wait_less() {}

fn main() {}
