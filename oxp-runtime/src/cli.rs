//! The one-line main's subcommands: serve (the default), `tools`, `dispatch`.

use std::io::Read;

use serde_json::{Value, json};

use crate::call::Pipeline;
use crate::protocol::CallContext;
use crate::providers::{Dispatcher, ExportError, Limits, anthropic, gemini, openai};
use crate::registry::Registry;

const USAGE: &str = "\
usage: <bin>                                 serve every tool over OXP (configured by OXP_* env vars)
       <bin> tools --format F [--strict]     print the tool definitions as JSON
       <bin> dispatch --format F             run the tool calls of a model response read on stdin
       <bin> mcp                             serve every tool over MCP on stdin/stdout
formats: oxp, openai, openai-responses, anthropic, gemini (--strict: OpenAI's strict mode)";

/// A provider format, as the subcommands name them.
///
/// ```
/// use oxp_runtime::cli::Format;
/// assert_eq!("openai-responses".parse::<Format>(), Ok(Format::OpenAiResponses));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// `GET /tools`'s `items`.
    Oxp,
    /// OpenAI Chat Completions.
    OpenAi,
    /// OpenAI Responses.
    OpenAiResponses,
    /// Anthropic Messages.
    Anthropic,
    /// Google Gemini.
    Gemini,
}

impl std::str::FromStr for Format {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        Ok(match s {
            "oxp" => Format::Oxp,
            "openai" => Format::OpenAi,
            "openai-responses" => Format::OpenAiResponses,
            "anthropic" => Format::Anthropic,
            "gemini" => Format::Gemini,
            other => return Err(format!("unknown format `{other}`")),
        })
    }
}

/// What the command line asks for.
///
/// ```
/// use oxp_runtime::cli::{parse, Command, Format};
/// let args = ["tools".to_owned(), "--format".to_owned(), "anthropic".to_owned()];
/// assert_eq!(parse(&args), Ok(Command::Tools { format: Format::Anthropic, strict: false }));
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Command {
    /// Serve over OXP.
    Serve,
    /// Print tool definitions.
    Tools {
        /// In which format.
        format: Format,
        /// OpenAI strict mode.
        strict: bool,
    },
    /// Run a model response's tool calls.
    Dispatch {
        /// The response's format.
        format: Format,
    },
    /// Serve MCP over stdio.
    Mcp,
}

/// Parses the arguments after the program name.
///
/// ```
/// use oxp_runtime::cli::{parse, Command, Format};
///
/// assert_eq!(parse(&[]), Ok(Command::Serve));
/// assert_eq!(
///     parse(&["tools".into(), "--format".into(), "openai".into(), "--strict".into()]),
///     Ok(Command::Tools { format: Format::OpenAi, strict: true })
/// );
/// assert!(parse(&["tools".into()]).is_err());
/// ```
pub fn parse(args: &[String]) -> Result<Command, String> {
    let Some((command, rest)) = args.split_first() else {
        return Ok(Command::Serve);
    };
    let mut format = None;
    let mut strict = false;
    let mut rest = rest.iter();
    while let Some(arg) = rest.next() {
        match arg.as_str() {
            "--format" => {
                let value = rest.next().ok_or("`--format` needs a value")?;
                format = Some(value.parse::<Format>()?);
            }
            flag if flag.starts_with("--format=") => {
                format = Some(flag["--format=".len()..].parse::<Format>()?);
            }
            "--strict" => strict = true,
            other => return Err(format!("unexpected argument `{other}`")),
        }
    }
    let given = format.is_some() || strict;
    let format = || format.ok_or_else(|| format!("`{command}` needs `--format F`"));
    match command.as_str() {
        "serve" => Ok(Command::Serve),
        "tools" => Ok(Command::Tools {
            format: format()?,
            strict,
        }),
        "dispatch" if strict => Err("`--strict` goes with `tools`".into()),
        "dispatch" => Ok(Command::Dispatch { format: format()? }),
        "mcp" if !given => Ok(Command::Mcp),
        "mcp" => Err("`mcp` takes no options".into()),
        "help" | "--help" | "-h" => Err(String::new()),
        other => Err(format!("unknown command `{other}`")),
    }
}

/// Prints `message` (if any) and the usage; returns exit code 2.
///
/// ```no_run
/// std::process::exit(oxp_runtime::cli::usage_error("unknown subcommand `frobnicate`"));
/// ```
pub fn usage_error(message: &str) -> i32 {
    if !message.is_empty() {
        eprintln!("error: {message}");
    }
    eprintln!("{USAGE}");
    2
}

/// `tools`: the definitions as JSON on stdout (exit 0), or the incompatibilities (exit 2).
///
/// ```
/// use oxp_runtime::{tool, Registry};
///
/// /// Add two integers.
/// #[tool(toolkit = "Calculator", version = "1.0.0")]
/// async fn add(a: i64, b: i64) -> i64 { a + b }
///
/// let registry = Registry::builder().tool(add::TOOL).build().unwrap();
/// // Prints the Gemini function declarations on stdout.
/// assert_eq!(oxp_runtime::cli::tools(&registry, oxp_runtime::cli::Format::Gemini, false), 0);
/// ```
pub fn tools(registry: &Registry, format: Format, strict: bool) -> i32 {
    let limits = Limits::default();
    let exported = match format {
        Format::Oxp => Ok(json!({ "items": registry.definitions().collect::<Vec<_>>() })),
        Format::OpenAi => openai::chat_tools(registry, &limits, strict).map(Value::from),
        Format::OpenAiResponses => {
            openai::responses_tools(registry, &limits, strict).map(Value::from)
        }
        Format::Anthropic => anthropic::tools(registry, &limits).map(Value::from),
        Format::Gemini => gemini::tools(registry, &limits).map(Value::from),
    };
    match exported {
        Ok(tools) => {
            println!(
                "{}",
                serde_json::to_string_pretty(&tools).expect("JSON serializes")
            );
            0
        }
        Err(errors) => {
            for error in &errors {
                eprintln!("error: {error}");
            }
            let errors: Vec<Value> = errors.iter().map(ExportError::to_json).collect();
            println!(
                "{}",
                serde_json::to_string_pretty(&json!({ "errors": errors }))
                    .expect("JSON serializes")
            );
            2
        }
    }
}

/// The context dispatched calls get, from the environment: each secret a tool declares from the
/// variable of the same name, the user from `OXP_USER_ID`, a token for provider `p` from
/// `OXP_TOKEN_<P>` (upper-cased, `-` as `_`). A model never sees or sends these.
///
/// ```
/// # let registry = oxp_runtime::Registry::builder().build().unwrap();
/// let context = oxp_runtime::cli::context_from_env(&registry);
/// assert!(context.secrets.is_empty());
/// ```
pub fn context_from_env(registry: &Registry) -> CallContext {
    let mut context = CallContext::default();
    let mut secrets: Vec<&str> = registry
        .tools()
        .iter()
        .flat_map(|t| t.descriptor().secrets.iter().copied())
        .collect();
    secrets.sort_unstable();
    secrets.dedup();
    for id in secrets {
        if let Ok(value) = std::env::var(id) {
            context.secrets.push(crate::protocol::ToolSecret {
                id: id.to_owned(),
                value: crate::protocol::Sensitive::new(value),
                extra: Default::default(),
            });
        }
    }
    let mut providers: Vec<&str> = registry
        .tools()
        .iter()
        .flat_map(|t| t.descriptor().authorization.iter().map(|a| a.id))
        .collect();
    providers.sort_unstable();
    providers.dedup();
    for id in providers {
        let variable = format!("OXP_TOKEN_{}", id.to_ascii_uppercase().replace('-', "_"));
        if let Ok(token) = std::env::var(variable) {
            context
                .authorization
                .push(crate::protocol::AuthorizationToken {
                    id: id.to_owned(),
                    token: crate::protocol::Sensitive::new(token),
                    extra: Default::default(),
                });
        }
    }
    context.user_id = std::env::var("OXP_USER_ID").ok().filter(|u| !u.is_empty());
    context
}

/// `dispatch`: reads a model response on stdin, runs its tool calls, prints the result
/// message(s) for that provider. Exit 0, or 2 for a response it cannot read.
///
/// ```no_run
/// # async fn run() {
/// use oxp_runtime::{call::Pipeline, cli, Registry};
/// let code = cli::dispatch(Pipeline::new(Registry::from_inventory().unwrap()), cli::Format::OpenAi).await;
/// std::process::exit(code);
/// # }
/// ```
pub async fn dispatch(pipeline: Pipeline, format: Format) -> i32 {
    let mut input = String::new();
    if let Err(error) = std::io::stdin().read_to_string(&mut input) {
        return usage_error(&format!("cannot read stdin: {error}"));
    }
    let response: Value = match serde_json::from_str(&input) {
        Ok(response) => response,
        Err(error) => return usage_error(&format!("stdin is not JSON: {error}")),
    };
    let context = context_from_env(pipeline.registry());
    let dispatcher = Dispatcher::new(pipeline).with_context(context);
    let results = match format {
        Format::OpenAi => openai::dispatch_chat(&dispatcher, &response)
            .await
            .map(Value::from),
        Format::OpenAiResponses => openai::dispatch_responses(&dispatcher, &response)
            .await
            .map(Value::from),
        Format::Anthropic => anthropic::dispatch(&dispatcher, &response)
            .await
            .map(|m| m.map_or(json!([]), |m| json!([m]))),
        Format::Gemini => gemini::dispatch(&dispatcher, &response)
            .await
            .map(|m| m.map_or(json!([]), |m| json!([m]))),
        Format::Oxp => return usage_error("`dispatch` takes a model provider's format, not `oxp`"),
    };
    match results {
        Ok(messages) => {
            println!(
                "{}",
                serde_json::to_string_pretty(&messages).expect("JSON serializes")
            );
            0
        }
        Err(error) => {
            eprintln!("error: {error}");
            2
        }
    }
}
