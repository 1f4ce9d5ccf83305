"""gunicorn settings for the harness (`-c bench/gunicorn_ready.py`): each worker, once it
has loaded the application and can take a request, touches a file named after its pid in
$BENCH_READY_DIR. bench/common.start_gunicorn returns only when every worker has, so no
load starts while workers are still importing Django: gunicorn binds its port before its
workers boot, and requests sent in that gap wait in the listen backlog for seconds."""

import os
from pathlib import Path
from typing import Any


def post_worker_init(worker: Any) -> None:
    ready = os.environ.get("BENCH_READY_DIR")
    if ready:
        try:
            Path(ready, str(worker.pid)).touch()
        except OSError:
            pass  # a worker replacing another after the harness stopped watching
