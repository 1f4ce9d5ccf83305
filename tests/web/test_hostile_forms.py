"""Every form the dashboard renders, submitted with hostile strings (issue 33, part 8): the
pages of a populated world are read as each kind of person sees them, every <form> on them
is collected with the fields the page rendered, and hypothesis posts each with one or all
of its fields replaced by NULs, invalid UTF-8, line breaks and header injections, markup,
template syntax, format strings, huge numbers, deep JSON, a 100 kB value. No answer is a
5xx. Bounded: FORM_EXAMPLES submissions per form."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote_plus

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from leaseboard.core.models import Alert
from leaseboard.domain.policy import RuleSpec
from leaseboard.sweeps.services import sweep_run
from tests.builders import (
    age_leases,
    effect_rules,
    effect_under,
    leased_item,
    make_user,
    request_for,
)
from tests.policy.views.test_settings_round_trip import Forms

pytestmark = [pytest.mark.postgres, pytest.mark.slow, pytest.mark.django_db]

FORM_EXAMPLES = 12
HOSTILE: list[str | bytes] = [
    "\x00",
    "a\x00b",
    b"\xed\xa0\x80",  # a lone surrogate, as the bytes a client could send
    b"\xff\xfe",  # not UTF-8 at all
    "o2\r\nBcc: attacker@evil.example",
    "<script>alert(1)</script>",
    "{{ 7*7 }}{% debug %}",
    "%s%n%x",
    "' OR 1=1 --",
    "../../etc/passwd",
    "http://[::1",
    "-1",
    "99999999999999999999999999",
    "1e309",
    "NaN",
    "[" * 5000,
    "\u202e\ufeff\u200b",
    "١٢٣",
    " ",
    "",
    "x" * 100_000,
]
PAGES = {
    "supervisor": [
        "/",
        "/alerts/",
        "/work/{key}",
        "/audit/",
        "/fleet/",
        "/executors/{executor}",
        "/takeovers/request/{key}",
        "/takeovers/bulk",
        "/takeovers/standing/",
        "/takeovers/pending/",
        "/takeovers/effects/{effect}",
        "/takeovers/interventions/",
    ],
    "admin": [
        "/settings/",
        "/settings/queues/new",
        "/settings/queues/default/",
        "/settings/queues/default/rules/new",
        "/settings/queues/default/rules/refunds/",
        "/settings/queues/default/notify",
        "/settings/explain",
        "/settings/changes/",
        "/settings/people/",
        "/settings/credentials/",
        "/settings/history/",
        "/settings/deliveries/",
    ],
}


@pytest.fixture
def world(agent, recipient):  # type: ignore[no-untyped-def]
    executor, _ = agent("forms-agent")
    recipient("forms-recipient")
    lease = leased_item(executor, key="forms-1")
    effect_rules("default", RuleSpec("refunds", "payment.*", decision="require_approval", note="n"))
    effect = effect_under(
        lease,
        executor,
        "forms-effect",
        kind="payment.refund",
        target="order-1",
        payload={"amount": 1},
    )
    other = leased_item(executor, key="forms-2")
    age_leases(other.jeopardy_after_ms + 1, lease_ids=[other.id])
    sweep_run()
    assert Alert.objects.exists()
    supervisor = make_user("sam-forms", "operator", "approver", "manager")
    request_for("forms-2", make_user("olga-forms", "operator"))
    return {
        "key": "forms-1",
        "executor": executor.pk,
        "effect": effect.id,
        "users": {"supervisor": supervisor, "admin": make_user("ada-forms", "admin")},
    }


def _forms(client: Any, pages: list[str], world: dict[str, Any]) -> list[dict[str, Any]]:
    found: dict[tuple[str, str, tuple[str, ...]], dict[str, Any]] = {}
    for template in pages:
        page = template.format(**world)
        response = client.get(page)
        assert response.status_code == 200, (page, response.status_code)
        parser = Forms()
        parser.feed(response.content.decode())
        for form in parser.forms:
            form["page"] = page
            form["action"] = form["action"] or page
            names = tuple(sorted({name for name, _ in form["fields"]}))
            found.setdefault((form["action"], form.get("method", ""), names), form)
    return list(found.values())


def _encoded(fields: list[tuple[str, str | bytes]]) -> bytes:
    parts = []
    for name, value in fields:
        raw = value if isinstance(value, bytes) else value.encode("utf-8", "surrogatepass")
        parts.append(f"{quote_plus(name)}={quote_plus(raw)}".encode("ascii"))
    return b"&".join(parts)


@pytest.mark.parametrize("who", ["supervisor", "admin"])
def test_no_dashboard_form_answers_5xx_to_hostile_strings(client, world, who):
    client.force_login(world["users"][who])
    forms = _forms(client, PAGES[who], world)
    assert len(forms) >= 8, [f["action"] for f in forms]
    seen: dict[str, set[int]] = {}
    for form in forms:
        fields: list[tuple[str, str]] = [
            (n, v) for n, v in form["fields"] if n != "csrfmiddlewaretoken"
        ]
        if fields:
            _fuzz(client, form["action"], form["method"], fields, seen)
    print(who, {action: sorted(s) for action, s in sorted(seen.items())})
    assert len(seen) >= 8


def _fuzz(
    client: Any,
    action: str,
    method: str,
    fields: list[tuple[str, str]],
    seen: dict[str, set[int]],
) -> None:
    @settings(
        max_examples=FORM_EXAMPLES,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(
        which=st.integers(min_value=-1, max_value=len(fields) - 1),
        value=st.sampled_from(HOSTILE),
    )
    def submit(which: int, value: str | bytes) -> None:
        sent = [(n, value if which in (-1, i) else v) for i, (n, v) in enumerate(fields)]
        if method == "get":  # a filter: the hostile values travel in the query string
            response = client.get(f"{action}?{_encoded(sent).decode('latin-1')}")
        else:
            response = client.post(
                action, data=_encoded(sent), content_type="application/x-www-form-urlencoded"
            )
        seen.setdefault(f"{method.upper()} {action}", set()).add(response.status_code)
        shown = [(n, v[:80]) for n, v in sent]
        assert response.status_code < 500, (action, shown, response.content[:2000])

    submit()
