//! The process layer: what a binary's `main` is. [`serve`] reads the command line and the
//! `OXP_*` environment into typed configuration ([`ServerConfig`]), sets up logging and the panic
//! hook, and runs the server or a subcommand (`tools`, `dispatch`, `mcp`). Only this layer reads
//! the environment or exits the process; the fronts below it (`server`, `mcp`, `providers`) take
//! explicit values.
//!
//! ```no_run
//! // A binary's whole `main`: `cargo run` serves every #[tool]; `cargo run -- tools --format
//! // anthropic` prints them for a model; `cargo run -- mcp` speaks MCP on stdio.
//! #[tokio::main]
//! async fn main() {
//!     oxp_runtime::app::serve().await
//! }
//! ```

mod commands;
mod config;
mod install;
mod settings;

use std::net::SocketAddr;
use std::time::Duration;

pub use config::{ConfigError, DEFAULT_ADDR, LogFormat, ServerConfig};
pub use settings::{SETTINGS, SETTINGS_TABLE, Setting, SettingDefault, SettingKind};

use crate::registry::Registry;
use crate::server::{Server, Shutdown};
use commands::Command;

/// The one-line `main`: every `#[tool]` of the binary, served over OXP as the environment says
/// (see [`ServerConfig`]), until Ctrl-C or SIGTERM.
///
/// ```no_run
/// #[tokio::main]
/// async fn main() {
///     oxp_runtime::serve().await
/// }
/// ```
///
/// A configuration or registration problem, or an address already in use, ends the process
/// with a message and exit code 2; a shutdown whose grace period ran out with calls in flight,
/// with exit code 1; a drained shutdown, with 0.
pub async fn serve() {
    run(None).await
}

/// [`serve()`], publishing `card` as this server's MCP Server Card (see [`crate::card`]):
/// what [`serve!`](crate::serve!) calls with the card of the user's `Cargo.toml`. The card's
/// endpoint is `OXP_PUBLIC_URL` + `/mcp` unless the card names one. A card that cannot be served
/// (no description in `Cargo.toml`, say) is reported at start-up, and the tools are served
/// without it; `<bin> card` prints the card or, exiting 2, what is wrong with it.
///
/// ```no_run
/// #[tokio::main]
/// async fn main() {
///     let card = oxp_runtime::server_card!().title("Calculator");
///     oxp_runtime::app::serve_with(card).await
/// }
/// ```
pub async fn serve_with(card: crate::card::ServerCard) {
    run(Some(card)).await
}

async fn run(card: Option<crate::card::ServerCard>) {
    let command = command_line();
    if command != Command::Serve {
        std::process::exit(run_command(command, card).await);
    }
    let config = ServerConfig::from_env()
        .unwrap_or_else(|error| fail(&format!("configuration error: {error}")));
    config.init_logging();
    crate::call::install_panic_hook();
    let server = server(&config, card).await;
    let listener = match tokio::net::TcpListener::bind(config.addr).await {
        Ok(listener) => listener,
        Err(error) => fail(&format!("cannot listen on {}: {error}", config.addr)),
    };
    let addr = listener.local_addr().unwrap_or(config.addr);
    let mut endpoints = endpoints(&config, addr);
    endpoints.extend(serve_metrics_apart(&config, &server).await);
    let shutdown = shutdown_signal();
    warn_about_state_keys(&config);
    warn_about_exposure(&config, addr);
    warn_about_authorization(&server);
    for endpoint in &endpoints {
        tracing::info!("serving {endpoint}");
    }
    // What a shutdown that runs out of grace marks interrupted: the server's own tasks.
    let pipeline = server.pipeline().clone();
    let ended = server
        .serve(listener, shutdown, config.shutdown_grace)
        .await;
    // The last calls' spans go out before the process does.
    #[cfg(feature = "otel")]
    crate::otel::flush();
    stop(ended, &pipeline).await
}

/// The command the arguments name; a usage error ends the process with its usage.
fn command_line() -> Command {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match commands::parse(&args) {
        Ok(command) => command,
        Err(message) if args.first().is_some_and(|a| a == "install") => {
            std::process::exit(install::usage_error(&message))
        }
        Err(message) => std::process::exit(commands::usage_error(&message)),
    }
}

/// Every command but serving: its exit code.
async fn run_command(command: Command, card: Option<crate::card::ServerCard>) -> i32 {
    match command {
        Command::Card if !cfg!(feature = "mcp") => {
            eprintln!(
                "error: this binary was built without MCP, so it serves no MCP Server Card: turn on \
                 oxp-runtime's `mcp` feature"
            );
            2
        }
        Command::Card => {
            let public_url = ServerConfig::from_env()
                .unwrap_or_else(|e| fail(&format!("configuration error: {e}")))
                .public_url;
            commands::card(card, public_url.as_deref())
        }
        Command::Install(install) => match install::Places::from_env() {
            Ok(places) => install::run(&install, &places, &commands::program()),
            Err(error) => {
                eprintln!("error: {error}");
                2
            }
        },
        Command::Check(args) => check(&args).await,
        command => run_subcommand(command).await,
    }
}

/// The server `config` makes of every `#[tool]` the binary has, with `card` where it can be
/// served; a registration or configuration problem ends the process.
async fn server(config: &ServerConfig, card: Option<crate::card::ServerCard>) -> Server {
    let registry = match config.registry() {
        Ok(registry) => registry,
        Err(error) => fail(&error.to_string()),
    };
    let mut server = match config.apply(Server::new(registry)).await {
        Ok(server) => server,
        Err(error) => fail(&format!("configuration error: {error}")),
    };
    // The card describes the MCP endpoint: without MCP there is nothing for it to point at.
    // A card that cannot be served costs discovery, not the tools: said, and served without.
    if let Some(card) = card.filter(|_| cfg!(feature = "mcp")) {
        match server.clone().server_card(card) {
            Ok(with_card) => server = with_card,
            Err(error) => tracing::warn!("serving no MCP Server Card: {error}"),
        }
    }
    server
}

/// Every endpoint served at `addr`, one line each, so that a newcomer sees where to point an
/// agent.
fn endpoints(config: &ServerConfig, addr: SocketAddr) -> Vec<String> {
    let mut endpoints = vec![format!(
        "OXP 1.0 on http://{addr} (GET /tools, POST /tools/call)"
    )];
    if cfg!(feature = "mcp") {
        endpoints.push(format!(
            "MCP on http://{addr}/mcp (streamable HTTP; stdio: `<bin> mcp`)"
        ));
    }
    if config.playground {
        endpoints.push(format!("the playground on http://{addr}/"));
    }
    if config.metrics && config.metrics_addr.is_none() {
        endpoints.push(format!("metrics on http://{addr}/metrics"));
    }
    endpoints
}

/// Metrics on a port of their own (`OXP_METRICS_ADDR`), with the main port's connection limits
/// and guard, stopped with the process; the endpoint's line, when there is one.
async fn serve_metrics_apart(config: &ServerConfig, server: &Server) -> Option<String> {
    let metrics_addr = config.metrics_addr?;
    let metrics_listener = match tokio::net::TcpListener::bind(metrics_addr).await {
        Ok(listener) => listener,
        Err(error) => fail(&format!(
            "cannot listen on {metrics_addr} (OXP_METRICS_ADDR): {error}"
        )),
    };
    let metrics_addr = metrics_listener.local_addr().unwrap_or(metrics_addr);
    if !metrics_addr.ip().is_loopback() {
        tracing::warn!(
            "OXP_METRICS_ADDR is not a loopback address: anyone who reaches {metrics_addr} \
             reads the metrics (tool ids and call counts) without authentication"
        );
    }
    let metrics = server
        .clone()
        .serve_metrics(metrics_listener, std::future::pending());
    tokio::spawn(async move {
        if let Err(error) = metrics.await {
            tracing::error!(%error, "the metrics listener stopped");
        }
    });
    Some(format!(
        "metrics on http://{metrics_addr}/metrics (OXP_METRICS_ADDR)"
    ))
}

/// What replicas of a server with tools that ask need, said once at start-up: a shared state
/// key, a shared store, and a store at all.
fn warn_about_state_keys(config: &ServerConfig) {
    if cfg!(feature = "mcp") && config.state_key.is_none() {
        tracing::info!(
            "MCP request states of tools that ask are sealed with a key made at start-up: \
             replicas need OXP_STATE_KEY (32 bytes or more, the same on every one) to continue \
             each other's calls, and calls need it to survive a restart"
        );
    }
    if cfg!(feature = "mcp") && config.state_key.is_some() && config.redis_url.is_none() {
        tracing::info!(
            "OXP_STATE_KEY is set without OXP_REDIS_URL: replicas continue each other's calls that \
             ask, but each remembers only its own calls' ends, so a last round replayed at another \
             replica (or after a restart) runs again; share a store with OXP_REDIS_URL"
        );
    }
    if cfg!(feature = "mcp") && config.idempotency_ttl.is_none() {
        tracing::warn!(
            "OXP_IDEMPOTENCY_TTL_MS=0: nothing remembers that a call which asked its user has \
             ended, so a client that replays its last round runs the tool again; and no tool runs \
             as an MCP task (`task = \"required\"` tools are refused to clients that ask for one)"
        );
    }
}

/// How the process ends once the server stopped: 0 drained, 1 when the grace period ran out
/// with calls in flight, 2 when the server failed.
async fn stop(ended: Result<Shutdown, std::io::Error>, pipeline: &crate::call::Pipeline) {
    match ended {
        Ok(Shutdown::Drained) => tracing::info!("stopped: every call was answered"),
        Ok(Shutdown::GraceExpired { active }) => {
            // Tasks still running are told as ended, not left to their lease.
            pipeline.task_runs().interrupt().await;
            tracing::warn!(
                active,
                "stopped: the grace period ran out with calls in flight"
            );
            std::process::exit(1);
        }
        Err(error) => fail(&format!("the server stopped: {error}")),
    }
}

/// `check <url>`: the OXP conformance checker against any server (this one, or another).
#[cfg(feature = "check")]
async fn check(args: &[String]) -> i32 {
    oxp_check::cli::main(args).await
}

#[cfg(not(feature = "check"))]
async fn check(_: &[String]) -> i32 {
    eprintln!(
        "error: this binary was built without the OXP checker: turn on oxp-runtime's `check` \
         feature, or run it on its own (`cargo install oxp-check`, then `oxp-check <url>`)"
    );
    2
}

/// `tools`, `dispatch`, `mcp` and `lock`: no server, no logs on stdout (it carries the output).
async fn run_subcommand(command: Command) -> i32 {
    // `lock` records every tool the binary has; the others expose what `OXP_TOOLS` selects.
    if let Command::Lock {
        path,
        check,
        allow_removal,
    } = &command
    {
        let registry = Registry::from_inventory().unwrap_or_else(|e| fail(&e.to_string()));
        return commands::lock(&registry, path, *check, *allow_removal);
    }
    let config =
        ServerConfig::from_env().unwrap_or_else(|e| fail(&format!("configuration error: {e}")));
    let registry = config.registry().unwrap_or_else(|e| fail(&e.to_string()));
    match command {
        Command::Tools { format, strict } => commands::tools(&registry, format, strict),
        Command::Dispatch { provider } => {
            let mut pipeline = crate::call::Pipeline::new(registry);
            pipeline = pipeline.default_timeout(config.tool_timeout.unwrap_or(Duration::ZERO));
            commands::dispatch(pipeline, provider).await
        }
        #[cfg(feature = "mcp")]
        Command::Mcp => {
            // stdout carries the protocol: logs go to stderr.
            {
                use tracing_subscriber::layer::SubscriberExt;
                use tracing_subscriber::util::SubscriberInitExt;
                let _ = tracing_subscriber::fmt()
                    .with_env_filter(config.log_filter())
                    .with_writer(std::io::stderr)
                    .with_ansi(false)
                    .finish()
                    .with(crate::mcp::log_layer())
                    .try_init();
            }
            crate::call::install_panic_hook();
            let mut pipeline = crate::call::Pipeline::new(registry);
            pipeline = pipeline.default_timeout(config.tool_timeout.unwrap_or(Duration::ZERO));
            let mcp = config
                .mcp(pipeline)
                .unwrap_or_else(|e| fail(&format!("configuration error: {e}")));
            match mcp.serve_stdio().await {
                Ok(()) => 0,
                Err(error) => {
                    tracing::error!(%error, "MCP over stdio failed");
                    1
                }
            }
        }
        #[cfg(not(feature = "mcp"))]
        Command::Mcp => {
            eprintln!(
                "error: this binary was built without MCP: turn on oxp-runtime's `mcp` feature \
                 (on by default; `default-features = false` turned it off)"
            );
            2
        }
        Command::Serve
        | Command::Card
        | Command::Check(_)
        | Command::Install(_)
        | Command::Lock { .. } => {
            unreachable!("handled before")
        }
    }
}

/// The spec's SHOULDs an operator can get wrong: internet-facing servers require authentication
/// (oxp-notes §1 A.58), API keys carry at least 32 bytes of entropy (A.60).
fn warn_about_exposure(config: &ServerConfig, addr: SocketAddr) {
    if !addr.ip().is_loopback() && !config.auth.is_enabled() {
        tracing::warn!(
            "serving on {addr} without authentication: set OXP_API_KEYS or OXP_JWT_SECRET for any address others can reach"
        );
    }
    // Beyond loopback the server answers only to its own names: one reached by another (a
    // proxy's, a service's) is refused with a 403 until the operator names it.
    if !addr.ip().is_loopback() && config.allowed_hosts.is_empty() && config.public_url.is_none() {
        tracing::info!(
            "answering only requests whose Host is one of the addresses {addr} listens on: name \
             any other a client reaches the server by in OXP_ALLOWED_HOSTS or OXP_PUBLIC_URL"
        );
    }
    if config.auth.has_short_api_key() {
        tracing::warn!(
            "an API key in OXP_API_KEYS is shorter than 32 characters; use at least 32 random bytes"
        );
    }
}

/// Tools that require authorization, on a server with no provider to mint challenges: their
/// callers are refused with the providers named in `missing_requirements`, but cannot be told
/// where to grant them. Worth saying once, at start-up, by name.
fn warn_about_authorization(server: &Server) {
    let pipeline = server.pipeline();
    if pipeline.authorization_provider().is_some() {
        return;
    }
    let tools: Vec<&str> = pipeline
        .registry()
        .tools()
        .iter()
        .filter(|t| !t.descriptor().authorization.is_empty())
        .map(|t| t.id())
        .collect();
    if !tools.is_empty() {
        tracing::warn!(
            tools = %tools.join(", "),
            "these tools require authorization, but the server has no authorization provider: \
             calls without a token are refused without a challenge to complete"
        );
    }
}

fn fail(message: &str) -> ! {
    tracing::error!("{message}");
    eprintln!("oxp: {message}");
    std::process::exit(2)
}

/// Ctrl-C or SIGTERM. The handlers are installed here, at once, not when the future is first
/// polled: a signal that arrives right after the server says it is serving must already be ours.
fn shutdown_signal() -> impl std::future::Future<Output = ()> + Send + 'static {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let interrupt = signal(SignalKind::interrupt());
        let terminate = signal(SignalKind::terminate());
        async move {
            match (interrupt, terminate) {
                (Ok(mut interrupt), Ok(mut terminate)) => {
                    tokio::select! {
                        _ = interrupt.recv() => {},
                        _ = terminate.recv() => {},
                    }
                }
                _ => {
                    let _ = tokio::signal::ctrl_c().await;
                }
            }
        }
    }
    #[cfg(not(unix))]
    async {
        let _ = tokio::signal::ctrl_c().await;
    }
}
