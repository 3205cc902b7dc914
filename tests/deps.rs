//! The promise of `oxp_runtime::__private`: a crate that uses `#[tool]` needs `oxp-runtime` (and
//! tokio for its main) and nothing else. `examples/calculator` is that crate, and it builds with
//! the workspace; this test keeps its manifest honest.

#[test]
fn the_example_depends_on_nothing_but_oxp_runtime_and_tokio() {
    let manifest = include_str!("../examples/calculator/Cargo.toml");
    let dependencies = manifest
        .split("[dependencies]")
        .nth(1)
        .expect("a [dependencies] table");
    let names: Vec<&str> = dependencies
        .lines()
        .take_while(|line| !line.starts_with('['))
        .filter_map(|line| line.split(['=', '.']).next())
        .map(str::trim)
        .filter(|name| !name.is_empty() && !name.starts_with('#'))
        .collect();
    assert_eq!(names, ["oxp-runtime", "tokio"], "{manifest}");
}
