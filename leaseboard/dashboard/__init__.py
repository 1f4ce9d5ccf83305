"""The operator dashboard: server-rendered htmx pages over the lease runtime.

Reads go through `selectors`, the one write (acknowledge) through `services`; views stay
thin and check roles on the server (`roles.role_required`).
"""
