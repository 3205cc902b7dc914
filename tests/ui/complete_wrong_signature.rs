use oxp_runtime::prompt;

fn languages() -> Vec<String> {
    Vec::new()
}

/// Write code.
#[prompt]
fn write(
    /// The language.
    #[complete(languages)]
    language: String,
) -> String {
    language
}

fn main() {}
