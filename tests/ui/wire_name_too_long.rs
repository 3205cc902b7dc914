use oxp_runtime::tool;

/// Add.
#[tool(toolkit = "AVeryLongToolkitNameThatGoesOnAndOn", name = "AndAnEvenLongerToolNameThanThat", version = "1.0.0")]
async fn add(a: i64, b: i64) -> i64 {
    a + b
}

fn main() {}
