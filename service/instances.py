"""Pipeline instances: their life (QUEUED, RUNNING, COMPLETED, ERROR, ABORTED) and their status.

:class:`InstanceManager` keeps every instance (the last ``keep_finished``
stopped ones too), starts at most ``max_running`` at once (later ones wait as
QUEUED, in order) and hands the work to a :class:`service.backend.Backend`.
Starting happens on a thread of its own, so a request returns the id at once.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pipeline.config import PipelineSpec
from pipeline.left_readers import Stopped

from .backend import Backend, Handle
from .logs import thread_prefix
from .security import redact

__all__ = ["Instance", "InstanceManager", "InstanceNotFound", "STATES", "Conflict"]

log = logging.getLogger("vapipe.serve")
STATES = ("QUEUED", "RUNNING", "COMPLETED", "ERROR", "ABORTED")


class InstanceNotFound(KeyError):
    def __str__(self) -> str:
        return str(self.args[0])


class Conflict(RuntimeError):
    """The instance is not in a state that allows the request (HTTP 409)."""


@dataclass(eq=False)
class Instance:
    id: str
    name: str
    version: str
    spec: PipelineSpec
    uris: list[str]
    request: dict[str, Any]              # as the client sent it (credentials redacted)
    output_dir: Path
    state: str = "QUEUED"
    message: str = ""
    created: float = field(default_factory=time.time)
    start_time: float = 0.0              # Unix time when it started running (0 before)
    started_mono: float | None = None
    ended_mono: float | None = None
    handle: Handle | None = None
    stop_requested: bool = False
    starting: bool = False               # handed to the backend, not up yet
    stopping: threading.Event = field(default_factory=threading.Event, repr=False)  # stop while starting
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @property
    def stopped(self) -> bool:
        return self.state in ("COMPLETED", "ERROR", "ABORTED")

    def sources(self) -> list[dict[str, Any]]:
        return self.handle.sources() if self.handle is not None else []

    def status(self) -> dict[str, Any]:
        if self.started_mono is None:
            elapsed = 0.0
        else:
            elapsed = (self.ended_mono or time.monotonic()) - self.started_mono
        sources = self.sources()
        return {"id": self.id, "state": self.state, "avg_fps": round(float(sum(s["fps"] for s in sources)), 3),
                "start_time": self.start_time, "elapsed_time": round(elapsed, 3), "message": self.message,
                "sources": [{**{k: s[k] for k in ("id", "uri", "state", "frames", "fps", "dropped", "decode_errors",
                                                  "reconnects")}, "reason": redact(s.get("reason", ""))} for s in sources]}

    def summary(self) -> dict[str, Any]:
        return {"id": self.id, "request": self.request, "type": "vapipe"}


class InstanceManager:
    def __init__(self, backend: Backend, output_root: Path, max_running: int | None = None,
                 keep_finished: int = 200) -> None:
        self.backend = backend
        self.output_root = output_root
        self.max_running = max_running
        self.keep_finished = keep_finished
        self._instances: dict[str, Instance] = {}
        self._lock = threading.RLock()
        self._closing = False

    # creation and scheduling --------------------------------------------------------------------
    def create(self, name: str, version: str, spec: PipelineSpec, uris: list[str], request: dict[str, Any],
               instance_id: str | None = None) -> Instance:
        check = getattr(self.backend, "check", None)  # a backend that cannot run it says so now (400)
        if check is not None:
            check(spec, uris)
        iid = instance_id or uuid.uuid4().hex
        inst = Instance(id=iid, name=name, version=version, spec=spec, uris=uris, request=request,
                        output_dir=self.output_root / iid)
        with self._lock:
            self._instances[inst.id] = inst
            self._forget_old()
        self._schedule()
        return inst

    def new_id(self) -> str:
        return uuid.uuid4().hex

    def _running(self) -> int:
        return sum(1 for i in self._instances.values() if i.state == "RUNNING" or (i.state == "QUEUED"
                                                                                   and i.starting))

    def _schedule(self) -> None:
        with self._lock:
            if self._closing:
                return
            for inst in self._instances.values():
                if inst.state != "QUEUED" or inst.starting:
                    continue
                if self.max_running is not None and self._running() >= self.max_running:
                    break
                inst.starting = True
                threading.Thread(target=self._start, args=(inst,), name=f"{thread_prefix(inst.id)}start",
                                 daemon=True).start()

    def _start(self, inst: Instance) -> None:
        with inst.lock:
            inst.started_mono = time.monotonic()
            inst.start_time = time.time()
        try:
            handle = self.backend.start(inst.id, inst.spec, inst.uris, inst.output_dir,
                                        on_end=lambda h: self._ended(inst, h), stopping=inst.stopping)
        except Exception as exc:  # noqa: BLE001 - becomes the instance's ERROR message
            with inst.lock:
                inst.ended_mono = time.monotonic()
                if inst.stop_requested:  # it gave up starting because it was stopped
                    inst.state = "ABORTED"
                else:
                    inst.state = "ERROR"
                    inst.message = redact(_one_line(exc))
            if inst.state == "ERROR":
                log.warning("instance %s (%s/%s) failed to start: %s", inst.id, inst.name, inst.version,
                            inst.message)
            self._schedule()
            return
        with inst.lock:
            inst.handle = handle
            if inst.state == "QUEUED":
                inst.state = "RUNNING"
            stop = inst.stop_requested
        if stop:
            handle.stop()

    def _ended(self, inst: Instance, handle: Handle) -> None:
        with inst.lock:
            inst.ended_mono = time.monotonic()
            inst.handle = handle
            error = handle.error() if handle is not None else None
            if inst.stop_requested:
                inst.state = "ABORTED"
            elif error:
                inst.state, inst.message = "ERROR", redact(error)
            else:
                inst.state = "COMPLETED"
        self._schedule()

    # queries ----------------------------------------------------------------------------------------
    def get(self, instance_id: str) -> Instance:
        with self._lock:
            inst = self._instances.get(instance_id)
        if inst is None:
            raise InstanceNotFound(f"no pipeline instance {instance_id!r}")
        return inst

    def all(self) -> list[Instance]:
        with self._lock:
            return list(self._instances.values())

    # control ------------------------------------------------------------------------------------------
    def stop(self, instance_id: str) -> Instance:
        """Stop (idempotent): a queued instance is aborted unstarted; a running one finishes its frames
        in flight and finalises its outputs before this returns."""
        inst = self.get(instance_id)
        with inst.lock:
            if inst.stopped:
                return inst
            inst.stop_requested = True
            handle = inst.handle
            if handle is None and not inst.starting:
                inst.state = "ABORTED"
                inst.ended_mono = time.monotonic()
                return inst
        if handle is not None:
            handle.stop()
        else:  # being started: it gives up at once where it can (models compiling, sources opening),
            inst.stopping.set()  # else _start stops it once it is up
            deadline = time.monotonic() + 60
            while not inst.stopped and time.monotonic() < deadline:
                time.sleep(0.05)
        return inst

    def add_source(self, instance_id: str, uri: str) -> str:
        inst = self.get(instance_id)
        with inst.lock:
            if inst.state != "RUNNING" or inst.handle is None:
                raise Conflict(f"instance {instance_id} is {inst.state}; sources can be added while RUNNING")
            handle = inst.handle
        try:
            sid = handle.add_source(uri)
        except Stopped:  # stopped while the source opened
            raise Conflict(f"instance {instance_id} was stopped while the source opened") from None
        except RuntimeError as exc:  # the instance ended or is stopping meanwhile
            if type(exc) is not RuntimeError:
                raise
            raise Conflict(f"instance {instance_id}: {exc}") from None
        with inst.lock:
            inst.uris.append(uri)
        return sid

    def remove_source(self, instance_id: str, source_id: str) -> None:
        inst = self.get(instance_id)
        with inst.lock:
            handle = inst.handle
        if handle is None or inst.state != "RUNNING":
            raise Conflict(f"instance {instance_id} is {inst.state}; sources can be removed while RUNNING")
        try:
            handle.remove_source(source_id)
        except KeyError:
            raise InstanceNotFound(f"instance {instance_id} has no running source {source_id!r}") from None

    def _forget_old(self) -> None:
        """Keep the ``keep_finished`` stopped instances that stopped last."""
        finished = sorted((i for i in self._instances.values() if i.stopped), key=lambda i: i.ended_mono or 0.0)
        for inst in finished[:max(0, len(finished) - self.keep_finished)]:
            self._instances.pop(inst.id, None)

    def close(self) -> None:
        """Stop every instance (outputs finalised) and the backend."""
        with self._lock:
            self._closing = True
            live = [i for i in self._instances.values() if not i.stopped]
        threads = [threading.Thread(target=self.stop, args=(i.id,), daemon=True) for i in live]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=30)
        self.backend.close()


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
