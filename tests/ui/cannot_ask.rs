use oxp_runtime::tool;

/// Wipe a disk.
#[tool(toolkit = "Files", version = "1.0.0", confirm = "Wipe {disk}?", cannot_ask = "skip")]
fn wipe(disk: String) -> String {
    disk
}

/// Shred a document, relaying a confirmation it never declares.
#[tool(toolkit = "Files", version = "1.0.0", cannot_ask = "relay")]
fn shred(doc: String) -> String {
    doc
}

fn main() {}
