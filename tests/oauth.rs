//! The OAuth 2.1 resource server (cargo feature `oauth`) on real sockets: an identity provider
//! of our own on 127.0.0.1 (RFC 8414 metadata and a JWKS, counting every fetch, able to rotate
//! keys and go down), keys made per run, and the server answering over OXP and MCP.
//!
//! Every wait is on a counter or an answer, never on time: the fetch counts are read after the
//! requests that made them have been answered.
//!
//! The last test runs a real identity provider, node-oidc-provider (`tests/oidc`, installed by
//! `.ci/run`); without Node.js or the package it prints `SKIPPED: needs …` (a failure under
//! `OXP_REQUIRE_ALL_TESTS=1`).

#[path = "harness/mod.rs"]
mod harness;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::IntoResponse;
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use oxp_runtime::call::Pipeline;
use oxp_runtime::mcp::McpServer;
use oxp_runtime::oauth::{OAuth, Setting};
use oxp_runtime::server::{Server, ServerAuth};
use oxp_runtime::{Registry, prompt, resource, tool};
use ring::rand::SystemRandom;
use ring::signature::{self, KeyPair};
use serde_json::{Value, json};

// ---------------------------------------------------------------------------------------------
// Tools

/// The paths `write` was called with: a refused call must not be among them (tests run at
/// once, so each looks for its own path).
static WRITES: Mutex<Vec<String>> = Mutex::new(Vec::new());

/// Write a file.
#[tool(toolkit = "Files", version = "1.0.0", scopes = ["files:write"])]
async fn write(
    /// Where.
    path: String,
) -> String {
    WRITES.lock().unwrap().push(path.clone());
    path
}

/// Read a file.
#[tool(toolkit = "Files", version = "1.0.0")]
async fn read(
    /// Where.
    path: String,
) -> String {
    path
}

/// Who the tool is told is calling.
#[tool(toolkit = "Files", version = "1.0.0", user_id)]
async fn whoami(ctx: &oxp_runtime::ToolContext) -> String {
    ctx.user_id().unwrap_or_default().to_owned()
}

/// The audit days read: a refused read must not be among them.
static AUDITS: Mutex<Vec<String>> = Mutex::new(Vec::new());

/// One day of the audit log.
#[resource(uri = "audit://{day}", scopes = ["audit:read"])]
fn audit(
    /// The day.
    #[complete(days)]
    day: String,
) -> String {
    AUDITS.lock().unwrap().push(day.clone());
    format!("{day}: quiet")
}

/// Days of the audit log, offered as completions.
fn days(typed: &str) -> Vec<String> {
    ["monday", "tuesday"]
        .into_iter()
        .filter(|d| d.starts_with(typed))
        .map(str::to_owned)
        .collect()
}

/// Who may write where.
#[resource(uri = "acl://files", scopes = ["audit:read", "files:write"])]
fn acl() -> String {
    AUDITS.lock().unwrap().push("acl".into());
    "alice: /tmp".into()
}

/// What the server is.
#[resource(uri = "about://server")]
fn about() -> String {
    "a file server".into()
}

/// Review a change before it is merged.
#[prompt(scopes = ["code:review"])]
fn merge_review(
    /// The change.
    #[complete(days)]
    diff: String,
) -> String {
    AUDITS.lock().unwrap().push(format!("review {diff}"));
    format!("Review this change: {diff}")
}

/// Say hello.
#[prompt]
fn hello() -> String {
    "Say hello.".into()
}

// ---------------------------------------------------------------------------------------------
// Keys

/// Signs a token's `header.payload`.
type Signer = Box<dyn Fn(&[u8]) -> Vec<u8> + Send + Sync>;

/// A signing key of the provider, with its public JWK.
struct Key {
    kid: String,
    alg: &'static str,
    sign: Signer,
    jwk: Value,
}

fn b64(bytes: &[u8]) -> String {
    URL_SAFE_NO_PAD.encode(bytes)
}

/// One RSA key per test binary: making one takes a while, and its kid differs per use anyway.
fn rsa_der() -> &'static (Vec<u8>, Vec<u8>, Vec<u8>) {
    static DER: std::sync::OnceLock<(Vec<u8>, Vec<u8>, Vec<u8>)> = std::sync::OnceLock::new();
    DER.get_or_init(|| {
        use rsa::pkcs8::EncodePrivateKey;
        use rsa::traits::PublicKeyParts;
        let key = rsa::RsaPrivateKey::new(&mut rand_core::OsRng, 2048).unwrap();
        let der = key.to_pkcs8_der().unwrap().as_bytes().to_vec();
        (der, key.n().to_bytes_be(), key.e().to_bytes_be())
    })
}

impl Key {
    fn rsa(kid: &str, alg: &'static str) -> Key {
        let (der, n, e) = rsa_der();
        let pair = Arc::new(signature::RsaKeyPair::from_pkcs8(der).unwrap());
        let padding: &'static dyn signature::RsaEncoding = match alg {
            "RS256" => &signature::RSA_PKCS1_SHA256,
            "PS256" => &signature::RSA_PSS_SHA256,
            other => panic!("{other}"),
        };
        Key {
            kid: kid.into(),
            alg,
            sign: Box::new(move |message| {
                let mut out = vec![0; pair.public().modulus_len()];
                pair.sign(padding, &SystemRandom::new(), message, &mut out)
                    .unwrap();
                out
            }),
            jwk: json!({"kty": "RSA", "kid": kid, "use": "sig", "n": b64(n), "e": b64(e)}),
        }
    }

    fn es256(kid: &str) -> Key {
        let rng = SystemRandom::new();
        let alg = &signature::ECDSA_P256_SHA256_FIXED_SIGNING;
        let der = signature::EcdsaKeyPair::generate_pkcs8(alg, &rng).unwrap();
        let pair = signature::EcdsaKeyPair::from_pkcs8(alg, der.as_ref(), &rng).unwrap();
        let point = pair.public_key().as_ref().to_vec();
        Key {
            kid: kid.into(),
            alg: "ES256",
            jwk: json!({"kty": "EC", "crv": "P-256", "kid": kid, "alg": "ES256",
                "x": b64(&point[1..33]), "y": b64(&point[33..])}),
            sign: Box::new(move |message| {
                pair.sign(&SystemRandom::new(), message)
                    .unwrap()
                    .as_ref()
                    .to_vec()
            }),
        }
    }

    fn eddsa(kid: &str) -> Key {
        let der = signature::Ed25519KeyPair::generate_pkcs8(&SystemRandom::new()).unwrap();
        let pair = signature::Ed25519KeyPair::from_pkcs8(der.as_ref()).unwrap();
        Key {
            kid: kid.into(),
            alg: "EdDSA",
            jwk: json!({"kty": "OKP", "crv": "Ed25519", "kid": kid,
                "x": b64(pair.public_key().as_ref())}),
            sign: Box::new(move |message| pair.sign(message).as_ref().to_vec()),
        }
    }

    /// A token with this header (`alg` and `kid` added unless given) and claims.
    fn token_with(&self, header: Value, claims: &Value) -> String {
        let mut header = header.as_object().unwrap().clone();
        header.entry("alg").or_insert(json!(self.alg));
        header.entry("kid").or_insert(json!(self.kid));
        // `null` leaves a member out (`"kid": null`: a token with no kid).
        header.retain(|_, v| !v.is_null());
        let signed = format!(
            "{}.{}",
            b64(Value::Object(header).to_string().as_bytes()),
            b64(claims.to_string().as_bytes())
        );
        let signature = (self.sign)(signed.as_bytes());
        format!("{signed}.{}", b64(&signature))
    }

    fn token(&self, claims: &Value) -> String {
        self.token_with(json!({"typ": "at+jwt"}), claims)
    }
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

// ---------------------------------------------------------------------------------------------
// The identity provider

#[derive(Default)]
struct Provider {
    issuer: Mutex<String>,
    jwks: Mutex<Value>,
    /// Fetches of the key set, answered or not.
    fetches: AtomicUsize,
    down: AtomicBool,
    /// Answer the key set with a redirect to another host.
    redirect: AtomicBool,
    /// Answer the key set with a megabyte of keys.
    oversized: AtomicBool,
    /// Never answer the key set (until the test ends).
    hang: AtomicBool,
    /// RFC 7662 answers by token (unknown tokens: inactive), and how many were asked for.
    introspection: Mutex<std::collections::HashMap<String, Value>>,
    introspections: AtomicUsize,
    /// Told of each introspection asked for.
    introspected: tokio::sync::Notify,
    /// While set, introspections wait for a permit of it before they are answered.
    introspection_gate: Mutex<Option<Arc<tokio::sync::Semaphore>>>,
}

impl Provider {
    /// Waits until `n` introspections have been asked for.
    async fn introspections_reach(&self, n: usize) {
        loop {
            let told = self.introspected.notified();
            tokio::pin!(told);
            told.as_mut().enable();
            if self.introspections.load(Ordering::SeqCst) >= n {
                return;
            }
            told.await;
        }
    }
}

/// The client the server introspects as.
const CLIENT: (&str, &str) = ("oxp-tools", "introspection-secret-0123456789");

async fn introspect(
    State(provider): State<Arc<Provider>>,
    headers: axum::http::HeaderMap,
    body: String,
) -> axum::response::Response {
    provider.introspections.fetch_add(1, Ordering::SeqCst);
    provider.introspected.notify_waiters();
    let gate = provider.introspection_gate.lock().unwrap().clone();
    if let Some(gate) = gate {
        gate.acquire().await.unwrap().forget();
    }
    let basic = format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(format!("{}:{}", CLIENT.0, CLIENT.1))
    );
    if headers.get("authorization").and_then(|v| v.to_str().ok()) != Some(basic.as_str()) {
        return StatusCode::UNAUTHORIZED.into_response();
    }
    let token = body
        .split('&')
        .find_map(|pair| pair.strip_prefix("token="))
        .unwrap_or_default();
    if token == "introspection-fails" {
        return StatusCode::INTERNAL_SERVER_ERROR.into_response();
    }
    let answer = provider
        .introspection
        .lock()
        .unwrap()
        .get(token)
        .cloned()
        .unwrap_or(json!({"active": false}));
    json_response(answer).into_response()
}

fn json_response(body: Value) -> impl IntoResponse {
    ([("content-type", "application/json")], body.to_string())
}

async fn metadata(State(provider): State<Arc<Provider>>) -> impl IntoResponse {
    let issuer = provider.issuer.lock().unwrap().clone();
    json_response(json!({"issuer": issuer, "jwks_uri": format!("{issuer}/jwks")}))
}

async fn jwks(State(provider): State<Arc<Provider>>) -> axum::response::Response {
    provider.fetches.fetch_add(1, Ordering::SeqCst);
    if provider.down.load(Ordering::SeqCst) {
        return StatusCode::SERVICE_UNAVAILABLE.into_response();
    }
    if provider.redirect.load(Ordering::SeqCst) {
        return (
            StatusCode::FOUND,
            [("location", "https://keys.evil.example/jwks")],
        )
            .into_response();
    }
    if provider.oversized.load(Ordering::SeqCst) {
        let key = json!({"kty": "OKP", "crv": "Ed25519", "x": "x".repeat(1000)});
        return json_response(json!({"keys": vec![key; 1000]})).into_response();
    }
    if provider.hang.load(Ordering::SeqCst) {
        std::future::pending::<()>().await;
    }
    json_response(provider.jwks.lock().unwrap().clone()).into_response()
}

/// A listener that speaks TLS: the provider over HTTPS.
struct TlsListener {
    tcp: tokio::net::TcpListener,
    tls: tokio_rustls::TlsAcceptor,
}

impl axum::serve::Listener for TlsListener {
    type Io = tokio_rustls::server::TlsStream<tokio::net::TcpStream>;
    type Addr = std::net::SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        loop {
            let Ok((stream, addr)) = self.tcp.accept().await else {
                continue;
            };
            // A client that does not trust the certificate ends its handshake: next one.
            if let Ok(stream) = self.tls.accept(stream).await {
                return (stream, addr);
            }
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        self.tcp.local_addr()
    }
}

impl Provider {
    async fn start(keys: &[&Key]) -> Arc<Provider> {
        Provider::start_with(keys, None).await
    }

    /// The provider over HTTPS (`tls`) or plain HTTP.
    async fn start_with(keys: &[&Key], tls: Option<tokio_rustls::TlsAcceptor>) -> Arc<Provider> {
        let provider = Arc::new(Provider::default());
        provider.publish(keys);
        let app = axum::Router::new()
            .route(
                "/.well-known/oauth-authorization-server",
                axum::routing::get(metadata),
            )
            .route("/jwks", axum::routing::get(jwks))
            .route("/introspect", axum::routing::post(introspect))
            .with_state(provider.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        match tls {
            None => {
                *provider.issuer.lock().unwrap() = format!("http://{addr}");
                tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
            }
            Some(tls) => {
                *provider.issuer.lock().unwrap() = format!("https://{addr}");
                let listener = TlsListener { tcp: listener, tls };
                tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
            }
        }
        provider
    }

    fn publish(&self, keys: &[&Key]) {
        *self.jwks.lock().unwrap() =
            json!({"keys": keys.iter().map(|k| k.jwk.clone()).collect::<Vec<_>>()});
    }

    fn issuer(&self) -> String {
        self.issuer.lock().unwrap().clone()
    }

    fn fetches(&self) -> usize {
        self.fetches.load(Ordering::SeqCst)
    }
}

// ---------------------------------------------------------------------------------------------
// The server

struct Oxp {
    base: String,
    client: reqwest::Client,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Oxp {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// An API key the servers below also accept.
const API_KEY: &str = "k_0123456789abcdef0123456789abcdef";

impl Oxp {
    /// Serves OXP and MCP with `configure`'s OAuth for the provider (resource: the server's
    /// own URL; every request needs the `tools` scope) beside an API key, after the start-up
    /// check.
    async fn start(provider: &Provider, configure: impl FnOnce(OAuth) -> OAuth) -> Oxp {
        Oxp::start_with(provider, configure, Setup::default()).await
    }

    /// [`start`](Self::start), with more of the server configured (`setup`).
    async fn start_with(
        provider: &Provider,
        configure: impl FnOnce(OAuth) -> OAuth,
        setup: Setup,
    ) -> Oxp {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        // The limit on forged tokens per client is off unless a test turns it on: every test
        // sends from 127.0.0.1, and most send many forged tokens on purpose.
        let oauth = configure(
            OAuth::new(format!("{base}{}", setup.path))
                .issuer(provider.issuer())
                .scopes(["tools"])
                .forged_tokens_per_client(0, 0),
        );
        let auth = (setup.auth)(ServerAuth::default().api_key(API_KEY).oauth(oauth));
        auth.ready().await.expect("the provider is up");
        let registry = (setup.registry)(Registry::builder())
            .tool(write::TOOL)
            .tool(read::TOOL)
            .tool(whoami::TOOL)
            .resource(audit::RESOURCE)
            .resource(acl::RESOURCE)
            .resource(about::RESOURCE)
            .prompt(merge_review::PROMPT)
            .prompt(hello::PROMPT)
            .build()
            .unwrap();
        let pipeline = Pipeline::new(registry);
        let server = (setup.server)(
            Server::from_pipeline(pipeline.clone())
                .auth(auth)
                .playground(true)
                .nest("/mcp", McpServer::new(pipeline).into_router()),
        );
        let task = tokio::spawn(async move {
            server
                .serve(listener, std::future::pending(), Duration::from_secs(1))
                .await
                .unwrap();
        });
        Oxp {
            base,
            client: reqwest::Client::new(),
            task,
        }
    }

    /// A prefix for the opaque tokens of this server's test, which the provider is asked about
    /// as they are (letters, digits and `-`: nothing form encoding changes).
    fn tag(&self) -> String {
        self.base.replace(|c: char| !c.is_ascii_alphanumeric(), "-")
    }

    async fn send(&self, request: reqwest::RequestBuilder) -> Reply {
        let response = request.send().await.expect("the server answers");
        let status = response.status().as_u16();
        let challenge = response
            .headers()
            .get("www-authenticate")
            .map(|v| v.to_str().unwrap().to_owned());
        let headers = response.headers().clone();
        let body = response.json::<Value>().await.unwrap_or(Value::Null);
        Reply {
            status,
            challenge,
            headers,
            body,
        }
    }

    async fn list(&self, token: &str) -> Reply {
        self.send(
            self.client
                .get(format!("{}/tools", self.base))
                .bearer_auth(token),
        )
        .await
    }

    async fn call(&self, token: &str, tool: &str) -> Reply {
        self.call_at(token, tool, "/tmp/x").await
    }

    async fn call_at(&self, token: &str, tool: &str, path: &str) -> Reply {
        self.send(
            self.client
                .post(format!("{}/tools/call", self.base))
                .header("oxp-version", "1.0")
                .bearer_auth(token)
                .json(&json!({"tool_id": tool, "input": {"path": path}})),
        )
        .await
    }

    async fn mcp(&self, token: &str, body: Value) -> Reply {
        self.send(
            self.client
                .post(format!("{}/mcp", self.base))
                .header("accept", "application/json, text/event-stream")
                .header("mcp-protocol-version", "2025-06-18")
                .bearer_auth(token)
                .json(&body),
        )
        .await
    }
}

/// What [`Oxp::start_with`] configures besides OAuth.
struct Setup {
    /// The resource's path after the server's address (`OXP_PUBLIC_URL`'s).
    path: &'static str,
    auth: Box<dyn FnOnce(ServerAuth) -> ServerAuth>,
    registry: Box<dyn FnOnce(oxp_runtime::RegistryBuilder) -> oxp_runtime::RegistryBuilder>,
    server: Box<dyn FnOnce(Server) -> Server>,
}

impl Default for Setup {
    fn default() -> Self {
        Setup {
            path: "",
            auth: Box::new(|auth| auth),
            registry: Box::new(|registry| registry),
            server: Box::new(|server| server),
        }
    }
}

#[derive(Debug)]
struct Reply {
    status: u16,
    challenge: Option<String>,
    headers: reqwest::header::HeaderMap,
    body: Value,
}

impl Reply {
    fn tool_ids(&self) -> Vec<String> {
        self.body["items"]
            .as_array()
            .unwrap_or_else(|| panic!("a list: {self:?}"))
            .iter()
            .map(|t| t["id"].as_str().unwrap().to_owned())
            .collect()
    }
}

/// Claims of a good token for `oxp`, with `scope`.
fn claims(provider: &Provider, oxp: &Oxp, scope: &str) -> Value {
    json!({
        "iss": provider.issuer(),
        "sub": "alice",
        "aud": oxp.base,
        "exp": now() + 300,
        "iat": now(),
        "scope": scope,
    })
}

fn with(mut claims: Value, key: &str, value: Value) -> Value {
    claims[key] = value;
    claims
}

fn without(mut claims: Value, key: &str) -> Value {
    claims.as_object_mut().unwrap().remove(key);
    claims
}

// ---------------------------------------------------------------------------------------------
// Tests

/// Tokens signed with each kind of key the issue lists (RSA PKCS#1 and PSS, P-256, Ed25519)
/// are accepted over OXP and MCP; so is the API key beside them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_of_every_key_kind_are_accepted_beside_an_api_key() {
    let keys = [
        Key::rsa("rsa", "RS256"),
        Key::rsa("pss", "PS256"),
        Key::es256("ec"),
        Key::eddsa("ed"),
    ];
    let provider = Provider::start(&keys.iter().collect::<Vec<_>>()).await;
    let oxp = Oxp::start(&provider, |o| o).await;
    for key in &keys {
        let token = key.token(&claims(&provider, &oxp, "tools files:write"));
        let list = oxp.list(&token).await;
        assert_eq!(list.status, 200, "{}: {list:?}", key.alg);
        let call = oxp.call(&token, "Files.Write").await;
        assert_eq!(call.status, 200, "{}: {call:?}", key.alg);
        assert_eq!(call.body["success"], true, "{call:?}");
    }
    let mcp = oxp
        .mcp(
            &keys[0].token(&claims(&provider, &oxp, "tools")),
            json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}),
        )
        .await;
    assert_eq!(mcp.status, 200, "{mcp:?}");
    let by_key = oxp
        .send(
            oxp.client
                .get(format!("{}/tools", oxp.base))
                .header("x-api-key", API_KEY),
        )
        .await;
    assert_eq!(by_key.status, 200);
    // The API key is the operator's credential: scopes do not hide tools from it.
    assert_eq!(
        by_key.tool_ids(),
        [
            "Files.Read@1.0.0",
            "Files.Whoami@1.0.0",
            "Files.Write@1.0.0"
        ]
    );
}

/// Over MCP, a token's caller is the user tools are told of: its `sub`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_mcp_callers_user_is_its_tokens_subject() {
    let key = Key::es256("ec");
    let provider = Provider::start(&[&key]).await;
    let oxp = Oxp::start(&provider, |o| o).await;
    let token = key.token(&with(claims(&provider, &oxp, "tools"), "sub", json!("bob")));
    let reply = oxp
        .mcp(
            &token,
            json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                   "params": {"name": "Files_Whoami", "arguments": {}}}),
        )
        .await;
    assert_eq!(reply.status, 200, "{reply:?}");
    assert_eq!(
        reply.body["result"]["content"][0]["text"], "bob",
        "{reply:?}"
    );
}

/// The user is the token's on OXP as on MCP: a call is told the token's `sub` (an OAuth token's
/// and an HS256 token's alike), names it or no one, and one naming another user is a 403 saying
/// so, unless the server trusts its callers to assert users (`OXP_TRUST_USER_ID`). An API key
/// names no one, so its caller names the user.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_oxp_callers_user_is_its_tokens_subject_unless_users_are_trusted() {
    const SECRET: &str = "a-test-secret-of-at-least-32-bytes!";
    let key = Key::es256("ec");
    let provider = Provider::start(&[&key]).await;
    let whoami = |credential: reqwest::RequestBuilder, user: Option<&str>| {
        let mut call = json!({"tool_id": "Files.Whoami", "input": {}});
        if let Some(user) = user {
            call["context"] = json!({"user_id": user});
        }
        credential.header("oxp-version", "1.0").json(&call)
    };
    let setup = Setup {
        auth: Box::new(|auth| auth.jwt_secret(SECRET)),
        ..Setup::default()
    };
    let oxp = Oxp::start_with(&provider, |o| o, setup).await;
    let post = || oxp.client.post(format!("{}/tools/call", oxp.base));
    let oauth = key.token(&with(claims(&provider, &oxp, "tools"), "sub", json!("bob")));
    let hs256 = jsonwebtoken::encode(
        &jsonwebtoken::Header::default(),
        &json!({"sub": "bob", "exp": now() + 300}),
        &jsonwebtoken::EncodingKey::from_secret(SECRET.as_bytes()),
    )
    .unwrap();
    for token in [&oauth, &hs256] {
        for user in [None, Some("bob")] {
            let reply = oxp.send(whoami(post().bearer_auth(token), user)).await;
            assert_eq!(reply.status, 200, "{reply:?}");
            assert_eq!(reply.body["value"], "bob", "{reply:?}");
        }
        let foreign = oxp
            .send(whoami(post().bearer_auth(token), Some("alice")))
            .await;
        assert_eq!(foreign.status, 403, "{foreign:?}");
        let message = foreign.body["message"].as_str().unwrap();
        assert!(message.contains("token's subject"), "{message}");
        assert!(message.contains("OXP_TRUST_USER_ID"), "{message}");
    }
    let metrics = oxp
        .client
        .get(format!("{}/metrics", oxp.base))
        .header("x-api-key", API_KEY)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        metrics.contains("oxp_refusals_total{reason=\"foreign_user\"} 2"),
        "{metrics}"
    );
    // An API key names no user: its caller does.
    let by_key = oxp
        .send(whoami(post().header("x-api-key", API_KEY), Some("alice")))
        .await;
    assert_eq!(by_key.body["value"], "alice", "{by_key:?}");
    // A gateway the operator trusts asserts its users.
    let setup = Setup {
        server: Box::new(|server| server.trust_user_id(true)),
        ..Setup::default()
    };
    let trusting = Oxp::start_with(&provider, |o| o, setup).await;
    let oauth = key.token(&with(
        claims(&provider, &trusting, "tools"),
        "sub",
        json!("gateway"),
    ));
    let post = trusting
        .client
        .post(format!("{}/tools/call", trusting.base));
    let reply = trusting
        .send(whoami(post.bearer_auth(&oauth), Some("alice")))
        .await;
    assert_eq!(reply.status, 200, "{reply:?}");
    assert_eq!(reply.body["value"], "alice", "{reply:?}");
}

/// Each refusal of the issue's item 2 and the notes' pitfalls: a 401 whose challenge says
/// `invalid_token` and where the metadata is, and a message that says what was wrong.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_bad_token_is_a_401_with_a_challenge() {
    let rsa = Key::rsa("rsa", "RS256");
    let ec = Key::es256("ec");
    let provider = Provider::start(&[&rsa, &ec]).await;
    let oxp = Oxp::start(&provider, |o| {
        o.key_refetch_interval(Duration::from_secs(3600))
    })
    .await;
    let good = claims(&provider, &oxp, "tools");
    let (_, n, _) = rsa_der();
    let hs256_with_public_key = {
        // Algorithm confusion: HMAC keyed with the RSA public key's bytes.
        let signed = format!(
            "{}.{}",
            b64(json!({"alg": "HS256", "kid": "rsa"}).to_string().as_bytes()),
            b64(good.to_string().as_bytes())
        );
        let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, n);
        format!(
            "{signed}.{}",
            b64(ring::hmac::sign(&key, signed.as_bytes()).as_ref())
        )
    };
    let unsigned = format!(
        "{}.{}.",
        b64(br#"{"alg":"none"}"#),
        b64(good.to_string().as_bytes())
    );
    let tampered = {
        let token = rsa.token(&good);
        let parts: Vec<&str> = token.split('.').collect();
        let claims = with(good.clone(), "sub", json!("mallory"));
        format!(
            "{}.{}.{}",
            parts[0],
            b64(claims.to_string().as_bytes()),
            parts[2]
        )
    };
    let cases: Vec<(&str, String, &str)> = vec![
        (
            "expired",
            rsa.token(&with(good.clone(), "exp", json!(now() - 3600))),
            "expired",
        ),
        ("no exp", rsa.token(&without(good.clone(), "exp")), "`exp`"),
        (
            "not yet valid",
            rsa.token(&with(good.clone(), "nbf", json!(now() + 3600))),
            "`nbf`",
        ),
        (
            "issued in the future",
            rsa.token(&with(good.clone(), "iat", json!(now() + 3600))),
            "`iat`",
        ),
        (
            "wrong issuer",
            rsa.token(&with(good.clone(), "iss", json!("https://evil.example"))),
            "issuer",
        ),
        (
            "issuer with a trailing slash",
            rsa.token(&with(
                good.clone(),
                "iss",
                json!(format!("{}/", provider.issuer())),
            )),
            "issuer",
        ),
        ("no aud", rsa.token(&without(good.clone(), "aud")), "`aud`"),
        (
            "another client's aud",
            rsa.token(&with(good.clone(), "aud", json!("other-client"))),
            "not issued for this server",
        ),
        (
            "Keycloak's account aud",
            rsa.token(&with(good.clone(), "aud", json!(["account"]))),
            "not issued for this server",
        ),
        (
            "aud of another path",
            rsa.token(&with(
                good.clone(),
                "aud",
                json!(format!("{}/other", oxp.base)),
            )),
            "not issued for this server",
        ),
        ("no sub", rsa.token(&without(good.clone(), "sub")), "`sub`"),
        ("alg none", unsigned, "`alg: none`"),
        ("HS256 with the public key", hs256_with_public_key, "HS*"),
        (
            "alg not the key's",
            rsa.token_with(json!({"alg": "ES256", "kid": "rsa"}), &good),
            "does not match",
        ),
        (
            "alg not the JWK's",
            ec.token_with(json!({"alg": "ES384", "kid": "ec"}), &good),
            "does not match",
        ),
        (
            "alg outside the list",
            ec.token_with(json!({"alg": "ES512", "kid": "ec"}), &good),
            "not accepted",
        ),
        ("tampered payload", tampered, "signature"),
        (
            "another key's signature",
            ec.token_with(json!({"kid": "rsa", "alg": "RS256"}), &good),
            "signature",
        ),
        (
            "unknown crit",
            rsa.token_with(json!({"crit": ["exp"]}), &good),
            "critical",
        ),
        (
            "an ID token's typ",
            rsa.token_with(json!({"typ": "id_token+jwt"}), &good),
            "access token",
        ),
        (
            "scope array with a number",
            rsa.token(&with(good.clone(), "scope", json!(["tools", 7]))),
            "strings",
        ),
        (
            "scp of another type",
            rsa.token(&with(
                without(good.clone(), "scope"),
                "scp",
                json!({"a": 1}),
            )),
            "strings",
        ),
        (
            "oversized",
            rsa.token(&with(good.clone(), "pad", json!("x".repeat(20_000)))),
            "too large",
        ),
        ("not a JWT", "abc.def".to_owned(), "JWT"),
        (
            "no kid, several keys",
            rsa.token_with(json!({"kid": null}), &good),
            "does not publish",
        ),
    ];
    for (name, token, says) in cases {
        let reply = oxp.list(&token).await;
        assert_eq!(reply.status, 401, "{name}: {reply:?}");
        let challenge = reply.challenge.clone().unwrap_or_default();
        assert!(
            challenge.starts_with(&format!(
                "Bearer resource_metadata=\"{}/.well-known/oauth-protected-resource\", error=\"invalid_token\"",
                oxp.base
            )),
            "{name}: {challenge}"
        );
        let message = reply.body["message"].as_str().unwrap_or_default();
        assert!(message.contains(says), "{name}: {message}");
        // Nothing of the token comes back.
        assert!(
            !message.contains("alice") && !challenge.contains("alice"),
            "{name}"
        );
    }
    // The good token itself passes: every refusal above is the change it names.
    assert_eq!(oxp.list(&rsa.token(&good)).await.status, 200);
}

/// A request with no token is a 401 pointing to the metadata and naming the scope every request
/// needs (no `error`, RFC 6750 §3.1), at `/mcp` to its own; a token in the URL, or two credentials, are refused; the scheme's case
/// does not matter.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn challenges_and_where_tokens_may_come() {
    let key = Key::es256("ec");
    let provider = Provider::start(&[&key]).await;
    let oxp = Oxp::start(&provider, |o| o).await;
    let none = oxp
        .send(oxp.client.get(format!("{}/tools", oxp.base)))
        .await;
    assert_eq!(none.status, 401);
    assert_eq!(
        none.challenge.as_deref(),
        Some(
            format!(
                "Bearer resource_metadata=\"{}/.well-known/oauth-protected-resource\", scope=\"tools\"",
                oxp.base
            )
            .as_str()
        )
    );
    let mcp = oxp
        .send(
            oxp.client
                .post(format!("{}/mcp", oxp.base))
                .json(&json!({})),
        )
        .await;
    assert_eq!(mcp.status, 401);
    assert_eq!(
        mcp.challenge.as_deref(),
        Some(
            format!(
                "Bearer resource_metadata=\"{}/.well-known/oauth-protected-resource/mcp\", scope=\"tools\"",
                oxp.base
            )
            .as_str()
        )
    );
    let token = key.token(&claims(&provider, &oxp, "tools"));
    let in_query = oxp
        .send(
            oxp.client
                .get(format!("{}/tools?access_token={token}", oxp.base))
                .bearer_auth(&token),
        )
        .await;
    assert_eq!(in_query.status, 401, "{in_query:?}");
    let two = oxp
        .send(
            oxp.client
                .get(format!("{}/tools", oxp.base))
                .bearer_auth(&token)
                .header("x-api-key", API_KEY),
        )
        .await;
    assert_eq!(two.status, 401);
    let two_headers = oxp
        .send(
            oxp.client
                .get(format!("{}/tools", oxp.base))
                .header("authorization", format!("Bearer {token}"))
                .header("authorization", format!("Bearer {token}")),
        )
        .await;
    assert_eq!(two_headers.status, 401, "two Authorization headers");
    // Without a `kid`, the set's only key is the one (the set here has one).
    let no_kid = key.token_with(json!({"kid": null}), &claims(&provider, &oxp, "tools"));
    assert_eq!(oxp.list(&no_kid).await.status, 200);
    let lower = oxp
        .send(
            oxp.client
                .get(format!("{}/tools", oxp.base))
                .header("authorization", format!("bEaReR {token}")),
        )
        .await;
    assert_eq!(lower.status, 200);
}

/// RFC 9728 metadata: public, cacheable, `resource` the very string `aud` is checked against,
/// the issuer, every scope (the required one and each tool's) and the header bearer method.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn protected_resource_metadata_is_public_and_names_what_aud_is_checked_against() {
    let key = Key::eddsa("ed");
    let provider = Provider::start(&[&key]).await;
    let oxp = Oxp::start(&provider, |o| o).await;
    for (path, resource) in [
        ("/.well-known/oauth-protected-resource", oxp.base.clone()),
        (
            "/.well-known/oauth-protected-resource/mcp",
            format!("{}/mcp", oxp.base),
        ),
    ] {
        let reply = oxp
            .send(oxp.client.get(format!("{}{path}", oxp.base)))
            .await;
        assert_eq!(reply.status, 200, "{path}");
        assert_eq!(
            reply.body,
            json!({
                "resource": resource,
                "authorization_servers": [provider.issuer()],
                // Every request's, then each tool's, resource's and prompt's.
                "scopes_supported": ["tools", "files:write", "audit:read", "code:review"],
                "bearer_methods_supported": ["header"],
            }),
            "{path}"
        );
        assert_eq!(reply.headers["cache-control"], "public, max-age=3600");
        // A token naming exactly that resource passes.
        let token = key.token(&with(
            claims(&provider, &oxp, "tools"),
            "aud",
            json!(resource),
        ));
        assert_eq!(oxp.list(&token).await.status, 200, "{resource}");
    }
    // Scheme and host without case (MCP: SHOULD accept uppercase), the path exactly.
    let upper = key.token(&with(
        claims(&provider, &oxp, "tools"),
        "aud",
        json!(format!("{}/mcp", oxp.base.to_uppercase())),
    ));
    assert_eq!(oxp.list(&upper).await.status, 200);
    let upper_path = key.token(&with(
        claims(&provider, &oxp, "tools"),
        "aud",
        json!(format!("{}/MCP", oxp.base)),
    ));
    assert_eq!(oxp.list(&upper_path).await.status, 401);
    // The documented trailing-slash policy: a host-only resource with or without one.
    let slashed = key.token(&with(
        claims(&provider, &oxp, "tools"),
        "aud",
        json!(format!("{}/", oxp.base)),
    ));
    assert_eq!(oxp.list(&slashed).await.status, 200);
}

/// Scopes in each shape providers send them grant alike; a caller sees only the tools its
/// scopes reach, over OXP and MCP; a call outside them is a 403 naming every scope needed,
/// over OXP and MCP, and the tool does not run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scopes_filter_lists_and_refuse_calls_with_403() {
    let key = Key::es256("ec");
    let provider = Provider::start(&[&key]).await;
    let oxp = Oxp::start(&provider, |o| o).await;
    let base = claims(&provider, &oxp, "");
    let shapes = [
        with(base.clone(), "scope", json!("tools files:write")),
        with(base.clone(), "scope", json!(["tools", "files:write"])),
        with(
            without(base.clone(), "scope"),
            "scp",
            json!("tools files:write"),
        ),
        with(
            without(base.clone(), "scope"),
            "scp",
            json!(["tools", "files:write"]),
        ),
    ];
    for claims in &shapes {
        let reply = oxp.list(&key.token(claims)).await;
        assert_eq!(
            reply.tool_ids(),
            [
                "Files.Read@1.0.0",
                "Files.Whoami@1.0.0",
                "Files.Write@1.0.0"
            ],
            "{claims}"
        );
    }
    let reader = key.token(&with(base.clone(), "scope", json!("tools")));
    assert_eq!(
        oxp.list(&reader).await.tool_ids(),
        ["Files.Read@1.0.0", "Files.Whoami@1.0.0"]
    );
    let mcp_list = oxp
        .mcp(
            &reader,
            json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}),
        )
        .await;
    let names: Vec<&str> = mcp_list.body["result"]["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("{mcp_list:?}"))
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["Files_Read", "Files_Whoami"]);

    let oxp_call = oxp.call_at(&reader, "Files.Write", "/refused/oxp").await;
    let mcp_call = oxp
        .mcp(
            &reader,
            json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                   "params": {"name": "Files_Write", "arguments": {"path": "/refused/mcp"}}}),
        )
        .await;
    for (front, reply, metadata) in [
        ("OXP", &oxp_call, "/.well-known/oauth-protected-resource"),
        (
            "MCP",
            &mcp_call,
            "/.well-known/oauth-protected-resource/mcp",
        ),
    ] {
        assert_eq!(reply.status, 403, "{front}: {reply:?}");
        let challenge = reply.challenge.as_deref().unwrap();
        assert!(
            challenge.starts_with(&format!(
                "Bearer resource_metadata=\"{}{metadata}\", error=\"insufficient_scope\", scope=\"tools files:write\"",
                oxp.base
            )),
            "{front}: {challenge}"
        );
    }
    let written = WRITES.lock().unwrap().clone();
    assert!(
        !written.iter().any(|p| p.starts_with("/refused/")),
        "a refused call ran: {written:?}"
    );
    // Without the scope every request needs, nothing is served: 403 naming it.
    let no_tools = oxp
        .list(&key.token(&with(base, "scope", json!("files:write"))))
        .await;
    assert_eq!(no_tools.status, 403);
    assert!(no_tools.challenge.unwrap().contains("scope=\"tools\""));
}

/// `#[resource(scopes)]` and `#[prompt(scopes)]` mean what a tool's do: a caller finds only
/// what its scopes reach in `resources/list`, `resources/templates/list` and `prompts/list`; a
/// read, a get or a completion outside them is a 403 naming every scope needed (every
/// request's and the resource's or prompt's), and the fn does not run; with the scopes all is
/// served. The playground's hints list the tools `GET /tools` lists, no more.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scopes_hide_and_refuse_resources_and_prompts_as_tools() {
    let key = Key::es256("ec");
    let provider = Provider::start(&[&key]).await;
    let oxp = Oxp::start(&provider, |o| o).await;
    let token = |scope: &str| key.token(&claims(&provider, &oxp, scope));
    let (plain, full) = (
        token("tools"),
        token("tools audit:read files:write code:review"),
    );
    let rpc = |id: u32, method: &str, params: Value| json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
    let listed = |reply: &Reply, list: &str, key: &str| -> Vec<String> {
        reply.body["result"][list]
            .as_array()
            .unwrap_or_else(|| panic!("{list}: {reply:?}"))
            .iter()
            .map(|item| item[key].as_str().unwrap().to_owned())
            .collect()
    };
    for (token, resources, templates, prompts) in [
        (&plain, vec!["about://server"], vec![], vec!["hello"]),
        (
            &full,
            vec!["about://server", "acl://files"],
            vec!["audit://{day}"],
            vec!["hello", "merge_review"],
        ),
    ] {
        let reply = oxp.mcp(token, rpc(1, "resources/list", json!({}))).await;
        let mut uris = listed(&reply, "resources", "uri");
        uris.retain(|uri| !uri.starts_with("skill://"));
        assert_eq!(uris, resources);
        let reply = oxp
            .mcp(token, rpc(2, "resources/templates/list", json!({})))
            .await;
        assert_eq!(
            listed(&reply, "resourceTemplates", "uriTemplate"),
            templates
        );
        let reply = oxp.mcp(token, rpc(3, "prompts/list", json!({}))).await;
        assert_eq!(listed(&reply, "prompts", "name"), prompts);
    }

    let refused = [
        (
            rpc(4, "resources/read", json!({"uri": "audit://refused"})),
            "tools audit:read",
        ),
        (
            rpc(5, "resources/read", json!({"uri": "acl://files"})),
            "tools audit:read files:write",
        ),
        (
            rpc(
                6,
                "prompts/get",
                json!({"name": "merge_review", "arguments": {"diff": "refused"}}),
            ),
            "tools code:review",
        ),
        (
            rpc(
                7,
                "completion/complete",
                json!({
                "ref": {"type": "ref/resource", "uri": "audit://{day}"},
                "argument": {"name": "day", "value": "mo"}}),
            ),
            "tools audit:read",
        ),
        (
            rpc(
                8,
                "completion/complete",
                json!({
                "ref": {"type": "ref/prompt", "name": "merge_review"},
                "argument": {"name": "diff", "value": "tu"}}),
            ),
            "tools code:review",
        ),
        // Subscribing is reading later.
        (
            rpc(16, "resources/subscribe", json!({"uri": "audit://refused"})),
            "tools audit:read",
        ),
    ];
    for (request, needed) in &refused {
        let reply = oxp.mcp(&plain, request.clone()).await;
        assert_eq!(reply.status, 403, "{request}: {reply:?}");
        let challenge = reply.challenge.as_deref().unwrap();
        assert!(
            challenge.starts_with(&format!(
                "Bearer resource_metadata=\"{}/.well-known/oauth-protected-resource/mcp\", error=\"insufficient_scope\", scope=\"{needed}\"",
                oxp.base
            )),
            "{request}: {challenge}"
        );
    }
    let ran = AUDITS.lock().unwrap().clone();
    assert!(
        !ran.iter().any(|r| r.contains("refused") || r == "acl"),
        "a refused read or get ran: {ran:?}"
    );
    // A token short of only one of a resource's scopes is refused too.
    let half = token("tools audit:read");
    let reply = oxp.mcp(&half, refused[1].0.clone()).await;
    assert_eq!(reply.status, 403, "{reply:?}");

    // With the scopes, each is served.
    let served = [
        (
            rpc(9, "resources/read", json!({"uri": "audit://monday"})),
            "/result/contents/0/text",
            "monday: quiet",
        ),
        (
            rpc(10, "resources/read", json!({"uri": "acl://files"})),
            "/result/contents/0/text",
            "alice: /tmp",
        ),
        (
            rpc(
                11,
                "prompts/get",
                json!({"name": "merge_review", "arguments": {"diff": "+1"}}),
            ),
            "/result/messages/0/content/text",
            "Review this change: +1",
        ),
        (
            rpc(
                12,
                "completion/complete",
                json!({
                "ref": {"type": "ref/resource", "uri": "audit://{day}"},
                "argument": {"name": "day", "value": "mo"}}),
            ),
            "/result/completion/values/0",
            "monday",
        ),
    ];
    for (request, pointer, expected) in served {
        let reply = oxp.mcp(&full, request.clone()).await;
        assert_eq!(reply.status, 200, "{request}: {reply:?}");
        assert_eq!(
            reply.body.pointer(pointer),
            Some(&json!(expected)),
            "{request}: {reply:?}"
        );
    }
    // What no scope guards is served to every caller.
    let reply = oxp
        .mcp(
            &plain,
            rpc(13, "resources/read", json!({"uri": "about://server"})),
        )
        .await;
    assert_eq!(
        reply.body.pointer("/result/contents/0/text"),
        Some(&json!("a file server"))
    );

    // The playground's hints: the tools `GET /tools` lists, no more.
    for token in [&plain, &full] {
        let hints = oxp
            .send(
                oxp.client
                    .get(format!("{}/playground/hints", oxp.base))
                    .bearer_auth(token),
            )
            .await;
        let mut ids: Vec<String> = hints.body.as_object().unwrap().keys().cloned().collect();
        ids.sort();
        assert_eq!(ids, oxp.list(token).await.tool_ids());
    }
    let reader = oxp
        .send(
            oxp.client
                .get(format!("{}/playground/hints", oxp.base))
                .bearer_auth(&plain),
        )
        .await;
    assert!(reader.body.get("Files.Write@1.0.0").is_none(), "{reader:?}");

    // The playground's resources and prompts: the same lists, the same refusals.
    let get = |path: &str, token: &str| {
        oxp.client
            .get(format!("{}/playground/{path}", oxp.base))
            .bearer_auth(token)
    };
    let post = |path: &str, token: &str, body: Value| {
        oxp.client
            .post(format!("{}/playground/{path}", oxp.base))
            .bearer_auth(token)
            .json(&body)
    };
    let names = |reply: &Reply, list: &str, key: &str| -> Vec<String> {
        reply.body[list]
            .as_array()
            .unwrap_or_else(|| panic!("{list}: {reply:?}"))
            .iter()
            .map(|item| item[key].as_str().unwrap().to_owned())
            .collect()
    };
    let listed = oxp.send(get("resources", &plain)).await;
    assert_eq!(names(&listed, "resources", "uri"), ["about://server"]);
    assert!(names(&listed, "templates", "uri").is_empty());
    let listed = oxp.send(get("resources", &full)).await;
    assert_eq!(names(&listed, "templates", "uri"), ["audit://{day}"]);
    let prompts = oxp.send(get("prompts", &plain)).await;
    assert_eq!(names(&prompts, "prompts", "name"), ["hello"]);
    let refused = oxp
        .send(post(
            "resources/read",
            &plain,
            json!({"uri": "audit://playground-refused"}),
        ))
        .await;
    assert_eq!(refused.status, 403, "{refused:?}");
    assert!(
        refused
            .challenge
            .unwrap()
            .contains("error=\"insufficient_scope\", scope=\"tools audit:read\"")
    );
    let refused = oxp
        .send(post(
            "prompts/get",
            &plain,
            json!({"name": "merge_review", "arguments": {"diff": "playground-refused"}}),
        ))
        .await;
    assert_eq!(refused.status, 403, "{refused:?}");
    let ran = AUDITS.lock().unwrap().clone();
    assert!(
        !ran.iter().any(|r| r.contains("playground-refused")),
        "{ran:?}"
    );
    let read = oxp
        .send(post(
            "resources/read",
            &full,
            json!({"uri": "audit://friday"}),
        ))
        .await;
    assert_eq!(
        read.body["contents"][0]["text"], "friday: quiet",
        "{read:?}"
    );
}

/// The deployment's scope hierarchy: a token granting `files:admin` is granted `files:write`,
/// which reaches the tool that needs it; without the rule it does not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broader_scope_stands_for_the_narrower_ones_it_implies() {
    let key = Key::es256("ec");
    let provider = Provider::start(&[&key]).await;
    let admin = |oxp: &Oxp| key.token(&claims(&provider, oxp, "tools files:admin"));
    let plain = Oxp::start(&provider, |o| o).await;
    assert_eq!(plain.call(&admin(&plain), "Files.Write").await.status, 403);
    let oxp = Oxp::start(&provider, |o| {
        o.scope_implies("files:admin", ["files:write"])
    })
    .await;
    let reply = oxp.call_at(&admin(&oxp), "Files.Write", "/admin").await;
    assert_eq!(reply.status, 200, "{reply:?}");
    assert!(
        oxp.list(&admin(&oxp))
            .await
            .tool_ids()
            .contains(&"Files.Write@1.0.0".to_owned())
    );
    assert_eq!(
        oxp_runtime::app::ServerConfig::from_lookup(|name| match name {
            "OXP_OAUTH_ISSUER" => Some("https://id.example".into()),
            "OXP_PUBLIC_URL" => Some("https://h".into()),
            "OXP_OAUTH_SCOPE_HIERARCHY" => Some("files:admin=files:write".into()),
            _ => None,
        })
        .unwrap_err()
        .variable,
        "OXP_OAUTH_SCOPE_HIERARCHY"
    );
}

/// Keys rotate without a restart: a token of a new key is accepted after one fetch, and the
/// old key's tokens keep passing while the set still has it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rotated_key_is_fetched_once() {
    let old = Key::es256("2026-old");
    let new = Key::es256("2026-new");
    let provider = Provider::start(&[&old]).await;
    let oxp = Oxp::start(&provider, |o| {
        o.key_refetch_interval(Duration::from_secs(3600))
    })
    .await;
    assert_eq!(provider.fetches(), 1, "start-up fetches the set once");
    assert_eq!(
        oxp.list(&old.token(&claims(&provider, &oxp, "tools")))
            .await
            .status,
        200
    );
    provider.publish(&[&old, &new]);
    for _ in 0..3 {
        let reply = oxp
            .list(&new.token(&claims(&provider, &oxp, "tools")))
            .await;
        assert_eq!(reply.status, 200, "{reply:?}");
    }
    assert_eq!(provider.fetches(), 2, "the new kid is fetched once");
    assert_eq!(
        oxp.list(&old.token(&claims(&provider, &oxp, "tools")))
            .await
            .status,
        200
    );
    assert_eq!(provider.fetches(), 2);
}

/// A thousand tokens with random kids, sent at once, make one fetch; more after it make none
/// within the interval.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_unknown_kids_makes_one_fetch() {
    let key = Key::eddsa("real");
    let provider = Provider::start(&[&key]).await;
    let oxp = Oxp::start(&provider, |o| {
        o.key_refetch_interval(Duration::from_secs(3600))
    })
    .await;
    let start = provider.fetches();
    let good = claims(&provider, &oxp, "tools");
    let flood = (0..1000).map(|i| {
        let token = key.token_with(json!({"kid": format!("random-{i}")}), &good);
        let oxp = &oxp;
        async move { oxp.list(&token).await.status }
    });
    let statuses = futures_util::future::join_all(flood).await;
    assert!(statuses.iter().all(|s| *s == 401), "{statuses:?}");
    assert_eq!(provider.fetches() - start, 1);
    assert_eq!(
        oxp.list(&key.token_with(json!({"kid": "another"}), &good))
            .await
            .status,
        401
    );
    assert_eq!(provider.fetches() - start, 1);
}

/// The provider down: known keys keep working, an unknown one fails closed with a 503 that
/// says why; back up, the new key is fetched and accepted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_provider_down_fails_closed_and_recovers() {
    let known = Key::rsa("known", "RS256");
    let rotated = Key::es256("rotated");
    let provider = Provider::start(&[&known]).await;
    // No interval between refetches, so recovery is seen at the next request (no waiting).
    let oxp = Oxp::start(&provider, |o| o.key_refetch_interval(Duration::ZERO)).await;
    provider.down.store(true, Ordering::SeqCst);
    provider.publish(&[&known, &rotated]);
    assert_eq!(
        oxp.list(&known.token(&claims(&provider, &oxp, "tools")))
            .await
            .status,
        200
    );
    let unknown = oxp
        .list(&rotated.token(&claims(&provider, &oxp, "tools")))
        .await;
    assert_eq!(unknown.status, 503, "{unknown:?}");
    assert!(
        unknown.body["message"]
            .as_str()
            .unwrap()
            .contains("keys cannot be fetched"),
        "{unknown:?}"
    );
    assert_eq!(unknown.headers["retry-after"], "5");
    provider.down.store(false, Ordering::SeqCst);
    assert_eq!(
        oxp.list(&rotated.token(&claims(&provider, &oxp, "tools")))
            .await
            .status,
        200
    );
}

/// One key the server cannot use (a secret, an encryption key, a curve ring does not verify,
/// an unknown kind) does not spoil the set.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unusable_keys_in_the_set_are_left_out_one_by_one() {
    let key = Key::es256("good");
    let provider = Provider::start(&[&key]).await;
    let mut set = provider.jwks.lock().unwrap().clone();
    for junk in [
        json!({"kty": "oct", "kid": "hmac", "k": "c2VjcmV0"}),
        json!({"kty": "RSA", "kid": "enc", "use": "enc", "n": "AQAB", "e": "AQAB"}),
        json!({"kty": "OKP", "kid": "448", "crv": "Ed448", "x": "AAAA"}),
        json!({"kty": "EC", "kid": "521", "crv": "P-521", "x": "AAAA", "y": "AAAA"}),
        json!({"kty": "PQC", "kid": "future"}),
    ] {
        set["keys"].as_array_mut().unwrap().insert(0, junk);
    }
    *provider.jwks.lock().unwrap() = set;
    let oxp = Oxp::start(&provider, |o| o).await;
    assert_eq!(
        oxp.list(&key.token(&claims(&provider, &oxp, "tools")))
            .await
            .status,
        200
    );
    // A token that names the secret key as HS256 is refused before any key is looked at.
    let hs = key.token_with(
        json!({"alg": "HS256", "kid": "hmac"}),
        &claims(&provider, &oxp, "tools"),
    );
    assert_eq!(oxp.list(&hs).await.status, 401);
}

/// Start-up checks: an unreachable provider, a key set behind a redirect, a plain-HTTP key set
/// off loopback, and settings that do not go together each stop the server, naming the
/// variable.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn misconfiguration_and_an_unreachable_provider_are_start_up_errors() {
    use oxp_runtime::app::ServerConfig;
    let config = |vars: &[(&str, &str)]| {
        let vars: Vec<(String, String)> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        ServerConfig::from_lookup(move |name| {
            vars.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone())
        })
    };
    let registry = || Registry::builder().tool(read::TOOL).build().unwrap();

    // A closed port: bound, then dropped.
    let closed = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://{}", listener.local_addr().unwrap())
    };
    let down = config(&[
        ("OXP_OAUTH_ISSUER", &closed),
        ("OXP_PUBLIC_URL", "https://tools.example.com"),
    ])
    .unwrap();
    let error = down.apply(Server::new(registry())).await.unwrap_err();
    assert_eq!(error.variable, "OXP_OAUTH_ISSUER", "{error}");
    assert!(error.problem.contains("could not be reached"), "{error}");

    let key = Key::es256("k");
    let provider = Provider::start(&[&key]).await;
    provider.redirect.store(true, Ordering::SeqCst);
    let redirected = config(&[
        ("OXP_OAUTH_ISSUER", &provider.issuer()),
        ("OXP_PUBLIC_URL", "https://tools.example.com"),
    ])
    .unwrap();
    let error = redirected.apply(Server::new(registry())).await.unwrap_err();
    assert_eq!(error.variable, "OXP_OAUTH_JWKS_URL", "{error}");
    assert!(
        error.problem.contains("redirects are not followed"),
        "{error}"
    );
    provider.redirect.store(false, Ordering::SeqCst);
    let fine = config(&[
        ("OXP_OAUTH_ISSUER", &provider.issuer()),
        ("OXP_PUBLIC_URL", "https://tools.example.com"),
    ])
    .unwrap();
    assert!(fine.apply(Server::new(registry())).await.is_ok());

    // A key set too large, or one that never comes: the fetch is cut at its caps.
    provider.oversized.store(true, Ordering::SeqCst);
    let auth = ServerAuth::default().oauth(OAuth::new("https://h").issuer(provider.issuer()));
    let error = auth.ready().await.unwrap_err();
    assert!(error.to_string().contains("sent more than"), "{error}");
    provider.oversized.store(false, Ordering::SeqCst);
    provider.hang.store(true, Ordering::SeqCst);
    let auth = ServerAuth::default().oauth(
        OAuth::new("https://h")
            .issuer(provider.issuer())
            .fetch_timeout(Duration::from_millis(200)),
    );
    let error = auth.ready().await.unwrap_err();
    assert!(
        error.to_string().contains("did not answer within 200 ms"),
        "{error}"
    );
    provider.hang.store(false, Ordering::SeqCst);

    for (vars, variable) in [
        (
            vec![("OXP_OAUTH_ISSUER", "https://id.example")],
            "OXP_PUBLIC_URL",
        ),
        (
            vec![("OXP_OAUTH_AUDIENCE", "api://x")],
            "OXP_OAUTH_AUDIENCE",
        ),
        (
            vec![
                ("OXP_OAUTH_ISSUER", "http://id.example"),
                ("OXP_PUBLIC_URL", "https://h"),
            ],
            "OXP_OAUTH_ISSUER",
        ),
        (
            vec![
                ("OXP_OAUTH_ISSUER", "https://id.example"),
                ("OXP_PUBLIC_URL", "https://h"),
                ("OXP_OAUTH_JWKS_URL", "http://keys.example/jwks"),
            ],
            "OXP_OAUTH_JWKS_URL",
        ),
        (
            vec![
                ("OXP_OAUTH_ISSUER", "https://id.example"),
                ("OXP_PUBLIC_URL", "https://h"),
                ("OXP_OAUTH_SCOPES", "a\"b"),
            ],
            "OXP_OAUTH_SCOPES",
        ),
        (
            vec![
                ("OXP_OAUTH_ISSUER", "https://id.example"),
                ("OXP_PUBLIC_URL", "https://h"),
                (
                    "OXP_OAUTH_INTROSPECTION_URL",
                    "https://id.example/introspect",
                ),
                ("OXP_OAUTH_CLIENT_ID", "oxp"),
            ],
            "OXP_OAUTH_CLIENT_SECRET",
        ),
    ] {
        let error = config(&vars).unwrap_err();
        assert_eq!(error.variable, variable, "{vars:?}: {error}");
    }
}

/// Nothing of a token reaches the log, at any level: neither the token nor its subject, whether
/// it was accepted or refused (the log is the whole test process's, at TRACE). What a tool
/// returns is its own: the calls here return no subject.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nothing_of_a_token_reaches_the_log() {
    let log = harness::Log::captured();
    let key = Key::es256("ec");
    let provider = Provider::start(&[&key]).await;
    let oxp = Oxp::start(&provider, |o| o).await;
    let subject = "carol-the-subject-nobody-logs";
    let good = key.token(&with(
        claims(&provider, &oxp, "tools files:write"),
        "sub",
        json!(subject),
    ));
    let expired = key.token(&with(
        with(claims(&provider, &oxp, "tools"), "sub", json!(subject)),
        "exp",
        json!(now() - 3600),
    ));
    assert_eq!(oxp.call(&good, "Files.Write").await.status, 200);
    let mcp = oxp
        .mcp(
            &good,
            json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                           "params": {"name": "Files_Read", "arguments": {"path": "/log"}}}),
        )
        .await;
    assert_eq!(mcp.status, 200);
    assert_eq!(oxp.list(&expired).await.status, 401);
    let text = log.text();
    assert!(text.contains("refused a request"), "the refusal is logged");
    for secret in [&good, &expired] {
        let signature = secret.rsplit('.').next().unwrap();
        assert!(!text.contains(signature), "a token in the log");
        let payload = secret.split('.').nth(1).unwrap();
        assert!(!text.contains(payload), "a token's claims in the log");
    }
    let leaks: Vec<&str> = text.lines().filter(|l| l.contains(subject)).collect();
    assert!(leaks.is_empty(), "a subject in the log: {leaks:#?}");
}

/// A private CA and a certificate for 127.0.0.1 it signed, made by openssl in `dir`:
/// (the CA's PEM, the certificate's, its key's); `None` without openssl.
fn private_ca(dir: &std::path::Path) -> Option<(Vec<u8>, Vec<u8>, Vec<u8>)> {
    let openssl = |args: &[&str]| {
        std::process::Command::new("openssl")
            .args(args)
            .current_dir(dir)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    };
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(
        dir.join("server.ext"),
        "subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\nbasicConstraints=CA:FALSE\n",
    )
    .unwrap();
    let made = openssl(&[
        "req",
        "-x509",
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:P-256",
        "-nodes",
        "-keyout",
        "ca.key",
        "-out",
        "ca.pem",
        "-days",
        "2",
        "-subj",
        "/CN=oxp test CA",
        "-addext",
        "basicConstraints=critical,CA:TRUE",
        "-addext",
        "keyUsage=critical,keyCertSign,cRLSign",
    ]) && openssl(&[
        "req",
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:P-256",
        "-nodes",
        "-keyout",
        "server.key",
        "-out",
        "server.csr",
        "-subj",
        "/CN=127.0.0.1",
    ]) && openssl(&[
        "x509",
        "-req",
        "-in",
        "server.csr",
        "-CA",
        "ca.pem",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-out",
        "server.pem",
        "-days",
        "2",
        "-extfile",
        "server.ext",
    ]);
    let read = |name: &str| std::fs::read(dir.join(name)).unwrap();
    made.then(|| (read("ca.pem"), read("server.pem"), read("server.key")))
}

/// A provider whose certificate a private CA signed: fetched over HTTPS only once its CA is
/// trusted (`OXP_OAUTH_CA_FILE`); without it, the start-up fails; a file with no certificate is
/// a configuration error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_provider_behind_a_private_ca_is_trusted_with_its_ca_only() {
    use rustls::pki_types::pem::PemObject;
    let dir = std::env::temp_dir().join(format!("oxp-private-ca-{}", std::process::id()));
    let Some((ca, cert, key)) = private_ca(&dir) else {
        harness::skip("openssl");
        return;
    };
    let certs = rustls::pki_types::CertificateDer::pem_slice_iter(&cert)
        .collect::<Result<Vec<_>, _>>()
        .unwrap();
    let key = rustls::pki_types::PrivateKeyDer::from_pem_slice(&key).unwrap();
    let config = rustls::ServerConfig::builder_with_provider(
        rustls::crypto::ring::default_provider().into(),
    )
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_no_client_auth()
    .with_single_cert(certs, key)
    .unwrap();
    let signing = Key::es256("ec");
    let provider = Provider::start_with(
        &[&signing],
        Some(tokio_rustls::TlsAcceptor::from(Arc::new(config))),
    )
    .await;
    assert!(provider.issuer().starts_with("https://"));

    let without = ServerAuth::default().oauth(OAuth::new("https://h").issuer(provider.issuer()));
    let error = without.ready().await.unwrap_err();
    assert_eq!(error.setting, Setting::Issuer, "{error}");
    assert!(error.problem.contains("could not be reached"), "{error}");

    let oxp = Oxp::start(&provider, |o| o.ca_certificates(&ca)).await;
    let token = signing.token(&claims(&provider, &oxp, "tools"));
    assert_eq!(oxp.list(&token).await.status, 200);

    use oxp_runtime::app::ServerConfig;
    let ca_file = dir.join("ca.pem").to_string_lossy().into_owned();
    let not_pem = dir.join("server.ext").to_string_lossy().into_owned();
    let issuer = provider.issuer();
    let config = |file: String| {
        let issuer = issuer.clone();
        ServerConfig::from_lookup(move |name| match name {
            "OXP_OAUTH_ISSUER" => Some(issuer.clone()),
            "OXP_PUBLIC_URL" => Some("https://tools.example.com".into()),
            "OXP_OAUTH_CA_FILE" => Some(file.clone()),
            _ => None,
        })
    };
    let registry = || Registry::builder().tool(read::TOOL).build().unwrap();
    assert!(
        config(ca_file)
            .unwrap()
            .apply(Server::new(registry()))
            .await
            .is_ok()
    );
    assert_eq!(config(not_pem).unwrap_err().variable, "OXP_OAUTH_CA_FILE");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Refusals are counted by reason and key-set fetches by result on `/metrics`; neither the
/// token nor its subject reaches them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refusals_and_fetches_are_counted() {
    let key = Key::es256("ec");
    let provider = Provider::start(&[&key]).await;
    let oxp = Oxp::start(&provider, |o| o).await;
    let good = claims(&provider, &oxp, "tools");
    oxp.list(&key.token(&with(good.clone(), "exp", json!(now() - 3600))))
        .await;
    oxp.call(&key.token(&good), "Files.Write").await;
    let metrics = oxp
        .client
        .get(format!("{}/metrics", oxp.base))
        .header("x-api-key", API_KEY)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    for line in [
        "oxp_refusals_total{reason=\"invalid_token\"} 1",
        "oxp_refusals_total{reason=\"insufficient_scope\"} 1",
        "oxp_refusals_total{reason=\"origin\"} 0",
        "oxp_oauth_key_set_fetches_total{result=\"ok\"} 1",
    ] {
        assert!(metrics.contains(line), "{line} in:\n{metrics}");
    }
    assert!(!metrics.contains("alice"));
}

/// A client that has sent its allowance of forged tokens is answered 429 for the tokens that
/// cost the most or tell the least — one that does not parse, one naming a key the server does
/// not have (before any fetch) — while a token signed by a key the server has is still
/// verified: many users share an address, and one forger among them must not lock the others
/// out. Genuine tokens that fail a claim, other credentials and other clients are not held
/// back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_sending_bad_tokens_is_held_back_for_unknown_keys_only() {
    let key = Key::es256("ec");
    let forger = Key::es256("ec");
    let provider = Provider::start(&[&key]).await;
    // Three forged tokens, and no allowance regained (so the test does not race the clock).
    let oxp = Oxp::start(&provider, |o| o.forged_tokens_per_client(3, 0)).await;
    let good = key.token(&claims(&provider, &oxp, "tools"));
    let forged = forger.token(&claims(&provider, &oxp, "tools"));
    assert_eq!(
        oxp.list(&good).await.status,
        200,
        "good tokens cost nothing"
    );
    // A genuine token that fails a claim (expired) costs nothing either: a host relays many
    // users' tokens from one address.
    let expired = key.token(&with(
        claims(&provider, &oxp, "tools"),
        "exp",
        json!(now() - 3600),
    ));
    for _ in 0..5 {
        assert_eq!(oxp.list(&expired).await.status, 401);
    }
    assert_eq!(oxp.list(&good).await.status, 200);
    for _ in 0..3 {
        assert_eq!(oxp.list(&forged).await.status, 401);
    }
    // Held back now: a token that does not parse, and one naming an unknown key, are 429s,
    // and the unknown key is not fetched for.
    let fetches = provider.fetches();
    let held = oxp.list("not-a-jwt").await;
    assert_eq!(held.status, 429, "{held:?}");
    assert!(held.headers.contains_key("retry-after"));
    let unknown = key.token_with(json!({"kid": "random"}), &claims(&provider, &oxp, "tools"));
    assert_eq!(oxp.list(&unknown).await.status, 429);
    assert_eq!(
        provider.fetches(),
        fetches,
        "no fetch for a held-back client"
    );
    // A token of a key the server has is verified whoever sent it: the good one passes, the
    // forged one is refused for what it is.
    for _ in 0..3 {
        assert_eq!(
            oxp.list(&good).await.status,
            200,
            "a good token beside a forger"
        );
        assert_eq!(oxp.list(&forged).await.status, 401);
    }
    let by_key = oxp
        .send(
            oxp.client
                .get(format!("{}/tools", oxp.base))
                .header("x-api-key", API_KEY),
        )
        .await;
    assert_eq!(by_key.status, 200, "an API key is not an OAuth token");
    // Another client (127.0.0.2 is loopback too) is not held back.
    let other = reqwest::Client::builder()
        .local_address("127.0.0.2".parse::<std::net::IpAddr>().unwrap())
        .build()
        .unwrap();
    let reply = other
        .get(format!("{}/tools", oxp.base))
        .bearer_auth("not-a-jwt")
        .send()
        .await
        .unwrap();
    assert_eq!(reply.status(), 401);
    let metrics = oxp
        .client
        .get(format!("{}/metrics", oxp.base))
        .header("x-api-key", API_KEY)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        metrics.contains("oxp_refusals_total{reason=\"invalid_tokens_held_back\"} 2"),
        "{metrics}"
    );
}

/// Opaque tokens are checked at the provider's introspection endpoint as its client: an active
/// answer is checked like a JWT's claims and kept (one introspection for two requests), never
/// past its `exp`; an inactive one is refused and never kept.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn opaque_tokens_are_introspected_and_only_active_answers_kept() {
    let key = Key::es256("ec");
    let provider = Provider::start(&[&key]).await;
    let endpoint = format!("{}/introspect", provider.issuer());
    let oxp = Oxp::start(&provider, |o| o.introspection(endpoint, CLIENT.0, CLIENT.1)).await;
    let active = |aud: &str, exp: u64| {
        json!({"active": true, "iss": provider.issuer(), "sub": "alice", "aud": aud,
               "exp": exp, "scope": "tools files:write"})
    };
    {
        let mut answers = provider.introspection.lock().unwrap();
        answers.insert("opaque-good".into(), active(&oxp.base, now() + 300));
        answers.insert("opaque-ending".into(), active(&oxp.base, now()));
        answers.insert(
            "opaque-foreign".into(),
            active("https://other.example", now() + 300),
        );
        answers.insert(
            "opaque-other-issuer".into(),
            with(
                active(&oxp.base, now() + 300),
                "iss",
                json!("https://evil.example"),
            ),
        );
    }
    let asked = || provider.introspections.load(Ordering::SeqCst);
    let start = asked();
    for _ in 0..2 {
        let reply = oxp.call("opaque-good", "Files.Write").await;
        assert_eq!(reply.status, 200, "{reply:?}");
    }
    assert_eq!(asked() - start, 1, "an active answer is kept");
    for _ in 0..2 {
        let reply = oxp.list("opaque-revoked").await;
        assert_eq!(reply.status, 401, "{reply:?}");
        assert!(
            reply.body["message"]
                .as_str()
                .unwrap()
                .contains("not active")
        );
    }
    assert_eq!(asked() - start, 3, "an inactive answer is never kept");
    for _ in 0..2 {
        assert_eq!(oxp.list("opaque-ending").await.status, 200);
    }
    assert_eq!(
        asked() - start,
        5,
        "an answer is not kept past the token's exp"
    );
    let foreign = oxp.list("opaque-foreign").await;
    assert_eq!(foreign.status, 401);
    assert!(foreign.body["message"].as_str().unwrap().contains("`aud`"));
    assert_eq!(oxp.list("opaque-other-issuer").await.status, 401);
    // JWTs are still checked against the keys, without asking.
    let before = asked();
    assert_eq!(
        oxp.list(&key.token(&claims(&provider, &oxp, "tools")))
            .await
            .status,
        200
    );
    assert_eq!(asked(), before);
}

/// With `OXP_PUBLIC_URL` carrying a path, every challenge points at metadata the server
/// serves (RFC 9728 §3.1: the well-known segment before the resource's path), for the server
/// and for its `/mcp`, and the metadata names that resource.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_public_url_with_a_path_has_its_metadata_where_the_challenge_points() {
    let key = Key::es256("ec");
    let provider = Provider::start(&[&key]).await;
    let setup = Setup {
        path: "/oxp",
        ..Setup::default()
    };
    let oxp = Oxp::start_with(&provider, |o| o, setup).await;
    let resource = format!("{}/oxp", oxp.base);
    for (path, named) in [
        ("/tools", resource.clone()),
        ("/mcp", format!("{resource}/mcp")),
    ] {
        let refused = oxp
            .send(oxp.client.get(format!("{}{path}", oxp.base)))
            .await;
        assert_eq!(refused.status, 401, "{refused:?}");
        let challenge = refused.challenge.unwrap();
        let url = challenge
            .split("resource_metadata=\"")
            .nth(1)
            .and_then(|rest| rest.split('"').next())
            .unwrap()
            .to_owned();
        assert!(
            url.starts_with(&format!(
                "{}/.well-known/oauth-protected-resource/oxp",
                oxp.base
            )),
            "{url}"
        );
        let metadata = oxp.send(oxp.client.get(&url)).await;
        assert_eq!(metadata.status, 200, "{url}: {metadata:?}");
        assert_eq!(metadata.body["resource"], named, "{url}");
    }
    let token = key.token(&with(
        claims(&provider, &oxp, "tools"),
        "aud",
        json!(resource),
    ));
    assert_eq!(oxp.list(&token).await.status, 200);
}

/// Two versions of a tool: the older one needs a scope, the latest none.
mod versions {
    use oxp_runtime::tool;

    /// Stat a file (the old way, which could read anything).
    #[tool(toolkit = "Files", name = "Stat", version = "1.0.0", scopes = ["files:admin"])]
    pub fn stat_v1() -> String {
        "v1".into()
    }

    /// Stat a file.
    #[tool(toolkit = "Files", name = "Stat", version = "2.0.0")]
    pub fn stat_v2() -> String {
        "v2".into()
    }
}

/// MCP checks the scopes of the version a name resolves to: the latest version, listed to a
/// caller without the older one's scope, is called by that caller; the older version stays
/// refused (403), and hidden.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_checks_the_scopes_of_the_version_a_name_names() {
    let key = Key::es256("ec");
    let provider = Provider::start(&[&key]).await;
    let setup = Setup {
        registry: Box::new(|registry| {
            registry
                .tool(versions::stat_v1::TOOL)
                .tool(versions::stat_v2::TOOL)
        }),
        ..Setup::default()
    };
    let oxp = Oxp::start_with(&provider, |o| o, setup).await;
    let token = key.token(&claims(&provider, &oxp, "tools"));
    let list = oxp
        .mcp(
            &token,
            json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}),
        )
        .await;
    let names: Vec<&str> = list.body["result"]["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("{list:?}"))
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert!(names.contains(&"Files_Stat"), "{names:?}");
    assert!(!names.contains(&"Files_Stat__v1_0_0"), "{names:?}");
    let call = |name: &str| {
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
               "params": {"name": name, "arguments": {}}})
    };
    let latest = oxp.mcp(&token, call("Files_Stat")).await;
    assert_eq!(latest.status, 200, "{latest:?}");
    assert_eq!(
        latest.body["result"]["content"][0]["text"], "v2",
        "{latest:?}"
    );
    let older = oxp.mcp(&token, call("Files_Stat__v1_0_0")).await;
    assert_eq!(older.status, 403, "{older:?}");
    assert!(
        older.challenge.as_deref().unwrap().contains("files:admin"),
        "{older:?}"
    );
    let admin = key.token(&claims(&provider, &oxp, "tools files:admin"));
    let older = oxp.mcp(&admin, call("Files_Stat__v1_0_0")).await;
    assert_eq!(
        older.body["result"]["content"][0]["text"], "v1",
        "{older:?}"
    );
}

/// A random `kid` that the budget allowed no fetch for costs its client nothing, and a key the
/// provider rotated in after a forger spent the fetch for new `kid`s is fetched for the second
/// of its tokens, though the interval between refetches is an hour.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_kids_fetched_for_nothing_cost_nothing_and_cannot_keep_a_rotated_key_out() {
    let old = Key::es256("2026-old");
    let new = Key::es256("2026-new");
    let provider = Provider::start(&[&old]).await;
    let oxp = Oxp::start(&provider, |o| {
        o.key_refetch_interval(Duration::from_secs(3600))
            .forged_tokens_per_client(2, 0)
    })
    .await;
    let start = provider.fetches();
    let good = claims(&provider, &oxp, "tools");
    let forged = |kid: &str| old.token_with(json!({"kid": kid}), &good);
    // The forger's first random kid is fetched for, and counted: one of its two forgeries.
    assert_eq!(oxp.list(&forged("random-1")).await.status, 401);
    assert_eq!(provider.fetches() - start, 1);
    // The provider rotates a key in just after.
    provider.publish(&[&old, &new]);
    let first = oxp.list(&new.token(&good)).await;
    assert_eq!(first.status, 401, "{first:?}");
    assert!(
        first.body["message"]
            .as_str()
            .unwrap()
            .contains("does not know yet"),
        "{first:?}"
    );
    assert_eq!(
        provider.fetches() - start,
        1,
        "no fetch for a kid seen once"
    );
    let second = oxp.list(&new.token(&good)).await;
    assert_eq!(second.status, 200, "the rotated key is fetched: {second:?}");
    assert_eq!(provider.fetches() - start, 2);
    // More random kids: no fetch is allowed for them, and none counts against the client,
    // whose one forgery left is still there (held back, these would be 429s).
    for i in 2..10 {
        let reply = oxp.list(&forged(&format!("random-{i}"))).await;
        assert_eq!(reply.status, 401, "{reply:?}");
    }
    assert_eq!(provider.fetches() - start, 2);
    assert_eq!(oxp.list(&new.token(&good)).await.status, 200);
}

/// The provider down: an unknown key's token is a 503 whose `Retry-After` is a few seconds,
/// and once the provider is back, the token is accepted when the client comes back as told.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn new_keys_are_fetched_within_seconds_of_the_provider_coming_back() {
    let known = Key::es256("known");
    let rotated = Key::es256("rotated");
    let provider = Provider::start(&[&known]).await;
    // The default interval between refetches.
    let oxp = Oxp::start(&provider, |o| o).await;
    provider.down.store(true, Ordering::SeqCst);
    provider.publish(&[&known, &rotated]);
    let token = rotated.token(&claims(&provider, &oxp, "tools"));
    let down = oxp.list(&token).await;
    assert_eq!(down.status, 503, "{down:?}");
    let retry: u64 = down.headers["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!((1..=5).contains(&retry), "{retry}");
    assert_eq!(
        oxp.list(&known.token(&claims(&provider, &oxp, "tools")))
            .await
            .status,
        200,
        "known keys keep working"
    );
    provider.down.store(false, Ordering::SeqCst);
    // The behaviour under test is the server's back-off itself: the client waits what the
    // 503 said, as a client does, and is then let in.
    tokio::time::sleep(Duration::from_secs(retry)).await;
    let back = oxp.list(&token).await;
    assert_eq!(back.status, 200, "{back:?}");
}

/// An introspection answer is refused when it names no issuer and more than one is trusted
/// (whose user would it be?), and when it is for a token that is not an access token: RFC
/// 7662's `token_type`, ORY Hydra's `token_use`, Keycloak's `typ` of `Refresh` or `ID`. With
/// one issuer, an answer without `iss` is that issuer's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn introspection_answers_without_an_issuer_or_for_another_kind_of_token_are_refused() {
    let key = Key::es256("ec");
    let provider = Provider::start(&[&key]).await;
    let other = Provider::start(&[&key]).await;
    let endpoint = format!("{}/introspect", provider.issuer());
    let one = Oxp::start(&provider, |o| {
        o.introspection(endpoint.clone(), CLIENT.0, CLIENT.1)
    })
    .await;
    let two = Oxp::start(&provider, |o| {
        o.issuer(other.issuer())
            .introspection(endpoint, CLIENT.0, CLIENT.1)
    })
    .await;
    for oxp in [&one, &two] {
        let active = |extra: Value| {
            let mut answer = json!({"active": true, "sub": "alice", "aud": oxp.base,
                                    "exp": now() + 300, "scope": "tools"});
            answer
                .as_object_mut()
                .unwrap()
                .extend(extra.as_object().unwrap().clone());
            answer
        };
        let iss = provider.issuer();
        let answers = [
            ("no-iss", active(json!({}))),
            (
                "bearer",
                active(json!({"iss": iss, "token_type": "Bearer", "typ": "Bearer"})),
            ),
            (
                "refresh",
                active(json!({"iss": iss, "token_type": "refresh_token"})),
            ),
            (
                "hydra-refresh",
                active(json!({"iss": iss, "token_use": "refresh_token"})),
            ),
            (
                "keycloak-refresh",
                active(json!({"iss": iss, "typ": "Refresh"})),
            ),
            ("keycloak-id", active(json!({"iss": iss, "typ": "ID"}))),
        ];
        provider.introspection.lock().unwrap().extend(
            answers
                .into_iter()
                .map(|(token, answer)| (format!("{}-{token}", oxp.tag()), answer)),
        );
        let list = |token: &str| {
            let token = format!("{}-{token}", oxp.tag());
            async move { oxp.list(&token).await }
        };
        assert_eq!(list("bearer").await.status, 200);
        for token in [
            "refresh",
            "hydra-refresh",
            "keycloak-refresh",
            "keycloak-id",
        ] {
            let reply = list(token).await;
            assert_eq!(reply.status, 401, "{token}: {reply:?}");
            assert!(
                reply.body["message"]
                    .as_str()
                    .unwrap()
                    .contains("not an access token"),
                "{token}: {reply:?}"
            );
        }
        let no_iss = list("no-iss").await;
        if std::ptr::eq(oxp, &one) {
            assert_eq!(no_iss.status, 200, "{no_iss:?}");
        } else {
            assert_eq!(no_iss.status, 401, "{no_iss:?}");
            assert!(
                no_iss.body["message"]
                    .as_str()
                    .unwrap()
                    .contains("names no issuer"),
                "{no_iss:?}"
            );
        }
    }
}

/// Requests with one opaque token share one introspection; introspections under way are capped
/// per client (another token of a client at its cap is a 429, unasked) and in all (503); an
/// endpoint that fails is a 503; each result is counted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn introspections_are_shared_per_token_capped_and_counted() {
    let log = harness::Log::captured();
    let key = Key::es256("ec");
    let provider = Provider::start(&[&key]).await;
    let endpoint = format!("{}/introspect", provider.issuer());
    let oxp = Oxp::start(&provider, |o| o.introspection(endpoint, CLIENT.0, CLIENT.1)).await;
    let active = json!({"active": true, "iss": provider.issuer(), "sub": "alice",
                        "aud": oxp.base, "exp": now() + 300, "scope": "tools"});
    // Tokens of this test only (other tests' servers share the log).
    let token = |name: &str| format!("{}-{name}", oxp.tag());
    {
        let mut answers = provider.introspection.lock().unwrap();
        for i in 0..40 {
            answers.insert(token(&format!("held-{i}")), active.clone());
        }
    }
    let gate = Arc::new(tokio::sync::Semaphore::new(0));
    *provider.introspection_gate.lock().unwrap() = Some(gate.clone());
    let asked = || provider.introspections.load(Ordering::SeqCst);
    let start = asked();
    // Loopback clients besides 127.0.0.1, one address each.
    let clients: Vec<reqwest::Client> = (2..10)
        .map(|i| {
            reqwest::Client::builder()
                .local_address(std::net::IpAddr::from([127, 0, 0, i]))
                .build()
                .unwrap()
        })
        .collect();
    let list_from = |client: &reqwest::Client, name: &str| {
        oxp.send(
            client
                .get(format!("{}/tools", oxp.base))
                .bearer_auth(token(name)),
        )
    };
    // 127.0.0.1 at its cap of four, and five more requests for its first token.
    let held = futures_util::future::join_all(
        (0..4).map(|i| list_from(&oxp.client, &format!("held-{i}"))),
    );
    let shared = futures_util::future::join_all((0..5).map(|_| list_from(&oxp.client, "held-0")));
    let meanwhile = async {
        harness::bounded(
            "four introspections asked",
            provider.introspections_reach(start + 4),
        )
        .await;
        assert!(
            log.wait_for_times(
                "a request waits for its token's introspection under way".into(),
                5
            )
            .await,
            "the five requests wait for the introspection under way"
        );
        let over = list_from(&oxp.client, "held-4").await;
        assert_eq!(over.status, 429, "{over:?}");
        assert!(over.headers.contains_key("retry-after"));
        // Other clients, four each, up to the cap of all.
        let others = futures_util::future::join_all(
            (0..28).map(|i| list_from(&clients[i / 4], &format!("held-{}", 5 + i))),
        );
        let busy = async {
            harness::bounded(
                "all introspections asked",
                provider.introspections_reach(start + 32),
            )
            .await;
            let busy = list_from(&clients[7], "held-39").await;
            assert_eq!(busy.status, 503, "{busy:?}");
            gate.add_permits(1000);
        };
        let (others, ()) = tokio::join!(others, busy);
        assert!(others.iter().all(|r| r.status == 200), "{others:?}");
    };
    let (held, shared, ()) = tokio::join!(held, shared, meanwhile);
    assert!(
        held.iter().chain(&shared).all(|r| r.status == 200),
        "{held:?} {shared:?}"
    );
    assert_eq!(asked() - start, 32, "one introspection per token");
    let failing = oxp.list("introspection-fails").await;
    assert_eq!(failing.status, 503, "{failing:?}");
    let metrics = oxp
        .client
        .get(format!("{}/metrics", oxp.base))
        .header("x-api-key", API_KEY)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    for line in [
        "oxp_oauth_introspections_total{result=\"active\"} 32",
        "oxp_oauth_introspections_total{result=\"busy\"} 2",
        "oxp_oauth_introspections_total{result=\"error\"} 1",
        "oxp_refusals_total{reason=\"introspections_busy\"} 2",
    ] {
        assert!(metrics.contains(line), "{line} in:\n{metrics}");
    }
}

// ---------------------------------------------------------------------------------------------
// A real provider: node-oidc-provider

/// node-oidc-provider running `tests/oidc/provider.mjs`, killed when dropped.
struct Oidc {
    child: std::process::Child,
    issuer: String,
}

impl Drop for Oidc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Oidc {
    /// Starts the provider on `port` (0: any) with the ES256 keys `kids` (the first signs; each
    /// kept in `keys`, so a restart publishes the same keys again) and waits for its `ready`.
    async fn start(port: u16, keys: &std::path::Path, kids: &str) -> Oidc {
        use std::io::BufRead;
        let mut child = std::process::Command::new("node")
            .arg("provider.mjs")
            .arg(port.to_string())
            .arg(keys)
            .arg(kids)
            .current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/oidc"))
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("node runs");
        let stdout = child.stdout.take().unwrap();
        let (ready, issuer) = tokio::sync::oneshot::channel();
        // Read to the end, so that whatever the provider prints later never meets a closed pipe.
        std::thread::spawn(move || {
            let mut ready = Some(ready);
            for line in std::io::BufReader::new(stdout)
                .lines()
                .map_while(Result::ok)
            {
                if let Some(issuer) = line.strip_prefix("ready ")
                    && let Some(ready) = ready.take()
                {
                    let _ = ready.send(issuer.to_owned());
                }
            }
        });
        let issuer = harness::bounded("node-oidc-provider's `ready`", issuer)
            .await
            .expect("the provider starts");
        Oidc { child, issuer }
    }

    fn port(&self) -> u16 {
        self.issuer.rsplit(':').next().unwrap().parse().unwrap()
    }
}

/// A client that finds everything itself, as an MCP host does: the server's RFC 9728 metadata
/// names the resource and the provider; the provider's OpenID metadata names its token
/// endpoint; the token is asked for that resource (RFC 8707), with the client credentials grant.
async fn discover_and_get_token(client: &reqwest::Client, metadata_url: &str) -> String {
    let metadata: Value = client
        .get(metadata_url)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let resource = metadata["resource"].as_str().unwrap();
    let issuer = metadata["authorization_servers"][0].as_str().unwrap();
    let provider: Value = client
        .get(format!("{issuer}/.well-known/openid-configuration"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    token_for(
        client,
        provider["token_endpoint"].as_str().unwrap(),
        resource,
    )
    .await
}

async fn token_for(client: &reqwest::Client, token_endpoint: &str, resource: &str) -> String {
    let reply: Value = client
        .post(token_endpoint)
        .basic_auth("agent", Some("agent-secret-0123456789abcdef0123456789"))
        .form(&[
            ("grant_type", "client_credentials"),
            ("resource", resource),
            ("scope", "tools files:write"),
        ])
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    reply["access_token"]
        .as_str()
        .unwrap_or_else(|| panic!("a token: {reply}"))
        .to_owned()
}

/// node-oidc-provider, with resource indicators, against the server: discovery end to end; OXP
/// and MCP served to its tokens; a token for another resource refused; a rotated key accepted
/// after one fetch while the old one keeps passing; the provider stopped, a token of a key not
/// yet seen fails closed and says so, and passes once the provider is back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_oidc_provider_end_to_end() {
    let here = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let node = std::process::Command::new("node").arg("--version").output();
    if node.is_err() || !here.join("oidc/node_modules/oidc-provider").exists() {
        harness::skip("Node.js and node-oidc-provider (cd tests/oidc && npm install)");
        return;
    }
    let keys = std::env::temp_dir().join(format!("oxp-oidc-keys-{}.json", std::process::id()));
    let _ = std::fs::remove_file(&keys);
    let oidc = Oidc::start(0, &keys, "a").await;
    let port = oidc.port();
    let provider = Provider::default();
    *provider.issuer.lock().unwrap() = oidc.issuer.clone();
    // No interval between refetches, so the recovery below shows at the next request.
    let oxp = Oxp::start(&provider, |o| o.key_refetch_interval(Duration::ZERO)).await;
    let client = reqwest::Client::new();
    let fetches = || async {
        let text = client
            .get(format!("{}/metrics", oxp.base))
            .header("x-api-key", API_KEY)
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        text.lines()
            .find_map(|l| l.strip_prefix("oxp_oauth_key_set_fetches_total{result=\"ok\"} "))
            .unwrap()
            .parse::<u64>()
            .unwrap()
    };

    let mcp_token = discover_and_get_token(
        &client,
        &format!("{}/.well-known/oauth-protected-resource/mcp", oxp.base),
    )
    .await;
    let listed = oxp
        .mcp(
            &mcp_token,
            json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}),
        )
        .await;
    assert_eq!(listed.status, 200, "{listed:?}");
    assert_eq!(listed.body["result"]["tools"].as_array().unwrap().len(), 3);
    let called = oxp
        .mcp(
            &mcp_token,
            json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                   "params": {"name": "Files_Write", "arguments": {"path": "/oidc/mcp"}}}),
        )
        .await;
    assert_eq!(called.status, 200, "{called:?}");
    assert_eq!(called.body["result"]["isError"], false, "{called:?}");
    let oxp_token = discover_and_get_token(
        &client,
        &format!("{}/.well-known/oauth-protected-resource", oxp.base),
    )
    .await;
    assert_eq!(oxp.call(&oxp_token, "Files.Write").await.status, 200);
    let token_endpoint = format!("{}/token", oidc.issuer);
    let foreign = token_for(&client, &token_endpoint, "http://127.0.0.1:1/other").await;
    let refused = oxp.list(&foreign).await;
    assert_eq!(refused.status, 401, "{refused:?}");
    assert!(refused.body["message"].as_str().unwrap().contains("`aud`"));

    // Rotation: the provider restarts signing with `b`, still publishing `a`.
    drop(oidc);
    let oidc = Oidc::start(port, &keys, "b,a").await;
    let before = fetches().await;
    let rotated = token_for(&client, &token_endpoint, &oxp.base).await;
    assert_eq!(oxp.list(&rotated).await.status, 200);
    assert_eq!(oxp.list(&rotated).await.status, 200);
    assert_eq!(fetches().await, before + 1, "the new key is fetched once");
    assert_eq!(
        oxp.list(&oxp_token).await.status,
        200,
        "the old key still passes"
    );

    // A token of a key the server has not seen, then the provider stops.
    drop(oidc);
    let oidc = Oidc::start(port, &keys, "c,b,a").await;
    let unseen = token_for(&client, &token_endpoint, &oxp.base).await;
    drop(oidc);
    assert_eq!(
        oxp.list(&rotated).await.status,
        200,
        "known keys keep working"
    );
    let down = oxp.list(&unseen).await;
    assert_eq!(down.status, 503, "{down:?}");
    assert!(
        down.body["message"]
            .as_str()
            .unwrap()
            .contains("keys cannot be fetched")
    );
    let _oidc = Oidc::start(port, &keys, "c,b,a").await;
    assert_eq!(
        oxp.list(&unseen).await.status,
        200,
        "recovered with the provider"
    );
    let _ = std::fs::remove_file(&keys);
}

/// rmcp's own client with its auth support (SEP-1046 client credentials) against the server and
/// node-oidc-provider: it follows the server's metadata to the provider, gets a token for the
/// MCP resource, then lists and calls tools.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rmcp_client_discovers_the_provider_and_calls_tools() {
    use rmcp::ServiceExt;
    use rmcp::model::CallToolRequestParams;
    use rmcp::transport::auth::{AuthClient, ClientCredentialsConfig, OAuthState};
    use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
    let here = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let node = std::process::Command::new("node").arg("--version").output();
    if node.is_err() || !here.join("oidc/node_modules/oidc-provider").exists() {
        harness::skip("Node.js and node-oidc-provider (cd tests/oidc && npm install)");
        return;
    }
    // Captured, so that a step that hangs fails showing what rmcp, hyper and the server said.
    harness::Log::captured();
    let keys = std::env::temp_dir().join(format!("oxp-oidc-rmcp-{}.json", std::process::id()));
    let _ = std::fs::remove_file(&keys);
    let oidc = Oidc::start(0, &keys, "a").await;
    let provider = Provider::default();
    *provider.issuer.lock().unwrap() = oidc.issuer.clone();
    let oxp = Oxp::start(&provider, |o| o).await;
    let mcp_url = format!("{}/mcp", oxp.base);

    // Each step bounded, and each of rmcp's HTTP exchanges (which have no time limit of their
    // own) too: a peer or a server that never answers fails naming what it was asked.
    let manager = harness::bounded("rmcp's discovery and client credentials", async {
        let mut state = OAuthState::new(mcp_url.as_str(), None).await.unwrap();
        state
            .authenticate_client_credentials(ClientCredentialsConfig::ClientSecret {
                client_id: "mcp-host".into(),
                client_secret: "mcp-host-secret-0123456789abcdef012345".into(),
                scopes: vec!["tools".into(), "files:write".into()],
                resource: Some(mcp_url.clone()),
            })
            .await
            .expect("discovery and the token");
        state.into_authorization_manager().unwrap()
    })
    .await;
    let http = reqwest13::Client::builder()
        .read_timeout(harness::HANG / 2)
        .build()
        .unwrap();
    let transport = rmcp::transport::StreamableHttpClientTransport::with_client(
        AuthClient::new(http, manager),
        StreamableHttpClientTransportConfig::with_uri(mcp_url.as_str()),
    );
    let service = harness::bounded("initialize", ().serve(transport))
        .await
        .expect("initialize");
    let tools = harness::bounded("tools/list", service.list_all_tools())
        .await
        .unwrap();
    let mut names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    names.sort_unstable();
    assert_eq!(names, ["Files_Read", "Files_Whoami", "Files_Write"]);
    let mut arguments = serde_json::Map::new();
    arguments.insert("path".into(), json!("/oidc/rmcp"));
    let call = CallToolRequestParams::new("Files_Write").with_arguments(arguments);
    let called = harness::bounded("tools/call", service.call_tool(call))
        .await
        .unwrap();
    assert_eq!(called.is_error, Some(false), "{called:?}");
    assert!(WRITES.lock().unwrap().iter().any(|p| p == "/oidc/rmcp"));
    harness::bounded("closing the client", service.cancel())
        .await
        .unwrap();
    drop(oidc);
    let _ = std::fs::remove_file(&keys);
}

/// `application/x-www-form-urlencoded` and query encoding for the sign-in below.
fn url_encode(value: &str) -> String {
    value
        .bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                char::from(b).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// A user's sign-in as a host runs it through the browser: the authorization code flow with
/// PKCE and the resource indicator, through node-oidc-provider's sign-in (login `user`, any
/// password) and consent pages, cookies carried by hand; then the code exchanged for a token.
async fn browser_sign_in(issuer: &str, resource: &str, user: &str) -> String {
    const REDIRECT: &str = "http://127.0.0.1/callback";
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let verifier = b64(&ring::rand::generate::<[u8; 32]>(&SystemRandom::new())
        .unwrap()
        .expose());
    let challenge = b64(ring::digest::digest(&ring::digest::SHA256, verifier.as_bytes()).as_ref());
    let mut cookies = std::collections::BTreeMap::<String, String>::new();
    let mut next = format!(
        "{issuer}/auth?client_id=browser-host&response_type=code&redirect_uri={}\
         &scope={}&code_challenge={challenge}&code_challenge_method=S256&resource={}&state=s1",
        url_encode(REDIRECT),
        url_encode("openid tools files:write"),
        url_encode(resource),
    );
    let mut form: Option<String> = None;
    let code = loop {
        let cookie = cookies
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join("; ");
        let request = match form.take() {
            Some(body) => client
                .post(&next)
                .header("content-type", "application/x-www-form-urlencoded")
                .body(body),
            None => client.get(&next),
        };
        let response = request.header("cookie", cookie).send().await.unwrap();
        for set in response.headers().get_all("set-cookie") {
            let pair = set.to_str().unwrap().split(';').next().unwrap();
            if let Some((name, value)) = pair.split_once('=') {
                cookies.insert(name.to_owned(), value.to_owned());
            }
        }
        if response.status().is_redirection() {
            let location = response.headers()["location"].to_str().unwrap().to_owned();
            if let Some(query) = location.strip_prefix(&format!("{REDIRECT}?")) {
                break query
                    .split('&')
                    .find_map(|p| p.strip_prefix("code="))
                    .unwrap_or_else(|| panic!("a code: {location}"))
                    .to_owned();
            }
            next = if location.starts_with('/') {
                format!("{issuer}{location}")
            } else {
                location
            };
            continue;
        }
        let page = response.text().await.unwrap();
        // The same URL takes the page's form: the sign-in, then the consent.
        form = Some(if page.contains(r#"name="login""#) {
            format!("prompt=login&login={}&password=anything", url_encode(user))
        } else if page.contains(r#"value="consent""#) {
            "prompt=consent".to_owned()
        } else {
            panic!("an unexpected page: {page}");
        });
    };
    let reply: Value = client
        .post(format!("{issuer}/token"))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(format!(
            "grant_type=authorization_code&code={code}&redirect_uri={}&code_verifier={verifier}\
             &client_id=browser-host&resource={}",
            url_encode(REDIRECT),
            url_encode(resource)
        ))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    reply["access_token"]
        .as_str()
        .unwrap_or_else(|| panic!("a token: {reply}"))
        .to_owned()
}

/// A user signed in through the browser (authorization code, PKCE, the resource indicator the
/// server's metadata names) gets a token node-oidc-provider issued for `/mcp`: MCP serves it,
/// and tools are told the user.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_user_signed_in_through_the_browser_calls_tools_as_themselves() {
    let here = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let node = std::process::Command::new("node").arg("--version").output();
    if node.is_err() || !here.join("oidc/node_modules/oidc-provider").exists() {
        harness::skip("Node.js and node-oidc-provider (cd tests/oidc && npm install)");
        return;
    }
    let keys = std::env::temp_dir().join(format!("oxp-oidc-browser-{}.json", std::process::id()));
    let _ = std::fs::remove_file(&keys);
    let oidc = Oidc::start(0, &keys, "a").await;
    let provider = Provider::default();
    *provider.issuer.lock().unwrap() = oidc.issuer.clone();
    let oxp = Oxp::start(&provider, |o| o).await;
    let metadata: Value = oxp
        .client
        .get(format!(
            "{}/.well-known/oauth-protected-resource/mcp",
            oxp.base
        ))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let resource = metadata["resource"].as_str().unwrap();
    let token = browser_sign_in(&oidc.issuer, resource, "dora").await;
    let reply = oxp
        .mcp(
            &token,
            json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                   "params": {"name": "Files_Whoami", "arguments": {}}}),
        )
        .await;
    assert_eq!(reply.status, 200, "{reply:?}");
    assert_eq!(
        reply.body["result"]["content"][0]["text"], "dora",
        "{reply:?}"
    );
    drop(oidc);
    let _ = std::fs::remove_file(&keys);
}
