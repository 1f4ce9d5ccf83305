"""leaseboard-client as a package: the tests run against the installed distribution (not the
source tree), it imports nothing it does not declare, its version is the API's, and a fresh
virtual environment that installs it runs the README's quick start against a live server.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import os
import re
import subprocess
import sys
import venv
from pathlib import Path

import pytest

import leaseboard_client
import leaseboard_recipient

REPO = Path(__file__).resolve().parents[2]
SHIPPED = REPO / "clients" / "python"
SOURCE = SHIPPED / "src"
README = SHIPPED / "README.md"


def tree_digest(root: Path) -> dict[str, str]:
    return {
        str(path.relative_to(root)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(root.rglob("*"))
        if path.is_file() and "__pycache__" not in path.parts
    }


@pytest.mark.parametrize("package", [leaseboard_client, leaseboard_recipient])
def test_the_tests_import_the_installed_package_built_from_this_tree(package: object) -> None:
    installed = Path(package.__file__).parent  # type: ignore[attr-defined]
    assert SOURCE not in installed.parents, (
        f"{package.__name__} is imported from the source tree ({installed}), "  # type: ignore[attr-defined]
        "not from an installed leaseboard-client"
    )
    assert "site-packages" in installed.parts
    source = SOURCE / installed.name
    # A stale install would test yesterday's SDK: `python3 dev.py test` reinstalls it when
    # clients/python changes (or: pip install ./clients/python[recipient]).
    assert tree_digest(installed) == tree_digest(source), (
        f"the installed {installed.name} differs from {source}: reinstall clients/python"
    )
    assert (installed / "py.typed").exists()


def test_the_version_is_the_apis() -> None:
    from leaseboard.api.v1 import api

    assert importlib.metadata.version("leaseboard-client") == leaseboard_client.__version__
    assert leaseboard_client.__version__.split(".")[0] == leaseboard_client.API_VERSION
    assert api.version == leaseboard_client.API_VERSION


def test_every_server_error_code_has_its_typed_sdk_error() -> None:
    from leaseboard.domain.errors import ALL_CODES
    from leaseboard_client.errors import ERRORS_BY_CODE

    assert sorted(ALL_CODES - set(ERRORS_BY_CODE)) == []


def test_importing_the_sdk_loads_only_what_it_declares(tmp_path: Path) -> None:
    # From an empty directory, so nothing of this repository is importable by accident.
    code = (
        "import sys, leaseboard_client, leaseboard_client.aio; "
        "loaded = {m.split('.')[0] for m in sys.modules}; "
        "bad = loaded & {'django', 'celery', 'leaseboard', 'leaseboard_recipient', "
        "'cryptography', 'langchain_core', 'langgraph'}; "
        "assert not bad, sorted(bad); "
        "import leaseboard_recipient; "
        "assert 'django' not in sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, cwd=tmp_path)


# -- a fresh virtual environment runs the quick start ---------------------------------------------


def quick_start() -> str:
    """The README's quick-start script: the python block after `<!-- quickstart -->`."""
    text = README.read_text()
    match = re.search(r"<!-- quickstart -->\s*```python\n(.*?)```", text, re.S)
    assert match, "clients/python/README.md has no quick-start block"
    return match.group(1)


@pytest.mark.slow
@pytest.mark.postgres
def test_a_fresh_virtual_environment_installs_the_package_and_runs_the_quick_start(
    live_server,  # type: ignore[no-untyped-def]
    agent,  # type: ignore[no-untyped-def]
    tmp_path: Path,
) -> None:
    # No pip of its own: the running pip installs into it (--python), which saves creating
    # one; downloads come from pip's cache after the first run.
    env_dir = tmp_path / "agent-venv"
    venv.EnvBuilder(with_pip=False).create(env_dir)
    python = env_dir / "bin" / "python"
    subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "-q", str(SHIPPED)],
        check=True,
        timeout=300,
        env={**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"},
    )
    listed = subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "list", "--format=freeze"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    names = {line.split("==")[0].lower() for line in listed.split()}
    # Only what it declares: httpx and its own dependencies, no Django, no cryptography.
    assert "leaseboard-client" in names and "httpx" in names
    assert not names & {"django", "cryptography", "celery", "langchain-core"}, names

    executor, token = agent("quickstart-agent")
    script = tmp_path / "quickstart.py"
    script.write_text(quick_start())
    result = subprocess.run(
        [str(python), str(script)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        env={"LEASEBOARD_URL": live_server.url, "LEASEBOARD_TOKEN": token, "PATH": ""},
    )
    assert result.returncode == 0, result.stderr
    out = result.stdout
    key = re.search(r"admitted (quickstart-\w+)", out)
    assert key, out
    assert "reported applied" in out and "released" in out, out

    from leaseboard.core.models import Effect, WorkItem

    item = WorkItem.objects.get(key=key.group(1))
    [effect] = Effect.objects.filter(work_item=item)
    assert (effect.kind, effect.decision, effect.outcome) == (
        "payment.refund",
        "authorized",
        "applied",
    )
    assert effect.executor == executor
    assert item.leases.get().state == "released"
