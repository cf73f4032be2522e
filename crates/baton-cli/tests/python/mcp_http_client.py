"""The official MCP Python SDK driving `/mcp` of `baton serve` over streamable HTTP (issue 19).

Run by `crates/baton-cli/tests/it/mcp.rs` as `python mcp_http_client.py URL KEY OTHER_KEY RUN
DB`: tenant A's key (`KEY`) sees run `RUN`, whose originals `recall` answers byte for byte as
SQLite stored them; tenant B's key (`OTHER_KEY`) sees nothing of A's through any tool; a request
without a key is refused with 401 before it reaches MCP; a bad argument is a tool error.
"""

import asyncio
import sqlite3
import sys

import httpx2
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

URL, KEY, OTHER, RUN, DB = sys.argv[1:6]


def stored(seq):
    with sqlite3.connect(f"file:{DB}?mode=ro", uri=True) as db:
        row = db.execute(
            "SELECT h.message FROM history h JOIN runs r ON r.pk = h.run_pk "
            "WHERE r.id = ? AND h.seq = ?",
            (RUN, seq),
        ).fetchone()
    return row[0]


async def session(key):
    client = httpx2.AsyncClient(headers={"Authorization": f"Bearer {key}"}, timeout=30)
    return client, streamable_http_client(URL, http_client=client)


async def main():
    client, transport = await session(KEY)
    async with client, transport as (read, write):
        async with ClientSession(read, write) as s:
            init = await s.initialize()
            assert init.server_info.name == "baton"
            assert init.protocol_version == "2025-11-25", init.protocol_version
            tools = {t.name for t in (await s.list_tools()).tools}
            assert "recall" in tools and "search" in tools, tools
            runs = (await s.call_tool("runs", {})).structured_content["runs"]
            assert [r["id"] for r in runs] == [RUN], runs
            result = await s.call_tool("recall", {"run": RUN, "from": 1, "to": 3})
            assert not result.is_error
            assert [b.text for b in result.content[1:]] == [stored(1), stored(2), stored(3)]
            hits = (await s.call_tool("search", {"query": "flaky"})).structured_content["hits"]
            assert hits and hits[0]["run"] == RUN, hits
            bad = await s.call_tool("recall", {"run": RUN, "seq": 99})
            assert bad.is_error and "1..3" in bad.content[0].text, bad
            # 20 calls at once on one session
            many = await asyncio.gather(
                *[s.call_tool("recall", {"run": RUN, "seq": 1 + i % 3}) for i in range(20)])
            assert all(m.content[1].text == stored(1 + i % 3) for i, m in enumerate(many))
            print("ok: tenant A over streamable HTTP")

    client, transport = await session(OTHER)
    async with client, transport as (read, write):
        async with ClientSession(read, write) as s:
            await s.initialize()
            assert (await s.call_tool("runs", {})).structured_content["runs"] == []
            assert (await s.call_tool("search", {"query": "flaky"})).structured_content[
                "hits"] == []
            tried = {"runs", "search"}
            for tool, arguments in [
                ("recall", {"run": RUN, "seq": 1}),
                ("run", {"run": RUN}),
                ("context", {"run": RUN}),
                ("working_state", {"run": RUN}),
                ("pin", {"run": RUN, "seq": 1}),
                ("unpin", {"run": RUN, "seq": 1}),
                ("compact", {"run": RUN, "strategy": "sliding"}),
                ("report", {"kind": "growth", "run": RUN}),
            ]:
                r = await s.call_tool(tool, arguments)
                assert r.is_error and "not found" in r.content[0].text, (tool, r)
                tried.add(tool)
            # The tenant-wide reports hold nothing of A's.
            dup = await s.call_tool("report", {"kind": "duplicates", "tools": True})
            assert not dup.is_error and dup.structured_content["rows"] == [], dup
            usage = await s.call_tool("report", {"kind": "usage"})
            assert not usage.is_error and usage.structured_content["daily"] == [], usage
            every = {t.name for t in (await s.list_tools()).tools}
            assert tried == every, f"tools not tried with A's ids: {every - tried}"
            print("ok: tenant B sees none of A's, through every tool")

    async with httpx2.AsyncClient() as raw:
        response = await raw.post(URL, json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
                                  headers={"Accept": "application/json, text/event-stream"})
        assert response.status_code == 401, response.status_code
        print("ok: no key, 401")
        rebound = await raw.post(
            URL, json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
            headers={"Accept": "application/json, text/event-stream", "Host": "evil.example",
                     "Authorization": f"Bearer {KEY}"})
        assert rebound.status_code in (400, 403, 421), rebound.status_code
        print(f"ok: a non-loopback Host, {rebound.status_code}")


asyncio.run(main())
print("mcp http client: all checks passed")
