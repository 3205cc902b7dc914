use oxp_runtime::prompt;

/// Write code.
#[prompt]
fn write(
    /// The language.
    #[serde(default)]
    language: String,
) -> String {
    language
}

fn main() {}
