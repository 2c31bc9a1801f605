# Quickstart: `make run` (set up and serve on $(HOST):$(PORT), 127.0.0.1:8000 unless set) and `make test` (set up and run the suite;
# `make test-fast` leaves out the tests marked slow).
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
REQ_HASH := $(shell cat requirements.txt requirements-dev.txt | sha1sum | cut -c1-12)
STAMP := $(VENV)/.installed-$(REQ_HASH)
# uv reads no pip configuration: it is given the wheel folders pip is pointed at (PIP_FIND_LINKS, or find-links
# in pip.conf), where a machine may keep torch's CPU build.
FIND_LINKS ?= $(or $(PIP_FIND_LINKS),$(shell $(PYTHON) -m pip config get global.find-links 2>/dev/null))
UV_PIP = $(VENV)/bin/uv pip install -q --python $(PY) $(foreach links,$(FIND_LINKS),--find-links $(links))
# Where `make run` serves (HOST=0.0.0.0 to accept other machines).
HOST ?= 127.0.0.1
PORT ?= 8000
# Realtime voice with nothing configured: unless REALTIME_WS_URL / REALTIME_TOKEN_SECRET are set,
# `make run` points sessions at ws://$(HOST):$(PORT) and signs tokens with a secret made once and kept
# in this git-ignored file (like var/secret_key). The service itself still refuses sessions without them.
REALTIME_SECRET_FILE := var/realtime_token_secret
# Local development: tools, webhooks and MCP servers on this machine (http://127.0.0.1:..., http://[::1]:...)
# may be called under `make run`: unless OUTBOUND_ALLOWED_NETWORKS is set (set it empty to refuse them as the
# service does by default), `make run` allows loopback. Without `make run` only public addresses are reached.
LOOPBACK_NETWORKS := 127.0.0.0/8,::1/128
# The suite runs on TEST_WORKERS pytest-xdist workers, each with a database of its own (and with REDIS_URL
# a Redis database of its own: conftest.py); many tests wait on sockets and real-time audio, so more workers
# than cores pay. Schemathesis' module runs beside them in a pytest of its own: it builds its cases while it
# is collected (~45 s of CPU), which every worker would do again. It runs at the suite's priority: at a
# lower one, a busy machine (another process at normal priority on every core) would starve it for hours.
# On two cores 4 workers keep the machine about three-quarters busy.
TEST_WORKERS ?= 4
SCHEMA_TESTS := voiceagent/tests/test_schemathesis.py
# $(call pytest_suite,MARKS): the tests that MARKS selects (a pytest -m expression) on TEST_WORKERS workers,
# with the Schemathesis module beside them; fails when either fails, and then names what failed once more at
# the end, where a CI log's tail shows it; prints the slowest tests (--durations). DATABASE_TESTS_ONLY=true
# (.ci/run's PostgreSQL suite, where conftest.py keeps the tests that can depend on the database) leaves the
# Schemathesis module to the other suite, which fuzzes the API as `make run` serves it.
define pytest_suite
	@echo 'pytest -n $(TEST_WORKERS) -m "$(1)"  &  pytest $(SCHEMA_TESTS)'
	@log=$$(mktemp -d); pid=; \
	case "$$DATABASE_TESTS_ONLY" in 1|true|yes) echo "(Schemathesis: in the other suite)" >$$log/schema ;; \
	  *) $(VENV)/bin/pytest -n 0 -rfE -m "$(1)" $(SCHEMA_TESTS) >$$log/schema 2>&1 & pid=$$! ;; esac; \
	{ $(VENV)/bin/pytest -n $(TEST_WORKERS) -rfE --durations=20 -m "$(1)" --ignore=$(SCHEMA_TESTS); \
	  echo $$? >$$log/suite.rc; } 2>&1 | tee $$log/suite; suite=$$(cat $$log/suite.rc); \
	schema=0; if [ -n "$$pid" ]; then wait $$pid; schema=$$?; fi; echo "=== $(SCHEMA_TESTS) ==="; cat $$log/schema; \
	if [ $$suite != 0 ] || [ $$schema != 0 ]; then \
		echo "=== what failed (suite $$suite, schema $$schema) ==="; grep -h -E "^(FAILED|ERROR) " $$log/suite $$log/schema; \
	fi; \
	rm -rf $$log; test $$suite = 0 && test $$schema = 0
endef

.PHONY: setup run test test-fast lint bench worker clean

# The Smart Turn v3 end-of-turn model (TURN_END_DETECTOR=smart-turn; BSD-2, by Daily) with its licence, taken
# from the pinned pipecat-ai wheel at install time (the package itself is not installed), into the git-ignored
# virtualenv where SMART_TURN_MODEL_PATH looks by default; the service never downloads it.
PIPECAT_AI_VERSION := 1.14.0
SMART_TURN := $(VENV)/share/smart-turn/smart-turn-v3.2-cpu.onnx
SMART_TURN_SHA256 := 2bb026316b14a660486a75b1733cd3fbab8c2fd0314dc9af7be49f8cca967e4f
setup: $(STAMP) $(SMART_TURN)
	@# The browser tests drive Debian's chromium: installed when missing and we are root; otherwise they are skipped.
	@command -v chromium >/dev/null || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null && \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; } || \
		echo "chromium is missing and could not be installed (needs root and apt-get): the browser tests will be skipped"
	@# The SIP tests (telephony/tests/test_sip.py) call the SIP endpoint from Debian's baresip: the same.
	@command -v baresip >/dev/null || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null && \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq baresip-core; } || \
		echo "baresip is missing and could not be installed (needs root and apt-get): the SIP tests will be skipped"
	@# The deployment test (voiceagent/tests/test_behind_nginx.py) runs Debian's nginx in front of the service: the same.
	@command -v nginx >/dev/null || [ -x /usr/sbin/nginx ] || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null && \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nginx; } || \
		echo "nginx is missing and could not be installed (needs root and apt-get): the nginx deployment test will be skipped"

$(SMART_TURN): | $(STAMP)
	$(PY) -m pip download -q --disable-pip-version-check --no-deps --only-binary=:all: \
		--dest $(VENV)/cache/pipecat-ai pipecat-ai==$(PIPECAT_AI_VERSION)
	$(PY) -c 'import sys, zipfile; from pathlib import Path; \
		wheel = zipfile.ZipFile(sys.argv[1]); out = Path(sys.argv[2]).parent; out.mkdir(parents=True, exist_ok=True); \
		(out / "LICENSE").write_bytes(wheel.read("pipecat_ai-$(PIPECAT_AI_VERSION).dist-info/licenses/LICENSE")); \
		Path(sys.argv[2] + ".part").write_bytes(wheel.read("pipecat/audio/turn/smart_turn/data/" + Path(sys.argv[2]).name))' \
		$(VENV)/cache/pipecat-ai/pipecat_ai-$(PIPECAT_AI_VERSION)-py3-none-any.whl $@
	echo "$(SMART_TURN_SHA256)  $@.part" | sha256sum -c --quiet
	mv $@.part $@

$(STAMP): requirements.txt requirements-dev.txt
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@# uv installs the pinned requirements (12 s where pip took 145 s): pip installs uv itself, at its pin.
	$(PY) -m pip install -q --disable-pip-version-check $$(grep -E '^uv==' requirements-dev.txt)
	@# torch first, as the CPU build, so that no package pulls a multi-GB GPU build.
	$(UV_PIP) torch==2.13.0
	$(UV_PIP) -r requirements-dev.txt
	@rm -f $(VENV)/.installed-*
	@touch $@

run: setup
	$(PY) manage.py migrate --noinput
	$(PY) manage.py bootstrapdemo --base-url http://$(HOST):$(PORT)
	@test -n "$$REALTIME_TOKEN_SECRET" || test -s $(REALTIME_SECRET_FILE) || \
		(mkdir -p $(dir $(REALTIME_SECRET_FILE)) && umask 077 && \
		$(PY) -c 'import secrets; print(secrets.token_urlsafe(48))' > $(REALTIME_SECRET_FILE))
	@echo "Serving on http://$(HOST):$(PORT)/ (dashboard /admin/, API docs /docs/); voice sessions at $${REALTIME_WS_URL:-ws://$(HOST):$(PORT)}"
	@if [ -z "$${OUTBOUND_ALLOWED_NETWORKS+set}" ]; then \
		echo "Local development: tools, webhooks and MCP servers on this machine may be called" \
			"(make run sets OUTBOUND_ALLOWED_NETWORKS=$(LOOPBACK_NETWORKS); a server started otherwise refuses them)"; \
	else \
		echo "Outbound requests reach public addresses and OUTBOUND_ALLOWED_NETWORKS=$$OUTBOUND_ALLOWED_NETWORKS (as you set it)"; \
	fi
	REALTIME_WS_URL="$${REALTIME_WS_URL:-ws://$(HOST):$(PORT)}" \
	OUTBOUND_ALLOWED_NETWORKS="$${OUTBOUND_ALLOWED_NETWORKS-$(LOOPBACK_NETWORKS)}" \
	REALTIME_TOKEN_SECRET="$${REALTIME_TOKEN_SECRET:-$$(cat $(REALTIME_SECRET_FILE))}" \
		$(PY) -m voiceagent.server -b $(HOST) -p $(PORT) voiceagent.asgi:application

# The whole suite: the checks, the JavaScript unit tests and every pytest test.
test: setup
	$(PY) manage.py check --fail-level WARNING
ifeq ($(filter 1 true yes,$(DATABASE_TESTS_ONLY)),)
	@# (DATABASE_TESTS_ONLY=true, .ci/run's PostgreSQL suite: these three cannot depend on the database.)
	$(PY) manage.py makemigrations --check --dry-run
	@# The public OpenAPI schema: valid OpenAPI, generated without a single warning.
	$(PY) manage.py spectacular --validate --fail-on-warn --file /dev/null
	node --test realtime/tests/js/
endif
	$(call pytest_suite,slow or not slow)

# The edit loop: the suite without the tests marked slow (real speech, real models, real servers).
test-fast: setup
	$(call pytest_suite,not slow)

# Style and mistakes (ruff, with the ASYNC rules), formatting, types (mypy with the Django and DRF plugins,
# pyproject.toml: strict for kit and realtime.engine; its incremental cache is .mypy_cache), the import
# contracts (.importlinter: the floors between packages, the kit depends on no app, no code imports the tests, no
# new import circle) and the rooms (voiceagent/rooms.py: every REST resource served from the package its URL names).
lint: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports
	$(PY) manage.py check --tag rooms --fail-level WARNING

worker: setup
	$(VENV)/bin/celery -A voiceagent worker --beat --loglevel INFO

bench: setup
	$(PY) bench/api_load.py

clean:
	rm -rf $(VENV) var staticfiles
