use oxp_runtime::tool;

/// Greet.
#[tool(toolkit = "Greeter", version = "1.0.0")]
async fn greet(name: &str) -> String {
    format!("hello {name}")
}

fn main() {}
