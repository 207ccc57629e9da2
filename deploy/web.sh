#!/bin/sh
# The web process: gunicorn serving instatic.wsgi, access log on stdout, errors on stderr;
# both one JSON object per line when INSTATIC_LOG_FORMAT=json (deploy/gunicorn.conf.py).
#
# Environment (defaults in brackets):
#   PORT                       port to listen on [8000]
#   INSTATIC_WEB_ADDRESS       address to bind [0.0.0.0]
#   WEB_CONCURRENCY            gunicorn worker processes [2]
#   GUNICORN_TIMEOUT           seconds a request may take before its worker is restarted [30]
#   GUNICORN_GRACEFUL_TIMEOUT  seconds workers get to finish requests after SIGTERM [20]
#   GUNICORN_CMD_ARGS          further gunicorn options (gunicorn reads it itself)
# Extra arguments are passed to gunicorn and override the options above.
set -eu
cd "$(dirname "$0")/.."

# A bad setting stops here with one line (gunicorn would print a traceback per worker).
python -m instatic.process_options web
exec gunicorn instatic.wsgi:application \
    --config deploy/gunicorn.conf.py \
    --bind "${INSTATIC_WEB_ADDRESS:-0.0.0.0}:${PORT:-8000}" \
    --workers "${WEB_CONCURRENCY:-2}" \
    --timeout "${GUNICORN_TIMEOUT:-30}" \
    --graceful-timeout "${GUNICORN_GRACEFUL_TIMEOUT:-20}" \
    --access-logfile - \
    --error-logfile - \
    "$@"
