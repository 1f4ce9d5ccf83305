"""What the takeover workflow adds to other apps' pages: the request waiting on a work item
(`{% pending_takeover item as pending %}`, one query), so the dashboard shows it without
importing this app."""

from __future__ import annotations

from typing import Any

from django import template

from leaseboard.takeovers.selectors.requests import pending_request

register = template.Library()


@register.simple_tag
def pending_takeover(item: Any) -> Any:
    return pending_request(item.id) if item is not None else None


@register.simple_tag(takes_context=True)
def kept_field(context: Any, form: str, pk: Any, field: str) -> str:
    """What was typed into `field` of the form "<form>:<pk>" before it was refused (the
    view puts leaseboard.web.kept's `kept_inputs` in the context as `kept`), or ""."""
    kept = context.get("kept") or {}
    return str((kept.get(f"{form}:{pk}") or {}).get(field, ""))
