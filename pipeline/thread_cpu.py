"""CPU time of this process's threads, read from ``/proc/self/task`` (Linux; elsewhere every
reading is unknown): what the plan check and the camera threads record as they end."""

from __future__ import annotations

import os
import re

__all__ = ["TICK", "thread_cpu_s", "ffmpeg_decoder_threads"]

TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
#: the names libavcodec gives its frame-decoding threads
_FFMPEG_DECODER = re.compile(r"^av:[^:]*:df\d+$")


def _thread_stat(native_id: int | str) -> tuple[str, float] | None:
    """(name, CPU seconds (user + system)) of one thread of this process, or None if unknown."""
    try:
        with open(f"/proc/self/task/{native_id}/stat", encoding="utf-8", errors="replace") as fh:
            head, tail = fh.read().rsplit(")", 1)
        fields = tail.split()
        return head.split("(", 1)[1], (int(fields[11]) + int(fields[12])) / TICK
    except (OSError, IndexError, ValueError):
        return None


def thread_cpu_s(native_id: int) -> float | None:
    """CPU seconds (user + system) of one thread of this process, or None if unknown."""
    stat = _thread_stat(native_id)
    return None if stat is None else stat[1]


def ffmpeg_decoder_threads() -> dict[int, float]:
    """This process's FFmpeg frame-decoding threads (native id: CPU seconds): libavcodec
    names them ``av:<codec>:df<n>`` (a decoder with ``threads`` > 1 decodes on them, not
    on the thread that calls it)."""
    try:
        tids = os.listdir("/proc/self/task")
    except OSError:
        return {}
    found = {}
    for tid in tids:
        stat = _thread_stat(tid)
        if stat is not None and _FFMPEG_DECODER.match(stat[0]):
            found[int(tid)] = stat[1]
    return found
