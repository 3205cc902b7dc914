use oxp_runtime::tool;

/// Add.
#[tool(toolkit = "My Calculator", version = "1.0.0")]
async fn add(a: i64, b: i64) -> i64 {
    a + b
}

fn main() {}
