use oxp_runtime::tool;

/// Add.
#[tool(toolkit = "Calculator", verison = "1.0.0")]
async fn add(a: i64, b: i64) -> i64 {
    a + b
}

/// Subtract.
#[tool(toolkit = "Calculator", flavour = "sweet")]
async fn sub(a: i64, b: i64) -> i64 {
    a - b
}

fn main() {}
