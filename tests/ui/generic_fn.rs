use oxp_runtime::tool;

/// Add.
#[tool(toolkit = "Calculator", version = "1.0.0")]
async fn add<T: std::ops::Add<Output = T>>(a: T, b: T) -> T {
    a + b
}

fn main() {}
