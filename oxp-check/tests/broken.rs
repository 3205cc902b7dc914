//! The checker can fail: a tiny OXP server (axum, one tool) run twice, once right and once
//! answering an unknown tool with 404 where the spec says 400 (oxp-notes §1 E.42). The binary
//! fails exactly that MUST, by its section, exits 1 and writes it in its JSON; against the right
//! server the same check passes.

use std::time::Duration;

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::{get, post};
use serde_json::{Value, json};

/// A JSON answer (axum's own `Json` is behind a feature this workspace leaves off).
struct Json(Value);

impl axum::response::IntoResponse for Json {
    fn into_response(self) -> axum::response::Response {
        let header = [(axum::http::header::CONTENT_TYPE, "application/json")];
        (header, self.0.to_string()).into_response()
    }
}

/// How long one run of the checker may take before the test calls it a hang.
const HANG: Duration = Duration::from_secs(120);

/// One tool, `Echo.Say@1.0.0`; an unknown tool is answered with `unknown_tool`.
async fn serve(unknown_tool: StatusCode) -> String {
    let tools = json!({"items": [{
        "id": "Echo.Say@1.0.0",
        "name": "Echo_Say",
        "description": "Say the text back.",
        "version": "1.0.0",
        "input_schema": {
            "type": "object",
            "properties": {"text": {"type": "string", "description": "What to say."}},
            "required": ["text"]
        },
        "output_schema": {"type": "string"}
    }]});
    let router = Router::new()
        .route("/health", get(|| async { Json(json!({"status": "ok"})) }))
        .route("/tools", get(move || async move { Json(tools) }))
        .route("/tools/call", post(call))
        .with_state(unknown_tool);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
    base
}

async fn call(State(unknown_tool): State<StatusCode>, body: String) -> (StatusCode, Json) {
    let error = |status, message: &str| (status, Json(json!({"message": message})));
    let Ok(body) = serde_json::from_str::<Value>(&body) else {
        return error(StatusCode::BAD_REQUEST, "not JSON");
    };
    let request = &body["request"];
    let Some(tool_id) = request["tool_id"].as_str() else {
        return error(StatusCode::BAD_REQUEST, "no tool_id");
    };
    if !matches!(tool_id, "Echo.Say" | "Echo.Say@1" | "Echo.Say@1.0.0") {
        return error(unknown_tool, "no such tool");
    }
    let Some(text) = request["input"]["text"].as_str() else {
        return (
            StatusCode::UNPROCESSABLE_ENTITY,
            Json(json!({"message": "invalid input", "parameter_errors": {"text": "required"}})),
        );
    };
    let call_id = request["call_id"].as_str().unwrap_or("generated");
    let result = json!({"call_id": call_id, "success": true, "value": text});
    (
        StatusCode::OK,
        Json(json!({"$schema": "urn:oxp:1.0", "result": result})),
    )
}

/// Runs the `oxp-check` binary against `base`: its exit code, stdout, and JSON report.
async fn check(base: &str) -> (i32, String, Value) {
    let dir = std::env::temp_dir().join(format!("oxp-check-{}-{}", std::process::id(), base.len()));
    std::fs::create_dir_all(&dir).unwrap();
    let json = dir.join(format!("report-{}.json", base.rsplit(':').next().unwrap()));
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_oxp-check"));
    command.args([base, "--timeout", "30", "--json"]).arg(&json);
    let output = tokio::time::timeout(HANG, tokio::task::spawn_blocking(move || command.output()))
        .await
        .expect("the checker finishes")
        .unwrap()
        .unwrap();
    let stdout = String::from_utf8(output.stdout).unwrap();
    let report: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    (output.status.code().unwrap(), stdout, report)
}

fn unknown_tool_check(report: &Value) -> &Value {
    report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| {
            c["what"]
                .as_str()
                .unwrap()
                .starts_with("an unknown tool is 400")
        })
        .expect("the unknown-tool check ran")
}

#[tokio::test]
async fn a_server_that_breaks_a_must_fails_it_by_section_and_exits_1() {
    let base = serve(StatusCode::NOT_FOUND).await;
    let (code, stdout, report) = check(&base).await;
    assert_eq!(code, 1, "{stdout}");
    assert!(
        stdout
            .contains("FAIL  MUST    §1 E.42    an unknown tool is 400 with a ServerErrorResponse"),
        "{stdout}"
    );
    let check = unknown_tool_check(&report);
    assert_eq!(check["status"], "FAIL");
    assert_eq!(check["level"], "MUST");
    assert_eq!(check["section"], "§1 E.42");
    assert!(
        check["detail"]
            .as_str()
            .unwrap()
            .contains("expected 400, got 404"),
        "{check}"
    );
    assert_eq!(report["conforms"], false);
    assert_eq!(report["url"], base);
}

#[tokio::test]
async fn the_same_server_answering_400_passes_that_check() {
    let base = serve(StatusCode::BAD_REQUEST).await;
    let (_, stdout, report) = check(&base).await;
    assert_eq!(unknown_tool_check(&report)["status"], "PASS", "{stdout}");
    // The tool was found in the list and called with an input made from its schema.
    let enveloped = report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["section"] == "§1 C.31")
        .unwrap();
    assert_eq!(enveloped["status"], "PASS", "{stdout}");
    assert!(
        enveloped["what"]
            .as_str()
            .unwrap()
            .contains("Echo.Say@1.0.0")
    );
}
