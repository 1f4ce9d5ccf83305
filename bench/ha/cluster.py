"""A highly available PostgreSQL on loopback: etcd (the consensus store), PostgreSQL 15 nodes
under Patroni with synchronous replication, and HAProxy routing to whichever node Patroni's
REST API says is the primary (`/primary`) and, on a second port, to the replicas
(`/replica`). Used by `make ha`, `make ha-chaos` (bench/ha/chaos.py) and tests/ha.

Everything lives in one folder (a fresh temporary one unless given) and on ports of its own
(`port_base` and up, or free ones). `stop()` leaves no process and no port behind.

PostgreSQL, and so Patroni, refuse to run as root: as root, Patroni runs as `postgres`, from
a virtualenv made with the system Python (a venv of a Python under /root cannot be run by
that user), built once from requirements-ha.txt under the system's temporary folder.
No Django import here.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.common import free_port, port_open, wait_until
from bench.ha.nodes import (
    ETCD,
    HAPROXY,
    LOOP_WAIT_S,
    RETRY_TIMEOUT_S,
    SCOPE,
    TTL_S,
    Node,
    alive,
    http_json,
    patroni_command,
    signal_pids,
)
from bench.servers import PG_BIN


class Cluster:
    """etcd + `nodes` PostgreSQL nodes under Patroni + HAProxy, all on loopback."""

    def __init__(
        self,
        root: Path | None = None,
        *,
        nodes: int = 2,
        port_base: int | None = None,
        strict: bool = False,
        keep: bool | str = False,
    ) -> None:
        self.root = Path(root or tempfile.mkdtemp(prefix="lb-ha-"))
        self.root.mkdir(parents=True, exist_ok=True)
        self.root.chmod(0o755)
        self.keep = keep
        self.strict = strict
        ports = iter(range(port_base, port_base + 100)) if port_base else None

        def port() -> int:
            return next(ports) if ports else free_port()

        self.etcd_port, self.etcd_peer_port = port(), port()
        self.primary_port, self.replicas_port, self.stats_port = port(), port(), port()
        self.nodes = [
            Node(f"node{i}", port(), port(), self.root / f"node{i}") for i in range(nodes)
        ]
        self.etcd: subprocess.Popen | None = None
        self.haproxy: subprocess.Popen | None = None
        self.command, self.user = patroni_command()

    # -- addresses --------------------------------------------------------------------------

    def url(self, db: str = "postgres") -> str:
        """Through HAProxy, to the current primary."""
        return f"postgres://postgres@127.0.0.1:{self.primary_port}/{db}"

    def replicas_url(self, db: str = "postgres") -> str:
        """Through HAProxy, to a streaming replica (the primary's port when there is none is
        the caller's business: this one then refuses connections)."""
        return f"postgres://postgres@127.0.0.1:{self.replicas_port}/{db}"

    def multihost_url(self, db: str = "postgres") -> str:
        """libpq multi-host: every node, the first that accepts writes wins."""
        hosts = ",".join(f"127.0.0.1:{n.pg_port}" for n in self.nodes)
        return f"postgres://postgres@{hosts}/{db}?target_session_attrs=read-write"

    # -- starting and stopping --------------------------------------------------------------

    def start(self, timeout: float = 120) -> None:
        if os.geteuid() == 0:
            shutil.chown(self.root, user="postgres")
        self._start_etcd()
        for i, node in enumerate(self.nodes):
            self._start_patroni(node)
            if i == 0:
                wait_until(lambda: self.primary() is not None, "the first primary", timeout, 0.2)
        wait_until(self.healthy, "every replica streaming, one synchronous", timeout, 0.2)
        self._start_haproxy()
        wait_until(self._routes, "HAProxy routing to the primary", 30, 0.2)

    def _start_etcd(self) -> None:
        peer = f"http://127.0.0.1:{self.etcd_peer_port}"
        client = f"http://127.0.0.1:{self.etcd_port}"
        cmd = [
            ETCD, "--name", "lbha", "--data-dir", str(self.root / "etcd"),
            "--listen-client-urls", client, "--advertise-client-urls", client,
            "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
            "--initial-cluster", f"lbha={peer}", "--initial-cluster-state", "new",
            "--log-level", "warn", "--logger", "zap",
        ]  # fmt: skip
        self.etcd = self._spawn(cmd, self.root / "etcd.log")
        wait_until(
            lambda: http_json(f"{client}/health")[0] == 200, "etcd", timeout=30, interval=0.1
        )

    def _config(self, node: Node) -> dict[str, Any]:
        """Patroni's configuration of `node`: one literal, long because Patroni's YAML is,
        kept whole so it reads as the file it becomes."""
        auth = {"username": "postgres", "password": "postgres"}
        return {
            "scope": SCOPE,
            "name": node.name,
            "log": {"level": "INFO"},
            "restapi": {
                "listen": f"127.0.0.1:{node.rest_port}",
                "connect_address": f"127.0.0.1:{node.rest_port}",
            },
            "etcd3": {"hosts": [f"127.0.0.1:{self.etcd_port}"]},
            "bootstrap": {
                "dcs": {
                    "ttl": TTL_S,
                    "loop_wait": LOOP_WAIT_S,
                    "retry_timeout": RETRY_TIMEOUT_S,
                    # A crashed primary fails over at once instead of being restarted in
                    # place for up to 300 s (Patroni's default).
                    "primary_start_timeout": 0,
                    "maximum_lag_on_failover": 1048576,
                    "synchronous_mode": True,
                    "synchronous_mode_strict": self.strict,
                    "postgresql": {
                        "use_pg_rewind": True,
                        "use_slots": True,
                        "parameters": {
                            "wal_level": "replica",
                            "hot_standby": "on",
                            "wal_log_hints": "on",
                            "max_wal_senders": 10,
                            "max_replication_slots": 10,
                            "max_connections": 200,
                            "wal_keep_size": "128MB",
                            # Replicas report their replay position often: the lag the
                            # dashboard shows is at most this stale.
                            "wal_receiver_status_interval": "1s",
                            "hot_standby_feedback": "on",
                        },
                    },
                },
                "initdb": [{"encoding": "UTF8"}, {"locale": "C"}],
                "pg_hba": [
                    "local all all trust",
                    "host replication all 127.0.0.1/32 trust",
                    "host all all 127.0.0.1/32 trust",
                ],
            },
            "postgresql": {
                "listen": f"127.0.0.1:{node.pg_port}",
                "connect_address": f"127.0.0.1:{node.pg_port}",
                "data_dir": str(node.data),
                "bin_dir": str(PG_BIN),
                "pgpass": str(node.home / "pgpass"),
                "authentication": {"superuser": auth, "replication": auth, "rewind": auth},
                "parameters": {
                    "unix_socket_directories": str(node.home),
                    "shared_buffers": "32MB",
                    # A rehearsal on one shared machine: never fsync (a SIGKILL keeps the
                    # page cache; production keeps fsync on). full_page_writes stays on:
                    # pg_rewind, which brings a deposed primary back, needs it.
                    "fsync": "off",
                },
            },
            "tags": {"nofailover": False, "noloadbalance": False},
        }

    def _start_patroni(self, node: Node) -> None:
        node.home.mkdir(parents=True, exist_ok=True)
        config = node.home / "patroni.json"  # JSON is YAML
        config.write_text(json.dumps(self._config(node), indent=2))
        if self.user:
            for path in (node.home, config):
                shutil.chown(path, user=self.user)
        node.proc = self._spawn(
            [*self.command, str(config)], node.home / "patroni.log", user=self.user
        )

    def _haproxy_config(self) -> str:
        def servers(check: str) -> str:
            lines = [
                f"  server {n.name} 127.0.0.1:{n.pg_port} maxconn 300 check port {n.rest_port}\n"
                for n in self.nodes
            ]
            return "".join(lines) + f"  option httpchk OPTIONS {check}\n"

        # inter 500ms fall 2: a dead primary is out of the pool within about a second;
        # rise 1: a promoted one is in at its first good check; shutdown-sessions cuts the
        # connections to a node marked down (a frozen primary's clients would hang).
        return (
            "global\n  maxconn 1000\n"
            "defaults\n  mode tcp\n  timeout connect 1s\n  timeout client 30m\n"
            "  timeout server 30m\n  timeout check 1s\n  retries 2\n"
            "  default-server inter 500ms fastinter 250ms downinter 500ms fall 2 rise 1 "
            "on-marked-down shutdown-sessions\n"
            f"listen primary\n  bind 127.0.0.1:{self.primary_port}\n"
            "  http-check expect status 200\n" + servers("/primary") +
            f"listen replicas\n  bind 127.0.0.1:{self.replicas_port}\n  balance roundrobin\n"
            "  http-check expect status 200\n" + servers("/replica") +
            f"listen stats\n  mode http\n  bind 127.0.0.1:{self.stats_port}\n"
            "  stats enable\n  stats uri /\n  stats refresh 2s\n"
        )  # fmt: skip

    def _start_haproxy(self) -> None:
        config = self.root / "haproxy.cfg"
        config.write_text(self._haproxy_config())
        self.haproxy = self._spawn([HAPROXY, "-db", "-f", str(config)], self.root / "haproxy.log")

    def _routes(self) -> bool:
        import psycopg

        try:
            with psycopg.connect(self.url(), connect_timeout=2, autocommit=True) as conn:
                return not conn.execute("SELECT pg_is_in_recovery()").fetchone()[0]
        except psycopg.Error:
            return False

    def _spawn(self, cmd: list[str], log: Path, user: str | None = None) -> subprocess.Popen:
        out = open(log, "ab")
        env = dict(os.environ)
        if user:
            env["HOME"] = str(self.root)
        try:
            return subprocess.Popen(
                cmd, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
                cwd=self.root, env=env, user=user,
            )  # fmt: skip
        finally:
            out.close()

    def stop(self) -> None:
        """Everything down (HAProxy, Patroni and its PostgreSQL, etcd), nothing left behind
        (with `keep`, the logs stay; with `keep="all"`, the data too)."""
        for node in self.nodes:
            signal_pids(node.postgres_pids(), signal.SIGCONT)  # a frozen node cannot stop
            if node.proc is not None:
                signal_pids([node.proc.pid], signal.SIGCONT)
        for proc in (self.haproxy, *(n.proc for n in self.nodes)):
            if proc is not None and proc.poll() is None:
                proc.terminate()
        for node in self.nodes:
            if node.proc is not None:
                try:
                    node.proc.wait(30)
                except subprocess.TimeoutExpired:
                    node.proc.kill()
                    node.proc.wait(5)
            # Patroni stops its PostgreSQL on SIGTERM; a postmaster left behind goes now.
            leftover = node.postgres_pids()
            if leftover:
                signal_pids(leftover[:1], signal.SIGQUIT)
                deadline = time.monotonic() + 10
                while node.postgres_pids() and time.monotonic() < deadline:
                    time.sleep(0.1)
                signal_pids(node.postgres_pids(), signal.SIGKILL)
        for proc in (self.haproxy, self.etcd):
            if proc is not None:
                if proc.poll() is None:
                    proc.terminate()
                try:
                    proc.wait(10)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(5)
        if not self.keep:
            shutil.rmtree(self.root, ignore_errors=True)
        elif self.keep != "all":
            for data in (self.root / "etcd", *(n.data for n in self.nodes)):
                shutil.rmtree(data, ignore_errors=True)

    def ports(self) -> list[int]:
        own = [self.etcd_port, self.etcd_peer_port, self.primary_port, self.replicas_port]
        return own + [self.stats_port] + [p for n in self.nodes for p in (n.pg_port, n.rest_port)]

    def ports_in_use(self) -> list[int]:
        return [p for p in self.ports() if port_open(p)]

    # -- what the cluster says ----------------------------------------------------------------

    def primary(self, timeout: float = 3.0) -> Node | None:
        """The node whose Patroni answers 200 on `/primary` (None: no node does)."""
        leaders = [n for n in self.nodes if n.rest("primary", timeout)[0] == 200]
        return leaders[0] if len(leaders) == 1 else None

    def roles(self, timeout: float = 1.0) -> dict[str, dict[str, Any]]:
        """Each node's Patroni view: role, state, timeline (empty when it does not answer)."""
        out = {}
        for node in self.nodes:
            status, body = node.rest("patroni", timeout)
            out[node.name] = body if status and isinstance(body, dict) else {}
        return out

    def writable(self, node: Node, timeout: float = 1.0) -> bool | None:
        """Does this node's PostgreSQL itself say it is a primary? (None: no answer.)"""
        import psycopg

        try:
            with psycopg.connect(
                node.url(), connect_timeout=max(2, int(timeout)), autocommit=True
            ) as conn:
                conn.execute(f"SET statement_timeout = {int(timeout * 1000)}")
                return not conn.execute("SELECT pg_is_in_recovery()").fetchone()[0]
        except psycopg.Error:
            return None

    def healthy(self) -> bool:
        """One primary, every other node streaming from it, one of them synchronous."""
        import psycopg

        leader = self.primary()
        if leader is None:
            return False
        try:
            with psycopg.connect(leader.url(), connect_timeout=2, autocommit=True) as conn:
                rows = conn.execute(
                    "SELECT application_name, sync_state FROM pg_stat_replication "
                    "WHERE state = 'streaming'"
                ).fetchall()
        except psycopg.Error:
            return False
        if not (len(rows) == len(self.nodes) - 1 and any(s == "sync" for _, s in rows)):
            return False
        # ...and Patroni's own record names a synchronous standby (its /sync key): only that
        # node may be promoted, and it is written a loop after PostgreSQL reports "sync".
        status, body = leader.rest("cluster", 3.0)
        members = body.get("members", []) if status == 200 and isinstance(body, dict) else []
        return any(
            m.get("role") == "sync_standby" and m.get("state") == "streaming" for m in members
        )

    def timeline(self) -> int | None:
        """The primary's timeline (one more for each promotion), as Patroni reports it."""
        leader = self.primary()
        if leader is None:
            return None
        status, body = leader.rest("patroni")
        return int(body["timeline"]) if status == 200 and body and "timeline" in body else None

    # -- faults -------------------------------------------------------------------------------

    def kill_postmaster(self, node: Node) -> int | None:
        pid = node.postmaster_pid()
        if pid is not None and alive(pid):
            os.kill(pid, signal.SIGKILL)
            return pid
        return None

    def freeze_node(self, node: Node) -> None:
        """SIGSTOP Patroni and every PostgreSQL process of the node (a hung machine)."""
        assert node.proc is not None
        signal_pids([node.proc.pid], signal.SIGSTOP)
        signal_pids(node.postgres_pids(), signal.SIGSTOP)

    def thaw_node(self, node: Node) -> None:
        signal_pids(node.postgres_pids(), signal.SIGCONT)
        assert node.proc is not None
        signal_pids([node.proc.pid], signal.SIGCONT)

    def freeze_postmaster(self, node: Node) -> int | None:
        """SIGSTOP only the postmaster: running backends go on, new connections wait."""
        pid = node.postmaster_pid()
        if pid is not None:
            signal_pids([pid], signal.SIGSTOP)
        return pid

    def thaw_postmaster(self, node: Node) -> None:
        pid = node.postmaster_pid()
        if pid is not None:
            signal_pids([pid], signal.SIGCONT)

    def create_database(self, name: str) -> str:
        import psycopg

        with psycopg.connect(self.url(), autocommit=True, connect_timeout=5) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)
