//! Writes the glue: the input's schema (a table of the parameters), one small invoke fn, and
//! the descriptor that `inventory` collects. All generic work is done by
//! `oxp_runtime::__private` helpers.

use proc_macro2::TokenStream;
use quote::{format_ident, quote, quote_spanned};
use syn::ext::IdentExt;
use syn::spanned::Spanned;

use crate::errors::Errors;
use crate::model::{self, Inputs, Output, Tool};
use crate::parse::{self, Args};
use crate::validate::{self, Identity};

pub fn tool(args: TokenStream, item: TokenStream) -> TokenStream {
    let mut item: syn::ItemFn = match syn::parse2(item.clone()) {
        Ok(item) => item,
        Err(_) => {
            let error = syn::Error::new(
                proc_macro2::Span::call_site(),
                "#[tool] goes on a free function: `#[tool] async fn add(a: i64, b: i64) -> i64 { a + b }`",
            )
            .to_compile_error();
            return quote!(#error #item);
        }
    };
    let mut errors = Errors::default();
    let args = parse::args(args, &mut errors);
    // Reading the fn also strips the parameter attributes rustc would reject, so the fn can be
    // emitted as it is even when there are errors (the fallback keeps the IDE working).
    let tool = model::read(&mut item, &mut errors);
    let identity = validate::identity(&args, &tool, model::name_span(&item), &mut errors);
    let oxp = private_path(&args);
    if !errors.is_empty() {
        let errors = errors.into_compile_errors();
        let fallback = fallback(&item, &oxp);
        return quote!(#errors #item #fallback);
    }
    let glue = glue(&item, &oxp, &args, &tool, &identity);
    quote!(#item #glue)
}

/// `<runtime>::__private`: `::oxp_runtime` unless `crate = "path"` names another.
fn private_path(args: &Args) -> TokenStream {
    match &args.krate {
        Some(path) => quote!(#path::__private),
        None => quote!(::oxp_runtime::__private),
    }
}

/// On an error, the tool's item too (`add::TOOL`), as a placeholder that only type-checks: the
/// crate does not build, and code that registers `add::TOOL` should not fail a second time and
/// bury the error that matters (thiserror's fallback expansion is the model).
fn fallback(item: &syn::ItemFn, oxp: &TokenStream) -> TokenStream {
    // A method sits in an `impl`, where no struct can go: its error says to make it a free fn.
    if item.sig.receiver().is_some() {
        return TokenStream::new();
    }
    let (vis, fn_name) = (&item.vis, &item.sig.ident);
    quote! {
        #[doc(hidden)]
        #[allow(non_camel_case_types, dead_code)]
        #vis struct #fn_name {}

        impl #fn_name {
            #[doc(hidden)]
            pub const TOOL: &'static #oxp::ToolDescriptor = &#oxp::FALLBACK;
        }
    }
}

fn glue(
    item: &syn::ItemFn,
    oxp: &TokenStream,
    args: &Args,
    tool: &Tool,
    identity: &Identity,
) -> TokenStream {
    let fn_name = &tool.fn_name;
    // The assertions that report a wrong type in our words, on the type: the input's, then
    // the output's.
    let mut checks = Vec::new();
    let (input, call_args, decoded) = input(item, oxp, tool, &mut checks);
    // Spanned on the fn's name, where a call that does not type-check (or an async fn's future
    // that is not `Send`) is reported.
    let call = quote_spanned!(fn_name.span()=> #fn_name(#(#call_args),*));
    let (encode, output_schema) = output(oxp, &tool.output, &mut checks);
    let invoke = invoke(oxp, tool, &call, &encode, &input.decode, &decoded);
    descriptor(
        item,
        oxp,
        args,
        tool,
        identity,
        Emitted {
            input,
            checks,
            output_schema,
            invoke,
        },
    )
}

/// How the glue reads the input, the arguments it passes to the fn (in the fn's order), and
/// the locals `decode` reads the input into (in its tuple's order).
fn input(
    item: &syn::ItemFn,
    oxp: &TokenStream,
    tool: &Tool,
    checks: &mut Vec<TokenStream>,
) -> (InputGlue, Vec<TokenStream>, Vec<syn::Ident>) {
    let mut call_args: Vec<(usize, TokenStream)> = Vec::new();
    if let Some((position, by_ref)) = tool.context {
        let context = if by_ref {
            quote!(&__oxp_context)
        } else {
            quote!(__oxp_context)
        };
        call_args.push((position, context));
    }
    let mut decoded: Vec<syn::Ident> = Vec::new();
    let input = match &tool.inputs {
        Inputs::Params(params) => {
            let locals: Vec<_> = (0..params.len())
                .map(|i| format_ident!("__oxp_arg{i}"))
                .collect();
            for (param, local) in params.iter().zip(&locals) {
                call_args.push((param.position, quote!(#local)));
            }
            decoded.extend(locals.iter().cloned());
            if params.iter().all(|p| p.passthrough.is_empty()) {
                // `param::<T>` in the table asks what `assert_parameter` would, in our words.
                plain_params(oxp, params, &locals, item.sig.paren_token.span.join())
            } else {
                for ty in params.iter().map(|p| &p.ty) {
                    checks.push(quote_spanned!(ty.span()=> #oxp::assert_parameter::<#ty>();));
                }
                serde_params(oxp, params, &locals)
            }
        }
        Inputs::Whole { ty, position } => {
            call_args.push((*position, quote!(#oxp::Input(__oxp_whole))));
            decoded.push(format_ident!("__oxp_whole"));
            checks.push(quote_spanned!(ty.span()=> #oxp::assert_parameter::<#ty>();));
            InputGlue {
                items: quote!(),
                schema: quote!(#oxp::input_schema::<#ty>),
                decode: quote!(#oxp::decode::<#ty>(__oxp_input).map(|__oxp_whole| (__oxp_whole,))),
            }
        }
    };
    call_args.sort_by_key(|(position, _)| *position);
    let call_args = call_args.into_iter().map(|(_, arg)| arg).collect();
    (input, call_args, decoded)
}

/// The runtime fn that encodes what the fn returns, and the descriptor's `output_schema`.
fn output(
    oxp: &TokenStream,
    output: &Output,
    checks: &mut Vec<TokenStream>,
) -> (TokenStream, TokenStream) {
    match output {
        Output::Unit => (quote!(#oxp::unit), quote!(::core::option::Option::None)),
        Output::Value(ty) => {
            checks.push(quote_spanned!(ty.span()=> #oxp::assert_output::<#ty>();));
            (
                quote!(#oxp::value),
                quote!(::core::option::Option::Some(#oxp::output_schema::<#ty>)),
            )
        }
        Output::UnitResult(err) => {
            checks.push(quote_spanned!(err.span()=> #oxp::assert_error::<#err>();));
            (
                quote!(#oxp::unit_result),
                quote!(::core::option::Option::None),
            )
        }
        Output::Result(ok, err) => {
            checks.push(quote_spanned!(ok.span()=> #oxp::assert_output::<#ok>();));
            checks.push(quote_spanned!(err.span()=> #oxp::assert_error::<#err>();));
            (
                quote!(#oxp::result),
                quote!(::core::option::Option::Some(#oxp::output_schema::<#ok>)),
            )
        }
    }
}

/// The descriptor's `invoke`: the fn `__oxp_invoke`, which reads the input, calls the fn and
/// encodes its output, as an `Invoke::Async` or an `Invoke::Blocking`.
fn invoke(
    oxp: &TokenStream,
    tool: &Tool,
    call: &TokenStream,
    encode: &TokenStream,
    decode: &TokenStream,
    decoded: &[syn::Ident],
) -> TokenStream {
    let fn_name = &tool.fn_name;
    // An async fn's future, boxed with its output's encoding: by a runtime fn (generic only
    // over the future, so no state machine of its own per tool) unless the fn borrows the
    // context, which an async block must then own.
    let future = match tool.context {
        Some((_, true)) => quote_spanned! {fn_name.span()=>
            ::std::boxed::Box::pin(async move { #encode(#call.await) })
        },
        _ => quote_spanned!(fn_name.span()=> #oxp::boxed(#call, #encode)),
    };
    if tool.is_async {
        // The input is read before the future is made: the future holds only the arguments
        // and the fn's own future, and each tool's state machine (compiled in the crate's root
        // module with every other tool, again after any edit of the file) carries no decoding.
        // The pipeline calls this fn as tool code, its panics caught.
        quote! {
            #[allow(unused_variables)]
            fn __oxp_invoke(
                __oxp_context: #oxp::ToolContext,
                __oxp_input: #oxp::serde_json::Value,
            ) -> #oxp::BoxFuture<'static, #oxp::InvokeResult> {
                match #decode {
                    ::core::result::Result::Ok((#(#decoded,)*)) => #future,
                    ::core::result::Result::Err(__oxp_error) => #oxp::failed(__oxp_error),
                }
            }
            #oxp::Invoke::Async(__oxp_invoke)
        }
    } else {
        quote! {
            #[allow(unused_variables)]
            fn __oxp_invoke(
                __oxp_context: #oxp::ToolContext,
                __oxp_input: #oxp::serde_json::Value,
            ) -> #oxp::InvokeResult {
                let (#(#decoded,)*) = #decode?;
                #encode(#call)
            }
            #oxp::Invoke::Blocking(__oxp_invoke)
        }
    }
}

/// What [`descriptor`] places that the steps before it made.
struct Emitted {
    input: InputGlue,
    checks: Vec<TokenStream>,
    output_schema: TokenStream,
    invoke: TokenStream,
}

/// The handle struct `add` with `add::TOOL`, and the descriptor submitted to `inventory`.
fn descriptor(
    item: &syn::ItemFn,
    oxp: &TokenStream,
    args: &Args,
    tool: &Tool,
    identity: &Identity,
    emitted: Emitted,
) -> TokenStream {
    let fn_name = &tool.fn_name;
    let vis = &item.vis;
    let Emitted {
        input:
            InputGlue {
                items: input_items,
                schema: input_schema,
                ..
            },
        checks,
        output_schema,
        invoke,
    } = emitted;
    let Identity {
        toolkit,
        name,
        version,
        timeout_ms,
    } = identity;
    let description = tool.description.as_deref().unwrap_or_default();
    let user_id = args.user_id;
    let secrets = args.secrets.iter();
    let authorization = args.authorization.iter().map(|a| {
        let (id, scopes) = (&a.id, &a.scopes);
        quote!(#oxp::AuthorizationSpec { id: #id, scopes: &[#(#scopes),*] })
    });
    let scopes = args.scopes.iter();
    let wire_name = match &args.wire_name {
        Some(lit) => quote!(::core::option::Option::Some(#lit)),
        None => quote!(::core::option::Option::None),
    };
    let timeout_ms = match timeout_ms {
        Some(ms) => quote!(::core::option::Option::Some(#ms)),
        None => quote!(::core::option::Option::None),
    };
    let hints = hints(args, oxp);
    let takes_context = tool.context.is_some();
    let fn_name_str = fn_name.to_string();
    let handle_doc =
        format!("The tool descriptor of [`{fn_name_str}`], for `RegistryBuilder::tool`.");

    quote! {
        #[doc(hidden)]
        #[allow(non_camel_case_types, dead_code)]
        #vis struct #fn_name {}

        const _: () = {
            #input_items

            #[allow(dead_code)]
            fn __oxp_checks() { #(#checks)* }

            const __OXP_TOOL: #oxp::ToolDescriptor = #oxp::ToolDescriptor {
                toolkit: #toolkit,
                name: #name,
                wire_name: #wire_name,
                version: #version,
                description: #description,
                user_id: #user_id,
                secrets: &[#(#secrets),*],
                authorization: &[#(#authorization),*],
                timeout_ms: #timeout_ms,
                scopes: &[#(#scopes),*],
                hints: #hints,
                input_schema: #input_schema,
                output_schema: #output_schema,
                invoke: { #invoke },
                takes_context: #takes_context,
                module_path: ::core::module_path!(),
                fn_name: #fn_name_str,
                file: ::core::file!(),
                line: ::core::line!(),
            };

            impl #fn_name {
                #[doc = #handle_doc]
                pub const TOOL: &'static #oxp::ToolDescriptor = &__OXP_TOOL;
            }

            #oxp::inventory::submit! { __OXP_TOOL }
        };
    }
}

/// The descriptor's `hints`.
fn hints(args: &Args, oxp: &TokenStream) -> TokenStream {
    let some_str = |lit: &Option<syn::LitStr>| match lit {
        Some(lit) => quote!(::core::option::Option::Some(#lit)),
        None => quote!(::core::option::Option::None),
    };
    let some_flag = |flag: &Option<crate::parse::Flag>| match flag {
        Some(flag) => {
            let value = flag.value;
            quote!(::core::option::Option::Some(#value))
        }
        None => quote!(::core::option::Option::None),
    };
    let (title, deprecated) = (some_str(&args.title), some_str(&args.deprecated));
    let confirm = some_str(&args.confirm);
    // Checked by `validate`: one of `rules::CANNOT_ASK`.
    let cannot_ask = match args.cannot_ask.as_ref().map(syn::LitStr::value).as_deref() {
        Some("refuse") => quote!(::core::option::Option::Some(#oxp::CannotAsk::Refuse)),
        Some("hide") => quote!(::core::option::Option::Some(#oxp::CannotAsk::Hide)),
        Some("relay") => quote!(::core::option::Option::Some(#oxp::CannotAsk::Relay)),
        _ => quote!(::core::option::Option::None),
    };
    // Checked by `validate`: one of `rules::TASK`.
    let task = match args.task.as_ref().map(syn::LitStr::value).as_deref() {
        Some("optional") => quote!(::core::option::Option::Some(#oxp::TaskSupport::Optional)),
        Some("required") => quote!(::core::option::Option::Some(#oxp::TaskSupport::Required)),
        _ => quote!(::core::option::Option::None),
    };
    let read_only = some_flag(&args.read_only);
    let destructive = some_flag(&args.destructive);
    let idempotent = some_flag(&args.idempotent);
    let open_world = some_flag(&args.open_world);
    let (tags, examples) = (&args.tags, &args.examples);
    let (always_load, search_hint) = (args.always_load, some_str(&args.search_hint));
    quote! {
        #oxp::ToolHints::__new(
            #title, #read_only, #destructive, #idempotent, #open_world,
            &[#(#tags),*], &[#(#examples),*], #deprecated, #confirm, #cannot_ask, #task,
        )
        .__search(#always_load, #search_hint)
    }
}

/// How the glue gets at the input.
struct InputGlue {
    /// Items it needs (a fn, a struct), beside the descriptor.
    items: TokenStream,
    /// The descriptor's `input_schema`: a `fn() -> Schema`.
    schema: TokenStream,
    /// An expression that reads `__oxp_input` into a `Result` of the tuple of the fn's
    /// arguments (`decoded`'s locals, in order).
    decode: TokenStream,
}

/// The most parameters `oxp_runtime::__private::decode_params` reads (its tuples' length).
const MAX_PARAMS: usize = 16;

/// Plain parameters (no `#[serde]`/`#[schemars]`): described by a table the runtime turns into
/// the schema, and read by the runtime's `decode_params` (one `Fields::take` each). Neither is
/// generic over anything but the parameters' types, so every `i64` parameter of every tool
/// shares one schema instance; a derived `JsonSchema` and `Deserialize` per tool would compile
/// (and, at start-up, run) code per tool.
fn plain_params(
    oxp: &TokenStream,
    params: &[model::Param],
    locals: &[syn::Ident],
    list: proc_macro2::Span,
) -> InputGlue {
    let names: Vec<String> = params.iter().map(|p| p.name.unraw().to_string()).collect();
    let types: Vec<_> = params.iter().map(|p| &p.ty).collect();
    let table = params.iter().zip(&names).map(|(param, name)| {
        let (title, description) = title_and_description(&param.docs);
        let ty = &param.ty;
        quote! {
            #oxp::Param {
                name: #name,
                title: #title,
                description: #description,
                schema: #oxp::param::<#ty>,
            }
        }
    });
    let items = quote! {
        fn __oxp_input_schema() -> #oxp::schemars::Schema {
            #oxp::params_schema(&[#(#table),*])
        }
    };
    // Up to `MAX_PARAMS` parameters: one call, generic only over the tuple of their types, so
    // compiled once for all tools with the same ones and outside the user's module (an edit of
    // a tool does not compile it again). Spanned on the parameter list, where a type that
    // cannot be a parameter is reported a second time (first at the type, by the table's
    // `param::<T>`). More parameters: a closure of the tool's own.
    let decode = if params.len() <= MAX_PARAMS {
        quote_spanned!(list=> #oxp::decode_params::<(#(#types,)*)>(__oxp_input, &[#(#names),*]))
    } else {
        quote! {
            (move || -> ::core::result::Result<_, #oxp::InvokeError> {
                let mut __oxp_fields = #oxp::Fields::new(__oxp_input, &[#(#names),*])?;
                #(let #locals = __oxp_fields.take::<#types>(#names)?;)*
                __oxp_fields.finish()?;
                ::core::result::Result::Ok((#(#locals,)*))
            })()
        }
    };
    InputGlue {
        items,
        schema: quote!(__oxp_input_schema),
        decode,
    }
}

/// Parameters with `#[serde]`/`#[schemars]` attributes: fields of a generated struct whose
/// derives interpret them.
fn serde_params(oxp: &TokenStream, params: &[model::Param], locals: &[syn::Ident]) -> InputGlue {
    let crate_serde = format!("{oxp}::serde").replace(' ', "");
    let crate_schemars = format!("{oxp}::schemars").replace(' ', "");
    let fields = params.iter().map(|p| {
        let (name, ty, passthrough) = (&p.name, &p.ty, &p.passthrough);
        // The space `///` leaves, which the derive takes off again.
        let docs = p.docs.iter().map(|line| format!(" {line}"));
        quote!(#(#[doc = #docs])* #(#passthrough)* #name: #ty)
    });
    let names = params.iter().map(|p| &p.name);
    let items = quote! {
        #[derive(#oxp::serde::Deserialize, #oxp::schemars::JsonSchema)]
        #[serde(crate = #crate_serde, deny_unknown_fields)]
        #[schemars(crate = #crate_schemars)]
        struct __OxpInput { #(#fields,)* }
    };
    let decode = quote! {
        #oxp::decode::<__OxpInput>(__oxp_input)
            .map(|__OxpInput { #(#names: #locals),* }| (#(#locals,)*))
    };
    InputGlue {
        items,
        schema: quote!(#oxp::input_schema::<__OxpInput>),
        decode,
    }
}

/// A parameter's doc lines (each without the space after `///`) as `#[derive(JsonSchema)]`
/// reads a field's: a first line starting with `#` is the title, the rest the description.
fn title_and_description(docs: &[String]) -> (String, String) {
    let trim = |s: &str| s.trim_matches(|c: char| c.is_ascii_whitespace()).to_owned();
    let doc = trim(&docs.join("\n"));
    if !doc.starts_with('#') {
        return (String::new(), doc);
    }
    let (first, rest) = doc.split_once('\n').unwrap_or((&doc, ""));
    (trim(first.trim_start_matches('#')), trim(rest))
}
