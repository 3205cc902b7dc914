//! The guide: how to write, serve, test and deploy tools with oxp, a page per topic, each built
//! around an example that compiles (the pages' code blocks are this crate's doctests, and the
//! examples they show whole are `oxp-runtime/examples/`, built by `cargo test`).
//!
//! Start with [`writing_tools`]; the rest can be read in any order.
//!
//! | page | what it answers |
//! |---|---|
//! | [`writing_tools`] | `#[tool]`: parameters, results, errors, the context, registries |
//! | [`asking`] | a tool that stops to ask its user or its client, and the rules that make it safe |
//! | [`tasks`] | long-running tools as MCP tasks: polled, answered and cancelled from any replica |
//! | [`resources_prompts_skills`] | what a server offers besides tools: `#[resource]`, `#[prompt]`, completion, `skills!()` |
//! | [`versioning`] | tool versions, and `tools.lock`, which keeps a published version from changing |
//! | [`embedding`] | the pipeline, the OXP router and the MCP front inside your own axum app |
//! | [`providers`] | the same tools to OpenAI, Anthropic and Gemini, and their calls run back |
//! | [`agents`] | the same tools in process to rig and adk-rust agents |
//! | [`testing`] | unit tests, calls in process, the playground, the client, conformance checkers |
//! | [`mcp`] | what the MCP front serves and how: statelessly, to any revision |
//! | [`deploying`] | `serve()`, the OXP endpoints, authentication, the Server Card, and the operator's pages |
//!
//! Operators' material (identity providers, replicas and Redis, metrics and traces, hostile
//! clients, every `OXP_*` setting) is in the repository's `docs/`; how the crate is built inside,
//! in `ARCHITECTURE.md`.

/// The example of a page, shown whole: `oxp-runtime/examples/<name>.rs` in a code block (which
/// is also a doctest, so the page shows what compiles).
macro_rules! example {
    ($name:literal) => {
        concat!(
            "\n\n# The example, whole\n\n`oxp-runtime/examples/",
            $name,
            ".rs` (`cargo run -p oxp-runtime --example ",
            $name,
            "`):\n\n```rust,no_run\n",
            include_str!(concat!("../examples/", $name, ".rs")),
            "```\n"
        )
    };
}

#[doc = include_str!("../guide/writing_tools.md")]
pub mod writing_tools {}

#[doc = include_str!("../guide/asking.md")]
#[doc = example!("confirm_server")]
pub mod asking {}

#[doc = include_str!("../guide/tasks.md")]
#[doc = example!("task_server")]
pub mod tasks {}

#[doc = include_str!("../guide/resources_prompts_skills.md")]
#[doc = example!("notes_server")]
pub mod resources_prompts_skills {}

#[doc = include_str!("../guide/versioning.md")]
pub mod versioning {}

#[doc = include_str!("../guide/embedding.md")]
#[doc = example!("accept_loop")]
pub mod embedding {}

#[doc = include_str!("../guide/providers.md")]
pub mod providers {}

#[doc = include_str!("../guide/agents.md")]
pub mod agents {}

#[doc = include_str!("../guide/testing.md")]
pub mod testing {}

#[doc = include_str!("../guide/mcp.md")]
pub mod mcp {}

#[doc = include_str!("../guide/deploying.md")]
#[doc = example!("cardless_server")]
pub mod deploying {}

/// README.md's Rust blocks, compiled and run as this crate's doctests.
#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
pub struct Readme;
