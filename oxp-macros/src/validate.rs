//! What can be checked at compile time, because it is written as a literal: the tool's identity,
//! its description and its requirements. The registry checks the same rules again at start-up
//! (for tools it did not see here, e.g. a version taken from `CARGO_PKG_VERSION`).

use proc_macro2::Span;

use crate::errors::Errors;
use crate::model::Tool;
use crate::parse::Args;

const MAX_NAME_LEN: usize = 64;
const MAX_DESCRIPTION_LEN: usize = 1024;

/// The identity the tool is registered under.
pub struct Identity {
    pub toolkit: String,
    pub name: String,
    pub version: String,
    pub timeout_ms: Option<u64>,
}

pub fn identity(args: &Args, tool: &Tool, name_span: Span, errors: &mut Errors) -> Identity {
    let toolkit = match &args.toolkit {
        Some(lit) => {
            check_segment("toolkit", &lit.value(), lit.span(), errors);
            lit.value()
        }
        None => {
            let package = std::env::var("CARGO_PKG_NAME").unwrap_or_default();
            let toolkit = pascal_case(&package);
            if !is_segment(&toolkit) {
                errors.error(
                    Span::call_site(),
                    format!("the crate name `{package}` does not make a toolkit name: set `toolkit = \"MyToolkit\"`"),
                );
            }
            toolkit
        }
    };
    let name = match &args.name {
        Some(lit) => {
            check_segment("name", &lit.value(), lit.span(), errors);
            lit.value()
        }
        None => pascal_case(tool.fn_name.to_string().trim_start_matches("r#")),
    };
    let wire_len = toolkit.len() + 1 + name.len();
    if wire_len > MAX_NAME_LEN && is_segment(&toolkit) && is_segment(&name) {
        let span = args.name.as_ref().map_or(name_span, |l| l.span());
        errors.error(
            span,
            format!(
                "the wire name `{toolkit}_{name}` is {wire_len} characters; OXP and model providers allow {MAX_NAME_LEN}: shorten the toolkit or the name"
            ),
        );
    }
    let version = match &args.version {
        Some(lit) => {
            if !is_version(&lit.value()) {
                errors.error(
                    lit.span(),
                    format!(
                        "`{}` is not a tool version: write three whole numbers, `version = \"1.0.0\"`",
                        lit.value()
                    ),
                );
            }
            lit.value()
        }
        None => {
            let version = std::env::var("CARGO_PKG_VERSION").unwrap_or_default();
            if !is_version(&version) {
                errors.error(
                    Span::call_site(),
                    format!("the crate version `{version}` is not a tool version (x.y.z only): set `version = \"1.0.0\"`"),
                );
            }
            version
        }
    };
    match &tool.description {
        None => errors.error(
            name_span,
            "a tool needs a description, which models read to decide when to call it: add a doc comment (`/// What the tool does.`) above the fn",
        ),
        Some(d) if d.chars().count() > MAX_DESCRIPTION_LEN => errors.error(
            name_span,
            format!(
                "the description is {} characters; model providers allow {MAX_DESCRIPTION_LEN}: shorten the doc comment",
                d.chars().count()
            ),
        ),
        Some(_) => {}
    }
    for secret in &args.secrets {
        if secret.value().trim().is_empty() {
            errors.error(
                secret.span(),
                "a secret needs an id: `secret = \"API_KEY\"`",
            );
        }
    }
    let mut seen_secrets: Vec<String> = Vec::new();
    for secret in &args.secrets {
        if seen_secrets.contains(&secret.value()) {
            errors.error(
                secret.span(),
                format!("the secret `{}` is listed twice", secret.value()),
            );
        }
        seen_secrets.push(secret.value());
    }
    for authorization in &args.authorization {
        if authorization.id.value().trim().is_empty() {
            errors.error(
                authorization.id.span(),
                "an authorization needs a provider id: `id = \"google\"`",
            );
        }
    }
    let timeout_ms = args
        .timeout_ms
        .as_ref()
        .and_then(|lit| match lit.base10_parse::<u64>() {
            Ok(0) | Err(_) => {
                errors.error(
                    lit.span(),
                    "`timeout_ms` is a positive number of milliseconds",
                );
                None
            }
            Ok(ms) => Some(ms),
        });
    Identity {
        toolkit,
        name,
        version,
        timeout_ms,
    }
}

fn check_segment(kind: &str, value: &str, span: Span, errors: &mut Errors) {
    if !is_segment(value) {
        let cleaned: String = value
            .split(|c: char| !c.is_ascii_alphanumeric() && c != '_')
            .map(|part| {
                let mut chars = part.chars();
                chars
                    .next()
                    .map(|c| c.to_ascii_uppercase().to_string() + chars.as_str())
                    .unwrap_or_default()
            })
            .collect();
        let hint = if cleaned.is_empty() {
            String::new()
        } else {
            format!(", e.g. `{kind} = \"{cleaned}\"`")
        };
        errors.error(
            span,
            format!(
                "the {kind} `{value}` may only have letters, digits and underscores (it is part of the id `Toolkit.Name@x.y.z`){hint}"
            ),
        );
    }
}

fn is_segment(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

fn is_version(s: &str) -> bool {
    let parts: Vec<&str> = s.split('.').collect();
    parts.len() == 3
        && parts.iter().all(|p| {
            !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()) && p.parse::<u64>().is_ok()
        })
}

/// `get_emails` → `GetEmails`, `my-crate` → `MyCrate`.
pub fn pascal_case(s: &str) -> String {
    s.split(['_', '-'])
        .map(|part| {
            let mut chars = part.chars();
            chars
                .next()
                .map(|c| c.to_uppercase().collect::<String>() + chars.as_str())
                .unwrap_or_default()
        })
        .collect()
}
