"""The live page's rows, written by the `live_rows` tag, are the markup the template loop
wrote (below, as it stood, with the pending takeover request added beside the tag), for
every combination of what a row shows: live or ended, picking or not, operator or not, on
hold, end reason, renewals, a gap past the threshold, a takeover request waiting (to the
requester or another, decidable by this person or not), and keys that need escaping and
quoting."""

from __future__ import annotations

import itertools
import re
import uuid
from dataclasses import replace
from pathlib import Path

import pytest
from django.template import engines
from django.urls import reverse

from leaseboard.core.models import Executor, Lease, Queue, WorkItem
from leaseboard.dashboard.selectors.rows import LeaseRow, PendingTakeover

# The loop templates/dashboard/_live.html ran before the tag, kept as the reference.
TEMPLATE_LOOP = (Path(__file__).parent / "live_rows_template_loop.html").read_text()

TAG = "{% load live_rows %}{% live_rows rows can_pick can user_id %}"

KEYS = ["job-1", "a b/<c>&\"d'", "zürich?x=1#frag", "100%/~:@!$&'()*+,;=", "//lead"]


def _normal(html: str) -> str:
    """Whitespace between tags is not markup."""
    return re.sub(r">\s+<", "><", html.strip())


def _row(i: int, key: str, certainty: str, *, held: bool, reason: str, renewals: int,
         gap_over: bool, ended_at: int | None) -> LeaseRow:  # fmt: skip
    queue = Queue(id=1, name="q<1>")
    # The hold is the item's; a live lease carries its copy, an ended one leaves it held.
    item = WorkItem(
        id=i,
        key=key,
        queue=queue,
        held_at_ms=1_700_000_000_000 if held else None,
        hold_reason='paged "ops" <now>' if held else "",
    )
    holder = Executor(id=7 + i, name=f"agent-{i}&<x>", kind="agent" if i % 2 else "human")
    lease = Lease(
        id=uuid.UUID(int=i + 1),
        work_item=item,
        holder=holder,
        epoch=3 + i,
        state=certainty if certainty in ("active", "jeopardy", "expired") else "released",
        renew_count=renewals,
        max_gap_ms=9_000 if gap_over else 1_500,
        jeopardy_after_ms=5_000,
        held_at_ms=1_700_000_000_000 if held else None,
        hold_reason='paged "ops" <now>' if held else "",
        end_reason=reason,
        ended_at_ms=ended_at,
        expires_at_ms=1_700_000_123_456,
        jeopardy_at_ms=1_700_000_100_000,
    )
    # Every third row's item has a takeover request waiting: by user 5 (the signed-in
    # person, in some cases) or 6, for the requester or for someone else.
    pending = (
        PendingTakeover(
            id=40 + i,
            requested_by=f"req<{i}>",
            requested_by_id=5 + i % 2,
            grantee=f"human-{i}&",
            to_requester=i % 4 == 0,
        )
        if i % 3 == 0
        else None
    )
    return LeaseRow(
        lease=lease, certainty=certainty, expires_in_ms=61_234, jeopardy_in_ms=0, pending=pending
    )


def _rows() -> list[LeaseRow]:
    rows = []
    combos = itertools.product(
        ("active", "jeopardy", "expired", "released", "revoked"),
        (False, True),  # on hold
        ("", "revoked: <operator> said so"),
        (0, 4),  # renewals
        (False, True),  # gap past the threshold
        (None, 1_700_000_200_000),  # ended at
    )
    for i, (certainty, held, reason, renewals, gap_over, ended_at) in enumerate(combos):
        rows.append(
            _row(
                i,
                KEYS[i % len(KEYS)],
                certainty,
                held=held,
                reason=reason,
                renewals=renewals,
                gap_over=gap_over,
                ended_at=ended_at,
            )  # fmt: skip
        )
    return rows


@pytest.mark.parametrize(
    ("can_pick", "takeover", "approve", "user_id"),
    [
        (True, True, True, 5),
        (True, False, True, 7),
        (False, False, False, 5),
        (False, True, True, None),
        (True, True, False, 6),
    ],
)
def test_the_rows_tag_writes_the_markup_the_template_loop_wrote(
    can_pick, takeover, approve, user_id
):
    django = engines["django"]
    rows = _rows()
    can = {"request_takeover": takeover, "approve_takeover": approve, "revoke": takeover}
    context = {"rows": rows, "can_pick": can_pick, "can": can, "user_id": user_id}
    expected = _normal(django.from_string(TEMPLATE_LOOP).render(context))
    got = _normal(django.from_string(TAG).render(context))
    assert got.count("<tr ") == len(rows) == 160
    assert got == expected
    waiting = [r for r in rows if r.live and r.pending]
    assert waiting and got.count("data-pending-takeover=") == len(waiting)
    decidable = [r for r in waiting if approve and r.pending.requested_by_id != user_id]
    assert got.count(">Decide<") == len(decidable)
    assert "req&lt;0&gt;" in got and "human-0&amp;" in got and "(the requester)" in got


def test_row_links_are_the_reversed_urls_of_keys_that_need_quoting():
    rows = [replace(_row(i, k, "active", held=False, reason="", renewals=1, gap_over=False,
                 ended_at=None), pending=None) for i, k in enumerate(KEYS)]  # fmt: skip
    html = (
        engines["django"]
        .from_string(TAG)
        .render(
            {
                "rows": rows,
                "can_pick": False,
                "can": {"request_takeover": True, "approve_takeover": False},
            }
        )
    )
    for key in KEYS:
        url = reverse("dashboard:work_item", args=[key]).replace("&", "&amp;")
        url = url.replace("'", "&#x27;")
        assert f'href="{url}"' in html, key
        takeover = reverse("takeovers:request", args=[key]).replace("&", "&amp;")
        assert f'href="{takeover.replace(chr(39), "&#x27;")}"' in html, key
    assert "&lt;c&gt;" in html and "<c>" not in html
