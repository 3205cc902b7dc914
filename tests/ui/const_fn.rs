use oxp_runtime::tool;

/// Add.
#[tool(toolkit = "Calculator", version = "1.0.0")]
const fn add(a: i64, b: i64) -> i64 {
    a + b
}

fn main() {}
