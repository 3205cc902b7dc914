"""LangChain's OXP clients (PyPI `universal-tool-client`, `langchain-tool-client`) against an oxp
server started with LangChain compatibility on: argv = base URL."""
import asyncio
import sys

from langchain_tool_client import get_client
from universal_tool_client import get_sync_client

base_url = sys.argv[1]

# universal-tool-client: a bare list, calls by wire name, top-level success/value.
universal = get_sync_client(url=base_url)
tools = universal.tools.list()
assert isinstance(tools, list) and any(t["name"] == "Calculator_Add" for t in tools), tools
result = universal.tools.call("Calculator_Add", {"a": 2, "b": 3})
assert result["success"] is True and result["value"] == 5, result
result = universal.tools.call("Calculator.Add@1.0.0", {"a": 2, "b": 3}, call_id="u-1")
assert result["success"] is True and result["call_id"] == "u-1", result
lc_tools = {t.name: t for t in universal.tools.as_langchain_tools()}
assert lc_tools["Calculator_Add"].invoke({"a": 1, "b": 2}) == 3


async def langchain_tool_client() -> None:
    # langchain-tool-client over HTTP: sends `user_id` at the request level.
    import httpx

    client = get_client(url=base_url, mcp=False)
    tools = await client.tools.list()
    assert isinstance(tools, list), tools
    result = await client.tools.call("Calculator_Add", {"a": 4, "b": 5}, user_id="user-1")
    assert result["success"] is True and result["value"] == 9, result
    # The request-level user_id reaches the tool's context; the google token it cannot send
    # is a clear 400 naming what is missing.
    try:
        await client.tools.call("Gmail.GetEmails@1.2.0", {"n_emails": 1}, user_id="user-1")
        raise AssertionError("a call without the google token must fail")
    except httpx.HTTPStatusError as error:
        body = error.response.json()
        assert error.response.status_code == 400, body
        assert "authorization for google" in body["message"], body
        assert "user_id" not in body.get("missing_requirements", {}), body


asyncio.run(langchain_tool_client())
print("langchain clients: ok")
