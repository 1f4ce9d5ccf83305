"""Schemathesis' other phases (issue 33, part 8), in-process through Django's WSGI app with
the same rules as tests/api/test_fuzz.py (no 5xx, every answer one the schema declares,
every refusal a problem with a known code):

- coverage: the cases schemathesis derives from the schema's own boundaries (every
  required field missing, a null for each field, each type swapped, bodies that are not
  objects...), a bounded, deterministic sample per operation, each also sent with its ids
  swapped for the real ones of a lease the agent holds. This phase found the null
  checkpoint (500) and the list body that acquired a lease (201).
- stateful: schemathesis' state machine following the document's OpenAPI links (admit ->
  acquire -> renew, release, checkpoint, propose -> outcome) with the ids each answer
  returns, so the sequences reach the lease and effect services with real standing.

Bounded for CI: COVERAGE_PER_OPERATION cases per operation, STATEFUL_EXAMPLES sequences
of at most STATEFUL_STEPS calls (docs/deployment.md says what the module costs).
"""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, settings
from hypothesis.errors import FlakyStrategyDefinition
from schemathesis import GenerationMode

from tests.api.test_fuzz import (
    _assert_well_formed,
    _grounded,
    _load_schema,
    _no_rate_limits,
    _operations,
    _wsgi_in_test_transaction,
    world,
)

pytestmark = [pytest.mark.postgres, pytest.mark.slow, pytest.mark.django_db(transaction=True)]
__all__ = ["_no_rate_limits", "_wsgi_in_test_transaction", "world"]  # fixtures, used by name

COVERAGE_PER_OPERATION = 60
STATEFUL_EXAMPLES = 30
STATEFUL_STEPS = 8


def _spread(cases: list[Any], n: int) -> list[Any]:
    """n cases taken evenly across the list: every kind of boundary, not only the first."""
    if len(cases) <= n:
        return cases
    step = len(cases) / n
    return [cases[int(i * step)] for i in range(n)]


def test_the_coverage_phase_never_meets_a_5xx(
    _wsgi_in_test_transaction: None, world: dict[str, Any]
) -> None:
    schema = _load_schema()
    auth = {"Authorization": f"Bearer {world['token']}"}
    sent = 0
    statuses: dict[str, set[int]] = {}
    for operation in _operations(schema):
        generated = schema.iter_coverage_cases(
            operation,
            generation_modes=[GenerationMode.POSITIVE, GenerationMode.NEGATIVE],
            generation_config=schema.config.generation_for(operation=operation),
        )
        for case in _spread(list(itertools.islice(generated, 2000)), COVERAGE_PER_OPERATION):
            seen = statuses.setdefault(operation.label, set())
            case.headers = {**(case.headers or {}), **auth}
            response = case.call()
            seen.add(response.status_code)
            _assert_well_formed(case, response, changed=True)
            sent += 1
            if _grounded(case, world):
                response = case.call()
                seen.add(response.status_code)
                _assert_well_formed(case, response, changed=True)
                sent += 1
    print(f"coverage: {sent} requests", {op: sorted(s) for op, s in sorted(statuses.items())})
    assert sent > 300
    # Boundaries reach past validation: some grounded cases are accepted.
    assert any(s & {200, 201, 202} for s in statuses.values())


def test_stateful_sequences_follow_the_links_with_the_returned_ids(
    _wsgi_in_test_transaction: None, world: dict[str, Any]
) -> None:
    schema = _load_schema()
    auth = {"Authorization": f"Bearer {world['token']}"}
    seen: dict[str, set[int]] = {}
    base = schema.as_state_machine()

    scenarios = [0]

    class Machine(base):  # type: ignore[misc,valid-type]
        def setup(self) -> None:
            scenarios[0] += 1

        def get_call_kwargs(self, case: Any) -> dict[str, Any]:
            case.headers = {**(case.headers or {}), **auth}
            return {}

        def validate_response(self, response: Any, case: Any, **kwargs: Any) -> None:
            seen.setdefault(case.operation.label, set()).add(response.status_code)
            _assert_well_formed(case, response, changed=True)

    # The server keeps state between sequences (a key admitted once answers 200 the next
    # time), so Hypothesis may find a replayed prefix drawing differently and stop with
    # FlakyStrategyDefinition. As schemathesis' own runner does, that ends a run without a
    # failure (a real failure would raise something else); the next run continues.
    for _ in range(4):
        try:
            Machine.run(
                settings=settings(
                    max_examples=STATEFUL_EXAMPLES,
                    stateful_step_count=STATEFUL_STEPS,
                    deadline=None,
                    database=None,
                    phases=[Phase.generate],
                    suppress_health_check=list(HealthCheck),
                )
            )
        except FlakyStrategyDefinition:
            pass
        if scenarios[0] >= STATEFUL_EXAMPLES:
            break
    print(f"stateful: {scenarios[0]} sequences", {op: sorted(s) for op, s in sorted(seen.items())})
    assert scenarios[0] >= STATEFUL_EXAMPLES
    # The links were followed with real ids: a grant was renewed or an effect proposed.
    followed = seen.get("POST /api/v1/leases/{lease_id}/renew", set()) | seen.get(
        "POST /api/v1/effects", set()
    )
    assert followed & {200, 201, 202}, seen
