//! The example server: `cargo run` serves these tools on http://127.0.0.1:8000.

use oxp_runtime::prompt::Message;
use oxp_runtime::{ToolContext, ToolError, prompt, resource, tool};

/// Add two integers.
#[tool(toolkit = "Calculator", name = "Add", version = "1.0.0")]
async fn add_integers(
    /// The first addend.
    a: i64,
    /// The second addend.
    b: i64,
) -> i64 {
    a + b
}

/// Add two numbers.
#[tool(toolkit = "Calculator", name = "Add", version = "2.0.0", title = "Add numbers",
       read_only, idempotent, open_world = false, tags = ["math"], example = r#"{"a": 1.5, "b": 2}"#)]
async fn add(
    /// The first addend.
    a: f64,
    /// The second addend.
    b: f64,
) -> f64 {
    a + b
}

/// Ring a doorbell.
#[tool(toolkit = "Doorbell", version = "0.1.0")]
async fn ring(
    /// The doorbell to ring.
    doorbell_id: String,
) -> Result<(), ToolError> {
    Err(ToolError::new("Doorbell ID not found")
        .developer_message(format!(
            "The doorbell with ID '{doorbell_id}' does not exist."
        ))
        .can_retry(true)
        .additional_prompt_content("ids: doorbell42,doorbell84")
        .retry_after_ms(500))
}

/// Forget a doorbell: it is no longer rung.
#[tool(toolkit = "Doorbell", version = "0.1.0", destructive, idempotent)]
async fn forget(
    /// The doorbell to forget.
    doorbell_id: String,
) -> String {
    format!("{doorbell_id} is forgotten")
}

/// Ring every doorbell of a street, one after another.
#[tool(toolkit = "Doorbell", version = "0.1.0", open_world)]
async fn ring_all(
    ctx: &ToolContext,
    /// How many doorbells the street has.
    doorbells: u64,
) -> u64 {
    for rung in 1..=doorbells {
        tokio::time::sleep(std::time::Duration::from_millis(60)).await;
        // Over MCP, a client that asked for progress sees each doorbell.
        ctx.progress(rung, Some(doorbells), Some("ringing"));
    }
    doorbells
}

/// The doorbells this example knows, offered as completions of `doorbell_id`.
fn doorbell_ids(typed: &str) -> Vec<String> {
    ["doorbell42", "doorbell84"]
        .into_iter()
        .filter(|id| id.starts_with(typed))
        .map(str::to_owned)
        .collect()
}

/// Every doorbell this example knows, as a resource MCP clients (and the playground) read.
#[resource(uri = "doorbell://all", mime_type = "application/json")]
fn doorbells() -> String {
    oxp_runtime::serde_json::json!(doorbell_ids("")).to_string()
}

/// A doorbell's status, as a resource MCP clients read.
#[resource(
    uri = "doorbell://{doorbell_id}/status",
    mime_type = "application/json"
)]
fn doorbell_status(
    /// The doorbell.
    #[complete(doorbell_ids)]
    doorbell_id: String,
) -> Result<String, ToolError> {
    if !doorbell_ids("").contains(&doorbell_id) {
        return Err(ToolError::new(format!("No doorbell {doorbell_id}")));
    }
    Ok(format!(
        r#"{{"doorbell": "{doorbell_id}", "battery": "ok"}}"#
    ))
}

/// Greet a visitor at the door: a prompt hosts show in their menus.
#[prompt(title = "Greet a visitor")]
fn greet_visitor(
    /// The visitor's name.
    name: String,
) -> Vec<Message> {
    vec![Message::user(format!(
        "Ring doorbell42, then welcome {name} in one friendly sentence."
    ))]
}

// The skills in `skills/`, served to MCP clients with the skills extension.
oxp_runtime::skills!();

// `serve!()` rather than `serve()`: the same server, also publishing the MCP Server Card filled
// from this crate's Cargo.toml (`cargo run -- card` prints it).
#[tokio::main]
async fn main() {
    oxp_runtime::serve!().await
}

#[cfg(test)]
mod tests {
    /// What `tools.lock` published still holds: run `cargo run -- lock` after a change that is
    /// meant to be published, and this test says when one breaks a caller.
    #[test]
    fn published_tools_still_hold() {
        let registry = oxp_runtime::Registry::from_inventory().unwrap();
        let violations = oxp_runtime::lock::Lock::read("tools.lock")
            .unwrap()
            .check(&registry);
        assert!(
            violations.is_empty(),
            "{}",
            oxp_runtime::lock::lines(&violations)
        );
    }
}
