//! `OXP_ADDR=127.0.0.1:8001 cargo run --release -p bare`

#[tokio::main]
async fn main() {
    let addr = std::env::var("OXP_ADDR").unwrap_or_else(|_| "127.0.0.1:8001".into());
    let listener = tokio::net::TcpListener::bind(&addr).await.unwrap();
    println!("bare serving on http://{}", listener.local_addr().unwrap());
    axum::serve(listener, bare::router()).await.unwrap();
}
