"""Redirects to a target the browser supplied (a form's `next`): honoured only when it is
a path on this site, otherwise a fixed default, so no link can bounce a signed-in user to
another site (an open redirect)."""

from __future__ import annotations

import unicodedata
from urllib.parse import urlsplit

from django.http import HttpRequest, HttpResponseRedirect
from django.utils.http import url_has_allowed_host_and_scheme


def safe_next(request: HttpRequest, default: str, *, param: str = "next") -> str:
    """The POSTed `param` when it is a same-host relative path, else `default`."""
    target = request.POST.get(param, "")
    if is_local_path(request, target):
        return target
    return default


def is_local_path(request: HttpRequest, target: str) -> bool:
    if not target or not target.startswith("/"):
        return False
    # Browsers drop tabs and newlines inside a URL ("/\t/host" becomes "//host"); no local
    # path we link to has a control character, so none is honoured.
    if any(unicodedata.category(ch)[0] == "C" for ch in target):
        return False
    # Django's check refuses other hosts and schemes, "//host" and "/\\host"; ours adds
    # that the target names no scheme and no host at all, not even this one.
    if not url_has_allowed_host_and_scheme(
        target, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    ):
        return False
    parts = urlsplit(target)
    return not parts.scheme and not parts.netloc


def redirect_next(request: HttpRequest, default: str) -> HttpResponseRedirect:
    return HttpResponseRedirect(safe_next(request, default))
