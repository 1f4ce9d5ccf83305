# lease_expired_ended_idx: the expired leases by end time, newest first, for the live page's
# "expired in the last hour" counter. In an expiry storm the statistics say no lease has
# expired, and PostgreSQL planned that count over lease_holder_state_idx: every expired
# lease read, then sorted for the newest 1,001 (auto_explain in make storm: 2,487 ->
# 34,634 buffers a statement as the storm's leases expired). Over this index the count is an
# ordered walk that stops at its cap. Partial: only an expiry writes an entry.
#
# Built CONCURRENTLY on PostgreSQL, as 0028's: a plain CREATE INDEX would block every
# renew and grant while it reads core_lease. SQLite builds it as usual.

from importlib import import_module

from django.db import migrations, models

AddIndexConcurrentlyOnPostgres = import_module(
    "leaseboard.core.migrations.0028_lease_jeopardy_due_idx"
).AddIndexConcurrentlyOnPostgres


class Migration(migrations.Migration):
    atomic = False  # CREATE INDEX CONCURRENTLY runs outside a transaction

    dependencies = [("core", "0028_lease_jeopardy_due_idx")]

    operations = [
        AddIndexConcurrentlyOnPostgres(
            model_name="lease",
            index=models.Index(
                condition=models.Q(("state", "expired")),
                fields=["-ended_at_ms"],
                name="lease_expired_ended_idx",
            ),
        ),
    ]
