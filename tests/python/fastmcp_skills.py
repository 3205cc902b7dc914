"""FastMCP's client reads oxp's skills (SEP-2640): argv = the /mcp URL, the skills folder.

`read_skill` fetches every file, checks each against the size and sha256 digest of the manifest,
parses SKILL.md's frontmatter itself and checks it against the entry's.
"""
import asyncio
import pathlib
import sys

from fastmcp import Client
from fastmcp.skills.client import SkillsClientExtension

url, folder = sys.argv[1], pathlib.Path(sys.argv[2])


async def main() -> None:
    async with Client(url, extensions=[SkillsClientExtension()]) as client:
        skills = await client.list_skills()
        uris = [str(skill.uri) for skill in skills]
        assert uris == ["skill://calculator-usage/SKILL.md"], uris
        entry = await client.get_skill(uris[0])
        assert entry.frontmatter.root["license"] == "MIT", entry
        skill = await client.read_skill(uris[0])
        assert skill.name == "calculator-usage", skill.name
        files = dict(skill.files)
        for path, content in files.items():
            assert content == (folder / "calculator-usage" / path).read_bytes(), path
        assert sorted(files) == ["SKILL.md", "examples/sums.md"], sorted(files)
        print(f"fastmcp read {len(files)} files of {skill.name}")


asyncio.run(main())
