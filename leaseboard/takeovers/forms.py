"""Browser forms for the takeover workflow; services re-check everything."""

from __future__ import annotations

from django import forms

from leaseboard.takeovers.models import ReasonCategory
from leaseboard.takeovers.services import standing_default_ms, standing_max_ms, standing_min_ms

# No preselected category: the person says why, every time.
REASON_CHOICES = [("", "choose a reason…"), *ReasonCategory.choices]


class TakeoverRequestForm(forms.Form):
    reason_category = forms.ChoiceField(choices=REASON_CHOICES, label="Reason")
    reason_text = forms.CharField(
        max_length=1000, widget=forms.Textarea(attrs={"rows": 3}), label="Why"
    )
    standing_minutes = forms.IntegerField(label="Standing (minutes)")
    grantee_operator = forms.CharField(
        max_length=150,
        required=False,
        label="Standing to another operator (username; blank: you)",
    )
    agent = forms.CharField(
        max_length=150, required=False, label="Or standing to an agent (name; blank: you)"
    )
    hold_while_waiting = forms.BooleanField(
        required=False,
        label=(
            "Hold the agent while this waits (it keeps renewing; its new effects are refused). "
            "The hold ends with the request: approved, rejected or expired; a hold an operator "
            "placed separately stays"
        ),
    )

    def __init__(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        super().__init__(*args, **kwargs)
        low, high = standing_min_ms() // 60_000, standing_max_ms() // 60_000
        field = self.fields["standing_minutes"]
        field.min_value, field.max_value = low, high
        field.initial = standing_default_ms() // 60_000
        field.widget.attrs.update({"min": low, "max": high})

    def clean_standing_minutes(self) -> int:
        value = self.cleaned_data["standing_minutes"]
        low, high = standing_min_ms() // 60_000, standing_max_ms() // 60_000
        if not low <= value <= high:
            raise forms.ValidationError(f"between {low} and {high} minutes")
        return value


class BulkRequestForm(forms.Form):
    work_keys = forms.CharField(widget=forms.Textarea(attrs={"rows": 5}), label="Work keys")
    reason_category = forms.ChoiceField(choices=REASON_CHOICES, label="Reason")
    reason_text = forms.CharField(max_length=1000, label="Why")
    idempotency_key = forms.CharField(max_length=200, widget=forms.HiddenInput)
