use oxp_runtime::resource;

/// A count.
#[resource(uri = "count://")]
fn count() -> u64 {
    3
}

fn main() {}
