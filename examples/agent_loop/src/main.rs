//! A whole model ↔ tools loop against an OpenAI-compatible Chat Completions endpoint: the model
//! sees the tools in OpenAI's format, its tool calls run through the same pipeline as OXP calls,
//! and the results go back as `role: "tool"` messages until the model answers in text. A tool
//! that asks (`Doorbell.Forget` wants a yes) is answered here: questions by the user in the
//! terminal, sampling by the same model, roots with this directory; at most a few rounds.
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

/// The model behind the loop: an OpenAI-compatible Chat Completions endpoint.
struct Model {
    client: ureq::Agent,
    base: String,
    key: String,
    name: String,
}

impl Model {
    /// The model's next message after `messages`, offered `tools` (none: text only).
    async fn reply(&self, messages: &[Value], tools: Option<&[Value]>) -> Result<Value, String> {
        let mut body = json!({"model": self.name, "messages": messages});
        if let Some(tools) = tools {
            body["tools"] = Value::from(tools);
        }
        let (client, key) = (self.client.clone(), self.key.clone());
        let url = format!("{}/chat/completions", self.base.trim_end_matches('/'));
        // ureq blocks: the request runs on a blocking thread, not on the loop's workers. An
        // error status is an error, as is a body that is not JSON.
        let response: Value = tokio::task::spawn_blocking(move || {
            client
                .post(&url)
                .header("Authorization", &format!("Bearer {key}"))
                .send_json(&body)
                .and_then(|mut response| response.body_mut().read_json())
                .map_err(|e| e.to_string())
        })
        .await
        .map_err(|e| e.to_string())??;
        response
            .pointer("/choices/0/message")
            .cloned()
            .ok_or_else(|| "the response has no message".to_owned())
    }
}

/// The most rounds of questions one call may ask before the loop gives up on it: a tool that
/// keeps asking must not hold the conversation forever.
const MAX_ASK_ROUNDS: usize = 5;

/// Answers what a tool asks, round after round, until it has a result: the user in this
/// terminal for questions, the model for sampling, this directory for roots.
async fn answer(dispatcher: &Dispatcher, model: &Model, mut pending: PendingInput) -> ToolResult {
    for _ in 0..MAX_ASK_ROUNDS {
        let mut answers = std::collections::BTreeMap::new();
        for (key, ask) in &pending.asks {
            answers.insert(key.clone(), answer_one(ask, model).await);
        }
        match dispatcher.resume(pending, answers).await {
            Step::Done(result) => return result,
            Step::Asks(again) => pending = again,
        }
    }
    ToolResult {
        id: pending.call.id.clone(),
        name: pending.call.name.clone(),
        content: format!("Error: the tool asked more than {MAX_ASK_ROUNDS} rounds of questions."),
        is_error: true,
        value: None,
        media: Vec::new(),
    }
}

/// The answer to one ask, in MCP's result shapes.
async fn answer_one(ask: &Value, model: &Model) -> Value {
    let params = &ask["params"];
    let message = params["message"]
        .as_str()
        .unwrap_or("The tool asks to go on.");
    match ask["method"].as_str() {
        Some("elicitation/create") if params["mode"] == "url" => {
            let url = params["url"].as_str().unwrap_or_default();
            eprintln!("{message}\n  open: {url}");
            yes_or_no("Done?")
        }
        Some("elicitation/create") => {
            let fields = params
                .pointer("/requestedSchema/properties")
                .and_then(Value::as_object)
                .cloned()
                .unwrap_or_default();
            if fields.is_empty() {
                return yes_or_no(message);
            }
            eprintln!("{message} (an empty answer cancels)");
            let mut content = serde_json::Map::new();
            for (name, field) in &fields {
                let Some(line) = prompt(&format!("  {name}: ")) else {
                    return json!({"action": "cancel"});
                };
                content.insert(name.clone(), typed(&line, field));
            }
            json!({"action": "accept", "content": content})
        }
        Some("sampling/createMessage") => {
            let messages: Vec<Value> = (params["messages"].as_array().into_iter().flatten())
                .map(|m| json!({"role": m["role"], "content": m["content"]["text"]}))
                .collect();
            let text = match model.reply(&messages, None).await {
                Ok(reply) => reply["content"].as_str().unwrap_or_default().to_owned(),
                Err(error) => format!("(the model could not answer: {error})"),
            };
            json!({"role": "assistant", "content": {"type": "text", "text": text},
                "model": model.name})
        }
        Some("roots/list") => {
            let here = std::env::current_dir().unwrap_or_default();
            json!({"roots": [{"uri": format!("file://{}", here.display()), "name": "here"}]})
        }
        _ => json!({"action": "decline"}),
    }
}

/// A line from this terminal's user after `label`; `None` for an empty one.
fn prompt(label: &str) -> Option<String> {
    eprint!("{label}");
    let mut line = String::new();
    let _ = std::io::stdin().read_line(&mut line);
    let line = line.trim();
    (!line.is_empty()).then(|| line.to_owned())
}

fn yes_or_no(question: &str) -> Value {
    let yes = prompt(&format!("{question} [y/N] ")).is_some_and(|l| l.eq_ignore_ascii_case("y"));
    json!({"action": if yes { "accept" } else { "decline" }})
}

/// `line` as the JSON type `field` asks for (the tool checks it against the schema).
fn typed(line: &str, field: &Value) -> Value {
    match field["type"].as_str() {
        Some("integer") => line
            .parse::<i64>()
            .map_or_else(|_| json!(line), Value::from),
        Some("number") => line
            .parse::<f64>()
            .map_or_else(|_| json!(line), Value::from),
        Some("boolean") => json!(matches!(line, "y" | "yes" | "true")),
        _ => json!(line),
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
    let model = Model {
        client: ureq::Agent::new_with_defaults(),
        base: std::env::var("OXP_AGENT_BASE_URL")
            .unwrap_or_else(|_| "https://api.openai.com/v1".into()),
        key,
        name: std::env::var("OXP_AGENT_MODEL").unwrap_or_else(|_| "gpt-4o-mini".into()),
    };
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
    let mut messages = vec![json!({"role": "user", "content": question})];

    for _ in 0..MAX_TURNS {
        let message = model.reply(&messages, Some(&tools)).await?;
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
                Step::Asks(pending) => answer(&dispatcher, &model, pending).await,
            };
            eprintln!("tool {} → {}", result.id, result.content);
            messages.push(
                json!({"role": "tool", "tool_call_id": result.id, "content": result.content}),
            );
        }
    }
    Err(format!("no answer after {MAX_TURNS} turns").into())
}
