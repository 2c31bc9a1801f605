"""The quickstart as a new user runs it: `make run` with nothing configured, in a fresh copy of the
repository (its own var/, so its own SQLite database, secrets and demo key). The demo key it prints
creates and activates an agent, a realtime session opens and its socket starts, the documented Python
client holds a conversation; a knowledge upload reaches no message broker; an agent whose serverUrl is a
server on this machine (127.0.0.1) is saved and called, while other non-public addresses stay refused."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import urllib.error
import urllib.request
import wave
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from testing.clients import VoiceClient, is_type
from testing.daphne import wait_until_indexed
from testing.servers import closed_port_url, free_port
from testing.waiting import polled_sync
from testing.webhooks import LoopbackReceiver, Reply

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
# What a fresh clone does not have: the virtualenv (linked instead), run state and caches.
NOT_COPIED = {".git", ".venv", "var", "staticfiles", ".pytest_cache", ".ruff_cache", "__pycache__"}


@dataclass
class MadeServer:
    base: str
    port: int
    api_key: str
    log: Path

    def request(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        request = urllib.request.Request(
            self.base + path,
            method=method,
            data=None if body is None else json.dumps(body).encode(),
            headers={"Authorization": f"Bearer {self.api_key}", "Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(request, timeout=120) as response:
                return response.status, json.loads(response.read() or b"null")
        except urllib.error.HTTPError as error:
            return error.code, json.loads(error.read() or b"null")


def _copy_repository(target: Path) -> None:
    def ignore(folder: str, names: list[str]) -> set[str]:
        return {name for name in names if name in NOT_COPIED or name.endswith(".pyc")}

    # copy2 keeps modification times, so make's setup stamp stays newer than the requirements files.
    shutil.copytree(REPO, target, ignore=ignore, symlinks=True)
    (target / ".venv").symlink_to(REPO / ".venv")


def _wait_until_serving(process: subprocess.Popen[bytes], base: str, log: Path, timeout: float = 300) -> None:
    def serving() -> bool:
        if process.poll() is not None:
            raise RuntimeError(f"make run exited with {process.returncode}:\n{log.read_text()[-4000:]}")
        try:
            with urllib.request.urlopen(f"{base}/livez", timeout=2) as response:
                return response.status == 200
        except OSError:
            return False

    try:
        polled_sync(serving, what="make run serving /livez", timeout=timeout, every=0.5)
    except RuntimeError as exited:
        raise AssertionError(str(exited)) from None
    except AssertionError:
        raise AssertionError(f"make run did not serve within {timeout} s:\n{log.read_text()[-4000:]}") from None


def _stop_group(process: subprocess.Popen[bytes]) -> None:
    """make, its shell, Daphne and the recognition workers share the process group started here."""
    group = process.pid

    def gone() -> bool:
        try:
            process.wait(timeout=0.2)
        except subprocess.TimeoutExpired:
            return False
        try:
            os.killpg(group, 0)
        except ProcessLookupError:
            return True
        return False

    for sig, wait in ((signal.SIGTERM, 20.0), (signal.SIGKILL, 10.0)):
        try:
            os.killpg(group, sig)
        except ProcessLookupError:
            break
        try:
            polled_sync(gone, what="make's process group ending", timeout=wait, every=0.2)
        except AssertionError:
            continue
        return


@pytest.fixture(scope="module")
def made_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MadeServer]:
    checkout = tmp_path_factory.mktemp("first-hour") / "voiceagent"
    _copy_repository(checkout)
    # Nothing configured: not DATABASE_URL or REDIS_URL of a CI run, not the REALTIME_* variables.
    env = {"PATH": os.environ["PATH"]}
    # `make run` first runs setup: a no-op when the virtualenv's stamp matches the requirements (always so
    # in CI, where `make test` ran setup). When it does not (requirements changed and nobody ran `make
    # setup` yet), setup would pip-install into the linked virtualenv: a test must not, so that step is
    # skipped (-o setup); a missing package then fails the server start, which says what to do.
    setup_done = subprocess.run(["make", "-q", "setup"], cwd=checkout, env=env, check=False).returncode == 0
    port = free_port()
    log = checkout.parent / "make-run.log"
    with log.open("wb") as output:
        process = subprocess.Popen(
            ["make", *([] if setup_done else ["-o", "setup"]), "run", "HOST=127.0.0.1", f"PORT={port}"],
            cwd=checkout,
            env=env,
            stdout=output,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        base = f"http://127.0.0.1:{port}"
        _wait_until_serving(process, base, log)
        demo = json.loads((checkout / "var" / "demo.json").read_text())
        printed = log.read_text()
        assert demo["apiKey"] in printed  # printed for the user
        # The banner and the example command name the address actually served (PORT is a free port here).
        assert f"Serving on {base}/" in printed and f"{base}/public/v1/agents" in printed
        assert "127.0.0.1:8000" not in printed
        yield MadeServer(base=base, port=port, api_key=demo["apiKey"], log=log)
    finally:
        _stop_group(process)


def create_active_agent(server: MadeServer, fields: dict[str, Any]) -> str:
    status, created = server.request("POST", "/public/v1/agents", fields)
    assert status == 200, created
    status, agents = server.request("GET", "/public/v1/agents")
    assert status == 200
    updated_at = next(agent["updatedAt"] for agent in agents if agent["id"] == created["id"])
    status, body = server.request(
        "PATCH", f"/public/v1/agents/{created['id']}", {"status": "active", "expectedUpdatedAt": updated_at}
    )
    assert status == 200, body
    return created["id"]


@pytest.fixture(scope="module")
def active_agent_id(made_server: MadeServer) -> str:
    return create_active_agent(
        made_server,
        {
            "name": "Front desk",
            "agentType": "static",
            "instructions": "Answer questions about opening hours.",
            "greetingType": "static",
            "staticGreeting": "Hello! How can I help?",
        },
    )


async def test_make_run_serves_voice_with_nothing_configured(made_server: MadeServer, active_agent_id: str) -> None:
    status, session = made_server.request("POST", f"/public/v1/agents/{active_agent_id}/realtime-sessions")
    assert status == 200, session
    assert session["websocketUrl"].startswith(f"ws://127.0.0.1:{made_server.port}/ws/agents/{active_agent_id}/")

    async with VoiceClient(session["websocketUrl"]) as client:
        started = await client.wait_for(is_type("session.started"), timeout=180)
        assert client.messages[started].message["callId"]
        await client.send({"type": "stop"})
        assert await client.wait_closed() == 1000


async def test_make_run_lets_agents_call_a_server_on_this_machine(made_server: MadeServer) -> None:
    assert "make run sets OUTBOUND_ALLOWED_NETWORKS=127.0.0.0/8,::1/128" in made_server.log.read_text()
    greeting = "Welcome to the desk served from this machine."
    reply = Reply(json={"instructions": "Answer questions about the local desk.", "greeting": greeting})
    with LoopbackReceiver(reply) as hook:
        # Saved without a word (a loopback serverUrl is refused by a server started without make run)...
        agent_id = create_active_agent(
            made_server,
            {
                "name": "Local desk",
                "agentType": "webhook",
                "serverUrl": hook.url("/hooks/voice"),
                "promptType": "dynamic",
                "greetingType": "dynamic",
            },
        )
        status, session = made_server.request("POST", f"/public/v1/agents/{agent_id}/realtime-sessions")
        assert status == 200, session
        # ...and called: the conversation opens with the greeting the local server answered.
        async with VoiceClient(session["websocketUrl"]) as client:
            spoken = await client.wait_for(is_type("transcript", role="assistant"), timeout=180)
            assert greeting in client.messages[spoken].message["text"]
            await client.send({"type": "stop"})
            assert await client.wait_closed() == 1000
    # The prompt was asked for once (the agent's serverUrl also gets the call's events).
    asked = [r for r in hook.requests if r.json()["message"]["type"] == "agent:assistant-request"]
    assert len(asked) == 1

    # Only loopback is added: a private or cloud metadata address is still refused, with the reason.
    status, agents = made_server.request("GET", "/public/v1/agents")
    updated_at = next(agent["updatedAt"] for agent in agents if agent["id"] == agent_id)
    status, body = made_server.request(
        "PATCH",
        f"/public/v1/agents/{agent_id}",
        {"serverUrl": "http://169.254.169.254/latest/meta-data/", "expectedUpdatedAt": updated_at},
    )
    assert status == 400
    assert "link-local" in body["issues"]["serverUrl"][0]


def test_the_realtime_secret_is_made_once_and_kept_private(made_server: MadeServer) -> None:
    secret = made_server.log.parent / "voiceagent" / "var" / "realtime_token_secret"
    assert len(secret.read_text().strip()) >= 43
    assert secret.stat().st_mode & 0o077 == 0
    assert secret.read_text().strip() not in made_server.log.read_text()


def test_a_knowledge_upload_reaches_no_broker(made_server: MadeServer, active_agent_id: str) -> None:
    before = made_server.log.stat().st_size
    status, document = made_server.request(
        "POST",
        f"/public/v1/agents/{active_agent_id}/knowledge",
        {"content": "# Opening hours\n\nWe open at nine and close at six on weekdays."},
    )
    assert status == 200, document

    def listed() -> list[dict[str, Any]]:
        status, documents = made_server.request("GET", f"/public/v1/agents/{active_agent_id}/knowledge")
        assert status == 200, documents
        return documents

    # Ingested by the server's background worker after the upload answered.
    assert wait_until_indexed(listed, document["id"])["status"] == "ready"

    def logged_since_upload() -> str:
        with made_server.log.open("rb") as log:
            log.seek(before)
            return log.read().decode(errors="replace")

    # Celery logs the task's success once it has returned, a moment after the document is ready.
    def success_logged() -> str:
        text = logged_since_upload()
        return text if "ingest_document" in text else ""

    during = polled_sync(
        success_logged,
        what="the task's success in the server log",
        timeout=10,
        every=0.1,
    )
    assert "ingest_document" in during  # the task ran in the server process
    assert "No hostname was supplied" not in during
    assert "kombu" not in during


def test_the_python_client_says_clearly_when_the_service_is_unreachable() -> None:
    result = subprocess.run(
        [
            sys.executable,
            str(REPO / "docs" / "examples" / "python_client.py"),
            "--agent-id",
            "3b2f0c1e-0000-4000-8000-000000000000",
            "--input",
            str(REPO / "docs" / "examples" / "question.wav"),
        ],
        env={
            "PATH": os.environ["PATH"],
            "VOICE_AGENT_BASE_URL": closed_port_url().rstrip("/"),
            "VOICE_AGENT_API_KEY": "va_unused",
        },
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode != 0
    assert "Cannot reach the service at http://127.0.0.1:" in result.stderr and "VOICE_AGENT_BASE_URL" in result.stderr
    assert "Traceback" not in result.stderr


def test_the_documented_python_client_talks_with_the_agent(
    made_server: MadeServer, active_agent_id: str, tmp_path: Path
) -> None:
    answer = tmp_path / "answer.wav"
    result = subprocess.run(
        [
            sys.executable,
            str(REPO / "docs" / "examples" / "python_client.py"),
            "--agent-id",
            active_agent_id,
            "--input",
            str(REPO / "docs" / "examples" / "question.wav"),
            "--output",
            str(answer),
        ],
        # The documented variables: the address make run serves on, and the key it printed.
        env={
            "PATH": os.environ["PATH"],
            "VOICE_AGENT_BASE_URL": made_server.base,
            "VOICE_AGENT_API_KEY": made_server.api_key,
        },
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("session started, call ")
    heard = next(index for index, line in enumerate(lines) if line.startswith("user: "))
    assert any(line.startswith("assistant: ") for line in lines[heard + 1 :])  # the agent answered
    assert "socket closed: 1000" in lines
    with wave.open(str(answer), "rb") as wav:
        assert (wav.getnchannels(), wav.getsampwidth(), wav.getframerate()) == (1, 2, 24000)
        assert wav.getnframes() > 24000  # more than a second of the agent's speech
