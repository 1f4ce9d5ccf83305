"""The parts of a cluster node on loopback (bench/ha/cluster.py assembles them): the tools a
machine needs, the command that runs Patroni (as `postgres` under root, from a virtualenv
of the system Python built once from requirements-ha.txt), Patroni's timing, a node's
ports and folders, and the signals the chaos run sends to its processes. No Django import
here.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.common import ROOT
from bench.servers import PG_BIN

ETCD = os.environ.get("LEASEBOARD_ETCD", "/usr/bin/etcd")
HAPROXY = os.environ.get("LEASEBOARD_HAPROXY", "/usr/sbin/haproxy")
REQUIREMENTS = ROOT / "requirements-ha.txt"
SCOPE = "leaseboard-ha"
# Patroni's minimum: loop_wait + 2 x retry_timeout <= ttl (docs/deployment.md, "High
# availability" says why each value).
TTL_S, LOOP_WAIT_S, RETRY_TIMEOUT_S = 20, 2, 9


def missing_tools() -> list[str]:
    """What this machine lacks to run a cluster (empty: nothing)."""
    missing = [p for p in (ETCD, HAPROXY, str(PG_BIN / "pg_ctl")) if not os.access(p, os.X_OK)]
    try:
        import patroni  # noqa: F401
    except ImportError:
        missing.append("patroni (pip install -r requirements-ha.txt)")
    return missing


def patroni_command() -> tuple[list[str], str | None]:
    """The command that runs Patroni, and the user to run it as (None: this one)."""
    if os.geteuid() != 0:
        return [sys.executable, "-m", "patroni"], None
    # Under the system's temporary folder: the checkout may be where postgres cannot enter.
    want = hashlib.sha256(REQUIREMENTS.read_bytes()).hexdigest()
    venv = Path(tempfile.gettempdir()) / f"leaseboard-ha-venv-{want[:12]}"
    with open(f"{venv}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # two runs at once build it once
        if not (venv / "ready").exists():
            shutil.rmtree(venv, ignore_errors=True)
            system_python = shutil.which("python3", path="/usr/bin:/bin") or "/usr/bin/python3"
            subprocess.run([system_python, "-m", "venv", str(venv)], check=True)
            subprocess.run(
                [str(venv / "bin" / "pip"), "install", "-q", "-r", str(REQUIREMENTS)],
                check=True,
                timeout=600,
            )
            (venv / "ready").touch()
    return [str(venv / "bin" / "python"), "-m", "patroni"], "postgres"


def http_json(url: str, timeout: float = 1.0) -> tuple[int, Any]:
    """(status, body) of a GET; (0, None) when nothing answered in time."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as answer:
            return answer.status, json.loads(answer.read() or b"null")
    except urllib.error.HTTPError as exc:
        try:
            return exc.code, json.loads(exc.read() or b"null")
        except ValueError:
            return exc.code, None
    except (OSError, ValueError):
        return 0, None


@dataclass
class Node:
    name: str
    pg_port: int
    rest_port: int
    home: Path
    proc: subprocess.Popen | None = None

    @property
    def data(self) -> Path:
        return self.home / "data"

    def url(self, db: str = "postgres") -> str:
        return f"postgres://postgres@127.0.0.1:{self.pg_port}/{db}"

    def rest(self, path: str = "patroni", timeout: float = 1.0) -> tuple[int, Any]:
        return http_json(f"http://127.0.0.1:{self.rest_port}/{path}", timeout)

    def postmaster_pid(self) -> int | None:
        try:
            return int((self.data / "postmaster.pid").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            return None

    def postgres_pids(self) -> list[int]:
        postmaster = self.postmaster_pid()
        if postmaster is None or not alive(postmaster):
            return []
        children = subprocess.run(
            ["pgrep", "-P", str(postmaster)], capture_output=True, text=True
        ).stdout.split()
        return [postmaster, *(int(c) for c in children)]


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True


def signal_pids(pids: list[int], sig: int) -> None:
    for pid in pids:
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass
