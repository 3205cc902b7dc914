//! A resource that changes when a tool writes it (`cargo run -p oxp-runtime --example
//! notes_server -- mcp`), served by `oxp_runtime::serve()`. The guide's "Resources, prompts and
//! skills" page is built around it; `tests/resources.rs` subscribes to it over stdio
//! (`<bin> mcp`).

use std::collections::HashMap;
use std::sync::Mutex;

use oxp_runtime::{resource, tool};

static NOTES: Mutex<Option<HashMap<String, String>>> = Mutex::new(None);

/// The note of a day.
#[resource(uri = "notes://{day}")]
fn note(
    /// The day.
    day: String,
) -> String {
    let notes = NOTES.lock().unwrap();
    notes
        .as_ref()
        .and_then(|n| n.get(&day))
        .cloned()
        .unwrap_or_default()
}

/// Rewrites the note of a day.
#[tool(toolkit = "Notes", version = "1.0.0")]
fn write(
    /// The day.
    day: String,
    /// The new note.
    text: String,
) {
    let uri = format!("notes://{day}");
    NOTES
        .lock()
        .unwrap()
        .get_or_insert_default()
        .insert(day, text);
    oxp_runtime::resource::changed(uri);
}

#[tokio::main]
async fn main() {
    oxp_runtime::serve().await
}
