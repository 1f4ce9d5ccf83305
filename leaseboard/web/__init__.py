"""The web layer: what the views of several apps share — roles and the server-side role
checks, who acts under which request id, page rendering (header and its badges, no-store,
htmx page or fragment), safe redirects, refusals and the 403/404/500 pages, CSV export, the
SVG charts' geometry and the template filters.

It imports Django, core and the domain only, never an app's views, selectors or services:
dashboard and takeovers both build on it instead of importing each other.
"""
