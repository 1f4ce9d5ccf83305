import os

from django.core.asgi import get_asgi_application

from leaseboard.telemetry import telemetry_setup

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "leaseboard.settings")
telemetry_setup()  # before the handler loads its middleware (see leaseboard/wsgi.py)
application = get_asgi_application()
