"""Leaseboard: renewable, fenced leases on work for autonomous agents.

Deliberately empty: `leaseboard.client` and `leaseboard.recipient` are imported by agents
and recipients that have no Django. The Celery app is loaded by the sweeps app's
`ready()` in Django processes, and by `celery -A leaseboard` (which finds
leaseboard/celery.py) in workers.
"""
