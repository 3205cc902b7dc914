//! A `POST /tools/call` through a router in process (no socket), for the benchmarks.

use oxp_runtime::server::Server;
use oxp_runtime::{Registry, tool};
use tower::ServiceExt;

/// The example's `Calculator.Add@1.0.0`: integers, as the bare handler adds them, so both
/// routers do the same JSON work (the fixtures' `Calculator.Add` takes floats).
#[tool(toolkit = "Calculator", name = "Add", version = "1.0.0")]
async fn add_integers(
    /// The first addend.
    a: i64,
    /// The second addend.
    b: i64,
) -> i64 {
    a + b
}

/// The OXP server over the example's add.
pub fn oxp_server() -> Server {
    Server::new(
        Registry::builder()
            .tool(add_integers::TOOL)
            .build()
            .unwrap(),
    )
}

/// The OXP server's router over the example's add.
#[allow(dead_code)] // not every user of the harness serves a bare router
pub fn oxp_router() -> axum::Router {
    oxp_server().router()
}

/// Sends `body` to `router`'s `/tools/call` and returns the `200` answer's bytes.
#[allow(dead_code)] // the accept-loop bench serves, it does not call in process
pub async fn post_call(
    router: &axum::Router,
    body: impl Into<axum::body::Body>,
) -> axum::body::Bytes {
    let request = axum::http::Request::post("/tools/call")
        .header("content-type", "application/json")
        .body(body.into())
        .unwrap();
    let response = router.clone().oneshot(request).await.unwrap();
    assert_eq!(response.status(), 200);
    axum::body::to_bytes(response.into_body(), usize::MAX)
        .await
        .unwrap()
}
