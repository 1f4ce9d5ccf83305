"""One failover under a small fleet, for CI: `python -m bench.ha.chaos` with one SIGKILL of
the primary's postmaster (no freezes), in a subprocess on a cluster of its own (etcd, two
PostgreSQL nodes under Patroni, HAProxy; bench/ha/cluster.py and nodes.py), free ports, temporary
folders. The three figures of `make ha-chaos` must be zero, the failover must have happened
and nothing may be left running. Skipped where Patroni, etcd or HAProxy is missing, except
under CI=true, where that fails (.ci/run installs them)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from bench.ha.nodes import missing_tools, patroni_command
from tests.pg_env import IN_CI

ROOT = Path(__file__).resolve().parents[2]
MISSING = missing_tools()

pytestmark = [
    pytest.mark.slow,
    pytest.mark.ha,
    pytest.mark.postgres,
    pytest.mark.xdist_group("ha"),
    pytest.mark.skipif(bool(MISSING) and not IN_CI, reason=f"needs {', '.join(MISSING)}"),
]


def test_one_failover_loses_nothing_and_never_reissues_a_fencing_order(tmp_path: Path) -> None:
    assert not MISSING, f"CI=true but {', '.join(MISSING)} missing (.ci/run installs them)"
    patroni_command()  # as root, Patroni's venv is built once, outside the run's time bound
    out = tmp_path / "ha.json"
    run = subprocess.run(
        [sys.executable, "-m", "bench.ha.chaos", "--agents", "8", "--kills", "1",
         "--no-freeze-node", "--no-freeze-postmaster", "--duration", "35", "--ttl-ms", "8000",
         "--json", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=170,
    )  # fmt: skip
    report = run.stdout[-5000:] + run.stderr[-3000:]
    assert out.exists(), report
    result = json.loads(out.read_text())
    assert "error" not in result, result.get("error")
    ha = result["ha"]
    last = run.stdout.strip().splitlines()[-1]
    assert last.startswith("ha: failovers="), report

    assert ha["failovers"] >= 1, report
    assert [f["fault"] for f in ha["faults"]] == ["kill"], report
    assert ha["stale_accepted"] == 0, ha["examples"]
    assert ha["same_order_two_holders"] == 0, ha["examples"]
    assert ha["acknowledged_lost"] == 0, ha["examples"]
    # Something was acknowledged on both sides of the failover to be lost or kept.
    assert ha["acknowledged"]["grants"] > 0 and ha["acknowledged"]["effects"] > 0, report
    assert ha["faults"][0]["write_outage_s"] is not None, report
    assert run.returncode == 0, report
    assert result["ports_left_open"] == [], report
