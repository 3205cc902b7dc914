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

/// The packages `oxp-runtime` links with `extra` cargo arguments, by name, and the tree.
fn linked(extra: &[&str]) -> (std::collections::BTreeSet<String>, String) {
    let output = std::process::Command::new(env!("CARGO"))
        .args([
            "tree",
            "-p",
            "oxp-runtime",
            "-e",
            "normal",
            "--prefix",
            "none",
        ])
        .args(extra)
        .current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
        .output()
        .expect("cargo runs");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let tree = String::from_utf8(output.stdout).unwrap();
    let crates = tree
        .lines()
        .filter_map(|line| line.split(' ').next())
        .map(str::to_owned)
        .collect();
    (crates, tree)
}

/// What a server links by default (issue 16): MCP (the `mcp` feature is on: it is where the
/// agents are), but no HTTP client (the `client` feature is off), no HTTP/2 (the `http2` feature
/// is off), no terminal colours, and, for JWTs, only HS256 — none of the RSA, ECDSA and EdDSA
/// crates `jsonwebtoken`'s own crypto feature brings. Nor a crate for what one already there
/// does: constant-time comparison is ctutils' (digest's).
#[test]
fn a_default_server_links_mcp_but_no_http_client_no_http2_and_no_public_key_crypto() {
    let (crates, tree) = linked(&[]);
    assert!(crates.contains("rmcp"), "MCP is on by default:\n{tree}");
    for absent in [
        "reqwest",
        "rsa",
        "p256",
        "p384",
        "ed25519-dalek",
        "ecdsa",
        "num-bigint-dig",
        "h2",
        "nu-ansi-term",
        "subtle",
    ] {
        assert!(
            !crates.contains(absent),
            "{absent} is linked by default:\n{tree}"
        );
    }
    assert!(crates.contains("hmac"), "HS256 is ours, from hmac");
}

/// `default-features = false, features = ["server"]` serves OXP alone: no MCP SDK and what
/// only it brings (rmcp's uuid among them: oxp's own v4 ids are six bits set in sixteen random
/// bytes).
#[test]
fn oxp_alone_links_no_mcp_sdk() {
    let (crates, tree) = linked(&["--no-default-features", "--features", "server"]);
    for absent in ["rmcp", "uuid", "sse-stream", "reqwest"] {
        assert!(
            !crates.contains(absent),
            "{absent} is linked without default features:\n{tree}"
        );
    }
}

/// `default-features = false` is the core and the provider adapters, for an app that hands tools
/// to a model and serves nothing: no HTTP server, no MCP SDK, no Prometheus, no log formatter.
#[test]
fn without_default_features_no_server_is_linked() {
    let (crates, tree) = linked(&["--no-default-features"]);
    assert!(crates.contains("oxp-core"), "the core is linked:\n{tree}");
    for absent in [
        "axum",
        "hyper",
        "hyper-util",
        "rmcp",
        "prometheus-client",
        "tracing-subscriber",
        "jsonwebtoken",
    ] {
        assert!(
            !crates.contains(absent),
            "{absent} is linked without default features:\n{tree}"
        );
    }
}

/// The `oauth` feature verifies signatures with ring and fetches keys with hyper-util's client
/// over rustls on the same ring: no RustCrypto RSA (RUSTSEC-2023-0071, no fixed version), no
/// second crypto library (aws-lc-rs is a C build of its own), no reqwest and what it brings.
#[test]
fn oauth_links_ring_and_rustls_but_no_rsa_crate_no_aws_lc_and_no_reqwest() {
    let (crates, tree) = linked(&["--features", "oauth"]);
    for present in ["ring", "rustls", "hyper-rustls", "webpki-roots"] {
        assert!(crates.contains(present), "{present} is not linked:\n{tree}");
    }
    for absent in [
        "rsa",
        "aws-lc-rs",
        "aws-lc-sys",
        "reqwest",
        "url",
        "idna",
        "p256",
        "ed25519-dalek",
    ] {
        assert!(
            !crates.contains(absent),
            "{absent} is linked with oauth:\n{tree}"
        );
    }
}
