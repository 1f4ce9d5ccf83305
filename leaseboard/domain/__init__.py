"""Pure domain rules: certainty states, timing policy, errors, reconciliation, fencing.

Everything here receives `now` as an argument and imports no Django, Celery or Redis;
tests/test_domain_purity.py enforces that.
"""
