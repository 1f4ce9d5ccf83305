"""HTTP load with wrk (apt-get install wrk): one Lua script shape for every HTTP row of
`make bench`, so the API, the raw view, the bare project and etcd are loaded alike.

Each wrk thread starts at its own offset in `items` and takes the next item per request;
`body_lua` builds the request from `item` (and `headers`, `tid`, `n`). wrk counts any
status ≥ 400 and any socket error as failed.
"""

from __future__ import annotations

import json
import re
import subprocess
import tempfile
from dataclasses import dataclass

LUA_TEMPLATE = """
local items = {%(items)s}
local headers = {["Content-Type"] = "application/json", ["Authorization"] = "Bearer %(token)s"}
local counter = 0
local threads = {}
function setup(thread)
  thread:set("tid", counter)
  counter = counter + 1
end
function init(args)
  n = tonumber(tid) * %(stride)d
end
function request()
  n = n + 1
  local item = items[(n %% #items) + 1]
  %(body)s
end
function done(summary, latency, requests)
  io.write(string.format("RESULT %%d %%d %%.3f %%.3f %%d %%d\\n", summary.requests,
    summary.duration, latency:percentile(50) / 1000, latency:percentile(99) / 1000,
    summary.errors.status, summary.errors.connect + summary.errors.read
    + summary.errors.write + summary.errors.timeout))
end
"""


@dataclass(frozen=True)
class Load:
    rate: float  # requests per second
    p50_ms: float
    p99_ms: float
    failed: int


def wrk(
    url: str,
    items: list[str],
    body_lua: str,
    *,
    conns: int,
    threads: int,
    seconds: int,
    token: str = "",
) -> Load:
    script = LUA_TEMPLATE % {
        "items": ",".join(json.dumps(i) for i in items),
        "token": token,
        "stride": max(1, len(items) // max(1, threads)),
        "body": body_lua,
    }
    with tempfile.NamedTemporaryFile("w", suffix=".lua", prefix="bench-wrk-") as f:
        f.write(script)
        f.flush()
        out = subprocess.run(
            ["wrk", "-t", str(threads), "-c", str(conns), "-d", f"{seconds}s",
             "--timeout", "5s", "-s", f.name, url],
            capture_output=True, text=True, timeout=seconds + 60,
        ).stdout  # fmt: skip
    m = re.search(r"RESULT (\d+) (\d+) ([\d.]+) ([\d.]+) (\d+) (\d+)", out)
    if not m:
        raise RuntimeError(f"wrk printed no result:\n{out}")
    n, dur_us, p50, p99, bad_status, bad_io = m.groups()
    return Load(int(n) / (int(dur_us) / 1e6), float(p50), float(p99), int(bad_status) + int(bad_io))
