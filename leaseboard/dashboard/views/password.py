"""A person sets their own password through the one-time link an admin handed them (a new
person, or a reset one): Django's PasswordResetConfirmView, whose token is spent by the
change it allows. Nobody else ever sees the password; the change is audited as the
person's own."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import views as auth_views
from django.db import transaction
from django.http import HttpResponse
from django.urls import reverse_lazy

from leaseboard.core.clock import db_now_ms
from leaseboard.core.services.audit import audit_record


class PasswordSet(auth_views.PasswordResetConfirmView):
    template_name = "registration/password_set.html"
    success_url = reverse_lazy("dashboard:password_set_done")
    post_reset_login = False  # they sign in with it, through the throttled sign-in

    def form_valid(self, form: Any) -> HttpResponse:
        with transaction.atomic():
            response = super().form_valid(form)
            user = form.user
            audit_record(
                at_ms=db_now_ms(),
                actor_user_id=user.pk,
                actor_name=user.get_username(),
                actor_role="self",
                action="user.password_set",
                object_type="user",
                object_id=str(user.pk),
                before={"username": user.get_username()},
                after={"username": user.get_username(), "password": "(set by its owner)"},
            )
        return response


class PasswordSetDone(auth_views.PasswordResetCompleteView):
    template_name = "registration/password_set_done.html"
