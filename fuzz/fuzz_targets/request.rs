//! The whole request path: raw headers and body bytes → auth → limits → parse → dialect →
//! dispatch against the fixture tools, through the real axum router. Anything but a
//! well-formed answer (a panic, a hang, a 5xx, a non-JSON body) is a finding.
#![no_main]

use std::sync::OnceLock;

use axum::body::Body;
use axum::http::{Method, Request};
use libfuzzer_sys::fuzz_target;
use oxp_runtime::server::{Server, ServerAuth};
use tower::ServiceExt;

const PATHS: [&str; 6] = ["/tools/call", "/tools", "/health", "/authorization/x", "/nope", "/tools/call/"];
const HEADERS: [(&str, &str); 10] = [
    ("content-type", "application/json"),
    ("content-type", "text/plain"),
    ("content-type", "application/vnd.oxp+json; charset=utf-8"),
    ("oxp-version", "1.0"),
    ("oxp-version", "2"),
    ("oxp-version", "1.x"),
    ("oxp-api-key", "fuzz-key-0123456789abcdef"),
    ("authorization", "Bearer fuzz-key-0123456789abcdef"),
    ("authorization", "Bearer eyJhbGciOiJub25lIn0.e30."),
    ("user-agent", "universal-tool-sdk-py/0.0.2"),
];

fn runtime() -> &'static tokio::runtime::Runtime {
    static RUNTIME: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RUNTIME.get_or_init(|| {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
    })
}

fn router(authenticated: bool, compat: bool) -> axum::Router {
    // Fixture tools that answer at once: the fuzzer looks for wrong answers, not slow tools
    // (and libFuzzer aborts on any panic, so the panicking fixture stays out).
    let registry = oxp_runtime::Registry::builder()
        .tool(oxp_tests::calculator_add::TOOL)
        .tool(oxp_tests::which_1_0_0::TOOL)
        .tool(oxp_tests::which_1_10_0::TOOL)
        .tool(oxp_tests::get_timestamp::TOOL)
        .tool(oxp_tests::util_null::TOOL)
        .tool(oxp_tests::ring::TOOL)
        .tool(oxp_tests::send::TOOL)
        .tool(oxp_tests::get_emails::TOOL)
        .tool(oxp_tests::leaky_fail::TOOL)
        .build()
        .unwrap();
    let mut server = Server::new(registry).max_body_bytes(64 * 1024).langchain_compat(compat);
    if authenticated {
        server = server.auth(ServerAuth::default().api_key("fuzz-key-0123456789abcdef").jwt_secret("fuzz-jwt-secret-0123456789abcdef"));
    }
    server.router()
}

fuzz_target!(|data: &[u8]| {
    static ROUTERS: OnceLock<[axum::Router; 4]> = OnceLock::new();
    let routers = ROUTERS.get_or_init(|| [router(false, false), router(true, false), router(false, true), router(true, true)]);
    let Some((&selector, rest)) = data.split_first() else { return };
    let Some((&header_bits, body)) = rest.split_first() else { return };
    let router = routers[usize::from(selector & 3)].clone();
    let method = if selector & 4 == 0 { Method::POST } else { Method::GET };
    let path = PATHS[usize::from(selector >> 3) % PATHS.len()];
    let mut request = Request::builder().method(method).uri(path);
    for (i, (name, value)) in HEADERS.iter().enumerate().take(8) {
        if header_bits & (1 << i) != 0 {
            request = request.header(*name, *value);
        }
    }
    if selector & 0x80 != 0 {
        request = request.header(HEADERS[8].0, HEADERS[8].1).header(HEADERS[9].0, HEADERS[9].1);
    }
    let request = request.body(Body::from(body.to_vec())).unwrap();
    let response = runtime().block_on(router.oneshot(request)).unwrap();
    let status = response.status().as_u16();
    assert!(status < 500, "a 5xx: {status}");
    assert_eq!(response.headers().get("oxp-version").map(|v| v.as_bytes()), Some(&b"1.0"[..]));
    let bytes = runtime().block_on(axum::body::to_bytes(response.into_body(), usize::MAX)).unwrap();
    if !bytes.is_empty() {
        let json: Result<serde_json_check::Value, _> = serde_json_check::from_slice(&bytes);
        assert!(json.is_ok(), "a non-JSON body: {}", String::from_utf8_lossy(&bytes));
    }
});

mod serde_json_check {
    pub use oxp_runtime::__private::serde_json::{from_slice, Value};
}
