use oxp_runtime::tool;

/// Read mail.
#[tool(toolkit = "Gmail", version = "1.0.0", authorization(scopes = ["mail.read"]))]
async fn read(n: u32) -> u32 {
    n
}

/// Read more mail.
#[tool(toolkit = "Gmail", version = "1.0.0", authorization = "google")]
async fn read_more(n: u32) -> u32 {
    n
}

fn main() {}
