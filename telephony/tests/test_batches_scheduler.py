"""The call batch scheduler with real database locking (PostgreSQL row locks; SQLite IMMEDIATE
transactions on a file database): the window, the concurrency, retries with their backoff, completion,
and schedulers that restart or run at once (another process through `manage.py batch_tick`).

The carrier is simulated as the outbound part's status callbacks and media stream would end the calls:
an answered call goes live and ends through calls.services.call_finish; an unanswered one is closed
`busy` / `no-answer` with its ended time and call_ended sent on commit."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from django.db import connection, connections, transaction
from django.db.models import Q
from django.utils import timezone

from calls import services as call_services
from calls.models import OPEN_STATUSES, Call
from telephony.campaigns import services as campaign_services
from telephony.campaigns.services import batch_call_ended, batch_tick
from telephony.models import CallBatch, CallBatchRecipient, OutboundCall
from telephony.services.numbers import phone_number_claim
from testing.daphne import database_url

pytestmark = pytest.mark.django_db(transaction=True)

URL = "/public/v1/call-batches"
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def agent(owner, make_agent):
    return make_agent(owner.organization, name="Ava", status="active")


@pytest.fixture
def number(owner, outbound_ready):
    return phone_number_claim(organization=owner.organization, number="+14155550100")


def recipients(count: int) -> list[dict[str, Any]]:
    return [{"to": f"+1415555{1000 + i:04d}", "variables": {"position": str(i)}} for i in range(count)]


def midday_zone(at: datetime) -> str:
    """An IANA zone (Etc/GMT-N is UTC+N) where `at` is between 11:00 and 12:00, so a window of a few
    hours from then never crosses midnight, whenever the test runs."""
    offset = 11 - at.astimezone(ZoneInfo("UTC")).hour  # -12 ... +11
    return "Etc/GMT" if offset == 0 else f"Etc/GMT{'-' if offset > 0 else '+'}{abs(offset)}"


def window_from(opens: datetime, zone: str, hours: int = 4) -> dict[str, Any]:
    local = opens.astimezone(ZoneInfo(zone))
    return {
        "start": local.strftime("%H:%M"),
        "end": (local + timedelta(hours=hours)).strftime("%H:%M"),
        "timeZone": zone,
    }


def open_calls(batch_id: Any) -> list[Call]:
    return list(Call.objects.filter(outbound__recipient__batch_id=batch_id, status__in=OPEN_STATUSES))


def answer_and_complete(call: Call) -> None:
    """The person answers (the stream attaches: queued/ringing -> active), talks, and hangs up."""
    Call.objects.filter(pk=call.pk, status__in=("queued", "ringing")).update(status="active")
    call_services.call_finish(call=Call.objects.get(pk=call.pk), status="completed")


def end_unanswered(call: Call, status: str, at: datetime) -> None:
    """The carrier's final status callback of a call nobody answered (busy, no-answer)."""
    with transaction.atomic():
        ended = Call.objects.filter(pk=call.pk, status__in=OPEN_STATUSES).update(
            status=status, ended_reason=status, ended_at=at
        )
        if ended:
            transaction.on_commit(lambda: call_services.call_ended_send(call.pk))


def tick_in_another_process(at: datetime) -> int:
    env = {
        **os.environ,
        "DATABASE_URL": database_url(connection.settings_dict),
        "DATABASE_POOL": "false",
        "BACKGROUND_WORK": "off",  # as a cron job beside the servers: no loop here, no dispatcher woken
    }
    done = subprocess.run(
        [sys.executable, "manage.py", "batch_tick", "--at", at.isoformat()],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return int(json.loads(done.stdout.strip().splitlines()[-1])["placed"])


def run_together(jobs: list[Callable[[], int]]) -> list[Any]:
    barrier = threading.Barrier(len(jobs))
    results: list[Any] = [None] * len(jobs)

    def run(index: int) -> None:
        try:
            connection.ensure_connection()
            barrier.wait(timeout=30)
            results[index] = jobs[index]()
        except Exception as exc:  # noqa: BLE001 - reported by the assertions
            results[index] = exc
        finally:
            connections.close_all()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(jobs))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=180)
    assert not any(thread.is_alive() for thread in threads)
    return results


def race_with_another_process(now: datetime) -> list[Any]:
    """Another process ticks once (`manage.py batch_tick`) while this one ticks until it is done."""
    other_done = threading.Event()

    def keep_ticking() -> int:
        placed = 0
        while not other_done.is_set():
            placed += batch_tick(now=now)
            other_done.wait(0.01)
        return placed

    def other_process() -> int:
        try:
            return tick_in_another_process(now)
        finally:
            other_done.set()

    return run_together([keep_ticking, other_process])


# What the carrier does with each recipient (by position) on each attempt.
def carrier_outcome(position: int, attempt: int) -> str:
    if position == 29:
        return "busy"  # busy on both attempts: the final outcome is busy
    if position % 7 == 3:
        return "no-answer"  # not retried (retryOn is busy only)
    if position % 5 == 1 and attempt == 1:
        return "busy"  # retried after the backoff, then answered
    return "completed"


def test_a_campaign_of_30_with_concurrency_3_in_a_window_opening_a_minute_later(owner, agent, number):
    created = timezone.now()
    zone = midday_zone(created)
    opens = (created + timedelta(minutes=2)).replace(second=0, microsecond=0)  # the next minute but one
    response = owner.client.post(
        URL,
        {
            "name": "Reminders",
            "agentId": str(agent.id),
            "phoneNumberId": str(number.id),
            "recipients": recipients(30),
            "window": window_from(opens, zone),
            "concurrency": 3,
            "retry": {"maxAttempts": 2, "backoffMinutes": 5, "retryOn": ["busy"]},
        },
        format="json",
    )
    assert response.status_code == 201, response.json()
    batch_id = response.json()["id"]

    # Before the window: nothing, however often the scheduler looks.
    for at in (created, created + timedelta(seconds=30), opens - timedelta(seconds=1)):
        assert batch_tick(now=at) == 0
    assert not Call.objects.exists()
    assert CallBatch.objects.get(pk=batch_id).status == "scheduled"

    placed_at: dict[Any, datetime] = {}  # call id -> the scheduler's time when it was placed
    peak = 0

    def note_placements(at: datetime) -> None:
        nonlocal peak
        for call_id in Call.objects.filter(outbound__recipient__batch_id=batch_id).values_list("pk", flat=True):
            placed_at.setdefault(call_id, at)
        peak = max(peak, len(open_calls(batch_id)))
        assert peak <= 3

    now = opens
    done: set[str] = set()
    for step in range(120):
        if step == 6:
            # The scheduler is killed after its tick and a new one starts: it places nothing twice.
            assert batch_tick(now=now) <= 3
            note_placements(now)
            assert batch_tick(now=now) == 0
        elif step >= 8 and "other process" not in done and len(open_calls(batch_id)) < 3:
            # The scheduler restarts in another process (`manage.py batch_tick`): it fills the free slots.
            done.add("other process")
            free = 3 - len(open_calls(batch_id))
            due = CallBatchRecipient.objects.filter(batch_id=batch_id, state="pending").filter(
                Q(next_attempt_at__isnull=True) | Q(next_attempt_at__lte=now)
            )
            assert tick_in_another_process(now) == min(free, due.count())
        elif step >= 10 and "race" not in done and len(open_calls(batch_id)) < 3:
            # Two schedulers at once: another process, and this one ticking until the other is done.
            done.add("race")
            free = 3 - len(open_calls(batch_id))
            results = race_with_another_process(now)
            assert not [r for r in results if isinstance(r, Exception)], results
            assert sum(results) == free
        elif step >= 14 and "threads" not in done and len(open_calls(batch_id)) < 3:
            done.add("threads")
            # Two threads at once.
            results = run_together([lambda at=now: batch_tick(now=at)] * 2)
            assert not [r for r in results if isinstance(r, Exception)], results
        else:
            batch_tick(now=now)
        note_placements(now)
        if CallBatch.objects.get(pk=batch_id).status == "completed":
            break
        # The carrier: a call lasts two minutes of the scheduler's clock.
        for call in open_calls(batch_id):
            if now - placed_at[call.pk] >= timedelta(minutes=2):
                link = OutboundCall.objects.select_related("recipient").get(call=call)
                outcome = carrier_outcome(link.recipient.position, link.attempt)
                if outcome == "completed":
                    answer_and_complete(call)
                else:
                    end_unanswered(call, outcome, now)
        now += timedelta(minutes=1)
    else:
        pytest.fail("the batch did not complete")

    assert peak == 3
    assert done == {"other process", "race", "threads"}
    assert min(placed_at.values()) >= opens
    links = list(OutboundCall.objects.filter(recipient__batch_id=batch_id).select_related("recipient", "call"))
    # Never a recipient placed twice for one attempt; every attempt a call.
    assert len({(link.recipient_id, link.attempt) for link in links}) == len(links) == 30 + 6 + 1
    for recipient in CallBatchRecipient.objects.filter(batch_id=batch_id):
        attempts = sorted(link.attempt for link in links if link.recipient_id == recipient.pk)
        assert attempts == list(range(1, recipient.attempts + 1))
    # Retries after busy waited the backoff after the busy ending.
    retried = [link for link in links if link.attempt == 2]
    assert len(retried) == 7
    for second in retried:
        first = next(link for link in links if link.recipient_id == second.recipient_id and link.attempt == 1)
        assert first.call.status == "busy"
        assert placed_at[second.call_id] >= first.call.ended_at + timedelta(minutes=5)
    # The calls carry the recipient's variables.
    assert all(link.call.variables == {"position": str(link.recipient.position)} for link in links)

    batch = owner.client.get(f"{URL}/{batch_id}").json()
    assert batch["status"] == "completed" and batch["completedAt"] is not None
    assert batch["counts"] == {
        "total": 30,
        "done": 30,
        "pending": 0,
        "calling": 0,
        "completed": 25,
        "voicemail": 0,
        "noAnswer": 4,
        "busy": 1,
        "failed": 0,
        "canceled": 0,
    }
    calls = owner.client.get(f"{URL}/{batch_id}/calls", {"limit": 100}).json()
    assert len(calls) == 37
    assert batch_tick(now=now + timedelta(hours=1)) == 0


def create_batch(owner, agent, number, **fields: Any) -> str:
    response = owner.client.post(
        URL,
        {"name": "B", "agentId": str(agent.id), "phoneNumberId": str(number.id), "recipients": recipients(3), **fields},
        format="json",
    )
    assert response.status_code == 201, response.json()
    return str(response.json()["id"])


def test_no_call_before_start_at_nor_outside_the_window_days(owner, agent, number):
    start = timezone.now() + timedelta(days=1)
    batch_id = create_batch(
        owner,
        agent,
        number,
        startAt=start.isoformat(),
        window={"days": ["mon"], "start": "09:00", "end": "10:00", "timeZone": "UTC"},
    )
    monday = (start + timedelta(days=(7 - start.weekday()) % 7 or 7)).replace(hour=9, minute=30)
    assert batch_tick(now=start - timedelta(minutes=1)) == 0
    assert batch_tick(now=monday - timedelta(days=1)) == 0  # a Sunday
    assert batch_tick(now=monday.replace(hour=10, minute=0)) == 0  # the end is not in the window
    assert batch_tick(now=monday.replace(hour=8, minute=59)) == 0
    assert batch_tick(now=monday) == 1
    assert CallBatch.objects.get(pk=batch_id).status == "running"


def test_an_ending_delivered_twice_or_late_is_settled_once(owner, agent, number):
    batch_id = create_batch(owner, agent, number, retry={"maxAttempts": 3, "backoffMinutes": 0, "retryOn": ["busy"]})
    now = timezone.now()
    assert batch_tick(now=now) == 1
    (call,) = open_calls(batch_id)
    end_unanswered(call, "busy", now)
    recipient = CallBatchRecipient.objects.get(calls__call=call)
    assert (recipient.state, recipient.attempts) == ("pending", 1)
    batch_call_ended(call_id=call.pk)  # delivered again
    assert batch_tick(now=now) == 1  # the retry (attempt 2)
    batch_call_ended(call_id=call.pk)  # the first attempt's ending, late: changes nothing
    recipient.refresh_from_db()
    assert (recipient.state, recipient.attempts) == ("calling", 2)


def test_an_ending_whose_signal_was_lost_is_settled_by_the_next_tick(owner, agent, number):
    batch_id = create_batch(owner, agent, number)
    now = timezone.now()
    assert batch_tick(now=now) == 1
    (call,) = open_calls(batch_id)
    # The process stopped between the ending's commit and call_ended.
    Call.objects.filter(pk=call.pk).update(status="no-answer", ended_reason="no-answer", ended_at=now)
    assert batch_tick(now=now) == 1  # settles the first recipient, places the second
    first = CallBatchRecipient.objects.get(batch_id=batch_id, position=0)
    assert (first.state, first.outcome) == ("done", "no-answer")


def test_a_voicemail_ending_is_its_own_outcome(owner, agent, number):
    batch_id = create_batch(owner, agent, number)
    assert batch_tick() == 1
    (call,) = open_calls(batch_id)
    Call.objects.filter(pk=call.pk).update(status="active")
    call_services.call_finish(call=Call.objects.get(pk=call.pk), status="completed", ended_reason="voicemail")
    assert CallBatchRecipient.objects.get(batch_id=batch_id, position=0).outcome == "voicemail"


def test_paused_batches_place_nothing_and_resume(owner, agent, number):
    batch_id = create_batch(owner, agent, number, concurrency=3)
    assert owner.client.post(f"{URL}/{batch_id}/pause").status_code == 200
    assert batch_tick() == 0
    resumed = owner.client.post(f"{URL}/{batch_id}/resume").json()
    assert resumed["status"] == "scheduled"
    assert batch_tick() == 3


def test_cancel_ends_pending_recipients_and_cancels_queued_calls(owner, agent, number, monkeypatch):
    """Cancel hands queued calls to telephony.outbound.services.outbound_call_cancel (the outbound part's; here as
    it ends such a call: `canceled`, call_ended on commit) and their recipients end canceled."""
    canceled: list[Any] = []

    def outbound_call_cancel(*, call: Call) -> Call:
        canceled.append(call.pk)
        end_unanswered(call, "canceled", timezone.now())
        return call

    monkeypatch.setattr(campaign_services.outbound, "outbound_call_cancel", outbound_call_cancel)
    batch_id = create_batch(owner, agent, number, concurrency=2)
    assert batch_tick() == 2
    body = owner.client.post(f"{URL}/{batch_id}/cancel").json()
    assert len(canceled) == 2
    batch = owner.client.get(f"{URL}/{batch_id}").json()
    assert batch["status"] == "canceled" and batch["completedAt"] is not None
    assert batch["counts"]["canceled"] == 3 and body["counts"]["calling"] == 0
    assert batch_tick() == 0


def test_cancel_without_outbound_cancel_leaves_live_calls_to_their_end(owner, agent, number):
    batch_id = create_batch(owner, agent, number, retry={"maxAttempts": 2, "backoffMinutes": 0, "retryOn": ["busy"]})
    assert batch_tick() == 1
    (call,) = open_calls(batch_id)
    Call.objects.filter(pk=call.pk).update(status="active")  # live: it goes on
    body = owner.client.post(f"{URL}/{batch_id}/cancel").json()
    assert (body["counts"]["calling"], body["counts"]["canceled"], body["completedAt"]) == (1, 2, None)
    call_services.call_finish(call=Call.objects.get(pk=call.pk), status="failed")
    batch = owner.client.get(f"{URL}/{batch_id}").json()
    assert batch["status"] == "canceled" and batch["completedAt"] is not None
    assert (batch["counts"]["failed"], batch["counts"]["canceled"]) == (1, 2)


def test_a_lost_ending_of_a_paused_batch_outside_its_window_is_settled_too(owner, agent, number):
    batch_id = create_batch(owner, agent, number, window={"start": "09:00", "end": "10:00", "timeZone": "UTC"})
    nine = timezone.now().replace(hour=9, minute=30)
    assert batch_tick(now=nine) == 1
    owner.client.post(f"{URL}/{batch_id}/pause")
    (call,) = open_calls(batch_id)
    Call.objects.filter(pk=call.pk).update(status="busy", ended_reason="busy", ended_at=nine)  # signal lost
    assert batch_tick(now=nine.replace(hour=22)) == 0
    first = CallBatchRecipient.objects.get(batch_id=batch_id, position=0)
    assert (first.state, first.outcome) == ("done", "busy")


def test_a_scheduler_dying_in_the_middle_of_its_tick_leaves_nothing_half_done(owner, agent, number, monkeypatch):
    batch_id = create_batch(owner, agent, number, concurrency=3)
    real_create = campaign_services.outbound.outbound_call_create
    made: list[Any] = []

    def dies_on_the_second(**kwargs: Any) -> Call:
        if made:
            raise SystemExit("killed")  # the process ends here: the tick's transaction never commits
        made.append(real_create(**kwargs))
        return made[-1]

    monkeypatch.setattr(campaign_services.outbound, "outbound_call_create", dies_on_the_second)
    with pytest.raises(SystemExit):
        batch_tick()
    assert made and not Call.objects.exists()  # the first call was rolled back with the tick
    assert set(CallBatchRecipient.objects.values_list("state", "attempts")) == {("pending", 0)}
    monkeypatch.setattr(campaign_services.outbound, "outbound_call_create", real_create)
    assert batch_tick() == 3  # the restarted scheduler
    links = OutboundCall.objects.filter(recipient__batch_id=batch_id)
    assert sorted((link.recipient.position, link.attempt) for link in links) == [(0, 1), (1, 1), (2, 1)]
