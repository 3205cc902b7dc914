//! The typed description of a tool, read from the fn and its attribute.

use proc_macro2::Span;
use syn::spanned::Spanned;
use syn::{Attribute, FnArg, Ident, Pat, ReturnType, Type};

use crate::errors::Errors;

pub struct Tool {
    pub fn_name: Ident,
    pub is_async: bool,
    /// The fn's doc comment, without its `# Arguments` section; `None` when it has none.
    pub description: Option<String>,
    pub inputs: Inputs,
    /// Where the context goes among the fn's arguments, and whether by reference.
    pub context: Option<(usize, bool)>,
    pub output: Output,
}

pub enum Inputs {
    /// Named parameters, each a field of the generated input struct.
    Params(Vec<Param>),
    /// One `Input<T>` parameter: `T` is the input object. `position` is its argument index.
    Whole { ty: Box<Type>, position: usize },
}

pub struct Param {
    pub name: Ident,
    pub ty: Type,
    pub position: usize,
    /// `///` lines on the parameter, or its entry in `# Arguments`.
    pub docs: Vec<String>,
    /// `#[serde(..)]` and `#[schemars(..)]`, passed to the generated field.
    pub passthrough: Vec<Attribute>,
}

impl Param {
    /// The parameter's name in a call's input: its `#[serde(rename = "…")]` (or
    /// `rename(deserialize = "…")`) when it has one, else its own.
    pub fn wire_name(&self) -> String {
        let mut name = self.name.to_string().trim_start_matches("r#").to_owned();
        for attr in self
            .passthrough
            .iter()
            .filter(|a| a.path().is_ident("serde"))
        {
            // Anything else serde takes is skipped; a form it cannot read leaves the name as
            // found so far, and serde itself reports the form.
            let _ = attr.parse_nested_meta(|meta| {
                if meta.path.is_ident("rename") {
                    if meta.input.peek(syn::Token![=]) {
                        name = meta.value()?.parse::<syn::LitStr>()?.value();
                    } else {
                        meta.parse_nested_meta(|inner| {
                            let value = inner.value()?.parse::<syn::LitStr>()?.value();
                            if inner.path.is_ident("deserialize") {
                                name = value;
                            }
                            Ok(())
                        })?;
                    }
                } else if meta.input.peek(syn::Token![=]) {
                    meta.value()?.parse::<syn::Expr>()?;
                } else if meta.input.peek(syn::token::Paren) {
                    meta.parse_nested_meta(|_| Ok(()))?;
                }
                Ok(())
            });
        }
        name
    }
}

pub enum Output {
    /// No return type, or `()`.
    Unit,
    /// `T`.
    Value(Type),
    /// `Result<(), E>`.
    UnitResult(Type),
    /// `Result<T, E>`.
    Result(Box<Type>, Box<Type>),
}

/// Reads the tool from `item`. Strips the attributes on parameters that only the macro
/// understands (docs, serde, schemars), since rustc rejects them on a fn's parameters.
pub fn read(item: &mut syn::ItemFn, errors: &mut Errors) -> Tool {
    check_signature(&item.sig, errors);
    let (description, argument_docs) = split_docs(&item.attrs);
    let (inputs, context) = read_inputs(&mut item.sig, &argument_docs, errors);
    let output = match &item.sig.output {
        ReturnType::Default => Output::Unit,
        ReturnType::Type(_, ty) => output(ty, errors),
    };
    Tool {
        fn_name: item.sig.ident.clone(),
        is_async: item.sig.asyncness.is_some(),
        description,
        inputs,
        context,
        output,
    }
}

/// What no tool's signature may have, whatever its parameters: each is an error on its token.
fn check_signature(sig: &syn::Signature, errors: &mut Errors) {
    if let Some(constness) = &sig.constness {
        errors.spanned(constness, "a tool cannot be a `const fn`: remove `const`");
    }
    if let Some(unsafety) = &sig.unsafety {
        errors.spanned(unsafety, "a tool cannot be an `unsafe fn`: callers could not uphold its contract; remove `unsafe` and keep the unsafe block inside");
    }
    if let Some(abi) = &sig.abi {
        errors.spanned(abi, "a tool cannot have an `extern` ABI: remove it");
    }
    if !sig.generics.params.is_empty() {
        errors.spanned(
            &sig.generics,
            "a tool cannot be generic: its input schema must be known; use concrete types (write one #[tool] fn per type)",
        );
    }
    if let Some(variadic) = &sig.variadic {
        errors.spanned(variadic, "a tool cannot be variadic");
    }
}

/// The parameters: the `ToolContext` (where, and whether by reference), and the input, either
/// plain parameters (each with its docs, from `///` or a `# Arguments` list) or one `Input<T>`.
/// Strips the parameter attributes rustc would reject, so the fn can be emitted as written.
fn read_inputs(
    sig: &mut syn::Signature,
    argument_docs: &[(String, String)],
    errors: &mut Errors,
) -> (Inputs, Option<(usize, bool)>) {
    let mut params = Vec::new();
    let mut whole = None;
    let mut context = None;
    for (position, arg) in sig.inputs.iter_mut().enumerate() {
        let arg = match arg {
            FnArg::Receiver(receiver) => {
                errors.spanned(
                    &*receiver,
                    "a tool cannot take `self`: make it a free fn, and reach shared state through a `static` or a `ToolContext`",
                );
                continue;
            }
            FnArg::Typed(arg) => arg,
        };
        let (docs, passthrough) = take_param_attrs(&mut arg.attrs, errors);
        if let Some(by_ref) = context_type(&arg.ty) {
            if context.is_some() {
                errors.spanned(
                    &arg.ty,
                    "a tool takes at most one `ToolContext`: remove this parameter and read everything from the first",
                );
            }
            context = Some((position, by_ref));
            continue;
        }
        if let Some(ty) = input_type(&arg.ty) {
            if whole.is_some() {
                errors.spanned(&arg.ty, "a tool takes at most one `Input<T>` parameter");
            }
            whole = Some((Box::new(ty), position, arg.ty.clone()));
            continue;
        }
        if let Some(reference) = find_reference(&arg.ty) {
            errors.spanned(
                reference,
                "tool parameters are read from JSON and must be owned: take `String` instead of `&str`, `Vec<T>` instead of `&[T]`",
            );
            continue;
        }
        let name = match &*arg.pat {
            Pat::Ident(pat) if pat.subpat.is_none() => pat.ident.clone(),
            other => {
                errors.spanned(
                    other,
                    "a tool parameter needs a plain name (it becomes the JSON property): write `name: Type`, or take the whole input as `Input(pattern): Input<T>`",
                );
                continue;
            }
        };
        let mut docs = docs;
        if docs.is_empty() {
            let key = name.to_string();
            let key = key.trim_start_matches("r#");
            if let Some((_, text)) = argument_docs.iter().find(|(n, _)| n == key) {
                docs.push(text.clone());
            }
        }
        params.push(Param {
            name,
            ty: (*arg.ty).clone(),
            position,
            docs,
            passthrough,
        });
    }
    let inputs = match whole {
        Some((ty, position, written)) => {
            if let Some(first) = params.first() {
                errors.spanned(
                    &first.name,
                    format!(
                        "a tool that takes `{}` takes nothing else but a `ToolContext`: move this parameter into the struct",
                        quote::quote!(#written).to_string().replace(' ', "")
                    ),
                );
            }
            Inputs::Whole { ty, position }
        }
        None => Inputs::Params(params),
    };
    (inputs, context)
}

fn output(ty: &Type, errors: &mut Errors) -> Output {
    if is_unit(ty) {
        return Output::Unit;
    }
    if let Type::ImplTrait(_) = ty {
        errors.spanned(
            ty,
            "a tool must name its return type (its output schema comes from it): replace `impl Trait` with the concrete type",
        );
        return Output::Unit;
    }
    if let Some(args) = last_segment_args(ty, "Result") {
        let types: Vec<&Type> = args
            .iter()
            .filter_map(|a| match a {
                syn::GenericArgument::Type(t) => Some(t),
                _ => None,
            })
            .collect();
        match types[..] {
            [ok, err] if is_unit(ok) => return Output::UnitResult(err.clone()),
            [ok, err] => return Output::Result(Box::new(ok.clone()), Box::new(err.clone())),
            _ => errors.spanned(
                ty,
                "write the error type out: `Result<T, ToolError>` (a `Result` alias with one parameter hides it)",
            ),
        }
    }
    Output::Value(ty.clone())
}

fn is_unit(ty: &Type) -> bool {
    matches!(ty, Type::Tuple(t) if t.elems.is_empty())
}

/// `Some(by_reference)` when `ty` is `ToolContext` or `&ToolContext` (by its last path segment).
fn context_type(ty: &Type) -> Option<bool> {
    match ty {
        Type::Reference(r) if r.mutability.is_none() => context_type(&r.elem).map(|_| true),
        Type::Path(p) if p.qself.is_none() => {
            let last = p.path.segments.last()?;
            (last.ident == "ToolContext" && last.arguments.is_none()).then_some(false)
        }
        _ => None,
    }
}

/// `Some(T)` when `ty` is `Input<T>`.
fn input_type(ty: &Type) -> Option<Type> {
    let args = last_segment_args(ty, "Input")?;
    match args.iter().collect::<Vec<_>>()[..] {
        [syn::GenericArgument::Type(t)] => Some(t.clone()),
        _ => None,
    }
}

fn last_segment_args<'a>(
    ty: &'a Type,
    name: &str,
) -> Option<&'a syn::punctuated::Punctuated<syn::GenericArgument, syn::Token![,]>> {
    let Type::Path(p) = ty else { return None };
    let last = p.path.segments.last()?;
    if last.ident != name {
        return None;
    }
    match &last.arguments {
        syn::PathArguments::AngleBracketed(a) => Some(&a.args),
        _ => None,
    }
}

/// The first `&` inside a parameter's type, if any.
fn find_reference(ty: &Type) -> Option<&Type> {
    match ty {
        Type::Reference(_) => Some(ty),
        Type::Path(p) => p.path.segments.iter().find_map(|s| match &s.arguments {
            syn::PathArguments::AngleBracketed(a) => a.args.iter().find_map(|g| match g {
                syn::GenericArgument::Type(t) => find_reference(t),
                _ => None,
            }),
            _ => None,
        }),
        Type::Tuple(t) => t.elems.iter().find_map(find_reference),
        Type::Array(a) => find_reference(&a.elem),
        Type::Slice(s) => find_reference(&s.elem),
        Type::Paren(p) => find_reference(&p.elem),
        _ => None,
    }
}

/// Removes doc, serde, schemars and `mcp_header` attributes from a parameter; returns the doc
/// lines and the attributes for the generated field (`#[mcp_header("X")]` becomes the schema
/// keyword `x-mcp-header`, through schemars).
fn take_param_attrs(
    attrs: &mut Vec<Attribute>,
    errors: &mut Errors,
) -> (Vec<String>, Vec<Attribute>) {
    let mut docs = Vec::new();
    let mut passthrough = Vec::new();
    let mut header: Option<Span> = None;
    attrs.retain(|attr| {
        if let Some(line) = doc_line(attr) {
            docs.push(line);
            false
        } else if attr.path().is_ident("serde") || attr.path().is_ident("schemars") {
            passthrough.push(attr.clone());
            false
        } else if attr.path().is_ident("mcp_header") {
            if header.is_some() {
                errors.spanned(attr, "a parameter has at most one `#[mcp_header(..)]`");
            }
            header = Some(attr.span());
            if let Some(name) = mcp_header(attr, errors) {
                passthrough.push(syn::parse_quote!(#[schemars(extend("x-mcp-header" = #name))]));
            }
            false
        } else {
            true
        }
    });
    (docs, passthrough)
}

/// The header name of `#[mcp_header("Region")]`, checked: MCP sends it as `Mcp-Param-Region`,
/// so it is a header name's token (ASCII letters, digits and hyphens).
fn mcp_header(attr: &Attribute, errors: &mut Errors) -> Option<String> {
    const USAGE: &str = "write `#[mcp_header(\"Name\")]`: MCP clients then send this parameter's value in the `Mcp-Param-Name` header too";
    let Ok(name) = attr.parse_args::<syn::LitStr>() else {
        errors.spanned(attr, USAGE);
        return None;
    };
    let value = name.value();
    if value.is_empty()
        || !value
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-')
    {
        errors.spanned(
            &name,
            format!("`{value}` cannot be a header name: use ASCII letters, digits and hyphens (`Region`, `Tenant-Id`)"),
        );
        return None;
    }
    Some(value)
}

fn doc_line(attr: &Attribute) -> Option<String> {
    if !attr.path().is_ident("doc") {
        return None;
    }
    match &attr.meta {
        syn::Meta::NameValue(nv) => match &nv.value {
            syn::Expr::Lit(syn::ExprLit {
                lit: syn::Lit::Str(s),
                ..
            }) => {
                let line = s.value();
                Some(line.strip_prefix(' ').unwrap_or(&line).to_owned())
            }
            _ => None,
        },
        _ => None,
    }
}

/// Splits the fn's docs into the description and the `# Arguments` entries
/// (`* \`a\` - text`, `- \`a\`: text`).
fn split_docs(attrs: &[Attribute]) -> (Option<String>, Vec<(String, String)>) {
    let lines: Vec<String> = attrs.iter().filter_map(doc_line).collect();
    let mut description = Vec::new();
    let mut arguments: Vec<(String, String)> = Vec::new();
    let mut in_arguments = false;
    for line in &lines {
        let trimmed = line.trim();
        if let Some(heading) = trimmed.strip_prefix('#') {
            in_arguments = heading
                .trim_start_matches('#')
                .trim()
                .eq_ignore_ascii_case("arguments");
            if in_arguments {
                continue;
            }
        }
        if !in_arguments {
            description.push(line.as_str());
            continue;
        }
        let entry = trimmed
            .strip_prefix("* ")
            .or_else(|| trimmed.strip_prefix("- "));
        match entry
            .and_then(|e| e.strip_prefix('`'))
            .and_then(|e| e.split_once('`'))
        {
            Some((name, rest)) => {
                let text = rest
                    .trim_start()
                    .trim_start_matches(['-', ':', '–', '—'])
                    .trim();
                arguments.push((name.to_owned(), text.to_owned()));
            }
            None if !trimmed.is_empty() => {
                // A continuation line of the previous entry.
                if let Some((_, text)) = arguments.last_mut() {
                    text.push(' ');
                    text.push_str(trimmed);
                }
            }
            None => {}
        }
    }
    let description = description.join("\n").trim().to_owned();
    ((!description.is_empty()).then_some(description), arguments)
}

/// The span of the fn's name, where "add a doc comment" points.
pub fn name_span(item: &syn::ItemFn) -> Span {
    item.sig.ident.span()
}
