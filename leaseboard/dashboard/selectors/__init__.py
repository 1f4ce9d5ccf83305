"""Dashboard reads, one module per page (live, alerts, work_item, executor, audit, fleet,
revocations) plus the lease rows they share and the renewal chart's geometry (charts).

Each page runs a fixed number of queries whatever its size: related rows come through
select_related, lists are keyset-paginated on indexed columns, and counters are bounded
(`LIMIT cap+1` under the count), never an exact COUNT(*) over a big table. Certainty is
computed from the stored times and the database clock, so a page shows an expiry the
instant it happens, before any sweep writes it down. Nothing here writes.
"""
