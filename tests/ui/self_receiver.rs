use oxp_runtime::tool;

struct Calculator;

impl Calculator {
    /// Add.
    #[tool(toolkit = "Calculator", version = "1.0.0")]
    async fn add(&self, a: i64, b: i64) -> i64 {
        a + b
    }
}

fn main() {}
