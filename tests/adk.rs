//! adk-rust in process (feature `adk`): oxp's tools as an adk-rust `Toolset`, driven by adk-rust's
//! own agent (`LlmAgent`) and `Runner` over a scripted `Llm` — no network. The model calls a tool
//! and gets its value (for the runner's user, with its scopes and secrets); sends invalid
//! arguments, reads the schema's words and retries; and calls a tool that asks, which the app
//! answers (or cannot).

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use adk_agent::LlmAgentBuilder;
use adk_core::{
    Content, Llm, LlmRequest, LlmResponse, LlmResponseStream, Part, ReadonlyContext,
    RequestContext, Toolset, async_trait,
};
use adk_runner::Runner;
use adk_session::{CreateRequest, InMemorySessionService, SessionService};
use futures_util::StreamExt;
use oxp_runtime::agents::Answers;
use oxp_runtime::agents::adk::AdkToolset;
use oxp_runtime::call::Pipeline;
use oxp_runtime::providers::{Dispatcher, PendingInput};
use oxp_runtime::{Registry, ToolContext, tool};
use serde_json::{Value, json};

/// Every run is bounded: a hung tool or loop fails the test instead of stalling the suite.
const BOUND: Duration = Duration::from_secs(30);

/// Add two integers.
#[tool(toolkit = "Calculator", version = "1.0.0", read_only)]
async fn add(a: i64, b: i64) -> i64 {
    a + b
}

/// Runs of `mul`: only the retry test calls it.
static MULS: AtomicUsize = AtomicUsize::new(0);

/// Multiply two integers.
#[tool(toolkit = "Calculator", version = "1.0.0", read_only)]
async fn mul(a: i64, b: i64) -> i64 {
    MULS.fetch_add(1, Ordering::SeqCst);
    a * b
}

/// Greet the user, with the length of the mail password the app supplied.
#[tool(
    toolkit = "Greeter",
    version = "1.0.0",
    user_id,
    secret = "SMTP_PASSWORD"
)]
async fn hello(ctx: &ToolContext) -> String {
    let secret = ctx.secret("SMTP_PASSWORD").map_or(0, str::len);
    format!("hello, {} ({secret})", ctx.user_id().unwrap_or("nobody"))
}

/// Delete a file.
#[tool(
    toolkit = "Files",
    version = "1.0.0",
    destructive,
    confirm = "Delete {path}?"
)]
async fn delete(path: String) -> String {
    format!("deleted {path}")
}

/// Send a text message.
#[tool(toolkit = "Sms", version = "1.0.0")]
async fn send(to: String) -> Result<String, oxp_runtime::ToolError> {
    Err(
        oxp_runtime::ToolError::new(format!("The quota for {to} is used up."))
            .additional_prompt_content("Try again in an hour.")
            .can_retry(true),
    )
}

/// Crash.
#[tool(toolkit = "Sms", version = "1.0.0")]
async fn crash() -> String {
    panic!("a bug")
}

/// Wipe the disk.
#[tool(toolkit = "Files", version = "1.0.0", scopes = ["files:admin"])]
async fn wipe() -> String {
    "wiped".to_owned()
}

fn toolset() -> AdkToolset {
    let registry = Registry::builder()
        .tool(add::TOOL)
        .tool(mul::TOOL)
        .tool(hello::TOOL)
        .tool(delete::TOOL)
        .tool(wipe::TOOL)
        .tool(send::TOOL)
        .tool(crash::TOOL)
        .build()
        .unwrap();
    AdkToolset::new(Dispatcher::new(Pipeline::new(registry)).secret("SMTP_PASSWORD", "hunter22"))
}

/// A model that answers with the scripted turns, in order, and keeps what it was sent.
#[derive(Default)]
struct Scripted {
    turns: Mutex<VecDeque<LlmResponse>>,
    requests: Mutex<Vec<LlmRequest>>,
}

impl Scripted {
    fn new(turns: impl IntoIterator<Item = LlmResponse>) -> Arc<Self> {
        Arc::new(Scripted {
            turns: Mutex::new(turns.into_iter().collect()),
            requests: Mutex::default(),
        })
    }

    /// What the model was sent back for its calls in request `n`: (tool, response).
    fn function_responses(&self, n: usize) -> Vec<(String, Value)> {
        let requests = self.requests.lock().unwrap();
        requests[n]
            .contents
            .iter()
            .flat_map(|content| &content.parts)
            .filter_map(|part| match part {
                Part::FunctionResponse {
                    function_response, ..
                } => Some((
                    function_response.name.clone(),
                    function_response.response.clone(),
                )),
                _ => None,
            })
            .collect()
    }
}

#[async_trait]
impl Llm for Scripted {
    fn name(&self) -> &str {
        "scripted"
    }

    async fn generate_content(
        &self,
        request: LlmRequest,
        _stream: bool,
    ) -> adk_core::Result<LlmResponseStream> {
        self.requests.lock().unwrap().push(request);
        let turn = self
            .turns
            .lock()
            .unwrap()
            .pop_front()
            .ok_or_else(|| adk_core::AdkError::model("the script has no more turns"))?;
        Ok(Box::pin(futures_util::stream::iter([Ok(turn)])))
    }
}

fn call(id: &str, name: &str, args: Value) -> LlmResponse {
    let mut content = Content::new("model");
    content.parts.push(Part::FunctionCall {
        name: name.to_owned(),
        args,
        id: Some(id.to_owned()),
        thought_signature: None,
    });
    turn(content)
}

fn text(text: &str) -> LlmResponse {
    turn(Content::new("model").with_text(text))
}

fn turn(content: Content) -> LlmResponse {
    LlmResponse {
        content: Some(content),
        turn_complete: true,
        ..LlmResponse::default()
    }
}

/// Runs "Do it." for user `ada` (with `scopes`) on adk-rust's agent over `model` and `toolset`;
/// returns the final text.
async fn run(model: Arc<Scripted>, toolset: AdkToolset, scopes: &[&str]) -> String {
    let agent = LlmAgentBuilder::new("assistant")
        .model(model)
        .toolset(Arc::new(toolset))
        .build()
        .unwrap();
    let sessions = Arc::new(InMemorySessionService::new());
    sessions
        .create(CreateRequest {
            app_name: "app".into(),
            user_id: "ada".into(),
            session_id: Some("s1".into()),
            state: HashMap::new(),
        })
        .await
        .unwrap();
    let runner = Runner::builder()
        .app_name("app")
        .agent(Arc::new(agent))
        .session_service(sessions)
        .request_context(RequestContext {
            user_id: "ada".into(),
            scopes: scopes.iter().map(|s| (*s).to_owned()).collect(),
            metadata: HashMap::new(),
        })
        .build()
        .unwrap();
    let drained = async {
        let mut events = runner
            .run_str("ada", "s1", Content::new("user").with_text("Do it."))
            .await
            .unwrap();
        let mut last = String::new();
        while let Some(event) = events.next().await {
            let event = event.unwrap();
            for part in event.llm_response.content.iter().flat_map(|c| &c.parts) {
                if let Part::Text { text } = part {
                    last = text.clone();
                }
            }
        }
        last
    };
    tokio::time::timeout(BOUND, drained)
        .await
        .expect("the run ends")
}

#[tokio::test]
async fn the_tools_say_what_adk_asks_of_them() {
    let tools = toolset().export().unwrap();
    let find = |name: &str| tools.iter().find(|t| t.name() == name).unwrap().clone();
    assert!(find("Calculator_Add").is_read_only());
    assert!(!find("Files_Delete").is_read_only());
    assert_eq!(find("Files_Wipe").required_scopes(), ["files:admin"]);
    assert!(find("Calculator_Add").required_scopes().is_empty());
    assert_eq!(
        find("Calculator_Add").response_schema().unwrap()["type"],
        "integer"
    );
    assert!(!find("Calculator_Add").is_long_running());
    // The toolset hands the same over.
    let ctx: Arc<dyn ReadonlyContext> = Arc::new(Readonly);
    let handed = toolset().tools(ctx).await.unwrap();
    assert_eq!(handed.len(), tools.len());
}

#[tokio::test]
async fn the_model_calls_a_tool_and_gets_its_value() {
    let model = Scripted::new([
        call("call_1", "Calculator_Add", json!({"a": 2, "b": 3})),
        text("2 + 3 = 5"),
    ]);
    assert_eq!(run(model.clone(), toolset(), &[]).await, "2 + 3 = 5");
    assert_eq!(
        model.function_responses(1),
        [("Calculator_Add".to_owned(), json!(5))]
    );
    let offered: Vec<String> = model.requests.lock().unwrap()[0]
        .tools
        .keys()
        .cloned()
        .collect();
    assert!(
        offered.iter().any(|name| name == "Calculator_Add"),
        "{offered:?}"
    );

    // The runner's user and the app's secret reach the tool.
    let model = Scripted::new([call("call_1", "Greeter_Hello", json!({})), text("done")]);
    run(model.clone(), toolset(), &[]).await;
    assert_eq!(model.function_responses(1)[0].1, json!("hello, ada (8)"));

    // A tool needing a scope the user lacks is refused; granted it, it runs.
    let model = Scripted::new([call("call_1", "Files_Wipe", json!({})), text("no")]);
    run(model.clone(), toolset(), &["files:read"]).await;
    let refused = model.function_responses(1)[0].1.clone();
    let refused = refused["error"].as_str().unwrap();
    assert!(refused.contains("files:admin"), "{refused}");
    let model = Scripted::new([call("call_1", "Files_Wipe", json!({})), text("done")]);
    run(model.clone(), toolset(), &["files:admin"]).await;
    assert_eq!(model.function_responses(1)[0].1, json!("wiped"));
}

#[tokio::test]
async fn a_tool_error_and_a_panic_reach_the_model_in_words_it_can_act_on() {
    let model = Scripted::new([
        call("call_1", "Sms_Send", json!({"to": "ada"})),
        call("call_2", "Sms_Crash", json!({})),
        text("sorry"),
    ]);
    assert_eq!(run(model.clone(), toolset(), &[]).await, "sorry");
    let failed = model.function_responses(1)[0].1.clone();
    let failed = failed["error"].as_str().expect("an error for the model");
    assert!(
        failed.contains("The quota for ada is used up.")
            && failed.contains("Try again in an hour.")
            && failed.contains("You may retry this call."),
        "the tool's words and its retry hint: {failed}"
    );
    // The panic is contained: the run goes on, the model hears the tool failed, not the bug.
    let (name, crashed) = model.function_responses(2).pop().unwrap();
    assert_eq!(name, "Sms_Crash");
    let crashed = crashed["error"].as_str().expect("an error for the model");
    assert!(
        crashed.contains("The tool failed unexpectedly."),
        "{crashed}"
    );
    assert!(!crashed.contains("a bug"), "{crashed}");
}

#[tokio::test]
async fn invalid_arguments_reach_the_model_in_words_it_retries_with() {
    let before = MULS.load(Ordering::SeqCst);
    let model = Scripted::new([
        call("call_1", "Calculator_Mul", json!({"a": "two", "b": 3})),
        call("call_2", "Calculator_Mul", json!({"a": 2, "b": 3})),
        text("6"),
    ]);
    assert_eq!(run(model.clone(), toolset(), &[]).await, "6");
    let first = model.function_responses(1)[0].1.clone();
    let error = first["error"].as_str().expect("an error for the model");
    assert!(
        error.contains("Invalid arguments for 'Calculator_Mul'")
            && error.contains("`a`")
            && error.contains("Please retry with arguments that match the tool's schema"),
        "the model is told what to fix: {error}"
    );
    assert_eq!(
        model.function_responses(2).last().unwrap(),
        &("Calculator_Mul".to_owned(), json!(6))
    );
    assert_eq!(MULS.load(Ordering::SeqCst) - before, 1);
}

#[tokio::test]
async fn a_tool_that_asks_is_answered_by_the_app_or_the_model_is_told_why_not() {
    let script = || {
        Scripted::new([
            call("call_1", "Files_Delete", json!({"path": "/tmp/x"})),
            text("ok"),
        ])
    };
    let asked = Arc::new(Mutex::new(Vec::new()));
    let seen = Arc::clone(&asked);
    let yes = toolset().asker(move |pending: PendingInput| {
        seen.lock()
            .unwrap()
            .push(pending.message("oxp.confirm").map(str::to_owned));
        async move { Some(answer_all(&pending, json!({"action": "accept"}))) }
    });
    let model = script();
    run(model.clone(), yes, &[]).await;
    assert_eq!(*asked.lock().unwrap(), [Some("Delete /tmp/x?".to_owned())]);
    assert_eq!(
        model.function_responses(1),
        [("Files_Delete".to_owned(), json!("deleted /tmp/x"))]
    );

    let no = toolset().asker(|pending: PendingInput| async move {
        Some(answer_all(&pending, json!({"action": "decline"})))
    });
    let model = script();
    run(model.clone(), no, &[]).await;
    let declined = model.function_responses(1)[0].1.to_string();
    assert!(
        declined.contains("error") && declined.contains("did not confirm"),
        "{declined}"
    );
    assert!(!declined.contains("deleted"), "{declined}");

    let model = script();
    run(model.clone(), toolset(), &[]).await;
    let cannot = model.function_responses(1)[0].1["error"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        cannot.contains("\"Delete /tmp/x?\"") && cannot.contains("cannot ask the user"),
        "{cannot}"
    );
}

fn answer_all(pending: &PendingInput, answer: Value) -> Answers {
    pending
        .asks
        .keys()
        .map(|key| (key.clone(), answer.clone()))
        .collect()
}

/// A bare context, for handing the toolset's tools over outside a run.
struct Readonly;

impl ReadonlyContext for Readonly {
    fn invocation_id(&self) -> &str {
        "i"
    }
    fn agent_name(&self) -> &str {
        "assistant"
    }
    fn user_id(&self) -> &str {
        "ada"
    }
    fn app_name(&self) -> &str {
        "app"
    }
    fn session_id(&self) -> &str {
        "s1"
    }
    fn branch(&self) -> &str {
        ""
    }
    fn user_content(&self) -> &Content {
        static EMPTY: std::sync::OnceLock<Content> = std::sync::OnceLock::new();
        EMPTY.get_or_init(|| Content::new("user"))
    }
}
