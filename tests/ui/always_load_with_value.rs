use oxp_runtime::tool;

/// Add.
#[tool(toolkit = "Calculator", version = "1.0.0", always_load = true)]
fn add(a: f64, b: f64) -> f64 {
    a + b
}

/// Subtract.
#[tool(toolkit = "Calculator", version = "1.0.0", always_load(yes))]
fn sub(a: f64, b: f64) -> f64 {
    a - b
}

fn main() {}
