"""The package's version: its major is the HTTP API's version (v1), so leaseboard-client 1.x
speaks /api/v1 (tests/client/test_package.py holds the two together)."""

from __future__ import annotations

__version__ = "1.0.0"
API_VERSION = "1"
USER_AGENT = f"leaseboard-client/{__version__}"
