//! Resources, prompts and completion: `#[resource]` and `#[prompt]` fns as plain functions, over
//! MCP with the official Rust SDK's client, and through the pipeline's guarantees (time limit,
//! panics, result cap, concurrency limit, metrics).

#[path = "harness/mod.rs"]
mod harness;

use std::sync::atomic::{AtomicUsize, Ordering};

use harness::Oxp;
use oxp_runtime::call::{CallMeta, Pipeline, ReadError};
use oxp_runtime::content::{Content, Resource};
use oxp_runtime::mcp::McpServer;
use oxp_runtime::prompt::{Message, Role};
use oxp_runtime::server::Server;
use oxp_runtime::{MetricsText, Registry, ToolError, prompt, resource};
use rmcp::model::{ErrorCode, GetPromptRequestParams, ReadResourceRequestParams};
use rmcp::service::{RunningService, ServiceError};
use rmcp::{RoleClient, ServiceExt};
use serde_json::{Value, json};

/// The application's settings.
#[resource(
    uri = "config://app",
    name = "settings",
    title = "Settings",
    mime_type = "application/json"
)]
fn settings() -> &'static str {
    r#"{"theme": "dark"}"#
}

/// The logo.
#[resource(uri = "images://logo", mime_type = "image/png")]
fn logo() -> Vec<u8> {
    vec![0x89, b'P', b'N', b'G']
}

fn shelves(typed: &str) -> Vec<String> {
    ["fiction", "fantasy", "history"]
        .into_iter()
        .filter(|shelf| shelf.starts_with(typed))
        .map(str::to_owned)
        .collect()
}

/// A book on a shelf.
#[resource(uri = "books://{shelf}/{number}")]
async fn book(
    /// The shelf.
    #[complete(shelves)]
    shelf: String,
    /// The book's number on it.
    number: u32,
) -> Result<String, ToolError> {
    if number == 0 {
        return Err(ToolError::new("Books are numbered from 1."));
    }
    Ok(format!("book {number} of {shelf}"))
}

/// A language to write in.
#[derive(serde::Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
enum Language {
    Rust,
    Python,
    Ruby,
}

/// Write a function.
#[prompt(title = "Write code")]
fn write_code(
    /// What the function does.
    task: String,
    /// The language (Rust if left out).
    language: Option<Language>,
) -> Vec<Message> {
    let language = match language {
        Some(Language::Python) => "Python",
        Some(Language::Ruby) => "Ruby",
        _ => "Rust",
    };
    vec![
        Message::user(format!("Write a {language} function that {task}.")),
        Message::assistant("Here it is:"),
    ]
}

/// Describe an image.
#[prompt(name = "describe")]
async fn describe_image() -> Result<Vec<Message>, ToolError> {
    Ok(vec![
        Message::user_content(Content::image(b"GIF89a", "image/gif")?),
        Message::user("Describe the image above."),
    ])
}

fn registry() -> Registry {
    Registry::builder()
        .resource(settings::RESOURCE)
        .resource(logo::RESOURCE)
        .resource(book::RESOURCE)
        .prompt(write_code::PROMPT)
        .prompt(describe_image::PROMPT)
        .build()
        .unwrap()
}

async fn connect(oxp: &Oxp) -> RunningService<RoleClient, ()> {
    let transport =
        rmcp::transport::StreamableHttpClientTransport::from_uri(format!("{}/mcp", oxp.base));
    ().serve(transport).await.unwrap()
}

fn mcp_error(result: Result<impl std::fmt::Debug, ServiceError>) -> rmcp::ErrorData {
    match result {
        Err(ServiceError::McpError(error)) => error,
        other => panic!("expected an MCP error, got {other:?}"),
    }
}

#[tokio::test]
async fn the_functions_stay_plain_functions() {
    assert_eq!(settings(), r#"{"theme": "dark"}"#);
    assert_eq!(
        book("fiction".into(), 2).await.unwrap(),
        "book 2 of fiction"
    );
    assert!(book("fiction".into(), 0).await.is_err());
    assert_eq!(write_code("adds".into(), None)[1].role, Role::Assistant);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resources_prompts_and_completion_over_mcp() {
    let pipeline = Pipeline::new(registry());
    let mcp = McpServer::new(pipeline.clone()).into_router();
    let oxp = Oxp::start(Server::from_pipeline(pipeline).nest("/mcp", mcp)).await;
    let client = connect(&oxp).await;

    // Fixed URIs in resources/list, templates in resources/templates/list.
    let resources = client.list_all_resources().await.unwrap();
    let uris: Vec<&str> = resources.iter().map(|r| r.uri.as_str()).collect();
    assert_eq!(uris, ["config://app", "images://logo"]);
    assert_eq!(resources[0].name, "settings");
    assert_eq!(resources[0].title.as_deref(), Some("Settings"));
    assert_eq!(
        resources[0].description.as_deref(),
        Some("The application's settings.")
    );
    assert_eq!(resources[0].mime_type.as_deref(), Some("application/json"));
    let templates = client.list_all_resource_templates().await.unwrap();
    assert_eq!(templates.len(), 1);
    assert_eq!(templates[0].uri_template, "books://{shelf}/{number}");
    assert_eq!(templates[0].name, "book");

    // Text, bytes (base64), and a template's values read as the parameters' types.
    let read = |uri: &str| client.read_resource(ReadResourceRequestParams::new(uri));
    let text = serde_json::to_value(read("config://app").await.unwrap().contents).unwrap();
    assert_eq!(
        text,
        json!([{"uri": "config://app", "mimeType": "application/json", "text": r#"{"theme": "dark"}"#}])
    );
    let bytes = serde_json::to_value(read("images://logo").await.unwrap().contents).unwrap();
    assert_eq!(bytes[0]["blob"], "iVBORw==");
    assert_eq!(bytes[0]["mimeType"], "image/png");
    let templated =
        serde_json::to_value(read("books://fiction/7").await.unwrap().contents).unwrap();
    assert_eq!(templated[0]["text"], "book 7 of fiction");
    assert_eq!(templated[0]["uri"], "books://fiction/7");
    // A value that is not the parameter's type is the caller's error; the fn's error the
    // server's, with its message.
    let not_a_number = mcp_error(read("books://fiction/seven").await);
    assert_eq!(not_a_number.code, ErrorCode::INVALID_PARAMS);
    assert!(
        not_a_number.message.contains("number"),
        "{}",
        not_a_number.message
    );
    let failed = mcp_error(read("books://fiction/0").await);
    assert_eq!(failed.code, ErrorCode::INTERNAL_ERROR);
    assert!(
        failed.message.contains("numbered from 1"),
        "{}",
        failed.message
    );
    // SEP-2164: not found is -32602, with the URI.
    let missing = mcp_error(read("books://fiction").await);
    assert_eq!(missing.code, ErrorCode::INVALID_PARAMS);
    assert_eq!(missing.data, Some(json!({"uri": "books://fiction"})));

    // Prompts: arguments with their docs, required unless Option.
    let prompts = client.list_all_prompts().await.unwrap();
    let names: Vec<&str> = prompts.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["describe", "write_code"]);
    let write = &prompts[1];
    assert_eq!(write.title.as_deref(), Some("Write code"));
    assert_eq!(write.description.as_deref(), Some("Write a function."));
    let arguments = serde_json::to_value(&write.arguments).unwrap();
    assert_eq!(
        arguments,
        json!([
            {"name": "task", "description": "What the function does.", "required": true},
            {"name": "language", "description": "The language (Rust if left out).", "required": false}
        ])
    );
    let get = |name: &str, arguments: Value| {
        let Value::Object(arguments) = arguments else {
            panic!()
        };
        client.get_prompt(GetPromptRequestParams::new(name).with_arguments(arguments))
    };
    let got = get(
        "write_code",
        json!({"task": "adds two numbers", "language": "python"}),
    )
    .await
    .unwrap();
    let messages = serde_json::to_value(&got.messages).unwrap();
    assert_eq!(
        messages,
        json!([
            {"role": "user", "content": {"type": "text", "text": "Write a Python function that adds two numbers."}},
            {"role": "assistant", "content": {"type": "text", "text": "Here it is:"}}
        ])
    );
    let image = get("describe", json!({})).await.unwrap();
    assert_eq!(
        serde_json::to_value(&image.messages).unwrap()[0]["content"]["type"],
        "image"
    );
    let without_task = mcp_error(get("write_code", json!({})).await);
    assert_eq!(without_task.code, ErrorCode::INVALID_PARAMS);
    assert!(
        without_task.message.contains("`task` is required"),
        "{}",
        without_task.message
    );
    let unknown_argument = mcp_error(get("write_code", json!({"task": "x", "tone": "dry"})).await);
    assert!(
        unknown_argument.message.contains("`tone`"),
        "{}",
        unknown_argument.message
    );
    let unknown_prompt = mcp_error(get("nope", json!({})).await);
    assert_eq!(unknown_prompt.code, ErrorCode::INVALID_PARAMS);

    // Completion: from the author's fn, and from an enum's variants.
    let shelves = client
        .complete_resource_argument("books://{shelf}/{number}", "shelf", "f", None)
        .await
        .unwrap();
    assert_eq!(shelves.values, ["fiction", "fantasy"]);
    assert_eq!((shelves.total, shelves.has_more), (Some(2), Some(false)));
    let languages = client
        .complete_prompt_argument("write_code", "language", "r", None)
        .await
        .unwrap();
    assert_eq!(languages.values, ["rust", "ruby"]);
    let nothing = client
        .complete_prompt_argument("write_code", "task", "a", None)
        .await
        .unwrap();
    assert!(nothing.values.is_empty());
    assert!(
        client
            .complete_prompt_argument("nope", "task", "a", None)
            .await
            .is_err()
    );
    client.cancel().await.unwrap();
}

/// A resource that never finishes on its own.
#[resource(uri = "slow://forever", timeout_ms = 50)]
async fn forever() -> String {
    std::future::pending::<()>().await;
    unreachable!()
}

/// A resource that panics.
#[resource(uri = "bad://panic")]
fn panics() -> String {
    panic!("a resource's bug")
}

/// A resource larger than the test's result cap.
#[resource(uri = "big://text")]
fn big() -> String {
    "x".repeat(1000)
}

static ENTERED: tokio::sync::Notify = tokio::sync::Notify::const_new();
static RELEASE: tokio::sync::Notify = tokio::sync::Notify::const_new();
static READS: AtomicUsize = AtomicUsize::new(0);

/// A resource that holds its run until the test lets it go.
#[resource(uri = "held://one")]
async fn held() -> String {
    READS.fetch_add(1, Ordering::SeqCst);
    ENTERED.notify_one();
    RELEASE.notified().await;
    "released".into()
}

/// A prompt that panics.
#[prompt]
fn broken_prompt() -> String {
    panic!("a prompt's bug")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reads_and_gets_keep_the_guarantees_of_calls() {
    let registry = Registry::builder()
        .resource(forever::RESOURCE)
        .resource(panics::RESOURCE)
        .resource(big::RESOURCE)
        .resource(held::RESOURCE)
        .prompt(broken_prompt::PROMPT)
        .build()
        .unwrap();
    let pipeline = Pipeline::new(registry)
        .max_result_bytes(256)
        .limits(Some(1), 4);
    let meta = CallMeta::default();

    let timed_out = pipeline.read_resource("slow://forever", &meta).await;
    assert!(
        matches!(&timed_out, Err(ReadError::Failed(e)) if e.message == "The resource took too long and was stopped."),
        "{timed_out:?}"
    );
    let panicked = pipeline.read_resource("bad://panic", &meta).await;
    assert!(
        matches!(&panicked, Err(ReadError::Failed(e)) if e.message == "The resource failed unexpectedly."),
        "{panicked:?}"
    );
    let too_big = pipeline.read_resource("big://text", &meta).await;
    assert!(
        matches!(&too_big, Err(ReadError::Failed(e)) if e.message == "The resource's result is too large to send."),
        "{too_big:?}"
    );
    let broken = pipeline
        .get_prompt("broken_prompt", Default::default(), &meta)
        .await;
    assert!(
        matches!(&broken, Err(ReadError::Failed(e)) if e.message == "The prompt failed unexpectedly."),
        "{broken:?}"
    );

    // A read holds its place within the concurrency limit while it runs.
    let first = tokio::spawn({
        let pipeline = pipeline.clone();
        async move {
            pipeline
                .read_resource("held://one", &CallMeta::default())
                .await
        }
    });
    ENTERED.notified().await;
    let refused = pipeline.read_resource("held://one", &meta).await;
    assert!(
        matches!(refused, Err(ReadError::Unavailable(_))),
        "{refused:?}"
    );
    RELEASE.notify_one();
    let first = first.await.unwrap().unwrap();
    assert!(matches!(&first[0], Resource::Text { text, .. } if text == "released"));
    assert_eq!(
        READS.load(Ordering::SeqCst),
        1,
        "the refused read did not run"
    );

    // Counted by the registered URI and outcome: never by the URI read.
    let metrics = pipeline.metrics_text().unwrap();
    for line in [
        r#"oxp_resource_reads_total{resource="slow://forever",outcome="timeout"} 1"#,
        r#"oxp_resource_reads_total{resource="bad://panic",outcome="panic"} 1"#,
        r#"oxp_resource_reads_total{resource="big://text",outcome="tool_error"} 1"#,
        r#"oxp_resource_reads_total{resource="held://one",outcome="success"} 1"#,
        r#"oxp_resource_reads_total{resource="held://one",outcome="refused"} 1"#,
        r#"oxp_prompt_gets_total{prompt="broken_prompt",outcome="panic"} 1"#,
    ] {
        assert!(metrics.contains(line), "{line} in:\n{metrics}");
    }
}

/// Two resources on one URI.
#[resource(uri = "dup://same")]
fn dup_one() -> String {
    String::new()
}

/// The other.
#[resource(uri = "dup://same")]
fn dup_two() -> String {
    String::new()
}

#[test]
fn a_uri_served_twice_is_a_registry_error_naming_both_fns() {
    let error = Registry::builder()
        .resource(dup_one::RESOURCE)
        .resource(dup_two::RESOURCE)
        .build()
        .unwrap_err()
        .to_string();
    assert!(error.contains("dup://same"), "{error}");
    assert!(
        error.contains("dup_one") && error.contains("dup_two"),
        "{error}"
    );
}

/// What a prompt asks its user.
#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Audience {
    /// Who will read it.
    audience: String,
}

static RENDERS: AtomicUsize = AtomicUsize::new(0);

/// Summarise a text for an audience the user names.
#[prompt]
fn summarise(ctx: &oxp_runtime::ToolContext, text: String) -> Result<String, ToolError> {
    RENDERS.fetch_add(1, Ordering::SeqCst);
    let Audience { audience } = ctx.ask("audience", "Who is the summary for?")?;
    Ok(format!("Summarise for {audience}: {text}"))
}

/// A 2026-07-28 `prompts/get` from a client that can answer forms; its JSON-RPC answer.
async fn get_2026(oxp: &Oxp, params: Value) -> Value {
    let mut params = params;
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}},
    });
    reqwest::Client::new()
        .post(format!("{}/mcp", oxp.base))
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", "prompts/get")
        .header("mcp-name", params["name"].as_str().unwrap_or_default())
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "prompts/get", "params": params}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

/// A prompt asks as a tool does: the first get ends `input_required` with a sealed state, the
/// get with the answer and that state renders it; the state is bound to the prompt's arguments.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_prompt_asks_its_user_before_it_is_rendered() {
    let pipeline = Pipeline::new(
        Registry::builder()
            .prompt(summarise::PROMPT)
            .build()
            .unwrap(),
    );
    let mcp = McpServer::new(pipeline.clone()).into_router();
    let oxp = Oxp::start(Server::from_pipeline(pipeline).nest("/mcp", mcp)).await;
    let arguments = json!({"text": "the minutes"});

    let first = get_2026(&oxp, json!({"name": "summarise", "arguments": arguments})).await;
    let result = &first["result"];
    assert_eq!(result["resultType"], "input_required", "{first}");
    let ask = &result["inputRequests"]["audience"];
    assert_eq!(ask["method"], "elicitation/create");
    assert_eq!(ask["params"]["message"], "Who is the summary for?");
    let state = result["requestState"].as_str().unwrap().to_owned();
    let answer = json!({"audience": {"action": "accept", "content": {"audience": "the board"}}});

    let done = get_2026(
        &oxp,
        json!({"name": "summarise", "arguments": arguments, "requestState": state, "inputResponses": answer}),
    )
    .await;
    assert_eq!(
        done["result"]["messages"],
        json!([{"role": "user", "content": {"type": "text", "text": "Summarise for the board: the minutes"}}]),
        "{done}"
    );
    assert_eq!(RENDERS.load(Ordering::SeqCst), 2);

    // The state answers for these arguments only.
    let other = get_2026(
        &oxp,
        json!({"name": "summarise", "arguments": {"text": "other"}, "requestState": state, "inputResponses": answer}),
    )
    .await;
    assert_eq!(other["error"]["code"], -32602, "{other}");
    assert_eq!(
        RENDERS.load(Ordering::SeqCst),
        2,
        "a refused state renders nothing"
    );
}

/// The example server over stdio (`<bin> mcp`): its resource, prompt, completion and skill, as
/// `serve()` registers them from the binary.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_example_serves_them_over_stdio() {
    let mut command = tokio::process::Command::new(harness::example_binary());
    command.arg("mcp").env("OXP_LOG", "warn");
    let client = ().serve(rmcp::transport::TokioChildProcess::new(command).unwrap()).await.unwrap();
    let templates = client.list_all_resource_templates().await.unwrap();
    assert_eq!(templates[0].uri_template, "doorbell://{doorbell_id}/status");
    let read = client
        .read_resource(ReadResourceRequestParams::new(
            "doorbell://doorbell42/status",
        ))
        .await
        .unwrap();
    let contents = serde_json::to_value(&read.contents).unwrap();
    assert_eq!(
        contents[0]["text"],
        r#"{"doorbell": "doorbell42", "battery": "ok"}"#
    );
    let ids = client
        .complete_resource_argument(
            "doorbell://{doorbell_id}/status",
            "doorbell_id",
            "door",
            None,
        )
        .await
        .unwrap();
    assert_eq!(ids.values, ["doorbell42", "doorbell84"]);
    let Value::Object(arguments) = json!({"name": "Ada"}) else {
        panic!()
    };
    let greeting = client
        .get_prompt(GetPromptRequestParams::new("greet_visitor").with_arguments(arguments))
        .await
        .unwrap();
    assert!(
        serde_json::to_value(&greeting.messages).unwrap()[0]["content"]["text"]
            .as_str()
            .unwrap()
            .contains("welcome Ada")
    );
    let skills = client.list_all_skills().await.unwrap();
    assert_eq!(skills[0].uri, "skill://doorbells/SKILL.md");
    client.cancel().await.unwrap();
}

/// `OXP_TOOLS` selects resources and prompts by their own items; a kind it names nothing of is
/// served whole, and an item that matches nothing is an error naming it.
#[test]
fn the_selection_picks_resources_and_prompts_by_their_own_items() {
    let all = || {
        Registry::builder()
            .resource(settings::RESOURCE)
            .resource(logo::RESOURCE)
            .resource(book::RESOURCE)
            .prompt(write_code::PROMPT)
            .prompt(describe_image::PROMPT)
    };
    let uris = |registry: &Registry| -> Vec<&'static str> {
        registry
            .resources()
            .iter()
            .map(|r| r.descriptor().uri)
            .collect()
    };
    let only = all()
        .select("resource:books://{shelf}/{number},-prompt:describe")
        .build()
        .unwrap();
    assert_eq!(uris(&only), ["books://{shelf}/{number}"]);
    let prompts: Vec<&str> = only.prompts().iter().map(|p| p.descriptor().name).collect();
    assert_eq!(prompts, ["write_code"]);
    let without_logo = all().select("-resource:images://logo").build().unwrap();
    assert_eq!(
        uris(&without_logo),
        ["config://app", "books://{shelf}/{number}"]
    );
    assert_eq!(without_logo.prompts().len(), 2);
    let typo = all()
        .select("resource:config://ap")
        .build()
        .unwrap_err()
        .to_string();
    assert!(
        typo.contains("`resource:config://ap` in the tool selection matches no resource"),
        "{typo}"
    );
    let unnamed = all().select("prompt:").build().unwrap_err().to_string();
    assert!(unnamed.contains("a prompt needs its name"), "{unnamed}");
}

/// Write code, with one argument more (optional).
#[prompt(name = "write_code")]
fn write_code_with_style(
    /// What the function does.
    task: String,
    /// The language.
    language: Option<Language>,
    /// The style.
    style: Option<String>,
) -> String {
    let _ = (language, style);
    task
}

/// Write code, the language now required.
#[prompt(name = "write_code")]
fn write_code_strict(
    /// What the function does.
    task: String,
    /// The language.
    language: Language,
) -> String {
    let _ = language;
    task
}

/// The lockfile records resources and prompts: one that disappears, a prompt argument removed
/// or made required, and a new required argument break what was published; a new optional
/// argument and a new resource are allowed and said. Read back, the file says the same.
#[test]
fn the_lock_holds_resources_and_prompts_to_what_was_published() {
    use oxp_runtime::lock::Lock;
    let published = Lock::of(
        &Registry::builder()
            .resource(settings::RESOURCE)
            .resource(book::RESOURCE)
            .prompt(write_code::PROMPT)
            .build()
            .unwrap(),
    );
    let text = published.to_text();
    assert!(text.contains("\"resources\"") && text.contains("\"books://{shelf}/{number}\""));
    let read = Lock::parse(&text).unwrap();
    assert_eq!(read, published);

    let grown = Registry::builder()
        .resource(settings::RESOURCE)
        .resource(book::RESOURCE)
        .resource(logo::RESOURCE)
        .prompt(write_code_with_style::PROMPT)
        .build()
        .unwrap();
    let review = read.review(&grown, false);
    assert!(review.violations.is_empty(), "{:?}", review.violations);
    let notices: Vec<String> = review.notices.iter().map(ToString::to_string).collect();
    assert!(
        notices
            .iter()
            .any(|n| n.starts_with("resource images://logo: new")),
        "{notices:?}"
    );
    assert!(
        notices
            .iter()
            .any(|n| n.contains("new optional argument `style`")),
        "{notices:?}"
    );

    let shrunk = Registry::builder()
        .resource(settings::RESOURCE)
        .prompt(write_code_strict::PROMPT)
        .build()
        .unwrap();
    let violations: Vec<String> = read
        .check(&shrunk)
        .iter()
        .map(ToString::to_string)
        .collect();
    assert!(
        violations.contains(&"resource books://{shelf}/{number}: removed — a locked resource or prompt must not disappear while clients may still ask for it; serve it, or retire it with --allow-removal".to_owned()),
        "{violations:?}"
    );
    assert!(
        violations.iter().any(|v| v.starts_with(
            "prompt write_code: /arguments/language: argument `language` became required"
        )),
        "{violations:?}"
    );
    assert_eq!(violations.len(), 2, "{violations:?}");
    // Retired on purpose, the resource's removal is said, not refused.
    assert_eq!(read.review(&shrunk, true).violations.len(), 1);
}

/// `crate = "path"`, as for `#[tool]`: the generated code reaches the runtime by the path named.
mod runtime_alias {
    pub use oxp_runtime::__private;
}

/// Settings, through a renamed path.
#[resource(uri = "alias://settings", crate = "crate::runtime_alias")]
fn aliased_settings() -> &'static str {
    "{}"
}

/// Greet, through a renamed path.
#[prompt(crate = "crate::runtime_alias")]
fn aliased_greeting() -> &'static str {
    "Say hello."
}

#[tokio::test]
async fn resources_and_prompts_reach_the_runtime_by_the_path_they_name() {
    let pipeline = Pipeline::new(
        Registry::builder()
            .resource(aliased_settings::RESOURCE)
            .prompt(aliased_greeting::PROMPT)
            .build()
            .unwrap(),
    );
    let meta = CallMeta::default();
    let read = pipeline
        .read_resource("alias://settings", &meta)
        .await
        .unwrap();
    assert!(matches!(&read[0], Resource::Text { text, .. } if text == "{}"));
    let got = pipeline
        .get_prompt("aliased_greeting", Default::default(), &meta)
        .await
        .unwrap();
    assert_eq!(got, [Message::user("Say hello.")]);
}

// Subscriptions (`resources/subscribe`, revisions before 2026-07-28).

/// What `Notes_Write` last wrote.
static NOTE: std::sync::Mutex<String> = std::sync::Mutex::new(String::new());

/// Today's note.
#[resource(uri = "notes://today")]
fn note() -> String {
    NOTE.lock().unwrap().clone()
}

/// Rewrites today's note.
#[oxp_runtime::tool(toolkit = "Notes", version = "1.0.0")]
fn write(text: String) {
    *NOTE.lock().unwrap() = text;
    oxp_runtime::resource::changed("notes://today");
}

fn subscribing_registry() -> Registry {
    Registry::builder()
        .resource(note::RESOURCE)
        .resource(settings::RESOURCE)
        .resource(book::RESOURCE)
        .tool(write::TOOL)
        .build()
        .unwrap()
}

/// A 2025-11-25 client that hands each `notifications/resources/updated` it is sent to the test.
struct Watching(tokio::sync::mpsc::UnboundedSender<String>);

impl rmcp::ClientHandler for Watching {
    async fn on_resource_updated(
        &self,
        params: rmcp::model::ResourceUpdatedNotificationParam,
        _context: rmcp::service::NotificationContext<RoleClient>,
    ) {
        let _ = self.0.send(params.uri);
    }

    fn get_info(&self) -> rmcp::model::ClientConfig {
        serde_json::from_value(json!({"protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "watching", "version": "1"}}))
        .unwrap()
    }
}

/// A client on a connection of its own to `server` (as over stdio), and what it is told.
async fn watching(
    server: &McpServer,
) -> (
    RunningService<RoleClient, Watching>,
    tokio::sync::mpsc::UnboundedReceiver<String>,
) {
    let (ours, theirs) = tokio::io::duplex(64 * 1024);
    let serving = server.clone().serve(theirs);
    let (sender, updates) = tokio::sync::mpsc::unbounded_channel();
    let client = Watching(sender).serve(ours);
    let (serving, client) =
        harness::bounded("initialize", async { tokio::join!(serving, client) }).await;
    tokio::spawn(serving.unwrap().waiting());
    (client.unwrap(), updates)
}

async fn next_update(updates: &mut tokio::sync::mpsc::UnboundedReceiver<String>) -> String {
    harness::bounded("a notification", updates.recv())
        .await
        .expect("the connection is open")
}

fn subscription(uri: &str) -> rmcp::model::SubscribeRequestParams {
    serde_json::from_value(json!({ "uri": uri })).unwrap()
}

/// Over a connection, `resources.subscribe` is declared and a subscribed client is told when the
/// function says the resource changed; one subscribed to something else, or one that
/// unsubscribed, is not. Both connections are served by clones of one `McpServer`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[allow(deprecated)] // rmcp marks the earlier revisions' subscriptions so; this is their test
async fn a_subscribed_connection_is_told_what_changed() {
    let server = McpServer::new(Pipeline::new(subscribing_registry()));
    let (reader, mut read_updates) = watching(&server).await;
    let (writer, mut write_updates) = watching(&server).await;
    let capabilities = &reader.peer_info().unwrap().capabilities;
    let declared = capabilities.resources.as_ref().and_then(|r| r.subscribe);
    assert_eq!(declared, Some(true), "{capabilities:?}");

    reader
        .subscribe(subscription("notes://today"))
        .await
        .unwrap();
    // A URI a template serves is named as read.
    reader
        .subscribe(subscription("books://fiction/1"))
        .await
        .unwrap();
    writer
        .subscribe(subscription("config://app"))
        .await
        .unwrap();

    // The writer's own tool says the note changed: the reader, subscribed, is told.
    let arguments = json!({"text": "buy milk"}).as_object().unwrap().clone();
    let params = rmcp::model::CallToolRequestParams::new("Notes_Write").with_arguments(arguments);
    writer.call_tool(params).await.unwrap();
    assert_eq!(next_update(&mut read_updates).await, "notes://today");
    let read = reader
        .read_resource(ReadResourceRequestParams::new("notes://today"))
        .await
        .unwrap();
    assert_eq!(
        serde_json::to_value(&read).unwrap()["contents"][0]["text"],
        "buy milk"
    );
    // The writer, subscribed to another URI only, was not: changes reach each connection in
    // order, so its first notification is the later change it did subscribe to.
    oxp_runtime::resource::changed("config://app");
    assert_eq!(next_update(&mut write_updates).await, "config://app");

    // Unsubscribed, the reader hears of the note no more: its next is the book's, told after.
    reader
        .unsubscribe(serde_json::from_value(json!({"uri": "notes://today"})).unwrap())
        .await
        .unwrap();
    oxp_runtime::resource::changed("notes://today");
    oxp_runtime::resource::changed("books://fiction/1");
    assert_eq!(next_update(&mut read_updates).await, "books://fiction/1");

    // A URI nothing serves is a read's not-found; params that are no URI are invalid.
    let unknown = mcp_error(reader.subscribe(subscription("notes://nowhere")).await);
    assert_eq!(
        (unknown.code, unknown.data),
        (
            ErrorCode::INVALID_PARAMS,
            Some(json!({"uri": "notes://nowhere"}))
        )
    );
    let bad = rmcp::model::ClientRequest::CustomRequest(rmcp::model::CustomRequest::new(
        "resources/subscribe",
        Some(json!({"uri": 5})),
    ));
    let bad = mcp_error(reader.send_request(bad).await);
    assert_eq!(bad.code, ErrorCode::INVALID_PARAMS, "{bad:?}");
    assert!(bad.message.contains("`uri`, a string"), "{bad:?}");
    reader.cancel().await.unwrap();
    writer.cancel().await.unwrap();
}

/// A 2025-11-25 request to `/mcp`, answered without a session.
async fn post_2025(oxp: &Oxp, method: &str, params: Value) -> Value {
    let reply = oxp
        .request(reqwest::Method::POST, "/mcp")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2025-11-25")
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}))
        .send()
        .await
        .unwrap();
    let content_type = reply.headers()["content-type"].to_str().unwrap().to_owned();
    let body = reply.text().await.unwrap();
    harness::mcp_messages(&content_type, &body).pop().unwrap()
}

/// Over stateless HTTP no stream outlives a request: `resources.subscribe` is not declared, and a
/// subscription of a URI the server serves is acknowledged (the request was valid), with the
/// same errors as over a connection.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_http_a_subscription_is_acknowledged_and_not_declared() {
    let pipeline = Pipeline::new(subscribing_registry());
    let mcp = McpServer::new(pipeline.clone()).into_router();
    let oxp = Oxp::start(Server::from_pipeline(pipeline).nest("/mcp", mcp)).await;
    let initialize = json!({"protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "plain", "version": "1"}});
    let initialized = post_2025(&oxp, "initialize", initialize).await;
    let resources = &initialized["result"]["capabilities"]["resources"];
    assert!(resources.is_object(), "{initialized}");
    assert_eq!(resources.get("subscribe"), None, "{initialized}");

    for method in ["resources/subscribe", "resources/unsubscribe"] {
        let answer = post_2025(&oxp, method, json!({"uri": "notes://today"})).await;
        assert_eq!(answer["result"], json!({}), "{method}: {answer}");
        let unknown = post_2025(&oxp, method, json!({"uri": "notes://nowhere"})).await;
        assert_eq!(unknown["error"]["code"], -32602, "{method}: {unknown}");
        assert_eq!(
            unknown["error"]["data"]["uri"], "notes://nowhere",
            "{unknown}"
        );
        let bad = post_2025(&oxp, method, json!({"uri": 5})).await;
        assert_eq!(bad["error"]["code"], -32602, "{method}: {bad}");
        // 2026-07-28 removed the method: unknown, even without the params it once had.
        let removed = harness::mcp_2026_events(&oxp, method, json!({})).await;
        assert_eq!(removed[0]["error"]["code"], -32601, "{method}: {removed:?}");
    }
}

/// A server started as `<bin> mcp` (`serve()` over stdio): the subscribed client is told of the
/// note its tool call rewrote, and once it unsubscribed, no more.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[allow(deprecated)] // as above
async fn over_stdio_the_subscriber_is_told() {
    let mut command = tokio::process::Command::new(harness::test_example_binary("notes_server"));
    command.arg("mcp").env("OXP_LOG", "warn");
    let (sender, mut updates) = tokio::sync::mpsc::unbounded_channel();
    let transport = rmcp::transport::TokioChildProcess::new(command).unwrap();
    let client = harness::bounded("initialize", Watching(sender).serve(transport))
        .await
        .unwrap();
    let capabilities = &client.peer_info().unwrap().capabilities;
    let declared = capabilities.resources.as_ref().and_then(|r| r.subscribe);
    assert_eq!(declared, Some(true), "{capabilities:?}");
    let write = |day: &str, text: &str| {
        let arguments = json!({"day": day, "text": text})
            .as_object()
            .unwrap()
            .clone();
        client.call_tool(
            rmcp::model::CallToolRequestParams::new("Notes_Write").with_arguments(arguments),
        )
    };

    client
        .subscribe(subscription("notes://monday"))
        .await
        .unwrap();
    write("monday", "buy milk").await.unwrap();
    assert_eq!(next_update(&mut updates).await, "notes://monday");
    let read = client
        .read_resource(ReadResourceRequestParams::new("notes://monday"))
        .await
        .unwrap();
    assert_eq!(
        serde_json::to_value(&read).unwrap()["contents"][0]["text"],
        "buy milk"
    );

    // Unsubscribed from Monday, subscribed to Tuesday: Monday's next change is not told, and
    // Tuesday's, made after it, is the next notification.
    client
        .unsubscribe(serde_json::from_value(json!({"uri": "notes://monday"})).unwrap())
        .await
        .unwrap();
    client
        .subscribe(subscription("notes://tuesday"))
        .await
        .unwrap();
    write("monday", "sell milk").await.unwrap();
    write("tuesday", "rest").await.unwrap();
    assert_eq!(next_update(&mut updates).await, "notes://tuesday");
    client.cancel().await.unwrap();
}
