//! `#[resource]` and `#[prompt]`: the same reading of the fn as `#[tool]`'s ([`model`]), a
//! grammar of their own, and glue of the tool's shape (one small fn the pipeline runs as it
//! runs a tool, and a descriptor `inventory` collects).
//!
//! ```text
//! #[resource(uri = "file:///logs/{date}", name = "log", title = "Server log",
//!            mime_type = "text/plain", scopes = ["logs:read"], timeout_ms = 5000, crate = "my_oxp")]
//! #[prompt(name = "review", title = "Code review", scopes = ["code:read"], timeout_ms = 5000,
//!          crate = "my_oxp")]
//! ```
//! A parameter may carry `#[complete(path::to::fn)]`, a `fn(&str) -> Vec<String>` offering
//! values for what the user typed.

use proc_macro2::{Span, TokenStream};
use quote::{format_ident, quote, quote_spanned};
use syn::parse::Parser;
use syn::spanned::Spanned;
use syn::{FnArg, LitInt, LitStr};

use crate::errors::Errors;
use crate::model::{self, Inputs};
use crate::parse::{skip_value, string, string_list, unknown_key_message};

#[derive(Clone, Copy, PartialEq)]
pub enum Kind {
    Resource,
    Prompt,
}

impl Kind {
    fn attribute(self) -> &'static str {
        match self {
            Kind::Resource => "resource",
            Kind::Prompt => "prompt",
        }
    }

    fn keys(self) -> &'static [&'static str] {
        match self {
            Kind::Resource => &[
                "uri",
                "name",
                "title",
                "mime_type",
                "scopes",
                "timeout_ms",
                "crate",
            ],
            Kind::Prompt => &["name", "title", "scopes", "timeout_ms", "crate"],
        }
    }
}

#[derive(Default)]
struct Args {
    uri: Option<LitStr>,
    name: Option<LitStr>,
    title: Option<LitStr>,
    mime_type: Option<LitStr>,
    /// `scopes = ["files:read"]`: what a caller's OAuth token must grant, as a tool's.
    scopes: Vec<LitStr>,
    timeout_ms: Option<u64>,
    krate: Option<syn::Path>,
}

fn args(kind: Kind, tokens: TokenStream, errors: &mut Errors) -> Args {
    let mut args = Args::default();
    let mut seen: Vec<String> = Vec::new();
    let keys = kind.keys();
    let parser = syn::meta::parser(|meta| {
        let Some(key) = meta.path.get_ident().map(ToString::to_string) else {
            errors.spanned(&meta.path, unknown_key_message("this path", keys));
            return skip_value(&meta);
        };
        if !keys.contains(&key.as_str()) {
            errors.spanned(&meta.path, unknown_key_message(&format!("`{key}`"), keys));
            return skip_value(&meta);
        }
        if seen.contains(&key) {
            errors.spanned(&meta.path, format!("duplicate key `{key}`: give it once"));
            return skip_value(&meta);
        }
        seen.push(key.clone());
        match key.as_str() {
            "uri" => args.uri = string(&meta, &key, "\"file:///logs/{date}\"", errors)?,
            "name" => args.name = string(&meta, &key, "\"review\"", errors)?,
            "title" => args.title = string(&meta, &key, "\"Code review\"", errors)?,
            "mime_type" => args.mime_type = string(&meta, &key, "\"text/markdown\"", errors)?,
            "scopes" => {
                args.scopes = string_list(&meta, "scopes", "`scopes = [\"files:read\"]`", errors)?;
            }
            "timeout_ms" => {
                let value = meta.value()?;
                let lit: LitInt = value.parse()?;
                match lit.base10_parse::<u64>() {
                    Ok(ms) if ms > 0 => args.timeout_ms = Some(ms),
                    _ => errors.spanned(&lit, "`timeout_ms` is a positive number of milliseconds"),
                }
            }
            _ => {
                // `crate`
                if let Some(path) = string(&meta, &key, "\"my_oxp\"", errors)? {
                    match path.parse::<syn::Path>() {
                        Ok(parsed) => args.krate = Some(parsed),
                        Err(_) => errors.spanned(
                            &path,
                            "`crate` takes the path the runtime is reached by: `crate = \"my_oxp\"`",
                        ),
                    }
                }
            }
        }
        Ok(())
    });
    if let Err(error) = parser.parse2(tokens) {
        errors.push(error);
    }
    args
}

/// `#[complete(path)]` on parameters, taken off them (rustc rejects unknown attributes on
/// parameters): each parameter's completion fn, by position.
fn take_completions(item: &mut syn::ItemFn, errors: &mut Errors) -> Vec<Option<syn::Path>> {
    let mut found = Vec::new();
    for arg in &mut item.sig.inputs {
        let FnArg::Typed(arg) = arg else {
            found.push(None);
            continue;
        };
        let mut path = None;
        arg.attrs.retain(|attr| {
            if !attr.path().is_ident("complete") {
                return true;
            }
            match attr.parse_args::<syn::Path>() {
                Ok(parsed) if path.is_none() => path = Some(parsed),
                Ok(_) => errors.spanned(attr, "a parameter has at most one `#[complete(..)]`"),
                Err(_) => errors.spanned(
                    attr,
                    "write `#[complete(fn_name)]`, naming a `fn(&str) -> Vec<String>` that offers values for what the user typed",
                ),
            }
            false
        });
        found.push(path);
    }
    found
}

/// The `{names}` of a URI template, each with its problem when the braces do not pair.
fn template_variables(uri: &LitStr, errors: &mut Errors) -> Vec<String> {
    let text = uri.value();
    let mut names = Vec::new();
    let mut rest = text.as_str();
    while let Some(open) = rest.find('{') {
        let Some(close) = rest[open..].find('}') else {
            errors.spanned(uri, format!("`{{` without its `}}` in `{text}`"));
            return names;
        };
        names.push(rest[open + 1..open + close].to_owned());
        rest = &rest[open + close + 1..];
    }
    if text.is_empty() {
        errors.spanned(uri, "a resource needs its URI: `uri = \"config://app\"`");
    }
    names
}

pub fn expand(kind: Kind, args_tokens: TokenStream, item: TokenStream) -> TokenStream {
    let attribute = kind.attribute();
    let mut item: syn::ItemFn = match syn::parse2(item.clone()) {
        Ok(item) => item,
        Err(_) => {
            let error = syn::Error::new(
                Span::call_site(),
                format!("#[{attribute}] goes on a free function"),
            )
            .to_compile_error();
            return quote!(#error #item);
        }
    };
    let mut errors = Errors::default();
    let args = args(kind, args_tokens, &mut errors);
    crate::validate::check_scopes(&args.scopes, &mut errors);
    let completions = take_completions(&mut item, &mut errors);
    let read = model::read(&mut item, &mut errors);
    let oxp = match &args.krate {
        Some(path) => quote!(#path::__private),
        None => quote!(::oxp_runtime::__private),
    };
    let name_span = model::name_span(&item);
    let description = read.description.clone().unwrap_or_default();
    check_description(kind, &description, name_span, &mut errors);
    let params = params(kind, &read, name_span, &mut errors);
    check_renames(kind, params, &mut errors);
    let names: Vec<String> = params.iter().map(model::Param::wire_name).collect();
    check_uri(kind, &args, params, &names, &mut errors);
    let return_type = return_type(kind, &item, name_span, &mut errors);
    let (Some(return_type), true) = (return_type, errors.is_empty()) else {
        return fallback(kind, &item, &oxp, errors);
    };
    let run = run(kind, &oxp, &read, &item, params, &names, &args.mime_type);
    let arguments = arguments(&oxp, params, &names, &completions);
    descriptor(
        kind,
        &item,
        &oxp,
        &args,
        Parts {
            description,
            params,
            arguments,
            return_type,
            run,
        },
    )
}

/// The description hosts show and models read: present, and within the rule's length.
fn check_description(kind: Kind, description: &str, name_span: Span, errors: &mut Errors) {
    let attribute = kind.attribute();
    if description.trim().is_empty() {
        errors.error(
            name_span,
            format!("a #[{attribute}] needs a description, which hosts show and models read: add a doc comment (`/// What it is.`) above the fn"),
        );
    } else if let Some(problem) = crate::rules::description_problem(description) {
        errors.error(name_span, problem);
    }
}

/// The fn's parameters, which a resource or prompt takes one by one.
fn params<'a>(
    kind: Kind,
    read: &'a model::Tool,
    name_span: Span,
    errors: &mut Errors,
) -> &'a [model::Param] {
    match &read.inputs {
        Inputs::Params(params) => params.as_slice(),
        Inputs::Whole { .. } => {
            let attribute = kind.attribute();
            errors.error(
                name_span,
                format!("a #[{attribute}] takes its arguments one by one, not as `Input<T>`"),
            );
            &[]
        }
    }
}

/// `#[serde(rename = "…")]` names an argument as the wire has it (`resourceUri`); nothing
/// else of serde's or schemars' applies to a string read as its type.
fn check_renames(kind: Kind, params: &[model::Param], errors: &mut Errors) {
    let attribute = kind.attribute();
    for param in params {
        for attr in &param.passthrough {
            let mut renames_only = attr.path().is_ident("serde");
            let _ = attr.parse_nested_meta(|meta| {
                renames_only &= meta.path.is_ident("rename") && meta.input.peek(syn::Token![=]);
                skip_value(&meta)
            });
            if !renames_only {
                errors.spanned(
                    attr,
                    format!("a #[{attribute}]'s arguments take only `#[serde(rename = \"…\")]`: each is a string read as its type"),
                );
            }
        }
    }
}

/// A resource's URI, present, and its template's `{variables}` the fn's parameters (`names`,
/// as the wire has them), each way round.
fn check_uri(
    kind: Kind,
    args: &Args,
    params: &[model::Param],
    names: &[String],
    errors: &mut Errors,
) {
    match (kind, &args.uri) {
        (Kind::Resource, None) => errors.error(
            Span::call_site(),
            "#[resource] needs its URI: `#[resource(uri = \"config://app\")]`, or a template whose `{params}` are the fn's parameters: `uri = \"file:///logs/{date}\"`",
        ),
        (Kind::Resource, Some(uri)) => {
            let variables = template_variables(uri, errors);
            for variable in &variables {
                if !names.contains(variable) {
                    errors.spanned(
                        uri,
                        format!("`{{{variable}}}` is not a parameter of this fn: add `{variable}: String` (or another type) to it, or take `{{{variable}}}` out of the URI"),
                    );
                }
            }
            for (param, name) in params.iter().zip(names) {
                if !variables.contains(name) {
                    errors.spanned(
                        &param.name,
                        format!("`{name}` is not in the URI: a resource's parameters are its URI template's, so write `{{{name}}}` in `uri`, or remove the parameter"),
                    );
                }
            }
        }
        (Kind::Prompt, _) => {}
    }
}

/// What the fn returns: a resource's contents or a prompt's messages, never nothing.
fn return_type(
    kind: Kind,
    item: &syn::ItemFn,
    name_span: Span,
    errors: &mut Errors,
) -> Option<syn::Type> {
    match &item.sig.output {
        syn::ReturnType::Type(_, ty) => Some((**ty).clone()),
        syn::ReturnType::Default => {
            errors.error(
                name_span,
                match kind {
                    Kind::Resource => "a #[resource] returns its contents: `-> String` (text), `-> Vec<u8>` (bytes), `-> Result<String, ToolError>`…",
                    Kind::Prompt => "a #[prompt] returns its messages: `-> String` (one user message), `-> Vec<Message>`, `-> Result<Vec<Message>, ToolError>`…",
                },
            );
            None
        }
    }
}

/// The handle's name (`RESOURCE`, `PROMPT`), the placeholder it points to on an error, and
/// the descriptor's type.
fn handle(kind: Kind, oxp: &TokenStream) -> (syn::Ident, TokenStream, TokenStream) {
    match kind {
        Kind::Resource => (
            format_ident!("RESOURCE"),
            quote!(#oxp::FALLBACK_RESOURCE),
            quote!(#oxp::ResourceDescriptor),
        ),
        Kind::Prompt => (
            format_ident!("PROMPT"),
            quote!(#oxp::FALLBACK_PROMPT),
            quote!(#oxp::PromptDescriptor),
        ),
    }
}

/// On an error: the errors, the fn as written, and a handle to a placeholder that only
/// type-checks, so that code registering it does not fail a second time.
fn fallback(kind: Kind, item: &syn::ItemFn, oxp: &TokenStream, errors: Errors) -> TokenStream {
    let (fn_name, vis) = (&item.sig.ident, &item.vis);
    let (handle, fallback, descriptor_type) = handle(kind, oxp);
    let errors = errors.into_compile_errors();
    quote! {
        #errors
        #item
        #[doc(hidden)]
        #[allow(non_camel_case_types, dead_code)]
        #vis struct #fn_name {}
        impl #fn_name {
            #[doc(hidden)]
            pub const #handle: &'static #descriptor_type = &#fallback;
        }
    }
}

fn some_str(lit: &Option<LitStr>) -> TokenStream {
    match lit {
        Some(lit) => quote!(::core::option::Option::Some(#lit)),
        None => quote!(::core::option::Option::None),
    }
}

/// The descriptor's `read` or `get`: the fn `__oxp_run`, which reads each argument from the
/// input, calls the fn and encodes what it returns (a resource's contents for its URI, a
/// prompt's messages).
fn run(
    kind: Kind,
    oxp: &TokenStream,
    read: &model::Tool,
    item: &syn::ItemFn,
    params: &[model::Param],
    names: &[String],
    mime_type: &Option<LitStr>,
) -> TokenStream {
    let fn_name = &item.sig.ident;
    // The fn's arguments, in its order: the context, and each parameter read from the input.
    let mut call_args: Vec<(usize, TokenStream)> = Vec::new();
    if let Some((position, by_ref)) = read.context {
        call_args.push((
            position,
            if by_ref {
                quote!(&__oxp_context)
            } else {
                quote!(__oxp_context)
            },
        ));
    }
    let locals: Vec<syn::Ident> = (0..params.len())
        .map(|i| format_ident!("__oxp_arg_{}", i))
        .collect();
    for (param, local) in params.iter().zip(&locals) {
        call_args.push((param.position, quote!(#local)));
    }
    call_args.sort_by_key(|(position, _)| *position);
    let call_args = call_args.into_iter().map(|(_, arg)| arg);
    let call = quote_spanned!(fn_name.span()=> #fn_name(#(#call_args),*));
    let types = params.iter().map(|p| &p.ty);
    let decode = quote! {
        (|| -> ::core::result::Result<_, #oxp::InvokeError> {
            ::core::result::Result::Ok((#(#oxp::argument::<#types>(&__oxp_input, #names)?,)*))
        })()
    };
    let mime_type = some_str(mime_type);
    let encode = |value: TokenStream| match kind {
        Kind::Resource => quote!(#oxp::resource_contents(#value, &__oxp_uri, #mime_type)),
        Kind::Prompt => quote!(#oxp::prompt_messages(#value)),
    };
    let uri_local = match kind {
        Kind::Resource => quote!(let __oxp_uri = #oxp::resource_uri(&__oxp_input);),
        Kind::Prompt => quote!(),
    };
    if read.is_async {
        let encoded = encode(quote!(#call.await));
        quote! {
            #[allow(unused_variables)]
            fn __oxp_run(
                __oxp_context: #oxp::ToolContext,
                __oxp_input: #oxp::serde_json::Value,
            ) -> #oxp::BoxFuture<'static, #oxp::InvokeResult> {
                #uri_local
                match #decode {
                    ::core::result::Result::Ok((#(#locals,)*)) => {
                        ::std::boxed::Box::pin(async move { #encoded })
                    }
                    ::core::result::Result::Err(__oxp_error) => #oxp::failed(__oxp_error),
                }
            }
            #oxp::Invoke::Async(__oxp_run)
        }
    } else {
        let encoded = encode(call);
        quote! {
            #[allow(unused_variables)]
            fn __oxp_run(
                __oxp_context: #oxp::ToolContext,
                __oxp_input: #oxp::serde_json::Value,
            ) -> #oxp::InvokeResult {
                #uri_local
                let (#(#locals,)*) = #decode?;
                #encoded
            }
            #oxp::Invoke::Blocking(__oxp_run)
        }
    }
}

/// The descriptor's `arguments`: each parameter's wire name, description, schema and
/// completion fn.
fn arguments(
    oxp: &TokenStream,
    params: &[model::Param],
    names: &[String],
    completions: &[Option<syn::Path>],
) -> Vec<TokenStream> {
    let completions = completions_for(params, completions);
    params
        .iter()
        .zip(names)
        .zip(&completions)
        .map(|((param, name), complete)| {
            let ty = &param.ty;
            let description = param.docs.join("\n").trim().to_owned();
            let complete = match complete {
                Some(path) => quote_spanned! {path.span()=>
                    ::core::option::Option::Some({
                        let __oxp_complete: fn(&str) -> ::std::vec::Vec<::std::string::String> = #path;
                        __oxp_complete
                    })
                },
                None => quote!(::core::option::Option::None),
            };
            quote! {
                #oxp::Argument {
                    name: #name,
                    description: #description,
                    schema: #oxp::param::<#ty>,
                    complete: #complete,
                }
            }
        })
        .collect()
}

/// What [`descriptor`] places that the steps before it made.
struct Parts<'a> {
    description: String,
    params: &'a [model::Param],
    arguments: Vec<TokenStream>,
    return_type: syn::Type,
    run: TokenStream,
}

/// The fn, its handle struct with `RESOURCE`/`PROMPT`, and the descriptor submitted to
/// `inventory`.
fn descriptor(
    kind: Kind,
    item: &syn::ItemFn,
    oxp: &TokenStream,
    args: &Args,
    parts: Parts<'_>,
) -> TokenStream {
    let attribute = kind.attribute();
    let (fn_name, vis) = (&item.sig.ident, &item.vis);
    let (handle, _, descriptor_type) = handle(kind, oxp);
    let Parts {
        description,
        params,
        arguments,
        return_type,
        run,
    } = parts;
    let checks = params
        .iter()
        .map(|p| &p.ty)
        .map(|ty| quote_spanned!(ty.span()=> #oxp::assert_parameter::<#ty>();));
    let output_check = match kind {
        Kind::Resource => {
            quote_spanned!(return_type.span()=> #oxp::assert_resource_output::<#return_type>();)
        }
        Kind::Prompt => {
            quote_spanned!(return_type.span()=> #oxp::assert_prompt_output::<#return_type>();)
        }
    };
    let fn_name_str = fn_name.to_string().trim_start_matches("r#").to_owned();
    let name = args
        .name
        .as_ref()
        .map_or_else(|| fn_name_str.clone(), LitStr::value);
    let title = some_str(&args.title);
    let scopes = &args.scopes;
    let timeout_ms = match args.timeout_ms {
        Some(ms) => quote!(::core::option::Option::Some(#ms)),
        None => quote!(::core::option::Option::None),
    };
    let fields = match kind {
        Kind::Resource => {
            let uri = args.uri.as_ref().map(LitStr::value).unwrap_or_default();
            let mime_type = some_str(&args.mime_type);
            quote! {
                uri: #uri,
                mime_type: #mime_type,
                read: { #run },
            }
        }
        Kind::Prompt => quote!(get: { #run },),
    };
    let handle_doc = format!("The {attribute} descriptor of [`{fn_name_str}`].");
    quote! {
        #item

        #[doc(hidden)]
        #[allow(non_camel_case_types, dead_code)]
        #vis struct #fn_name {}

        const _: () = {
            #[allow(dead_code)]
            fn __oxp_checks() { #(#checks)* #output_check }

            const __OXP_DESCRIPTOR: #descriptor_type = #descriptor_type {
                name: #name,
                title: #title,
                description: #description,
                arguments: &[#(#arguments),*],
                scopes: &[#(#scopes),*],
                timeout_ms: #timeout_ms,
                #fields
                module_path: ::core::module_path!(),
                fn_name: #fn_name_str,
                file: ::core::file!(),
                line: ::core::line!(),
            };

            impl #fn_name {
                #[doc = #handle_doc]
                pub const #handle: &'static #descriptor_type = &__OXP_DESCRIPTOR;
            }

            #oxp::inventory::submit! { __OXP_DESCRIPTOR }
        };
    }
}

/// Each parameter's `#[complete]` path (completions are by the fn's argument position, which
/// counts the context too).
fn completions_for(
    params: &[model::Param],
    completions: &[Option<syn::Path>],
) -> Vec<Option<syn::Path>> {
    params
        .iter()
        .map(|p| completions.get(p.position).cloned().flatten())
        .collect()
}
