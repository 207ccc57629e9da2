# Instatic: `make run` to try it, `make test` to check it. See README.md.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
DEV_STAMP := $(VENV)/.installed-dev
# The engine's tests on Django 6.1, which needs Python 3.12: a venv of their own.
VENV61 := .venv-django61
STAMP61 := $(VENV61)/.installed

.PHONY: run test lint format bench ha-demo chaos clean system-packages lock

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip

# Hash-locked: pip refuses any file whose hash is not in the lock (`make lock` writes them).
$(STAMP): requirements.txt | $(PY)
	$(PY) -m pip install --quiet --require-hashes -r requirements.txt
	touch $@

# mysqlclient is only needed for MySQL/MariaDB; install it when the client headers exist.
$(DEV_STAMP): requirements-dev.txt requirements-mysql.txt $(STAMP)
	$(PY) -m pip install --quiet --require-hashes -r requirements-dev.txt
	@if pkg-config --exists libmariadb 2>/dev/null || pkg-config --exists mysqlclient 2>/dev/null; then \
		$(PY) -m pip install --quiet --require-hashes -r requirements-mysql.txt; \
	else echo "NOTICE: MySQL client headers not found; MariaDB tests will be skipped (apt-get install libmariadb-dev pkg-config)."; fi
	touch $@

# Made with a Python 3.12 found on PATH or in pyenv's versions (devtools/newest_django.py).
# Without one: a notice, no venv, and the test runner skips that run (a failure under CI=true).
$(STAMP61): requirements-django61.txt
	@python=$$($(PYTHON) -m devtools.newest_django) || exit 0; \
	set -ex; \
	$$python -m venv $(VENV61); \
	$(VENV61)/bin/python -m pip install --quiet --upgrade pip; \
	$(VENV61)/bin/python -m pip install --quiet --require-hashes -r requirements-django61.txt; \
	touch $@

run: $(STAMP)
	$(PY) -m devtools.run_local

# Debian packages the tests use (database servers, PgBouncer, Chromium...): installed when root
# or password-less sudo allows, else the one command to run is printed. One list, in the script.
system-packages:
	@devtools/system-packages

# System packages first: the MySQL driver is only built when the MariaDB headers are there.
test: system-packages $(STAMP61)
	$(MAKE) lint
	$(PY) -m devtools.testsuite $(PYTEST_ARGS)

lint: $(DEV_STAMP)
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .
	$(VENV)/bin/hadolint Dockerfile

format: $(DEV_STAMP)
	$(PY) -m ruff check --fix .
	$(PY) -m ruff format .

bench: $(DEV_STAMP)
	$(PY) -m bench

# A throwaway PostgreSQL, three scheduler replicas and the web server on 127.0.0.1; Ctrl-C ends it.
ha-demo: $(STAMP)
	$(PY) -m devtools.ha_demo

# Re-lock the dependencies after editing a requirements*.in file: pins and hashes for Python 3.11,
# and for 3.12 the Django 6.1 run's (the site's pins with requirements-django61.overrides' Django).
LOCK_FOR := $(VENV)/bin/uv pip compile --quiet --generate-hashes \
	--custom-compile-command "make lock" --python-version
LOCK := $(LOCK_FOR) 3.11
lock: $(DEV_STAMP)
	$(LOCK) requirements.in -o requirements.txt
	$(LOCK) requirements-dev.in -o requirements-dev.txt
	$(LOCK) requirements-mysql.in -o requirements-mysql.txt
	$(LOCK_FOR) 3.12 requirements-django61.in --overrides requirements-django61.overrides \
		-o requirements-django61.txt

clean:
	rm -rf $(VENV) $(VENV61) var staticfiles

# Fault-injection soak: CHAOS_DURATION seconds (default 180), reproducible from CHAOS_SEED, on
# CHAOS_VENDOR (default: a PostgreSQL primary with a synchronous standby, so failovers are faults
# too; postgresql for one server, mariadb).
chaos: $(DEV_STAMP)
	$(PY) -m devtools.chaos --duration $${CHAOS_DURATION:-180} --seed $${CHAOS_SEED:-1} \
		--vendor $${CHAOS_VENDOR:-postgresql-replicated}
