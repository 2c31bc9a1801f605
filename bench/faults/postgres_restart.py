"""Fault bench (not a test): PostgreSQL is restarted between requests and under a live call.

Starts a private PostgreSQL cluster (initdb and pg_ctl from /usr/lib/postgresql/*/bin, in a temporary
folder, on a free port; the machine's own PostgreSQL is not touched), a real Daphne on it with the
production database settings (connection pool on), makes requests and opens a browser call, stops
PostgreSQL (requests during the outage), starts it again, makes more requests and ends the call. Prints
what every request got, whether the service recovered without a restart of its own, and what happened
to the call.

The server's log is var/faults-postgres-restart.log.

Usage: .venv/bin/python bench/faults/postgres_restart.py [--outage-requests 3] [--after-requests 10]
"""

from __future__ import annotations

import argparse
import asyncio
import glob
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from testing.daphne import DaphneServer  # noqa: E402 - after the repository root is put on sys.path
from testing.servers import free_port  # noqa: E402 - after the repository root is put on sys.path

SECRET = "faults-bench-secret-0123456789abcdef"


class Cluster:
    """A throw-away PostgreSQL cluster. initdb refuses root, so as root it runs as the `postgres` user."""

    def __init__(self) -> None:
        self.bin = Path(sorted(glob.glob("/usr/lib/postgresql/*/bin"))[-1])
        self.folder = Path(tempfile.mkdtemp(prefix="faults-pg-"))
        self.data = self.folder / "data"
        self.port = free_port()
        self.user = "postgres" if os.geteuid() == 0 else pwd.getpwuid(os.geteuid()).pw_name
        if os.geteuid() == 0:
            shutil.chown(self.folder, self.user)

    def run(self, *args: str) -> None:
        command = [str(self.bin / args[0]), *args[1:]]
        if os.geteuid() == 0:
            command = ["runuser", "-u", self.user, "--", *command]
        subprocess.run(command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def init(self) -> None:
        self.run("initdb", "-D", str(self.data), "-U", "postgres", "--auth=trust", "-E", "UTF8")

    def start(self) -> None:
        options = f"-p {self.port} -k {self.folder} -c listen_addresses=127.0.0.1 -c fsync=off"
        self.run("pg_ctl", "-D", str(self.data), "-o", options, "-l", str(self.folder / "log"), "-w", "start")

    def stop(self) -> None:
        self.run("pg_ctl", "-D", str(self.data), "-m", "fast", "-w", "stop")

    @property
    def url(self) -> str:
        return f"postgres://postgres@127.0.0.1:{self.port}/voiceagent"

    def remove(self) -> None:
        try:
            self.stop()
        except subprocess.CalledProcessError:
            pass
        shutil.rmtree(self.folder, ignore_errors=True)


def seed() -> tuple[str, str]:
    import django

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "voiceagent.settings")
    django.setup()
    from django.utils import timezone

    from accounts.services import organization_create
    from agents.models import Agent

    organization, issued = organization_create(name="Faults", plan_code="agency")
    agent = Agent.objects.create(
        organization=organization,
        name="Ava",
        status="active",
        instructions="Help callers.",
        greeting_type="static",
        static_greeting="Hello, this is Ava.",
        updated_at=timezone.now(),
    )
    return issued.raw_key, str(agent.pk)


def serve(env: dict[str, str], port: int, log: Path) -> subprocess.Popen[bytes]:
    return DaphneServer(env=env, port=port, log_path=log).start(timeout=120).process  # type: ignore[return-value]  # set once the server has started


async def scenario(port: int, key: str, agent_id: str, cluster: Cluster, outage: int, after: int) -> None:
    from testing.clients import VoiceClient, is_type

    api = httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", headers={"Authorization": f"Bearer {key}"}, timeout=30)
    log: list[tuple[str, str, str]] = []

    async def request(phase: str, method: str, path: str, **kwargs: object) -> int:
        t0 = time.monotonic()
        try:
            response = await api.request(method, path, **kwargs)
            got = f"{response.status_code}"
            if response.status_code >= 400:
                got += f" {response.text[:80]!r}"
        except httpx.HTTPError as error:
            response, got = None, f"{type(error).__name__}"
        log.append((phase, f"{method} {path.split('?')[0]}", f"{got} in {(time.monotonic() - t0) * 1000:.0f} ms"))
        return response.status_code if response is not None else 0

    for _ in range(3):
        await request("before", "GET", "/public/v1/agents")
    await request("before", "POST", f"/public/v1/agents/{agent_id}/realtime-sessions")
    session = (await api.post(f"/public/v1/agents/{agent_id}/realtime-sessions")).json()
    call_id = None
    async with VoiceClient(session["websocketUrl"]) as client:
        started = await client.wait_for(is_type("session.started"), timeout=120)
        call_id = client.messages[started].message.get("callId")
        for _ in range(600):  # the greeting is in the transcript before the outage
            if (await api.get(f"/public/v1/calls/{call_id}")).json().get("messages"):
                break
            await asyncio.sleep(0.1)
        print(f"call {call_id} live, greeting stored")

        await asyncio.to_thread(cluster.stop)
        print("PostgreSQL stopped")
        for _ in range(outage):
            await request("outage", "GET", "/public/v1/agents")
        await request("outage", "GET", "/livez")
        await asyncio.to_thread(cluster.start)
        restarted = time.monotonic()
        print("PostgreSQL started again")
        first_ok = None
        for _ in range(after):
            status = await request("after", "GET", "/public/v1/agents")
            if status == 200 and first_ok is None:
                first_ok = time.monotonic() - restarted
        await request("after", "POST", "/public/v1/agents", json={"name": "After", "instructions": "Hi."})
        await request("after", "GET", f"/public/v1/calls/{call_id}")
        alive = not client.closed
        await client.send({"type": "stop"})
        code = await client.wait_closed(timeout=60)
    print(f"the call's socket {'was still open' if alive else 'had closed'} after the restart; stop -> close {code}")
    for _ in range(100):
        detail = (await api.get(f"/public/v1/calls/{call_id}")).json()
        if detail.get("status") != "active":
            break
        await asyncio.sleep(0.1)
    print(
        f"call after stop: status {detail.get('status')}, duration {detail.get('durationSeconds')} s, "
        f"{len(detail.get('messages', []))} message(s)"
    )
    print(f"{'phase':8} {'request':36} result")
    for phase, what, got in log:
        print(f"{phase:8} {what:36} {got}")
    after_ok = [got for phase, _, got in log if phase == "after"]
    print(
        f"first 200 after PostgreSQL was back: {first_ok:.2f} s"
        if first_ok is not None
        else "NO successful request after PostgreSQL was back"
    )
    print(f"requests after the restart: {sum(g.startswith('200') for g in after_ok)}/{len(after_ok)} answered 200")
    await api.aclose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--outage-requests", type=int, default=3)
    parser.add_argument("--after-requests", type=int, default=10)
    args = parser.parse_args()

    cluster = Cluster()
    server = None
    try:
        cluster.init()
        cluster.start()
        subprocess.run(
            [str(cluster.bin / "createdb"), "-h", "127.0.0.1", "-p", str(cluster.port), "-U", "postgres", "voiceagent"],
            check=True,
        )
        port = free_port()
        env = {k: v for k, v in os.environ.items() if k not in ("REDIS_URL", "DATABASE_POOL")}
        env.update(
            {
                "DATABASE_URL": cluster.url,
                "LOG_LEVEL": "WARNING",
                "REALTIME_TOKEN_SECRET": SECRET,
                "REALTIME_WS_URL": f"ws://127.0.0.1:{port}",
                "REALTIME_PRELOAD": "false",
            }
        )
        os.environ.update(env)
        subprocess.run([sys.executable, "manage.py", "migrate", "--noinput", "-v0"], cwd=ROOT, env=env, check=True)
        key, agent_id = seed()
        from django.db import connections

        connections.close_all()
        log = ROOT / "var" / "faults-postgres-restart.log"
        print(f"server log: {log}")
        server = serve(env, port, log)
        asyncio.run(scenario(port, key, agent_id, cluster, args.outage_requests, args.after_requests))
    finally:
        if server is not None:
            server.terminate()
            server.wait(timeout=15)
        cluster.remove()


if __name__ == "__main__":
    main()
