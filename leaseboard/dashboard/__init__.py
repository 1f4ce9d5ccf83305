"""The operator dashboard: server-rendered htmx pages over the lease runtime.

Reads go through `selectors` (one module per page), the one write (acknowledge) through
`services`; views stay thin and check roles on the server (`leaseboard.web.roles`).
Nothing here imports the takeover app, and the takeover app imports nothing from here.
"""
