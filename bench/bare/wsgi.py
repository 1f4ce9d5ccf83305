"""WSGI entry of the bare project: `gunicorn bench.bare.wsgi:application`."""

import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "bench.bare.settings")
application = get_wsgi_application()
