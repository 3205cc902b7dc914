use oxp_runtime::tool;

/// Add.
#[tool(toolkit = "Calculator", version = "1.0.0")]
async fn add((a, b): (i64, i64)) -> i64 {
    a + b
}

fn main() {}
