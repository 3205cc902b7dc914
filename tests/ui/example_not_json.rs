use oxp_runtime::tool;

/// Add.
#[tool(toolkit = "Calculator", version = "1.0.0", example = r#"{"a": 1, "b": }"#)]
fn add(a: f64, b: f64) -> f64 {
    a + b
}

/// Subtract.
#[tool(toolkit = "Calculator", version = "1.0.0", example = "[1, 2]")]
fn sub(a: f64, b: f64) -> f64 {
    a - b
}

fn main() {}
