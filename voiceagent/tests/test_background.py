"""kit/background.py: the singleton loops and the queued jobs, placed by BACKGROUND_WORK.

Loops and pools run real threads; every wait is on an event the work sets (never a sleep), bounded by a
generous timeout that only a broken helper reaches."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import threading
from typing import Any

import pytest

from kit import background

WAIT = 10.0  # seconds: only reached when something is broken


@pytest.fixture
def inprocess(settings: Any) -> Any:
    settings.BACKGROUND_WORK = "inprocess"
    return settings


def _loop(tick: Any, *, every: float = 3600.0, **options: Any) -> background.Loop:
    options.setdefault("feature", "test")
    return background.Loop("test-loop", tick, every=lambda: every, **options)


# --- loops --------------------------------------------------------------------------------------------


def test_a_loop_ticks_every_interval(inprocess: Any) -> None:
    ticks: list[int] = []
    third = threading.Event()

    def tick() -> None:
        ticks.append(1)
        if len(ticks) == 3:
            third.set()

    loop = _loop(tick, every=0.01)
    try:
        assert loop.start()
        assert third.wait(WAIT)
    finally:
        loop.stop()
    assert not loop.running()


def test_a_failing_tick_is_logged_and_the_loop_goes_on(inprocess: Any, caplog: Any) -> None:
    calls: list[int] = []
    again = threading.Event()

    def tick() -> None:
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("a database blip")
        again.set()

    loop = _loop(tick, every=0.01, failure="the test loop failed")
    with caplog.at_level(logging.WARNING, logger="kit.background"):
        try:
            loop.start()
            assert again.wait(WAIT)
        finally:
            loop.stop()
    failed = [r for r in caplog.records if r.getMessage() == "the test loop failed"]
    assert len(failed) == 1 and failed[0].exc_info is not None


def test_wake_ends_the_wait_at_once(inprocess: Any) -> None:
    first, second = threading.Event(), threading.Event()

    def tick() -> None:
        (second if first.is_set() else first).set()

    loop = _loop(tick, every=3600.0)  # without a wake the second tick is an hour away
    try:
        loop.start()
        assert first.wait(WAIT)
        assert not second.is_set()
        loop.wake()
        assert second.wait(WAIT)
    finally:
        loop.stop()


def test_a_paced_tick_asks_for_its_next_one_sooner(inprocess: Any) -> None:
    ticks: list[int] = []
    second = threading.Event()

    def tick() -> float:
        ticks.append(1)
        if len(ticks) == 2:
            second.set()
        return 0.0  # due now: the floor (0.05 s) instead of the hour

    loop = _loop(tick, every=3600.0, paced=True)
    try:
        loop.start()
        assert second.wait(WAIT)
    finally:
        loop.stop()


def test_a_loop_first_waits_when_asked(inprocess: Any) -> None:
    ticked = threading.Event()
    loop = _loop(ticked.set, every=3600.0, first=False)
    try:
        loop.start()
        assert loop.running()
        loop.wake()  # the first tick comes with the wake, not at the start
        assert ticked.wait(WAIT)
    finally:
        loop.stop()


def test_a_loop_never_starts_at_interval_zero(inprocess: Any) -> None:
    loop = _loop(lambda: None, every=0.0)
    assert not loop.start()
    assert not loop.running()
    assert not any(t.name == "test-loop" for t in threading.enumerate())


def test_a_loop_starts_once_however_many_start_it(inprocess: Any) -> None:
    release = threading.Event()
    loop = _loop(lambda: release.wait(WAIT))
    starters = [threading.Thread(target=loop.start) for _ in range(8)]
    try:
        for starter in starters:
            starter.start()
        for starter in starters:
            starter.join(WAIT)
        assert loop.start()
        assert [t.name for t in threading.enumerate()].count("test-loop") == 1
    finally:
        release.set()
        loop.stop()
    assert not loop.running()


@pytest.mark.parametrize("mode", ["celery", "inline", "off"])
def test_shared_work_loops_run_only_where_work_is_inprocess(settings: Any, mode: str) -> None:
    settings.BACKGROUND_WORK = mode
    loop = _loop(lambda: None)
    assert not loop.start() and not loop.running()


@pytest.mark.parametrize(("mode", "runs"), [("inprocess", True), ("celery", True), ("off", True), ("inline", False)])
def test_a_process_s_own_loop_runs_in_every_mode_but_inline(settings: Any, mode: str, runs: bool) -> None:
    settings.BACKGROUND_WORK = mode
    loop = background.Loop("own-loop", lambda: None, every=lambda: 3600.0, own=True, first=False)
    try:
        assert loop.start() is runs
        assert loop.running() is runs
    finally:
        loop.stop()


def test_a_loop_is_either_shared_or_own() -> None:
    with pytest.raises(ValueError):
        background.Loop("both", lambda: None, every=lambda: 1.0, feature="test", own=True)
    with pytest.raises(ValueError):
        background.Loop("neither", lambda: None, every=lambda: 1.0)


# --- the mode and its deprecated switches -------------------------------------------------------------


def test_a_deprecated_switch_decides_for_its_feature(settings: Any) -> None:
    settings.BACKGROUND_WORK = "inprocess"
    settings.EVENTS_WORKER = "off"
    settings.TEST_RUNS_INLINE = True
    assert background.mode("events") == "off"
    assert background.mode("test_runs") == "inline"
    assert background.mode("outbound") == "inprocess"
    assert background.mode() == "inprocess"


def test_an_inline_switch_set_false_queues_as_in_production(settings: Any) -> None:
    settings.BACKGROUND_WORK = "inline"
    settings.CALL_ANALYSIS_INLINE = False
    assert background.mode("analysis") == background.default_mode()
    assert background.mode("knowledge") == "inline"


def test_deprecated_switches_are_warned_about(settings: Any, caplog: Any) -> None:
    settings.OUTBOUND_WORKER = "inprocess"
    settings.KNOWLEDGE_INGEST_INLINE = False
    with caplog.at_level(logging.WARNING, logger="kit.background"):
        background.warn_deprecated()
    warned = sorted(r.getMessage().split()[0] for r in caplog.records if "BACKGROUND_WORK" in r.getMessage())
    assert warned == ["KNOWLEDGE_INGEST_INLINE", "OUTBOUND_WORKER"]


# --- queued jobs --------------------------------------------------------------------------------------


def test_inline_jobs_run_now_in_the_caller_s_thread(settings: Any) -> None:
    settings.BACKGROUND_WORK = "inline"
    ran: list[tuple[str, int]] = []
    pool = background.Pool("test-jobs", lambda: 1)
    where = background.submit(
        "test.job", lambda x: ran.append(("pool", x)), 1, pool=pool, inline=lambda x: ran.append(("inline", x))
    )
    assert where == "inline"
    assert ran == [("inline", 1)]
    where = background.submit("test.job", lambda x: ran.append((threading.current_thread().name, x)), 2, pool=pool)
    assert ran[-1] == (threading.current_thread().name, 2)


def test_jobs_run_on_the_bounded_pool_of_this_process(inprocess: Any) -> None:
    pool = background.Pool("test-jobs", lambda: 2)
    names: list[str] = []
    done = threading.Event()

    def job(n: int) -> None:
        names.append(threading.current_thread().name)
        if len(names) == 5:
            done.set()

    for n in range(5):
        assert background.submit("test.job", job, n, pool=pool) == "pool"
    assert done.wait(WAIT)
    assert set(names) <= {"test-jobs-0", "test-jobs-1"}
    pool.shutdown()


def test_a_job_whose_key_waits_is_not_queued_twice(inprocess: Any) -> None:
    pool = background.Pool("test-jobs", lambda: 1)
    busy, release, done = threading.Event(), threading.Event(), threading.Event()
    ran: list[str] = []

    def block() -> None:
        busy.set()
        release.wait(WAIT)

    pool.submit(block)
    assert busy.wait(WAIT)  # the only thread is busy: what follows waits
    assert pool.submit(ran.append, "a", key="k")
    assert not pool.submit(ran.append, "a", key="k")
    assert pool.submit(ran.append, "b", key="other")
    pool.submit(done.set)
    release.set()
    assert done.wait(WAIT)
    assert ran == ["a", "b"]
    pool.shutdown()


def test_a_failing_job_is_logged_and_the_pool_goes_on(inprocess: Any, caplog: Any) -> None:
    pool = background.Pool("test-jobs", lambda: 1)
    done = threading.Event()

    def fail() -> None:
        raise RuntimeError("boom")

    with caplog.at_level(logging.ERROR, logger="kit.background"):
        pool.submit(fail)
        pool.submit(done.set)
        assert done.wait(WAIT)
    assert any("test-jobs: a background job failed" in r.getMessage() for r in caplog.records)
    pool.shutdown()


def test_a_pool_shut_down_refuses_new_jobs() -> None:
    pool = background.Pool("test-jobs", lambda: 1, daemon=False)
    done = threading.Event()
    pool.submit(done.set)
    assert done.wait(WAIT)
    pool.shutdown()
    with pytest.raises(RuntimeError):
        pool.submit(done.set)


@pytest.fixture
def broker(monkeypatch: Any) -> list[tuple[str, tuple[Any, ...], bool, str]]:
    """A broker that records what is sent (name, args, retry, the sending thread)."""
    sent: list[tuple[str, tuple[Any, ...], bool, str]] = []
    monkeypatch.setattr(background, "celery_broker", lambda: True)
    monkeypatch.setattr(
        background,
        "send_task",
        lambda name, *args, retry=True: sent.append((name, args, retry, threading.current_thread().name)),
    )
    return sent


@pytest.mark.parametrize("mode", ["celery", "off"])
def test_a_registered_task_is_sent_to_celery_when_a_broker_is_configured(settings: Any, broker: Any, mode: str) -> None:
    settings.BACKGROUND_WORK = mode
    pool = background.Pool("test-jobs", lambda: 1)
    ran: list[str] = []
    assert background.submit("knowledge.ingest_document", ran.append, "doc-1", pool=pool) == "celery"
    assert broker == [("knowledge.ingest_document", ("doc-1",), True, threading.current_thread().name)]
    assert ran == []


def test_a_task_can_be_sent_from_a_background_thread(settings: Any, broker: Any) -> None:
    settings.BACKGROUND_WORK = "celery"
    pool = background.Pool("test-jobs", lambda: 1)
    where = background.submit(
        "realtime.analyze_call", lambda call_id: None, "call-1", pool=pool, publish_in_background=True, retry=False
    )
    assert where == "celery"
    sent = threading.Event()
    background._publisher.submit(sent.set)  # after the publish: one publisher thread, in order
    assert sent.wait(WAIT)
    assert broker == [("realtime.analyze_call", ("call-1",), False, "celery-publish-0")]


def test_a_process_that_never_imported_a_features_tasks_still_sends_its_jobs_to_celery() -> None:
    """In a fresh process (a web server, a management command), the first job of a feature whose tasks
    module nothing has imported yet goes to the broker, not to this process's pool."""
    script = (
        "import sys, django; django.setup()\n"
        "from celery import current_app\n"
        "from kit import background\n"
        "current_app.conf.task_always_eager = False\n"
        "background.send_task = lambda name, *args, retry=True: print('sent', name)\n"
        "assert 'realtime.agent_tests.tasks' not in sys.modules\n"
        "pool = background.Pool('fresh', lambda: 1)\n"
        "print(background.submit('realtime.run_agent_tests', print, 'run-1', pool=pool))\n"
    )
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "voiceagent.settings", "BACKGROUND_WORK": "celery"}
    env.pop("DATABASE_URL", None)
    env.pop("REDIS_URL", None)
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.splitlines()[-2:] == ["sent realtime.run_agent_tests", "celery"], done.stdout


def test_without_a_broker_or_a_task_the_job_runs_on_the_pool(settings: Any, broker: Any, monkeypatch: Any) -> None:
    settings.BACKGROUND_WORK = "celery"
    pool = background.Pool("test-jobs", lambda: 1)
    done = threading.Event()
    assert background.submit("not.a.registered.task", lambda: done.set(), pool=pool) == "pool"
    assert done.wait(WAIT)
    monkeypatch.setattr(background, "celery_broker", lambda: False)  # tasks run eagerly: no broker
    done.clear()
    assert background.submit("knowledge.ingest_document", lambda: done.set(), pool=pool) == "pool"
    assert done.wait(WAIT)
    assert broker == []
    pool.shutdown()


def test_fan_out_keeps_the_order_of_its_items() -> None:
    names: set[str] = set()

    def square(n: int) -> int:
        names.add(threading.current_thread().name)
        return n * n

    assert background.fan_out(square, range(20), threads=4, name="test-fan") == [n * n for n in range(20)]
    assert names and all(name.startswith("test-fan") for name in names)
    assert background.fan_out(square, [3], threads=4, name="test-fan") == [9]
