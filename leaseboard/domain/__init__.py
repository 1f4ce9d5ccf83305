"""Pure domain rules: the authority table, certainty states, timing policy, errors,
reconciliation, fencing tokens, and the vocabulary (each enum defined once).

Everything here receives `now` as an argument and imports no Django, Celery or Redis;
tests/architecture/test_layers.py enforces that.
"""
