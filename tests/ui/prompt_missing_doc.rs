use oxp_runtime::prompt;

#[prompt]
fn review(code: String) -> String {
    code
}

fn main() {}
