"""The authority's rule table, decided without a database: who, then epoch, then state."""

from __future__ import annotations

import pytest

from leaseboard.domain.authority import ENDED, LIVE, RULES, Act, Party, decide
from leaseboard.domain.certainty import Certainty

P = Party
HOLDER = frozenset({P.AGENT, P.HOLDER})
OTHER_AGENT = frozenset({P.AGENT})
SUCCESSOR = frozenset({P.AGENT, P.SUCCESSOR})
STANDING = frozenset({P.HUMAN, P.OPERATOR, P.STANDING})
OPERATOR = frozenset({P.HUMAN, P.OPERATOR})
APPROVER = frozenset({P.HUMAN, P.APPROVER})
MANAGER = frozenset({P.HUMAN, P.MANAGER})
NOBODY = frozenset({P.HUMAN})
A, J = Certainty.ACTIVE, Certainty.JEOPARDY
X, R, V = Certainty.EXPIRED, Certainty.RELEASED, Certainty.REVOKED


def test_every_act_has_exactly_one_rule() -> None:
    assert set(RULES) == set(Act)


# deliberate: a table of cases, one row a case (data, alike in shape only).
@pytest.mark.parametrize(
    ("act", "parties", "certainty", "code"),
    [
        # Agents on their own leases.
        (Act.RENEW, HOLDER, A, None),
        (Act.RENEW, HOLDER, J, None),
        (Act.RENEW, HOLDER, X, "lease_expired"),
        (Act.RENEW, HOLDER, V, "lease_revoked"),
        (Act.RENEW, OTHER_AGENT, A, "not_holder"),
        (Act.RELEASE, HOLDER, R, None),  # a retried release is answered as done
        (Act.RELEASE, HOLDER, X, "lease_expired"),
        (Act.CHECKPOINT, HOLDER, J, None),
        (Act.PROPOSE_EFFECT, HOLDER, A, None),
        (Act.PROPOSE_EFFECT, HOLDER, J, "in_jeopardy"),
        (Act.PROPOSE_EFFECT, HOLDER, R, "lease_released"),
        (Act.PROPOSE_EFFECT, OTHER_AGENT, A, "not_holder"),
        (Act.PROPOSE_EFFECT, STANDING, A, None),
        (Act.PROPOSE_EFFECT, OPERATOR, A, "forbidden"),
        (Act.COMPLETE, HOLDER, J, "in_jeopardy"),
        (Act.ACQUIRE, OTHER_AGENT, None, None),
        (Act.ACQUIRE, OPERATOR, None, "forbidden"),
        # The truth about an attempt is always welcome.
        (Act.REPORT_OUTCOME, frozenset({P.AGENT, P.PROPOSER}), X, None),
        (Act.REPORT_OUTCOME, OTHER_AGENT, A, "not_holder"),
        # Reconciliation: never while the effect's lease is live; then successor or standing.
        (Act.RECONCILE, OPERATOR, A, "forbidden"),
        (Act.RECONCILE, APPROVER, X, "forbidden"),
        (Act.RECONCILE, STANDING, A, "forbidden"),
        (Act.RECONCILE, STANDING, X, None),
        (Act.RECONCILE, SUCCESSOR, V, None),
        (Act.RECONCILE, SUCCESSOR, J, "forbidden"),
        (Act.RECONCILE, HOLDER, A, "forbidden"),
        # Approvers, never on their own effect, only while the lease is active.
        (Act.APPROVE_EFFECT, APPROVER, A, None),
        (Act.APPROVE_EFFECT, APPROVER, J, "in_jeopardy"),
        (Act.APPROVE_EFFECT, APPROVER, X, "lease_expired"),
        (Act.APPROVE_EFFECT, APPROVER | {P.PROPOSER}, A, "forbidden"),
        (Act.APPROVE_EFFECT, OPERATOR, A, "forbidden"),
        (Act.REJECT_EFFECT, APPROVER, X, None),
        # Standing acts.
        (Act.EXTEND_STANDING, STANDING, A, None),
        (Act.EXTEND_STANDING, OPERATOR, A, "forbidden"),
        (Act.HAND_BACK, STANDING, X, "lease_expired"),
        (Act.ASSIGN, MANAGER, A, "forbidden"),
        # Supervision.
        (Act.REVOKE, OPERATOR, A, None),
        (Act.REVOKE, APPROVER, J, None),
        (Act.REVOKE, OPERATOR, R, "lease_released"),
        (Act.REVOKE, MANAGER, A, "forbidden"),
        (Act.REVOKE, HOLDER, A, "forbidden"),
        (Act.REQUEST_TAKEOVER, OPERATOR, None, None),
        (Act.REQUEST_TAKEOVER, APPROVER, None, "forbidden"),
        (Act.APPROVE_TAKEOVER, APPROVER, None, None),
        (Act.APPROVE_TAKEOVER, APPROVER | {P.REQUESTER}, None, "forbidden"),
        (Act.BREAK_GLASS, OPERATOR, None, "forbidden"),
        (Act.BREAK_GLASS, OPERATOR | {P.BREAK_GLASS}, None, None),
        (Act.ACKNOWLEDGE_ALERT, OPERATOR, None, None),
        (Act.ACKNOWLEDGE_ALERT, MANAGER, None, "forbidden"),
        (Act.REVIEW_INTERVENTION, MANAGER, None, None),
        (Act.REVIEW_INTERVENTION, MANAGER | {P.REQUESTER}, None, "forbidden"),
        (Act.REVIEW_INTERVENTION, NOBODY, None, "forbidden"),
    ],
)
def test_the_table_answers(
    act: Act, parties: frozenset[Party], certainty: Certainty | None, code: str | None
) -> None:
    assert decide(act, parties=parties, certainty=certainty).code == code


@pytest.mark.parametrize("act", [a for a in Act if RULES[a].epoch.value != "none"])
def test_a_stale_epoch_is_refused_before_the_lease_state_is_looked_at(act: Act) -> None:
    allowed = next(iter(RULES[act].allow))
    parties = frozenset({allowed, P.AGENT if allowed is P.HOLDER else P.HUMAN})
    for certainty in LIVE | ENDED:
        verdict = decide(act, parties=parties, certainty=certainty, epoch_matches=False)
        assert verdict.code == "stale_epoch", (act, certainty)


@pytest.mark.parametrize("act", list(Act))
def test_someone_who_is_nothing_to_the_work_item_may_do_nothing_but_admit_and_acquire(
    act: Act,
) -> None:
    human = decide(act, parties=NOBODY, certainty=Certainty.ACTIVE)
    assert human.code == "forbidden"
    agent = decide(act, parties=OTHER_AGENT, certainty=Certainty.ACTIVE)
    assert agent.allowed == (act in {Act.ADMIT, Act.ACQUIRE})


SCOPED = {Act.ADMIT, Act.ACQUIRE, Act.PROPOSE_EFFECT}


def test_the_scope_column_is_admission_acquire_and_effects() -> None:
    assert {act for act, rule in RULES.items() if rule.scoped} == SCOPED


@pytest.mark.parametrize("act", sorted(SCOPED))
def test_outside_its_queues_a_credential_is_refused_whatever_else_is_true(act: Act) -> None:
    parties = HOLDER if act is Act.PROPOSE_EFFECT else OTHER_AGENT
    assert decide(act, parties=parties, certainty=A).allowed
    # The queue scope comes right after who: no epoch, state or hold is told to it.
    for certainty, epoch_matches, on_hold in [(A, True, False), (X, False, True)]:
        verdict = decide(
            act,
            parties=parties,
            certainty=certainty,
            epoch_matches=epoch_matches,
            on_hold=on_hold,
            in_scope=False,
        )
        assert verdict.code == "queue_not_allowed"
    # Who comes first: a human is forbidden, never told about queues.
    assert decide(act, parties=OPERATOR, in_scope=False).code in {"forbidden", "not_holder"}


@pytest.mark.parametrize("act", [a for a in Act if not RULES[a].scoped])
def test_acts_without_a_scope_ignore_it(act: Act) -> None:
    allowed = next(iter(RULES[act].allow))
    parties = frozenset({allowed, P.AGENT if allowed in {P.HOLDER, P.AGENT} else P.HUMAN})
    inside = decide(act, parties=parties, certainty=A)
    outside = decide(act, parties=parties, certainty=A, in_scope=False)
    assert inside == outside


def test_a_held_work_item_is_acquired_by_no_agent_while_its_holder_keeps_renewing() -> None:
    assert decide(Act.ACQUIRE, parties=OTHER_AGENT, on_hold=True).code == "on_hold"
    assert decide(Act.ACQUIRE, parties=OTHER_AGENT, on_hold=False).allowed
    assert decide(Act.RENEW, parties=HOLDER, certainty=A, on_hold=True).allowed
    assert decide(Act.RELEASE, parties=HOLDER, certainty=A, on_hold=True).allowed
    assert decide(Act.PROPOSE_EFFECT, parties=HOLDER, certainty=A, on_hold=True).code == "on_hold"
    # The hold outlives the lease: it is released whatever became of the lease.
    for certainty in [A, J, X, R, V, None]:
        assert decide(Act.RELEASE_HOLD, parties=OPERATOR, certainty=certainty, on_hold=True).allowed


ADMIN = frozenset({P.HUMAN, P.ADMIN})


def test_nobody_changes_their_own_roles_nor_decides_a_change_about_themselves() -> None:
    assert decide(Act.MANAGE_USERS, parties=ADMIN).allowed
    assert decide(Act.MANAGE_USERS, parties=ADMIN | {P.SELF}).code == "forbidden"
    assert decide(Act.APPROVE_POLICY_CHANGE, parties=ADMIN).allowed
    assert decide(Act.APPROVE_POLICY_CHANGE, parties=ADMIN | {P.REQUESTER}).code == "forbidden"
    assert decide(Act.APPROVE_POLICY_CHANGE, parties=ADMIN | {P.SELF}).code == "forbidden"
    assert decide(Act.CHANGE_FOUR_EYES, parties=ADMIN).allowed
    assert decide(Act.CHANGE_FOUR_EYES, parties=APPROVER).code == "forbidden"


def test_the_documented_table_is_the_table() -> None:
    from pathlib import Path

    from leaseboard.domain.authority import rules_table

    doc = (Path(__file__).resolve().parents[2] / "docs" / "authority.md").read_text()
    documented = doc.split("<!-- table:start -->\n", 1)[1].split("<!-- table:end -->", 1)[0]
    assert documented == rules_table(), "docs/authority.md is out of date: regenerate its table"
