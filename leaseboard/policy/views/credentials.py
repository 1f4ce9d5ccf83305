"""The settings page for credentials: agents (create, rotate, revoke; quarantine is on the
agent's page) and recipients (create, rotate, revoke, and the epoch-notice webhook set or
cleared). A new token or signing secret is shown once, on the page that answers the POST,
and never again; a refusal of bad input is said at the field it is about."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.views.decorators.http import require_http_methods, require_POST

from leaseboard.domain.authority import Act
from leaseboard.domain.errors import LeaseboardError, ValidationFailed
from leaseboard.policy import selectors
from leaseboard.policy.forms import CredentialForm, QueueScopeForm, RecipientForm
from leaseboard.policy.services import credentials
from leaseboard.web.pages import render_page
from leaseboard.web.refusals import refusal_text, refusals_said, refused_for_form
from leaseboard.web.roles import act_required, acting

RECIPIENT_ACTIONS = ("rotate", "revoke", "webhook", "webhook-clear")


def _credentials_page(
    request: HttpRequest,
    *,
    form: CredentialForm | None = None,
    recipient_form: RecipientForm | None = None,
    shown: dict | None = None,
    webhook_error: dict | None = None,
) -> HttpResponse:
    context: dict[str, Any] = {
        "agents": selectors.credentials_list(),
        "queue_names": selectors.queue_names(),
        "recipients": selectors.recipients_list(),
        "form": form or CredentialForm(),
        "recipient_form": recipient_form or RecipientForm(prefix="recipient"),
        "shown": shown,
        "webhook_error": webhook_error,
    }
    return render_page(request, "policy/credentials.html", context)


def _actor(request: HttpRequest) -> dict:
    return {"actor": acting(request)["actor"]}


def _form_error(form: Any, field: str, exc: LeaseboardError) -> None:
    """Bad input under its field; any other refusal above the form (403 for who you are)."""
    form.add_error(field if exc.code == "validation_error" else None, refused_for_form(exc))


def _token_shown(request: HttpRequest, who: str, token: str) -> HttpResponse:
    """The page with a new token on it, shown this once."""
    return _credentials_page(request, shown={"who": who, "what": "token", "secret": token})


def _created(
    request: HttpRequest,
    create: Callable[[], tuple[Any, str]],
    *,
    fields: tuple[str, ...],
    **form: Any,
) -> HttpResponse:
    """Make a credential and show its token once; a refusal goes under the form field it
    names (its `param`, when that is one of `fields`, else the first), the form kept."""
    try:
        row, token = create()
    except LeaseboardError as exc:
        param = exc.extra.get("param")
        (bound,) = form.values()
        _form_error(bound, param if param in fields else fields[0], exc)
        return _credentials_page(request, **form)
    return _token_shown(request, row.name, token)


# deliberate: a settings page's view, its form and act its own; alike in shape only.
@require_http_methods(["GET", "POST"])
@act_required(Act.MANAGE_CREDENTIALS)
def credentials_page(request: HttpRequest) -> HttpResponse:
    form = CredentialForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        d = form.cleaned_data
        return _created(
            request,
            lambda: credentials.credential_create(
                name=d["name"], queues=d["queues"], all_queues=d["all_queues"], **_actor(request)
            ),
            form=form,
            fields=("name", "queues"),
        )
    return _credentials_page(request, form=form)


@require_POST
@act_required(Act.MANAGE_CREDENTIALS)
def credential_act(request: HttpRequest, name: str, action: str) -> HttpResponse:
    if action not in ("rotate", "revoke", "scope"):
        raise Http404("no such action")
    with refusals_said(request, prefix=f"{name}: ", missing="no such agent"):
        if action == "scope":
            form = QueueScopeForm(request.POST)
            if not form.is_valid():
                messages.error(request, f"{name}: choose among the listed queues.")
                return redirect("policy:credentials")
            d = form.cleaned_data
            done = credentials.credential_scope(
                name=name, queues=d["queues"], all_queues=d["all_queues"], **_actor(request)
            )
            messages.success(request, f"{name}: queues saved." if done else "Nothing changed.")
            return redirect("policy:credentials")
        if action == "rotate":
            executor, token = credentials.credential_rotate(name=name, **_actor(request))
            return _token_shown(request, executor.name, token)
        done = credentials.credential_revoke(name=name, **_actor(request))
        messages.success(request, f"{name}: token revoked." if done else "No token to revoke.")
    return redirect("policy:credentials")


# -- recipients -------------------------------------------------------------------------


@require_POST
@act_required(Act.MANAGE_CREDENTIALS)
def recipient_new(request: HttpRequest) -> HttpResponse:
    form = RecipientForm(request.POST, prefix="recipient")
    if form.is_valid():
        name = form.cleaned_data["name"]
        return _created(
            request,
            lambda: credentials.recipient_credential_create(name=name, **_actor(request)),
            recipient_form=form,
            fields=("name",),
        )
    return _credentials_page(request, recipient_form=form)


@require_POST
@act_required(Act.MANAGE_CREDENTIALS)
def recipient_act(request: HttpRequest, pk: int, action: str) -> HttpResponse:
    if action not in RECIPIENT_ACTIONS:
        raise Http404("no such action")
    name = selectors.recipient_name(pk)
    if name is None:
        raise Http404("no such recipient")
    with refusals_said(request, prefix=f"{name}: ", missing="no such recipient"):
        if action == "rotate":
            recipient, token = credentials.recipient_credential_rotate(name=name, **_actor(request))
            return _token_shown(request, recipient.name, token)
        if action == "webhook":
            return _webhook_set(request, pk, name)
        if action == "revoke":
            done = credentials.recipient_credential_revoke(name=name, **_actor(request))
            messages.success(request, f"{name}: token revoked." if done else "No token to revoke.")
        else:
            done = credentials.recipient_webhook_clear(name=name, **_actor(request))
            messages.success(request, f"{name}: webhook cleared." if done else "No webhook set.")
    return redirect("policy:credentials")


def _webhook_set(request: HttpRequest, pk: int, name: str) -> HttpResponse:
    """Set the webhook; a URL the service refuses is said under that recipient's field, the
    typed URL kept there to be corrected."""
    url = request.POST.get("url", "")
    try:
        secret = credentials.recipient_webhook_set(name=name, url=url, **_actor(request))
    except ValidationFailed as exc:
        error = {"pk": pk, "url": url, "message": refusal_text(exc)}
        return _credentials_page(request, webhook_error=error)
    shown = {"who": name, "what": "webhook signing secret", "secret": secret}
    return _credentials_page(request, shown=shown)
