use oxp_runtime::{prompt, resource};

/// The audit log.
#[resource(uri = "audit://all", scopes = ["audit:read", "", "two words", "audit:read"])]
fn audit() -> String {
    String::new()
}

/// A report.
#[resource(uri = "reports://latest", scopes = "reports:read")]
fn report() -> String {
    String::new()
}

/// Review a change.
#[prompt(scopes = ["code:review", "code\"review", "code:review"])]
fn review() -> String {
    String::new()
}

fn main() {}
