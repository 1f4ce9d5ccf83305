"""Celery tasks of the core app: the periodic audit checkpoint (beat, settings
CELERY_BEAT_SCHEDULE["audit-checkpoint"]). Thin: the service does the work."""

from __future__ import annotations

import logging

from celery import shared_task

from leaseboard.core.services.audit import audit_checkpoint as audit_checkpoint_write

log = logging.getLogger(__name__)


# Celery ships no type information: its decorator is untyped.
@shared_task(  # type: ignore[untyped-decorator]
    name="leaseboard.core.tasks.audit_checkpoint", acks_late=False, ignore_result=True
)
def audit_checkpoint() -> str:
    """Sign the audit chain's head into the checkpoint store; a broken chain is never
    signed and is logged as an error on every tick until someone looks."""
    result = audit_checkpoint_write()
    for line in result.problems:
        log.error("audit checkpoint: %s", line)
    if result.written is not None:
        return f"checkpoint seq {result.written.seq}"
    return result.note
