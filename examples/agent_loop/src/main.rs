//! A whole model ↔ tools loop against an OpenAI-compatible Chat Completions endpoint: the model
//! sees the tools in OpenAI's format, its tool calls run through the same pipeline as OXP calls,
//! and the results go back as `role: "tool"` messages until the model answers in text. A tool
//! that asks first (`Doorbell.Forget` wants a yes) asks here, in the terminal, before it runs.
//!
//! ```sh
//! OXP_AGENT_API_KEY=sk-… cargo run -p agent_loop -- "What is 12.5 plus 30, and ring doorbell1?"
//! ```
//!
//! | variable | default |
//! |---|---|
//! | `OXP_AGENT_API_KEY` (or `OPENAI_API_KEY`) | – (without one, the example says so and exits) |
//! | `OXP_AGENT_BASE_URL` | `https://api.openai.com/v1` (any OpenAI-compatible server) |
//! | `OXP_AGENT_MODEL` | `gpt-4o-mini` |
//! | `OXP_AGENT_STRICT` | `true`: tools in strict mode |

use oxp_runtime::call::Pipeline;
use oxp_runtime::providers::{Dispatcher, Limits, PendingInput, Step, ToolResult, openai};
use oxp_runtime::{Registry, ToolError, tool};
use serde_json::{Value, json};

/// Add two numbers.
#[tool(toolkit = "Calculator", version = "2.0.0")]
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
) -> Result<String, ToolError> {
    match doorbell_id.as_str() {
        "doorbell42" | "doorbell84" => Ok(format!("{doorbell_id} rang")),
        _ => Err(ToolError::new("Doorbell ID not found")
            .can_retry(true)
            .additional_prompt_content("ids: doorbell42,doorbell84")),
    }
}

/// Forget a doorbell: it is never rung again.
#[tool(
    toolkit = "Doorbell",
    version = "0.1.0",
    destructive,
    confirm = "Forget doorbell {doorbell_id}? It is never rung again."
)]
async fn forget(
    /// The doorbell to forget.
    doorbell_id: String,
) -> String {
    format!("{doorbell_id} is forgotten")
}

/// Asks this terminal's user what a tool asks (a confirmation, here), then goes on.
async fn answer(dispatcher: &Dispatcher, mut pending: PendingInput) -> ToolResult {
    loop {
        let mut answers = std::collections::BTreeMap::new();
        for key in pending.asks.keys() {
            let question = pending.message(key).unwrap_or("The tool asks to go on.");
            eprint!("{question} [y/N] ");
            let mut line = String::new();
            let _ = std::io::stdin().read_line(&mut line);
            let action = if line.trim().eq_ignore_ascii_case("y") {
                "accept"
            } else {
                "decline"
            };
            answers.insert(key.clone(), json!({"action": action, "content": {}}));
        }
        match dispatcher.resume(pending, answers).await {
            Step::Done(result) => return result,
            Step::Asks(again) => pending = again,
        }
    }
}

/// The most model turns before giving up: a loop must end.
const MAX_TURNS: usize = 8;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let Some(key) = std::env::var("OXP_AGENT_API_KEY")
        .or_else(|_| std::env::var("OPENAI_API_KEY"))
        .ok()
        .filter(|k| !k.is_empty())
    else {
        eprintln!(
            "agent_loop: set OXP_AGENT_API_KEY (and OXP_AGENT_BASE_URL for a non-OpenAI server) to run it"
        );
        return Ok(());
    };
    let base =
        std::env::var("OXP_AGENT_BASE_URL").unwrap_or_else(|_| "https://api.openai.com/v1".into());
    let model = std::env::var("OXP_AGENT_MODEL").unwrap_or_else(|_| "gpt-4o-mini".into());
    let strict = std::env::var("OXP_AGENT_STRICT").map_or(true, |v| v != "false");
    let question = std::env::args().skip(1).collect::<Vec<_>>().join(" ");
    let question = if question.is_empty() {
        "What is 12.5 plus 30? Then ring doorbell1.".to_owned()
    } else {
        question
    };

    let registry = Registry::builder()
        .tool(add::TOOL)
        .tool(ring::TOOL)
        .tool(forget::TOOL)
        .build()?;
    let tools = openai::chat_tools(&registry, &Limits::default(), strict)
        .map_err(|errors| format!("{errors:?}"))?;
    let dispatcher = Dispatcher::new(Pipeline::new(registry));
    let client = reqwest::Client::new();
    let mut messages = vec![json!({"role": "user", "content": question})];

    for _ in 0..MAX_TURNS {
        let response: Value = client
            .post(format!("{}/chat/completions", base.trim_end_matches('/')))
            .bearer_auth(&key)
            .json(&json!({"model": model, "messages": messages, "tools": tools}))
            .send()
            .await?
            .error_for_status()?
            .json()
            .await?;
        let message = response
            .pointer("/choices/0/message")
            .cloned()
            .ok_or("the response has no message")?;
        messages.push(message.clone());
        let calls = openai::parse_chat_calls(&message)?;
        if calls.is_empty() {
            println!("{}", message["content"].as_str().unwrap_or_default());
            return Ok(());
        }
        // Each call runs; one that asks first waits for this terminal's answer, and the model
        // sees nothing of it until it has a result.
        for step in dispatcher.steps(calls).await? {
            let result = match step {
                Step::Done(result) => result,
                Step::Asks(pending) => answer(&dispatcher, pending).await,
            };
            eprintln!("tool {} → {}", result.id, result.content);
            messages.push(
                json!({"role": "tool", "tool_call_id": result.id, "content": result.content}),
            );
        }
    }
    Err(format!("no answer after {MAX_TURNS} turns").into())
}
