"""The live page's filters and sorts, read from the query string: certainty, queue,
holder, work key search, the sort (urgency by default, or work key, holder, time left;
"-" in front for descending), the keyset cursor and the page size. Bad values fall back to
the defaults, never an error: the page is read-only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from leaseboard.domain.text import filter_text

PAGE_SIZES = (10, 25, 50, 100, 200)
DEFAULT_PAGE_SIZE = 50
CERTAINTY_FILTERS = ("", "active", "jeopardy", "expired", "ended")
DEFAULT_SORT = "urgency"

# Sort name -> the lease fields of its order, most significant first; each order ends on
# (work key, epoch), unique per lease, so pages never skip or repeat a row. Every leading
# column has an index for live leases: the work item's key (with the one-live-lease-per-item
# index), the holder's name (with lease_holder_state_idx), due_at_ms (lease_due_idx: the next
# thing that happens to a lease, jeopardy while active, then expiry: its time left).
#
# "urgency" (the default) is computed: a rank (0 in jeopardy by time, 1 on hold, 2 waiting for
# an approver, 3 healthy), then the expiry for the first three ranks (soonest first: they
# need a person; in jeopardy, due_at_ms, which is the expiry once a sweep marked it), and
# the work key for the healthy rest (so rows do not move at every renewal); read as one
# part per rank (live_urgency.urgency_ranked), each over an index.
SORTS: dict[str, tuple[str, ...]] = {
    "urgency": ("urgency", "urgent_due", "work_item__key", "epoch"),
    "key": ("work_item__key", "epoch"),
    "holder": ("holder__name", "work_item__key", "epoch"),
    "due": ("due_at_ms", "work_item__key", "epoch"),
}
SORT_LABELS = {
    "urgency": "urgency",
    "key": "work key",
    "holder": "holder",
    "due": "time left",
}
SORT_CHOICES = [
    (prefix + name, label + suffix)
    for name, label in SORT_LABELS.items()
    for prefix, suffix in (("", ""), ("-", " (descending)"))
]


@dataclass(frozen=True)
class LiveFilters:
    certainty: str = ""  # "" = every live lease (and a section of those that just ended)
    queue: str = ""
    holder: str = ""
    q: str = ""  # work key search (substring)
    sort: str = DEFAULT_SORT  # a SORTS name, "-" in front for descending
    cursor: str = ""
    first_row: int = 1  # the number of the page's first row, for "rows 51–100 of 1000+"
    size: int = DEFAULT_PAGE_SIZE
    # Only these queues (a person scoped to queues, where other teams' work is hidden:
    # LEASEBOARD_HIDE_OTHER_QUEUES); None: every queue. Set by the view, never the query.
    queues: frozenset[str] | None = None

    @classmethod
    def from_query(cls, params: Any) -> LiveFilters:
        certainty = params.get("certainty", "")
        sort = params.get("sort", DEFAULT_SORT)
        try:
            size = int(params.get("size", DEFAULT_PAGE_SIZE))
        except (TypeError, ValueError):
            size = DEFAULT_PAGE_SIZE
        try:
            first_row = max(1, int(params.get("row", 1)))
        except (TypeError, ValueError):
            first_row = 1
        return cls(
            certainty=certainty if certainty in CERTAINTY_FILTERS else "",
            # A NUL would reach PostgreSQL as a query parameter and fail there; replaced, it
            # simply matches nothing (no stored name or key can hold one).
            queue=filter_text(params, "queue", 100),
            holder=filter_text(params, "holder", 150),
            q=filter_text(params, "q", 200),
            sort=sort if sort.lstrip("-") in SORTS else DEFAULT_SORT,
            cursor=params.get("cursor", "").strip()[:400],
            first_row=first_row,
            size=min(max(size, 1), max(PAGE_SIZES)),
        )

    @property
    def sort_name(self) -> str:
        return self.sort.lstrip("-")

    @property
    def descending(self) -> bool:
        return self.sort.startswith("-")

    # deliberate: each filter named one a line, as the audit page's filters.
    def query(self, **changes: Any) -> dict[str, str]:
        """Query-string parameters for these filters (with `changes`), empty ones omitted."""
        values = {
            "certainty": self.certainty,
            "queue": self.queue,
            "holder": self.holder,
            "q": self.q,
            "sort": "" if self.sort == DEFAULT_SORT else self.sort,
            "cursor": self.cursor,
            "row": "" if self.first_row == 1 else str(self.first_row),
            "size": "" if self.size == DEFAULT_PAGE_SIZE else str(self.size),
        }
        values.update({k: str(v) for k, v in changes.items()})
        return {k: v for k, v in values.items() if v}

    def sorted_by(self, name: str) -> dict[str, str]:
        """The query for sorting by `name`: ascending first, descending on a second click;
        back to the first page."""
        flip = "-" + name if self.sort == name else name
        return self.query(sort="" if flip == DEFAULT_SORT else flip, cursor="", row="")

    @property
    def sort_links(self) -> dict[str, dict[str, str]]:
        """Per sortable column: the query string that sorts by it, and its aria-sort."""
        out = {}
        for name in SORTS:
            current = self.sort_name == name
            direction = "descending" if self.descending else "ascending"
            out[name] = {
                "query": "?" + urlencode(self.sorted_by(name)),
                "aria": direction if current else "none",
            }
        return out

    @property
    def sort_label(self) -> str:
        return SORT_LABELS[self.sort_name] + (" (descending)" if self.descending else "")
