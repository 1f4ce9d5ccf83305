"""The lease runtime: models, services (writes) and selectors (reads)."""
