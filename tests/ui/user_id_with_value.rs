use oxp_runtime::tool;

/// Read mail.
#[tool(toolkit = "Gmail", version = "1.0.0", user_id = true)]
async fn read(n: u32) -> u32 {
    n
}

fn main() {}
