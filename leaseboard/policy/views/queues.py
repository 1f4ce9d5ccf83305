"""Settings pages for queues: their settings and envelope, their ordered rules, their
notification targets. Admins only (the authority decides again in every service); a
refused change shows each problem on its field and saves nothing."""

from __future__ import annotations

from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.urls import reverse
from django.views.decorators.http import require_http_methods, require_POST

from leaseboard.domain.authority import Act
from leaseboard.domain.errors import LeaseboardError, NotFound
from leaseboard.domain.policy import RuleSpec
from leaseboard.policy import selectors
from leaseboard.policy.forms import (
    DefaultForm,
    NotifyForm,
    QueueForm,
    RuleForm,
    errors_to_form,
    queue_field,
)
from leaseboard.policy.services import queues, rules
from leaseboard.policy.services.common import SettingsInvalid
from leaseboard.policy.services.four_eyes import four_eyes_forced, four_eyes_on
from leaseboard.web.pages import render_page
from leaseboard.web.refusals import refuse, refused_for_form, with_code
from leaseboard.web.roles import act_required, acting


@require_http_methods(["GET"])
@act_required(Act.CONFIGURE_QUEUE)
def home(request: HttpRequest) -> HttpResponse:
    return render_page(
        request,
        "policy/home.html",
        {
            "queues": selectors.queues_overview(),
            "global": selectors.global_page(),
            "four_eyes": four_eyes_on(),
            "four_eyes_forced": four_eyes_forced(),
        },
    )


@require_http_methods(["GET"])
@act_required(Act.CHANGE_RULE)
def global_rules(request: HttpRequest) -> HttpResponse:
    """The rules for every queue: tried before each queue's own, which only tighten them."""
    page = selectors.global_page()
    context = {"page": page, "default_form": DefaultForm(initial={"default": page.default})}
    return render_page(request, "policy/global.html", context)


def _queue_url(name: str | None) -> str:
    return reverse("policy:queue", args=[name]) if name is not None else reverse("policy:global")


@require_http_methods(["GET", "POST"])
@act_required(Act.CONFIGURE_QUEUE)
def queue_new(request: HttpRequest) -> HttpResponse:
    form = QueueForm(
        request.POST or None, initial={"overflow": "wait", "reconciliation_gate": True}
    )
    if request.method == "POST" and form.is_valid():
        name = form.cleaned_data["name"].strip()
        try:
            queues.queue_create(name=name, values=form.values(), **acting(request))
        except SettingsInvalid as exc:
            errors_to_form(form, exc.errors, queue_field)
        except LeaseboardError as exc:
            form.add_error(None, refused_for_form(exc))
        else:
            messages.success(request, f"Queue {name} created.")
            return redirect(_queue_url(name))
    return render_page(request, "policy/queue_form.html", {"form": form, "new": True})


def _queue_page(name: str) -> selectors.QueuePage:
    """What the queue's settings pages show; a name no queue has is the 404 page."""
    page = selectors.queue_page(name)
    if page is None:
        raise Http404("no such queue")
    return page


@require_http_methods(["GET", "POST"])
@act_required(Act.CONFIGURE_QUEUE)
def queue(request: HttpRequest, name: str) -> HttpResponse:
    page = _queue_page(name)
    data = request.POST.copy() if request.method == "POST" else None
    if data is not None:
        data["name"] = name  # a queue keeps its name
    form = QueueForm(data, initial=QueueForm.initial_from(name, page.settings))
    form.fields["name"].disabled = True
    if request.method == "POST" and form.is_valid():
        try:
            _, changed = queues.queue_update(name=name, values=form.values(), **acting(request))
        except SettingsInvalid as exc:
            errors_to_form(form, exc.errors, queue_field)
        except LeaseboardError as exc:
            form.add_error(None, refused_for_form(exc))
        else:
            messages.success(request, f"Queue {name} saved." if changed else "Nothing changed.")
            return redirect(_queue_url(name))
    context = {
        "form": form,
        "page": page,
        "default_form": DefaultForm(initial={"default": page.queue.default_decision}),
    }
    return render_page(request, "policy/queue.html", context)


# -- rules ------------------------------------------------------------------------------


def _apply(request: HttpRequest, name: str | None, new: list[RuleSpec], default: str, summary: str):  # type: ignore[no-untyped-def]
    change = rules.rule_set_change(
        queue_name=name, rules=new, default=default, summary=summary, **acting(request)
    )
    if not change.changed:
        messages.success(request, "Nothing changed.")
    elif change.applied:
        messages.success(request, f"{summary} (policy version {change.version}).")
    else:
        messages.success(
            request,
            f"{summary}: waiting for a second admin (change {change.proposal.pk}).",  # type: ignore[union-attr]
        )
    return change


def _current(name: str | None) -> tuple[list[RuleSpec], str]:
    """A queue's rules and default, or (None) the rules for every queue's."""
    if name is None:
        page_global = selectors.global_page()
        return [r.spec() for r in page_global.rules], page_global.default
    page = _queue_page(name)
    return [r.spec() for r in page.rules], page.queue.default_decision


def _rule_errors(form: RuleForm, errors: dict[str, str], index: int, specs: list[RuleSpec]) -> None:
    for key, message in errors.items():
        head, _, field = key.partition(".")
        if head == f"rules[{index}]" and field in form.fields:
            form.add_error(field, message)
        elif head.startswith("rules["):
            other = int(head[6:-1])
            who = specs[other].name if other < len(specs) else head
            form.add_error(None, f"rule {who!r}, {field}: {message}")
        else:
            form.add_error(None, f"{key}: {message}")


@require_http_methods(["GET", "POST"])
@act_required(Act.CHANGE_RULE)
def rule_edit(request: HttpRequest, name: str | None = None, rule: str = "") -> HttpResponse:
    specs, default = _current(name)
    names = [s.name for s in specs]
    if rule and rule not in names:
        raise Http404("no such rule")
    index = names.index(rule) if rule else len(specs)
    initial = RuleForm.initial_from(specs[index]) if rule else {}
    form = RuleForm(request.POST or None, initial=initial)
    if request.method == "POST" and form.is_valid():
        spec = form.spec()
        new = list(specs)
        if rule:
            new[index] = spec
        else:
            new.append(spec)
        verb = "changed" if rule else "added"
        try:
            _apply(request, name, new, default, f"Rule {spec.name} {verb}")
        except SettingsInvalid as exc:
            _rule_errors(form, exc.errors, index, new)
        except LeaseboardError as exc:
            form.add_error(None, refused_for_form(exc))
        else:
            warning = rules.payload_field_warnings([spec], name).get("rules[0].when")
            if warning:  # saved all the same: a warning, not a refusal
                messages.warning(request, f"Rule {spec.name}, condition: {warning}")
            return redirect(_queue_url(name))
    shown = [form.spec()] if form.is_bound and form.is_valid() else specs[index : index + 1]
    context = {
        "when_warning": rules.payload_field_warnings(shown, name).get("rules[0].when", ""),
        "form": form,
        "queue": name,
        "where": name or "the rules for every queue",
        "back_url": _queue_url(name),
        "rule": rule,
        "position": index + 1,
    }
    return render_page(request, "policy/rule_form.html", context)


@require_POST
@act_required(Act.CHANGE_RULE)
def rule_delete(request: HttpRequest, rule: str, name: str | None = None) -> HttpResponse:
    specs, default = _current(name)
    new = [s for s in specs if s.name != rule]
    if len(new) == len(specs):
        raise Http404("no such rule")
    _try(request, name, new, default, f"Rule {rule} removed")
    return redirect(_queue_url(name))


@require_POST
@act_required(Act.CHANGE_RULE)
def rule_move(request: HttpRequest, rule: str, name: str | None = None) -> HttpResponse:
    specs, default = _current(name)
    names = [s.name for s in specs]
    if rule not in names:
        raise Http404("no such rule")
    i = names.index(rule)
    j = i - 1 if request.POST.get("direction") == "up" else i + 1
    if 0 <= j < len(specs):
        specs[i], specs[j] = specs[j], specs[i]
        _try(request, name, specs, default, f"Rule {rule} moved to position {j + 1}")
    return redirect(_queue_url(name))


@require_POST
@act_required(Act.CHANGE_RULE)
def rule_default(request: HttpRequest, name: str | None = None) -> HttpResponse:
    specs, _ = _current(name)
    form = DefaultForm(request.POST)
    if form.is_valid():
        default = form.cleaned_data["default"]
        _try(request, name, specs, default, f"Default decision set to {default}")
    else:
        messages.error(request, "Choose allow, deny or require approval.")
    return redirect(_queue_url(name))


def _try(
    request: HttpRequest, name: str | None, new: list[RuleSpec], default: str, summary: str
) -> None:
    try:
        _apply(request, name, new, default, summary)
    except SettingsInvalid as exc:
        for key, message in exc.errors.items():
            messages.error(
                request, with_code(f"{summary}: refused, {key}: {message}", "validation_error")
            )
    except NotFound:
        raise Http404("no such queue") from None
    except LeaseboardError as exc:
        refuse(request, exc, prefix=f"{summary}: refused, ")


# -- notification targets --------------------------------------------------------------


@require_http_methods(["GET", "POST"])
@act_required(Act.MANAGE_WEBHOOKS)
def notify(request: HttpRequest, name: str) -> HttpResponse:
    page = _queue_page(name)
    initial = NotifyForm.initial_from(page.queue.notify or {})
    form = NotifyForm(request.POST or None, initial=initial)
    if request.method == "POST" and form.is_valid():
        try:
            changed = queues.queue_notify_update(name=name, notify=form.values(), **acting(request))
        except SettingsInvalid as exc:
            errors_to_form(
                form,
                exc.errors,
                lambda key: key.split("[")[0].split(".")[0].replace("notify", "__all__"),
            )
        except LeaseboardError as exc:
            form.add_error(None, refused_for_form(exc))
        else:
            messages.success(
                request, "Notification targets saved." if changed else "Nothing changed."
            )
            return redirect(_queue_url(name))
    return render_page(request, "policy/notify.html", {"form": form, "page": page})
