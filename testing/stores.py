"""Stores of a test's or bench's own: a throwaway redis-server, a recreated PostgreSQL database, a bench's
own database on either."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path
from typing import Any

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


class LocalS3:
    """An S3-compatible store on loopback for a test (moto's server mode, in a thread of the test
    process): `bucket` exists; `storage_url` is the RECORDINGS_STORAGE_URL naming it (with `prefix`)."""

    ACCESS_KEY = "test-access-key"
    SECRET_KEY = "test-secret-key"
    REGION = "us-east-1"

    def __init__(self, bucket: str = "recordings-test", prefix: str = "calls") -> None:
        self.port = free_port()
        self.bucket = bucket
        self.prefix = prefix
        self.server: Any = None

    @property
    def endpoint_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def storage_url(self) -> str:
        return f"s3://{self.bucket}/{self.prefix}?endpoint_url={self.endpoint_url}&region_name={self.REGION}"

    @property
    def settings_env(self) -> dict[str, str]:
        return {
            "RECORDINGS_STORAGE_URL": self.storage_url,
            "RECORDINGS_STORAGE_ACCESS_KEY_ID": self.ACCESS_KEY,
            "RECORDINGS_STORAGE_SECRET_ACCESS_KEY": self.SECRET_KEY,
        }

    def client(self) -> Any:
        import boto3

        return boto3.client(
            "s3",
            endpoint_url=self.endpoint_url,
            region_name=self.REGION,
            aws_access_key_id=self.ACCESS_KEY,
            aws_secret_access_key=self.SECRET_KEY,
        )

    def keys(self) -> list[str]:
        listed = self.client().list_objects_v2(Bucket=self.bucket)
        return sorted(item["Key"] for item in listed.get("Contents", []))

    def __enter__(self) -> LocalS3:
        from moto.server import ThreadedMotoServer

        self.server = ThreadedMotoServer(ip_address="127.0.0.1", port=self.port, verbose=False)
        self.server.start()
        self.client().create_bucket(Bucket=self.bucket)
        return self

    def __exit__(self, *exc: object) -> None:
        if self.server is not None:
            self.server.stop()


def bench_database_url(suffix: str, var: Path) -> str:
    """The URL of a bench's own, empty database: on PostgreSQL (DATABASE_URL names one) that database with
    `_<suffix>` appended, recreated; otherwise a fresh SQLite file `bench-<suffix>.sqlite3` in `var`."""
    url = os.environ.get("DATABASE_URL", "")
    if url.startswith("postgres"):
        base, _, name = url.partition("?")[0].rpartition("/")
        own = f"{base}/{name or 'voiceagent'}_{suffix}"
        recreate_postgres_database(own)
        return own
    path = var / f"bench-{suffix}.sqlite3"
    path.parent.mkdir(exist_ok=True)
    for ending in ("", "-wal", "-shm"):
        Path(f"{path}{ending}").unlink(missing_ok=True)
    return f"sqlite:///{path}"


def bench_database(suffix: str, var: Path) -> str | None:
    """Point DATABASE_URL of this process at bench_database_url(suffix, var). Returns what
    drop_bench_database needs (None for SQLite, whose file stays for a look)."""
    os.environ["DATABASE_URL"] = own = bench_database_url(suffix, var)
    return own if own.startswith("postgres") else None


def drop_bench_database(handle: str | None) -> None:
    """Drop the PostgreSQL database bench_database made (its connections closed first)."""
    if handle is None:
        return
    import psycopg
    from django.db import connections

    connections.close_all()
    base, _, name = handle.rpartition("/")
    with psycopg.connect(f"{base}/postgres", autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
