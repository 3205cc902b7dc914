//! Agent Skills (SEP-2640): the `tests/skills` folder embedded with `skills!`, read by the
//! official Rust SDK's client (rmcp) — `skills/list`, `skills/get`, each file by its URI, each
//! file's digest checked against the bytes read — and by FastMCP's client (Python, from
//! `$OXP_TEST_PYTHON` as in `python_clients.rs`; without the package the test says SKIPPED, and
//! fails under `OXP_REQUIRE_ALL_TESTS=1`).

#[path = "harness/mod.rs"]
mod harness;

use base64::Engine;
use harness::Oxp;
use oxp_runtime::Registry;
use oxp_runtime::call::Pipeline;
use oxp_runtime::mcp::McpServer;
use oxp_runtime::server::Server;
use rmcp::ServiceExt;
use rmcp::model::{
    GetSkillRequestParams, ReadResourceDirectoryRequestParams, ReadResourceRequestParams,
    ResourceContents, SkillResources,
};
use serde_json::json;

oxp_runtime::skills!("skills");

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_lists_gets_and_reads_the_skills() {
    let oxp = serve_skills().await;
    let transport =
        rmcp::transport::StreamableHttpClientTransport::from_uri(format!("{}/mcp", oxp.base));
    let client = ().serve(transport).await.unwrap();
    let capabilities = &client.peer_info().unwrap().capabilities;
    assert!(capabilities.supports_skills(), "the extension is declared");

    let skills = client.list_all_skills().await.unwrap();
    assert_eq!(skills.len(), 1);
    let skill = &skills[0];
    skill.validate().unwrap();
    assert_eq!(skill.uri, "skill://calculator-usage/SKILL.md");
    let frontmatter = serde_json::to_value(&skill.frontmatter).unwrap();
    assert_eq!(frontmatter["name"], "calculator-usage");
    assert_eq!(frontmatter["license"], "MIT");
    assert_eq!(frontmatter["metadata"], json!({"author": "oxp-tests"}));
    let SkillResources::Files(files) = &skill.resources else {
        panic!("a manifest of files")
    };
    let uris: Vec<&str> = files.iter().map(|f| f.uri.as_str()).collect();
    assert_eq!(
        uris,
        [
            "skill://calculator-usage/SKILL.md",
            "skill://calculator-usage/examples/sums.md"
        ]
    );
    // Every file read back is the file the manifest describes.
    for file in files {
        let read = client
            .read_resource(ReadResourceRequestParams::new(file.uri.clone()))
            .await
            .unwrap();
        let bytes = match &read.contents[0] {
            ResourceContents::TextResourceContents {
                text, mime_type, ..
            } => {
                assert_eq!(mime_type.as_deref(), Some("text/markdown"));
                text.as_bytes().to_vec()
            }
            ResourceContents::BlobResourceContents { blob, .. } => {
                base64::engine::general_purpose::STANDARD
                    .decode(blob)
                    .unwrap()
            }
            other => panic!("{other:?}"),
        };
        file.verify(&bytes).unwrap();
        assert_eq!(
            bytes,
            std::fs::read(
                std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                    .join("skills")
                    .join(file.uri.trim_start_matches("skill://"))
            )
            .unwrap()
        );
    }

    let got = client
        .get_skill(GetSkillRequestParams::new(
            "skill://calculator-usage/SKILL.md",
        ))
        .await
        .unwrap();
    assert_eq!(got.skill, *skill);
    let unknown = client
        .get_skill(GetSkillRequestParams::new("skill://nope/SKILL.md"))
        .await;
    assert!(unknown.is_err());
    // Folder reads: a skill's direct children, a subfolder as a directory; a file is no folder.
    assert!(capabilities.supports_directory_read());
    let children = |uri: &'static str| {
        client.read_resource_directory(ReadResourceDirectoryRequestParams::new(uri))
    };
    let root = children("skill://calculator-usage").await.unwrap();
    let listed: Vec<(&str, Option<&str>)> = root
        .resources
        .iter()
        .map(|r| (r.uri.as_str(), r.mime_type.as_deref()))
        .collect();
    assert_eq!(
        listed,
        [
            ("skill://calculator-usage/SKILL.md", Some("text/markdown")),
            ("skill://calculator-usage/examples", Some("inode/directory"))
        ]
    );
    let examples = children("skill://calculator-usage/examples").await.unwrap();
    assert_eq!(
        examples.resources[0].uri,
        "skill://calculator-usage/examples/sums.md"
    );
    assert!(children("skill://calculator-usage/SKILL.md").await.is_err());
    assert!(children("skill://nope").await.is_err());
    // SKILL.md is listed as a resource, under the skill's name and description.
    let resources = client.list_all_resources().await.unwrap();
    let listed = resources
        .iter()
        .find(|r| r.uri == "skill://calculator-usage/SKILL.md")
        .unwrap();
    assert_eq!(listed.name, "calculator-usage");
    assert!(
        listed
            .description
            .as_deref()
            .unwrap()
            .starts_with("How to do arithmetic")
    );
    client.cancel().await.unwrap();
}

async fn serve_skills() -> Oxp {
    let pipeline = Pipeline::new(Registry::builder().all_skills().build().unwrap());
    let mcp = McpServer::new(pipeline.clone()).into_router();
    Oxp::start(Server::from_pipeline(pipeline).nest("/mcp", mcp)).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fastmcp_reads_every_skill_and_checks_it() {
    let python = std::env::var("OXP_TEST_PYTHON").unwrap_or_else(|_| "python3".to_owned());
    let found = std::process::Command::new(&python)
        .args(["-c", "import fastmcp.skills.client"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !found {
        harness::skip("Python with fastmcp (`pip install fastmcp`, then set OXP_TEST_PYTHON)");
        return;
    }
    let oxp = serve_skills().await;
    let root = env!("CARGO_MANIFEST_DIR");
    let (url, folder) = (format!("{}/mcp", oxp.base), format!("{root}/skills"));
    let script = format!("{root}/python/fastmcp_skills.py");
    let output = tokio::task::spawn_blocking(move || {
        std::process::Command::new(python)
            .args([script, url, folder])
            .output()
            .expect("python runs")
    })
    .await
    .unwrap();
    assert!(
        output.status.success(),
        "fastmcp_skills.py failed:\n{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_without_skills_does_not_declare_the_extension() {
    let pipeline = Pipeline::new(Registry::builder().build().unwrap());
    let mcp = McpServer::new(pipeline.clone()).into_router();
    let oxp = Oxp::start(Server::from_pipeline(pipeline).nest("/mcp", mcp)).await;
    let transport =
        rmcp::transport::StreamableHttpClientTransport::from_uri(format!("{}/mcp", oxp.base));
    let client = ().serve(transport).await.unwrap();
    assert!(!client.peer_info().unwrap().capabilities.supports_skills());
    client.cancel().await.unwrap();
}
