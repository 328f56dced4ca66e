"""Threads a stop left inside a read or an open of their source, and what exiting does about them.

FFmpeg's read cannot be interrupted through PyAV: stopping a camera whose stream has gone
quiet would wait for the read timeout.  The session stops waiting for such a reader
(:meth:`pipeline.camera.Camera.waits_for`) and records it here with :func:`leave`; the thread
ends on its own within its source's read timeout and closes what it read.  Opening a stream
blocks the same way, up to the open timeout: :func:`run_unless_stopped` opens on a helper
thread, so that a stop returns at once and leaves the open behind.

Tearing the interpreter down under a read still inside FFmpeg can crash it, so:

* the ``vapipe`` command exits at once past such reads and opens (:func:`exit_past_readers`),
  after its outputs are closed and its streams flushed;
* a program that embeds the runtime waits at its exit for them to end (an ``atexit`` hook,
  at most :data:`LEFT_READER_WAIT_S` per thread).
"""

from __future__ import annotations

import atexit
import logging
import os
import sys
import threading
from concurrent.futures import Future
from typing import Callable, TypeVar

__all__ = ["LEFT_READER_WAIT_S", "Stopped", "exit_past_readers", "leave", "readers_left", "run_unless_stopped"]

#: at most this long, at interpreter exit, for each read or open a stop left behind
LEFT_READER_WAIT_S = 60.0
#: how often a caller waiting for work on a helper thread asks whether it was stopped
STOP_POLL_S = 0.05
T = TypeVar("T")
_LEFT: set[threading.Thread] = set()


def leave(thread: threading.Thread) -> None:
    """Record ``thread``, inside a read or an open that the stop no longer waits for."""
    readers_left()  # forgets the ended ones
    _LEFT.add(thread)


def readers_left() -> list[threading.Thread]:
    """Threads a stop left inside a read or an open that still run."""
    alive = [t for t in list(_LEFT) if t.is_alive()]
    _LEFT.intersection_update(alive)
    return alive


def exit_past_readers(code: int) -> int:
    """``code``, for a command about to exit; if a stop left a thread inside an FFmpeg read or
    open, the process exits here at once instead (standard streams and logs flushed first)."""
    if not readers_left():
        return code
    sys.stdout.flush()
    sys.stderr.flush()
    logging.shutdown()
    os._exit(code)


class Stopped(Exception):
    """A stop came before the work :func:`run_unless_stopped` waited for was done."""


def run_unless_stopped(work: Callable[[], T], stopped: Callable[[], bool], discard: Callable[[T], None]) -> T:
    """``work()`` on a helper thread; its result, its error, or :class:`Stopped` within
    :data:`STOP_POLL_S` of ``stopped()`` turning true.

    Work that cannot be interrupted (an open inside FFmpeg) goes on after a stop: its
    result is handed to ``discard`` when it arrives (an error is dropped), and its thread is
    recorded with :func:`leave`, so that exiting does not tear the interpreter down under it.
    """
    done: Future[T] = Future()

    def run() -> None:
        try:
            done.set_result(work())
        except BaseException as exc:  # noqa: BLE001 - handed to the caller
            done.set_exception(exc)

    helper = threading.Thread(target=run, name=f"{threading.current_thread().name}:open", daemon=True)
    helper.start()
    while True:
        try:
            return done.result(timeout=STOP_POLL_S)
        except TimeoutError:
            if done.done():  # the work itself raised TimeoutError (handed on as it is)
                raise
            if stopped():
                done.add_done_callback(lambda f: _discard(f, discard))  # at once if it has just arrived
                if helper.is_alive():
                    leave(helper)
                raise Stopped from None


def _discard(done: Future[T], discard: Callable[[T], None]) -> None:
    if done.exception() is None:
        discard(done.result())


def _wait_for_readers_left() -> None:
    for thread in readers_left():
        thread.join(timeout=LEFT_READER_WAIT_S)


atexit.register(_wait_for_readers_left)
