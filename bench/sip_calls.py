"""SIP calls benchmark (not a test): N concurrent calls (50 by default) from real SIP phones, Debian's
`baresip` (one process per call, driven as testing/baresip.py drives it for the SIP tests), to the
service's SIP endpoint, `manage.py sipserver` running as a process of its own on 127.0.0.1 (a free port,
an RTP range of its own), with a scripted brain (testing/chat_server.py, which answers at once) so that the
figures are the service's, not a model's.

Every caller offers PCMU (G.711 mu-law), dials the agent's number, plays a WAV file through baresip's
`aufile` source: silence while it hears the AI disclosure and the greeting (--lead-s), one eSpeak NG
question (testing/baresip.py caller_wav), silence while it hears the answer (--tail-s), then hangs up (BYE)
when the file ends. The dials are spread over --ramp-s so that all N calls are up at once. One call is made
first and not measured (the server's models and first connections).

What is measured comes from the packets themselves: this process captures the loopback interface (a packet
socket, AF_PACKET, with a BPF filter for the SIP port and the endpoint's RTP range; needs root or
CAP_NET_RAW) with the kernel's timestamp of each packet, one clock for every figure:
  - call setup: the caller's INVITE -> the endpoint's 200 OK, per Call-ID;
  - RTP send jitter of the endpoint's audio to the callers: for each pair of consecutive packets of a
    call's stream, |arrival spacing - RTP timestamp spacing| (RFC 3550's D; 20 ms for back-to-back packets;
    Sippy sends nothing while the agent is silent and advances the timestamp, so a pause is not jitter).
    On loopback the arrival time is the send time, so this is the endpoint's own pacing (target <= 20 ms);
  - end of the caller's speech -> first answer audio heard: the last of the caller's packets louder than
    about -41 dBFS (RMS 300 of PCM16, decoded mu-law) -> the endpoint's first loud packet after it. A call
    whose greeting was still playing when the caller began to speak (the barge-in path) is counted apart;
  - greeting heard / answer heard: loud audio from the endpoint before / after the caller's question;
  - CPU per call: the sipserver process's (and its children's) CPU seconds from /proc/<pid>/stat over the
    measured run, divided by N; its CPU % over the window when all N calls were up (from the last 200 OK
    to the first BYE), 100 % = one core.
Calls started / completed / dropped are read from the database after the run: a call is completed when
its record is `completed` with ended reason `caller-hung-up`; every other call (or a caller without a
record) is dropped (target 0). A baresip that exits before it dials (a port of its own taken) is started
again, and counted.

Database: a fresh SQLite file var/bench-sipbench.sqlite3, or the PostgreSQL database named by DATABASE_URL
with `_sipbench` appended (REDIS_URL, if set, is passed to the server). The bench organization is on the
agency plan with the live-call cap lifted (bench/api_load.py bench_organization). Bounded: the callers
are stopped after --deadline-s whatever happens. The server's log: var/bench-sip-server.log; each
caller's baresip log and recordings: var/bench-sip-calls/<n>/.

Usage (as root, or with CAP_NET_RAW): .venv/bin/python bench/sip_calls.py [--calls 50] [--ramp-s 8] [--lead-s 14] [--tail-s 8]
"""

from __future__ import annotations

import argparse
import asyncio
import ctypes
import itertools
import os
import shutil
import socket
import statistics
import struct
import subprocess
import sys
import threading
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.api_load import bench_organization  # noqa: E402 - after the repository root is put on sys.path
from bench.voice_latency import cpu_seconds  # noqa: E402 - after the repository root is put on sys.path
from testing.baresip import BARESIP, baresip_call, caller_wav, free_udp_port  # noqa: E402 - after the repository root is put on sys.path
from testing.chat_server import ChatServer, Text  # noqa: E402 - after the repository root is put on sys.path
from testing.figures import percentile  # noqa: E402 - after the repository root is put on sys.path
from testing.stores import bench_database_url  # noqa: E402 - after the repository root is put on sys.path

NUMBER = "+14155550100"
GREETING = "Thanks for calling Acme, how can I help?"
QUESTION = "When do you open tomorrow?"
ANSWER = "We open at nine in the morning."
LOUD = 300.0  # RMS of PCM16 above which a 20 ms packet holds speech
CALLS_FOLDER = ROOT / "var" / "bench-sip-calls"


# --- capture --------------------------------------------------------------------------------------
@dataclass
class Capture:
    """What the loopback capture saw: SIP messages and RTP packets, with the kernel's timestamps."""

    invites: dict[str, float] = field(default_factory=dict)  # Call-ID -> first INVITE
    answers: dict[str, float] = field(default_factory=dict)  # Call-ID -> first 200 OK to the INVITE
    byes: dict[str, float] = field(default_factory=dict)  # Call-ID -> first BYE
    caller_port: dict[str, int] = field(default_factory=dict)  # Call-ID -> the caller's RTP port (its SDP)
    endpoint_port: dict[str, int] = field(default_factory=dict)  # Call-ID -> the endpoint's RTP port (its SDP)
    # (source port, destination port) -> [(time, sequence, timestamp, payload)]
    rtp: dict[tuple[int, int], list[tuple[float, int, int, bytes]]] = field(default_factory=lambda: defaultdict(list))
    dropped_by_kernel: int = 0


def _filter(sip_port: int, low: int, high: int) -> list[tuple[int, int, int, int]]:
    """Classic BPF over the IP header (a SOCK_DGRAM packet socket): incoming UDP (each loopback packet once)
    from or to the SIP port, or from or to a port of the endpoint's RTP range."""
    drop, accept = 16, 15
    return [
        (0x20, 0, 0, 0xFFFFF004),  # 0 ld pkttype (SKF_AD_OFF + SKF_AD_PKTTYPE)
        (0x15, 0, drop - 2, 0),  # 1 == PACKET_HOST
        (0x30, 0, 0, 9),  # 2 ldb [9]: protocol
        (0x15, 0, drop - 4, 17),  # 3 == UDP
        (0x28, 0, 0, 6),  # 4 ldh [6]: fragment offset
        (0x45, drop - 6, 0, 0x1FFF),  # 5 not a fragment
        (0xB1, 0, 0, 0),  # 6 ldxb 4*([0]&0xf): the IP header's length
        (0x48, 0, 0, 0),  # 7 ldh [x+0]: source port
        (0x15, accept - 9, 0, sip_port),  # 8
        (0x35, 0, 1, low),  # 9 >= low, else the destination port
        (0x25, 0, accept - 11, high),  # 10 <= high: accept
        (0x48, 0, 0, 2),  # 11 ldh [x+2]: destination port
        (0x15, accept - 13, 0, sip_port),  # 12
        (0x35, 0, drop - 14, low),  # 13
        (0x25, drop - 15, 0, high),  # 14
        (0x06, 0, 0, 0xFFFF),  # 15 accept
        (0x06, 0, 0, 0),  # 16 drop
    ]


class Sniffer:
    """Captures loopback on a thread of its own until stopped."""

    def __init__(self, sip_port: int, rtp_ports: tuple[int, int]) -> None:
        self.capture = Capture()
        self.sock = socket.socket(socket.AF_PACKET, socket.SOCK_DGRAM, socket.htons(0x0800))
        program = b"".join(struct.pack("HBBI", *op) for op in _filter(sip_port, *rtp_ports))
        self._program = ctypes.create_string_buffer(program)  # kept alive while attached
        fprog = struct.pack("HL", len(program) // 8, ctypes.addressof(self._program))
        self.sock.setsockopt(socket.SOL_SOCKET, 26, fprog)  # SO_ATTACH_FILTER
        self.sock.setsockopt(socket.SOL_SOCKET, 35, 1)  # SO_TIMESTAMPNS
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 32 * 1024 * 1024)
        self.sock.bind(("lo", 0x0800))
        self.sock.settimeout(0.2)
        self.sip_port = sip_port
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name="sniffer", daemon=True)

    def start(self) -> Sniffer:
        self._thread.start()
        return self

    def stop(self) -> Capture:
        self._stopping.set()
        self._thread.join(5)
        stats = self.sock.getsockopt(263, 6, 8)  # SOL_PACKET, PACKET_STATISTICS: (packets, drops)
        self.capture.dropped_by_kernel = struct.unpack("II", stats)[1]
        self.sock.close()
        return self.capture

    def _run(self) -> None:
        while not self._stopping.is_set():
            try:
                data, ancillary, _, _ = self.sock.recvmsg(65535, 64)
            except TimeoutError:
                continue
            when = time.time()
            for level, kind, value in ancillary:
                if level == socket.SOL_SOCKET and kind == 35:  # SCM_TIMESTAMPNS
                    seconds, nanoseconds = struct.unpack("qq", value[:16])
                    when = seconds + nanoseconds / 1e9
            header = 4 * (data[0] & 0x0F)
            source, destination = struct.unpack("!HH", data[header : header + 4])
            payload = data[header + 8 :]
            if self.sip_port in (source, destination):
                self._sip(payload, when)
            elif len(payload) >= 12 and payload[0] >> 6 == 2:
                self._rtp(source, destination, payload, when)

    def _sip(self, payload: bytes, when: float) -> None:
        text = payload.decode("utf-8", "replace")
        head, _, body = text.partition("\r\n\r\n")
        lines = head.split("\r\n")
        headers = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            headers.setdefault(name.strip().lower(), value.strip())
        call_id = headers.get("call-id") or headers.get("i", "")
        cseq = headers.get("cseq", "")
        port = next((int(line.split()[1]) for line in body.split("\r\n") if line.startswith("m=audio ")), None)
        capture = self.capture
        if lines[0].startswith("INVITE "):
            capture.invites.setdefault(call_id, when)
            if port is not None:
                capture.caller_port[call_id] = port
        elif lines[0].startswith("SIP/2.0 200") and cseq.endswith("INVITE"):
            capture.answers.setdefault(call_id, when)
            if port is not None:
                capture.endpoint_port[call_id] = port
        elif lines[0].startswith("BYE "):
            capture.byes.setdefault(call_id, when)

    def _rtp(self, source: int, destination: int, packet: bytes, when: float) -> None:
        offset = 12 + 4 * (packet[0] & 0x0F)
        if packet[0] & 0x10 and len(packet) >= offset + 4:
            offset += 4 + 4 * int.from_bytes(packet[offset + 2 : offset + 4], "big")
        if packet[1] & 0x7F != 0:  # PCMU audio only (not telephone events, not RTCP)
            return
        sequence, timestamp = struct.unpack("!HI", packet[2:8])
        self.capture.rtp[(source, destination)].append((when, sequence, timestamp, packet[offset:]))


# --- audio ----------------------------------------------------------------------------------------
def _ulaw_table() -> np.ndarray:
    codes = ~np.arange(256, dtype=np.int32) & 0xFF
    magnitude = (((codes & 0x0F) << 3) + 0x84) << ((codes & 0x70) >> 4)
    return np.where(codes & 0x80, 0x84 - magnitude, magnitude - 0x84).astype(np.float64)


ULAW = _ulaw_table()


def loud(payload: bytes) -> bool:
    samples = ULAW[np.frombuffer(payload, dtype=np.uint8)]
    return bool(samples.size and np.sqrt(np.mean(samples**2)) > LOUD)


# --- per call -------------------------------------------------------------------------------------
@dataclass
class Figures:
    setup_ms: list[float] = field(default_factory=list)
    jitter_ms: list[float] = field(default_factory=list)
    answer_ms: list[float] = field(default_factory=list)
    greeted: int = 0
    answered: int = 0
    overlapped: int = 0  # the greeting still playing when the caller began to speak
    up_window: tuple[float, float] | None = None  # all calls up: last 200 OK -> first BYE


def analyse(capture: Capture) -> Figures:
    figures = Figures()
    for call_id, invited in capture.invites.items():
        if call_id in capture.answers:
            figures.setup_ms.append((capture.answers[call_id] - invited) * 1000)
        ours, theirs = capture.endpoint_port.get(call_id), capture.caller_port.get(call_id)
        if ours is None or theirs is None:
            continue
        sent = capture.rtp.get((ours, theirs), [])
        heard = capture.rtp.get((theirs, ours), [])
        for (t0, s0, ts0, _), (t1, s1, ts1, _) in itertools.pairwise(sent):
            if (s1 - s0) % 65536 == 1:
                figures.jitter_ms.append(abs((t1 - t0) - ((ts1 - ts0) % 2**32) / 8000) * 1000)
        spoken = [when for when, _, _, payload in heard if loud(payload)]
        agent = [when for when, _, _, payload in sent if loud(payload)]
        if not spoken:
            continue
        began, ended = spoken[0], spoken[-1]
        if any(when < began for when in agent):
            figures.greeted += 1
        if any(began - 0.1 <= when <= began + 0.5 for when in agent):
            figures.overlapped += 1
        after = [when for when in agent if when > ended]
        if after:
            figures.answered += 1
            if not any(began - 0.1 <= when <= began + 0.5 for when in agent):
                figures.answer_ms.append((after[0] - ended) * 1000)
    if capture.answers and capture.byes:
        figures.up_window = (max(capture.answers.values()), min(capture.byes.values()))
    return figures


# --- set-up -----------------------------------------------------------------------------------------
def seed(env: dict[str, str]) -> None:
    """Migrate the bench database; an organization with an agent answering NUMBER over its SIP account
    (calls from 127.0.0.0/8 admitted without a challenge)."""
    organization, _ = bench_organization(env, "SIP bench")
    from django.utils import timezone

    from agents.models import Agent
    from telephony.services.accounts import telephony_account_set
    from telephony.services.numbers import phone_number_assign, phone_number_claim

    agent = Agent.objects.create(
        organization=organization,
        name="Ava",
        status="active",
        instructions="You answer the callers of Acme.",
        greeting_type="static",
        static_greeting=GREETING,
        updated_at=timezone.now(),
    )
    telephony_account_set(
        organization=organization, provider="sip", account_sid="pbx.example.test", allowed_networks="127.0.0.0/8"
    )
    number = phone_number_claim(organization=organization, number=NUMBER)
    phone_number_assign(organization=organization, agent=agent, phone_number_id=number.pk)


def call_records(after: float) -> list[tuple[str, str, str]]:
    """(SIP Call-ID, status, ended reason) of the calls to NUMBER started after `after` (time.time())."""
    from datetime import UTC, datetime

    from django.db import connection

    from calls.models import Call

    connection.close()  # the server wrote them: a fresh connection
    since = datetime.fromtimestamp(after, tz=UTC)
    rows = Call.objects.filter(to_number=NUMBER, started_at__gte=since)
    return list(rows.values_list("provider_call_id", "status", "ended_reason"))


def start_server(env: dict[str, str], sip_port: int, rtp_ports: tuple[int, int]) -> subprocess.Popen[bytes]:
    log = ROOT / "var" / "bench-sip-server.log"
    command = [sys.executable, "manage.py", "sipserver", "--bind", f"127.0.0.1:{sip_port}"]
    command += ["--rtp-ports", f"{rtp_ports[0]}-{rtp_ports[1]}"]
    server_env = {**os.environ, **env, "PYTHONUNBUFFERED": "1"}
    server_env.pop("DJANGO_SETTINGS_MODULE", None)
    with open(log, "wb") as output:
        process = subprocess.Popen(command, cwd=ROOT, env=server_env, stdout=output, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"sipserver exited with {process.returncode}; see {log}")
        if b"SIP endpoint on udp:" in log.read_bytes():
            return process
        time.sleep(0.1)
    process.terminate()
    raise RuntimeError(f"sipserver did not start in time; see {log}")


# --- the run ----------------------------------------------------------------------------------------
RESTARTS: list[int] = []  # callers whose baresip could not start (a port of its own already taken)


async def dial(index: int, sip_port: int, wav: Path, seconds: int, delay: float) -> str:
    """One caller (testing/baresip.py); '' when its call ended, else what went wrong. baresip binds its SIP
    port (a free UDP port) for TCP and TLS too, and sometimes finds one of them taken: it then exits before
    it dials, and the caller starts it again (at most twice; counted in RESTARTS)."""
    await asyncio.sleep(delay)
    folder = CALLS_FOLDER / str(index)
    for _ in range(3):
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir()
        try:
            await baresip_call(sip_port, folder, wav, to=NUMBER, seconds=seconds, codec="PCMU")
        except (TimeoutError, OSError) as exc:
            return f"caller {index}: {type(exc).__name__} {exc}"
        if b"ua: init failed" not in (folder / "baresip.log").read_bytes():
            return ""
        RESTARTS.append(index)
    return f"caller {index}: baresip did not start ({folder / 'baresip.log'})"


async def callers(args: argparse.Namespace, sip_port: int, wav: Path, pid: int) -> tuple[list[str], list]:
    """All N callers, spread over --ramp-s; the server's CPU sampled every 0.25 s meanwhile."""
    seconds = int(args.lead_s + args.tail_s + 20)
    samples: list[tuple[float, float]] = []

    async def sample() -> None:
        while True:
            samples.append((time.time(), cpu_seconds([pid])))
            await asyncio.sleep(0.25)

    sampler = asyncio.create_task(sample())
    tasks = [
        asyncio.create_task(dial(i, sip_port, wav, seconds, i * args.ramp_s / args.calls)) for i in range(args.calls)
    ]
    _, unfinished = await asyncio.wait(tasks, timeout=args.deadline_s)
    for task in unfinished:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    samples.append((time.time(), cpu_seconds([pid])))
    sampler.cancel()
    problems = [task.result() for task in tasks if task.done() and not task.cancelled() and task.result()]
    if unfinished:
        problems.append(f"{len(unfinished)} callers unfinished at the deadline (--deadline-s)")
    return problems, samples


def cpu_between(samples: list[tuple[float, float]], start: float, end: float) -> float | None:
    """CPU seconds per second (1.0 = one core) between the samples nearest inside [start, end]."""
    inside = [sample for sample in samples if start <= sample[0] <= end]
    if len(inside) < 2 or inside[-1][0] - inside[0][0] < 1:
        return None
    return (inside[-1][1] - inside[0][1]) / (inside[-1][0] - inside[0][0])


def ms(label: str, values: list[float]) -> str:
    if not values:
        return f"{label}: none"
    return (
        f"{label}: p50 {statistics.median(values):.1f} ms, p95 {percentile(values, 95):.1f} ms, "
        f"max {max(values):.1f} ms ({len(values)} samples)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=50, help="concurrent calls")
    parser.add_argument("--ramp-s", type=float, default=8.0, help="the dials are spread over this")
    parser.add_argument("--lead-s", type=float, default=14.0, help="caller silence before the question")
    parser.add_argument("--tail-s", type=float, default=8.0, help="caller silence after it, then the BYE")
    parser.add_argument("--deadline-s", type=float, default=240.0, help="stop the callers after this")
    args = parser.parse_args()
    if not Path(BARESIP).exists():
        sys.exit("baresip is not installed (make setup installs it as root)")
    try:
        socket.socket(socket.AF_PACKET, socket.SOCK_DGRAM).close()
    except PermissionError:
        sys.exit("capturing loopback needs root or CAP_NET_RAW (the figures come from the packets)")

    chat = ChatServer(fallback=Text(ANSWER)).start()
    env = {
        "LOG_LEVEL": "WARNING",
        "DATABASE_URL": bench_database_url("sipbench", ROOT / "var"),
        "LLM_PROVIDER": "openai",
        "LLM_BASE_URL": chat.base_url,
        "LLM_MODEL": "scripted",
        "LLM_API_KEY": "x",
        "LIVENESS_HEARTBEAT_SECONDS": "5",
    }
    seed(env)
    sip_port = free_udp_port()
    # The endpoint's RTP ports: room for four per call, below the ephemeral ports baresip and the kernel pick
    # from (32768-60999) and the SIP tests' 31000-31999.
    low = 21000 + (os.getpid() % 24) * 400
    rtp_ports = (low, low + max(199, 4 * args.calls))
    shutil.rmtree(CALLS_FOLDER, ignore_errors=True)
    CALLS_FOLDER.mkdir(parents=True)
    wav = caller_wav(CALLS_FOLDER, QUESTION, lead=args.lead_s, tail=args.tail_s)
    server = start_server(env, sip_port, rtp_ports)
    engine = "PostgreSQL" if env["DATABASE_URL"].startswith("postgres") else "SQLite"
    print(
        f"one sipserver process ({engine}{', Redis' if os.environ.get('REDIS_URL') else ''}) on udp:127.0.0.1:"
        f"{sip_port}, RTP {rtp_ports[0]}-{rtp_ports[1]}; {args.calls} baresip callers (PCMU) dialled over "
        f"{args.ramp_s:g} s, each {args.lead_s:g} s of silence, the question, {args.tail_s:g} s of silence, BYE; "
        f"scripted brain; {os.cpu_count()} CPUs",
        flush=True,
    )
    try:
        warm = asyncio.run(dial(args.calls, sip_port, wav, int(args.lead_s + args.tail_s + 20), 0))
        if warm:
            raise RuntimeError(f"the warm-up call failed: {warm}")
        sniffer = Sniffer(sip_port, rtp_ports).start()
        cpu_before, began, bench_before = cpu_seconds([server.pid]), time.time(), os.times()
        problems, samples = asyncio.run(callers(args, sip_port, wav, server.pid))
        wall, cpu = time.time() - began, cpu_seconds([server.pid]) - cpu_before
        bench_after = os.times()  # the callers (reaped children) and this process (the capture)
        callers_cpu = sum(bench_after[2:4]) - sum(bench_before[2:4])
        capture_cpu = sum(bench_after[:2]) - sum(bench_before[:2])
        time.sleep(1)
        capture = sniffer.stop()
        records: list[tuple[str, str, str]] = []
        for _ in range(60):  # the server closes each call record after the BYE: up to 30 s
            records = call_records(began)
            if len(records) >= len(capture.invites) and all(status != "active" for _, status, _ in records):
                break
            time.sleep(0.5)
    finally:
        server.terminate()
        try:
            server.wait(15)
        except subprocess.TimeoutExpired:
            server.kill()
        chat.stop()

    figures = analyse(capture)
    completed = sum(1 for _, status, reason in records if (status, reason) == ("completed", "caller-hung-up"))
    others: dict[str, int] = defaultdict(int)
    for _, status, reason in records:
        if (status, reason) != ("completed", "caller-hung-up"):
            others[f"{status}/{reason}"] += 1
    print(f"wall {wall:.1f} s for the {args.calls} calls")
    print(
        f"calls started {len(capture.answers)} (200 OK) of {len(capture.invites)} INVITEs, call records "
        f"{len(records)}, completed {completed}, dropped {args.calls - completed}"
        + (f" ({dict(others)})" if others else "")
    )
    if RESTARTS:
        print(f"  callers whose baresip had to be started again (it never dialled): {len(RESTARTS)}")
    for problem in problems[:5]:
        print(f"  {problem}")
    print(
        f"greeting heard {figures.greeted}/{args.calls}, answer heard {figures.answered}/{args.calls} "
        f"(greeting still playing when the caller spoke: {figures.overlapped})"
    )
    print("  " + ms("call setup (INVITE -> 200 OK)", figures.setup_ms))
    print(
        "  "
        + ms("RTP send jitter of the endpoint's audio (|spacing - timestamp spacing|)", figures.jitter_ms)
        + (f"; p99 {percentile(figures.jitter_ms, 99):.1f} ms" if figures.jitter_ms else "")
    )
    print("  " + ms("end of the caller's speech -> first answer audio", figures.answer_ms))
    up = figures.up_window
    up_cpu = cpu_between(samples, *up) if up else None
    print(
        f"server CPU: {cpu:.1f} s over {wall:.1f} s = {cpu / args.calls:.2f} s per call; "
        + (
            f"{100 * up_cpu:.0f} % of one core with all {args.calls} calls up ({up[1] - up[0]:.1f} s window)"
            if up and up_cpu is not None
            else "no window with all calls up to measure"
        )
    )
    print(
        f"same machine: the baresip callers used {callers_cpu:.1f} s of CPU, this process (the capture) "
        f"{capture_cpu:.1f} s; capture: {sum(len(p) for p in capture.rtp.values())} RTP packets, "
        f"{capture.dropped_by_kernel} dropped by the kernel; load average at the end {os.getloadavg()[0]:.1f}"
    )


if __name__ == "__main__":
    main()
