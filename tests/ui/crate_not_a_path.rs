// `crate = "…"` takes a path: anything else says how to write one.
use oxp_runtime::tool;

/// Add two integers.
#[tool(toolkit = "Calculator", version = "1.0.0", crate = "not a path")]
fn add(a: i64, b: i64) -> i64 {
    a + b
}

fn main() {}
