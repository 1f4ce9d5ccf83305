"""The online fencing check, from the recipient's side: POST /api/v1/fencing/check with
the recipient's own credential (Chubby's CheckSequencer). Standard library only.

Offline verification says a token was valid when issued and has not expired; the online
check says its standing is still current *now* (no successor, not revoked). Use it for
effects that cannot be undone; the epoch guard still runs after it.
"""

from __future__ import annotations

import json
import urllib.request
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the module stays standard library only at run time
    from leaseboard_recipient.tokens import EffectContent

CHECK_PATH = "/api/v1/fencing/check"


@dataclass(frozen=True)
class OnlineAnswer:
    valid: bool
    current_epoch: int | None
    code: str | None = None
    # The generation of the current lease (docs/design.md §5); 0 from a server before it.
    current_generation: int | None = None


class OnlineChecker:
    """Callable: `checker(token) -> OnlineAnswer`; raises on any transport or HTTP error
    (the verifier then refuses: fail closed)."""

    def __init__(self, *, base_url: str, token: str, timeout_s: float = 2.0) -> None:
        self.url = base_url.rstrip("/") + CHECK_PATH
        self.token = token
        self.timeout_s = timeout_s

    def __call__(self, fencing_token: str, content: EffectContent | None = None) -> OnlineAnswer:
        """Given `content`, Leaseboard also checks it against the token's digest (only the
        digest is sent)."""
        question = {"fencing_token": fencing_token}
        if content is not None:
            question["digest"] = content.digest
        request = urllib.request.Request(
            self.url,
            data=json.dumps(question).encode(),
            method="POST",
            headers={
                "Authorization": f"Bearer {self.token}",
                "Content-Type": "application/json",
                "Accept": "application/json",
            },
        )
        with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
            body = json.loads(response.read())
        if not isinstance(body, dict) or not isinstance(body.get("valid"), bool):
            raise ValueError("the fencing check answered without a boolean 'valid'")
        return OnlineAnswer(
            valid=body["valid"],
            current_epoch=body.get("current_epoch"),
            code=body.get("code"),
            current_generation=body.get("current_generation"),
        )
