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
