"""Human takeover: requests, approvals, temporary standing, interventions (DESIGN §7)."""
