"""Thin takeover views, one module per subject: requests (single and bulk), standing (what
the operator does under human standing), approvals (the approver's decisions) and
interventions (the manager's records, summary, export and review).

Every view is gated on the server by the act it performs (`act_required`); writes go through
services, reads through selectors; a refusal is a form error or a message, never a 500
and never a partial write. Shared web code comes from `leaseboard.web`, never from the
dashboard app.
"""
