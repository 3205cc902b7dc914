//! A server embedded by hand: the OXP router of one tool behind the server's own accept loop
//! ([`Server::serve`]: connection limits, timeouts, lingering close) or behind plain
//! `axum::serve`, on `OXP_ADDR`. `bench/run.sh accept` runs both under the same load to tell
//! what the accept loop costs from what the router does.
//!
//! `accept_loop oxp|axum`; the address it serves on is its first line on stdout (`OXP_ADDR`
//! may ask for port 0). `tests/hostile.rs` also builds it with the `http2` feature.
//!
//! [`Server::serve`]: oxp_runtime::server::Server::serve

use oxp_runtime::server::{ConnectionLimits, Server};
use oxp_runtime::{Registry, tool};

/// Add two integers.
#[tool(toolkit = "Calculator", name = "Add", version = "1.0.0")]
async fn add_integers(
    /// The first addend.
    a: i64,
    /// The second addend.
    b: i64,
) -> i64 {
    a + b
}

/// The OXP server of this one tool: no `OXP_*` variable is read (only `serve()` reads them).
fn server() -> Server {
    Server::new(
        Registry::builder()
            .tool(add_integers::TOOL)
            .build()
            .unwrap(),
    )
}

#[tokio::main]
async fn main() {
    let which = std::env::args().nth(1).unwrap_or_else(|| "oxp".into());
    let addr = std::env::var("OXP_ADDR").unwrap_or_else(|_| "127.0.0.1:18083".into());
    let listener = tokio::net::TcpListener::bind(&addr).await.unwrap();
    println!("http://{}", listener.local_addr().unwrap());
    match which.as_str() {
        "oxp" => {
            // `ACCEPT_LOOP_KEEP_ALIVE_MS`: HTTP/2 keep-alive pings this often (tests/hostile.rs).
            let mut limits = ConnectionLimits::default();
            if let Some(ms) = std::env::var("ACCEPT_LOOP_KEEP_ALIVE_MS")
                .ok()
                .and_then(|ms| ms.parse().ok())
            {
                limits.keep_alive_interval = std::time::Duration::from_millis(ms);
            }
            server()
                .connection_limits(limits)
                // Never asked to stop, so no grace period to drain in.
                .serve(listener, std::future::pending(), std::time::Duration::ZERO)
                .await
                .unwrap();
        }
        "axum" => axum::serve(listener, server().router()).await.unwrap(),
        other => panic!("oxp or axum, not {other}"),
    }
}
