use oxp_runtime::prompt;

/// Review code.
#[prompt]
fn review(code: String) -> usize {
    code.len()
}

fn main() {}
