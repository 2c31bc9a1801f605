"""Schemathesis against /public/v1/openapi.json, in-process (WSGI) on the test database: every operation,
every check, the examples, coverage and fuzzing phases with a bounded number of examples, one test per
operation. Zero failures means generated clients and fuzzers can trust the schema. The larger run, with the
stateful phase, is bench/schemathesis_run.py; what the fuzzer is told beyond the schema is in
testing/schema_fuzzing.py. Schemathesis builds the coverage cases while pytest collects this module
(about 20 s of the run).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import schemathesis
from django.core.signals import request_finished, request_started
from django.core.wsgi import get_wsgi_application
from django.db import close_old_connections
from hypothesis import HealthCheck
from hypothesis import settings as hypothesis_settings

from testing import schema_fuzzing

# Per operation, for the fuzzing phase (the coverage phase adds its boundary and near-miss cases).
MAX_EXAMPLES = 15

schema_fuzzing.register_formats()
schema = schemathesis.openapi.from_wsgi(
    schema_fuzzing.SCHEMA_PATH,
    get_wsgi_application(),
    config=schema_fuzzing.config(max_examples=MAX_EXAMPLES, stateful=False),
)


@pytest.fixture
def world(db: Any, settings: Any, tmp_path: Any) -> Iterator[None]:
    """The seeded organization (its key is in the schemathesis configuration); realtime sessions configured;
    the seeded call's recording in a folder of the test's own."""
    recordings = {"BACKEND": "django.core.files.storage.FileSystemStorage", "OPTIONS": {"location": str(tmp_path)}}
    settings.STORAGES = {**settings.STORAGES, "recordings": recordings}
    settings.REALTIME_WS_URL = schema_fuzzing.WS_URL
    settings.REALTIME_TOKEN_SECRET = schema_fuzzing.TOKEN_SECRET
    settings.PUBLIC_BASE_URL = "https://voice.example.test"  # outbound calls and batches can be placed
    schema_fuzzing.seed_world()
    # As Django's test client does: the WSGI handler must not close the test transaction's connection.
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    yield
    request_started.connect(close_old_connections)
    request_finished.connect(close_old_connections)


@schema.parametrize()
# The seeded objects live for one operation's examples (a DELETE that succeeds makes later ones 404).
# How fast Hypothesis generates request bodies depends on how busy the machine is (the suite's other
# workers run beside it), not on the API: its "too slow" health check is no verdict on the service.
@hypothesis_settings(suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow], deadline=None)
def test_the_api_answers_as_its_schema_says(case: Any, world: None) -> None:
    case.call_and_validate()
