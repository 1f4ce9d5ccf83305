"""What a person typed into a form that posts and then redirects (the work item page's
hold, revoke and checkpoint forms; the standing page's acts; the inbox's note), kept across
the redirect after a refusal so the page shows it again instead of an empty form.

Kept in the session per form name ("hold:<lease id>", "assign:<intervention id>"), for
KEEP_SECONDS or until that form is sent successfully; not consumed by a render, because the
standing and inbox pages re-render themselves every few seconds. Nothing here is trusted:
it is only shown back, escaped, in the form it came from.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Any

from django.http import HttpRequest

SESSION_KEY = "lb_kept_input"
KEEP_SECONDS = 600
FIELD_MAX = 20_000  # characters per field kept (a checkpoint document is the largest)
FORMS_MAX = 20


def _store(request: HttpRequest) -> dict[str, Any]:
    store = request.session.get(SESSION_KEY) if hasattr(request, "session") else None
    return dict(store) if isinstance(store, dict) else {}


def keep_input(request: HttpRequest, form: str, fields: Iterable[str]) -> None:
    """Keep these posted fields of `form` (after a refusal, before redirecting)."""
    if not hasattr(request, "session"):
        return
    values = {f: request.POST.get(f, "")[:FIELD_MAX] for f in fields if f in request.POST}
    store = {k: v for k, v in _store(request).items() if _fresh(v)}
    store[form] = {"at": time.time(), "fields": values}
    newest = sorted(store.items(), key=lambda kv: kv[1]["at"])[-FORMS_MAX:]
    request.session[SESSION_KEY] = dict(newest)


def kept_input(request: HttpRequest, form: str) -> dict[str, str]:
    """The fields kept for `form`, if they are recent; else nothing."""
    entry = _store(request).get(form)
    if not _fresh(entry):
        return {}
    assert entry is not None
    fields = entry.get("fields")
    return {str(k): str(v) for k, v in fields.items()} if isinstance(fields, dict) else {}


def kept_inputs(request: HttpRequest) -> dict[str, dict[str, str]]:
    """Every recent form's kept fields, by form name (for a page with many forms)."""
    return {name: kept_input(request, name) for name in _store(request)}


def forget_input(request: HttpRequest, form: str) -> None:
    """The form was sent successfully: what it kept goes."""
    store = _store(request)
    if form in store:
        del store[form]
        request.session[SESSION_KEY] = store


def _fresh(entry: Any) -> bool:
    return (
        isinstance(entry, dict)
        and isinstance(entry.get("at"), (int, float))
        and time.time() - entry["at"] < KEEP_SECONDS
    )
