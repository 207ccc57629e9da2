"""WSGI entry point (gunicorn ``instatic.wsgi``)."""

import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "instatic.settings")
application = get_wsgi_application()
