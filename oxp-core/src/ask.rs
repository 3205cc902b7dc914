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
//! asks as `inputRequests`, and what the call has established sealed into `requestState`
//! (bound to the tool, its input, the caller and the user): the questions asked, each by its
//! key and a digest of the question as sent, and the answers so far, each bound to the
//! question it answered. The client repeats the call with `inputResponses` and that state.
//!
//! What holds, whatever the client sends:
//! - **An answer counts only for a question the server asked**: a response under a key the
//!   presented state does not say was asked (or with no state at all) is ignored, so no
//!   `confirm` can be skipped by answering it in advance.
//! - **An answer is bound to its question, not its key**: a yes to "Delete a.txt?" does not
//!   answer "Delete b.txt?" asked later under the same key (that one is asked anew), and a
//!   tool's `confirm = "…"` asks under a key reserved for it (`oxp.confirm`; tools' own keys
//!   may not begin with `oxp.`). Asking two different questions under one key in the same
//!   round is [`AskError::Unaskable`].
//! - **A call completes once**: every round after the first runs under a `call_id` of the
//!   call's own, so the idempotency store (shared by replicas with `OXP_REDIS_URL`) keeps the
//!   call's end, and a replayed round gets that first answer rather than running the tool
//!   again. A state's life counts from the first answer and no later round extends it.
//! - **Answers are checked**: a form's content against the schema it was asked with (an
//!   `accept` without content fills in nothing), a model's answer and a roots list for their
//!   shape; one that does not fit ends the call with [`AskError::Invalid`].
//!
//! A client that did not declare the capability an ask needs (elicitation, sampling, roots)
//! makes the ask fail at once with [`AskError::Unsupported`]: a tool may go on without the
//! answer, or pass the error on, which answers the call with MCP's "missing required client
//! capability" error, or what the tool's [`CannotAsk`] chose. Before 2026-07-28, over stdio,
//! the server asks by requests of its own on the call's connection and the tool runs again with
//! the answers within the same call; over HTTP those revisions have no way to answer, and OXP
//! 1.0 none either: there a pending ask ends the call with an error naming what the tool
//! needed.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::{Arc, Mutex};

use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use crate::error::ToolError;
use crate::seal::{Answer, Ledger, question_digest};

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
    /// Asking the user a question (`elicitation/create` in form mode): forms, confirmations.
    Elicitation,
    /// Asking the user to visit a URL (`elicitation/create` in URL mode), which a client
    /// declares apart from forms (`"elicitation": {"url": {}}`).
    UrlElicitation,
    /// Asking the client's model (`sampling/createMessage`).
    Sampling,
    /// Listing the client's roots (`roots/list`).
    Roots,
}

impl Capability {
    /// The capability's name in MCP's `ClientCapabilities`, dotted for URL elicitation
    /// (`elicitation.url`).
    ///
    /// ```
    /// assert_eq!(oxp_runtime::ask::Capability::Sampling.name(), "sampling");
    /// ```
    pub fn name(self) -> &'static str {
        match self {
            Capability::Elicitation => "elicitation",
            Capability::UrlElicitation => "elicitation.url",
            Capability::Sampling => "sampling",
            Capability::Roots => "roots",
        }
    }

    /// The capability [`name`](Self::name) names.
    ///
    /// ```
    /// use oxp_runtime::ask::Capability;
    /// assert_eq!(Capability::from_name("elicitation.url"), Some(Capability::UrlElicitation));
    /// ```
    pub fn from_name(name: &str) -> Option<Capability> {
        Capability::ALL.into_iter().find(|c| c.name() == name)
    }

    /// What a client declares in MCP's `ClientCapabilities` to have it.
    ///
    /// ```
    /// use oxp_runtime::ask::Capability;
    /// assert_eq!(Capability::UrlElicitation.declared(), serde_json::json!({"elicitation": {"url": {}}}));
    /// ```
    pub fn declared(self) -> Value {
        match self {
            Capability::Elicitation => json!({"elicitation": {"form": {}}}),
            Capability::UrlElicitation => json!({"elicitation": {"url": {}}}),
            Capability::Sampling => json!({"sampling": {}}),
            Capability::Roots => json!({"roots": {}}),
        }
    }
}

/// What a tool that asks does for a caller whose client declared no way to answer (over MCP:
/// no `elicitation` capability, or a revision before 2026-07-28): `#[tool(cannot_ask = "…")]`
/// per tool, [`McpServer::cannot_ask`](https://docs.rs/oxp-runtime/latest/oxp_runtime/mcp/struct.McpServer.html#method.cannot_ask) (`OXP_CANNOT_ASK`)
/// for the rest.
///
/// ```
/// use oxp_runtime::ask::CannotAsk;
/// assert_eq!("hide".parse::<CannotAsk>(), Ok(CannotAsk::Hide));
/// assert!("skip".parse::<CannotAsk>().is_err());
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum CannotAsk {
    /// The call fails with MCP's "missing required client capability" (-32021), in words a
    /// model can relay to its user.
    #[default]
    Refuse,
    /// `tools/list` leaves the tool out for such a caller, and a call of it is refused.
    Hide,
    /// For a `confirm = "…"` question only: the first call answers with the question and a
    /// sealed, single-use confirmation for the model to relay to its user; the call made again
    /// with it (the optional `oxp_confirmation` argument) runs the tool once. Weaker than a
    /// human's answer through the client: the model says what the user said.
    Relay,
}

impl std::str::FromStr for CannotAsk {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        match text {
            "refuse" => Ok(CannotAsk::Refuse),
            "hide" => Ok(CannotAsk::Hide),
            "relay" => Ok(CannotAsk::Relay),
            other => Err(format!(
                "`{other}` is not one of {}",
                crate::rules::CANNOT_ASK.join(", ")
            )),
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
    /// object of strings, numbers, integers, booleans and choices (MCP's elicitation schemas),
    /// a key the framework reserves (`oxp.…`), or a key already asking another question in
    /// the same round.
    Unaskable(String),
    /// The answer does not fit its question: a form's content that fails the schema it was
    /// asked with, an `accept` without content, a result of the wrong shape. The call ends.
    Invalid(String),
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
            AskError::Invalid(why) => write!(f, "the answer does not fit its question: {why}"),
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
                    Capability::UrlElicitation => "its user to open a link",
                    Capability::Sampling => "the client's model",
                    Capability::Roots => "for the client's roots",
                },
                capability.name()
            )),
            AskError::Unaskable(why) => ToolError::new("The tool could not ask its question.")
                .developer_message(format!("an unaskable question: {why}")),
            AskError::Invalid(why) => ToolError::new(format!(
                "The answer to the tool's question does not fit it ({why}), so the tool did \
                 not go on."
            )),
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
/// context: the answers the round may read, what the client can answer, and what the tool
/// asked. A front makes one per round and reads it after the run.
///
/// An answer counts only for the question it answers: a front that takes answers from a client
/// opens them from the state the server sealed, where each is bound to the key *and* the
/// question (its digest) the server asked, and a response to anything the state does not say
/// was asked is ignored. [`Round::new`] is for a caller that vouches for its answers itself (a
/// unit test, an app calling a tool directly): its answers count for whatever their key asks.
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
    /// The answers this round may read.
    answers: Vec<Held>,
    supported: Vec<Capability>,
    /// The call's name across its rounds and its answers' deadline, from the state the round
    /// came with (none on a first round).
    call: Option<String>,
    deadline: Option<u64>,
    /// What the tool asked and did not get: key → (question digest, what answering it needs,
    /// request as sent).
    asked: BTreeMap<String, (String, Capability, Value)>,
    /// The answers the tool read, each with the question it answered: what the next round
    /// carries again.
    used: Vec<Answer>,
    unsupported: Option<Capability>,
    /// What the ask its client could not answer said (a form's or confirmation's message, a
    /// sampling prompt's text): what the caller is told instead.
    refused: Option<String>,
    /// The link of a URL ask its client cannot show (message, URL): what the caller is told
    /// to open instead.
    link: Option<(String, String)>,
    /// What became of each ask, for the metrics.
    outcomes: Vec<(Capability, AskOutcome)>,
}

/// An answer a round may read.
struct Held {
    key: String,
    /// The digest of the question it answers; `None`: vouched for by the caller of
    /// [`Round::new`], good for any question under its key.
    question: Option<String>,
    value: Value,
    /// Arrived with this round (not carried from an earlier one): counted when read.
    fresh: bool,
}
/// What became of one ask in a round: the metrics' `outcome` label.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[doc(hidden)]
pub enum AskOutcome {
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
    #[doc(hidden)]
    pub const ALL: [AskOutcome; 4] = [
        AskOutcome::Asked,
        AskOutcome::Answered,
        AskOutcome::Declined,
        AskOutcome::Unsupported,
    ];

    #[doc(hidden)]
    pub fn as_str(self) -> &'static str {
        match self {
            AskOutcome::Asked => "asked",
            AskOutcome::Answered => "answered",
            AskOutcome::Declined => "declined",
            AskOutcome::Unsupported => "unsupported",
        }
    }
}

impl Capability {
    #[doc(hidden)]
    pub const ALL: [Capability; 4] = [
        Capability::Elicitation,
        Capability::UrlElicitation,
        Capability::Sampling,
        Capability::Roots,
    ];
}

impl fmt::Debug for Round {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = self.lock();
        f.debug_struct("Round")
            .field(
                "answers",
                &state.answers.iter().map(|a| &a.key).collect::<Vec<_>>(),
            )
            .field("asked", &state.asked.keys().collect::<Vec<_>>())
            .finish()
    }
}

impl Round {
    /// A round whose caller vouches for `answers` (by ask key: each counts for whatever its key
    /// asks), whose client can answer the asks `supports` says it can. For a unit test or an
    /// app that calls a tool itself; a front taking answers from a client resumes the state it
    /// sealed instead, where each answer is bound to its question.
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
        let answers = answers
            .into_iter()
            .map(|(key, value)| Held {
                key,
                question: None,
                value,
                fresh: true,
            })
            .collect();
        Self::with(answers, supports)
    }

    fn with(answers: Vec<Held>, supports: impl Fn(Capability) -> bool) -> Self {
        let supported = Capability::ALL
            .into_iter()
            .filter(|c| supports(*c))
            .collect();
        Round(Arc::new(Mutex::new(RoundState {
            answers,
            supported,
            ..RoundState::default()
        })))
    }

    /// The next round of a call: what its sealed `ledger` holds (none: the call's first
    /// round), and the client's `responses`, of which only those to a question the ledger says
    /// was asked count, each bound to that question.
    #[doc(hidden)]
    pub fn resume(
        ledger: Option<Ledger>,
        responses: BTreeMap<String, Value>,
        supports: impl Fn(Capability) -> bool,
    ) -> Self {
        let Some(ledger) = ledger else {
            return Self::with(Vec::new(), supports);
        };
        let mut answers: Vec<Held> = ledger
            .answers
            .into_iter()
            .map(|a| Held {
                key: a.key,
                question: Some(a.question),
                value: a.value,
                fresh: false,
            })
            .collect();
        for (key, value) in responses {
            let Some(question) = ledger.asked.get(&key) else {
                continue;
            };
            let known = answers
                .iter()
                .any(|a| a.key == key && a.question.as_ref() == Some(question));
            if !known {
                answers.push(Held {
                    key,
                    question: Some(question.clone()),
                    value,
                    fresh: true,
                });
            }
        }
        let round = Self::with(answers, supports);
        {
            let mut state = round.lock();
            state.call = Some(ledger.call);
            state.deadline = ledger.deadline;
        }
        round
    }

    /// What the next round must be given when this one asked: the call's name, the questions
    /// asked and the answers read so far; `None` when the round asked nothing.
    #[doc(hidden)]
    pub fn next(&self) -> Option<Ledger> {
        let state = self.lock();
        if state.asked.is_empty() {
            return None;
        }
        let mut ledger = match &state.call {
            Some(call) => Ledger {
                call: call.clone(),
                ..Ledger::default()
            },
            None => Ledger::first(),
        };
        ledger.deadline = state.deadline;
        ledger.asked = (state.asked.iter())
            .map(|(key, (question, _, _))| (key.clone(), question.clone()))
            .collect();
        ledger.needs = (state.asked.values())
            .map(|(_, capability, _)| capability.name().to_owned())
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect();
        ledger.answers = state.used.clone();
        Some(ledger)
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
        (self.lock().asked.iter())
            .map(|(key, (_, _, request))| (key.clone(), request.clone()))
            .collect()
    }

    /// The answers the tool asked for and got, by key, in the order it read them: what the next
    /// round must carry again.
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
    /// let used = round.used();
    /// assert_eq!(used.len(), 1, "what was not asked is dropped");
    /// assert_eq!(used[0].0, "go");
    /// ```
    pub fn used(&self) -> Vec<(String, Value)> {
        (self.lock().used.iter())
            .map(|a| (a.key.clone(), a.value.clone()))
            .collect()
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

    /// What the ask its client could not answer said, if it said anything.
    #[doc(hidden)]
    pub fn refused_question(&self) -> Option<String> {
        self.lock().refused.clone()
    }

    /// The message and URL of a URL ask whose client cannot show it, if one was made.
    #[doc(hidden)]
    pub fn link(&self) -> Option<(String, String)> {
        self.lock().link.clone()
    }

    /// How many questions this round's client answered (0 on a call's first round): answers
    /// to questions that were asked, not what was merely sent.
    pub(crate) fn answers(&self) -> usize {
        self.lock().answers.iter().filter(|a| a.fresh).count()
    }

    /// What became of each ask so far.
    pub(crate) fn outcomes(&self) -> Vec<(Capability, AskOutcome)> {
        self.lock().outcomes.clone()
    }

    /// The answer to `question` under `key`, read by `read`; or the question recorded as
    /// asked (pending).
    fn ask<T>(
        &self,
        key: &str,
        capability: Capability,
        question: Value,
        read: impl FnOnce(&Value) -> Result<T, AskError>,
    ) -> Result<T, AskError> {
        let mut state = self.lock();
        if !state.supported.contains(&capability) {
            if capability == Capability::UrlElicitation {
                let text = |field: &str| {
                    let value = question.pointer(&format!("/params/{field}"));
                    value.and_then(Value::as_str).unwrap_or_default().to_owned()
                };
                state.link = Some((text("message"), text("url")));
            }
            state.unsupported = Some(capability);
            let said = ["/params/message", "/params/messages/0/content/text"]
                .iter()
                .find_map(|pointer| question.pointer(pointer).and_then(Value::as_str));
            state.refused = said.map(str::to_owned);
            state.outcomes.push((capability, AskOutcome::Unsupported));
            return Err(AskError::Unsupported(capability));
        }
        let digest = question_digest(&question);
        let held = (state.answers.iter())
            .find(|a| a.key == key && a.question.as_ref().is_none_or(|q| *q == digest))
            .map(|a| (a.value.clone(), a.fresh));
        if let Some((value, fresh)) = held {
            let read = read(&value).map_err(|error| match error {
                AskError::Invalid(why) => AskError::Invalid(format!("`{key}`: {why}")),
                other => other,
            });
            let first_read = !state
                .used
                .iter()
                .any(|a| a.key == key && a.question == digest);
            if first_read && !matches!(read, Err(AskError::Invalid(_))) {
                state.used.push(Answer {
                    key: key.to_owned(),
                    question: digest,
                    value,
                });
                if fresh {
                    let outcome = match read {
                        Err(AskError::Declined | AskError::Cancelled) => AskOutcome::Declined,
                        _ => AskOutcome::Answered,
                    };
                    state.outcomes.push((capability, outcome));
                }
            }
            return read;
        }
        match state.asked.get(key) {
            Some((asked, _, _)) if *asked != digest => {
                return Err(AskError::Unaskable(format!(
                    "the key `{key}` already asks another question in this round: give each \
                     question a key of its own"
                )));
            }
            Some(_) => return Err(AskError::Pending),
            None => {}
        }
        let request = sent(question);
        state
            .asked
            .insert(key.to_owned(), (digest, capability, request));
        state.outcomes.push((capability, AskOutcome::Asked));
        Err(AskError::Pending)
    }
}

/// A question as it is sent: a URL ask gets an `elicitationId` of its own each time (the
/// client reports completion under it), which the question's digest leaves out.
fn sent(mut question: Value) -> Value {
    if question.pointer("/params/mode").and_then(Value::as_str) == Some("url") {
        question["params"]["elicitationId"] = Value::String(crate::random::uuid_v4().hyphenated());
    }
    question
}

/// An elicitation's answer: `accept` with its content (if any), or the user's no.
fn elicited(answer: &Value) -> Result<Option<&Value>, AskError> {
    match answer.get("action").and_then(Value::as_str) {
        Some("accept") => Ok(answer.get("content")),
        Some("decline") => Err(AskError::Declined),
        Some("cancel") => Err(AskError::Cancelled),
        _ => Err(AskError::Invalid(
            "an elicitation's answer has the action `accept`, `decline` or `cancel`".into(),
        )),
    }
}

/// The string formats an MCP form may ask for.
const FORM_FORMATS: [&str; 4] = ["email", "uri", "date", "date-time"];

/// What keeps `schema` from being a form MCP can carry (`ElicitRequest`'s `requestedSchema`):
/// an object whose every field is a string (of one of [`FORM_FORMATS`], if any), a number, an
/// integer, a boolean, or a choice among strings (`enum`, or `oneOf` options with a `const` and
/// a `title`; an array of such choices for several).
#[doc(hidden)]
pub fn form_problem(schema: &Value) -> Option<String> {
    if schema.get("type").and_then(Value::as_str) != Some("object") {
        return Some("a form is an object with named fields".into());
    }
    let properties = schema.get("properties").and_then(Value::as_object);
    properties
        .into_iter()
        .flatten()
        .find_map(|(name, field)| Some(format!("the field `{name}` {}", field_problem(field)?)))
}

fn field_problem(field: &Value) -> Option<String> {
    let strings = |values: Option<&Value>| {
        values
            .and_then(Value::as_array)
            .is_some_and(|values| values.iter().all(Value::is_string))
    };
    let titled = |options: Option<&Value>| {
        options.and_then(Value::as_array).is_some_and(|options| {
            options.iter().all(|option| {
                option.get("const").is_some_and(Value::is_string)
                    && option.get("title").is_some_and(Value::is_string)
            })
        })
    };
    let choice = |field: &Value| {
        (field.get("enum").is_some() && strings(field.get("enum")))
            || titled(field.get("oneOf"))
            || titled(field.get("anyOf"))
    };
    match field.get("type").and_then(Value::as_str) {
        Some("string") if field.get("enum").is_some() || field.get("oneOf").is_some() => {
            (!choice(field)).then(|| {
                "is a choice whose options are not plain strings (an `enum` of strings, or \
                 `oneOf` options each with a `const` and a `title`)"
                    .into()
            })
        }
        Some("string") => match field.get("format") {
            None => None,
            Some(format) if format.as_str().is_some_and(|f| FORM_FORMATS.contains(&f)) => None,
            Some(format) => Some(format!(
                "has the format {format}, which forms cannot carry (only {})",
                FORM_FORMATS.join(", ")
            )),
        },
        Some("number" | "integer" | "boolean") => None,
        Some("array") if field.get("items").is_some_and(choice) => None,
        _ => Some("is not a string, number, integer, boolean or choice of strings".into()),
    }
}

/// Why `content` is not an answer to the form `schema` asked for, if it is not.
fn form_answer_problem(schema: &Value, content: &Value) -> Option<String> {
    let validator = match jsonschema::draft202012::options()
        .should_validate_formats(true)
        .build(schema)
    {
        Ok(validator) => validator,
        Err(error) => return Some(format!("its question's schema does not compile: {error}")),
    };
    let problems: Vec<String> = validator
        .iter_errors(content)
        .map(|error| match error.instance_path().as_str() {
            "" => error.to_string(),
            at => format!("at {at}: {error}"),
        })
        .collect();
    (!problems.is_empty()).then(|| problems.join("; "))
}

/// The reserved beginning of the keys the framework asks under itself.
const RESERVED: &str = "oxp.";

/// The ask key of a tool's `confirm = "…"`: reserved, so no key of the tool's own is it.
#[doc(hidden)]
pub const CONFIRM_KEY: &str = "oxp.confirm";

impl crate::context::ToolContext {
    fn round(&self) -> Round {
        // A context without a round (OXP 1.0, which has no place for answers; a direct call)
        // has no one to ask: every ask is unsupported.
        self.signals()
            .round()
            .unwrap_or_else(|| Round::new(BTreeMap::new(), |_| false))
    }

    /// Asks under the tool's own `key`, which may not be one the framework reserves.
    fn ask_own<T>(
        &self,
        key: &str,
        capability: Capability,
        question: Value,
        read: impl FnOnce(&Value) -> Result<T, AskError>,
    ) -> Result<T, AskError> {
        if key.starts_with(RESERVED) {
            return Err(AskError::Unaskable(format!(
                "the key `{key}`: keys beginning with `{RESERVED}` are the framework's own"
            )));
        }
        self.round().ask(key, capability, question, read)
    }

    /// Asks the user to fill in a form shaped like `T` (MCP's form elicitation), under `key`
    /// (unique within the tool). `T`'s schema must be a flat object of strings, numbers,
    /// integers, booleans and choices of strings; the answer is checked against it.
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
        let mut schema = crate::schema::finalize_input(crate::schema::input_schema::<T>())
            .map_err(|e| AskError::Unaskable(e.to_string()))?;
        if let Some(problem) = form_problem(&schema) {
            return Err(AskError::Unaskable(problem));
        }
        // MCP's `requestedSchema` is a plain object of fields: no closing keyword.
        if let Some(object) = schema.as_object_mut() {
            object.remove("additionalProperties");
            object.remove("$schema");
        }
        let question = json!({"method": "elicitation/create",
            "params": {"mode": "form", "message": message, "requestedSchema": &schema}});
        self.ask_own(key, Capability::Elicitation, question, |answer| {
            let content = elicited(answer)?.ok_or_else(|| {
                AskError::Invalid("an `accept` without `content` does not fill in the form".into())
            })?;
            if let Some(problem) = form_answer_problem(&schema, content) {
                return Err(AskError::Invalid(problem));
            }
            // The schema passed: what serde still refuses is a narrower type (a `u8` of 3.0).
            serde_json::from_value(content.clone())
                .map_err(|_| AskError::Invalid("the content does not fit the form's fields".into()))
        })
    }

    /// Asks the user to confirm (yes or no), under `key`; `Ok` when confirmed,
    /// [`AskError::Declined`] (or `Cancelled`) when not. A yes answers this question only:
    /// asking another under the same key asks again.
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
        self.ask_own(
            key,
            Capability::Elicitation,
            confirmation_question(message),
            confirmed,
        )
    }

    /// The question of the tool's `confirm = "…"`, under the key reserved for it.
    pub(crate) fn confirm_declared(&self, message: &str) -> Result<(), AskError> {
        let question = confirmation_question(message);
        self.round()
            .ask(CONFIRM_KEY, Capability::Elicitation, question, confirmed)
    }

    /// Asks the user to visit `url` (MCP's URL elicitation: signing in somewhere, paying),
    /// under `key`; `Ok` once the user says they did. Each time it is sent it carries a fresh
    /// `elicitationId`. A client that shows forms but not links (it did not declare
    /// `elicitation.url`) makes it [`AskError::Unsupported`], and over MCP the call ends with a
    /// result that gives the link and says to call again once it is done.
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
        let question = json!({"method": "elicitation/create", "params": {"mode": "url",
            "message": message, "url": url}});
        self.ask_own(key, Capability::UrlElicitation, question, |answer| {
            elicited(answer).map(drop)
        })
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
        let question = json!({"method": "sampling/createMessage", "params": {
            "messages": [{"role": "user", "content": {"type": "text", "text": prompt}}],
            "maxTokens": max_tokens}});
        self.ask_own(key, Capability::Sampling, question, |answer| {
            let blocks = match answer.get("content") {
                Some(Value::Array(blocks)) => blocks.iter().collect(),
                Some(block) => vec![block],
                None => Vec::new(),
            };
            let text: Vec<&str> = blocks
                .into_iter()
                .filter(|b| b.get("type").and_then(Value::as_str) == Some("text"))
                .filter_map(|b| b.get("text").and_then(Value::as_str))
                .collect();
            if text.is_empty() {
                return Err(AskError::Invalid(
                    "a sampling result carries its answer as `text` content".into(),
                ));
            }
            Ok(text.concat())
        })
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
        let question = json!({"method": "roots/list", "params": {}});
        self.ask_own(key, Capability::Roots, question, |answer| {
            let roots = answer.get("roots").cloned().unwrap_or(Value::Null);
            serde_json::from_value(roots)
                .map_err(|e| AskError::Invalid(format!("a roots list: {e}")))
        })
    }
}

/// A yes to a yes-or-no question: `accept`, its content (a form with no fields) an object if
/// it has any.
fn confirmed(answer: &Value) -> Result<(), AskError> {
    match elicited(answer)? {
        None | Some(Value::Object(_)) => Ok(()),
        Some(_) => Err(AskError::Invalid(
            "a confirmation's `content` is an object (its form has no fields)".into(),
        )),
    }
}

/// A yes-or-no question: a form with no fields.
fn confirmation_question(message: &str) -> Value {
    json!({"method": "elicitation/create", "params": {"mode": "form", "message": message,
        "requestedSchema": {"type": "object", "properties": {}}}})
}

/// The longest a value shown in a `confirm = "…"` question may be, in characters.
const MAX_SHOWN_CHARS: usize = 120;

/// The question of a `confirm = "…"`, its `{param}`s replaced by the call's values: a string
/// as it is, any other value as JSON, at most [`MAX_SHOWN_CHARS`] of it, with control and
/// bidirectional-formatting characters escaped so that the model's values cannot reshape the
/// question the user approves. A parameter the call left out shows as `(none)`.
pub(crate) fn confirmation(template: &str, input: &Value) -> String {
    use crate::rules::Piece;
    // Checked when the registry was built: a template that does not parse is never rendered.
    let pieces = crate::rules::template(template).unwrap_or_default();
    let mut out = String::with_capacity(template.len());
    for piece in pieces {
        match piece {
            Piece::Text(text) => out.push_str(&text),
            Piece::Param(name) => match input.get(name) {
                Some(Value::String(text)) => shown(text, &mut out),
                Some(other) => shown(&other.to_string(), &mut out),
                None => out.push_str("(none)"),
            },
        }
    }
    out
}

/// `value`, escaped and capped, onto `out`.
fn shown(value: &str, out: &mut String) {
    for (count, c) in value.chars().enumerate() {
        if count == MAX_SHOWN_CHARS {
            out.push('…');
            return;
        }
        // Bidirectional overrides, isolates and marks: they reorder what the user reads.
        let bidi = matches!(c, '\u{061C}' | '\u{200E}' | '\u{200F}' | '\u{202A}'..='\u{202E}'
            | '\u{2066}'..='\u{2069}');
        if c.is_control() || bidi {
            out.extend(c.escape_unicode());
        } else {
            out.push(c);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::context::ToolContext;
    use crate::signals::CallSignals;

    fn context(round: &Round) -> ToolContext {
        ToolContext::new("c1").with_signals(CallSignals::new().asking(round))
    }

    /// The round after `round`, with the client's `responses`, as a front makes it from the
    /// state it sealed.
    fn next(round: &Round, responses: Value) -> Round {
        let responses = serde_json::from_value(responses).unwrap();
        Round::resume(round.next(), responses, |_| true)
    }

    fn first() -> Round {
        Round::resume(None, BTreeMap::new(), |_| true)
    }

    fn yes() -> Value {
        json!({"action": "accept"})
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
        assert!(matches!(
            ctx.confirm("bad", "Malformed?"),
            Err(AskError::Invalid(why)) if why.contains("`bad`")
        ));
        assert_eq!(ctx.confirm("later", "Later?"), Err(AskError::Pending));
        let asked = round.asked();
        assert_eq!(asked.keys().collect::<Vec<_>>(), ["later"]);
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

    /// A response counts only for a key the sealed state says was asked: answering in
    /// advance (no state) or answering another key does nothing.
    #[test]
    fn an_answer_counts_only_for_a_question_that_was_asked() {
        let unasked = Round::resume(None, BTreeMap::from([("go".into(), yes())]), |_| true);
        assert_eq!(
            context(&unasked).confirm("go", "Go?"),
            Err(AskError::Pending)
        );
        assert_eq!(unasked.answers(), 0, "nothing was answered");

        let round = first();
        let _ = context(&round).confirm("go", "Go?");
        let round = next(&round, json!({"other": yes()}));
        assert_eq!(
            context(&round).confirm("other", "Other?"),
            Err(AskError::Pending)
        );
        assert_eq!(context(&round).confirm("go", "Go?"), Err(AskError::Pending));

        let round = first();
        let _ = context(&round).confirm("go", "Go?");
        let round = next(&round, json!({"go": yes()}));
        assert_eq!(context(&round).confirm("go", "Go?"), Ok(()));
        assert_eq!(round.answers(), 1);
    }

    /// A yes answers the question asked, not its key: another question under the same key is
    /// asked anew, in a loop as after another ask.
    #[test]
    fn an_answer_is_bound_to_its_question() {
        let round = first();
        let _ = context(&round).confirm("delete", "Delete a.txt?");
        let round = next(&round, json!({"delete": yes()}));
        let ctx = context(&round);
        assert_eq!(ctx.confirm("delete", "Delete a.txt?"), Ok(()));
        assert_eq!(
            ctx.confirm("delete", "Delete b.txt?"),
            Err(AskError::Pending)
        );
        assert_eq!(
            round.asked()["delete"]["params"]["message"],
            "Delete b.txt?"
        );
        // The client's yes under `delete` now answers b.txt; a.txt's stays a.txt's.
        let round = next(&round, json!({"delete": yes()}));
        let ctx = context(&round);
        assert_eq!(ctx.confirm("delete", "Delete a.txt?"), Ok(()));
        assert_eq!(ctx.confirm("delete", "Delete b.txt?"), Ok(()));
        assert_eq!(
            ctx.confirm("delete", "Delete c.txt?"),
            Err(AskError::Pending)
        );

        // Two questions under one key in one round: the tool's mistake, said at once.
        let round = first();
        let ctx = context(&round);
        assert_eq!(ctx.confirm("k", "One?"), Err(AskError::Pending));
        assert!(matches!(
            ctx.confirm("k", "Two?"),
            Err(AskError::Unaskable(_))
        ));
        // The framework's keys are its own.
        assert!(matches!(
            ctx.confirm(CONFIRM_KEY, "Sneaky?"),
            Err(AskError::Unaskable(why)) if why.contains("oxp.")
        ));
    }

    /// Each answer is counted when it arrives, not again in each round that reads it.
    #[test]
    fn answers_are_counted_once() {
        let round = first();
        let _ = context(&round).confirm("a", "A?");
        let round = next(&round, json!({"a": yes()}));
        let ctx = context(&round);
        ctx.confirm("a", "A?").unwrap();
        ctx.confirm("a", "A?").unwrap();
        let _ = ctx.confirm("b", "B?");
        let round = next(&round, json!({"b": yes()}));
        let ctx = context(&round);
        ctx.confirm("a", "A?").unwrap();
        ctx.confirm("b", "B?").unwrap();
        let answered = |round: &Round| {
            (round.outcomes().iter())
                .filter(|(_, o)| *o == AskOutcome::Answered)
                .count()
        };
        assert_eq!(answered(&round), 1, "only b arrived with this round");
        assert_eq!(round.answers(), 1);
    }

    #[derive(serde::Deserialize, schemars::JsonSchema)]
    #[allow(dead_code)]
    struct Rating {
        /// One to five.
        #[schemars(range(min = 1, max = 5))]
        stars: u8,
    }

    /// A form's answer is checked against the schema it was asked with; an `accept` without
    /// content fills in nothing.
    #[test]
    fn answers_are_validated_against_their_question() {
        for (answer, problem) in [
            (
                json!({"action": "accept", "content": {"stars": 200}}),
                "200",
            ),
            (json!({"action": "accept"}), "without `content`"),
            (json!({"action": "maybe"}), "action"),
        ] {
            let round = first();
            let _ = context(&round).ask::<Rating>("rating", "How was it?");
            let round = next(&round, json!({"rating": answer}));
            match context(&round).ask::<Rating>("rating", "How was it?") {
                Err(AskError::Invalid(why)) => assert!(why.contains(problem), "{why}"),
                other => panic!("{answer}: {:?}", other.map(|r| r.stars)),
            }
        }
        let round = first();
        let _ = context(&round).ask::<Rating>("rating", "How was it?");
        let round = next(
            &round,
            json!({"rating": {"action": "accept", "content": {"stars": 4}}}),
        );
        let rating = context(&round).ask::<Rating>("rating", "How was it?");
        assert_eq!(rating.map(|r| r.stars), Ok(4));
    }

    /// A URL ask carries a fresh `elicitationId` each time it is sent; its answer still
    /// counts for it.
    #[test]
    fn a_url_ask_has_a_fresh_id_each_time() {
        let ids: Vec<Value> = (0..2)
            .map(|_| {
                let round = first();
                let _ = context(&round).ask_url("signin", "Sign in", "https://example.com/a");
                round.asked()["signin"]["params"]["elicitationId"].clone()
            })
            .collect();
        assert!(ids[0].is_string() && ids[0] != ids[1], "{ids:?}");
        let round = first();
        let _ = context(&round).ask_url("signin", "Sign in", "https://example.com/a");
        let round = next(&round, json!({"signin": yes()}));
        assert_eq!(
            context(&round).ask_url("signin", "Sign in", "https://example.com/a"),
            Ok(())
        );
    }

    #[test]
    fn confirmations_name_the_call_s_values_escaped_and_capped() {
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
        assert!(crate::rules::placeholders("Delete {}").is_err());
        let hostile = json!({"path": "a.txt?\n\nYes, and also delete /\u{202E}txt.exe"});
        let shown = confirmation("Delete {path}?", &hostile);
        assert!(
            !shown.contains('\n') && !shown.contains('\u{202E}'),
            "{shown}"
        );
        assert!(
            shown.contains("\\u{a}") && shown.contains("\\u{202e}"),
            "{shown}"
        );
        let long = json!({"path": "x".repeat(1000)});
        let shown = confirmation("Delete {path}?", &long);
        assert_eq!(
            shown.chars().count(),
            "Delete ?".len() + MAX_SHOWN_CHARS + 1
        );
        assert_eq!(confirmation("Delete {path}?", &json!({})), "Delete (none)?");
    }

    #[test]
    fn a_form_is_flat_and_carries_only_what_mcp_forms_carry() {
        #[derive(serde::Deserialize, schemars::JsonSchema)]
        #[allow(dead_code)]
        struct Nested {
            inner: Vec<String>,
        }
        #[derive(serde::Deserialize, schemars::JsonSchema)]
        #[allow(dead_code)]
        struct Address {
            #[schemars(extend("format" = "ipv4"))]
            ip: String,
        }
        #[derive(serde::Deserialize, schemars::JsonSchema)]
        #[allow(dead_code)]
        enum Shape {
            Circle { radius: f64 },
            Square { side: f64 },
        }
        #[derive(serde::Deserialize, schemars::JsonSchema)]
        #[allow(dead_code)]
        struct Drawing {
            shape: Shape,
        }
        let ctx = context(&Round::new(BTreeMap::new(), |_| true));
        assert!(matches!(
            ctx.ask::<Nested>("n", "Nested?"),
            Err(AskError::Unaskable(_))
        ));
        assert!(matches!(
            ctx.ask::<Address>("a", "Address?"),
            Err(AskError::Unaskable(why)) if why.contains("ipv4")
        ));
        assert!(matches!(
            ctx.ask::<Drawing>("d", "Drawing?"),
            Err(AskError::Unaskable(_))
        ));
        assert_eq!(
            ctx.ask::<Rating>("r", "Rating?").map(|r| r.stars),
            Err(AskError::Pending)
        );
    }
}
