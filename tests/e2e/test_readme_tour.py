"""The README's curl tour, as written, in bash against a running Leaseboard (issue 28,
point 8): the block is cut out of README.md and run verbatim; its `manage.py create_agent`
lines reach the live server's database through DATABASE_URL. Slow (the tour waits 16 s for
a lease to expire), so marked."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from urllib.parse import urlparse

import pytest
from django.db import connection

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def _tour() -> str:
    readme = (ROOT / "README.md").read_text()
    start = readme.index("```bash\n# printed once") + len("```bash\n")
    return readme[start : readme.index("```", start)]


def test_the_readme_tour_runs_verbatim_in_bash_to_its_last_step(live_server, tmp_path):
    if shutil.which("bash") is None or shutil.which("curl") is None:
        pytest.skip("bash and curl are needed")
    settings = connection.settings_dict
    db = f"postgres://{settings['USER']}@{settings['HOST']}:{settings['PORT']}/{settings['NAME']}"
    env = {
        **os.environ,
        "PORT": str(urlparse(live_server.url).port),
        "DATABASE_URL": db,
        "DEBUG": "true",
    }
    script = tmp_path / "tour.sh"
    script.write_text("set -euo pipefail\n" + _tour())
    done = subprocess.run(
        ["bash", str(script)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert '"admission":"admitted"' in out  # step 1
    assert '"certainty":"active"' in out  # step 3
    assert '"outcome":"applied"' in out  # step 4
    assert '"epoch":2' in out  # step 5: the successor's acquire
    assert out.rstrip().endswith("}") and '"code": "stale_epoch"' in out  # the last step
