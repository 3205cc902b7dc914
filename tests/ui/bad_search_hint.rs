use oxp_runtime::tool;

/// Read a PDF.
#[tool(toolkit = "Docs", version = "1.0.0", search_hint = "  ")]
fn read(path: String) -> String {
    path
}

/// Parse a receipt.
#[tool(toolkit = "Docs", version = "1.0.0", search_hint = "receipt
invoice")]
fn parse(path: String) -> String {
    path
}

/// Sum an invoice.
#[tool(toolkit = "Docs", version = "1.0.0", search_hint = "invoice invoice invoice invoice invoice invoice invoice invoice invoice invoice invoice invoice invoice invoice invoice invoice invoice invoice invoice invoice invoice invoice invoice invoice invoice invoice")]
fn total(path: String) -> String {
    path
}

/// Print a document.
#[tool(toolkit = "Docs", version = "1.0.0", search_hint = ["print", "paper"])]
fn print(path: String) -> String {
    path
}

/// Scan a document.
#[tool(toolkit = "Docs", version = "1.0.0", search_hint)]
fn scan(path: String) -> String {
    path
}

fn main() {}
