"""A test's own HTTP endpoint on a real socket: a server run on a daemon thread."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


@contextmanager
def served(server: Any) -> Iterator[str]:
    """Serve `server` (an http.server or wsgiref server bound to 127.0.0.1) on a daemon
    thread until the block ends; yields its base URL, http://127.0.0.1:<port>."""
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
