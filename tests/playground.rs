//! The playground page: served on loopback by default and off otherwise, and driven in a real
//! headless Chromium (Debian's, through npm's playwright-core) against the example server.

#[path = "harness/mod.rs"]
mod harness;

use std::path::Path;
use std::process::Command;

use harness::Oxp;
use oxp_runtime::app::ServerConfig;
use oxp_runtime::server::Server;

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

#[test]
fn the_page_works_in_a_real_browser() {
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
        return;
    }
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
    for step in ["value: ok", "422 field error: ok", "retry hint: ok"] {
        assert!(stdout.contains(step), "{step} missing:\n{stdout}");
    }
    assert!(screenshot.exists());
}
