"""Human takeover: requests, approvals, temporary standing, interventions (docs/design.md §7)."""
