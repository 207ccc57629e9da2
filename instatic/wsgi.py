"""WSGI entry point (gunicorn ``instatic.wsgi``)."""

import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "instatic.settings")
application = get_wsgi_application()

# A bad jobs.py declaration does not stop the site; say so once in the log (coordination.E001).
from coordination.registry import log_declaration_errors  # noqa: E402

log_declaration_errors()
