"""Leases, their append-only event history, checkpoints, and fencing keys.

Renewal history is kept bounded *on the lease row*: aggregates (count, largest gap) plus a
fixed-width window of the last RENEWAL_WINDOW renewal times, rewritten by the renew
UPDATE itself. Thousands of agents renewing every few seconds add no rows anywhere; the
hot path stays one statement. Lease *events* (grant, jeopardy, expiry, release, revoke)
are rows, a handful per lease, pruned by the retention task.
"""

from __future__ import annotations

import os
import uuid

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.hashes import SHA256
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from django.conf import settings
from django.db import models
from django.db.models import Q

from leaseboard.core.models.choices import text_choices, values
from leaseboard.core.models.executors import Executor
from leaseboard.core.models.fields import not_null_index, sparse_ref
from leaseboard.core.models.work import WorkItem
from leaseboard.domain import vocabulary
from leaseboard.domain.certainty import LIVE, Certainty

# The live states in the enum's order (a stable list keeps the constraints' migrations still).
LIVE_STATES = tuple(state.value for state in Certainty if state in LIVE)
RENEWAL_WINDOW = 20
RENEWAL_SLOT = 14  # 13 digits of milliseconds and a comma


class Lease(models.Model):
    State = text_choices(Certainty, module=__name__, qualname="Lease.State")
    GrantKind = text_choices(vocabulary.GrantKind, module=__name__, qualname="Lease.GrantKind")

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    # No single-column indexes on these two: lease_epoch_unique (work_item, epoch) and
    # lease_holder_state_idx (holder, state) lead with them. A sweep or a renew moves
    # due_at_ms, which no HOT update can keep, so every index is one more write per change.
    work_item = models.ForeignKey(
        WorkItem, on_delete=models.PROTECT, related_name="leases", db_index=False
    )
    holder = models.ForeignKey(
        Executor, on_delete=models.PROTECT, related_name="leases", db_index=False
    )
    epoch = models.BigIntegerField()
    # The fencing order is (generation, epoch) (docs/design.md §5). On PostgreSQL the grant
    # statement itself reads the primary's WAL timeline, less one (core.sql.GENERATION_SQL), so the
    # lease and its generation commit together; SQLite and leases from before it: 0.
    generation = models.BigIntegerField(default=0, db_default=0)
    state = models.CharField(max_length=10, choices=State.choices, default=State.ACTIVE)
    grant_kind = models.CharField(max_length=10, choices=GrantKind.choices)

    # Times: database-clock milliseconds (leaseboard.core.clock).
    granted_at_ms = models.BigIntegerField()
    renewed_at_ms = models.BigIntegerField()
    jeopardy_at_ms = models.BigIntegerField()
    expires_at_ms = models.BigIntegerField()
    # The lifetime cap: no renewal moves expires_at past this.
    max_expires_at_ms = models.BigIntegerField()
    # Next time a sweep has something to do: jeopardy_at while active, expires_at after.
    due_at_ms = models.BigIntegerField()
    ended_at_ms = models.BigIntegerField(null=True, blank=True)
    # The fence (docs/design.md §5): no grant by acquire, and no effect under a grant made through
    # it, before this time. Set when the lease ends early with effect tokens still open
    # (their last expiry + the skew allowance), or inherited by a grant made at once (a
    # takeover, an assignment). 0: none. Expiry needs no value: see next_grant_at_ms.
    fenced_until_ms = models.BigIntegerField(default=0, db_default=0)

    # Expiry policy lives on the row; a sweeper never applies its own configuration.
    ttl_ms = models.PositiveIntegerField()
    renew_after_ms = models.PositiveIntegerField()
    jeopardy_after_ms = models.PositiveIntegerField()
    lock_delay_ms = models.PositiveIntegerField(default=0)

    end_reason = models.CharField(max_length=300, blank=True, default="")
    # The work item's hold as it applied to this lease (WorkItem.held_at_ms is the hold; a
    # live lease carries its copy for the renew statement and the live page, an ended one
    # keeps it as history): renewals go on, new effects are refused `on_hold`. Written only
    # by leaseboard.core.services.holds and the grant, which copies the item's.
    held_at_ms = models.BigIntegerField(null=True, blank=True)
    hold_reason = models.CharField(max_length=1100, blank=True, default="", db_default="")
    held_by = sparse_ref(settings.AUTH_USER_MODEL)
    takeover_reason = models.CharField(max_length=1000, blank=True, default="")
    ended_by = sparse_ref(Executor)

    # Bounded renewal history: aggregates plus a fixed-width window of recent renewal times.
    renew_count = models.PositiveIntegerField(default=0)
    max_gap_ms = models.PositiveIntegerField(default=0)
    recent_renewals = models.CharField(
        max_length=RENEWAL_WINDOW * RENEWAL_SLOT, blank=True, default=""
    )

    # deliberate: Django's declarative Meta, alike in shape in every model (see Alert.Meta).
    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["work_item"],
                condition=Q(state__in=LIVE_STATES),
                name="lease_one_live_per_work_item",
            ),
            models.UniqueConstraint(fields=["work_item", "epoch"], name="lease_epoch_unique"),
            models.CheckConstraint(
                condition=Q(state__in=values(Certainty)),
                name="lease_state_valid",
            ),
            models.CheckConstraint(
                condition=Q(grant_kind__in=values(vocabulary.GrantKind)),
                name="lease_grant_kind_valid",
            ),
            models.CheckConstraint(
                condition=Q(state__in=LIVE_STATES) | Q(ended_at_ms__isnull=False),
                name="lease_ended_has_time",
            ),
            models.CheckConstraint(condition=Q(epoch__gte=1), name="lease_epoch_positive"),
        ]
        indexes = [
            # The sweep's claims, in due order; and the live page's counters
            # (dashboard.selectors.counters.live_counters), read from the index alone: state
            # and expires_at_ms ride along (PostgreSQL; SQLite has no INCLUDE). One index
            # for both, not a second one that every renew and sweep write would update.
            models.Index(
                fields=["due_at_ms"],
                include=["state", "expires_at_ms"],
                condition=Q(state__in=LIVE_STATES),
                name="lease_due_idx",
            ),
            # The leases a sweep marked in jeopardy, by due time (= expiry), for the live
            # page's two jeopardy counters. Partial: an active lease enters none of it, so a
            # renew writes nothing more; without it, in an expiry storm each of those counts
            # walked every due entry of lease_due_idx for its state (16 ms at 50,000 due).
            models.Index(
                fields=["due_at_ms"],
                condition=Q(state=Certainty.JEOPARDY.value),
                name="lease_jeopardy_due_idx",
            ),
            # The expired leases by end time, newest first, for the live page's "expired in
            # the last hour" counter: an ordered walk that stops at its cap. Without it,
            # statistics taken before an expiry storm (no lease expired) planned that count
            # over lease_holder_state_idx, which read every expired lease and sorted them
            # (auto_explain in make storm: 2,487 -> 34,634 buffers as the storm went on).
            # Partial: an expiry writes one entry; a renew or a grant none.
            models.Index(
                fields=["-ended_at_ms"],
                condition=Q(state=Certainty.EXPIRED.value),
                name="lease_expired_ended_idx",
            ),
            models.Index(fields=["holder", "state"], name="lease_holder_state_idx"),
            # Partial: a live lease (ended_at_ms, ended_by, held_by all NULL) enters none
            # of these three, so a renew or a grant writes three index entries fewer.
            # State rides along (PostgreSQL): the live page's "expired in the last hour"
            # counter reads the newest endings from the index alone and stops at its cap.
            not_null_index("-ended_at_ms", "lease_ended_idx", include=["state"]),
            not_null_index("ended_by", "lease_ended_by_idx"),
            not_null_index("held_by", "lease_held_by_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.work_item_id}@{self.epoch}"

    @property
    def is_live(self) -> bool:
        return self.state in LIVE_STATES

    def recent_renewal_times(self) -> list[int]:
        return [int(part) for part in self.recent_renewals.split(",") if part]


class LeaseEvent(models.Model):
    """Append-only history of a lease's grant and state changes, written with the change."""

    class Kind(models.TextChoices):
        GRANTED = "granted"
        JEOPARDY = "jeopardy"
        RECOVERED = "recovered"  # renewed back to active from jeopardy
        EXPIRED = "expired"
        RELEASED = "released"
        REVOKED = "revoked"
        EXTENDED = "extended"  # human standing extended

    lease = models.ForeignKey(Lease, on_delete=models.PROTECT, related_name="events")
    # lease_event_work_idx (work_item, at_ms) leads with it: no index of its own.
    work_item = models.ForeignKey(
        WorkItem, on_delete=models.PROTECT, related_name="lease_events", db_index=False
    )
    epoch = models.BigIntegerField()
    kind = models.CharField(max_length=12, choices=Kind.choices)
    at_ms = models.BigIntegerField()
    actor = sparse_ref(Executor)
    detail = models.JSONField(default=dict, blank=True)

    class Meta:
        indexes = [
            models.Index(fields=["work_item", "at_ms"], name="lease_event_work_idx"),
            models.Index(fields=["at_ms"], name="lease_event_at_idx"),
            not_null_index("actor", "lease_event_actor_idx"),
        ]


class Checkpoint(models.Model):
    """An opaque, size-bounded JSON document the holder saves under its epoch."""

    work_item = models.ForeignKey(WorkItem, on_delete=models.PROTECT, related_name="checkpoints")
    lease = models.ForeignKey(Lease, on_delete=models.PROTECT, related_name="checkpoints")
    epoch = models.BigIntegerField()
    seq = models.PositiveIntegerField()
    data = models.JSONField()
    size_bytes = models.PositiveIntegerField()
    at_ms = models.BigIntegerField()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["work_item", "seq"], name="checkpoint_seq_unique"),
        ]


class FencingKey(models.Model):
    """An Ed25519 key that signs fencing tokens. Only the public half is stored in clear;
    the private half is sealed under the key-encryption key (FencingKeyring), which is not
    in the database, so a copy of the database cannot sign tokens.

    Lifecycle, in database-clock milliseconds: published (in the JWKS) from creation; may
    sign from `activate_at_ms` (the newest activated, unretired key signs); stops signing at
    `retired_at_ms`; leaves the JWKS at `publish_until_ms`, once every token it may have
    signed has expired (leaseboard/core/services/fencing.py).
    """

    kid = models.CharField(max_length=64, unique=True)
    public_key = models.BinaryField()
    private_key_sealed = models.BinaryField()
    kek_id = models.CharField(max_length=16)  # which key-encryption key sealed it
    created_at_ms = models.BigIntegerField()
    activate_at_ms = models.BigIntegerField()
    retired_at_ms = models.BigIntegerField(null=True, blank=True)
    publish_until_ms = models.BigIntegerField(null=True, blank=True)

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=Q(retired_at_ms__isnull=True, publish_until_ms__isnull=True)
                | Q(
                    retired_at_ms__isnull=False,
                    publish_until_ms__gte=models.F("retired_at_ms"),
                ),
                name="fencingkey_retired_is_published_until_after",
            ),
        ]

    def __str__(self) -> str:
        return self.kid


SEAL_VERSION = b"\x01"
_NONCE_BYTES = 12


def fencing_kek_id(kek: str) -> str:
    """Short stable id of a key-encryption key, derived apart from its sealing key."""
    return _derive(kek, b"kek id").hex()[:16]


class FencingKeyUnavailable(Exception):
    """A sealed private key this process cannot open (its KEK is not configured here, or
    the stored bytes were altered)."""


class FencingKeyring:
    """The configured key-encryption keys by id: the current one seals, every one opens.

    Sealing is AES-256-GCM with a key derived by HKDF-SHA256 from the configured string, a
    random 96-bit nonce, and the kid as associated data (a sealed key moved to another row
    does not open). Stored as version byte + nonce + ciphertext-and-tag.
    """

    def __init__(self, current: str, retired: tuple[str, ...] | list[str] = ()) -> None:
        self.current_id = fencing_kek_id(current)
        self._aead = {
            fencing_kek_id(k): AESGCM(_derive(k, b"seal v1")) for k in (*retired, current)
        }

    @classmethod
    def from_settings(cls) -> FencingKeyring:
        return cls(settings.LEASEBOARD_FENCING_KEK, settings.LEASEBOARD_FENCING_RETIRED_KEKS)

    def knows(self, kek_id: str) -> bool:
        return kek_id in self._aead

    def seal(self, private_key: bytes, *, kid: str) -> tuple[bytes, str]:
        """(sealed bytes, id of the KEK that sealed them)."""
        nonce = os.urandom(_NONCE_BYTES)
        sealed = self._aead[self.current_id].encrypt(nonce, private_key, _aad(kid))
        return SEAL_VERSION + nonce + sealed, self.current_id

    def open(self, sealed: bytes | memoryview, *, kid: str, kek_id: str) -> bytes:
        aead = self._aead.get(kek_id)
        if aead is None:
            raise FencingKeyUnavailable(
                f"fencing key {kid} is sealed under key-encryption key {kek_id}, which is not "
                "configured here (LEASEBOARD_FENCING_KEK / LEASEBOARD_FENCING_RETIRED_KEKS)"
            )
        sealed = bytes(sealed)
        if sealed[:1] != SEAL_VERSION:
            raise FencingKeyUnavailable(f"fencing key {kid}: unknown sealing format")
        nonce, body = sealed[1 : 1 + _NONCE_BYTES], sealed[1 + _NONCE_BYTES :]
        try:
            return aead.decrypt(nonce, body, _aad(kid))
        except InvalidTag:
            raise FencingKeyUnavailable(f"fencing key {kid} does not open: altered?") from None


def _derive(kek: str, purpose: bytes) -> bytes:
    hkdf = HKDF(algorithm=SHA256(), length=32, salt=None, info=b"leaseboard fencing " + purpose)
    return hkdf.derive(kek.encode())


def _aad(kid: str) -> bytes:
    return b"leaseboard fencing key\x00" + kid.encode()
