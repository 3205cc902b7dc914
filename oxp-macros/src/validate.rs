//! The tool's identity, in three steps: read what the attribute says, default what it leaves
//! out (the crate's name and version, the fn's name), then check the result by the rules in
//! [`rules`](crate::rules), which the registry checks again at start-up in the same words.

use proc_macro2::Span;

use crate::errors::Errors;
use crate::model::Tool;
use crate::parse::Args;
use crate::rules;

/// The identity the tool is registered under.
pub struct Identity {
    pub toolkit: String,
    pub name: String,
    pub version: String,
    pub timeout_ms: Option<u64>,
}

/// A value of the identity and where an error about it points: the literal the user wrote, or
/// the place a default came from (and how to override it).
struct Field {
    value: String,
    origin: Origin,
}

enum Origin {
    Written(Span),
    /// A default: what it was made from (`"the crate name `x`"`), pointed at `span`.
    Default {
        from: String,
        span: Span,
    },
}

/// Reads, defaults and checks; every problem goes to `errors`, and the identity is returned
/// whole either way (the fallback expansion needs none of it, but the checks run once).
pub fn identity(args: &Args, tool: &Tool, name_span: Span, errors: &mut Errors) -> Identity {
    let (toolkit, name, version) = (toolkit(args), name(args, tool, name_span), version(args));
    let exact = args.wire_name.is_some();
    check(&toolkit, &name, &version, exact, name_span, errors);
    if let Some(wire_name) = &args.wire_name {
        if let Some(problem) = rules::exact_wire_name_problem(&wire_name.value()) {
            errors.error(wire_name.span(), problem);
        }
    }
    check_description(tool, name_span, errors);
    check_requirements(args, errors);
    check_hints(args, errors);
    check_confirm(args, tool, errors);
    check_cannot_ask(args, errors);
    check_task(args, errors);
    Identity {
        toolkit: toolkit.value,
        name: name.value,
        version: version.value,
        timeout_ms: timeout_ms(args, errors),
    }
}

fn written(lit: &syn::LitStr) -> Field {
    Field {
        value: lit.value(),
        origin: Origin::Written(lit.span()),
    }
}

fn toolkit(args: &Args) -> Field {
    args.toolkit.as_ref().map_or_else(
        || {
            let package = std::env::var("CARGO_PKG_NAME").unwrap_or_default();
            Field {
                value: rules::pascal_case(&package),
                origin: Origin::Default {
                    from: format!("the crate name `{package}`"),
                    span: Span::call_site(),
                },
            }
        },
        written,
    )
}

fn name(args: &Args, tool: &Tool, name_span: Span) -> Field {
    args.name.as_ref().map_or_else(
        || {
            let fn_name = tool.fn_name.to_string();
            let fn_name = fn_name.trim_start_matches("r#");
            Field {
                value: rules::pascal_case(fn_name),
                origin: Origin::Default {
                    from: format!("the fn name `{fn_name}`"),
                    span: name_span,
                },
            }
        },
        written,
    )
}

fn version(args: &Args) -> Field {
    args.version.as_ref().map_or_else(
        || {
            let version = std::env::var("CARGO_PKG_VERSION").unwrap_or_default();
            Field {
                origin: Origin::Default {
                    from: format!("the crate version `{version}`"),
                    span: Span::call_site(),
                },
                value: version,
            }
        },
        written,
    )
}

fn check(
    toolkit: &Field,
    name: &Field,
    version: &Field,
    exact: bool,
    name_span: Span,
    errors: &mut Errors,
) {
    let segments = [("toolkit", toolkit), ("name", name)].map(|(kind, field)| {
        let problem = rules::segment_problem(kind, &field.value);
        report(field, problem.as_deref(), kind, errors)
    });
    // A wire name made of broken segments has already been reported; an exact one is checked
    // on its own.
    if segments.iter().all(|ok| *ok) && !exact {
        if let Some(problem) = rules::wire_name_problem(&toolkit.value, &name.value) {
            let span = match name.origin {
                Origin::Written(span) => span,
                Origin::Default { .. } => name_span,
            };
            errors.error(span, problem);
        }
    }
    let problem = rules::version_problem(&version.value);
    report(version, problem.as_deref(), "version", errors);
}

/// Reports `problem` of `field`: at the literal, or, for a default, saying what it was made
/// from and which key to set instead. Whether the field is sound.
fn report(field: &Field, problem: Option<&str>, key: &str, errors: &mut Errors) -> bool {
    let Some(problem) = problem else {
        return true;
    };
    match &field.origin {
        Origin::Written(span) => errors.error(*span, problem),
        Origin::Default { from, span } => errors.error(
            *span,
            format!("{problem} (the {key} comes from {from}: #[tool] sets no `{key}`)"),
        ),
    }
    false
}

fn check_description(tool: &Tool, name_span: Span, errors: &mut Errors) {
    let description = tool.description.as_deref().unwrap_or_default();
    if let Some(problem) = rules::description_problem(description) {
        errors.error(name_span, problem);
    }
}

fn check_requirements(args: &Args, errors: &mut Errors) {
    let mut seen: Vec<String> = Vec::new();
    for secret in &args.secrets {
        let id = secret.value();
        if id.trim().is_empty() {
            errors.error(
                secret.span(),
                "a secret needs an id: `secret = \"API_KEY\"`",
            );
        } else if seen.contains(&id) {
            errors.error(secret.span(), format!("the secret `{id}` is listed twice"));
        }
        seen.push(id);
    }
    for authorization in &args.authorization {
        if authorization.id.value().trim().is_empty() {
            errors.error(
                authorization.id.span(),
                "an authorization needs a provider id: `id = \"google\"`",
            );
        }
    }
}

/// The behaviour hints agree with each other, and tags, examples and texts are usable.
fn check_hints(args: &Args, errors: &mut Errors) {
    if let (Some(read_only), Some(destructive)) = (&args.read_only, &args.destructive) {
        if read_only.value && destructive.value {
            errors.error(
                destructive.span,
                "a `read_only` tool cannot be `destructive`: it changes nothing it could destroy; remove `destructive`, or `read_only` if the tool does change things",
            );
        }
    }
    let mut seen: Vec<String> = Vec::new();
    for tag in &args.tags {
        let value = tag.value();
        let usable = !value.is_empty()
            && !value.starts_with('-')
            && value
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
        if !usable {
            errors.error(
                tag.span(),
                format!("the tag `{value}` may only have letters, digits, `_` and `-` (not first), so that `OXP_TOOLS=tag:{value}` selects it: e.g. `tags = [\"billing\"]`"),
            );
        } else if seen.contains(&value) {
            errors.error(tag.span(), format!("the tag `{value}` is listed twice"));
        }
        seen.push(value);
    }
    check_scopes(&args.scopes, errors);
    for example in &args.examples {
        match serde_json::from_str::<serde_json::Value>(&example.value()) {
            Err(error) => errors.error(
                example.span(),
                format!("this example is not JSON ({error}): write the input object, e.g. `example = r#\"{{\"a\": 1, \"b\": 2}}\"#`"),
            ),
            Ok(value) if !value.is_object() => errors.error(
                example.span(),
                "an example is the tool's input, a JSON object: e.g. `example = r#\"{\"a\": 1, \"b\": 2}\"#`",
            ),
            Ok(_) => {}
        }
    }
    if let Some(hint) = &args.search_hint {
        if let Some(problem) = rules::search_hint_problem(&hint.value()) {
            errors.error(hint.span(), problem);
        }
    }
    for (key, text) in [("title", &args.title), ("deprecated", &args.deprecated)] {
        if let Some(text) = text.as_ref().filter(|t| t.value().trim().is_empty()) {
            errors.error(
                text.span(),
                format!("`{key}` needs a text: e.g. `{key} = \"…\"`"),
            );
        }
    }
}

/// `confirm = "Delete {path}?"`: a text, with braces that match, naming only parameters (an
/// `Input<T>`'s fields are checked when the registry is built).
fn check_confirm(args: &Args, tool: &Tool, errors: &mut Errors) {
    let Some(confirm) = &args.confirm else {
        return;
    };
    let template = confirm.value();
    if template.trim().is_empty() {
        errors.error(
            confirm.span(),
            "`confirm` needs the question to ask: e.g. `confirm = \"Delete {path}?\"`",
        );
        return;
    }
    let names = match rules::placeholders(&template) {
        Ok(names) => names,
        Err(problem) => return errors.error(confirm.span(), problem),
    };
    let crate::model::Inputs::Params(params) = &tool.inputs else {
        return;
    };
    // The names a call's input has: a renamed parameter is named as serde reads it.
    let known: Vec<String> = params.iter().map(crate::model::Param::wire_name).collect();
    for name in names {
        if !known.iter().any(|k| k == name) {
            errors.error(
                confirm.span(),
                format!(
                    "`{{{name}}}` is not a parameter of this tool: name one of {}",
                    if known.is_empty() {
                        "its parameters (it has none)".to_owned()
                    } else {
                        known
                            .iter()
                            .map(|k| format!("`{{{k}}}`"))
                            .collect::<Vec<_>>()
                            .join(", ")
                    }
                ),
            );
        }
    }
}

/// `cannot_ask = "…"`: one of the words it takes; `relay` relays a `confirm` question, so it
/// needs one.
fn check_cannot_ask(args: &Args, errors: &mut Errors) {
    let Some(choice) = &args.cannot_ask else {
        return;
    };
    let value = choice.value();
    if !rules::CANNOT_ASK.contains(&value.as_str()) {
        errors.error(
            choice.span(),
            format!(
                "`cannot_ask` is one of {}: what the tool does for a caller that cannot answer \
                 its questions",
                rules::CANNOT_ASK
                    .iter()
                    .map(|w| format!("\"{w}\""))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        );
    } else if value == "relay" && args.confirm.is_none() {
        errors.error(
            choice.span(),
            "`cannot_ask = \"relay\"` relays the tool's `confirm` question through the model: \
             add `confirm = \"…\"`, or choose \"refuse\" or \"hide\"",
        );
    }
}

/// `task = "…"`: one of the words it takes.
fn check_task(args: &Args, errors: &mut Errors) {
    let Some(choice) = &args.task else {
        return;
    };
    if !rules::TASK.contains(&choice.value().as_str()) {
        errors.error(
            choice.span(),
            "`task` is \"optional\" (a task for a client that declares MCP's tasks extension, \
             a plain call for others) or \"required\" (only as a task over MCP); leave it out \
             for a tool that never runs as a task",
        );
    }
}

fn timeout_ms(args: &Args, errors: &mut Errors) -> Option<u64> {
    let lit = args.timeout_ms.as_ref()?;
    match lit.base10_parse::<u64>() {
        Ok(ms) if ms > 0 => Some(ms),
        _ => {
            errors.error(
                lit.span(),
                "`timeout_ms` is a positive number of milliseconds",
            );
            None
        }
    }
}

/// `scopes = [..]` of a tool, a resource or a prompt: each an RFC 6749 scope token, none twice.
pub fn check_scopes(scopes: &[syn::LitStr], errors: &mut Errors) {
    let mut seen: Vec<String> = Vec::new();
    for scope in scopes {
        let value = scope.value();
        if let Some(problem) = crate::rules::scope_problem(&value) {
            errors.error(scope.span(), problem);
        } else if seen.contains(&value) {
            errors.error(scope.span(), format!("the scope `{value}` is listed twice"));
        }
        seen.push(value);
    }
}
