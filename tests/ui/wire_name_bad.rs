use oxp_runtime::tool;

/// Greet.
#[tool(toolkit = "Hello", wire_name = "greet someone", version = "1.0.0")]
fn greet() {}

/// Wave.
#[tool(toolkit = "Hello", wire_name = "", version = "1.0.0")]
fn wave() {}

/// Bow.
#[tool(toolkit = "Hello", wire_name = "a_wire_name_far_longer_than_the_sixty_four_characters_that_are_allowed", version = "1.0.0")]
fn bow() {}

/// Nod.
#[tool(toolkit = "Hello", wire_name = nod, version = "1.0.0")]
fn nod() {}

fn main() {}
