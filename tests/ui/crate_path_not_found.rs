// `crate = "path"` is where the generated code reaches the runtime: a path that leads nowhere
// is an error on that string.
use oxp_runtime::tool;

/// Add two integers.
#[tool(toolkit = "Calculator", version = "1.0.0", crate = "crate::nowhere")]
fn add(a: i64, b: i64) -> i64 {
    a + b
}

fn main() {}
