use oxp_runtime::tool;

#[derive(schemars::JsonSchema)]
struct Point {
    x: i64,
}

/// Move a point.
#[tool(toolkit = "Geometry", version = "1.0.0")]
async fn shift(point: Point) -> i64 {
    point.x + 1
}

fn main() {}
