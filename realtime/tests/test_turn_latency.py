"""The cascade's turn latency stages, on a hand-driven clock: a caller turn is measured from the
caller's last speech (end-of-turn wait, recognition, first model token, first audio byte, total),
counted in the Prometheus histograms and stored on the call as p50/p95 when it ends."""

from __future__ import annotations

import re
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from django.contrib.auth.models import User
from prometheus_client import REGISTRY

from testing.fakes import silence
from testing.pipeline import Harness

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("close_db_threads")]


def turns_counted(stage: str) -> float:
    labels = {"stage": stage, "engine": "cascade"}
    return REGISTRY.get_sample_value("voiceagent_turn_latency_seconds_count", labels) or 0.0


@pytest.fixture
def agent(active_agent: Any) -> Any:
    active_agent.greeting_type = "none"
    active_agent.save()
    return active_agent


async def test_each_answered_turn_is_timed_stage_by_stage_and_stored_on_the_call(agent):
    before = {stage: turns_counted(stage) for stage in ("end_of_turn", "recognition", "total")}
    h = Harness(agent, texts=["i would like to book a table", "and one for tomorrow"])
    await h.start()
    await h.feed(silence(1500))  # the disclosure plays: not a caller turn, not timed
    await h.talk(800, then_silence_ms=1500)
    await h.talk(600, then_silence_ms=1500)
    call = await h.stop()

    assert {stage: turns_counted(stage) - before[stage] for stage in before} == {
        "end_of_turn": 2,
        "recognition": 2,
        "total": 2,
    }
    latency = call.latency
    assert latency["turns"] == 2
    # The fake detector ends a turn after 100 ms of silence; audio arrives in 20 ms chunks.
    assert 100 <= latency["endOfTurnMs"]["p50"] <= latency["endOfTurnMs"]["p95"] <= 140
    # Recognition, the brain and synthesis run inline here: no time passes between those stages.
    assert latency["recognitionMs"] == {"p50": 0, "p95": 0}
    assert latency["firstTokenMs"] == {"p50": 0, "p95": 0}
    assert latency["totalMs"]["p50"] >= latency["endOfTurnMs"]["p50"]


async def test_a_call_without_a_caller_turn_has_no_latency(agent):
    h = Harness(agent)
    await h.start()
    await h.feed(silence(1500))
    call = await h.stop()
    assert call.latency is None


def test_the_turn_and_the_latency_table_quote_the_same_figure(agent, client):
    """One figure for one turn: the transcript's "answered N ms after the caller stopped speaking" on the
    call page is the table's end of speech to first audio, and the API's totalMs."""

    async def converse() -> Any:
        h = Harness(agent, texts=["what time do you open"])
        await h.start()
        await h.feed(silence(1500))
        await h.talk(800, then_silence_ms=1500)
        await h.logs()  # flushed to the call's agent log, where the page reads each turn's figure
        return await h.stop()

    call = async_to_sync(converse)()
    total = call.latency["totalMs"]["p50"]
    assert call.latency["turns"] == 1 and total >= call.latency["endOfTurnMs"]["p50"] > 0

    client.force_login(User.objects.create_superuser("root", "root@example.com", "pw"))
    page = client.get(f"/admin/calls/call/{call.pk}/change/").content.decode()
    assert f"answered {total} ms after the caller stopped speaking" in page
    table_row = re.search(r"End of speech to first audio \(the figure each turn shows\)</t[hd]>\s*<td>(\d+)", page)
    assert table_row is not None and int(table_row.group(1)) == total
