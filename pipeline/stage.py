"""Stage contracts.

A stage has typed parameters (``Params``, a pydantic model that rejects
unknown keys) and the lifecycle open → process* → close.  The same object
works inside a graph and in a user's own loop::

    with Detect(model="mediapipe/face_detection_short_range", decoder="blazeface") as det:
        frame = det(frame)

Inference stages (:class:`InferStage`) additionally offer the asynchronous
submit/poll/drain API, which the runtime uses to keep several infer requests
in flight per camera while results still leave in ``seq`` order.
"""

from __future__ import annotations

import functools
from collections import deque
from typing import Any, ClassVar, Iterator

from pydantic import BaseModel, ConfigDict, ValidationError

from .frame import Frame

__all__ = ["Params", "Stage", "InferStage", "SourceStage", "StageError"]


class StageError(RuntimeError):
    """A stage failed; the message names the stage and what went wrong."""


class Params(BaseModel):
    """Base of every stage's parameters: unknown keys are errors."""

    model_config = ConfigDict(extra="forbid", frozen=False, arbitrary_types_allowed=True)


class Stage:
    """One step of a pipeline.  Subclasses set ``Params`` and override hooks.

    Class attributes describe the contract, checked before a graph runs:
    ``kind`` is "source", "transform" or "sink"; ``provides`` names what the
    stage adds to frames for later stages ("detections", "tracks", "motion");
    :meth:`requires` says what earlier stages must provide.
    """

    Params: ClassVar[type[Params]] = Params
    kind: ClassVar[str] = "transform"
    #: what this stage adds to frames ("detections": objects in ``frame.detections``, "tracks": track ids on
    #: them, "motion": motion regions and a detection gate); a user's detector stage declares "detections"
    provides: ClassVar[frozenset[str]] = frozenset()
    #: True if the stage reads full-resolution pixels (``frame.image()``); the runtime
    #: then converts each frame once on the decoder thread, and scalers reuse it.
    needs_image: ClassVar[bool] = False

    def __init__(self, params: Params | dict[str, Any] | None = None, *, name: str | None = None,
                 **kwargs: Any) -> None:
        kind = type(self).__name__
        if params is not None and not isinstance(params, (dict, self.Params)):
            raise TypeError(f"{kind}: the first argument is the parameters ({kind}.Params or a dict), got "
                            f"{params!r}; pass parameters by name, e.g. {kind}({_first_field(self.Params)}=...)")
        try:
            if params is None:
                params = self.Params(**kwargs)
            elif isinstance(params, dict):
                params = self.Params(**{**params, **kwargs})
            elif kwargs:
                params = self.Params(**{**params.model_dump(by_alias=True), **kwargs})
        except ValidationError as exc:
            from .config import first_error

            raise ValueError(f"{kind}: {first_error(exc, self.Params)}") from None
        self.params = params
        self.name = name or type(self).__name__.lower()
        self.source_id = ""  # set by the runtime for per-camera instances; a sink on its own: its first frame's
        self._opened = False
        self._closed = False  # close() ran since the last open

    @classmethod
    def requires(cls, params: dict[str, Any]) -> dict[str, str]:
        """What an earlier stage must provide for these parameters: ``{capability: field}``, where
        field names the parameter that needs it (``inputs`` when the stage itself does).  Checked
        when the graph is built, before anything opens."""
        return {}

    def output_file(self) -> Any:
        """The file this stage will write (a sink: its path, checked, nothing created), or None."""
        return None

    @classmethod
    def file_sharing(cls, params: Any) -> str | None:
        """For a sink writing a file: sinks whose value is equal (and not None) may write one
        file together (JSON Lines records of several cameras); None: its file is its own."""
        return None

    def counters(self) -> dict[str, Any]:
        """JSON-ready totals for the run summary (e.g. line crossings per label); empty: none."""
        return {}

    # lifecycle -----------------------------------------------------------------
    def open(self) -> None:
        """Acquire resources (models, files).  Called once before the first frame."""

    def process(self, frame: Frame) -> Frame | None:
        """Handle one frame; return it (possibly changed) or None to drop it."""
        return frame

    def close(self) -> None:
        """Release resources; flush outputs.  Safe to call more than once.  A ``with`` block
        (or a source's ``frames()``) after it opens the stage again.  A frame handed to a closed
        stage opens it again too, except for a sink (``kind == "sink"``): a sink's outputs are
        final once closed, and it does with late frames what it documents (a video sink passes
        them on unwritten)."""
        self._closed = True

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        own = cls.__dict__.get("close")
        if own is not None and not getattr(own, "_marks_closed", False):
            @functools.wraps(own)
            def close(self: Stage, *args: Any, **kw: Any) -> Any:
                try:
                    return own(self, *args, **kw)
                finally:
                    self._closed = True  # whatever a subclass's close does: a with block reopens

            close._marks_closed = True  # type: ignore[attr-defined]
            cls.close = close  # type: ignore[method-assign]

    # conveniences ---------------------------------------------------------------
    def __enter__(self) -> Stage:
        self.ensure_open(reopen=True)
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
        self._closed = True

    def ensure_open(self, reopen: bool = False) -> None:
        """Open the stage unless it is open; with ``reopen`` also if it was closed since."""
        if not self._opened or (reopen and self._closed):
            self.open()
            self._opened, self._closed = True, False

    def __call__(self, frame: Frame) -> Frame | None:
        _check_frame(self, frame)
        if self.kind == "sink" and not self.source_id:
            # used on its own, a sink is named for the source of its first frame, as the
            # runtime names a camera's sinks ({source} in paths and topics)
            self.source_id = frame.source_id
        self.ensure_open(reopen=self.kind != "sink")  # a sink would start its file again
        return self.process(frame)

    def planning_cost(self, source_wh: tuple[int, int]) -> tuple[str, Any] | None:
        """For a stage with a thread pool of its own whose ``threads`` parameter the thread plan
        sets (an encoder): a cost-cache key and a no-argument callable returning the CPU ms of
        one frame of ``source_wh`` on one thread.  None for other stages."""
        return None

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r})"


class InferStage(Stage):
    """A stage whose work runs asynchronously on an inference engine.

    Subclasses implement four hooks, usually on a :class:`pipeline.engine.RequestPool`:

    * :meth:`start` begins inference on a frame and returns a ticket; it may block
      only while every request of the stage's pool is busy (it then waits for the
      oldest job);
    * :meth:`is_done` says whether a ticket has finished, without blocking;
    * :meth:`complete` waits for a ticket and writes the results into the frame
      (returning None drops the frame);
    * :meth:`wants` (optional) returns False for frames that pass without inference
      (``every: N``, gating); they keep their place in the order.

    Callers use :meth:`submit`, then :meth:`poll` (finished frames, never blocks),
    :meth:`pop_oldest` (waits for the oldest frame) or :meth:`drain` (waits for all).
    Frames leave in the order they were submitted; a frame whose work fails raises its
    error once, and the frames before and after it still leave.  ``depth`` is how many frames with
    inference the runtime keeps in flight per camera (it calls :meth:`pop_oldest` while
    :attr:`working` exceeds it, or :attr:`in_flight` exceeds :attr:`max_in_flight`);
    stages set it from their request pools.  Frames passing without inference wait
    behind them for their turn without taking a place, so that detection on every Nth
    frame overlaps the region models of the frames before it.
    :meth:`process` is the synchronous form (submit, then drain).  One instance
    serves one camera and is called from one thread.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._pending: deque[tuple[Frame, Any, bool]] = deque()  # frame, ticket, has_work(ticket)
        self._working = 0  # entries of _pending with inference
        self._failed: Exception | None = None  # a frame's error that poll or drain leaves to the next call
        self._reconfigure: dict[str, Any] | None = None
        #: inferences started (a detector: one per frame it runs on; a region model: one per object)
        self.inferences = 0
        #: the camera's priority on shared models (:class:`pipeline.arbiter.SourcePriority`),
        #: set by the runtime before ``open``; None: first come, first served
        self.priority: Any = None

    # thread plan -------------------------------------------------------------------------
    def planning_probe(self, source_wh: tuple[int, int]) -> Any:
        """How this stage feeds its model (:class:`pipeline.costs.ModelProbe`) for frames of
        ``source_wh`` (width, height), so the planner can time one inference; None if the
        stage has no model to plan for.  Must not open the stage."""
        return None

    def planning_host(self, frame: Frame, input_hw: tuple[int, int]) -> Any:
        """A no-argument callable doing this stage's host-side input preparation for
        ``frame`` and a model input of ``input_hw`` (height, width), timed by the planner;
        or None."""
        return None

    def reconfigure(self, params: dict[str, Any]) -> None:
        """Change parameters (e.g. the thread plan's ``config`` and ``requests``) from any
        thread; the stage applies them before its next frame, on its own thread: it closes
        (finishing the frames in flight, whose results stay in order) and opens again."""
        self._reconfigure = dict(params)

    def _apply_reconfigure(self) -> None:
        update, self._reconfigure = self._reconfigure, None
        if not update:
            return
        self.close()
        self.params = self.params.model_copy(update=update)
        self.ensure_open(reopen=True)  # marks it open: the next frame does not open it again

    # to implement ------------------------------------------------------------------
    def start(self, frame: Frame) -> Any:
        """Start inference for ``frame``; return a ticket for :meth:`is_done`/:meth:`complete`."""
        raise NotImplementedError

    def is_done(self, ticket: Any) -> bool:
        """True once the ticket's work has finished; never blocks."""
        raise NotImplementedError

    def complete(self, frame: Frame, ticket: Any) -> Frame | None:
        """Wait for the ticket and write the results into the frame."""
        raise NotImplementedError

    def wants(self, frame: Frame) -> bool:
        """False lets the frame pass without inference (interval, gating)."""
        return True

    def has_work(self, ticket: Any) -> bool:
        """Whether ``ticket`` (from :meth:`start`) has inference in flight; a region model's
        ticket on a frame whose objects all keep earlier results has none."""
        return ticket is not None

    # async API -------------------------------------------------------------------------
    def submit(self, frame: Frame) -> None:
        """Start work on ``frame`` (opens the stage on first use); collect it with poll/pop_oldest/drain."""
        _check_frame(self, frame)
        self.ensure_open(reopen=True)  # as a call after close does
        if self._reconfigure is not None:
            self._apply_reconfigure()
        ticket = self.start(frame) if self.wants(frame) else None
        works = self.has_work(ticket)
        self._pending.append((frame, ticket, works))
        self._working += works

    def poll(self) -> list[Frame]:
        """Frames whose work has finished, in submission order; never blocks.  When a frame's
        work fails, the frames before it are returned and the next poll, pop_oldest or drain
        raises its error; the frames after it stay in flight."""
        return self._take(wait=False)

    def pop_oldest(self) -> list[Frame]:
        """Wait for the oldest frame in flight and return it (or [] if dropped); raises its error."""
        if self._failed is not None:
            failed, self._failed = self._failed, None
            raise failed
        if not self._pending:
            return []
        frame, ticket, works = self._pending.popleft()
        self._working -= works
        done = self.complete(frame, ticket) if ticket is not None else frame
        return [] if done is None else [done]

    def drain(self) -> list[Frame]:
        """Wait for every frame in flight; return them in order (a failure: as :meth:`poll`)."""
        return self._take(wait=True)

    def _take(self, wait: bool) -> list[Frame]:
        out: list[Frame] = []
        while self._failed is not None or (self._pending and (wait or self.oldest_done())):
            try:
                out.extend(self.pop_oldest())
            except Exception as exc:  # noqa: BLE001 - raised again by the next call
                if not out:
                    raise
                self._failed = exc
                break
        return out

    @property
    def oldest(self) -> Frame | None:
        """The oldest frame in flight (the one :meth:`pop_oldest` takes next), or None."""
        return self._pending[0][0] if self._pending else None

    def oldest_done(self) -> bool:
        """Whether the oldest frame in flight has finished, so :meth:`pop_oldest` does not wait; never blocks."""
        if not self._pending:
            return False
        ticket = self._pending[0][1]
        return ticket is None or self.is_done(ticket)

    @property
    def in_flight(self) -> int:
        """Frames submitted and not yet returned."""
        return len(self._pending)

    @property
    def working(self) -> int:
        """Frames submitted and not yet returned that have inference (see :meth:`has_work`)."""
        return self._working

    def over_depth(self) -> bool:
        """Whether the runtime must wait for the oldest frame before it submits another."""
        return self._working > self.depth or len(self._pending) > self.max_in_flight

    #: frames with inference the runtime keeps in flight per camera (stages set it from
    #: their request pools)
    depth: int = 2
    #: frames in flight per camera with or without inference (each holds its pixels)
    max_in_flight: int = 12

    def process(self, frame: Frame) -> Frame | None:
        """``frame`` with its results (waits for them).  Not mixed with the async API: frames
        submitted before and not collected would be lost, so that is an error."""
        if self._pending:
            raise StageError(f"stage {self.name!r}: {len(self._pending)} frame(s) submitted with submit() are "
                             "still in flight; collect them with poll() or drain() before calling the stage")
        self.submit(frame)
        done = self.drain()
        return done[-1] if done else None


class SourceStage(Stage):
    """A stage that produces frames in two steps the runtime may run on two threads.

    ``units()`` yields compressed units as they arrive and ends with ``None``
    (flush); ``decode_unit(unit)`` turns one unit into frames with increasing
    ``seq``.  ``live`` sources drop their oldest units when the pipeline falls
    behind; others make the reader wait.
    """

    kind: ClassVar[str] = "source"
    live: bool = False
    total_frames: int | None = None

    @property
    def in_read(self) -> bool:
        """True while ``units()`` waits inside a read it cannot interrupt, if a ``close()``
        meanwhile is left to that read's thread (it closes what it reads when the read
        returns).  The runtime then stops waiting for that thread once reading is halted."""
        return False

    @property
    def can_probe(self) -> bool:
        """Whether the source can be opened and read ahead of a run to time its decoding
        (files, folders, scenes: yes; cameras and streams, which connect: no)."""
        return not self.live

    def units(self) -> Iterator[Any]:
        raise NotImplementedError

    def decode_unit(self, unit: Any) -> list[Frame]:
        raise NotImplementedError

    def is_marker(self, unit: Any) -> bool:
        """True for units that carry no media (end, switch of stream): never dropped."""
        return unit is None

    def starts_decoder(self, unit: Any) -> bool:
        """True for a unit after which :meth:`decode_unit` decodes with a new decoder (a
        reconnect, a file's next loop): threads of the old one end, the new one starts its own."""
        return False

    def frames(self) -> Iterator[Frame]:
        """Every frame, read and decoded in the calling thread (embedding without a runtime); from
        the start again after ``close()``."""
        self.ensure_open(reopen=True)
        for unit in self.units():
            yield from self.decode_unit(unit)


def _check_frame(stage: Stage, frame: Any) -> None:
    if not isinstance(frame, Frame):
        raise TypeError(f"stage {stage.name!r} takes a pipeline.frame.Frame, got {type(frame).__name__}; "
                        "make one from a BGR image with Frame.from_image(image, source_id, seq)")


def _first_field(params: type[BaseModel]) -> str:
    """The first parameter of a stage's ``Params`` as the YAML names it (for error messages)."""
    fields = list(params.model_fields.items())
    name, field = next(((n, f) for n, f in fields if f.is_required()), fields[0] if fields else ("param", None))
    return field.alias if field is not None and field.alias else name
