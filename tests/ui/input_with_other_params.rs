use oxp_runtime::{tool, Input};

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Args {
    a: i64,
}

/// Add.
#[tool(toolkit = "Calculator", version = "1.0.0")]
async fn add(Input(args): Input<Args>, b: i64) -> i64 {
    args.a + b
}

fn main() {}
