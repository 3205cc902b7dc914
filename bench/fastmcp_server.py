"""FastMCP 4's own stateless HTTP server with one `calc_add` tool: the Python peer `bench/run.sh
mcp` weighs oxp against (JSON answers, no sessions, as FastMCP documents for load balancers)."""

import os

from fastmcp import FastMCP

mcp = FastMCP("calc")


@mcp.tool(name="calc_add")
def add(a: int, b: int) -> str:
    """Add two numbers."""
    return str(a + b)


if __name__ == "__main__":
    mcp.run(
        transport="http",
        host="127.0.0.1",
        port=int(os.environ.get("PORT", "18086")),
        path="/mcp",
        stateless_http=True,
        json_response=True,
        show_banner=False,
        log_level="warning",
    )
