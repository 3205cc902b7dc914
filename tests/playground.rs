//! The playground page: served on loopback by default and off otherwise, and driven in a real
//! headless Chromium (Debian's, through npm's playwright-core) against the example server.

#[path = "harness/mod.rs"]
mod harness;

use std::path::Path;
use std::process::Command;

use harness::Oxp;
use oxp_runtime::app::ServerConfig;
use oxp_runtime::prompt::Message;
use oxp_runtime::server::Server;
use oxp_runtime::{ToolError, prompt, resource};
use serde_json::{Value, json};

#[tokio::test]
async fn the_page_is_served_when_on_and_absent_when_off() {
    let on =
        Oxp::start(Server::new(oxp_tests::all_tools().build().unwrap()).playground(true)).await;
    let page = reqwest::get(format!("{}/", on.base)).await.unwrap();
    assert_eq!(page.status(), 200);
    assert!(
        page.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/html")
    );
    let html = page.text().await.unwrap();
    assert!(html.contains("oxp playground"));
    assert!(
        !html.contains("<script src") && !html.contains("<link "),
        "self-contained: nothing loaded from elsewhere"
    );
    let off = Oxp::start(Server::new(oxp_tests::all_tools().build().unwrap())).await;
    assert_eq!(off.get("/").await.status, 404);
    // The default follows the address: on for loopback, off otherwise.
    let config = |addr: &str| {
        ServerConfig::from_lookup(|n| (n == "OXP_ADDR").then(|| addr.to_owned())).unwrap()
    };
    assert!(config("127.0.0.1:8000").playground);
    assert!(!config("0.0.0.0:8000").playground);
}

/// The settings, as a fixed resource.
#[resource(uri = "config://app", mime_type = "application/json")]
fn settings() -> &'static str {
    r#"{"theme": "dark"}"#
}

/// A numbered page of a book.
#[resource(uri = "book://{page}", title = "A page")]
fn page(
    /// The page's number.
    page: u32,
) -> Result<String, ToolError> {
    if page == 0 {
        return Err(ToolError::new("Pages start at 1."));
    }
    Ok(format!("page {page}"))
}

/// Review some code.
#[prompt(title = "Code review")]
fn review(
    /// The code.
    code: String,
    /// What to look at.
    focus: Option<String>,
) -> Vec<Message> {
    vec![
        Message::user(format!(
            "Review for {}:\n{code}",
            focus.unwrap_or("bugs".into())
        )),
        Message::assistant("Send it."),
    ]
}

/// A skill shipped by hand, with a text file and an image.
static GREETING: oxp_runtime::skill::SkillDescriptor = oxp_runtime::skill::SkillDescriptor {
    name: "greeting",
    description: "Greet people warmly.",
    frontmatter: r#"{"name": "greeting", "description": "Greet people warmly."}"#,
    files: &[
        oxp_runtime::skill::SkillFile {
            path: "SKILL.md",
            bytes: b"---\nname: greeting\ndescription: Greet people warmly.\n---\nSay hello.\n",
        },
        oxp_runtime::skill::SkillFile {
            path: "assets/wave.png",
            bytes: &[0x89, b'P', b'N', b'G', 0xff],
        },
    ],
    source: "skills/greeting/SKILL.md",
};

/// The playground's skills: listed with their files, each read as MCP's `resources/read` gives
/// it (text as text, an image as base64), a file no skill has a 404.
#[tokio::test]
async fn skills_are_listed_and_read_for_the_page() {
    let registry = oxp_tests::all_tools().skill(&GREETING).build().unwrap();
    let oxp = Oxp::start(Server::new(registry).playground(true)).await;
    let listed = oxp.get("/playground/skills").await;
    assert_eq!(
        listed.body,
        json!({"skills": [{
            "name": "greeting",
            "description": "Greet people warmly.",
            "uri": "skill://greeting/SKILL.md",
            "files": [
                {"uri": "skill://greeting/SKILL.md", "size": 68},
                {"uri": "skill://greeting/assets/wave.png", "size": 5},
            ],
        }]})
    );
    let read = |uri: &str| {
        oxp.request(reqwest::Method::POST, "/playground/skills/read")
            .json(&json!({ "uri": uri }))
    };
    let text = oxp.send(read("skill://greeting/SKILL.md")).await;
    assert_eq!(text.status, 200);
    assert_eq!(
        text.body["contents"][0],
        json!({"uri": "skill://greeting/SKILL.md", "mimeType": "text/markdown",
               "text": "---\nname: greeting\ndescription: Greet people warmly.\n---\nSay hello.\n"})
    );
    let image = oxp.send(read("skill://greeting/assets/wave.png")).await;
    assert_eq!(
        image.body["contents"][0],
        json!({"uri": "skill://greeting/assets/wave.png", "mimeType": "image/png", "blob": "iVBOR/8="})
    );
    let missing = oxp.send(read("skill://greeting/none.md")).await;
    assert_eq!(missing.status, 404);
    assert!(
        missing.body["message"]
            .as_str()
            .unwrap()
            .contains("none.md")
    );
    let unnamed = oxp
        .send(
            oxp.request(reqwest::Method::POST, "/playground/skills/read")
                .json(&json!({})),
        )
        .await;
    assert_eq!(unnamed.status, 400);
}

/// The playground's own routes for what OXP 1.0 has no place for: the resources and prompts
/// listed with what the page needs to fill them, read and rendered through the pipeline, and
/// every way one can fail answered in the page's terms.
#[tokio::test]
async fn resources_and_prompts_are_listed_read_and_rendered_for_the_page() {
    let registry = oxp_tests::all_tools()
        .resource(settings::RESOURCE)
        .resource(page::RESOURCE)
        .prompt(review::PROMPT)
        .build()
        .unwrap();
    let oxp = Oxp::start(Server::new(registry).playground(true)).await;
    let post = |path: &str, body: Value| {
        oxp.request(reqwest::Method::POST, &format!("/playground/{path}"))
            .json(&body)
    };

    let listed = oxp.get("/playground/resources").await;
    assert_eq!(listed.status, 200);
    assert_eq!(
        listed.body,
        json!({
            "resources": [{"uri": "config://app", "name": "settings", "title": null,
                           "description": "The settings, as a fixed resource.",
                           "mime_type": "application/json", "parameters": []}],
            "templates": [{"uri": "book://{page}", "name": "page", "title": "A page",
                           "description": "A numbered page of a book.", "mime_type": null,
                           "parameters": [{"name": "page", "description": "The page's number.", "required": true}]}],
        })
    );
    let prompts = oxp.get("/playground/prompts").await;
    assert_eq!(
        prompts.body["prompts"][0]["arguments"],
        json!([
            {"name": "code", "description": "The code.", "required": true},
            {"name": "focus", "description": "What to look at.", "required": false},
        ])
    );

    let read = oxp
        .send(post("resources/read", json!({"uri": "book://7"})))
        .await;
    assert_eq!(
        read.body,
        json!({"contents": [{"uri": "book://7", "mimeType": "text/plain", "text": "page 7"}]})
    );
    let fixed = oxp
        .send(post("resources/read", json!({"uri": "config://app"})))
        .await;
    assert_eq!(fixed.body["contents"][0]["text"], r#"{"theme": "dark"}"#);
    let rendered = oxp
        .send(post(
            "prompts/get",
            json!({"name": "review", "arguments": {"code": "fn f() {}"}}),
        ))
        .await;
    assert_eq!(
        rendered.body,
        json!({
            "description": "Review some code.",
            "messages": [
                {"role": "user", "content": {"type": "text", "text": "Review for bugs:\nfn f() {}"}},
                {"role": "assistant", "content": {"type": "text", "text": "Send it."}},
            ],
        })
    );

    // Each failure in the page's terms: what is not there 404, an argument 400, the
    // function's own error 200 with it, a body that is not an object 400.
    let cases = [
        (
            post("resources/read", json!({"uri": "book://x/y"})),
            404,
            "No resource serves `book://x/y`.",
        ),
        (
            post("resources/read", json!({"uri": "book://seven"})),
            400,
            "seven",
        ),
        (
            post("resources/read", json!({})),
            400,
            "Name the resource to read",
        ),
        (
            post("prompts/get", json!({"name": "review"})),
            400,
            "the argument `code` is required",
        ),
        (
            post("prompts/get", json!({"name": "nope"})),
            404,
            "No prompt is named `nope`.",
        ),
        (
            post("prompts/get", json!({"name": "review", "arguments": ["x"]})),
            400,
            "`arguments` is an object",
        ),
        (
            post("prompts/get", json!([1])),
            400,
            "The body must be a JSON object.",
        ),
    ];
    for (request, status, message) in cases {
        let reply = oxp.send(request).await;
        assert_eq!(reply.status, status, "{reply:?}");
        let said = reply.body["message"].as_str().unwrap_or_default();
        assert!(said.contains(message), "{said:?} lacks {message:?}");
    }
    let failed = oxp
        .send(post("resources/read", json!({"uri": "book://0"})))
        .await;
    assert_eq!(failed.status, 200);
    assert_eq!(
        failed.body,
        json!({"error": {"message": "Pages start at 1."}})
    );
}

/// Chromium's path, if node, Chromium and playwright-core are all here (else the test skips).
fn browser() -> Option<String> {
    let here = Path::new(env!("CARGO_MANIFEST_DIR"));
    let chromium = std::env::var("OXP_CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".into());
    let node = Command::new("node")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    let playwright = here.join("browser/node_modules/playwright-core").exists();
    if !node || !Path::new(&chromium).exists() || !playwright {
        harness::skip(
            "node, Debian's chromium and playwright-core (`apt-get install chromium`, `npm install` in tests/browser)",
        );
        return None;
    }
    Some(chromium)
}

#[test]
fn the_page_works_in_a_real_browser() {
    let here = Path::new(env!("CARGO_MANIFEST_DIR"));
    let Some(chromium) = browser() else {
        return;
    };
    let example = harness::start_example(&[]);
    let screenshot = here.join("../target/playground.png");
    // A screenshot left by an earlier run must not pass for this one's.
    let _ = std::fs::remove_file(&screenshot);
    let output = Command::new("node")
        .arg(here.join("browser/playground.mjs"))
        .arg(&example.base)
        .arg(&screenshot)
        .env("OXP_CHROMIUM", &chromium)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stdout}\n{stderr}");
    for step in [
        "value: ok",
        "422 field error: ok",
        "retry hint: ok",
        "hints and examples: ok",
        "destructive confirmation: ok",
        "resources: ok",
        "prompts: ok",
        "skills: ok",
    ] {
        assert!(stdout.contains(step), "{step} missing:\n{stdout}");
    }
    assert!(screenshot.exists());
}

/// A task tool in the page: called as an MCP task, its status and status message shown while
/// it runs, cancelled from the page, and a finished one's value shown; the questions a tool
/// asks inside its task and before it shown as forms, answered (accepted or declined) from the
/// page; and a plain tool and a prompt that ask, called over MCP from the page, answered there
/// too.
#[test]
fn the_page_follows_a_task_in_a_real_browser() {
    let here = Path::new(env!("CARGO_MANIFEST_DIR"));
    let Some(chromium) = browser() else {
        return;
    };
    let server = harness::start_server(&harness::test_example_binary("task_server"), &[]);
    let output = Command::new("node")
        .arg(here.join("browser/tasks.mjs"))
        .arg(&server.base)
        .env("OXP_CHROMIUM", &chromium)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stdout}\n{stderr}");
    for step in [
        "running status: ok",
        "cancel: ok",
        "result: ok",
        "questions inside a task: ok",
        "a declined question: ok",
        "a question before the task: ok",
        "a plain tool's question over MCP: ok",
        "a prompt's question over MCP: ok",
    ] {
        assert!(stdout.contains(step), "{step} missing:\n{stdout}");
    }
}
