#!/bin/sh
# Container entry point: pick the process kind, then exec it so signals reach Python.
#
#   web        gunicorn serving the site (deploy/web.sh)           [default]
#   scheduler  runscheduler with metrics and /healthz (deploy/scheduler.sh)
#   migrate    apply migrations once, then exit (deploy/migrate.sh)
#   manage     any manage.py command, e.g. `manage schedulerstatus`
#   anything else is run as given (e.g. `sh` for a shell)
set -eu
cd "$(dirname "$0")/.."

kind="${1:-web}"
if [ "$#" -gt 0 ]; then
    shift
fi
case "$kind" in
    web | scheduler | migrate)
        exec "deploy/$kind.sh" "$@"
        ;;
    manage)
        exec python manage.py "$@"
        ;;
    *)
        exec "$kind" "$@"
        ;;
esac
