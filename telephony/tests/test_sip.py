"""Calls over SIP from a real SIP phone, Debian's `baresip` (its `aufile` source plays the caller's eSpeak
speech, its `sndfile` filter records what the caller hears), to the service's SIP endpoint
(telephony/sip/) running in the test's process on loopback, talking to the engine with a scripted brain.

- an INVITE from an allowed network is answered: the caller hears the agent's greeting (energy in what
  baresip recorded), the caller's question reaches the brain, and the caller's hang-up (BYE) ends the call
  `completed` / `caller-hung-up`;
- an INVITE from outside the account's allowed networks is challenged (401): with the account's digest
  credentials it is answered, with wrong ones or none it is refused and never becomes a call;
- keys pressed on the phone (RFC 4733) reach the agent as one keypad turn;
- the agent ending the call, and POST /calls/{id}/hang-up, send a BYE.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import socket
import wave
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from asgiref.sync import sync_to_async
from django.core.management import CommandError

from calls.logging import flush_agent_logs
from calls.models import AgentLog, Call
from telephony.models import TelephonyAccount
from telephony.services.accounts import telephony_account_set
from telephony.services.numbers import phone_number_assign, phone_number_claim
from telephony.sip.endpoint import SipAddress, SipEndpoint
from testing.chat_server import Call as ScriptedCall
from testing.chat_server import ChatServer, Text, Tools
from testing.commands import settelephony
from testing.inprocess import serving
from testing.voice import record_voice_24k, rms
from testing.waiting import polled

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow, pytest.mark.usefixtures("close_db_threads")]

BARESIP = shutil.which("baresip") or "/usr/bin/baresip"
NUMBER = "+14155550100"
GREETING = "Thanks for calling Acme, how can I help?"
QUESTION = "When do you open tomorrow?"
GOODBYE = "Please end the call now."


def free_tcp_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def free_udp_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def answers(body: dict[str, Any]) -> Any:
    messages = body["messages"]
    if messages[-1]["role"] == "tool":
        return Text("Goodbye.")
    if "end" in (messages[-1].get("content") or "").lower():
        return Tools(ScriptedCall("end_call", {}))
    return Text("We open at nine.")


@pytest.fixture(scope="module")
def chat() -> Iterator[ChatServer]:
    with ChatServer(fallback=answers) as scripted:
        yield scripted


@pytest.fixture(scope="module")
def endpoint() -> Iterator[SipEndpoint]:
    """The SIP endpoint, once per module (Sippy's dispatcher is one per process); each test gives it its loop."""
    if not Path(BARESIP).exists():
        pytest.skip("baresip is not installed (make setup installs it as root; .ci/run does)")
    started = SipEndpoint(SipAddress("127.0.0.1", free_udp_port(), rtp_ports=(31000, 31999)), asyncio.new_event_loop())
    started.start()
    yield started
    started.stop()


@pytest.fixture
def server(
    engine_loaded: None, settings: Any, chat: ChatServer, realtime_settings: Any, endpoint: SipEndpoint
) -> Iterator[SipEndpoint]:
    values = {"LLM_PROVIDER": "openai", "LLM_BASE_URL": chat.base_url, "LLM_MODEL": "scripted", "LLM_API_KEY": "x"}
    with serving(settings, values):
        yield endpoint


@pytest.fixture
def ava(owner: Any, make_agent: Any, realtime_settings: Any) -> Any:
    agent = make_agent(
        owner.organization,
        name="Ava",
        status="active",
        instructions="You answer the callers of Acme.",
        greeting_type="static",
        static_greeting=GREETING,
        keypad={"enabled": True, "timeoutMs": 3000, "terminator": "#"},
    )
    telephony_account_set(
        organization=owner.organization, provider="sip", account_sid="pbx.example.test", allowed_networks="127.0.0.0/8"
    )
    number = phone_number_claim(organization=owner.organization, number=NUMBER)
    phone_number_assign(organization=owner.organization, agent=agent, phone_number_id=number.pk)
    return agent


def caller_wav(folder: Path, sentence: str, *, lead: float, tail: float, rate: int = 8000) -> Path:
    """What the caller says into the phone (at the codec's rate): silence, the sentence, silence; baresip
    hangs up when the file ends."""
    import soxr

    (speech,) = record_voice_24k((sentence,), folder, voice_name="leo").values()
    samples = soxr.resample(np.frombuffer(speech, dtype="<i2"), 24000, rate).astype("<i2")
    audio = np.concatenate([np.zeros(int(lead * rate), "<i2"), samples, np.zeros(int(tail * rate), "<i2")])
    path = folder / "caller.wav"
    with wave.open(str(path), "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(rate)
        out.writeframes(audio.tobytes())
    return path


def silence_wav(folder: Path, seconds: float, rate: int = 8000) -> Path:
    """A caller who says nothing for `seconds` (and presses keys)."""
    path = folder / "silence.wav"
    with wave.open(str(path), "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(rate)
        out.writeframes(np.zeros(int(seconds * rate), "<i2").tobytes())
    return path


async def call(
    endpoint: SipEndpoint,
    folder: Path,
    wav: Path,
    *,
    to: str = NUMBER,
    seconds: int = 40,
    codec: str = "PCMU",
    credentials: str = "",
    keys: tuple[float, str] | None = None,
) -> Path:
    """baresip dials `to` at the endpoint and plays `wav` (and presses `keys`: (seconds after the call is
    established, the keys), as RFC 4733 events); the folder of what it recorded."""
    endpoint.loop = asyncio.get_running_loop()
    config = folder / "baresip"
    dumps = folder / "heard"
    config.mkdir()
    dumps.mkdir()
    sip_port = free_udp_port()
    (config / "config").write_text(
        f"sip_listen\t127.0.0.1:{sip_port}\naudio_source\taufile,{wav}\naudio_player\taufile,{folder}/unused.wav\n"
        f"audio_alert\taufile,{wav}\nmodule_path\t/usr/lib/baresip/modules\nmodule\tg711.so\nmodule\tg722.so\nmodule\taufile.so\n"
        f"module\tsndfile.so\nmodule_app\taccount.so\nmodule_app\tmenu.so\nsnd_path\t{dumps}\n"
        f"module_app\tctrl_tcp.so\nctrl_tcp_listen\t127.0.0.1:{(control := free_tcp_port())}\n"
    )
    auth = f";auth_user={credentials.split(':')[0]};auth_pass={credentials.split(':')[1]}" if credentials else ""
    (config / "accounts").write_text(f"<sip:caller@127.0.0.1>{auth};regint=0;audio_codecs={codec}\n")
    target = f"sip:{to}@127.0.0.1:{endpoint.address.port}"
    process = await asyncio.create_subprocess_exec(
        BARESIP, "-n", "127.0.0.1", "-f", str(config), "-e", f"/dial {target}", "-t", str(seconds),
        stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
    )  # fmt: skip
    pressing = asyncio.create_task(_press(control, *keys)) if keys else None
    output = await asyncio.wait_for(_until_the_call_ends(process), seconds + 20)
    if pressing is not None:
        await pressing
    (folder / "baresip.log").write_bytes(output)
    return dumps


async def _press(control: int, after: float, keys: str) -> None:
    """Keys pressed on baresip's keypad `after` seconds into the call, through its control socket (netstring
    JSON, the `sndcode` command: RFC 4733 telephone events on the call)."""
    await asyncio.sleep(after)
    _, writer = await asyncio.open_connection("127.0.0.1", control)
    for key in keys:
        body = json.dumps({"command": "sndcode", "params": key, "token": key}).encode()
        writer.write(str(len(body)).encode() + b":" + body + b",")
        await writer.drain()
        await asyncio.sleep(0.4)
    writer.close()
    await writer.wait_closed()


# What baresip prints when a call ends (its BYE, ours, or a refusal): it then stays up until `-t` runs out.
_CALL_ENDED = (b"terminated (duration", b"session closed")


async def _until_the_call_ends(process: asyncio.subprocess.Process) -> bytes:
    """baresip's output until its call has ended; then baresip is stopped (its files are written by then)."""
    assert process.stdout is not None
    output = bytearray()
    while chunk := await process.stdout.read(4096):
        output.extend(chunk)
        if any(marker in output for marker in _CALL_ENDED):
            process.terminate()
            output.extend(await process.stdout.read())
            break
    await process.wait()
    return bytes(output)


def heard(dumps: Path) -> tuple[bytes, int]:
    """What the caller heard (PCM16) and its sample rate, from baresip's recording of the decoded audio."""
    (path,) = dumps.glob("*-dec.wav")
    with wave.open(str(path)) as recording:
        return recording.readframes(recording.getnframes()), recording.getframerate()


def on_the_line(dumps: Path) -> float:
    """How long the caller was on the call, in seconds: baresip records what it decodes until the call ends."""
    audio, rate = heard(dumps)
    return len(audio) / 2 / rate


async def the_call(to_number: str) -> Call:
    async def found() -> Call | None:
        return await sync_to_async(Call.objects.filter(to_number=to_number, status="completed").first)()

    return await polled(found, what="the completed call", timeout=20)


@pytest.mark.parametrize(("codec", "rate"), [("PCMU", 8000), ("G722", 16000)])
async def test_a_call_from_an_allowed_network_is_answered_greets_and_ends_with_the_callers_bye(
    server, ava, chat, tmp_path, codec, rate
):
    first = len(chat.requests)
    wav = caller_wav(tmp_path, QUESTION, lead=11.0, tail=7.0, rate=rate)  # after the disclosure and greeting
    dumps = await call(server, tmp_path, wav, codec=codec)

    call_record = await the_call(NUMBER)
    assert (call_record.channel, call_record.direction, call_record.ended_reason) == (
        "phone",
        "inbound",
        "caller-hung-up",
    )
    assert call_record.from_number == "caller"  # the caller's SIP user
    audio, heard_rate = heard(dumps)
    assert heard_rate == rate  # G.722 when offered: wideband to the caller
    greeting = audio[: rate * 2 * 4]  # the first four seconds: the greeting
    assert rms(greeting) > 500, "the caller heard no greeting"
    assert len(chat.requests) > first, "the caller's question never reached the brain"
    messages = await sync_to_async(lambda: list(call_record.messages.values_list("role", "content")))()
    assert messages[0][0] == "assistant" and messages[0][1].endswith(GREETING)  # heard whole, after the disclosure
    assert ("assistant", "We open at nine.") in messages


async def test_keys_pressed_on_the_phone_reach_the_agent_as_one_turn(server, ava, chat, tmp_path):
    first = len(chat.requests)
    wav = silence_wav(tmp_path, 16.0)
    await call(server, tmp_path, wav, keys=(10.0, "461#"))

    call_record = await the_call(NUMBER)
    messages = await sync_to_async(lambda: list(call_record.messages.values_list("role", "content")))()
    # The keypad (enabled, "#" ends the keys): one turn, the terminator not among the digits.
    assert ("user", "the caller entered 4 6 1") in messages, messages
    assert len(chat.requests) > first

    def keys_logged() -> list[str]:
        flush_agent_logs()  # the tests' settings run no log writer thread
        entries = AgentLog.objects.filter(content__message="caller pressed a key").order_by("timestamp", "sequence")
        return [entry.content["digit"] for entry in entries]

    assert await sync_to_async(keys_logged)() == list("461#")


async def test_the_agent_ending_the_call_sends_a_bye(server, ava, chat, tmp_path):
    chat.script(Tools(ScriptedCall("end_call", {}, id="call_end_sip")), Text("Goodbye."))
    wav = caller_wav(tmp_path, GOODBYE, lead=11.0, tail=25.0)  # the caller would stay on the line 25 s more
    dumps = await call(server, tmp_path, wav)

    call_record = await the_call(NUMBER)
    assert call_record.ended_reason == "agent-ended-call"
    assert on_the_line(dumps) < 11 + 3 + 15  # the BYE ended the call long before the caller's file did


async def test_hang_up_through_the_api_sends_a_bye(server, ava, owner, tmp_path):
    wav = caller_wav(tmp_path, QUESTION, lead=30.0, tail=1.0)
    caller = asyncio.create_task(call(server, tmp_path, wav))

    async def active() -> Call | None:
        return await sync_to_async(Call.objects.filter(to_number=NUMBER, status="active").first)()

    live = await polled(active, what="the active call", timeout=20)
    response = await sync_to_async(owner.client.post)(f"/public/v1/calls/{live.pk}/hang-up")
    assert response.status_code == 200, response.content
    dumps = await caller
    call_record = await the_call(NUMBER)
    assert call_record.ended_reason == "agent-ended-call"
    assert on_the_line(dumps) < 25  # the BYE ended the call long before the caller's 31 s file did


async def test_an_invite_from_elsewhere_is_challenged_and_answered_only_with_the_accounts_credentials(
    server, ava, owner, tmp_path
):
    await sync_to_async(telephony_account_set)(
        organization=owner.organization,
        provider="sip",
        account_sid="pbx.example.test",
        allowed_networks="10.0.0.0/8",  # not loopback: baresip must authenticate
        sip_username="acme-pbx",
        auth_token="s3cret-Digest-Passw0rd",
    )
    for attempt, credentials in enumerate(["", "acme-pbx:wrong-password"]):
        folder = tmp_path / f"refused{attempt}"
        folder.mkdir()
        wav = caller_wav(folder, QUESTION, lead=1.0, tail=1.0)
        await call(server, folder, wav, seconds=6, credentials=credentials)
        log = (folder / "baresip.log").read_text()
        # Challenged (401), baresip answers with what it has (nothing, or the wrong password): refused.
        assert "session closed: 403 Forbidden" in log, log[-2000:]
    assert await sync_to_async(Call.objects.count)() == 0

    wav = caller_wav(tmp_path, QUESTION, lead=1.0, tail=6.0)
    await call(server, tmp_path, wav, credentials="acme-pbx:s3cret-Digest-Passw0rd")
    call_record = await the_call(NUMBER)
    assert call_record.ended_reason == "caller-hung-up"


def test_a_sip_account_is_its_domain_and_allowed_networks_and_organizations_may_share_a_trunk(
    owner: Any, outsider: Any, dashboard: Any
) -> None:
    org = str(owner.organization.pk)
    base = ["--org", org, "--provider", "sip", "--sip-domain", "sip.trunk.example"]
    for extra, message in [
        ([], "networks \\(CIDR\\) calls come from"),
        (["--allowed-networks", "198.51.100.0/24,not-a-network"], "'not-a-network' is not a network"),
        (["--allowed-networks", "198.51.100.0/24", "--sip-password", "x" * 32], "A SIP password needs its username"),
        (["--sip-username", "acme-pbx"], "A SIP username needs its password"),
        (["--allowed-networks", "198.51.100.0/24", "--api-key-sid", "SK" + "1" * 32], "Not used by SIP accounts"),
    ]:
        with pytest.raises(CommandError, match=message):
            settelephony(*base, *extra)
    with pytest.raises(CommandError, match="HOST or HOST:PORT"):
        settelephony("--org", org, "--provider", "sip", "--sip-domain", "sip:bad", "--allowed-networks", "10.0.0.0/8")
    assert settelephony(*base, "--allowed-networks", "198.51.100.7/24, 2001:db8::/32")["provider"] == "sip"
    other = ["--org", str(outsider.organization.pk), "--provider", "sip", "--sip-domain", "sip.trunk.example"]
    assert settelephony(*other, "--allowed-networks", "203.0.113.0/24")["provider"] == "sip"
    account = TelephonyAccount.objects.get(organization=owner.organization)
    assert account.allowed_networks == ["198.51.100.0/24", "2001:db8::/32"] and account.auth_token == ""
    page = dashboard.get(f"/admin/telephony/telephonyaccount/{account.pk}/change/").content.decode()
    assert "198.51.100.0/24, 2001:db8::/32" in page
    with pytest.raises(CommandError, match="Only for SIP accounts"):
        settelephony(
            "--org", org, "--account-sid", "AC" + "1" * 32, "--auth-token", "t" * 32, "--allowed-networks", "10.0.0.0/8"
        )
