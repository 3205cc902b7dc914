-- wrk: POST one Calculator.Add call, the OpenAPI envelope, with a fresh call_id per request
-- (as real clients send: the SDKs and MCP carry one so that a retry is safe).
local threads = 0
function setup(thread)
  threads = threads + 1
  thread:set("thread_id", threads)
end

local sent = 0
function request()
  sent = sent + 1
  local body = '{"$schema":"urn:oxp:1.0","request":{"tool_id":"Calculator.Add@1.0.0","call_id":"wrk-'
    .. thread_id .. '-' .. sent .. '","input":{"a":10,"b":5}}}'
  return wrk.format("POST", nil, { ["Content-Type"] = "application/json" }, body)
end
