use oxp_runtime::tool;

/// Read a file.
#[tool(toolkit = "Files", version = "1.0.0", read_only, destructive)]
fn read(path: String) -> String {
    path
}

/// Read it again.
#[tool(toolkit = "Files", version = "1.0.0", read_only = true, destructive = true)]
fn reread(path: String) -> String {
    path
}

fn main() {}
