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

/// Archive a file, naming the parameter by its Rust name though serde reads it as `fileName`.
#[tool(toolkit = "Files", version = "1.0.0", confirm = "Archive {file_name}?")]
fn archive(#[serde(rename = "fileName")] file_name: String) -> String {
    file_name
}

fn main() {}
