"""Sweeps: materialize lease certainty (active -> jeopardy -> expired), open alerts, notify,
recover from outages, prune history, and export metrics. Runs on Celery workers."""
