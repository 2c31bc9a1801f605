"""Database session settings that the service relies on."""

import pytest
from django.db import connection


@pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL session setting")
def test_postgresql_sessions_run_without_jit_compilation(db):
    # JIT compiling the agent list cost ~320 ms per request once the calls table held 100,000 rows.
    with connection.cursor() as cursor:
        cursor.execute("SHOW jit")
        assert cursor.fetchone()[0] == "off"
