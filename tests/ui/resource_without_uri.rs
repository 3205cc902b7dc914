use oxp_runtime::resource;

/// The settings.
#[resource(name = "settings")]
fn settings() -> String {
    String::new()
}

fn main() {}
