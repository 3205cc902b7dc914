//! The `#[tool]` attribute of oxp. Use it through `oxp_runtime::tool`; its documentation is there.
//!
//! The pipeline, as in serde_derive: `parse` reads the attribute's arguments strictly,
//! `model` turns the fn into a typed tool description, `validate` settles the identity and
//! checks it by `rules` (shared word for word with the registry), `expand` writes the glue.
//! Every error is collected with its own span; on
//! error the fn is still emitted, and so is its `TOOL` item (a placeholder that only
//! type-checks), so the rest of the crate (and the IDE) keeps working and shows only the error
//! that matters.

mod errors;
mod expand;
mod model;
mod parse;
mod resources_prompts;
mod rules;
mod skills;
mod validate;

use proc_macro::TokenStream;

/// Registers a function as an OXP tool. See `oxp_runtime::tool` for the grammar.
#[proc_macro_attribute]
pub fn tool(args: TokenStream, item: TokenStream) -> TokenStream {
    expand::tool(args.into(), item.into()).into()
}

/// Registers a function as a resource. See `oxp_runtime::resource` for the grammar.
#[proc_macro_attribute]
pub fn resource(args: TokenStream, item: TokenStream) -> TokenStream {
    resources_prompts::expand(resources_prompts::Kind::Resource, args.into(), item.into()).into()
}

/// Registers a function as a prompt. See `oxp_runtime::prompt` for the grammar.
#[proc_macro_attribute]
pub fn prompt(args: TokenStream, item: TokenStream) -> TokenStream {
    resources_prompts::expand(resources_prompts::Kind::Prompt, args.into(), item.into()).into()
}

/// Embeds a folder of Agent Skills. See `oxp_runtime::skills` for the grammar.
#[proc_macro]
pub fn skills(args: TokenStream) -> TokenStream {
    skills::expand(args.into()).into()
}
