use oxp_runtime::tool;

/// Send.
#[tool(toolkit = "SMS", version = "1.0.0", secret)]
async fn send(to: String) -> String {
    to
}

/// Send again.
#[tool(toolkit = "SMS", version = "1.0.0", secret = TWILIO_API_KEY)]
async fn send_again(to: String) -> String {
    to
}

fn main() {}
