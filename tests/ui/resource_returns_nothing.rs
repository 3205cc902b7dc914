use oxp_runtime::resource;

/// Nothing to read.
#[resource(uri = "empty://")]
fn nothing() {}

fn main() {}
