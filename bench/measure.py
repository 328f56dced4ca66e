"""Measurements every mode takes the same way: frame clocks, CPU, recorded frames.

Imports only the standard library, numpy and (lazily) PyAV, so that the peer worker
(:mod:`bench.peers.worker`, another interpreter) measures exactly as the other modes.

Per camera: steady-state FPS (frames between the first and the last result),
end-to-end latency in milliseconds from "decoded frame available" to "results
ready", and the process's CPU utilisation (``getrusage`` CPU time / wall time /
cores) over the window from the first to the last result.
"""

from __future__ import annotations

import hashlib
import json
import os
import queue
import resource
import threading
import time
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

import numpy as np

__all__ = ["cpu_s", "Clock", "camera_result", "mode_result", "object_record", "Recorder", "write_records",
           "av_frames", "decoder_thread", "Cameras", "file_sha256", "LANDMARK_FRAMES"]

LANDMARK_FRAMES = 40  # landmarks are recorded for this many first frames (468 points per face)


def cpu_s() -> float:
    """CPU seconds (user + system) used by this process so far."""
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


class Clock:
    """Per-camera completion times and latencies, plus the CPU window they span (thread-safe)."""

    def __init__(self, cameras: int) -> None:
        self.lock = threading.Lock()
        self.done: list[list[float]] = [[] for _ in range(cameras)]
        self.latency: list[list[float]] = [[] for _ in range(cameras)]
        self.first: tuple[float, float] | None = None   # (wall, cpu) at the first result
        self.last: tuple[float, float] | None = None

    def add(self, cam: int, started: float) -> None:
        """A result of camera ``cam`` is ready; ``started``: ``time.perf_counter()`` when its frame was."""
        now = time.perf_counter()
        with self.lock:
            if self.first is None:
                self.first = (now, cpu_s())
            self.done[cam].append(now)
            self.latency[cam].append((now - started) * 1000.0)

    def finish(self) -> None:
        self.last = (time.perf_counter(), cpu_s())

    def result(self, latency: bool = True) -> dict[str, Any]:
        cams = []
        for done, lat in zip(self.done, self.latency):
            fps = (len(done) - 1) / (done[-1] - done[0]) if len(done) > 1 and done[-1] > done[0] else 0.0
            cams.append(camera_result(len(done), fps, lat if latency else None))
        spans = [(done[0], done[-1]) if done else None for done in self.done]
        return mode_result(cams, self.first, self.last, spans)


def camera_result(frames: int, fps: float, latencies: Sequence[float] | None) -> dict[str, Any]:
    out: dict[str, Any] = {"frames": frames, "fps": round(fps, 2)}
    if latencies:
        a = np.asarray(latencies, float)
        out["latency_p50_ms"] = round(float(np.percentile(a, 50)), 2)
        out["latency_p95_ms"] = round(float(np.percentile(a, 95)), 2)
    return out


def mode_result(cams: list[dict[str, Any]], first: tuple[float, float] | None,
                last: tuple[float, float] | None,
                spans: Sequence[tuple[float, float] | None] | None = None) -> dict[str, Any]:
    """A mode's result from its cameras' results and its (wall, cpu) window.

    ``spans``: each camera's first and last result (seconds, one clock).  With them the
    mode's FPS is every camera's frames over the time from the first result of any camera
    to the last of any; without, the sum of the cameras' own rates, which overstates what
    the cores carried when cameras end at different times (a camera that outruns the
    others finishes early, and its rate counts as if it had run all along)."""
    cpu = None
    if first is not None and last is not None and last[0] > first[0]:
        cpu = (last[1] - first[1]) / (last[0] - first[0]) / (os.cpu_count() or 1)
    if spans and all(spans):
        start, end = min(s[0] for s in spans), max(s[1] for s in spans)  # type: ignore[index]
        frames = sum(c["frames"] for c in cams)
        fps = (frames - 1) / (end - start) if end > start else 0.0
    else:
        fps = sum(c["fps"] for c in cams)
    res: dict[str, Any] = {"fps": round(fps, 2), "cameras": cams,
                           "cpu_util": None if cpu is None else round(cpu, 3)}
    lat50 = [c["latency_p50_ms"] for c in cams if "latency_p50_ms" in c]
    if lat50:
        res["latency_p50_ms"] = round(float(np.median(lat50)), 2)
        res["latency_p95_ms"] = round(float(max(c["latency_p95_ms"] for c in cams if "latency_p95_ms" in c)), 2)
    return res


def object_record(box: Sequence[float], score: float | None = None, label: str = "",
                  landmarks: Any = None, text: str | None = None) -> dict[str, Any]:
    """One object of a recorded frame (see :mod:`pipeline.records` for the format)."""
    out: dict[str, Any] = {"box": [round(float(v), 2) for v in box],
                           "score": None if score is None else round(float(score), 4), "label": str(label),
                           "landmarks": None if landmarks is None else np.round(np.asarray(landmarks)[:, :2],
                                                                                 2).tolist()}
    if text is not None:
        out["text"] = str(text)
    return out


class Recorder:
    """Camera 0's first ``keep`` frames: ``{seq: {"objects": [...]}}`` (thread-safe)."""

    def __init__(self, keep: int) -> None:
        self.keep = keep
        self.records: dict[int, dict[str, Any]] = {}
        self.lock = threading.Lock()

    def wants(self, seq: int) -> bool:
        return seq < self.keep

    def add(self, seq: int, objects: list[dict[str, Any]]) -> None:
        if seq < self.keep:
            with self.lock:
                self.records[seq] = {"objects": objects}


def write_records(out: str | Path, mode: str, records: dict[int, dict[str, Any]]) -> Path:
    """``OUT/records/MODE.json``, the frames a mode recorded (keys are ``str(seq)``)."""
    folder = Path(out) / "records"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{mode}.json"
    path.write_text(json.dumps({str(k): v for k, v in sorted(records.items())}))
    return path


def av_frames(uri: str, threads: int, frames: int, loop: bool, stop: threading.Event | None = None) -> Iterator[Any]:
    """Decoded PyAV frames of ``uri``, ``frames`` of them, starting again at the end when ``loop``.

    ``threads``: decoder threads (0: FFmpeg's automatic choice)."""
    import av

    n = 0
    while n < frames:
        container = av.open(uri)
        stream = container.streams.video[0]
        if threads:
            stream.codec_context.thread_count = threads
        stream.codec_context.thread_type = "AUTO"
        got = 0
        try:
            for f in container.decode(stream):
                if n >= frames or (stop is not None and stop.is_set()):
                    return
                yield f
                n += 1
                got += 1
        finally:
            container.close()
        if not loop or got == 0:
            return


def decoder_thread(uri: str, threads: int, frames: int, loop: bool, stop: threading.Event,
                   convert: Callable[[Any], Any], fail: Callable[[BaseException], None],
                   depth: int = 8) -> tuple[queue.Queue[tuple[Any, float] | None], threading.Thread]:
    """A started thread decoding ``uri`` (see :func:`av_frames`) into a queue of
    ``(convert(frame), time.perf_counter())`` items, then None; errors go to ``fail``."""
    out: queue.Queue[tuple[Any, float] | None] = queue.Queue(maxsize=depth)

    def run() -> None:
        try:
            for f in av_frames(uri, threads, frames, loop, stop):
                out.put((convert(f), time.perf_counter()))
        except BaseException as exc:  # noqa: BLE001 - reported through fail
            fail(exc)
        finally:
            out.put(None)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return out, thread


class Cameras:
    """What the camera threads of one mode share: the clock, camera 0's recorder, the
    first error and the stop flag it raises."""

    def __init__(self, cameras: int, record_frames: int = 0) -> None:
        self.count = cameras
        self.clock = Clock(cameras)
        self.recorder = Recorder(record_frames)
        self.errors: list[BaseException] = []
        self.stop = threading.Event()

    def fail(self, exc: BaseException) -> None:
        self.errors.append(exc)
        self.stop.set()

    def done(self, cam: int, seq: int, started: float, objects: Callable[[], list[dict[str, Any]]]) -> None:
        """Frame ``seq`` of camera ``cam`` has its results; ``objects()`` gives them when recorded."""
        self.clock.add(cam, started)
        if cam == 0 and self.recorder.wants(seq):
            self.recorder.add(seq, objects())

    def run(self, camera: Callable[[int], None]) -> None:
        """Run ``camera(index)`` on one thread per camera, stop the clock, re-raise the first error."""
        threads = [threading.Thread(target=camera, args=(c,), daemon=True) for c in range(self.count)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.clock.finish()
        if self.errors:
            raise self.errors[0]


def file_sha256(path: str | Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()
