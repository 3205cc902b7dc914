use oxp_runtime::tool;

/// Forecast.
#[tool(toolkit = "Weather", version = "1.0.0")]
async fn forecast(#[mcp_header("Region Name")] region: String) -> String {
    region
}

/// Forecast, without a header name.
#[tool(toolkit = "Weather", version = "1.0.0")]
async fn today(#[mcp_header] region: String) -> String {
    region
}

fn main() {}
