"""The web layer: what the views of several apps share — roles and the server-side role
checks, who acts under which request id, page rendering (header, no-store, htmx page or
fragment), keyset paging, safe redirects, CSV export and the template filters.

It imports Django and core models only, never an app's views, selectors or services:
dashboard and takeovers both build on it instead of importing each other.
"""
