"""send_digits in the session shell, on a hand-moved clock: the keys' tones join the outgoing audio after
what the agent is saying, and a barge-in does not cut them (nothing is cleared while they play)."""

from __future__ import annotations

import numpy as np
import pytest

from realtime.engine.contracts import TextPiece, ToolCall, ToolOutcome
from realtime.engine.sound import dtmf
from testing.dtmf import dtmf_decode
from testing.fakes import ScriptedBrain, ScriptedTools, silence
from testing.pipeline import Harness
from testing.recording import MemoryRecorder

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("close_db_threads")]

KEYS = "123456789#"


def keys_harness(agent):
    sent = ToolOutcome(result=f'{{"status": "sent", "digits": "{KEYS}"}}', status="success", digits=KEYS)
    brain = ScriptedBrain(
        [TextPiece("Pressing the keys now."), ToolCall(name="send_digits", arguments={"digits": KEYS}, id="t1")]
    )
    tools = ScriptedTools({"send_digits": sent})
    return Harness(agent, recorder=MemoryRecorder(), texts=["press them", "wait"], brain=brain, tools=tools)


def keys_heard(h: Harness) -> str:
    audio = np.concatenate([h.audio_after(0.0), np.zeros(4800, dtype="<i2")])
    return dtmf_decode(audio.astype("<i2").tobytes(), rate=24000)


async def test_the_tones_follow_the_agents_words_and_its_answer_follows_them(active_agent):
    h = keys_harness(active_agent)
    await h.start()
    await h.feed(silence(2000))
    await h.talk(600)
    await h.feed(silence(4000))
    assert keys_heard(h) == KEYS
    assert h.transport.transcripts()[-1] == ("assistant", "Done.")
    assert "clear" not in h.transport.kinds()
    # In the audio: the words, then the tones alone, then the answer (the scripted voice is a level of 3000).
    audio = h.audio_after(0.0)
    tones = np.flatnonzero((audio != 0) & (audio != 3000))
    words = np.flatnonzero(audio == 3000)
    assert words[words < tones[0]].size and words[words > tones[-1]].size
    assert not words[(words > tones[0]) & (words < tones[-1])].size
    await h.stop()


async def test_a_barge_in_while_the_tones_play_does_not_cut_them(active_agent):
    h = keys_harness(active_agent)
    await h.start()
    await h.feed(silence(2000))
    await h.talk(600)
    playout = h.conversation.playout
    assert playout is not None
    for _ in range(300):
        if playout.tones_unheard(h.clock.now()):
            break
        await h.feed(silence(20))
    assert playout.tones_unheard(h.clock.now())
    await h.feed(silence(300))  # a few keys in
    cleared = h.transport.kinds().count("clear")
    await h.talk(600)  # the caller speaks over the keys
    await h.feed(silence(3000))
    assert keys_heard(h) == KEYS  # every key, in order
    assert h.transport.kinds().count("clear") == cleared  # nothing was cleared while they played
    # The turn after the tones ("Done.") was dropped by the barge-in; the caller's turn is answered.
    assert h.transport.transcripts()[-1] == ("assistant", "Okay.")
    await h.stop()


def test_tones_are_whole_frames_of_the_q23_pairs() -> None:
    audio = dtmf.tones("1w#")
    assert len(audio) % 960 == 0
    # 2 tones and 2 gaps of 70 ms and a 500 ms pause: 780 ms, 39 frames of 20 ms.
    assert len(audio) // 960 == 39
    assert dtmf.FREQUENCIES["1"] == (697, 1209) and dtmf.FREQUENCIES["#"] == (941, 1477)
    assert dtmf_decode(dtmf.tones("0123456789*#ABCD", rate=8000)) == "0123456789*#ABCD"
    with pytest.raises(ValueError, match="'x'"):
        dtmf.tones("1x")
