use oxp_runtime::tool;

/// Build a report, the option misspelt.
#[tool(toolkit = "Reports", version = "1.0.0", task = "always")]
async fn build(month: String) -> String {
    month
}

/// Build a report, the option not a string.
#[tool(toolkit = "Reports", version = "1.0.0", task = true)]
async fn rebuild(month: String) -> String {
    month
}

fn main() {}
