//! Calls through a router in process (no socket), for counting instructions per call with
//! callgrind — a figure that, unlike time, does not move with the machine's load:
//!
//! ```sh
//! bench/run.sh instructions      # oxp vs bare, by difference of two run lengths
//! ```
//!
//! `router_calls oxp|oxp-id|bare [calls]`: the same `Calculator.Add` call `calls` times through
//! the OXP server's router (`oxp-id`: each call with a fresh `call_id`, as real clients send) or
//! the bare handler of the load benchmark, with the same log subscriber as `serve()` at `warn`,
//! and the time per call on stderr.

#[path = "../harness/router.rs"]
mod router;

const ADD: &[u8] =
    br#"{"$schema":"urn:oxp:1.0","request":{"tool_id":"Calculator.Add@1.0.0","input":{"a":10,"b":5}}}"#;

/// The same call with a `call_id` no earlier call used: written by hand, not `format!`, so that
/// what the harness spends making the body (a client's work) stays out of the server's figure.
fn with_call_id(n: u64) -> Vec<u8> {
    const HEAD: &[u8] =
        br#"{"$schema":"urn:oxp:1.0","request":{"tool_id":"Calculator.Add@1.0.0","call_id":"bench-"#;
    const TAIL: &[u8] = br#"","input":{"a":10,"b":5}}}"#;
    let mut digits = [0u8; 20];
    let mut start = digits.len();
    let mut rest = n;
    loop {
        start -= 1;
        digits[start] = b'0' + (rest % 10) as u8;
        rest /= 10;
        if rest == 0 {
            break;
        }
    }
    let mut body = Vec::with_capacity(HEAD.len() + digits.len() + TAIL.len());
    body.extend_from_slice(HEAD);
    body.extend_from_slice(&digits[start..]);
    body.extend_from_slice(TAIL);
    body
}

fn main() {
    let mut args = std::env::args().skip(1);
    let which = args.next().unwrap_or_else(|| "oxp".into());
    let calls: u64 = args
        .next()
        .map_or(20_000, |n| n.parse().expect("a number of calls"));
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::new("warn"))
        .init();
    let router = match which.as_str() {
        "bare" => bare::router(),
        "oxp" | "oxp-id" => router::oxp_router(),
        other => panic!("oxp or bare, not {other}"),
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let started = std::time::Instant::now();
        for n in 0..calls {
            let answer = if which == "oxp-id" {
                router::post_call(&router, with_call_id(n)).await
            } else {
                router::post_call(&router, ADD).await
            };
            std::hint::black_box(answer);
        }
        let per_call = started.elapsed().as_nanos() as f64 / calls as f64;
        eprintln!("{which}: {calls} calls, {per_call:.0} ns per call");
    });
}
