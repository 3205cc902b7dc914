//! The checks, in the order they run: health, authentication, the tool list, calls in both
//! dialects, version resolution, error classes, input validation, idempotency, requirements and
//! their challenges, and what every answer carries. Each names the section of
//! `spec/oxp-notes.md` it comes from; tools are found in the server's own list, never assumed.

use reqwest::Method;
use serde_json::{Value, json};

use crate::http::{As, Http, Reply};
use crate::input;
use crate::report::{Check, Level, Outcome, Report};
use crate::spec::Shape;
use crate::{Error, Options};

use Level::{Must, Should};

/// A listed tool the checker can call: no requirements, and an input its schema accepts.
struct Callable {
    id: String,
    input: Value,
}

struct Run<'a> {
    options: &'a Options,
    http: Http,
    checks: Vec<Check>,
    /// When set, every check from here on is a skip with this reason (the server requires
    /// credentials and none were given).
    blocked: Option<String>,
    /// Whether a call came back `success: false` in a valid shape (§1 E.47).
    tool_error_seen: bool,
    /// Whether the server authenticates callers (then the user may be the credential's).
    authenticated: bool,
    /// Tells this run's call ids apart from another run's against the same server.
    nonce: String,
}

pub(crate) async fn run(options: &Options) -> Result<Report, Error> {
    let http = Http::new(options).map_err(Error::Client)?;
    let nonce = format!(
        "{:x}",
        crate::http::seconds_now() ^ u64::from(std::process::id()) << 20
    );
    let mut run = Run {
        options,
        http,
        checks: Vec::new(),
        blocked: None,
        tool_error_seen: false,
        authenticated: false,
        nonce,
    };
    run.all().await?;
    Ok(Report {
        url: options.url.clone(),
        checks: run.checks,
    })
}

/// `Ok` when `reply` has `status` and its body the `shape`.
fn answered(reply: &Reply, status: u16, shape: Shape) -> Result<(), String> {
    if reply.status != status {
        return Err(format!("expected {status}, got {}", reply.said()));
    }
    shape.check(reply.body())
}

/// A tool's requirements: the secrets' ids, the authorization providers' ids, and whether it
/// needs a user id.
type Requirements = (Vec<String>, Vec<String>, bool);

fn requirements_of(tool: &Value) -> Requirements {
    let requirements = &tool["requirements"];
    let ids = |key: &str| -> Vec<String> {
        requirements[key]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|r| r["id"].as_str().map(str::to_owned))
            .collect()
    };
    (
        ids("secrets"),
        ids("authorization"),
        requirements["user_id"] == json!(true),
    )
}

fn id_of(tool: &Value) -> &str {
    tool["id"].as_str().unwrap_or_default()
}

/// `Toolkit.Tool` of `Toolkit.Tool@1.2.3`.
fn unversioned(id: &str) -> &str {
    id.split('@').next().unwrap_or(id)
}

fn semver(version: &str) -> Option<(u64, u64, u64)> {
    let mut parts = version.split('.').map(|p| p.parse::<u64>().ok());
    let version = (parts.next()??, parts.next()??, parts.next()??);
    parts.next().is_none().then_some(version)
}

impl Run<'_> {
    fn record(&mut self, level: Level, section: &'static str, what: &str, outcome: Outcome) {
        let outcome = match (&self.blocked, outcome) {
            (Some(why), _) => Outcome::Skip(why.clone()),
            (None, outcome) => outcome,
        };
        self.checks.push(Check {
            level,
            section,
            what: what.to_owned(),
            outcome,
        });
    }

    fn verdict(&mut self, level: Level, section: &'static str, what: &str, r: Result<(), String>) {
        let outcome = match r {
            Ok(()) => Outcome::Pass,
            Err(why) => Outcome::Fail(why),
        };
        self.record(level, section, what, outcome);
    }

    fn skip(&mut self, level: Level, section: &'static str, what: &str, why: &str) {
        self.record(level, section, what, Outcome::Skip(why.to_owned()));
    }

    /// A request whose failure to get any answer is the check's failure (the server hung up
    /// or timed out on it), not the run's.
    async fn send(&mut self, request: reqwest::RequestBuilder) -> Result<Reply, String> {
        self.http
            .send(request)
            .await
            .map_err(|e| format!("no answer: {e}"))
    }

    async fn call(&mut self, body: &Value) -> Result<Reply, String> {
        let reply = self
            .http
            .call(body)
            .await
            .map_err(|e| format!("no answer: {e}"))?;
        let result = reply.body().get("result").unwrap_or(reply.body());
        if reply.status == 200
            && result["success"] == json!(false)
            && Shape::CallResponse.check(result).is_ok()
        {
            self.tool_error_seen = true;
        }
        Ok(reply)
    }

    fn call_id(&self, what: &str) -> String {
        format!("oxp-check-{}-{what}", self.nonce)
    }

    async fn all(&mut self) -> Result<(), Error> {
        // ---- Health (§1 H) ----
        let health = self
            .http
            .send(self.http.request(Method::GET, "/health", As::Anonymous))
            .await
            .map_err(Error::Unreachable)?;
        let r = match health.status {
            200 => Ok(()),
            _ => Err(format!("got {}", health.said())),
        };
        self.verdict(Must, "§1 H.11", "GET /health answers 200", r);

        // ---- Authentication (§1 A) ----
        let probe = self
            .http
            .send(self.http.request(Method::GET, "/tools", As::Anonymous))
            .await
            .map_err(Error::Unreachable)?;
        let auth_required = matches!(probe.status, 401 | 403);
        self.authenticated = auth_required;
        if auth_required {
            self.authentication(&health, &probe).await;
            if !self.http.has_credential() {
                self.blocked = Some(
                    "the server requires authentication: pass --api-key, --bearer or --jwt-secret"
                        .into(),
                );
            }
        } else {
            self.without_authentication().await;
        }

        // ---- GET /tools (§1 L, D; §2) ----
        let list = self
            .http
            .send(self.http.request(Method::GET, "/tools", As::Authenticated))
            .await
            .map_err(Error::Unreachable)?;
        if self.blocked.is_none() && matches!(list.status, 401 | 403) {
            return Err(Error::CredentialsRefused(list.said()));
        }
        let tools = self.list(&list).await;

        // ---- Calls (§1 C, G, V, E) ----
        let callable = self.callable(&tools);
        self.dialects(callable.as_ref()).await;
        self.call_ids(callable.as_ref()).await;
        self.versions(&tools, callable.as_ref()).await;
        self.errors(&tools, callable.as_ref()).await;
        self.validation(&tools).await;
        self.idempotency(&tools, callable.as_ref()).await;
        self.limits(callable.as_ref()).await;

        // ---- Requirements and their challenges (§1 R) ----
        self.requirements(&tools).await;

        // ---- What every answer carries ----
        let r = if self.tool_error_seen {
            Ok(())
        } else {
            Err(String::new())
        };
        match r {
            Ok(()) => self.verdict(
                Must,
                "§1 E.47",
                "a tool's failure is 200 with `success: false` and an `error`",
                Ok(()),
            ),
            Err(_) => self.skip(
                Must,
                "§1 E.47",
                "a tool's failure is 200 with `success: false` and an `error`",
                "no call failed in the tool: a tool list does not say which tool fails how",
            ),
        }
        let blocked = self.blocked.take();
        let r = if self.http.unversioned.is_empty() {
            Ok(())
        } else {
            let n = self.http.unversioned.len();
            let first: Vec<&str> = self
                .http
                .unversioned
                .iter()
                .take(3)
                .map(String::as_str)
                .collect();
            Err(format!(
                "{n} of {} answers lacked it: {}",
                self.http.answers,
                first.join(", ")
            ))
        };
        self.verdict(
            Should,
            "§1 G.9",
            "every answer carries the `OXP-Version` header",
            r,
        );
        self.blocked = blocked;
        Ok(())
    }

    async fn authentication(&mut self, health: &Reply, probe: &Reply) {
        let r = match health.status {
            200 => Ok(()),
            _ => Err(format!("got {}", health.said())),
        };
        self.verdict(Must, "§1 H.12", "GET /health needs no credentials", r);
        let r = match probe.status {
            401 => Ok(()),
            _ => Err(format!("got {}", probe.said())),
        };
        self.verdict(Must, "§1 A.61", "GET /tools without credentials is 401", r);
        let r = match probe.header("www-authenticate") {
            Some(c) if c.len() >= 6 && c[..6].eq_ignore_ascii_case("bearer") => Ok(()),
            Some(other) => Err(format!("`WWW-Authenticate: {other}`")),
            None => Err("no `WWW-Authenticate` header".into()),
        };
        self.verdict(
            Should,
            "§3.7",
            "a 401 challenges with `WWW-Authenticate: Bearer`",
            r,
        );
        let r = match probe.body()["message"].as_str() {
            Some(_) => Ok(()),
            None => Err(format!("got {}", probe.said())),
        };
        self.verdict(Should, "§3.7", "a 401's body is JSON with a `message`", r);

        // Vector 19: authentication comes before anything else, a bad request included.
        let body = json!({"request": {"tool_id": "OxpCheck.NoSuchTool@1.0.0"}});
        let request = self
            .http
            .request(Method::POST, "/tools/call", As::Anonymous);
        let r = self
            .send(request.json(&body))
            .await
            .and_then(|reply| match reply.status {
                401 => Ok(()),
                _ => Err(format!("got {}", reply.said())),
            });
        self.verdict(
            Must,
            "§1 A.61",
            "POST /tools/call without credentials is 401, before the request is read",
            r,
        );

        let bad: [(&str, &'static str, &str, String); 2] = [
            (
                "§1 A.61",
                "Authorization",
                "a malformed bearer token is 401",
                "Bearer oxp-check.not-a.token".into(),
            ),
            (
                "§1 A.60",
                "OXP-API-Key",
                "a wrong `OXP-API-Key` is 401",
                "oxp-check-wrong-key".into(),
            ),
        ];
        for (section, header, what, value) in bad {
            let request = self
                .http
                .request(Method::GET, "/tools", As::Anonymous)
                .header(header, value);
            let r = self
                .send(request)
                .await
                .and_then(|reply| match reply.status {
                    401 => Ok(()),
                    _ => Err(format!("got {}", reply.said())),
                });
            self.verdict(Must, section, what, r);
        }

        // Tokens the server must refuse, signed with the secret it shares (A.61).
        let tokens: [(&str, Option<String>); 4] = match &self.options.jwt_secret {
            Some(secret) => {
                let secret = secret.as_bytes();
                let good = crate::http::claims(self.options, std::time::Duration::from_secs(300));
                let mut expired = good.clone();
                expired["exp"] = json!(crate::http::seconds_now().saturating_sub(3600));
                let mut no_exp = good.clone();
                if let Some(claims) = no_exp.as_object_mut() {
                    claims.remove("exp");
                }
                [
                    (
                        "an expired token (exp an hour ago) is 401",
                        Some(crate::http::hs256(&expired, secret)),
                    ),
                    (
                        "a token without `exp` is 401",
                        Some(crate::http::hs256(&no_exp, secret)),
                    ),
                    (
                        "a token signed with another key is 401",
                        Some(crate::http::hs256(
                            &good,
                            b"oxp-check: not the server's secret",
                        )),
                    ),
                    (
                        "an unsigned token (`alg: none`) is 401",
                        Some(crate::http::unsigned(&good)),
                    ),
                ]
            }
            None => [
                ("an expired token (exp an hour ago) is 401", None),
                ("a token without `exp` is 401", None),
                ("a token signed with another key is 401", None),
                ("an unsigned token (`alg: none`) is 401", None),
            ],
        };
        for (what, token) in tokens {
            let Some(token) = token else {
                self.skip(
                    Must,
                    "§1 A.61",
                    what,
                    "pass --jwt-secret to check how tokens are validated",
                );
                continue;
            };
            let request = self
                .http
                .request(Method::GET, "/tools", As::Anonymous)
                .bearer_auth(token);
            let r = self
                .send(request)
                .await
                .and_then(|reply| match reply.status {
                    401 => Ok(()),
                    _ => Err(format!("got {}", reply.said())),
                });
            self.verdict(Must, "§1 A.61", what, r);
        }
    }

    async fn without_authentication(&mut self) {
        self.skip(
            Must,
            "§1 H.12",
            "GET /health needs no credentials",
            "the server requires no authentication",
        );
        // A.59: a server without authentication ignores the header.
        let request = self
            .http
            .request(Method::GET, "/tools", As::Anonymous)
            .bearer_auth("oxp-check-garbage");
        let r = self
            .send(request)
            .await
            .and_then(|reply| match reply.status {
                200 => Ok(()),
                _ => Err(format!("got {}", reply.said())),
            });
        self.verdict(
            Must,
            "§1 A.59",
            "without authentication configured, an `Authorization` header is ignored",
            r,
        );
        self.skip(
            Should,
            "§1 A.58",
            "the server requires authentication (internet-facing servers SHOULD)",
            "GET /tools answered without credentials: fine on loopback or a private network",
        );
    }

    async fn list(&mut self, list: &Reply) -> Vec<Value> {
        let r = answered(list, 200, Shape::List);
        let valid = r.is_ok();
        self.verdict(
            Must,
            "§1 L.16",
            "GET /tools answers 200 `{\"items\": [ToolDefinition]}`",
            r,
        );
        let tools: Vec<Value> = list.body()["items"].as_array().cloned().unwrap_or_default();
        if list.status != 200 || !list.body()["items"].is_array() {
            for (level, section, what) in [
                (Must, "§2", "every listed tool is a ToolDefinition"),
                (Must, "§1 D.18", "tool ids are unique"),
                (Must, "§1 D.24", "every `input_schema` is a JSON Schema"),
            ] {
                self.skip(level, section, what, "no tool list");
            }
        } else {
            let r = if valid {
                Ok(())
            } else {
                tools
                    .iter()
                    .find_map(|t| Shape::ToolDefinition.check(t).err())
                    .map_or(Ok(()), Err)
            };
            self.verdict(
                Must,
                "§2",
                "every listed tool is a ToolDefinition (id, name, description, version; closed)",
                r,
            );
            let mut ids: Vec<&str> = tools.iter().map(id_of).collect();
            ids.sort_unstable();
            let duplicate = ids.windows(2).find(|w| w[0] == w[1]).map(|w| w[0]);
            let r = duplicate.map_or(Ok(()), |id| Err(format!("`{id}` is listed twice")));
            self.verdict(Must, "§1 D.18", "tool ids are unique", r);
            let r = tools
                .iter()
                .find(|t| {
                    let version = t["version"].as_str().unwrap_or_default();
                    !id_of(t).ends_with(&format!("@{version}")) || semver(version).is_none()
                })
                .map_or(Ok(()), |t| {
                    Err(format!("`{}` with version {}", id_of(t), t["version"]))
                });
            self.verdict(
                Should,
                "§2",
                "each id carries its full `@x.y.z`, equal to `version`",
                r,
            );
            let r = tools
                .iter()
                .find(|t| t.get("input_schema").is_none() || t.get("output_schema").is_none())
                .map_or(Ok(()), |t| Err(format!("`{}` lacks one", id_of(t))));
            self.verdict(
                Should,
                "§3.9",
                "each tool lists `input_schema` and `output_schema`",
                r,
            );
            let r = tools
                .iter()
                .find_map(|t| {
                    let schema = t.get("input_schema")?;
                    let error = jsonschema::meta::validate(schema).err()?;
                    Some(format!("`{}`: {error}", id_of(t)))
                })
                .map_or(Ok(()), Err);
            self.verdict(Must, "§1 D.24", "every `input_schema` is a JSON Schema", r);
        }
        // The Go SDK sends `{}` with every list; the OpenAPI allows a body (L.15).
        let request = self
            .http
            .request(Method::GET, "/tools", As::Authenticated)
            .json(&json!({}));
        let r = self
            .send(request)
            .await
            .and_then(|reply| answered(&reply, 200, Shape::List));
        self.verdict(
            Must,
            "§1 L.15",
            "GET /tools with a JSON body `{}` answers 200",
            r,
        );
        let request = self
            .http
            .request(Method::GET, "/tools", As::Authenticated)
            .header("content-type", "application/json")
            .body("{");
        let r = self
            .send(request)
            .await
            .and_then(|reply| answered(&reply, 200, Shape::List));
        self.verdict(Should, "§3.4", "GET /tools ignores a malformed body", r);
        tools
    }

    /// The tool calls run with: the one named by `--tool`, else the first listed tool without
    /// requirements whose schema yields an input.
    fn callable(&self, tools: &[Value]) -> Option<Callable> {
        if let Some(id) = &self.options.tool {
            let tool = tools
                .iter()
                .find(|t| id_of(t) == id || unversioned(id_of(t)) == id.as_str());
            let input = match (&self.options.input, tool) {
                (Some(input), _) => input.clone(),
                (None, Some(tool)) => input::valid(&tool["input_schema"])?,
                (None, None) => json!({}),
            };
            let id = tool.map_or(id.clone(), |t| id_of(t).to_owned());
            return Some(Callable { id, input });
        }
        tools
            .iter()
            .filter(|t| requirements_of(t) == (vec![], vec![], false))
            .find_map(|t| {
                let schema = t.get("input_schema").cloned().unwrap_or(json!({}));
                Some(Callable {
                    id: id_of(t).to_owned(),
                    input: input::valid(&schema)?,
                })
            })
    }

    async fn dialects(&mut self, tool: Option<&Callable>) {
        const NO_TOOL: &str = "no listed tool can be called without requirements with an input \
            made from its schema: name one with --tool (and --input)";
        let Some(tool) = tool else {
            for (level, section, what) in [
                (
                    Must,
                    "§1 C.31",
                    "an enveloped call answers 200 `{\"result\": CallToolResponse}`",
                ),
                (
                    Must,
                    "§1 G.4",
                    "a call without `$schema` is answered (the latest version assumed)",
                ),
                (
                    Should,
                    "§3.5",
                    "`otc://1.0`, `urn:oxp:1.1` and the spec's URL are accepted as `$schema`",
                ),
                (
                    Should,
                    "§1 G.8",
                    "a bare body with `OXP-Version: 1.0` is answered bare",
                ),
            ] {
                self.skip(level, section, what, NO_TOOL);
            }
            return;
        };
        let request =
            |call_id: &str| json!({"tool_id": tool.id, "call_id": call_id, "input": tool.input});
        // The envelope, as the OpenAPI and both SDKs send it (C.31).
        let call_id = self.call_id("envelope");
        let sent = json!({"$schema": "urn:oxp:1.0", "request": request(&call_id)});
        let reply = self.call(&sent).await;
        let r = reply.as_ref().map_err(Clone::clone).and_then(|reply| {
            answered(reply, 200, Shape::CallEnvelope)?;
            match reply.body().get("result") {
                Some(_) => Ok(()),
                None => Err(format!("no `result`: {}", reply.said())),
            }
        });
        let enveloped = r.is_ok();
        self.verdict(
            Must,
            "§1 C.31",
            &format!(
                "an enveloped call of `{}` answers 200 `{{\"result\": CallToolResponse}}`",
                tool.id
            ),
            r,
        );
        if let (Ok(reply), true) = (&reply, enveloped) {
            let echoed = &reply.body()["result"]["call_id"];
            let r = match echoed.as_str() {
                Some(id) if id == call_id => Ok(()),
                _ => Err(format!("sent `{call_id}`, got {echoed}")),
            };
            self.verdict(
                Should,
                "§3.25",
                "the answer echoes the request's `call_id`",
                r,
            );
            let r = match reply.body()["$schema"].as_str() {
                Some(_) => Ok(()),
                None => Err(format!("got {}", reply.said())),
            };
            self.verdict(
                Should,
                "§1 G.7",
                "an enveloped answer names its version in `$schema`",
                r,
            );
        }
        // G.4: no `$schema`, as the SDKs send unless told.
        let sent = json!({"request": request(&self.call_id("no-schema"))});
        let r = self
            .call(&sent)
            .await
            .and_then(|reply| answered(&reply, 200, Shape::CallEnvelope));
        self.verdict(
            Must,
            "§1 G.4",
            "a call without `$schema` is answered (the latest version assumed)",
            r,
        );
        // §3.5: the forms of `$schema` a client may send for major 1.
        let mut r = Ok(());
        for schema in [
            "otc://1.0",
            "urn:oxp:1.1",
            "https://github.com/OpenToolCalling/Specification/tree/main/spec/http/1.0/openapi.json",
        ] {
            let sent = json!({"$schema": schema, "request": request(&self.call_id("forms"))});
            let reply = self.call(&sent).await;
            if let Err(why) = reply.and_then(|reply| answered(&reply, 200, Shape::CallEnvelope)) {
                r = Err(format!("`{schema}`: {why}"));
                break;
            }
        }
        self.verdict(
            Should,
            "§3.5",
            "`otc://1.0`, `urn:oxp:1.1` and the spec's URL are accepted as `$schema`",
            r,
        );
        // G.8 [D15]: the bare body and the version header, answered bare.
        let request_builder = self
            .http
            .request(Method::POST, "/tools/call", As::Authenticated)
            .header("OXP-Version", "1.0")
            .json(&request(&self.call_id("bare")));
        let r = self.send(request_builder).await.and_then(|reply| {
            answered(&reply, 200, Shape::CallResponse)?;
            match reply.body().get("result") {
                None => Ok(()),
                Some(_) => Err("answered in the envelope".into()),
            }
        });
        self.verdict(
            Should,
            "§1 G.8",
            "a bare body with `OXP-Version: 1.0` is answered bare",
            r,
        );
    }

    async fn call_ids(&mut self, tool: Option<&Callable>) {
        const WHAT: &str = "without a `call_id`, the answer carries a generated one, new each call";
        let Some(tool) = tool else {
            return self.skip(Must, "§1 C.33", WHAT, "no callable tool (see §1 C.31)");
        };
        let sent = json!({"request": {"tool_id": tool.id, "input": tool.input}});
        let mut ids = Vec::new();
        let mut r = Ok(());
        for _ in 0..2 {
            match self.call(&sent).await {
                Ok(reply) if reply.status == 200 => {
                    match reply.body()["result"]["call_id"]
                        .as_str()
                        .filter(|i| !i.is_empty())
                    {
                        Some(id) => ids.push(id.to_owned()),
                        None => r = Err(format!("no `result.call_id`: {}", reply.said())),
                    }
                }
                Ok(reply) => r = Err(format!("got {}", reply.said())),
                Err(why) => r = Err(why),
            }
        }
        if r.is_ok() && ids.len() == 2 && ids[0] == ids[1] {
            r = Err(format!("both calls got `{}`", ids[0]));
        }
        self.verdict(Must, "§1 C.33", WHAT, r);
    }

    async fn versions(&mut self, tools: &[Value], tool: Option<&Callable>) {
        let Some(tool) = tool else {
            for (section, what) in [
                (
                    "§1 V.39",
                    "a tool id without `@version` calls the latest version",
                ),
                ("§1 V.38", "`@x` means exactly `x.0.0`"),
                ("§1 V.40", "a version the server does not have is 400"),
            ] {
                self.skip(Must, section, what, "no callable tool (see §1 C.31)");
            }
            return;
        };
        let name = unversioned(&tool.id).to_owned();
        let mut versions: Vec<(u64, u64, u64)> = tools
            .iter()
            .filter(|t| unversioned(id_of(t)) == name)
            .filter_map(|t| semver(t["version"].as_str()?))
            .collect();
        versions.sort_unstable();
        let own = tool.id.split_once('@').and_then(|(_, v)| semver(v));
        // V.39: the name alone is the latest version: called with an input of the latest's
        // schema when the latest needs nothing more.
        const LATEST: &str = "a tool id without `@version` calls the latest version";
        let latest = tools
            .iter()
            .filter(|t| unversioned(id_of(t)) == name)
            .max_by_key(|t| t["version"].as_str().and_then(semver));
        let latest_input = match latest {
            Some(t) if id_of(t) == tool.id => Some(tool.input.clone()),
            Some(t) if requirements_of(t) == (vec![], vec![], false) => {
                t.get("input_schema").and_then(input::valid)
            }
            _ => None,
        };
        match latest_input {
            Some(input) => {
                let sent = json!({"request": {"tool_id": name, "input": input}});
                let r = self
                    .call(&sent)
                    .await
                    .and_then(|reply| answered(&reply, 200, Shape::CallEnvelope));
                self.verdict(Must, "§1 V.39", &format!("{LATEST} (`{name}`)"), r);
            }
            None => self.skip(
                Must,
                "§1 V.39",
                LATEST,
                "the latest version of the callable tool has requirements or no input",
            ),
        }
        // V.38: `@x` is `x.0.0`, never the latest `x.*`.
        const MAJOR: &str = "`@x` means exactly `x.0.0`";
        match own {
            Some((major, 0, 0)) => {
                let id = format!("{name}@{major}");
                let sent = json!({"request": {"tool_id": id, "input": tool.input}});
                let r = self
                    .call(&sent)
                    .await
                    .and_then(|reply| answered(&reply, 200, Shape::CallEnvelope));
                self.verdict(
                    Must,
                    "§1 V.38",
                    &format!("{MAJOR} (`{id}` is listed as {major}.0.0)"),
                    r,
                );
            }
            Some((major, _, _)) if !versions.contains(&(major, 0, 0)) => {
                let id = format!("{name}@{major}");
                let sent = json!({"request": {"tool_id": id, "input": tool.input}});
                let r = self
                    .call(&sent)
                    .await
                    .and_then(|reply| answered(&reply, 400, Shape::ServerError));
                self.verdict(
                    Must,
                    "§1 V.38",
                    &format!("{MAJOR} (`{id}` is 400: {major}.0.0 is not listed)"),
                    r,
                );
            }
            _ => self.skip(
                Must,
                "§1 V.38",
                MAJOR,
                "the callable tool's major has an x.0.0 it is not",
            ),
        }
        // V.40: a version the list does not have.
        let absent = versions.last().map_or(1, |v| v.0 + 1);
        let id = format!("{name}@{absent}.0.0");
        let sent = json!({"request": {"tool_id": id, "input": tool.input}});
        let r = self
            .call(&sent)
            .await
            .and_then(|reply| answered(&reply, 400, Shape::ServerError));
        self.verdict(
            Must,
            "§1 V.40",
            &format!("a version the server does not have is 400 (`{id}`)"),
            r,
        );
    }

    async fn errors(&mut self, tools: &[Value], tool: Option<&Callable>) {
        // An id no list has: `OxpCheck.NoSuchTool`, made unique against this list.
        let mut unknown = "OxpCheck.NoSuchTool".to_owned();
        while tools.iter().any(|t| unversioned(id_of(t)) == unknown) {
            unknown.push('X');
        }
        let some_id = tool.map_or_else(|| format!("{unknown}@1.0.0"), |t| t.id.clone());
        let input = tool.map_or(json!({}), |t| t.input.clone());
        let cases: Vec<(Level, &'static str, String, Body)> = vec![
            (
                Must,
                "§1 E.42",
                "an unknown tool is 400 with a ServerErrorResponse (not 404)".into(),
                Body::Json(json!({"request": {"tool_id": format!("{unknown}@1.0.0")}})),
            ),
            (
                Must,
                "§1 V.40",
                "an invalid tool id (`@1.0`: neither `@x` nor `@x.y.z`) is 400".into(),
                Body::Json(
                    json!({"request": {"tool_id": format!("{}@1.0", unversioned(&some_id)), "input": input}}),
                ),
            ),
            (
                Must,
                "§1 E.42",
                "a body that is not JSON is 400".into(),
                Body::Raw("{\"request\":", "application/json"),
            ),
            (
                Must,
                "§1 E.42",
                "a body that is not an object (`[]`) is 400".into(),
                Body::Json(json!([])),
            ),
            (
                Must,
                "§1 E.42",
                "a request without `tool_id` is 400".into(),
                Body::Json(json!({"request": {"input": input}})),
            ),
            (
                Must,
                "§1 G.10",
                "an unsupported OXP major (`$schema: urn:oxp:2.0`) is 400".into(),
                Body::Json(
                    json!({"$schema": "urn:oxp:2.0", "request": {"tool_id": some_id, "input": input}}),
                ),
            ),
            (
                Should,
                "§3.6",
                "an unsupported `OXP-Version: 2.0` is 400".into(),
                Body::Versioned(json!({"tool_id": some_id, "input": input}), "2.0"),
            ),
            (
                Should,
                "§3.5",
                "a `$schema` that is no URI (`not a uri`) is 400".into(),
                Body::Json(
                    json!({"$schema": "not a uri", "request": {"tool_id": some_id, "input": input}}),
                ),
            ),
            (
                Should,
                "§3.12",
                "an unknown field in the (closed) CallToolRequest is 400".into(),
                Body::Json(
                    json!({"request": {"tool_id": some_id, "input": input, "oxp_check_unknown": 1}}),
                ),
            ),
            (
                Should,
                "§3.14",
                "a body sent as `text/plain` is 400 (or 415)".into(),
                Body::Raw(
                    "{\"request\":{\"tool_id\":\"OxpCheck.Probe\"}}",
                    "text/plain",
                ),
            ),
        ];
        for (level, section, what, body) in cases {
            let request = self
                .http
                .request(Method::POST, "/tools/call", As::Authenticated);
            let request = match body {
                Body::Json(json) => request.json(&json),
                Body::Raw(text, content_type) => {
                    request.header("content-type", content_type).body(text)
                }
                Body::Versioned(json, version) => {
                    request.header("OXP-Version", version).json(&json)
                }
            };
            let r = self.send(request).await.and_then(|reply| {
                if section == "§3.14" && reply.status == 415 {
                    return Ok(());
                }
                answered(&reply, 400, Shape::ServerError)
            });
            self.verdict(level, section, &what, r);
        }
        // §3.35: the rest of the HTTP surface answers in JSON too.
        let mut r = Ok(());
        for (method, path, status) in [
            (Method::GET, "/oxp-check/no-such-path", 404),
            (Method::POST, "/health", 405),
            (Method::GET, "/tools/call", 405),
        ] {
            let request = self.http.request(method.clone(), path, As::Authenticated);
            match self.send(request).await {
                Ok(reply) if reply.status == status && reply.json.is_some() => {}
                Ok(reply) => {
                    r = Err(format!(
                        "{method} {path}: expected {status} with JSON, got {}",
                        reply.said()
                    ));
                    break;
                }
                Err(why) => {
                    r = Err(why);
                    break;
                }
            }
        }
        self.verdict(
            Should,
            "§3.35",
            "an unknown path is 404 and a wrong method 405, in JSON",
            r,
        );
    }

    async fn validation(&mut self, tools: &[Value]) {
        const WHAT: &str = "input the tool's schema refuses is 422 with a ValidationErrorResponse";
        let candidate = tools
            .iter()
            .filter(|t| match &self.options.tool {
                Some(id) => id_of(t) == id || unversioned(id_of(t)) == id.as_str(),
                None => requirements_of(t) == (vec![], vec![], false),
            })
            .find_map(|t| Some((id_of(t).to_owned(), input::invalid(t.get("input_schema")?)?)));
        let Some((id, (input, why))) = candidate else {
            return self.skip(
                Must,
                "§1 E.46",
                WHAT,
                "no listed tool without requirements has an input its schema refuses",
            );
        };
        let sent = json!({"request": {"tool_id": id, "input": input}});
        let r = self.call(&sent).await.and_then(|reply| {
            answered(&reply, 422, Shape::ValidationError)?;
            match reply.body().get("result") {
                None => Ok(()),
                Some(_) => Err("a 422 with a `result`".into()),
            }
        });
        self.verdict(Must, "§1 E.46", &format!("{WHAT} (`{id}`, {why})"), r);
    }

    async fn idempotency(&mut self, tools: &[Value], tool: Option<&Callable>) {
        const REPEAT: &str = "a repeated `call_id` is answered with the first answer";
        const REUSED: &str = "a `call_id` reused with another input never gets the first answer";
        let Some(tool) = tool else {
            self.skip(Should, "§3.25", REPEAT, "no callable tool (see §1 C.31)");
            return self.skip(Should, "§3.25", REUSED, "no callable tool (see §1 C.31)");
        };
        let call_id = self.call_id("repeat");
        let sent =
            json!({"request": {"tool_id": tool.id, "call_id": call_id, "input": tool.input}});
        let first = self.call(&sent).await;
        let second = self.call(&sent).await;
        let first_result = first.as_ref().ok().map(|r| r.body()["result"].clone());
        let r = match (&first, &second) {
            (Ok(a), Ok(b)) if a.status == 200 && b.status == 200 => {
                let (a, b) = (&a.body()["result"], &b.body()["result"]);
                if a == b {
                    Ok(())
                } else {
                    Err(format!(
                        "first {}, then {}",
                        crate::report::excerpt(a),
                        crate::report::excerpt(b)
                    ))
                }
            }
            (Ok(a), Ok(b)) => Err(format!("got {}, then {}", a.status, b.status)),
            (Err(why), _) | (_, Err(why)) => Err(why.clone()),
        };
        self.verdict(Should, "§3.25", REPEAT, r);
        // The same id with another request: a new run or a 400, never the other's answer.
        let schema = tools
            .iter()
            .find(|t| id_of(t) == tool.id)
            .and_then(|t| t.get("input_schema"));
        let other = match (&self.options.input, schema) {
            (None, Some(schema)) => input::another_valid(schema, &tool.input),
            _ => None,
        };
        let (Some(other), Some(first)) = (other, first_result) else {
            return self.skip(
                Should,
                "§3.25",
                REUSED,
                "no second input could be made for the tool",
            );
        };
        let sent = json!({"request": {"tool_id": tool.id, "call_id": call_id, "input": other}});
        let r = match self.call(&sent).await {
            Ok(reply) if reply.status == 200 && reply.body()["result"] == first => {
                if first.get("duration").is_some() {
                    Err(format!("answered {}", crate::report::excerpt(&first)))
                } else {
                    return self.skip(
                        Should,
                        "§3.25",
                        REUSED,
                        "the answers carry no `duration`, so a replay looks like a new run",
                    );
                }
            }
            Ok(reply) if matches!(reply.status, 200 | 400 | 409 | 422) => Ok(()),
            Ok(reply) => Err(format!("got {}", reply.said())),
            Err(why) => Err(why),
        };
        self.verdict(Should, "§3.25", REUSED, r);
    }

    async fn limits(&mut self, tool: Option<&Callable>) {
        const WHAT: &str =
            "input nested 5000 levels deep is refused with a 4xx, and the server keeps serving";
        let id = tool.map_or("OxpCheck.Probe@1.0.0", |t| t.id.as_str());
        let depth = 5000;
        let body = format!(
            "{{\"request\":{{\"tool_id\":{},\"input\":{{\"deep\":{}{}}}}}}}",
            json!(id),
            "[".repeat(depth),
            "]".repeat(depth)
        );
        let request = self
            .http
            .request(Method::POST, "/tools/call", As::Authenticated)
            .header("content-type", "application/json")
            .body(body);
        let mut r = self
            .send(request)
            .await
            .and_then(|reply| match reply.status {
                400..=499 => Ok(()),
                _ => Err(format!("got {}", reply.said())),
            });
        let health = self.http.request(Method::GET, "/health", As::Anonymous);
        if let Err(why) = self
            .send(health)
            .await
            .and_then(|reply| match reply.status {
                200 => Ok(()),
                _ => Err(format!("GET /health then got {}", reply.said())),
            })
        {
            r = Err(why);
        }
        self.verdict(Should, "§3.15", WHAT, r);
    }

    async fn requirements(&mut self, tools: &[Value]) {
        let with = |pick: fn(&Requirements) -> bool| {
            tools.iter().find(|t| pick(&requirements_of(t))).cloned()
        };
        // R.54: each requirement left out in turn, the others given.
        const SECRET: &str = "a call missing a required secret is 400 with a ServerErrorResponse";
        match with(|r| !r.0.is_empty()) {
            Some(tool) => {
                let reply = self.call_missing(&tool, Missing::Secrets).await;
                let r = reply.and_then(|reply| answered(&reply, 400, Shape::ServerError));
                self.verdict(
                    Must,
                    "§1 R.54",
                    &format!("{SECRET} (`{}`)", id_of(&tool)),
                    r,
                );
            }
            None => self.skip(Must, "§1 R.54", SECRET, "no listed tool requires a secret"),
        }
        const TOKEN: &str =
            "a call missing a required authorization token is 400 with a ServerErrorResponse";
        const CHALLENGE: &str =
            "its challenge names the provider (`missing_requirements.authorization[].id`)";
        const CHECK_URL: &str =
            "a challenge's `check_url` answers 200 `{\"status\": pending|completed|failed}`";
        match with(|r| !r.1.is_empty()) {
            Some(tool) => {
                let reply = self.call_missing(&tool, Missing::Authorization).await;
                let r = reply
                    .as_ref()
                    .map_err(Clone::clone)
                    .and_then(|reply| answered(reply, 400, Shape::ServerError));
                self.verdict(Must, "§1 R.52", &format!("{TOKEN} (`{}`)", id_of(&tool)), r);
                let providers = requirements_of(&tool).1;
                let challenges: Vec<Value> = reply
                    .as_ref()
                    .ok()
                    .and_then(|reply| {
                        reply.body()["missing_requirements"]["authorization"]
                            .as_array()
                            .cloned()
                    })
                    .unwrap_or_default();
                if challenges.is_empty() {
                    let why = "the 400 carries no challenge (§3.23 allows a message only)";
                    self.skip(Should, "§1 R.55", CHALLENGE, why);
                    self.skip(Must, "§1 R.56", CHECK_URL, why);
                } else {
                    let r = match challenges
                        .iter()
                        .any(|c| providers.iter().any(|p| c["id"].as_str() == Some(p)))
                    {
                        true => Ok(()),
                        false => Err(format!(
                            "the tool requires {providers:?}; challenges {challenges:?}"
                        )),
                    };
                    self.verdict(Should, "§1 R.55", CHALLENGE, r);
                    match challenges.iter().find_map(|c| c["check_url"].as_str()) {
                        Some(url) => {
                            let request = self.http.request_url(url);
                            let r = self.send(request).await.and_then(|reply| {
                                let status = reply.body()["status"].as_str();
                                match (reply.status, status) {
                                    (200, Some("pending" | "completed" | "failed")) => Ok(()),
                                    _ => Err(format!("GET {url}: got {}", reply.said())),
                                }
                            });
                            self.verdict(Must, "§1 R.56", CHECK_URL, r);
                        }
                        None => {
                            self.skip(Must, "§1 R.56", CHECK_URL, "no challenge has a `check_url`")
                        }
                    }
                }
            }
            None => {
                let why = "no listed tool requires authorization";
                self.skip(Must, "§1 R.52", TOKEN, why);
                self.skip(Should, "§1 R.55", CHALLENGE, why);
                self.skip(Must, "§1 R.56", CHECK_URL, why);
            }
        }
        const USER: &str =
            "a call missing a required `user_id` is 400 with `missing_requirements.user_id: true`";
        match with(|r| r.2) {
            Some(_) if self.authenticated => self.skip(
                Should,
                "§3.22",
                USER,
                "the server authenticates callers, so the user may be the credential's subject",
            ),
            Some(tool) => {
                let reply = self.call_missing(&tool, Missing::UserId).await;
                let r = reply.and_then(|reply| {
                    answered(&reply, 400, Shape::ServerError)?;
                    match reply.body()["missing_requirements"]["user_id"] == json!(true) {
                        true => Ok(()),
                        false => Err(format!("got {}", reply.said())),
                    }
                });
                self.verdict(Should, "§3.22", &format!("{USER} (`{}`)", id_of(&tool)), r);
            }
            None => self.skip(Should, "§3.22", USER, "no listed tool requires a user id"),
        }
    }

    /// A call of `tool` with every requirement met but `missing` (placeholder values: the tool
    /// must not run, since one requirement is missing).
    async fn call_missing(&mut self, tool: &Value, missing: Missing) -> Result<Reply, String> {
        let (secrets, providers, user) = requirements_of(tool);
        let mut context = json!({});
        if missing != Missing::Secrets && !secrets.is_empty() {
            context["secrets"] = secrets
                .iter()
                .map(|id| json!({"id": id, "value": "oxp-check-placeholder"}))
                .collect();
        }
        if missing != Missing::Authorization && !providers.is_empty() {
            context["authorization"] = providers
                .iter()
                .map(|id| json!({"id": id, "token": "oxp-check-placeholder"}))
                .collect();
        }
        // Under authentication the user may be the credential's subject, and a user named
        // beside it refused (oxp does so): the user is left to the credential.
        if missing != Missing::UserId && user && !self.authenticated {
            context["user_id"] = json!("oxp-check-user");
        }
        let input = tool
            .get("input_schema")
            .and_then(input::valid)
            .unwrap_or(json!({}));
        let sent = json!({"request": {"tool_id": id_of(tool), "input": input, "context": context}});
        self.call(&sent).await
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Missing {
    Secrets,
    Authorization,
    UserId,
}

enum Body {
    Json(Value),
    Raw(&'static str, &'static str),
    Versioned(Value, &'static str),
}
