//! The MCP Server Card (SEP-2127) and the AI Catalog: the card's shape against the published v1
//! schema (`spec/server-card.schema.json`), its fields from the crate and the public URL, the
//! headers a cache and a browser need (strong `ETag`, `304`, CORS for pages of any origin while
//! every other route still refuses them), the catalog pointing at it, and `<bin> card`.

#[path = "harness/mod.rs"]
mod harness;

use harness::Oxp;
use oxp_runtime::call::Pipeline;
use oxp_runtime::mcp::McpServer;
use oxp_runtime::server::{Server, ServerAuth};
use oxp_runtime::{Registry, tool};
use reqwest::Method;
use serde_json::{Value, json};

/// Add two numbers.
#[tool(toolkit = "Calculator", version = "1.0.0")]
fn add(a: i64, b: i64) -> i64 {
    a + b
}

const PUBLIC: &str = "https://tools.example.com";

/// The v1 schema, its `ServerCard` as the root; `closed`: with every object of the card refusing
/// keys the schema does not name (the published schema leaves them open for `_meta`-style
/// growth; oxp's card says nothing beyond it).
fn validator(closed: bool) -> jsonschema::Validator {
    let text = include_str!("spec/server-card.schema.json");
    let mut schema: Value = serde_json::from_str(text).unwrap();
    if closed {
        for name in ["ServerCard", "Remote", "Repository", "Icon"] {
            schema["$defs"][name]["additionalProperties"] = json!(false);
        }
    }
    schema["$ref"] = json!("#/$defs/ServerCard");
    jsonschema::options()
        .should_validate_formats(true)
        .build(&schema)
        .unwrap()
}

fn assert_card(card: &Value) {
    for closed in [false, true] {
        let validator = validator(closed);
        let errors: Vec<String> = validator.iter_errors(card).map(|e| e.to_string()).collect();
        assert!(errors.is_empty(), "closed: {closed}: {errors:?}\n{card:#}");
    }
}

async fn server(auth: Option<&str>) -> Oxp {
    let pipeline = Pipeline::new(Registry::builder().tool(add::TOOL).build().unwrap());
    let mcp = McpServer::new(pipeline.clone()).into_router();
    let mut server = Server::from_pipeline(pipeline)
        .nest("/mcp", mcp)
        .public_url(PUBLIC)
        .server_card(oxp_runtime::server_card!().title("Calculator"))
        .unwrap();
    if let Some(key) = auth {
        server = server.auth(ServerAuth::default().api_key(key));
    }
    Oxp::start(server).await
}

#[test]
fn the_schema_refuses_what_the_v1_shape_does_not_allow() {
    // The validator is not a rubber stamp: each of these is refused.
    let good = json!({
        "$schema": "https://static.modelcontextprotocol.io/schemas/v1/server-card.schema.json",
        "name": "com.example/calc", "version": "1.0.0", "description": "Adds."
    });
    assert_card(&good);
    for (key, value) in [
        ("name", json!("calc")),
        ("description", json!("x".repeat(101))),
        ("tools", json!([])),
        ("capabilities", json!({})),
    ] {
        let mut bad = good.clone();
        bad[key] = value;
        assert!(!validator(true).is_valid(&bad), "{key}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_card_is_the_crates_and_the_public_urls_in_the_v1_shape() {
    let oxp = server(None).await;
    let reply = oxp
        .request(Method::GET, "/mcp/server-card")
        .header("accept", "application/mcp-server-card+json")
        .send()
        .await
        .unwrap();
    assert_eq!(reply.status(), 200);
    assert_eq!(
        reply.headers()["content-type"],
        "application/mcp-server-card+json"
    );
    let card: Value = reply.json().await.unwrap();
    assert_card(&card);
    assert_eq!(
        card,
        json!({
            "$schema": "https://static.modelcontextprotocol.io/schemas/v1/server-card.schema.json",
            // No repository or homepage in this crate's Cargo.toml: the public URL's host.
            "name": "com.example.tools/oxp-tests",
            "version": env!("CARGO_PKG_VERSION"),
            "description": env!("CARGO_PKG_DESCRIPTION"),
            "title": "Calculator",
            "remotes": [{
                "type": "streamable-http",
                "url": "https://tools.example.com/mcp",
                // The revisions `/mcp` serves.
                "supportedProtocolVersions":
                    ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25", "2026-07-28"],
            }],
        })
    );
    // The older location answers the same document.
    let legacy = oxp
        .request(Method::GET, "/.well-known/mcp/server-card.json")
        .send()
        .await
        .unwrap();
    assert_eq!(legacy.status(), 200);
    assert_eq!(legacy.json::<Value>().await.unwrap(), card);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cache_revalidates_the_card_with_its_strong_etag() {
    let oxp = server(None).await;
    let first = oxp
        .request(Method::GET, "/mcp/server-card")
        .send()
        .await
        .unwrap();
    assert_eq!(first.headers()["cache-control"], "public, max-age=3600");
    let etag = first.headers()["etag"].to_str().unwrap().to_owned();
    assert!(
        etag.starts_with('"') && etag.ends_with('"'),
        "strong: {etag}"
    );
    let body = first.bytes().await.unwrap();
    // Unchanged: 304, no body, the same validator.
    for validators in [etag.clone(), format!("\"other\", {etag}"), "*".into()] {
        let again = oxp
            .request(Method::GET, "/mcp/server-card")
            .header("if-none-match", &validators)
            .send()
            .await
            .unwrap();
        assert_eq!(again.status(), 304, "{validators}");
        assert_eq!(again.headers()["etag"], etag.as_str());
        assert_eq!(again.headers()["access-control-allow-origin"], "*");
        assert!(again.bytes().await.unwrap().is_empty());
    }
    let changed = oxp
        .request(Method::GET, "/mcp/server-card")
        .header("if-none-match", "\"an-older-card\"")
        .send()
        .await
        .unwrap();
    assert_eq!(changed.status(), 200);
    assert_eq!(changed.bytes().await.unwrap(), body);
    // The same card served again (another replica, a restart) has the same validator.
    let other = server(None).await;
    let there = other
        .request(Method::GET, "/.well-known/mcp/server-card.json")
        .send()
        .await
        .unwrap();
    assert_eq!(there.headers()["etag"], etag.as_str());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pages_of_any_origin_read_the_card_and_catalog_and_nothing_else() {
    let key = "a-card-test-key-of-at-least-thirty-two-bytes";
    let oxp = server(Some(key)).await;
    let foreign = "https://elsewhere.example";
    for path in [
        "/mcp/server-card",
        "/.well-known/mcp/server-card.json",
        "/.well-known/ai-catalog.json",
    ] {
        // Without credentials, from a page of another origin.
        let read = oxp
            .request(Method::GET, path)
            .header("origin", foreign)
            .send()
            .await
            .unwrap();
        assert_eq!(read.status(), 200, "{path}");
        assert_eq!(read.headers()["access-control-allow-origin"], "*");
        assert_eq!(read.headers()["access-control-expose-headers"], "ETag");
        // The preflight of a revalidating GET.
        let preflight = oxp
            .request(Method::OPTIONS, path)
            .header("origin", foreign)
            .header("access-control-request-method", "GET")
            .header("access-control-request-headers", "if-none-match")
            .send()
            .await
            .unwrap();
        assert_eq!(preflight.status(), 204, "{path}");
        let allowed = |name: &str| preflight.headers()[name].to_str().unwrap().to_owned();
        assert_eq!(allowed("access-control-allow-origin"), "*");
        assert!(allowed("access-control-allow-methods").contains("GET"));
        assert!(allowed("access-control-allow-headers").contains("If-None-Match"));
        // Read, never written.
        let post = oxp
            .request(Method::POST, path)
            .header("content-type", "application/json")
            .body("{}")
            .send()
            .await
            .unwrap();
        assert_eq!(post.status(), 405, "{path}");
    }
    // Every other route still refuses that origin (MCP's MUST), the MCP endpoint beside the
    // card included, and still wants the key.
    for (method, path) in [(Method::GET, "/tools"), (Method::POST, "/mcp")] {
        let refused = oxp
            .request(method, path)
            .header("origin", foreign)
            .header("OXP-API-Key", key)
            .header("content-type", "application/json")
            .body(r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#)
            .send()
            .await
            .unwrap();
        assert_eq!(refused.status(), 403, "{path}");
    }
    let anonymous = oxp.request(Method::GET, "/tools").send().await.unwrap();
    assert_eq!(anonymous.status(), 401);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_ai_catalog_points_at_the_card() {
    let oxp = server(None).await;
    let reply = oxp
        .request(Method::GET, "/.well-known/ai-catalog.json")
        .send()
        .await
        .unwrap();
    assert_eq!(reply.status(), 200);
    assert_eq!(
        reply.headers()["content-type"],
        "application/ai-catalog+json"
    );
    assert!(reply.headers().contains_key("etag"));
    let catalog: Value = reply.json().await.unwrap();
    assert_eq!(
        catalog,
        json!({
            "specVersion": "1.0",
            "entries": [{
                "identifier": "urn:air:tools.example.com:mcp:oxp-tests",
                "type": "application/mcp-server-card+json",
                "url": "https://tools.example.com/mcp/server-card",
            }],
        })
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_without_a_card_serves_none_and_opens_nothing() {
    let pipeline = Pipeline::new(Registry::builder().tool(add::TOOL).build().unwrap());
    let mcp = McpServer::new(pipeline.clone()).into_router();
    let oxp = Oxp::start(Server::from_pipeline(pipeline).nest("/mcp", mcp)).await;
    for path in [
        "/.well-known/ai-catalog.json",
        "/.well-known/mcp/server-card.json",
    ] {
        let missing = oxp.request(Method::GET, path).send().await.unwrap();
        assert_eq!(missing.status(), 404, "{path}");
    }
    let foreign = oxp
        .request(Method::GET, "/mcp/server-card")
        .header("origin", "https://elsewhere.example")
        .send()
        .await
        .unwrap();
    assert_eq!(foreign.status(), 403);
}

#[test]
fn the_binary_prints_its_card_and_serves_it() {
    let binary = harness::example_binary();
    let printed = std::process::Command::new(&binary)
        .arg("card")
        .env("OXP_PUBLIC_URL", "https://calc.example.com/")
        .output()
        .unwrap();
    assert!(printed.status.success(), "{printed:?}");
    let card: Value = serde_json::from_slice(&printed.stdout).unwrap();
    assert_card(&card);
    assert_eq!(card["name"], "invalid.example/calculator", "{card}");
    assert_eq!(
        card["description"],
        "Adds and divides numbers, and rings doorbells: the oxp example server."
    );
    assert_eq!(card["repository"]["url"], "https://example.invalid/oxp");
    assert_eq!(card["remotes"][0]["url"], "https://calc.example.com/mcp");
    // What it prints is what it serves.
    let example = harness::start_example(&[("OXP_PUBLIC_URL", "https://calc.example.com/")]);
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let served: Value = runtime.block_on(async {
        reqwest::get(format!("{}/mcp/server-card", example.base))
            .await
            .unwrap()
            .json()
            .await
            .unwrap()
    });
    assert_eq!(served, card);
    // A binary whose main calls `serve()` has no card, and says how to publish one.
    let plain = harness::test_example_binary("notes_server");
    let none = std::process::Command::new(plain)
        .arg("card")
        .output()
        .unwrap();
    assert_eq!(none.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&none.stderr).contains("oxp_runtime::serve!()"),
        "{none:?}"
    );
}

#[test]
fn a_card_that_cannot_be_served_is_said_at_start_up_and_the_tools_are_served() {
    use std::io::{BufRead, BufReader};
    let binary = harness::test_example_binary("cardless_server");
    let child = std::process::Command::new(binary)
        .env("OXP_ADDR", "127.0.0.1:0")
        .env("OXP_LOG_FORMAT", "json")
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Stopped however the test ends.
    let mut server = harness::Example {
        child,
        base: String::new(),
    };
    let stdout = server.child.stdout.take().unwrap();
    let (lines, log) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            if lines.send(line.unwrap()).is_err() {
                break;
            }
        }
    });
    // The log up to the address it serves on, each line waited for at most 60 s.
    let mut before = Vec::new();
    let base = loop {
        let line = log
            .recv_timeout(std::time::Duration::from_secs(60))
            .expect("the server logs its address");
        if let Some(at) = line.find("serving OXP 1.0 on ") {
            let rest = &line[at + "serving OXP 1.0 on ".len()..];
            break rest.split(['"', ' ']).next().unwrap().to_owned();
        }
        before.push(line);
    };
    let said = before.join("\n");
    assert!(
        said.contains("serving no MCP Server Card")
            && said.contains("`description` is missing: set `description` in Cargo.toml"),
        "{said}"
    );
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let (tools, catalog) = runtime.block_on(async {
        let get = |path: &str| reqwest::get(format!("{base}{path}"));
        (
            get("/tools").await.unwrap().status(),
            get("/.well-known/ai-catalog.json").await.unwrap().status(),
        )
    });
    assert_eq!((tools.as_u16(), catalog.as_u16()), (200, 404));
    drop(server);
}
