use oxp_runtime::tool;

/// Delete a file.
#[tool(toolkit = "Files", version = "1.0.0", confirm = "Delete {file}?")]
fn delete(path: String) -> String {
    path
}

/// Delete a file, with a brace left open.
#[tool(toolkit = "Files", version = "1.0.0", confirm = "Delete {path?")]
fn remove(path: String) -> String {
    path
}

fn main() {}
