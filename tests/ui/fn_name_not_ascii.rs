use oxp_runtime::tool;

/// Greet someone, in German.
#[tool(toolkit = "Greeter", version = "1.0.0")]
async fn grüßen(who: String) -> String {
    format!("Hallo, {who}!")
}

fn main() {}
