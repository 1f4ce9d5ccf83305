"""Takeover reads, one module per subject: the approver's queues (approvals), the operator's
standing, intervention records with filters and keyset pages (records), one record's
timeline, and the manager's summary. Fixed query counts; nothing here writes."""
