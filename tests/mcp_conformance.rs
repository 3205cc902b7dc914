//! The official MCP conformance suite (`@modelcontextprotocol/conformance`, npm, pinned in
//! `mcp_conformance/package.json`) against `/mcp` of a server whose tools are written with
//! `#[tool]` under the names the suite calls: the scenarios MCP 2026-07-28 requires
//! (`--requirements 2026-07-28`), three more on headers and schemas, the skills and tasks
//! extensions', and the earlier revisions' scenarios at 2025-11-25. What may fail is listed in `mcp_conformance/expected-failures.yaml`,
//! each with its reason (the table in `oxp-runtime/guide/mcp.md`); a listed scenario that passes fails the run too.

#[path = "harness/mod.rs"]
mod harness;

use std::process::Command;
use std::time::Duration;

use oxp_runtime::call::Pipeline;
use oxp_runtime::content::{Content, Contents};
use oxp_runtime::mcp::McpServer;
use oxp_runtime::prompt::Message;
use oxp_runtime::server::Server;
use oxp_runtime::{Registry, ToolContext, ToolError, prompt, resource, tool};

/// Scenarios outside the 2026-07-28 requirement set that a tool server must pass, and the
/// skills extension's.
const MORE: [&str; 6] = [
    "json-schema-2020-12",
    "http-header-validation",
    "http-custom-header-server-validation",
    "sep-2640-skills-enumeration",
    "sep-2640-skills-manifest",
    "sep-2640-skills-directory",
];

/// The tasks extension's scenarios (SEP-2663), all but `tasks-status-notifications`, which the
/// pinned suite leaves a placeholder that skips.
const TASKS: [&str; 9] = [
    "tasks-lifecycle",
    "tasks-capability-negotiation",
    "tasks-wire-fields",
    "tasks-request-state-removal",
    "tasks-mrtr-input",
    "tasks-request-headers",
    "tasks-dispatch-and-envelope",
    "tasks-required-task-error",
    "tasks-mrtr-composition",
];

/// Earlier revisions' scenarios (run at 2025-11-25): clients of those revisions are most of the
/// hosts in use. Subscriptions are theirs alone (2026-07-28 removed `resources/subscribe`).
const EARLIER: [&str; 11] = [
    "server-initialize",
    "ping",
    "tools-list",
    "tools-call-simple-text",
    "tools-call-error",
    "tools-call-with-progress",
    "tools-call-with-logging",
    "logging-set-level",
    "dns-rebinding-protection",
    "resources-subscribe",
    "resources-unsubscribe",
];

// The suite's tool names are our wire names `Toolkit_Name`: toolkit `test`.

/// Returns a simple text.
#[tool(toolkit = "test", name = "simple_text", version = "1.0.0")]
fn simple_text() -> &'static str {
    "This is a simple text response for testing."
}

/// Always fails.
#[tool(toolkit = "test", name = "error_handling", version = "1.0.0")]
fn error_handling() -> Result<(), ToolError> {
    Err(ToolError::new(
        "This tool intentionally returns an error for testing",
    ))
}

/// Reports progress in three steps.
#[tool(toolkit = "test", name = "tool_with_progress", version = "1.0.0")]
async fn tool_with_progress(ctx: &ToolContext) -> &'static str {
    for done in [0, 50, 100] {
        ctx.progress(done, Some(100), Some("working"));
        tokio::time::sleep(Duration::from_millis(80)).await;
    }
    "done"
}

/// Logs three messages.
#[tool(toolkit = "test", name = "tool_with_logging", version = "1.0.0")]
async fn tool_with_logging() -> &'static str {
    for step in ["starting", "halfway", "finished"] {
        tracing::info!(step, "the tool is {step}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    "logged"
}

/// A 1×1 red PNG.
const RED_PIXEL: &[u8] = &[
    0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x48, 0x44, 0x52,
    0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01, 0x08, 0x02, 0x00, 0x00, 0x00, 0x90, 0x77, 0x53,
    0xde, 0x00, 0x00, 0x00, 0x0c, 0x49, 0x44, 0x41, 0x54, 0x08, 0xd7, 0x63, 0xf8, 0xcf, 0xc0, 0x00,
    0x00, 0x03, 0x01, 0x01, 0x00, 0x18, 0xdd, 0x8d, 0xb0, 0x00, 0x00, 0x00, 0x00, 0x49, 0x45, 0x4e,
    0x44, 0xae, 0x42, 0x60, 0x82,
];

/// Returns an image.
#[tool(toolkit = "test", name = "image_content", version = "1.0.0")]
fn image_content() -> Result<Contents, ToolError> {
    Ok(Contents::new([Content::image(RED_PIXEL, "image/png")?]))
}

/// Returns a sound: a WAV file with no samples.
#[tool(toolkit = "test", name = "audio_content", version = "1.0.0")]
fn audio_content() -> Result<Contents, ToolError> {
    let mut wav = Vec::new();
    wav.extend_from_slice(b"RIFF");
    wav.extend_from_slice(&36u32.to_le_bytes());
    wav.extend_from_slice(b"WAVEfmt ");
    for field in [16u32, 0x0001_0001, 8000, 16000, 0x0010_0002] {
        wav.extend_from_slice(&field.to_le_bytes());
    }
    wav.extend_from_slice(b"data");
    wav.extend_from_slice(&0u32.to_le_bytes());
    Ok(Contents::new([Content::audio(wav, "audio/wav")?]))
}

/// Returns an embedded resource.
#[tool(toolkit = "test", name = "embedded_resource", version = "1.0.0")]
fn embedded_resource() -> Result<Contents, ToolError> {
    Ok(Contents::new([Content::text_resource(
        "test://embedded-resource",
        "text/plain",
        "This is an embedded resource content.",
    )?]))
}

/// Returns text, an image and a resource.
#[tool(toolkit = "test", name = "multiple_content_types", version = "1.0.0")]
fn multiple_content_types() -> Result<Contents, ToolError> {
    Ok(Contents::new([
        Content::text("Multiple content types test:"),
        Content::image(RED_PIXEL, "image/png")?,
        Content::text_resource(
            "test://mixed-content-resource",
            "application/json",
            r#"{"test":"data","value":123}"#,
        )?,
    ]))
}

/// Echoes a region, which clients also send in the `Mcp-Param-Region` header.
#[tool(toolkit = "test", name = "custom_headers", version = "1.0.0")]
fn custom_headers(
    /// The region.
    #[mcp_header("Region")]
    region: String,
) -> String {
    format!("region {region}")
}

/// A name, asked of the user.
#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Name {
    name: String,
}

/// A colour, asked of the user.
#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Colour {
    color: String,
}

/// A yes or no, asked of the user.
#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Ok {
    ok: bool,
}

/// Greets the user by the name it asks for.
#[tool(
    toolkit = "test",
    name = "input_required_result_elicitation",
    version = "1.0.0"
)]
fn elicitation(ctx: &ToolContext) -> Result<String, ToolError> {
    let Name { name } = ctx.ask("user_name", "What is your name?")?;
    Ok(format!("Hello, {name}!"))
}

/// Asks the client's model a question.
#[tool(
    toolkit = "test",
    name = "input_required_result_sampling",
    version = "1.0.0"
)]
fn sampling(ctx: &ToolContext) -> Result<String, ToolError> {
    Ok(ctx.sample("capital_question", "What is the capital of France?", 100)?)
}

/// Lists the client's roots.
#[tool(
    toolkit = "test",
    name = "input_required_result_list_roots",
    version = "1.0.0"
)]
fn list_roots(ctx: &ToolContext) -> Result<String, ToolError> {
    let roots = ctx.roots("client_roots")?;
    let uris: Vec<String> = roots.into_iter().map(|root| root.uri).collect();
    Ok(format!("roots: {}", uris.join(", ")))
}

/// Asks for a confirmation, carried across rounds in the request state.
#[tool(
    toolkit = "test",
    name = "input_required_result_request_state",
    version = "1.0.0"
)]
fn request_state(ctx: &ToolContext) -> Result<String, ToolError> {
    let Ok { ok } = ctx.ask("confirm", "Please confirm")?;
    Ok(format!("state-ok: confirmed {ok}"))
}

/// Asks the user, the client's model and the client's roots at once.
#[tool(
    toolkit = "test",
    name = "input_required_result_multiple_inputs",
    version = "1.0.0"
)]
fn multiple_inputs(ctx: &ToolContext) -> Result<String, ToolError> {
    let name = ctx.ask::<Name>("user_name", "What is your name?");
    let greeting = ctx.sample("greeting", "Generate a greeting", 50);
    let roots = ctx.roots("client_roots");
    let (Name { name }, greeting, roots) = (name?, greeting?, roots?);
    Ok(format!("{greeting}, {name} ({} roots)", roots.len()))
}

/// Asks in two rounds.
#[tool(
    toolkit = "test",
    name = "input_required_result_multi_round",
    version = "1.0.0"
)]
fn multi_round(ctx: &ToolContext) -> Result<String, ToolError> {
    let Name { name } = ctx.ask("step1", "Step 1: What is your name?")?;
    let Colour { color } = ctx.ask("step2", "Step 2: What is your favorite color?")?;
    Ok(format!("{name} likes {color}"))
}

/// Asks for a confirmation; its request state is sealed.
#[tool(
    toolkit = "test",
    name = "input_required_result_tampered_state",
    version = "1.0.0"
)]
fn tampered_state(ctx: &ToolContext) -> Result<String, ToolError> {
    let Ok { ok } = ctx.ask("confirm", "Please confirm")?;
    Ok(format!("confirmed {ok}"))
}

/// Asks the client's model, and the user if the client can ask it.
#[tool(
    toolkit = "test",
    name = "input_required_result_capabilities",
    version = "1.0.0"
)]
fn capabilities(ctx: &ToolContext) -> Result<String, ToolError> {
    let answer = ctx.sample("question", "Say hello", 20);
    let name = ctx.ask::<Name>("user_name", "What is your name?").ok();
    let name = name.map_or_else(|| "someone".to_owned(), |n| n.name);
    Ok(format!("{} to {name}", answer?))
}

/// Needs the client's model: a client without sampling cannot call it.
#[tool(toolkit = "test", name = "missing_capability", version = "1.0.0")]
fn missing_capability(ctx: &ToolContext) -> Result<String, ToolError> {
    Ok(ctx.sample("question", "Say hello", 20)?)
}

/// Asks the user mid-call.
#[tool(toolkit = "test", name = "streaming_elicitation", version = "1.0.0")]
fn streaming_elicitation(ctx: &ToolContext) -> Result<String, ToolError> {
    let Name { name } = ctx.ask("user_name", "What is your name?")?;
    Ok(format!("Hello, {name}!"))
}

/// Logs as it works.
#[tool(toolkit = "test", name = "logging_tool", version = "1.0.0")]
async fn logging_tool() -> &'static str {
    tracing::info!("the tool is working");
    "logged"
}

/// The input of `json_schema_2020_12_tool`, with the schema the suite checks: written by hand,
/// with a definition and its anchor, composition and conditionals.
#[derive(serde::Deserialize)]
#[allow(dead_code)]
struct Contact {
    name: Option<String>,
    address: Option<serde_json::Value>,
    #[serde(rename = "contactMethod")]
    contact_method: Option<String>,
    phone: Option<String>,
    email: Option<String>,
}

impl schemars::JsonSchema for Contact {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Contact".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "type": "object",
            "$defs": {"address": {"$anchor": "addressDef", "type": "object",
                "properties": {"street": {"type": "string"}, "city": {"type": "string"}}}},
            "properties": {
                "name": {"type": "string"},
                "address": {"$ref": "#/$defs/address"},
                "contactMethod": {"type": "string", "enum": ["phone", "email"]},
                "phone": {"type": "string"},
                "email": {"type": "string"}
            },
            "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
            "if": {"properties": {"contactMethod": {"const": "phone"}}, "required": ["contactMethod"]},
            "then": {"required": ["phone"]},
            "else": {"required": ["email"]},
            "additionalProperties": false
        })
    }
}

/// Tool with JSON Schema 2020-12 features.
#[tool(toolkit = "json", name = "schema_2020_12_tool", version = "1.0.0")]
fn json_schema_tool(oxp_runtime::Input(contact): oxp_runtime::Input<Contact>) -> String {
    format!("contact {}", contact.name.unwrap_or_default())
}

// The tasks extension's fixtures (SEP-2663), under the exact names its scenarios call.

/// Greets someone (a tool that is never a task).
#[tool(
    toolkit = "test",
    name = "greet",
    wire_name = "greet",
    version = "1.0.0"
)]
fn greet(name: String) -> String {
    format!("Hello, {name}!")
}

/// Computes for `seconds`, then answers (a task for a client that declares the extension).
#[tool(
    toolkit = "test",
    name = "slow_compute",
    wire_name = "slow_compute",
    version = "1.0.0",
    task = "optional"
)]
async fn slow_compute(seconds: f64, label: Option<String>) -> String {
    tokio::time::sleep(Duration::from_secs_f64(seconds.max(0.0))).await;
    format!("computed {}", label.unwrap_or_default())
}

/// Fails as a tool does, after a moment (only ever a task).
#[tool(
    toolkit = "test",
    name = "failing_job",
    wire_name = "failing_job",
    version = "1.0.0",
    task = "required"
)]
async fn failing_job() -> Result<String, ToolError> {
    tokio::time::sleep(Duration::from_millis(100)).await;
    Err(ToolError::new("The job failed, as it always does."))
}

/// Panics after a moment: the task fails with a JSON-RPC error.
#[tool(
    toolkit = "test",
    name = "protocol_error_job",
    wire_name = "protocol_error_job",
    version = "1.0.0",
    task = "optional"
)]
async fn protocol_error_job() -> String {
    tokio::time::sleep(Duration::from_millis(100)).await;
    panic!("the job broke")
}

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Confirm {
    confirm: bool,
}

/// Deletes a file once the user confirms, asked inside the task.
#[tool(
    toolkit = "test",
    name = "confirm_delete",
    wire_name = "confirm_delete",
    version = "1.0.0",
    task = "optional"
)]
async fn confirm_delete(ctx: &ToolContext, filename: String) -> Result<String, ToolError> {
    tokio::task::yield_now().await;
    let Confirm { confirm } = ctx.ask("confirm", &format!("Delete {filename}?"))?;
    Ok(if confirm {
        format!("deleted {filename}")
    } else {
        format!("kept {filename}")
    })
}

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct NameAndConfirm {
    name: String,
    confirm: bool,
}

/// Asks two questions at once inside the task.
#[tool(
    toolkit = "test",
    name = "multi_input",
    wire_name = "multi_input",
    version = "1.0.0",
    task = "optional"
)]
async fn multi_input(ctx: &ToolContext) -> Result<String, ToolError> {
    tokio::task::yield_now().await;
    let first = ctx.ask::<NameAndConfirm>("first", "First input?");
    let second = ctx.ask::<NameAndConfirm>("second", "Second input?");
    let (first, second) = (first?, second?);
    Ok(format!(
        "{} and {} ({})",
        first.name,
        second.name,
        first.confirm && second.confirm
    ))
}

/// Asks the user's name before the task, then greets them as one.
#[tool(
    toolkit = "test",
    name = "tool_with_task",
    version = "1.0.0",
    task = "required"
)]
async fn tool_with_task(ctx: &ToolContext) -> Result<String, ToolError> {
    let Name { name } = ctx.ask("user_name", "What is your name?")?;
    tokio::time::sleep(Duration::from_millis(50)).await;
    Ok(format!("Hello, {name}!"))
}

// The suite's resources, prompts and completion, written with `#[resource]` and `#[prompt]`.

/// A static text resource.
#[resource(uri = "test://static-text", name = "static_text")]
fn static_text() -> &'static str {
    "This is the content of the static text resource."
}

/// A static binary resource: a 1×1 red PNG.
#[resource(
    uri = "test://static-binary",
    name = "static_binary",
    mime_type = "image/png"
)]
fn static_binary() -> Vec<u8> {
    RED_PIXEL.to_vec()
}

/// The resource the subscription scenarios subscribe to.
#[resource(uri = "test://watched-resource", name = "watched_resource")]
fn watched_resource() -> &'static str {
    "This resource is watched."
}

/// A resource template: data for an id.
#[resource(
    uri = "test://template/{id}/data",
    name = "template_data",
    mime_type = "application/json"
)]
fn template_data(
    /// The id.
    id: String,
) -> String {
    serde_json::json!({"id": id, "templateTest": true, "data": format!("Data for ID: {id}")})
        .to_string()
}

/// A simple prompt without arguments.
#[prompt]
fn test_simple_prompt() -> &'static str {
    "This is a simple prompt for testing."
}

/// What completion offers for `arg1`.
fn first_values(typed: &str) -> Vec<String> {
    ["testValue1", "test-value", "other"]
        .into_iter()
        .filter(|value| value.starts_with(typed))
        .map(str::to_owned)
        .collect()
}

/// A prompt with arguments.
#[prompt]
fn test_prompt_with_arguments(
    /// First test argument.
    #[complete(first_values)]
    arg1: String,
    /// Second test argument.
    arg2: String,
) -> String {
    format!("Prompt with arguments: arg1='{arg1}', arg2='{arg2}'")
}

/// A prompt with an embedded resource.
#[prompt]
fn test_prompt_with_embedded_resource(
    /// URI of the resource to embed.
    #[serde(rename = "resourceUri")]
    resource_uri: String,
) -> Result<Vec<Message>, ToolError> {
    Ok(vec![
        Message::user_content(Content::text_resource(
            resource_uri,
            "text/plain",
            "Embedded resource content for testing.",
        )?),
        Message::user("Please process the embedded resource above."),
    ])
}

/// A prompt with an image.
#[prompt]
fn test_prompt_with_image() -> Result<Vec<Message>, ToolError> {
    Ok(vec![
        Message::user_content(Content::image(RED_PIXEL, "image/png")?),
        Message::user("Please analyze the image above."),
    ])
}

/// The context a prompt asks its user for.
#[derive(serde::Deserialize, schemars::JsonSchema)]
struct PromptContext {
    context: String,
}

/// A prompt that asks its user for context before it is rendered.
#[prompt]
fn test_input_required_result_prompt(ctx: &ToolContext) -> Result<String, ToolError> {
    let PromptContext { context } =
        ctx.ask("user_context", "What context should the prompt use?")?;
    Ok(format!("Use this context: {context}"))
}

// The skills extension's scenarios read the skills in `tests/skills`.
oxp_runtime::skills!("skills");

/// The suite's binary, when `npm install` in `tests/mcp_conformance` put it there (with the
/// Node.js >= 22 it needs).
fn suite() -> Option<(std::path::PathBuf, std::path::PathBuf)> {
    let bin =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("mcp_conformance/node_modules/.bin");
    let (conformance, node) = (bin.join("conformance"), bin.join("node"));
    (conformance.exists() && node.exists()).then_some((conformance, bin))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_official_mcp_conformance_suite() {
    let Some((conformance, bin)) = suite() else {
        harness::skip("the MCP conformance suite (`npm install` in tests/mcp_conformance)");
        return;
    };
    // What serve() installs: tools' events reach their MCP clients.
    {
        use tracing_subscriber::layer::SubscriberExt;
        use tracing_subscriber::util::SubscriberInitExt;
        let _ = tracing_subscriber::registry()
            .with(oxp_runtime::mcp::log_layer())
            .try_init();
    }
    let registry = Registry::builder()
        .tool(simple_text::TOOL)
        .tool(error_handling::TOOL)
        .tool(tool_with_progress::TOOL)
        .tool(tool_with_logging::TOOL)
        .tool(image_content::TOOL)
        .tool(audio_content::TOOL)
        .tool(embedded_resource::TOOL)
        .tool(multiple_content_types::TOOL)
        .tool(custom_headers::TOOL)
        .tool(elicitation::TOOL)
        .tool(sampling::TOOL)
        .tool(list_roots::TOOL)
        .tool(request_state::TOOL)
        .tool(multiple_inputs::TOOL)
        .tool(multi_round::TOOL)
        .tool(tampered_state::TOOL)
        .tool(capabilities::TOOL)
        .tool(missing_capability::TOOL)
        .tool(streaming_elicitation::TOOL)
        .tool(logging_tool::TOOL)
        .tool(json_schema_tool::TOOL)
        .tool(greet::TOOL)
        .tool(slow_compute::TOOL)
        .tool(failing_job::TOOL)
        .tool(protocol_error_job::TOOL)
        .tool(confirm_delete::TOOL)
        .tool(multi_input::TOOL)
        .tool(tool_with_task::TOOL)
        .resource(static_text::RESOURCE)
        .resource(static_binary::RESOURCE)
        .resource(template_data::RESOURCE)
        .resource(watched_resource::RESOURCE)
        .prompt(test_simple_prompt::PROMPT)
        .prompt(test_prompt_with_arguments::PROMPT)
        .prompt(test_prompt_with_embedded_resource::PROMPT)
        .prompt(test_prompt_with_image::PROMPT)
        .prompt(test_input_required_result_prompt::PROMPT)
        .all_skills()
        .build()
        .unwrap();
    let pipeline = Pipeline::new(registry);
    let mcp = McpServer::new(pipeline.clone()).into_router();
    // Served as `serve()` serves, so the loopback listener's Host check is on.
    let server = Server::from_pipeline(pipeline).nest("/mcp", mcp);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    let serving =
        tokio::spawn(server.serve(listener, std::future::pending(), Duration::from_secs(1)));
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let baseline = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("mcp_conformance/expected-failures.yaml")
        .display()
        .to_string();
    let mut runs: Vec<Vec<String>> = vec![vec![
        "--requirements".into(),
        "2026-07-28".into(),
        "--expected-failures".into(),
        baseline.clone(),
    ]];
    for scenario in MORE.into_iter().chain(TASKS) {
        runs.push(vec![
            "--scenario".into(),
            scenario.into(),
            "--expected-failures".into(),
            baseline.clone(),
        ]);
    }
    for scenario in EARLIER {
        runs.push(vec![
            "--scenario".into(),
            scenario.into(),
            "--spec-version".into(),
            "2025-11-25".into(),
        ]);
    }
    // A local probe: OXP_CONFORMANCE_ARGS="--scenario caching" runs that alone, and prints it.
    if let Ok(args) = std::env::var("OXP_CONFORMANCE_ARGS") {
        runs = vec![args.split(' ').map(str::to_owned).collect()];
    }
    for args in runs {
        let (conformance, url, path) = (conformance.clone(), url.clone(), path.clone());
        let shown = args.join(" ");
        let output = tokio::task::spawn_blocking(move || {
            Command::new(conformance)
                .args(["server", "--url", &url])
                .args(&args)
                .env("PATH", path)
                .env("NO_COLOR", "1")
                .output()
                .unwrap()
        })
        .await
        .unwrap();
        let stdout = String::from_utf8_lossy(&output.stdout);
        let stderr = String::from_utf8_lossy(&output.stderr);
        if std::env::var("OXP_CONFORMANCE_ARGS").is_ok() {
            println!("{stdout}\n{stderr}");
            continue;
        }
        assert!(
            output.status.success() && !stdout.contains("Passed: 0/"),
            "conformance {shown} failed:\n{stdout}\n{stderr}"
        );
    }
    serving.abort();
}
