"""The Python `mcp` package's client against oxp: argv = the /mcp URL, the example binary (for stdio)."""
import asyncio
import json
import sys

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client

url, binary = sys.argv[1], sys.argv[2]


def field(obj, snake: str, camel: str):
    """mcp 2.x names fields in snake_case, 1.x in camelCase."""
    return getattr(obj, snake) if hasattr(obj, snake) else getattr(obj, camel)


async def exercise(session: ClientSession, transport: str) -> None:
    await session.initialize()
    tools = await session.list_tools()
    names = [tool.name for tool in tools.tools]
    assert "Calculator_Add" in names and "Calculator_Add__v1_0_0" in names, names
    add = next(t for t in tools.tools if t.name == "Calculator_Add")
    assert field(add, "input_schema", "inputSchema")["required"] == ["a", "b"], add
    # A revision before 2026-07-28: output schemas describe objects only, so a number has none
    # and comes back as text alone.
    assert field(add, "output_schema", "outputSchema") is None, add
    result = await session.call_tool("Calculator_Add", {"a": 2.5, "b": 3})
    assert not field(result, "is_error", "isError") and result.content[0].text == "5.5", result
    assert field(result, "structured_content", "structuredContent") is None, result
    result = await session.call_tool("Calculator_Add__v1_0_0", {"a": 2, "b": 3})
    assert result.content[0].text == "5", result
    failed = await session.call_tool("Doorbell_Ring", {"doorbell_id": "doorbell1"})
    assert field(failed, "is_error", "isError") and failed.content[0].text.startswith("Doorbell ID not found"), failed
    invalid = await session.call_tool("Calculator_Add", {"a": 1, "b": "two"})
    assert field(invalid, "is_error", "isError") and "`b`" in invalid.content[0].text, invalid
    # The title and the behaviour the tool stated, nothing it did not.
    assert add.title == "Add numbers", add
    hints = add.annotations
    assert field(hints, "read_only_hint", "readOnlyHint") is True, hints
    assert field(hints, "idempotent_hint", "idempotentHint") is True, hints
    assert field(hints, "open_world_hint", "openWorldHint") is False, hints
    assert field(hints, "destructive_hint", "destructiveHint") is None, hints
    ring = next(t for t in tools.tools if t.name == "Doorbell_Ring")
    assert ring.annotations is None and ring.title is None, ring
    # Progress: three reports when asked for, none otherwise.
    seen = []

    async def on_progress(progress, total, message):
        seen.append((progress, total, message))

    result = await session.call_tool("Doorbell_RingAll", {"doorbells": 3}, progress_callback=on_progress)
    assert result.content[0].text == "3", result
    assert seen == [(1, 3, "ringing"), (2, 3, "ringing"), (3, 3, "ringing")], seen
    seen.clear()
    await session.call_tool("Doorbell_RingAll", {"doorbells": 2})
    assert seen == [], seen
    print(f"{transport}: ok")


async def main() -> None:
    async with streamable_http_client(url) as (read, write):
        async with ClientSession(read, write) as session:
            await exercise(session, "streamable http")
    params = StdioServerParameters(command=binary, args=["mcp"])
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            await exercise(session, "stdio")
    print("mcp client: ok")


asyncio.run(main())
