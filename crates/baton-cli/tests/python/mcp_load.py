"""Load on `/mcp` of `baton serve` with the official MCP Python SDK (issue 19).

Run by `crates/baton-cli/tests/it/mcp.rs` as `python mcp_load.py MODE URL KEY RUNS` where
RUNS is a comma-separated list of run ids stored before the load:

- `calls`: 100 tool calls at once over sessions of their own (search, recall, runs, run,
  context, working_state, report), every one answered without a tool or protocol error;
  prints one JSON line: `{"errors": [...], "answers": {...}}`, `answers` holding the text of
  the calls whose answer cannot change while the load runs (the recall of the fixed runs'
  messages), keyed by call.
- `storm`: the same calls in waves until the server goes away (it is killed); prints how many
  were answered, and exits 0 however the server went.
"""

import asyncio
import json
import sys

import httpx2
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

MODE, URL, KEY, RUNS = sys.argv[1:5]
RUNS = RUNS.split(",")


def plan():
    """The 100 calls: (name, arguments, whether its answer is fixed)."""
    calls = []
    for i in range(100):
        run = RUNS[i % len(RUNS)]
        kind = i % 7
        if kind == 0:
            calls.append(("recall", {"run": run, "seq": 1 + i % 3}, True))
        elif kind == 1:
            calls.append(("recall", {"run": run, "from": 1, "to": 3}, True))
        elif kind == 2:
            calls.append(("search", {"query": "test", "limit": 10}, False))
        elif kind == 3:
            calls.append(("runs", {"limit": 20}, False))
        elif kind == 4:
            calls.append(("run", {"run": run}, False))
        elif kind == 5:
            calls.append(("context", {"run": run}, False))
        else:
            calls.append(("working_state", {"run": run}, False))
    return calls


async def one(name, args):
    client = httpx2.AsyncClient(headers={"Authorization": f"Bearer {KEY}"}, timeout=60)
    async with client, streamable_http_client(URL, http_client=client) as (read, write):
        async with ClientSession(read, write) as s:
            await s.initialize()
            result = await s.call_tool(name, args)
            text = "\n".join(getattr(b, "text", "") for b in result.content)
            return result.is_error, text


def cause(e):
    """The innermost exception of a task group's, for the message."""
    while isinstance(e, BaseExceptionGroup) and e.exceptions:
        e = e.exceptions[0]
    return f"{type(e).__name__}: {e}"


async def calls():
    planned = plan()
    results = await asyncio.gather(*[one(n, a) for n, a, _ in planned], return_exceptions=True)
    errors, answers = [], {}
    for (name, args, fixed), result in zip(planned, results):
        key = f"{name} {json.dumps(args, sort_keys=True)}"
        if isinstance(result, BaseException):
            errors.append(f"{key}: {cause(result)}")
            continue
        is_error, text = result
        if is_error:
            errors.append(f"{key}: tool error: {text}")
        elif fixed:
            if key in answers and answers[key] != text:
                errors.append(f"{key}: two answers differ within one load")
            answers[key] = text
    print(json.dumps({"errors": errors, "answers": answers}))


async def storm():
    answered = 0
    planned = plan()
    while True:
        results = await asyncio.gather(
            *[one(n, a) for n, a, _ in planned[:25]], return_exceptions=True)
        answered += sum(1 for r in results if not isinstance(r, BaseException))
        if any(isinstance(r, BaseException) for r in results):
            break
    print(json.dumps({"answered": answered}))


asyncio.run(calls() if MODE == "calls" else storm())
