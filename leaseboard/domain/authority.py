"""Who may do what, now: one table of rules for every act by every executor (docs/design.md §9).

Pure: the caller (leaseboard.core.authority) gathers the facts — which parties the actor
is to the object (holder, successor, human with standing, a role, the requester), the
certainty of the lease the act is about, whether the presented epoch is current — and
`decide` answers from RULES alone. Checks run in one fixed order, so the same situation
always gets the same code: who you are, then whether your credential may use the work's
queue, then your epoch, then the lease's state, then an operator's hold.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from leaseboard.domain.certainty import Certainty


class Act(StrEnum):
    ADMIT = "admit"
    ACQUIRE = "acquire"
    RENEW = "renew"
    RELEASE = "release"
    CHECKPOINT = "checkpoint"
    PROPOSE_EFFECT = "propose_effect"
    APPROVE_EFFECT = "approve_effect"
    REJECT_EFFECT = "reject_effect"
    REPORT_OUTCOME = "report_outcome"
    RECONCILE = "reconcile"
    COMPLETE = "complete"
    EXTEND_STANDING = "extend_standing"
    REVOKE = "revoke"
    QUARANTINE = "quarantine"
    LIFT_QUARANTINE = "lift_quarantine"
    HOLD = "hold"
    RELEASE_HOLD = "release_hold"
    HAND_BACK = "hand_back"
    ASSIGN = "assign"
    REQUEST_TAKEOVER = "request_takeover"
    APPROVE_TAKEOVER = "approve_takeover"
    REJECT_TAKEOVER = "reject_takeover"
    BREAK_GLASS = "break_glass"
    ACKNOWLEDGE_ALERT = "acknowledge_alert"
    REVIEW_INTERVENTION = "review_intervention"
    # Recipients' acts (docs/design.md §5: recipients are principals of their own).
    FILE_RECIPIENT_REPORT = "file_recipient_report"
    CHECK_FENCING = "check_fencing"
    # Configuration (the settings pages, `manage.py config apply`): about no work item.
    CONFIGURE_QUEUE = "configure_queue"
    CHANGE_RULE = "change_rule"
    APPROVE_POLICY_CHANGE = "approve_policy_change"
    MANAGE_USERS = "manage_users"
    MANAGE_CREDENTIALS = "manage_credentials"
    MANAGE_WEBHOOKS = "manage_webhooks"
    CHANGE_FOUR_EYES = "change_four_eyes"
    # Reading: the pages that show what the acts above are about. Gated like any act, so
    # no page names a role (docs/design.md §9).
    WATCH = "watch"
    READ_AUDIT = "read_audit"
    EXPLAIN_POLICY = "explain_policy"


# Acts about configuration, not about a lease: the lease's state never enters them.
CONFIGURATION_ACTS = frozenset(
    {
        Act.CONFIGURE_QUEUE,
        Act.CHANGE_RULE,
        Act.APPROVE_POLICY_CHANGE,
        Act.MANAGE_USERS,
        Act.MANAGE_CREDENTIALS,
        Act.MANAGE_WEBHOOKS,
        Act.CHANGE_FOUR_EYES,
    }
)

# Acts that only read: about no lease, and writing nothing.
READING_ACTS = frozenset({Act.WATCH, Act.READ_AUDIT, Act.EXPLAIN_POLICY})


class Role(StrEnum):
    """Human roles (auth groups of the same names). An admin configures (queues, rules,
    people, credentials) and supervises nothing: the roles are kept apart."""

    OPERATOR = "operator"
    APPROVER = "approver"
    MANAGER = "manager"
    ADMIN = "admin"


# The one list of the role names (each the auth group of its name): for choices, lookups
# and messages. Nothing else spells the roles out.
ROLE_NAMES = tuple(role.value for role in Role)

# Roles that may be held for named queues only (a team's operators, its approver of
# refunds...). The admin configures the whole installation and is never queue-scoped.
SCOPABLE_ROLES = frozenset({Role.OPERATOR, Role.APPROVER, Role.MANAGER})


def roles_for_queue(
    roles: frozenset[Role], scopes: dict[Role, frozenset[str]], queue: str | None
) -> frozenset[Role]:
    """The roles that count for an act on work in `queue`: a role held for every queue
    (absent from `scopes`) always; a role held for named queues only where `queue` is one
    of them. `queue` None (the act's queue unknown) counts only the roles held everywhere:
    a scoped role never decides an act whose queue nobody named."""
    return frozenset(
        role
        for role in roles
        if role not in scopes or (queue is not None and queue in scopes[role])
    )


class Party(StrEnum):
    """What the actor is to the object of an act. An actor is usually several at once."""

    AGENT = "agent"  # any authenticated agent
    HUMAN = "human"  # any signed-in human
    HOLDER = "holder"  # an agent holding the lease the act is about
    SUCCESSOR = "successor"  # an agent holding the item's live lease at a later epoch
    STANDING = "standing"  # an operator holding live human standing on the work item
    PROPOSER = "proposer"  # the executor that proposed the effect the act is about
    REQUESTER = "requester"  # the human who asked for (or broke the glass on) the object
    SELF = "self"  # the person the act is about: their own roles, a change granting them
    OPERATOR = "operator"
    APPROVER = "approver"
    MANAGER = "manager"
    ADMIN = "admin"
    BREAK_GLASS = "break_glass"  # holds the break-glass permission
    RECIPIENT = "recipient"  # a service receiving effects, by its recipient credential


class Epoch(StrEnum):
    """Which epoch a presented epoch must equal."""

    NONE = "none"  # the act carries no epoch
    LEASE = "lease"  # the lease's own (renew, release: the lease's fate explains the rest)
    CURRENT = "current"  # the lease's and the work item's current epoch


# Lease certainties, plus None for "no lease" (a work item nobody holds).
LIVE: frozenset[Certainty | None] = frozenset({Certainty.ACTIVE, Certainty.JEOPARDY})
ENDED: frozenset[Certainty | None] = frozenset(
    {Certainty.EXPIRED, Certainty.RELEASED, Certainty.REVOKED}
)
ANY: frozenset[Certainty | None] = LIVE | ENDED | {None}
ACTIVE_ONLY: frozenset[Certainty | None] = frozenset({Certainty.ACTIVE})


@dataclass(frozen=True)
class Rule:
    allow: frozenset[Party]  # the actor must be at least one of these
    states: frozenset[Certainty | None] = ANY  # certainty of the lease the act is about
    epoch: Epoch = Epoch.NONE
    deny: frozenset[Party] = frozenset()  # ...and none of these (four eyes)
    refuse: str = "forbidden"  # the code when the actor is not allowed
    why: str = ""  # said in the refusal's detail
    held: bool = True  # allowed while an operator holds the work item (False: on_hold)
    # Confined to the queues the actor's credential may use (an agent's queue scope):
    # elsewhere refused queue_not_allowed, whoever the actor is to the object.
    scoped: bool = False


def _rule(
    allow: set[Party],
    states: frozenset[Certainty | None] = ANY,
    epoch: Epoch = Epoch.NONE,
    deny: set[Party] | None = None,
    refuse: str = "forbidden",
    why: str = "",
    held: bool = True,
    scoped: bool = False,
) -> Rule:
    return Rule(frozenset(allow), states, epoch, frozenset(deny or ()), refuse, why, held, scoped)


P = Party
RULES: dict[Act, Rule] = {
    # Agents admit work, and acquire it, only in the queues their credential may use: the
    # queue decides which rules bind the work, so the agent must not pick its way around.
    Act.ADMIT: _rule({P.AGENT}, why="only agents admit work", scoped=True),
    # Agents, on their own leases (the API). Humans never hold an agent's lease. A hold
    # belongs to the work item: released or expired, the item is granted again only
    # through an operator's decision (the hold lifted, or a takeover).
    Act.ACQUIRE: _rule(
        {P.AGENT}, why="only agents acquire; humans take over", held=False, scoped=True
    ),
    Act.RENEW: _rule({P.HOLDER}, LIVE, Epoch.LEASE, refuse="not_holder"),
    # A released lease answers a retried release as done (idempotent compare-and-set).
    Act.RELEASE: _rule({P.HOLDER}, LIVE | {Certainty.RELEASED}, Epoch.LEASE, refuse="not_holder"),
    # A person holding standing after a takeover checkpoints the work as an agent would,
    # under the standing's epoch: the next holder resumes from it.
    Act.CHECKPOINT: _rule({P.HOLDER, P.STANDING}, LIVE, Epoch.CURRENT, refuse="not_holder"),
    # Quiescence, not optimism: new effects only under an active lease.
    # An operator's hold quiesces the lease the same way: renewals go on, effects wait.
    Act.PROPOSE_EFFECT: _rule(
        {P.HOLDER, P.STANDING},
        ACTIVE_ONLY,
        Epoch.CURRENT,
        refuse="not_holder",
        held=False,
        scoped=True,
    ),
    Act.COMPLETE: _rule({P.HOLDER, P.STANDING}, ACTIVE_ONLY, Epoch.CURRENT, refuse="not_holder"),
    # The truth about an attempt is always welcome, whatever became of the lease.
    Act.REPORT_OUTCOME: _rule(
        {P.PROPOSER}, refuse="not_holder", why="only the executor that proposed an effect"
    ),
    # Nobody reconciles an effect of a lease that is still live: that outcome is its
    # holder's to report. Then the successor, or a human under their own standing.
    Act.RECONCILE: _rule(
        {P.SUCCESSOR, P.STANDING},
        ENDED | {None},
        why="only the current holder of a later epoch, or a human with standing on this item",
    ),
    # Approvers decide require_approval effects; never their own.
    Act.APPROVE_EFFECT: _rule(
        {P.APPROVER}, ACTIVE_ONLY, Epoch.CURRENT, deny={P.PROPOSER}, held=False
    ),
    Act.REJECT_EFFECT: _rule({P.APPROVER}, deny={P.PROPOSER}),
    # Human standing, by the human who holds it.
    Act.EXTEND_STANDING: _rule({P.STANDING}, LIVE, Epoch.CURRENT),
    Act.HAND_BACK: _rule({P.STANDING}, LIVE, Epoch.CURRENT),
    Act.ASSIGN: _rule({P.STANDING}, LIVE, Epoch.CURRENT),
    # Supervision. Revoking one lease (or many, one by one) and quarantining an agent are
    # containment: whoever watches the fleet may stop the harm at once, without a second
    # person, because both only return work to the pool and grant nobody standing.
    Act.REVOKE: _rule({P.OPERATOR, P.APPROVER}, LIVE),
    Act.QUARANTINE: _rule({P.OPERATOR, P.APPROVER}, why="an operator or an approver"),
    # The way back gives standing again to an agent someone judged unsafe: that is for the
    # people who decide standing (approvers), as for a takeover.
    Act.LIFT_QUARANTINE: _rule({P.APPROVER}, why="an approver lifts a quarantine"),
    # A hold stops new effects and leaves the holder its lease (renewals, checkpoints,
    # outcomes go on): containment that takes nothing away, so whoever may revoke may hold,
    # and release the hold. Escalating it is a takeover request (REQUEST_TAKEOVER). It is
    # put on through a live lease and stays on the work item after that lease ends.
    Act.HOLD: _rule({P.OPERATOR, P.APPROVER}, LIVE),
    Act.RELEASE_HOLD: _rule({P.OPERATOR, P.APPROVER}),
    Act.REQUEST_TAKEOVER: _rule({P.OPERATOR}),
    Act.APPROVE_TAKEOVER: _rule(
        {P.APPROVER}, deny={P.REQUESTER}, why="an approver, never the requester"
    ),
    Act.REJECT_TAKEOVER: _rule(
        {P.APPROVER}, deny={P.REQUESTER}, why="an approver, never the requester"
    ),
    Act.BREAK_GLASS: _rule({P.BREAK_GLASS}, why="needs the break_glass permission"),
    Act.ACKNOWLEDGE_ALERT: _rule({P.OPERATOR}),
    Act.REVIEW_INTERVENTION: _rule(
        {P.MANAGER}, deny={P.REQUESTER}, why="a manager other than the one who broke the glass"
    ),
    # Recipients speak for themselves: an agent credential cannot file a recipient's
    # refusal (it could bury its own stale sends) nor ask about anyone's standing.
    Act.FILE_RECIPIENT_REPORT: _rule(
        {P.RECIPIENT}, why="only a recipient credential files refusal reports"
    ),
    Act.CHECK_FENCING: _rule(
        {P.RECIPIENT}, why="only a recipient credential asks whether a fencing token is current"
    ),
    # Configuration, by admins only. With four-eyes on, a change to rules, to what people
    # may do, or to four-eyes itself waits for a second admin: never the one who proposed
    # it, nor the person it would empower.
    Act.CONFIGURE_QUEUE: _rule({P.ADMIN}, why="only an admin changes a queue"),
    Act.CHANGE_RULE: _rule({P.ADMIN}, why="only an admin changes commit-time rules"),
    Act.APPROVE_POLICY_CHANGE: _rule(
        {P.ADMIN},
        deny={P.REQUESTER, P.SELF},
        why="an admin other than the one who proposed it, and not the person it is about",
    ),
    # Separation of duties: nobody changes their own roles, break-glass, sign-in or password.
    Act.MANAGE_USERS: _rule(
        {P.ADMIN}, deny={P.SELF}, why="an admin changes other people, never themselves"
    ),
    Act.MANAGE_CREDENTIALS: _rule(
        {P.ADMIN}, why="only an admin manages agent and recipient credentials"
    ),
    Act.MANAGE_WEBHOOKS: _rule({P.ADMIN}, why="only an admin changes notification targets"),
    Act.CHANGE_FOUR_EYES: _rule({P.ADMIN}, why="only an admin changes four-eyes"),
    # Reading. Whoever supervises, audits or configures watches the fleet (a scoped role
    # sees every queue and acts in its own); the audit log is the managers'; the rule
    # explainer is for those who decide effects and those who write the rules.
    Act.WATCH: _rule(
        {P.OPERATOR, P.APPROVER, P.MANAGER, P.ADMIN}, why="any role may watch the fleet"
    ),
    Act.READ_AUDIT: _rule({P.MANAGER}, why="only a manager reads the audit log"),
    Act.EXPLAIN_POLICY: _rule({P.ADMIN, P.APPROVER}, why="an admin or an approver"),
}

# Refusals about who the actor is, as opposed to the state of what they act on.
IDENTITY_CODES = frozenset({"forbidden", "not_holder"})

# Terminal certainty -> the code an act under it is refused with.
ENDED_CODES = {
    Certainty.EXPIRED: "lease_expired",
    Certainty.RELEASED: "lease_released",
    Certainty.REVOKED: "lease_revoked",
}


@dataclass(frozen=True)
class Verdict:
    code: str | None = None  # None: allowed
    detail: str = ""

    @property
    def allowed(self) -> bool:
        return self.code is None


ALLOW = Verdict()


def decide(
    act: Act,
    *,
    parties: frozenset[Party],
    certainty: Certainty | None = None,
    epoch_matches: bool = True,
    on_hold: bool = False,
    in_scope: bool = True,
) -> Verdict:
    """Allow, or refuse with a stable code: who, then the queue scope, then epoch, then the
    lease's state, then an operator's hold. `in_scope`: the actor's credential may use the
    queue of the work the act is about."""
    rule = RULES[act]
    if not parties & rule.allow or parties & rule.deny:
        names = " or ".join(sorted(rule.allow))
        # An agent is told it does not hold the lease; a human, that the act is not theirs.
        code = rule.refuse if Party.AGENT in parties else "forbidden"
        return Verdict(code, rule.why or f"{act} needs: {names}")
    if rule.scoped and not in_scope:
        return Verdict("queue_not_allowed", "this credential may not use the work item's queue")
    if rule.epoch is not Epoch.NONE and not epoch_matches:
        return Verdict("stale_epoch", "the epoch presented is not the current one")
    if certainty not in rule.states:
        if certainty in LIVE and not rule.states & LIVE:
            return Verdict("forbidden", "the lease is still live: its holder reports outcomes")
        if certainty is Certainty.JEOPARDY:
            return Verdict("in_jeopardy", "the lease missed its renewals; renew first")
        if certainty in ENDED_CODES:
            return Verdict(ENDED_CODES[certainty], f"the lease is {certainty}")
        return Verdict("not_found", "there is no lease to act under")
    if on_hold and not rule.held:
        if act is Act.ACQUIRE:
            return Verdict(
                "on_hold",
                "an operator put the work item on hold: it is granted again only when an "
                "operator lifts the hold or takes the work over",
            )
        return Verdict("on_hold", "an operator put the work item on hold: no new effects for now")
    return ALLOW


def rules_table() -> str:
    """The table as Markdown, for docs/authority.md (a test keeps that file current)."""
    lines = [
        "| act | who may (any of) | never | lease states | epoch | on hold | scope | refused as |",
        "|---|---|---|---|---|---|---|---|",
    ]
    order = [c for c in Certainty] + [None]
    for act in Act:
        rule = RULES[act]
        states = (
            "any"
            if rule.states == ANY
            else ", ".join("no lease" if c is None else c.value for c in order if c in rule.states)
        )
        lines.append(
            f"| {act} | {', '.join(sorted(rule.allow))} | {', '.join(sorted(rule.deny)) or '—'} "
            f"| {states} | {rule.epoch} | {'yes' if rule.held else 'on_hold'} "
            f"| {'queues' if rule.scoped else '—'} | {rule.refuse} |"
        )
    return "\n".join(lines) + "\n"
