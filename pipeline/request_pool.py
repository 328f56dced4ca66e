"""What every engine's per-camera request pool shares: jobs kept in flight in
submission order, the arbiter's slots (:mod:`pipeline.arbiter`), and finishing a job:
waiting for it, post-processing its outputs in the caller's thread and keeping a
result or an error on the job for whoever asks again.

An engine's pool (:class:`pipeline.engine.RequestPool`,
:class:`pipeline.ort_engine.OrtRequestPool`) supplies only what differs: how an
inference starts (``start``), how to tell it is done, wait for it and read its
outputs, and what to give back once the outputs are post-processed.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections import deque
from typing import Any, Callable

import numpy as np

__all__ = ["Job", "InferencePool"]


class Job:
    """One inference started on a request; ``result`` is set once finished."""

    __slots__ = ("request", "postprocess", "result", "done", "error", "arbiter", "ticket")

    def __init__(self, request: Any, postprocess: Callable[[list[np.ndarray]], Any], arbiter: Any = None,
                 ticket: int | None = None) -> None:
        self.request = request
        self.postprocess = postprocess
        self.result: Any = None
        self.done = False
        self.error: BaseException | None = None
        self.arbiter = arbiter  # holds slot ``ticket`` of this arbiter until its inference is over
        self.ticket = ticket

    def release(self) -> None:
        """Give back the arbiter slot the job holds (once; waiters may have taken it back
        already when the inference ended)."""
        if self.arbiter is not None:
            self.arbiter.release(self.ticket)
            self.arbiter = None


class InferencePool(ABC):
    """One camera's jobs in flight on a model shared by every camera (used by one thread).

    ``model`` has ``path`` and ``arbiter()``; ``size`` is the most jobs in flight.  With a
    ``priority`` (:class:`pipeline.arbiter.SourcePriority`) every start waits for a slot
    of the model's arbiter, and the job holds it until its inference is over.
    """

    #: whether a job whose wait raised leaves the pool at once, done without a result
    #: (True), or stays first in flight, its request out of use, until :meth:`drain` (False)
    retire_failed_wait = True

    def __init__(self, model: Any, size: int, priority: Any = None) -> None:
        self.model = model
        self.size = size
        self.priority = priority
        self.decoder: str | None = None  # the decoder of the stage using the pool, named in errors
        self._arbiter = model.arbiter() if priority is not None else None
        self._inflight: deque[Job] = deque()

    @abstractmethod
    def start(self, image: np.ndarray, postprocess: Callable[[list[np.ndarray]], Any]) -> Job:
        """Start inference on ``image`` (uint8, (H, W, 3) or (1, H, W, 3)); ``postprocess``
        receives the output arrays when the job is finished and returns its result."""

    @abstractmethod
    def _completed(self, job: Job) -> bool:
        """Whether ``job``'s inference is over (without waiting)."""

    @abstractmethod
    def _wait(self, job: Job) -> None:
        """Block until ``job``'s inference is over; raises what the inference raised."""

    @abstractmethod
    def _outputs(self, job: Job) -> list[np.ndarray]:
        """The output arrays of ``job``'s finished inference."""

    def _recycle(self, job: Job) -> None:
        """Called once ``job``'s outputs are post-processed (or failed to be): give back
        what the job used (nothing by default)."""

    def _acquire(self) -> int | None:
        """Wait for a slot of the model's arbiter (None at once without a priority), finishing
        this pool's completed jobs meanwhile; returns the slot's ticket."""
        if self._arbiter is None:
            return None
        return self._arbiter.acquire(self.priority, self.finish_completed)

    def _started(self, job: Job) -> Job:
        """Put ``job`` (just started) in flight; its arbiter slot comes back when its inference ends."""
        if job.arbiter is not None:
            job.arbiter.watch(job.ticket, lambda: self._completed(job))
        self._inflight.append(job)
        return job

    def is_done(self, job: Job) -> bool:
        return job.done or self._completed(job)

    def finish_completed(self) -> None:
        """Finish every job whose inference is done (results and errors stay on the jobs)."""
        for job in list(self._inflight):
            if not job.done and self.is_done(job):
                try:
                    self.finish(job)
                except Exception:  # noqa: BLE001 - kept on the job for whoever asks
                    pass

    def finish(self, job: Job) -> Any:
        """Wait for ``job`` and return its post-processed result."""
        if job.done:
            if job.error is not None:
                raise job.error
            return job.result
        waited = False
        try:
            self._wait(job)
            waited = True
        finally:
            job.release()
            if waited or self.retire_failed_wait:
                self._inflight.remove(job)
                job.done = True
        job.result = None
        try:
            job.result = job.postprocess(self._outputs(job))
        except (ValueError, IndexError) as exc:
            from .engine import EngineError  # the engine modules import this one

            # outputs the decoder cannot read (a model of another family): say which model
            which = f"decoder {self.decoder!r}" if self.decoder else "the stage's decoder"
            job.error = EngineError(f"model {self.model.path} does not fit {which}: {exc}")
            raise job.error from exc
        finally:
            self._recycle(job)
        return job.result

    def run(self, image: np.ndarray, postprocess: Callable[[list[np.ndarray]], Any]) -> Any:
        """Synchronous convenience: start and finish one job."""
        return self.finish(self.start(image, postprocess))

    def drain(self) -> None:
        """Finish every job in flight (on close): a job whose post-processing fails keeps
        its error for whoever asks for its result; the other jobs still finish.  The camera
        then leaves the model's arbiter (it no longer counts as present)."""
        self._drain()
        if self._arbiter is not None:
            self._arbiter.leave(self.priority)

    def _drain(self) -> None:
        while self._inflight:
            job = self._inflight[0]
            try:
                self.finish(job)
            except Exception:  # noqa: BLE001 - stored on the job (or the request is gone)
                if self._inflight and self._inflight[0] is job:
                    self._inflight.popleft()
                    job.done = True

    @property
    def busy(self) -> int:
        return len(self._inflight)
