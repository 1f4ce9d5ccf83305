"""Django forms of the recipient fence: a view decorator and a middleware.

Django is imported inside functions only, so `leaseboard_recipient` imports without it.
`@fenced(verifier, in_transaction=True)` is the safe form: check and write commit together.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from leaseboard_recipient.tokens import EffectContent
from leaseboard_recipient.verifier import Decision, TokenVerifier, problem_for
from leaseboard_recipient.wsgi import MUTATING_METHODS, decide_from_headers

VerifierSource = TokenVerifier | Callable[[], TokenVerifier]


def _resolve(source: VerifierSource) -> TokenVerifier:
    return source if isinstance(source, TokenVerifier) else source()


def _problem(decision: Decision) -> Any:
    from django.http import JsonResponse

    status, body = problem_for(decision)
    return JsonResponse(body, status=status, content_type="application/problem+json")


def fenced(
    verifier: VerifierSource,
    *,
    in_transaction: bool = False,
    using: str = "default",
    describe: Callable[[Any], EffectContent | None] | None = None,
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Decorate a recipient view: refuse stale or bad tokens, expose `request.fencing`.

    `describe(request)` says which effect the view executes (kind, target, payload): the
    token must have been decided on exactly that (`payload_mismatch` otherwise).

    With `in_transaction=True` the view runs inside `transaction.atomic(using=...)` and the
    epoch check uses that transaction's cursor (the guard must be a PostgresEpochGuard on
    the same database), so a view that raises rolls back its write and the mark together.
    """

    def decorate(view: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(view)
        def wrapper(request: Any, *args: Any, **kwargs: Any) -> Any:
            active = _resolve(verifier)
            content = describe(request) if describe is not None else None
            if not in_transaction:
                decision = decide_from_headers(active, request.headers.get, content=content)
                if not decision.accepted:
                    return _problem(decision)
                request.fencing = decision.claims
                return view(request, *args, **kwargs)

            from django.db import connections, transaction

            with transaction.atomic(using=using):
                with connections[using].cursor() as cursor:
                    decision = decide_from_headers(
                        active, request.headers.get, cursor=cursor, content=content
                    )
                if not decision.accepted:
                    return _problem(decision)
                request.fencing = decision.claims
                return view(request, *args, **kwargs)

        return wrapper

    return decorate


class FencingMiddleware:
    """Django middleware fencing mutating requests under configured path prefixes.

    Settings: LEASEBOARD_RECIPIENT_VERIFIER — dotted path to a TokenVerifier or a zero-arg
    factory returning one; LEASEBOARD_RECIPIENT_PATHS — path prefixes (default: all).
    """

    def __init__(self, get_response: Callable[[Any], Any]) -> None:
        from django.conf import settings
        from django.utils.module_loading import import_string

        self.get_response = get_response
        # A setting of the project using the guard: django-stubs (when it type-checks that
        # project) finds it missing from that project's settings module.
        target = import_string(settings.LEASEBOARD_RECIPIENT_VERIFIER)  # type: ignore[misc, unused-ignore]
        self._source: VerifierSource = target
        self._verifier: TokenVerifier | None = None
        self.prefixes = tuple(getattr(settings, "LEASEBOARD_RECIPIENT_PATHS", ("/",)))

    def __call__(self, request: Any) -> Any:
        if request.method not in MUTATING_METHODS or not request.path.startswith(self.prefixes):
            return self.get_response(request)
        if self._verifier is None:
            self._verifier = _resolve(self._source)
        decision = decide_from_headers(self._verifier, request.headers.get)
        if not decision.accepted:
            return _problem(decision)
        request.fencing = decision.claims
        return self.get_response(request)
