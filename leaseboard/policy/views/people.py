"""Settings pages for people (roles, break glass, sign-in, passwords). Nobody is shown a
password: a new person, or a reset one, gets a one-time set-password link, shown once to
the admin on the page that answers the POST, to hand over. Under four-eyes each of these is
a proposal another admin decides on the changes page (where the link is shown instead)."""

from __future__ import annotations

from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.views.decorators.http import require_http_methods, require_POST

from leaseboard.domain.authority import Act
from leaseboard.domain.errors import LeaseboardError, NotFound
from leaseboard.policy import selectors
from leaseboard.policy.forms import PersonForm, PersonRolesForm, errors_to_form
from leaseboard.policy.models import PolicyChange
from leaseboard.policy.services import people
from leaseboard.policy.services.common import SettingsInvalid
from leaseboard.web.pages import render_page
from leaseboard.web.refusals import refuse, refused_for_form, with_code
from leaseboard.web.roles import act_required, acting


def _people_page(request: HttpRequest, form: PersonForm, shown: dict | None = None) -> HttpResponse:
    from django.conf import settings

    context = {
        "people": selectors.people_list(),
        "form": form,
        "shown": shown,
        "link_hours": settings.PASSWORD_RESET_TIMEOUT // 3600,
    }
    return render_page(request, "policy/people.html", context)


# deliberate: a settings page's view, its form and act its own; alike in shape only.
@require_http_methods(["GET", "POST"])
@act_required(Act.MANAGE_USERS)
def people_page(request: HttpRequest) -> HttpResponse:
    form = PersonForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        d = form.cleaned_data
        try:
            new = people.person_create(
                username=d["username"],
                roles=d["roles"],
                scopes=d["scopes"],
                email=d["email"],
                **acting(request),
            )
        except SettingsInvalid as exc:
            errors_to_form(form, exc.errors)
        except LeaseboardError as exc:
            form.add_error(None, refused_for_form(exc))
        else:
            if new.proposal is not None:
                messages.success(request, _waiting(new.proposal))
                return redirect("policy:people")
            assert new.user is not None
            return _people_page(
                request, PersonForm(), _link_shown(new.user.get_username(), new.link)
            )
    return _people_page(request, form)


def _link_shown(who: str, link: str) -> dict[str, str]:
    return {"who": who, "what": "one-time set-password link", "secret": link}


def _waiting(proposal: PolicyChange) -> str:
    return f"Change {proposal.pk} ({proposal.what}) waits for a second admin (four-eyes)."


@require_POST
@act_required(Act.MANAGE_USERS)
def person_update(request: HttpRequest, username: str) -> HttpResponse:
    form = PersonRolesForm(request.POST)
    if not form.is_valid():
        messages.error(request, "Choose roles among the listed ones.")
        return redirect("policy:people")
    d = form.cleaned_data
    try:
        # deliberate: the form's fields by name, one a line; alike in shape only.
        changed = people.person_update(
            username=username,
            roles=d["roles"],
            scopes=d["scopes"],
            break_glass=d["break_glass"],
            active=d["active"],
            **acting(request),
        )
    except NotFound:
        raise Http404("no such person") from None
    except SettingsInvalid as exc:
        messages.error(request, with_code(f"{username}: {exc.detail}", "validation_error"))
    except LeaseboardError as exc:
        refuse(request, exc, prefix=f"{username}: ")
    else:
        if changed.proposal is not None:
            messages.success(request, _waiting(changed.proposal))
        else:
            messages.success(
                request, f"{username} saved." if changed.changed else "Nothing changed."
            )
    return redirect("policy:people")


@require_POST
@act_required(Act.MANAGE_USERS)
def person_password(request: HttpRequest, username: str) -> HttpResponse:
    try:
        reset = people.person_password_reset(username=username, **acting(request))
    except NotFound:
        raise Http404("no such person") from None
    except LeaseboardError as exc:
        refuse(request, exc, prefix=f"{username}: ")
        return redirect("policy:people")
    if reset.proposal is not None:
        messages.success(request, _waiting(reset.proposal))
        return redirect("policy:people")
    return _people_page(request, PersonForm(), _link_shown(username, reset.link))
