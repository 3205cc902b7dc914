use oxp_runtime::tool;

struct Sum(i64);

/// Add.
#[tool(toolkit = "Calculator", version = "1.0.0")]
async fn add(a: i64, b: i64) -> Sum {
    Sum(a + b)
}

fn main() {}
