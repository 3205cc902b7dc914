//! The strict grammar of `#[tool(...)]`'s arguments.
//!
//! ```text
//! toolkit = "Calculator"      name = "Add"      version = "1.0.0"      wire_name = "add"
//! user_id                     secret = "TWILIO_API_KEY"   (repeatable)
//! authorization(id = "google", scopes = ["…", "…"])        (repeatable)
//! timeout_ms = 30000
//! title = "Add numbers"       read_only   destructive[ = false]   idempotent   open_world[ = false]
//! tags = ["math", "billing"]  example = r#"{"a": 1}"#  (repeatable)   deprecated = "use …"
//! confirm = "Delete {path}?"
//! always_load                 search_hint = "pdf invoice receipt"
//! ```

use proc_macro2::TokenStream;
use syn::meta::ParseNestedMeta;
use syn::parse::Parser;
use syn::spanned::Spanned;
use syn::{LitInt, LitStr, Token};

use crate::errors::Errors;

pub const KEYS: &[&str] = &[
    "toolkit",
    "name",
    "wire_name",
    "version",
    "user_id",
    "secret",
    "authorization",
    "scopes",
    "timeout_ms",
    "title",
    "read_only",
    "destructive",
    "idempotent",
    "open_world",
    "tags",
    "example",
    "deprecated",
    "always_load",
    "search_hint",
    "confirm",
    "cannot_ask",
    "task",
    "crate",
];

const AUTHORIZATION_KEYS: &[&str] = &["id", "scopes"];

#[derive(Default)]
pub struct Args {
    pub toolkit: Option<LitStr>,
    pub name: Option<LitStr>,
    /// `wire_name = "greet"`: the exact name on the wire instead of `Toolkit_Name`.
    pub wire_name: Option<LitStr>,
    pub version: Option<LitStr>,
    pub user_id: bool,
    pub secrets: Vec<LitStr>,
    pub authorization: Vec<Authorization>,
    /// `scopes = ["files:write"]`: what a caller's OAuth token must grant.
    pub scopes: Vec<LitStr>,
    pub timeout_ms: Option<LitInt>,
    /// `crate = "path"`: where `oxp_runtime` is, for a crate that renamed the dependency.
    pub krate: Option<syn::Path>,
    pub title: Option<LitStr>,
    pub read_only: Option<Flag>,
    pub destructive: Option<Flag>,
    pub idempotent: Option<Flag>,
    pub open_world: Option<Flag>,
    pub tags: Vec<LitStr>,
    pub examples: Vec<LitStr>,
    pub deprecated: Option<LitStr>,
    /// `always_load`: hosts that defer tools load this one up front.
    pub always_load: bool,
    /// `search_hint = "pdf invoice"`: words a host's tool search matches.
    pub search_hint: Option<LitStr>,
    /// `confirm = "Delete {path}?"`: the question the user must say yes to first.
    pub confirm: Option<LitStr>,
    /// `cannot_ask = "hide"`: what the tool does for a caller that cannot answer.
    pub cannot_ask: Option<LitStr>,
    /// `task = "optional"`: whether the tool may run as an MCP task.
    pub task: Option<LitStr>,
}

/// A behaviour hint: `read_only` (true) or `read_only = false`, with where it was written.
pub struct Flag {
    pub value: bool,
    pub span: proc_macro2::Span,
}

pub struct Authorization {
    pub id: LitStr,
    pub scopes: Vec<LitStr>,
}

/// Parses the arguments, recording every problem in `errors` and keeping what was readable.
pub fn args(tokens: TokenStream, errors: &mut Errors) -> Args {
    let mut args = Args::default();
    let mut seen: Vec<String> = Vec::new();
    let parser = syn::meta::parser(|meta| {
        let Some(key) = meta.path.get_ident().map(ToString::to_string) else {
            errors.spanned(&meta.path, unknown_key_message("this path", KEYS));
            return skip_value(&meta);
        };
        if given_twice(&meta, &key, &mut seen, errors) {
            return skip_value(&meta);
        }
        arg(&mut args, &meta, &key, errors)
    });
    if let Err(error) = parser.parse2(tokens) {
        errors.push(error);
    }
    args
}

/// Whether `key` was given before (reported, then): every key but `secret`, `authorization` and
/// `example` is given once.
fn given_twice(
    meta: &ParseNestedMeta,
    key: &str,
    seen: &mut Vec<String>,
    errors: &mut Errors,
) -> bool {
    let repeatable = matches!(key, "secret" | "authorization" | "example");
    if KEYS.contains(&key) && !repeatable {
        if seen.iter().any(|k| k == key) {
            errors.spanned(&meta.path, format!("duplicate key `{key}`: give it once"));
            return true;
        }
        seen.push(key.to_owned());
    }
    false
}

/// One argument, `key` with its value, into `args`; an unknown key is reported with the
/// closest known one.
fn arg(args: &mut Args, meta: &ParseNestedMeta, key: &str, errors: &mut Errors) -> syn::Result<()> {
    match key {
        "toolkit" => args.toolkit = string(meta, key, "\"Calculator\"", errors)?,
        "name" => args.name = string(meta, key, "\"Add\"", errors)?,
        "wire_name" => args.wire_name = string(meta, key, "\"greet\"", errors)?,
        "version" => args.version = string(meta, key, "\"1.0.0\"", errors)?,
        "secret" => {
            if let Some(secret) = string(meta, key, "\"TWILIO_API_KEY\"", errors)? {
                args.secrets.push(secret);
            }
        }
        "user_id" => {
            args.user_id = bare_flag(
                meta,
                "`user_id` is a flag and takes no value: write `user_id` to require a user id",
                errors,
            )?;
        }
        "always_load" => {
            args.always_load = bare_flag(
                meta,
                "`always_load` is a flag and takes no value: write `always_load` to have hosts that defer tools load this one up front, or leave it out to let them defer it",
                errors,
            )?;
        }
        "search_hint" => {
            args.search_hint = string(meta, key, "\"pdf invoice receipt\"", errors)?;
        }
        "timeout_ms" => args.timeout_ms = timeout_ms(meta, errors)?,
        "authorization" => {
            if let Some(authorization) = authorization(meta, errors)? {
                args.authorization.push(authorization);
            }
        }
        "title" => args.title = string(meta, key, "\"Add numbers\"", errors)?,
        "confirm" => args.confirm = string(meta, key, "\"Delete {path}?\"", errors)?,
        "cannot_ask" => args.cannot_ask = string(meta, key, "\"hide\"", errors)?,
        "task" => args.task = string(meta, key, "\"optional\"", errors)?,
        "deprecated" => {
            args.deprecated = string(meta, key, "\"use Calculator.Add@2\"", errors)?;
        }
        "example" => {
            if let Some(example) = string(meta, key, "r#\"{\"a\": 1}\"#", errors)? {
                args.examples.push(example);
            }
        }
        "read_only" => args.read_only = flag(meta, key, errors)?,
        "destructive" => args.destructive = flag(meta, key, errors)?,
        "idempotent" => args.idempotent = flag(meta, key, errors)?,
        "open_world" => args.open_world = flag(meta, key, errors)?,
        "tags" => {
            args.tags = string_list(meta, "tags", "`tags = [\"math\", \"billing\"]`", errors)?
        }
        "scopes" => {
            args.scopes = string_list(meta, "scopes", "`scopes = [\"files:write\"]`", errors)?;
        }
        "crate" => args.krate = crate_path(meta, key, errors)?,
        _ => {
            errors.spanned(&meta.path, unknown_key_message(&format!("`{key}`"), KEYS));
            return skip_value(meta);
        }
    }
    Ok(())
}

/// A key that is a flag and nothing more (`user_id`): true, or `problem` reported when a
/// value follows it.
fn bare_flag(meta: &ParseNestedMeta, problem: &str, errors: &mut Errors) -> syn::Result<bool> {
    if meta.input.peek(Token![=]) || meta.input.peek(syn::token::Paren) {
        errors.spanned(&meta.path, problem);
        skip_value(meta)?;
        return Ok(false);
    }
    Ok(true)
}

/// `timeout_ms = 30000`: a whole number of milliseconds.
fn timeout_ms(meta: &ParseNestedMeta, errors: &mut Errors) -> syn::Result<Option<LitInt>> {
    if !meta.input.peek(Token![=]) {
        errors.spanned(
            &meta.path,
            "`timeout_ms` takes a number: `timeout_ms = 30000`",
        );
        skip_value(meta)?;
        return Ok(None);
    }
    let value = meta.value()?;
    if value.peek(LitInt) {
        return Ok(Some(value.parse()?));
    }
    let expr: syn::Expr = value.parse()?;
    errors.spanned(
        expr,
        "`timeout_ms` takes a whole number of milliseconds: `timeout_ms = 30000`",
    );
    Ok(None)
}

/// `crate = "my_oxp"`: the path the runtime is reached by.
fn crate_path(
    meta: &ParseNestedMeta,
    key: &str,
    errors: &mut Errors,
) -> syn::Result<Option<syn::Path>> {
    let Some(path) = string(meta, key, "\"my_oxp\"", errors)? else {
        return Ok(None);
    };
    match path.parse::<syn::Path>() {
        Ok(parsed) => Ok(Some(parsed)),
        Err(_) => {
            errors.spanned(
                &path,
                "`crate` takes the path the runtime is reached by: `crate = \"my_oxp\"` after `my_oxp = { package = \"oxp-runtime\" }`",
            );
            Ok(None)
        }
    }
}

/// `key = "string"`; anything else is reported with an example of what to write.
pub(crate) fn string(
    meta: &ParseNestedMeta,
    key: &str,
    example: &str,
    errors: &mut Errors,
) -> syn::Result<Option<LitStr>> {
    if !meta.input.peek(Token![=]) {
        errors.spanned(
            &meta.path,
            format!("`{key}` takes a string: write `{key} = {example}`"),
        );
        skip_value(meta)?;
        return Ok(None);
    }
    let value = meta.value()?;
    if value.peek(LitStr) {
        return value.parse().map(Some);
    }
    let expr: syn::Expr = value.parse()?;
    errors.spanned(
        expr,
        format!("`{key}` takes a string literal: write `{key} = {example}`"),
    );
    Ok(None)
}

/// A hint: the bare key for `true`, or `key = true` / `key = false`.
fn flag(meta: &ParseNestedMeta, key: &str, errors: &mut Errors) -> syn::Result<Option<Flag>> {
    let span = meta.path.span();
    if !meta.input.peek(Token![=]) {
        if meta.input.peek(syn::token::Paren) {
            errors.spanned(
                &meta.path,
                format!("`{key}` is a flag: write `{key}` or `{key} = false`"),
            );
            skip_value(meta)?;
            return Ok(None);
        }
        return Ok(Some(Flag { value: true, span }));
    }
    let value = meta.value()?;
    if value.peek(syn::LitBool) {
        let lit: syn::LitBool = value.parse()?;
        return Ok(Some(Flag {
            value: lit.value,
            span,
        }));
    }
    let expr: syn::Expr = value.parse()?;
    errors.spanned(
        expr,
        format!("`{key}` takes `true` or `false`: write `{key}` or `{key} = false`"),
    );
    Ok(None)
}

/// `tags = ["math", "billing"]`, `scopes = ["files:write"]`: a list of strings.
pub(crate) fn string_list(
    meta: &ParseNestedMeta,
    key: &str,
    example: &str,
    errors: &mut Errors,
) -> syn::Result<Vec<LitStr>> {
    if !meta.input.peek(Token![=]) {
        errors.spanned(
            &meta.path,
            format!("`{key}` takes a list of strings: write {example}"),
        );
        skip_value(meta)?;
        return Ok(Vec::new());
    }
    let value = meta.value()?;
    if !value.peek(syn::token::Bracket) {
        let expr: syn::Expr = value.parse()?;
        errors.spanned(
            expr,
            format!("`{key}` takes a list of strings: write {example}"),
        );
        return Ok(Vec::new());
    }
    let content;
    syn::bracketed!(content in value);
    let list = content.parse_terminated(|p| p.parse::<LitStr>(), Token![,])?;
    Ok(list.into_iter().collect())
}

/// `authorization(id = "google", scopes = ["a", "b"])`
fn authorization(
    meta: &ParseNestedMeta,
    errors: &mut Errors,
) -> syn::Result<Option<Authorization>> {
    let example = "`authorization(id = \"google\", scopes = [\"https://…\"])`";
    if !meta.input.peek(syn::token::Paren) {
        errors.spanned(
            &meta.path,
            format!("`authorization` takes a list: write {example}"),
        );
        skip_value(meta)?;
        return Ok(None);
    }
    let mut id = None;
    let mut scopes = Vec::new();
    meta.parse_nested_meta(|inner| {
        let key = inner
            .path
            .get_ident()
            .map(ToString::to_string)
            .unwrap_or_default();
        match key.as_str() {
            "id" => id = string(&inner, "id", "\"google\"", errors)?,
            "scopes" => {
                let value = inner.value()?;
                let content;
                syn::bracketed!(content in value);
                let list = content.parse_terminated(|p| p.parse::<LitStr>(), Token![,])?;
                scopes.extend(list);
            }
            _ => {
                errors.spanned(
                    &inner.path,
                    unknown_key_message(&format!("`{key}`"), AUTHORIZATION_KEYS),
                );
                return skip_value(&inner);
            }
        }
        Ok(())
    })?;
    match id {
        Some(id) => Ok(Some(Authorization { id, scopes })),
        None => {
            errors.spanned(
                &meta.path,
                format!("`authorization` needs an `id`: write {example}"),
            );
            Ok(None)
        }
    }
}

/// Consumes whatever follows a key we reject, so parsing can go on to report the next problem.
pub(crate) fn skip_value(meta: &ParseNestedMeta) -> syn::Result<()> {
    if meta.input.peek(Token![=]) {
        meta.value()?.parse::<syn::Expr>()?;
    } else if meta.input.peek(syn::token::Paren) {
        let _content;
        syn::parenthesized!(_content in meta.input);
        let _: TokenStream = _content.parse()?;
    }
    Ok(())
}

pub(crate) fn unknown_key_message(what: &str, keys: &[&str]) -> String {
    let key = what.trim_matches('`');
    let suggestion = keys
        .iter()
        .map(|k| (distance(key, k), k))
        .filter(|(d, k)| *d <= k.len() / 3 + 1)
        .min()
        .map(|(_, k)| format!("; did you mean `{k}`?"))
        .unwrap_or_default();
    format!(
        "unknown key {what}, expected one of {}{suggestion}",
        keys.iter()
            .map(|k| format!("`{k}`"))
            .collect::<Vec<_>>()
            .join(", ")
    )
}

/// Levenshtein distance, for "did you mean".
fn distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut previous = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let substitute = previous + usize::from(ca != *cb);
            previous = row[j + 1];
            row[j + 1] = substitute.min(row[j] + 1).min(previous + 1);
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;
    use quote::quote;

    fn parse(tokens: TokenStream) -> (Args, Vec<String>) {
        let mut errors = Errors::default();
        let args = args(tokens, &mut errors);
        (args, errors.messages())
    }

    #[test]
    fn every_key_is_read() {
        let (args, errors) = parse(quote!(
            toolkit = "Gmail",
            name = "Get",
            version = "1.2.0",
            user_id,
            secret = "A",
            secret = "B",
            timeout_ms = 500,
            authorization(id = "google", scopes = ["s1", "s2"])
        ));
        assert!(errors.is_empty(), "{errors:?}");
        assert_eq!(args.toolkit.unwrap().value(), "Gmail");
        assert_eq!(args.name.unwrap().value(), "Get");
        assert_eq!(args.version.unwrap().value(), "1.2.0");
        assert!(args.user_id);
        let secrets: Vec<String> = args.secrets.iter().map(LitStr::value).collect();
        assert_eq!(secrets, ["A", "B"]);
        assert_eq!(args.timeout_ms.unwrap().base10_parse::<u64>().unwrap(), 500);
        assert_eq!(args.authorization[0].id.value(), "google");
        assert_eq!(args.authorization[0].scopes.len(), 2);
    }

    #[test]
    fn every_hint_is_read() {
        let (args, errors) = parse(quote!(
            title = "Add numbers",
            read_only,
            destructive = false,
            idempotent = true,
            open_world,
            tags = ["math", "billing"],
            example = r#"{"a": 1}"#,
            example = r#"{"a": 2}"#,
            deprecated = "use Calculator.Add@2"
        ));
        assert!(errors.is_empty(), "{errors:?}");
        assert_eq!(args.title.unwrap().value(), "Add numbers");
        let flags = [
            &args.read_only,
            &args.destructive,
            &args.idempotent,
            &args.open_world,
        ]
        .map(|f| f.as_ref().map(|f| f.value));
        assert_eq!(flags, [Some(true), Some(false), Some(true), Some(true)]);
        assert_eq!(args.tags.len(), 2);
        assert_eq!(args.examples.len(), 2, "`example` repeats");
        assert_eq!(args.deprecated.unwrap().value(), "use Calculator.Add@2");
        let (_, errors) = parse(quote!(read_only, read_only));
        assert!(
            errors[0].contains("duplicate key `read_only`"),
            "{errors:?}"
        );
    }

    #[test]
    fn every_problem_is_reported_and_the_rest_still_read() {
        let (args, errors) = parse(quote!(
            toolkt = "X",
            version = "1.0.0",
            version = "2.0.0",
            name = 5
        ));
        assert_eq!(errors.len(), 3, "{errors:?}");
        assert!(errors[0].contains("unknown key `toolkt`"), "{}", errors[0]);
        assert!(
            errors[0].contains("did you mean `toolkit`?"),
            "{}",
            errors[0]
        );
        assert!(
            errors.iter().any(|e| e.contains("duplicate key `version`")),
            "{errors:?}"
        );
        assert_eq!(
            args.version.unwrap().value(),
            "1.0.0",
            "the first one is kept"
        );
    }

    #[test]
    fn suggestions_only_for_near_misses() {
        assert!(unknown_key_message("`verison`", KEYS).contains("did you mean `version`?"));
        assert!(!unknown_key_message("`colour`", KEYS).contains("did you mean"));
        assert_eq!(distance("kitten", "sitting"), 3);
        assert_eq!(distance("", "abc"), 3);
    }
}
