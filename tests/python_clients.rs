//! Real Python peers from PyPI against a real server on 127.0.0.1: the official `oxp` SDK, and
//! LangChain's `universal-tool-client` and `langchain-tool-client` (with compatibility on).
//!
//! The Python interpreter is `$OXP_TEST_PYTHON` (`.ci/run` makes a venv and sets it), else
//! `python3`. Without the packages, each test prints `SKIPPED: needs …` — and fails under
//! `OXP_REQUIRE_ALL_TESTS=1`.

#[path = "harness/mod.rs"]
mod harness;

use std::process::Command;

use harness::Oxp;
use oxp_runtime::server::Server;

const API_KEY: &str = "k_python_client_test_0123456789abcdef";

fn python() -> String {
    std::env::var("OXP_TEST_PYTHON").unwrap_or_else(|_| "python3".to_owned())
}

/// Whether `python` can import every module; prints the skip line when not.
fn has_modules(modules: &[&str], packages: &str) -> bool {
    let imports = modules
        .iter()
        .map(|m| format!("import {m}"))
        .collect::<Vec<_>>()
        .join("; ");
    let found = Command::new(python())
        .args(["-c", &imports])
        .output()
        .is_ok_and(|o| o.status.success());
    if !found {
        harness::skip(&format!(
            "Python with {packages} (`pip install {packages}`, then set OXP_TEST_PYTHON)"
        ));
    }
    found
}

/// Runs a script from `tests/python/` off the async workers; panics with its output on failure.
async fn run_script(script: &str, args: Vec<String>) {
    let path = format!("{}/python/{script}", env!("CARGO_MANIFEST_DIR"));
    let output = tokio::task::spawn_blocking(move || {
        Command::new(python())
            .arg(path)
            .args(args)
            .env_remove("OXP_API_KEY")
            .env_remove("OXP_BASE_URL")
            .output()
            .expect("python runs")
    })
    .await
    .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "{script} failed:\n{stdout}\n{stderr}"
    );
    print!("{stdout}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_official_oxp_python_client_works_against_the_example() {
    if !has_modules(&["oxp"], "oxp") {
        return;
    }
    let example = harness::start_example(&[("OXP_API_KEYS", API_KEY)]);
    run_script(
        "oxp_client.py",
        vec![example.base.clone(), API_KEY.to_owned()],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn langchain_clients_work_with_compatibility_on() {
    if !has_modules(
        &[
            "universal_tool_client",
            "langchain_tool_client",
            "langchain_core",
        ],
        "universal-tool-client langchain-tool-client langchain-core",
    ) {
        return;
    }
    let server = Server::new(oxp_tests::all_tools().build().unwrap()).langchain_compat(true);
    let oxp = Oxp::start(server).await;
    run_script("langchain_clients.py", vec![oxp.base.clone()]).await;
}
