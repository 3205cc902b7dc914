//! rig in process (feature `rig`): oxp's tools as rig `DynamicTool`s, driven by rig's own agent
//! loop (rig-agent) over rig-core's scripted completion model — no network. The model calls a
//! tool and gets its value; sends invalid arguments, reads the schema's words and retries; calls
//! a tool that asks, which the app answers (or cannot); and an agent's tool set follows a rebuilt
//! registry through rig's `ManagedToolSink`.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use oxp_runtime::agents::Answers;
use oxp_runtime::agents::rig::{ManagedRigTools, RigTools, Scopes, User};
use oxp_runtime::call::Pipeline;
use oxp_runtime::providers::{Dispatcher, PendingInput};
use oxp_runtime::{Registry, ToolContext, tool};
use rig_agent::AgentBuilder;
use rig_agent::tool::server::ToolServer;
use rig_core::completion::{CompletionRequest, Message};
use rig_core::message::{ToolResultContent, UserContent};
use rig_core::test_utils::{MockCompletionModel, MockTurn};
use rig_core::tool::ToolContext as RigContext;
use serde_json::json;

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

/// Subtract two integers.
#[tool(toolkit = "Calculator", version = "1.0.0")]
async fn sub(a: i64, b: i64) -> i64 {
    a - b
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

fn dispatcher() -> Dispatcher {
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
    Dispatcher::new(Pipeline::new(registry))
        .user_id("app-user")
        .secret("SMTP_PASSWORD", "hunter22")
}

/// What the model was sent back for its tool calls in `request`: (tool, is_error, text).
fn tool_results(request: &CompletionRequest) -> Vec<(String, bool, String)> {
    let mut results = Vec::new();
    for message in &request.chat_history {
        let Message::User { content } = message else {
            continue;
        };
        for part in content {
            if let UserContent::ToolResult(result) = part {
                let text: Vec<String> = result
                    .content
                    .iter()
                    .map(|c| match c {
                        ToolResultContent::Text(text) => text.text.clone(),
                        ToolResultContent::Json { value } => value.to_string(),
                        other => format!("{other:?}"),
                    })
                    .collect();
                results.push((result.name.to_string(), result.is_error, text.join("")));
            }
        }
    }
    results
}

/// Runs `prompt` on a real rig agent over `model` with `tools`, bounded.
async fn run(
    model: &MockCompletionModel,
    tools: &RigTools,
    context: RigContext,
) -> rig_agent::agent::PromptResponse {
    let agent = AgentBuilder::new(model.clone())
        .dynamic_tools(tools.export().unwrap())
        .build();
    let run = agent
        .prompt("Do it.")
        .max_turns(5)
        .tool_context(context)
        .run();
    tokio::time::timeout(BOUND, run)
        .await
        .expect("the run ends")
        .expect("the run succeeds")
}

#[tokio::test]
async fn the_model_calls_a_tool_and_gets_its_value() {
    let model = MockCompletionModel::from_turns([
        MockTurn::tool_call("call_1", "Calculator_Add", json!({"a": 2, "b": 3})),
        MockTurn::text("2 + 3 = 5"),
    ]);
    let tools = RigTools::new(dispatcher());
    let response = run(&model, &tools, RigContext::new()).await;
    assert_eq!(response.output(), "2 + 3 = 5");
    let requests = model.requests();
    // The first request offers the tools, with their descriptions and schemas.
    let offered = &requests[0].tools;
    let add = offered
        .iter()
        .find(|t| t.name == "Calculator_Add")
        .expect("Calculator_Add is offered");
    assert_eq!(add.description, "Add two integers.");
    assert_eq!(add.parameters["required"], json!(["a", "b"]));
    assert_eq!(
        tool_results(&requests[1]),
        [("Calculator_Add".to_owned(), false, "5".to_owned())]
    );

    // The app's secret and user reach the tool; a run's own user (rig's per-run context) wins.
    let model = MockCompletionModel::from_turns([
        MockTurn::tool_call("call_1", "Greeter_Hello", json!({})),
        MockTurn::text("done"),
    ]);
    run(&model, &tools, RigContext::new()).await;
    assert_eq!(
        tool_results(&model.requests()[1])[0].2,
        "hello, app-user (8)"
    );
    let model = MockCompletionModel::from_turns([
        MockTurn::tool_call("call_1", "Greeter_Hello", json!({})),
        MockTurn::text("done"),
    ]);
    let mut context = RigContext::new();
    context.insert(User("ada".into())).unwrap();
    run(&model, &tools, context).await;
    assert_eq!(tool_results(&model.requests()[1])[0].2, "hello, ada (8)");
}

#[tokio::test]
async fn a_tool_error_and_a_panic_reach_the_model_in_words_it_can_act_on() {
    let model = MockCompletionModel::from_turns([
        MockTurn::tool_call("call_1", "Sms_Send", json!({"to": "ada"})),
        MockTurn::tool_call("call_2", "Sms_Crash", json!({})),
        MockTurn::text("sorry"),
    ]);
    let response = run(&model, &RigTools::new(dispatcher()), RigContext::new()).await;
    assert_eq!(response.output(), "sorry");
    let requests = model.requests();
    let failed = &tool_results(&requests[1])[0];
    assert!(failed.1, "{failed:?}");
    assert!(
        failed.2.contains("The quota for ada is used up.")
            && failed.2.contains("Try again in an hour.")
            && failed.2.contains("You may retry this call."),
        "the tool's words and its retry hint: {failed:?}"
    );
    // The panic is contained: the run goes on, the model hears the tool failed, not the bug.
    let crashed = tool_results(&requests[2]).pop().unwrap();
    assert_eq!(crashed.0, "Sms_Crash");
    assert!(
        crashed.1 && crashed.2.contains("The tool failed unexpectedly."),
        "{crashed:?}"
    );
    assert!(!crashed.2.contains("a bug"), "{crashed:?}");
}

#[tokio::test]
async fn invalid_arguments_reach_the_model_in_words_it_retries_with() {
    let before = MULS.load(Ordering::SeqCst);
    let model = MockCompletionModel::from_turns([
        MockTurn::tool_call("call_1", "Calculator_Mul", json!({"a": "two", "b": 3})),
        MockTurn::tool_call("call_2", "Calculator_Mul", json!({"a": 2, "b": 3})),
        MockTurn::text("6"),
    ]);
    let tools = RigTools::new(dispatcher());
    let response = run(&model, &tools, RigContext::new()).await;
    assert_eq!(response.output(), "6");
    let requests = model.requests();
    let first = &tool_results(&requests[1])[0];
    assert!(first.1, "the invalid call is an error result: {first:?}");
    assert!(
        first.2.contains("Invalid arguments for 'Calculator_Mul'")
            && first.2.contains("`a`")
            && first
                .2
                .contains("Please retry with arguments that match the tool's schema"),
        "the model is told what to fix: {first:?}"
    );
    let retried = tool_results(&requests[2]);
    assert_eq!(
        retried.last().unwrap(),
        &("Calculator_Mul".to_owned(), false, "6".to_owned())
    );
    // The invalid call never ran the tool; the retry ran it once.
    assert_eq!(MULS.load(Ordering::SeqCst) - before, 1);

    // A tool the run's scopes do not cover is refused, in words the model can pass on.
    let model = MockCompletionModel::from_turns([
        MockTurn::tool_call("call_1", "Files_Wipe", json!({})),
        MockTurn::text("I may not."),
    ]);
    let mut context = RigContext::new();
    context.insert(Scopes(vec!["files:read".into()])).unwrap();
    run(&model, &tools, context).await;
    let refused = &tool_results(&model.requests()[1])[0];
    assert!(
        refused.1 && refused.2.contains("files:admin"),
        "{refused:?}"
    );
}

#[tokio::test]
async fn a_tool_that_asks_is_answered_by_the_app_or_the_model_is_told_why_not() {
    let script = || {
        MockCompletionModel::from_turns([
            MockTurn::tool_call("call_1", "Files_Delete", json!({"path": "/tmp/x"})),
            MockTurn::text("ok"),
        ])
    };
    // The app asks its user, who says yes: the tool runs within the same call.
    let asked = Arc::new(Mutex::new(Vec::new()));
    let seen = Arc::clone(&asked);
    let tools = RigTools::new(dispatcher()).asker(move |pending: PendingInput| {
        seen.lock()
            .unwrap()
            .push(pending.message("oxp.confirm").map(str::to_owned));
        async move { Some(answer_all(&pending, json!({"action": "accept"}))) }
    });
    let model = script();
    run(&model, &tools, RigContext::new()).await;
    assert_eq!(*asked.lock().unwrap(), [Some("Delete /tmp/x?".to_owned())]);
    assert_eq!(
        tool_results(&model.requests()[1]),
        [(
            "Files_Delete".to_owned(),
            false,
            "deleted /tmp/x".to_owned()
        )]
    );

    // The user says no: the model is told, and nothing is deleted.
    let tools = RigTools::new(dispatcher()).asker(|pending: PendingInput| async move {
        Some(answer_all(&pending, json!({"action": "decline"})))
    });
    let model = script();
    run(&model, &tools, RigContext::new()).await;
    let declined = &tool_results(&model.requests()[1])[0];
    assert!(declined.1, "{declined:?}");
    assert!(!declined.2.contains("deleted"), "{declined:?}");
    assert!(declined.2.contains("did not confirm"), "{declined:?}");

    // No asker: the model learns what the tool needs and that it cannot be asked here.
    let model = script();
    run(&model, &RigTools::new(dispatcher()), RigContext::new()).await;
    let cannot = &tool_results(&model.requests()[1])[0];
    assert!(cannot.1, "{cannot:?}");
    assert!(
        cannot.2.contains("\"Delete /tmp/x?\"") && cannot.2.contains("cannot ask the user"),
        "{cannot:?}"
    );
}

fn answer_all(pending: &PendingInput, answer: serde_json::Value) -> Answers {
    pending
        .asks
        .keys()
        .map(|key| (key.clone(), answer.clone()))
        .collect()
}

#[tokio::test]
async fn an_agents_tools_follow_a_rebuilt_registry() {
    let handle = ToolServer::new().run();
    let tools = |registry| RigTools::new(Dispatcher::new(Pipeline::new(registry)));
    let first = Registry::builder().tool(add::TOOL).build().unwrap();
    let managed = ManagedRigTools::install(&handle, &tools(first)).unwrap();
    let agent = AgentBuilder::new(MockCompletionModel::text("unused"))
        .tool_server_handle(handle.clone())
        .build();
    let offered = |model: &MockCompletionModel| -> Vec<String> {
        let mut names: Vec<String> = model.requests()[0]
            .tools
            .iter()
            .map(|t| t.name.to_string())
            .collect();
        names.sort();
        names
    };
    let model = MockCompletionModel::from_turns([
        MockTurn::tool_call("call_1", "Calculator_Add", json!({"a": 1, "b": 1})),
        MockTurn::text("2"),
    ]);
    let response = tokio::time::timeout(
        BOUND,
        agent
            .prompt("1 + 1?")
            .max_turns(5)
            .using_model_value(model.clone())
            .run(),
    )
    .await
    .unwrap()
    .unwrap();
    assert_eq!(response.output(), "2");
    assert_eq!(offered(&model), ["Calculator_Add"]);
    assert_eq!(
        tool_results(&model.requests()[1])[0],
        ("Calculator_Add".to_owned(), false, "2".to_owned())
    );

    // The registry is rebuilt without `add` and with `sub`: the same agent sees the change.
    let second = Registry::builder().tool(sub::TOOL).build().unwrap();
    managed.update(&handle, &tools(second)).unwrap();
    assert_eq!(managed.names(), ["Calculator_Sub"]);
    let model = MockCompletionModel::from_turns([
        MockTurn::tool_call("call_1", "Calculator_Sub", json!({"a": 3, "b": 1})),
        MockTurn::text("2"),
    ]);
    tokio::time::timeout(
        BOUND,
        agent
            .prompt("3 - 1?")
            .max_turns(5)
            .using_model_value(model.clone())
            .run(),
    )
    .await
    .unwrap()
    .unwrap();
    assert_eq!(offered(&model), ["Calculator_Sub"]);
    assert_eq!(
        tool_results(&model.requests()[1])[0],
        ("Calculator_Sub".to_owned(), false, "2".to_owned())
    );
}
