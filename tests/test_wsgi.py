"""leaseboard.wsgi loads both URL maps as a worker starts (not in its first request) and
opens no database connection doing it (gunicorn --preload would share one)."""

import json
import os
import subprocess
import sys

PROBE = """
import json, sys
before = set(sys.modules)
import leaseboard.wsgi
from django.db import connections
from django.urls import get_resolver
from django.conf import settings
from leaseboard.api.lane import LANE_URLCONF
print(json.dumps({
    "open": [c.alias for c in connections.all() if c.connection is not None],
    "imported": sorted(m for m in set(sys.modules) - before if m.startswith("leaseboard.")),
    "cached": all("url_patterns" in get_resolver(u).__dict__
                  for u in (settings.ROOT_URLCONF, LANE_URLCONF)),
}))
"""


def test_the_wsgi_module_imports_both_url_maps_and_opens_no_connection(tmp_path):
    env = {**os.environ, "LEASEBOARD_DATA_DIR": str(tmp_path)}
    result = subprocess.run(
        [sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    seen = json.loads(result.stdout.strip().splitlines()[-1])
    assert seen["open"] == []
    assert seen["cached"] is True
    # The API's views and the dashboard's, which a first request used to import.
    assert {"leaseboard.api.v1", "leaseboard.api.urls", "leaseboard.dashboard.urls"} <= set(
        seen["imported"]
    )
