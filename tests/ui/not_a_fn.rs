use oxp_runtime::tool;

/// A struct.
#[tool(toolkit = "Calculator", version = "1.0.0")]
struct Add;

fn main() {}
