#!/usr/bin/env python3
"""Leaseboard's two entry points, needing only Python 3.11+:

    python3 dev.py demo    # the whole system, embedded: web, worker + beat, simulated agents
    python3 dev.py reset   # delete the embedded demo's data, so the next demo starts fresh
    python3 dev.py test    # lint, migration check and the full test suite

Both create ./.venv and install the pinned requirements on first use (and again when the
requirements change). Extra arguments after `test` go to pytest.

The tests run in parallel with pytest-xdist: LEASEBOARD_TEST_WORKERS processes (default 2,
one per core of the 2-core CI machine; a number or `auto`), each with its own test database
and Redis database (tests/pg_env.py). LEASEBOARD_TEST_WORKERS=0 runs them serially, as does
passing `-n 0`, `-p no:xdist`, `-s`, `--pdb` or `--trace` (an `-n` of yours is used as given).

Environment variables (all optional):

  demo
    PORT                  the web server's port on 127.0.0.1 (default 8000); a port in use
                          stops the demo before anything starts, exit status 1
    LEASEBOARD_DATA_DIR   where the embedded database, the demo's sign-ins (demo/users.json)
                          and logs (demo/logs/) live (default ./var)
    DEBUG                 default true for the demo
    DATABASE_URL          postgres://... or sqlite:///... (default: SQLite in the data dir)
    CELERY_BROKER_URL     the worker's broker (default: the file-system broker);
    REDIS_URL             or Redis for both
    Every other setting the server reads: docs/deployment.md and leaseboard/settings/.
  reset
    LEASEBOARD_DATA_DIR   the data directory whose demo data it deletes (default ./var):
                          the SQLite database, broker files, generated keys, sign-ins, logs.
                          It says what it deletes first, stops nothing (a running demo makes
                          it refuse, exit status 1) and leaves files that are not the demo's.
  test
    LEASEBOARD_TEST_WORKERS  parallel pytest processes (default 2; `auto`; 0: serially)
    TEST_DATABASE_NAME    the test database's name (default test_leaseboard)
    TEST_REDIS_URL        the tests' Redis (default redis://127.0.0.1:6379/15)
    CI                    true: a missing PostgreSQL, Redis or Chromium fails the run
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = ROOT / ".venv"
PY = VENV / "bin" / "python"


def say(msg: str) -> None:
    print(f"[dev] {msg}", flush=True)


SHIPPED = ROOT / "clients" / "python"  # leaseboard-client, installed by requirements.txt


def shipped_digest() -> bytes:
    """The leaseboard-client sources: requirements.txt installs a copy (not a link), so a
    change under clients/python means installing it again."""
    digest = hashlib.sha256()
    for path in sorted(SHIPPED.rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc":
            digest.update(str(path.relative_to(SHIPPED)).encode() + b"\0" + path.read_bytes())
    return digest.digest()


def ensure_venv(requirements: str) -> None:
    if sys.version_info < (3, 11):  # noqa: UP036 - this script may be run by an older python3
        sys.exit("Leaseboard needs Python 3.11 or newer")
    if not PY.exists():
        say(f"creating virtual environment in {VENV}")
        venv.EnvBuilder(with_pip=True).create(VENV)
    req = ROOT / requirements
    digest = hashlib.sha256(
        b"".join((ROOT / f).read_bytes() for f in ("requirements.txt", requirements))
        + shipped_digest()
    ).hexdigest()
    stamp = VENV / f".installed-{req.stem}"
    if stamp.exists() and stamp.read_text() == digest:
        return
    say(f"installing {requirements} (first run takes a minute)")
    subprocess.run(
        [str(PY), "-m", "pip", "install", "--disable-pip-version-check", "-q", "-r", str(req)],
        check=True,
        cwd=ROOT,
    )
    stamp.write_text(digest)


# npm packages the tests run, each pinned by its own package-lock.json.
NODE_TOOLS = {
    "the contract test's TypeScript tools": ROOT / "tests" / "api" / "contract",
    "the OpenID provider of the single sign-on tests": ROOT / "tests" / "e2e" / "oidc_provider",
}


def ensure_node_tools() -> None:
    """npm ci each of NODE_TOOLS (again when its lock changes). Without npm the tests that
    need them skip, or fail under CI=true."""
    npm = shutil.which("npm")
    for what, where in NODE_TOOLS.items():
        lock = where / "package-lock.json"
        stamp = where / "node_modules" / ".installed"
        digest = hashlib.sha256(lock.read_bytes()).hexdigest()
        if stamp.exists() and stamp.read_text() == digest:
            continue
        if npm is None:
            say(f"npm not found: {what} cannot be installed (their tests fail under CI=true)")
            return
        say(f"installing {what} (npm ci)")
        code = subprocess.call(
            [npm, "ci", "--no-audit", "--no-fund", "--loglevel=error"], cwd=where
        )
        if code == 0:
            stamp.write_text(digest)


DEFAULT_TEST_WORKERS = "2"  # one per core on the 2-core CI machine (README, "Tests")


def xdist_args(extra: list[str]) -> list[str]:
    """`-n N --dist loadgroup` unless the caller chose (or must not have) parallel workers.
    loadgroup keeps each `xdist_group` on one worker."""
    workers = os.environ.get("LEASEBOARD_TEST_WORKERS", "").strip() or DEFAULT_TEST_WORKERS
    for i, arg in enumerate(extra):
        if arg in {"--pdb", "--trace", "-s", "--capture=no"}:
            return []  # a debugger or live output: one process
        if arg.startswith(("-n", "--numprocesses")) or arg == "-pno:xdist":
            return []
        if arg == "-p" and extra[i + 1 : i + 2] == ["no:xdist"]:
            return []
    if workers == "0":
        return []
    return ["-n", workers, "--dist", "loadgroup"]


def run(*args: str, env: dict[str, str] | None = None) -> int:
    say(" ".join(args))
    return subprocess.call(list(args), cwd=ROOT, env=env)


def cmd_test(extra: list[str]) -> int:
    ensure_venv("requirements-dev.txt")
    ensure_node_tools()
    bin_ = VENV / "bin"
    checks = [
        (str(bin_ / "ruff"), "check", "."),
        (str(bin_ / "ruff"), "format", "--check", "."),
        (str(bin_ / "mypy"),),  # files and strictness from pyproject.toml
    ]
    for check in checks:
        if run(*check) != 0:
            say("lint failed")
            return 1
    env = dict(os.environ)
    env["DATABASE_URL"] = "sqlite:///" + str(ROOT / "var" / "migrations-check.sqlite3")
    if run(str(PY), "manage.py", "makemigrations", "--check", "--dry-run", env=env) != 0:
        say("models changed without a migration")
        return 1
    code = run(str(PY), "-m", "pytest", *xdist_args(extra), *extra)
    if code == 5:
        say("pytest ran no test: that is a failure")
        return 1
    return code


def sign_ins(users_file: Path, access_log: Path) -> None:
    """The sign-ins again, last, where a newcomer looks after start-up scrolled by."""
    try:
        users = json.loads(users_file.read_text())
    except (OSError, ValueError):
        say(f"no demo sign-ins found in {users_file}: run `manage.py demo_setup`")
        return
    say("sign in as (each role sees its own pages; the admin has Settings):")
    for username, password in sorted(users.items()):
        role = username.removeprefix("demo-")
        say(f"  {role:<9} {username} / {password}")
    say(f"these sign-ins are kept in {users_file}; the access log is {access_log}")


# What the embedded demo keeps in its data directory (leaseboard/settings/base.py: DATA_DIR; dev.py
# demo: the beat schedule, demo/); `reset` deletes these and nothing else there.
DEMO_DATA = (
    "leaseboard.sqlite3*",  # the database, with its -wal/-shm/-journal files
    "broker",  # the file-system broker's messages
    "celerybeat-schedule*",
    "demo",  # sign-ins, tokens, logs, the running demo's pid
    "secret_key",
    "audit-key",
    "fencing-kek",
    "audit-checkpoints",
    "staticfiles",
    "migrations-check.sqlite3*",  # dev.py test's scratch database
)


def demo_pid_file(data_dir: Path) -> Path:
    return data_dir / "demo" / "dev.pid"


def running_demo(data_dir: Path) -> int | None:
    """The pid of a `dev.py demo` still running on this data directory, if any."""
    try:
        pid = int(demo_pid_file(data_dir).read_text().strip())
        os.kill(pid, 0)
    except (OSError, ValueError):
        return None
    return pid


def cmd_reset(extra: list[str]) -> int:
    if extra:
        say(f"reset takes no arguments, got {' '.join(extra)}")
        return 2
    data_dir = Path(os.environ.get("LEASEBOARD_DATA_DIR") or ROOT / "var")
    pid = running_demo(data_dir)
    if pid is not None:
        say(f"a demo is running on {data_dir} (pid {pid}): stop it first (Ctrl-C there)")
        say("reset stops nothing and deleted nothing")
        return 1
    doomed = sorted({path for pattern in DEMO_DATA for path in data_dir.glob(pattern)})
    if os.environ.get("DATABASE_URL"):
        say("DATABASE_URL is set: that database is not touched, only the files below")
    if not doomed:
        say(f"nothing to delete in {data_dir}: the next `python3 dev.py demo` starts fresh")
        return 0
    say(f"deleting the demo's data in {data_dir}:")
    for path in doomed:
        say(f"  {path.name}{'/' if path.is_dir() else ''}")
    for path in doomed:
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        else:
            path.unlink()
    left = sorted(p.name for p in data_dir.iterdir())
    if left:
        say(f"kept (not the demo's): {', '.join(left)}")
    else:
        data_dir.rmdir()
    say("done: the next `python3 dev.py demo` starts with a new database and new sign-ins")
    return 0


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt  # SIGTERM and SIGHUP stop the demo like Ctrl-C does


def port_free(port: str) -> str:
    """'' when 127.0.0.1:`port` can be listened on; else why not, in words."""
    if not port.isdigit() or not 1 <= int(port) <= 65535:
        return f"PORT={port!r} is not a port number (1-65535)"
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as runserver binds
        try:
            probe.bind(("127.0.0.1", int(port)))
        except OSError as exc:
            return f"port {port} on 127.0.0.1 is in use ({exc.strerror or exc})"
    return ""


def cmd_demo(extra: list[str]) -> int:
    port = os.environ.get("PORT", "8000").strip()
    busy = port_free(port)
    if busy:  # before anything starts: no fleet against someone else's server
        say(f"{busy}: nothing was started. Choose another port, e.g. PORT=8001 python3 dev.py demo")
        return 1
    ensure_venv("requirements.txt")
    signal.signal(signal.SIGTERM, _interrupt)
    signal.signal(signal.SIGHUP, _interrupt)
    env = dict(os.environ)
    env.setdefault("DEBUG", "true")
    env["LEASEBOARD_DEMO"] = "true"  # mounts the payments sandbox the fleet pays through
    py = str(PY)
    data_dir = Path(env.get("LEASEBOARD_DATA_DIR") or ROOT / "var")
    logs = data_dir / "demo" / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    # Every request the fleet and the browsers make is a line: a file, not the console.
    env["LEASEBOARD_ACCESS_LOG"] = str(logs / "access.log")
    # A host in the URL: kombu warns, once per connection, when the file broker has none.
    if not env.get("CELERY_BROKER_URL") and not env.get("REDIS_URL"):
        env["CELERY_BROKER_URL"] = "filesystem://localhost/"
    if run(py, "manage.py", "migrate", "--noinput", env=env) != 0:
        return 1
    run(py, "manage.py", "demo_setup", env=env)
    procs: list[subprocess.Popen] = []
    status = 0

    def start(*args: str) -> None:
        say("starting " + " ".join(args))
        procs.append(subprocess.Popen(list(args), cwd=ROOT, env=env, start_new_session=True))

    worker = ["-m", "celery", "-A", "leaseboard", "--quiet", "worker", "-B"]
    worker += ["--loglevel", "WARNING"]
    worker += ["--concurrency", "2", "--schedule", str(data_dir / "celerybeat-schedule")]
    demo_pid_file(data_dir).write_text(str(os.getpid()))  # `dev.py reset` refuses meanwhile
    try:
        start(py, "manage.py", "runserver", "--noreload", f"127.0.0.1:{port}")
        start(py, *worker)
        time.sleep(2)
        start(py, "manage.py", "simulate_agents", "--base-url", f"http://127.0.0.1:{port}")
        time.sleep(1.5)  # the fleet's first lines first: the sign-ins come last
        say(f"Leaseboard is running: http://127.0.0.1:{port}/  (Ctrl-C stops everything)")
        sign_ins(data_dir / "demo" / "users.json", logs / "access.log")
        while all(p.poll() is None for p in procs):
            time.sleep(0.5)
        say("a process exited; stopping the rest")
        status = 1
    except KeyboardInterrupt:
        say("stopping")
    finally:
        # The fleet first, so its final releases still reach the web server; then the rest.
        for p in reversed(procs):
            if p.poll() is None:
                p.terminate()  # the leader shuts its own children down (Celery's pool)
                try:
                    p.wait(10)
                except subprocess.TimeoutExpired:
                    os.killpg(p.pid, signal.SIGKILL)
                    p.wait()
        demo_pid_file(data_dir).unlink(missing_ok=True)
    return status


def main() -> int:
    if len(sys.argv) >= 2 and sys.argv[1] in {"-h", "--help", "help"}:
        print(__doc__)
        return 0
    commands = {"demo": cmd_demo, "reset": cmd_reset, "test": cmd_test}
    if len(sys.argv) < 2 or sys.argv[1] not in commands:
        print(__doc__)
        return 2
    return commands[sys.argv[1]](sys.argv[2:])


if __name__ == "__main__":
    sys.exit(main())
