#!/bin/sh
# The scheduler process: runscheduler on every replica, with Prometheus metrics and /healthz
# (this node's heartbeat freshness) served on INSTATIC_METRICS_PORT.
#
# Environment (defaults in brackets):
#   INSTATIC_METRICS_PORT     port of the metrics and health server [9100]
#   INSTATIC_METRICS_ADDRESS  address it binds [0.0.0.0]
# Extra arguments go to runscheduler, e.g. `--group publishing` or `--node-name replica-1`.
set -eu
cd "$(dirname "$0")/.."

# A bad setting stops here with one line, like manage.py's, before runscheduler starts.
python -m instatic.process_options scheduler
exec python manage.py runscheduler \
    --metrics-port "${INSTATIC_METRICS_PORT:-9100}" \
    --metrics-address "${INSTATIC_METRICS_ADDRESS:-0.0.0.0}" \
    "$@"
