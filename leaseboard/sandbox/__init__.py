"""Payments sandbox: a demo recipient that fences its own writes with the recipient guard.

It shows DESIGN §11's rule end to end: the epoch check commits in the same transaction as
the recipient's ledger write. Nothing else in Leaseboard imports this app.
"""
