//! Agent Skills (SEP-2640): the `tests/skills` folder embedded with `skills!`, read by the
//! official Rust SDK's client (rmcp): `skills/list`, `skills/get`, each file by its URI, each
//! file's digest checked against the bytes read.

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
    GetSkillRequestParams, ReadResourceRequestParams, ResourceContents, SkillResources,
};
use serde_json::json;

oxp_runtime::skills!("skills");

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_lists_gets_and_reads_the_skills() {
    let pipeline = Pipeline::new(Registry::builder().all_skills().build().unwrap());
    let mcp = McpServer::new(pipeline.clone()).into_router();
    let oxp = Oxp::start(Server::from_pipeline(pipeline).nest("/mcp", mcp)).await;
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
