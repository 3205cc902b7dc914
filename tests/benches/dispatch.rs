//! In-process dispatch: request bytes → request → resolve → validate → invoke → response bytes,
//! the whole transport-neutral path (the HTTP dialects are measured by the router rows), with time per call (criterion) and allocations per call (a
//! counting global allocator).
//!
//! ```sh
//! cargo bench -p oxp-tests --bench dispatch
//! ```

#[path = "../harness/router.rs"]
mod router;

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicU64, Ordering};

use criterion::{Criterion, criterion_group, criterion_main};
use oxp_runtime::call::{CallOutcome, Pipeline};
use oxp_runtime::protocol::CallToolRequest;
use serde_json::json;

struct Counting;

static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// The OpenAPI envelope, as a front reads it.
#[derive(serde::Deserialize)]
struct Envelope {
    request: CallToolRequest,
}

/// One call, bytes to bytes.
async fn dispatch(pipeline: &Pipeline, body: &[u8]) -> Vec<u8> {
    let Envelope { request } = serde_json::from_slice(body).expect("a valid request");
    match pipeline.call(request).await {
        CallOutcome::Completed(response) => {
            let mut bytes = Vec::with_capacity(256);
            serde_json::to_writer(&mut bytes, &response).unwrap();
            bytes
        }
        other => panic!("{other:?}"),
    }
}

fn wide(n: u32) -> serde_json::Value {
    json!({"name": "n", "count": n, "ratio": 0.5, "flag": true, "tags": ["a", "b"],
           "note": "x", "code": "c", "size": 7, "score": 1.5, "level": -3})
}

/// Measures `call` over fresh bodies from `next_body`: allocations per call first (outside
/// criterion's own bookkeeping), then time per call. Calls run inside one `block_on` per batch,
/// as inside a server's task: what is timed is the call, not entering the runtime.
fn measure<F: std::future::Future>(
    c: &mut Criterion,
    runtime: &tokio::runtime::Runtime,
    name: &str,
    mut next_body: impl FnMut() -> Vec<u8>,
    call: impl Fn(Vec<u8>) -> F,
) {
    let calls = 10_000u64;
    let bodies: Vec<Vec<u8>> = (0..calls).map(|_| next_body()).collect();
    let before = ALLOCATIONS.load(Ordering::Relaxed);
    runtime.block_on(async {
        for body in bodies {
            call(body).await;
        }
    });
    let per_call = (ALLOCATIONS.load(Ordering::Relaxed) - before) as f64 / calls as f64;
    println!("{name}: {per_call:.1} allocations per call");
    c.bench_function(name, |b| {
        b.iter_custom(|iterations| {
            let bodies: Vec<Vec<u8>> = (0..iterations).map(|_| next_body()).collect();
            runtime.block_on(async {
                let started = std::time::Instant::now();
                for body in bodies {
                    std::hint::black_box(call(body).await);
                }
                started.elapsed()
            })
        })
    });
}

fn bench(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let pipeline = Pipeline::new(oxp_tests::all_tools().build().unwrap());
    let cases = [
        (
            "add (no call_id)",
            json!({"$schema": "urn:oxp:1.0", "request": {"tool_id": "Calculator.Add@1.0.0", "input": {"a": 10, "b": 5}}}),
        ),
        (
            "add (call_id, idempotent)",
            json!({"$schema": "urn:oxp:1.0", "request": {"call_id": "CALL", "tool_id": "Calculator.Add@1.0.0", "input": {"a": 10, "b": 5}}}),
        ),
        (
            "fifty-field nested input",
            json!({"request": {"tool_id": "Bench.Fifty", "input": {"a": wide(1), "b": wide(2), "c": wide(3), "d": wide(4), "e": wide(5)}}}),
        ),
    ];
    for (name, body) in cases {
        let template = body.to_string();
        let mut n = 0u64;
        // call_ids must differ per call, or the idempotent case would measure the cache.
        let next_body = move || {
            n += 1;
            template.replace("CALL", &format!("c{n}")).into_bytes()
        };
        measure(c, &runtime, name, next_body, |body| {
            let pipeline = &pipeline;
            async move { dispatch(pipeline, &body).await }
        });
    }

    // The HTTP layer without the network: the same add through the server's router, and through
    // the bare axum handler of the load benchmark (`bench/bare`). The difference is what routing,
    // layers and the pipeline cost over hand-written JSON work.
    let add = br#"{"$schema":"urn:oxp:1.0","request":{"tool_id":"Calculator.Add@1.0.0","input":{"a":10,"b":5}}}"#;
    let oxp = router::oxp_router();
    let bare = bare::router();
    for (name, router) in [("router: oxp add", &oxp), ("router: bare add", &bare)] {
        measure(
            c,
            &runtime,
            name,
            || add.to_vec(),
            |body| router::post_call(router, body),
        );
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
