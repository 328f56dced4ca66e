"""Reader threads a stop left inside a read of their source, and what exiting does about them.

FFmpeg's read cannot be interrupted through PyAV: stopping a camera whose stream has gone
quiet would wait for the read timeout.  The session stops waiting for such a reader
(:meth:`pipeline.camera.Camera.waits_for`) and records it here with :func:`leave`; the thread
ends on its own within its source's read timeout and closes what it read.

Tearing the interpreter down under a read still inside FFmpeg can crash it, so:

* the ``vapipe`` command exits at once past such reads (:func:`exit_past_readers`), after
  its outputs are closed and its streams flushed;
* a program that embeds the runtime waits at its exit for those reads to end (an ``atexit``
  hook, at most :data:`LEFT_READER_WAIT_S` per read).
"""

from __future__ import annotations

import atexit
import logging
import os
import sys
import threading

__all__ = ["LEFT_READER_WAIT_S", "exit_past_readers", "leave", "readers_left"]

#: at most this long, at interpreter exit, for each read a stop left behind
LEFT_READER_WAIT_S = 60.0
_LEFT: set[threading.Thread] = set()


def leave(thread: threading.Thread) -> None:
    """Record ``thread``, a reader the stop no longer waits for."""
    readers_left()  # forgets the ended ones
    _LEFT.add(thread)


def readers_left() -> list[threading.Thread]:
    """Reader threads a stop left inside a read that still run."""
    alive = [t for t in list(_LEFT) if t.is_alive()]
    _LEFT.intersection_update(alive)
    return alive


def exit_past_readers(code: int) -> int:
    """``code``, for a command about to exit; if a stop left a reader inside an FFmpeg read,
    the process exits here at once instead (standard streams and logs flushed first)."""
    if not readers_left():
        return code
    sys.stdout.flush()
    sys.stderr.flush()
    logging.shutdown()
    os._exit(code)


def _wait_for_readers_left() -> None:
    for thread in readers_left():
        thread.join(timeout=LEFT_READER_WAIT_S)


atexit.register(_wait_for_readers_left)
