//! `tools/call`, in the steps both transports share:
//!
//! 1. [`caller`](McpServer::caller): the tool the name resolves to, who the call runs for (the
//!    caller's principal and user, the server's secrets), its input, and what its client can
//!    answer; a tool the caller's client may not reach is refused here.
//! 2. [`admission`](McpServer::admission): the round the request continues, if any (its sealed
//!    state, or a relayed confirmation), opened and bound to this call; a round its client
//!    cannot answer is refused before it runs.
//! 3. [`drive_rounds`](McpServer::drive_rounds): the runs, as a task or in the request, and, where the server
//!    asks by requests of its own (a connection, or an earlier revision's HTTP stream), each
//!    round's questions and the next run with their answers.
//! 4. [`finish`](McpServer::finish): the outcome as MCP answers it: a value, the questions of
//!    a round that asked (`input_required`, a relayed confirmation, a link), or what the client
//!    could not give.

use rmcp::ErrorData as McpError;
use rmcp::model::{CallToolRequestParams, CallToolResponse, ClientCapabilities};
use serde_json::Value;

use super::exchange::Exchange;
use super::{McpServer, asking, fallback, mcp_result, tasks, text_error};
use crate::ask::{CannotAsk, Capability, Round};
use crate::call::CallOutcome;
use crate::idempotency::StoreError;
use crate::protocol::{CallContext, CallToolRequest};
use crate::registry::RegisteredTool;
use crate::seal::{Binding, Ledger};
use crate::tasks::TaskSupport;

/// How a step ends the call early: with this answer (boxed: steps return it beside their
/// own small results).
struct Ended(Box<Result<CallToolResponse, McpError>>);

impl Ended {
    fn with(answer: Result<CallToolResponse, McpError>) -> Self {
        Ended(Box::new(answer))
    }
}

impl From<McpError> for Ended {
    fn from(error: McpError) -> Self {
        Ended::with(Err(error))
    }
}

type Step<T> = Result<T, Ended>;

/// What a call is, once its caller and tool are known.
struct Prepared<'a> {
    tool: &'a RegisteredTool,
    /// The name the call used (a relayed confirmation names it back).
    name: String,
    input: Value,
    /// The secrets, user and tokens the call runs with.
    context: CallContext,
    /// The caller's principal, none for an anonymous one.
    principal: Option<String>,
    /// What the request's client declared it can answer.
    capabilities: Option<&'a ClientCapabilities>,
    /// The tool's policy for a caller that cannot answer.
    policy: CannotAsk,
    /// A confirmation relayed through the model, sent back as an argument.
    confirmation: Option<Value>,
    /// Over HTTP, where the user is the caller (see the module docs).
    per_caller: bool,
    /// The client speaks 2026-07-28 or later (and takes any output).
    newest: bool,
    /// The tool's output is `Contents`.
    contents: bool,
    task: Option<TaskSupport>,
    declared_tasks: bool,
}

impl Prepared<'_> {
    /// Whether the client itself can answer `capability`.
    fn client(&self, capability: Capability) -> bool {
        asking::supports(self.capabilities)(capability)
    }

    /// Whether this call's elicitation travels through the model instead of the client.
    fn relaying(&self) -> bool {
        self.confirmation.is_some()
            || (self.policy == CannotAsk::Relay && !self.client(Capability::Elicitation))
    }

    /// What a round of this call can ask: what the client declared, and a relayed
    /// confirmation as if the client could (the model carries it).
    fn can(&self, capability: Capability) -> bool {
        self.client(capability) || (self.relaying() && capability == Capability::Elicitation)
    }

    /// What this call's states are bound to: the tool as resolved, the input, who calls.
    fn binding<'b>(&'b self, user: &'b str) -> Binding<'b> {
        Binding::call(
            self.tool.id(),
            &self.input,
            self.principal.as_deref(),
            Some(user),
        )
    }

    fn user(&self) -> String {
        self.context.user_id.clone().unwrap_or_default()
    }
}

/// Where a call's rounds stand when it runs.
struct Admitted {
    round: Round,
    /// The call's own `call_id`, for a round that continues it: its end is kept, and a replay
    /// of any of its rounds gets that answer instead of a second run.
    call_id: Option<String>,
    /// A task made by such a round is the call's: a replay of the round finds it.
    task_id: Option<String>,
}

impl McpServer {
    /// `tools/call`.
    ///
    /// The steps before the first run are taken apart from this future, which then holds only
    /// what its runs need.
    pub(super) async fn call(
        &self,
        request: CallToolRequestParams,
        exchange: &Exchange,
    ) -> Result<CallToolResponse, McpError> {
        let (mut prepared, admitted) = match self.before_the_run(request, exchange) {
            Ok(begun) => begun,
            Err(Ended(answer)) => return *answer,
        };
        match self.drive_rounds(&mut prepared, admitted, exchange).await {
            Ok((outcome, round)) => self.finish(&prepared, outcome, &round),
            Err(Ended(answer)) => *answer,
        }
    }

    /// Steps 1 and 2, either of which may end the call.
    fn before_the_run<'a>(
        &'a self,
        mut request: CallToolRequestParams,
        exchange: &'a Exchange,
    ) -> Step<(Prepared<'a>, Admitted)> {
        let state = request.request_state.take();
        let responses = request.input_responses.take().unwrap_or_default();
        let prepared = self.caller(request, exchange)?;
        let admitted = self.admission(&prepared, state.as_deref(), responses)?;
        Ok((prepared, admitted))
    }

    /// Step 1: the tool, who the call runs for, its input, what its client can answer.
    fn caller<'a>(
        &'a self,
        request: CallToolRequestParams,
        exchange: &'a Exchange,
    ) -> Step<Prepared<'a>> {
        let newest = exchange.newest();
        let Some(tool) = self.resolve(&request.name) else {
            return Err(McpError::invalid_params(
                format!("Tool '{}' was not found", request.name),
                None,
            )
            .into());
        };
        // A tool that runs only as a task, for a request that did not declare the extension,
        // or on a server that keeps no tasks.
        let task = tool.hints().task;
        let declared_tasks = task.is_some() && self.declared_tasks(exchange);
        if task == Some(TaskSupport::Required) && !declared_tasks {
            let mut error = McpError::missing_required_client_capability(
                ClientCapabilities::builder().enable_tasks().build(),
            );
            error.message = "This tool runs only as a task: declare the tasks extension \
                             (io.modelcontextprotocol/tasks) on the request"
                .into();
            return Err(error.into());
        }
        if task == Some(TaskSupport::Required) && self.pipeline.store().is_none() {
            return Err(McpError::internal_error(
                "This tool runs only as a task, and this server keeps no tasks \
                 (OXP_IDEMPOTENCY_TTL_MS=0 turns off the store they live in)",
                None,
            )
            .into());
        }
        let per_caller = exchange.over_http() && !self.single_tenant;
        let mut context = (*self.context).clone();
        if per_caller {
            // MCP carries no user of the caller's own: the user is the token's subject, by the
            // rule every front shares.
            context.user_id =
                (exchange.principal()).and_then(|p| p.call_user(None, false).ok().flatten());
            context.authorization.clear();
        }
        // What the tool does if this caller cannot answer it; a relayed confirmation comes as
        // an argument the tool itself never sees.
        let policy = fallback::policy(tool, self.cannot_ask);
        let answers = asking::supports(exchange.capabilities.as_ref())(Capability::Elicitation);
        if !answers && policy == CannotAsk::Hide {
            self.count(crate::metrics::Fallback::Hidden);
            return Err(Ended::with(unsupported(
                Capability::Elicitation,
                newest,
                None,
            )));
        }
        let mut arguments = request.arguments.unwrap_or_default();
        let confirmation = match policy {
            CannotAsk::Relay => arguments.remove(fallback::CONFIRMATION),
            _ => None,
        };
        let contents = (tool.definition().output_schema.as_ref())
            .is_some_and(|output| crate::content::structured_schema(output).is_some());
        Ok(Prepared {
            tool,
            name: request.name.into_owned(),
            input: Value::Object(arguments),
            context,
            principal: exchange.caller(),
            capabilities: exchange.capabilities.as_ref(),
            policy,
            confirmation,
            per_caller,
            newest,
            contents,
            task,
            declared_tasks,
        })
    }

    /// Step 2: the round the request continues, opened and bound to this call.
    fn admission(
        &self,
        prepared: &Prepared<'_>,
        state: Option<&str>,
        responses: std::collections::BTreeMap<String, Value>,
    ) -> Step<Admitted> {
        // A relayed confirmation is a state like any other, its question answered yes by the
        // user through the model.
        let (state, responses, what) = match &prepared.confirmation {
            Some(token) => (
                Some(token.as_str().unwrap_or_default()),
                [(
                    crate::ask::CONFIRM_KEY.to_owned(),
                    serde_json::json!({"action": "accept"}),
                )]
                .into(),
                fallback::CONFIRMATION,
            ),
            None => (state, responses, "requestState"),
        };
        let user = prepared.user();
        let ledger = match state {
            // An input that fails validation is answered with what is wrong with it (by the
            // pipeline, as any call's), whatever state comes with it: the state is bound to a
            // valid input and could only say it belongs to another call.
            Some(_) if !prepared.tool.validator().is_valid(&prepared.input) => None,
            Some(state) => Some(self.open_state(state, &prepared.binding(&user), what)?),
            None => None,
        };
        // A round whose client cannot answer what was asked is refused before it runs: it
        // neither runs the tool nor uses the call up.
        if let Some(capability) = asking::lacking(ledger.as_ref(), |c| prepared.can(c)) {
            self.count(crate::metrics::Fallback::Refused);
            return Err(Ended::with(unsupported(capability, prepared.newest, None)));
        }
        Ok(Admitted {
            call_id: ledger.as_ref().map(Ledger::call_id),
            task_id: ledger.as_ref().map(|ledger| ledger.call.clone()),
            round: Round::resume(ledger, responses, |c| prepared.can(c)),
        })
    }

    /// Step 3: the call's runs, as a task or in the request, with the rounds of questions the
    /// server asks by requests of its own in between.
    async fn drive_rounds(
        &self,
        prepared: &mut Prepared<'_>,
        admitted: Admitted,
        exchange: &Exchange,
    ) -> Step<(CallOutcome, Round)> {
        let Admitted {
            mut round,
            mut call_id,
            task_id,
        } = admitted;
        let by_request = asking::by_request(exchange);
        let as_task = prepared.declared_tasks && self.pipeline.store().is_some();
        // A tool that cannot ask runs once, and nothing reads its input after (no state is
        // bound to it): its input is moved to the run rather than copied.
        let mut once =
            (!as_task && !prepared.tool.may_ask()).then(|| std::mem::take(&mut prepared.input));
        let mut rounds = 0;
        loop {
            let prepared = &*prepared;
            let input = once.take().unwrap_or_else(|| prepared.input.clone());
            let call = CallToolRequest {
                tool_id: prepared.tool.id().to_owned(),
                call_id: call_id.clone(),
                trace_id: None,
                input: Some(input),
                context: Some(prepared.context.clone()),
            };
            // The task and the ask are boxed: each would otherwise size the future of every
            // call, which the transport moves whole, for the few that make a task or ask.
            let outcome = if as_task {
                Box::pin(self.as_task(prepared, call, &round, task_id.clone(), exchange)).await?
            } else {
                self.run(call, prepared.principal.clone(), &round, exchange)
                    .await?
            };
            // Only what the client itself declared is asked of it (a relayed confirmation is
            // the model's to carry, in `finish`).
            let askable = |next: &Ledger| {
                by_request
                    && !outcome.succeeded()
                    && (next.needs.iter())
                        .filter_map(|name| Capability::from_name(name))
                        .all(|c| prepared.client(c))
            };
            let Some(next) = round.next().filter(askable) else {
                return Ok((outcome, round));
            };
            rounds += 1;
            if rounds > asking::MAX_ROUNDS {
                return Err(Ended::with(Ok(text_error(format!(
                    "The tool asked more than {} rounds of questions; it was stopped.",
                    asking::MAX_ROUNDS
                ))
                .into())));
            }
            let asked = Box::pin(self.ask_by_request(exchange, round.asked(), self.sealer.ttl()));
            let answers = tokio::select! {
                answers = asked => answers,
                () = exchange.cancelled() => {
                    return Err(Ended::with(Ok(text_error("The call was cancelled while it asked.").into())));
                }
            };
            let answers = answers.map_err(|problem| Ended::with(Ok(text_error(problem).into())))?;
            call_id = Some(next.call_id());
            round = Round::resume(Some(next), answers, |c| prepared.can(c));
        }
    }

    /// One run of a task tool for a request that declared tasks: the task made (the call ends
    /// with it), or the answer a replayed round's task already has; a tool that may also run
    /// plainly does where the store has no room, and nothing runs unguarded when the store
    /// cannot be reached.
    async fn as_task(
        &self,
        prepared: &Prepared<'_>,
        call: CallToolRequest,
        round: &Round,
        task_id: Option<String>,
        exchange: &Exchange,
    ) -> Step<CallOutcome> {
        let seed = tasks::Seed {
            tool_id: prepared.tool.id().to_owned(),
            input: prepared.input.clone(),
            user: prepared.context.user_id.clone(),
            can: (Capability::ALL.into_iter())
                .filter(|capability| prepared.can(*capability))
                .map(|capability| capability.name().to_owned())
                .collect(),
            render: tasks::Render {
                any_output: prepared.newest,
                per_caller: prepared.per_caller,
                contents: prepared.contents,
            },
            id: task_id.unwrap_or_else(|| crate::random::uuid_v4().simple().to_string()),
            principal: prepared.principal.clone(),
        };
        let plain = (prepared.task == Some(TaskSupport::Optional)).then(|| call.clone());
        match self.begin_task(seed, call, round).await {
            Ok(tasks::Begun::Task(task)) => Err(Ended::with(Ok(task.into()))),
            Ok(tasks::Begun::Answered(outcome)) => Ok(outcome),
            Err(StoreError::Full | StoreError::CallerFull) if plain.is_some() => {
                let call = plain.expect("checked");
                Ok(self
                    .run(call, prepared.principal.clone(), round, exchange)
                    .await?)
            }
            Err(error) => Err(McpError::internal_error(
                format!("The task could not be made, so the tool did not run: {error}"),
                None,
            )
            .into()),
        }
    }

    /// Step 4: the outcome as MCP answers it.
    fn finish(
        &self,
        prepared: &Prepared<'_>,
        outcome: CallOutcome,
        round: &Round,
    ) -> Result<CallToolResponse, McpError> {
        let newest = prepared.newest;
        if !outcome.succeeded() {
            let user = prepared.user();
            let binding = prepared.binding(&user);
            if let Some(ledger) = round
                .next()
                .filter(|_| prepared.relaying() && !prepared.client(Capability::Elicitation))
            {
                return self.relay(prepared, ledger, round, &binding);
            }
            if let Some(ledger) = round.next() {
                return Ok(match self.input_required(round, ledger, &binding) {
                    Ok(asks) => asks.into(),
                    Err(problem) => {
                        text_error(format!("The tool's question could not be sent: {problem}."))
                            .into()
                    }
                });
            }
            if let Some((message, url)) = round.link() {
                // A host that shows forms but not links (Claude Code): the link itself, and
                // what to do with it, rather than an error the user cannot act on.
                self.count(crate::metrics::Fallback::Link);
                return Ok(text_error(format!(
                    "{message}: the user needs to open {url} (this client cannot show links), \
                     then call the tool again."
                ))
                .into());
            }
            if let Some(capability) = round.unsupported() {
                self.count(crate::metrics::Fallback::Refused);
                return unsupported(capability, newest, round.refused_question().as_deref());
            }
        }
        Ok(mcp_result(outcome, newest, prepared.per_caller, prepared.contents).into())
    }

    /// A round that asked a caller whose confirmation travels through the model: the question
    /// and a sealed confirmation to call again with; anything else the tool asks, this caller
    /// cannot answer.
    fn relay(
        &self,
        prepared: &Prepared<'_>,
        ledger: Ledger,
        round: &Round,
        binding: &Binding<'_>,
    ) -> Result<CallToolResponse, McpError> {
        let only_confirm = ledger.asked.keys().eq([crate::ask::CONFIRM_KEY]);
        let asked = round.asked();
        let question = (asked.get(crate::ask::CONFIRM_KEY))
            .and_then(|ask| ask.pointer("/params/message"))
            .and_then(Value::as_str);
        match (only_confirm, question) {
            (true, Some(question)) => Ok(match self.sealer.seal(ledger, binding) {
                Ok(token) => {
                    self.count(crate::metrics::Fallback::Relayed);
                    text_error(fallback::relay_text(&prepared.name, question, &token))
                }
                Err(too_large) => text_error(format!(
                    "The tool's question could not be sent: {too_large}."
                )),
            }
            .into()),
            _ => {
                self.count(crate::metrics::Fallback::Refused);
                unsupported(Capability::Elicitation, prepared.newest, question)
            }
        }
    }
}

/// The answer to a call whose tool needed an ask its client cannot answer, in words a model
/// can relay to its user: what the tool needs (a confirmation or a form, a link opened, the
/// client's model, its roots) and the question it would have asked, if one was. From
/// 2026-07-28 it is MCP's "missing required client capability" (HTTP 400); before, a tool error.
fn unsupported(
    capability: Capability,
    newest: bool,
    question: Option<&str>,
) -> Result<CallToolResponse, McpError> {
    let needs = match capability {
        Capability::Elicitation => "its user's confirmation or answers to a form",
        Capability::UrlElicitation => "its user to open a link",
        Capability::Sampling => "an answer from the client's model",
        Capability::Roots => "the client's roots (the folders it works in)",
        _ => "something only its client can give",
    };
    let mut text = format!(
        "This tool needs {needs} before it goes on, and this client cannot give it (it did not \
         declare `{}`)",
        capability.name()
    );
    if let Some(question) = question {
        text.push_str(&format!(". The question was: \"{question}\""));
    }
    text.push_str(". Ask the user directly, or use a client that supports it.");
    if newest {
        let required: rmcp::model::ClientCapabilities =
            serde_json::from_value(capability.declared()).unwrap_or_default();
        let mut error = McpError::missing_required_client_capability(required);
        error.message = text.into();
        return Err(error);
    }
    Ok(text_error(text).into())
}
