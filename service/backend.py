"""Where instances run: the seam between the instance manager and the runtime.

The manager only talks to a :class:`Backend` and the :class:`Handle` it returns,
with plain data (URIs, dicts of numbers, JPEG bytes), so a backend may run an
instance in this process (:class:`LocalBackend`) or elsewhere (another process,
a cluster node): the handle then forwards the same calls.

:class:`LocalBackend` runs each instance as a :class:`pipeline.session.Session`
in the server process: all instances share the process's OpenVINO core and
compiled models.

Optional, for backends that run cameras on other machines (``cluster.service_backend``):
``Backend.check(spec, sources)`` refuses, with a one-line ValueError, a request the
backend cannot run (HTTP 400, before the instance is created); ``Backend.cluster_stats()``
and ``Handle.cluster_stats()`` feed the cluster metrics of ``/metrics``; their sources may
also be in the states of :data:`REMOTE_SOURCE_STATES`.
"""

from __future__ import annotations

import logging
import sys
import threading
from pathlib import Path
from typing import Any, Callable, Iterable, Protocol

from pipeline.config import PipelineSpec
from pipeline.graph import build_graph
from pipeline.runtime import RunOptions
from pipeline.session import Session
from pipeline.stats import LatencyStats

from .live import LiveView, Watch
from .logs import thread_prefix
from .security import redact

__all__ = ["Backend", "Handle", "LocalBackend", "LocalHandle", "publisher_counters", "REMOTE_SOURCE_STATES",
           "session_publishers"]

log = logging.getLogger("vapipe.serve")

#: states of a source run on another machine, besides the decoder's: waiting for room, its process
#: starting, its machine or process lost (it is being placed again)
REMOTE_SOURCE_STATES = ("pending", "starting", "lost")


class Handle(Protocol):
    """A started instance."""

    def add_source(self, uri: str) -> str: ...
    def remove_source(self, source_id: str) -> None: ...
    def stop(self) -> None: ...                     # finish frames in flight, finalise outputs; blocks
    def finished(self) -> bool: ...                 # True once every source ended (or it stopped)
    def error(self) -> str | None: ...
    def sources(self) -> list[dict[str, Any]]: ...
    def stages(self) -> dict[str, LatencyStats]: ...
    def plan(self) -> dict[str, str]: ...
    def publishers(self) -> list[dict[str, int]]: ...  # per MQTT sink; ``connected`` only of running ones
    def watch(self, source_id: str) -> Watch: ...
    def live_stats(self) -> dict[str, Any]: ...


class Backend(Protocol):
    def start(self, instance_id: str, spec: PipelineSpec, sources: list[str], output_dir: Path,
              on_end: Callable[[Handle], None], stopping: threading.Event | None = None) -> Handle:
        """Open the sources and start; raises (one line) if they cannot be opened.  ``stopping``
        set while it starts: it gives up as soon as it can (raising), without a handle to stop."""
        ...

    def close(self) -> None: ...


class LocalHandle:
    def __init__(self, session: Session, live: LiveView, on_end: Callable[["LocalHandle"], None],
                 name: str = "instance") -> None:
        self.session = session
        self.live = live
        self._on_end = on_end
        self._done = threading.Event()
        self._stop_lock = threading.Lock()
        self._runner = threading.Thread(target=self._run, name=name, daemon=True)
        self._runner.start()

    def _run(self) -> None:
        try:
            while not self.session.wait(0.25):
                pass
        finally:
            try:
                self.session.close()
                self.session.freeze_latencies()
                self.live.close()
                self._on_end(self)  # the instance's final state before stop() returns (DELETE answers it)
            finally:
                self._done.set()

    def add_source(self, uri: str) -> str:
        if self._done.is_set():
            raise RuntimeError("the instance has ended")
        return self.session.add_source(uri)

    def remove_source(self, source_id: str) -> None:
        self.session.remove_source(source_id)

    def stop(self) -> None:
        with self._stop_lock:
            self.session.stop()
            self._done.wait(self.session.opts.stop_deadline_s + 10)

    def finished(self) -> bool:
        return self._done.is_set()

    def error(self) -> str | None:
        summary_error = (self.session.failures or [None])[0]
        if summary_error:
            return summary_error
        errors = [s["error"] for s in self.session.sources() if s["error"]]
        return errors[0] if errors else None

    def sources(self) -> list[dict[str, Any]]:
        out = []
        for s in self.session.sources():
            d = dict(s)
            d["uri"] = redact(d["uri"])
            out.append(d)
        return out

    def stages(self) -> dict[str, LatencyStats]:
        return self.session.stage_stats

    def plan(self) -> dict[str, str]:
        p = self.session.plan
        return {"cores": str(p.cores), "sources": str(p.sources), "decoder_threads": str(p.decoder_threads),
                "cv2_threads": str(p.cv2_threads), "enabled": str(p.enabled).lower(),
                "inference": "; ".join(f"{n} {c.get('NUM_STREAMS', '?')}x{c.get('INFERENCE_NUM_THREADS', '?')}"
                                       for n, c in p.infer.items()) or "none",
                "summary": self.session.plan.summary()}

    def publishers(self) -> list[dict[str, int]]:
        return session_publishers(self.session)

    def watch(self, source_id: str) -> Watch:
        if source_id not in {s["id"] for s in self.session.sources()}:
            raise KeyError(source_id)
        return self.live.watch(source_id)

    def live_stats(self) -> dict[str, Any]:
        return self.live.stats()


class LocalBackend:
    """Instances as sessions in this process (shared OpenVINO core and compiled models)."""

    def __init__(self, cores: int | None = None, live_fps: float = 5.0, live_width: int = 640,
                 stop_deadline_s: float = 10.0) -> None:
        self.cores = cores
        self.live_fps, self.live_width = live_fps, live_width
        self.stop_deadline_s = stop_deadline_s
        self._old_interval = sys.getswitchinterval()
        # as run_pipeline does: decoder and inference threads do not queue behind workers
        sys.setswitchinterval(RunOptions().switch_interval_s or self._old_interval)
        self._restore_global: Callable[[], None] | None = None
        self._lock = threading.Lock()

    def start(self, instance_id: str, spec: PipelineSpec, sources: list[str], output_dir: Path,
              on_end: Callable[[LocalHandle], None], stopping: threading.Event | None = None) -> LocalHandle:
        graph = build_graph(spec, "request")
        opts = RunOptions(output_dir=output_dir, handle_signals=False, cores=self.cores,
                          stop_deadline_s=self.stop_deadline_s, stop_event=stopping)
        live = LiveView(self.live_fps, self.live_width)
        prefix = thread_prefix(instance_id)
        session = Session(graph, opts, expected_sources=len(sources), process_wide=False, on_frame=live.tap,
                          thread_prefix=prefix)
        try:
            session.add_sources(sources)
        except BaseException:
            session.close()
            raise
        self._apply_global(session)
        return LocalHandle(session, live, on_end, name=f"{prefix}instance")

    def _apply_global(self, session: Session) -> None:
        """Process-wide thread settings (OpenCV, BLAS) from the latest instance's plan."""
        from pipeline.threads import apply_global

        with self._lock:
            if self._restore_global is not None:
                self._restore_global()
            self._restore_global = apply_global(session.plan)

    def close(self) -> None:
        with self._lock:
            if self._restore_global is not None:
                self._restore_global()
                self._restore_global = None
        sys.setswitchinterval(self._old_interval)


def session_publishers(session: Any) -> list[dict[str, int]]:
    """Counters of the MQTT sinks of every camera of ``session``, removed ones too (their messages
    stay counted); a removed camera's leave out ``connected`` (its connection is not the session's)."""
    removed = publisher_counters(session.removed_cameras())
    return [*publisher_counters(session.cameras()),
            *({k: v for k, v in p.items() if k != "connected"} for p in removed)]


def publisher_counters(cameras: Iterable[Any]) -> list[dict[str, int]]:
    """Counters (sent, dropped, buffered, connected) of the messages each MQTT sink of ``cameras``
    (a session's) offered, from its open publisher or its last one (final once it closed).  A
    connection the sinks share (one client id) is not counted twice: each counts its own messages."""
    out: list[dict[str, int]] = []
    for cam in cameras:
        for st in cam.stages.values():
            counts = st.counters_of_publisher() if hasattr(st, "counters_of_publisher") else None
            if counts is not None:
                out.append(counts)
    return out
