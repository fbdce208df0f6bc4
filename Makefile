# Fleetline: `make run` starts the whole product, `make test` checks it.
# The distribution's CPython 3.11 where there is one (Debian links the interpreter statically: the
# engine's cycle and a replay run about 12 % faster than on a build that calls into a shared
# libpython, such as pyenv's), else python3.
PYTHON ?= $(firstword $(wildcard /usr/bin/python3.11) python3)
VENV ?= .venv
PY := $(VENV)/bin/python

.PHONY: run run-slurm slurm-up slurm-down test test-pure fuzz lint typecheck install install-dev migrate bench clean

# The demo: DEBUG pages, demo data and logins, demo arrivals and failure injection (each can be
# overridden from the environment); warnings and errors only on the terminal.
run: $(VENV)/.installed
	DEBUG=$${DEBUG:-1} FLEETLINE_DEMO=$${FLEETLINE_DEMO:-1} LOG_LEVEL=$${LOG_LEVEL:-WARNING} $(PY) manage.py up

# The same product driving a real Slurm cluster: the local development cluster (8 nodes x 8 GPUs
# in 2 racks, deploy/slurm/devcluster.sh; installs Slurm's Debian packages if missing, needs root)
# comes up under var/slurm, and Fleetline runs jobs on it as the demo users' cluster accounts.
run-slurm: $(VENV)/.installed slurm-up
	eval "$$(deploy/slurm/devcluster.sh env)" && FLEETLINE_BACKEND=slurm FLEETLINE_SLURM_CONF=$$SLURM_CONF \
	FLEETLINE_CLUSTER_ACCOUNTS=$${FLEETLINE_CLUSTER_ACCOUNTS:-lead=fl-lead,member=fl-member} \
	FLEETLINE_VAR_DIR=$${FLEETLINE_VAR_DIR:-var/slurm-fleetline} \
	DEBUG=$${DEBUG:-1} FLEETLINE_DEMO=$${FLEETLINE_DEMO:-1} LOG_LEVEL=$${LOG_LEVEL:-WARNING} $(PY) manage.py up

slurm-up:
	deploy/slurm/devcluster.sh install
	deploy/slurm/devcluster.sh up

slurm-down:
	deploy/slurm/devcluster.sh down

# Tests use DATABASE_URL / REDIS_URL when set; otherwise SQLite and an embedded Redis of their
# own, apart from the one `make run` uses. Settings: tests/settings.py (pyproject.toml).
test: $(VENV)/.installed-dev
	$(VENV)/bin/ruff check .
	FLEETLINE_REDIS_SOCKET=$${FLEETLINE_REDIS_SOCKET:-var/redis-test/redis.sock} \
	FLEETLINE_CHANNEL_PREFIX=fleetline-test $(PY) -m pytest $(PYTEST_ARGS)

# The engine and simulator tests are plain Python: they run without Django or pytest-django
# (pyproject's DJANGO_SETTINGS_MODULE is then an option nobody knows, hence the filter).
test-pure: $(VENV)/.installed-dev
	$(PY) -m pytest -p no:django -W ignore::pytest.PytestConfigWarning tests/engine tests/sim

# schemathesis (examples, coverage, fuzzing and stateful phases) over the whole /api/v1/ schema,
# as a team lead and as a fleet admin, against the production web process on a fresh database
# (DATABASE_URL's PostgreSQL server when set, else SQLite) and a Redis of its own; seeded and
# bounded in time (tests/fuzz/run.py; FUZZ_ARGS passes options on, e.g. --max-time-s 300).
fuzz: $(VENV)/.installed-dev
	$(PY) tests/fuzz/run.py $(FUZZ_ARGS)

lint: $(VENV)/.installed-dev
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(MAKE) typecheck

# mypy with django-stubs (configuration in pyproject.toml) over the packages that check clean:
# every application package; the tests are not clean yet.
TYPED ?= core fleet portal scheduling tenants api finance simulations observability
typecheck: $(VENV)/.installed-dev
	$(VENV)/bin/mypy $(TYPED)

install: $(VENV)/.installed
install-dev: $(VENV)/.installed-dev

$(VENV)/bin/python:
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip

$(VENV)/.installed: pyproject.toml | $(VENV)/bin/python
	$(PY) -m pip install --quiet -e .
	touch $@

$(VENV)/.installed-dev: pyproject.toml | $(VENV)/bin/python
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $@ $(VENV)/.installed

migrate: $(VENV)/.installed
	DEBUG=$${DEBUG:-1} $(PY) manage.py migrate

bench: $(VENV)/.installed-dev
	$(PY) benchmarks/engine_cycle.py

clean:
	rm -rf var staticfiles
