//! `oxp-check <url>`: see `oxp-check --help`.

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    std::process::exit(oxp_check::cli::main(&args).await)
}
