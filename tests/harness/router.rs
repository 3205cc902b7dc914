//! A `POST /tools/call` through a router in process (no socket), for the benchmarks.

use tower::ServiceExt;

/// Sends `body` to `router`'s `/tools/call` and returns the `200` answer's bytes.
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
