use oxp_runtime::resource;

/// A book.
#[resource(uri = "books://{shelf}/{id}")]
fn book(shelf: String, number: u32) -> String {
    format!("{shelf} {number}")
}

fn main() {}
