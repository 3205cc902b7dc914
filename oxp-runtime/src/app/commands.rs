//! The subcommands of the one-line `main`: serve (the default), `tools`, `dispatch`, `mcp`,
//! `lock`, `card`, `check`, `install`.
//! Each returns its exit code; only [`super::serve`] exits.

use std::io::Read;
use std::path::PathBuf;

use serde_json::{Value, json};

use crate::call::Pipeline;
use crate::lock::{Lock, Review};
use crate::protocol::CallContext;
use crate::providers::{Dispatcher, ExportError, Limits, Provider};
use crate::registry::Registry;

const USAGE: &str = "\
usage: <bin>                                 serve every tool over OXP (configured by OXP_* env vars)
       <bin> tools --format F [--strict]     print the tool definitions as JSON
       <bin> dispatch --format F             run the tool calls of a model response read on stdin
       <bin> mcp                             serve every tool over MCP on stdin/stdout
       <bin> card                            print the MCP Server Card (main calls `oxp_runtime::serve!()`)
       <bin> check <url> [--json FILE] [options]
                                             check an OXP server against the spec (feature `check`;
                                             `<bin> check --help` for its options)
       <bin> install <host> [--url URL] [--force] [--dry-run] [options]
                                             add this server to claude-desktop, claude-code, cursor
                                             or vscode (`<bin> install --help` for the options)
       <bin> lock [--path FILE] [--allow-removal]
                                             write tools.lock: every tool and its definition
       <bin> lock --check [--path FILE] [--allow-removal]
                                             exit 1 if a change breaks what tools.lock published
formats: oxp, openai, openai-responses, anthropic, gemini (--strict: OpenAI's strict mode)";

/// A format the subcommands take: OXP's own list, or a model provider's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Format {
    /// `GET /tools`'s `items`.
    Oxp,
    Provider(Provider),
}

impl std::str::FromStr for Format {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "oxp" => Ok(Format::Oxp),
            other => other
                .parse()
                .map(Format::Provider)
                .map_err(|_| format!("unknown format `{other}`")),
        }
    }
}

/// What the command line asks for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Command {
    Serve,
    Tools {
        format: Format,
        strict: bool,
    },
    Dispatch {
        provider: Provider,
    },
    Mcp,
    Card,
    /// `check`: its arguments, for `oxp_check::cli`.
    Check(Vec<String>),
    /// `install <host>`.
    Install(super::install::Install),
    Lock {
        path: PathBuf,
        check: bool,
        allow_removal: bool,
    },
}

/// Parses the arguments after the program name; `Err` carries the message for the usage.
pub(crate) fn parse(args: &[String]) -> Result<Command, String> {
    let Some((command, rest)) = args.split_first() else {
        return Ok(Command::Serve);
    };
    if command == "lock" {
        return parse_lock(rest);
    }
    if command == "install" {
        // Its errors are printed above its own usage (`install::usage_error`).
        return super::install::parse(rest).map(Command::Install);
    }
    // The checker parses its own options (and prints its own usage).
    if command == "check" {
        return Ok(Command::Check(rest.to_vec()));
    }
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
        "dispatch" => match format()? {
            Format::Provider(provider) => Ok(Command::Dispatch { provider }),
            Format::Oxp => Err("`dispatch` takes a model provider's format, not `oxp`".into()),
        },
        "mcp" if !given => Ok(Command::Mcp),
        "mcp" => Err("`mcp` takes no options".into()),
        "card" if !given => Ok(Command::Card),
        "card" => Err("`card` takes no options".into()),
        "help" | "--help" | "-h" => Err(String::new()),
        other => Err(format!("unknown command `{other}`")),
    }
}

fn parse_lock(args: &[String]) -> Result<Command, String> {
    let (mut path, mut check, mut allow_removal) = (None, false, false);
    let mut args = args.iter();
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--check" => check = true,
            "--allow-removal" => allow_removal = true,
            "--path" => path = Some(args.next().ok_or("`--path` needs a file")?.clone()),
            flag if flag.starts_with("--path=") => path = Some(flag["--path=".len()..].to_owned()),
            other => return Err(format!("unexpected argument `{other}` to `lock`")),
        }
    }
    let path = PathBuf::from(path.unwrap_or_else(|| "tools.lock".into()));
    if path.as_os_str().is_empty() {
        return Err("`--path` needs a file".into());
    }
    Ok(Command::Lock {
        path,
        check,
        allow_removal,
    })
}

/// Prints `message` (if any) and the usage; returns exit code 2.
pub(crate) fn usage_error(message: &str) -> i32 {
    if !message.is_empty() {
        eprintln!("error: {message}");
    }
    eprintln!("{USAGE}");
    2
}

/// `tools`: the definitions as JSON on stdout (exit 0), or the incompatibilities (exit 2).
pub(crate) fn tools(registry: &Registry, format: Format, strict: bool) -> i32 {
    let exported = match format {
        Format::Oxp => Ok(json!({ "items": registry.definitions().collect::<Vec<_>>() })),
        Format::Provider(provider) => provider
            .export(registry, &Limits::default(), strict)
            .map(Value::from),
    };
    match exported {
        Ok(tools) => {
            println!("{}", pretty(&tools));
            0
        }
        Err(errors) => {
            for error in &errors {
                eprintln!("error: {error}");
            }
            let errors: Vec<Value> = errors.iter().map(ExportError::to_json).collect();
            println!("{}", pretty(&json!({ "errors": errors })));
            2
        }
    }
}

/// The context dispatched calls get, from the environment: each secret a tool declares from the
/// variable of the same name, the user from `OXP_USER_ID`, a token for provider `p` from
/// `OXP_TOKEN_<P>` (upper-cased, `-` as `_`). A model never sees or sends these.
pub(crate) fn context_from_env(registry: &Registry) -> CallContext {
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
    context.user_id =
        (std::env::var(super::settings::OXP_USER_ID.name).ok()).filter(|u| !u.is_empty());
    context
}

/// `dispatch`: reads a model response on stdin, runs its tool calls, and prints the messages to
/// send back (exit 0), or the problem (exit 2).
pub(crate) async fn dispatch(pipeline: Pipeline, provider: Provider) -> i32 {
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
    match provider.dispatch(&dispatcher, &response).await {
        Ok(messages) => {
            println!("{}", pretty(&Value::from(messages)));
            0
        }
        Err(error) => {
            eprintln!("error: {error}");
            2
        }
    }
}

/// `lock`: writes the lockfile (exit 0), unless the change breaks what the previous one
/// published (exit 1, nothing written). `lock --check`: reports, writes nothing, exits 1 on a
/// violation. Both exit 2 on a file they cannot read or write.
pub(crate) fn lock(
    registry: &Registry,
    path: &std::path::Path,
    check: bool,
    allow_removal: bool,
) -> i32 {
    let shown = path.display();
    let previous = match Lock::read(path) {
        Ok(lock) => lock,
        Err(crate::lock::LockError::Io(e))
            if e.kind() == std::io::ErrorKind::NotFound && !check =>
        {
            Lock::default()
        }
        Err(crate::lock::LockError::Io(e)) if e.kind() == std::io::ErrorKind::NotFound => {
            eprintln!(
                "error: no lockfile at {shown}: write one with `{} lock`",
                program()
            );
            return 2;
        }
        Err(error) => {
            eprintln!("error: cannot read {shown}: {error}");
            return 2;
        }
    };
    let review = previous.review(registry, allow_removal);
    let broken = review.violations.len();
    // Writing, what is allowed goes into the file and the summary; checking, it is listed.
    print_review(&review, check);
    if check {
        println!(
            "{shown}: {} tools locked, {broken} violation{}",
            previous.len(),
            if broken == 1 { "" } else { "s" }
        );
        return i32::from(broken > 0);
    }
    if broken > 0 {
        eprintln!(
            "error: {shown} not written: {broken} change{} would break what it published (above)",
            if broken == 1 { "" } else { "s" }
        );
        return 1;
    }
    let next = Lock::of(registry);
    let new = next
        .ids()
        .filter(|id| previous.definition(id).is_none())
        .count();
    let changed = next
        .ids()
        .filter(|id| {
            previous
                .definition(id)
                .is_some_and(|old| Some(old) != next.definition(id))
        })
        .count();
    let retired = previous
        .ids()
        .filter(|id| next.definition(id).is_none())
        .count();
    if let Err(error) = next.write(path) {
        eprintln!("error: cannot write {shown}: {error}");
        return 2;
    }
    let retired = if retired > 0 {
        format!(", {retired} retired")
    } else {
        String::new()
    };
    println!(
        "{shown}: {} tools, {new} new, {changed} changed{retired} since the previous lock",
        next.len()
    );
    0
}

fn print_review(review: &Review, notices: bool) {
    let program = program();
    for notice in review.notices.iter().filter(|_| notices) {
        println!("{}", notice.to_string().replace("<bin>", &program));
    }
    for violation in &review.violations {
        println!("{}", violation.to_string().replace("<bin>", &program));
    }
}

/// `card`: the Server Card as the server answers it, on stdout; 2 with the reason on stderr
/// when the binary has none or it cannot be served.
pub(crate) fn card(card: Option<crate::card::ServerCard>, public_url: Option<&str>) -> i32 {
    let Some(card) = card else {
        eprintln!(
            "this binary publishes no MCP Server Card: its `main` calls `oxp_runtime::serve()`; call `oxp_runtime::serve!()` to publish one filled from Cargo.toml"
        );
        return 2;
    };
    match card.with_public_url(public_url).to_json() {
        Ok(json) => {
            println!("{}", pretty(&json));
            0
        }
        Err(error) => {
            eprintln!("{error}");
            2
        }
    }
}

/// The binary's name, for the commands the lines suggest.
pub(crate) fn program() -> String {
    std::env::args()
        .next()
        .and_then(|p| {
            std::path::Path::new(&p)
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
        })
        .unwrap_or_else(|| "<bin>".into())
}

fn pretty(value: &Value) -> String {
    serde_json::to_string_pretty(value).expect("JSON serializes")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(line: &str) -> Vec<String> {
        line.split_whitespace().map(str::to_owned).collect()
    }

    #[test]
    fn the_command_line() {
        assert_eq!(parse(&[]), Ok(Command::Serve));
        assert_eq!(parse(&args("card")), Ok(Command::Card));
        assert!(parse(&args("card --format oxp")).is_err());
        assert_eq!(
            parse(&args("tools --format openai --strict")),
            Ok(Command::Tools {
                format: Format::Provider(Provider::OpenAiChat),
                strict: true
            })
        );
        assert_eq!(
            parse(&args("dispatch --format=gemini")),
            Ok(Command::Dispatch {
                provider: Provider::Gemini
            })
        );
        assert_eq!(
            parse(&args("lock --check --path=api/tools.lock --allow-removal")),
            Ok(Command::Lock {
                path: "api/tools.lock".into(),
                check: true,
                allow_removal: true
            })
        );
        assert_eq!(
            parse(&args("lock")),
            Ok(Command::Lock {
                path: "tools.lock".into(),
                check: false,
                allow_removal: false
            })
        );
        assert_eq!(
            parse(&args("check http://127.0.0.1:8000 --json r.json")),
            Ok(Command::Check(args("http://127.0.0.1:8000 --json r.json")))
        );
        assert!(matches!(
            parse(&args("install cursor --dry-run")),
            Ok(Command::Install(_))
        ));
        assert!(parse(&args("lock --path")).is_err());
        assert!(parse(&args("lock --format oxp")).is_err());
        assert!(parse(&args("tools")).is_err());
        assert!(parse(&args("dispatch --format oxp")).is_err());
        assert!(parse(&args("dispatch --format openai --strict")).is_err());
        assert!(parse(&args("mcp --strict")).is_err());
        assert_eq!(
            parse(&args("tools --format cohere")),
            Err("unknown format `cohere`".into())
        );
    }
}
