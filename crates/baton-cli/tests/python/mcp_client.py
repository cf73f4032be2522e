"""The official MCP Python SDK driving `baton mcp` over stdio (issue 19).

Run by `crates/baton-cli/tests/it/mcp.rs` as `python mcp_client.py BATON DB`, on a SQLite
store that already holds imported corpus runs. It initializes, lists the tools, calls every
one, follows `recall`'s cursors and holds every original it returns to the `message` column
SQLite stored, byte for byte, and to `baton --json history`; it tries bad arguments (each
must come back as a tool error naming what was wrong) and another tenant (which must see
nothing). Any failed check raises, so the process exits non-zero with the reason.
"""

import asyncio
import json
import sqlite3
import subprocess
import sys

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.shared.exceptions import MCPError

BATON, DB = sys.argv[1], sys.argv[2]

TOOLS = {
    "search", "recall", "runs", "run", "working_state", "context",
    "pin", "unpin", "compact", "report",
}


def baton(*args):
    out = subprocess.run(
        [BATON, "--db", DB, "--json", *args], check=True, capture_output=True, text=True
    )
    return json.loads(out.stdout)


def stored(run, seq):
    """The message JSON SQLite holds for `run`'s `seq`, as stored."""
    with sqlite3.connect(f"file:{DB}?mode=ro", uri=True) as db:
        row = db.execute(
            "SELECT h.message FROM history h JOIN runs r ON r.pk = h.run_pk "
            "WHERE r.tenant_id = 'default' AND r.id = ? AND h.seq = ?",
            (run, seq),
        ).fetchone()
    assert row is not None, f"no stored row for {run} seq {seq}"
    return row[0]


def data(result):
    assert not result.is_error, f"tool error: {result.content[0].text}"
    assert result.structured_content is not None
    return result.structured_content


def error_text(result):
    assert result.is_error, f"expected a tool error, got {result}"
    return result.content[0].text


async def session_for(tenant):
    params = StdioServerParameters(
        command=BATON, args=["--db", DB, "--tenant", tenant, "mcp"], env={"BATON_LOG": "debug"}
    )
    return stdio_client(params)


async def main():
    listed = baton("runs", "list")["runs"]
    assert len(listed) >= 2, "the test store needs at least two runs"
    biggest = max(listed, key=lambda r: r["last_seq"])
    run, last = biggest["id"], biggest["last_seq"]

    async with await session_for("default") as (read, write):
        async with ClientSession(read, write) as session:
            init = await session.initialize()
            assert init.server_info.name == "baton", init.server_info
            assert init.protocol_version == "2025-11-25", init.protocol_version
            assert init.capabilities.tools is not None

            tools = (await session.list_tools()).tools
            assert {t.name for t in tools} == TOOLS, [t.name for t in tools]
            schemas = {t.name: t.input_schema for t in tools}
            assert "query" in schemas["search"]["required"], schemas["search"]
            assert schemas["recall"]["properties"]["max_bytes"], schemas["recall"]
            print("ok: initialize and tools/list")

            # runs and run
            runs = data(await session.call_tool("runs", {}))["runs"]
            assert {r["id"] for r in runs} == {r["id"] for r in listed}
            assert data(await session.call_tool("runs", {"limit": 1}))["more"] is True
            future = data(await session.call_tool("runs", {"since": "2999-01-01"}))
            assert future["runs"] == [] and future["more"] is False
            detail = data(await session.call_tool("run", {"run": run}))
            assert detail["counts"]["messages"] == last, detail["counts"]
            assert detail["summaries"] == [] and detail["pins"] == []
            print("ok: runs, run")

            # recall: every original, through cursors, byte-identical to the store
            seen, cursor, pages = [], None, 0
            args = {"run": run, "from": 1, "max_bytes": 4096}
            while True:
                result = await session.call_tool("recall", args)
                page = data(result)
                blocks = result.content[1:]
                assert len(blocks) == len(page["messages"]) >= 1
                for block, item in zip(blocks, page["messages"]):
                    seq = item["seq"]
                    assert block.meta["baton/run"] == run and block.meta["baton/seq"] == seq
                    assert block.text == stored(run, seq), f"seq {seq} differs from the store"
                    seen.append(seq)
                pages += 1
                cursor = page["next_cursor"]
                if cursor is None:
                    break
                args = {"run": run, "cursor": cursor, "max_bytes": 4096}
            assert seen == list(range(1, last + 1)), "recall lost or repeated a seq"
            assert pages > 1, "a 4096-byte cap should have needed several pages"
            # ... and to `baton history --json`
            history = baton("history", run, "--from", "5", "--to", "7")["messages"]
            result = await session.call_tool("recall", {"run": run, "from": 5, "to": 7})
            assert [json.loads(b.text)["content"] for b in result.content[1:]] == [
                m["content"] for m in history
            ]
            one = await session.call_tool("recall", {"run": run, "seq": 3})
            assert len(one.content) == 2 and one.content[1].text == stored(run, 3)
            print(f"ok: recall of {last} messages in {pages} pages, byte-identical")

            # search: an index, the hits `baton recall --grep` finds
            word = None
            for m in baton("history", run)["messages"]:
                for b in m["content"]:
                    if b["type"] == "tool_use":
                        word = b["name"]
                        break
                if word:
                    break
            assert word, "the run has no tool call to search for"
            found = data(await session.call_tool(
                "search", {"query": word, "run": run, "kind": "tool_use", "limit": 100}))
            grep = baton("recall", run, "--grep", word, "--kind", "tool_use", "--limit", "100")
            assert [h["seq"] for h in found["hits"]] == [m["seq"] for m in grep["messages"]]
            for hit in found["hits"]:
                assert hit["run"] == run and hit["role"] == "assistant" and hit["tools"], hit
                assert len(hit["snippet"]) <= 242, hit["snippet"]
                assert hit["snippet"] != stored(run, hit["seq"])
            everywhere = data(await session.call_tool("search", {"query": word}))
            assert {h["run"] for h in everywhere["hits"]} >= {run}
            results = data(await session.call_tool(
                "search", {"query": word, "run": run, "kind": "tool_result", "limit": 5}))
            for hit in results["hits"]:
                assert hit["role"] in ("user", "tool"), hit
            print(f"ok: search {word!r}: {len(found['hits'])} hits, as recall --grep")

            # context, working state, compaction, pins
            ctx = data(await session.call_tool("context", {"run": run}))
            assert ctx["summary"] is None and ctx["tail"]["messages"] == last
            assert ctx["tokens"] > 0
            state = data(await session.call_tool("working_state", {"run": run}))
            assert state["summary_id"] is None and state["state"] == {}
            planned = data(await session.call_tool(
                "compact", {"run": run, "strategy": "structured", "force": True}))
            assert planned["dry_run"] is True, planned
            assert data(await session.call_tool("run", {"run": run}))["summaries"] == []
            done = data(await session.call_tool("compact", {
                "run": run, "strategy": "structured", "force": True, "dry_run": False,
                "keep_recent": 4}))
            assert done["outcome"] == "compacted", done
            state = data(await session.call_tool("working_state", {"run": run}))
            assert state["summary_id"] == done["summary_id"], state
            items = [i for kind in state["state"].values() for i in kind]
            assert items and all(1 <= i["source_seq"] <= state["coverage"] for i in items)
            detail = data(await session.call_tool("run", {"run": run}))
            version = detail["summaries"][0]
            assert version["active"] and version["covers"] == {
                "from": 1, "through": done["cut"]}, version
            ctx = data(await session.call_tool("context", {"run": run}))
            assert ctx["summary"]["coverage"] == done["cut"]
            assert ctx["tail"]["from"] == done["cut"] + 1
            pinned = data(await session.call_tool("pin", {"run": run, "seq": 2}))
            assert pinned == {"pins": [2], "changed": True}, pinned
            unpinned = data(await session.call_tool("unpin", {"run": run, "seq": 2}))
            assert unpinned == {"pins": [], "changed": True}, unpinned
            again = data(await session.call_tool("unpin", {"run": run, "seq": 2}))
            assert again == {"pins": [], "changed": False}, again
            print(f"ok: compact through seq {done['cut']}, working state, context, pins")

            # reports
            daily = data(await session.call_tool("report", {"kind": "usage"}))
            assert "daily" in daily and "totals" in daily, daily.keys()
            growth = data(await session.call_tool("report", {"kind": "growth", "run": run}))
            assert growth["run"] == run and growth["strategy"] == "structured", growth.keys()
            assert growth["steps"] and growth["full_total"] >= growth["context_total"]
            dups = data(await session.call_tool("report", {"kind": "duplicates", "tools": True}))
            assert dups["tools"] is True and "total" in dups and isinstance(dups["rows"], list), dups
            calls = data(await session.call_tool("report", {"kind": "duplicates"}))
            assert calls["tools"] is False and calls["rows"] == [], calls
            print("ok: report usage, growth, duplicates")

            # resources
            templates = (await session.list_resource_templates()).resource_templates
            assert {t.uri_template for t in templates} == {
                "baton://run/{id}", "baton://run/{id}/seq/{n}"}
            res = await session.read_resource(f"baton://run/{run}/seq/4")
            assert res.contents[0].text == stored(run, 4)
            res = await session.read_resource(f"baton://run/{run}")
            assert json.loads(res.contents[0].text)["id"] == run
            print("ok: resources")

            # bad arguments: tool errors that name what was wrong
            bad = [
                ("search", {}, "query"),
                ("search", {"query": "x", "limit": 0}, "limit 0"),
                ("search", {"query": "x", "kind": "images"}, "images"),
                ("search", {"query": "x", "since": "yesterday"}, "since"),
                ("search", {"query": "!!!", "run": run}, "word"),
                ("recall", {"run": run}, "seq"),
                ("recall", {"run": run, "seq": 0}, f"1..{last}"),
                ("recall", {"run": run, "seq": last + 1}, f"1..{last}"),
                ("recall", {"run": run, "from": 9, "to": 3}, "ends before"),
                ("recall", {"run": run, "cursor": "next please"}, "cursor"),
                ("recall", {"run": run, "seq": 1, "max_bytes": 0}, "max_bytes"),
                ("recall", {"run": "no-such-run", "seq": 1}, "no-such-run"),
                ("recall", {"run": run, "seq": "one"}, "seq"),
                ("runs", {"limit": 9999}, "limit"),
                ("run", {"run": run, "extra": 1}, "extra"),
                ("pin", {"run": run, "seq": last + 5}, str(last + 5)),
                ("compact", {"run": run, "strategy": "slidng"}, "slidng"),
                ("compact", {"run": run, "strategy": "sliding", "keep_last": 0}, "keep"),
                ("report", {"kind": "growth"}, "run"),
                ("report", {"kind": "weekly"}, "weekly"),
            ]
            for tool, arguments, needle in bad:
                text = error_text(await session.call_tool(tool, arguments))
                assert needle in text, f"{tool} {arguments}: {text!r} does not name {needle!r}"
            try:
                await session.call_tool("no_such_tool", {})
                raise AssertionError("an unknown tool must be a protocol error")
            except MCPError as e:
                assert "no_such_tool" in str(e), e
            print(f"ok: {len(bad)} bad calls answered as tool errors")

    # another tenant sees nothing of the default tenant's
    async with await session_for("other") as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            assert data(await session.call_tool("runs", {}))["runs"] == []
            assert data(await session.call_tool("search", {"query": word}))["hits"] == []
            for tool, arguments in [
                ("recall", {"run": run, "seq": 1}),
                ("run", {"run": run}),
                ("working_state", {"run": run}),
                ("context", {"run": run}),
                ("pin", {"run": run, "seq": 1}),
                ("compact", {"run": run, "strategy": "structured"}),
                ("search", {"query": word, "run": run}),
                ("report", {"kind": "growth", "run": run}),
            ]:
                text = error_text(await session.call_tool(tool, arguments))
                assert "not found" in text or "no run" in text or "unknown" in text, (tool, text)
            try:
                await session.read_resource(f"baton://run/{run}/seq/1")
                raise AssertionError("another tenant's message must not be readable")
            except MCPError:
                pass
            print("ok: another tenant sees none of it")


asyncio.run(main())
print("mcp client: all checks passed")
