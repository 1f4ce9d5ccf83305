"""`make ha` (`python -m bench.ha`): the whole highly available stack on loopback, until
Ctrl-C: etcd, two PostgreSQL nodes under Patroni (synchronous replication), HAProxy (the
primary on one port, the replicas on another), a Redis of its own, Leaseboard's web
(gunicorn) and a Celery worker with beat, both through HAProxy, the dashboard reading from
the replicas' port. Prints the URLs and an operator's sign-in; stops everything on Ctrl-C
(or SIGTERM) and leaves no process or port behind. Data in var/ha/ unless --root.

    .venv/bin/python -m bench.ha [--port-base 27500] [--root DIR] [--keep]
"""

from __future__ import annotations

import argparse
import secrets
import signal
import subprocess
import sys
import threading
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent.parent))
from bench.common import PY, ROOT, django_env, migrate, sayer, spawn, start_gunicorn, stop_group
from bench.ha.cluster import Cluster
from bench.servers import OwnRedis

say = sayer("ha")
SETUP = """
import django
django.setup()
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from leaseboard.web.roles import ROLES
for role in ROLES:
    Group.objects.get_or_create(name=role)
user, _ = get_user_model().objects.get_or_create(username="ops")
user.set_password(%(password)r)
user.save()
user.groups.add(Group.objects.get(name="operator"))
"""


class Stack:
    def __init__(self, root: Path, port_base: int | None, keep: bool) -> None:
        if root.exists() and not keep:
            subprocess.run(["rm", "-rf", str(root)], check=True)
        root.mkdir(parents=True, exist_ok=True)
        self.root = root
        self.port_base = port_base
        self.cluster = Cluster(root / "cluster", port_base=port_base, keep="all" if keep else False)
        (root / "redis").mkdir(exist_ok=True)
        self.redis = OwnRedis(root / "redis")
        self.web = None
        self.worker: subprocess.Popen | None = None

    def env(self) -> dict[str, str]:
        return django_env(
            self.cluster.url("leaseboard"),
            drop=("LEASEBOARD_TESTING", "REDIS_URL"),
            DATABASE_REPLICA_URL=self.cluster.replicas_url("leaseboard"),
            CELERY_BROKER_URL=self.redis.url(0),
            LEASEBOARD_DATA_DIR=str(self.root / "data"),
            LOG_LEVEL="WARNING",
        )

    def start(self) -> str:
        self.cluster.start()
        self.redis.start()
        self.cluster.create_database("leaseboard")
        say("cluster up; migrating")
        env = self.env()
        migrate(env)
        password = secrets.token_urlsafe(12)
        subprocess.run([PY, "-c", SETUP % {"password": password}], cwd=ROOT, env=env, check=True)
        web_port = self.port_base + 20 if self.port_base else None
        self.web = start_gunicorn(
            "leaseboard.wsgi:application", env=env, workers=2, worker_class="gthread",
            threads=4, extra=("--timeout", "60"), log=self.root / "web.log", what="ha web",
            port=web_port,
        )  # fmt: skip
        self.worker = spawn(
            [PY, "-m", "celery", "-A", "leaseboard", "worker", "-B", "-P", "solo",
             "--without-mingle", "--without-gossip", "-l", "WARNING",
             "-s", str(self.root / "beat-schedule")],
            env=env, log=self.root / "worker.log",
        )  # fmt: skip
        return password

    def stop(self) -> None:
        if self.worker is not None:
            stop_group(self.worker)
        if self.web is not None:
            self.web.stop()
        self.redis.close()
        self.cluster.stop()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port-base", type=int, default=None)
    parser.add_argument("--root", type=Path, default=ROOT / "var" / "ha")
    parser.add_argument("--keep", action="store_true", help="keep the data (and reuse it)")
    args = parser.parse_args()
    stack = Stack(args.root, args.port_base, args.keep)
    stopping = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stopping.set())
    try:
        password = stack.start()
        c = stack.cluster
        nodes = "\n".join(
            f"  {n.name}: PostgreSQL 127.0.0.1:{n.pg_port}, Patroni http://127.0.0.1:{n.rest_port}/patroni"
            for n in c.nodes
        )
        print(
            f"\nLeaseboard        {stack.web.url}/   (sign in as ops / {password})\n"
            f"primary (HAProxy) {c.url('leaseboard')}\n"
            f"replicas          {c.replicas_url('leaseboard')}\n"
            f"HAProxy stats     http://127.0.0.1:{c.stats_port}/\n"
            f"etcd              http://127.0.0.1:{c.etcd_port}/health\n{nodes}\n"
            f"logs              {stack.root}\n"
            "Ctrl-C stops everything.\n",
            flush=True,
        )
        while not stopping.wait(1):
            if stack.worker is not None and stack.worker.poll() is not None:
                say("the worker exited; stopping")
                break
    finally:
        say("stopping")
        stack.stop()
        left = stack.cluster.ports_in_use()
        say("stopped; no port left open" if not left else f"ports still open: {left}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
