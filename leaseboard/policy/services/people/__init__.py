"""People who sign in, in one place: create one, set their roles (each for every queue or
for named queues), the break-glass permission and whether they may sign in, reset a
password. All audited before -> after. The roles are `Role` (leaseboard.domain.authority),
each the auth group of its name; ROLE_NAMES is the one list of their names.

Separation of duties (docs/design.md §9): nobody changes their own roles, break-glass,
sign-in or password (the authority's MANAGE_USERS never has SELF). No admin is ever shown
another person's password: a new person, or a reset one, gets a one-time set-password link
to hand over, and an unusable password until they use it. With four-eyes on, whatever gives
power (a role, break-glass, sign-in, a new person, a reset) is a proposal a second admin
decides; whatever takes it away applies at once (containment), as long as enough admins
remain to decide: one, or two under four-eyes. Every write of what a person may do goes
through guard.write_person_locked, which holds that guard (the last-admin guard on every
path: the settings page, the shell, `config apply`, single sign-on, a second admin's
approval).

One subject per module: grants (role names, queue scopes, the `role:queue` form), records
(the locked row, snapshot, audit entry, proposal), guard (the last admin, the one writer),
create, update, passwords.
"""

from leaseboard.policy.services.people.create import (
    NewPerson,
    person_create,
    person_create_apply_locked,
)
from leaseboard.policy.services.people.grants import (
    BREAK_GLASS,
    QUEUE_NAME,
    ROLE_NAMES,
    grants_checked,
    grants_listed,
    grants_noted,
    grants_parsed,
    scopes_checked,
)
from leaseboard.policy.services.people.guard import (
    active_admins,
    admins_needed,
    bootstrapping,
    write_person_locked,
)
from leaseboard.policy.services.people.passwords import (
    PasswordReset,
    password_problems,
    password_reset_apply_locked,
    person_password_reset,
    set_password_link,
)
from leaseboard.policy.services.people.records import person_snapshot, user_locked
from leaseboard.policy.services.people.update import (
    PersonChange,
    person_grants_apply_locked,
    person_update,
    person_update_locked,
)

__all__ = [
    "BREAK_GLASS",
    "QUEUE_NAME",
    "ROLE_NAMES",
    "NewPerson",
    "PasswordReset",
    "PersonChange",
    "active_admins",
    "admins_needed",
    "bootstrapping",
    "grants_checked",
    "grants_listed",
    "grants_noted",
    "grants_parsed",
    "password_problems",
    "password_reset_apply_locked",
    "person_create",
    "person_create_apply_locked",
    "person_grants_apply_locked",
    "person_password_reset",
    "person_snapshot",
    "person_update",
    "person_update_locked",
    "scopes_checked",
    "set_password_link",
    "user_locked",
    "write_person_locked",
]
