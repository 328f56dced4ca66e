"""Counters of a running pipeline, read at one moment for the plan check
(:mod:`pipeline.plan_check`): wall and CPU time of the process and of the machine, CPU time
of every camera thread and of FFmpeg's frame-decoding threads, and per camera its frame
counts, queue waits and inferences."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Any

from .thread_cpu import TICK, ffmpeg_decoder_threads, thread_cpu_s

__all__ = ["CameraView", "Snapshot", "machine_busy_s", "take_snapshot"]


def machine_busy_s() -> float | None:
    """CPU seconds all processes of the machine have used since boot (from ``/proc/stat``)."""
    try:
        with open("/proc/stat", encoding="ascii") as fh:
            values = [int(v) for v in fh.readline().split()[1:9]]
    except (OSError, ValueError):
        return None
    user, nice, system, idle, iowait, irq, softirq, steal = (values + [0] * 8)[:8]
    return (user + nice + system + irq + softirq + steal) / TICK


@dataclass
class Snapshot:
    """Counters at one moment: monotonic wall time, process and machine CPU seconds, CPU
    seconds per camera thread, and per camera its frame counts, queue waits and inferences."""

    wall: float
    cpu: float
    machine: float | None
    threads: dict[int, float]
    cams: list[dict[str, Any]]
    #: which of ``threads`` are FFmpeg's frame-decoding threads
    codec: frozenset[int] = frozenset()


class CameraView:
    """What the plan check reads of one camera of the runtime (:class:`pipeline.camera.Camera`): its
    threads' native ids by role, their CPU time as they ended, and its frame and queue counters."""

    def __init__(self, camera: Any) -> None:
        self.camera = camera
        source = camera.source
        self.live = bool(getattr(source, "live", False))
        self.can_probe = bool(getattr(source, "can_probe", not self.live))
        params = getattr(source, "params", None)
        self.paced = self.live or bool(getattr(params, "realtime", False)) or camera.opts.capture_delay_ms > 0

    def thread_ids(self, *roles: str) -> list[int]:
        ids = getattr(self.camera, "native_ids", {})
        return [tid for role, tid in ids.items() if not roles or role in roles]

    def exit_cpu(self) -> dict[int, float]:
        return dict(getattr(self.camera, "exit_cpu", {}))

    def exit_codec_cpu(self) -> dict[int, float]:
        return dict(getattr(self.camera, "exit_codec_cpu", {}))

    def counters(self) -> dict[str, Any]:
        cam = self.camera
        q = cam.frames
        infer = {n: getattr(st, "inferences", 0) for n, st in cam.stages.items() if hasattr(st, "inferences")}
        return {"decoded": cam.stats.decoded, "processed": cam.stats.processed, "put_wait_s": q.put_wait_s,
                "get_wait_s": q.get_wait_s, "inferences": infer}


def thread_ids(cameras: list[CameraView]) -> list[int]:
    """Native ids of every camera's threads and of the calling thread (the one that checks)."""
    return [tid for c in cameras for tid in c.thread_ids()] + [threading.get_native_id()]


def take_snapshot(cameras: list[CameraView], previous: Snapshot | None = None) -> Snapshot:
    """Counters now.  A camera thread that has ended counts with the CPU time it had when it
    ended, and FFmpeg's frame threads with what they had when their camera's decoder thread
    ended (they end when the decoder closes); another thread that has ended since ``previous``
    keeps the CPU time it had there: the work of all of them still counts as what it was, not
    as inference."""
    codec = ffmpeg_decoder_threads()
    ended = {tid: cpu for cam in cameras for tid, cpu in cam.exit_cpu().items()}  # as they left
    threads = {tid: cpu for tid in thread_ids(cameras) if tid not in ended and (cpu := thread_cpu_s(tid)) is not None}
    alive = set(codec)
    for cam in cameras:  # each decoder's end saw every frame thread then alive: the last saw most
        for tid, cpu in cam.exit_codec_cpu().items():
            if tid not in alive:
                codec[tid] = max(cpu, codec.get(tid, 0.0))
    threads.update(codec)
    threads.update(ended)
    ended_codec: set[int] = set()
    if previous is not None:
        for tid, cpu in previous.threads.items():
            if tid not in threads:
                threads[tid] = cpu
                if tid in previous.codec:
                    ended_codec.add(tid)
    return Snapshot(time.monotonic(), time.process_time(), machine_busy_s(), threads,
                    [c.counters() for c in cameras], frozenset(codec) | ended_codec)
