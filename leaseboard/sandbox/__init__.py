"""Payments sandbox: a demo recipient that fences its own writes with the recipient guard.

It shows the rule of docs/design.md §11 end to end: the epoch check commits in the same
transaction as the recipient's ledger write. Nothing else in Leaseboard imports this app.
"""
