"""Fencing private keys leave the database in plaintext: each is sealed (AES-256-GCM)
under the key-encryption key from the environment (LEASEBOARD_FENCING_KEK), the plaintext
column is emptied and dropped, and keys get a lifecycle in database-clock milliseconds
(created, activate_at, retired_at, publish_until) for `manage.py fencing_keys`.

Existing keys keep their kid and keep signing and verifying: an unretired key was
activated when it was created; a retired one had already left the key set. The plaintext
may survive in backups, the WAL and free pages taken before this: rotate the keys
afterwards (docs/deployment.md, "Fencing keys"). Processes running the old code cannot
sign after this migration: restart them right after it.
"""

from django.db import migrations, models
from django.db.models import Q

from leaseboard.core.models.leases import FencingKeyring


def _ms(when):
    return int(when.timestamp() * 1000) if when is not None else None


def seal_plaintext_keys(apps, schema_editor, keyring=None):
    FencingKey = apps.get_model("core", "FencingKey")
    keyring = keyring or FencingKeyring.from_settings()
    for key in FencingKey.objects.order_by("id"):
        sealed, kek_id = keyring.seal(bytes(key.private_key), kid=key.kid)
        retired = _ms(key.retired_at)
        FencingKey.objects.filter(id=key.id).update(
            private_key_sealed=sealed,
            kek_id=kek_id,
            private_key=b"",  # the newest row version holds no plaintext, even before the drop
            created_at_ms=_ms(key.created_at),
            activate_at_ms=_ms(key.created_at),
            retired_at_ms=retired,
            publish_until_ms=retired,
        )


def unseal_to_plaintext(apps, schema_editor, keyring=None):
    # Going back restores the old shape (and its weakness); every key must still open.
    from datetime import UTC, datetime

    FencingKey = apps.get_model("core", "FencingKey")
    keyring = keyring or FencingKeyring.from_settings()
    for key in FencingKey.objects.order_by("id"):
        private = keyring.open(key.private_key_sealed, kid=key.kid, kek_id=key.kek_id)
        FencingKey.objects.filter(id=key.id).update(
            private_key=private,
            created_at=datetime.fromtimestamp(key.created_at_ms / 1000, UTC),
            retired_at=(
                datetime.fromtimestamp(key.retired_at_ms / 1000, UTC)
                if key.retired_at_ms is not None
                else None
            ),
        )


class Migration(migrations.Migration):
    dependencies = [
        ("core", "0004_audit_keyed_chain_and_truncate_guard"),
    ]

    operations = [
        migrations.AddField(
            model_name="fencingkey",
            name="private_key_sealed",
            field=models.BinaryField(default=b""),
            preserve_default=False,
        ),
        migrations.AddField(
            model_name="fencingkey",
            name="kek_id",
            field=models.CharField(default="", max_length=16),
            preserve_default=False,
        ),
        migrations.AddField(
            model_name="fencingkey",
            name="created_at_ms",
            field=models.BigIntegerField(default=0),
            preserve_default=False,
        ),
        migrations.AddField(
            model_name="fencingkey",
            name="activate_at_ms",
            field=models.BigIntegerField(default=0),
            preserve_default=False,
        ),
        migrations.AddField(
            model_name="fencingkey",
            name="retired_at_ms",
            field=models.BigIntegerField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="fencingkey",
            name="publish_until_ms",
            field=models.BigIntegerField(blank=True, null=True),
        ),
        migrations.AlterField(
            model_name="fencingkey",
            name="private_key",
            field=models.BinaryField(default=b""),
        ),
        migrations.RunPython(seal_plaintext_keys, unseal_to_plaintext),
        migrations.RemoveField(model_name="fencingkey", name="private_key"),
        migrations.RemoveField(model_name="fencingkey", name="created_at"),
        migrations.RemoveField(model_name="fencingkey", name="retired_at"),
        migrations.AddConstraint(
            model_name="fencingkey",
            constraint=models.CheckConstraint(
                condition=Q(retired_at_ms__isnull=True, publish_until_ms__isnull=True)
                | Q(
                    retired_at_ms__isnull=False,
                    publish_until_ms__gte=models.F("retired_at_ms"),
                ),
                name="fencingkey_retired_is_published_until_after",
            ),
        ),
    ]
