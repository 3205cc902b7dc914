// On a macro error the tool's item is emitted too: code that registers `add::TOOL` shows no
// second error, only the one that matters.
use oxp_runtime::{Registry, tool};

#[tool(toolkit = "Calculator", version = "1.0.0")]
fn add(a: i64, b: i64) -> i64 {
    a + b
}

fn main() {
    let _ = Registry::builder().tool(add::TOOL).build();
}
