//! OpenTelemetry (issue 17, cargo feature `otel`): a test OTLP/HTTP receiver on 127.0.0.1
//! decodes every export with the official protobuf definitions (the `opentelemetry-proto`
//! crate) and sees one `oxp.call` span per call — a child of the caller's W3C `traceparent`
//! over OXP (the header) and MCP (`_meta.traceparent`), the OXP request's `trace_id` among its
//! attributes — and no secret, token or input anywhere in what was exported.
//!
//! One test per process: the exporter is installed globally, from `OTEL_*` variables.

#[path = "harness/mod.rs"]
mod harness;

use std::sync::{Arc, Mutex};

use axum::body::Bytes;
use axum::routing::post;
use harness::Oxp;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value::Value as Any;
use opentelemetry_proto::tonic::trace::v1::Span;
use oxp_runtime::app::ServerConfig;
use oxp_runtime::mcp::McpServer;
use oxp_runtime::server::{Server, ServerAuth};
use prost::Message;
use serde_json::json;

const SECRET: &str = "sk_live_otel_secret_0123456789";
const API_KEY: &str = "k_otel_api_key_0123456789abcdef";
const INPUT: &str = "input-marker-never-exported";
const OXP_TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const OXP_PARENT: &str = "00f067aa0ba902b7";
const MCP_TRACE: &str = "0af7651916cd43dd8448eb211c80319c";
const MCP_PARENT: &str = "b7ad6b7169203331";

fn attribute(span: &Span, key: &str) -> Option<String> {
    span.attributes
        .iter()
        .find(|kv| kv.key == key)
        .and_then(|kv| kv.value.as_ref()?.value.as_ref())
        .map(|value| match value {
            Any::StringValue(s) => s.clone(),
            other => format!("{other:?}"),
        })
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_call_is_one_span_under_the_callers_trace_and_nothing_secret_is_exported() {
    // The collector: every body it is sent, kept raw.
    let received: Arc<Mutex<Vec<Bytes>>> = Arc::default();
    let keep = received.clone();
    let collector = axum::Router::new().route(
        "/v1/traces",
        post(move |body: Bytes| {
            keep.lock().unwrap().push(body);
            async {
                (
                    [("content-type", "application/x-protobuf")],
                    Vec::<u8>::new(),
                )
            }
        }),
    );
    let collector = Oxp::start_router(collector).await;
    // SAFETY: set before any thread of this process reads the environment (one test here).
    unsafe {
        std::env::set_var("OTEL_EXPORTER_OTLP_ENDPOINT", &collector.base);
        std::env::set_var("OTEL_SERVICE_NAME", "oxp-otel-test");
    }
    // Logs at `warn`: traces are exported at `info` all the same.
    let config = ServerConfig::from_lookup(|n| (n == "OXP_LOG").then(|| "warn".into())).unwrap();
    config.init_logging();
    oxp_runtime::call::install_panic_hook();

    let pipeline = harness::pipeline();
    let mcp = McpServer::new(pipeline.clone()).into_router();
    let oxp = Oxp::start(
        Server::from_pipeline(pipeline)
            .auth(ServerAuth::default().api_key(API_KEY))
            .nest("/mcp", mcp),
    )
    .await;
    let call = |body: serde_json::Value, traceparent: Option<String>| {
        let mut request = oxp
            .request(reqwest::Method::POST, "/tools/call")
            .bearer_auth(API_KEY)
            .json(&body);
        if let Some(traceparent) = traceparent {
            request = request.header("traceparent", traceparent);
        }
        oxp.send(request)
    };

    // 1. OXP, under the caller's span, with a secret and an input that must stay home.
    let sms = json!({
        "tool_id": "SMS.Send",
        "trace_id": "oxp-trace-1",
        "call_id": "otel-sms-1",
        "input": {"to": "+15550100", "body": INPUT},
        "context": {"secrets": [{"id": "TWILIO_API_KEY", "value": SECRET}]}
    });
    let reply = call(sms, Some(format!("00-{OXP_TRACE}-{OXP_PARENT}-01"))).await;
    assert_eq!(reply.body["success"], true, "{:?}", reply.body);
    // 2. A tool that panics with the secret in its message: the span's events carry the
    //    panic's text scrubbed, as the log does.
    let leaky = json!({
        "tool_id": "Leaky.Panic",
        "context": {"secrets": [{"id": "LEAKY_KEY", "value": SECRET}]}
    });
    let reply = call(leaky, Some("00-not-a-trace-parent".into())).await;
    assert_eq!(reply.body["success"], false);
    // 3. MCP, under the span `_meta.traceparent` names.
    let mcp = oxp
        .request(reqwest::Method::POST, "/mcp")
        .bearer_auth(API_KEY)
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", "tools/call")
        .header("mcp-name", "Calculator_Add")
        .json(
            &json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
                "name": "Calculator_Add",
                "arguments": {"a": 1, "b": 2},
                "_meta": {
                    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                    "io.modelcontextprotocol/clientInfo": {"name": "otel-test", "version": "1.0.0"},
                    "io.modelcontextprotocol/clientCapabilities": {},
                    "traceparent": format!("00-{MCP_TRACE}-{MCP_PARENT}-01")
                }
            }}),
        )
        .send()
        .await
        .unwrap();
    let text = mcp.text().await.unwrap();
    assert!(text.contains(r#""isError":false"#), "{text}");

    // Out of the batch, synchronously (the exporter's client blocks).
    tokio::task::spawn_blocking(oxp_runtime::otel::flush)
        .await
        .unwrap();

    let bodies = received.lock().unwrap().clone();
    assert!(!bodies.is_empty(), "the collector was sent nothing");
    let mut spans = Vec::new();
    for body in &bodies {
        for needle in [SECRET, API_KEY, INPUT] {
            assert!(
                !body.windows(needle.len()).any(|w| w == needle.as_bytes()),
                "`{needle}` was exported"
            );
        }
        let export = ExportTraceServiceRequest::decode(body.as_ref()).expect("OTLP protobuf");
        for resource in export.resource_spans {
            let service = resource
                .resource
                .as_ref()
                .and_then(|r| r.attributes.iter().find(|kv| kv.key == "service.name"))
                .and_then(|kv| kv.value.as_ref()?.value.clone());
            assert_eq!(service, Some(Any::StringValue("oxp-otel-test".into())));
            for scope in resource.scope_spans {
                spans.extend(scope.spans);
            }
        }
    }
    let calls: Vec<&Span> = spans.iter().filter(|s| s.name == "oxp.call").collect();
    assert_eq!(calls.len(), 3, "one span per call: {calls:#?}");
    let by_tool = |tool: &str| {
        *calls
            .iter()
            .find(|s| attribute(s, "tool").as_deref() == Some(tool))
            .unwrap_or_else(|| panic!("no span for {tool}: {calls:#?}"))
    };

    let sms = by_tool("SMS.Send@0.1.2");
    assert_eq!(hex(&sms.trace_id), OXP_TRACE, "in the caller's trace");
    assert_eq!(
        hex(&sms.parent_span_id),
        OXP_PARENT,
        "a child of the caller's span"
    );
    assert_eq!(attribute(sms, "trace_id").as_deref(), Some("oxp-trace-1"));
    assert_eq!(attribute(sms, "call_id").as_deref(), Some("\"otel-sms-1\""));
    assert_eq!(attribute(sms, "outcome").as_deref(), Some("success"));

    let leaky = by_tool("Leaky.Panic@1.0.0");
    assert!(
        leaky.parent_span_id.is_empty(),
        "a malformed traceparent starts a trace"
    );
    assert_ne!(hex(&leaky.trace_id), OXP_TRACE);
    assert_eq!(attribute(leaky, "outcome").as_deref(), Some("panic"));
    let panic_event = leaky
        .events
        .iter()
        .find(|e| e.name == "tool panicked")
        .expect("the panic is an event of the call's span");
    let text = format!("{:?}", panic_event.attributes);
    assert!(text.contains("<redacted>"), "{text}");

    let add = by_tool("Calculator.Add@1.0.0");
    assert_eq!(hex(&add.trace_id), MCP_TRACE, "MCP's _meta.traceparent");
    assert_eq!(hex(&add.parent_span_id), MCP_PARENT);

    // Only the call's own fields are attributes: nothing of its input or context (`answers` is
    // how many answers an MCP round came with, a count).
    for span in &calls {
        for kv in &span.attributes {
            assert!(
                ["call_id", "trace_id", "tool", "outcome", "answers"].contains(&kv.key.as_str())
                    || kv.key.starts_with("code.")
                    || kv.key.starts_with("thread.")
                    || kv.key == "target"
                    || kv.key == "busy_ns"
                    || kv.key == "idle_ns",
                "unexpected attribute {kv:?}"
            );
        }
    }
}
