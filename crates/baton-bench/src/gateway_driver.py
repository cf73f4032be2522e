#!/usr/bin/env python3
"""Client side of baton-bench section 12 (the gateway against the LiteLLM proxy).

The same mock upstream and the same client as the LiteLLM peer: this script imports
`litellm_proxy_bench` from the peers directory (`--peers`), serves its `Mock` on a free port of
127.0.0.1 and drives baton's gateway with its `load` and `burst`. Only the standard library is
needed, so any `python3` runs it.

Protocol with the Rust side (one JSON object per line):
  1. this script prints {"mock_port": P};
  2. it reads {"gateway_port": G, "noop_port": N} from stdin: baton's gateway, pointed at
     http://127.0.0.1:P/v1, and a no-op loopback server (fixed answer, no work) it may compare
     with;
  3. it measures, then prints one JSON object with every figure and exits.

Per run, at concurrency 16 (the peer's): cache hits (one identical body), cache misses (distinct
bodies), direct round trips to the mock and to the no-op server; at concurrency 1 the same four,
for latency without queueing in the client. Then bursts of `--burst` identical concurrent
requests for keys not cached, the mock delayed `--burst-delay-ms`, counting upstream calls.
"""
import argparse
import http.client
import json
import statistics
import os
import sys
import threading
from http.server import ThreadingHTTPServer


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--peers", required=True, help="the directory holding litellm_proxy_bench.py")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--requests", type=int, default=3000)
    ap.add_argument("--sequential", type=int, default=1000)
    # The loads that reach the mock are smaller: a miss costs the mock's own time.
    ap.add_argument("--miss-requests", type=int, default=1500)
    ap.add_argument("--miss-sequential", type=int, default=200)
    ap.add_argument("--burst", type=int, default=50)
    ap.add_argument("--burst-delay-ms", type=int, default=200)
    # A native load generator beside the Python client (issue 18, item 8): the client's own
    # ceiling (about 2,600 req/s) hides what the gateway can do.
    ap.add_argument("--wrk", help="the wrk binary; without it the wrk loads are skipped")
    ap.add_argument("--wrk-seconds", type=int, default=5)
    args = ap.parse_args()
    sys.path.insert(0, args.peers)
    import litellm_proxy_bench as peer  # noqa: E402  (found through --peers)

    # The peer's mock writes its headers and its body in two writes; with Nagle's algorithm on,
    # the second waits for the client's delayed ACK, about 40 ms a call, which capped any proxy
    # in front of it near 360 misses/s. TCP_NODELAY removes that for both sides: the peer is run
    # with the same patch (see `run_peer` in gateway.rs). It changes no byte the mock sends.
    peer.Mock.disable_nagle_algorithm = True
    upstream = ThreadingHTTPServer(("127.0.0.1", 0), peer.Mock)
    upstream.daemon_threads = True
    threading.Thread(target=upstream.serve_forever, daemon=True).start()
    mock_port = upstream.server_address[1]
    print(json.dumps({"mock_port": mock_port}), flush=True)
    line = sys.stdin.readline()
    if not line:
        return
    ports = json.loads(line)
    gateway, noop = ports["gateway_port"], ports["noop_port"]

    res = {"bench": "baton_gateway", "python": sys.version.split()[0], "runs": args.runs,
           "requests_per_run": args.requests, "sequential_per_run": args.sequential,
           "miss_requests_per_run": args.miss_requests,
           "miss_sequential_per_run": args.miss_sequential,
           "concurrency": 16}
    try:
        res["sanity"] = sanity(peer, gateway)
        if res["sanity"]["status"][0] != 200:
            print(json.dumps(res), flush=True)
            return
        # warm-up of the code paths and connection pools (not measured)
        peer.load(gateway, 16, 200, lambda i: peer.body_for(f"warm {i}"))
        peer.load(mock_port, 16, 200, lambda i: peer.body_for(f"warm direct {i}"))
        peer.load(noop, 16, 200, lambda i: peer.body_for(f"warm noop {i}"))
        peer.post(http.client.HTTPConnection("127.0.0.1", gateway, timeout=30),
                  peer.body_for("identical prompt"))

        rows = {k: [] for k in ("hits", "misses", "direct_mock", "noop",
                                "hits_c1", "misses_c1", "direct_mock_c1", "noop_c1")}

        def measure(name, port, concurrency, total, make_body):
            before = peer.UPSTREAM["calls"]
            row = peer.load(port, concurrency, total, make_body)
            row["upstream_calls"] = peer.UPSTREAM["calls"] - before
            rows[name].append(row)
            return row

        identical = lambda i: peer.body_for("identical prompt")
        for r in range(args.runs):
            n, s = args.requests, args.sequential
            mn, ms = args.miss_requests, args.miss_sequential
            measure("noop", noop, 16, n, identical)
            measure("direct_mock", mock_port, 16, mn, identical)
            h = measure("hits", gateway, 16, n, identical)
            m = measure("misses", gateway, 16, mn, lambda i, r=r: peer.body_for(f"distinct r{r} #{i}"))
            measure("noop_c1", noop, 1, s, identical)
            measure("direct_mock_c1", mock_port, 1, ms, identical)
            measure("hits_c1", gateway, 1, s, identical)
            measure("misses_c1", gateway, 1, ms, lambda i, r=r: peer.body_for(f"sequential r{r} #{i}"))
            print(f"run {r}: hit {h['rps']} rps, miss {m['rps']} rps", file=sys.stderr)

        def summarize(rs):
            return {"rps_median": statistics.median(x["rps"] for x in rs),
                    "p50_ms_median": statistics.median(x["p50_ms"] for x in rs),
                    "p99_ms_median": statistics.median(x["p99_ms"] for x in rs),
                    "errors": sum(x["errors"] for x in rs),
                    "upstream_calls": sum(x["upstream_calls"] for x in rs),
                    "runs": rs}
        for name, rs in rows.items():
            res[name] = summarize(rs)

        if args.wrk:
            res["wrk"] = wrk_loads(args, peer, gateway, mock_port, noop)

        peer.UPSTREAM["delay_s"] = args.burst_delay_ms / 1000
        bursts = [peer.burst(gateway, args.burst, f"baton burst key {r}") for r in range(args.runs)]
        peer.UPSTREAM["delay_s"] = 0.0
        res["burst_identical_uncached"] = {
            "requests": args.burst,
            "upstream_delay_ms": args.burst_delay_ms,
            "upstream_calls_median": statistics.median(b["upstream_calls"] for b in bursts),
            "runs": bursts}
    finally:
        upstream.shutdown()
    print(json.dumps(res), flush=True)


# wrk's Lua: POSTs of the peer's body to /v1/chat/completions. With BODY_PREFIX set, every
# request's body is distinct (thread id and counter in its text): misses; else one body: hits.
WRK_SCRIPT = r"""
local prefix = os.getenv("BODY_PREFIX")
local auth = os.getenv("AUTH")
local threads = 0
function setup(thread)
  threads = threads + 1
  thread:set("tid", threads)
end
local n = 0
local function body(text)
  return '{"model": "mock-gpt", "messages": [{"role": "user", "content": "' .. text .. '"}]}'
end
local fixed = body("identical prompt")
request = function()
  local headers = {["Content-Type"] = "application/json", ["Authorization"] = "Bearer " .. auth}
  if prefix == nil or prefix == "" then
    return wrk.format("POST", "/v1/chat/completions", headers, fixed)
  end
  n = n + 1
  return wrk.format("POST", "/v1/chat/completions", headers,
                    body(prefix .. " t" .. tostring(tid) .. " #" .. tostring(n)))
end
"""


def wrk_script():
    """WRK_SCRIPT in a temporary file; the caller removes it."""
    import tempfile
    with tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False) as f:
        f.write(WRK_SCRIPT)
        return f.name


def wrk_run(wrk, script, seconds, peer, name, port, conns, prefix):
    """One wrk load of `seconds` on `port`: its figures and the upstream calls it caused."""
    import subprocess
    env = dict(os.environ, AUTH=peer.MASTER_KEY, BODY_PREFIX=prefix or "")
    before = peer.UPSTREAM["calls"]
    out = subprocess.run(
        [wrk, "-t", str(min(conns, 2)), "-c", str(conns), "-d", f"{seconds}s", "--latency",
         "-s", script, f"http://127.0.0.1:{port}/v1/chat/completions"],
        env=env, capture_output=True, text=True, timeout=seconds + 60)
    row = parse_wrk(out.stdout)
    row["upstream_calls"] = peer.UPSTREAM["calls"] - before
    if out.returncode != 0 or "rps" not in row:
        row["failed"] = (out.stderr or out.stdout)[-400:]
    print(f"wrk {name}: {row.get('rps')} rps, p99 {row.get('p99_ms')} ms", file=sys.stderr)
    return row


def wrk_loads(args, peer, gateway, mock_port, noop):
    """The same targets under wrk: 64 connections on 2 threads, then 1 connection."""
    script = wrk_script()
    seconds = args.wrk_seconds

    def run(name, port, conns, prefix):
        return wrk_run(args.wrk, script, seconds, peer, name, port, conns, prefix)

    res = {"seconds": seconds, "connections": 64, "threads": 2}
    for r in range(args.runs):
        rows = {
            "noop": run("noop", noop, 64, None),
            "direct_mock": run("direct_mock", mock_port, 64, None),
            "hits": run("hits", gateway, 64, None),
            "misses": run("misses", gateway, 64, f"wrk miss r{r}"),
            "noop_c1": run("noop_c1", noop, 1, None),
            "hits_c1": run("hits_c1", gateway, 1, None),
        }
        for name, row in rows.items():
            res.setdefault(name, []).append(row)
    os.unlink(script)
    return res


def wrk_peer(wrk, seconds, runs, peer, port):
    """The LiteLLM proxy on `port` under the same wrk loads as baton's hits and misses (called
    from inside the peer script, while its proxy runs; see `PEER_WITH_WRK` in gateway.rs)."""
    script = wrk_script()
    peer.load(port, 16, 200, lambda i: peer.body_for("identical prompt"))  # the hit is cached
    res = {"seconds": seconds, "connections": 64, "threads": 2}
    for r in range(runs):
        res.setdefault("hits", []).append(
            wrk_run(wrk, script, seconds, peer, "litellm hits", port, 64, None))
        res.setdefault("misses", []).append(
            wrk_run(wrk, script, seconds, peer, "litellm misses", port, 64, f"wrk litellm r{r}"))
    os.unlink(script)
    return res


def parse_wrk(text):
    """Requests/sec, the latency percentiles (ms) and the error counts of wrk's report."""
    import re
    row = {"non_2xx": 0, "socket_errors": 0}
    unit = {"us": 0.001, "ms": 1.0, "s": 1000.0, "m": 60000.0}
    for line in text.splitlines():
        line = line.strip()
        m = re.match(r"Requests/sec:\s+([\d.]+)", line)
        if m:
            row["rps"] = float(m.group(1))
        m = re.match(r"(50|99)%\s+([\d.]+)(us|ms|s|m)$", line)
        if m:
            row[f"p{m.group(1)}_ms"] = float(m.group(2)) * unit[m.group(3)]
        m = re.match(r"Non-2xx or 3xx responses:\s+(\d+)", line)
        if m:
            row["non_2xx"] = int(m.group(1))
        m = re.match(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", line)
        if m:
            row["socket_errors"] = sum(int(g) for g in m.groups())
            row["socket_errors_by_kind"] = dict(zip(("connect", "read", "write", "timeout"),
                                                    (int(g) for g in m.groups())))
    return row


def sanity(peer, port):
    """Two identical requests: their statuses, `x-baton-cache` values and upstream calls."""
    before = peer.UPSTREAM["calls"]
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    status, cache, reply = [], [], None
    for _ in range(2):
        conn.request("POST", "/v1/chat/completions", body=peer.body_for("sanity prompt"),
                     headers={"Content-Type": "application/json",
                              "Authorization": f"Bearer {peer.MASTER_KEY}"})
        r = conn.getresponse()
        data = r.read()
        status.append(r.status)
        cache.append(r.getheader("x-baton-cache"))
        if r.status == 200:
            reply = json.loads(data)["choices"][0]["message"]["content"]
        else:
            reply = data[:300].decode(errors="replace")
            break  # the server may close a connection whose request it did not read
    conn.close()
    return {"status": status, "x_baton_cache": cache, "reply": reply,
            "upstream_calls_for_2_identical": peer.UPSTREAM["calls"] - before}


if __name__ == "__main__":
    main()
