"""The official OXP Python SDK (PyPI `oxp`) against an oxp server: argv = base URL, API key."""
import sys

import oxp

base_url, api_key = sys.argv[1], sys.argv[2]
client = oxp.Oxp(base_url=base_url, bearer_token=api_key, max_retries=0)

client.health.check()

listed = client.tools.list()
ids = [tool.id for tool in listed.items]
assert "Calculator.Add@1.0.0" in ids and "Doorbell.Ring@0.1.0" in ids, ids

ok = client.tools.call(
    request={"call_id": "py-1", "tool_id": "Calculator.Add@1.0.0", "input": {"a": 2, "b": 3}},
    schema="urn:oxp:1.0",
)
assert ok.result.success is True and ok.result.value == 5 and ok.result.call_id == "py-1", ok

failed = client.tools.call(request={"tool_id": "Doorbell.Ring@0.1.0", "input": {"doorbell_id": "doorbell1"}})
error = failed.result.error
assert failed.result.success is False, failed
assert error.message == "Doorbell ID not found", error
assert error.can_retry is True and error.retry_after_ms == 500, error
assert error.additional_prompt_content == "ids: doorbell42,doorbell84", error

try:
    client.tools.call(request={"tool_id": "Calculator.Add@9.0.0", "input": {"a": 1, "b": 2}})
    raise AssertionError("an unknown version must fail")
except oxp.BadRequestError as bad:
    assert bad.status_code == 400 and "Calculator_Add" in bad.body["message"], bad.body

try:
    client.tools.call(request={"tool_id": "Calculator.Add@1.0.0", "input": {"a": 1, "b": "two"}})
    raise AssertionError("invalid input must fail")
except oxp.UnprocessableEntityError as invalid:
    assert invalid.status_code == 422 and "b" in invalid.body["parameter_errors"], invalid.body

unauthenticated = oxp.Oxp(base_url=base_url, bearer_token="wrong", max_retries=0)
try:
    unauthenticated.tools.list()
    raise AssertionError("a wrong key must fail")
except oxp.AuthenticationError:
    pass

print("oxp client: ok")
