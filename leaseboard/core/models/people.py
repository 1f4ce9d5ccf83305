"""A person's role held for named queues only (docs/design.md §9). The role itself is the
auth group of its name; without a RoleScope row it is held for every queue."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q

from leaseboard.domain.authority import ROLE_NAMES, SCOPABLE_ROLES


class RoleScope(models.Model):
    """`user` holds `role` for `queues` (queue names) and no other queue. The queues are
    names, as an agent credential's are, so that config as code can name a queue that a
    later file creates; an unknown name simply matches no work."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    role = models.CharField(max_length=20, choices=[(name, name) for name in ROLE_NAMES])
    queues = models.JSONField(default=list)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["user", "role"], name="role_scope_one_per_role"),
            # The admin configures the whole installation: never held for some queues.
            models.CheckConstraint(
                condition=Q(role__in=sorted(r.value for r in SCOPABLE_ROLES)),
                name="role_scope_scopable_role",
            ),
            # Held for no queue is not holding the role: that is removing it.
            models.CheckConstraint(condition=~Q(queues=[]), name="role_scope_some_queue"),
        ]

    def __str__(self) -> str:
        return f"{self.user_id}: {self.role} for {', '.join(self.queues)}"
