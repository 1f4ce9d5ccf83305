"""The commands that issue or withdraw a secret (leaseboard/core/management/secret_command.py),
through `recipient_webhook`: the secret alone on stdout, once, what it is on stderr; the
withdrawal says what it did; a refusal is a CommandError, not a traceback; both audited."""

from __future__ import annotations

import io

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from leaseboard.core.management.commands.recipient_webhook import Command as RecipientWebhook
from leaseboard.core.management.secret_command import SecretCommand
from leaseboard.core.models import AuditEntry, Recipient

pytestmark = [pytest.mark.postgres, pytest.mark.django_db]


def _run(*args: str) -> tuple[str, str]:
    out, err = io.StringIO(), io.StringIO()
    call_command("recipient_webhook", *args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def test_set_prints_the_signing_secret_alone_on_stdout_and_clear_removes_it(recipient) -> None:  # type: ignore[no-untyped-def]
    assert issubclass(RecipientWebhook, SecretCommand)
    recipient("ledger")
    out, err = _run("set", "ledger", "https://hooks.example.com/epochs")
    secret = out.strip()
    assert secret.startswith("whsec_") and "\n" not in secret
    assert "epoch notices go to https://hooks.example.com/epochs" in err and secret not in err
    row = Recipient.objects.get(name="ledger")
    assert (row.webhook_url, row.webhook_secret) == ("https://hooks.example.com/epochs", secret)

    out, _ = _run("clear", "ledger")
    assert "webhook removed" in out
    assert "nothing to remove" in _run("clear", "ledger")[0]
    actions = list(
        AuditEntry.objects.filter(object_type="recipient")
        .order_by("seq")
        .values_list("action", flat=True)
    )
    assert actions[-2:] == ["recipient.webhook_set", "recipient.webhook_clear"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("set", "ledger"), "set needs the webhook URL"),
        (("set", "ledger", "http://169.254.169.254/latest"), "not a public one"),
        (("set", "nobody", "https://hooks.example.com/"), "nobody"),
    ],
)
def test_a_refusal_is_a_command_error_and_changes_nothing(recipient, args, message) -> None:  # type: ignore[no-untyped-def]
    recipient("ledger")
    with pytest.raises(CommandError, match=message):
        _run(*args)
    assert Recipient.objects.get(name="ledger").webhook_url == ""
