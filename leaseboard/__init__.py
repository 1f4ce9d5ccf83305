"""Leaseboard: renewable, fenced leases on work for autonomous agents."""

from leaseboard.celery import app as celery_app

__all__ = ("celery_app",)
