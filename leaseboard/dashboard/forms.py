"""Browser forms for what an operator does to agents directly (revoke, quarantine); the
core services re-check everything."""

from __future__ import annotations

from django import forms

from leaseboard.core.models import ReasonCategory

# No preselected category: the person says why, every time.
REASON_CHOICES = [("", "choose a reason…"), *ReasonCategory.choices]


class ReasonForm(forms.Form):
    reason_category = forms.ChoiceField(choices=REASON_CHOICES, label="Reason")
    reason_text = forms.CharField(
        max_length=1000, widget=forms.Textarea(attrs={"rows": 2}), label="Why (the agent is told)"
    )


class BulkRevokeForm(ReasonForm):
    lease_ids = forms.CharField(widget=forms.MultipleHiddenInput, required=False)
    idempotency_key = forms.CharField(max_length=200, widget=forms.HiddenInput)


class LiftForm(forms.Form):
    note = forms.CharField(max_length=1000, label="Why it is safe again")
