#!/bin/sh
# One-shot: apply database migrations, then exit (run before web and scheduler start).
# Extra arguments go to `manage.py migrate`.
set -eu
cd "$(dirname "$0")/.."

exec python manage.py migrate --noinput "$@"
