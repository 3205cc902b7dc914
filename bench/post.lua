-- wrk: POST one Calculator.Add call, the OpenAPI envelope, no call_id (as the SDKs send it).
wrk.method = "POST"
wrk.body = '{"$schema":"urn:oxp:1.0","request":{"tool_id":"Calculator.Add@1.0.0","input":{"a":10,"b":5}}}'
wrk.headers["Content-Type"] = "application/json"
