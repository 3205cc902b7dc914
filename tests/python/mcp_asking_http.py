"""The Python `mcp` package's client answers a tool's questions over streamable HTTP at an
earlier revision: argv = the server's /mcp URL, and the revision to initialize at (2025-06-18
or 2025-11-25). The server asks by `elicitation/create` on the call's stream; the client POSTs
each answer back, to whichever replica the balancer picks, and the call goes on."""
import asyncio
import sys

import mcp.client.session as client_session
import mcp.types as types
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

url, revision = sys.argv[1], sys.argv[2]
# The revision this client asks for at `initialize` (the package's newest handshake otherwise).
client_session.LATEST_HANDSHAKE_VERSION = revision
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
    async with streamable_http_client(url) as (read, write):
        async with ClientSession(read, write, elicitation_callback=answer) as session:
            initialized = await session.initialize()
            assert initialized.protocol_version == revision, initialized.protocol_version
            emptied = await session.call_tool("Files_Empty", {"bin": "py-bin"})
            assert text(emptied).startswith("emptied py-bin"), emptied
            rated = await session.call_tool("Hotel_Rate", {"stay": "py-stay"})
            assert text(rated).startswith("py-stay: 5 stars"), rated
            kept = await session.call_tool("Files_Empty", {"bin": "never"})
            assert is_error(kept), kept
    assert asked == ["Empty the bin py-bin?", "How many stars?", "Empty the bin never?"], asked
    print("mcp asking over http: ok")


asyncio.run(main())
