"""Answering machines on an outbound call: what the session does with the carrier's verdict
(docs/guides/voicemail.md, docs/guides/voicemail.md).

Armed on an outbound call whose agent's `voicemail.detection` is "provider" (agents/voicemail.py). The
verdict (Twilio's AnsweredBy) arrives asynchronously through the call's channel-layer group
(telephony/voicemail.py -> the stream consumer -> `Session.answered_by`), at any time:

- the greeting waits at most GREETING_HOLD_SECONDS for a first verdict; `human`, `unknown` or no verdict
  by then: the agent greets as usual (a later `human` changes nothing);
- `machine_start` (detection without waiting for the beep): with leave-message the agent goes quiet
  (what it is saying is cut, nothing the machine says is answered) until the end verdict, at most
  MACHINE_END_WAIT_SECONDS, then leaves the message; with hang-up the call ends at once;
- `machine_end_beep`, `machine_end_silence`, `machine_end_other`: with leave-message whatever the agent is
  saying is cut and it speaks the AI identity disclosure and the message ({{variables}} filled from the
  call's), then the call ends; with hang-up it ends at once;
- `fax`: the call ends at once.
Every machine ending is status completed, endedReason `voicemail`, billed like any call.
"""

from __future__ import annotations

import asyncio
from typing import Any

from agents.voicemail import (
    ACTION_LEAVE_MESSAGE,
    FAX,
    MACHINE_START,
    MESSAGE_END_VERDICTS,
    TALK_VERDICTS,
    VERDICTS,
    detection_on,
)
from calls.models import CallDirection
from calls.variables import placeholders_fill
from realtime.engine.contracts import VoicemailHost

GREETING_HOLD_SECONDS = 1.5  # the longest the greeting waits for a verdict
MACHINE_END_WAIT_SECONDS = 30.0  # after machine_start, the longest wait for the end of the machine's greeting


class AnsweringMachine:
    """One call's answering-machine handling (the session's `voicemail`)."""

    def __init__(self, session: VoicemailHost) -> None:
        self.session = session
        self.setting: dict[str, Any] = dict(getattr(session.agent, "voicemail", None) or {})
        self.armed: bool | None = None  # decided once the call record is known (`arm`)
        self.verdict: str | None = None  # the latest verdict
        self.acted = False  # the machine path ran (message left or hung up)
        self.quiet = False  # a machine is talking: wait for its end
        self._decided = asyncio.Event()  # the greeting may stop waiting (a verdict came)
        self._pending: list[tuple[str, int | None]] = []  # verdicts that arrived before `arm`
        self._since: float | None = None  # clock time of the session start (the call answered)
        self._end_wait: asyncio.Task[None] | None = None

    def arm(self, call: Any) -> None:
        """At the start, once the call record is known: armed on an outbound call with detection."""
        self._since = self.session.clock.now()
        direction = getattr(call, "direction", None)
        self.armed = direction == CallDirection.OUTBOUND and detection_on(self.setting)
        known = str(getattr(call, "answered_by", "") or "")
        if self.armed and known and not self._pending:
            self._pending.append((known, None))  # the verdict came before the stream started

    @property
    def holds_greeting(self) -> bool:
        return bool(self.armed)

    async def hold(self) -> bool:
        """Wait for a first verdict (at most GREETING_HOLD_SECONDS). True when the agent should greet."""
        session = self.session
        started = session.clock.now()
        for verdict, detection_ms in self._pending:
            await self.receive(verdict, detection_ms)
        self._pending.clear()
        # The session's clock: a verdict (`_decided`) wakes it before the deadline.
        await session.clock.sleep_until(started + GREETING_HOLD_SECONDS, self._decided)
        held_ms = round((session.clock.now() - started) * 1000)
        greet = not (self.acted or self.quiet or session.transferring)
        session.recorder.log(
            "info",
            "greeting held for answering-machine detection",
            heldMs=held_ms,
            answeredBy=self.verdict,
            greeting="played" if greet else "not played",
        )
        return greet

    async def receive(self, verdict: str, detection_ms: int | None = None) -> None:
        """A verdict of the carrier's detection (any time during the call)."""
        if verdict not in VERDICTS:
            return
        if self.armed is None:
            self._pending.append((verdict, detection_ms))  # the call record is not known yet
            return
        session = self.session
        since = None if self._since is None else round((session.clock.now() - self._since) * 1000)
        session.recorder.log(
            "info",
            "answering-machine verdict",
            answeredBy=verdict,
            detectionMs=detection_ms,
            sinceAnswerMs=since,
            armed=bool(self.armed),
        )
        self.verdict = verdict
        if not self.armed or self.acted:
            return
        if verdict in TALK_VERDICTS:
            if not self.quiet:
                self._decided.set()
            return
        leave = self.setting.get("action") == ACTION_LEAVE_MESSAGE and bool(self.setting.get("message"))
        if verdict == MACHINE_START and leave:
            await self._go_quiet()
            return
        self.acted = True
        self._decided.set()
        if self._end_wait is not None:
            self._end_wait.cancel()
        if verdict in MESSAGE_END_VERDICTS and leave:
            await session.leave_voicemail(self._message())
        else:
            why = "a fax machine answered" if verdict == FAX else "an answering machine answered"
            await session.end_for_voicemail(why)

    async def _go_quiet(self) -> None:
        """A machine's greeting is playing: cut the agent, answer nothing, wait for its end."""
        if self.quiet:
            return
        self.quiet = True
        self._decided.set()
        await self.session.machine_talking()
        self._end_wait = self.session.spawn(self._leave_anyway(), "machine-end-wait")

    async def _leave_anyway(self) -> None:
        """No end verdict after machine_start: the message is left anyway."""
        clock = self.session.clock
        await clock.sleep_until(clock.now() + MACHINE_END_WAIT_SECONDS)
        if not self.acted:
            self.session.recorder.log("warn", "no end of the machine's greeting was detected; leaving the message")
            self.acted = True
            await self.session.leave_voicemail(self._message())

    def _message(self) -> str:
        # The same values as the greeting's placeholders: the call's variables and the built-ins.
        # (Session.placeholder_values, set when the call opened, before any greeting or hold.)
        values = self.session.placeholder_values
        text, unknown = placeholders_fill(str(self.setting.get("message") or ""), values)
        if unknown:
            self.session.recorder.log("warn", "unknown variables in the voicemail message", names=unknown)
        return text
