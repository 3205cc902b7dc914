"""The Python `mcp` package's client answers a tool's questions over stdio: argv = the server
binary (oxp-runtime/examples/confirm_server.rs). The client initializes at a revision before 2026-07-28,
so the server asks by `elicitation/create` requests of its own, and the call goes on."""
import asyncio
import sys

import mcp.types as types
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

binary = sys.argv[1]
asked: list[str] = []


async def answer(context, params) -> types.ElicitResult:
    asked.append(params.message)
    if params.message.startswith("How many"):
        return types.ElicitResult(action="accept", content={"stars": 5})
    if "never" in params.message:
        return types.ElicitResult(action="decline")
    return types.ElicitResult(action="accept", content={})


def text(result) -> str:
    return result.content[0].text


def is_error(result) -> bool:
    return getattr(result, "is_error", getattr(result, "isError", None))


async def main() -> None:
    server = StdioServerParameters(command=binary, args=["mcp"], env={"OXP_LOG": "warn"})
    async with stdio_client(server) as (read, write):
        async with ClientSession(read, write, elicitation_callback=answer) as session:
            await session.initialize()
            emptied = await session.call_tool("Files_Empty", {"bin": "py-bin"})
            assert text(emptied).startswith("emptied py-bin"), emptied
            rated = await session.call_tool("Hotel_Rate", {"stay": "py-stay"})
            assert text(rated).startswith("py-stay: 5 stars"), rated
            kept = await session.call_tool("Files_Empty", {"bin": "never"})
            assert is_error(kept), kept
    assert asked == ["Empty the bin py-bin?", "How many stars?", "Empty the bin never?"], asked
    print("mcp asking: ok")


asyncio.run(main())
