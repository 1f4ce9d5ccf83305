"""The live page's rows (`{% load live_rows %}{% live_rows page.rows can_pick can %}`),
written here rather than by a template loop: the page lists up to 200 rows and polls every
2 s, and the template engine spent about 9 ms of a 50-row search on them (per row: two
includes, three URL reversals, some 40 variable lookups). The markup is the one the
template wrote; tests/dashboard/templatetags/test_live_rows.py renders the same rows both
ways and compares. Every value is escaped; URLs are reversed once per call and quoted as
`reverse()` quotes them."""

from __future__ import annotations

from collections.abc import Sequence
from html import escape
from typing import Any
from urllib.parse import quote

from django import template
from django.urls import reverse
from django.utils.safestring import SafeString, mark_safe

from leaseboard.dashboard.selectors.rows import LeaseRow, LiveLease, PendingTakeover
from leaseboard.web.templatetags.web import certainty_badge, ms_ago, ms_duration

register = template.Library()

# As django.urls.resolvers quotes a reversed path (RFC 3986 sub-delimiters, "/~:@" kept).
_URL_SAFE = "!$&'()*+,;=/~:@"


def _prefix(name: str, placeholder: str) -> str:
    url = reverse(name, args=[placeholder])
    return url[: -len(placeholder)]


@register.simple_tag
def live_rows(
    rows: Sequence[LeaseRow[LiveLease]], can_pick: bool, can: Any, user_id: int | None = None
) -> SafeString:
    """`can`: what the person may do (leaseboard.web.roles.Can, or a mapping of act names
    to booleans); `user_id`: the person's, so a requester is not offered to decide on
    their own takeover request."""
    work_url = _prefix("dashboard:work_item", "k")
    executor_url = _prefix("dashboard:executor", "0")
    takeover_url = _prefix("takeovers:request", "k")
    decide_url = reverse("takeovers:pending")
    scoped = bool(getattr(can, "scoped", False))
    out: list[str] = []
    for row in rows:
        # What the person may do with this row's work: in its queue, for a scoped person.
        acts = can.in_queue(row.lease.work_item.queue.name) if scoped else can
        takeover = acts["request_takeover"]
        mine = not scoped or takeover or acts["revoke"]
        pending = row.pending
        decide = (
            pending is not None
            and pending.requested_by_id != user_id
            and bool(acts["approve_takeover"])
        )
        out.append(
            _row(
                row,
                can_pick,
                work_url,
                executor_url,
                takeover_url if takeover else "",
                "" if mine else _VIEW_ONLY,
                decide_url if decide else "",
            )
        )
    return mark_safe("".join(out))  # every value in it is escaped


# Marks a row whose work is in a queue the person's roles do not cover.
_VIEW_ONLY = ' <small class="view-only" data-view-only>another team\'s: view only</small>'


def _row(
    row: LeaseRow[LiveLease],
    can_pick: bool,
    work_url: str,
    executor_url: str,
    takeover_url: str,
    mark: str = "",
    decide_url: str = "",
) -> str:
    """One row of the live page: its `<tr>` with the pick box, work key, holder, certainty
    and hold, time left or ended, epoch, queue, renewals, largest gap and actions.

    One piece: the deliberate fast path the module docstring describes, the row written as
    one run of f-strings (10,000 rows a render, docs/benchmarks.md "The dashboard at fleet
    scale"). The URL prefixes, reversed once a call, come in as plain arguments (no object
    is built a row), so the signature is alike in shape with other long ones
    (lease_revoke_audited_locked, standing_complete)."""
    lease = row.lease
    item = lease.work_item
    holder = lease.holder
    live = row.live
    lid = escape(str(lease.id))
    key = escape(item.key)
    key_path = escape(quote(item.key, safe=_URL_SAFE))
    parts = [
        f'\n      <tr id="lease-{lid}" data-certainty="{escape(row.certainty)}"',
        "" if live else ' class="ended"',
        ">\n        ",
    ]
    if can_pick:
        parts.append('<td data-label="Select">')
        if live and not mark:
            parts.append(
                f'<input type="checkbox" name="key" value="{key}" form="bulk-pick" class="pick"'
                f' id="pick-{lid}"><label for="pick-{lid}" class="visually-hidden">'
                f"select {key}</label>"
            )
        parts.append("</td>")
    parts.append(
        f'\n        <td data-label="Work key" class="key"><a href="{work_url}{key_path}">{key}</a>'
        f'</td>\n        <td data-label="Holder"><a href="{executor_url}{lease.holder_id}">'
        f'{escape(holder.name)}</a> <small class="kind">{escape(holder.kind)}</small></td>'
        f'\n        <td data-label="Certainty">{certainty_badge(row.certainty)}'
    )
    if lease.held_at_ms and live:
        reason = escape(lease.hold_reason)
        parts.append(
            f' <span class="badge on-hold" title="{reason}" data-on-hold>on hold</span>'
            f' <small class="reason">{reason}</small>'
        )
    elif item.held_at_ms and not live:
        # The hold is the work item's: ended, its lease leaves it held and unacquirable.
        reason = escape(item.hold_reason)
        parts.append(
            f' <span class="badge on-hold" title="{reason}" data-on-hold>item on hold</span>'
            f' <small class="reason">{reason}</small>'
        )
    if lease.end_reason:
        parts.append(f' <small class="reason">{escape(lease.end_reason)}</small>')
    parts.append("</td>\n        ")
    if live:
        parts.append(
            f'<td data-label="Time left"><span class="countdown" data-expires-in-ms='
            f'"{row.expires_in_ms}">{ms_duration(row.expires_in_ms)}</span></td>'
        )
    else:
        ended = ms_ago(lease.ended_at_ms or lease.expires_at_ms)
        parts.append(f'<td data-label="Ended">{ended}</td>')
    parts.append(
        f'\n        <td data-label="Epoch">{lease.epoch}</td>'
        f'\n        <td data-label="Queue">{escape(item.queue.name)}</td>'
        '\n        <td data-label="Renewals">'
    )
    if lease.renew_count:
        parts.append(f"{lease.renew_count}</td>")
    else:
        parts.append('<span class="muted">none yet</span></td>')
    gap_over = row.gap_over
    parts.append('\n        <td data-label="Largest gap"' + (' class="over">' if gap_over else ">"))
    if lease.renew_count:
        parts.append(ms_duration(lease.max_gap_ms))
        if gap_over:
            parts.append(
                ' <span class="over-tag">▲ past the '
                f"{ms_duration(lease.jeopardy_after_ms)} jeopardy threshold</span>"
            )
    else:
        parts.append('<span class="muted">—</span>')
    parts.append('</td>\n        <td data-label="Actions" class="actions">')
    pending = row.pending
    if live and pending is not None:
        parts.append(_pending(pending, decide_url))
    elif live and takeover_url:
        parts.append(
            f'<a class="takeover-link" href="{takeover_url}{key_path}">Request takeover'
            f'<span class="visually-hidden"> of {key}</span></a>'
        )
    parts.append(mark)
    parts.append("</td>\n      </tr>")
    return "".join(parts)


def _pending(pending: PendingTakeover, decide_url: str) -> str:
    """The takeover request waiting on a live row's work item, in place of "Request
    takeover" (there can be only one); as templates/takeovers/_pending.html says it on the
    item's page, without the time (the fragment is cached until the rows change)."""
    to = " (the requester)" if pending.to_requester else ""
    out = (
        f'<span class="pending-takeover" data-pending-takeover="{pending.id}">Takeover'
        f" #{pending.id} is waiting for an approver: {escape(pending.requested_by)} asked;"
        f" standing would go to <b>{escape(pending.grantee)}</b>{to}.</span>"
    )
    if decide_url:
        out += (
            f' <a href="{decide_url}#request-{pending.id}">Decide'
            f'<span class="visually-hidden"> on takeover #{pending.id}</span></a>'
        )
    return out
