"""What each part of a pipeline costs on this machine: the thread planner's input.

Three kinds of cost, all in milliseconds of CPU time (not wall time, so that a
busy machine does not distort them):

* **decode**: one frame of a source on one decoder thread, including the
  full-size BGR conversion when a stage reads full-size pixels;
* **host**: one frame's work on the camera's worker thread (scaling the
  decoder's planes to the model input, decoding outputs, bookkeeping);
* **inference**: one inference of a model compiled with one stream of one thread
  (``NUM_STREAMS=1``, ``INFERENCE_NUM_THREADS=1``) and the stage's other
  properties (precision hint, ...), on an input of the size the stage feeds.

Measurements (:mod:`pipeline.measure`) take a fraction of a second each and are
kept in a JSON file next to the compiled-model cache (``~/.cache/vapipe/costs.json``,
``VAPIPE_COST_CACHE`` elsewhere: a file, or a folder to keep ``costs.json`` in), per machine
(CPU model and vector extensions, OpenVINO and FFmpeg versions), so a second start measures nothing; the 1,000 most
recently used costs per machine are kept.  The file also keeps what runs observed:
objects per frame seen by region models (unknown before a run) and the decode cost
of live sources (they are not probed before they connect; until a run has observed
one, its cost is assumed).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

__all__ = ["CostCache", "ModelProbe", "check_key", "machine_fingerprint", "model_costs", "DEFAULT_OBJECTS_PER_FRAME",
           "THREAD_KEYS"]

log = logging.getLogger("vapipe.costs")

#: OpenVINO properties that set threads: never part of a cost's key (costs are per thread)
THREAD_KEYS = ("NUM_STREAMS", "INFERENCE_NUM_THREADS", "PERFORMANCE_HINT", "ENABLE_CPU_PINNING",
               "AFFINITY", "SCHEDULING_CORE_TYPE", "ENABLE_HYPER_THREADING")
#: inferences per frame assumed for a region model until a run has observed it
DEFAULT_OBJECTS_PER_FRAME = 1.0
#: costs kept per machine in the cache file (least recently used dropped first)
MAX_ENTRIES = 1000
#: CPU flags that change inference cost (vector width, bf16/int8 instructions)
_FLAGS = ("avx2", "avx512f", "avx512_vnni", "avx512_bf16", "amx_tile", "amx_bf16", "amx_int8", "avx_vnni")


@dataclass(frozen=True)
class ModelProbe:
    """How a stage feeds its model: enough to compile it and time one inference.

    ``input_hw`` is the (height, width) the stage feeds (models of dynamic size get
    the size of a typical input); ``per_frame`` is the stage's own estimate of
    inferences per frame (1/every for a detector), or None when it depends on what
    earlier stages find (region models: objects per frame); a region model then runs
    on ``per_object`` of the objects of a frame (1/N when it reclassifies a tracked object
    every N frames).
    """

    stage: str
    path: Path
    spec: Any                       # pipeline.engine.InputSpec
    device: str
    hint: str
    config: dict[str, Any]
    input_hw: tuple[int, int] | None = None
    per_frame: float | None = 1.0
    engine: str = "openvino"
    per_object: float = 1.0

    @property
    def on_cpu(self) -> bool:
        return self.device.upper().split(".", 1)[0] == "CPU"


def _cpu_flags() -> tuple[str, str]:
    model, flags = "", set()
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as fh:
            for line in fh:
                if line.startswith("model name") and not model:
                    model = line.split(":", 1)[1].strip()
                elif line.startswith("flags") and not flags:
                    flags = set(line.split(":", 1)[1].split())
    except OSError:
        import platform

        model = platform.processor() or platform.machine()
    return model, " ".join(f for f in _FLAGS if f in flags)


def machine_fingerprint() -> str:
    """CPU model, cost-relevant vector extensions, OpenVINO and FFmpeg versions, as one key."""
    model, flags = _cpu_flags()
    try:
        import openvino as ov

        ov_version = ov.get_version()
    except ImportError:  # pragma: no cover - core dependency
        ov_version = "-"
    try:
        import av

        av_version = f"{av.__version__}/{getattr(av, 'ffmpeg_version_info', '?')}"
    except ImportError:  # pragma: no cover - core dependency
        av_version = "-"
    return f"{model} [{flags}] openvino {ov_version} av {av_version}"


def _default_path() -> Path:
    explicit = os.environ.get("VAPIPE_COST_CACHE")
    if explicit:  # a file, or a folder to keep costs.json in
        return Path(explicit) / "costs.json" if os.path.isdir(explicit) else Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "vapipe" / "costs.json"


class CostCache:
    """Costs by key, per machine fingerprint, in one JSON file (thread-safe; each write
    re-reads the file and replaces it atomically, so concurrent processes keep each
    other's entries).  At most ``MAX_ENTRIES`` are kept per machine: the file lists them
    from least to most recently used, and the least recently used go first (every file
    processed adds its own decode and host costs, so a machine that works through many
    files would otherwise grow the file, and each write's cost, without end).  ``hits``
    and ``measurements`` count lookups for the summary."""

    def __init__(self, path: str | os.PathLike[str] | None = None, machine: str | None = None) -> None:
        self.path = Path(path) if path is not None else _default_path()
        self.machine = machine or machine_fingerprint()
        self._lock = threading.Lock()
        self._entries: dict[str, Any] = self._load().get(self.machine, {})
        self._used: dict[str, None] = {}  # keys read or written since the last write, in that order
        self.hits = 0
        self.measurements = 0
        self._write_failed = False

    def _load(self) -> dict[str, Any]:
        try:
            data = json.loads(self.path.read_text())
        except (OSError, ValueError):
            return {}
        machines = data.get("machines") if isinstance(data, dict) else None
        return machines if isinstance(machines, dict) else {}

    def _touch(self, key: str) -> None:
        self._used.pop(key, None)
        self._used[key] = None

    def get(self, key: str) -> Any:
        with self._lock:
            value = self._entries.get(key)
            if value is not None:
                self._touch(key)
        if value is not None:
            self.hits += 1
        return value

    def put(self, key: str, value: Any) -> None:
        with self._lock:
            self._entries[key] = value
            self._touch(key)
            machines = self._load()
            # what other processes wrote stays, in its order; what this one used moves to the end
            entries = machines.get(self.machine)
            entries = dict(entries) if isinstance(entries, dict) else {}
            for used in self._used:
                entries.pop(used, None)
                entries[used] = self._entries[used]
            for old in list(entries)[:max(0, len(entries) - MAX_ENTRIES)]:
                del entries[old]
            machines[self.machine] = entries
            self._entries = dict(entries)
            self._used.clear()
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.{threading.get_ident()}")
                tmp.write_text(json.dumps({"version": 1, "machines": machines}, indent=1))
                os.replace(tmp, self.path)
            except OSError as exc:  # a read-only home: costs are measured again next time
                if not self._write_failed:  # once: each measurement writes
                    log.warning("cannot write the cost cache %s: %s (costs are measured again at every start; "
                                "VAPIPE_COST_CACHE sets another file)", self.path, exc.strerror or exc)
                self._write_failed = True

    def cached(self, key: str, measure: Callable[[], Any]) -> tuple[Any, str]:
        """The value under ``key``, measured (and stored) when missing; with its origin."""
        value = self.get(key)
        if value is not None:
            return value, "cached"
        self.measurements += 1
        value = measure()
        self.put(key, value)
        return value, "measured"


# ------------------------------------------------------------------------------------
# keys

def file_key(path: str | os.PathLike[str]) -> str:
    """A file's identity: absolute path, size and modification time."""
    p = Path(path).resolve()
    try:
        st = p.stat()
        return f"{p}|{st.st_size}|{st.st_mtime_ns}"
    except OSError:
        return str(p)


#: how model costs are timed (part of their keys: costs timed another way are measured again)
MODEL_TIMING = "in turns"


def model_key(probe: ModelProbe) -> str:
    cfg = {str(k).upper(): str(v) for k, v in probe.config.items() if str(k).upper() not in THREAD_KEYS}
    raw = json.dumps([file_key(probe.path), repr(probe.spec), probe.device, probe.input_hw, sorted(cfg.items()),
                      probe.engine, MODEL_TIMING])
    return "model|" + hashlib.sha1(raw.encode()).hexdigest()[:16] + "|" + Path(probe.path).name


def decode_key(uri: str, needs_image: bool) -> str:
    ident = file_key(uri) if "://" not in uri and os.path.exists(uri) else uri
    return f"decode|{ident}|{'bgr' if needs_image else 'planes'}"


def objects_key(pipeline: str, stage: str) -> str:
    return f"objects|{pipeline}|{stage}"


def host_key(stages: dict[str, Any], frame_wh: tuple[int, int]) -> str:
    """Host work per frame a run observed for the stages ``stages`` (name -> type and params, the
    source stage left out) on frames of ``frame_wh``: what the next start plans with."""
    raw = json.dumps(stages, sort_keys=True, default=str)
    return f"host|observed|{hashlib.sha1(raw.encode()).hexdigest()[:16]}|{frame_wh[0]}x{frame_wh[1]}"


def check_key(pipeline: str) -> str:
    """The last run's plan check of a pipeline (shown by ``vapipe doctor``)."""
    return f"check|{pipeline}"


def model_costs(probes: Sequence[ModelProbe], cache: CostCache,
                measure: Callable[[Sequence[ModelProbe]], list[dict[str, Any]]]) -> list[tuple[dict[str, Any], str]]:
    """(``{"ms", "input_hw"}``, origin) for each probe: from ``cache`` when every one is there,
    else all measured now by ``measure`` (:func:`pipeline.measure.measure_models`) and stored."""
    keys = [model_key(p) for p in probes]
    entries = [cache.get(k) for k in keys]
    if all(isinstance(e, dict) and "ms" in e for e in entries):
        return [(e, "cached") for e in entries]
    cache.measurements += 1
    fresh = measure(probes)
    for key, entry in zip(keys, fresh):
        cache.put(key, entry)
    return [(e, "measured") for e in fresh]
