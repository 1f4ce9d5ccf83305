"""`manage.py fencing_keys list|rotate|retire KID`: the fencing-token signing keys.

`rotate` publishes a new key at once and lets it sign after the publish delay; `retire`
stops a key signing and keeps it published until its tokens have expired (`--now`: drops
it at once, for a compromised key). Both audited (docs/deployment.md, "Fencing keys").
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from leaseboard.core.services.audit import cli_actor_name
from leaseboard.core.services.fencing import (
    KEY_CACHE_SECONDS,
    KeyState,
    fencing_key_retire,
    fencing_key_rotate,
    fencing_keys_status,
)
from leaseboard.domain.errors import LeaseboardError

COLUMNS = ("kid", "state", "created", "activates", "retires")


def when(ms: int | None) -> str:
    if ms is None:
        return "-"
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def after(ms: int, now_ms: int) -> str:
    seconds = max(0, (ms - now_ms + 999) // 1000)
    return f"{when(ms)} (in {seconds} s)" if seconds else f"{when(ms)} (now)"


class Command(BaseCommand):
    help = "List, rotate or retire the Ed25519 keys that sign fencing tokens."

    def add_arguments(self, parser: CommandParser) -> None:
        actions = parser.add_subparsers(dest="action", required=True)
        actions.add_parser("list", help="every key with its state")
        rotate = actions.add_parser(
            "rotate", help="a new key: published now, signing after the publish delay"
        )
        rotate.add_argument(
            "--publish-delay-ms",
            type=int,
            default=None,
            help="instead of LEASEBOARD_FENCING_KEY_PUBLISH_DELAY_MS; below the recipients' "
            "key refresh interval they may refuse its first tokens as unknown_key",
        )
        retire = actions.add_parser(
            "retire", help="stop signing with a key; published until its tokens have expired"
        )
        retire.add_argument("kid")
        retire.add_argument(
            "--now",
            action="store_true",
            help="drop it from the key set at once (a compromised key): tokens it signed "
            "stop verifying",
        )

    def handle(self, *args: Any, action: str, **options: Any) -> None:
        try:
            if action == "rotate":
                self._rotate(options["publish_delay_ms"])
            elif action == "retire":
                self._retire(options["kid"], immediately=options["now"])
            else:
                self._list()
        except LeaseboardError as exc:
            raise CommandError(exc.detail) from None

    def _list(self) -> None:
        now, keys = fencing_keys_status()
        rows = [COLUMNS] + [
            (
                k.kid,
                k.state.value,
                when(k.created_at_ms),
                when(k.activate_at_ms),
                when(k.publish_until_ms),
            )
            for k in keys
        ]
        widths = [max(len(row[i]) for row in rows) for i in range(len(COLUMNS))]
        for row, key in zip(rows, [None, *keys], strict=True):
            line = "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
            if key is not None and not key.opens_here and key.state != KeyState.RETIRED:
                line += f"  (sealed under KEK {key.kek_id}, not configured here)"
            self.stdout.write(line)

    def _rotate(self, publish_delay_ms: int | None) -> None:
        key = fencing_key_rotate(actor_name=cli_actor_name(), publish_delay_ms=publish_delay_ms)
        now, keys = fencing_keys_status()
        active = (KeyState.SIGNING, KeyState.PUBLISHED)
        replaced = [k.kid for k in keys if k.state in active and k.kid != key.kid]
        message = (
            f"fencing key {key.kid}: published now; signs from {after(key.activate_at_ms, now)}"
        )
        if replaced:
            message += (
                f". Retire the key it replaces once it signs: `fencing_keys retire {replaced[0]}`"
            )
        self.stdout.write(message)

    def _retire(self, kid: str, *, immediately: bool) -> None:
        key = fencing_key_retire(kid=kid, actor_name=cli_actor_name(), immediately=immediately)
        assert key.publish_until_ms is not None and key.retired_at_ms is not None
        if immediately or key.publish_until_ms <= key.retired_at_ms:
            why = "tokens it signed no longer verify" if immediately else "it had signed nothing"
            self.stdout.write(f"fencing key {kid}: retired and out of the key set now; {why}")
            return
        until = after(key.publish_until_ms, key.retired_at_ms)
        self.stdout.write(
            f"fencing key {kid}: retired; signs no more (other processes within "
            f"{KEY_CACHE_SECONDS:g} s); published until {until}, when every token it signed "
            "has expired"
        )
