"""Recognition worker processes.

PocketSphinx holds the GIL while it decodes. In the server process, a dozen sessions decoding at
once starve the event loop: caller audio is read from the sockets seconds late and every turn ends
late (measured: 20 sessions on 2 cores, 5 s from the end of a sentence to the answer). So the
decoders live in worker processes (`ASR_WORKERS` per server process, started once, shared by its
sessions); the server streams each session's audio to its worker through a pipe and waits only for
the text at the end of a turn.

A `RemoteRecognizer` has the interface of `decoder.Recognizer` (start, feed, finish). A worker that
dies fails its sessions' pending turns with '' (logged) and is replaced for the next session.
"""

from __future__ import annotations

import collections
import itertools
import logging
import os
import socket
import subprocess
import sys
import threading
import weakref
from collections import deque
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from realtime.engine.speech.decoder import Recognizer
from realtime.engine.speech.language_model import LanguageModel, word_pairs

logger = logging.getLogger(__name__)

# The folder the project's packages are in: a worker imports this module from there, wherever the server runs.
_ROOT = str(Path(__file__).resolve().parents[3])
FINISH_TIMEOUT_SECONDS = 20
PEEK_TIMEOUT_SECONDS = 1  # longer than the end-of-turn window: the answer would come too late to help


class RecognitionUnavailable(Exception):
    """The worker process is gone."""


def _serve(conn: Any) -> None:  # runs in the worker process
    """Serve the pipe: messages are taken per session in order, but a session that waits for an
    answer (the words at a pause, the end of its turn) is served before sessions that are only
    being fed audio: under load the decoders run behind the callers, and the end of a turn must not
    wait for every other caller's backlog (their audio is decoded as soon as no turn is waiting)."""
    recognizers: dict[int, Recognizer] = {}
    failures: dict[int, str] = {}
    queues: dict[int, deque[tuple[str, int, int, Any]]] = {}
    waiting: deque[int] = deque()  # sessions with a request queued, oldest first
    rotation: deque[int] = deque()  # sessions with work queued, in turn

    def take(message: tuple[str, int, int, Any]) -> None:
        session = message[2]
        queue = queues.setdefault(session, deque())
        if not queue:
            rotation.append(session)
        queue.append(message)
        if message[1] and session not in waiting:
            waiting.append(session)

    def run(op: str, request: int, session: int, argument: Any) -> None:
        try:
            if op == "open":
                recognizers[session] = Recognizer(argument)
            elif op == "close":
                recognizers.pop(session, None)
                failures.pop(session, None)
            elif op == "start":
                recognizers[session].start()
            elif op == "feed":
                recognizers[session].feed(argument)
            elif op == "finish":
                failure = failures.pop(session, None)
                if failure is not None:
                    raise RuntimeError(failure)
                conn.send((request, True, recognizers[session].finish()))
            elif op == "peek":
                conn.send((request, True, recognizers[session].peek() if session not in failures else ""))
            elif op == "ping":
                conn.send((request, True, "pong"))
        except Exception as exc:  # noqa: BLE001 - reported to the session, never fatal to the worker
            message = f"{type(exc).__name__}: {exc}"
            if request:
                conn.send((request, False, message))
            else:
                failures[session] = message

    while True:
        try:
            if not rotation:
                take(conn.recv())
            while conn.poll():
                take(conn.recv())
        except (EOFError, OSError, KeyboardInterrupt):
            return
        if waiting:  # everything of the oldest waiting session, up to its request
            session = waiting.popleft()
            queue = queues[session]
            while queue:
                message = queue.popleft()
                run(*message)
                if message[1]:
                    break
            if any(message[1] for message in queue):
                waiting.append(session)
        else:  # one message of the next session in turn
            session = rotation[0]
            queue = queues[session]
            run(*queue.popleft())
        if not queue:
            queues.pop(session, None)
            rotation.remove(session)
        elif not waiting and rotation and rotation[0] == session:
            rotation.rotate(-1)


class Worker:
    """One worker process and the pipe to it; safe to use from several threads."""

    def __init__(self) -> None:
        # A new interpreter running this module (never a fork of the threaded server), which imports only
        # what decoding needs: multiprocessing's spawn would also import the server's main module in it
        # (Daphne, Twisted, Celery: 0.4 s of CPU of the 0.6 s a worker took to start).
        ours, theirs = socket.socketpair()
        with theirs:
            self.process = subprocess.Popen(  # noqa: S603 - this interpreter and this module, no outside input
                [sys.executable, "-m", __name__, str(theirs.fileno())],
                pass_fds=(theirs.fileno(),),
                env={**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, (_ROOT, os.environ.get("PYTHONPATH"))))},
            )
        self._conn = Connection(ours.detach())
        self.sessions = 0
        self._send_lock = threading.Lock()
        # Sessions whose recognizer was collected: their "close" goes out with the next message. A
        # recognizer's finalizer runs wherever the garbage collector does, also inside _send of this thread
        # (pickling allocates), where taking _send_lock again would deadlock the thread and every other
        # sender; appending to a deque takes no lock.
        self._closing: collections.deque[int] = collections.deque()
        self._replies: dict[int, Future[str]] = {}
        self._replies_lock = threading.Lock()
        self._ids = itertools.count(1)
        self.alive = True
        threading.Thread(target=self._read, name="asr-replies", daemon=True).start()

    def _read(self) -> None:
        while True:
            try:
                request, ok, value = self._conn.recv()
            except (EOFError, OSError):
                break
            with self._replies_lock:
                future = self._replies.pop(request, None)
            if future is not None:
                if ok:
                    future.set_result(value)
                else:
                    future.set_exception(RuntimeError(value))
        self.alive = False
        with self._replies_lock:
            pending, self._replies = list(self._replies.values()), {}
        for future in pending:
            future.set_exception(RecognitionUnavailable("the recognition worker stopped"))

    def close_later(self, session: int) -> None:
        """End `session` with the next message to this worker (safe from a finalizer: takes no lock)."""
        self._closing.append(session)

    def _send(self, message: tuple[str, int, int, Any]) -> None:
        with self._send_lock:
            try:
                while self._closing:
                    self._conn.send(("close", 0, self._closing.popleft(), None))
                self._conn.send(message)
            except (OSError, ValueError) as exc:
                self.alive = False
                raise RecognitionUnavailable("the recognition worker stopped") from exc

    def post(self, op: str, session: int, argument: Any = None) -> None:
        """Send without waiting for an answer."""
        if not self.alive:
            raise RecognitionUnavailable("the recognition worker stopped")
        self._send((op, 0, session, argument))

    def call(self, op: str, session: int, timeout: float = FINISH_TIMEOUT_SECONDS) -> str:
        """Send and wait for the worker's answer."""
        future: Future[str] = Future()
        request = next(self._ids)
        with self._replies_lock:
            if not self.alive:
                raise RecognitionUnavailable("the recognition worker stopped")
            self._replies[request] = future
        self._send((op, request, session, None))
        try:
            return future.result(timeout)
        except FutureTimeout:
            with self._replies_lock:
                self._replies.pop(request, None)
            raise

    def stop(self) -> None:
        self._conn.close()  # the worker reads the end of its pipe and exits
        try:
            self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


class Pool:
    def __init__(self, size: int) -> None:
        self.size = max(1, size)
        self._workers: list[Worker] = []
        self._lock = threading.Lock()
        self._sessions = itertools.count(1)

    def _replenish(self) -> list[Worker]:
        """Drop dead workers and start new ones up to the pool's size (caller holds the lock)."""
        self._workers = [worker for worker in self._workers if worker.alive]
        while len(self._workers) < self.size:
            self._workers.append(Worker())
        return self._workers

    def start(self) -> None:
        """Start the workers and wait until each answers (they import PocketSphinx)."""
        with self._lock:
            workers = list(self._replenish())
        for worker in workers:
            worker.call("ping", 0, timeout=60)

    def checkout(self) -> tuple[Worker, int]:
        """The least busy live worker (replacing dead ones) and a new session number."""
        with self._lock:
            worker = min(self._replenish(), key=lambda candidate: candidate.sessions)
            worker.sessions += 1
            return worker, next(self._sessions)

    def stop(self) -> None:
        with self._lock:
            workers, self._workers = self._workers, []
        for worker in workers:
            worker.stop()


def _release(worker: Worker, session: int) -> None:
    """A recognizer was collected: its worker's session closes with the worker's next message (this runs
    wherever the garbage collector does: it must not send, see Worker._closing)."""
    worker.sessions -= 1
    worker.close_later(session)


class RemoteRecognizer:
    """A session's recognizer whose decoder lives in a worker process."""

    def __init__(self, pool: Pool, model: LanguageModel | None) -> None:
        self.model = model
        self._worker, self._session = pool.checkout()
        weakref.finalize(self, _release, self._worker, self._session)  # the session ends with the object
        self._broken = False
        self._send("open", model)

    @property
    def worker(self) -> Worker:
        """The worker process that decodes for this session (checked out of the pool)."""
        return self._worker

    def _send(self, op: str, argument: Any = None) -> None:
        if self._broken:
            return
        try:
            self._worker.post(op, self._session, argument)
        except RecognitionUnavailable:
            self._broken = True
            logger.error("the recognition worker stopped; this session's speech is no longer recognized")

    def start(self) -> None:
        self._send("start")

    def feed(self, pcm16_16k: bytes) -> None:
        self._send("feed", pcm16_16k)

    def known_word_pairs(self) -> frozenset[tuple[str, str]] | None:
        """The word pairs of this recognizer's language model (None: the general model)."""
        return word_pairs(self.model)

    def peek(self) -> str:
        """The words so far ('' when they cannot be had soon: the turn then keeps its full window)."""
        if self._broken:
            return ""
        try:
            return self._worker.call("peek", self._session, timeout=PEEK_TIMEOUT_SECONDS)
        except (RecognitionUnavailable, FutureTimeout, RuntimeError):
            return ""

    def finish(self) -> str:
        if self._broken:
            return ""
        try:
            return self._worker.call("finish", self._session)
        except (RecognitionUnavailable, FutureTimeout, RuntimeError):
            logger.exception("recognition failed")
            return ""


_pool: Pool | None = None
_pool_lock = threading.Lock()


def pool(size: int) -> Pool:
    """The process-wide pool (its size fixed by the first call)."""
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = Pool(size)
        return _pool


if __name__ == "__main__":  # a worker process (Worker): serve the pipe whose descriptor is the argument
    _serve(Connection(int(sys.argv[1])))
