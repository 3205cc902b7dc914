use oxp_runtime::tool;

async fn tick() {}

/// Count, holding an `Rc` across an `.await`: the server runs tools on any of its threads.
#[tool(toolkit = "Counter", version = "1.0.0")]
async fn count() -> usize {
    let shared = std::rc::Rc::new(1);
    tick().await;
    *shared
}

/// Count, borrowing the context: the same, from the glue's own async block.
#[tool(toolkit = "Counter", version = "1.0.0")]
async fn count_in(context: &oxp_runtime::ToolContext) -> usize {
    let shared = std::rc::Rc::new(context.call_id().len());
    tick().await;
    *shared
}

fn main() {}
