use oxp_runtime::tool;

/// Write.
#[tool(toolkit = "Files", version = "1.0.0", scopes = ["files:write", "", "two words", "files:write"])]
fn write(path: String) -> String {
    path
}

/// Read.
#[tool(toolkit = "Files", version = "1.0.0", scopes = "files:read")]
fn read(path: String) -> String {
    path
}

fn main() {}
