//! OXP 1.0 conformance over real HTTP on 127.0.0.1. Test names carry the oxp-notes §1 checklist
//! numbers (`g9_…`, `v37_…`) and comments the §4 vector numbers. Every response body is validated
//! against the component schemas of the vendored OpenAPI spec by the harness.

#[path = "harness/mod.rs"]
mod harness;

use std::time::{SystemTime, UNIX_EPOCH};

use harness::{Oxp, TOOL_DEFINITION, assert_valid};
use jsonwebtoken::{EncodingKey, Header, encode};
use oxp_runtime::Registry;
use oxp_runtime::authorization::InMemoryAuthorization;
use oxp_runtime::server::{Server, ServerAuth};
use reqwest::Method;
use serde_json::{Value, json};

const JWT_SECRET: &str = "test-secret-with-at-least-32-bytes-of-entropy";
const API_KEY: &str = "k_9f8e7d6c5b4a39281706f5e4d3c2b1a0";

fn fixtures() -> Registry {
    oxp_tests::all_tools().build().unwrap()
}

async fn server() -> Oxp {
    Oxp::start(Server::from_pipeline(harness::pipeline().authorization(
        InMemoryAuthorization::new("https://auth.example.com/authorize"),
    )))
    .await
}

async fn authenticated() -> Oxp {
    Oxp::start(
        Server::new(fixtures()).auth(
            ServerAuth::default()
                .jwt_secret(JWT_SECRET)
                .jwt_audience(["agent-1"])
                .api_key(API_KEY),
        ),
    )
    .await
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

fn jwt(claims: Value, secret: &str) -> String {
    encode(
        &Header::default(),
        &claims,
        &EncodingKey::from_secret(secret.as_bytes()),
    )
    .unwrap()
}

fn add(call_id: &str, a: Value, b: Value) -> Value {
    json!({"call_id": call_id, "tool_id": "Calculator.Add@1.0.0", "input": {"a": a, "b": b}})
}

// ---- H. Health ------------------------------------------------------------------------------

#[tokio::test]
async fn h11_h13_health_is_200_json_without_auth() {
    let oxp = authenticated().await;
    // Vectors 1, 2: 200 even with auth on and no credentials (H.12).
    let reply = oxp.get("/health").await;
    assert_eq!(reply.status, 200);
    assert_eq!(reply.body, json!({"status": "ok"}));
    // Vector 4.
    let reply = oxp
        .send(
            oxp.request(Method::GET, "/health")
                .header("OXP-Version", "1.0"),
        )
        .await;
    assert_eq!(reply.header("oxp-version"), Some("1.0"));
}

/// G.9: `OXP-Version` on every response, whatever produced it — the handlers, the fallbacks,
/// authentication, the body limit, the playground page and the MCP service — and in every status.
#[tokio::test]
async fn g9_every_response_carries_oxp_version() {
    let pipeline = harness::pipeline().authorization(InMemoryAuthorization::new(
        "https://auth.example.com/authorize",
    ));
    let server = Server::from_pipeline(pipeline)
        .auth(ServerAuth::default().api_key(API_KEY))
        .max_body_bytes(1024)
        .playground(true);
    let oxp = Oxp::start(server).await;
    // With the API key: every route but `/health` and the playground is behind it.
    let keyed = |method: Method, path: &str| oxp.request(method, path).header("x-api-key", API_KEY);
    let call = |body: Value| keyed(Method::POST, "/tools/call").json(&body);
    let too_large = json!({"request": {"tool_id": "x", "input": {"pad": "a".repeat(2048)}}});
    let cases = [
        (oxp.request(Method::GET, "/health"), 200),
        (oxp.request(Method::GET, "/"), 200),
        (keyed(Method::GET, "/tools"), 200),
        (oxp.request(Method::GET, "/tools"), 401),
        (call(json!({"request": add("g9", json!(1), json!(2))})), 200),
        (call(json!({"request": {"tool_id": "No.Such"}})), 400),
        (
            call(json!({"request": add("g9-bad", json!("x"), json!(2))})),
            422,
        ),
        (call(too_large), 413),
        (keyed(Method::GET, "/no/such/route"), 404),
        (keyed(Method::DELETE, "/tools/call"), 405),
        (oxp.request(Method::POST, "/health"), 405),
        // The playground's routes are behind it too.
        (oxp.request(Method::GET, "/playground/resources"), 401),
        (keyed(Method::GET, "/playground/resources"), 200),
        (keyed(Method::GET, "/playground/prompts"), 200),
        (oxp.request(Method::GET, "/playground/skills"), 401),
        (keyed(Method::GET, "/playground/skills"), 200),
        (
            keyed(Method::POST, "/playground/skills/read")
                .json(&json!({"uri": "skill://none/SKILL.md"})),
            404,
        ),
        (
            keyed(Method::POST, "/playground/skills/read").json(&json!({"uri": "x".repeat(2048)})),
            413,
        ),
        (
            keyed(Method::POST, "/playground/resources/read").json(&json!({"uri": "no://such"})),
            404,
        ),
        (
            oxp.request(Method::POST, "/playground/prompts/get")
                .json(&json!({"name": "none"})),
            401,
        ),
        (keyed(Method::GET, "/authorization/unknown"), 404),
        (keyed(Method::GET, "/authorization/%FF"), 404),
        // MCP answers in its own terms (406 without its Accept header); the header is there.
        (keyed(Method::GET, "/mcp"), 0),
    ];
    for (request, status) in cases {
        let response = request.send().await.unwrap();
        let url = response.url().path().to_owned();
        if status != 0 {
            assert_eq!(response.status(), status, "{url}");
        }
        assert_eq!(
            response
                .headers()
                .get("oxp-version")
                .map(|v| v.to_str().unwrap()),
            Some("1.0"),
            "OXP-Version on {} {url}",
            response.status()
        );
    }
}

// ---- L. GET /tools ----------------------------------------------------------------------------

#[tokio::test]
async fn l16_d18_d22_list_is_items_with_valid_unique_definitions() {
    let oxp = server().await;
    // Vector 5.
    let reply = oxp.list(oxp.request(Method::GET, "/tools")).await;
    assert_eq!(reply.status, 200);
    assert_eq!(reply.body["$schema"], "urn:oxp:1.0");
    let items = reply.body["items"].as_array().unwrap();
    let mut ids = Vec::new();
    for item in items {
        assert_valid(TOOL_DEFINITION, item);
        let id = item["id"].as_str().unwrap();
        let version = item["version"].as_str().unwrap();
        assert!(id.ends_with(&format!("@{version}")), "{id}");
        // §3.9: all six fields, always.
        for key in ["input_schema", "output_schema"] {
            assert!(item.get(key).is_some(), "{id} lacks {key}");
        }
        ids.push(id.to_owned());
    }
    let count = ids.len();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), count, "D.18: ids are unique");
    for v in ["0.9.0", "1.0.0", "1.2.0", "1.10.0"] {
        assert!(
            ids.contains(&format!("Math.Which@{v}")),
            "D.21: every version is listed"
        );
    }
    // D.25, §3.9: a unit tool lists `output_schema: null`.
    let null = items.iter().find(|i| i["id"] == "Util.Null@1.0.0").unwrap();
    assert_eq!(null["output_schema"], Value::Null);
    // D.26: requirements as declared.
    let gmail = items
        .iter()
        .find(|i| i["id"] == "Gmail.GetEmails@1.2.0")
        .unwrap();
    assert_eq!(
        gmail["requirements"],
        json!({"authorization": [{"id": "google", "oauth2": {"scopes": ["https://www.googleapis.com/auth/gmail.readonly"]}}], "user_id": true})
    );
}

#[tokio::test]
async fn l16_empty_catalog_is_an_empty_array() {
    // Vector 6.
    let oxp = Oxp::start(Server::new(Registry::builder().build().unwrap())).await;
    let reply = oxp.list(oxp.request(Method::GET, "/tools")).await;
    assert_eq!(reply.body["items"], json!([]));
}

#[tokio::test]
async fn l15_list_tolerates_any_body() {
    let oxp = server().await;
    // Vector 7: the Go client sends `{}`.
    let reply = oxp
        .list(
            oxp.request(Method::GET, "/tools")
                .header("content-type", "application/json")
                .body("{}"),
        )
        .await;
    assert_eq!(reply.status, 200);
    // Vector 8: `otc://` gets the OTC `tools` key too, and its `$schema` echoed.
    let reply = oxp
        .list(
            oxp.request(Method::GET, "/tools")
                .body(r#"{"$schema":"otc://1.0"}"#),
        )
        .await;
    assert_eq!(reply.body["$schema"], "otc://1.0");
    assert_eq!(reply.body["tools"], reply.body["items"]);
    // Vector 9: a malformed body is ignored.
    let reply = oxp.list(oxp.request(Method::GET, "/tools").body("{")).await;
    assert_eq!(reply.status, 200);
}

// ---- A. Server authentication ----------------------------------------------------------------

#[tokio::test]
async fn a61_jwt_bearer_rules() {
    let oxp = authenticated().await;
    let list = |token: String| oxp.request(Method::GET, "/tools").bearer_auth(token);
    let status = |reply: harness::Reply| {
        if reply.status == 401 {
            // §3.7: JSON `{"message"}` and `WWW-Authenticate: Bearer`.
            assert!(reply.body["message"].is_string());
            assert_eq!(reply.header("www-authenticate"), Some("Bearer"));
        }
        reply.status.as_u16()
    };
    // Vector 10.
    assert_eq!(
        status(oxp.list(oxp.request(Method::GET, "/tools")).await),
        401
    );
    // Vector 16.
    let good = jwt(json!({"sub": "agent", "exp": now() + 300}), JWT_SECRET);
    assert_eq!(status(oxp.list(list(good)).await), 200);
    // Vector 11: wrong key.
    let wrong = jwt(
        json!({"sub": "agent", "exp": now() + 300}),
        "another-secret-another-secret-another",
    );
    assert_eq!(status(oxp.list(list(wrong)).await), 401);
    // Vector 12: expired (beyond the 60 s leeway).
    let expired = jwt(json!({"sub": "agent", "exp": now() - 120}), JWT_SECRET);
    assert_eq!(status(oxp.list(list(expired)).await), 401);
    // Vector 13: no `exp`.
    let no_exp = jwt(json!({"sub": "agent"}), JWT_SECRET);
    assert_eq!(status(oxp.list(list(no_exp)).await), 401);
    // Vector 14: `alg: none`, and RS256.
    use base64_url as b64;
    let payload = b64(&json!({"sub": "agent", "exp": now() + 300}).to_string());
    let none = format!("{}.{payload}.", b64(r#"{"alg":"none","typ":"JWT"}"#));
    assert_eq!(status(oxp.list(list(none)).await), 401);
    let rs256 = format!(
        "{}.{payload}.c2lnbmF0dXJl",
        b64(r#"{"alg":"RS256","typ":"JWT"}"#)
    );
    assert_eq!(status(oxp.list(list(rs256)).await), 401);
    // Vector 15: `aud` must be allowed when present; absent is fine.
    let foreign = jwt(
        json!({"sub": "agent", "exp": now() + 300, "aud": "someone-else"}),
        JWT_SECRET,
    );
    assert_eq!(status(oxp.list(list(foreign)).await), 401);
    let allowed = jwt(
        json!({"sub": "agent", "exp": now() + 300, "aud": ["x", "agent-1"]}),
        JWT_SECRET,
    );
    assert_eq!(status(oxp.list(list(allowed)).await), 200);
    // A `nbf` in the future is refused.
    let early = jwt(
        json!({"sub": "agent", "exp": now() + 600, "nbf": now() + 300}),
        JWT_SECRET,
    );
    assert_eq!(status(oxp.list(list(early)).await), 401);
}

fn base64_url(text: &str) -> String {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let bytes = text.as_bytes();
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let n = chunk.iter().fold(0u32, |n, b| (n << 8) | u32::from(*b)) << (8 * (3 - chunk.len()));
        for i in 0..=chunk.len() {
            out.push(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize] as char);
        }
    }
    out
}

#[tokio::test]
async fn a60_api_keys_in_every_header_and_as_bearer() {
    let oxp = authenticated().await;
    // Vector 18.
    for header in ["OXP-API-Key", "OTC-API-Key", "X-API-Key"] {
        let good = oxp
            .list(oxp.request(Method::GET, "/tools").header(header, API_KEY))
            .await;
        assert_eq!(good.status, 200, "{header}");
        let bad = oxp
            .list(oxp.request(Method::GET, "/tools").header(header, "nope"))
            .await;
        assert_eq!(bad.status, 401, "{header}");
        assert!(
            !bad.body.to_string().contains("nope"),
            "the credential is not echoed"
        );
    }
    // §3.31: the SDKs send their key as a bearer token.
    let bearer = oxp
        .list(oxp.request(Method::GET, "/tools").bearer_auth(API_KEY))
        .await;
    assert_eq!(bearer.status, 200);
}

#[tokio::test]
async fn a59_auth_off_ignores_the_authorization_header() {
    // Vector 17.
    let oxp = server().await;
    let reply = oxp
        .list(oxp.request(Method::GET, "/tools").bearer_auth("garbage"))
        .await;
    assert_eq!(reply.status, 200);
}

#[tokio::test]
async fn e42_a61_unauthenticated_call_is_401_before_anything_else() {
    // Vector 19, and §3.28's order: auth before size and parsing.
    let oxp = authenticated().await;
    let reply = oxp.call(json!({"request": "not even a request"})).await;
    assert_eq!(reply.status, 401);
    let reply = oxp
        .call_with(
            oxp.request(Method::POST, "/tools/call")
                .header("OXP-API-Key", API_KEY)
                .json(&json!({"request": add("c1", json!(1), json!(2))})),
        )
        .await;
    assert_eq!(reply.status, 200);
}

// ---- C. Calls and dialects -------------------------------------------------------------------

#[tokio::test]
async fn c31_envelope_call_is_answered_in_the_envelope() {
    let oxp = server().await;
    // Vector 20.
    let reply = oxp.call_request(add("c1", json!(10), json!(5))).await;
    assert_eq!(reply.status, 200);
    assert_eq!(reply.body["$schema"], "urn:oxp:1.0");
    let result = &reply.body["result"];
    assert_eq!(
        (
            result["call_id"].clone(),
            result["success"].clone(),
            result["value"].clone()
        ),
        (json!("c1"), json!(true), json!(15.0))
    );
    assert!(result["duration"].is_number());
    assert!(result.get("error").is_none());
}

#[tokio::test]
async fn g4_g6_schema_forms_are_accepted_and_echoed() {
    let oxp = server().await;
    // Vectors 21, 24, 25: echoed as sent; vector 23: absent means the latest (G.4).
    for schema in [
        "otc://1.0",
        "https://github.com/OpenToolCalling/Specification/tree/main/spec/http/1.0/openapi.json",
        "urn:oxp:1.1",
    ] {
        let reply = oxp
            .call(json!({"$schema": schema, "request": add("c1", json!(1), json!(2))}))
            .await;
        assert_eq!(reply.status, 200, "{schema}");
        assert_eq!(reply.body["$schema"], schema);
    }
    let reply = oxp
        .call(json!({"request": add("c1", json!(1), json!(2))}))
        .await;
    assert_eq!(reply.status, 200);
    assert_eq!(reply.body["$schema"], "urn:oxp:1.0");
}

#[tokio::test]
async fn g8_g9_bare_body_with_oxp_version_is_answered_bare() {
    let oxp = server().await;
    // Vector 22.
    let reply = oxp
        .call_with(
            oxp.request(Method::POST, "/tools/call")
                .header("OXP-Version", "1.0")
                .json(&add("c1", json!(10), json!(5))),
        )
        .await;
    assert_eq!(reply.status, 200);
    assert_eq!(reply.body["value"], 15.0);
    assert!(reply.body.get("result").is_none() && reply.body.get("$schema").is_none());
    // Errors are bare too.
    let reply = oxp
        .call_with(
            oxp.request(Method::POST, "/tools/call")
                .header("OXP-Version", "1")
                .json(&json!({"tool_id": "Nope.Tool"})),
        )
        .await;
    assert_eq!(reply.status, 400);
    assert!(reply.body.get("$schema").is_none());
}

#[tokio::test]
async fn c32_c33_call_id_is_generated_when_absent_and_trace_id_accepted() {
    let log = harness::Log::captured();
    let oxp = server().await;
    // Vector 26.
    let request = json!({"tool_id": "Calculator.Add", "input": {"a": 1, "b": 2}});
    let first = oxp.call_request(request.clone()).await;
    let second = oxp.call_request(request).await;
    let (a, b) = (
        &first.body["result"]["call_id"],
        &second.body["result"]["call_id"],
    );
    assert!(a.as_str().is_some_and(|s| !s.is_empty()));
    assert_ne!(a, b);
    // Vector 27.
    let reply = oxp
        .call_request(json!({"call_id": "c33", "trace_id": "trace-c33", "tool_id": "Calculator.Add", "input": {"a": 1, "b": 2}}))
        .await;
    assert_eq!(reply.status, 200);
    // The trace id is recorded on the call's span, beside its call id.
    let text = log.text();
    assert!(
        text.lines()
            .any(|l| l.contains(r#"trace_id="trace-c33""#) && l.contains(r#"call_id="c33""#)),
        "{text}"
    );
}

#[tokio::test]
async fn d24_d25_empty_input_and_null_output() {
    let oxp = server().await;
    // Vector 28: `input` omitted means `{}` (§3.11).
    let reply = oxp
        .call_request(json!({"tool_id": "System.GetTimestamp@1.0.0"}))
        .await;
    assert_eq!(reply.body["result"]["success"], true);
    // Vector 29: a unit tool has no `value` (§3.26).
    let reply = oxp
        .call_request(json!({"tool_id": "Util.Null@1.0.0"}))
        .await;
    assert_eq!(reply.body["result"]["success"], true);
    assert!(reply.body["result"].get("value").is_none());
}

// ---- V. Version resolution -------------------------------------------------------------------

#[tokio::test]
async fn v37_v38_v39_versions_resolve_exactly() {
    let oxp = server().await;
    for (tool_id, expected) in [
        ("Math.Which", "1.10.0"),      // vector 30, V.39: latest, numerically
        ("Math.Which@1", "1.0.0"),     // vector 31, V.38: exactly x.0.0
        ("Math.Which@1.2.0", "1.2.0"), // vector 32, V.37
    ] {
        let reply = oxp.call_request(json!({"tool_id": tool_id})).await;
        assert_eq!(reply.body["result"]["value"], expected, "{tool_id}");
    }
}

#[tokio::test]
async fn v40_e42_bad_or_unknown_ids_are_400() {
    let oxp = server().await;
    // Vectors 33–43.
    for tool_id in [
        "Math.Which@1.0",
        "Math.Which@1.10",
        "Math.Which@2",
        "Math.Which@0",
        "Math.Which@1.2.0-beta",
        "Math.Which@",
        "Math.Which@@1",
        "Math.Which@99999999999999999999999",
        "Which@1.0.0",
        "A.B.C@1.0.0",
        "Calculator.Add@2.0.0",
        "Nope.Tool",
        "math.which",
    ] {
        let reply = oxp.call_request(json!({"tool_id": tool_id})).await;
        assert_eq!(reply.status, 400, "{tool_id}");
        assert!(
            reply.body["message"]
                .as_str()
                .is_some_and(|m| !m.is_empty())
        );
        assert!(reply.body.get("result").is_none());
    }
    // Vector 41: the message names the tool's wire name; the developer message says more.
    let reply = oxp
        .call_request(json!({"tool_id": "Calculator.Add@2.0.0"}))
        .await;
    assert!(
        reply.body["message"]
            .as_str()
            .unwrap()
            .contains("Calculator_Add")
    );
    assert!(
        reply.body["developer_message"]
            .as_str()
            .unwrap()
            .contains("1.0.0")
    );
    let reply = oxp.call_request(json!({"tool_id": "Nope.Tool"})).await;
    assert_eq!(reply.body["message"], "Tool 'Nope_Tool' was not found");
}

// ---- Request shape and protocol errors --------------------------------------------------------

#[tokio::test]
async fn e42_malformed_requests_are_400() {
    let oxp = server().await;
    let raw = |body: &'static str| {
        oxp.request(Method::POST, "/tools/call")
            .header("content-type", "application/json")
            .body(body)
    };
    // Vectors 44–47.
    for body in [
        r#"{"request":"#,
        "",
        "[]",
        r#"{"request":"x"}"#,
        "null",
        r#"{"nothing": 1}"#,
    ] {
        let reply = oxp.call_with(raw(body)).await;
        assert_eq!(reply.status, 400, "{body:?}");
    }
    // Vectors 48–50: CallToolRequest is closed and `tool_id` a string.
    for request in [
        json!({"input": {}}),
        json!({"tool_id": 123}),
        json!({"tool_id": "Calculator.Add", "foo": 1}),
    ] {
        let reply = oxp.call_request(request.clone()).await;
        assert_eq!(reply.status, 400, "{request}");
    }
    // Vectors 53–57: versions.
    for schema in [json!("urn:oxp:2.0"), json!(42), json!(""), json!("foo")] {
        let reply = oxp
            .call(json!({"$schema": schema, "request": add("c1", json!(1), json!(2))}))
            .await;
        assert_eq!(reply.status, 400, "{schema}");
    }
    let reply = oxp
        .call_with(
            oxp.request(Method::POST, "/tools/call")
                .header("OXP-Version", "2.0")
                .json(&add("c1", json!(1), json!(2))),
        )
        .await;
    assert_eq!(reply.status, 400);
    // Vector 58: not JSON by Content-Type.
    let reply = oxp
        .call_with(
            oxp.request(Method::POST, "/tools/call")
                .header("content-type", "text/plain")
                .body(add("c1", json!(1), json!(2)).to_string()),
        )
        .await;
    assert_eq!(reply.status, 400);
    // §3.14 tolerates a missing Content-Type; oxp refuses it (a browser's no-cors POST sends
    // none). `application/*+json` is accepted.
    let body = json!({"request": add("c1", json!(1), json!(2))}).to_string();
    let reply = oxp
        .call_with(oxp.request(Method::POST, "/tools/call").body(body.clone()))
        .await;
    assert_eq!(reply.status, 400);
    assert_eq!(reply.body["message"], "The request body must be JSON.");
    let reply = oxp
        .call_with(
            oxp.request(Method::POST, "/tools/call")
                .header("content-type", "application/vnd.oxp+json; charset=utf-8")
                .body(body),
        )
        .await;
    assert_eq!(reply.status, 200);
}

#[tokio::test]
async fn c31_envelope_and_context_are_open() {
    let oxp = server().await;
    // Vector 51.
    let reply = oxp
        .call(json!({"request": add("c1", json!(1), json!(2)), "x-extension": true}))
        .await;
    assert_eq!(reply.status, 200);
    // Vector 52.
    let mut request = add("c1", json!(1), json!(2));
    request["context"] = json!({"x": 1});
    let reply = oxp.call_request(request).await;
    assert_eq!(reply.status, 200);
}

#[tokio::test]
async fn limits_oversized_and_deep_bodies_are_refused_and_the_server_survives() {
    let oxp = Oxp::start(Server::new(fixtures()).max_body_bytes(64 * 1024)).await;
    // Vector 59.
    let big = format!(
        r#"{{"request":{{"tool_id":"Calculator.Add","input":{{"a":1,"b":2,"pad":"{}"}}}}}}"#,
        "x".repeat(200_000)
    );
    let reply = oxp
        .call_with(oxp.request(Method::POST, "/tools/call").body(big))
        .await;
    assert_eq!(reply.status, 413);
    // Vector 60.
    let deep = format!(
        r#"{{"request":{{"tool_id":"Calculator.Add","input":{{"a":{}1{}}}}}}}"#,
        "[".repeat(10_000),
        "]".repeat(10_000)
    );
    let reply = oxp
        .call_with(oxp.request(Method::POST, "/tools/call").body(deep))
        .await;
    assert_eq!(reply.status, 400);
    let reply = oxp.call_request(add("c1", json!(1), json!(2))).await;
    assert_eq!(reply.status, 200, "still serving");
}

#[tokio::test]
async fn routing_errors_are_json_404_and_405() {
    let oxp = server().await;
    // Vector 61.
    for (method, path, status) in [
        (Method::GET, "/tools/call", 405),
        (Method::POST, "/tools", 405),
        (Method::POST, "/health", 405),
        (Method::GET, "/nope", 404),
    ] {
        let reply = oxp.send(oxp.request(method.clone(), path)).await;
        assert_eq!(reply.status, status, "{method} {path}");
        assert!(reply.body["message"].is_string());
    }
}

// ---- Input validation ------------------------------------------------------------------------

#[tokio::test]
async fn e45_e46_invalid_input_is_422_with_parameter_errors() {
    let oxp = server().await;
    // Vector 62.
    let reply = oxp
        .call_request(add("c1", json!(10), json!("infinity")))
        .await;
    assert_eq!(reply.status, 422);
    assert!(reply.body["parameter_errors"]["b"].is_string());
    assert!(reply.body.get("result").is_none());
    // Vector 63.
    let reply = oxp
        .call_request(json!({"tool_id": "Calculator.Add@1.0.0", "input": {"a": 10}}))
        .await;
    assert_eq!(reply.status, 422);
    assert!(reply.body["parameter_errors"]["b"].is_string());
    // Vector 64.
    let reply = oxp
        .call_request(json!({"tool_id": "Calculator.Add@1.0.0", "input": {"a": 1, "b": 2, "c": 3}}))
        .await;
    assert_eq!(reply.status, 422);
    assert!(reply.body["parameter_errors"]["c"].is_string());
    // Vector 65.
    for input in [json!([1, 2]), Value::Null] {
        let reply = oxp
            .call_request(json!({"tool_id": "Calculator.Add@1.0.0", "input": input}))
            .await;
        assert_eq!(reply.status, 422, "{input}");
    }
    // A nested failure is keyed by its top-level parameter, with the pointer in the text.
    let reply = oxp
        .call_request(json!({"tool_id": "Gmail.GetEmails", "input": {"n_emails": -1}, "context": {"user_id": "u", "authorization": [{"id": "google", "token": "t"}]}}))
        .await;
    assert_eq!(reply.status, 422);
    assert!(reply.body["parameter_errors"]["n_emails"].is_string());
}

#[tokio::test]
async fn e45_r28_the_tool_does_not_run_unless_requirements_and_input_pass() {
    use std::sync::atomic::Ordering::SeqCst;
    let oxp = server().await;
    let key = json!({"secrets": [{"id": "COUNTER_KEY", "value": "k"}]});
    let before = oxp_tests::BUMPS.load(SeqCst);
    // Invalid input (by: 0 is below the minimum): 422, and the tool did not run.
    let reply = oxp
        .call_request(json!({"tool_id": "Counter.Bump", "input": {"by": 0}, "context": key}))
        .await;
    assert_eq!(reply.status, 422);
    // Valid input, missing secret: 400, and the tool did not run.
    let reply = oxp
        .call_request(json!({"tool_id": "Counter.Bump", "input": {"by": 1}}))
        .await;
    assert_eq!(reply.status, 400);
    assert_eq!(oxp_tests::BUMPS.load(SeqCst), before);
    // Both right: it runs, once.
    let reply = oxp
        .call_request(json!({"tool_id": "Counter.Bump", "input": {"by": 1}, "context": key}))
        .await;
    assert_eq!(reply.status, 200);
    assert_eq!(oxp_tests::BUMPS.load(SeqCst), before + 1);
}

#[tokio::test]
async fn e48_values_conform_to_their_output_schema() {
    let oxp = server().await;
    let listed = oxp.list(oxp.request(Method::GET, "/tools")).await;
    let schema_of = |id: &str| {
        listed.body["items"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["id"] == id)
            .unwrap()["output_schema"]
            .clone()
    };
    let calls = [
        json!({"tool_id": "Calculator.Add@1.0.0", "input": {"a": 1, "b": 2}}),
        json!({"tool_id": "Math.Which@1.2.0"}),
        json!({"tool_id": "System.GetTimestamp@1.0.0"}),
        json!({"tool_id": "Gmail.GetEmails@1.2.0", "input": {"n_emails": 3}, "context": {"user_id": "u", "authorization": [{"id": "google", "token": "t"}]}}),
    ];
    for request in calls {
        let id = request["tool_id"].as_str().unwrap().to_owned();
        let reply = oxp.call_request(request).await;
        let value = &reply.body["result"]["value"];
        let validator = jsonschema::validator_for(&schema_of(&id)).unwrap();
        assert!(
            validator.is_valid(value),
            "{id}: {value} does not match its output schema"
        );
    }
}

// ---- R. Requirements -------------------------------------------------------------------------

#[tokio::test]
async fn r54_missing_secrets_are_400_and_values_never_leak() {
    let oxp = server().await;
    let sms = |context: Value| json!({"tool_id": "SMS.Send@0.1.2", "input": {"to": "+1", "body": "hi"}, "context": context});
    // Vector 66.
    let reply = oxp
        .call_request(json!({"tool_id": "SMS.Send@0.1.2", "input": {"to": "+1", "body": "hi"}}))
        .await;
    assert_eq!(reply.status, 400);
    assert_eq!(
        reply.body["missing_requirements"]["secrets"],
        json!(["TWILIO_API_KEY"])
    );
    // Vectors 67, 68.
    let reply = oxp
        .call_request(sms(json!({"secrets": [{"id": "OTHER", "value": "v"}]})))
        .await;
    assert_eq!(reply.status, 400);
    let reply = oxp
        .call_request(sms(json!({"secrets": [{"id": "TWILIO_API_KEY"}]})))
        .await;
    assert_eq!(reply.status, 400);
    // Vector 69.
    let reply = oxp
        .call_request(sms(
            json!({"secrets": [{"id": "TWILIO_API_KEY", "value": "sk-LEAKCANARY"}]}),
        ))
        .await;
    assert_eq!(reply.status, 200);
    assert_eq!(reply.body["result"]["success"], true);
    assert!(!reply.body.to_string().contains("LEAKCANARY"));
}

#[tokio::test]
async fn r52_r55_r56_missing_authorization_gets_a_challenge_with_a_check_url() {
    let provider = std::sync::Arc::new(InMemoryAuthorization::new(
        "https://auth.example.com/authorize",
    ));
    let oxp = Oxp::start(Server::from_pipeline(
        harness::pipeline().authorization(SharedProvider(provider.clone())),
    ))
    .await;
    let gmail = |context: Value| json!({"tool_id": "Gmail.GetEmails@1.2.0", "input": {}, "context": context});
    // Vector 70 (§3.22: never a 200).
    let reply = oxp
        .call_request(gmail(
            json!({"authorization": [{"id": "google", "token": "t"}]}),
        ))
        .await;
    assert_eq!(reply.status, 400);
    assert_eq!(reply.body["missing_requirements"]["user_id"], true);
    // Vector 71.
    let reply = oxp.call_request(gmail(json!({"user_id": "u1"}))).await;
    assert_eq!(reply.status, 400);
    let challenge = &reply.body["missing_requirements"]["authorization"][0];
    assert_eq!(challenge["id"], "google");
    assert!(
        challenge["url"]
            .as_str()
            .unwrap()
            .starts_with("https://auth.example.com/authorize")
    );
    let check_url = challenge["check_url"].as_str().unwrap().to_owned();
    assert!(check_url.starts_with(&oxp.base), "{check_url}");
    // Vector 72.
    let reply = oxp
        .call_request(gmail(
            json!({"user_id": "u1", "authorization": [{"id": "google"}]}),
        ))
        .await;
    assert_eq!(reply.status, 400);
    // Vector 74.
    let status = reqwest::get(&check_url)
        .await
        .unwrap()
        .json::<Value>()
        .await
        .unwrap();
    assert_eq!(status, json!({"status": "pending"}));
    provider.complete(check_url.rsplit('/').next().unwrap());
    let status = reqwest::get(&check_url)
        .await
        .unwrap()
        .json::<Value>()
        .await
        .unwrap();
    assert_eq!(status, json!({"status": "completed"}));
    let unknown = oxp.get("/authorization/no-such-challenge").await;
    assert_eq!(unknown.status, 404);
    // Vector 73.
    let reply = oxp
        .call_request(gmail(
            json!({"user_id": "u1", "authorization": [{"id": "google", "token": "t"}]}),
        ))
        .await;
    assert_eq!(reply.status, 200);
    // Vector 75 (D.27).
    let reply = oxp.call_request(add("c1", json!(1), json!(2))).await;
    assert_eq!(reply.status, 200);
}

/// Lets a test keep a handle on the provider the server owns.
struct SharedProvider(std::sync::Arc<InMemoryAuthorization>);

impl oxp_runtime::authorization::AuthorizationProvider for SharedProvider {
    fn challenge<'a>(
        &'a self,
        request: oxp_runtime::authorization::ChallengeRequest<'a>,
    ) -> oxp_runtime::__private::BoxFuture<'a, Option<oxp_runtime::authorization::Challenge>> {
        self.0.challenge(request)
    }
    fn status<'a>(
        &'a self,
        check_id: &'a str,
    ) -> oxp_runtime::__private::BoxFuture<
        'a,
        Option<oxp_runtime::authorization::AuthorizationStatus>,
    > {
        self.0.status(check_id)
    }
}

#[tokio::test]
async fn r52_without_a_provider_missing_authorization_is_400_with_a_message() {
    let oxp = Oxp::start(Server::new(fixtures())).await;
    let reply = oxp
        .call_request(json!({"tool_id": "Gmail.GetEmails", "context": {"user_id": "u1"}}))
        .await;
    assert_eq!(reply.status, 400);
    assert!(
        reply.body["message"]
            .as_str()
            .unwrap()
            .contains("authorization for google")
    );
}

// ---- E. Execution errors ---------------------------------------------------------------------

#[tokio::test]
async fn e47_tool_errors_are_200_with_every_field() {
    let oxp = server().await;
    // Vector 76.
    let reply = oxp
        .call_request(json!({"call_id": "723e4567", "tool_id": "Doorbell.Ring@0.1.0", "input": {"doorbell_id": "doorbell1"}}))
        .await;
    assert_eq!(reply.status, 200);
    let result = &reply.body["result"];
    assert_eq!(result["success"], false);
    assert!(result.get("value").is_none());
    assert_eq!(
        result["error"],
        json!({
            "message": "Doorbell ID not found",
            "developer_message": "The doorbell with ID 'doorbell1' does not exist.",
            "can_retry": true,
            "additional_prompt_content": "ids: doorbell42,doorbell84",
            "retry_after_ms": 500
        })
    );
}

#[tokio::test]
async fn e47_panics_and_timeouts_are_200_and_the_server_keeps_serving() {
    let log = harness::Log::captured();
    let oxp = server().await;
    // Vector 77.
    let reply = oxp.call_request(json!({"tool_id": "Util.Panic"})).await;
    assert_eq!(reply.status, 200);
    let error = &reply.body["result"]["error"];
    assert!(error["message"].as_str().is_some_and(|m| !m.is_empty()));
    assert!(
        !reply.body.to_string().contains("on purpose"),
        "the panic text stays out of the answer"
    );
    assert!(
        log.text().contains("on purpose"),
        "…and is in the log: {}",
        log.text()
    );
    // Vector 78.
    let reply = oxp.call_request(json!({"tool_id": "Util.Slow"})).await;
    assert_eq!(reply.status, 200);
    assert_eq!(reply.body["result"]["error"]["can_retry"], true);
    let reply = oxp.call_request(add("c1", json!(1), json!(2))).await;
    assert_eq!(reply.status, 200);
}

// ---- Embedding -------------------------------------------------------------------------------

#[tokio::test]
async fn the_router_nests_under_a_prefix() {
    let app = axum::Router::new().nest(
        "/oxp",
        Server::from_pipeline(
            harness::pipeline()
                .authorization(InMemoryAuthorization::new("https://auth.example.com/a")),
        )
        .router(),
    );
    let oxp = Oxp::start_router(app).await;
    assert_eq!(oxp.get("/oxp/health").await.status, 200);
    let reply = oxp.list(oxp.request(Method::GET, "/oxp/tools")).await;
    assert_eq!(reply.status, 200);
    let reply =
        oxp.call_with(oxp.request(Method::POST, "/oxp/tools/call").json(
            &json!({"request": {"tool_id": "Gmail.GetEmails", "context": {"user_id": "u"}}}),
        ))
        .await;
    let check_url = reply.body["missing_requirements"]["authorization"][0]["check_url"]
        .as_str()
        .unwrap();
    assert!(
        check_url.starts_with(&format!("{}/oxp/authorization/", oxp.base)),
        "{check_url}"
    );
    let status = reqwest::get(check_url).await.unwrap();
    assert_eq!(status.status(), 200);
}

// ---- LangChain compatibility (§3.2, §3.3, §3.19) ---------------------------------------------

#[tokio::test]
async fn compat_langchain_clients_get_bare_lists_top_level_results_and_wire_names() {
    let oxp = Oxp::start(Server::new(fixtures()).langchain_compat(true)).await;
    // Vector 80.
    let reply = oxp
        .send(
            oxp.request(Method::GET, "/tools")
                .header("user-agent", "universal-tool-sdk-py/0.0.2"),
        )
        .await;
    assert!(reply.body.is_array());
    // Other clients still get the OXP list.
    let reply = oxp.list(oxp.request(Method::GET, "/tools")).await;
    assert!(reply.body["items"].is_array());
    // Vector 81.
    let reply = oxp
        .call_request(json!({"tool_id": "Calculator_Add", "input": {"a": 1, "b": 2}}))
        .await;
    assert_eq!(reply.status, 200);
    assert_eq!(reply.body["success"], true);
    assert_eq!(reply.body["value"], 3.0);
    assert_eq!(reply.body["result"]["value"], 3.0);
    // Strict mode does not resolve wire names.
    let strict = server().await;
    let reply = strict
        .call_request(json!({"tool_id": "Calculator_Add", "input": {"a": 1, "b": 2}}))
        .await;
    assert_eq!(reply.status, 400);
}

#[test]
fn the_harness_rejects_bodies_the_spec_forbids() {
    // The schema checks above can fail: each of these breaks the spec in one way.
    for (pointer, body) in [
        (
            harness::CALL_200,
            json!({"result": {"call_id": "c", "success": true, "error": {"message": "m"}}}),
        ),
        (
            harness::CALL_200,
            json!({"result": {"call_id": "c", "success": false, "value": 1}}),
        ),
        (harness::CALL_200, json!({"result": {"success": true}})),
        (
            harness::CALL_200,
            json!({"result": {"call_id": "c", "success": true, "extra": 1}}),
        ),
        (
            harness::SERVER_ERROR,
            json!({"developer_message": "no message"}),
        ),
        (
            TOOL_DEFINITION,
            json!({"id": "A.B@1.0", "name": "A_B", "description": "d", "version": "1.0"}),
        ),
        (harness::LIST_200, json!({"tools": []})),
    ] {
        let failed = std::panic::catch_unwind(|| assert_valid(pointer, &body)).is_err();
        assert!(failed, "{pointer} accepted {body}");
    }
}
