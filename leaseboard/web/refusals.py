"""How the browser is told an act was refused, the same way on every page: refusals about
who you are (`forbidden`, `not_holder`) are the 403 page, like a missing role; anything
else (a stale epoch, an ended lease, bad input) is a message on the page you came from."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest
from django.utils.html import format_html
from django.utils.safestring import SafeString

from leaseboard.domain.authority import IDENTITY_CODES as WHO_YOU_ARE
from leaseboard.domain.errors import LeaseboardError, NotFound


def with_code(text: str, code: str) -> SafeString:
    """A sentence for people, and the stable code for support on a details line of its own
    (not in the sentence). Both escaped."""
    return format_html('{}<small class="refusal-code">code: <code>{}</code></small>', text, code)


def refusal_text(exc: LeaseboardError, prefix: str = "") -> SafeString:
    """The words shown for a refusal, and its stable code on a details line for support."""
    return with_code(f"{prefix}{exc.detail}", exc.code)


def refuse(request: HttpRequest, exc: LeaseboardError, prefix: str = "") -> None:
    """Raise the 403 page for a refusal of the actor, else queue the refusal as a message."""
    if exc.code in WHO_YOU_ARE:
        raise PermissionDenied(exc.detail)
    messages.error(request, refusal_text(exc, prefix))


def refused_for_form(exc: LeaseboardError) -> str:
    """For a form: raise the 403 page for a refusal of the actor, else the form error."""
    if exc.code in WHO_YOU_ARE:
        raise PermissionDenied(exc.detail)
    return refusal_text(exc)


@contextmanager
def refusals_said(request: HttpRequest, *, prefix: str, missing: str) -> Iterator[None]:
    """Around an act that a redirect answers: NotFound is the 404 page saying `missing`;
    any other refusal is `refuse`d (prefixed by `prefix`) and the rest of the block skipped."""
    try:
        yield
    except NotFound:
        raise Http404(missing) from None
    except LeaseboardError as exc:
        refuse(request, exc, prefix=prefix)
