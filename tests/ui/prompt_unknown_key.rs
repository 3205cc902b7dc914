use oxp_runtime::prompt;

/// Review code.
#[prompt(titel = "Review", uri = "x://")]
fn review(code: String) -> String {
    code
}

fn main() {}
