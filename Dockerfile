# syntax=docker/dockerfile:1
# Instatic: one image, three process kinds (see deploy/entrypoint.sh):
#   docker run IMAGE              the web server (gunicorn, port 8000)
#   docker run IMAGE scheduler    runscheduler (metrics and /healthz on port 9100)
#   docker run IMAGE migrate      apply migrations once, then exit
# docker-compose.yml wires them to PostgreSQL; docs/ha.md explains running N replicas.

ARG PYTHON_IMAGE=python:3.11-slim

# --- build: install the pinned dependencies into a virtualenv --------------------------------
FROM ${PYTHON_IMAGE} AS build
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1 \
    PYTHONDONTWRITEBYTECODE=1
RUN python -m venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH
COPY requirements.txt /tmp/requirements.txt
# Every dependency ships a wheel (psycopg binary included), so no compiler is needed.
RUN pip install --no-cache-dir --require-hashes --only-binary=:all: -r /tmp/requirements.txt

# --- runtime: the virtualenv, the code and the collected static files, as a non-root user ---
FROM ${PYTHON_IMAGE} AS runtime
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    DJANGO_SETTINGS_MODULE=instatic.settings \
    INSTATIC_VAR_DIR=/app/var \
    INSTATIC_STATIC_ROOT=/app/staticfiles \
    PORT=8000 \
    INSTATIC_METRICS_PORT=9100
RUN groupadd --system --gid 10001 instatic \
    && useradd --system --uid 10001 --gid instatic --home-dir /app --no-create-home \
        --shell /usr/sbin/nologin instatic
WORKDIR /app
COPY --from=build /opt/venv /opt/venv
# The code stays owned by root: the app user can read it but not change it.
COPY . /app
# Only var/ (the default SQLite file, lock files, uploaded images) is writable by the app user;
# var/media exists in the image so that a volume mounted there starts owned by that user.
# Static files are collected once, at build time, for whitenoise to serve. Settings refuse to
# load without a secret in production mode, so collectstatic gets a throwaway value that
# exists only in this RUN's environment (never in the image's configuration).
RUN install -d -o instatic -g instatic -m 0750 /app/var /app/var/media \
    && DJANGO_SECRET_KEY=collectstatic-at-build-time-only-not-used-at-run-time \
        python manage.py collectstatic --noinput --verbosity 0

# The numeric id of the instatic user created above (numeric, so Kubernetes' runAsNonRoot
# can verify it).
USER 10001:10001
EXPOSE 8000 9100
# Picks web or scheduler from PID 1 (see deploy/healthcheck.py); compose names it explicitly.
HEALTHCHECK --interval=15s --timeout=5s --start-period=30s --retries=3 \
    CMD ["python", "/app/deploy/healthcheck.py"]
ENTRYPOINT ["/app/deploy/entrypoint.sh"]
CMD ["web"]
