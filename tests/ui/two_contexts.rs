use oxp_runtime::{tool, ToolContext};

/// Add.
#[tool(toolkit = "Calculator", version = "1.0.0")]
async fn add(ctx: &ToolContext, again: &ToolContext, a: i64) -> i64 {
    let _ = (ctx, again);
    a
}

fn main() {}
