"""The authority matrix, generated from the rule table (leaseboard.domain.authority.RULES):
every act x every actor x the state of the lease the act is about, through the real entry
points — the API with bearer tokens, the dashboard with CSRF enforced. Three columns get
worlds of their own: the scope column (the agents' credentials narrowed to another queue,
for the scoped acts), the on-hold column (the work item held, for the acts refused on
hold: acquire under every lease state, so a hold outlives the lease) and the SELF party
(an admin acting on their own person, or deciding a change about themselves).

The test states what each actor is to the object (holder, successor, human with standing,
requester...) from the world it builds; the table alone says what follows. An allowed act
passes the authority: it succeeds, or stops at a later gate of another decision (the
lease is held, completion waits for reconciliation). A refused act answers the table's
code and writes nothing but the refusal record docs/design.md §6 asks for (an effect refused at
commit time is recorded; an approval refused because the lease ended is decided)."""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass, field, replace
from typing import Any

import pytest
from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.messages import get_messages
from django.db import connection, transaction
from django.test import Client

from leaseboard.core.authority import Actor
from leaseboard.core.clock import db_now_ms
from leaseboard.core.models import (
    Alert,
    AuditEntry,
    BulkRevoke,
    Checkpoint,
    Effect,
    EffectRule,
    Executor,
    GlobalPolicy,
    Lease,
    LeaseEvent,
    Quarantine,
    Queue,
    RoleScope,
    WorkItem,
)
from leaseboard.core.services import holds
from leaseboard.core.services.alerts import alerts_open
from leaseboard.core.services.effects import effect_propose
from leaseboard.core.services.executors import agent_create, agent_scope_change, token_cache_forget
from leaseboard.core.services.leases import (
    lease_acquire,
    lease_expire_if_due_locked,
    lease_release,
    lease_revoke,
)
from leaseboard.core.services.recipients import recipient_create
from leaseboard.core.services.supervision import agent_quarantine
from leaseboard.domain.authority import (
    CONFIGURATION_ACTS,
    READING_ACTS,
    RULES,
    Act,
    Party,
    decide,
)
from leaseboard.domain.certainty import Certainty
from leaseboard.policy.models import FourEyes, PolicyChange
from leaseboard.takeovers.models import Intervention, InterventionEvent, TakeoverRequest
from leaseboard.takeovers.services import (
    standing_hand_back,
    takeover_approve,
    takeover_break_glass,
    takeover_request,
)
from tests.builders import admit, age_fence, age_lease, effect_rules, grant_break_glass, make_user

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("fast_passwords")]

# The team column's worlds: whose roles are scoped, and to which queues.
SCOPED_HUMANS = {
    "operator_standing": "operator",
    "operator_no_standing": "operator",
    "approver": "approver",
    "manager": "manager",
}
TEAMS = {"other_team": ["payments"], "own_team": ["matrix", "payments"]}
ACTORS = (
    "holder_agent",
    "other_agent",
    "successor_agent",
    "operator_standing",
    "operator_no_standing",
    "approver",
    "manager",
    "admin",
    "no_role",
    "anonymous",
    "recipient",
)
AGENTS = {"holder_agent", "other_agent", "successor_agent"}
RECIPIENT = "recipient"  # a service receiving effects, by its recipient credential
STATES = ("active", "jeopardy", "expired", "released", "revoked")
ENDED = {"expired", "released", "revoked"}
# Acts under human standing: the object is the operator's own standing lease.
STANDING_ACTS = {Act.EXTEND_STANDING, Act.HAND_BACK, Act.ASSIGN}
# Acts with an entry point for agents (API) and one for humans (dashboard).
BOTH = {Act.PROPOSE_EFFECT, Act.COMPLETE, Act.RECONCILE, Act.CHECKPOINT}
# Recipients' acts: API entry points that authenticate recipient and agent credentials
# alike, so that the table (not a missing credential) refuses an agent.
RECIPIENT_ACTS = {Act.FILE_RECIPIENT_REPORT, Act.CHECK_FENCING}
API_ACTS = (
    {
        Act.ADMIT,
        Act.ACQUIRE,
        Act.RENEW,
        Act.RELEASE,
        Act.CHECKPOINT,
        Act.REPORT_OUTCOME,
    }
    | BOTH
    | RECIPIENT_ACTS
)
# Where an allowed act may stop at a later gate that is not the authority's.
LATER_GATES: dict[Act, set[str]] = {
    # The fence: E1 has no outcome, so an early end makes the next acquire wait.
    Act.ACQUIRE: {"work_leased", "lock_delay"},
    Act.COMPLETE: {"needs_reconciliation"},
}
_seq = itertools.count(1)


@dataclass
class World:
    """One work item I held by agent H (lease L1, epoch 1), with an authorized effect E1
    whose outcome is unknown, an effect E2 waiting for approval, and an open alert."""

    state: str
    actor: str
    act: Act
    users: dict[str, Any] = field(default_factory=dict)
    tokens: dict[str, str] = field(default_factory=dict)
    agents: dict[str, Any] = field(default_factory=dict)
    key: str = ""
    l1: Lease | None = None
    e1: Effect | None = None
    e2: Effect | None = None
    alert: Alert | None = None
    standing: Intervention | None = None  # the operator's standing on I (or on J)
    successor: Lease | None = None  # the successor agent's lease on I
    request: TakeoverRequest | None = None
    review: Intervention | None = None
    change: PolicyChange | None = None  # a rule change another admin proposed (four-eyes)
    variant: str = ""  # "" | "out_of_scope" | "held" | "self" | "other_team" | "own_team"

    @property
    def human_path(self) -> bool:
        return self.actor not in AGENTS and self.act in BOTH


def _approver() -> Actor:
    return Actor.human(make_user(f"boss-{next(_seq)}", "approver"))


def _take_over(key: str, user: Any) -> Intervention:
    req = takeover_request(
        work_key=key, actor=Actor.human(user), reason_category="stuck", reason_text="matrix"
    )
    return takeover_approve(request_pk=req.id, actor=_approver())


def _end(lease: Lease, state: str, holder_token_owner: Any = None) -> None:
    """Put a live lease into `state` (jeopardy and expired by moving its times)."""
    if state == "jeopardy":
        with connection.cursor() as cur:
            cur.execute(
                "UPDATE core_lease SET jeopardy_at_ms = %s, due_at_ms = %s WHERE id = %s",
                [db_now_ms() - 1, db_now_ms() - 1, str(lease.id)],
            )
    elif state == "expired":
        age_lease(lease.id, lease.ttl_ms + 1000 + settings.LEASEBOARD_FENCING_SKEW_MS)
        with transaction.atomic():
            locked = Lease.objects.select_for_update().select_related("holder").get(id=lease.id)
            assert lease_expire_if_due_locked(locked, db_now_ms())
    elif state == "released":
        if holder_token_owner is not None:
            lease_release(lease_id=lease.id, executor=holder_token_owner, epoch=lease.epoch)
        else:
            iv = Intervention.objects.get(lease=lease)
            user = iv.grantee.user
            standing_hand_back(
                intervention_pk=iv.id, actor=Actor.human(user), lease_id=lease.id, epoch=lease.epoch
            )
    elif state == "revoked":
        lease_revoke(
            lease_id=lease.id,
            actor=_approver(),
            reason_category="other",
            reason_text="matrix: revoked",
        )


def build(state: str, actor: str, act: Act, variant: str = "") -> World:
    w = _build(state, actor, act, variant)
    if variant in TEAMS:
        # Once the world stands, each supervising person's role is held for named queues
        # only: another team's (the work is in "matrix"), or their own and another.
        for name, role in SCOPED_HUMANS.items():
            RoleScope.objects.create(user=w.users[name], role=role, queues=TEAMS[variant])
    return w


def _build(state: str, actor: str, act: Act, variant: str = "") -> World:
    n = next(_seq)
    w = World(state=state, actor=actor, act=act, key=f"mx-{n}", variant=variant)
    queue, _ = Queue.objects.get_or_create(
        name="matrix", defaults={"agent_acquire_needs_reconciliation": False}
    )
    if not queue.policy_version:
        effect_rules(queue, ("needs.approval", "require_approval"))
    w.users = {
        "operator_standing": make_user(f"os{n}", "operator"),
        "operator_no_standing": make_user(f"on{n}", "operator"),
        "approver": make_user(f"ap{n}", "approver"),
        "manager": make_user(f"mg{n}", "manager"),
        "admin": make_user(f"ad{n}", "admin"),
        "no_role": make_user(
            f"nr{n}",
        ),
    }
    grant_break_glass(w.users["operator_standing"])
    agents = w.agents
    for name in AGENTS:
        agents[name], w.tokens[name] = agent_create(
            name=f"{name}-{n}", queues=["matrix"], actor_name="matrix"
        )
    w.tokens[RECIPIENT] = recipient_create(name=f"recipient-{n}")[1]
    holder = agents["holder_agent"]
    admit(w.key, queue="matrix")
    w.l1 = lease_acquire(work_key=w.key, executor=holder).lease
    fx = {"lease_id": w.l1.id, "executor": holder, "epoch": 1, "target": "order-1"}
    w.e1 = effect_propose(kind="payment.refund", idempotency_key=f"e1-{n}", **fx)
    w.e2 = effect_propose(kind="needs.approval", idempotency_key=f"e2-{n}", **fx)
    item = WorkItem.objects.get(key=w.key)
    w.alert = Alert.objects.get(
        id=alerts_open(
            [
                Alert(
                    kind="jeopardy",
                    dedupe_key=f"matrix:{n}",
                    work_item=item,
                    message="m",
                    opened_at_ms=db_now_ms(),
                )
            ]
        )[0]
    )
    if act is Act.RELEASE_HOLD or variant == "held":
        holds.lease_hold(
            lease_id=w.l1.id, actor=_approver(), reason_category="stuck", reason_text="matrix"
        )
    op = w.users["operator_standing"]
    if act in STANDING_ACTS or (w.human_path and act is not Act.RECONCILE):
        # The object is the operator's standing on I, put into the state.
        w.standing = _take_over(w.key, op)  # (an approved takeover lifts a hold)
        if variant == "held":  # held again, now with the person's standing on it
            holds.lease_hold(
                lease_id=w.standing.lease_id,
                actor=_approver(),
                reason_category="stuck",
                reason_text="matrix",
            )
        _end(w.standing.lease, state)
        return w
    _end(w.l1, state, holder_token_owner=holder)
    held = act is Act.RELEASE_HOLD or variant == "held"
    if state in ENDED and actor == "successor_agent" and not held:  # nobody acquires it held
        age_fence(w.key, 60_000)  # E1's token has died since: the successor may acquire
        w.successor = lease_acquire(work_key=w.key, executor=agents["successor_agent"]).lease
    elif state in ENDED and actor == "operator_standing" and act is Act.RECONCILE:
        w.standing = _take_over(w.key, op)
    if act in {Act.APPROVE_TAKEOVER, Act.REJECT_TAKEOVER}:
        w.request = takeover_request(
            work_key=w.key,
            actor=Actor.human(w.users["operator_no_standing"]),
            reason_category="stuck",
            reason_text="matrix",
        )
    if act is Act.LIFT_QUARANTINE:
        agent_quarantine(
            executor_id=holder.id,
            actor=_approver(),
            reason_category="misbehaving",
            reason_text="matrix: quarantined",
        )
    if act is Act.APPROVE_POLICY_CHANGE and variant == "self":
        # A grant to the actor, proposed by another admin: never decided by its subject.
        subject = w.users.get(actor)
        w.change = PolicyChange.objects.create(
            kind=PolicyChange.Kind.PERSON,
            subject=subject,
            payload={"add_roles": ["approver"], "break_glass": False, "active": False},
            summary="matrix: about the actor",
            requested_by=make_user(f"proposer{n}", "admin"),
            requested_by_name=f"proposer{n}",
        )
    elif act is Act.APPROVE_POLICY_CHANGE:
        queue.refresh_from_db()
        w.change = PolicyChange.objects.create(
            queue=queue,
            base_version=queue.policy_version,
            rules=[{"name": "wipes", "kind": "db.wipe", "target": "*", "decision": "deny"}],
            default_decision="allow",
            summary="matrix",
            requested_by=make_user(f"proposer{n}", "admin"),
            requested_by_name=f"proposer{n}",
        )
    if act is Act.CHANGE_FOUR_EYES:
        make_user(f"second{n}", "admin")  # four-eyes needs two admins to be turned on
    if variant == "out_of_scope":
        # Every agent's credential narrowed to another queue after the world was built.
        Queue.objects.get_or_create(name="elsewhere")
        for agent in agents.values():
            agent_scope_change(name=agent.name, queues=["elsewhere"], actor_name="matrix")
        token_cache_forget()
    if act is Act.REVIEW_INTERVENTION:
        other = f"mx-bg-{n}"
        admit(other, queue="matrix")
        w.review = takeover_break_glass(
            work_key=other, actor=Actor.human(op), reason_category="incident", reason_text="m"
        )
    return w


def parties(w: World) -> frozenset[Party]:
    """What the actor is to the object of the act, in this world."""
    if w.actor == RECIPIENT:
        return frozenset({Party.RECIPIENT})
    if w.variant == "self" and w.actor not in AGENTS and w.actor != "anonymous":
        base = parties(replace(w, variant=""))
        return base | {Party.SELF}
    p: set[Party] = {Party.AGENT} if w.actor in AGENTS else {Party.HUMAN}
    roles = {
        "operator_standing": {Party.OPERATOR, Party.BREAK_GLASS},
        "operator_no_standing": {Party.OPERATOR},
        "approver": {Party.APPROVER},
        "manager": {Party.MANAGER},
        "admin": {Party.ADMIN},
    }
    p |= roles.get(w.actor, set())
    # Roles held for another team's queues count for nothing here (reading a page is
    # asked of any queue); with them goes standing, acted on in the operator role.
    other_team = w.variant == "other_team" and w.actor in SCOPED_HUMANS
    if other_team and w.act not in READING_ACTS:
        p -= {Party.OPERATOR, Party.APPROVER, Party.MANAGER, Party.BREAK_GLASS}
    on_standing = w.act in STANDING_ACTS or (w.human_path and w.act is not Act.RECONCILE)
    if w.actor == "holder_agent" and not on_standing:
        p.add(Party.HOLDER)
        if w.act in {Act.REPORT_OUTCOME, Act.APPROVE_EFFECT, Act.REJECT_EFFECT, Act.RECONCILE}:
            p.add(Party.PROPOSER)
    if w.actor == "operator_standing" and (on_standing or w.standing is not None):
        if not (other_team and w.act not in READING_ACTS):
            p.add(Party.STANDING)
    if w.actor == "successor_agent" and w.successor is not None and w.act is Act.RECONCILE:
        p.add(Party.SUCCESSOR)
    if w.actor == "operator_no_standing" and w.request is not None:
        p.add(Party.REQUESTER)
    if w.actor == "operator_standing" and w.review is not None:
        p.add(Party.REQUESTER)
    return frozenset(p)


def object_certainty(w: World) -> Certainty:
    lease = (
        w.standing.lease
        if (w.act in STANDING_ACTS or (w.human_path and w.act is not Act.RECONCILE))
        else w.l1
    )
    assert lease is not None
    lease.refresh_from_db()
    now = db_now_ms()
    if lease.state not in ("active", "jeopardy"):
        return Certainty(lease.state)
    if now >= lease.expires_at_ms:
        return Certainty.EXPIRED
    return Certainty.JEOPARDY if now >= lease.jeopardy_at_ms else Certainty.ACTIVE


# -- entry points ------------------------------------------------------------------------


@dataclass
class Answer:
    status: int
    code: str | None  # None: done


def _api(w: World, path: str, body: dict[str, Any] | None) -> Answer:
    import json

    client = Client()
    headers = {}
    if w.actor in AGENTS or w.actor == RECIPIENT:
        headers["HTTP_AUTHORIZATION"] = f"Bearer {w.tokens[w.actor]}"
    response = client.post(
        path, data=json.dumps(body or {}), content_type="application/json", **headers
    )
    payload = json.loads(response.content or b"{}")
    return Answer(response.status_code, None if response.status_code < 300 else payload["code"])


def _web(w: World, path: str, data: dict[str, Any] | None) -> Answer:
    """POST `data` with the CSRF token, or GET `path` when `data` is None (a reading act)."""
    client = Client(enforce_csrf_checks=True)
    user = w.users.get(w.actor)
    if user is not None:
        client.force_login(user)
    if data is None:
        response = client.get(path)
    else:
        client.get("/login/")  # the CSRF cookie, as a browser would have it from any form
        token = client.cookies["csrftoken"].value
        response = client.post(path, {**data, "csrfmiddlewaretoken": token})
    if response.status_code == 302 and response["Location"].startswith("/login/"):
        return Answer(302, "unauthenticated")
    if response.status_code == 403:
        return Answer(403, "forbidden")
    assert response.status_code in (200, 302), (path, response.status_code)
    errors = [m.message for m in get_messages(response.wsgi_request) if m.level_tag == "error"]
    if response.status_code == 200 and response.context and response.context.get("form"):
        errors += [str(e) for e in response.context["form"].non_field_errors()]
    if not errors:
        return Answer(response.status_code, None)
    # The stable code is on the message's details line (web.refusals.with_code).
    found = re.search(r"code: <code>([a-z_]+)</code></small>$", str(errors[0]))
    assert found, errors[0]
    return Answer(response.status_code, found.group(1))


def perform(w: World) -> Answer:
    act, l1, e1, e2 = w.act, w.l1, w.e1, w.e2
    assert l1 is not None and e1 is not None and e2 is not None
    lease_body = {"epoch": l1.epoch}
    if act is Act.ADMIT:
        return _api(w, "/api/v1/work-items", {"key": f"{w.key}-new", "queue": "matrix"})
    if act is Act.ACQUIRE:
        return _api(w, f"/api/v1/work-items/{w.key}/lease", {})
    if act is Act.FILE_RECIPIENT_REPORT:
        body = {"work_key": w.key, "epoch": l1.epoch, "high_water": 2, "reason": "stale_epoch"}
        return _api(w, "/api/v1/recipient-reports", body)
    if act is Act.CHECK_FENCING:
        return _api(w, "/api/v1/fencing/check", {"fencing_token": e1.fencing_token})
    if act is Act.RENEW:
        return _api(w, f"/api/v1/leases/{l1.id}/renew", lease_body)
    if act is Act.RELEASE:
        return _api(w, f"/api/v1/leases/{l1.id}/release", lease_body)
    if act is Act.CHECKPOINT and not w.human_path:
        return _api(w, f"/api/v1/leases/{l1.id}/checkpoints", {**lease_body, "data": {"a": 1}})
    if act is Act.REPORT_OUTCOME:
        return _api(w, f"/api/v1/effects/{e1.id}/outcome", {"outcome": "applied"})
    if act is Act.PROPOSE_EFFECT and not w.human_path:
        body = {"lease_id": str(l1.id), **lease_body, "kind": "payment.refund"}
        return _api(w, "/api/v1/effects", {**body, "target": "t", "idempotency_key": "new-1"})
    if act is Act.COMPLETE and not w.human_path:
        return _api(
            w, f"/api/v1/work-items/{w.key}/complete", {"lease_id": str(l1.id), **lease_body}
        )
    if act is Act.RECONCILE and not w.human_path:
        own = w.successor or l1
        body = {"resolution": "confirmed", "note": "n", "lease_id": str(own.id), "epoch": own.epoch}
        return _api(w, f"/api/v1/effects/{e1.id}/reconcile", body)
    if act is Act.RECONCILE:
        return _web(
            w, f"/takeovers/effects/{e1.id}/reconcile", {"resolution": "confirmed", "note": "n"}
        )
    if w.standing is not None and (act in STANDING_ACTS or w.human_path):
        iv = w.standing
        base = {"lease_id": str(iv.lease_id), "epoch": iv.epoch, "note": "n"}
        if act is Act.CHECKPOINT:  # by lease: the work item page's form
            path = f"/takeovers/standing/{iv.lease_id}/checkpoint"
            return _web(w, path, {**base, "data": '{"a": 1}'})
        path, extra = {
            Act.EXTEND_STANDING: ("extend", {"minutes": 120, "reason": "more time"}),
            Act.HAND_BACK: ("hand-back", {}),
            Act.ASSIGN: ("assign", {"agent": f"other_agent-{w.key[3:]}"}),
            Act.PROPOSE_EFFECT: ("effects", {"kind": "k", "target": "t", "outcome": "applied"}),
            Act.COMPLETE: ("complete", {}),
        }[act]
        return _web(w, f"/takeovers/interventions/{iv.id}/{path}", {**base, **extra})
    if act is Act.APPROVE_EFFECT:
        return _web(w, f"/takeovers/effects/{e2.id}/approve", {"note": "ok"})
    if act is Act.REJECT_EFFECT:
        return _web(w, f"/takeovers/effects/{e2.id}/reject", {"note": "no"})
    if act is Act.REVOKE:
        reason = {"reason_category": "misbehaving", "reason_text": "sends duplicates"}
        return _web(w, f"/leases/{l1.id}/revoke", reason)
    if act is Act.QUARANTINE:
        reason = {"reason_category": "misbehaving", "reason_text": "sends duplicates"}
        return _web(w, f"/executors/{w.agents['holder_agent'].id}/quarantine", reason)
    if act is Act.LIFT_QUARANTINE:
        path = f"/executors/{w.agents['holder_agent'].id}/lift-quarantine"
        return _web(w, path, {"note": "fixed and redeployed"})
    if act is Act.HOLD:
        reason = {"reason_category": "misbehaving", "reason_text": "sends duplicates"}
        return _web(w, f"/leases/{l1.id}/hold", reason)
    if act is Act.RELEASE_HOLD:
        return _web(w, f"/leases/{l1.id}/release-hold", {"note": "looked fine"})
    if act in (Act.REQUEST_TAKEOVER, Act.BREAK_GLASS):
        form = {"reason_category": "stuck", "reason_text": "r", "standing_minutes": 30}
        if act is Act.BREAK_GLASS:
            form["break_glass"] = "on"
        return _web(w, f"/takeovers/request/{w.key}", form)
    if act in (Act.APPROVE_TAKEOVER, Act.REJECT_TAKEOVER):
        assert w.request is not None
        decision = "approve" if act is Act.APPROVE_TAKEOVER else "reject"
        return _web(w, f"/takeovers/requests/{w.request.id}/{decision}", {"note": "n"})
    if act is Act.ACKNOWLEDGE_ALERT:
        assert w.alert is not None
        return _web(w, f"/alerts/{w.alert.id}/acknowledge", {"note": "on it"})
    if act is Act.REVIEW_INTERVENTION:
        assert w.review is not None
        return _web(w, f"/takeovers/interventions/{w.review.id}/review", {"note": "fine"})
    if act in CONFIGURATION_ACTS:
        return _configure(w)
    if act in READ_PAGES:
        return _web(w, READ_PAGES[act], None)
    raise AssertionError(f"no entry point for {act}")


# The reading acts' pages.
READ_PAGES = {Act.WATCH: "/", Act.READ_AUDIT: "/audit/", Act.EXPLAIN_POLICY: "/settings/explain"}
QUEUE_FORM = {"overflow": "wait", "capacity": "7", "windows_tz": "UTC", "reconciliation_gate": ""}


def _configure(w: World) -> Answer:
    """The settings pages: each configuration act's one entry point."""
    n = w.key[3:]
    if w.act is Act.CONFIGURE_QUEUE:
        return _web(w, "/settings/queues/matrix/", QUEUE_FORM)
    if w.act is Act.CHANGE_RULE:
        rule = {"name": f"r{n}", "kind": "db.wipe", "target": "*", "decision": "deny"}
        return _web(w, "/settings/queues/matrix/rules/new", rule)
    if w.act is Act.APPROVE_POLICY_CHANGE:
        assert w.change is not None
        return _web(w, f"/settings/changes/{w.change.id}/approve", {"note": "ok"})
    if w.act is Act.MANAGE_USERS and w.variant == "self":
        user = w.users.get(w.actor)
        name = user.get_username() if user is not None else f"nobody{n}"
        roles = {"roles": ["admin", "approver"], "break_glass": "on", "active": "on"}
        return _web(w, f"/settings/people/{name}/", roles)
    if w.act is Act.MANAGE_USERS:
        return _web(w, "/settings/people/", {"username": f"new{n}", "roles": "operator"})
    if w.act is Act.MANAGE_CREDENTIALS:
        return _web(w, "/settings/credentials/", {"name": f"new-agent-{n}", "queues": "matrix"})
    if w.act is Act.CHANGE_FOUR_EYES:
        return _web(w, "/settings/four-eyes", {"on": "on"})
    assert w.act is Act.MANAGE_WEBHOOKS
    return _web(w, "/settings/queues/matrix/notify", {"webhooks": "https://hooks.example.com/x"})


def fingerprint() -> dict[str, Any]:
    return {
        "lease": sorted(
            Lease.objects.values_list(
                "id", "state", "expires_at_ms", "renew_count", "epoch", "held_at_ms"
            )
        ),
        "work_item": sorted(WorkItem.objects.values_list("id", "epoch", "status")),
        "effect": sorted(
            Effect.objects.values_list("id", "decision", "outcome", "resolution"), key=str
        ),
        "alert": sorted(Alert.objects.values_list("id", "resolved_at_ms", "acknowledged_at_ms")),
        "request": sorted(TakeoverRequest.objects.values_list("id", "status")),
        "intervention": sorted(Intervention.objects.values_list("id", "outcome", "reviewed_at_ms")),
        "quarantine": sorted(Quarantine.objects.values_list("id", "lifted_at_ms")),
        "counts": [
            m.objects.count()
            for m in (LeaseEvent, Checkpoint, AuditEntry, InterventionEvent, BulkRevoke)
        ],
        # Configuration: queues, rules, four-eyes proposals, people, agent credentials.
        "queue": sorted(
            Queue.objects.values_list("name", "capacity", "policy_version", "notify"), key=str
        ),
        "rules": sorted(EffectRule.objects.values_list("queue_id", "name", "decision")),
        "policy_change": sorted(PolicyChange.objects.values_list("id", "status")),
        "people": sorted(get_user_model().objects.values_list("username", "is_active")),
        "groups": get_user_model().groups.through.objects.count(),
        "executor": sorted(
            Executor.objects.values_list("name", "token_hash", "is_active", "queues"), key=str
        ),
        "holds": sorted(WorkItem.objects.values_list("id", "held_at_ms")),
        "four_eyes": list(FourEyes.objects.values_list("on", flat=True)),
        "global_rules": list(GlobalPolicy.objects.values_list("version", "default_decision")),
        "perms": get_user_model().user_permissions.through.objects.count(),
    }


def without_refusal_records(
    before: dict[str, Any], after: dict[str, Any], w: World
) -> dict[str, Any]:
    """Remove what docs/design.md §5 and §6 ask a refusal to record: a refused proposal (and
    its stale-effect alert), or a waiting approval decided as refused (with its audit
    entry)."""
    after = dict(after)
    old_effects = {row[0] for row in before["effect"]}
    after["effect"] = [
        row for row in after["effect"] if row[0] in old_effects or row[1] != "refused"
    ]
    old_alerts = {row[0] for row in before["alert"]}
    after["alert"] = [row for row in after["alert"] if row[0] in old_alerts]
    if w.act is Act.APPROVE_EFFECT and w.e2 is not None:
        was = {row[0]: row for row in before["effect"]}
        after["effect"] = [
            was[row[0]] if row[0] == w.e2.id and row[1] == "refused" else row
            for row in after["effect"]
        ]
        counts = list(after["counts"])
        counts[2] = min(counts[2], before["counts"][2])
        after["counts"] = counts
    return after


# A configuration act (and admission) is about no lease: one lease state is enough.
ONE_STATE = CONFIGURATION_ACTS | READING_ACTS | {Act.ADMIT}
SCOPED = {act for act, rule in RULES.items() if rule.scoped}
HELD = {act for act, rule in RULES.items() if not rule.held}
SELF_ACTS = {act for act, rule in RULES.items() if Party.SELF in rule.deny}
CASES = [
    (act, actor, state, "")
    for act in Act
    for actor in ACTORS
    for state in (STATES[:1] if act in ONE_STATE else STATES)
]
# The scope column: the agents' credentials no longer name the work's queue.
CASES += [
    (act, actor, state, "out_of_scope")
    for act in sorted(SCOPED)
    for actor in sorted(AGENTS)
    for state in (STATES[:1] if act in ONE_STATE else STATES)
]
# The on-hold column: the work item held. Acquire under every lease state (the hold
# outlives the lease it was put on through); the others need an active lease anyway.
CASES += [
    (act, actor, state, "held")
    for act in sorted(HELD)
    for actor in ACTORS
    for state in (STATES if act is Act.ACQUIRE else STATES[:1])
]
# The team column: the supervising people's roles held for named queues only — another
# team's ("operator of payments x item in deploys"), or their own team's among others —
# for every act a role or standing decides, through the same entry points.
TEAM_ACTS = sorted(
    act
    for act, rule in RULES.items()
    if act not in CONFIGURATION_ACTS
    and rule.allow
    & {Party.OPERATOR, Party.APPROVER, Party.MANAGER, Party.STANDING, Party.BREAK_GLASS}
)
CASES += [
    (act, actor, "expired" if act is Act.RECONCILE else "active", variant)
    for variant in sorted(TEAMS)
    for act in TEAM_ACTS
    for actor in sorted(SCOPED_HUMANS)
]
# SELF: an admin changing their own person, or deciding a change about themselves.
CASES += [(act, actor, STATES[0], "self") for act in sorted(SELF_ACTS) for actor in ACTORS]


def test_every_act_and_column_of_the_table_is_in_the_matrix() -> None:
    assert {act for act, _, _, _ in CASES} == set(RULES)
    assert SCOPED == {Act.ADMIT, Act.ACQUIRE, Act.PROPOSE_EFFECT}
    assert Act.ACQUIRE in HELD and {Act.MANAGE_USERS, Act.APPROVE_POLICY_CHANGE} <= SELF_ACTS


@pytest.mark.parametrize(
    ("act", "actor", "state", "variant"), CASES, ids=lambda v: str(v) or "plain"
)
def test_the_authority_matrix(act: Act, actor: str, state: str, variant: str) -> None:
    w = build(state, actor, act, variant)
    api = act in API_ACTS and not w.human_path
    credentialed = (
        (api and actor in AGENTS)
        or (api and actor == RECIPIENT and act in RECIPIENT_ACTS)
        or (not api and actor not in AGENTS | {RECIPIENT, "anonymous"})
    )
    if not credentialed:
        expected: str | None = "unauthenticated"  # no credential for this entry point
    elif act is Act.HAND_BACK and state == "released" and actor == "operator_standing":
        expected = None  # the world released it by handing back: a retry, answered as done
    else:
        expected = decide(
            act,
            parties=parties(w),
            certainty=object_certainty(w),
            in_scope=variant != "out_of_scope",
            on_hold=variant == "held",
        ).code
    before = fingerprint()
    answer = perform(w)
    after = fingerprint()

    if expected is None:
        allowed = {None} | LATER_GATES.get(act, set())
        assert answer.code in allowed, (answer, parties(w))
        return
    assert answer.code == expected, (answer, sorted(parties(w)))
    assert without_refusal_records(before, after, w) == before
