//! A server given a Server Card it cannot serve (no description)
//! (`cargo run -p oxp-runtime --example cardless_server`): it serves its tools all the same and
//! says, at start-up, what the card lacks (`tests/card.rs`). The guide's "Deploying" page shows
//! it beside `serve!()`, which fills the card from `Cargo.toml`.

use oxp_runtime::tool;

/// Echo the text.
#[tool(toolkit = "Text", version = "1.0.0")]
fn echo(text: String) -> String {
    text
}

#[tokio::main]
async fn main() {
    let card = oxp_runtime::card::ServerCard::new("cardless", "1.0.0").name("com.example/cardless");
    oxp_runtime::app::serve_with(card).await
}
