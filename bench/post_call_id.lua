-- wrk: POST one Calculator.Add call, the OpenAPI envelope, with a fresh call_id per request
-- (as real clients send: the SDKs and MCP carry one so that a retry is safe).
--
-- Each wrk thread prefixes its ids with 8 random bytes: the server outlives many wrk runs
-- (the rounds of `bench/run.sh http`), and ids that started again from 1 in every run would
-- be answered from the idempotency store — replays, not the fresh calls this row measures.
local threads = 0
function setup(thread)
  threads = threads + 1
  thread:set("thread_id", threads)
end

local prefix
function init()
  local urandom = assert(io.open("/dev/urandom", "rb"))
  local bytes = urandom:read(8)
  urandom:close()
  local hex = bytes:gsub(".", function(c) return string.format("%02x", c:byte()) end)
  prefix = "wrk-" .. hex .. "-" .. thread_id .. "-"
end

local sent = 0
function request()
  sent = sent + 1
  local body = '{"$schema":"urn:oxp:1.0","request":{"tool_id":"Calculator.Add@1.0.0","call_id":"'
    .. prefix .. sent .. '","input":{"a":10,"b":5}}}'
  return wrk.format("POST", nil, { ["Content-Type"] = "application/json" }, body)
end
