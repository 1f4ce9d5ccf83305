"""Leaseboard's settings plus the bench-only raw-SQL view (bench/urls.py); nothing else."""

from leaseboard.settings import *  # noqa: F403

ROOT_URLCONF = "bench.urls"
