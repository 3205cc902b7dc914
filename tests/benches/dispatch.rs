//! In-process dispatch: request bytes → dialect → resolve → validate → invoke → response bytes,
//! the whole transport-neutral path, with time per call (criterion) and allocations per call (a
//! counting global allocator).
//!
//! ```sh
//! cargo bench -p oxp-tests --bench dispatch
//! ```

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicU64, Ordering};

use axum::http::HeaderMap;
use criterion::{criterion_group, criterion_main, Criterion};
use oxp_runtime::call::{CallOutcome, Pipeline};
use oxp_runtime::server::dialect;
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

/// One call, bytes to bytes, as the HTTP front does it.
async fn dispatch(pipeline: &Pipeline, headers: &HeaderMap, body: &[u8]) -> Vec<u8> {
    let (_, request) = dialect::read_call(headers, body, false).expect("a valid request");
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

fn bench(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let pipeline = Pipeline::new(oxp_tests::all_tools().build().unwrap());
    let headers = HeaderMap::new();
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
        let mut next_body = move || {
            n += 1;
            template.replace("CALL", &format!("c{n}")).into_bytes()
        };
        // Allocations per call, outside criterion's own bookkeeping.
        let calls = 10_000u64;
        let bodies: Vec<Vec<u8>> = (0..calls).map(|_| next_body()).collect();
        let before = ALLOCATIONS.load(Ordering::Relaxed);
        runtime.block_on(async {
            for body in &bodies {
                dispatch(&pipeline, &headers, body).await;
            }
        });
        let per_call = (ALLOCATIONS.load(Ordering::Relaxed) - before) as f64 / calls as f64;
        println!("{name}: {per_call:.1} allocations per call");
        // Calls run inside one `block_on` per batch, as inside a server's task: what is timed
        // is the dispatch, not entering the runtime.
        c.bench_function(name, |b| {
            b.iter_custom(|iterations| {
                let bodies: Vec<Vec<u8>> = (0..iterations).map(|_| next_body()).collect();
                runtime.block_on(async {
                    let started = std::time::Instant::now();
                    for body in &bodies {
                        std::hint::black_box(dispatch(&pipeline, &headers, body).await);
                    }
                    started.elapsed()
                })
            })
        });
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
