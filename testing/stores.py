"""Stores of a test's or bench's own: a throwaway redis-server, a recreated PostgreSQL database."""

from __future__ import annotations

import subprocess
import time

from testing.servers import free_port


class RedisServer:
    """A redis-server of a test's or bench's own, on a port of its own, without persistence (a restart
    forgets everything, as a Redis restarted without a volume does)."""

    def __init__(self, port: int | None = None) -> None:
        self.port = port or free_port()
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self, timeout: float = 15) -> RedisServer:
        import redis

        self.process = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        client = redis.Redis(port=self.port)
        deadline = time.monotonic() + timeout
        while True:
            try:
                client.ping()
                return self
            except redis.ConnectionError:
                if time.monotonic() > deadline:
                    self.kill()
                    raise RuntimeError("redis-server did not start") from None
                time.sleep(0.05)
            finally:
                client.close()

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()


def recreate_postgres_database(url: str) -> None:
    """Drop and create the PostgreSQL database named by `url` (a bench's own database)."""
    import psycopg

    base, _, name = url.rpartition("/")
    with psycopg.connect(f"{base}/postgres", autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')
