// On a macro error the fn is still emitted: `main` calls it, and only the macro's error shows.
use oxp_runtime::tool;

#[tool(toolkit = "Calculator", version = "1.0.0")]
fn add(a: i64, b: i64) -> i64 {
    a + b
}

fn main() {
    assert_eq!(add(2, 3), 5);
}
