//! Check any OXP 1.0 tool server against the spec, whatever it is written in.
//!
//! `oxp-check <url>` runs the MUSTs and SHOULDs of OXP 1.0 (the OpenAPI document of
//! OpenExecProtocol/Specification and the findings in `oxp-notes.md`, vendored in `spec/`)
//! against a live server: health, authentication and its challenges, the tool list, calls in
//! both dialects (the `{"$schema", "request"}` envelope and the bare body with `OXP-Version`),
//! version resolution, the status classes (400 server errors, 422 validation errors, 200 tool
//! errors), idempotency by `call_id`, and tool requirements with their authorization
//! challenges. Every answer's body is validated against the spec's own JSON Schemas. Each check
//! prints as `PASS|FAIL|SKIP  MUST|SHOULD  §section  what`; the command exits 1 when a MUST
//! fails, and `--json FILE` writes the report for CI.
//!
//! Tools are found in the server's own list: calls go to the first tool without requirements
//! whose input schema yields an input (or the one `--tool` names), so **the checker runs that
//! tool**: point it at a test deployment, or name a harmless tool. A check that needs what the
//! server does not offer (a tool that requires a secret, authentication) is skipped with the
//! reason.
//!
//! As a library, for a test suite:
//!
//! ```no_run
//! # async fn example() {
//! let options = oxp_check::Options::new("http://127.0.0.1:8000");
//! let report = oxp_check::check(&options).await.expect("the server answers");
//! println!("{report}");
//! assert_eq!(report.failed_musts().count(), 0, "{report}");
//! # }
//! ```
#![warn(missing_docs)]

mod checks;
pub mod cli;
mod http;
mod input;
mod report;
mod spec;

use std::fmt;
use std::time::Duration;

pub use report::{Check, Level, Outcome, Report};
pub use spec::OPENAPI;

/// What to check and how to reach it.
///
/// ```
/// use std::time::Duration;
///
/// let options = oxp_check::Options::new("https://tools.example.com")
///     .jwt_secret("the HS256 secret the server shares")
///     .header("X-Tenant", "ci")
///     .tool("Calculator.Add@1.0.0", serde_json::json!({"a": 1, "b": 2}))
///     .timeout(Duration::from_secs(10));
/// assert_eq!(options.url, "https://tools.example.com");
/// ```
#[derive(Clone, Debug)]
pub struct Options {
    /// The server's base URL: `GET {url}/tools`, `POST {url}/tools/call`.
    pub url: String,
    /// Sent as `OXP-API-Key` (oxp-notes §1 A.60).
    pub api_key: Option<String>,
    /// Sent as `Authorization: Bearer …`.
    pub bearer: Option<String>,
    /// The HS256 secret the server shares: the checker signs its own short-lived tokens with it,
    /// and also checks that expired, unsigned and wrongly signed ones are refused (§1 A.61).
    pub jwt_secret: Option<String>,
    /// The `aud` of tokens signed with [`jwt_secret`](Self::jwt_secret).
    pub jwt_audience: Option<String>,
    /// Sent with every request (a gateway's, say).
    pub headers: Vec<(String, String)>,
    /// The tool calls go to, instead of the first listed one without requirements.
    pub tool: Option<String>,
    /// Its input, instead of one made from its schema.
    pub input: Option<serde_json::Value>,
    /// How long one request may take.
    pub timeout: Duration,
}

impl Options {
    /// Checks the server at `url` anonymously, with a 30 s timeout per request.
    pub fn new(url: impl Into<String>) -> Options {
        Options {
            url: url.into(),
            api_key: None,
            bearer: None,
            jwt_secret: None,
            jwt_audience: None,
            headers: Vec::new(),
            tool: None,
            input: None,
            timeout: Duration::from_secs(30),
        }
    }

    /// Authenticates with an API key (`OXP-API-Key`).
    pub fn api_key(mut self, key: impl Into<String>) -> Options {
        self.api_key = Some(key.into());
        self
    }

    /// Authenticates with a bearer token.
    pub fn bearer(mut self, token: impl Into<String>) -> Options {
        self.bearer = Some(token.into());
        self
    }

    /// Authenticates with HS256 tokens signed with `secret`, and checks the token rules.
    pub fn jwt_secret(mut self, secret: impl Into<String>) -> Options {
        self.jwt_secret = Some(secret.into());
        self
    }

    /// The audience of those tokens.
    pub fn jwt_audience(mut self, audience: impl Into<String>) -> Options {
        self.jwt_audience = Some(audience.into());
        self
    }

    /// A header sent with every request.
    pub fn header(mut self, name: impl Into<String>, value: impl Into<String>) -> Options {
        self.headers.push((name.into(), value.into()));
        self
    }

    /// Calls go to `tool` with `input`.
    pub fn tool(mut self, tool: impl Into<String>, input: serde_json::Value) -> Options {
        self.tool = Some(tool.into());
        self.input = Some(input);
        self
    }

    /// How long one request may take.
    pub fn timeout(mut self, timeout: Duration) -> Options {
        self.timeout = timeout;
        self
    }
}

/// Why no report could be made.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Error {
    /// No HTTP client could be made (TLS set-up).
    Client(String),
    /// The server did not answer `GET /health` or `GET /tools`.
    Unreachable(String),
    /// The credentials given were refused: the server's answer.
    CredentialsRefused(String),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Client(why) => write!(f, "{why}"),
            Error::Unreachable(why) => write!(f, "the server does not answer: {why}"),
            Error::CredentialsRefused(answer) => {
                write!(
                    f,
                    "the server refused the credentials given: GET /tools got {answer}"
                )
            }
        }
    }
}

impl std::error::Error for Error {}

/// Runs every check against the server `options` name.
///
/// Fails only when the server cannot be reached or refuses the credentials given; a server
/// that answers wrongly gets a [`Report`] whose [`failed_musts`](Report::failed_musts) say how.
///
/// ```no_run
/// # async fn example() {
/// let report = oxp_check::check(&oxp_check::Options::new("http://127.0.0.1:8000")).await.unwrap();
/// for check in report.failed_musts() {
///     eprintln!("{} {}: {}", check.section, check.what, check.status());
/// }
/// std::process::exit(report.exit_code());
/// # }
/// ```
pub async fn check(options: &Options) -> Result<Report, Error> {
    checks::run(options).await
}
