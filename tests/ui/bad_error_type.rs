use oxp_runtime::tool;

struct MyError;

/// Divide.
#[tool(toolkit = "Calculator", version = "1.0.0")]
async fn div(a: i64, b: i64) -> Result<i64, MyError> {
    if b == 0 { Err(MyError) } else { Ok(a / b) }
}

fn main() {}
