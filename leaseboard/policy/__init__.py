"""Configuration a team can run: queues and their admission envelopes, commit-time rules
(with optional four-eyes), people and roles, agent credentials, notification targets —
in the settings pages (/settings/) and as code (`manage.py config export|apply`).

The rules engine and the rule rows live in core (the effect service asks them); this app
writes configuration through services that ask the authority (Act.CONFIGURE_QUEUE,
CHANGE_RULE, ...) and audit every change with before -> after.
"""
