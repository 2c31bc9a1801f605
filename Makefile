# Quickstart: `make run` (set up and serve on 127.0.0.1:8000) and `make test` (set up and run the suite).
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
REQ_HASH := $(shell cat requirements.txt requirements-dev.txt | sha1sum | cut -c1-12)
STAMP := $(VENV)/.installed-$(REQ_HASH)
HOST ?= 127.0.0.1
PORT ?= 8000

.PHONY: setup run test lint bench worker clean

setup: $(STAMP)

$(STAMP): requirements.txt requirements-dev.txt
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@# torch first, as the CPU build, so that no package pulls a multi-GB GPU build.
	$(PY) -m pip install -q --disable-pip-version-check torch==2.13.0
	$(PY) -m pip install -q --disable-pip-version-check -r requirements-dev.txt
	@rm -f $(VENV)/.installed-*
	@touch $@

run: setup
	$(PY) manage.py migrate --noinput
	$(PY) manage.py bootstrapdemo
	$(VENV)/bin/daphne -b $(HOST) -p $(PORT) voiceagent.asgi:application

test: setup
	$(PY) manage.py check --fail-level WARNING
	$(PY) manage.py makemigrations --check --dry-run
	$(VENV)/bin/pytest

lint: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

worker: setup
	$(VENV)/bin/celery -A voiceagent worker --beat --loglevel INFO

bench: setup
	$(PY) bench/api_load.py

clean:
	rm -rf $(VENV) var staticfiles
