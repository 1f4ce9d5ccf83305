"""Leaseboard: renewable, fenced leases on work for autonomous agents.

Deliberately empty. The agent SDK (`leaseboard_client`) and the recipient guard
(`leaseboard_recipient`) are not in here: they ship as the leaseboard-client distribution in
clients/python, for agents and recipients that have no Django. The Celery app is loaded by
the sweeps app's `ready()` in Django processes, and by `celery -A leaseboard` (which finds
leaseboard/celery.py) in workers.
"""
