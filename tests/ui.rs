//! Every diagnostic of `#[tool]`, `#[resource]` and `#[prompt]`, pinned: each file in `ui/` is
//! one mistake, and its `.stderr` is what the user sees. Regenerate with
//! `TRYBUILD=overwrite cargo test -p oxp-tests --test ui` after reading the new text.

#[test]
fn diagnostics() {
    let cases = trybuild::TestCases::new();
    cases.compile_fail("ui/*.rs");
}
