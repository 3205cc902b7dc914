-- wrk: POST the same calc.add call as mcp_call.lua over OXP (`POST /tools/call`, no call_id), to
-- the same oxp process: what its /mcp costs beside its own protocol.
wrk.method = "POST"
wrk.body = '{"tool_id":"calc.add","input":{"a":10,"b":5}}'
wrk.headers["Content-Type"] = "application/json"
