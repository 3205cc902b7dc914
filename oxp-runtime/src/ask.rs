//! Asking mid-call: a tool stops to ask its caller's user (a form, a confirmation, a URL to
//! visit) or its client (the client's model, the client's roots), and the call is repeated
//! with the answers.
//!
//! **The rule: each round runs the tool again from the top**, with the answers so far. An ask
//! whose answer the round carries returns it at once; one whose answer it lacks returns
//! [`AskError::Pending`], which the tool passes on with `?`, and the round ends there, asking
//! for everything asked so far. So work before the last ask runs once per round and must be
//! safe to repeat; side effects go after it.
//!
//! ```
//! use oxp_runtime::{tool, ToolContext, ToolError};
//!
//! /// Delete a directory.
//! #[tool(toolkit = "Files", version = "1.0.0", destructive)]
//! fn delete(ctx: &ToolContext, path: String) -> Result<String, ToolError> {
//!     ctx.confirm("delete", &format!("Delete {path}?"))?;
//!     // Only a confirmed round gets here: the side effect goes after the last ask.
//!     Ok(format!("deleted {path}"))
//! }
//!
//! // Called directly, no one can answer: the ask fails, and nothing is deleted.
//! let ctx = ToolContext::new("call-1");
//! assert!(delete(&ctx, "/srv/data".into()).is_err());
//! ```
//!
//! Over MCP 2026-07-28 a round that asks is answered `resultType: "input_required"` with the
//! asks as `inputRequests` and the answers so far sealed into `requestState` (bound to the tool,
//! its input, the caller and the user; it expires); the client repeats the call with
//! `inputResponses` and that state. A client that did not declare the capability an ask needs
//! (elicitation, sampling, roots) makes the ask fail at once with [`AskError::Unsupported`]: a
//! tool may go on without the answer, or pass the error on, which answers the call with MCP's
//! "missing required client capability" error. Earlier MCP revisions have no way to answer, and
//! OXP 1.0 none either: there a pending ask ends the call with an error naming what the tool
//! needed.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::{Arc, Mutex};

use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use crate::ToolError;

/// What a client must support for an ask.
///
/// ```
/// use oxp_runtime::ask::{AskError, Capability};
/// // A client without sampling: the ask fails at once, naming what it lacks.
/// let missing = AskError::Unsupported(Capability::Sampling);
/// assert_eq!(missing.to_string(), "the client cannot answer asks that need sampling");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Capability {
    /// Asking the user (`elicitation/create`): forms, confirmations, URLs.
    Elicitation,
    /// Asking the client's model (`sampling/createMessage`).
    Sampling,
    /// Listing the client's roots (`roots/list`).
    Roots,
}

impl Capability {
    /// The capability's name in MCP's `ClientCapabilities`.
    ///
    /// ```
    /// assert_eq!(oxp_runtime::ask::Capability::Sampling.name(), "sampling");
    /// ```
    pub fn name(self) -> &'static str {
        match self {
            Capability::Elicitation => "elicitation",
            Capability::Sampling => "sampling",
            Capability::Roots => "roots",
        }
    }
}

/// Why an ask did not return an answer.
///
/// ```
/// use oxp_runtime::{ask::AskError, ToolContext};
/// let ctx = ToolContext::new("c1"); // no client behind it
/// match ctx.confirm("go", "Go ahead?") {
///     Err(AskError::Pending) => unreachable!("not answered yet: pass it on with `?`"),
///     Err(AskError::Declined | AskError::Cancelled) => unreachable!("the user said no"),
///     Err(AskError::Unsupported(_)) => {} // no one to ask: go on without, or pass it on
///     Err(other) => panic!("{other}"),
///     Ok(()) => {}
/// }
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum AskError {
    /// Not answered yet: return it (`?`), and the call asks.
    Pending,
    /// The user declined.
    Declined,
    /// The user dismissed the question without answering.
    Cancelled,
    /// The caller cannot answer this kind of ask: its client did not declare the capability,
    /// or its protocol has no way to answer.
    Unsupported(Capability),
    /// The ask itself is not one a client can be sent: a form whose schema is not a flat
    /// object of strings, numbers, integers, booleans and enums (MCP's elicitation schemas).
    Unaskable(String),
}

impl fmt::Display for AskError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AskError::Pending => f.write_str("waiting for an answer"),
            AskError::Declined => f.write_str("the user declined"),
            AskError::Cancelled => f.write_str("the user dismissed the question"),
            AskError::Unsupported(capability) => {
                write!(
                    f,
                    "the client cannot answer asks that need {}",
                    capability.name()
                )
            }
            AskError::Unaskable(why) => write!(f, "the question cannot be asked: {why}"),
        }
    }
}

impl From<AskError> for ToolError {
    fn from(error: AskError) -> Self {
        match error {
            // Retryable: the round is repeated with the answers, and a `call_id`'s store
            // never keeps a round still asking.
            AskError::Pending => {
                ToolError::new("The tool is waiting for an answer.").can_retry(true)
            }
            AskError::Declined => ToolError::new("The user declined, so the tool did not go on."),
            AskError::Cancelled => {
                ToolError::new("The user dismissed the question, so the tool did not go on.")
            }
            AskError::Unsupported(capability) => ToolError::new(format!(
                "The tool needs to ask {} mid-call, and this caller cannot answer: call it \
                 over MCP 2026-07-28 from a client that declares `{}`.",
                match capability {
                    Capability::Elicitation => "its user a question",
                    Capability::Sampling => "the client's model",
                    Capability::Roots => "for the client's roots",
                },
                capability.name()
            )),
            AskError::Unaskable(why) => ToolError::new("The tool could not ask its question.")
                .developer_message(format!("an unaskable question: {why}")),
        }
    }
}

/// One of the client's roots.
///
/// ```
/// let root: oxp_runtime::ask::Root =
///     serde_json::from_value(serde_json::json!({"uri": "file:///home/ada/project"})).unwrap();
/// assert_eq!((root.uri.as_str(), root.name), ("file:///home/ada/project", None));
/// ```
#[derive(Clone, Debug, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
pub struct Root {
    /// Its URI (`file:///home/ada/project`).
    pub uri: String,
    /// Its name, if the client gave one.
    #[serde(default)]
    pub name: Option<String>,
}

/// One round of a call's asks, shared by the front that carries the call and the tool's
/// context: the answers the round came with, what the client can answer, and what the tool
/// asked. A front makes one per round ([`new`](Self::new)) and reads it after the run.
///
/// ```
/// use oxp_runtime::ask::{Capability, Round};
/// use oxp_runtime::signals::CallSignals;
/// use oxp_runtime::ToolContext;
///
/// let round = Round::new(Default::default(), |_| true);
/// let ctx = ToolContext::new("c1").with_signals(CallSignals::new().asking(&round));
/// assert!(ctx.confirm("go", "Go ahead?").is_err());
/// assert!(round.asked().contains_key("go"));
/// ```
#[derive(Clone, Default)]
pub struct Round(Arc<Mutex<RoundState>>);

#[derive(Default)]
struct RoundState {
    answers: BTreeMap<String, Value>,
    supported: Option<Vec<Capability>>,
    asked: BTreeMap<String, Value>,
    used: BTreeMap<String, Value>,
    unsupported: Option<Capability>,
    /// What became of each ask, for the metrics.
    outcomes: Vec<(Capability, AskOutcome)>,
}

/// What became of one ask in a round: the metrics' `outcome` label.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum AskOutcome {
    /// Sent to the client, not answered yet.
    Asked,
    /// Answered (accepted, for the user's asks).
    Answered,
    /// Declined or dismissed by the user.
    Declined,
    /// The client cannot answer it.
    Unsupported,
}

impl AskOutcome {
    pub(crate) const ALL: [AskOutcome; 4] = [
        AskOutcome::Asked,
        AskOutcome::Answered,
        AskOutcome::Declined,
        AskOutcome::Unsupported,
    ];

    pub(crate) fn as_str(self) -> &'static str {
        match self {
            AskOutcome::Asked => "asked",
            AskOutcome::Answered => "answered",
            AskOutcome::Declined => "declined",
            AskOutcome::Unsupported => "unsupported",
        }
    }
}

impl Capability {
    pub(crate) const ALL: [Capability; 3] = [
        Capability::Elicitation,
        Capability::Sampling,
        Capability::Roots,
    ];
}

impl fmt::Debug for Round {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = self.lock();
        f.debug_struct("Round")
            .field("answers", &state.answers.keys().collect::<Vec<_>>())
            .field("asked", &state.asked.keys().collect::<Vec<_>>())
            .finish()
    }
}

impl Round {
    /// A round that came with `answers` (by ask key, as the client sent them), whose client
    /// can answer the asks `supports` says it can.
    ///
    /// ```
    /// use oxp_runtime::ask::{AskError, Capability, Round};
    /// use oxp_runtime::{signals::CallSignals, ToolContext};
    ///
    /// let yes = [("go".to_owned(), serde_json::json!({"action": "accept"}))].into();
    /// let round = Round::new(yes, |capability| capability == Capability::Elicitation);
    /// let ctx = ToolContext::new("c1").with_signals(CallSignals::new().asking(&round));
    /// assert_eq!(ctx.confirm("go", "Go ahead?"), Ok(()));
    /// assert_eq!(ctx.roots("roots"), Err(AskError::Unsupported(Capability::Roots)));
    /// ```
    pub fn new(answers: BTreeMap<String, Value>, supports: impl Fn(Capability) -> bool) -> Self {
        let supported = Capability::ALL
            .into_iter()
            .filter(|c| supports(*c))
            .collect();
        Round(Arc::new(Mutex::new(RoundState {
            answers,
            supported: Some(supported),
            ..RoundState::default()
        })))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, RoundState> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// What the tool asked for and did not get, by key: MCP's `inputRequests`
    /// (`{"method": …, "params": …}` each).
    ///
    /// ```
    /// use oxp_runtime::{ask::Round, signals::CallSignals, ToolContext};
    /// let round = Round::new(Default::default(), |_| true);
    /// let ctx = ToolContext::new("c1").with_signals(CallSignals::new().asking(&round));
    /// let _ = ctx.sample("summary", "Summarise this", 100);
    /// assert_eq!(round.asked()["summary"]["method"], "sampling/createMessage");
    /// ```
    pub fn asked(&self) -> BTreeMap<String, Value> {
        self.lock().asked.clone()
    }

    /// The answers the tool asked for and got, by key: what the next round must carry again.
    ///
    /// ```
    /// use oxp_runtime::{ask::Round, signals::CallSignals, ToolContext};
    /// let answers = [
    ///     ("go".to_owned(), serde_json::json!({"action": "accept"})),
    ///     ("unasked".to_owned(), serde_json::json!({"action": "accept"})),
    /// ].into();
    /// let round = Round::new(answers, |_| true);
    /// let ctx = ToolContext::new("c1").with_signals(CallSignals::new().asking(&round));
    /// ctx.confirm("go", "Go ahead?").unwrap();
    /// assert_eq!(round.used().keys().collect::<Vec<_>>(), ["go"], "what was not asked is dropped");
    /// ```
    pub fn used(&self) -> BTreeMap<String, Value> {
        self.lock().used.clone()
    }

    /// The capability an ask needed that the client lacks, if one did.
    ///
    /// ```
    /// use oxp_runtime::{ask::{Capability, Round}, signals::CallSignals, ToolContext};
    /// let round = Round::new(Default::default(), |_| false);
    /// let ctx = ToolContext::new("c1").with_signals(CallSignals::new().asking(&round));
    /// let _ = ctx.roots("roots");
    /// assert_eq!(round.unsupported(), Some(Capability::Roots));
    /// ```
    pub fn unsupported(&self) -> Option<Capability> {
        self.lock().unsupported
    }

    /// How many answers the round came with: 0 on a call's first round.
    pub(crate) fn answers(&self) -> usize {
        self.lock().answers.len()
    }

    /// What became of each ask so far.
    pub(crate) fn outcomes(&self) -> Vec<(Capability, AskOutcome)> {
        self.lock().outcomes.clone()
    }

    /// The answer to `key`, read by `read` (`None`: the answer does not fit, ask again); or
    /// the ask recorded as pending.
    fn ask<T>(
        &self,
        key: &str,
        capability: Capability,
        request: impl FnOnce() -> Value,
        read: impl FnOnce(&Value) -> Option<Result<T, AskError>>,
    ) -> Result<T, AskError> {
        let mut state = self.lock();
        let supported = state
            .supported
            .as_ref()
            .is_some_and(|s| s.contains(&capability));
        if !supported {
            state.unsupported = Some(capability);
            state.outcomes.push((capability, AskOutcome::Unsupported));
            return Err(AskError::Unsupported(capability));
        }
        if let Some(answer) = state.answers.get(key).cloned() {
            if let Some(read) = read(&answer) {
                state.used.insert(key.to_owned(), answer);
                let outcome = match read {
                    Err(AskError::Declined | AskError::Cancelled) => AskOutcome::Declined,
                    _ => AskOutcome::Answered,
                };
                state.outcomes.push((capability, outcome));
                return read;
            }
        }
        state.asked.insert(key.to_owned(), request());
        state.outcomes.push((capability, AskOutcome::Asked));
        Err(AskError::Pending)
    }
}

/// An elicitation's answer: `accept` with its content, or the user's no.
fn elicited(answer: &Value) -> Option<Result<Value, AskError>> {
    match answer.get("action")?.as_str()? {
        "accept" => Some(Ok(answer.get("content").cloned().unwrap_or(json!({})))),
        "decline" => Some(Err(AskError::Declined)),
        "cancel" => Some(Err(AskError::Cancelled)),
        _ => None,
    }
}

/// Whether `schema` is one MCP lets a form ask for: an object whose properties are strings,
/// numbers, integers or booleans (enums of strings among them), nothing nested.
fn form_problem(schema: &Value) -> Option<String> {
    if schema.get("type").and_then(Value::as_str) != Some("object") {
        return Some("a form is an object with named fields".into());
    }
    let properties = schema.get("properties").and_then(Value::as_object);
    for (name, property) in properties.into_iter().flatten() {
        let kind = property.get("type").and_then(Value::as_str);
        let enumerated = property.get("enum").is_some() || property.get("oneOf").is_some();
        if !matches!(kind, Some("string" | "number" | "integer" | "boolean")) && !enumerated {
            return Some(format!(
                "the field `{name}` is not a string, number, integer, boolean or enum"
            ));
        }
    }
    None
}

impl crate::ToolContext {
    fn round(&self) -> Round {
        // A context without a round (OXP 1.0, which has no place for answers; a provider's
        // dispatch; a direct call) has no one to ask: every ask is unsupported.
        self.signals()
            .round()
            .unwrap_or_else(|| Round::new(BTreeMap::new(), |_| false))
    }

    /// Asks the user to fill in a form shaped like `T` (MCP's form elicitation), under `key`
    /// (unique within the tool). `T`'s schema must be a flat object of strings, numbers,
    /// integers, booleans and enums.
    ///
    /// ```
    /// use oxp_runtime::{__private::schemars, tool, ToolContext, ToolError};
    ///
    /// #[derive(serde::Deserialize, schemars::JsonSchema)]
    /// # #[schemars(crate = "oxp_runtime::__private::schemars")]
    /// struct Flight { number: String }
    ///
    /// /// Book one of the morning's flights.
    /// #[tool(toolkit = "Travel", version = "1.0.0")]
    /// fn book(ctx: &ToolContext) -> Result<String, ToolError> {
    ///     let flight: Flight = ctx.ask("flight", "Which flight: LH400, LH402 or UA901?")?;
    ///     Ok(format!("booked {}", flight.number))
    /// }
    /// # assert!(book(&ToolContext::new("c1")).is_err());
    /// ```
    pub fn ask<T: DeserializeOwned + JsonSchema>(
        &self,
        key: &str,
        message: &str,
    ) -> Result<T, AskError> {
        let schema = crate::schema::finalize_input(crate::schema::input_schema::<T>())
            .map_err(|e| AskError::Unaskable(e.to_string()))?;
        if let Some(problem) = form_problem(&schema) {
            return Err(AskError::Unaskable(problem));
        }
        // MCP's `requestedSchema` is a plain object of fields: no closing keyword.
        let mut schema = schema;
        if let Some(object) = schema.as_object_mut() {
            object.remove("additionalProperties");
        }
        self.round().ask(
            key,
            Capability::Elicitation,
            || {
                json!({"method": "elicitation/create",
                    "params": {"mode": "form", "message": message, "requestedSchema": schema}})
            },
            |answer| {
                let content = match elicited(answer)? {
                    Ok(content) => content,
                    Err(no) => return Some(Err(no)),
                };
                serde_json::from_value(content).ok().map(Ok)
            },
        )
    }

    /// Asks the user to confirm (yes or no), under `key`; `Ok` when confirmed,
    /// [`AskError::Declined`] (or `Cancelled`) when not.
    ///
    /// ```
    /// use oxp_runtime::{tool, ToolContext, ToolError};
    ///
    /// /// Send the invoice.
    /// #[tool(toolkit = "Billing", version = "1.0.0")]
    /// fn send(ctx: &ToolContext, to: String) -> Result<String, ToolError> {
    ///     ctx.confirm("send", &format!("Send the invoice to {to}?"))?;
    ///     Ok("sent".into())
    /// }
    /// # assert!(send(&ToolContext::new("c1"), "ada@example.com".into()).is_err());
    /// ```
    pub fn confirm(&self, key: &str, message: &str) -> Result<(), AskError> {
        self.round().ask(
            key,
            Capability::Elicitation,
            || {
                json!({"method": "elicitation/create", "params": {"mode": "form",
                    "message": message,
                    "requestedSchema": {"type": "object", "properties": {}}}})
            },
            |answer| Some(elicited(answer)?.map(drop)),
        )
    }

    /// Asks the user to visit `url` (MCP's URL elicitation: signing in somewhere, paying),
    /// under `key`; `Ok` once the user says they did.
    ///
    /// ```
    /// use oxp_runtime::{tool, ToolContext, ToolError};
    ///
    /// /// Connect the user's calendar.
    /// #[tool(toolkit = "Calendar", version = "1.0.0")]
    /// fn connect(ctx: &ToolContext) -> Result<&'static str, ToolError> {
    ///     ctx.ask_url("signin", "Sign in to Google to continue", "https://accounts.example.com/auth")?;
    ///     Ok("connected")
    /// }
    /// # assert!(connect(&ToolContext::new("c1")).is_err());
    /// ```
    pub fn ask_url(&self, key: &str, message: &str, url: &str) -> Result<(), AskError> {
        self.round().ask(
            key,
            Capability::Elicitation,
            || {
                json!({"method": "elicitation/create", "params": {"mode": "url",
                    "message": message, "url": url, "elicitationId": key}})
            },
            |answer| Some(elicited(answer)?.map(drop)),
        )
    }

    /// Asks the client's model `prompt` (MCP's sampling), under `key`, for at most
    /// `max_tokens`; its text answer.
    ///
    /// ```
    /// use oxp_runtime::{tool, ToolContext, ToolError};
    ///
    /// /// Summarise a text with the caller's own model.
    /// #[tool(toolkit = "Text", version = "1.0.0")]
    /// fn summarise(ctx: &ToolContext, text: String) -> Result<String, ToolError> {
    ///     Ok(ctx.sample("summary", &format!("Summarise: {text}"), 200)?)
    /// }
    /// # assert!(summarise(&ToolContext::new("c1"), "…".into()).is_err());
    /// ```
    pub fn sample(&self, key: &str, prompt: &str, max_tokens: u32) -> Result<String, AskError> {
        self.round().ask(
            key,
            Capability::Sampling,
            || {
                json!({"method": "sampling/createMessage", "params": {
                    "messages": [{"role": "user", "content": {"type": "text", "text": prompt}}],
                    "maxTokens": max_tokens}})
            },
            |answer| {
                let content = answer.get("content")?;
                let blocks = match content {
                    Value::Array(blocks) => blocks.iter().collect(),
                    block => vec![block],
                };
                let text: Vec<&str> = blocks
                    .into_iter()
                    .filter(|b| b.get("type").and_then(Value::as_str) == Some("text"))
                    .filter_map(|b| b.get("text").and_then(Value::as_str))
                    .collect();
                (!text.is_empty()).then(|| Ok(text.concat()))
            },
        )
    }

    /// Asks the client for its roots (MCP's `roots/list`), under `key`.
    ///
    /// ```
    /// use oxp_runtime::{tool, ToolContext, ToolError};
    ///
    /// /// Count the client's roots.
    /// #[tool(toolkit = "Files", version = "1.0.0")]
    /// fn count_roots(ctx: &ToolContext) -> Result<usize, ToolError> {
    ///     Ok(ctx.roots("roots")?.len())
    /// }
    /// # assert!(count_roots(&ToolContext::new("c1")).is_err());
    /// ```
    pub fn roots(&self, key: &str) -> Result<Vec<Root>, AskError> {
        self.round().ask(
            key,
            Capability::Roots,
            || json!({"method": "roots/list", "params": {}}),
            |answer| {
                let roots = answer.get("roots")?.clone();
                serde_json::from_value(roots).ok().map(Ok)
            },
        )
    }
}

/// The ask key of a tool's `confirm = "…"`.
pub(crate) const CONFIRM_KEY: &str = "confirm";

/// The question of a `confirm = "…"`, its `{param}`s replaced by the call's values (a string as
/// it is, any other value as JSON).
pub(crate) fn confirmation(template: &str, input: &Value) -> String {
    let mut out = String::with_capacity(template.len());
    let mut rest = template;
    while let Some(at) = rest.find(['{', '}']) {
        out.push_str(&rest[..at]);
        let (brace, after) = (&rest[at..=at], &rest[at + 1..]);
        if after.starts_with(brace) {
            out.push_str(brace);
            rest = &after[1..];
            continue;
        }
        let Some(end) = after.find('}').filter(|_| brace == "{") else {
            out.push_str(brace);
            rest = after;
            continue;
        };
        match input.get(&after[..end]) {
            Some(Value::String(text)) => out.push_str(text),
            Some(other) => out.push_str(&other.to_string()),
            None => {}
        }
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ToolContext;
    use crate::signals::CallSignals;

    fn context(round: &Round) -> ToolContext {
        ToolContext::new("c1").with_signals(CallSignals::new().asking(round))
    }

    #[test]
    fn an_answered_ask_returns_its_answer_and_an_unanswered_one_pends() {
        let answers = BTreeMap::from([
            ("go".to_owned(), json!({"action": "accept"})),
            ("no".to_owned(), json!({"action": "decline"})),
            (
                "model".to_owned(),
                json!({"role": "assistant",
                "content": {"type": "text", "text": "Paris"}, "model": "m"}),
            ),
            (
                "roots".to_owned(),
                json!({"roots": [{"uri": "file:///a", "name": "a"}]}),
            ),
            ("bad".to_owned(), json!(12345)),
        ]);
        let round = Round::new(answers, |_| true);
        let ctx = context(&round);
        assert_eq!(ctx.confirm("go", "Go?"), Ok(()));
        assert_eq!(ctx.confirm("no", "No?"), Err(AskError::Declined));
        assert_eq!(ctx.sample("model", "Capital?", 10).unwrap(), "Paris");
        assert_eq!(ctx.roots("roots").unwrap()[0].uri, "file:///a");
        assert_eq!(ctx.confirm("bad", "Malformed?"), Err(AskError::Pending));
        assert_eq!(ctx.confirm("later", "Later?"), Err(AskError::Pending));
        let asked = round.asked();
        assert_eq!(asked.keys().collect::<Vec<_>>(), ["bad", "later"]);
        assert_eq!(asked["later"]["method"], "elicitation/create");
        assert_eq!(round.used().len(), 4, "the answers the tool read");
    }

    #[test]
    fn an_ask_the_client_cannot_answer_fails_at_once() {
        let round = Round::new(BTreeMap::new(), |c| c == Capability::Sampling);
        let ctx = context(&round);
        assert_eq!(
            ctx.confirm("go", "Go?"),
            Err(AskError::Unsupported(Capability::Elicitation))
        );
        assert_eq!(ctx.sample("s", "Hi", 5), Err(AskError::Pending));
        assert_eq!(round.unsupported(), Some(Capability::Elicitation));
        assert_eq!(round.asked().len(), 1, "only the sampling ask is sent");
    }

    #[test]
    fn confirmations_name_the_call_s_values() {
        let input = json!({"path": "/srv/data", "force": true});
        let template = "Delete {path} (force: {force})? {{sure}}";
        assert_eq!(
            crate::rules::placeholders(template).unwrap(),
            ["path", "force"]
        );
        assert_eq!(
            confirmation(template, &input),
            "Delete /srv/data (force: true)? {sure}"
        );
        assert!(crate::rules::placeholders("Delete {path").is_err());
        assert!(crate::rules::placeholders("Delete path}").is_err());
    }

    #[test]
    fn a_form_is_flat() {
        #[derive(serde::Deserialize, schemars::JsonSchema)]
        #[allow(dead_code)]
        struct Nested {
            inner: Vec<String>,
        }
        let ctx = context(&Round::new(BTreeMap::new(), |_| true));
        assert!(matches!(
            ctx.ask::<Nested>("n", "Nested?"),
            Err(AskError::Unaskable(_))
        ));
    }
}
