#!/usr/bin/env bash
# Performance measurements of oxp, on loopback only (127.0.0.1), bounded in time.
#
#   bench/run.sh http      oxp vs a bare axum handler doing the same JSON work, built with cargo's
#                          default release profile and with the README's (PROFILES="default lto"),
#                          each request with a fresh call_id and without one (CALLS="fresh none"):
#                          wrk at 32 and 256 connections, alternating A B B A …; req/s, p50, p99 and the ratios of
#                          the sums over ROUNDS rounds (default 10) of DURATION seconds (default 3),
#                          with the median and range of the rounds' throughput ratios (this
#                          machine's speed swings by a quarter within a minute: many short
#                          alternating rounds average that out)
#   bench/run.sh metrics   the example with metrics on vs off (OXP_METRICS), alternating the same way
#   bench/run.sh accept    the same router behind Server::serve and behind axum::serve (default
#                          release profile, fresh call_ids): what the accept loop costs
#   bench/run.sh startup   a server with 1,000 tools (built with the recommended release profile):
#                          process start → /health 200, idle RSS, and RSS once every tool was called
#   bench/run.sh compile   a crate of 100 #[tool] fns (`tools`: default-features = false, OXP
#                          alone; `tools_mcp`: default features, with MCP) vs the same fns under rmcp's #[tool_router]
#                          and as plain fns: packages, full clean build, crate-only build, rebuild
#                          after editing one body and after a touch (cargo's dev profile; KINDS
#                          picks some of "plain rmcp tools tools_mcp")
#   bench/run.sh instructions  the same call through oxp's router (with a fresh call_id and without)
#                          and the bare handler, in process, under callgrind: instructions per
#                          call, and misses per call in callgrind's model of the L1
#                          instruction cache, once the idempotency store is full (both
#                          repeatable within 1 %, unlike time)
#   bench/run.sh cpu       the servers' own CPU time per request under wrk (user and system, from
#                          /proc/<pid>/stat over each run): oxp with a fresh call_id and without,
#                          and the bare handler, alternating over ROUNDS rounds at 32 connections
#                          (default release profile). Steadier than req/s: wrk shares the cores,
#                          so a server that needs more CPU per request also slows its client
#   bench/run.sh mcp       MCP 2026-07-28 stateless tools/call of one `add` tool: oxp's /mcp (the tool
#                          written with #[tool], input validated) against rmcp 3.11's own
#                          StreamableHttpService (json_response, stateless, no validation, with and
#                          without the slowloris guard), tower-mcp's HttpTransport, FastMCP 4's
#                          stateless HTTP (Python, from PyPI), and the same call over OXP to the
#                          same oxp process (`oxp-oxp`); the Rust crates generated in target/bench
#                          and built with cargo's default release profile; wrk at 32 and 256
#                          connections, alternating as `http` does, with each server's CPU per
#                          request; ONLY="oxp oxp-oxp" alternates just the servers named
#   bench/run.sh all
#
# Every server runs with its own defaults, as users run it (oxp with no OXP_LOG, as `cargo run`
# starts it), its output kept in target/bench/<name>.log as a service manager keeps it; `http`,
# `metrics` and `mcp` print each log's size after the load.
#
# In-process dispatch (time and allocations per call): cargo bench -p oxp-tests --bench dispatch
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
work=$root/target/bench
mkdir -p "$work"
DURATION=${DURATION:-3}
ROUNDS=${ROUNDS:-10}
# Servers whose CPU time `alternate` reads from /proc, by the name it is given.
declare -A server_pid=()
# The wrk script of a server whose request differs from $LUA's, by the name it is given.
declare -A server_lua=()

need_wrk() {
  if ! command -v wrk >/dev/null; then
    echo "installing wrk (Debian package)…" >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq wrk >/dev/null 2>&1 ||
      { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq wrk >/dev/null; }
  fi
}

# Waits for a 2xx from url, or with `any` for any HTTP answer at all (the bare server has no
# /health).
wait_up() { # url [any]
  local flags=-sf
  [ "${2:-}" = any ] && flags=-s
  for _ in $(seq 1 500); do
    curl "$flags" -o /dev/null "$1" && return 0
    sleep 0.01
  done
  echo "no answer from $1" >&2
  return 1
}

# wrk's summary → "req/s p50_ms p99_ms"
wrk_run() { # connections url [script]
  wrk -t2 -c"$1" -d"${DURATION}s" --latency -s "${3:-${LUA:-bench/post.lua}}" "$2" | awk '
    function ms(v) { if (v ~ /us$/) return v/1000; if (v ~ /ms$/) return v+0; if (v ~ /s$/) return v*1000; return v }
    /^ +50%/ { p50 = ms($2) }
    /^ +99%/ { p99 = ms($2) }
    /^Requests\/sec/ { rps = $2 }
    /Non-2xx/ { bad = $NF }
    END { if (bad) { print "non-2xx answers: " bad > "/dev/stderr"; exit 1 } printf "%s %.3f %.3f\n", rps, p50, p99 }'
}

# Servers under the same load, alternating over ROUNDS rounds at 32 and 256 connections (A B C,
# then C B A, …): each round's req/s, p50 and p99, then for each server after the first the
# ratios first/it of the sums, and the median and range of the rounds' throughput ratios.
alternate() { # name_a url_a name_b url_b [name url]…
  local names=() urls=()
  while [ $# -gt 0 ]; do names+=("$1"); urls+=("$2"); shift 2; done
  local n=${#names[@]} i
  # Warm each up (page cache, allocator arenas, connection set-up) before anything is counted.
  for i in "${!urls[@]}"; do DURATION=2 wrk_run 256 "${urls[$i]}" "${server_lua[${names[$i]}]:-}" >/dev/null; done
  printf '%-6s %-12s %12s %10s %10s\n' conns server req/s p50_ms p99_ms
  for c in 32 256; do
    local rounds=$work/alternate-$c.txt cpu=$work/alternate-cpu-$c.txt
    : > "$rounds"
    : > "$cpu"
    for round in $(seq 1 "$ROUNDS"); do
      # Forwards, then backwards: a machine that speeds up or slows down over the run favours none.
      local order
      order=$(seq 0 $((n - 1)))
      [ $((round % 2)) -eq 0 ] && order=$(seq $((n - 1)) -1 0)
      local got=()
      for i in $order; do
        local pid=${server_pid[${names[$i]}]:-} before=""
        [ -n "$pid" ] && before=$(cpu_seconds "$pid")
        read -r r p50 p99 < <(wrk_run "$c" "${urls[$i]}" "${server_lua[${names[$i]}]:-}")
        printf '%-6s %-12s %12s %10s %10s\n' "$c" "${names[$i]}" "$r" "$p50" "$p99"
        got[$i]="$r $p50 $p99"
        [ -n "$pid" ] && echo "${names[$i]} $r $before $(cpu_seconds "$pid")" >> "$cpu"
      done
      echo "${got[*]}" >> "$rounds"
    done
    # Columns: rps p50 p99 of each server in the order given, one line per round.
    for i in $(seq 1 $((n - 1))); do
      local b=$((3 * i + 1)) sorted
      sorted=$(awk -v b="$b" '{ print $1 / $b }' "$rounds" | sort -g | tr '\n' ' ')
      # p99 also as the ratio of the servers' median rounds: a stall of the machine lands in
      # one round of one server, and the sum carries it whole.
      awk -v c="$c" -v sorted="$sorted" -v a="${names[0]}" -v name="${names[$i]}" -v b="$b" '
        function median_of(v, k,   i, j, t) {
          for (i = 2; i <= k; i++) for (j = i; j > 1 && v[j - 1] > v[j]; j--) { t = v[j]; v[j] = v[j - 1]; v[j - 1] = t }
          return (k % 2) ? v[(k + 1) / 2] : (v[k / 2] + v[k / 2 + 1]) / 2
        }
        { o += $1; op50 += $2; op99 += $3; s += $b; sp50 += $(b + 1); sp99 += $(b + 2); n++; ap99[n] = $3; bp99[n] = $(b + 2) }
        END {
          k = split(sorted, r, " ")
          median = (k % 2) ? r[(k + 1) / 2] : (r[k / 2] + r[k / 2 + 1]) / 2
          printf "at %s connections: throughput %s/%s = %.3f (rounds: median %.3f, range %.3f–%.3f), p50 %s/%s = %.3f, p99 %s/%s = %.3f (median rounds: %.3f)\n",
            c, a, name, o / s, median, r[1], r[k], a, name, op50 / sp50, a, name, op99 / sp99, median_of(ap99, n) / median_of(bp99, n)
        }' "$rounds"
    done
    # Each server's own CPU time per request over its rounds (servers named in server_pid).
    # (An `if`, not `&&`: a false test as the function's last word would stop `set -e` callers.)
    if [ -s "$cpu" ]; then awk -v d="$DURATION" -v c="$c" '
      { n = $2 * d; user[$1] += ($5 - $3) * 1e6; sys[$1] += ($6 - $4) * 1e6; reqs[$1] += n }
      END { for (k in reqs) printf "at %s connections: %s CPU per request: user %.2f µs, system %.2f µs\n", c, k, user[k] / reqs[k], sys[k] / reqs[k] }' "$cpu" | sort
    fi
  done
}

# Starts a server in the background as a service manager runs it: with its own defaults (oxp
# with no OXP_LOG, as `cargo run` has it) and its output appended to target/bench/<name>.log,
# where a log that grows with the load would show. $! is its pid.
serve_logged() { # name command [args…] (environment through `env`)
  local log=$work/$1.log
  shift
  : >"$log"
  "$@" >>"$log" 2>&1 &
}

# How much a server started by serve_logged has logged so far.
log_size() { # name
  printf '%s log: %d lines, %d bytes (%s)\n' "$1" "$(wc -l <"$work/$1.log")" \
    "$(wc -c <"$work/$1.log")" "$work/$1.log"
}

# Builds the example and the bare server with a release profile: `default` is cargo's own
# (what most users build with), `lto` the README's (fat LTO, one codegen unit). Prints the
# directory the binaries are in.
build_release() { # default|lto
  local dir=$work/profile-$1
  if [ "$1" = default ]; then
    CARGO_PROFILE_RELEASE_LTO=false CARGO_PROFILE_RELEASE_CODEGEN_UNITS=16 \
      cargo build --release -q -p calculator -p bare --target-dir "$dir" >&2
  else
    cargo build --release -q -p calculator -p bare --target-dir "$dir" >&2
  fi
  echo "$dir/release"
}

# oxp vs the bare handler, for each profile (PROFILES, default "default lto") and each kind of
# request (CALLS, default "fresh none": a fresh call_id per request, as real clients send, or
# none).
http() {
  need_wrk
  for profile in ${PROFILES:-default lto}; do
    local bin
    bin=$(build_release "$profile")
    serve_logged "oxp-http-$profile" env OXP_ADDR=127.0.0.1:18080 "$bin/calculator"
    local oxp=$!
    serve_logged "bare-http-$profile" env OXP_ADDR=127.0.0.1:18081 "$bin/bare"
    local bare=$!
    wait_up http://127.0.0.1:18080/health
    wait_up http://127.0.0.1:18081/tools/call any
    for calls in ${CALLS:-fresh none}; do
      echo "== profile $profile, call_id: $calls"
      local lua=bench/post.lua
      [ "$calls" = fresh ] && lua=bench/post_call_id.lua
      LUA=$lua alternate oxp http://127.0.0.1:18080/tools/call bare http://127.0.0.1:18081/tools/call
    done
    log_size "oxp-http-$profile"
    kill $oxp $bare 2>/dev/null
    wait $oxp $bare 2>/dev/null || true
  done
}

# CPU seconds (user, system) a process has used so far.
cpu_seconds() { # pid
  awk -v hz="$(getconf CLK_TCK)" '{ printf "%.4f %.4f\n", $14 / hz, $15 / hz }' "/proc/$1/stat"
}

# Each server's own CPU time per request under the same load: user and system µs per request
# (kernel time counts the loopback's delivery to wrk, which a slower server makes dearer: wrk
# waits idle more often and each wake-up costs more).
cpu() {
  need_wrk
  local bin
  bin=$(build_release default)
  serve_logged oxp-cpu env OXP_ADDR=127.0.0.1:18080 "$bin/calculator"
  local oxp=$!
  serve_logged bare-cpu env OXP_ADDR=127.0.0.1:18081 "$bin/bare"
  local bare=$!
  trap 'kill $oxp $bare 2>/dev/null' RETURN
  wait_up http://127.0.0.1:18080/health
  wait_up http://127.0.0.1:18081/tools/call any
  local runs=(
    "oxp-fresh $oxp http://127.0.0.1:18080/tools/call bench/post_call_id.lua"
    "oxp-none $oxp http://127.0.0.1:18080/tools/call bench/post.lua"
    "bare-fresh $bare http://127.0.0.1:18081/tools/call bench/post_call_id.lua"
  )
  for run in "${runs[@]}"; do # warm-up
    read -r _ _ url lua <<<"$run"
    wrk -t2 -c32 -d2s -s "$lua" "$url" >/dev/null
  done
  local out=$work/cpu.txt
  : > "$out"
  for round in $(seq 1 "$ROUNDS"); do
    # Forwards, then backwards: a machine that speeds up or slows down favours none.
    local order=(0 1 2)
    [ $((round % 2)) -eq 0 ] && order=(2 1 0)
    for i in "${order[@]}"; do
      read -r name pid url lua <<<"${runs[$i]}"
      local before after rps
      before=$(cpu_seconds "$pid")
      rps=$(LUA=$lua wrk_run 32 "$url" | awk '{ print $1 }')
      after=$(cpu_seconds "$pid")
      echo "$name $rps $before $after" >> "$out"
    done
  done
  printf '%-11s %9s %9s %9s\n' server req/s user_us sys_us
  awk -v d="$DURATION" '
    { n = $2 * d; user[$1] += ($5 - $3) * 1e6; sys[$1] += ($6 - $4) * 1e6; reqs[$1] += n; rps[$1] += $2; runs[$1]++ }
    END { for (k in runs) printf "%-11s %9.0f %9.2f %9.2f\n", k, rps[k] / runs[k], user[k] / reqs[k], sys[k] / reqs[k] }' "$out" | sort
}

# What the accept loop costs: the same router behind Server::serve and behind axum::serve,
# built with cargo's default release profile, each request with a fresh call_id.
accept() {
  need_wrk
  local dir=$work/profile-default
  CARGO_PROFILE_RELEASE_LTO=false CARGO_PROFILE_RELEASE_CODEGEN_UNITS=16 \
    cargo build --release -q -p oxp-runtime --example accept_loop --target-dir "$dir"
  local bin=$dir/release/examples/accept_loop
  serve_logged accept-serve env OXP_ADDR=127.0.0.1:18083 "$bin" oxp
  local ours=$!
  serve_logged accept-axum env OXP_ADDR=127.0.0.1:18084 "$bin" axum
  local plain=$!
  trap 'kill $ours $plain 2>/dev/null' RETURN
  wait_up http://127.0.0.1:18083/health
  wait_up http://127.0.0.1:18084/health
  LUA=${LUA:-bench/post_call_id.lua} alternate serve http://127.0.0.1:18083/tools/call axum-serve http://127.0.0.1:18084/tools/call
}

# What /metrics costs: the same server with metrics on and off (OXP_METRICS).
metrics() {
  need_wrk
  cargo build --release -q -p calculator
  serve_logged oxp-metrics-on env OXP_ADDR=127.0.0.1:18080 OXP_METRICS=true "$root/target/release/calculator"
  local on=$!
  serve_logged oxp-metrics-off env OXP_ADDR=127.0.0.1:18082 OXP_METRICS=false "$root/target/release/calculator"
  local off=$!
  trap 'kill $on $off 2>/dev/null' RETURN
  wait_up http://127.0.0.1:18080/health
  wait_up http://127.0.0.1:18082/health
  alternate metrics-on http://127.0.0.1:18080/tools/call metrics-off http://127.0.0.1:18082/tools/call
  # The counters saw the load: the metrics were on, not merely configured.
  curl -sf http://127.0.0.1:18080/metrics | grep '^oxp_calls_total'
  log_size oxp-metrics-on
}

# Instructions and L1 instruction-cache misses per call, under callgrind. (Its L1 data-cache
# misses are left out: they vary by half between runs of the same binary.)
need_valgrind() {
  command -v valgrind >/dev/null || {
    echo "installing valgrind (Debian package)…" >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq valgrind >/dev/null 2>&1 ||
      { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq valgrind >/dev/null; }
  }
}

instructions() {
  need_valgrind
  # Cargo's default release profile, as `http` builds its first row with.
  local dir=$work/profile-default
  CARGO_PROFILE_RELEASE_LTO=false CARGO_PROFILE_RELEASE_CODEGEN_UNITS=16 \
    cargo build --release -q -p oxp-tests --example router_calls --target-dir "$dir"
  local bin=$dir/release/examples/router_calls
  # callgrind's summary → "instructions I1-misses"
  counts() {
    valgrind --tool=callgrind --cache-sim=yes --callgrind-out-file=/dev/null "$bin" "$1" "$2" 2>&1 |
      awk '{ gsub(",", "") } / I +refs:/ { i = $4 } / I1 +misses:/ { i1 = $4 } END { print i, i1 }'
  }
  # Per call, by difference of two run lengths: start-up and the first calls cancel out. Both
  # lengths are past 10,000 calls, the store's default capacity, so with a fresh call_id every
  # call also forgets the oldest answer, as in a server that has run a while.
  # oxp-id: valgrind runs SHA-256 without the CPU's SHA extensions, so the fingerprint counts
  # some 7k instructions more here than it costs on such a CPU.
  printf '%-6s %12s %10s   (per call: router → handler → response bytes)\n' "" instructions "L1i misses"
  for which in oxp oxp-id bare; do
    local short long
    read -ra short <<<"$(counts "$which" 12000)"
    read -ra long <<<"$(counts "$which" 14000)"
    printf '%-6s %12d %10d\n' "$which" $(((long[0] - short[0]) / 2000)) $(((long[1] - short[1]) / 2000))
  done
}

# A crate with N tools in target/bench/gen-<kind>-<n>, the same N `add` fns three ways:
#   tools  `#[tool]` fns served by `oxp_runtime::serve()`, OXP alone (`tools_mcp`: with MCP)
#   rmcp   rmcp's `#[tool_router]` over the same fns (a parameter struct each, as rmcp asks)
#   plain  plain async fns dispatched by hand from JSON (serde_json and tokio, nothing else)
# The release profile is the README's, for the `startup` bench; `compile` builds the dev profile.
generate() { # n kind
  local n=$1 kind=$2 dir=$work/gen-$2-$1
  mkdir -p "$dir/src"
  local deps
  case $kind in
    tools) deps="oxp-runtime = { path = \"$root/oxp-runtime\", default-features = false }
tokio = { version = \"1\", features = [\"rt-multi-thread\", \"macros\"] }" ;;
    tools_mcp) deps="oxp-runtime = { path = \"$root/oxp-runtime\" }
tokio = { version = \"1\", features = [\"rt-multi-thread\", \"macros\"] }" ;;
    rmcp) deps="rmcp = { version = \"3.11\", features = [\"server\", \"macros\", \"transport-io\"] }
serde = { version = \"1\", features = [\"derive\"] }
tokio = { version = \"1\", features = [\"rt-multi-thread\", \"macros\", \"io-std\"] }" ;;
    plain) deps="serde_json = \"1\"
tokio = { version = \"1\", features = [\"rt-multi-thread\", \"macros\"] }" ;;
  esac
  cat > "$dir/Cargo.toml" <<TOML
[package]
name = "gen_${kind}_${n}"
version = "0.1.0"
edition = "2021"
publish = false

[dependencies]
$deps

[workspace]

# The release profile README recommends (and the example is measured with).
[profile.release]
lto = "fat"
codegen-units = 1
TOML
  {
    case $kind in
      tools | tools_mcp)
        echo "use oxp_runtime::tool;"
        for i in $(seq 1 "$n"); do
          echo "/// Tool number $i: add two numbers and an offset."
          echo "#[tool(toolkit = \"Gen\", version = \"1.0.0\")]"
          echo "pub async fn add_$i(/// The first addend.
 a: i64, /// The second addend.
 b: i64, /// A label.
 label: Option<String>) -> i64 { let _ = label; a + b + $i }"
        done
        echo "#[tokio::main] async fn main() { oxp_runtime::serve().await }"
        ;;
      rmcp)
        echo "use rmcp::handler::server::{router::tool::ToolRouter, wrapper::Parameters};"
        echo "use rmcp::{schemars, tool, tool_handler, tool_router, ServerHandler, ServiceExt};"
        for i in $(seq 1 "$n"); do
          echo "#[derive(serde::Deserialize, schemars::JsonSchema)]"
          echo "pub struct Add${i}Request { /// The first addend.
 a: i64, /// The second addend.
 b: i64, /// A label.
 label: Option<String> }"
        done
        echo "#[derive(Clone)] #[allow(dead_code)] pub struct Gen { tool_router: ToolRouter<Self> }"
        echo "#[tool_router] impl Gen {"
        echo "fn new() -> Self { Self { tool_router: Self::tool_router() } }"
        for i in $(seq 1 "$n"); do
          echo "/// Tool number $i: add two numbers and an offset."
          echo "#[tool] async fn add_$i(&self, Parameters(Add${i}Request { a, b, label }): Parameters<Add${i}Request>) -> String { let _ = label; (a + b + $i).to_string() }"
        done
        echo "}"
        echo "#[tool_handler] impl ServerHandler for Gen {}"
        echo "#[tokio::main] async fn main() { let server = Gen::new().serve(rmcp::transport::stdio()).await.unwrap(); server.waiting().await.unwrap(); }"
        ;;
      plain)
        for i in $(seq 1 "$n"); do
          echo "/// Tool number $i: add two numbers and an offset."
          echo "pub async fn add_$i(a: i64, b: i64, label: Option<String>) -> i64 { let _ = label; a + b + $i }"
        done
        echo "async fn dispatch(name: &str, args: &serde_json::Value) -> Option<serde_json::Value> {"
        echo "let (a, b) = (args[\"a\"].as_i64()?, args[\"b\"].as_i64()?);"
        echo "let label = args[\"label\"].as_str().map(str::to_owned);"
        echo "Some(match name {"
        for i in $(seq 1 "$n"); do echo "\"add_$i\" => add_$i(a, b, label).await.into(),"; done
        echo "_ => return None, }) }"
        echo "#[tokio::main] async fn main() { let mut args = std::env::args().skip(1); let name = args.next().unwrap_or_default(); let input = serde_json::from_str(&args.next().unwrap_or_default()).unwrap_or_default(); println!(\"{:?}\", dispatch(&name, &input).await); }"
        ;;
    esac
  } > "$dir/src/main.rs"
  echo "$dir"
}

# The same one-tool MCP server two ways, in target/bench/mcp-<kind>: `oxp` (#[tool] and
# serve()) and `rmcp` (rmcp's #[tool_router] behind its StreamableHttpService, stateless, JSON
# answers, as its README serves over HTTP). No [profile.release]: cargo's default.
generate_mcp() { # kind
  local dir=$work/mcp-$1
  mkdir -p "$dir/src"
  local deps
  case $1 in
    oxp) deps="oxp-runtime = { path = \"$root/oxp-runtime\" }
tokio = { version = \"1\", features = [\"rt-multi-thread\", \"macros\"] }" ;;
    rmcp) deps="rmcp = { version = \"3.11\", features = [\"server\", \"macros\", \"transport-streamable-http-server\"] }
axum = \"0.8\"
hyper-util = { version = \"0.1\", features = [\"server-auto\", \"tokio\", \"service\"] }
serde = { version = \"1\", features = [\"derive\"] }
tokio = { version = \"1\", features = [\"rt-multi-thread\", \"macros\", \"net\"] }" ;;
    tower) deps="tower-mcp = { version = \"0.25\", features = [\"http\", \"protocol-2026-07-28\"] }
axum = \"0.8\"
serde = { version = \"1\", features = [\"derive\"] }
tokio = { version = \"1\", features = [\"rt-multi-thread\", \"macros\", \"net\"] }" ;;
  esac
  cat > "$dir/Cargo.toml" <<TOML
[package]
name = "mcp_$1"
version = "0.1.0"
edition = "2021"
publish = false

[dependencies]
$deps

[workspace]
TOML
  case $1 in
    oxp) cat > "$dir/src/main.rs" <<'RS'
use oxp_runtime::tool;

/// Add two numbers.
#[tool(toolkit = "calc", name = "add", version = "1.0.0")]
async fn add(/// The first addend.
a: i64, /// The second addend.
b: i64) -> i64 { a + b }

#[tokio::main]
async fn main() { oxp_runtime::serve().await }
RS
    ;;
    rmcp) cat > "$dir/src/main.rs" <<'RS'
use std::sync::Arc;
use rmcp::handler::server::{router::tool::ToolRouter, wrapper::Parameters};
use rmcp::transport::streamable_http_server::{session::never::NeverSessionManager, StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{schemars, tool, tool_handler, tool_router, ServerHandler};

#[derive(serde::Deserialize, schemars::JsonSchema)]
pub struct AddRequest { /// The first addend.
a: i64, /// The second addend.
b: i64 }

#[derive(Clone)] #[allow(dead_code)]
pub struct Calc { tool_router: ToolRouter<Self> }

#[tool_router]
impl Calc {
    fn new() -> Self { Self { tool_router: Self::tool_router() } }
    /// Add two numbers.
    #[tool(name = "calc_add")]
    async fn add(&self, Parameters(AddRequest { a, b }): Parameters<AddRequest>) -> String { (a + b).to_string() }
}

#[tool_handler]
impl ServerHandler for Calc {}

#[tokio::main]
async fn main() {
    let config = StreamableHttpServerConfig::default()
        .with_json_response(true)
        .with_legacy_session_mode(false);
    let service = StreamableHttpService::new(|| Ok(Calc::new()), Arc::new(NeverSessionManager::default()), config);
    let app = axum::Router::new().nest_service("/mcp", service);
    let addr = std::env::var("OXP_ADDR").unwrap_or_else(|_| "127.0.0.1:18083".into());
    let listener = tokio::net::TcpListener::bind(addr).await.unwrap();
    let Some(ms) = std::env::var("HEADER_TIMEOUT_MS").ok().and_then(|ms| ms.parse().ok()) else {
        return axum::serve(listener, app).await.unwrap();
    };
    // axum::serve's connection loop with one change: hyper's header timeout (a request head
    // must arrive within `ms`), the guard oxp's accept loop keeps against slowloris clients.
    use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
    let mut builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
    builder.http1().timer(TokioTimer::new()).header_read_timeout(std::time::Duration::from_millis(ms));
    loop {
        let Ok((stream, _)) = listener.accept().await else { continue };
        let service = hyper_util::service::TowerToHyperService::new(app.clone());
        let builder = builder.clone();
        tokio::spawn(async move {
            let _ = builder.serve_connection_with_upgrades(TokioIo::new(stream), service).await;
        });
    }
}
RS
    ;;
    tower) cat > "$dir/src/main.rs" <<'RS'
use tower_mcp::transport::http::HttpTransport;
use tower_mcp::{CallToolResult, McpRouter, ToolBuilder};

#[derive(serde::Deserialize, tower_mcp::schemars::JsonSchema)]
#[schemars(crate = "tower_mcp::schemars")]
struct AddInput { /// The first addend.
a: i64, /// The second addend.
b: i64 }

#[tokio::main]
async fn main() {
    let add = ToolBuilder::new("calc_add")
        .description("Add two numbers.")
        .handler(|AddInput { a, b }: AddInput| async move { Ok(CallToolResult::text((a + b).to_string())) })
        .build();
    let router = McpRouter::new().server_info("calc", "1.0.0").tool(add);
    // Stateless: a 2026-07-28 request (its version in the header, no session id) is served
    // without a session, as tower-mcp's docs describe.
    let app = HttpTransport::new(router).into_router_at("/mcp");
    let addr = std::env::var("OXP_ADDR").unwrap_or_else(|_| "127.0.0.1:18084".into());
    let listener = tokio::net::TcpListener::bind(addr).await.unwrap();
    axum::serve(listener, app).await.unwrap();
}
RS
    ;;
  esac
  (cd "$dir" && CARGO_TARGET_DIR=$work/mcp-target cargo build --release -q >&2)
  echo "$work/mcp-target/release/mcp_$1"
}

# The MCP servers of `mcp` and `mcp_instructions`, each on its own port: name, port, and the
# command (through `env`). rmcp runs twice: as its README serves it (axum::serve), and with
# hyper's header timeout, the guard against slowloris clients oxp keeps (what the guard costs).
mcp_servers() {
  local oxp_bin rmcp_bin tower_bin
  oxp_bin=$(generate_mcp oxp)
  rmcp_bin=$(generate_mcp rmcp)
  tower_bin=$(generate_mcp tower)
  mcp_names=(oxp rmcp rmcp-guard tower-mcp)
  mcp_ports=(18082 18083 18085 18084)
  mcp_commands=(
    "env OXP_ADDR=127.0.0.1:18082 $oxp_bin"
    "env OXP_ADDR=127.0.0.1:18083 $rmcp_bin"
    "env OXP_ADDR=127.0.0.1:18085 HEADER_TIMEOUT_MS=10000 $rmcp_bin"
    "env OXP_ADDR=127.0.0.1:18084 $tower_bin"
  )
}

# Checks that a server answers the benchmark's call with 15, as JSON.
mcp_check() { # url
  curl -sf "$1" -H 'content-type: application/json' -H 'accept: application/json, text/event-stream' \
    -H 'mcp-protocol-version: 2026-07-28' -H 'mcp-method: tools/call' -H 'mcp-name: calc_add' \
    -d "$(sed -n "s/^wrk.body = '\(.*\)'$/\1/p" bench/mcp_call.lua)" | grep -q '"15"' ||
    { echo "$1 does not answer the call with 15" >&2; return 1; }
}

mcp() {
  need_wrk
  mcp_servers
  local pids=() args=() i
  for i in "${!mcp_names[@]}"; do
    # shellcheck disable=SC2086 # the command is words
    serve_logged "${mcp_names[$i]}-mcp" ${mcp_commands[$i]}
    pids+=($!)
    server_pid[${mcp_names[$i]}]=$!
  done
  trap 'kill ${pids[*]} 2>/dev/null' RETURN
  for i in "${!mcp_names[@]}"; do
    local url=http://127.0.0.1:${mcp_ports[$i]}/mcp
    wait_up "$url" any
    # Each answers the call as JSON: checked once before anything is measured.
    mcp_check "$url"
    args+=("${mcp_names[$i]}" "$url")
  done
  # The same call over OXP, to the same oxp process: what /mcp costs beside oxp's own protocol.
  server_pid[oxp-oxp]=${server_pid[oxp]}
  server_lua[oxp-oxp]=bench/oxp_call.lua
  args+=(oxp-oxp http://127.0.0.1:18082/tools/call)
  # FastMCP 4's own stateless HTTP server: the Python peer users weigh (its ratio reported).
  if fastmcp=$(need_fastmcp); then
    serve_logged fastmcp-mcp env PORT=18086 "$fastmcp" bench/fastmcp_server.py
    pids+=($!)
    server_pid[fastmcp]=$!
    wait_up http://127.0.0.1:18086/mcp any
    mcp_check http://127.0.0.1:18086/mcp
    args+=(fastmcp http://127.0.0.1:18086/mcp)
  fi
  # ONLY="oxp oxp-oxp" alternates just those (oxp first: the ratios are its), each pair of
  # rounds then seconds apart rather than a whole round apart.
  if [ -n "${ONLY:-}" ]; then
    local kept=()
    for ((i = 0; i < ${#args[@]}; i += 2)); do
      [[ " $ONLY " == *" ${args[$i]} "* ]] && kept+=("${args[$i]}" "${args[$((i + 1))]}")
    done
    args=("${kept[@]}")
  fi
  echo "== MCP 2026-07-28 tools/call, default release profile (oxp-oxp: the same call over OXP)"
  LUA=bench/mcp_call.lua alternate "${args[@]}"
  for i in "${!mcp_names[@]}"; do log_size "${mcp_names[$i]}-mcp"; done
}

# A virtualenv with FastMCP 4 (from PyPI) in target/bench; prints its python. Fails, saying
# why, where Python cannot make one.
need_fastmcp() {
  local venv=$work/fastmcp-venv
  if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c 'import fastmcp' 2>/dev/null; then
    python3 -m venv "$venv" >&2 && "$venv/bin/pip" install -q 'fastmcp>=4.2,<5' >&2 ||
      { echo "FastMCP left out: no python3 venv with pip here" >&2; return 1; }
  fi
  echo "$venv/bin/python"
}

# Instructions per MCP call under callgrind, each server alone: wrk with 4 connections, the
# counters zeroed after a warm-up, then divided by the calls wrk made. Every thread counts
# (hyper's, tokio's workers, the timer), as the CPU pays for them all.
mcp_instructions() {
  need_wrk
  need_valgrind
  mcp_servers
  # The same oxp binary once more, called over OXP (`oxp-oxp`): what its /mcp costs beside
  # its own protocol, by the same count.
  local names=("${mcp_names[@]}" oxp-oxp) commands=("${mcp_commands[@]}" "${mcp_commands[0]}")
  local ports=("${mcp_ports[@]}" "${mcp_ports[0]}")
  printf '%-10s %14s %8s\n' server instructions calls
  local i
  for i in "${!names[@]}"; do
    local name=${names[$i]} path=/mcp lua=bench/mcp_call.lua
    [ "$name" = oxp-oxp ] && path=/tools/call lua=bench/oxp_call.lua
    local url=http://127.0.0.1:${ports[$i]}$path out=$work/callgrind-$name.out
    # ONLY="oxp oxp-oxp rmcp" counts some of them.
    [[ " ${ONLY:-${names[*]}} " == *" $name "* ]] || continue
    rm -f "$out"*
    # shellcheck disable=SC2086
    set -- ${commands[$i]}
    # env VAR… valgrind binary: valgrind runs the server, not env.
    local vars=() bin
    shift
    while [[ $1 == *=* ]]; do vars+=("$1"); shift; done
    bin=$1
    env "${vars[@]}" valgrind -q --tool=callgrind --callgrind-out-file="$out" "$bin" >"$work/$name-callgrind.log" 2>&1 &
    local pid=$!
    for _ in $(seq 1 300); do curl -s -o /dev/null "$url" && break; sleep 0.1; done
    [ "$path" = /mcp ] && mcp_check "$url"
    wrk -t1 -c4 -d3s -s "$lua" "$url" >/dev/null
    callgrind_control -z "$pid" >/dev/null 2>&1
    local calls
    calls=$(wrk -t1 -c4 -d"${CG_SECONDS:-10}s" -s "$lua" "$url" | awk '/requests in/ { print $1 }')
    callgrind_control -d "$pid" >/dev/null 2>&1
    kill "$pid"; wait "$pid" 2>/dev/null || true
    # The dump after zeroing is the second one (`.1`); "totals:" is its instruction count.
    local total
    total=$(awk '/^(totals|summary):/ { print $2; exit }' "$out.1" 2>/dev/null || echo 0)
    printf '%-10s %14d %8d\n' "$name" $((total / calls)) "$calls"
  done
}

# Bytes copied per call in copies of 200 bytes or more (moves of futures and large structs),
# /mcp and the OXP call on the same oxp process, with the sites that copy most: gdb stops at
# each large memmove without stopping the server for long (bench/moves.py). CALLS calls each,
# sequential, after 300 of warm-up.
mcp_moves() {
  command -v gdb >/dev/null || {
    echo "installing gdb (Debian package)…" >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq gdb >/dev/null 2>&1 ||
      { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq gdb >/dev/null; }
  }
  local bin calls=${CALLS:-20} kind
  bin=$(generate_mcp oxp)
  for kind in mcp oxp; do
    local path=/mcp lua=bench/mcp_call.lua out=$work/moves-$kind.txt
    [ $kind = oxp ] && path=/tools/call lua=bench/oxp_call.lua
    local url=http://127.0.0.1:18082$path
    rm -f "$out"
    OXP_ADDR=127.0.0.1:18082 "$bin" >"$work/moves-server.log" 2>&1 &
    local pid=$!
    for _ in $(seq 1 300); do curl -s -o /dev/null "$url" && break; sleep 0.1; done
    [ $kind = mcp ] && mcp_check "$url"
    post_calls "$lua" "$url" 300
    MOVES_OUT=$out timeout 300 gdb -q -p "$pid" -batch -x bench/moves.py >"$work/moves-gdb.log" 2>&1 &
    local gdb=$!
    for _ in $(seq 1 600); do grep -q '^#armed' "$out" 2>/dev/null && break; sleep 0.1; done
    post_calls "$lua" "$url" "$calls"
    kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null || true
    kill "$gdb" 2>/dev/null; wait "$gdb" 2>/dev/null || true
    awk -F'\t' -v calls="$calls" -v kind=$kind '!/^#/ { bytes += $1; n++; at[$2] += $1 }
      END {
        printf "%s: %.0f bytes per call in %.1f copies\n", kind, bytes / calls, n / calls
        for (site in at) printf "%8.0f  %s\n", at[site] / calls, site | "sort -rn | head -12"
      }' "$out"
  done
}

# Sends n calls one after another, as wrk's script describes them (one connection).
post_calls() { # lua url n
  local body headers=()
  body=$(sed -n "s/^wrk.body = '\(.*\)'$/\1/p" "$1")
  while IFS= read -r header; do headers+=(-H "$header"); done < <(
    sed -n 's/^wrk.headers\["\(.*\)"\] = "\(.*\)"$/\1: \2/p' "$1")
  local urls=() _
  for _ in $(seq 1 "$3"); do urls+=("$2"); done
  # One curl, one kept-alive connection, the calls in turn.
  curl -s "${headers[@]}" --data-binary "$body" "${urls[@]}" >/dev/null
}

startup() {
  local dir
  dir=$(generate 1000 tools)
  (cd "$dir" && CARGO_TARGET_DIR=$work/target cargo build --release -q)
  local bin=$work/target/release/gen_tools_1000
  for run in 1 2 3; do
    local start end
    start=$(date +%s%N)
    serve_logged oxp-startup env OXP_ADDR=127.0.0.1:18090 "$bin"
    local pid=$!
    until curl -sf -o /dev/null http://127.0.0.1:18090/health; do :; done
    end=$(date +%s%N)
    sleep 1
    local rss used=""
    rss=$(awk '/VmRSS/ {print $2}' "/proc/$pid/status")
    if [ "$run" = 3 ]; then
      # What the idle figure leaves out: the list written once, every tool called once (each
      # tool's validator is compiled on its first call).
      curl -sf -o /dev/null http://127.0.0.1:18090/tools
      for i in $(seq 1 1000); do
        curl -sf -o /dev/null -H 'content-type: application/json' \
          -d "{\"request\":{\"tool_id\":\"Gen.Add$i\",\"input\":{\"a\":1,\"b\":2}}}" \
          http://127.0.0.1:18090/tools/call || { echo "call $i failed" >&2; break; }
      done
      sleep 1
      used=$(awk '/VmRSS/ {print $2}' "/proc/$pid/status")
    fi
    kill "$pid"; wait "$pid" 2>/dev/null || true
    printf 'run %s: 1000 tools, start → /health 200 in %d ms; idle RSS %.1f MB\n' "$run" $(((end - start) / 1000000)) "$(echo "$rss / 1024" | bc -l)"
    [ -n "$used" ] && printf '       after listing the tools and calling each once: RSS %.1f MB\n' "$(echo "$used / 1024" | bc -l)"
  done
}

# What a user's build costs: the crate of 100 tools three ways (see `generate`: `#[tool]` with
# serve(), rmcp's `#[tool_router]`, plain fns), cargo's default dev profile, each kind in a target
# directory of its own. Per kind: packages in its Cargo.lock; a full clean build, dependencies
# included (median of FULL_ROUNDS, default 1: minutes each); the crate alone after
# `cargo clean -p`; the rebuild after editing one tool's body and after touching the file
# (medians of 3). Kinds alternate within each round, so a machine that speeds up or slows down
# favours none.
compile() {
  local kinds=${KINDS:-plain rmcp tools tools_mcp}
  for kind in $kinds; do
    generate 100 "$kind" >/dev/null
    (cd "$work/gen-$kind-100" && cargo generate-lockfile -q && cargo fetch -q)
  done
  elapsed() { # command… → milliseconds
    local s e
    s=$(date +%s%N)
    "$@" >/dev/null 2>&1 || { echo "failed: $*" >&2; return 1; }
    e=$(date +%s%N)
    echo $(((e - s) / 1000000))
  }
  build() { (cd "$work/gen-$1-100" && CARGO_TARGET_DIR=$work/compile-$1 cargo build -q); }
  median() { tr ' ' '\n' | grep . | sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
  declare -A full=() crate=() edit=() touched=()
  for _ in $(seq 1 "${FULL_ROUNDS:-1}"); do
    for kind in $kinds; do
      rm -rf "$work/compile-$kind"
      full[$kind]+=" $(elapsed build "$kind")"
    done
  done
  for _ in 1 2 3; do
    for kind in $kinds; do
      local dir=$work/gen-$kind-100
      (cd "$dir" && CARGO_TARGET_DIR=$work/compile-$kind cargo clean -q -p "gen_${kind}_100")
      crate[$kind]+=" $(elapsed build "$kind")"
      # One constant in tool 50's body, changed and then changed back on the next round.
      if grep -q 'a + b + 50 + 1' "$dir/src/main.rs"; then
        sed -i 's/a + b + 50 + 1/a + b + 50/' "$dir/src/main.rs"
      else
        sed -i 's/a + b + 50\([ )]\)/a + b + 50 + 1\1/' "$dir/src/main.rs"
      fi
      edit[$kind]+=" $(elapsed build "$kind")"
      touch "$dir/src/main.rs"
      touched[$kind]+=" $(elapsed build "$kind")"
    done
  done
  printf '%-6s %9s %14s %14s %14s %14s\n' kind packages full_build_ms crate_only_ms edit_one_ms touch_ms
  for kind in $kinds; do
    local dir=$work/gen-$kind-100
    sed -i 's/a + b + 50 + 1/a + b + 50/' "$dir/src/main.rs"
    printf '%-6s %9s %14s %14s %14s %14s\n' "$kind" "$(grep -c '^name = ' "$dir/Cargo.lock")" \
      "$(echo "${full[$kind]}" | median)" "$(echo "${crate[$kind]}" | median)" \
      "$(echo "${edit[$kind]}" | median)" "$(echo "${touched[$kind]}" | median)"
  done
}

case "${1:-all}" in
  http) http ;;
  metrics) metrics ;;
  accept) accept ;;
  startup) startup ;;
  compile) compile ;;
  instructions) instructions ;;
  cpu) cpu ;;
  mcp) mcp ;;
  mcp-instructions) mcp_instructions ;;
  mcp-moves) mcp_moves ;;
  all) http; mcp; startup; compile; instructions ;;
  *) echo "usage: bench/run.sh [http|mcp|mcp-instructions|mcp-moves|metrics|accept|startup|compile|instructions|cpu|all]" >&2; exit 2 ;;
esac
